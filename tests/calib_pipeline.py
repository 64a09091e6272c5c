#!/usr/bin/env python3
"""examples/pipeline.sh on stories260K (small sizes): every step runs, the
table has a row per preset (top-1 a fraction, as MIN_TOP1), gates pass with
the defaults and a strict gate (KLD, or a top-1 fraction) exits 3; bad usage
exits 2.

usage: calib_pipeline.py PIPELINE HFQ_BIN
"""
import os
import subprocess
import sys
import tempfile

from gguf_common import check, finish

PIPELINE, BIN = sys.argv[1:3]
FIXTURES = os.environ.get("HFQ_FIXTURES", "")


def main():
    model = os.path.join(FIXTURES, "models", "stories260K")
    train, valid = (os.path.join(FIXTURES, "text", f"tinystories-{s}.txt") for s in ("train", "valid"))
    if not all(os.path.exists(p) for p in (model, train, valid)):
        print(f"SKIP: fixtures not found under {FIXTURES!r}")
        return 77
    env = dict(os.environ, HFQ_BIN=BIN, CTX="128", CALIB_CHUNKS="8", EVAL_CHUNKS="4")
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run(["bash", PIPELINE, model, train, valid, tmp], capture_output=True, text=True, env=env)
        print(r.stdout)
        rows = [l for l in r.stdout.splitlines() if l.split()[:1] and l.split()[0] in
                ("Q4_K_M", "NVFP4", "FP8_E4M3", "INT8")]
        check(r.returncode == 0 and "all gates passed" in r.stdout, f"pipeline: {r.returncode} {r.stderr}")
        check(len(rows) == 4 and all(l.endswith(" passed") for l in rows), f"table rows: {rows}")
        # the top-1 column (before "passed") is a fraction, as MIN_TOP1 is
        check(all(0.80 <= float(l.split()[-2]) <= 1 for l in rows), f"top-1 fractions: {rows}")
        for p in ("base.gguf", "stats.gguf", "base.logits", "Q4_K_M.gguf", "NVFP4.gguf", "FP8_E4M3.gguf", "INT8.gguf"):
            check(os.path.exists(os.path.join(tmp, p)), f"{p} not written")
        strict = dict(env, MAX_KLD="1e-9", PRESETS="Q4_K_M:importance")
        r = subprocess.run(["bash", PIPELINE, model, train, valid, tmp], capture_output=True, text=True, env=strict)
        check(r.returncode == 3 and "FAILED" in r.stdout and "quality gate failed" in r.stderr,
              f"strict gate: {r.returncode} {r.stdout} {r.stderr}")
        # a top-1 fraction no 4-bit model reaches (read as a percent it would pass)
        strict = dict(env, MIN_TOP1="0.9999", PRESETS="Q4_K_M:importance")
        r = subprocess.run(["bash", PIPELINE, model, train, valid, tmp], capture_output=True, text=True, env=strict)
        check(r.returncode == 3 and "FAILED" in r.stdout and "--min-top1 0.9999" in r.stderr,
              f"strict top-1 gate: {r.returncode} {r.stdout} {r.stderr}")
    r = subprocess.run(["bash", PIPELINE, model], capture_output=True, text=True, env=env)
    check(r.returncode == 2 and "usage" in r.stderr, f"bad usage: {r.returncode} {r.stderr}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
