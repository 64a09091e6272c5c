"""Static FP8 KV-cache scales through the compressed-tensors export and back
(docs/export.md, "KV cache"), on stories260K:

1. quantize --export compressed-tensors DIR --recipe R --calibration-file T
   --kv-scales --act-scales (R: one FP8 W8A8 weight, past every K and V): config.json's quantization_config validates against
   compressed-tensors' QuantizationConfig with kv_cache_scheme 8-bit float,
   strategy tensor, static, symmetric; model.layers.N.self_attn.k_scale /
   v_scale hold the GGUF's hfq.kv_cache.k_scale / v_scale bit for bit;
2. transformers + compressed-tensors running the folder against our runner on
   our GGUF of the same preset with a static FP8 E4M3 cache: KL <= 1e-4, the
   same top token >= 99 %; the KV quantization is really on (off, the KL to
   ours is larger). compressed-tensors 0.20 attaches its KV-cache
   quantization (QuantizedKVCache) only to attention modules whose forward
   takes past_key_values, and transformers 5's take `cache`: it skips them,
   so the test applies compressed-tensors' own fake_quantize with the
   folder's kv_cache_scheme and scales where QuantizedKVCache would, to K
   after rope (apply_rotary_pos_emb's output) and to V (v_proj's);
3. hfconv of the folder gives back the same hfq.kv_cache.* keys (bit for bit).

Skips (exit 77) without the fixtures, torch, transformers or compressed-tensors.

usage: export_kv.py QUANTIZE HFCONV TEST_RUNNER_LOGITS GGUF_INFO TOKENIZE
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

from ppl_kld_common import FIXTURES, TEXT, check, finish, skip_without_fixtures, stories_f32_and_text

try:
    import torch
    from compressed_tensors.quantization import QuantizationConfig
    from compressed_tensors.quantization.lifecycle.forward import fake_quantize
    from transformers.models.llama import modeling_llama
    from safetensors.torch import load_file
    from ct_common import ct_model, mean_kl
except ImportError as e:
    print(f"SKIP: torch/transformers/compressed-tensors not installed ({e})")
    sys.exit(77)

QUANTIZE, HFCONV, RUNNER, GGUF_INFO, TOKENIZE = sys.argv[1:6]
# One FP8 weight, past every K and V: the weights that make K and V stay F32 on both sides, so the
# comparison measures the KV cache (on stories260K any FP8 weight before them alone moves the logits by
# KL 3e-4 .. 4e-3 between the two implementations, through rounding ties the KV codes then amplify)
RECIPE = {"name": "kv-export", "rules": [{"match": "blk\\.4\\.ffn_down", "format": "fp8_e4m3",
                                          "granularity": "tensor"}], "default": {"format": "f32"}}
MODEL = os.path.join(FIXTURES, "models", "stories260K")
MAX_KL, MIN_TOP = 1e-4, 0.99


def run(argv, env=None):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env)


def must(argv):
    p = run(argv)
    check(p.returncode == 0, f"{os.path.basename(str(argv[0]))}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
    return p


def kv_keys(gguf):
    m = json.loads(must([GGUF_INFO, "--json", gguf]).stdout)["metadata"]
    return [m.get(k, {}).get("value") for k in ("hfq.kv_cache.k_scale", "hfq.kv_cache.v_scale")]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def ours(gguf, ids, vocab, tmp, kv):
    out = os.path.join(tmp, "logits.f32")
    p = run([RUNNER, gguf, "logits", out] + ids, env=dict(os.environ, HFQ_TEST_KV_TYPE=kv))
    if not check(p.returncode == 0, f"runner: {p.stderr.strip()}"):
        return None
    return np.fromfile(out, dtype="<f4").reshape(len(ids), vocab).astype(np.float64)


def main():
    skip_without_fixtures()
    with tempfile.TemporaryDirectory() as tmp:
        gguf, folder = (os.path.join(tmp, n) for n in ("ours.gguf", "ct"))
        base, text = stories_f32_and_text(tmp, HFCONV)
        if not base:
            return finish()
        calib = ["--calibration-file", text, "--calib-ctx", 128, "--calib-chunks", 4, "--calib-kv-type", "f32",
                 "--kv-scales", "--quiet"]
        recipe = os.path.join(tmp, "recipe.json")
        json.dump(RECIPE, open(recipe, "w"))
        calib += ["--act-scales", "--recipe", recipe]
        must([QUANTIZE, base, gguf, *calib])
        must([QUANTIZE, base, "--export", "compressed-tensors", folder, "--tokenizer-from", MODEL, *calib])
        k, v = kv_keys(gguf)
        if not check(k and v, "our GGUF has no static KV scales"):
            return finish()

        # 1. the config and the tensors
        cfg = json.load(open(os.path.join(folder, "config.json")))
        qc = QuantizationConfig.model_validate(cfg["quantization_config"])
        kv = qc.kv_cache_scheme
        check(kv is not None and kv.num_bits == 8 and kv.type == "float" and kv.strategy == "tensor" and
              not kv.dynamic and kv.symmetric, f"kv_cache_scheme {kv}")
        state = {}
        for name in os.listdir(folder):
            if name.endswith(".safetensors"):
                state.update(load_file(os.path.join(folder, name)))
        for il in range(len(k)):
            for which, ref in (("k", k), ("v", v)):
                t = state.get(f"model.layers.{il}.self_attn.{which}_scale")
                check(t is not None and t.dtype == torch.float32 and list(t.shape) == [1] and
                      float(t[0]) == f32(ref[il]), f"layer {il} {which}_scale: {t} against the GGUF's {ref[il]}")

        # 2. transformers with compressed-tensors' KV quantization against our static FP8 cache
        ids = [int(t) for t in must([TOKENIZE, "--tokenizer-dir", MODEL, "--text", text]).stdout.split()][:200]
        scales = {}
        model = ct_model(folder, scales)
        n_layer = len(model.model.layers)
        check(len(scales) == 2 * n_layer, f"{len(scales)} KV scales left to apply for {n_layer} layers")
        quant = {"on": True, "calls": 0}
        rope = modeling_llama.apply_rotary_pos_emb

        def kv_quant(x, il, which):
            s = scales[f"model.layers.{il}.self_attn.{which}_scale"]
            return fake_quantize(x, s, None, kv) if quant["on"] else x

        def rope_k(q, k_, cos, sin, *a, **kw):
            qe, ke = rope(q, k_, cos, sin, *a, **kw)
            il = quant["calls"] % n_layer
            quant["calls"] += 1
            return qe, kv_quant(ke, il, "k")

        for il, layer in enumerate(model.model.layers):
            layer.self_attn.v_proj.register_forward_hook(lambda _m, _i, out, il=il: kv_quant(out, il, "v"))
        modeling_llama.apply_rotary_pos_emb = rope_k
        try:
            with torch.no_grad():
                theirs = model(torch.tensor([ids])).logits[0].double().numpy()
                quant["on"] = False   # K and V as they are, the weights still FP8
                kv_off = model(torch.tensor([ids])).logits[0].double().numpy()
        finally:
            modeling_llama.apply_rotary_pos_emb = rope
        check(quant["calls"] == 2 * n_layer, f"apply_rotary_pos_emb seen {quant['calls']} times")
        vocab = theirs.shape[1]
        mine, mine_f32 = ours(gguf, ids, vocab, tmp, "fp8_e4m3"), ours(gguf, ids, vocab, tmp, "f32")
        if mine is not None and mine_f32 is not None:
            kl, top = mean_kl(theirs, mine), float(np.mean(np.argmax(theirs, 1) == np.argmax(mine, 1)))
            control, plain = mean_kl(kv_off, mine), mean_kl(kv_off, mine_f32)
            print(f"KL(transformers FP8 KV || ours static FP8 KV) {kl:.3g}, same top {top:.4f}; KV quantization "
                  f"off in transformers: KL to ours {control:.3g}, to our F32 cache {plain:.3g}")
            check(kl <= MAX_KL, f"KL {kl:.3g} > {MAX_KL}")
            check(top >= MIN_TOP, f"same top {top:.4f} < {MIN_TOP}")
            check(control > 10 * kl and plain <= MAX_KL, f"the KV quantization does not show: KL {kl:.3g}, "
                  f"without it {control:.3g}, F32 cache {plain:.3g}")

        # 3. back through hfconv: the same keys
        back = os.path.join(tmp, "back.gguf")
        must([HFCONV, folder, "-o", back, "-q"])
        k2, v2 = kv_keys(back)
        check(k2 == k and v2 == v, f"hfconv of the export: k_scale {k2}, v_scale {v2} against {k}, {v}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
