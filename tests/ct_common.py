"""compressed-tensors checkpoints as transformers runs them, and the KL
statistic of the tests comparing our runner with it (export_ct.py,
hf_quantized_input.py). Imports torch, transformers and compressed-tensors."""
import functools
import os
import subprocess

import numpy as np
import torch
import transformers
from compressed_tensors.compressors import ModelCompressor
from compressed_tensors.compressors.nvfp4 import base as nvfp4_base
from compressed_tensors.quantization import QuantizationConfig, apply_quantization_config
from safetensors.torch import load_file

from gguf_common import check


def ct_model(folder, kv_scales=None):
    """The model as compressed-tensors loads and decompresses it: transformers'
    float model, the folder's scheme applied (apply_quantization_config), the
    compressed layout made (compress_model) so that the folder's tensors load
    strictly, name for name and shape for shape, then decompressed in place
    (decompress_model). The modules keep their scheme: compressed-tensors'
    forward quantizes their inputs as the config says. NVFP4 is decompressed
    in float32, not compressed-tensors' default bfloat16: a serving engine
    never rounds the weights (vLLM multiplies the FP4 codes and E4M3 scales
    in its GEMM), and with NVFP4 activations (W4A4) that rounding of 2^-9
    flips activation codes downstream, moving the logits by KL 4e-4 to 2.4e-3
    against exact weights (1e-6 without activation quantization).
    kv_scales (a dict): the folder's self_attn.k_scale / v_scale tensors that
    compressed-tensors did not attach are moved there by name, not refused
    (0.20 hooks its KV-cache quantization into attention modules whose
    forward takes past_key_values; transformers 5's take `cache`)."""
    cfg = transformers.AutoConfig.from_pretrained(folder)
    qc = QuantizationConfig.model_validate(cfg.quantization_config)
    del cfg.quantization_config
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
    apply_quantization_config(model, qc)
    compressor = ModelCompressor(quantization_config=qc)
    compressor.compress_model(model)
    state = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".safetensors"):
            state.update(load_file(os.path.join(folder, name)))
    own = dict(model.named_parameters())
    for name in [n for n in state if n.endswith(("self_attn.k_scale", "self_attn.v_scale")) and n not in own]:
        if kv_scales is not None:
            kv_scales[name] = state.pop(name)
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = ["lm_head.weight"] if cfg.tie_word_embeddings else []
    if list(missing) != tied or unexpected:
        raise ValueError(f"tensors missing {list(missing)}, unexpected {list(unexpected)}")
    model.tie_weights()
    unpack = nvfp4_base.unpack_fp4_from_uint8
    nvfp4_base.unpack_fp4_from_uint8 = functools.partial(unpack, dtype=torch.float32)
    try:
        compressor.decompress_model(model)
    finally:
        nvfp4_base.unpack_fp4_from_uint8 = unpack
    return model.float()


def mean_kl(p_logits, q_logits):
    lp = p_logits - np.logaddexp.reduce(p_logits, axis=1, keepdims=True)
    lq = q_logits - np.logaddexp.reduce(q_logits, axis=1, keepdims=True)
    return float(np.mean(np.sum(np.exp(lp) * (lp - lq), axis=1)))


def hf_order(w, heads):
    """GGUF q/k rows (interleaved rotary pairs) back in Hugging Face's rotate-half order."""
    rows = w.shape[0]
    per = rows // heads
    src = [h * per + (k % 2) * (per // 2) + k // 2 for h in range(heads) for k in range(per)]
    out = np.empty_like(w)
    out[src] = w
    return out


def runner_logits(runner, gguf, ids, vocab, tmp):
    """Our runner's logits [len(ids), vocab] for the token ids, or None (a failed check)."""
    out = os.path.join(tmp, "logits.f32")
    r = subprocess.run([runner, gguf, "logits", out] + [str(i) for i in ids], capture_output=True, text=True)
    if r.returncode != 0:
        check(False, f"{gguf}: runner failed: {r.stderr.strip()}")
        return None
    return np.fromfile(out, dtype="<f4").reshape(len(ids), vocab).astype(np.float64)
