"""--device in ppl-eval and generate on stories260K (converted by hfconv):

- cpu is the default and prints nothing about devices;
- auto gives the CPU's exact output when no CUDA device answers, with one
  stderr line saying it fell back and why; with a device it uses it;
- cuda without a device (or in a build without CUDA) exits 1 with one line;
  with a device, the greedy story equals the CPU's and the perplexity agrees
  to 1e-3 (relative);
- an unknown device is a usage error (exit 2).

usage: cuda_tools.py PPL_EVAL GENERATE HFCONV
"""
import json
import os
import subprocess
import sys
import tempfile

import runner_stories as rs

PPL_EVAL, GENERATE, HFCONV = sys.argv[1:4]
TEXT = os.path.join(rs.FIXTURES, "text", "tinystories-valid.txt")
check = rs.check


def run(args):
    return subprocess.run(args, capture_output=True, text=True)


def has_device():
    """What the build and machine say: 'cuda' when --device cuda works."""
    p = run([GENERATE, "--device", "cuda", "-p", "x", "-n", "0", "/nonexistent.gguf"])
    return "--device cuda" not in p.stderr


def main():
    if not os.path.isfile(os.path.join(rs.MODEL_DIR, "model.safetensors")) or not os.path.isfile(TEXT):
        print(f"SKIP: no stories260K fixture or text under {rs.FIXTURES}")
        return 77
    device = has_device()
    print("CUDA device:", "yes" if device else "no")
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "stories260K.gguf")
        p = run([HFCONV, rs.MODEL_DIR, "-o", model, "--outtype", "f32", "-q"])
        check(p.returncode == 0, f"hfconv: {p.stderr}")
        if p.returncode:
            return 1
        gen = [GENERATE, model, "-p", "Once upon a time", "--temp", "0", "-n", "24"]
        ppl = [PPL_EVAL, model, "--text", TEXT, "--ctx", "64", "--chunks", "4", "--json"]
        for name, cmd in (("generate", gen), ("ppl-eval", ppl)):
            base = run(cmd)
            check(base.returncode == 0 and "--device" not in base.stderr, f"{name} default: {base.stderr}")
            cpu = run(cmd + ["--device", "cpu"])
            check(cpu.returncode == 0 and cpu.stdout == base.stdout and "--device" not in cpu.stderr,
                  f"{name} --device cpu: {cpu.stderr}")
            auto = run(cmd + ["--device", "auto"])
            cuda = run(cmd + ["--device", "cuda"])
            notes = [l for l in auto.stderr.splitlines() if "--device auto" in l]
            check(auto.returncode == 0 and len(notes) == 1, f"{name} --device auto: {auto.stderr}")
            if not device:
                check(auto.stdout == base.stdout, f"{name} --device auto output differs from the CPU's")
                check(notes and notes[0].startswith(f"{name}: --device auto: ") and
                      notes[0].endswith("; using the CPU"), f"{name} auto note: {notes}")
                check(cuda.returncode == 1 and cuda.stdout == "" and cuda.stderr.count("\n") == 1 and
                      cuda.stderr.startswith(f"{name}: --device cuda: "), f"{name} --device cuda: {cuda.stderr}")
            else:
                check(cuda.returncode == 0, f"{name} --device cuda: {cuda.stderr}")
                if name == "generate":
                    check(cuda.stdout == base.stdout, f"greedy story on cuda: {cuda.stdout!r} vs {base.stdout!r}")
                else:
                    got, want = json.loads(cuda.stdout)["ppl"], json.loads(base.stdout)["ppl"]
                    print(f"ppl cpu {want:.6f} cuda {got:.6f}")
                    check(abs(got - want) <= 1e-3 * want, f"ppl on cuda {got} vs cpu {want}")
            bad = run(cmd + ["--device", "gpu"])
            check(bad.returncode == 2 and bad.stderr.startswith(f"{name}: --device: expects cpu, cuda or auto"),
                  f"{name} --device gpu: {bad.returncode} {bad.stderr}")
    print(f"{rs.failures} failure(s)")
    return 1 if rs.failures else 0


if __name__ == "__main__":
    sys.exit(main())
