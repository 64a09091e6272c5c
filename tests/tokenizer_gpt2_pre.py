#!/usr/bin/env python3
"""GPT-2's pre-tokenizer and its digit-splitting variant (src/tokenizer/pretok.h:
GPT2 for tokenizer.ggml.pre "gpt-2", "olmo", ...; GPT2_DIGITS for "smollm",
"starcoder", ...), read from GGUF files as llama.cpp's users have them (SmolLM2's
GGUFs say "smollm").

The fixture's Llama 3 vocabulary and merges (no such tokenizer is at hand
here), converted by `hfconv --vocab-only`, with tokenizer.ggml.pre rewritten
to each name; on the same texts (edge cases of the regex: contractions in
both cases, runs of spaces, tabs and newlines before letters, digits and
punctuation, digits of other scripts, CJK, emoji; every distinct line of the
docs; random strings) our `tokenize` must give:
- Hugging Face tokenizers' ids for the same vocabulary with that pre-tokenizer
  (ByteLevel with its regex; Digits(individual_digits) before it for the digit
  variant; merges not skipped, as llama.cpp does for these names);
- llama.cpp's llama-tokenize's ids on the same GGUF (skipped without the
  reference build), and its BOS default where the file has no
  tokenizer.ggml.add_bos_token (none for these names, one for "falcon3",
  which llama.cpp reads as Llama 3's);
- an unknown name refused in one line that names the file and the key.

usage: tokenizer_gpt2_pre.py TOKENIZE HFCONV [LLAMA_TOKENIZE]
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

from gguf import GGUFWriter
from tokenizers import Tokenizer, pre_tokenizers

from gguf_common import add_keys, arch_of, check, finish, read_keys
from tokenize_common import compare, llama_tokenize, ours

TOKENIZE, HFCONV = sys.argv[1:3]
LLAMA_TOKENIZE = sys.argv[3] if len(sys.argv) > 3 and os.access(sys.argv[3], os.X_OK) else None
FIXTURES = os.environ.get("HFQ_FIXTURES", "")
SOURCE = os.environ.get("HFQ_SOURCE", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
LLAMA3 = os.path.join(FIXTURES, "tokenizers", "llama3")
EDGE = ["", " ", "a", " a", "  a", "   a", "\ta", "\t\ta", "\na", "\n\na", " \na", "a ", "a  ", "a\n", "a \n ",
        "it's IT'S I'M we'll they'RE you'd 'sa ' s ''s", "don't DON'T", "WE'LL they've THEY'VE she'd", "x'" , "'",
        "12 345 6789 0", "v1.2.3", "a1b22c333", " 1", "  12", "x 12y", "٣٤٥ ١٢", "½ ² Ⅻ ₃", "१२३",
        "!!! ?? ...", " !x", "  !x", "a.b,c;d", "--> <= >>= ::", "$100.00", "100%",
        "漢字かな 漢字", "🙂🚀 x🙂", "ünïcödé Ünïcödé", "ﬁ ﬂ", "\u00a0a \u2003b", "\r\nx\r\n", "tab\there\tthere",
        "mixed   runs\t\t of  whitespace\n\n\n", "x" + " " * 17 + "y", "a" * 300, "9" * 40, "Hello, World! 2024"]


def inputs():
    docs = []
    for name in sorted(os.listdir(os.path.join(SOURCE, "docs"))):
        if name.endswith(".md"):
            docs += open(os.path.join(SOURCE, "docs", name), encoding="utf-8").read().splitlines()
    lines = sorted(set(ln for ln in docs if ln.strip()))[:400]
    rng = random.Random(23)
    pool = "ab AB'sdtm,.-_\t\n 0123456789éü漢🙂<>\u00a0٣"
    rand = ["".join(rng.choice(pool) for _ in range(rng.randint(1, 40))) for _ in range(300)]
    return EDGE + lines + rand


def with_pre(keys, dst, pre, drop=()):
    """A vocabulary-only GGUF of keys (read_keys) with tokenizer.ggml.pre = pre, keys in drop left out."""
    w = GGUFWriter(dst, arch_of(keys))
    add_keys(w, keys, {"tokenizer.ggml.pre": pre}, drop)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()


def hf_reference(digits):
    tok = Tokenizer.from_file(os.path.join(LLAMA3, "tokenizer.json"))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
                         if digits else byte_level)
    spec = json.loads(tok.to_str())
    spec["model"]["ignore_merges"] = False   # llama.cpp merges these names' pieces
    spec["post_processor"] = None
    return Tokenizer.from_str(json.dumps(spec))


def main():
    if not os.path.isfile(os.path.join(LLAMA3, "tokenizer.json")):
        print(f"SKIP: no fixture tokenizer at {LLAMA3} (HFQ_FIXTURES)")
        return 77
    texts = inputs()
    tmp = tempfile.mkdtemp(prefix="hfq_gpt2pre_")
    try:
        folder = os.path.join(tmp, "llama3")
        os.makedirs(folder)
        for n in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(LLAMA3, n), folder)
        json.dump({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
                   "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "vocab_size": 128256, "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
                   "bos_token_id": 128000, "eos_token_id": 128001},
                  open(os.path.join(folder, "config.json"), "w"))
        base = os.path.join(tmp, "llama3.gguf")
        r = subprocess.run([HFCONV, folder, "-o", base, "--vocab-only", "-q"], capture_output=True, text=True)
        check(r.returncode == 0, f"hfconv --vocab-only: {r.stderr.strip()}")
        if r.returncode != 0:
            return finish()
        keys = read_keys(base)
        few = [t for t in EDGE + texts[len(EDGE)::60] if t]   # llama-tokenize fails on an empty prompt
        for pre, digits in (("gpt-2", False), ("olmo", False), ("smollm", True), ("starcoder", True)):
            gguf = os.path.join(tmp, f"{pre}.gguf")
            with_pre(keys, gguf, pre)
            ref = hf_reference(digits)
            want = [ref.encode(t, add_special_tokens=False).ids for t in texts]
            compare(f"{pre}: tokenizers", ours(TOKENIZE, [gguf], texts, ["--no-bos"]), want, texts)
            if LLAMA_TOKENIZE and pre in ("gpt-2", "smollm"):   # one process a text: the two kinds
                compare(f"{pre}: llama-tokenize", ours(TOKENIZE, [gguf], few, ["--no-bos"]),
                        llama_tokenize(LLAMA_TOKENIZE, gguf, few), few)
        if LLAMA_TOKENIZE:
            for pre in ("smollm", "falcon3"):   # BOS defaults: none, and Llama 3's
                gguf = os.path.join(tmp, f"{pre}-nobos.gguf")
                with_pre(keys, gguf, pre, drop=("tokenizer.ggml.add_bos_token",))
                compare(f"{pre} without add_bos_token: llama-tokenize", ours(TOKENIZE, [gguf], few[:6], []),
                        llama_tokenize(LLAMA_TOKENIZE, gguf, few[:6], bos=True), few[:6])
        else:
            print("note: no llama-tokenize (scripts/build_reference.sh): its comparisons skipped")
        bad = os.path.join(tmp, "unknown.gguf")
        with_pre(keys, bad, "no-such-pre")
        r = subprocess.run([TOKENIZE, bad, "-p", "x"], capture_output=True, text=True)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 1 and len(lines) == 1 and bad in lines[0] and "tokenizer.ggml.pre" in lines[0]
              and "no-such-pre" in lines[0] and "smollm" in lines[0], f"unknown pre: {r.returncode} {r.stderr!r}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
