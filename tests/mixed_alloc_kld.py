"""Measured allocation against llama.cpp's Q4_K_M rules on the real
fixtures (stories260K, TinyStories-656K; their rows of 64/172 and 128/384
make K-quants fall back): each converted by hfconv (F32), measured on
tinystories-train.txt, allocated at exactly the bits per weight the Q4_K_M
preset gives it. Asserted: the written tensor data is within 1 % of the
budget (never above) and the mean KL divergence from the F32 model over
tinystories-valid.txt (40 chunks of 128 tokens, second halves scored, as
perplexity, scored by ppl-eval against the saved F32 log-probabilities)
is lower than Q4_K_M's.

usage: mixed_alloc_kld.py QUANTIZE HFCONV PPL_EVAL
"""
import json
import os
import sys
import tempfile

from gguf_common import check, finish
from mixed_common import FIXTURES, TRAIN, VALID, kl_scores, plan, run

QUANTIZE, HFCONV, PPL_EVAL = sys.argv[1:4]
MEASURE = ["--measure-text", TRAIN, "--measure-ctx", "128", "--measure-chunks", "16", "--measure-kl-chunks", "16"]


def one(name, tmp):
    base = os.path.join(tmp, name + ".gguf")
    p = run(HFCONV, os.path.join(FIXTURES, "models", name), "-o", base, "--outtype", "f32", "-q")
    check(p.returncode == 0, f"{name}: hfconv: {p.stderr}")
    q4 = plan(QUANTIZE, base, "Q4_K_M")
    if p.returncode != 0 or not q4:
        return
    q4_path, alloc_path = os.path.join(tmp, name + "-q4km.gguf"), os.path.join(tmp, name + "-alloc.gguf")
    check(run(QUANTIZE, base, q4_path, "Q4_K_M").returncode == 0, f"{name}: Q4_K_M")
    p = run(QUANTIZE, base, alloc_path, *MEASURE, "--target-bpw", repr(q4["totals"]["out_bpw"]), "--json")
    check(p.returncode == 0, f"{name}: allocation: {p.stderr}")
    if p.returncode != 0:
        return
    res = json.loads(p.stdout)
    budget, written = res["allocation"]["budget_bytes"], res["written_tensor_bytes"]
    check(budget * 0.99 <= written <= budget, f"{name}: {written} bytes not within 1 % below {budget}")
    scores = kl_scores(PPL_EVAL, VALID, "128", "40", base, [q4_path, alloc_path], tmp)
    if not scores:
        return
    q, a = scores
    print(f"{name}: {q4['totals']['out_bpw']:.4f} bpw, budget {budget:.0f} bytes, written {written:.0f} "
          f"({100 * (written - budget) / budget:+.3f} %); KLD over {q['tokens']} tokens: Q4_K_M {q['kld']:.5f} "
          f"(ppl {q['ppl']:.4f}), measured allocation {a['kld']:.5f} (ppl {a['ppl']:.4f})")
    check(a["kld"] < q["kld"], f"{name}: allocation KLD {a['kld']} not below Q4_K_M's {q['kld']}")


def main():
    if not os.path.exists(TRAIN) or not os.path.isdir(os.path.join(FIXTURES, "models")):
        print(f"SKIP: fixtures absent ({FIXTURES})")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("stories260K", "TinyStories-656K"):
            one(name, tmp)
    sys.exit(finish())


main()
