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
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile

BUILD = os.environ["HFQ_BUILD"]
SOURCE = os.environ.get("HFQ_SOURCE", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(BUILD, "src", "tools")
HFCONV, QUANTIZE, TOKENIZE, MKMODEL, GGUF_INFO = (
    os.path.join(TOOLS, t) for t in ("hfconv", "quantize", "tokenize", "mkmodel", "gguf-info"))
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


@case("hfconv/config-truncated", "config.json: invalid JSON")
def _(work):
    return hfconv_with(work, "config.json", cut_to(0.5))


@case("hfconv/config-kv-heads", "num_attention_heads 4 is not a multiple of num_key_value_heads 3")
def _(work):
    return hfconv_with(work, "config.json", lambda p: edit_json(p, lambda c: c.__setitem__("num_key_value_heads", 3)))


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
