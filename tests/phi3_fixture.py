"""A Phi3ForCausalLM checkpoint without torch: a mkmodel (Llama) folder with
q/k/v rows fused into qkv_proj and gate/up rows into gate_up_proj (q, k, v
and gate, up in that order, as Phi-3 stores them), config.json naming Phi-3,
for the tests of hfconv's and the runner's phi3 refusals and keys."""
import json
import os
import shutil
import struct

ORDER = {"q_proj": 0, "k_proj": 1, "v_proj": 2, "gate_proj": 0, "up_proj": 1}


def fused_name(name):
    """The Phi-3 tensor a Llama tensor goes into (itself when not fused)."""
    base, _, part = name.rpartition(".")[0].rpartition(".")
    if part in ("q_proj", "k_proj", "v_proj"):
        return base + ".qkv_proj.weight"
    if part in ("gate_proj", "up_proj"):
        return base + ".gate_up_proj.weight"
    return name


def phi3_checkpoint(src, dst, cfg_edit=None, header_edit=None):
    """dst: src as Phi-3; cfg_edit(config) and header_edit(safetensors header) change it further."""
    shutil.copytree(src, dst)
    path = os.path.join(dst, "model.safetensors")
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header, start = json.loads(raw[8:8 + n]), 8 + n
    meta = header.pop("__metadata__", None)
    groups = {}
    for name in header:
        groups.setdefault(fused_name(name), []).append(name)
    out, data = {}, bytearray()
    for into, parts in groups.items():
        parts.sort(key=lambda p: ORDER.get(p.split(".")[-2], 0))
        chunk = b"".join(raw[start + header[p]["data_offsets"][0]:start + header[p]["data_offsets"][1]] for p in parts)
        shape = [sum(header[p]["shape"][0] for p in parts)] + header[parts[0]]["shape"][1:]
        out[into] = {"dtype": header[parts[0]]["dtype"], "shape": shape, "data_offsets": [len(data), len(data) + len(chunk)]}
        data += chunk
    if header_edit:
        header_edit(out)
    if meta is not None:
        out["__metadata__"] = meta
    h = json.dumps(out).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + bytes(data))
    cpath = os.path.join(dst, "config.json")
    c = json.load(open(cpath))
    c.update(architectures=["Phi3ForCausalLM"], model_type="phi3",
             original_max_position_embeddings=c["max_position_embeddings"])
    if cfg_edit:
        cfg_edit(c)
    json.dump(c, open(cpath, "w"))
    return dst
