"""Mixtures of experts (Mixtral, Qwen3-MoE) proven against transformers and llama.cpp.

Small checkpoints built and saved by transformers 5 (4 or 8 experts, top-2, 3
layers; Qwen3-MoE with norm_topk_prob true and false; weights from the
initializer scaled up so the routing is decisive and each expert counts) are
converted with `hfconv --outtype f32` and run by our runner on the same token
ids as transformers: KL(transformers || ours) <= 1e-5 on average and the top
tokens agree at >= 99.9 % of the positions. transformers 5 saves the experts
one tensor each, as transformers 4 did (model.layers.L.mlp.experts.E.*); the
transformers 4 config layout (rope_theta) converts to the same tensors.

Then, as hf_transformers.py does for the dense families (its helpers): llama.cpp's
converter on the same checkpoints (tensors byte-identical, keys equal; Qwen3-MoE
without renormalisation is compared but for our key qwen3moe.expert_weights_norm,
docs/hfconv.md), llama-perplexity vs our ppl-eval on our file (1e-3; only where
llama.cpp computes the same model: it always renormalises), llama-quantize's
Q4_K_M and Q8_0 bytes vs ours.

usage: hf_moe.py HFCONV TEST_RUNNER_LOGITS MKMODEL [PPL_EVAL LLAMA_PERPLEXITY QUANTIZE LLAMA_QUANTIZE]
"""
import os
import sys
import tempfile

import numpy as np

import hf_transformers as H   # skips (77) without torch / transformers
from gguf_common import check, finish

import transformers  # noqa: E402 (after the skip)
from hf_checkpoint import build_checkpoint


def moe(**kw):
    return H.base(intermediate_size=96, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, **kw)


# label: (config class, model class, fields, llama.cpp computes the same model)
CASES = {
    "mixtral": (transformers.MixtralConfig, transformers.MixtralForCausalLM,
                moe(num_local_experts=4, num_experts_per_tok=2, sliding_window=None), True),
    "qwen3moe-norm": (transformers.Qwen3MoeConfig, transformers.Qwen3MoeForCausalLM,
                      moe(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=48, head_dim=16,
                          norm_topk_prob=True), True),
    "qwen3moe": (transformers.Qwen3MoeConfig, transformers.Qwen3MoeForCausalLM,
                 moe(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64, head_dim=32,
                     norm_topk_prob=False, tie_word_embeddings=True), False),
}


def main():
    rng = np.random.default_rng(18)
    ids = [1] + [int(i) for i in rng.integers(3, H.VOCAB, H.N_POS - 1)]
    have_converter = os.path.isfile(os.path.join(H.CONVERTER_DIR, "convert_hf_to_gguf.py"))
    have_runtime = bool(H.PPL_EVAL and H.LLAMA_PPL and os.access(H.LLAMA_PPL, os.X_OK))
    have_quantize = bool(H.QUANTIZE and H.LLAMA_QUANTIZE and os.access(H.LLAMA_QUANTIZE, os.X_OK))
    with tempfile.TemporaryDirectory() as tmp:
        for label, (cfg_cls, model_cls, fields, same_in_llama) in CASES.items():
            v5, model = build_checkpoint(label, cfg_cls, model_cls, fields, tmp, H.MKMODEL, H.VOCAB)
            ref = H.hf_logits(model, ids)
            v4 = os.path.join(tmp, label + "-v4")
            H.to_v4(v5, v4)
            for layout, folder in (("v5", v5), ("v4", v4)):
                got = H.our_logits(folder, ids, tmp, f"{label}-{layout}")
                if got is not None:
                    H.compare(f"{label} ({layout} config)", ref, got)
            ours = os.path.join(tmp, label + "-v5.gguf")
            if not os.path.isfile(ours):
                continue
            if os.path.isfile(os.path.join(tmp, label + "-v4.gguf")):
                a, b = H.gguf_contents(ours)[0], H.gguf_contents(os.path.join(tmp, label + "-v4.gguf"))[0]
                check(a == b, f"{label}: the transformers 4 layout converts to other tensors")
            if have_converter:
                # our one key llama.cpp's converter does not write (docs/hfconv.md)
                keys = H.gguf_contents(ours)[1]
                extra = () if fields.get("norm_topk_prob") is not False else ("qwen3moe.expert_weights_norm",)
                check(not extra or keys.get(extra[0]) is False, f"{label}: no expert_weights_norm = false")
                apart, H.KEYS_APART = H.KEYS_APART, H.KEYS_APART + extra
                H.against_llama_cpp(label, v5, tmp)
                H.KEYS_APART = apart
            if have_runtime and same_in_llama:
                H.against_llama_runtime(label, ours)
            if have_quantize:
                H.against_llama_quantize(label, ours, tmp)
    if not have_converter:
        print(f"SKIP (part): llama.cpp's converter is not installed in {H.CONVERTER_DIR}")
    if not have_quantize or not have_runtime:
        print("SKIP (part): llama-quantize / llama-perplexity not built (scripts/build_reference.sh)")
    sys.exit(finish())


if __name__ == "__main__":
    main()
