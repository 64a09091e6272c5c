"""Shared by the ppl_kld*.py tests: fixture models converted by hfconv and
quantized by our quantize tool, a subset of tinystories-valid.txt, and
helpers that run ppl-eval."""
import json
import os
import subprocess
import sys

FIXTURES = os.environ.get("HFQ_FIXTURES", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "fixtures"))
TEXT = os.path.join(FIXTURES, "text", "tinystories-valid.txt")
MODELS = ("stories260K", "TinyStories-656K")
failures = 0


def sanitized_build():
    """True for a build with sanitizers (build-asan), where runs are ~5x slower."""
    try:
        with open(os.path.join(os.environ.get("HFQ_BUILD", ""), "meson-info", "intro-buildoptions.json")) as f:
            return any(o["name"] == "b_sanitize" and o["value"] not in ("none", "") for o in json.load(f))
    except (OSError, ValueError, KeyError):
        return False


SANITIZED = sanitized_build()
CTX = 128
CHUNKS = 3 if SANITIZED else 6     # 381 or 762 scored tokens: seconds


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print(f"FAIL: {what}", flush=True)
    return cond


def finish():
    print(f"{failures} failure(s)")
    return 1 if failures else 0


def skip_without_fixtures():
    """Exits 77 (skip) when a fixture is missing."""
    needed = [TEXT] + [os.path.join(FIXTURES, "models", m, "config.json") for m in MODELS]
    for path in needed:
        if not os.path.isfile(path):
            print(f"SKIP: no fixture {path}")
            sys.exit(77)


def run(args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True)


def write_subset(path, n_bytes=30000, skip=0):
    """The first n_bytes of tinystories-valid.txt after skip bytes."""
    with open(TEXT, "rb") as f:
        f.seek(skip)
        data = f.read(n_bytes)
    with open(path, "wb") as f:
        f.write(data)
    return path


def build_models(hfconv, quantize, tmp, model, formats):
    """{format: gguf path}: f32/f16 by hfconv, the others by quantize from f32."""
    out = {}
    src = os.path.join(FIXTURES, "models", model)
    for fmt in ("f32", "f16"):
        out[fmt] = os.path.join(tmp, f"{model}-{fmt}.gguf")
        p = run([hfconv, src, "-o", out[fmt], "--outtype", fmt, "-q"])
        check(p.returncode == 0, f"hfconv {model} {fmt}: {p.stderr}")
    for fmt in formats:
        out[fmt] = os.path.join(tmp, f"{model}-{fmt}.gguf")
        p = run([quantize, out["f32"], out[fmt], fmt])
        check(p.returncode == 0, f"quantize {model} {fmt}: {p.stderr}")
    return out


class PplEval:
    def __init__(self, exe, text):
        self.exe, self.text = exe, text

    def run(self, model, *extra, ctx=CTX, chunks=CHUNKS):
        args = [self.exe, model, "--text", self.text]
        if ctx:
            args += ["--ctx", ctx]
        if chunks:
            args += ["--chunks", chunks]
        return run(args + list(extra))

    def json(self, model, *extra, **kw):
        """The --json object; {} (and a failure) when the run fails."""
        p = self.run(model, "--json", *extra, **kw)
        if not check(p.returncode == 0, f"ppl-eval {os.path.basename(model)} {' '.join(map(str, extra))}: "
                                        f"{p.stderr.strip()}"):
            return {}
        return json.loads(p.stdout)


def stories_f32_and_text(tmp, hfconv):
    """stories260K as an F32 GGUF by hfconv and a calibration text (TEXT's first 20000 characters), in tmp;
    the GGUF's path is None when hfconv fails (a failed check)."""
    gguf, text = os.path.join(tmp, "stories260K-f32.gguf"), os.path.join(tmp, "calib.txt")
    with open(TEXT, encoding="utf-8") as f:
        open(text, "w", encoding="utf-8").write(f.read(20000))
    p = subprocess.run([hfconv, os.path.join(FIXTURES, "models", "stories260K"), "-o", gguf, "--outtype", "f32", "-q"],
                       capture_output=True, text=True)
    return (gguf if check(p.returncode == 0, f"hfconv stories260K: {p.stderr.strip()}") else None), text
