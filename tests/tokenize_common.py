"""Shared by the tokenizer tests that compare our `tokenize` with a reference:
our ids for many texts in one run (--batch-hex), llama.cpp's llama-tokenize's
(one run a text), and the comparison, collected by gguf_common.check."""
import json
import os
import subprocess
import tempfile

from gguf_common import check


def ours(tokenize, source_args, texts, extra):
    """Our ids for each text: tokenize SOURCE_ARGS --batch-hex with extra options."""
    with tempfile.NamedTemporaryFile("w", suffix=".hex", delete=False) as f:
        f.write("\n".join(t.encode("utf-8").hex() for t in texts) + "\n")
        path = f.name
    try:
        r = subprocess.run([tokenize] + source_args + ["--batch-hex", path] + extra, capture_output=True, text=True)
    finally:
        os.unlink(path)
    check(r.returncode == 0, f"tokenize {source_args}: {r.stderr.strip()}")
    return [[int(x) for x in row.split()] for row in r.stdout.split("\n")[:len(texts)]]


def compare(label, got, want, texts):
    bad = [i for i in range(len(texts)) if got[i] != want[i]]
    print(f"{label}: {len(texts)} texts, {len(bad)} mismatches")
    if bad:
        i = bad[0]
        check(False, f"{label}: {texts[i][:60]!r}: ours {got[i][:12]}, reference {want[i][:12]}")


def llama_tokenize(llama_tokenize_bin, gguf, texts, bos=False):
    """llama-tokenize's ids for each text (special texts not parsed)."""
    out = []
    for t in texts:
        r = subprocess.run([llama_tokenize_bin, "-m", gguf, "-p", t, "--ids", "--log-disable", "--no-parse-special"]
                           + ([] if bos else ["--no-bos"]), capture_output=True, text=True)
        check(r.returncode == 0, f"llama-tokenize: {r.stderr.strip()[-300:]}")
        out.append(json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else None)
    return out
