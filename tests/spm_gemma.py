"""A small Gemma-style SentencePiece tokenizer.model for the tests, trained
deterministically by the sentencepiece package on a fixed synthetic corpus
(seeded sentences over an English word list, so that editing the docs, which
the tests then tokenize, does not change the vocabulary): BPE,
byte fallback, identity normalizer, no dummy prefix, whitespace kept, digits
split, and Gemma's special tokens at Gemma's ids (<pad> 0, <eos> 1, <bos> 2,
<unk> 3, then <start_of_turn> / <end_of_turn> as user-defined symbols)."""
import glob
import io
import os
import random

GEMMA_SPECIALS = dict(pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>", eos_piece="<eos>",
                      bos_piece="<bos>", unk_piece="<unk>")
GEMMA_USER_SYMBOLS = ["<start_of_turn>", "<end_of_turn>"]


WORDS = ("the a of to and in is that for it as with was on be by this are from or at an which not have has "
         "model file tensor key value layer weight token text test format file bytes rows block scale type name "
         "read write convert quantize run check error line number size head window rope norm attention output "
         "input one two three first last each every other same more most only when where what how than then "
         "GGUF llama Gemma Hugging Face transformers CPU CUDA F16 F32 Q4_K Q8_0 KL PPL API JSON UTF-8").split()
PUNCT = [".", ",", ":", ";", " -", "!", "?", " (", ")", " `", "`", "'s", " 0", " 1", " 2", " 3", " 42", " 128",
         " 2026", " 1e-5", " 3.14", "\t", "  "]


def corpus(n_lines=3000, seed=17):
    """Seeded sentences over WORDS with punctuation, digits and runs of spaces."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n_lines):
        words = []
        for _ in range(rng.randint(3, 18)):
            w = rng.choice(WORDS)
            words.append(w.capitalize() if rng.random() < 0.1 else w)
            if rng.random() < 0.2:
                words[-1] += rng.choice(PUNCT)
        lines.append(" ".join(words))
    return lines


def docs_text(source):
    """The docs' text, in a fixed order."""
    return "".join(open(p, encoding="utf-8").read() for p in sorted(glob.glob(os.path.join(source, "docs", "*.md"))))


def train(path, vocab):
    """Writes tokenizer.model of `vocab` pieces to path; returns its bytes."""
    import sentencepiece as spm
    model = io.BytesIO()
    lines = corpus()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, model_type="bpe", vocab_size=vocab,
        byte_fallback=True, normalization_rule_name="identity", add_dummy_prefix=False,
        remove_extra_whitespaces=False, split_digits=True, num_threads=1, character_coverage=1.0,
        user_defined_symbols=GEMMA_USER_SYMBOLS, input_sentence_size=0, shuffle_input_sentence=False,
        max_sentence_length=100000, minloglevel=2, **GEMMA_SPECIALS)
    data = model.getvalue()
    with open(path, "wb") as f:
        f.write(data)
    return data


def write_tokenizer_files(folder, vocab):
    """tokenizer.model plus a tokenizer_config.json as Gemma's (add_bos_token
    true, add_eos_token false) in folder; other tokenizer files removed."""
    import json
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        p = os.path.join(folder, f)
        if os.path.exists(p):
            os.remove(p)
    train(os.path.join(folder, "tokenizer.model"), vocab)
    json.dump({"add_bos_token": True, "add_eos_token": False, "bos_token": "<bos>", "eos_token": "<eos>",
               "pad_token": "<pad>", "unk_token": "<unk>", "tokenizer_class": "GemmaTokenizer"},
              open(os.path.join(folder, "tokenizer_config.json"), "w"), indent=2)
