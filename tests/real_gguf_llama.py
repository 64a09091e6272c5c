"""ppl-eval on real llama.cpp GGUF files (scripts/fetch_models.sh puts them in
.cache/models) against llama.cpp's llama-perplexity: the same file, text
(the start of wiki.test.raw), context and chunks.

Float: llama-quantize's own dequantization of each file to F32, where no
activation is rounded to 8 bits: both tools' defaults (F16 KV cache;
llama.cpp's flash attention) and both with an F32 cache (llama.cpp without
flash attention) agree to 4 significant digits (limit 2e-4 relative; measured
7e-5..9e-5, docs/ppl-eval.md), and with the F32 cache every token's
log-probs do, to the 16 bits llama.cpp stores them in (mean KL divergence at
most 2e-6). The embedding scale off by 0.2 % fails that (mean KLD 8.5e-6,
its PPL only 1.8e-4 off); a change that moves no log-prob beyond the stored
step passes (the q/k norms' eps ten times larger: mean KLD unchanged).

Quantized (Gemma 3 270M Q4_K_M, mostly Q5_0 and Q8_0): F32 cache, llama.cpp
without flash attention, limit 3 %. The two cannot agree to many digits on a
few hundred tokens: an activation rounded to 8 bits on the other side of a
boundary changes its whole matmul's output, which moves the next roundings,
so two runs that differ only in the last bit of a sum draw independent
rounding errors (llama.cpp's flash attention on against off on one Q8_0
file differs by as much as we differ from either; docs/ppl-eval.md). Skips
when a file, a llama.cpp tool or the fixtures are absent.

usage: real_gguf_llama.py PPL_EVAL LLAMA_PERPLEXITY LLAMA_QUANTIZE MODELS_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile

from llama_tools import run_llama

PPL_EVAL, LLAMA_PPL, LLAMA_QUANTIZE, MODELS = sys.argv[1:5]
FIXTURES = os.environ.get("HFQ_FIXTURES", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "fixtures"))
WIKI = os.path.join(FIXTURES, "text", "wiki.test.raw")
FILES = ["gemma-3-270m-q4_k_m.gguf"]
CTX, CHUNKS = 256, 2
TOLERANCE_QUANTIZED, TOLERANCE_FLOAT = 0.03, 2e-4
# The float file per token: llama.cpp stores log-probs in 16 bits (a KLD of
# +-5e-5 per token from that alone; measured mean 6e-7, max 4.9e-5); the
# embedding scale off by 0.2 % gives mean 8.5e-6, max 3.5e-4.
KLD_MEAN, KLD_MAX, SAME_TOP = 2e-6, 1e-4, 0.995

present = [os.path.join(MODELS, f) for f in FILES if os.path.isfile(os.path.join(MODELS, f))]
for need, what in ((present, "no model in .cache/models (scripts/fetch_models.sh)"),
                   (os.path.isfile(LLAMA_PPL), f"no {LLAMA_PPL} (scripts/build_reference.sh)"),
                   (os.path.isfile(LLAMA_QUANTIZE), f"no {LLAMA_QUANTIZE} (scripts/build_reference.sh)"),
                   (os.path.isfile(WIKI), f"no {WIKI} (the fixtures)")):
    if not need:
        print(f"SKIP: {what}")
        sys.exit(77)


def compare(model, text, ours_args, llama_args, tolerance, what, kld_file=None):
    """1 when ppl-eval's PPL of model is not within tolerance of llama-perplexity's.
    With kld_file, llama-perplexity saves its log-probs there and ppl-eval reads
    them back: the per-token KL divergence must be at the storage's noise floor."""
    llama_kld = ["--kl-divergence-base", kld_file] if kld_file else []
    llama = run_llama([LLAMA_PPL, "-m", model, "-f", text, "-c", CTX, "-b", CTX, "--chunks", CHUNKS, "-t", 2]
                      + llama_args + llama_kld, "Final estimate")
    ml = re.search(r"Final estimate: PPL = ([0-9.]+)", llama.stdout + llama.stderr)
    ours_kld = ["--base-logits", kld_file, "--json"] if kld_file else []
    ours = subprocess.run([PPL_EVAL, model, "--text", text, "--ctx", str(CTX), "--chunks", str(CHUNKS),
                           "--threads", "2", "--quiet"] + ours_args + ours_kld, capture_output=True, text=True)
    name = f"{os.path.basename(model)} ({what})"
    if not ml:
        print(f"FAIL: {name}: llama-perplexity printed no estimate (exit {llama.returncode})")
        return 1
    if kld_file:
        kl = json.loads(ours.stdout)["kl"] if ours.returncode == 0 else None
        p = kl["ppl"] if kl else None
    else:
        m = re.search(r"^PPL = ([0-9.]+) ", ours.stdout, re.M)
        p = float(m.group(1)) if m else None
    if ours.returncode != 0 or p is None:
        print(f"FAIL: {name}: ppl-eval exit {ours.returncode}: {ours.stderr.strip()[-300:]}")
        return 1
    q = float(ml.group(1))
    ok = abs(p / q - 1) <= tolerance
    print(f"{'ok' if ok else 'FAIL'}: {name}: ctx {CTX} x {CHUNKS}: PPL ppl-eval {p:.4f} llama-perplexity {q} "
          f"({p / q - 1:+.1e}, limit {tolerance:.0e})")
    if kld_file:
        kld_ok = kl["kld"] <= KLD_MEAN and kl["kld_max"] <= KLD_MAX and kl["same_top"] >= SAME_TOP
        print(f"{'ok' if kld_ok else 'FAIL'}: {name}: per token against llama-perplexity's log-probs: "
              f"mean KLD {kl['kld']:.1e} (limit {KLD_MEAN:.0e}), max {kl['kld_max']:.1e} (limit {KLD_MAX:.0e}), "
              f"same top token {kl['same_top']:.4f} (limit {SAME_TOP})")
        ok = ok and kld_ok
    return 0 if ok else 1


F32_KV = (["--kv-type", "f32"], ["-fa", "off", "-ctk", "f32", "-ctv", "f32"])
failures = 0
with tempfile.TemporaryDirectory() as tmp:
    text = os.path.join(tmp, "wiki.txt")
    with open(WIKI, "rb") as f:
        head = f.read(60000)
    with open(text, "wb") as f:
        f.write(head[: head.rfind(b"\n") + 1])
    for model in present:
        failures += compare(model, text, *F32_KV, TOLERANCE_QUANTIZED, "as published, F32 KV")
        f32 = os.path.join(tmp, "f32.gguf")
        dq = subprocess.run([LLAMA_QUANTIZE, "--allow-requantize", model, f32, "F32"], capture_output=True, text=True)
        if dq.returncode != 0:
            print(f"FAIL: llama-quantize could not dequantize {model}: {dq.stderr.strip()[-300:]}")
            failures += 1
            continue
        failures += compare(f32, text, [], [], TOLERANCE_FLOAT, "dequantized to F32, both defaults")
        failures += compare(f32, text, *F32_KV, TOLERANCE_FLOAT, "dequantized to F32, F32 KV",
                            os.path.join(tmp, "f32.kld"))
        os.remove(f32)
sys.exit(1 if failures else 0)
