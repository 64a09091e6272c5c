"""Shared by the mixed-precision tests (docs/mixed.md): running the tools,
the synthetic model they use (mkmodel, 4 layers, hidden 256, ffn 768, so
K-quants apply, converted by hfconv as F32), and the fixture paths."""
import json
import os
import subprocess

from gguf_common import check

SOURCE = os.environ.get("HFQ_SOURCE", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
RECIPES = os.path.join(SOURCE, "examples", "recipes")
FIXTURES = os.environ.get("HFQ_FIXTURES", "")
TRAIN = os.path.join(FIXTURES, "text", "tinystories-train.txt")
VALID = os.path.join(FIXTURES, "text", "tinystories-valid.txt")


def run(*args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True)


def synthetic(tmp, mkmodel, hfconv):
    d = os.path.join(tmp, "syn")
    p = run(mkmodel, d, "--hidden", "256", "--ffn", "768", "--layers", "4", "--heads", "4", "--kv-heads", "2")
    assert p.returncode == 0, p.stderr
    out = os.path.join(tmp, "syn.gguf")
    p = run(hfconv, d, "-o", out, "--outtype", "f32", "-q")
    assert p.returncode == 0, p.stderr
    return out


def kl_scores(ppl_eval, text, ctx, chunks, base, models, tmp):
    """ppl-eval of each model against base's saved log-probabilities over text
    (chunks of ctx tokens, second halves scored): a list of {"kld", "ppl",
    "tokens"}, or None (a failed check)."""
    logits = os.path.join(tmp, "base.logits")
    p = run(ppl_eval, base, "--text", text, "--ctx", ctx, "--chunks", chunks, "--save-logits", logits)
    check(p.returncode == 0, f"ppl-eval {base}: {p.stderr}")
    if p.returncode != 0:
        return None
    scores = []
    for m in models:
        p = run(ppl_eval, m, "--text", text, "--base-logits", logits, "--json")
        check(p.returncode == 0, f"ppl-eval {m}: {p.stderr}")
        if p.returncode != 0:
            return None
        j = json.loads(p.stdout)
        scores.append({"kld": j["kl"]["kld"], "ppl": j["ppl"], "tokens": j["tokens_scored"]})
    return scores


def plan(quantize, *args):
    """quantize --dry-run --json: the plan as a dict, or None (a failed check)."""
    p = run(quantize, *args, "--dry-run", "--json")
    check(p.returncode == 0, f"dry run {args}: {p.stderr}")
    return json.loads(p.stdout) if p.returncode == 0 else None
