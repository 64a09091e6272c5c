"""Files we write that use only ggml's types must load in llama.cpp.

Converts the fixture models with hfconv (and quantizes them with our quantize),
then runs llama.cpp's own llama-perplexity (built by scripts/build_reference.sh)
on a few chunks of tinystories-valid.txt: the file must load, and the
perplexity must be that of a working model. Skips when the reference build or
the fixtures are absent.
"""
import os
import re
import subprocess
import sys
import tempfile

from llama_tools import run_llama

BUILD = os.environ["HFQ_BUILD"]
SRC = os.environ["HFQ_SOURCE"]
FIX = os.environ.get("HFQ_FIXTURES", "")
TOOLS = os.path.join(BUILD, "src/tools")
PERPLEXITY = os.path.join(SRC, ".cache/llama-build/bin/llama-perplexity")
TEXT = os.path.join(FIX, "text/tinystories-valid.txt")


def llama_ppl(model, text, ctx, chunks):
    r = run_llama([PERPLEXITY, "-m", model, "-f", text, "-c", ctx, "--chunks", chunks, "-t", "2"], "Final estimate")
    m = re.search(r"Final estimate: PPL = ([0-9.]+)", r.stdout + r.stderr)
    if r.returncode != 0 or not m:
        tail = (r.stdout + r.stderr)[-600:]
        raise AssertionError(f"llama-perplexity failed on {model} (exit {r.returncode}): {tail}")
    return float(m.group(1))


def main():
    if not os.path.exists(PERPLEXITY):
        print(f"SKIP: {PERPLEXITY} not built (scripts/build_reference.sh)")
        return 77
    if not os.path.exists(TEXT):
        print(f"SKIP: fixtures not found at {FIX}")
        return 77
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        # TinyStories-656K's vocabulary has no byte tokens, and llama.cpp's
        # SentencePiece tokenizer throws on a character it cannot map (the
        # validation text has a few mojibake characters): feed ASCII only.
        text = os.path.join(tmp, "valid-ascii.txt")
        with open(TEXT, encoding="utf-8") as f, open(text, "w", encoding="ascii") as g:
            g.write("".join(c for c in f.read() if c.isascii()))
        # A working model scores far below its vocabulary size (512, 2048);
        # broken weights (a wrong q/k order, say) land in the hundreds. The
        # limits sit about 2x above what llama.cpp measures (3.6 and 27).
        for model, limit in (("stories260K", 8.0), ("TinyStories-656K", 50.0)):
            src = os.path.join(FIX, "models", model)
            f32 = os.path.join(tmp, model + "-f32.gguf")
            subprocess.run([os.path.join(TOOLS, "hfconv"), src, "-o", f32, "--outtype", "f32", "-q"], check=True)
            variants = {"f32": f32}
            for preset in ("F16", "Q8_0", "Q4_K_M"):
                out = os.path.join(tmp, f"{model}-{preset}.gguf")
                subprocess.run([os.path.join(TOOLS, "quantize"), f32, out, preset], check=True,
                               capture_output=True)
                variants[preset] = out
            for name, path in variants.items():
                try:
                    ppl = llama_ppl(path, text, 256, 8)
                except AssertionError as e:
                    print("FAIL:", e)
                    failures += 1
                    continue
                ok = 1.0 < ppl < limit
                print(f"{model} {name}: llama.cpp loads it, PPL {ppl:.4f} over 8 chunks of 256 {'ok' if ok else 'TOO HIGH'}")
                failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
