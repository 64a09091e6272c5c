"""Files we write that use only ggml's types must load in llama.cpp.

Converts the fixture models with hfconv (and quantizes them with our quantize
to every llama.cpp preset whose formats we write), then runs llama.cpp's own
llama-perplexity (built by scripts/build_reference.sh) on a few chunks of
tinystories-valid.txt: the file must load, and the perplexity must be that of
a working model (MXFP4 and NVFP4, plain and --pure, too). The fixtures' rows (64, 128, 172, 384) are too short for the
256-element formats, which fall back there, so a synthetic checkpoint with
rows of 256 and 512 (mkmodel; untrained, its perplexity is near its
vocabulary size) carries the K-quants and IQ4_XS themselves, and the grid
i-quants, ternary and 1/2-bit formats (IQ3_XXS, IQ2_S, IQ1_S, IQ1_M, TQ1_0,
TQ2_0, Q1_0, Q2_0 presets; the very low-bit ones with importance computed from the text), and
a synthetic qwen2 model in NVFP4 (its FFN written without global scales, which llama.cpp's
qwen2 graph would drop). For the presets of the low-bit and FP4 formats (Q4_1, Q2_K, Q3_K_*,
IQ4_*, MXFP4, NVFP4, and those) ppl-eval must also score each file as
llama-perplexity does. Skips when the reference build or the
fixtures are absent.
"""
import json
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
PRESETS = (("F16",), ("Q8_0",), ("Q4_K_M",))
# checked against ppl-eval too: the low-bit formats and the FP4 ones (NVFP4's
# .scale tensors only where llama.cpp loads them, so --pure loads as well)
COMPARED = (("Q4_1",), ("Q2_K",), ("Q3_K_S",), ("Q3_K_M",), ("Q3_K_L",), ("IQ4_NL",), ("IQ4_XS",), ("MXFP4",),
            ("NVFP4",), ("NVFP4", "--pure"))
# the grid i-quants and ternary formats, on syn256 only (the fixtures' rows
# fall back to IQ4_NL / Q4_0): presets that between them hold every one of
# iq3_xxs iq3_s iq2_xxs iq2_xs iq2_s iq1_s iq1_m tq1_0 tq2_0. The very
# low-bit ones need importance data (llama-quantize refuses without):
# CALIB stands for statistics computed from the text by quantize itself.
CALIB = "--calibration-file"
# (IQ3_XXS holds iq3_xxs, iq2_s for attn_q/k and iq3_s for attn_output and the
# embedding; IQ2_S iq2_xs; IQ1_S and IQ1_M their own and iq2_xxs)
COMPARED_SYN = (("IQ3_XXS", CALIB), ("IQ2_S", CALIB), ("IQ1_S", CALIB), ("IQ1_M", CALIB), ("TQ1_0",), ("TQ2_0",),
                ("Q1_0",), ("Q2_0",))
# Relative PPL tolerance against llama-perplexity, both with an F32 KV cache
# (and llama.cpp without flash attention). Both tools quantize the
# activations (Q8_0, Q8_1, Q8_K; with the same bits since the runner took
# llama.cpp's x86 quantizers) but sum in their own orders: a value that
# lands on the other side of a rounding boundary moves one token's logits
# and, through the cache, later ones. That noise floor, measured on files
# holding only formats older than this check: 2.2e-3 for TinyStories-656K's
# Q3_K_S (all Q4_0 and Q8_0 after the fallbacks), 2.5e-3 for its Q3_K_M
# (Q4_0/Q5_0/Q5_1/Q8_0); ppl_kld_llama.py allows 2e-3 for Q4_K_M. The files of
# the new formats (syn256, stories260K) came within 1e-3. The limit is 2x the
# floor.
PPL_REL_TOL = 5e-3
F32_KV = ["-ctk", "f32", "-ctv", "f32", "-fa", "off"]


def our_ppl(model, text, ctx, chunks):
    r = subprocess.run([os.path.join(TOOLS, "ppl-eval"), model, "--text", text, "--ctx", str(ctx), "--chunks",
                        str(chunks), "--threads", "2", "--kv-type", "f32", "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"ppl-eval failed on {model} (exit {r.returncode}): {r.stderr[-600:]}")
    return float(json.loads(r.stdout)["ppl"])


def llama_ppl(model, text, ctx, chunks):
    r = run_llama([PERPLEXITY, "-m", model, "-f", text, "-c", ctx, "--chunks", chunks, "-t", "2"] + F32_KV,
                  "Final estimate")
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
        syn = os.path.join(tmp, "syn256")
        subprocess.run([os.path.join(TOOLS, "mkmodel"), syn, "--hidden", "256", "--ffn", "512", "--layers", "2",
                        "--heads", "4", "--kv-heads", "2", "--vocab", "512"], check=True, capture_output=True)
        # A working model scores far below its vocabulary size (512, 2048);
        # broken weights (a wrong q/k order, say) land in the hundreds. The
        # limits sit about 2x above what llama.cpp measures (3.6 and 27 for
        # F32; at most 4.2 and 35 for the low-bit presets, whose rows here
        # fall back to Q4_0/Q5_0/IQ4_NL/Q8_0). The untrained synthetic model
        # has no such limit: it is there for the 256-element formats.
        # qwen2: an architecture whose llama.cpp graph drops the FFN's NVFP4 scales
        # (qwen2.cpp), so its FFN is written without them (quant/plan.h)
        syn_qwen2 = os.path.join(tmp, "syn-qwen2")
        subprocess.run([os.path.join(TOOLS, "mkmodel"), syn_qwen2, "--arch", "qwen2", "--hidden", "256", "--ffn",
                        "512", "--layers", "2", "--heads", "4", "--kv-heads", "2", "--vocab", "512"], check=True,
                       capture_output=True)
        for model, src, limit in (("stories260K", os.path.join(FIX, "models", "stories260K"), 8.0),
                                  ("TinyStories-656K", os.path.join(FIX, "models", "TinyStories-656K"), 50.0),
                                  ("syn256", syn, None), ("syn-qwen2", syn_qwen2, None)):
            f32 = os.path.join(tmp, model + "-f32.gguf")
            subprocess.run([os.path.join(TOOLS, "hfconv"), src, "-o", f32, "--outtype", "f32", "-q"], check=True)
            variants = {"f32": f32}
            runs = ((("NVFP4",), ("NVFP4", "--pure")) if model == "syn-qwen2" else
                    PRESETS + COMPARED + (COMPARED_SYN if model == "syn256" else ()))
            for args in runs:
                name = " ".join(a for a in args if a != CALIB) + (" (importance)" if CALIB in args else "")
                out = os.path.join(tmp, f"{model}-{'_'.join(a.strip('-') for a in args)}.gguf")
                # importance from 8 chunks: enough for the presets that need it, 15x faster than the whole text
                argv = [a for arg in args
                        for a in ([CALIB, text, "--calib-ctx", "256", "--calib-chunks", "8"] if arg == CALIB else [arg])]
                subprocess.run([os.path.join(TOOLS, "quantize"), f32, out, *argv], check=True, capture_output=True)
                variants[name] = out
            compared = set(variants) - {" ".join(args) for args in PRESETS} - {"f32"}
            for name, path in variants.items():
                try:
                    ppl = llama_ppl(path, text, 256, 8)
                    ours = our_ppl(path, text, 256, 8) if name in compared else None
                except AssertionError as e:
                    print("FAIL:", e)
                    failures += 1
                    continue
                ok = limit is None or 1.0 < ppl < limit
                line = f"{model} {name}: llama.cpp loads it, PPL {ppl:.4f} over 8 chunks of 256"
                if ours is not None:
                    agree = abs(ours - ppl) <= PPL_REL_TOL * ppl
                    line += f", ppl-eval {ours:.4f} (rel {abs(ours - ppl) / ppl:.1e}{'' if agree else ' DIFFERS'})"
                    ok = ok and agree
                print(f"{line} {'ok' if ok else 'FAIL'}")
                failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
