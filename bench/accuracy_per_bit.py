#!/usr/bin/env python3
"""Accuracy per bit (issue 21; docs/calibration.md "Accuracy per bit"): for
each preset, the KL divergence from the F32 model on held-out text of
- none       our quantize without calibration (llama-quantize's bytes),
- llama.cpp  llama-imatrix on the calibration text, then llama-quantize
             --imatrix (the reference every method is measured against),
- each METHOD given: our quantize --calibration-file with its options
             ("default" = no option: what pipelines get),
- each PLAIN method given: our quantize with its options, no calibration
             (e.g. --plain-method rotate=--block-rotate),
scored by ppl-eval --base-logits (the base's log-probabilities saved once),
with the calibration / evaluation overlap check of ppl-eval kept on (a
warning would say the texts overlap). Prints a markdown table: size, bits
per weight, PPL, KLD, top-1, and KLD over llama.cpp's.

usage: accuracy_per_bit.py --f32 MODEL.gguf --calib TEXT --eval TEXT
         [--ctx 256] [--calib-chunks 32] [--eval-chunks 20]
         [--preset Q4_K_M ...] [--method NAME=OPTIONS ...] [--plain-method NAME=OPTIONS ...] [--build build]
         [--llama-bin .cache/llama-build/bin] [--keep DIR] [--threads N]
e.g. --method default= --method gptq=--gptq --method rotate+gptq="--rotate --gptq"
     --method "importance=--stats {stats}" ({stats}: our statistics of the calibration
     text, computed once, instead of calibrating for each preset)
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time


def run(cmd, what):
    t = time.time()
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{what}: {' '.join(map(str, cmd))}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return r, time.time() - t


def size_bpw(path):
    import gguf
    rd = gguf.GGUFReader(path)
    n = sum(int(t.n_elements) for t in rd.tensors if not t.name.endswith(("scale", "input_scale")))
    return os.path.getsize(path), 8.0 * sum(int(t.n_bytes) for t in rd.tensors) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--f32", required=True)
    ap.add_argument("--calib", required=True)
    ap.add_argument("--eval", required=True)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--calib-chunks", type=int, default=32)
    ap.add_argument("--eval-chunks", type=int, default=20)
    ap.add_argument("--preset", action="append")
    ap.add_argument("--method", action="append", default=[])
    ap.add_argument("--plain-method", action="append", default=[])
    ap.add_argument("--build", default="build")
    ap.add_argument("--llama-bin", default=".cache/llama-build/bin")
    ap.add_argument("--keep")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    presets = a.preset or ["Q4_K_M"]
    methods = [m.split("=", 1) for m in a.method] or ([] if a.plain_method else [["default", ""]])
    tools = {t: os.path.join(a.build, "src", "tools", t) for t in ("quantize", "ppl-eval")}
    lq, li = os.path.join(a.llama_bin, "llama-quantize"), os.path.join(a.llama_bin, "llama-imatrix")
    have_llama = os.access(lq, os.X_OK) and os.access(li, os.X_OK)
    tmp_obj = None if a.keep else tempfile.TemporaryDirectory()
    tmp = a.keep or tmp_obj.name
    os.makedirs(tmp, exist_ok=True)
    ctx, th = str(a.ctx), str(a.threads)
    base_logits = os.path.join(tmp, "base.logits")
    if not os.path.exists(base_logits):
        run([tools["ppl-eval"], a.f32, "--text", a.eval, "--ctx", ctx, "--chunks", a.eval_chunks, "--threads", th,
             "--save-logits", base_logits, "--quiet"], "base logits")
    imatrix = os.path.join(tmp, "llama.imatrix")
    if have_llama and not os.path.exists(imatrix):
        r = subprocess.run([str(c) for c in (li, "-m", a.f32, "-f", a.calib, "-c", ctx, "--chunks", a.calib_chunks,
                                             "-t", th, "-o", imatrix)], capture_output=True, text=True)
        if r.returncode != 0:   # e.g. a vocabulary llama.cpp's tokenizer cannot read: no reference rows
            print(f"llama-imatrix failed: {r.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            have_llama = False
    stats = os.path.join(tmp, "ours.imatrix")
    rows = []
    for preset in presets:
        variants = [("none", [tools["quantize"], a.f32, None, preset, "--threads", th, "--quiet"])]
        if have_llama:
            variants.append(("llama.cpp imatrix", [lq, "--imatrix", imatrix, a.f32, None, preset, th]))
        for name, opts in (m.split("=", 1) for m in a.plain_method):
            variants.append((name, [tools["quantize"], a.f32, None, preset, "--threads", th, "--quiet"] +
                             shlex.split(opts)))
        for name, opts in methods:
            if "{stats}" in opts:   # our statistics of the calibration text, computed once
                if not os.path.exists(stats):
                    run([tools["quantize"], a.f32, "--calibration-file", a.calib, "--calib-ctx", ctx,
                         "--calib-chunks", a.calib_chunks, "--threads", th, "--save-stats", stats, "--quiet"],
                        "statistics")
                variants.append((name, [tools["quantize"], a.f32, None, preset, "--threads", th, "--quiet"] +
                                 shlex.split(opts.replace("{stats}", stats))))
                continue
            variants.append((name, [tools["quantize"], a.f32, None, preset, "--calibration-file", a.calib,
                                    "--calib-ctx", ctx, "--calib-chunks", a.calib_chunks, "--threads", th,
                                    "--quiet"] + shlex.split(opts)))
        for name, cmd in variants:
            out = os.path.join(tmp, f"{preset}.{name.replace(' ', '_').replace('/', '_')}.gguf")
            cmd = [out if c is None else c for c in cmd]
            if a.keep and os.path.exists(out):   # kept from an earlier run
                secs = float("nan")
            elif name == "llama.cpp imatrix":      # a preset llama-quantize lacks: no reference row
                t0 = time.time()
                r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
                secs = time.time() - t0
                if r.returncode != 0:
                    print(f"{preset}: llama-quantize cannot make it ({r.stderr.strip().splitlines()[-1:]})",
                          file=sys.stderr)
                    continue
            else:
                _, secs = run(cmd, f"{preset} {name}")
            r, _ = run([tools["ppl-eval"], out, "--text", a.eval, "--base-logits", base_logits, "--threads", th,
                        "--json", "--quiet"], f"score {preset} {name}")
            j = json.loads(r.stdout)
            if j.get("calibration_overlap_windows", 0):
                print(f"warning: {preset} {name}: the evaluation text overlaps the calibration text", file=sys.stderr)
            size, bpw = size_bpw(out)
            rows.append((preset, name, size, bpw, j["ppl"], j["kl"]["kld"], j["kl"]["same_top"], secs))
            print(f"| {preset} | {name} | {size} | {bpw:.2f} | {j['ppl']:.4f} | {j['kl']['kld']:.6f} | "
                  f"{j['kl']['same_top']:.4f} | {secs:.1f} s |", file=sys.stderr, flush=True)
            if not a.keep:
                os.remove(out)
    ref = {p: k for p, n, _, _, _, k, _, _ in rows if n == "llama.cpp imatrix"}
    print(f"\nF32 base {os.path.basename(a.f32)}; calibration {a.calib_chunks} x {a.ctx} tokens of "
          f"{os.path.basename(a.calib)}, scored on {a.eval_chunks} x {a.ctx} of {os.path.basename(a.eval)}\n")
    print("| preset | method | size (bytes) | bits/weight | PPL | KLD | top-1 | KLD / llama.cpp | quantize s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for p, n, size, bpw, ppl, kld, top, secs in rows:
        rel = f"{kld / ref[p]:.3f}" if p in ref and ref[p] > 0 else ""
        print(f"| {p} | {n} | {size} | {bpw:.2f} | {ppl:.4f} | {kld:.6f} | {top:.4f} | {rel} | {secs:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
