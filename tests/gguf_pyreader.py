"""GGUF files against the reference implementation (gguf-py).

1. Our writer (via tests/gguf_spec_writer) writes every value type and several
   tensor types; gguf.GGUFReader must see the same keys, types, values, tensor
   names, shapes, types and bytes, and so must our reader (gguf-info --json).
2. gguf.GGUFWriter writes a file; our reader (gguf-info --json, spec_writer crc)
   must see what it wrote.

usage: gguf_pyreader.py SPEC_WRITER GGUF_INFO
"""
import json
import os
import subprocess
import sys
import tempfile
import zlib

import numpy as np
from gguf_common import check, finish, write_spec
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter

SPEC_WRITER, GGUF_INFO = sys.argv[1], sys.argv[2]
HASH_KEY = "hfq.tensor_xxh3_64"


VT = {"u8": GGUFValueType.UINT8, "i8": GGUFValueType.INT8, "u16": GGUFValueType.UINT16,
      "i16": GGUFValueType.INT16, "u32": GGUFValueType.UINT32, "i32": GGUFValueType.INT32,
      "f32": GGUFValueType.FLOAT32, "bool": GGUFValueType.BOOL, "str": GGUFValueType.STRING,
      "u64": GGUFValueType.UINT64, "i64": GGUFValueType.INT64, "f64": GGUFValueType.FLOAT64}

# (key, type, value) or (key, "arr", element type, values)
KV = [
    ("general.architecture", "str", "llama"),
    ("general.alignment", "u32", 64),
    ("s.u8", "u8", 255), ("s.i8", "i8", -128), ("s.u16", "u16", 65535), ("s.i16", "i16", -32768),
    ("s.u32", "u32", 4294967295), ("s.i32", "i32", -2147483648), ("s.f32", "f32", -1.5),
    ("s.bool", "bool", True), ("s.u64", "u64", 2**64 - 1), ("s.i64", "i64", -2**63),
    ("s.f64", "f64", 1e300), ("s.f32b", "f32", 0.1), ("s.str", "str", "h\u00e9llo w\u00f6rld \u2713 \u65e5\u672c"),
    ("s.empty", "str", ""), ("s.false", "bool", False),
    ("a.u8", "arr", "u8", [0, 1, 255]), ("a.i8", "arr", "i8", [-128, 0, 127]),
    ("a.u16", "arr", "u16", [0, 65535]), ("a.i16", "arr", "i16", [-32768, 32767]),
    ("a.u32", "arr", "u32", [0, 4294967295, 7]), ("a.i32", "arr", "i32", [-2147483648, -1, 2147483647]),
    ("a.f32", "arr", "f32", [-1.5, 0.1, 3.4e38]), ("a.bool", "arr", "bool", [True, False, True]),
    ("a.u64", "arr", "u64", [2**64 - 1, 0]), ("a.i64", "arr", "i64", [-2**63, 2**63 - 1]),
    ("a.f64", "arr", "f64", [1e300, -0.0, 0.1]),
    ("a.str", "arr", "str", ["", "a", "\u00fcn\u00ef", "tab\there", "quote\"back\\slash", "new\nline"]),
    ("a.empty", "arr", "i32", []), ("a.str_empty", "arr", "str", []),
    ("a.long", "arr", "u32", list(range(0, 300, 3))),
]
# (name, ggml type name, ne, seed)
TENSORS = [
    ("tok_embd.weight", "f32", [7, 3], 1),
    ("norm.weight", "f16", [5], 2),
    ("blk.0.attn_q.weight", "q8_0", [64, 2], 3),
    ("blk.0.ffn_down.weight", "q4_K", [256, 3, 2], 4),
    ("bf", "bf16", [2, 2, 2, 2], 5),
    ("empty", "f32", [0, 4], 6),
]


def pattern(seed, n):
    k = np.arange(n, dtype=np.int64)
    return ((seed * 37 + k * 11 + (k >> 8)) & 255).astype(np.uint8).tobytes()


def qtype(name):
    return GGMLQuantizationType[name.upper()]


def n_bytes(type_name, ne):
    block, size = GGML_QUANT_SIZES[qtype(type_name)]
    return int(np.prod(ne, dtype=np.int64)) // block * size


def to_spec_value(t, v):
    if t == "str":
        return v
    if t == "bool":
        return "true" if v else "false"
    return repr(v) if isinstance(v, float) else str(v)


def same(t, got, want):
    """Equal as values of GGUF type t (f32 compared after rounding to float32)."""
    if t == "f32":
        return np.float32(got) == np.float32(want)
    if t == "f64":
        return float(got) == want and np.signbit(float(got)) == np.signbit(want)
    if t == "bool":
        return bool(got) == want
    return got == want


def same_list(t, got, want):
    return len(got) == len(want) and all(same(t, g, w) for g, w in zip(got, want))


def gguf_info_json(path, *extra):
    r = subprocess.run([GGUF_INFO, path, "--json", *extra], capture_output=True, text=True)
    check(r.returncode == 0, f"gguf-info {path}: exit {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


def our_crcs(path):
    r = subprocess.run([SPEC_WRITER, "crc", path], capture_output=True, text=True)
    check(r.returncode == 0, f"crc {path}: {r.stderr}")
    return dict(line.split() for line in r.stdout.splitlines())


def check_info_kv(info, key, t, value, elem=None):
    m = info["metadata"].get(key)
    check(m is not None, f"gguf-info: {key} missing")
    if m is None:
        return
    check(m["type"] == t, f"gguf-info: {key} type {m['type']} != {t}")
    if t == "arr":
        check(m["elem_type"] == elem and m["count"] == len(value) and not m["truncated"],
              f"gguf-info: {key} array header {m}")
        check(same_list(elem, m["value"], value), f"gguf-info: {key} = {m['value']!r} != {value!r}")
    else:
        check(same(t, m["value"], value), f"gguf-info: {key} = {m['value']!r} != {value!r}")


def test_our_writer(tmp):
    spec = {"kv": [], "tensors": []}
    for kv in KV:
        if kv[1] == "arr":
            spec["kv"].append({"key": kv[0], "type": "arr", "elem_type": kv[2],
                               "value": [to_spec_value(kv[2], v) for v in kv[3]]})
        else:
            spec["kv"].append({"key": kv[0], "type": kv[1], "value": to_spec_value(kv[1], kv[2])})
    for name, t, ne, seed in TENSORS:
        spec["tensors"].append({"name": name, "type": t, "ne": ne, "seed": seed})
    path = write_spec(SPEC_WRITER, spec, tmp, "ours")

    reader = GGUFReader(path)
    keys = [k for k in reader.fields if not k.startswith("GGUF.")]
    check(keys == [kv[0] for kv in KV] + [HASH_KEY], f"GGUFReader keys {keys}")
    for kv in KV:
        field = reader.fields[kv[0]]
        if kv[1] == "arr":
            # gguf-py lists no element type for an empty array: read it from the raw parts
            # (key length, key, type, element type, count, ...)
            elem = field.types[1] if len(field.types) > 1 else GGUFValueType(int(field.parts[3][0]))
            check(field.types[0] == GGUFValueType.ARRAY and elem == VT[kv[2]], f"{kv[0]}: types {field.types}")
            check(same_list(kv[2], field.contents(), kv[3]), f"{kv[0]}: {field.contents()!r} != {kv[3]!r}")
        else:
            check(field.types == [VT[kv[1]]], f"{kv[0]}: types {field.types}")
            check(same(kv[1], field.contents(), kv[2]), f"{kv[0]}: {field.contents()!r} != {kv[2]!r}")
    hashes = reader.fields[HASH_KEY]
    check(hashes.types == [GGUFValueType.ARRAY, GGUFValueType.UINT64] and len(hashes.contents()) == len(TENSORS),
          "hash key shape")
    check(reader.alignment == 64 and reader.data_offset % 64 == 0, "alignment")

    check([t.name for t in reader.tensors] == [t[0] for t in TENSORS], "tensor names")
    offset = 0
    for t, (name, type_name, ne, seed) in zip(reader.tensors, TENSORS):
        nb = n_bytes(type_name, ne)
        check(t.tensor_type == qtype(type_name), f"{name}: type {t.tensor_type}")
        check(list(t.shape) == ne, f"{name}: shape {list(t.shape)} != {ne}")
        check(t.n_bytes == nb, f"{name}: n_bytes {t.n_bytes} != {nb}")
        check(t.data_offset == reader.data_offset + offset, f"{name}: offset")
        check(t.data.tobytes() == pattern(seed, nb), f"{name}: data differs")
        offset += -(-nb // 64) * 64
    check(os.path.getsize(path) == reader.data_offset + offset, "file size")

    # our reader agrees with the spec too
    info = gguf_info_json(path, "--full-arrays")
    check(list(info["metadata"]) == keys, "gguf-info key order")
    for kv in KV:
        if kv[1] == "arr":
            check_info_kv(info, kv[0], "arr", kv[3], kv[2])
        else:
            check_info_kv(info, kv[0], kv[1], kv[2])
    check(info["metadata"][HASH_KEY]["value"] == [int(h) for h in hashes.contents()], "hash values differ")
    for ti, (name, type_name, ne, seed) in zip(info["tensors"], TENSORS):
        check(ti["name"] == name and ti["type"] == type_name and ti["ne"] == ne
              and ti["n_bytes"] == n_bytes(type_name, ne), f"gguf-info tensor {ti}")
    crcs = our_crcs(path)
    for name, type_name, ne, seed in TENSORS:
        check(int(crcs[name], 16) == zlib.crc32(pattern(seed, n_bytes(type_name, ne))), f"{name}: crc")

    # abbreviated arrays: count, the first 16 and a flag
    info = gguf_info_json(path)
    long = info["metadata"]["a.long"]
    check(long["count"] == 100 and long["truncated"] and long["value"] == list(range(0, 48, 3)),
          f"abbreviated array {long}")


def test_reference_writer(tmp):
    path = os.path.join(tmp, "ref.gguf")
    w = GGUFWriter(path, "test")
    w.add_custom_alignment(16)
    for kv in KV:
        if kv[1] == "arr":
            if kv[3]:  # GGUFWriter refuses empty arrays
                w.add_key_value(kv[0], kv[3], GGUFValueType.ARRAY, sub_type=VT[kv[2]])
        elif kv[0] != "general.architecture" and kv[0] != "general.alignment":
            w.add_key_value(kv[0], kv[2], VT[kv[1]])
    rng = np.random.default_rng(7)
    tensors = {
        "f32": (rng.standard_normal((3, 4)).astype(np.float32), None),
        "f16": (rng.standard_normal(5).astype(np.float16), None),
        "i32": (np.arange(8, dtype=np.int32).reshape(2, 2, 2), None),
        "q8_0": (rng.integers(0, 256, (2, 68), dtype=np.uint8), GGMLQuantizationType.Q8_0),
        "q4_K": (rng.integers(0, 256, (1, 144), dtype=np.uint8), GGMLQuantizationType.Q4_K),
    }
    for name, (arr, raw) in tensors.items():
        w.add_tensor(name, arr, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    info = gguf_info_json(path, "--full-arrays")
    check(info["alignment"] == 16 and info["data_offset"] % 16 == 0, "reference file alignment")
    check_info_kv(info, "general.architecture", "str", "test")
    for kv in KV:
        if kv[1] == "arr" and kv[3]:
            check_info_kv(info, kv[0], "arr", kv[3], kv[2])
        elif kv[1] != "arr" and kv[0] not in ("general.architecture", "general.alignment"):
            check_info_kv(info, kv[0], kv[1], kv[2])
    expect_ne = {"f32": [4, 3], "f16": [5], "i32": [2, 2, 2], "q8_0": [64, 2], "q4_K": [256, 1]}
    check([t["name"] for t in info["tensors"]] == list(tensors), "reference tensor names")
    crcs = our_crcs(path)
    for t in info["tensors"]:
        arr = tensors[t["name"]][0]
        check(t["type"] == t["name"] and t["ne"] == expect_ne[t["name"]] and t["n_bytes"] == arr.nbytes,
              f"reference tensor {t}")
        check(int(crcs[t["name"]], 16) == zlib.crc32(arr.tobytes()), f"{t['name']}: data differs")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_our_writer(tmp)
        test_reference_writer(tmp)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
