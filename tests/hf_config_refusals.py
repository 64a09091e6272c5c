"""config.json keys, one by one: what hfconv reads (both transformers layouts,
per-layer-type rope parameters, text_config nesting) and what it refuses.

The principle checked key by key: a config key that changes the model's math
and that no converted family computes is refused with one line naming the key
and its value (exit 1, no output left behind), never ignored; the neutral
value of the same key converts. Accepted configs are checked in the GGUF with
the reference reader (rope base, scaling keys).

usage: hf_config_refusals.py HFCONV MKMODEL
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

from gguf import GGUFReader

from phi3_fixture import phi3_checkpoint

HFCONV, MKMODEL = sys.argv[1:3]
failures = 0
checks = 0


def check(cond, what):
    global failures, checks
    checks += 1
    if not cond:
        failures += 1
        print("FAIL:", what)


def variant(tmp, base, label, edit):
    d = os.path.join(tmp, label.replace(" ", "_").replace("/", "_"))
    shutil.copytree(base, d)
    path = os.path.join(d, "config.json")
    cfg = json.load(open(path))
    new = edit(cfg)   # edits cfg in place, or returns a new config
    json.dump(cfg if new is None else new, open(path, "w"))
    return d


def convert(d):
    out = os.path.join(d, "out.gguf")
    r = subprocess.run([HFCONV, d, "-o", out, "-q"], capture_output=True, text=True)
    return r, out


def refused(tmp, base, label, edit, needle):
    d = variant(tmp, base, label, edit)
    r, out = convert(d)
    err = r.stderr.strip()
    ok = r.returncode == 1 and needle in err and "config.json" in err and len(err.splitlines()) == 1
    check(ok, f"{label}: expected exit 1 with one line containing {needle!r}, got {r.returncode}: {err!r}")
    check(not os.path.exists(out) and not any(".tmp." in f for f in os.listdir(d)), f"{label}: output left behind")


def accepted(tmp, base, label, edit, want=None):
    d = variant(tmp, base, label, edit)
    r, out = convert(d)
    check(r.returncode == 0, f"{label}: expected success, got {r.returncode}: {r.stderr.strip()}")
    if r.returncode != 0 or not want:
        return
    rd = GGUFReader(out)
    for key, value in want.items():
        f = rd.fields.get(key)
        got = None if f is None else f.contents()
        if isinstance(value, float) and isinstance(got, float):
            good = abs(got - value) <= 1e-6 * abs(value)
        else:
            good = got == value
        check(good, f"{label}: {key} = {got!r}, expected {value!r}")


def setitems(**kv):
    def edit(c):
        c.update(kv)
    return edit


def rope_v5(rp, drop_theta=True):
    def edit(c):
        if drop_theta:
            c.pop("rope_theta", None)
        c.pop("rope_scaling", None)
        c["rope_parameters"] = rp
    return edit


def main():
    with tempfile.TemporaryDirectory() as tmp:
        llama = os.path.join(tmp, "llama")
        qwen2 = os.path.join(tmp, "qwen2")
        mistral = os.path.join(tmp, "mistral")
        for d, arch in ((llama, "llama"), (qwen2, "qwen2"), (mistral, "mistral")):
            subprocess.run([MKMODEL, d, "--arch", arch, "--ctx", "256"], check=True, capture_output=True)
        phi3 = phi3_checkpoint(llama, os.path.join(tmp, "phi3"))

        # --- layouts read -------------------------------------------------
        accepted(tmp, llama, "v5 default rope", rope_v5({"rope_type": "default", "rope_theta": 500000.0}),
                 {"llama.rope.freq_base": 500000.0})
        accepted(tmp, llama, "v5 linear", rope_v5({"rope_type": "linear", "rope_theta": 20000.0, "factor": 2.0}),
                 {"llama.rope.freq_base": 20000.0, "llama.rope.scaling.type": "linear",
                  "llama.rope.scaling.factor": 2.0})
        accepted(tmp, llama, "v4 linear", setitems(rope_scaling={"type": "linear", "factor": 2.0}),
                 {"llama.rope.freq_base": 10000.0, "llama.rope.scaling.type": "linear"})
        accepted(tmp, llama, "v5 yarn with betas",
                 rope_v5({"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                          "original_max_position_embeddings": 64, "beta_fast": 16.0, "beta_slow": 2.0,
                          "attention_factor": 1.2}),
                 {"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": 4.0,
                  "llama.rope.scaling.original_context_length": 64, "llama.rope.scaling.yarn_beta_fast": 16.0,
                  "llama.rope.scaling.yarn_beta_slow": 2.0, "llama.rope.scaling.yarn_attn_factor": 1.2})
        accepted(tmp, llama, "v5 llama3 (rope_freqs from rope_parameters' base)",
                 rope_v5({"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 64}),
                 {"llama.rope.freq_base": 500000.0})
        accepted(tmp, llama, "v5 and v4 agreeing rope_theta",
                 rope_v5({"rope_type": "default", "rope_theta": 10000.0}, drop_theta=False))
        accepted(tmp, llama, "per layer type rope",
                 rope_v5({"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                          "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}),
                 {"llama.rope.freq_base": 1000000.0, "llama.rope.freq_base_swa": 10000.0})
        accepted(tmp, llama, "text_config nesting",
                 lambda c: {"architectures": c["architectures"], "text_config": {
                     k: v for k, v in c.items() if k != "architectures"}},
                 {"llama.embedding_length": 64, "llama.block_count": 2})
        accepted(tmp, qwen2, "qwen2 use_sliding_window false", setitems(use_sliding_window=False, sliding_window=32))
        accepted(tmp, qwen2, "qwen2 sliding window above max_window_layers",
                 setitems(use_sliding_window=True, sliding_window=32, max_window_layers=2))
        accepted(tmp, mistral, "mistral window as wide as the context", setitems(sliding_window=256))
        accepted(tmp, llama, "neutral values",
                 setitems(attn_logit_softcapping=None, final_logit_softcapping=None, partial_rotary_factor=1.0,
                          embedding_multiplier=1.0, mlp_bias=False, attention_bias=False, hidden_act="silu"))
        accepted(tmp, qwen2, "qwen2 attention_bias true (its biases)", setitems(attention_bias=True))

        # Phi-3: its own keys (llama.cpp's Phi3MiniModel) and what only it computes
        longrope = {"type": "longrope", "short_factor": [1.0] * 8, "long_factor": [2.0] * 8}
        accepted(tmp, phi3, "phi3 plain", setitems(sliding_window=None),
                 {"phi3.rope.scaling.original_context_length": 256, "phi3.rope.dimension_count": 16,
                  "phi3.attention.sliding_window": 0, "phi3.rope.scaling.attn_factor": None})
        accepted(tmp, phi3, "phi3 no original context", lambda c: c.pop("original_max_position_embeddings") and None,
                 {"phi3.rope.scaling.original_context_length": 4096})
        accepted(tmp, phi3, "phi3 narrow window", setitems(sliding_window=32), {"phi3.attention.sliding_window": 32})
        accepted(tmp, phi3, "phi3 partial rotary", setitems(partial_rotary_factor=0.5),
                 {"phi3.rope.dimension_count": 8})
        accepted(tmp, phi3, "phi3 longrope (v4, su)",
                 setitems(original_max_position_embeddings=64, rope_scaling=dict(longrope, type="su")),
                 {"phi3.rope.scaling.original_context_length": 64,
                  "phi3.rope.scaling.attn_factor": (1 + math.log(4) / math.log(64)) ** 0.5})
        accepted(tmp, phi3, "phi3 longrope attention_factor",
                 setitems(original_max_position_embeddings=64, rope_scaling=dict(longrope, attention_factor=1.3)),
                 {"phi3.rope.scaling.attn_factor": 1.3})
        accepted(tmp, phi3, "phi3 longrope factor (v5)",
                 lambda c: rope_v5({"rope_type": "longrope", "rope_theta": 1e4, "factor": 16.0,
                          "original_max_position_embeddings": 64, "short_factor": [1.0] * 8,
                          "long_factor": [2.0] * 8})(c) or c.update(original_max_position_embeddings=64),
                 {"phi3.rope.scaling.attn_factor": (1 + math.log(16) / math.log(64)) ** 0.5})

        # --- refusals: keys that change the math ------------------------
        R = lambda *a: refused(tmp, *a)
        R(qwen2, "qwen2 sliding window", setitems(use_sliding_window=True, sliding_window=32, max_window_layers=0),
          "field 'sliding_window' = 32: sliding-window attention")
        R(mistral, "mistral sliding window", setitems(sliding_window=64), "field 'sliding_window' = 64")
        R(llama, "layer_types sliding", setitems(layer_types=["full_attention", "sliding_attention"], sliding_window=64),
          "field 'sliding_window' = 64")
        R(llama, "layer_types unknown", setitems(layer_types=["full_attention", "linear_attention"]),
          "field 'layer_types' = 'linear_attention': layer type not supported")
        R(llama, "attn softcapping", setitems(attn_logit_softcapping=50.0), "field 'attn_logit_softcapping' = 50")
        R(llama, "final softcapping", setitems(final_logit_softcapping=30.0), "field 'final_logit_softcapping' = 30")
        R(llama, "partial rotary", setitems(partial_rotary_factor=0.5), "field 'partial_rotary_factor' = 0.5")
        R(llama, "partial rotary in rope_parameters",
          rope_v5({"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}),
          "field 'rope_parameters.partial_rotary_factor' = 0.25")
        R(llama, "attention multiplier", setitems(attention_multiplier=0.015625), "field 'attention_multiplier'")
        R(llama, "embedding multiplier", setitems(embedding_multiplier=12.0), "field 'embedding_multiplier' = 12")
        R(llama, "residual multiplier", setitems(residual_multiplier=0.22), "field 'residual_multiplier' = 0.22")
        R(llama, "logits scaling", setitems(logits_scaling=8.0), "field 'logits_scaling' = 8")
        R(llama, "mlp bias", setitems(mlp_bias=True), "field 'mlp_bias' = true")
        R(llama, "llama attention bias", setitems(attention_bias=True), "field 'attention_bias' = true")
        R(llama, "gelu", setitems(hidden_act="gelu"), "field 'hidden_act' = 'gelu'")
        R(llama, "hidden_activation", setitems(hidden_activation="gelu_pytorch_tanh"),
          "field 'hidden_activation' = 'gelu_pytorch_tanh'")
        R(llama, "tie not boolean", setitems(tie_word_embeddings="yes"), "field 'tie_word_embeddings' is not a boolean")
        R(llama, "rope dynamic v4", setitems(rope_scaling={"type": "dynamic", "factor": 2.0}),
          "field 'rope_scaling.type' = 'dynamic': rope type not supported")
        R(llama, "rope unknown v5", rope_v5({"rope_type": "ntk-by-parts", "rope_theta": 10000.0}),
          "field 'rope_parameters.rope_type' = 'ntk-by-parts'")
        R(llama, "rope unknown key", rope_v5({"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                                              "mscale": 0.7}),
          "field 'rope_parameters.mscale' = 0.7: not computed for rope type 'llama3'")
        R(llama, "yarn mscale_all_dim", setitems(rope_scaling={"type": "yarn", "factor": 4.0, "mscale_all_dim": 1.0}),
          "field 'rope_scaling.mscale_all_dim' = 1")
        R(llama, "yarn extrapolation", setitems(rope_scaling={"type": "yarn", "factor": 4.0,
                                                             "extrapolation_factor": 2.0}),
          "field 'rope_scaling.extrapolation_factor' = 2")
        R(llama, "yarn truncate", rope_v5({"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0, "truncate": False}),
          "field 'rope_parameters.truncate' = false")
        R(llama, "linear without factor", setitems(rope_scaling={"type": "linear"}),
          "field 'rope_scaling.factor' is missing")
        R(llama, "factor without type", setitems(rope_scaling={"factor": 2.0}), "has a factor but no rope_type")
        R(llama, "longrope", setitems(rope_scaling={"type": "longrope", "short_factor": [1.0] * 8,
                                                   "long_factor": [2.0] * 8, "original_max_position_embeddings": 64}),
          "field 'rope_scaling' asks for rope type 'longrope': not implemented for llama")
        R(llama, "both layouts", setitems(rope_parameters={"rope_type": "default"},
                                          rope_scaling={"type": "linear", "factor": 2.0}),
          "fields 'rope_parameters' and 'rope_scaling' are both given")
        R(llama, "rope_theta disagreement", rope_v5({"rope_type": "default", "rope_theta": 500000.0}, drop_theta=False),
          "field 'rope_theta' = 10000 disagrees with 'rope_parameters.rope_theta' = 500000")
        R(llama, "original context disagreement",
          lambda c: c.update(original_max_position_embeddings=128,
                             rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}),
          "field 'original_max_position_embeddings' = 128 disagrees")
        R(llama, "per layer type unknown", rope_v5({"full_attention": {"rope_type": "default"},
                                                    "chunked_attention": {"rope_type": "default"}}),
          "field 'rope_parameters.chunked_attention' = an object: layer type not supported")
        R(llama, "sliding layers scaled", rope_v5({"full_attention": {"rope_type": "default"},
                                                  "sliding_attention": {"rope_type": "linear", "factor": 2.0}}),
          "rope type 'linear' is not supported for sliding-window layers")
        R(llama, "head_dim inconsistent with the tensors", setitems(head_dim=32), "does not match config.json")
        R(llama, "head_dim odd", setitems(head_dim=15), "head size 15 (head_dim) is odd")
        R(llama, "text_config wrapper", lambda c: {"architectures": ["Mistral3ForConditionalGeneration"],
                                                   "text_config": {k: v for k, v in c.items() if k != "architectures"}},
          "architecture 'Mistral3ForConditionalGeneration' is not supported")
    print(f"{checks} checks, {failures} failures")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
