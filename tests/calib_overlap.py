#!/usr/bin/env python3
"""ppl-eval warns when its text overlaps the text a model was calibrated on
(calib/overlap.h): quantize --calibration-file stores the calibration
sequences' 32-token windows (hfq.calib.token_windows); ppl-eval on the same
text finds every one of them (in any chunking), on other text none, on other
text with a calibration passage pasted in that passage's; a statistics file
carries no windows (nothing to warn with); malformed keys fail in one line.
A synthetic model and generated texts: no fixture needed.

usage: calib_overlap.py QUANTIZE HFCONV MKMODEL PPL_EVAL
"""
import json
import os
import random
import subprocess
import sys
import tempfile

from gguf import GGUFReader

from gguf_common import check, finish

QUANTIZE, HFCONV, MKMODEL, PPL_EVAL = sys.argv[1:5]
WORDS = ("the cat dog ran sat on a mat big small red blue tree house sun moon went home and then "
         "she he it was happy sad jumped over under near far quick slow bird fish").split()


def run(*args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True)


def ok(*args):
    r = run(*args)
    check(r.returncode == 0, f"{' '.join(map(str, args))}: {r.stdout[-400:]}{r.stderr[-400:]}")
    return r


def text(seed, n_words):
    rng = random.Random(seed)
    lines = []
    while n_words > 0:
        k = min(n_words, rng.randint(8, 16))
        lines.append(" ".join(rng.choice(WORDS) for _ in range(k)) + ".")
        n_words -= k
    return "\n".join(lines) + "\n"


def write(tmp, name, s):
    p = os.path.join(tmp, name)
    with open(p, "w") as f:
        f.write(s)
    return p


def evaluate(model, txt, ctx):
    r = ok(PPL_EVAL, model, "--text", txt, "--ctx", ctx, "--json", "--quiet")
    try:
        windows = json.loads(r.stdout)["calibration_overlap_windows"]
    except (ValueError, KeyError):
        check(False, f"ppl-eval --json: no calibration_overlap_windows in {r.stdout[:300]}")
        return -1, r.stderr
    return windows, r.stderr


def main():
    with tempfile.TemporaryDirectory() as tmp:
        ok(MKMODEL, os.path.join(tmp, "syn"), "--hidden", 64, "--layers", 1, "--vocab", 512, "--ctx", 512)
        f32 = os.path.join(tmp, "f32.gguf")
        ok(HFCONV, os.path.join(tmp, "syn"), "-o", f32, "--outtype", "f32", "-q")
        calib = write(tmp, "calib.txt", text(1, 3000))
        other = text(2, 3000)
        q = os.path.join(tmp, "q.gguf")
        ok(QUANTIZE, f32, q, "Q8_0", "--calibration-file", calib, "--calib-ctx", 128, "--quiet")
        fields = GGUFReader(q).fields
        stored = fields["hfq.calib.token_windows"].contents() if "hfq.calib.token_windows" in fields else []
        n_chunks = fields["hfq.calib.chunk_count"].contents()
        check(len(stored) == n_chunks * (127 // 32) and stored == sorted(set(stored)),
              f"{len(stored)} windows stored for {n_chunks} chunks of 128 tokens, ascending and distinct")
        check(fields["hfq.calib.token_window"].contents() == 32, "hfq.calib.token_window is 32")

        for ctx in (128, 96):   # another chunking finds the same windows
            n, err = evaluate(q, calib, ctx)
            check(n == len(stored) and "calibrated on" in err,
                  f"calibration text at --ctx {ctx}: {n} of {len(stored)} windows, warning: {err.strip()[-200:]}")
        n, err = evaluate(q, write(tmp, "other.txt", other), 128)
        check(n == 0 and "calibrated on" not in err, f"other text: {n} windows, {err.strip()[-200:]}")
        # a passage of the calibration text (whole windows of it) inside other text
        passage = "\n".join(open(calib).read().split("\n")[40:80]) + "\n"
        n, err = evaluate(q, write(tmp, "mixed.txt", other[:len(other) // 2] + passage + other[len(other) // 2:]), 128)
        check(0 < n < len(stored) and "calibrated on" in err, f"pasted passage: {n} windows of {len(stored)}")

        # statistics read from a file: no sequences, no windows
        stats = os.path.join(tmp, "s.imatrix")
        ok(QUANTIZE, f32, "--calibration-file", calib, "--calib-ctx", 128, "--save-stats", stats, "--quiet")
        q2 = os.path.join(tmp, "q2.gguf")
        ok(QUANTIZE, f32, q2, "Q8_0", "--stats", stats, "--quiet")
        check("hfq.calib.token_windows" not in GGUFReader(q2).fields, "windows written without sequences")

        # malformed: the stored windows out of order
        data = bytearray(open(q, "rb").read())
        key = b"hfq.calib.token_windows"
        at = data.find(key) + len(key) + 4 + 4 + 8   # value type, element type, count
        first, second = data[at:at + 8], data[at + 8:at + 16]
        data[at:at + 8], data[at + 8:at + 16] = second, first
        bad = write(tmp, "bad.gguf", "")
        open(bad, "wb").write(data)
        r = run(PPL_EVAL, bad, "--text", calib, "--ctx", 128, "--quiet")
        lines = r.stderr.strip().split("\n")
        check(r.returncode == 1 and len(lines) == 1 and "not ascending" in lines[0] and bad in lines[0],
              f"malformed windows: exit {r.returncode}, {r.stderr.strip()[-300:]}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
