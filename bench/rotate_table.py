#!/usr/bin/env python3
"""The table of docs/calibration.md's "Rotation": quantize --rotate against
the same preset without it, on the fixtures' trained models.

For each model: hfconv F32; its log-probabilities on tinystories-valid.txt
saved (ppl-eval --save-logits, F32 KV cache); then each preset quantized with
importance calibrated on tinystories-train.txt (--calibration-file, the same
chunks for every row: with --rotate the statistics are the rotated model's),
and without calibration, each with and without --rotate, scored against the
saved base (KL divergence, top-1 agreement, PPL) with the file's size.

usage: rotate_table.py BUILD_TOOLS_DIR [--model NAME]... [--calib-chunks N] [--eval-chunks N] [--ctx N]
       (env HFQ_FIXTURES: the fixtures folder, default ../shared/fixtures)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

PRESETS = ("Q4_K_M", "Q4_0", "IQ4_XS", "Q3_K_M", "NVFP4", "MXFP4")


def run(cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(map(str, cmd))}\n{r.stdout}{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tools")
    ap.add_argument("--model", action="append")
    ap.add_argument("--calib-chunks", type=int, default=32)
    ap.add_argument("--eval-chunks", type=int, default=20)
    ap.add_argument("--ctx", type=int, default=256)
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    fixtures = os.environ.get("HFQ_FIXTURES", os.path.join(here, "..", "..", "shared", "fixtures"))
    hfconv, quantize, ppl_eval = (os.path.join(a.tools, t) for t in ("hfconv", "quantize", "ppl-eval"))
    train = os.path.join(fixtures, "text", "tinystories-train.txt")
    valid = os.path.join(fixtures, "text", "tinystories-valid.txt")
    calib = ["--calibration-file", train, "--calib-ctx", a.ctx, "--calib-chunks", a.calib_chunks, "--importance"]
    for name in a.model or ["stories260K", "TinyStories-656K"]:
        with tempfile.TemporaryDirectory() as tmp:
            base, logits = os.path.join(tmp, "f32.gguf"), os.path.join(tmp, "base.logits")
            run([hfconv, os.path.join(fixtures, "models", name), "-o", base, "--outtype", "f32", "-q"])
            run([ppl_eval, base, "--text", valid, "--ctx", a.ctx, "--chunks", a.eval_chunks, "--kv-type", "f32",
                 "--save-logits", logits, "--quiet"])
            print(f"\n{name}: importance calibrated on {a.calib_chunks} x {a.ctx} tokens of tinystories-train.txt, "
                  f"scored on {a.eval_chunks} x {a.ctx} of tinystories-valid.txt (F32 KV cache)\n")
            print("| preset | calibration | rotate | file bytes | KLD | top-1 | PPL |\n|---|---|---|---|---|---|---|")
            for preset in PRESETS:
                for label, uses in (("none", []), ("importance", calib)):
                    kld = {}
                    for rot in (False, True):
                        out = os.path.join(tmp, "q.gguf")
                        run([quantize, base, out, preset, "--quiet", *uses, *(["--rotate"] if rot else [])])
                        j = json.loads(run([ppl_eval, out, "--text", valid, "--base-logits", logits, "--kv-type",
                                            "f32", "--json", "--quiet"]))
                        kld[rot] = j["kl"]["kld"]
                        change = f" ({100 * (kld[True] / kld[False] - 1):+.1f} %)" if rot else ""
                        print(f"| {preset} | {label} | {'yes' if rot else 'no'} | {os.path.getsize(out)} | "
                              f"{j['kl']['kld']:.6f}{change} | {j['kl']['same_top']:.4f} | {j['ppl']:.4f} |",
                              flush=True)
                        os.unlink(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
