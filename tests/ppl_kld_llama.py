"""ppl-eval's KL statistics against llama.cpp's llama-perplexity
(--kl-divergence-base / --kl-divergence) on stories260K (hfconv F32, our
quantize's Q8_0 and Q4_K_M), ctx 256, a subset of tinystories-valid.txt.
llama.cpp runs with an F32 KV cache and without flash attention (whose F16
steps would add their own differences), ppl-eval with --kv-type f32. Skips unless llama-perplexity is
built (scripts/build_reference.sh).

1. The formulas: both tools score the F32 model against the same stored base
   (llama.cpp's file of the Q4_K_M model's log-probabilities, which ppl-eval
   reads too). Their F32 logits agree to float rounding, so every statistic
   llama.cpp prints must agree to its printed digits (a few 1e-4 relative at
   most).
2. The usual direction, a quantized model against the F32 base (llama.cpp's
   file, and our own run of the base): PPL, mean KLD, RMS dp and top-token
   agreement agree closely; single tokens differ more, because an activation
   rounded to Q8_0 or Q8_K on the other side of a rounding boundary (float
   differences between the two implementations) changes that token's logits
   and, through the KV cache, later ones: tails and quantiles are compared
   loosely.

usage: ppl_kld_llama.py PPL_EVAL HFCONV QUANTIZE LLAMA_PERPLEXITY
"""
import os
import re
import sys
import tempfile

import ppl_kld_common as pk
from ppl_kld_common import check
from llama_tools import run_llama

PPL_EVAL, HFCONV, QUANTIZE, LLAMA_PPL = sys.argv[1:5]
CTX, CHUNKS = 256, 8 if pk.SANITIZED else 16
F32_KV = ("--kv-type", "f32")   # llama.cpp's -ctk f32 -ctv f32

# llama-perplexity's labels -> (our JSON key, its unit in the printout)
LABELS = {"Mean PPL(Q)": ("ppl", 1), "Mean PPL(base)": ("ppl_base", 1),
          "Cor(ln(PPL(Q)), ln(PPL(base)))": ("ln_ppl_cor", 100), "Mean ln(PPL(Q)/PPL(base))": ("ln_ppl_ratio", 1),
          "Mean PPL(Q)/PPL(base)": ("ppl_ratio", 1), "Mean PPL(Q)-PPL(base)": ("ppl_diff", 1),
          "Mean KLD": ("kld", 1), "Mean Δp": ("dp", 100), "RMS Δp": ("dp_rms", 100), "Same top p": ("same_top", 100)}
QUANTILES = {"Maximum": "max", "99.9%": "p99_9", "99.0%": "p99", "95.0%": "p95", "90.0%": "p90", "75.0%": "p75",
             "Median": "median", "25.0%": "p25", "10.0%": "p10", "5.0%": "p5", "1.0%": "p1", "0.1%": "p0_1",
             "Minimum": "min"}
LINE = re.compile(r"^(.+?)\s*:\s*(-?[0-9.]+)\s*(?:±\s*([0-9.]+))?\s*%?\s*$")


def parse_stats(text):
    """{key: (value, error or None, unit)} from the summary llama-perplexity prints."""
    out = {}
    for line in text[text.find("====== Perplexity statistics"):].splitlines():
        m = LINE.match(line.strip())
        if not m:
            continue
        label = " ".join(m.group(1).split())
        value, err = float(m.group(2)), m.group(3) and float(m.group(3))
        if label in LABELS:
            key, unit = LABELS[label]
        elif label.split(" ")[0] in QUANTILES and label.split(" ")[-1] in ("KLD", "Δp"):
            kind = "kld" if label.endswith("KLD") else "dp"
            key, unit = f"{kind}_{QUANTILES[label.split(' ')[0]]}", 1 if kind == "kld" else 100
        else:
            continue
        out[key] = (value, err, unit)
    return out


def llama(args, summary):
    """Runs llama-perplexity (one thread: its threads wait for each other by
    spinning, which collapses when another process holds a core)."""
    p = run_llama([LLAMA_PPL, "-c", CTX, "--chunks", CHUNKS, "-t", "1", "-ctk", "f32", "-ctv", "f32", "-fa", "off"] +
                  args, "Same top p:" if summary else "")
    out = p.stdout + p.stderr
    check(p.returncode == 0 and (not summary or "Same top p:" in out), f"llama-perplexity {args}: {out[-800:]}")
    return out


def compare(label, theirs, ours_kl, tol):
    """tol(key) -> (relative, absolute in printed units); returns the worst
    relative difference beyond the printed precision, and its key."""
    worst = (0.0, None)
    check(len(theirs) == len(LABELS) + 11 + 13, f"{label}: parsed {len(theirs)} llama.cpp statistics")
    for key, (value, err, unit) in theirs.items():
        ours = ours_kl.get(key, float("nan")) * unit
        rel, absolute = tol(key)
        diff = abs(ours - value)
        if not check(diff <= rel * abs(value) + absolute, f"{label} {key}: ours {ours:.7g}, llama.cpp {value:.7g}"):
            continue
        if err is not None:
            ours_err = ours_kl.get(key + "_err", float("nan")) * unit
            check(abs(ours_err - err) <= rel * err + absolute, f"{label} {key} error: ours {ours_err:.7g}, "
                                                               f"llama.cpp {err:.7g}")
        if diff > absolute:
            worst = max(worst, (diff / abs(value), key))
    return worst


def printed(key):
    """The printed precision of a statistic (llama.cpp's formats): the absolute tolerance."""
    if key == "ln_ppl_cor":
        return 0.006
    return 0.0006 if key.startswith("dp") or key == "same_top" else 1.5e-6


def main():
    if not os.access(LLAMA_PPL, os.X_OK):
        print(f"SKIP: no llama-perplexity at {LLAMA_PPL} (scripts/build_reference.sh builds it)")
        return 77
    pk.skip_without_fixtures()
    with tempfile.TemporaryDirectory() as tmp:
        text = pk.write_subset(os.path.join(tmp, "text.txt"), n_bytes=80000)
        ev = pk.PplEval(PPL_EVAL, text)
        models = pk.build_models(HFCONV, QUANTIZE, tmp, "stories260K", ("Q8_0", "Q4_K_M"))
        f = ["-f", text]

        # 1. the same base data and the F32 model on both sides
        q4_file = os.path.join(tmp, "q4.kld")
        llama(["-m", models["Q4_K_M"], "--kl-divergence-base", q4_file] + f, False)
        theirs = parse_stats(llama(["-m", models["f32"], "--kl-divergence-base", q4_file, "--kl-divergence"] + f, True))
        ours = ev.json(models["f32"], "--base-logits", q4_file, *F32_KV, ctx=None, chunks=None)
        worst = compare("F32 vs stored Q4_K_M", theirs, ours.get("kl", {}), lambda k: (2e-4, printed(k)))
        print(f"F32 against llama.cpp's stored Q4_K_M log-probs: {len(theirs)} statistics, largest relative "
              f"difference beyond the printed digits {worst[0]:.2g} ({worst[1]}); mean KLD ours "
              f"{ours.get('kl', {}).get('kld', 0):.6f}, llama.cpp {theirs.get('kld', (0,))[0]:.6f}")

        # 2. quantized models against the F32 base
        f32_file = os.path.join(tmp, "f32.kld")
        llama(["-m", models["f32"], "--kl-divergence-base", f32_file] + f, False)
        for fmt in ("Q8_0", "Q4_K_M"):
            theirs = parse_stats(llama(["-m", models[fmt], "--kl-divergence-base", f32_file, "--kl-divergence"] + f,
                                       True))
            stored = ev.json(models[fmt], "--base-logits", f32_file, *F32_KV, ctx=None, chunks=None).get("kl", {})
            live = ev.json(models[fmt], "--base", models["f32"], *F32_KV, "--base-kv-type", "f32", ctx=CTX,
                           chunks=CHUNKS).get("kl", {})
            for how, ours in (("llama.cpp's base file", stored), ("--base F32", live)):
                row = {k: (ours.get(k, float("nan")), theirs.get(k, (float("nan"),))[0] / theirs.get(k, (0, 0, 1))[2])
                       for k in ("ppl", "ppl_base", "kld", "dp_rms", "same_top", "kld_median", "kld_p99")}
                print(f"{fmt}, {how}: " + ", ".join(f"{k} {a:.6g}/{b:.6g}" for k, (a, b) in row.items()))
                loose = {"ppl": 2e-3, "ppl_base": 1e-4, "kld": 0.05, "dp_rms": 0.05, "kld_median": 0.1}
                for key, rel in loose.items():
                    a, b = row[key]
                    check(abs(a - b) <= rel * abs(b), f"{fmt} {how} {key}: ours {a:.6g}, llama.cpp {b:.6g}")
                a, b = row["same_top"]
                check(abs(a - b) <= 0.01, f"{fmt} {how} same top: ours {a:.5f}, llama.cpp {b:.5f}")
            check(abs(stored.get("ppl_base", 0) - theirs.get("ppl_base", (1,))[0]) <= 2e-6 * stored.get("ppl_base", 0),
                  f"{fmt}: PPL(base) from llama.cpp's file: ours {stored.get('ppl_base')}, "
                  f"llama.cpp {theirs.get('ppl_base')}")
    return pk.finish()


if __name__ == "__main__":
    sys.exit(main())
