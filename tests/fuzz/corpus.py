#!/usr/bin/env python3
"""Seeds the fuzz corpora in build-fuzz/corpus/<target>/ (git-ignored).

Sources: the small hand-made seeds committed in tests/fuzz/seeds/<target>/,
the fixtures ($HFQ_FIXTURES, default ../shared/fixtures; trimmed where a file
is too large to mutate usefully) and tiny synthetic checkpoints written by the
release build's mkmodel / hfconv / quantize (build/src/tools; run
scripts/setup.sh first). Standard library only.

usage: tests/fuzz/corpus.py [--build DIR] [--out DIR]
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGETS = ["gguf", "gguf_split", "safetensors", "st_index", "hf_config", "spm", "tokenizer_json", "tokenize",
           "plan_override"]


def put(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def read(path):
    with open(path, "rb") as f:
        return f.read()


def trim_bpe(tok, cfg, keep):
    """A tokenizer.json with the first `keep` base tokens, the merges among
    them and the first few added tokens renumbered after them."""
    vocab = {t: i for t, i in tok["model"]["vocab"].items() if i < keep}
    merges = []
    for m in tok["model"]["merges"]:
        a, b = m if isinstance(m, list) else m.split(" ", 1)
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(m)
    added = []
    for i, a in enumerate(tok["added_tokens"][:4]):
        a = dict(a)
        a["id"] = keep + i
        added.append(a)
    small = dict(tok)
    small["model"] = dict(tok["model"], vocab=vocab, merges=merges)
    small["added_tokens"] = added
    small_cfg = {k: v for k, v in cfg.items() if k not in ("added_tokens_decoder", "chat_template")}
    small_cfg["chat_template"] = "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}"
    return json.dumps(small).encode(), json.dumps(small_cfg).encode()


def tokenizer_folder(files):
    """tokenizer.json, tokenizer_config.json, config.json, chat_template.jinja
    joined by NUL bytes, as fuzz_tokenizer_json reads them (trailing absent
    files left out)."""
    while files and files[-1] is None:
        files.pop()
    return b"\0".join(f if f is not None else b"" for f in files)


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build-fuzz", "corpus"))
    args = ap.parse_args()
    fx = os.environ.get("HFQ_FIXTURES") or os.path.join(ROOT, "..", "shared", "fixtures")
    tools = os.path.join(args.build, "src", "tools")
    out = args.out

    for t in TARGETS:   # hand-made seeds
        src = os.path.join(ROOT, "tests", "fuzz", "seeds", t)
        if os.path.isdir(src):
            for name in sorted(os.listdir(src)):
                put(out, t, "hand-" + name, read(os.path.join(src, name)))

    have_fx = os.path.isdir(os.path.join(fx, "models"))
    if not have_fx:
        print(f"corpus: no fixtures at {fx}: fixture seeds skipped", file=sys.stderr)
    else:
        for m in ("stories260K", "TinyStories-656K"):
            put(out, "hf_config", m + ".json", read(os.path.join(fx, "models", m, "config.json")))
        put(out, "spm", "stories260K.model", read(os.path.join(fx, "models", "stories260K", "tokenizer.model")))
        d = os.path.join(fx, "models", "TinyStories-656K")
        put(out, "tokenizer_json", "TinyStories-656K", tokenizer_folder(
            [read(os.path.join(d, "tokenizer.json")), read(os.path.join(d, "tokenizer_config.json")),
             read(os.path.join(d, "config.json"))]))
        for name in ("llama3", "qwen3", "llama2"):
            d = os.path.join(fx, "tokenizers", name)
            tok = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))
            cfg = json.load(open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8"))
            small_tok, small_cfg = trim_bpe(tok, cfg, 400)
            put(out, "tokenizer_json", name + "-400", tokenizer_folder([small_tok, small_cfg]))
            put(out, "tokenizer_json", name + "-400-tokonly", small_tok)
        # tokenizer inputs: vocabulary selector, flags, text
        texts = []
        for name, step in (("tinystories-valid.txt", 40000), ("wiki.test.raw", 130000)):
            data = read(os.path.join(fx, "text", name))
            texts += [data[i:i + 300] for i in range(0, len(data), step)]
        texts += ["Hello world! <|begin_of_text|> <|im_start|>user\n中文 caf\u00e9 \u2581\u2581x 12345\t\r\n".encode(),
                  b"\xff\xfe invalid \xc3( bytes \xe2\x82", "e\u0301 \u212b \uac00\u11a8 \U0001F600".encode()]
        for k, text in enumerate(texts):
            put(out, "tokenize", f"text{k:03d}", bytes([k % 4, (k // 4) % 4]) + text)

    if not os.path.isfile(os.path.join(tools, "mkmodel")):
        print(f"corpus: no tools in {tools}: synthetic seeds skipped (run scripts/setup.sh)", file=sys.stderr)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            for arch, extra in (("llama", []), ("qwen2", ["--tied"]), ("mistral", ["--shards", "2"])):
                m = os.path.join(tmp, arch)
                run([os.path.join(tools, "mkmodel"), m, "--arch", arch, "--hidden", "32", "--ffn", "64",
                     "--layers", "1", "--heads", "2", "--kv-heads", "1", "--vocab", "260", "--dtype", "f16"]
                    + extra)
                put(out, "hf_config", "mkmodel-" + arch + ".json", read(os.path.join(m, "config.json")))
                put(out, "tokenizer_json", "mkmodel-" + arch, tokenizer_folder(
                    [read(os.path.join(m, "tokenizer.json")), read(os.path.join(m, "tokenizer_config.json")),
                     read(os.path.join(m, "config.json"))]))
                for f in sorted(os.listdir(m)):
                    if f.endswith(".safetensors"):
                        put(out, "safetensors", f"mkmodel-{arch}-{f}", read(os.path.join(m, f)))
                    if f.endswith(".index.json"):
                        put(out, "st_index", f"mkmodel-{arch}.json", read(os.path.join(m, f)))
                g = os.path.join(tmp, arch + ".gguf")
                run([os.path.join(tools, "hfconv"), m, "-o", g, "-q"])
                put(out, "gguf", f"mkmodel-{arch}-f16.gguf", read(g))
                for preset in ("Q8_0", "Q4_0", "NVFP4", "FP8_E4M3"):
                    q = os.path.join(tmp, f"{arch}-{preset}.gguf")
                    run([os.path.join(tools, "quantize"), g, q, preset])
                    put(out, "gguf", f"mkmodel-{arch}-{preset}.gguf", read(q))
            if have_fx:
                for m in ("stories260K", "TinyStories-656K"):
                    g = os.path.join(tmp, m + "-vocab.gguf")
                    run([os.path.join(tools, "hfconv"), os.path.join(fx, "models", m), "-o", g, "--vocab-only", "-q"])
                    put(out, "gguf", m + "-vocab.gguf", read(g))
    for t in TARGETS:
        d = os.path.join(out, t)
        n = len(os.listdir(d)) if os.path.isdir(d) else 0
        print(f"corpus: {t}: {n} seeds in {d}")


if __name__ == "__main__":
    main()
