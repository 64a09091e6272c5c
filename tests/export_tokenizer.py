"""quantize --export compressed-tensors without --tokenizer-from: the tokenizer
files rebuilt from the GGUF's tokenizer.* keys (src/export/ct_tokenizer.h)
encode as the original folder's.

For each fixture tokenizer (llama3 and qwen3 byte-level BPE, llama2
SentencePiece-style BPE; the fixture model TinyStories-656K) a small
checkpoint of that vocabulary (the fixture model itself for TinyStories) is
converted with hfconv and exported (FP8_DYNAMIC); transformers' AutoTokenizer
on the exported folder must give the ids AutoTokenizer gives on the original
folder, on tokenizer_golden.py's cases (fixture texts, their lines, edge cases,
random strings):
  - add_special_tokens=False (special-token texts matched as added tokens);
  - add_special_tokens=True: BOS/EOS as the GGUF's add_bos_token says, which is
    the original's except for the llama3 fixture, whose tokenizer.json has no
    template while llama.cpp (and so the GGUF) adds BOS for llama-bpe: there
    the expected ids are BOS + the plain ids;
  - decode of the ids (special tokens kept, no clean-up) gives the same text;
  - bos/eos/unk/pad tokens and chat_template equal.
The GGUF does not keep LlamaTokenizer's `legacy` (the export writes false): the
llama2 fixture (legacy true) is compared with legacy=False.
stories260K (a tokenizer.model, so no merges in the GGUF: the export derives
them as transformers does) is compared with sentencepiece itself (transformers
needs protobuf to read a tokenizer.model), texts starting with a space left out
(sentencepiece prefixes them, transformers' Metaspace does not). A pre type not rebuilt (the llama3
GGUF patched to smaug-bpe) is refused with one line naming OUT_DIR, nothing
left; --no-tokenizer then exports it without tokenizer files. Patched to
falcon-h1 (llama.cpp's other name for Llama 3's splitter) it exports the
same three files as llama-bpe.

usage: export_tokenizer.py QUANTIZE HFCONV
Skips (exit 77) without transformers/torch or the fixtures.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from gguf_common import check, finish

try:
    import torch
    import transformers
    from transformers import AutoTokenizer
except ImportError as e:
    print(f"SKIP: torch/transformers not installed ({e})")
    sys.exit(77)

import tokenizer_golden

QUANTIZE, HFCONV = map(os.path.abspath, sys.argv[1:3])
FIX = os.environ.get("HFQ_FIXTURES", "")


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def tiny_checkpoint(tok_dir, family, n_vocab, out):
    """A 1-layer model of n_vocab tokens with tok_dir's tokenizer files."""
    torch.manual_seed(0)
    fields = dict(vocab_size=n_vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                  num_attention_heads=2, num_key_value_heads=2, head_dim=8, max_position_embeddings=256)
    if family == "qwen3":
        model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**fields))
    else:
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**fields))
    model.save_pretrained(out)
    for f in os.listdir(tok_dir):
        if f.startswith("tokenizer") or f == "special_tokens_map.json":
            shutil.copy(os.path.join(tok_dir, f), out)


def export(folder, tmp, label, extra=()):
    gguf = os.path.join(tmp, label + ".gguf")
    r = run([HFCONV, folder, "-o", gguf, "--outtype", "f32"])
    check(r.returncode == 0, f"{label}: hfconv failed: {r.stderr.strip()}")
    out = os.path.join(tmp, label + "-ct")
    r = run([QUANTIZE, gguf, "--export", "compressed-tensors", out, "FP8_DYNAMIC", "--quiet", *extra])
    return r, out


def compare(label, orig_dir, out, texts):
    cfg = json.load(open(os.path.join(orig_dir, "tokenizer_config.json")))
    # legacy (a space prefix after every added token, not only at the start) is not in the GGUF: the
    # export writes transformers' default false, so a legacy original (llama2) is compared as non-legacy
    kw = {"legacy": False} if cfg.get("legacy") and cfg.get("tokenizer_class") == "LlamaTokenizer" else {}
    ref, ours = AutoTokenizer.from_pretrained(orig_dir, **kw), AutoTokenizer.from_pretrained(out)
    for attr in ("bos_token", "eos_token", "unk_token", "pad_token"):
        if getattr(ref, attr) is not None:   # the GGUF may name one the original leaves unset (hfconv's rules)
            check(getattr(ours, attr) == getattr(ref, attr),
                  f"{label}: {attr} {getattr(ours, attr)!r} != {getattr(ref, attr)!r}")
    check(ours.chat_template == ref.chat_template, f"{label}: chat_template differs")
    gguf_bos = json.load(open(os.path.join(out, "tokenizer_config.json")))["add_bos_token"]
    plain_ref = ref(texts, add_special_tokens=False)["input_ids"]
    plain_ours = ours(texts, add_special_tokens=False)["input_ids"]
    bos_ref = ref(texts, add_special_tokens=True)["input_ids"]
    bos_ours = ours(texts, add_special_tokens=True)["input_ids"]
    ref_adds_bos = bos_ref[0][:1] == [ref.bos_token_id] and ref.bos_token_id is not None
    bad_plain = bad_bos = bad_dec = 0
    for i, t in enumerate(texts):
        if plain_ours[i] != plain_ref[i]:
            if not bad_plain:
                print(f"{label}: plain ids differ on {t[:60]!r}: {plain_ours[i][:20]} != {plain_ref[i][:20]}")
            bad_plain += 1
        want = bos_ref[i]
        if gguf_bos and not ref_adds_bos:   # llama3 fixture: no template, llama.cpp adds BOS
            want = [ref.bos_token_id] + bos_ref[i]
        if bos_ours[i] != want:
            if not bad_bos:
                print(f"{label}: ids with special tokens differ on {t[:60]!r}: {bos_ours[i][:8]} != {want[:8]}")
            bad_bos += 1
        d_ours = ours.decode(plain_ref[i], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        d_ref = ref.decode(plain_ref[i], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if d_ours != d_ref:
            if not bad_dec:
                print(f"{label}: decode differs on {t[:60]!r}: {d_ours[:60]!r} != {d_ref[:60]!r}")
            bad_dec += 1
    check(bad_plain == 0, f"{label}: {bad_plain} of {len(texts)} texts encode differently")
    check(bad_bos == 0, f"{label}: {bad_bos} of {len(texts)} texts differ with special tokens")
    check(bad_dec == 0, f"{label}: {bad_dec} of {len(texts)} id lists decode differently")
    print(f"{label}: {len(texts)} texts, same ids (add_bos_token {gguf_bos}, original adds BOS {ref_adds_bos})")


def compare_spm(label, orig_dir, out, texts):
    """A tokenizer.model original: transformers needs protobuf to convert it, so the
    reference is sentencepiece itself (special-token texts as plain text on both sides)."""
    try:
        import sentencepiece
    except ImportError:
        print(f"{label}: sentencepiece not installed, not compared")
        return
    sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(orig_dir, "tokenizer.model"))
    ours = AutoTokenizer.from_pretrained(out)
    check(ours.bos_token_id == sp.bos_id() and ours.eos_token_id == sp.eos_id(), f"{label}: bos/eos ids differ")
    # a text starting with a space (or \u2581): sentencepiece still prepends its "\u2581", transformers'
    # Metaspace (LlamaTokenizer's, so the original's too) does not; those are left out
    texts = [t for t in texts if not t.startswith((" ", "\u2581"))]
    want = sp.encode(texts)
    got = ours(texts, add_special_tokens=False, split_special_tokens=True)["input_ids"]
    got_bos = ours(texts, add_special_tokens=True, split_special_tokens=True)["input_ids"]
    bad = [i for i in range(len(texts)) if got[i] != want[i] or got_bos[i] != [sp.bos_id()] + want[i]]
    if bad:
        print(f"{label}: ids differ on {texts[bad[0]][:60]!r}: {got_bos[bad[0]][:20]} != {want[bad[0]][:20]}")
    check(not bad, f"{label}: {len(bad)} of {len(texts)} texts encode differently from sentencepiece")
    print(f"{label}: {len(texts)} texts, same ids as sentencepiece (with and without BOS)")


def main():
    if not FIX or not os.path.isdir(os.path.join(FIX, "tokenizers")):
        print("SKIP: fixtures not found (HFQ_FIXTURES)")
        return 77
    tokenizer_golden.FIX = FIX
    texts = [tokenizer_golden.as_text(b) for _, b in tokenizer_golden.build_cases()]
    texts += ["<|begin_of_text|>hi<|eot_id|>", "<|im_start|>user\nhi<|im_end|>", "<s> a </s>b<unk>", "<think>\nx</think>"]
    with tempfile.TemporaryDirectory() as tmp:
        for name, family in (("llama3", "llama"), ("qwen3", "qwen3"), ("llama2", "llama")):
            tok_dir = os.path.join(FIX, "tokenizers", name)
            folder = os.path.join(tmp, name)
            tiny_checkpoint(tok_dir, family, len(AutoTokenizer.from_pretrained(tok_dir)), folder)
            r, out = export(folder, tmp, name)
            check(r.returncode == 0, f"{name}: export failed: {r.stderr.strip()}")
            if r.returncode == 0:
                compare(name, tok_dir, out, texts)
        model = os.path.join(FIX, "models", "TinyStories-656K")
        r, out = export(model, tmp, "TinyStories-656K")
        check(r.returncode == 0, f"TinyStories-656K: export failed: {r.stderr.strip()}")
        if r.returncode == 0:
            compare("TinyStories-656K", model, out, texts)
        model = os.path.join(FIX, "models", "stories260K")   # a tokenizer.model: merges derived
        r, out = export(model, tmp, "stories260K")
        check(r.returncode == 0, f"stories260K: export failed: {r.stderr.strip()}")
        if r.returncode == 0:
            compare_spm("stories260K", model, out, texts)
        # a pre type not rebuilt (llama-bpe patched to smaug-bpe, same length): one line naming OUT_DIR, nothing left
        gguf = os.path.join(tmp, "llama3.gguf")
        data = bytearray(open(gguf, "rb").read())
        at = data.index(b"tokenizer.ggml.pre") + len(b"tokenizer.ggml.pre") + 4 + 8
        check(data[at:at + 9] == b"llama-bpe", "llama3: tokenizer.ggml.pre is not llama-bpe")
        data[at:at + 9] = b"smaug-bpe"
        bad = os.path.join(tmp, "smaug.gguf")
        open(bad, "wb").write(data)
        out = os.path.join(tmp, "smaug-ct")
        r = run([QUANTIZE, bad, "--export", "compressed-tensors", out, "FP8_DYNAMIC", "--quiet"])
        err = r.stderr.strip().splitlines()
        check(r.returncode == 1 and len(err) == 1 and out in err[0] and "--no-tokenizer" in err[0],
              f"smaug-bpe: expected a one-line refusal naming {out}, got {r.returncode}: {r.stderr.strip()}")
        check(not os.path.exists(out) and not any(f.startswith("smaug-ct.tmp") for f in os.listdir(tmp)),
              "smaug-bpe: the refused export left files")
        r = run([QUANTIZE, bad, "--export", "compressed-tensors", out, "FP8_DYNAMIC", "--quiet", "--no-tokenizer"])
        check(r.returncode == 0, f"smaug-bpe --no-tokenizer: {r.stderr.strip()}")
        if r.returncode == 0:
            left = [f for f in os.listdir(out) if f.startswith("tokenizer") or f == "special_tokens_map.json"]
            check(not left, f"smaug-bpe --no-tokenizer wrote {left}")
        # another of llama.cpp's names for Llama 3's splitter (falcon-h1, the same length): the same files
        data[at:at + 9] = b"falcon-h1"
        alias = os.path.join(tmp, "falcon-h1.gguf")
        open(alias, "wb").write(data)
        out = os.path.join(tmp, "falcon-h1-ct")
        r = run([QUANTIZE, alias, "--export", "compressed-tensors", out, "FP8_DYNAMIC", "--quiet"])
        check(r.returncode == 0, f"falcon-h1: export failed: {r.stderr.strip()}")
        for n in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json") if r.returncode == 0 else ():
            same = open(os.path.join(out, n), "rb").read() == open(os.path.join(tmp, "llama3-ct", n), "rb").read()
            check(same, f"falcon-h1: {n} differs from llama-bpe's")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
