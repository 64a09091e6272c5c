"""quantize --block-rotate (src/quantize/block_rotate.h, quant/hadamard.h): the
rows of the linear weights rotated per block, undone on the fly by our runner.

1. The rotation: every marked weight of a synthetic llama (mkmodel, n_embd 96,
   n_ff 160) rotated by quantize F32 --block-rotate N (N 16 and 32) equals the
   original times a dense Q built here (Sylvester's Walsh-Hadamard matrix
   blocks / sqrt(N) after splitmix64's signs), within float rounding; the
   marks name exactly the 2-D linear weights whose rows are whole blocks
   (never token_embd); no temporary is left.
2. The function is kept (the runner path): ppl-eval of the rotated F32 file
   against the original (--base, F32 KV caches): mean KL within 1e-7 (float
   rounding: the synthetic models' flat distributions show more of it), every
   token's probability within 1e-5, the same top token everywhere; the same numbers with --threads 1 and 2. With
   llama.cpp at hand, llama-perplexity on the rotated file computes another
   function (the file is ours only, as docs/calibration.md says).
3. NVFP4 and MXFP4 with --block-rotate: the same bytes for --threads 1 and 2
   (with GPTQ over a calibration text too), the preset's block in the marks
   (16, 32), and the W4A4 path (ppl-eval --act-quant dynamic) runs them.
4. The fixtures (../shared/fixtures; skipped when absent): stories260K and
   TinyStories-656K, rotated F32 against the original as in 2.

usage: block_rotate_check.py HFCONV QUANTIZE PPL_EVAL MKMODEL LLAMA_PERPLEXITY
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGUFReader

from fixture_f32 import f32_models, valid_text
from gguf_common import check, finish
from llama_tools import run_llama

HFCONV, QUANTIZE, PPL_EVAL, MKMODEL, LLAMA_PPL = sys.argv[1:6]
SOURCE = os.environ.get("HFQ_SOURCE", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
FIXTURES = os.path.join(SOURCE, "..", "shared", "fixtures")
SYNTH_TEXT = os.path.join(SOURCE, "docs", "architecture.md")
MAX_KL, MAX_DP = 1e-7, 1e-5   # the rotated F32 model equals the original up to float rounding
LINEAR = re.compile(r"^(output|blk\.\d+\.(attn_(q|k|v|qkv|output)|ffn_(gate|up|down|gate_inp)))\.weight$")
M64 = (1 << 64) - 1


def run(argv):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True)


def sign(seed, j):
    """D_jj of quant/hadamard.h: the top bit of splitmix64's j-th output."""
    z = (seed + (j + 1) * 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return -1.0 if (z ^ (z >> 31)) >> 63 else 1.0


def dense_q(n, block, seed):
    h = np.ones((1, 1))
    while h.shape[0] < block:
        h = np.block([[h, h], [h, -h]])
    q = np.kron(np.eye(n // block), h) / np.sqrt(block)
    return np.array([sign(seed, j) for j in range(n)])[:, None] * q


def tensors(path):
    r = GGUFReader(path)
    return r, {t.name: np.array(t.data, dtype=np.float64) for t in r.tensors}


def block_rotate(gguf, out, preset="F32", *extra):
    r = run([QUANTIZE, gguf, out, preset, "--block-rotate", *extra, "--quiet"])
    check(r.returncode == 0, f"quantize {preset} --block-rotate {gguf}: {r.stderr.strip()[-400:]}")
    left = glob.glob(out + ".brot.tmp.*")
    check(not left, f"{out}: temporaries left behind: {left}")
    return r.returncode == 0


def marks(reader):
    return {k[len("hfq.block_rotate."):]: f.contents() for k, f in reader.fields.items()
            if k.startswith("hfq.block_rotate.")}


def rotation_matches(label, gguf, out, block):
    """Every marked weight equals the original times the dense Q; the marks are the rotatable weights."""
    r0, orig = tensors(gguf)
    r1, rot = tensors(out)
    got = marks(r1)
    want = {n for n, t in orig.items() if t.ndim == 2 and LINEAR.match(n) and t.shape[1] % block == 0}
    check(set(got) == want, f"{label}: marked {sorted(got)}, expected {sorted(want)}")
    check(all(v == f"hadamard:{block}:1" for v in got.values()), f"{label}: mark values {set(got.values())}")
    worst = 0.0
    for name in want:
        w = orig[name]
        ref = w @ dense_q(w.shape[1], block, 1)
        worst = max(worst, float(np.max(np.abs(rot[name] - ref)) / max(np.max(np.abs(ref)), 1e-30)))
    for name in set(orig) - want:   # the rest byte for byte
        check(np.array_equal(orig[name], rot[name]), f"{label}: {name} changed without a mark")
    print(f"{label}: {len(want)} weights rotated in blocks of {block}; max |w Q - dense| / max |w Q| {worst:.2e}")
    check(worst <= 1e-5, f"{label}: the rotation differs from the dense Q by {worst:.3e}")


def kl_json(model, base, text, ctx, chunks, *extra):
    r = run([PPL_EVAL, model, "--base", base, "--text", text, "--ctx", ctx, "--chunks", chunks, "--kv-type", "f32",
             "--base-kv-type", "f32", "--json", "--quiet", *extra])
    check(r.returncode == 0, f"ppl-eval {model}: {r.stderr.strip()[-400:]}")
    return json.loads(r.stdout)["kl"] if r.returncode == 0 else None


def same_function(label, rotated, base, text, ctx, chunks):
    kl, kl1 = (kl_json(rotated, base, text, ctx, chunks, "--threads", t) for t in ("2", "1"))
    if kl is None or kl1 is None:
        return
    print(f"{label}: rotated F32 vs original: KL {kl['kld']:.2e} (max {kl['kld_max']:.1e}), max |dp| "
          f"{max(kl['dp_max'], -kl['dp_min']):.1e}, same top {100 * kl['same_top']:.2f} %")
    check(abs(kl["kld"]) <= MAX_KL and max(kl["dp_max"], -kl["dp_min"]) <= MAX_DP and kl["same_top"] == 1.0,
          f"{label}: KL {kl['kld']:.3e}, dp {kl['dp_min']:.2e}..{kl['dp_max']:.2e}, same top {kl['same_top']}")
    check(kl == kl1, f"{label}: ppl-eval --threads 1 and 2 differ")


def llama_differs(label, rotated, base, text):
    if not os.access(LLAMA_PPL, os.X_OK):
        return
    ppl = []
    for path in (rotated, base):
        p = run_llama([LLAMA_PPL, "-m", path, "-f", text, "-c", 128, "--chunks", 2, "-t", "2", "-ctk", "f32", "-ctv",
                       "f32", "-fa", "off"], "Final estimate")
        m = re.search(r"Final estimate: PPL = ([0-9.]+)", p.stdout + p.stderr)
        check(p.returncode == 0 and m, f"llama-perplexity {path}: {(p.stdout + p.stderr)[-300:]}")
        ppl.append(float(m.group(1)) if m else None)
    if None in ppl:
        return
    print(f"{label}: llama-perplexity rotated {ppl[0]:.4f}, original {ppl[1]:.4f} (llama.cpp does not rotate)")
    check(abs(ppl[0] - ppl[1]) > 1e-3 * ppl[1], f"{label}: llama.cpp computes the rotated file's function")


def quantized(label, gguf, tmp):
    text = os.path.join(tmp, "calib.txt")
    with open(SYNTH_TEXT) as f, open(text, "w") as g:
        g.write(f.read(20000))
    for preset, block in (("NVFP4", 16), ("MXFP4", 32)):
        outs = []
        for threads, extra in (("1", []), ("2", []), ("1", ["--calibration-file", text, "--calib-ctx", "64"]),
                               ("2", ["--calibration-file", text, "--calib-ctx", "64"])):
            out = os.path.join(tmp, f"{label}-{preset}-{threads}-{len(extra)}.gguf")
            if not block_rotate(gguf, out, preset, "--threads", threads, *extra):
                return
            outs.append(out)
        for a, b in ((0, 1), (2, 3)):
            check(open(outs[a], "rb").read() == open(outs[b], "rb").read(),
                  f"{label} {preset}: --threads 1 and 2 differ ({os.path.basename(outs[a])})")
        got = set(marks(GGUFReader(outs[2])).values())
        check(got == {f"hadamard:{block}:1"}, f"{label} {preset}: marks {got}")
        kl = kl_json(outs[2], gguf, SYNTH_TEXT, 128, 4, "--act-quant", "dynamic")
        if kl is not None:
            print(f"{label} {preset} --block-rotate (GPTQ), activations dynamic: KL {kl['kld']:.4f}")
            check(0.0 <= kl["kld"] < 1.0, f"{label} {preset}: KL {kl['kld']}")


def synthetic(tmp):
    model, gguf = os.path.join(tmp, "llama96"), os.path.join(tmp, "llama96.gguf")
    r = run([MKMODEL, model, "--layers", "2", "--hidden", "96", "--ffn", "160", "--heads", "4", "--kv-heads", "2"])
    r = r if r.returncode else run([HFCONV, model, "-o", gguf, "--outtype", "f32", "-q"])
    check(r.returncode == 0, f"llama96: {r.stderr.strip()[-300:]}")
    if r.returncode:
        return
    for block in (16, 32):
        out = os.path.join(tmp, f"llama96-brot{block}.gguf")
        if not block_rotate(gguf, out, "F32", str(block)):
            continue
        rotation_matches(f"llama96 N={block}", gguf, out, block)
        same_function(f"llama96 N={block}", out, gguf, SYNTH_TEXT, 128, 4)
        if block == 32:
            llama_differs("llama96", out, gguf, SYNTH_TEXT)
    quantized("llama96", gguf, tmp)


def fixtures(tmp):
    text = valid_text(FIXTURES, tmp)
    if text is None:
        return
    for name, gguf in f32_models(FIXTURES, tmp, HFCONV):
        rot = os.path.join(tmp, name + "-brot.gguf")
        if block_rotate(gguf, rot):
            rotation_matches(name, gguf, rot, 32)
            same_function(name, rot, gguf, text, 256, 8)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        synthetic(tmp)
        fixtures(tmp)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
