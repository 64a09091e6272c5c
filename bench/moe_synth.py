"""A synthetic Mixtral checkpoint from a dense mkmodel one (bench/hfconv_moe.sh):
each layer's SwiGLU copied into N experts (block_sparse_moe.experts.E.w1/w3/w2,
each expert's rows scaled by a different power of two so they differ) and a
random router, written tensor by tensor (never the whole model in memory).

usage: moe_synth.py DENSE_DIR OUT_DIR N_EXPERTS"""
import json
import os
import re
import shutil
import struct
import sys

import numpy as np

src, out, n_exp = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(out, exist_ok=True)
for f in os.listdir(src):
    if not f.endswith(".safetensors") and f != "model.safetensors.index.json" and f != "config.json":
        shutil.copy(os.path.join(src, f), out)
shards = sorted(f for f in os.listdir(src) if f.endswith(".safetensors"))
plan = []   # (name, dtype, shape, shard, offset, nbytes, scale_exponent or None)
for shard in shards:
    raw = open(os.path.join(src, shard), "rb")
    n = struct.unpack("<Q", raw.read(8))[0]
    header = json.loads(raw.read(n))
    header.pop("__metadata__", None)
    for name, info in header.items():
        a, b = info["data_offsets"]
        where = (shard, 8 + n + a, b - a)
        m = re.match(r"model\.layers\.(\d+)\.mlp\.(gate|up|down)_proj\.weight$", name)
        if not m:
            plan.append((name, info["dtype"], info["shape"]) + where + (None,))
            continue
        w = {"gate": "w1", "up": "w3", "down": "w2"}[m.group(2)]
        for e in range(n_exp):
            plan.append((f"model.layers.{m.group(1)}.block_sparse_moe.experts.{e}.{w}.weight", info["dtype"],
                         info["shape"]) + where + (e % 3,))
        if w == "w1":
            plan.append((f"model.layers.{m.group(1)}.block_sparse_moe.gate.weight", "F32",
                         [n_exp, info["shape"][1]], None, 0, 4 * n_exp * info["shape"][1], None))
header, off = {}, 0
for name, dtype, shape, shard, start, nbytes, _ in plan:
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + nbytes]}
    off += nbytes
h = json.dumps(header).encode()
rng = np.random.default_rng(0)
with open(os.path.join(out, "model.safetensors"), "wb") as fo:
    fo.write(struct.pack("<Q", len(h)) + h)
    for name, dtype, shape, shard, start, nbytes, exp in plan:
        if shard is None:
            fo.write(rng.standard_normal(nbytes // 4).astype("<f4").tobytes())
            continue
        with open(os.path.join(src, shard), "rb") as fi:
            fi.seek(start)
            data = fi.read(nbytes)
        if exp and dtype == "BF16":   # bf16 times 2^exp: add exp to the exponent field
            v = np.frombuffer(data, dtype="<u2").astype(np.int32)
            nz = (v & 0x7F80) != 0
            v[nz] += exp << 7
            data = v.astype("<u2").tobytes()
        fo.write(data)
cfg = json.load(open(os.path.join(src, "config.json")))
cfg.update(architectures=["MixtralForCausalLM"], model_type="mixtral", num_local_experts=n_exp, num_experts_per_tok=2)
json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
