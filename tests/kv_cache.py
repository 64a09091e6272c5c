"""ppl-eval --kv-type against llama.cpp's llama-perplexity --cache-type-k/-v
with flash attention on (llama.cpp needs it for a quantized V), on synthetic
checkpoints (mkmodel, F16 GGUF by hfconv) whose head size the block formats
take; the fixtures' heads (8 and 16 values) are too short for them, as
llama.cpp says too. Then the tool's side: the KV types in the text and JSON
output, --base with the same weights and another KV type (the KV format's cost
alone), and the refusals. Skips without llama-perplexity (the comparisons) or
the fixture text.

1. head size 32: llama.cpp stores K and V rows as they are; both perplexities
   agree to 1e-4 relative (4 significant digits) for F16, Q8_0 and Q4_0.
2. head size 64: llama.cpp rotates K, V and Q by a Hadamard matrix before a
   quantized cache (llama-kv-cache.cpp attn_rot_k/v; we do not): with its
   LLAMA_ATTN_ROT_DISABLE=1 the perplexities agree as in 1.

usage: kv_cache.py PPL_EVAL HFCONV MKMODEL LLAMA_PERPLEXITY
"""
import json
import os
import re
import sys
import tempfile

from ppl_kld_common import FIXTURES, TEXT, check, finish, run

from llama_tools import run_llama

PPL_EVAL, HFCONV, MKMODEL, LLAMA_PPL = sys.argv[1:5]
CTX, CHUNKS = 256, 8


def synthetic(tmp, name, hidden, ffn):
    """A 2-layer synthetic checkpoint, 4 heads of hidden / 4, 2 kv heads, as an F16 GGUF (hfconv's and
    llama.cpp's default: both round the matrices' inputs to F16 alike, so K and V come out the same)."""
    d, gguf = os.path.join(tmp, name), os.path.join(tmp, name + ".gguf")
    p = run([MKMODEL, d, "--hidden", hidden, "--ffn", ffn, "--layers", 2, "--heads", 4, "--kv-heads", 2,
             "--vocab", 512, "--ctx", 512])
    check(p.returncode == 0, f"mkmodel: {p.stderr}")
    p = run([HFCONV, d, "-o", gguf])
    check(p.returncode == 0, f"hfconv: {p.stderr}")
    return gguf


def ours(model, *args):
    p = run([PPL_EVAL, model, "--text", TEXT, "--ctx", CTX, "--chunks", CHUNKS, "--json", "--quiet"] + list(args))
    check(p.returncode == 0, f"ppl-eval {args}: {p.stderr}")
    return json.loads(p.stdout) if p.returncode == 0 else {}


def llama(model, k, v, env=None):
    argv = [LLAMA_PPL, "-m", model, "-f", TEXT, "-c", CTX, "--chunks", CHUNKS, "-t", 2, "-fa", "on", "-ctk", k,
            "-ctv", v]
    old = dict(os.environ)
    os.environ.update(env or {})
    try:
        p = run_llama(argv, "Final estimate")
    finally:
        os.environ.clear()
        os.environ.update(old)
    m = re.search(r"Final estimate: PPL = ([0-9.]+)", p.stdout + p.stderr)
    check(p.returncode == 0 and m, f"llama-perplexity -ctk {k} -ctv {v}: {(p.stdout + p.stderr)[-500:]}")
    return float(m.group(1)) if m else None


def compare_llama(model, label, env=None):
    for kv in ("f16", "q8_0", "q4_0"):
        theirs, mine = llama(model, kv, kv, env), ours(model, "--kv-type", kv)
        got = mine.get("ppl")
        print(f"{label} K,V {kv}: llama.cpp {theirs}, ppl-eval {got}")
        if theirs is None or got is None:
            continue
        check(abs(got - theirs) <= 1e-4 * theirs, f"{label} {kv}: ppl {got} vs llama.cpp {theirs}")
        check(mine.get("kv_type") == {"k": kv, "v": kv}, f"{label} {kv}: JSON kv_type {mine.get('kv_type')}")


def check_tool(model, fixture_gguf):
    # the default is F16, reported in text and JSON
    j = ours(model)
    check(j.get("kv_type") == {"k": "f16", "v": "f16"}, f"default kv_type {j.get('kv_type')}")
    p = run([PPL_EVAL, model, "--text", TEXT, "--ctx", CTX, "--chunks", 2, "--quiet", "--kv-type", "q8_0,q4_0"])
    check(p.returncode == 0 and "KV cache K q8_0 V q4_0)" in p.stdout, f"text output: {p.stdout!r} {p.stderr!r}")
    # the same weights as the base: only the KV format differs
    same = ours(model, "--base", model)
    check(same.get("kl", {}).get("kld") == 0.0 and same.get("base_kv_type") == {"k": "f16", "v": "f16"},
          f"--base itself: kld {same.get('kl', {}).get('kld')}")
    q4 = ours(model, "--base", model, "--kv-type", "q4_0")
    q8 = ours(model, "--base", model, "--kv-type", "q8_0")
    k4, k8 = q4.get("kl", {}).get("kld", 0), q8.get("kl", {}).get("kld", 0)
    print(f"KLD against F16 KV, same weights: q8_0 {k8:.3g}, q4_0 {k4:.3g}")
    check(0 < k8 < k4, f"KLD q8_0 {k8} should be positive and below q4_0's {k4}")
    b = ours(model, "--base", model, "--kv-type", "f32", "--base-kv-type", "f32")
    check(b.get("kl", {}).get("kld") == 0.0 and b.get("base_kv_type") == {"k": "f32", "v": "f32"},
          f"--base-kv-type f32: {b.get('base_kv_type')}")
    # refusals: usage (exit 2) and a head size the format does not take (exit 1, one line)
    for args, code, text in ((["--kv-type", "q4_1"], 2, "--kv-type: expects K[,V] of f32"),
                             (["--kv-type", "q8_0,"], 2, "--kv-type: expects"),
                             (["--base-kv-type", "f32"], 2, "--base-kv-type needs --base")):
        p = run([PPL_EVAL, model, "--text", TEXT] + args)
        check(p.returncode == code and text in p.stderr, f"{args}: exit {p.returncode}, {p.stderr!r}")
    if fixture_gguf:
        p = run([PPL_EVAL, fixture_gguf, "--text", TEXT, "--ctx", 64, "--chunks", 1, "--kv-type", "f16,q8_0"])
        check(p.returncode == 1 and p.stderr.count("\n") == 1 and
              "V cache type q8_0 needs a head size that is a multiple of 32, not 8" in p.stderr,
              f"q8_0 on head size 8: exit {p.returncode}, {p.stderr!r}")


def main():
    if not os.path.isfile(TEXT):
        print(f"SKIP: no fixture text {TEXT}")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        hd32 = synthetic(tmp, "hd32", 128, 344)
        fixture = os.path.join(FIXTURES, "models", "stories260K")
        fixture_gguf = None
        if os.path.isfile(os.path.join(fixture, "config.json")):
            fixture_gguf = os.path.join(tmp, "stories260K.gguf")
            check(run([HFCONV, fixture, "-o", fixture_gguf]).returncode == 0, "hfconv stories260K")
        check_tool(hd32, fixture_gguf)
        if not os.access(LLAMA_PPL, os.X_OK):
            print(f"SKIP (the comparisons): no llama-perplexity at {LLAMA_PPL} (scripts/build_reference.sh builds it)")
        else:
            compare_llama(hd32, "head size 32")
            compare_llama(synthetic(tmp, "hd64", 256, 688), "head size 64, LLAMA_ATTN_ROT_DISABLE=1",
                          {"LLAMA_ATTN_ROT_DISABLE": "1"})
    return finish()


if __name__ == "__main__":
    sys.exit(main())
