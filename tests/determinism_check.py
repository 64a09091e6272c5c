"""Determinism: the same command gives the same bytes with 1 and N threads.

For mkmodel, hfconv and quantize (presets Q4_K_M, Q8_0, Q6_K, Q4_0, NVFP4,
MXFP4, INT8, FP8_E4M3, FP8_E5M2, BF16) every output is produced three times:
OMP_NUM_THREADS=1 (with --threads 1 where the tool has it), OMP_NUM_THREADS=2
(--threads 2), and OMP_NUM_THREADS=3 (--threads 3: more threads than this
machine's cores, uneven splits), each under a different file name (an output
must not depend on its own name), and the files must be byte-identical.

usage: determinism_check.py   (env: HFQ_BUILD)
"""
import hashlib
import os
import subprocess
import sys
import tempfile

BUILD = os.environ["HFQ_BUILD"]
TOOLS = os.path.join(BUILD, "src", "tools")
MKMODEL, HFCONV, QUANTIZE = (os.path.join(TOOLS, t) for t in ("mkmodel", "hfconv", "quantize"))
THREADS = (1, 2, 3)
PRESETS = ("Q4_K_M", "Q8_0", "Q6_K", "Q4_0", "NVFP4", "MXFP4", "INT8", "FP8_E4M3", "FP8_E5M2", "BF16")

failures = 0
checks = 0


def digest(path):
    """sha256 of a file, or of a folder's files (names and contents)."""
    h = hashlib.sha256()
    files = sorted(os.listdir(path)) if os.path.isdir(path) else [""]
    for f in files:
        p = os.path.join(path, f) if f else path
        h.update(f.encode() + b"\0")
        with open(p, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()


def run_threads(label, make_argv, out_of):
    """Runs make_argv(n, out) for each thread count and compares the outputs."""
    global failures, checks
    digests = []
    for n in THREADS:
        out = out_of(n)
        env = dict(os.environ, OMP_NUM_THREADS=str(n))
        r = subprocess.run(make_argv(n, out), env=env, capture_output=True, text=True)
        if r.returncode != 0:
            failures += 1
            checks += 1
            print(f"FAIL {label} ({n} threads): exit {r.returncode}: {r.stderr.strip()}")
            return None
        digests.append(digest(out))
    checks += 1
    same = len(set(digests)) == 1
    failures += not same
    print(("ok   " if same else "FAIL ") + f"{label}: " +
          (digests[0][:16] if same else ", ".join(f"{n}t {d[:16]}" for n, d in zip(THREADS, digests))))
    return out_of(THREADS[0]) if same else None


def main():
    with tempfile.TemporaryDirectory() as tmp:
        def at(name):
            return os.path.join(tmp, name)

        # K-quant rows need multiples of 256; two shards exercise the index path
        shape = ["--hidden", "256", "--ffn", "512", "--layers", "2", "--heads", "4", "--kv-heads", "2",
                 "--vocab", "1024"]
        model = run_threads("mkmodel bf16 2 shards",
                            lambda n, out: [MKMODEL, out, *shape, "--dtype", "bf16", "--shards", "2"],
                            lambda n: at(f"model-{n}t"))
        run_threads("mkmodel f32 qwen2 tied outliers",
                    lambda n, out: [MKMODEL, out, "--arch", "qwen2", "--tied", "--outliers", "3", "--seed", "9"],
                    lambda n: at(f"qwen-{n}t"))
        if not model:
            return 1
        f16 = None
        for outtype in ("f16", "bf16", "f32", "auto"):
            got = run_threads(f"hfconv --outtype {outtype}",
                              lambda n, out: [HFCONV, model, "-o", out, "--outtype", outtype, "-q"],
                              lambda n: at(f"conv-{outtype}-{n}t.gguf"))
            if outtype == "f16":
                f16 = got
        if not f16:
            return 1
        for preset in PRESETS:
            run_threads(f"quantize {preset}",
                        lambda n, out: [QUANTIZE, f16, out, preset, "--threads", str(n)],
                        lambda n: at(f"q-{preset}-{n}t.gguf"))
        # default thread count (all), OMP_NUM_THREADS alone deciding
        run_threads("quantize Q4_K_M (threads from OMP_NUM_THREADS)",
                    lambda n, out: [QUANTIZE, f16, out, "Q4_K_M"],
                    lambda n: at(f"q-omp-{n}t.gguf"))
    print(f"determinism_check: {checks - failures}/{checks} checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
