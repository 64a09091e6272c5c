"""mkmodel: synthetic checkpoints read back with json + numpy, the `tokenizers`
library and our own safetensors reader (test_safetensors_dump).

usage: mkmodel_check.py MKMODEL TEST_SAFETENSORS_DUMP
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import tokenizers

MKMODEL, DUMP = sys.argv[1], sys.argv[2]
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


def run(args, expect_rc=0):
    p = subprocess.run([MKMODEL] + args, capture_output=True, text=True)
    check(p.returncode == expect_rc, f"mkmodel {args}: rc {p.returncode}, stderr {p.stderr!r}")
    return p


def make(root, name, *opts):
    out = os.path.join(root, name)
    run([out] + list(opts))
    return out


# ------------------------------------------------------------ reading

def read_header(path):
    """Header of one safetensors file, as the spec lays it out."""
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header_text = raw[8:8 + hlen]
    check(hlen % 8 == 0, f"{path}: header length {hlen} not a multiple of 8")
    check(header_text.rstrip(b" ") == header_text.rstrip(), f"{path}: padding is not spaces")
    header = json.loads(header_text)
    return raw, hlen, header


def to_f32(buf, dtype, shape):
    if dtype == "F32":
        return np.frombuffer(buf, "<f4").reshape(shape)
    if dtype == "F16":
        return np.frombuffer(buf, "<f2").astype(np.float32).reshape(shape)
    if dtype == "BF16":
        u = np.frombuffer(buf, "<u2").astype(np.uint32) << 16
        return u.view(np.float32).reshape(shape)
    raise ValueError(dtype)


def load(model_dir):
    """{name: (dtype, shape, float32 array, shard file, absolute offset, raw bytes)}."""
    index_path = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            index = json.load(f)
        files = sorted(set(index["weight_map"].values()))
    else:
        index, files = None, ["model.safetensors"]
    tensors = {}
    for fname in files:
        raw, hlen, header = read_header(os.path.join(model_dir, fname))
        check(header.get("__metadata__") == {"format": "pt"}, f"{fname}: metadata")
        names = [k for k in header if k != "__metadata__"]
        check(names == sorted(names), f"{fname}: tensors not in name order")
        end = 0
        for name in names:
            e = header[name]
            b, t = e["data_offsets"]
            check(b == end, f"{fname}: {name} does not follow the previous tensor")
            end = t
            data = raw[8 + hlen + b:8 + hlen + t]
            tensors[name] = (e["dtype"], tuple(e["shape"]),
                             to_f32(data, e["dtype"], e["shape"]), fname, 8 + hlen + b, data)
        check(8 + hlen + end == len(raw), f"{fname}: data section has trailing bytes")
    if index is not None:
        check(set(index["weight_map"]) == set(tensors), "index and shards name different tensors")
        for name, (_, _, _, fname, _, _) in tensors.items():
            check(index["weight_map"].get(name) == fname, f"index maps {name} elsewhere")
        total = sum(len(v[5]) for v in tensors.values())
        check(index["metadata"]["total_size"] == total, "index total_size")
    return tensors


def expected_shapes(cfg):
    h, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd = h // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    s = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    if not cfg["tie_word_embeddings"]:
        s["lm_head.weight"] = (v, h)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        s.update({p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
                  p + "self_attn.q_proj.weight": (q, h), p + "self_attn.k_proj.weight": (kv, h),
                  p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, q),
                  p + "mlp.gate_proj.weight": (f, h), p + "mlp.up_proj.weight": (f, h),
                  p + "mlp.down_proj.weight": (h, f)})
        if cfg["model_type"] == "qwen2":
            s.update({p + "self_attn.q_proj.bias": (q,), p + "self_attn.k_proj.bias": (kv,),
                      p + "self_attn.v_proj.bias": (kv,)})
    return s


def check_model(model_dir, want):
    """Config fields in `want`, tensor names/shapes/dtypes, value statistics."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    for k, v in want.items():
        check(cfg.get(k) == v, f"{model_dir}: config {k} = {cfg.get(k)!r}, want {v!r}")
    dtype = {"float32": "F32", "float16": "F16", "bfloat16": "BF16"}[cfg["torch_dtype"]]
    tensors = load(model_dir)
    shapes = expected_shapes(cfg)
    check(set(tensors) == set(shapes), f"{model_dir}: names {sorted(set(tensors) ^ set(shapes))}")
    for name, (dt, shape, x, _, _, _) in tensors.items():
        check(dt == dtype, f"{name}: dtype {dt}")
        check(shape == shapes.get(name), f"{name}: shape {shape}")
        check(np.isfinite(x).all(), f"{name}: non-finite values")
    h, layers = cfg["hidden_size"], cfg["num_hidden_layers"]
    outliers = cfg["hfq_synthetic"]["outlier_channels"]
    for name, (_, _, x, _, _, _) in tensors.items():
        if name.endswith("norm.weight"):
            plain = np.delete(x, outliers) if "layers." in name else x
            check(abs(plain.mean() - 1) < 0.02 and plain.std() < 0.05, f"{name}: not ~1")
            if "layers." in name and outliers:
                check(np.all(np.abs(x[outliers] / 8 - 1) < 0.15), f"{name}: outliers not ~8")
            continue
        if name.endswith(".bias"):
            want_std = 0.02
        elif "o_proj" in name or "down_proj" in name:
            want_std = 1 / np.sqrt(x.shape[1] * 2 * layers)
        else:
            want_std = 1 / np.sqrt(h)
        # the standard deviation of a sample std is about std / sqrt(2 n)
        check(abs(x.std() / want_std - 1) < max(0.05, 4 / np.sqrt(2 * x.size))
              and abs(x.mean()) < 4 * want_std / np.sqrt(x.size),
              f"{name}: std {x.std():.4g}, want {want_std:.4g}")
    return cfg, tensors


def compare_with_our_reader(model_dir, tensors):
    p = subprocess.run([DUMP, model_dir], capture_output=True, text=True)
    check(p.returncode == 0, f"dump {model_dir}: {p.stderr}")
    if p.returncode:
        return
    ours = json.loads(p.stdout)
    check(ours["format"] == "pt", "our reader: metadata format")
    check(len(ours["tensors"]) == len(tensors), "our reader: tensor count")
    for t in ours["tensors"]:
        dt, shape, _, fname, offset, data = tensors[t["name"]]
        b = np.frombuffer(data, np.uint8).astype(np.uint64)
        checksum = int((b * (np.arange(len(b), dtype=np.uint64) % 251 + 1)).sum())
        check((t["dtype"], tuple(t["shape"]), os.path.basename(ours["shards"][t["shard"]]),
               t["offset"], t["nbytes"], t["checksum"])
              == (dt, shape, fname, offset, len(data), checksum), f"our reader differs on {t['name']}")


def files_of(d):
    out = {}
    for n in sorted(os.listdir(d)):
        with open(os.path.join(d, n), "rb") as f:
            out[n] = f.read()
    return out


# --------------------------------------------------------- forward pass

def rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def forward(cfg, t, ids):
    """Hugging Face Llama forward pass in numpy (float64): last position's logits."""
    w = {k: v[2].astype(np.float64) for k, v in t.items()}
    h, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, n, eps = h // nh, len(ids), cfg["rms_norm_eps"]
    x = w["model.embed_tokens.weight"][ids]
    inv = cfg["rope_theta"] ** (-np.arange(0, hd, 2) / hd)
    ang = np.arange(n)[:, None] * inv[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))

    def rope(v):   # v: [heads, n, hd], rotate-half layout
        rot = np.concatenate([-v[..., hd // 2:], v[..., :hd // 2]], -1)
        return v * cos + rot * sin

    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a = rms(x, w[p + "input_layernorm.weight"], eps)
        proj = {}
        for k in "qkv":
            proj[k] = a @ w[p + f"self_attn.{k}_proj.weight"].T + w.get(p + f"self_attn.{k}_proj.bias", 0)
        q = rope(proj["q"].reshape(n, nh, hd).transpose(1, 0, 2))
        k = rope(proj["k"].reshape(n, nkv, hd).transpose(1, 0, 2)).repeat(nh // nkv, 0)
        v = proj["v"].reshape(n, nkv, hd).transpose(1, 0, 2).repeat(nh // nkv, 0)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(hd) + np.triu(np.full((n, n), -np.inf), 1)
        s = np.exp(s - s.max(-1, keepdims=True))
        o = (s / s.sum(-1, keepdims=True)) @ v
        x = x + o.transpose(1, 0, 2).reshape(n, h) @ w[p + "self_attn.o_proj.weight"].T
        m = rms(x, w[p + "post_attention_layernorm.weight"], eps)
        g, u = m @ w[p + "mlp.gate_proj.weight"].T, m @ w[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return rms(x[-1], w["model.norm.weight"], eps) @ head.T


# ----------------------------------------------------------------- tests

def test_configurations(root):
    d = make(root, "default")
    cfg, t = check_model(d, {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                             "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
                             "num_attention_heads": 4, "num_key_value_heads": 2,
                             "vocab_size": 512, "max_position_embeddings": 256,
                             "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
                             "tie_word_embeddings": False, "torch_dtype": "float32",
                             "bos_token_id": 1, "eos_token_id": 2})
    compare_with_our_reader(d, t)
    logits = forward(cfg, t, [1, 300, 301, 302, 303, 304, 305, 306])
    check(np.isfinite(logits).all() and 0.2 < logits.std() < 5, f"logits std {logits.std()}")

    d = make(root, "sharded", "--shards", "3", "--dtype", "bf16", "--hidden", "256", "--ffn", "512",
             "--heads", "4", "--kv-heads", "4", "--vocab", "1000", "--seed", "7")
    check(sorted(n for n in os.listdir(d) if n.endswith(".safetensors"))
          == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)], "shard file names")
    _, t = check_model(d, {"torch_dtype": "bfloat16", "hidden_size": 256, "intermediate_size": 512,
                           "vocab_size": 1000})
    compare_with_our_reader(d, t)

    # same seed in f32 and one file: the bf16 shards hold the same values, rounded to nearest even
    d32 = make(root, "sharded-f32", "--hidden", "256", "--ffn", "512", "--heads", "4",
               "--kv-heads", "4", "--vocab", "1000", "--seed", "7")
    t32 = load(d32)
    for name, v in t32.items():
        u = v[2].view(np.uint32).astype(np.uint64)
        rne = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        check(np.array_equal(rne, np.frombuffer(t[name][5], "<u2").reshape(v[1])),
              f"{name}: bf16 is not the f32 value rounded")

    d = make(root, "tied-f16", "--tied", "--dtype", "f16", "--seed", "7", "--hidden", "256",
             "--ffn", "512", "--heads", "4", "--kv-heads", "4", "--vocab", "1000")
    _, t = check_model(d, {"tie_word_embeddings": True, "torch_dtype": "float16"})
    check("lm_head.weight" not in t, "tied model stores lm_head")
    for name, v in t.items():
        check(np.array_equal(v[2], t32[name][2].astype(np.float16).astype(np.float32)),
              f"{name}: f16 is not the f32 value rounded")

    d = make(root, "gqa", "--hidden", "128", "--heads", "8", "--kv-heads", "2", "--layers", "3",
             "--outliers", "5", "--rms-eps", "1e-6", "--rope-theta", "500000")
    cfg, t = check_model(d, {"num_attention_heads": 8, "num_key_value_heads": 2,
                             "num_hidden_layers": 3, "rms_norm_eps": 1e-6, "rope_theta": 500000.0})
    check(t["model.layers.2.self_attn.k_proj.weight"][1] == (32, 128), "GQA k_proj shape")
    ch = cfg["hfq_synthetic"]["outlier_channels"]
    check(len(ch) == 5 and ch == sorted(set(ch)) and all(0 <= c < 128 for c in ch), f"outliers {ch}")
    check(np.isfinite(forward(cfg, t, [1, 400, 401, 402])).all(), "GQA forward")

    d = make(root, "qwen2", "--arch", "qwen2", "--dtype", "bf16")
    cfg, t = check_model(d, {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
                             "use_sliding_window": False})
    check(np.isfinite(forward(cfg, t, [1, 270, 280])).all(), "qwen2 forward")
    d = make(root, "mistral", "--arch", "mistral", "--dtype", "f16", "--shards", "2")
    check_model(d, {"architectures": ["MistralForCausalLM"], "model_type": "mistral",
                    "sliding_window": None})

    # K-quant friendly shapes
    d = make(root, "k256", "--hidden", "256", "--ffn", "512", "--heads", "2", "--kv-heads", "1")
    check_model(d, {"hidden_size": 256, "intermediate_size": 512})


def test_determinism(root):
    opts = ["--shards", "2", "--dtype", "bf16", "--vocab", "700"]
    a, b = make(root, "a", *opts, "--seed", "3"), make(root, "b", *opts, "--seed", "3")
    c = make(root, "c", *opts, "--seed", "4")
    fa, fb, fc = files_of(a), files_of(b), files_of(c)
    check(fa == fb, "same seed, different bytes")
    for n in fa:
        if n.endswith(".safetensors"):
            check(fa[n] != fc[n], f"{n}: different seeds, same bytes")
        elif n != "config.json":
            check(fa[n] == fc[n], f"{n}: depends on the seed")
    # sharding and thread count do not change the values
    one = load(make(root, "one", "--dtype", "bf16", "--vocab", "700", "--seed", "3"))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run([MKMODEL, os.path.join(root, "one-t1"), "--dtype", "bf16", "--vocab", "700",
                    "--seed", "3"], env=env, capture_output=True, check=True)
    check(files_of(os.path.join(root, "one")) == files_of(os.path.join(root, "one-t1")),
          "thread count changes the bytes")
    two = load(a)
    check(all(one[n][5] == two[n][5] for n in one), "sharding changes the values")
    # rewriting a folder with another sharding leaves no index or file that shadows it
    run([a, "--vocab", "700", "--seed", "3"])
    check(not os.path.exists(os.path.join(a, "model.safetensors.index.json")), "stale index kept")
    run([a, *opts, "--seed", "3"])
    check(not os.path.exists(os.path.join(a, "model.safetensors")), "stale model.safetensors kept")
    check(files_of(a) == fb, "rewritten folder differs")


def test_tokenizer(root):
    for vocab in (300, 512, 4000, 32000):
        d = make(root, f"tok{vocab}", "--vocab", str(vocab), "--hidden", "16", "--heads", "2",
                 "--kv-heads", "1", "--ffn", "16", "--layers", "1")
        path = os.path.join(d, "tokenizer.json")
        tok = tokenizers.Tokenizer.from_file(path)
        check(tok.get_vocab_size() == vocab, f"vocab {vocab}: size {tok.get_vocab_size()}")
        with open(path) as f:
            model = json.load(f)["model"]
        v = model["vocab"]
        check(list(v.values()) == list(range(vocab)), f"vocab {vocab}: ids not 0..n-1 in order")
        check([k for k, i in v.items() if i < 3] == ["<unk>", "<s>", "</s>"], "special tokens")
        check(all(v[f"<0x{b:02X}>"] == 3 + b for b in range(256)), "byte tokens")
        check(model["byte_fallback"] and model["fuse_unk"] and model["unk_token"] == "<unk>", "BPE flags")
        bad = [m for m in model["merges"] if len(m.split(" ")) != 2 or m.split(" ")[0] not in v
               or m.split(" ")[1] not in v or m.replace(" ", "") not in v]
        check(not bad, f"vocab {vocab}: inconsistent merges {bad[:3]}")
        for text in ["Once upon a time, the girl walked to the river.",
                     "Numbers: 12, 345 and 6789!  Two  spaces, tabs\tand\nnewlines.",
                     "Caf\u00e9, \u00fcber, \u4e2d\u6587 and emoji \U0001F600 fall back to bytes."]:
            enc = tok.encode(text)
            check(enc.ids[0] == 1, f"vocab {vocab}: no BOS")
            check(max(enc.ids) < vocab, f"vocab {vocab}: id out of range")
            check(tok.decode(enc.ids) == text, f"vocab {vocab}: {tok.decode(enc.ids)!r} != {text!r}")
        if vocab >= 512:   # frequent words of the text are single tokens
            got = tok.encode("the girl and the dog").tokens
            check(got == ["<s>", "\u2581the", "\u2581girl", "\u2581and", "\u2581the", "\u2581dog"],
                  f"vocab {vocab}: {got}")
        with open(os.path.join(d, "tokenizer_config.json")) as f:
            tc = json.load(f)
        check((tc["bos_token"], tc["eos_token"], tc["add_bos_token"], tc["add_eos_token"],
               tc["model_max_length"]) == ("<s>", "</s>", True, False, 256), "tokenizer_config")
        with open(os.path.join(d, "special_tokens_map.json")) as f:
            check(json.load(f)["bos_token"] == "<s>", "special_tokens_map")
        with open(os.path.join(d, "generation_config.json")) as f:
            gc = json.load(f)
        check((gc["bos_token_id"], gc["eos_token_id"]) == (1, 2), "generation_config")


def test_usage(root):
    p = run(["--help"])
    check("--kv-heads" in p.stdout and "--outliers" in p.stdout, "--help lists the options")
    for args in (["--heads", "3", os.path.join(root, "x")], ["--kv-heads", "3", os.path.join(root, "x")],
                 ["--arch", "gpt2", os.path.join(root, "x")], ["--vocab", "12", os.path.join(root, "x")],
                 ["--hidden", "ten", os.path.join(root, "x")], ["--shards", "0", os.path.join(root, "x")],
                 ["--outliers", "65", os.path.join(root, "x")], []):
        p = run(args, expect_rc=2)
        check(p.stderr.count("\n") == 1 and p.stderr.startswith("mkmodel"), f"{args}: {p.stderr!r}")
    check(not os.path.exists(os.path.join(root, "x")), "a refused command wrote output")
    with open(os.path.join(root, "file"), "w") as f:
        f.write("x")
    p = run([os.path.join(root, "file", "sub")], expect_rc=2)
    check("file/sub" in p.stderr and p.stderr.count("\n") == 1, f"unwritable: {p.stderr!r}")


with tempfile.TemporaryDirectory() as root:
    test_configurations(root)
    test_determinism(root)
    test_tokenizer(root)
    test_usage(root)
print(f"mkmodel_check: {failures} failure(s)")
sys.exit(1 if failures else 0)
