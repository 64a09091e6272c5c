"""ppl-eval on real llama.cpp GGUF files (scripts/fetch_models.sh puts them in
.cache/models) against llama.cpp's llama-perplexity: the same file, text
(the start of wiki.test.raw), context and chunks, both with an F32 KV cache
and llama.cpp without flash attention. Gemma 3 270M Q4_K_M is mostly Q5_0
and Q8_0 (rows of 640), the formats its SIMD tiles take. The perplexities
cannot agree to many digits: this model amplifies one activation rounded to
Q8_0 on the other side of a boundary (both sides now quantize activations
with the same bits, but sum in other orders; changing only that rounding
moved our PPL by 0.3 %, docs/ppl-eval.md), so the check is 3 %: it catches
a wrong rope base, window, norm or kernel (tens of percent and more), not
rounding. Skips when a file, llama-perplexity or the fixtures are absent.

usage: real_gguf_llama.py PPL_EVAL LLAMA_PERPLEXITY MODELS_DIR
"""
import os
import re
import subprocess
import sys
import tempfile

from llama_tools import run_llama

PPL_EVAL, LLAMA_PPL, MODELS = sys.argv[1:4]
FIXTURES = os.environ.get("HFQ_FIXTURES", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "fixtures"))
WIKI = os.path.join(FIXTURES, "text", "wiki.test.raw")
FILES = ["gemma-3-270m-q4_k_m.gguf"]
CTX, CHUNKS, TOLERANCE = 256, 2, 0.03

present = [os.path.join(MODELS, f) for f in FILES if os.path.isfile(os.path.join(MODELS, f))]
for need, what in ((present, "no model in .cache/models (scripts/fetch_models.sh)"),
                   (os.path.isfile(LLAMA_PPL), f"no {LLAMA_PPL} (scripts/build_reference.sh)"),
                   (os.path.isfile(WIKI), f"no {WIKI} (the fixtures)")):
    if not need:
        print(f"SKIP: {what}")
        sys.exit(77)

failures = 0
with tempfile.TemporaryDirectory() as tmp:
    text = os.path.join(tmp, "wiki.txt")
    with open(WIKI, "rb") as f:
        head = f.read(60000)
    with open(text, "wb") as f:
        f.write(head[: head.rfind(b"\n") + 1])
    for model in present:
        ours = subprocess.run([PPL_EVAL, model, "--text", text, "--ctx", str(CTX), "--chunks", str(CHUNKS),
                               "--kv-type", "f32", "--threads", "2", "--quiet"], capture_output=True, text=True)
        m = re.search(r"^PPL = ([0-9.]+) ", ours.stdout, re.M)
        llama = run_llama([LLAMA_PPL, "-m", model, "-f", text, "-c", CTX, "-b", CTX, "--chunks", CHUNKS, "-t", 2,
                           "-fa", "off", "-ctk", "f32", "-ctv", "f32"], "Final estimate")
        ml = re.search(r"Final estimate: PPL = ([0-9.]+)", llama.stdout + llama.stderr)
        if ours.returncode != 0 or not m:
            print(f"FAIL: {os.path.basename(model)}: ppl-eval exit {ours.returncode}: {ours.stderr.strip()[-300:]}")
            failures += 1
            continue
        if not ml:
            print(f"FAIL: {os.path.basename(model)}: llama-perplexity printed no estimate (exit {llama.returncode})")
            failures += 1
            continue
        p, q = float(m.group(1)), float(ml.group(1))
        ok = abs(p / q - 1) <= TOLERANCE
        print(f"{'ok' if ok else 'FAIL'}: {os.path.basename(model)}: ctx {CTX} x {CHUNKS}: PPL ppl-eval {p} "
              f"llama-perplexity {q} ({100 * (p / q - 1):+.2f} %, limit {100 * TOLERANCE:.0f} %)")
        failures += not ok
sys.exit(1 if failures else 0)
