"""quantize --rotate (src/quantize/rotate.h) keeps the model's function: the
rotated F32 model against the original, in our runner and in llama.cpp's.

1. Synthetic models of each family: mkmodel's llama (n_embd 96: three
   Hadamard blocks of 32; and tied, n_embd 64) and qwen2 (q/k/v biases);
   with torch and transformers also qwen3 (q/k norms, tied), phi3 as Phi-4 has it (fused
   qkv and gate_up), gemma (tied, sqrt(d) embedding scale, GeGLU) and
   qwen3moe (router and stacked experts) built by transformers
   (tests/hf_checkpoint.py). ppl-eval of the rotated file against the
   original (--base, F32 KV cache on both sides): mean KL <= 3e-8 (float32 rounding) and the
   same top token everywhere. llama-perplexity on both files: the same PPL
   within 1e-4 relative (llama.cpp's gemma loads no output.weight, so the
   untied rotated gemma is ours only: llama.cpp must refuse it, as the docs say).
2. The fixtures (../shared/fixtures; skipped when absent): the same KL check,
   llama.cpp's own KL divergence of the rotated F32 model against the
   original's saved logits (--kl-divergence-base), and its PPL of the rotated
   Q8_0 file equal to ppl-eval's (1e-3: the ggml-type file computes the same
   function in llama.cpp).
3. The run's traces: hfq.quantize.rotate in the output, no temporary left,
   the same bytes for --threads 1 and 2.

usage: rotate_check.py HFCONV QUANTIZE PPL_EVAL MKMODEL LLAMA_PERPLEXITY
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

from gguf import GGUFReader

from fixture_f32 import f32_models, valid_text
from gguf_common import check, finish
from llama_tools import run_llama

HFCONV, QUANTIZE, PPL_EVAL, MKMODEL, LLAMA_PPL = sys.argv[1:6]
SOURCE = os.environ.get("HFQ_SOURCE", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
FIXTURES = os.path.join(SOURCE, "..", "shared", "fixtures")
SYNTH_TEXT = os.path.join(SOURCE, "docs", "architecture.md")
# MAX_KL: float32 rounding's size here, 3e-9 to 1.3e-8 per model on the machines measured
# (llama-tied 1.29e-8 on an AVX-512 CPU, 2026-12-04); a wrong rotation gives orders more.
MAX_KL, PPL_TOL, Q8_TOL = 3e-8, 1e-4, 1e-3
HAVE_LLAMA = os.access(LLAMA_PPL, os.X_OK)


def run(argv):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True)


def rotate(gguf, out, preset="F32", *extra):
    r = run([QUANTIZE, gguf, out, preset, "--rotate", "--quiet", *extra])
    check(r.returncode == 0, f"quantize {preset} --rotate {gguf}: {r.stderr.strip()[-400:]}")
    left = glob.glob(out + ".rotated.tmp.*")
    check(not left, f"{out}: temporaries left behind: {left}")
    return r.returncode == 0


def same_function(label, rotated, base, text, ctx, chunks):
    r = run([PPL_EVAL, rotated, "--base", base, "--text", text, "--ctx", ctx, "--chunks", chunks, "--kv-type", "f32",
             "--base-kv-type", "f32", "--json", "--quiet"])
    check(r.returncode == 0, f"{label}: ppl-eval: {r.stderr.strip()[-400:]}")
    if r.returncode != 0:
        return
    kl = json.loads(r.stdout)["kl"]
    print(f"{label}: rotated F32 vs original: KL {kl['kld']:.2e} (max {kl['kld_max']:.1e}), same top "
          f"{100 * kl['same_top']:.2f} %, PPL {kl['ppl']:.6f} vs {kl['ppl_base']:.6f}")
    check(abs(kl["kld"]) <= MAX_KL and kl["same_top"] == 1.0, f"{label}: KL {kl['kld']:.3e}, same top {kl['same_top']}")


def llama_ppl(path, text, ctx, chunks):
    p = run_llama([LLAMA_PPL, "-m", path, "-f", text, "-c", ctx, "--chunks", chunks, "-t", "2", "-ctk", "f32",
                   "-ctv", "f32", "-fa", "off"], "Final estimate")
    m = re.search(r"Final estimate: PPL = ([0-9.]+)", p.stdout + p.stderr)
    check(p.returncode == 0 and m, f"llama-perplexity {path}: {(p.stdout + p.stderr)[-400:]}")
    return float(m.group(1)) if m else None


def llama_same_ppl(label, rotated, base, text, ctx, chunks):
    if not HAVE_LLAMA:
        return
    a, b = llama_ppl(rotated, text, ctx, chunks), llama_ppl(base, text, ctx, chunks)
    if a is None or b is None:
        return
    print(f"{label}: llama-perplexity rotated {a:.4f}, original {b:.4f}")
    check(abs(a - b) <= PPL_TOL * b + 1e-4, f"{label}: llama.cpp PPL {a} rotated vs {b}")


def synthetic(tmp):
    cases = {"llama-96": ["--hidden", "96", "--ffn", "160", "--heads", "4", "--kv-heads", "2"],
             "llama-tied": ["--tied"], "qwen2": ["--arch", "qwen2"]}
    for label, args in cases.items():
        model, gguf = os.path.join(tmp, label), os.path.join(tmp, label + ".gguf")
        r = run([MKMODEL, model, "--layers", "2", *args])
        r = r if r.returncode else run([HFCONV, model, "-o", gguf, "--outtype", "f32", "-q"])
        check(r.returncode == 0, f"{label}: {r.stderr.strip()[-300:]}")
        one(label, gguf, tmp)
    transformers_families(tmp)


def one(label, gguf, tmp, llama_cpp=True):
    out = os.path.join(tmp, label + "-rot.gguf")
    if not rotate(gguf, out):
        return
    same_function(label, out, gguf, SYNTH_TEXT, 128, 4)
    if llama_cpp:
        llama_same_ppl(label, out, gguf, SYNTH_TEXT, 128, 2)
    elif HAVE_LLAMA:   # what docs/quantize-tool.md says: llama.cpp's gemma refuses the untied output
        p = run_llama([LLAMA_PPL, "-m", out, "-f", SYNTH_TEXT, "-c", 128, "--chunks", 2, "-t", "2"], "")
        # (its logger may drop the reason at exit: the exit status is what counts)
        refused = p.returncode != 0 and "Final estimate" not in p.stdout + p.stderr
        print(f"{label}: llama.cpp {'refuses' if refused else 'LOADS'} the rotated file (output.weight)")
        check(refused, f"{label}: llama.cpp now loads the rotated file: update the docs and run it")


def transformers_families(tmp):
    try:
        import transformers
        from hf_checkpoint import build_checkpoint
    except ImportError as e:
        print(f"note: transformers families skipped ({e}); scripts/setup_tests_torch.sh installs torch")
        return
    base = dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=512, max_position_embeddings=512, rms_norm_eps=1e-5,
                initializer_range=0.3, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
    cases = {
        "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM, dict(base, head_dim=32,
                                                                                 tie_word_embeddings=True)),
        # Phi-4's layout; a label without "phi3" and a GPT-2 tokenizer class, as hf_transformers.py explains
        "phi4": (transformers.Phi3Config, transformers.Phi3ForCausalLM, dict(base, pad_token_id=0,
                                                                              sliding_window=None)),
        "gemma": (transformers.GemmaConfig, transformers.GemmaForCausalLM, dict(
            base, head_dim=16, hidden_act="gelu", tie_word_embeddings=True, pad_token_id=0)),
        "qwen3moe": (transformers.Qwen3MoeConfig, transformers.Qwen3MoeForCausalLM, dict(
            base, head_dim=32, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=48,
            norm_topk_prob=True)),
    }
    for label, (cfg, cls, fields) in cases.items():
        folder, _ = build_checkpoint(label, cfg, cls, fields, tmp, MKMODEL, 512)
        if label == "phi4":
            path = os.path.join(folder, "tokenizer_config.json")
            tok = json.load(open(path))
            tok["tokenizer_class"] = "GPT2Tokenizer"
            json.dump(tok, open(path, "w"))
        gguf = os.path.join(tmp, label + ".gguf")
        r = run([HFCONV, folder, "-o", gguf, "--outtype", "f32", "-q"])
        check(r.returncode == 0, f"{label}: hfconv: {r.stderr.strip()[-300:]}")
        if r.returncode == 0:
            one(label, gguf, tmp, llama_cpp=label != "gemma")


def llama_kld(label, rotated, base, text, tmp):
    """llama.cpp's KL divergence of the rotated model against the original's logits."""
    stored = os.path.join(tmp, label + ".kld")
    opts = ["-f", text, "-c", 256, "--chunks", 8, "-t", "2", "-ctk", "f32", "-ctv", "f32", "-fa", "off"]
    p = run_llama([LLAMA_PPL, "-m", base, "--kl-divergence-base", stored, *opts], "")
    q = run_llama([LLAMA_PPL, "-m", rotated, "--kl-divergence-base", stored, "--kl-divergence", *opts], "Same top p")
    out = q.stdout + q.stderr
    kld = re.search(r"Mean\s+KLD:\s*(-?[0-9.]+)", out)
    top = re.search(r"Same top p:\s*([0-9.]+)", out)
    ppl = re.search(r"Mean PPL\(Q\)\s*:\s*([0-9.]+)", out), re.search(r"Mean PPL\(base\)\s*:\s*([0-9.]+)", out)
    ok = p.returncode == 0 and q.returncode == 0 and kld and top and all(ppl)
    check(ok, f"{label}: llama-perplexity --kl-divergence: {out[-500:]}")
    if not ok:
        return
    a, b = float(ppl[0].group(1)), float(ppl[1].group(1))
    print(f"{label}: llama.cpp KL divergence rotated F32 vs original {kld.group(1)}, same top {top.group(1)} %, "
          f"PPL {a} vs {b}")
    check(abs(float(kld.group(1))) <= 2e-6 and float(top.group(1)) >= 99.9 and abs(a - b) <= PPL_TOL * b,
          f"{label}: llama.cpp KLD {kld.group(1)}, same top {top.group(1)}, PPL {a} vs {b}")


def fixtures(tmp):
    text = valid_text(FIXTURES, tmp)
    if text is None:
        return
    for name, gguf in f32_models(FIXTURES, tmp, HFCONV):
        rot = os.path.join(tmp, name + "-rot.gguf")
        if not rotate(gguf, rot):
            continue
        same_function(name, rot, gguf, text, 256, 8)
        rot8, rot8_t1 = os.path.join(tmp, name + "-rot-q8.gguf"), os.path.join(tmp, name + "-rot-q8-t1.gguf")
        if not (rotate(gguf, rot8, "Q8_0") and rotate(gguf, rot8_t1, "Q8_0", "--threads", "1")):
            continue
        check(open(rot8, "rb").read() == open(rot8_t1, "rb").read(), f"{name}: --threads 1 and all differ")
        key = GGUFReader(rot8).fields.get("hfq.quantize.rotate")
        check(key is not None and key.contents() == "hadamard:1", f"{name}: hfq.quantize.rotate is {key}")
        if not HAVE_LLAMA:
            continue
        llama_kld(name, rot, gguf, text, tmp)
        theirs = llama_ppl(rot8, text, 256, 8)
        r = run([PPL_EVAL, rot8, "--text", text, "--ctx", 256, "--chunks", 8, "--kv-type", "f32", "--json", "--quiet"])
        check(r.returncode == 0, f"{name}: ppl-eval Q8_0: {r.stderr.strip()[-300:]}")
        if theirs is None or r.returncode != 0:
            continue
        ours = json.loads(r.stdout)["ppl"]
        print(f"{name}: rotated Q8_0: llama-perplexity {theirs:.4f}, ppl-eval {ours:.4f}")
        check(abs(ours - theirs) <= Q8_TOL * theirs, f"{name}: rotated Q8_0 PPL {ours} vs llama.cpp's {theirs}")


def main():
    if not HAVE_LLAMA:
        print(f"note: no llama-perplexity at {LLAMA_PPL}: llama.cpp's side skipped (scripts/build_reference.sh)")
    with tempfile.TemporaryDirectory() as tmp:
        synthetic(tmp)
        fixtures(tmp)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
