#!/usr/bin/env python3
"""Importance-weighted scale searches of the quantize tool (docs/calibration.md,
"Scale searches where the quantizer is max-based"), checked on the bytes it writes
against numpy re-implementations:

- MXFP4 with statistics: each block's E8M0 exponent is the reference e or e - 1 /
  e + 1, whichever has the least importance-weighted error (e on ties): bit for bit.
  Without statistics the bytes are ggml's (gguf-py's quantizer).
- Q8_0 with statistics: every block decodes with a weighted error no larger than
  the reference block's (gguf-py's), blocks kept at the reference are its bytes,
  and some blocks improve. Without statistics: ggml's bytes.
- INT8 with one scale per tensor (recipe granularity "tensor"): the scale is
  amax/127 * 2^(-k/32) with k of the least weighted error over the whole tensor
  (numpy, every row), codes round(x / scale); without statistics amax/127.
- NVFP4: the global scale is amax/(6*448) * 2^(k/8), k in -2..9, one per fused group
  (q/k/v, gate/up share one); without statistics amax/(6*448) exactly; one thread
  writes the same bytes as several.

usage: calib_scales.py QUANTIZE HFCONV MKMODEL
"""
import json
import os
import sys
import tempfile

import numpy as np
from gguf import GGUFReader, GGMLQuantizationType, quants

from gguf_common import check, finish
from mixed_common import run
from quantize_safety import QUANTIZE, setup   # the same arguments: QUANTIZE HFCONV MKMODEL

E2M1 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.float32)  # doubled


def ok(*args):
    r = run(*args)
    check(r.returncode == 0, f"{' '.join(map(str, args))}: exit {r.returncode}: {r.stderr}")
    return r


def tensors(path):
    return {t.name: t for t in GGUFReader(path).tensors}


def importance(stats):
    s = tensors(stats)
    out = {}
    for name, t in s.items():
        if name.endswith(".in_sum2"):
            base = name[:-len(".in_sum2")]
            count = np.float32(round(float(np.asarray(s[base + ".counts"].data).ravel()[0])))
            out[base] = (np.asarray(t.data, dtype=np.float32).ravel() / count).astype(np.float32)
    return out


def f32_rows(path):
    return {n: np.asarray(t.data, dtype=np.float32).reshape(-1, int(t.shape[0])) for n, t in tensors(path).items()
            if int(t.tensor_type) == 0 and len(t.shape) == 2}


def mxfp4_search(x, w):
    """Blocks of 32 as the searched quantizer writes them: bytes [nblocks, 17]."""
    xb, wb = x.reshape(-1, 32), np.tile(w, x.shape[0]).reshape(-1, 32)
    out = np.zeros((xb.shape[0], 17), dtype=np.uint8)
    for i, (v, iw) in enumerate(zip(xb, wb)):
        amax = np.abs(v).max()
        e0 = 0 if amax == 0 else int(np.clip(np.floor(np.log2(amax)) - 2 + 127, 0, 254))
        best = None
        for e in (e0, e0 - 1, e0 + 1):
            if not 0 <= e <= 254:
                continue
            d = np.float32(2.0 ** (e - 128))   # the E8M0 scale halved (the codes are doubled)
            # ggml's best_index: first code of least |doubled * d - x|
            codes = np.argmin(np.abs(E2M1[None, :] * d - v[:, None]), axis=1)
            diff = v.astype(np.float64) - (E2M1[codes] * d).astype(np.float64)
            err = float(np.sum(iw.astype(np.float64) * diff * diff))
            if best is None or err < best[0]:
                best = (err, e, codes)
        _, e, c = best
        out[i, 0] = e
        out[i, 1:] = (c[:16] | (c[16:] << 4)).astype(np.uint8)
    return out.ravel()


def test_mxfp4(tmp, model, stats, imp, src):
    plain, cal = os.path.join(tmp, "mx.gguf"), os.path.join(tmp, "mx_cal.gguf")
    ok(QUANTIZE, model, plain, "MXFP4", "--quiet")
    ok(QUANTIZE, model, cal, "MXFP4", "--stats", stats, "--quiet")
    p, c = tensors(plain), tensors(cal)
    n_mx = n_diff = 0
    for name, t in c.items():
        if int(t.tensor_type) != int(GGMLQuantizationType.MXFP4) or name not in imp:
            continue
        n_mx += 1
        ref = quants.quantize(src[name], GGMLQuantizationType.MXFP4)
        check(np.array_equal(np.asarray(p[name].data).ravel(), ref.ravel()), f"{name}: plain MXFP4 is not ggml's")
        want = mxfp4_search(src[name], imp[name])
        got = np.asarray(t.data).ravel()
        check(np.array_equal(got, want), f"{name}: searched MXFP4 differs from numpy's "
              f"({int(np.sum(got != want))} bytes)")
        n_diff += not np.array_equal(got, ref.ravel())
    check(n_mx > 0 and n_diff > 0, f"MXFP4: {n_mx} tensors, {n_diff} changed by the search")


def test_q8_0(tmp, model, stats, imp, src):
    cal = os.path.join(tmp, "q8_cal.gguf")
    ok(QUANTIZE, model, cal, "Q8_0", "--stats", stats, "--quiet")
    improved = 0
    for name, t in tensors(cal).items():
        if int(t.tensor_type) != int(GGMLQuantizationType.Q8_0) or name not in imp:
            continue
        x = src[name].reshape(-1, 32)
        w = np.tile(imp[name], src[name].shape[0]).reshape(-1, 32).astype(np.float64)
        got = np.asarray(t.data).reshape(-1, 34)
        ref = quants.quantize(src[name], GGMLQuantizationType.Q8_0).reshape(-1, 34)

        def err(b):
            d = b[:, :2].copy().view(np.float16).astype(np.float32)
            q = b[:, 2:].view(np.int8).astype(np.float32)
            return np.sum(w * (x.astype(np.float64) - (q * d).astype(np.float64)) ** 2, axis=1)

        eg, er = err(got), err(ref)
        same = np.all(got == ref, axis=1)
        check(np.all(eg[~same] < er[~same]) and np.all(eg[same] == er[same]),
              f"{name}: a searched Q8_0 block is not better than the reference")
        improved += int(np.sum(~same))
    check(improved > 0, "Q8_0: no block changed by the search")


def int8_round(v):
    v = v.astype(np.float64)
    return np.clip(np.trunc(v + np.copysign(0.5, v)), -127, 127)


def test_int8_tensor(tmp, model, stats, imp, src):
    recipe = os.path.join(tmp, "int8t.json")
    with open(recipe, "w") as f:
        json.dump({"name": "int8t", "default": {"format": "int8", "granularity": "tensor"}}, f)
    plain, cal = os.path.join(tmp, "i8.gguf"), os.path.join(tmp, "i8_cal.gguf")
    ok(QUANTIZE, model, plain, "--recipe", recipe, "--quiet")
    ok(QUANTIZE, model, cal, "--recipe", recipe, "--stats", stats, "--quiet")
    p, c = tensors(plain), tensors(cal)
    n_clipped = 0
    for name, x in src.items():
        if name not in imp or name.replace(".weight", ".scale") not in c:
            continue
        g0 = np.float32(np.abs(x).max()) / np.float32(127)
        sname = name.replace(".weight", ".scale")
        check(np.float32(np.asarray(p[sname].data).ravel()[0]) == g0, f"{name}: plain INT8 scale is not amax/127")
        w = np.tile(imp[name], x.shape[0]).reshape(x.shape).astype(np.float64)
        errs = []
        for k in range(0, -32, -1):
            s = np.float32(g0 * np.float32(2.0 ** (k / 32)))
            errs.append(np.sum(w * (x.astype(np.float64) - s * int8_round(x / s)) ** 2))
        k = int(np.argmin(errs))   # the first of the least: the reference on ties
        s = np.float32(np.asarray(c[sname].data).ravel()[0])
        check(abs(s / (g0 * 2.0 ** (-k / 32)) - 1) < 1e-6, f"{name}: INT8 scale {s} is not amax/127 * 2^({-k}/32)")
        codes = np.asarray(c[name].data).view(np.int8).reshape(x.shape)
        check(np.array_equal(codes, int8_round(x / s).astype(np.int8)), f"{name}: INT8 codes are not round(x / s)")
        n_clipped += k > 0
    check(n_clipped > 0, "INT8 per tensor: no scale clipped by the search")


def test_nvfp4(tmp, model, stats, src):
    plain, cal = os.path.join(tmp, "nv.gguf"), os.path.join(tmp, "nv_cal.gguf")
    ok(QUANTIZE, model, plain, "NVFP4", "--quiet")
    ok(QUANTIZE, model, cal, "NVFP4", "--stats", stats, "--importance", "--quiet")
    one = os.path.join(tmp, "nv_cal1.gguf")   # the searches' choices do not depend on the threads
    ok(QUANTIZE, model, one, "NVFP4", "--stats", stats, "--importance", "--quiet", "--threads", 1)
    check(all(np.array_equal(np.asarray(t.data), np.asarray(tensors(one)[n].data)) for n, t in tensors(cal).items()),
          "NVFP4 with statistics: other bytes with one thread")
    p, c = tensors(plain), tensors(cal)
    groups = {}
    for name in src:
        parts = name.split(".")
        key = {"attn_q": "qkv", "attn_k": "qkv", "attn_v": "qkv", "ffn_gate": "gu", "ffn_up": "gu"}.get(parts[2]) \
            if name.startswith("blk.") else None
        groups.setdefault((parts[1], key) if key else name, []).append(name)
    n_moved = 0
    for key, names in groups.items():
        scales = [name.replace(".weight", ".scale") for name in names]
        if not all(s in c for s in scales):
            continue
        g0 = np.float32(max(np.abs(src[n]).max() for n in names)) / np.float32(6 * 448)
        got = {float(np.asarray(c[s].data).ravel()[0]) for s in scales}
        check(len(got) == 1, f"{key}: the fused group's calibrated global scales differ: {got}")
        check({float(np.asarray(p[s].data).ravel()[0]) for s in scales} == {float(g0)},
              f"{key}: plain NVFP4 global scale is not the group's amax / (6 * 448)")
        g = got.pop()
        ks = [k for k in range(-2, 10) if abs(g / (g0 * 2.0 ** (k / 8)) - 1) < 1e-6]
        check(len(ks) == 1, f"{key}: global scale {g} is no candidate amax/(6*448) * 2^(k/8)")
        n_moved += ks != [0]
    check(n_moved > 0, "NVFP4: no global scale moved by the search")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        model, _, stats = setup(tmp)   # quantize_safety's synthetic model, calibrated
        imp, src = importance(stats), f32_rows(model)
        test_mxfp4(tmp, model, stats, imp, src)
        test_q8_0(tmp, model, stats, imp, src)
        test_int8_tensor(tmp, model, stats, imp, src)
        test_nvfp4(tmp, model, stats, src)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
