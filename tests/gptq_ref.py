#!/usr/bin/env python3
"""GPTQ against a reference written here in numpy (float64): the same
algorithm as quant/gptq.h (auto-gptq's fasterquant without act-order):
H = X^T X, dead columns H_jj = 1, H += damp * mean(diag H) * I,
U = upper Cholesky factor of H^-1, lazy batches of B columns, Q8_0's block
scale chosen at each block's first column from the current values (ggml's
quantize_row_q8_0: d = amax / 127, codes roundf(x / d) as x * (1 / d) in
float32, d stored as fp16; a value fed past the block's maximum takes the
nearest code, 127 or -128). On a small random matrix with correlated inputs
the codes must agree except at rounding ties (>= 99.9 %), the scales as
often, and the bytes be the same with 1 and 2 threads.

usage: gptq_ref.py GPTQ_TOOL
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

QK = 32
DAMP = 0.01


def ref_q8_0(w, x, damp, batch):
    n = w.shape[1]
    h = x.astype(np.float64).T @ x.astype(np.float64)
    dead = np.diag(h) == 0
    h[dead, dead] = 1.0
    h += damp * np.mean(np.diag(h)) * np.eye(n)
    hinv = np.linalg.inv(h)
    u = np.linalg.cholesky(hinv).T  # upper, hinv = u^T u
    w = w.astype(np.float64).copy()
    rows = w.shape[0]
    codes = np.zeros((rows, n), np.int8)
    scales = np.zeros((rows, n // QK), np.float16)
    ids = np.zeros(rows, np.float32)
    dh = np.zeros(rows, np.float32)
    for i1 in range(0, n, batch):
        i2 = min(i1 + batch, n)
        err = np.zeros((rows, i2 - i1))
        for j in range(i1, i2):
            if j % QK == 0:
                blk = w[:, j:j + QK].astype(np.float32)
                amax = np.max(np.abs(blk), axis=1)
                d = (amax / np.float32(127)).astype(np.float32)
                with np.errstate(divide="ignore"):
                    ids = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
                scales[:, j // QK] = d.astype(np.float16)
                dh = scales[:, j // QK].astype(np.float32)
            v = (w[:, j].astype(np.float32) * ids).astype(np.float64)
            # the nearest code: feedback can push a value past the block's maximum
            q = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5), -128, 127)
            codes[:, j] = q.astype(np.int8)
            val = (q.astype(np.float32) * dh).astype(np.float64)
            e = (w[:, j] - val) / u[j, j]
            w[:, j + 1:i2] -= np.outer(e, u[j, j + 1:i2])
            err[:, j - i1] = e
        w[:, i2:] -= err @ u[i1:i2, i2:]
    return codes, scales


def parse_q8_0(raw, rows, n):
    blocks = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("qs", "i1", QK)])).reshape(rows, n // QK)
    return blocks["qs"].reshape(rows, n), blocks["d"]


def main():
    tool = sys.argv[1]
    rng = np.random.default_rng(21)
    rows, n, t = 96, 256, 1024
    mix = rng.standard_normal((n, n)) * 0.3 + np.eye(n) * 2.0
    x = (rng.standard_normal((t, n)) @ mix).astype(np.float32)
    x[:, 7] = 0.0  # a column never active
    x[:, 3::16] *= 4.0
    w = rng.standard_normal((rows, n)).astype(np.float32)
    with tempfile.TemporaryDirectory() as d:
        wp, xp = os.path.join(d, "w.f32"), os.path.join(d, "x.f32")
        w.tofile(wp)
        x.tofile(xp)
        outs = {}
        for batch, threads in ((128, 1), (128, 2), (64, 2)):
            out = os.path.join(d, f"q_{batch}_{threads}.bin")
            r = subprocess.run([tool, "Q8_0", str(DAMP), str(batch), str(threads), wp, str(rows), str(n), xp, str(t),
                                out], capture_output=True, text=True)
            if r.returncode == 77:
                print(r.stdout.strip())
                return 77
            if r.returncode != 0:
                print(r.stdout, r.stderr)
                return 1
            outs[(batch, threads)] = open(out, "rb").read()
    fails = 0
    if outs[(128, 1)] != outs[(128, 2)]:
        print("FAIL: bytes differ between 1 and 2 threads")
        fails += 1
    for batch in (128, 64):
        codes, scales = parse_q8_0(outs[(batch, 2)], rows, n)
        rc, rs = ref_q8_0(w, x, DAMP, batch)
        code_eq = np.mean(codes == rc)
        scale_eq = np.mean(scales == rs)
        print(f"batch {batch}: codes equal {100 * code_eq:.3f} %, scales equal {100 * scale_eq:.3f} %")
        if code_eq < 0.999 or scale_eq < 0.999:
            print("FAIL: GPTQ differs from the numpy reference beyond rounding ties")
            fails += 1
        plain = np.round(w / np.repeat(np.abs(w).reshape(rows, -1, QK).max(axis=2) / 127, QK, axis=1))
        if np.mean(codes == plain) > 0.95:
            print("FAIL: GPTQ's codes are (nearly) the plain rounding's: no feedback happened")
            fails += 1
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
