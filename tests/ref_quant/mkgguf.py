#!/usr/bin/env python3
"""Writes a Llama-layout GGUF (F32/F16/BF16 weights, F32 norms) for the
reference comparisons, independent of the project's own converter and writer:
synthetic random weights, or --from-hf DIR (a Llama checkpoint's config.json
and model.safetensors, F32; q/k rows are not permuted for RoPE, so the file is
for quantization comparisons only, not for inference).

--sparse leaves the tensor data as holes (zeros): enough for planning and
llama-quantize --dry-run on large shapes without writing gigabytes.
"""
import argparse
import json
import os
import struct

import numpy as np

GGML = {"f32": (0, 4), "f16": (1, 2), "bf16": (30, 2)}
FILE_TYPE = {"f32": 0, "f16": 1, "bf16": 32}
ALIGN = 32


def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv_bytes(key, value):
    out = gguf_str(key)
    if isinstance(value, str):
        return out + struct.pack("<I", 8) + gguf_str(value)
    if isinstance(value, float):
        return out + struct.pack("<If", 6, value)
    return out + struct.pack("<II", 4, value)  # u32


def tensor_list(a):
    """(name, ne, is_weight) in the order convert_hf_to_gguf writes them."""
    kv = a.embd // a.heads * a.kv_heads
    t = [("token_embd.weight", (a.embd, a.vocab), True), ("output_norm.weight", (a.embd,), False)]
    if not a.tied:
        t.append(("output.weight", (a.embd, a.vocab), True))
    for layer in range(a.layers):
        p = f"blk.{layer}."
        t.append((p + "attn_norm.weight", (a.embd,), False))
        t.append((p + "attn_q.weight", (a.embd, a.embd), True))
        t.append((p + "attn_k.weight", (a.embd, kv), True))
        t.append((p + "attn_v.weight", (a.embd, kv), True))
        t.append((p + "attn_output.weight", (a.embd, a.embd), True))
        t.append((p + "ffn_norm.weight", (a.embd,), False))
        if a.experts:
            t.append((p + "ffn_gate_inp.weight", (a.embd, a.experts), False))
            t.append((p + "ffn_gate_exps.weight", (a.embd, a.ff, a.experts), True))
            t.append((p + "ffn_up_exps.weight", (a.embd, a.ff, a.experts), True))
            t.append((p + "ffn_down_exps.weight", (a.ff, a.embd, a.experts), True))
        else:
            t.append((p + "ffn_gate.weight", (a.embd, a.ff), True))
            t.append((p + "ffn_up.weight", (a.embd, a.ff), True))
            t.append((p + "ffn_down.weight", (a.ff, a.embd), True))
    return t


def encode(values, wtype):
    if wtype == "f32":
        return values.astype("<f4").tobytes()
    if wtype == "f16":
        return values.astype("<f2").tobytes()
    u = values.astype("<f4").view("<u4").astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16  # round to nearest even
    return u.astype("<u2").tobytes()


HF_NAMES = {
    "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def read_safetensors(path):
    """{name: float32 array} of an F32 safetensors file, with __metadata__ aliases."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            if info["dtype"] != "F32":
                raise SystemExit(f"{path}: {name}: only F32 checkpoints are supported")
            start, end = info["data_offsets"]
            f.seek(base + start)
            out[name] = np.frombuffer(f.read(end - start), dtype="<f4").reshape(info["shape"])
    for alias, target in header.get("__metadata__", {}).items():
        if target in out and alias not in out:
            out[alias] = out[target]
    return out


def hf_model(a):
    """(hparams, [(gguf name, ne, is_weight, float32 values)]) of an HF Llama checkpoint."""
    cfg = json.load(open(os.path.join(a.from_hf, "config.json")))
    st = read_safetensors(os.path.join(a.from_hf, "model.safetensors"))
    hp = argparse.Namespace(layers=cfg["num_hidden_layers"], embd=cfg["hidden_size"],
                            ff=cfg["intermediate_size"], heads=cfg["num_attention_heads"],
                            kv_heads=cfg.get("num_key_value_heads", cfg["num_attention_heads"]),
                            vocab=cfg["vocab_size"], experts=0)
    tied = cfg.get("tie_word_embeddings", False)
    embed = st.get("model.embed_tokens.weight", st.get("lm_head.weight"))
    t = [("token_embd.weight", embed), ("output_norm.weight", st["model.norm.weight"])]
    if not tied:
        t.append(("output.weight", st["lm_head.weight"]))
    for layer in range(hp.layers):
        for hf, gg in HF_NAMES.items():
            t.append((f"blk.{layer}.{gg}.weight", st[f"model.layers.{layer}.{hf}.weight"]))
    return hp, [(name, tuple(reversed(v.shape)), v.ndim > 1, v) for name, v in t]


def synthetic_model(a):
    rng = np.random.default_rng(a.seed)
    out = []
    for name, ne, is_weight in tensor_list(a):
        n = int(np.prod(ne))
        if a.sparse:
            vals = None
        elif is_weight:
            vals = rng.standard_normal(n, dtype=np.float32) * 0.02
        else:
            vals = 1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)
        out.append((name, ne, is_weight, vals))
    return a, out


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--from-hf", metavar="DIR")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--embd", type=int, default=256)
    ap.add_argument("--ff", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--experts", type=int, default=0)
    ap.add_argument("--tied", action="store_true")
    ap.add_argument("--wtype", choices=GGML, default="f16")
    ap.add_argument("--sparse", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    hp, tensors = hf_model(a) if a.from_hf else synthetic_model(a)

    arch = "llama"
    kvs = [
        ("general.architecture", arch),
        ("general.name", "synthetic"),
        ("general.file_type", FILE_TYPE[a.wtype]),
        (f"{arch}.context_length", 512),
        (f"{arch}.embedding_length", hp.embd),
        (f"{arch}.block_count", hp.layers),
        (f"{arch}.feed_forward_length", hp.ff),
        (f"{arch}.rope.dimension_count", hp.embd // hp.heads),
        (f"{arch}.attention.head_count", hp.heads),
        (f"{arch}.attention.head_count_kv", hp.kv_heads),
        (f"{arch}.attention.layer_norm_rms_epsilon", 1e-5),
        (f"{arch}.vocab_size", hp.vocab),
    ]
    if hp.experts:
        kvs += [(f"{arch}.expert_count", hp.experts), (f"{arch}.expert_used_count", 2)]

    infos, offset, sizes = b"", 0, []
    for name, ne, is_weight, _ in tensors:
        ty, es = GGML[a.wtype] if is_weight else GGML["f32"]
        n = int(np.prod(ne))
        infos += gguf_str(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}q", *ne)
        infos += struct.pack("<IQ", ty, offset)
        sizes.append(n * es)
        offset += (n * es + ALIGN - 1) // ALIGN * ALIGN

    head = b"GGUF" + struct.pack("<Iqq", 3, len(tensors), len(kvs))
    head += b"".join(kv_bytes(k, v) for k, v in kvs) + infos
    head += b"\0" * ((ALIGN - len(head) % ALIGN) % ALIGN)

    with open(a.out, "wb") as f:
        f.write(head)
        for (name, ne, is_weight, vals), size in zip(tensors, sizes):
            padded = (size + ALIGN - 1) // ALIGN * ALIGN
            if vals is None:
                f.seek(padded, 1)
                continue
            data = encode(vals.reshape(-1), a.wtype if is_weight else "f32")
            f.write(data + b"\0" * (padded - size))
        f.truncate()


if __name__ == "__main__":
    main()
