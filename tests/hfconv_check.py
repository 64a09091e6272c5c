"""hfconv end to end: convert real fixtures and synthetic checkpoints, then check
the GGUF with the reference `gguf` reader against the safetensors sources.

Facts checked come from llama.cpp's convert_hf_to_gguf.py (names, keys, q/k
un-permutation, F32 norms, tied embeddings) and transformers' permute (the
un-permutation must be its exact inverse).
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGUFReader

BUILD = os.environ["HFQ_BUILD"]
FIX = os.environ.get("HFQ_FIXTURES", "")
HFCONV = os.path.join(BUILD, "src/tools/hfconv")
MKMODEL = os.path.join(BUILD, "src/tools/mkmodel")
GGUF_INFO = os.path.join(BUILD, "src/tools/gguf-info")

failures = 0
checks = 0


def check(cond, msg):
    global failures, checks
    checks += 1
    if not cond:
        failures += 1
        print("FAIL:", msg)


def run(args, ok=True):
    r = subprocess.run(args, capture_output=True, text=True)
    if ok and r.returncode != 0:
        raise RuntimeError(f"{args} failed ({r.returncode}): {r.stderr}")
    return r


def read_safetensors(folder):
    """All tensors of a (sharded) checkpoint as float32 numpy arrays."""
    files = sorted(f for f in os.listdir(folder) if f.endswith(".safetensors"))
    out, meta = {}, {}
    for fn in files:
        with open(os.path.join(folder, fn), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            data = f.read()
        meta.update(header.pop("__metadata__", {}) or {})
        for name, info in header.items():
            b, e = info["data_offsets"]
            raw = np.frombuffer(data[b:e], dtype={"F32": np.float32, "F16": np.float16, "BF16": np.uint16}[info["dtype"]])
            if info["dtype"] == "BF16":
                arr = (raw.astype(np.uint32) << 16).view(np.float32)
            else:
                arr = raw.astype(np.float32)
            out[name] = arr.reshape(info["shape"])
    return out, meta


def hf_permute(w, n_heads):
    """transformers' convert_llama_weights_to_hf permute: GGUF/Meta -> HF order."""
    d1, d2 = w.shape
    return w.reshape(n_heads, d1 // n_heads // 2, 2, d2).transpose(0, 2, 1, 3).reshape(d1, d2)


def llamacpp_permute(w, n_heads):
    """llama.cpp's convert_hf_to_gguf LlamaModel.permute: HF -> GGUF order."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def to_bf16_rne(a):
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return r


def gguf_tensor(reader, name):
    for t in reader.tensors:
        if t.name == name:
            return t
    return None


def kv(reader, key):
    f = reader.fields.get(key)
    if f is None:
        return None
    v = f.contents()
    return v


def expected_map(cfg, arch):
    m = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
         "lm_head.weight": "output.weight"}
    per = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
           "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
           "self_attn.o_proj.weight": "attn_output.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
           "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
           "mlp.down_proj.weight": "ffn_down.weight"}
    if arch == "qwen2":
        per.update({"self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
                    "self_attn.v_proj.bias": "attn_v.bias"})
    for i in range(cfg["num_hidden_layers"]):
        for k, v in per.items():
            m[f"model.layers.{i}.{k}"] = f"blk.{i}.{v}"
    return m


def check_conversion(label, folder, out, outtype):
    cfg = json.load(open(os.path.join(folder, "config.json")))
    arch = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2"}[cfg["architectures"][0]]
    src, meta = read_safetensors(folder)
    r = GGUFReader(out)
    check(kv(r, "general.architecture") == arch, f"{label}: architecture")
    A = arch
    n_head, n_kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    want_kv = {f"{A}.embedding_length": cfg["hidden_size"], f"{A}.feed_forward_length": cfg["intermediate_size"],
               f"{A}.block_count": cfg["num_hidden_layers"], f"{A}.attention.head_count": n_head,
               f"{A}.attention.head_count_kv": n_kv, f"{A}.context_length": cfg["max_position_embeddings"],
               "general.quantization_version": 2,
               "general.file_type": {"f32": 0, "f16": 1, "bf16": 32}[outtype]}
    if A == "llama":
        want_kv[f"{A}.vocab_size"] = cfg["vocab_size"]
        want_kv[f"{A}.rope.dimension_count"] = cfg["hidden_size"] // n_head
    for k, v in want_kv.items():
        check(kv(r, k) == v, f"{label}: {k} = {kv(r, k)} expected {v}")
    check(abs(kv(r, f"{A}.attention.layer_norm_rms_epsilon") - cfg["rms_norm_eps"]) <= 1e-6 * cfg["rms_norm_eps"] + 1e-12,
          f"{label}: rms eps")
    check(abs(kv(r, f"{A}.rope.freq_base") - cfg["rope_theta"]) < 1e-3, f"{label}: rope theta")
    check(kv(r, "tokenizer.ggml.model") in ("llama", "gpt2"), f"{label}: tokenizer model")
    toks = kv(r, "tokenizer.ggml.tokens")
    check(toks is not None and len(toks) == cfg["vocab_size"], f"{label}: token count")

    names = expected_map(cfg, arch)
    tied = cfg.get("tie_word_embeddings", False) or "lm_head.weight" not in src
    if "model.embed_tokens.weight" not in src:  # stored only as lm_head (aliased)
        src["model.embed_tokens.weight"] = src["lm_head.weight"]
    if tied:
        src.pop("lm_head.weight", None)
    got = {t.name for t in r.tensors}
    want = {names[k] for k in src if k in names}
    check(got == want, f"{label}: tensor names differ: missing {sorted(want - got)[:5]} extra {sorted(got - want)[:5]}")
    check("output.weight" not in got or not tied, f"{label}: tied model must not have output.weight")

    for hf_name, arr in src.items():
        t = gguf_tensor(r, names.get(hf_name, "?"))
        if t is None:
            continue
        want_arr = arr
        if A == "llama" and hf_name.endswith("q_proj.weight"):
            want_arr = llamacpp_permute(arr, n_head)
            check(np.array_equal(hf_permute(want_arr, n_head), arr), f"{label}: q permute inverse")
        if A == "llama" and hf_name.endswith("k_proj.weight"):
            want_arr = llamacpp_permute(arr, n_kv)
            check(np.array_equal(hf_permute(want_arr, n_kv), arr), f"{label}: k permute inverse")
        check(list(t.shape) == list(reversed(arr.shape)), f"{label}: {t.name} shape {list(t.shape)}")
        is_vec = arr.ndim == 1
        tname = t.tensor_type.name
        if is_vec or outtype == "f32":
            check(tname == "F32", f"{label}: {t.name} type {tname}")
            ok = np.array_equal(np.asarray(t.data).reshape(arr.shape).view(np.float32), want_arr.astype(np.float32))
        elif outtype == "f16":
            check(tname == "F16", f"{label}: {t.name} type {tname}")
            ok = np.array_equal(np.asarray(t.data).reshape(arr.shape).view(np.uint16),
                                want_arr.astype(np.float16).view(np.uint16))
        else:
            check(tname == "BF16", f"{label}: {t.name} type {tname}")
            ok = np.array_equal(np.asarray(t.data).view(np.uint16).reshape(arr.shape), to_bf16_rne(want_arr))
        check(ok, f"{label}: {t.name} data differs")
    v = run([GGUF_INFO, "--verify", out], ok=False)
    check(v.returncode == 0, f"{label}: gguf-info --verify: {v.stdout[-300:]} {v.stderr[-300:]}")


def main():
    tmp = tempfile.mkdtemp(prefix="hfq_hfconv_")
    try:
        # real fixtures
        for model in ("stories260K", "TinyStories-656K"):
            folder = os.path.join(FIX, "models", model)
            if not os.path.isdir(folder):
                print(f"skipping {model}: fixture not found at {folder}")
                continue
            for outtype in ("f32", "f16", "bf16"):
                out = os.path.join(tmp, f"{model}-{outtype}.gguf")
                run([HFCONV, folder, "-o", out, "--outtype", outtype, "-q"])
                check_conversion(f"{model}/{outtype}", folder, out, outtype)
        # synthetic checkpoints
        synth = [
            ("llama-sharded-bf16", ["--arch", "llama", "--dtype", "bf16", "--shards", "3", "--untied",
                                    "--hidden", "128", "--ffn", "256", "--layers", "2", "--heads", "4", "--kv-heads", "2"], "auto", "bf16"),
            ("llama-tied-f16", ["--arch", "llama", "--dtype", "f16", "--tied", "--heads", "8", "--kv-heads", "8"], "f16", "f16"),
            ("mistral-f32", ["--arch", "mistral", "--dtype", "f32", "--untied", "--heads", "4", "--kv-heads", "1"], "f32", "f32"),
            ("qwen2-bias", ["--arch", "qwen2", "--dtype", "bf16", "--untied", "--heads", "4", "--kv-heads", "2"], "bf16", "bf16"),
        ]
        for label, args, outtype, expect in synth:
            folder = os.path.join(tmp, label)
            run([MKMODEL, folder, "--seed", "7"] + args)
            out = os.path.join(tmp, label + ".gguf")
            run([HFCONV, folder, "-o", out, "--outtype", outtype, "-q"])
            check_conversion(label, folder, out, expect)
        # determinism: same input, same bytes
        folder = os.path.join(tmp, "llama-sharded-bf16")
        a, b = os.path.join(tmp, "det-a.gguf"), os.path.join(tmp, "det-b.gguf")
        run([HFCONV, folder, "-o", a, "-q"])
        run([HFCONV, folder, "-o", b, "-q"])
        check(open(a, "rb").read() == open(b, "rb").read(), "conversion is not deterministic")
        # --json summary
        j = json.loads(run([HFCONV, folder, "-o", a, "-q", "--json"]).stdout)
        check(j["architecture"] == "llama" and j["tensors"] == len(GGUFReader(a).tensors), f"--json summary {j}")

        fp8_inputs(tmp)
        bad_cases(tmp)
        vocab_only(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"hfconv_check: {checks - failures}/{checks} checks passed")
    return 1 if failures else 0


def expect_error(args, needle, out, label):
    r = run(args, ok=False)
    check(r.returncode == 1, f"{label}: exit {r.returncode} (want 1); stderr {r.stderr!r}")
    check(needle in r.stderr and r.stderr.count("\n") == 1, f"{label}: stderr {r.stderr!r} lacks {needle!r}")
    check(not os.path.exists(out), f"{label}: output left behind")
    leftovers = [f for f in os.listdir(os.path.dirname(out)) if ".tmp." in f]
    check(not leftovers, f"{label}: temporary files left: {leftovers}")


def bad_cases(tmp):
    base = os.path.join(tmp, "bad-base")
    run([MKMODEL, base, "--seed", "3", "--dtype", "f32", "--untied"])
    out = os.path.join(tmp, "bad-out", "x.gguf")
    os.makedirs(os.path.dirname(out))

    def variant(name):
        d = os.path.join(tmp, name)
        shutil.copytree(base, d)
        return d

    d = variant("bad-arch")
    cfg = json.load(open(os.path.join(d, "config.json")))
    cfg["architectures"] = ["GPTNeoXForCausalLM"]
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    expect_error([HFCONV, d, "-o", out], "GPTNeoXForCausalLM' is not supported (supported: LlamaForCausalLM", out, "unknown arch")

    d = variant("bad-shape")
    cfg = json.load(open(os.path.join(d, "config.json")))
    cfg["intermediate_size"] += 2
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    expect_error([HFCONV, d, "-o", out], "does not match config.json", out, "shape mismatch")

    d = variant("bad-nan")
    path = os.path.join(d, "model.safetensors")
    raw = bytearray(open(path, "rb").read())
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    info = header["model.layers.0.mlp.up_proj.weight"]
    pos = 8 + n + info["data_offsets"][0] + 4 * 5
    raw[pos:pos + 4] = struct.pack("<f", float("nan"))
    open(path, "wb").write(raw)
    expect_error([HFCONV, d, "-o", out, "--outtype", "f16"], "model.layers.0.mlp.up_proj.weight", out, "NaN weight")

    d = variant("bad-json")
    open(os.path.join(d, "config.json"), "w").write('{"architectures": ["LlamaForCausalLM"], ')
    expect_error([HFCONV, d, "-o", out], "config.json", out, "truncated config")

    d = variant("bad-missing")
    os.remove(os.path.join(d, "model.safetensors"))
    expect_error([HFCONV, d, "-o", out], d, out, "no weights")

    r = run([HFCONV, base], ok=False)
    check(r.returncode == 2, "missing -o is a usage error (exit 2)")
    r = run([HFCONV, "--help"], ok=False)
    check(r.returncode == 0 and "--outtype" in r.stdout, "--help")


def write_safetensors(path, tensors):
    """tensors: name -> (dtype string, numpy array of the stored bytes' dtype)."""
    header, blobs, off = {}, [], 0
    for name, (dt, arr) in tensors.items():
        b = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def fp8_inputs(tmp):
    """FP8 checkpoints (per-tensor, per-channel and 128x128 block scales) are
    dequantized: each weight becomes exactly code * scale."""
    import ml_dtypes
    base = os.path.join(tmp, "fp8-base")
    run([MKMODEL, base, "--seed", "11", "--dtype", "f32", "--untied", "--hidden", "256", "--ffn", "384",
         "--heads", "4", "--kv-heads", "2", "--layers", "1"])
    src, _ = read_safetensors(base)
    cfg = json.load(open(os.path.join(base, "config.json")))
    for kind in ("tensor", "channel", "block"):
        d = os.path.join(tmp, "fp8-" + kind)
        shutil.copytree(base, d)
        os.remove(os.path.join(d, "model.safetensors"))
        out_tensors, want = {}, {}
        for name, w in src.items():
            if w.ndim != 2 or "embed" in name or "lm_head" in name:
                out_tensors[name] = ("F32", w.astype(np.float32))
                want[name] = w
                continue
            rows, cols = w.shape
            if kind == "tensor":
                scale = np.array([np.abs(w).max() / 448.0], dtype=np.float32)
                full = np.full(w.shape, scale[0], dtype=np.float32)
                scale_name, scale_arr = name + "_scale", scale
            elif kind == "channel":
                scale = (np.abs(w).max(axis=1, keepdims=True) / 448.0).astype(np.float32)
                full = np.broadcast_to(scale, w.shape)
                scale_name, scale_arr = name + "_scale", scale
            else:
                br = bc = 128
                sr, sc = -(-rows // br), -(-cols // bc)
                scale = np.zeros((sr, sc), dtype=np.float32)
                for i in range(sr):
                    for j in range(sc):
                        scale[i, j] = np.abs(w[i * br:(i + 1) * br, j * bc:(j + 1) * bc]).max() / 448.0
                full = np.repeat(np.repeat(scale, br, axis=0), bc, axis=1)[:rows, :cols]
                scale_name, scale_arr = name + "_scale_inv", scale
            codes = (w / full).astype(ml_dtypes.float8_e4m3fn)
            out_tensors[name] = ("F8_E4M3", codes.view(np.uint8))
            out_tensors[scale_name] = ("F32", scale_arr)
            want[name] = codes.astype(np.float32) * full
        if kind == "tensor":
            out_tensors["model.layers.0.self_attn.q_proj.input_scale"] = ("F32", np.array([0.5], dtype=np.float32))
        write_safetensors(os.path.join(d, "model.safetensors"), out_tensors)
        if kind == "block":
            c = dict(cfg)
            c["quantization_config"] = {"quant_method": "fp8", "weight_block_size": [128, 128]}
            json.dump(c, open(os.path.join(d, "config.json"), "w"))
        out = os.path.join(tmp, f"fp8-{kind}.gguf")
        r = run([HFCONV, d, "-o", out, "--outtype", "f32", "-q"], ok=False)
        check(r.returncode == 0, f"fp8 {kind}: hfconv failed: {r.stderr}")
        if r.returncode:
            continue
        rd = GGUFReader(out)
        names = expected_map(cfg, "llama")
        n_head, n_kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        for hf_name, arr in want.items():
            t = gguf_tensor(rd, names[hf_name])
            if hf_name.endswith("q_proj.weight"):
                arr = llamacpp_permute(arr, n_head)
            if hf_name.endswith("k_proj.weight"):
                arr = llamacpp_permute(arr, n_kv)
            got = np.asarray(t.data).reshape(arr.shape)
            check(np.array_equal(got, arr.astype(np.float32)), f"fp8 {kind}: {t.name} differs")
    # a weight without its scale is refused
    d = os.path.join(tmp, "fp8-noscale")
    shutil.copytree(os.path.join(tmp, "fp8-tensor"), d)
    path = os.path.join(d, "model.safetensors")
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    tensors = {}
    for name, info in header.items():
        if name.endswith("up_proj.weight_scale"):
            continue
        b, e = info["data_offsets"]
        dt = {"F32": np.float32, "F8_E4M3": np.uint8}[info["dtype"]]
        tensors[name] = (info["dtype"], np.frombuffer(raw[8 + n + b:8 + n + e], dtype=dt).reshape(info["shape"]))
    write_safetensors(path, tensors)
    out = os.path.join(tmp, "fp8-noscale-out", "x.gguf")
    os.makedirs(os.path.dirname(out))
    expect_error([HFCONV, d, "-o", out], "FP8 weight without a weight_scale tensor", out, "fp8 without scale")


def vocab_only(tmp):
    for model in ("stories260K", "TinyStories-656K"):
        folder = os.path.join(FIX, "models", model)
        if not os.path.isdir(folder):
            continue
        # tokenizer files alone, no config.json or weights
        d = os.path.join(tmp, "vocab-" + model)
        os.makedirs(d)
        for f in os.listdir(folder):
            if f.startswith(("tokenizer", "special_tokens")):
                shutil.copy(os.path.join(folder, f), d)
        out = os.path.join(tmp, f"vocab-{model}.gguf")
        run([HFCONV, d, "-o", out, "--vocab-only", "-q"])
        r = GGUFReader(out)
        check(len(r.tensors) == 0, f"vocab-only {model}: has tensors")
        full = GGUFReader(os.path.join(tmp, f"{model}-f32.gguf"))
        for key in full.fields:
            if key.startswith("tokenizer."):
                check(key in r.fields and r.fields[key].contents() == full.fields[key].contents(),
                      f"vocab-only {model}: {key} differs from the full conversion")


if __name__ == "__main__":
    sys.exit(main())
