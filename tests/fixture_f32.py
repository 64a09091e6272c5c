"""The fixture models (../shared/fixtures) as F32 GGUFs, and a slice of
tinystories-valid.txt to score them on: what the rotation tests
(rotate_check.py, block_rotate_check.py) run each transform against."""
import os
import subprocess

from gguf_common import check

FIXTURE_MODELS = ("stories260K", "TinyStories-656K")


def valid_text(fixtures, tmp, n_bytes=120000):
    """The first n_bytes of tinystories-valid.txt in tmp, or None (saying so)
    when the fixtures are absent."""
    src = os.path.join(fixtures, "text", "tinystories-valid.txt")
    if not os.path.isfile(src):
        print("note: fixtures absent (../shared/fixtures): their part skipped")
        return None
    text = os.path.join(tmp, "valid.txt")
    with open(src, "rb") as f, open(text, "wb") as g:
        g.write(f.read(n_bytes))
    return text


def f32_models(fixtures, tmp, hfconv):
    """(name, path) of each fixture model converted by hfconv to F32 in tmp;
    a failed conversion is a check failure and is left out."""
    for name in FIXTURE_MODELS:
        gguf = os.path.join(tmp, name + ".gguf")
        r = subprocess.run([hfconv, os.path.join(fixtures, "models", name), "-o", gguf, "--outtype", "f32", "-q"],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"{name}: hfconv: {r.stderr.strip()[-300:]}")
        if r.returncode == 0:
            yield name, gguf
