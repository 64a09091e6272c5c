"""FP4/FP8 codecs against independent Python implementations.

- MXFP4: quantize and dequantize byte for byte against gguf-py's numpy code.
- NVFP4: dequantize against gguf-py; quantize against ggml's reference
  algorithm written here with gguf-py's UE4M3 codec (gguf-py has no NVFP4
  quantizer); the UE4M3 encoder against gguf-py's fp32_to_ue4m3.
- FP8 E4M3FN/E5M2: against ml_dtypes when it is installed (all 256 codes,
  and round-to-nearest-even encoding of in-range values).

Usage: quant_fp_ref.py PATH/TO/quant_fp_tool. Exit 0 pass, 1 fail, 77 skip.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from gguf import GGMLQuantizationType as QT
    from gguf import quants
except ImportError as e:  # pragma: no cover - environment without the venv
    print(f"SKIP: gguf-py/numpy not available ({e})")
    sys.exit(77)

TOOL = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="hfq-fp-")
failures = []


def run(*args):
    subprocess.run([TOOL, *map(str, args)], check=True)


def tool(op, fmt, data, out_dtype, *extra):
    src, dst = os.path.join(TMP, "in.bin"), os.path.join(TMP, "out.bin")
    data.tofile(src)
    if op == "quant":
        run(op, fmt, extra[0], src, dst, *extra[1:])
    elif op == "ue4m3":
        run(op, src, dst)
    else:
        run(op, fmt, src, dst)
    return np.fromfile(dst, dtype=out_dtype)


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}")
    if not ok:
        failures.append(name)


def rows(rng, n_rows, n_cols):
    """Gaussian, outliers, zeros, tiny, huge and on-grid rows."""
    out = []
    for r in range(n_rows):
        x = rng.standard_normal(n_cols).astype(np.float32)
        kind = r % 6
        if kind == 1:
            x[rng.random(n_cols) < 0.02] *= 200
        elif kind == 2:
            x[rng.random(n_cols) < 0.5] = 0
        elif kind == 3:
            x *= np.float32(1e-20)
        elif kind == 4:
            x *= np.float32(1e20)
        elif kind == 5:
            x = (rng.integers(-24, 25, n_cols) * 0.25).astype(np.float32)
        out.append(x)
    return np.stack(out).astype(np.float32)


def nvfp4_reference(x):
    """ggml's quantize_row_nvfp4_ref, from gguf-py's UE4M3 codec and E2M1 table."""
    nv = quants.NVFP4
    sub = x.reshape(-1, 4, 16)
    amax = np.abs(sub).max(axis=-1)
    d_codes = nv.fp32_to_ue4m3((amax / np.float32(6.0)).astype(np.float32)).astype(np.uint8)
    d = nv.ue4m3_to_fp32(d_codes).astype(np.float32)
    kv = np.array(nv.kvalues, dtype=np.float32)
    errs = np.abs(d[..., None, None] * kv - sub[..., None])
    idx = np.argmin(errs, axis=-1).astype(np.uint8)  # first minimum, as ggml's scan
    qs = idx[..., :8] | (idx[..., 8:] << np.uint8(4))
    return np.concatenate([d_codes, qs.reshape(-1, 32)], axis=-1).reshape(-1)


def test_mxfp4(rng):
    x = rows(rng, 48, 256)
    ours = tool("quant", "mxfp4", x, np.uint8, 256)
    ref = quants.quantize(x, QT.MXFP4).reshape(-1)
    check("mxfp4 quantize == gguf-py", np.array_equal(ours, ref), f"({np.count_nonzero(ours != ref)} bytes differ)")
    blob = rng.integers(0, 256, 17 * 2048, dtype=np.uint8)
    blob[::17] = np.arange(2048) % 256  # every exponent byte
    ours = tool("dequant", "mxfp4", blob, np.float32)
    with np.errstate(over="ignore"):  # exponent bytes near 255 decode to inf in both
        ref = quants.dequantize(blob.reshape(-1, 17), QT.MXFP4).reshape(-1)
    check("mxfp4 dequantize == gguf-py", np.array_equal(ours.view(np.uint32), ref.view(np.uint32)))


def test_nvfp4(rng):
    x = rows(rng, 48, 256)
    ours = tool("quant", "nvfp4", x, np.uint8, 256)
    ref = nvfp4_reference(x)
    check("nvfp4 quantize == ggml algorithm on gguf-py codecs", np.array_equal(ours, ref),
          f"({np.count_nonzero(ours != ref)} bytes differ)")
    blob = rng.integers(0, 256, 36 * 2048, dtype=np.uint8)
    ours = tool("dequant", "nvfp4", blob, np.float32)
    ref = quants.dequantize(blob.reshape(-1, 36), QT.NVFP4).reshape(-1).astype(np.float32)
    check("nvfp4 dequantize == gguf-py", np.array_equal(ours, ref))
    v = np.concatenate([
        np.exp2(rng.uniform(-14, 10, 200000)).astype(np.float32),
        np.exp2(np.arange(-14, 10, dtype=np.float32)) * np.float32(1.0625),  # mantissa ties
        np.array([0, -1, 448, 449, 1e30, np.inf, 255, 256, 0.0155], dtype=np.float32),
    ]).astype(np.float32)
    ours = tool("ue4m3", "", v, np.uint8)
    ref = quants.NVFP4.fp32_to_ue4m3(v).astype(np.uint8)
    check("ue4m3 (ggml rounding) == gguf-py", np.array_equal(ours, ref), f"({np.count_nonzero(ours != ref)} differ)")


def test_fp8(rng):
    try:
        import ml_dtypes
    except ImportError:
        print("SKIP part: ml_dtypes not installed, FP8 comparison skipped")
        return
    codes = np.arange(256, dtype=np.uint8)
    for name, dt, vmax in (("e4m3", ml_dtypes.float8_e4m3fn, 448.0), ("e5m2", ml_dtypes.float8_e5m2, 57344.0)):
        ours = tool("fp8dec", name, codes, np.float32)
        ref = codes.view(dt).astype(np.float32)
        same = (ours.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(ours) & np.isnan(ref))
        check(f"fp8 {name} decode == ml_dtypes (256 codes)", bool(same.all()))
        x = np.concatenate([
            (rng.standard_normal(200000) * np.exp2(rng.uniform(-24, 16, 200000))).astype(np.float32),
            ((ref[np.isfinite(ref)][:-1] + ref[np.isfinite(ref)][1:]) / 2).astype(np.float32),  # midpoints
        ])
        x = x[np.abs(x) < vmax]  # ml_dtypes casts overflow to inf/NaN; ours saturates
        ours = tool("fp8enc", name, x, np.uint8)
        ref = x.astype(dt).view(np.uint8)
        check(f"fp8 {name} encode == ml_dtypes (RNE)", np.array_equal(ours, ref),
              f"({np.count_nonzero(ours != ref)} of {len(x)} differ)")


def main():
    rng = np.random.default_rng(1234)
    test_mxfp4(rng)
    test_nvfp4(rng)
    test_fp8(rng)
    if failures:
        print(f"{len(failures)} failed: {', '.join(failures)}")
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        for f in os.listdir(TMP):
            os.remove(os.path.join(TMP, f))
        os.rmdir(TMP)
