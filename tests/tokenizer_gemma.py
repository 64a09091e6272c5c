"""Gemma's vocabulary against the reference tokenizers.

A Gemma-style tokenizer.model (tests/spm_gemma.py: SentencePiece BPE, byte
fallback, no dummy prefix, Gemma's special ids) beside a Gemma 2 config.json,
converted by `hfconv --vocab-only`; then on the same inputs (every distinct
line of the docs, the docs whole, hand-made edge cases: digit runs, emoji,
CJK, bytes no piece holds, whitespace runs, tabs, newlines, the user-defined
<start_of_turn>) our `tokenize` must give sentencepiece's ids: from the GGUF
and from the folder, without BOS (--no-bos) and with it (Gemma's <bos> 2,
add_bos_token true, no EOS). The GGUF's tokenizer keys must say what llama.cpp's
Gemma converters write (model "llama", add_space_prefix false, bos 2, eos 1,
unknown 3, padding 0), and llama.cpp's own llama-tokenize on our GGUF must give
the same ids (it is what llama-perplexity reads) on the texts without
user-defined pieces. Skips (77) without the
sentencepiece package; the llama-tokenize part without llama.cpp's build.

usage: tokenizer_gemma.py TOKENIZE HFCONV [LLAMA_TOKENIZE]
"""
import json
import os
import random
import subprocess
import sys
import tempfile

from gguf_common import check, finish
from tokenize_common import compare, llama_tokenize, ours

try:
    import sentencepiece as spm
except ImportError as e:
    print(f"SKIP: sentencepiece not installed ({e}); run scripts/test.sh (scripts/setup_tests_torch.sh)")
    sys.exit(77)
from gguf import GGUFReader

import spm_gemma

TOKENIZE, HFCONV = sys.argv[1:3]
LLAMA_TOKENIZE = sys.argv[3] if len(sys.argv) > 3 else None
SOURCE = os.environ.get("HFQ_SOURCE", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
VOCAB = 512
EDGE = ["", " ", "  leading spaces", "trailing  ", "tab\there", "line\nbreak\n\n", "digits 1234567890 3.14159",
        "emoji 🙂🚀", "CJK 漢字かな", "ünïcödé", "\x7f\x01 control", "<start_of_turn>user\nHi<end_of_turn>",
        "a" * 300, "mixed   runs\t\t of  whitespace", "Hugging Face -> GGUF", "x" + " " * 17 + "y"]


def inputs():
    text = spm_gemma.docs_text(SOURCE)
    lines = sorted(set(ln for ln in text.splitlines() if ln.strip()))
    rng = random.Random(17)
    pool = "ab ,.-_\t\n0123456789éü漢🙂<>"
    rand = ["".join(rng.choice(pool) for _ in range(rng.randint(1, 40))) for _ in range(200)]
    return EDGE + lines + rand + [text]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "gemma")
        os.makedirs(folder)
        spm_gemma.write_tokenizer_files(folder, VOCAB)
        json.dump({"architectures": ["Gemma2ForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
                   "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                   "vocab_size": VOCAB, "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
                   "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 16, "sliding_window": 64,
                   "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0},
                  open(os.path.join(folder, "config.json"), "w"))
        gguf = os.path.join(tmp, "vocab.gguf")
        r = subprocess.run([HFCONV, folder, "-o", gguf, "--vocab-only", "-q"], capture_output=True, text=True)
        check(r.returncode == 0, f"hfconv --vocab-only: {r.stderr.strip()}")
        if r.returncode != 0:
            sys.exit(finish())
        fields = GGUFReader(gguf).fields
        want_keys = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.add_space_prefix": False,
                     "tokenizer.ggml.bos_token_id": 2, "tokenizer.ggml.eos_token_id": 1,
                     "tokenizer.ggml.unknown_token_id": 3, "tokenizer.ggml.padding_token_id": 0,
                     "tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.add_eos_token": False}
        for k, v in want_keys.items():
            got = fields[k].contents() if k in fields else None
            check(got == v, f"key {k}: {got!r}, llama.cpp's Gemma converters write {v!r}")
        sp = spm.SentencePieceProcessor(model_file=os.path.join(folder, "tokenizer.model"))
        texts = inputs()
        ref = [sp.encode(t) for t in texts]
        for label, src in (("gguf", [gguf]), ("dir", ["--tokenizer-dir", folder])):
            compare(f"{label} plain", ours(TOKENIZE, src, texts, ["--no-bos"]), ref, texts)
            compare(f"{label} bos", ours(TOKENIZE, src, texts, []), [[sp.bos_id()] + ids for ids in ref], texts)
        if LLAMA_TOKENIZE and os.access(LLAMA_TOKENIZE, os.X_OK):
            # not the user-defined pieces: llama.cpp's SPM tokenizer matches them
            # unlike sentencepiece (here it split <end_of_turn>, and llama.cpp's
            # converter writes them NORMAL, which it would not match at all)
            few = [t for t in texts[:len(EDGE)] if t and "_of_turn>" not in t] + texts[len(EDGE):len(EDGE) + 40]
            compare("llama-tokenize", llama_tokenize(LLAMA_TOKENIZE, gguf, few), [sp.encode(t) for t in few], few)
        else:
            print(f"SKIP (part): no llama-tokenize at {LLAMA_TOKENIZE} (scripts/build_reference.sh builds it)")
        dummy_prefix_rule(tmp, folder, texts)
    sys.exit(finish())


def dummy_prefix_rule(tmp, folder, texts):
    """A tokenizer.model that asks for a dummy prefix (stories260K's) beside a
    Gemma config: llama.cpp's Gemma converters write add_space_prefix false
    whatever it says, and tokenize --tokenizer-dir reads the folder as hfconv
    does (the same ids as the GGUF's, none of the prefix)."""
    model = os.path.join(os.environ.get("HFQ_FIXTURES", ""), "models", "stories260K", "tokenizer.model")
    if not os.path.isfile(model):
        print(f"SKIP (part): no {model} (the fixtures)")
        return
    d = os.path.join(tmp, "gemma-dummy-prefix")
    os.makedirs(d)
    cfg = json.load(open(os.path.join(folder, "config.json")))
    json.dump(dict(cfg, vocab_size=512, bos_token_id=1, eos_token_id=2, pad_token_id=None),
              open(os.path.join(d, "config.json"), "w"))
    import shutil
    shutil.copy(model, d)
    gguf = os.path.join(tmp, "dummy.gguf")
    r = subprocess.run([HFCONV, d, "-o", gguf, "--vocab-only", "-q"], capture_output=True, text=True)
    check(r.returncode == 0, f"hfconv --vocab-only (dummy prefix): {r.stderr.strip()}")
    if r.returncode != 0:
        return
    got = GGUFReader(gguf).fields["tokenizer.ggml.add_space_prefix"].contents()
    check(got is False, f"dummy-prefix tokenizer.model under Gemma: add_space_prefix {got!r}, want False")
    few = [t for t in texts[:200] if t.strip()]
    from_gguf = ours(TOKENIZE, [gguf], few, ["--no-bos"])
    compare("dummy prefix: dir vs gguf", ours(TOKENIZE, ["--tokenizer-dir", d], few, ["--no-bos"]), from_gguf, few)
    sp = spm.SentencePieceProcessor(model_file=model)   # adds the prefix: the rule must change something
    check(sum(a != sp.encode(t) for a, t in zip(from_gguf, few)) > 0, "the no-prefix rule changed no ids")


if __name__ == "__main__":
    main()
