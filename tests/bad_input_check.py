"""Bad-input corpus: every tool meets broken files and hostile environments.

Each case builds its broken input at test time from small good ones (a mkmodel
checkpoint, its hfconv GGUF, fixture copies) or takes a fuzz-found regression
input from tests/bad_input/fuzz/, runs one tool, and checks:
  - the exit code (1 for bad input / I/O failure, 2 for usage, 4 for --verify);
  - stderr is exactly one line and holds the case's error substring;
  - no output file and no temporary (*.tmp.*) file is left behind.
  - files a case names as the run's inputs are byte-identical afterwards.
Cases: truncated files, lying sizes and offsets, wrong dtypes, NaN/Inf weights,
mismatched shards, hostile config/tokenizer files, non-UTF-8 text, disk full
(RLIMIT_FSIZE, SIGXFSZ ignored), a read-only output folder (as nobody when run
as root), a missing output folder, outputs that are (or link to) an input or
are a folder, and usage errors (one line, the nearest option suggested);
--version and -h of every tool.

usage: bad_input_check.py [-v] [CASE-SUBSTRING...]   (env: HFQ_BUILD, HFQ_SOURCE)
"""
import json
import re
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile

from phi3_fixture import phi3_checkpoint

BUILD = os.environ["HFQ_BUILD"]
SOURCE = os.environ.get("HFQ_SOURCE", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(BUILD, "src", "tools")
HFCONV, QUANTIZE, TOKENIZE, MKMODEL, GGUF_INFO, PPL_EVAL = (
    os.path.join(TOOLS, t) for t in ("hfconv", "quantize", "tokenize", "mkmodel", "gguf-info", "ppl-eval"))
REGRESS = os.path.join(SOURCE, "tests", "bad_input", "fuzz")
VERBOSE = "-v" in sys.argv
ONLY = [a for a in sys.argv[1:] if a != "-v"]

CASES = []


def case(name, expect, code=1, stdout=None):
    """Registers a case: fn(work) -> (argv, outputs, preexec[, unchanged])
    where outputs are paths that must not exist afterwards (their folders are
    scanned for *.tmp.* files) and unchanged are files or folders that must
    be byte-identical afterwards (and their folders free of *.tmp.* files).
    stdout: a substring the standard output must hold."""
    def add(fn):
        CASES.append((name, expect, code, stdout, fn))
        return fn
    return add


# ---------------------------------------------------------------- helpers

def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, **kw)


def must(argv):
    r = run(argv)
    if r.returncode != 0:
        raise RuntimeError(f"{argv} failed: {r.stderr.decode(errors='replace')}")
    return r


def st_read(path):
    raw = bytearray(open(path, "rb").read())
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), 8 + n, raw


def st_write(path, header, data):
    h = json.dumps(header).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + bytes(data))


def gguf_layout(path):
    """gguf-info --json of a good file: data_offset and the tensor table."""
    return json.loads(must([GGUF_INFO, path, "--json", "--no-tensors"]).stdout) | {
        "tensors": json.loads(must([GGUF_INFO, path, "--json"]).stdout)["tensors"]}


def patch(path, offset, data):
    raw = bytearray(open(path, "rb").read())
    raw[offset:offset + len(data)] = data
    open(path, "wb").write(raw)


def truncate(path, n):
    raw = open(path, "rb").read()
    open(path, "wb").write(raw[:n])


def disk_full():
    """preexec: files may not grow past 64 KiB; writing further fails with EFBIG."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))


def read_only_dir(work, name):
    """A folder the tool cannot write into, and the preexec that makes it so
    (root ignores permission bits: the tool then runs as nobody)."""
    d = os.path.join(work, name)
    os.makedirs(d)
    os.chmod(d, 0o555)
    if os.geteuid() != 0:
        return d, None
    for p in (work, os.path.dirname(work)):   # nobody must reach the inputs
        os.chmod(p, 0o755)

    def as_nobody():
        os.setgid(65534)
        os.setuid(65534)
    return d, as_nobody


class Base:
    """The good inputs every case starts from, built once."""

    def __init__(self, tmp):
        self.tmp = tmp
        os.makedirs(tmp)
        self.model = os.path.join(tmp, "model")            # llama, f32, untied, 2 layers
        must([MKMODEL, self.model, "--seed", "7"])
        self.model_bf16 = os.path.join(tmp, "model-bf16")
        must([MKMODEL, self.model_bf16, "--dtype", "bf16", "--layers", "1"])
        self.sharded = os.path.join(tmp, "sharded")
        must([MKMODEL, self.sharded, "--shards", "2"])
        self.other_sharded = os.path.join(tmp, "other-sharded")
        must([MKMODEL, self.other_sharded, "--shards", "2", "--hidden", "128", "--heads", "4"])
        self.gguf = os.path.join(tmp, "model-f16.gguf")
        must([HFCONV, self.model, "-o", self.gguf, "-q"])
        self.q8 = os.path.join(tmp, "model-q8_0.gguf")
        must([QUANTIZE, self.gguf, self.q8, "Q8_0"])
        self.layout = gguf_layout(self.gguf)

    def copy_model(self, work, src=None):
        d = os.path.join(work, "in")
        shutil.copytree(src or self.model, d)
        return d

    def copy_gguf(self, work, src=None):
        p = os.path.join(work, "in.gguf")
        shutil.copy(src or self.gguf, p)
        return p

    def tensor(self, name):
        return next(t for t in self.layout["tensors"] if t["name"] == name)


B = None   # the Base, set in main


def out_in(work):
    d = os.path.join(work, "out")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, "x.gguf")


def hfconv_case(work, model, *extra):
    out = out_in(work)
    return [HFCONV, model, "-o", out, "-q", *extra], [out], None


def hfconv_with(work, filename, change, *extra, src=None):
    """hfconv on a copy of the model (or src) whose file `filename` was changed by change(path)."""
    m = B.copy_model(work, src)
    change(os.path.join(m, filename))
    return hfconv_case(work, m, *extra)


def cut_to(fraction):
    return lambda p: truncate(p, int(os.path.getsize(p) * fraction))


def regression(*parts):
    """change(): replace the file with a fuzz-found regression input."""
    return lambda p: shutil.copy(os.path.join(REGRESS, *parts), p)


def quantize_case(work, gguf, preset="Q8_0", *extra):
    out = out_in(work)
    return [QUANTIZE, gguf, out, preset, *extra], [out], None


def export_case(work, gguf):
    """An FP8_DYNAMIC export of gguf (a bad input made for the case, kept as it was)."""
    out = os.path.join(work, "ct")
    return [QUANTIZE, gguf, "--export", "compressed-tensors", out, "FP8_DYNAMIC", "--quiet"], [out], None, [gguf]


def set_weight(model, name, fmt, value, index=5):
    """Overwrites element `index` of tensor `name` in model.safetensors."""
    path = os.path.join(model, "model.safetensors")
    header, start, raw = st_read(path)
    size = struct.calcsize(fmt)
    pos = start + header[name]["data_offsets"][0] + size * index
    raw[pos:pos + size] = struct.pack(fmt, value)
    open(path, "wb").write(raw)


def edit_st_header(model, fn):
    path = os.path.join(model, "model.safetensors")
    header, start, raw = st_read(path)
    fn(header)
    st_write(path, header, raw[start:])


def edit_json(path, fn):
    obj = json.load(open(path))
    fn(obj)
    json.dump(obj, open(path, "w"))


UP = "model.layers.0.mlp.up_proj.weight"

# ---------------------------------------------------------------- hfconv: safetensors


@case("hfconv/st-truncated-data", "past the end of the data section")
def _(work):
    return hfconv_with(work, "model.safetensors", cut_to(0.6))


@case("hfconv/st-short-file", "file too short (5 bytes) for a safetensors header")
def _(work):
    return hfconv_with(work, "model.safetensors", lambda p: truncate(p, 5))


@case("hfconv/st-header-length-huge", "header length 1099511627776 exceeds the 100 MB limit")
def _(work):
    return hfconv_with(work, "model.safetensors", lambda p: patch(p, 0, struct.pack("<Q", 1 << 40)))


@case("hfconv/st-header-length-past-eof", "runs past the end of the file")
def _(work):
    return hfconv_with(work, "model.safetensors", lambda p: patch(p, 0, struct.pack("<Q", os.path.getsize(p))))


@case("hfconv/st-offsets-span-lie", f"tensor '{UP}': data_offsets span")
def _(work):
    m = B.copy_model(work)
    edit_st_header(m, lambda h: h[UP]["data_offsets"].__setitem__(1, h[UP]["data_offsets"][1] - 4))
    return hfconv_case(work, m)


@case("hfconv/st-offsets-overlap", "data overlaps tensor")
def _(work):
    m = B.copy_model(work)
    down = "model.layers.0.mlp.down_proj.weight"

    def overlap(h):   # same size, so only the overlap is wrong
        h[down]["data_offsets"] = list(h["model.layers.0.mlp.gate_proj.weight"]["data_offsets"])
    edit_st_header(m, overlap)
    return hfconv_case(work, m)


@case("hfconv/st-dtype-unknown", f"tensor '{UP}': unknown dtype 'F12'")
def _(work):
    m = B.copy_model(work)
    edit_st_header(m, lambda h: h[UP].__setitem__("dtype", "F12"))
    return hfconv_case(work, m)


@case("hfconv/st-dtype-wrong", f"tensor '{UP}': dtype I32 is not supported for weights")
def _(work):
    m = B.copy_model(work)
    edit_st_header(m, lambda h: h[UP].__setitem__("dtype", "I32"))   # same size: only the type is wrong
    return hfconv_case(work, m)


@case("hfconv/st-shape-vs-config", "tensor 'model.layers.0.mlp.down_proj.weight': shape [64, 172] does not match "
       "config.json (expected [64, 128])")
def _(work):
    return hfconv_with(work, "config.json", lambda p: edit_json(p, lambda c: c.__setitem__("intermediate_size", 128)))


@case("hfconv/nan-weight-f32", f"tensor '{UP}': row 0 holds NaN or Inf")
def _(work):
    m = B.copy_model(work)
    set_weight(m, UP, "<f", float("nan"))
    return hfconv_case(work, m)


@case("hfconv/inf-weight-bf16", f"tensor '{UP}': row 0 holds NaN or Inf")
def _(work):
    m = B.copy_model(work, B.model_bf16)
    set_weight(m, UP, "<H", 0x7F80)   # +Inf in bfloat16
    return hfconv_case(work, m, "--outtype", "auto")


# ---------------------------------------------------------------- hfconv: shards

SHARD1, SHARD2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"


INDEX = "model.safetensors.index.json"


@case("hfconv/shards-wrong-map", f"is mapped to {SHARD2} but stored in {SHARD1}")
def _(work):
    m = B.copy_model(work, B.sharded)

    def remap(ix):
        name = next(k for k, v in ix["weight_map"].items() if v == SHARD1)
        ix["weight_map"][name] = SHARD2
    edit_json(os.path.join(m, INDEX), remap)
    return hfconv_case(work, m)


@case("hfconv/shards-missing-file", f"{SHARD2}: cannot open: No such file or directory")
def _(work):
    m = B.copy_model(work, B.sharded)
    os.remove(os.path.join(m, SHARD2))
    return hfconv_case(work, m)


@case("hfconv/shards-unlisted-tensor", "not listed in")
def _(work):
    m = B.copy_model(work, B.sharded)
    edit_json(os.path.join(m, INDEX), lambda ix: ix["weight_map"].pop(sorted(ix["weight_map"])[0]))
    return hfconv_case(work, m)


@case("hfconv/shards-from-two-models", "does not match config.json")
def _(work):
    m = B.copy_model(work, B.sharded)
    shutil.copy(os.path.join(B.other_sharded, SHARD2), os.path.join(m, SHARD2))
    return hfconv_case(work, m)


@case("hfconv/shards-index-newline (fuzz)", "/in/?: cannot open: No such file or directory")
def _(work):
    return hfconv_with(work, INDEX, regression("st_index", "shard_name_newline.json"), src=B.sharded)


# ---------------------------------------------------------------- hfconv: config / tokenizer


@case("hfconv/config-hidden-6e30 (fuzz)", "config.json: field 'hidden_size' = 6e+30 is out of range")
def _(work):
    return hfconv_with(work, "config.json", regression("hf_config", "hidden_size_6e30.json"))


@case("hfconv/config-rope-theta-inf", "config.json: field 'rope_theta' is not a finite number")
def _(work):
    return hfconv_with(work, "config.json", lambda p: open(p, "w").write(
        open(os.path.join(B.model, "config.json")).read().replace('"rope_theta":', '"rope_theta": 1e400, "x":')))


@case("hfconv/config-not-object", "config.json: top level is not a JSON object")
def _(work):
    return hfconv_with(work, "config.json", lambda p: open(p, "w").write("[1, 2]"))


def gemma_config(arch, **changes):
    """An edit making mkmodel's config a Gemma one (the refusals below stop
    at config.json, before any tensor): arch, tanh GELU, llama.cpp's
    query_pre_attn_scalar, a window of 32 below the context, then changes."""
    def edit(c):
        c.update(architectures=[arch], hidden_act="gelu_pytorch_tanh", hidden_activation="gelu_pytorch_tanh",
                 head_dim=c["hidden_size"] // c["num_attention_heads"], sliding_window=32,
                 max_position_embeddings=256)
        c["query_pre_attn_scalar"] = c["head_dim"]
        for k, v in changes.items():
            if v is None:
                c.pop(k, None)
            else:
                c[k] = v
    return lambda p: edit_json(p, edit)


GEMMA_REFUSALS = [
    ("gemma2-query-pre-attn-scalar", "Gemma2ForCausalLM", dict(query_pre_attn_scalar=99),
     "field 'query_pre_attn_scalar' = 99: only 16 (the scale llama.cpp computes) is supported for gemma2"),
    ("gemma2-layer-types", "Gemma2ForCausalLM", dict(layer_types=["full_attention", "sliding_attention"]),
     "field 'layer_types': layer 0 is full attention; gemma2 slides all layers but every 2-th"),
    ("gemma3-window-pattern", "Gemma3ForCausalLM", dict(sliding_window_pattern=2),
     "field 'sliding_window_pattern': layer 1 is full attention; gemma3 slides all layers but every 6-th"),
    ("gemma2-silu", "Gemma2ForCausalLM", dict(hidden_act="silu", hidden_activation=None),
     "field 'hidden_act' = 'silu': not computed for gemma2 (its feed-forward is GeGLU)"),
    ("llama-gelu", "LlamaForCausalLM", dict(sliding_window=None),
     "field 'hidden_activation' = 'gelu_pytorch_tanh': not computed for llama"),
    ("gemma2-act-disagree", "Gemma2ForCausalLM", dict(hidden_act="silu"),
     "field 'hidden_activation' = 'gelu_pytorch_tanh': disagrees with 'hidden_act' = 'silu'"),
    ("gemma3-attn-softcap", "Gemma3ForCausalLM", dict(attn_logit_softcapping=50.0),
     "field 'attn_logit_softcapping' = 50: soft-capping is not supported for gemma3"),
    ("gemma2-softcap-negative", "Gemma2ForCausalLM", dict(final_logit_softcapping=-30.0),
     "field 'final_logit_softcapping' = -30: must be positive"),
    ("gemma3-bidirectional", "Gemma3ForCausalLM", dict(use_bidirectional_attention=True),
     "field 'use_bidirectional_attention' = true: bidirectional attention is not supported"),
    ("gemma3-mm-final-softcap", "Gemma3ForConditionalGeneration", dict(final_logit_softcapping=30.0),
     "field 'final_logit_softcapping' = 30: Gemma3ForConditionalGeneration does not apply it"),
]


def gemma_refusal(changes, arch):
    return lambda work: hfconv_with(work, "config.json", gemma_config(arch, **changes))


for _name, _arch, _changes, _expect in GEMMA_REFUSALS:
    case("hfconv/config-" + _name, "config.json: " + _expect)(gemma_refusal(_changes, _arch))


@case("hfconv/config-truncated", "config.json: invalid JSON")
def _(work):
    return hfconv_with(work, "config.json", cut_to(0.5))


@case("hfconv/config-kv-heads", "num_attention_heads 4 is not a multiple of num_key_value_heads 3")
def _(work):
    return hfconv_with(work, "config.json", lambda p: edit_json(p, lambda c: c.__setitem__("num_key_value_heads", 3)))


# ---------------------------------------------------------------- hfconv: compressed-tensors checkpoints

CT_GROUP = {"targets": ["model.layers.0.self_attn.q_proj"],
            "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True, "dynamic": False}}


def ct_model(work, sides=None, group=None, qc=None, packed=False):
    """A copy of B.model whose layer-0 q_proj is compressed-tensors FP8 per
    channel (codes 0x38 = 1.0, scales 0.01), written by hand; packed: INT4
    pack-quantized instead (words of 0x88888888 = zeros). sides: {suffix:
    (dtype, shape, bytes)} replacing / adding (None: dropping) side tensors;
    group, qc: changes to the config group and quantization_config."""
    m = B.copy_model(work)
    path = os.path.join(m, "model.safetensors")
    header, start, raw = st_read(path)
    rows, cols = header[Q_PROJ + ".weight"]["shape"]
    tensors = {k: (v["dtype"], v["shape"], bytes(raw[start + v["data_offsets"][0]:start + v["data_offsets"][1]]))
               for k, v in header.items() if k != "__metadata__" and k != Q_PROJ + ".weight"}
    if packed:
        side = {"weight_packed": ("I32", [rows, cols // 8], b"\x88" * (rows * cols // 2)),
                "weight_shape": ("I64", [2], struct.pack("<2q", rows, cols))}
    else:
        side = {"weight": ("F8_E4M3", [rows, cols], b"\x38" * (rows * cols))}
    side["weight_scale"] = ("F32", [rows, 1], struct.pack(f"<{rows}f", *[0.01] * rows))
    side.update(sides or {})
    tensors.update({f"{Q_PROJ}.{k}": v for k, v in side.items() if v is not None})
    out, data = {}, b""
    for k, (dt, shape, b) in tensors.items():
        out[k] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    st_write(path, out, data)
    g = json.loads(json.dumps(CT_GROUP))
    if packed:
        g["weights"].update({"type": "int", "num_bits": 4})
    g.update(group or {})
    q = {"quant_method": "compressed-tensors", "format": "pack-quantized" if packed else "float-quantized",
         "quantization_status": "compressed", "config_groups": {"group_0": g}, "ignore": ["lm_head"]}
    q.update(qc or {})
    edit_json(os.path.join(m, "config.json"), lambda c: c.__setitem__("quantization_config", q))
    return hfconv_case(work, m)


KV_SCHEME = {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, "symmetric": True}


def ct_kv_model(work, scheme, scales):
    """ct_model with quantization_config.kv_cache_scheme = scheme (None: none) and the tensors
    {name: (dtype, shape, bytes)} added beside the weights (KV-cache scales)."""
    argv = ct_model(work, qc={"kv_cache_scheme": scheme})
    path = os.path.join(work, "in", "model.safetensors")
    header, start, raw = st_read(path)
    header.pop("__metadata__", None)
    data = bytes(raw[start:])
    for name, (dt, shape, b) in scales.items():
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    st_write(path, header, data)
    return argv


def kv_scale_tensors(layers=(0, 1), value=0.01, shape=(1,)):
    n = 1
    for d in shape:
        n *= d
    return {f"model.layers.{il}.self_attn.{w}_scale": ("F32", list(shape), struct.pack(f"<{n}f", *[value] * n))
            for il in layers for w in "kv"}


@case("hfconv/ct-kv-dynamic", "kv_cache_scheme.dynamic': only static scales (false) are implemented")
def _(work):
    return ct_kv_model(work, dict(KV_SCHEME, dynamic=True), {})


@case("hfconv/ct-kv-strategy", "kv_cache_scheme.strategy': only \"tensor\" (one scale per layer) is implemented")
def _(work):
    return ct_kv_model(work, dict(KV_SCHEME, strategy="attn_head"), kv_scale_tensors())


@case("hfconv/ct-kv-int", "kv_cache_scheme': only 8-bit float (FP8 E4M3) KV caches are implemented")
def _(work):
    return ct_kv_model(work, dict(KV_SCHEME, type="int"), kv_scale_tensors())


@case("hfconv/ct-kv-asymmetric", "kv_cache_scheme.symmetric': asymmetric KV caches are not implemented")
def _(work):
    return ct_kv_model(work, dict(KV_SCHEME, symmetric=False), kv_scale_tensors())


@case("hfconv/ct-kv-missing-scale", "tensor 'model.layers.1.self_attn.k_scale' is missing (kv_cache_scheme)")
def _(work):
    return ct_kv_model(work, KV_SCHEME, kv_scale_tensors(layers=(0,)))


@case("hfconv/ct-kv-without-scheme", "self_attn.k_scale' without quantization_config.kv_cache_scheme")
def _(work):
    return ct_kv_model(work, None, kv_scale_tensors())


@case("hfconv/ct-kv-negative-scale", "k_scale': scale -1 is not a finite number > 0")
def _(work):
    return ct_kv_model(work, KV_SCHEME, kv_scale_tensors(value=-1.0))


@case("hfconv/ct-kv-scale-shape", "k_scale': 2 values, a static KV scale has 1")
def _(work):
    return ct_kv_model(work, KV_SCHEME, kv_scale_tensors(shape=(2,)))


@case("hfconv/ct-scale-shape", "weight_scale': shape [64, 2], expected [64, 1]")
def _(work):
    return ct_model(work, {"weight_scale": ("F32", [64, 2], struct.pack("<128f", *[0.01] * 128))})


@case("hfconv/ct-missing-scale", "q_proj.weight_scale' is missing")
def _(work):
    return ct_model(work, {"weight_scale": None})


@case("hfconv/ct-nan-scale", "not a valid scale")
def _(work):
    return ct_model(work, {"weight_scale": ("F32", [64, 1], struct.pack("<64f", *[float("nan")] * 64))})


@case("hfconv/ct-weight-dtype", "q_proj.weight': dtype F16, expected F8_E4M3")
def _(work):
    return ct_model(work, {"weight": ("F16", [64, 64], b"\0" * 8192)})


@case("hfconv/ct-unknown-format", "unknown format 'marlin-24'")
def _(work):
    return ct_model(work, qc={"format": "marlin-24"})


@case("hfconv/ct-not-compressed", "quantization_status' is not \"compressed\"")
def _(work):
    return ct_model(work, qc={"quantization_status": "frozen"})


@case("hfconv/ct-python-regex", "is not a regular expression hfconv reads")
def _(work):
    return ct_model(work, group={"targets": ["re:.*layers\\.\\d+\\.self_attn.q_proj$"]})


@case("hfconv/ct-output-activations", "output_activations': not implemented")
def _(work):
    return ct_model(work, group={"output_activations": {"num_bits": 8, "type": "float", "strategy": "token",
                                                        "dynamic": True}})


@case("hfconv/ct-lying-weight-shape", "weight_shape' says [64, 72], the model [64, 64]")
def _(work):
    return ct_model(work, {"weight_shape": ("I64", [2], struct.pack("<2q", 64, 72))}, packed=True)


@case("hfconv/ct-packed-words", "weight_packed': shape [64, 4], expected [64, 8]")
def _(work):
    return ct_model(work, {"weight_packed": ("I32", [64, 4], b"\x88" * 1024)}, packed=True)


@case("hfconv/ct-packed-unquantized", "packed codes of a module the quantization_config does not quantize")
def _(work):
    return ct_model(work, qc={"ignore": ["lm_head", Q_PROJ]}, packed=True)


def ct_gidx(work, gidx, actorder="group"):
    """ct_model's q_proj as FP8 in groups of 32 (scales [64, 2]) with actorder and a
    weight_g_idx of those 64 values (None: no g_idx tensor)."""
    sides = {"weight_scale": ("F32", [64, 2], struct.pack("<128f", *[0.01] * 128))}
    if gidx is not None:
        sides["weight_g_idx"] = ("I32", [64], struct.pack("<64i", *gidx))
    w = dict(CT_GROUP["weights"], strategy="group", group_size=32)
    if actorder:
        w["actorder"] = actorder
    return ct_model(work, sides, group={"weights": w})


SWAPPED = [i % 2 for i in range(64)]   # a valid activation order: 32 columns per group


@case("hfconv/ct-actorder-unknown", "actorder' is not false, \"weight\" or \"group\"")
def _(work):
    return ct_gidx(work, SWAPPED, "sideways")


@case("hfconv/ct-actorder-activations", "input_activations.actorder': activation ordering applies to weights only")
def _(work):
    return ct_model(work, group={"input_activations": {"num_bits": 8, "type": "float", "strategy": "token",
                                                       "dynamic": True, "actorder": "weight"}})


@case("hfconv/ct-actorder-channel", "actorder' is \"group\" on float-quantized channel weights")
def _(work):
    return ct_model(work, group={"weights": dict(CT_GROUP["weights"], actorder="group")})


@case("hfconv/ct-gidx-missing", "q_proj.weight_g_idx' is missing")
def _(work):
    return ct_gidx(work, None)


@case("hfconv/ct-gidx-range", "weight_g_idx' holds group 2 at 5, not in 0..1")
def _(work):
    return ct_gidx(work, [2 if i == 5 else v for i, v in enumerate(SWAPPED)])


@case("hfconv/ct-gidx-counts", "weight_g_idx' puts 33 columns in group 0, not 32")
def _(work):
    return ct_gidx(work, [0 if i == 1 else v for i, v in enumerate(SWAPPED)])


@case("hfconv/ct-gidx-without-actorder", "weight_g_idx' is a group index but actorder is not \"group\"")
def _(work):
    return ct_gidx(work, SWAPPED, "weight")


def modelopt_model(work, quantization):
    """A copy of B.model with an hf_quant_config.json (Model Optimizer) of that "quantization"."""
    m = B.copy_model(work)
    json.dump({"producer": {"name": "modelopt"}, "quantization": quantization},
              open(os.path.join(m, "hf_quant_config.json"), "w"))
    return hfconv_case(work, m)


@case("hfconv/modelopt-unknown-algo", "field 'quant_algo' = 'W4A8_AWQ': not implemented")
def _(work):
    return modelopt_model(work, {"quant_algo": "W4A8_AWQ"})


@case("hfconv/modelopt-kv-cache", "field 'kv_cache_quant_algo': not implemented")
def _(work):
    return modelopt_model(work, {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"})


@case("hfconv/modelopt-missing-scale", "q_proj.weight_scale' is missing")
def _(work):
    argv, outputs, pre = ct_model(work, {"weight_scale": None})
    m = argv[1]
    edit_json(os.path.join(m, "config.json"), lambda c: c.pop("quantization_config"))
    json.dump({"quantization": {"quant_algo": "FP8_PER_CHANNEL_PER_TOKEN", "exclude_modules": [
        "lm_head", "model.layers.1.*", "*.mlp.*", "*.k_proj", "*.v_proj", "*.o_proj"]}},
              open(os.path.join(m, "hf_quant_config.json"), "w"))
    return argv, outputs, pre


@case("hfconv/ct-packed-lora", "--lora on packed compressed-tensors weights")
def _(work):
    argv, outputs, pre = ct_model(work, packed=True)
    return argv + ["--lora", lora_adapter(work)], outputs, pre
# ---------------------------------------------------------------- hfconv and the runner: Phi-3

def phi3_model(work, cfg_edit=None, header_edit=None):
    """mkmodel's checkpoint as Phi3ForCausalLM (tests/phi3_fixture.py), config edited."""
    return phi3_checkpoint(B.model, os.path.join(work, "phi3"), cfg_edit, header_edit)


LONGROPE = {"type": "longrope", "short_factor": [1.0] * 8, "long_factor": [2.0] * 8}


def phi3_case(work, cfg_edit=None, header_edit=None):
    return hfconv_case(work, phi3_model(work, cfg_edit, header_edit))


@case("hfconv/phi3-rope-linear", "field 'rope_scaling' asks for rope type 'linear': phi3 computes only default and "
      "longrope")
def _(work):
    return phi3_case(work, lambda c: c.__setitem__("rope_scaling", {"type": "linear", "factor": 2.0}))


@case("hfconv/phi3-longrope-factor-count", "field 'rope_scaling.short_factor' has 7 factors, expected 8")
def _(work):
    return phi3_case(work, lambda c: c.__setitem__("rope_scaling", dict(LONGROPE, short_factor=[1.0] * 7)))


@case("hfconv/phi3-longrope-no-long-factor", "field 'rope_scaling.long_factor' is missing (rope type 'longrope')")
def _(work):
    return phi3_case(work, lambda c: c.__setitem__("rope_scaling", {"type": "su", "short_factor": [1.0] * 8}))


@case("hfconv/phi3-longrope-negative-factor", "field 'rope_scaling.long_factor': factor 3 is not a positive number")
def _(work):
    return phi3_case(work, lambda c: c.__setitem__("rope_scaling", dict(LONGROPE, long_factor=[2.0] * 3 + [-1.0] * 5)))


@case("hfconv/phi3-longrope-factors-not-list", "field 'rope_scaling.long_factor' = an object: not a list of numbers")
def _(work):
    return phi3_case(work, lambda c: c.__setitem__("rope_scaling", dict(LONGROPE, long_factor={"a": 1})))


@case("hfconv/phi3-partial-rotary-odd", "field 'partial_rotary_factor' = 0.6875: 11 rotated values of a head of 16")
def _(work):
    return phi3_case(work, lambda c: c.__setitem__("partial_rotary_factor", 0.6875))


@case("hfconv/phi3-partial-rotary-range", "field 'partial_rotary_factor' = 1.5: must be in (0, 1]")
def _(work):
    return phi3_case(work, lambda c: c.__setitem__("partial_rotary_factor", 1.5))


@case("hfconv/phi3-partial-rotary-disagree", "field 'partial_rotary_factor' = 0.5 disagrees with "
      "'rope_parameters.partial_rotary_factor' = 0.75")
def _(work):
    def edit(c):
        c["rope_parameters"] = {"rope_type": "default", "rope_theta": c.pop("rope_theta"), "partial_rotary_factor": 0.75}
        c["partial_rotary_factor"] = 0.5
    return phi3_case(work, edit)


@case("hfconv/phi3-no-max-position", "config.json: missing required field 'max_position_embeddings'")
def _(work):
    return phi3_case(work, lambda c: c.pop("max_position_embeddings"))


@case("hfconv/phi3-qkv-shape", "tensor 'model.layers.0.self_attn.qkv_proj.weight': shape [128, 64] does not match "
      "config.json (expected [96, 64])")
def _(work):
    return phi3_case(work, lambda c: c.__setitem__("num_key_value_heads", 1))


@case("hfconv/phi3-separate-q-proj", "tensor 'model.layers.0.self_attn.q_proj.weight' is not part of a "
      "Phi3ForCausalLM model")
def _(work):
    return phi3_case(work, header_edit=lambda h: h.__setitem__(
        "model.layers.0.self_attn.q_proj.weight", h.pop("model.layers.0.self_attn.qkv_proj.weight")))


@case("hfconv/phi3-no-gate-up", "checkpoint lacks the tensor for 'blk.1.ffn_up.weight'")
def _(work):
    return phi3_case(work, header_edit=lambda h: h.pop("model.layers.1.mlp.gate_up_proj.weight"))


def gguf_with(src, dst, drop=(), add=(), keys=(), drop_keys=()):
    """A copy of GGUF src without the tensors named in drop and with the
    (name, float32 array) tensors of add; keys: (name, value, GGUFValueType
    [, element type]) added, drop_keys: keys left out."""
    import numpy as np
    from gguf import GGUFReader, GGUFValueType, GGUFWriter
    r = GGUFReader(src)
    arch = r.fields["general.architecture"].contents() if "general.architecture" in r.fields else "none"
    w = GGUFWriter(dst, arch, use_temp_file=False)
    for k, f in r.fields.items():
        if k.startswith("GGUF.") or k == "general.architecture" or k in drop_keys:
            continue
        vt = f.types[0]
        w.add_key_value(k, f.contents(), vt, sub_type=f.types[-1] if vt == GGUFValueType.ARRAY else None)
    for t in r.tensors:
        if t.name not in drop:
            w.add_tensor(t.name, np.array(t.data), raw_shape=list(reversed([int(n) for n in t.shape])),
                         raw_dtype=t.tensor_type)
    for name, values in add:
        w.add_tensor(name, np.asarray(values, dtype=np.float32))
    for k in keys:
        w.add_key_value(k[0], k[1], k[2], sub_type=k[3] if len(k) > 3 else None)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def phi3_gguf_case(work, drop=(), add=()):
    good = os.path.join(work, "phi3.gguf")
    must([HFCONV, phi3_model(work, lambda c: c.__setitem__("rope_scaling", LONGROPE)), "-o", good, "-q"])
    bad = os.path.join(work, "bad.gguf")
    gguf_with(good, bad, drop, add)
    text = os.path.join(work, "text.txt")
    open(text, "w").write("some words to evaluate " * 40)
    return [PPL_EVAL, bad, "--text", text, "--ctx", "64"], [], None, [bad]


@case("ppl-eval/phi3-longrope-half", "tensor 'rope_factors_long.weight' comes without its partner")
def _(work):
    return phi3_gguf_case(work, drop=("rope_factors_short.weight",))


@case("ppl-eval/phi3-qkv-and-q", "blk.0 has both attn_qkv.weight and attn_q.weight")
def _(work):
    import numpy as np
    return phi3_gguf_case(work, add=(("blk.0.attn_q.weight", np.zeros((64, 64))),))


@case("ppl-eval/phi3-no-qkv", "tensor 'blk.1.attn_q.weight' is missing")
def _(work):
    return phi3_gguf_case(work, drop=("blk.1.attn_qkv.weight",))


def phi3_export_case(work, cfg_edit):
    """quantize --export of a phi3 GGUF whose config.json could not state its math."""
    gguf = os.path.join(work, "phi3.gguf")
    must([HFCONV, phi3_model(work, cfg_edit), "-o", gguf, "-q"])
    out = os.path.join(work, "ct")
    return [QUANTIZE, gguf, "--export", "compressed-tensors", out, "W8A8", "--quiet"], [out], None, [gguf]


@case("quantize/export-phi3-longrope", "tensor 'rope_factors_long.weight' (longrope scaling): not exported yet")
def _(work):
    return phi3_export_case(work, lambda c: c.__setitem__("rope_scaling", LONGROPE))


@case("quantize/export-phi3-partial-rotary", "phi3.rope.dimension_count 8 of a head of 16 (partial rotary): not "
      "exported yet")
def _(work):
    return phi3_export_case(work, lambda c: c.__setitem__("partial_rotary_factor", 0.5))


@case("quantize/export-phi3-window", "phi3.attention.sliding_window 32: not exported yet")
def _(work):
    return phi3_export_case(work, lambda c: c.__setitem__("sliding_window", 32))
# ---------------------------------------------------------------- hfconv: mixtures of experts

def moe_model(work, n_experts=2, change=None, config=None, router_rows=None, qwen3=False):
    """The mkmodel checkpoint as a Mixtral: each layer's SwiGLU copied into
    n_experts experts (block_sparse_moe.experts.E.w1/w3/w2) and a zero router;
    change(tensors) edits {name: (dtype, shape, bytes)}, config(c) config.json.
    qwen3: as a Qwen3-MoE's names (mlp.experts.E.gate_proj/up_proj/down_proj,
    mlp.gate) and config, without its q/k norms (for the refusals made before
    a missing tensor is looked for)."""
    m = B.copy_model(work)
    path = os.path.join(m, "model.safetensors")
    header, start, raw = st_read(path)
    header.pop("__metadata__", None)
    tensors = {}
    for name, info in header.items():
        a, b = info["data_offsets"]
        mm = re.match(r"model\.layers\.(\d+)\.mlp\.(gate|up|down)_proj\.weight$", name)
        if not mm:
            tensors[name] = (info["dtype"], info["shape"], bytes(raw[start + a:start + b]))
            continue
        layer, w = mm.group(1), {"gate": "w1", "up": "w3", "down": "w2"}[mm.group(2)]
        pre = f"model.layers.{layer}." + ("mlp." if qwen3 else "block_sparse_moe.")
        for e in range(n_experts):
            tensors[f"{pre}experts.{e}." + (f"{mm.group(2)}_proj" if qwen3 else w) + ".weight"] = (
                info["dtype"], info["shape"], bytes(raw[start + a:start + b]))
        if w == "w1":
            rows, hidden = router_rows or n_experts, info["shape"][1]
            tensors[f"{pre}gate.weight"] = ("F32", [rows, hidden], bytes(4 * rows * hidden))
    if change:
        change(tensors)
    new, data = {}, bytearray()
    for name, (dtype, shape, blob) in tensors.items():
        new[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    st_write(path, new, data)

    def cfg(c):
        if qwen3:
            c.update(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", num_experts=n_experts,
                     num_experts_per_tok=1, moe_intermediate_size=c["intermediate_size"])
        else:
            c.update(architectures=["MixtralForCausalLM"], model_type="mixtral", num_local_experts=n_experts,
                     num_experts_per_tok=1)
        if config:
            config(c)
    edit_json(os.path.join(m, "config.json"), cfg)
    return hfconv_case(work, m)


EXP = "model.layers.0.block_sparse_moe.experts.1.w1.weight"


@case("hfconv/moe-missing-expert", "checkpoint lacks expert 1 of 2 for 'blk.0.ffn_gate_exps.weight'")
def _(work):
    return moe_model(work, change=lambda t: t.pop(EXP))


@case("hfconv/moe-expert-shape", f"tensor '{EXP}': dtype or shape differs from the other experts'")
def _(work):
    def halve(t):
        dtype, shape, blob = t[EXP]
        t[EXP] = (dtype, [shape[0] // 2, shape[1]], blob[:len(blob) // 2])
    return moe_model(work, change=halve)


@case("hfconv/moe-more-experts-in-config", "checkpoint lacks expert 2 of 4 for")
def _(work):
    return moe_model(work, config=lambda c: c.__setitem__("num_local_experts", 4), router_rows=4)


@case("hfconv/moe-fewer-experts-in-config", "experts.1.w2.weight' is not part of a MixtralForCausalLM model")
def _(work):
    return moe_model(work, config=lambda c: c.__setitem__("num_local_experts", 1), router_rows=1)


@case("hfconv/moe-router-size", "tensor 'model.layers.0.block_sparse_moe.gate.weight': shape [3, 64] does not "
      "match config.json (expected [2, 64])")
def _(work):
    return moe_model(work, router_rows=3)


@case("hfconv/moe-no-expert-count", "missing required field 'num_local_experts' (or 'num_experts')")
def _(work):
    return moe_model(work, config=lambda c: c.pop("num_local_experts"))


@case("hfconv/moe-used-above-count", "field 'num_experts_per_tok' = 3: exceeds the number of experts")
def _(work):
    return moe_model(work, config=lambda c: c.__setitem__("num_experts_per_tok", 3))


@case("hfconv/moe-dense-layers-mixtral", "mlp_only_layers / decoder_sparse_step make 1 of 2 layers dense: "
      "MixtralForCausalLM has no dense layers")
def _(work):
    return moe_model(work, config=lambda c: c.__setitem__("decoder_sparse_step", 2))


@case("hfconv/moe-experts-in-dense-layer", "layer 0 has no experts (mlp_only_layers / decoder_sparse_step in "
      "config.json)")
def _(work):
    return moe_model(work, qwen3=True, config=lambda c: c.__setitem__("decoder_sparse_step", 2))


@case("hfconv/moe-dense-in-expert-layer", "tensor 'model.layers.1.mlp.gate_proj.weight': layer 1 has experts, not a "
      "dense feed-forward")
def _(work):
    def dense(t):
        t["model.layers.1.mlp.gate_proj.weight"] = t["model.layers.1.mlp.experts.0.gate_proj.weight"]
    return moe_model(work, qwen3=True, change=dense)


@case("hfconv/moe-sparse-step-zero", "field 'decoder_sparse_step' = 0 is out of range")
def _(work):
    return moe_model(work, config=lambda c: c.__setitem__("decoder_sparse_step", 0))


@case("hfconv/moe-mlp-only-layer-range", "field 'mlp_only_layers' = 7: not a layer index below num_hidden_layers")
def _(work):
    return moe_model(work, qwen3=True, config=lambda c: c.__setitem__("mlp_only_layers", [0, 7]))


@case("hfconv/moe-shared-experts", "field 'shared_expert_intermediate_size' = 64: shared experts are not supported")
def _(work):
    return moe_model(work, config=lambda c: c.__setitem__("shared_expert_intermediate_size", 64))


def fuse_gate_up(keep=False, rows=2):
    """transformers 5's fused layout: [experts, 2 * ff, hidden] (rows=1: half of it)."""
    def fuse(t):
        for layer in (0, 1):
            pre = f"model.layers.{layer}.block_sparse_moe.experts."
            parts = [(t.get if keep else t.pop)(f"{pre}{e}.{w}.weight") for e in range(2) for w in ("w1", "w3")]
            blob = b"".join(p[2] for p in parts)
            t[f"model.layers.{layer}.mlp.experts.gate_up_proj"] = (
                parts[0][0], [2, rows * parts[0][1][0], parts[0][1][1]], blob[:len(blob) * rows // 2])
    return fuse


@case("hfconv/moe-mlp-only-layers-type", "field 'mlp_only_layers' = '0': must be a list of layer indices")
def _(work):
    return moe_model(work, qwen3=True, config=lambda c: c.__setitem__("mlp_only_layers", "0"))


@case("hfconv/moe-dense-many-layers", "dense layers among more than 1024 layers are not supported")
def _(work):
    return moe_model(work, qwen3=True, config=lambda c: c.update(num_hidden_layers=2000, decoder_sparse_step=2))


@case("hfconv/moe-fused-layer", "tensor 'model.layers.7.mlp.experts.gate_up_proj': layer 7 of 2")
def _(work):
    def far(t):
        fuse_gate_up()(t)
        t["model.layers.7.mlp.experts.gate_up_proj"] = t.pop("model.layers.1.mlp.experts.gate_up_proj")
    return moe_model(work, change=far)


@case("hfconv/moe-fused-shape", "tensor 'model.layers.0.mlp.experts.gate_up_proj': shape does not match "
      "config.json (expected [2, ")
def _(work):
    return moe_model(work, change=fuse_gate_up(rows=1))


@case("hfconv/moe-fused-twice", "are both 'blk.0.ffn_gate_exps.weight'")
def _(work):
    return moe_model(work, change=fuse_gate_up(keep=True))


def ct_moe_config(targets):
    return lambda c: c.__setitem__("quantization_config", {
        "quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
        "config_groups": {"group_0": dict(CT_GROUP, targets=targets)}, "ignore": ["lm_head"]})


@case("hfconv/moe-ct-expert-scale", "experts.0.w1.weight_scale' is missing")
def _(work):
    def fp8(t):
        name = "model.layers.0.block_sparse_moe.experts.0.w1.weight"
        _, shape, _ = t[name]
        t[name] = ("F8_E4M3", shape, b"\x38" * (shape[0] * shape[1]))
    return moe_model(work, change=fp8, config=ct_moe_config(["model.layers.0.block_sparse_moe.experts.0.w1"]))


@case("hfconv/moe-ct-fused", "mlp.experts.gate_up_proj': fused experts of dtype F32 under compressed-tensors are "
      "not supported")
def _(work):
    return moe_model(work, change=fuse_gate_up(), config=ct_moe_config(["re:.*never$"]))


@case("quantize/export-llama3-rope", "rope_freqs.weight (Llama 3 rope scaling): no Llama 3 parameters reproduce "
      "its factors")
def _(work):
    from gguf import GGUFReader
    r = GGUFReader(B.gguf)
    dim = int(r.fields["llama.embedding_length"].contents()) // int(r.fields["llama.attention.head_count"].contents())
    bad = os.path.join(work, "rope.gguf")
    # four values between 1 and 8 that no (original context, high_freq_factor) gives
    gguf_with(B.gguf, bad, add=(("rope_freqs.weight", [1.0] * (dim // 2 - 5) + [1.5, 3.0, 2.0, 5.0, 8.0]),))
    return export_case(work, bad)


@case("quantize/export-tokenizer-pre", 'tokenizer.ggml.pre "smaug-bpe" is not rebuilt as tokenizer.json (rebuilt: '
      "llama-bpe, qwen2 and their aliases): give --tokenizer-from HF_DIR or --no-tokenizer")
def _(work):
    from gguf import GGUFValueType
    bad = os.path.join(work, "smaug.gguf")
    gguf_with(B.gguf, bad, drop_keys=("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.scores"),
              keys=(("tokenizer.ggml.model", "gpt2", GGUFValueType.STRING),
                    ("tokenizer.ggml.pre", "smaug-bpe", GGUFValueType.STRING)))
    return export_case(work, bad)


@case("quantize/export-no-tokenizer", "the GGUF has no tokenizer (tokenizer.ggml.model): give --tokenizer-from HF_DIR "
      "or --no-tokenizer")
def _(work):
    bad = os.path.join(work, "notok.gguf")
    gguf_with(B.gguf, bad, drop_keys=("tokenizer.ggml.model",))
    return export_case(work, bad)


@case("quantize/export-moe", "tensor 'blk.0.ffn_gate_inp.weight' has no Hugging Face name in family 'llama'")
def _(work):
    argv, outs, _ = moe_model(work)
    must(argv)
    out = os.path.join(work, "ct")
    return [QUANTIZE, outs[0], "--export", "compressed-tensors", out, "FP8_DYNAMIC", "--quiet"], [out], None


@case("hfconv/experts-in-dense-family", "config.json gives 4 experts: LlamaForCausalLM has none")
def _(work):
    return hfconv_with(work, "config.json", lambda p: edit_json(p, lambda c: c.__setitem__("num_local_experts", 4)))


# ---------------------------------------------------------------- hfconv --lora: PEFT adapters

Q_PROJ = "model.layers.0.self_attn.q_proj"


def adapter_folder(work, tensors, config, rank=2):
    """A PEFT adapter folder written by hand: tensors {name without the
    base_model.model. prefix: (shape, value)} in F32, each filled with its
    value, and adapter_config.json (rank `rank`) with config's changes."""
    header, data = {}, b""
    for name, (shape, value) in tensors.items():
        n = 1
        for d in shape:
            n *= d
        header["base_model.model." + name] = {"dtype": "F32", "shape": list(shape),
                                              "data_offsets": [len(data), len(data) + 4 * n]}
        data += struct.pack(f"<{n}f", *([value] * n))
    d = os.path.join(work, "adapter")
    os.makedirs(d)
    st_write(os.path.join(d, "adapter_model.safetensors"), header, data)
    cfg = {"peft_type": "LORA", "r": rank, "lora_alpha": 4, "target_modules": ["q_proj"]}
    cfg.update(config or {})
    json.dump(cfg, open(os.path.join(d, "adapter_config.json"), "w"))
    return d


def base_shape(model, name):
    header, _, _ = st_read(os.path.join(model, "model.safetensors"))
    return header[name]["shape"]


def lora_adapter(work, config=None, a_value=0.01, rank=2, extra=None):
    """A PEFT adapter folder (rank `rank`, on layer 0's q_proj) for B.model,
    written by hand: adapter_config.json with config's changes, A filled with
    a_value; extra: more tensors as adapter_folder takes them."""
    rows, cols = base_shape(B.model, Q_PROJ + ".weight")
    return adapter_folder(work, {Q_PROJ + ".lora_A.weight": ([rank, cols], a_value),
                                 Q_PROJ + ".lora_B.weight": ([rows, rank], 0.02), **(extra or {})}, config, rank)


def lora_case(work, *adapter_args, **adapter_kw):
    argv, outputs, preexec = hfconv_case(work, B.model)
    return argv + ["--lora", lora_adapter(work, *adapter_args, **adapter_kw)], outputs, preexec


@case("hfconv/lora-nan-factor", "lora_A.weight' holds NaN or Inf")
def _(work):
    return lora_case(work, a_value=float("nan"))


@case("hfconv/lora-weights-truncated", "adapter_model.safetensors")
def _(work):
    argv, outputs, preexec = lora_case(work)
    cut_to(0.5)(os.path.join(work, "adapter", "adapter_model.safetensors"))
    return argv, outputs, preexec


@case("hfconv/lora-config-not-object", "adapter_config.json: not a JSON object")
def _(work):
    argv, outputs, preexec = lora_case(work)
    open(os.path.join(work, "adapter", "adapter_config.json"), "w").write("[1]")
    return argv, outputs, preexec


@case("hfconv/lora-rank-huge", "field 'r' must be a positive integer")
def _(work):
    return lora_case(work, {"r": 1e300})


@case("hfconv/lora-python-regex-pattern", "is not a pattern read here")
def _(work):
    return lora_case(work, {"rank_pattern": {"layers\\.\\d+\\.q_proj": 2}})


@case("hfconv/lora-dora-without-magnitude", "use_dora is true but")
def _(work):
    return lora_case(work, {"use_dora": True})


@case("hfconv/lora-dora-magnitude-without-factors", "a DoRA magnitude without lora_A/lora_B")
def _(work):
    # peft would rescale k_proj's rows by m / ||W||: not dropped silently
    k_rows, _ = base_shape(B.model, "model.layers.0.self_attn.k_proj.weight")
    q_rows, _ = base_shape(B.model, Q_PROJ + ".weight")
    return lora_case(work, {"use_dora": True}, extra={
        Q_PROJ + ".lora_magnitude_vector": ([q_rows], 1.0),
        "model.layers.0.self_attn.k_proj.lora_magnitude_vector": ([k_rows], 1.0)})


@case("hfconv/lora-rslora-not-bool", "field 'use_rslora' is not true, false or null")
def _(work):
    return lora_case(work, {"use_rslora": 1})   # peft: truthy, so 1 / sqrt(r)


@case("hfconv/lora-dora-not-bool", "field 'use_dora' is not true, false or null")
def _(work):
    return lora_case(work, {"use_dora": "false"})


@case("hfconv/lora-fan-in-fan-out-not-bool", "field 'fan_in_fan_out' is not true, false or null")
def _(work):
    return lora_case(work, {"fan_in_fan_out": 0})


def embedding_adapter_on_tied(work, config_edit=None):
    """--adapter-out of an embedding LoRA on mkmodel's tied base (config edited by config_edit)."""
    tied = os.path.join(work, "tied")
    must([MKMODEL, tied, "--tied", "--seed", "7"])
    if config_edit:
        edit_json(os.path.join(tied, "config.json"), config_edit)
    vocab, hidden = base_shape(tied, "model.embed_tokens.weight")
    d = adapter_folder(work, {"model.embed_tokens.lora_embedding_A": ([2, vocab], 0.01),
                              "model.embed_tokens.lora_embedding_B": ([hidden, 2], 0.02)},
                       {"target_modules": ["embed_tokens"]})
    out = out_in(work)
    return [HFCONV, tied, "--lora", d, "--adapter-out", out, "-q"], [out], None


@case("hfconv/adapter-out-embedding-on-tied-base",
      "an embedding adapter on a tied base cannot be a llama.cpp adapter: merge instead (-o)")
def _(work):
    # no output.weight: llama.cpp would use token_embd's factors for the output too
    return embedding_adapter_on_tied(work)


@case("hfconv/adapter-out-embedding-no-lm-head", "an embedding adapter on a tied base")
def _(work):
    # tie_word_embeddings false but no lm_head.weight: tied all the same
    return embedding_adapter_on_tied(work, lambda c: c.__setitem__("tie_word_embeddings", False))


@case("hfconv/lora-two-adapters-save-base-layer", "saves its base_layer.weight too: ambiguous")
def _(work):
    # peft saves embed_tokens.base_layer.weight with embedding factors; a second
    # such adapter's base layer could mean the first merge or the original base
    base = os.path.join(work, "base")
    must([MKMODEL, base, "--seed", "7"])
    vocab, hidden = base_shape(base, "model.embed_tokens.weight")
    tensors = {"model.embed_tokens.base_layer.weight": ([vocab, hidden], 0.03),
               "model.embed_tokens.lora_embedding_A": ([2, vocab], 0.01),
               "model.embed_tokens.lora_embedding_B": ([hidden, 2], 0.02)}
    first = os.path.join(work, "first")
    os.rename(adapter_folder(work, tensors, {"target_modules": ["embed_tokens"]}), first)
    second = adapter_folder(work, tensors, {"target_modules": ["embed_tokens"]})
    out = out_in(work)
    return [HFCONV, base, "--lora", first, "--lora", second, "-o", out, "-q"], [out], None


@case("hfconv/lora-hostile-tensor-name", "which the base model does not have")
def _(work):
    argv, outputs, preexec = lora_case(work)
    path = os.path.join(work, "adapter", "adapter_model.safetensors")
    header, start, raw = st_read(path)
    header = {k.replace("q_proj", "q\nproj"): v for k, v in header.items()}
    st_write(path, header, raw[start:])
    return argv, outputs, preexec


@case("hfconv/lora-bad-scale", "--lora", code=2)
def _(work):
    argv, outputs, preexec = hfconv_case(work, B.model)
    return argv + ["--lora", lora_adapter(work) + ":big"], outputs, preexec


@case("hfconv/adapter-out-two-adapters", "--adapter-out needs exactly one --lora", code=2)
def _(work):
    d = lora_adapter(work)
    out = out_in(work)
    return [HFCONV, B.model, "--lora", d, "--lora", d, "--adapter-out", out, "-q"], [out], None


@case("hfconv/tokenizer-merge-without-space (fuzz)", "tokenizer.json: model.merges[0]: neither \"a b\" nor")
def _(work):
    return hfconv_with(work, "tokenizer.json", regression("tokenizer_json", "merge_without_space.json"))


@case("hfconv/tokenizer-merge-empty-half (fuzz)", "tokenizer.json: model.merges[0]: neither \"a b\" nor")
def _(work):
    return hfconv_with(work, "tokenizer.json", regression("tokenizer_json", "merge_pair_empty_left.json"),
                       "--vocab-only")


def far_added_token(p):
    """an added token with id 1e8 (the fuzz finding: a [PAD] token for every id below it)"""
    def add(t):
        t.setdefault("added_tokens", []).append({"id": 100000000, "content": "<far>", "single_word": False,
                                                 "lstrip": False, "rstrip": False, "normalized": False,
                                                 "special": True})
    edit_json(p, add)


@case("hfconv/tokenizer-id-1e8 (fuzz)", "tokenizer.json: token ids run to 100000000 but only 516 tokens are defined")
def _(work):
    return hfconv_with(work, "tokenizer.json", far_added_token, "--vocab-only")


@case("hfconv/config-vocab-size-1e8", "token ids run to 99999999 but only")
def _(work):
    return hfconv_with(work, "config.json", lambda p: edit_json(p, lambda c: c.__setitem__("vocab_size", 100000000)),
                       "--vocab-only")


@case("hfconv/tokenizer-truncated", "tokenizer.json: invalid JSON")
def _(work):
    return hfconv_with(work, "tokenizer.json", cut_to(1 / 3))


@case("hfconv/model-is-a-gguf", "is a GGUF file already, not a Hugging Face model folder")
def _(work):
    return hfconv_case(work, B.copy_gguf(work))


@case("hfconv/model-folder-missing", "no such folder (expected a Hugging Face model folder")
def _(work):
    return hfconv_case(work, os.path.join(work, "nowhere"))


# ---------------------------------------------------------------- environment: hfconv, quantize

WRITERS = {"hfconv": lambda out: [HFCONV, B.model, "-o", out, "-q"],
           "quantize": lambda out: [QUANTIZE, B.gguf, out, "Q8_0"]}
# both check their outputs before any work (src/common/output.h); a refused
# output is a usage error
MISSING_FOLDER = {"hfconv": ("x.gguf: -o: folder ", 2), "quantize": ("x.gguf: OUT.gguf: folder ", 2)}
for _tool, _argv in WRITERS.items():
    @case(f"{_tool}/disk-full", "write failed: File too large")
    def _(work, argv=_argv):
        out = out_in(work)
        return argv(out), [out], disk_full

    @case(f"{_tool}/read-only-folder", "cannot create output: Permission denied")
    def _(work, argv=_argv):
        d, pre = read_only_dir(work, "ro")
        return argv(os.path.join(d, "x.gguf")), [os.path.join(d, "x.gguf")], pre

    @case(f"{_tool}/missing-folder", *MISSING_FOLDER[_tool])
    def _(work, argv=_argv):
        out = os.path.join(work, "nope", "x.gguf")
        return argv(out), [out], None


# ---------------------------------------------------------------- hfconv: outputs that would lose data


@case("hfconv/output-is-an-input", "-o would replace", code=2)
def _(work):
    m = B.copy_model(work)   # exit 0 once, and the checkpoint was gone
    return [HFCONV, m, "-o", os.path.join(m, "model.safetensors"), "-q"], [], None, [m]


@case("hfconv/output-links-to-an-input", "a file of the model folder", code=2)
def _(work):
    m = B.copy_model(work)
    out = os.path.join(work, "x.gguf")
    os.symlink(os.path.join(m, "config.json"), out)
    return [HFCONV, m, "-o", out, "-q"], [], None, [m]


@case("hfconv/output-hard-link-to-an-input", "a file of the model folder", code=2)
def _(work):
    m = B.copy_model(work)
    out = os.path.join(work, "x.gguf")
    os.link(os.path.join(m, "tokenizer.json"), out)
    return [HFCONV, m, "-o", out, "-q", "--vocab-only"], [], None, [m]


@case("hfconv/output-is-the-model-folder", "-o is a folder, not a file", code=2)
def _(work):
    m = B.copy_model(work)
    return [HFCONV, m, "-o", m, "-q"], [], None, [m]


@case("hfconv/output-is-a-folder", "-o is a folder, not a file", code=2)
def _(work):
    d = os.path.join(work, "out.gguf")
    os.makedirs(os.path.join(d, "keep"))
    return [HFCONV, B.model, "-o", d, "-q"], [], None, [d, B.model]


# ---------------------------------------------------------------- usage errors: one line, the nearest option

for _tool, _argv, _near in (("hfconv", [HFCONV, "--outfil", "x"], "--outfile"),
                            ("mkmodel", [MKMODEL, "--hiden", "64", "x"], "--hidden"),
                            ("tokenize", [TOKENIZE, "--tokenizer-dirr", "x"], "--tokenizer-dir"),
                            ("gguf-info", [GGUF_INFO, "--verfy", "x"], "--verify")):
    @case(f"{_tool}/unknown-option", f"unknown option '{_argv[1]}' (did you mean '{_near}'?)", code=2)
    def _(work, argv=_argv):
        return argv, [], None

for _name, _argv, _expect in (
        ("hfconv/missing-output", [HFCONV, "m"], "hfconv: need MODEL_DIR and -o OUT.gguf"),
        ("hfconv/option-without-value", [HFCONV, "m", "-o"], "hfconv: -o needs a value"),
        ("hfconv/bad-outtype", [HFCONV, "m", "-o", "x", "--outtype", "q4"], "--outtype: expects f32, f16"),
        ("hfconv/two-models", [HFCONV, "m", "n", "-o", "x"], "hfconv: unexpected argument 'n'"),
        ("mkmodel/no-out-dir", [MKMODEL, "--hidden", "64"], "mkmodel: expected OUT_DIR"),
        ("mkmodel/bad-number", [MKMODEL, "--hidden", "ten", "x"], "--hidden: expects an integer"),
        ("mkmodel/option-without-value", [MKMODEL, "x", "--layers"], "mkmodel: --layers needs a value"),
        ("mkmodel/bad-dtype", [MKMODEL, "x", "--dtype", "f8"], "--dtype: expects f32, f16 or bf16"),
        ("tokenize/no-model", [TOKENIZE, "-p", "x"], "tokenize: no MODEL.gguf or --tokenizer-dir; usage:"),
        ("tokenize/no-text", [TOKENIZE, "m.gguf"], "one of --text, -p and --batch-hex"),
        ("tokenize/option-without-value", [TOKENIZE, "m.gguf", "-p"], "tokenize: -p needs a value"),
        ("gguf-info/no-file", [GGUF_INFO], "gguf-info: no file given"),
        ("gguf-info/two-files", [GGUF_INFO, "a", "b"], "more than one file given")):
    @case(f"{_name}", _expect, code=2)
    def _(work, argv=_argv):
        return argv, [], None




# ---------------------------------------------------------------- quantize: GGUF input


@case("quantize/gguf-truncated-data", "tensor 'blk.1.ffn_gate.weight': data extends past end of file")
def _(work):
    g = B.copy_gguf(work)
    truncate(g, os.path.getsize(g) * 6 // 10)
    return quantize_case(work, g)


@case("quantize/gguf-truncated-header", "tensor count 21 is impossible with 76 bytes left in the file")
def _(work):
    g = B.copy_gguf(work)
    truncate(g, 100)
    return quantize_case(work, g)


@case("quantize/not-gguf", "not a GGUF file")
def _(work):
    return quantize_case(work, os.path.join(B.model, "model.safetensors"))


@case("quantize/gguf-tensor-count-huge", "tensor count 1152921504606846976 is impossible with")
def _(work):
    g = B.copy_gguf(work)
    patch(g, 8, struct.pack("<Q", 1 << 60))
    return quantize_case(work, g)


@case("quantize/gguf-kv-count-huge", "key count 1152921504606846976 is impossible with")
def _(work):
    g = B.copy_gguf(work)
    patch(g, 16, struct.pack("<Q", 1 << 60))
    return quantize_case(work, g)


@case("quantize/gguf-key-length-huge", "key #0: key length 4611686018427387904 is over the 1 GiB limit")
def _(work):
    g = B.copy_gguf(work)
    patch(g, 24, struct.pack("<Q", 1 << 62))
    return quantize_case(work, g)


def patch_tensor_info(work, name, field, data):
    """A copy of the GGUF whose tensor info record for `name` has its "type" or
    "offset" field overwritten with data."""
    g = B.copy_gguf(work)
    raw = open(g, "rb").read()
    pos = raw.index(struct.pack("<Q", len(name)) + name.encode()) + 8 + len(name)   # at n_dims
    n_dims = struct.unpack("<I", raw[pos:pos + 4])[0]
    type_pos = pos + 4 + 8 * n_dims
    patch(g, type_pos if field == "type" else type_pos + 4, data)
    return g


@case("quantize/gguf-tensor-offset-lie", "tensor 'blk.0.attn_q.weight': data extends past end of file")
def _(work):
    return quantize_case(work, patch_tensor_info(work, "blk.0.attn_q.weight", "offset", struct.pack("<Q", 1 << 40)))


@case("quantize/gguf-tensor-type-unknown", "tensor 'blk.0.attn_q.weight': unknown ggml type 99")
def _(work):
    return quantize_case(work, patch_tensor_info(work, "blk.0.attn_q.weight", "type", struct.pack("<I", 99)))


def f16_poison(work, bits):
    g = B.copy_gguf(work)
    t = B.tensor("blk.0.attn_q.weight")
    patch(g, B.layout["data_offset"] + t["offset"] + 2 * 70, struct.pack("<H", bits))   # row 1, element 6
    return g


for _preset in ("Q8_0", "Q4_K_M", "NVFP4", "INT8", "FP8_E4M3", "MXFP4"):
    @case(f"quantize/nan-weight-{_preset}", "tensor blk.0.attn_q.weight: row 1 holds NaN or Inf")
    def _(work, preset=_preset):
        return quantize_case(work, f16_poison(work, 0x7E00), preset)


@case("quantize/inf-weight", "tensor blk.0.attn_q.weight: row 1 holds NaN or Inf")
def _(work):
    return quantize_case(work, f16_poison(work, 0xFC00), "Q8_0")


@case("quantize/already-quantized", "tensor token_embd.weight is already q8_0: requantiz")
def _(work):
    return quantize_case(work, B.q8, "Q4_0")


# quantize --rotate (src/quantize/rotate.h): what the rotation cannot keep exact, refused before writing
@case("quantize/rotate-quantized", "tensor token_embd.weight is stored as q8_0: --rotate needs F32/F16/BF16 weights")
def _(work):
    return quantize_case(work, B.q8, "Q8_0", "--rotate")


@case("quantize/rotate-nan", "tensor blk.0.attn_q.weight: NaN or Inf at element 70 (cannot rotate)")
def _(work):
    return quantize_case(work, f16_poison(work, 0x7E00), "Q8_0", "--rotate")


@case("quantize/rotate-post-norm", "tensor blk.0.post_attention_norm.weight: --rotate does not know how this tensor "
                                   "meets the residual stream")
def _(work):
    import numpy as np
    g = os.path.join(work, "post-norm.gguf")
    gguf_with(B.gguf, g, add=(("blk.0.post_attention_norm.weight", np.ones(64)),))
    return quantize_case(work, g, "Q8_0", "--rotate")


@case("quantize/rotate-family", "general.architecture mamba: --rotate does not know this family")
def _(work):
    g = B.copy_gguf(work)
    raw = open(g, "rb").read()
    key = b"general.architecture"
    patch(g, raw.index(key) + len(key) + 4 + 8, b"mamba")   # the value after its type and length
    return quantize_case(work, g, "Q8_0", "--rotate")


@case("quantize/rotate-small-block", "its largest power-of-two factor 8 is below 16")
def _(work):
    model, gguf = os.path.join(work, "w72"), os.path.join(work, "w72.gguf")
    must([MKMODEL, model, "--hidden", "72", "--layers", "1"])
    must([HFCONV, model, "-o", gguf, "-q"])
    return quantize_case(work, gguf, "Q8_0", "--rotate")


@case("quantize/rotate-stats", "--rotate: --stats of the unrotated model do not describe the rotated one", code=2)
def _(work):
    return quantize_case(work, B.gguf, "Q8_0", "--rotate", "--stats", B.gguf)


@case("quantize/rotate-dry-run", "--rotate writes the rotated model first: no --dry-run", code=2)
def _(work):
    return [QUANTIZE, B.gguf, "Q8_0", "--dry-run", "--rotate"], [], None


# quantize --block-rotate (src/quantize/block_rotate.h) and the runner's hfq.block_rotate marks
def block_rotated(work):
    g = os.path.join(work, "brot.gguf")
    must([QUANTIZE, B.gguf, g, "F32", "--block-rotate", "--quiet"])
    return g


def with_rot_key(work, tensor, value):
    from gguf import GGUFValueType
    g = os.path.join(work, "rot-key.gguf")
    gguf_with(B.gguf, g, keys=((f"hfq.block_rotate.{tensor}", value, GGUFValueType.STRING),))
    return g


@case("quantize/block-rotate-quantized", "tensor blk.0.attn_q.weight is stored as q8_0: --block-rotate needs "
      "F32/F16/BF16 weights")
def _(work):
    return quantize_case(work, B.q8, "NVFP4", "--block-rotate")


@case("quantize/block-rotate-nan", "tensor blk.0.attn_q.weight: NaN or Inf at element 70 (cannot rotate)")
def _(work):
    return quantize_case(work, f16_poison(work, 0x7E00), "NVFP4", "--block-rotate")


@case("quantize/block-rotate-twice", "the model is already block-rotated")
def _(work):
    return quantize_case(work, block_rotated(work), "NVFP4", "--block-rotate")


@case("quantize/block-rotate-no-fit", "--block-rotate 4096: no linear weight has rows of whole blocks")
def _(work):
    return quantize_case(work, B.gguf, "NVFP4", "--block-rotate", "4096")


@case("quantize/block-rotate-size", "--block-rotate N needs a power of two from 2 to 4096, got '24'", code=2)
def _(work):
    return quantize_case(work, B.gguf, "NVFP4", "--block-rotate", "24")


@case("quantize/block-rotate-preset", "--block-rotate is for NVFP4, MXFP4, MXFP4_MOE (and F32, F16, BF16), not Q4_K_M",
      code=2)
def _(work):
    return quantize_case(work, B.gguf, "Q4_K_M", "--block-rotate")


@case("quantize/block-rotate-smoothquant", "--block-rotate: --smoothquant/--awq scale the unrotated channels", code=2)
def _(work):
    return quantize_case(work, B.gguf, "NVFP4", "--block-rotate", "--calibration-file", B.gguf, "--smoothquant")


@case("quantize/block-rotate-stats", "--block-rotate: --stats of the unrotated model do not describe the rotated one",
      code=2)
def _(work):
    return quantize_case(work, B.gguf, "NVFP4", "--block-rotate", "--stats", B.gguf)


@case("quantize/block-rotate-export", "--block-rotate: compressed-tensors has no rotations (vLLM would compute another "
      "function): no --export", code=2)
def _(work):
    out = os.path.join(work, "ct")
    return [QUANTIZE, B.gguf, "--export", "compressed-tensors", out, "NVFP4A16", "--block-rotate"], [out], None


@case("quantize/export-block-rotated", "is block-rotated (hfq.block_rotate.blk.0.attn_q.weight): compressed-tensors has "
      "no such rotation")
def _(work):
    return export_case(work, block_rotated(work))


@case("ppl/block-rotate-bad-value", "tensor 'blk.0.attn_q.weight': hfq.block_rotate 'hadamard:24:1' is not")
def _(work):
    return ppl_case(work, with_rot_key(work, "blk.0.attn_q.weight", "hadamard:24:1"))


@case("ppl/block-rotate-token-embd", "tensor 'token_embd.weight': hfq.block_rotate is for 2-D linear weights")
def _(work):
    return ppl_case(work, with_rot_key(work, "token_embd.weight", "hadamard:16:1"))


@case("ppl/block-rotate-no-tensor", "key 'hfq.block_rotate.blk.9.attn_q.weight' names no tensor of the file")
def _(work):
    return ppl_case(work, with_rot_key(work, "blk.9.attn_q.weight", "hadamard:16:1"))


@case("quantize/bad-tensor-type-regex", "--tensor-type: bad regex '(attn'", code=2)
def _(work):
    return quantize_case(work, B.gguf, "Q8_0", "--tensor-type", "(attn=q4_0")


# llama-quantize refuses these very low-bit formats (and Q2_K_S's Q2_K) without an imatrix (rows of
# 256, so no fallback)
for _preset, _fmt in (("IQ2_XXS", "iq2_xxs"), ("IQ1_S", "iq1_s"), ("IQ3_XXS", "iq2_s"), ("Q2_K_S", "q2_K")):
    @case(f"quantize/no-importance-{_preset}", f"tensor blk.0.attn_q.weight: format {_fmt} needs importance data")
    def _(work, preset=_preset):
        model = os.path.join(work, "wide")
        gguf = os.path.join(work, "wide.gguf")
        must([MKMODEL, model, "--hidden", "256", "--ffn", "256", "--layers", "1"])
        must([HFCONV, model, "-o", gguf, "-q"])
        return quantize_case(work, gguf, preset)



# ---------------------------------------------------------------- tokenize


@case("tokenize/gguf-merge-newline (fuzz)", "tokenizer.ggml.merges[0]: \"a?b\" is not \"left right\"")
def _(work):
    return [TOKENIZE, os.path.join(REGRESS, "gguf", "merge_with_newline.gguf"), "-p", "ab"], [], None


@case("tokenize/gguf-truncated", "tensor 'blk.0.ffn_down.weight': data extends past end of file")
def _(work):
    g = B.copy_gguf(work)
    truncate(g, os.path.getsize(g) // 2)
    return [TOKENIZE, g, "-p", "hello"], [], None


@case("tokenize/gguf-without-tokenizer", "tokenizer.ggml.model: missing (no tokenizer in this file)")
def _(work):
    g = os.path.join(work, "no-tok.gguf")
    # a GGUF v3 with one key (general.architecture = "llama") and no tensors
    key, val = b"general.architecture", b"llama"
    open(g, "wb").write(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key +
                        struct.pack("<IQ", 8, len(val)) + val)
    return [TOKENIZE, g, "-p", "hello"], [], None


@case("tokenize/decode-id-out-of-range", "token id 512 is outside the vocabulary of 512 tokens")
def _(work):
    return [TOKENIZE, B.gguf, "--decode", "-p", "1 2 512"], [], None


@case("tokenize/decode-not-a-number", 'tokenize: "x7" is not a token id')
def _(work):
    return [TOKENIZE, B.gguf, "--decode", "-p", "1 x7"], [], None


@case("tokenize/tokenizer-dir-truncated", "tokenizer.json: invalid JSON")
def _(work):
    m = B.copy_model(work)
    p = os.path.join(m, "tokenizer.json")
    truncate(p, os.path.getsize(p) // 2)
    return [TOKENIZE, "--tokenizer-dir", m, "-p", "hello"], [], None


@case("tokenize/text-file-missing", "nope.txt: cannot open: No such file or directory")
def _(work):
    return [TOKENIZE, B.gguf, "--text", os.path.join(work, "nope.txt")], [], None


# ---------------------------------------------------------------- gguf-info, mkmodel


@case("gguf-info/truncated", "tensor 'output.weight': data extends past end of file")
def _(work):
    g = B.copy_gguf(work)
    truncate(g, os.path.getsize(g) - 1000)
    return [GGUF_INFO, g], [], None


@case("gguf-info/verify-flipped-byte", "verify failed: 1 of 21 tensors do not match their stored hashes", code=4,
       stdout="verify: tensor 'blk.1.ffn_down.weight': hash mismatch")
def _(work):
    g = B.copy_gguf(work)
    t = B.tensor("blk.1.ffn_down.weight")
    pos = B.layout["data_offset"] + t["offset"] + 17
    raw = open(g, "rb").read()
    patch(g, pos, bytes([raw[pos] ^ 0x10]))
    return [GGUF_INFO, g, "--verify", "--no-tensors"], [], None


@case("mkmodel/disk-full", "model.safetensors: write failed: File too large")
def _(work):
    out = os.path.join(work, "m")
    return ([MKMODEL, out, "--hidden", "256", "--ffn", "512"],
            [os.path.join(out, "config.json"), os.path.join(out, "model.safetensors")], disk_full)


@case("mkmodel/read-only-folder", "cannot create folder: Permission denied")
def _(work):
    d, pre = read_only_dir(work, "ro")
    out = os.path.join(d, "m")
    return [MKMODEL, out], [out], pre


@case("mkmodel/bad-shape", "mkmodel: heads 5 must divide hidden 64 into an even head size", code=2)
def _(work):
    out = os.path.join(work, "m")
    return [MKMODEL, out, "--hidden", "64", "--heads", "5"], [out], None


@case("mkmodel/out-dir-is-a-file", "OUT_DIR exists and is not a folder", code=2)
def _(work):
    f = os.path.join(work, "m")
    open(f, "w").write("mine\n")
    return [MKMODEL, f], [], None, [f]


@case("mkmodel/missing-parent-folder", "m: OUT_DIR: folder ", code=2)
def _(work):
    out = os.path.join(work, "nope", "m")
    return [MKMODEL, out], [out], None


@case("mkmodel/output-file-is-a-folder", "config.json: the output is a folder, not a file", code=2)
def _(work):
    out = os.path.join(work, "m")
    os.makedirs(os.path.join(out, "config.json", "keep"))   # refused before any file is written
    return [MKMODEL, out], [os.path.join(out, f) for f in ("model.safetensors", "tokenizer.json")], None, [out]


@case("mkmodel/shard-is-a-folder", "model-00002-of-00002.safetensors: the output is a folder", code=2)
def _(work):
    out = os.path.join(work, "m")
    os.makedirs(os.path.join(out, "model-00002-of-00002.safetensors"))
    return [MKMODEL, out, "--shards", "2"], [os.path.join(out, "config.json")], None, [out]


# ---------------------------------------------------------------- non-UTF-8 text: defined, not an error


def non_utf8_text(tmp):
    """Invalid bytes tokenize as U+FFFD each (unicode.h): isolated invalid bytes
    give the same ids as the text with U+FFFD in their place, from the GGUF and
    from the folder; the tool succeeds and prints one line."""
    bad = b"caf\xff and \x80 more \xfe end"
    good = "caf\ufffd and \ufffd more \ufffd end".encode()
    problems = []
    for src in ([B.gguf], ["--tokenizer-dir", B.model]):
        ids = []
        for text in (bad, good):
            p = os.path.join(tmp, "text.txt")
            open(p, "wb").write(text)
            r = run([TOKENIZE, *src, "--text", p])
            if r.returncode != 0 or r.stdout.count(b"\n") != 1:
                problems.append(f"{src}: exit {r.returncode}, stdout {r.stdout[:80]!r}, stderr {r.stderr[:200]!r}")
            ids.append(r.stdout)
        if ids[0] != ids[1]:
            problems.append(f"{src}: ids differ: {ids[0][:80]!r} vs {ids[1][:80]!r}")
    return problems


# ---------------------------------------------------------------- --version and -h


def version_and_help():
    """--version: "TOOL (hfq) VERSION" on stdout; -h: the usage on stdout;
    both exit 0 with nothing on stderr."""
    problems = []
    for name, tool in (("hfconv", HFCONV), ("mkmodel", MKMODEL), ("tokenize", TOKENIZE), ("gguf-info", GGUF_INFO)):
        r = run([tool, "--version"])
        if r.returncode != 0 or not r.stdout.startswith(f"{name} (hfq) ".encode()) or r.stderr:
            problems.append(f"{name} --version: exit {r.returncode}, stdout {r.stdout!r}, stderr {r.stderr!r}")
        r = run([tool, "-h"])
        if r.returncode != 0 or not r.stdout.startswith(b"usage: ") or r.stderr:
            problems.append(f"{name} -h: exit {r.returncode}, stdout {r.stdout[:60]!r}, stderr {r.stderr!r}")
    # a value that looks like an option is still a value
    r = run([TOKENIZE, B.gguf, "--no-bos", "-p", "-h"])
    if r.returncode != 0 or not r.stdout.strip():
        problems.append(f"tokenize -p -h: exit {r.returncode}, stdout {r.stdout!r}")
    return problems


def tree_digest(paths):
    """Path -> bytes (None for a folder) of every file and folder under paths."""
    out = {}
    for p in paths:
        if os.path.isdir(p) and not os.path.islink(p):
            out[p] = None
            for root, dirs, files in os.walk(p):
                for d in dirs:
                    out[os.path.join(root, d)] = None
                for f in files:
                    out[os.path.join(root, f)] = open(os.path.join(root, f), "rb").read()
        else:
            out[p] = open(p, "rb").read()
    return out


# ---------------------------------------------------------------- runner


def temps_in(folders):
    return [os.path.join(d, f) for d in folders if os.path.isdir(d) for f in os.listdir(d) if ".tmp." in f]


def leftovers(outputs):
    return [p for p in outputs if os.path.exists(p)] + temps_in({os.path.dirname(p) for p in outputs})


# ---------------------------------------------------------------- static FP8 KV-cache scales

def kv_scales_case(work, keys, kv_type="fp8_e4m3"):
    """ppl-eval --kv-type fp8 on the base GGUF with hfq.kv_cache.* keys (name, value, type[, element type])."""
    bad = os.path.join(work, "bad.gguf")
    gguf_with(B.gguf, bad, keys=keys)
    text = os.path.join(work, "text.txt")
    open(text, "w").write("some words to evaluate " * 40)
    return [PPL_EVAL, bad, "--text", text, "--ctx", "32", "--kv-type", kv_type], [], None, [bad]


def kv_key(name, values, elem=None):
    from gguf import GGUFValueType
    return (name, values, GGUFValueType.ARRAY, elem or GGUFValueType.FLOAT32)


@case("ppl-eval/kv-scale-half", "key hfq.kv_cache.k_scale without hfq.kv_cache.v_scale: static KV scales come in pairs")
def _(work):
    return kv_scales_case(work, [kv_key("hfq.kv_cache.k_scale", [0.1, 0.1])])


@case("ppl-eval/kv-scale-count", "key hfq.kv_cache.v_scale: 3 scales for a model of 2 layers")
def _(work):
    return kv_scales_case(work, [kv_key("hfq.kv_cache.k_scale", [0.1, 0.1]),
                                 kv_key("hfq.kv_cache.v_scale", [0.1, 0.1, 0.1])], "fp8_e5m2")


@case("ppl-eval/kv-scale-nan", "key hfq.kv_cache.k_scale: layer 1's scale nan is not a finite number > 0")
def _(work):
    return kv_scales_case(work, [kv_key("hfq.kv_cache.k_scale", [0.1, float("nan")]),
                                 kv_key("hfq.kv_cache.v_scale", [0.1, 0.1])])


@case("ppl-eval/kv-scale-negative", "key hfq.kv_cache.v_scale: layer 0's scale -0.1 is not a finite number > 0")
def _(work):
    return kv_scales_case(work, [kv_key("hfq.kv_cache.k_scale", [0.1, 0.1]),
                                 kv_key("hfq.kv_cache.v_scale", [-0.1, 0.1])], "f16,fp8_e4m3")


@case("ppl-eval/kv-scale-type", "key hfq.kv_cache.k_scale: not an array of F32 (static KV scales)")
def _(work):
    from gguf import GGUFValueType
    return kv_scales_case(work, [kv_key("hfq.kv_cache.k_scale", [1, 1], GGUFValueType.INT32),
                                 kv_key("hfq.kv_cache.v_scale", [0.1, 0.1])])


def kv_stats(work, drop_keys=(), keys=()):
    """A statistics file of the base GGUF (calibrated on a short text), edited."""
    text = os.path.join(work, "calib.txt")
    open(text, "w").write("once upon a time there was a little dog " * 30)
    good, bad = os.path.join(work, "good-stats.gguf"), os.path.join(work, "stats.gguf")
    must([QUANTIZE, B.gguf, "--calibration-file", text, "--calib-ctx", "32", "--save-stats", good, "--quiet"])
    gguf_with(good, bad, drop_keys=drop_keys, keys=keys)
    return bad


@case("quantize/kv-scales-no-maxima", "--kv-scales needs K and V maxima, which the statistics lack")
def _(work):
    stats = kv_stats(work, drop_keys=("hfq.calib.kv.n_head_kv", "hfq.calib.kv.k_amax", "hfq.calib.kv.v_amax"))
    return quantize_case(work, B.gguf, "Q8_0", "--stats", stats, "--kv-scales") + ([stats],)


@case("quantize/kv-maxima-heads", "key hfq.calib.kv.n_head_kv: 3 kv heads do not divide the")
def _(work):
    from gguf import GGUFValueType
    stats = kv_stats(work, drop_keys=("hfq.calib.kv.n_head_kv",),
                     keys=(("hfq.calib.kv.n_head_kv", 3, GGUFValueType.UINT32),))
    return quantize_case(work, B.gguf, "Q8_0", "--stats", stats, "--kv-scales") + ([stats],)


@case("quantize/kv-maxima-other-model", "KV maxima for 1 layers of 4 kv heads, the model has 2 of 2")
def _(work):
    from gguf import GGUFValueType
    stats = kv_stats(work, drop_keys=("hfq.calib.kv.n_head_kv",),
                     keys=(("hfq.calib.kv.n_head_kv", 4, GGUFValueType.UINT32),))
    return quantize_case(work, B.gguf, "Q8_0", "--stats", stats, "--kv-scales") + ([stats],)


@case("quantize/kv-maxima-half", "key hfq.calib.kv.v_amax is missing beside hfq.calib.kv.n_head_kv")
def _(work):
    stats = kv_stats(work, drop_keys=("hfq.calib.kv.v_amax",))
    return quantize_case(work, B.gguf, "Q8_0", "--stats", stats, "--kv-scales") + ([stats],)


@case("quantize/kv-maxima-negative", "key hfq.calib.kv.k_amax: value -1 at 0 is not a finite non-negative number")
def _(work):
    stats = kv_stats(work, drop_keys=("hfq.calib.kv.k_amax",), keys=(kv_key("hfq.calib.kv.k_amax", [-1.0, 1, 1, 1]),))
    return quantize_case(work, B.gguf, "Q8_0", "--stats", stats, "--kv-scales") + ([stats],)


@case("quantize/calib-kv-type-alone", "--calib-* options need --calibration-file", code=2)
def _(work):
    return quantize_case(work, B.gguf, "Q8_0", "--calib-kv-type", "fp8_e4m3")


@case("quantize/calib-kv-type-bad", "--calib-kv-type", code=2)
def _(work):
    text = os.path.join(work, "calib.txt")
    open(text, "w").write("once upon a time " * 30)
    return quantize_case(work, B.gguf, "Q8_0", "--calibration-file", text, "--calib-kv-type", "fp9")


# ---------------------------------------------------------------- GPTQ (docs/calibration.md, "GPTQ")

@case("quantize/gptq-stats", "--gptq needs --calibration-file (statistics files hold no Hessians)", code=2)
def _(work):
    return quantize_case(work, B.gguf, "Q4_0", "--stats", kv_stats(work), "--gptq")


@case("quantize/export-w4a16-gptq-stats", "--gptq needs --calibration-file (statistics files hold no Hessians)",
      code=2)
def _(work):
    out = os.path.join(work, "ct")
    return [QUANTIZE, B.gguf, "--export", "compressed-tensors", out, "W4A16", "--quiet", "--stats", kv_stats(work),
            "--gptq"], [out], None


@case("quantize/gptq-alone", "calibration uses need --calibration-file or --stats", code=2)
def _(work):
    return quantize_case(work, B.gguf, "Q4_0", "--gptq")


def gptq_case(work, *extra):
    """quantize to Q4_0 calibrated on a short text, with extra options."""
    text = os.path.join(work, "calib.txt")
    open(text, "w").write("once upon a time " * 30)
    return quantize_case(work, B.gguf, "Q4_0", "--calibration-file", text, *extra)


@case("quantize/gptq-damp-alone", "--gptq-damp/--gptq-block/--gptq-memory need --gptq", code=2)
def _(work):
    return gptq_case(work, "--gptq-damp", "0.1")


@case("quantize/gptq-damp-range", "--gptq-damp", code=2)
def _(work):
    return gptq_case(work, "--gptq", "--gptq-damp", "-1")


@case("quantize/gptq-memory-bad", "--gptq-memory needs a size such as 4G, got '0'", code=2)
def _(work):
    return gptq_case(work, "--gptq", "--gptq-memory", "0")


@case("quantize/gptq-sequential-alone", "--gptq-sequential/--gptq-act-order need --gptq", code=2)
def _(work):
    return gptq_case(work, "--gptq-sequential")


@case("quantize/gptq-quantized-inputs-alone", "--gptq-quantized-inputs is for --act-scales GGUF outputs", code=2)
def _(work):
    return gptq_case(work, "--gptq", "--gptq-quantized-inputs")


@case("quantize/no-act-search-alone", "--no-act-search is for --act-scales GGUF outputs", code=2)
def _(work):
    return quantize_case(work, B.gguf, "NVFP4", "--no-act-search")


def calibrated_export_case(work, preset, *opts):
    """quantize --export compressed-tensors of B calibrated on a short text."""
    text = os.path.join(work, "calib.txt")
    open(text, "w").write("once upon a time " * 30)
    out = os.path.join(work, "ct")
    return [QUANTIZE, B.gguf, "--export", "compressed-tensors", out, preset, "--quiet", "--calibration-file", text,
            *opts], [out], None


@case("quantize/no-act-search-export", "--no-act-search is for --act-scales GGUF outputs", code=2)
def _(work):
    return calibrated_export_case(work, "NVFP4", "--act-scales", "--no-act-search")


@case("quantize/gptq-quantized-inputs-uncalibrated", "calibration uses need --calibration-file or --stats", code=2)
def _(work):
    return quantize_case(work, B.gguf, "NVFP4", "--gptq-quantized-inputs")


@case("quantize/gptq-act-order-uncalibrated", "calibration uses need --calibration-file or --stats", code=2)
def _(work):
    return quantize_case(work, B.gguf, "Q4_0", "--gptq-act-order")


@case("quantize/gptq-sequential-export", "--gptq-sequential/--gptq-act-order are for GGUF outputs, not --export",
      code=2)
def _(work):
    return calibrated_export_case(work, "W4A16", "--gptq", "--gptq-sequential")


# ---------------------------------------------------------------- FP8 128x128 block scales

def block_recipe(work, fmt="fp8_e4m3"):
    recipe = os.path.join(work, "block.json")
    with open(recipe, "w") as f:
        json.dump({"name": "b", "rules": [{"match": "blk\\.", "format": fmt, "granularity": "block"}],
                   "default": {"format": "f32"}}, f)
    return recipe


def f32_model(work, hidden="64", heads="4"):
    m = os.path.join(work, "m")
    must([MKMODEL, m, "--hidden", hidden, "--heads", heads, "--kv-heads", heads])
    f32 = os.path.join(work, "m.gguf")
    must([HFCONV, m, "-o", f32, "-q", "--outtype", "f32"])
    return f32


def fp8_block_gguf(work, hidden="64", heads="4"):
    """A model quantized with FP8 block scales on every blk. matrix (docs/format-quant-ext.md)."""
    f32, recipe = f32_model(work, hidden, heads), block_recipe(work)
    out = os.path.join(work, "block.gguf")
    must([QUANTIZE, f32, out, "--recipe", recipe, "--quiet"])
    return out


def ppl_case(work, gguf):
    text = os.path.join(work, "text.txt")
    open(text, "w").write("some words to evaluate " * 40)
    return [PPL_EVAL, gguf, "--text", text, "--ctx", "32"], [], None, [gguf]


@case("quantize/recipe-int8-block", "int8 takes no 128x128 block scales (fp8 only)")
def _(work):
    out = out_in(work)
    return [QUANTIZE, B.gguf, out, "--recipe", block_recipe(work, "int8")], [out], None


@case("quantize/export-fp8-block-heads", "heads of 256 rows cross its 128-row scale blocks")
def _(work):
    out = os.path.join(work, "ct")
    return [QUANTIZE, f32_model(work, hidden="512", heads="2"), "--export", "compressed-tensors", out,
            "FP8_BLOCK", "--quiet"], [out], None


@case("ppl-eval/fp8-block-ragged-row", "FP8 block scales need rows of a multiple of 128 values, not 192")
def _(work):
    return ppl_case(work, fp8_block_gguf(work, hidden="192", heads="3"))


@case("ppl-eval/fp8-block-nan-scale", "tensor 'blk.0.attn_q.scale' holds nan, not a valid scale")
def _(work):
    import numpy as np
    good, bad = fp8_block_gguf(work), os.path.join(work, "bad.gguf")
    gguf_with(good, bad, drop=("blk.0.attn_q.scale",), add=(("blk.0.attn_q.scale", np.full((1, 1), np.nan)),))
    return ppl_case(work, bad)


@case("ppl-eval/fp8-block-shape", "tensor 'blk.0.attn_q.scale' (f32 [1, 2]) is not the F32 scales")
def _(work):
    import numpy as np
    good, bad = fp8_block_gguf(work), os.path.join(work, "bad.gguf")
    gguf_with(good, bad, drop=("blk.0.attn_q.scale",), add=(("blk.0.attn_q.scale", np.full((2, 1), 0.01)),))
    return ppl_case(work, bad)


def main():
    global B
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        B = Base(os.path.join(tmp, "base"))
        n = 0
        for name, expect, code, want_stdout, fn in CASES:
            if ONLY and not any(o in name for o in ONLY):
                continue
            n += 1
            work = os.path.join(tmp, "case%03d" % n)
            os.makedirs(work)
            argv, outputs, preexec, *rest = fn(work)
            unchanged = rest[0] if rest else []
            before = tree_digest(unchanged)
            r = run(argv, preexec_fn=preexec)
            err = r.stderr.decode(errors="replace")
            problems = []
            if r.returncode != code:
                problems.append(f"exit {r.returncode}, want {code}")
            lines = err.split("\n")
            if not err.endswith("\n") or len(lines) != 2:
                problems.append(f"stderr is not one line: {err!r}")
            after = tree_digest(unchanged)
            if after != before:
                changed = sorted(set(before) ^ set(after) | {p for p in before if before[p] != after.get(p)})
                problems.append(f"inputs changed: {changed}")
            temps = temps_in({p if os.path.isdir(p) else os.path.dirname(p) for p in unchanged})
            if temps:
                problems.append(f"temporaries left behind: {temps}")
            if expect not in lines[0]:
                problems.append(f"stderr lacks {expect!r}: {err.strip()!r}")
            if want_stdout and want_stdout not in r.stdout.decode(errors="replace"):
                problems.append(f"stdout lacks {want_stdout!r}")
            left = leftovers(outputs)
            if left:
                problems.append(f"left behind: {left}")
            failures += bool(problems)
            print(("FAIL " if problems else "ok   ") + name + ("" if problems else "  " + err.strip()[:100] * VERBOSE))
            for p in problems:
                print("     " + p)
        if not ONLY or any(o in "cli/version-and-help" for o in ONLY):
            problems = version_and_help()
            n += 1
            failures += bool(problems)
            print(("FAIL " if problems else "ok   ") + "cli/version-and-help")
            for p in problems:
                print("     " + p)
        if not ONLY or any(o in "tokenize/non-utf8" for o in ONLY):
            problems = non_utf8_text(tmp)
            n += 1
            failures += bool(problems)
            print(("FAIL " if problems else "ok   ") + "tokenize/non-utf8-text")
            for p in problems:
                print("     " + p)
    print(f"bad_input_check: {n - failures}/{n} cases passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
