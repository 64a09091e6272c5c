#!/usr/bin/env python3
"""Writes a synthetic Llama-layout GGUF (F32/F16/BF16 weights, F32 norms) for
the reference comparisons, independent of the project's own converter.

--sparse leaves the tensor data as holes (zeros): enough for planning and
llama-quantize --dry-run on large shapes without writing gigabytes.
"""
import argparse
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


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
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

    arch = "llama"
    kvs = [
        ("general.architecture", arch),
        ("general.name", "synthetic"),
        ("general.file_type", FILE_TYPE[a.wtype]),
        (f"{arch}.context_length", 512),
        (f"{arch}.embedding_length", a.embd),
        (f"{arch}.block_count", a.layers),
        (f"{arch}.feed_forward_length", a.ff),
        (f"{arch}.rope.dimension_count", a.embd // a.heads),
        (f"{arch}.attention.head_count", a.heads),
        (f"{arch}.attention.head_count_kv", a.kv_heads),
        (f"{arch}.attention.layer_norm_rms_epsilon", 1e-5),
        (f"{arch}.vocab_size", a.vocab),
    ]
    if a.experts:
        kvs += [(f"{arch}.expert_count", a.experts), (f"{arch}.expert_used_count", 2)]

    tensors = tensor_list(a)
    infos, offset, sizes = b"", 0, []
    for name, ne, is_weight in tensors:
        ty, es = GGML[a.wtype] if is_weight else GGML["f32"]
        n = int(np.prod(ne))
        infos += gguf_str(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}q", *ne)
        infos += struct.pack("<IQ", ty, offset)
        sizes.append(n * es)
        offset += (n * es + ALIGN - 1) // ALIGN * ALIGN

    head = b"GGUF" + struct.pack("<Iqq", 3, len(tensors), len(kvs))
    head += b"".join(kv_bytes(k, v) for k, v in kvs) + infos
    head += b"\0" * ((ALIGN - len(head) % ALIGN) % ALIGN)

    rng = np.random.default_rng(a.seed)
    with open(a.out, "wb") as f:
        f.write(head)
        for (name, ne, is_weight), size in zip(tensors, sizes):
            padded = (size + ALIGN - 1) // ALIGN * ALIGN
            if a.sparse:
                f.seek(padded, 1)
                continue
            n = int(np.prod(ne))
            if is_weight:
                vals = rng.standard_normal(n, dtype=np.float32) * 0.02
                data = encode(vals, a.wtype)
            else:
                data = (1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)).astype("<f4").tobytes()
            f.write(data + b"\0" * (padded - size))
        f.truncate()


if __name__ == "__main__":
    main()
