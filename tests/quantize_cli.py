"""The `quantize` tool: usage errors (one line each), --dry-run / --json plans,
real runs to F16/BF16/F32 checked against numpy's conversions, metadata,
determinism across thread counts, progress off a terminal (--quiet silences
it), and refusals (NaN input, requantizing, same file) that leave no output
behind. Inputs are written with gguf-py, independently of our writer.
tests/quantize_safety.py has the output-path refusals and calibration's
defaults and records.

usage: quantize_cli.py QUANTIZE
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter, quants

QUANTIZE = sys.argv[1]
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def run(*args):
    return subprocess.run([QUANTIZE, *args], capture_output=True, text=True)


def make_model(path, layers=2, embd=64, ff=96, vocab=80, dtype=np.float32, tied=True, q8=False, nan_at=None,
               marks=None):
    """Llama-layout GGUF; q8 stores the 2-D weights as Q8_0; nan_at names a
    tensor that gets one NaN; marks: extra string keys."""
    rng = np.random.default_rng(7)
    w = GGUFWriter(path, "llama")
    w.add_name("cli-test")
    w.add_block_count(layers)
    w.add_context_length(128)
    w.add_embedding_length(embd)
    w.add_feed_forward_length(ff)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(0)
    w.add_array("test.array", [1, 2, 3])
    for key, value in (marks or {}).items():
        w.add_string(key, value)
    kv = embd // 2

    def weight(name, rows, cols):
        a = (rng.standard_normal((rows, cols)) * 0.05).astype(np.float32)
        if name == nan_at:
            a[rows // 2, 1] = np.nan
        if q8:
            w.add_tensor(name, quants.quantize(a, GGMLQuantizationType.Q8_0),
                         raw_dtype=GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, a.astype(dtype))

    weight("token_embd.weight", vocab, embd)
    w.add_tensor("output_norm.weight", np.ones(embd, dtype=np.float32))
    if not tied:
        weight("output.weight", vocab, embd)
    for i in range(layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", (1 + rng.standard_normal(embd) * 0.1).astype(np.float32))
        weight(p + "attn_q.weight", embd, embd)
        weight(p + "attn_k.weight", kv, embd)
        weight(p + "attn_v.weight", kv, embd)
        weight(p + "attn_output.weight", embd, embd)
        w.add_tensor(p + "ffn_norm.weight", np.ones(embd, dtype=np.float32))
        weight(p + "ffn_gate.weight", ff, embd)
        weight(p + "ffn_up.weight", ff, embd)
        weight(p + "ffn_down.weight", embd, ff)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def tensors(path):
    r = GGUFReader(path)
    return r, {t.name: t for t in r.tensors}


def bf16_bits(a):
    """Round-to-nearest-even float32 -> bfloat16 bits (inputs are finite)."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def test_usage(tmp, model):
    r = run("--help")
    check(r.returncode == 0 and "usage: quantize" in r.stdout, "--help")
    for args, what in [((), "no arguments"), ((model, "Q4_K_M"), "missing OUT"),
                       ((model, os.path.join(tmp, "o.gguf"), "Q9_K"), "unknown preset"),
                       ((model, "Q8_0", "--dry-run", "--tensor-type", "attn_(v=q8_0"), "bad regex"),
                       ((model, "Q8_0", "--dry-run", "--tensor-type", "attn_v=q9_0"), "unknown format"),
                       ((model, "Q8_0", "--dry-run", "--tensor-type", "attn_v"), "no =FORMAT"),
                       ((model, "F16", "--dry-run", "--tensor-type", "attn_v=q8_0"), "override with F16"),
                       ((model, "Q8_0", "--dry-run", "--threads", "0"), "--threads 0"),
                       ((model, "Q8_0", "--dry-run", "--output-tensor-type", "i32"), "bad output type"),
                       ((model, "Q8_0", "--dry-run", "--frobnicate"), "unknown option"),
                       ((model, os.path.join(tmp, "o.gguf"), "--target-bpw", "6", "--candidates", "q8_0,fp8_e4m3:b128"),
                        "block-scale candidate")]:
        r = run(*args)
        check(r.returncode == 2 and r.stderr.startswith("quantize: ") and r.stderr.count("\n") == 1,
              f"usage error ({what}): exit {r.returncode} {r.stderr!r}")
    check(not os.path.exists(os.path.join(tmp, "o.gguf")), "usage error wrote a file")
    r = run(model, "Q8_0", "--dry-run", "--calib-ctxx", "64")
    check(r.returncode == 2 and r.stderr == "quantize: unknown option '--calib-ctxx' (did you mean '--calib-ctx'?) "
          "(see quantize --help)\n", f"unknown option, nearest suggested: {r.stderr!r}")
    r = run("--version")
    check(r.returncode == 0 and r.stdout.startswith("quantize (hfq) "), f"--version: {r.stdout!r}")
    # the same-file refusal of old, now one of src/common/output.h's (tests/quantize_safety.py)
    r = run(model, model, "F16")
    check(r.returncode == 2 and "refusing to overwrite an input" in r.stderr, f"same file: {r.returncode} {r.stderr}")
    r = run(os.path.join(tmp, "absent.gguf"), os.path.join(tmp, "o.gguf"), "F16")
    check(r.returncode == 1 and "absent.gguf" in r.stderr, f"missing input: {r.returncode} {r.stderr}")


def test_dry_run(tmp, model):
    out = os.path.join(tmp, "dry.gguf")
    r = run(model, out, "Q4_K_M", "--dry-run", "--json")
    check(r.returncode == 0, f"dry run failed: {r.stderr}")
    check(not os.path.exists(out), "--dry-run wrote the output")
    plan = json.loads(r.stdout)
    _, ts = tensors(model)
    by_name = {t["name"]: t for t in plan["tensors"]}
    check(set(by_name) == set(ts), "plan lists other tensors than the file")
    check(plan["preset"] == "Q4_K_M" and plan["file_type"] == 15 and plan["dry_run"], f"plan header {plan}")
    # embd 64 and ff 96 are not multiples of 256: tied token_embd -> q8_0,
    # 64-wide weights q4_K -> q5_0, 96-wide ffn_down -> q5_0 too (96 % 32 == 0)
    check(by_name["token_embd.weight"]["to"] == "q8_0", "token_embd")
    check(by_name["blk.0.attn_q.weight"]["to"] == "q5_0", "attn_q fallback")
    check("not a multiple of 256" in by_name["blk.0.attn_q.weight"]["note"], "fallback note")
    check(by_name["output_norm.weight"]["to"] == "f32" and not by_name["output_norm.weight"]["convert"], "norm")
    check(by_name["blk.1.ffn_down.weight"]["shape"] == [96, 64], "shape ne[0] first")
    tot = plan["totals"]
    check(tot["out_bytes"] == sum(t["bytes"] for t in plan["tensors"]), "totals add up")
    check(tot["n_tensors"] == len(ts) and tot["n_fallback"] == 2 * 7, f"counts {tot}")
    # 64-wide q5_0 rows: 2 blocks of 22 bytes
    check(by_name["blk.0.attn_q.weight"]["bytes"] == 64 * 2 * 22, "q5_0 bytes")
    r = run(model, "Q4_K_M", "--dry-run")
    check(r.returncode == 0 and "blk.1.ffn_down.weight" in r.stdout and "bpw" in r.stdout, "text dry run")
    check(r.stderr == "", "no progress on a pipe")


def test_f16_run(tmp, model):
    out = os.path.join(tmp, "f16.gguf")
    r = run(model, out, "F16", "--threads", "2", "--quiet")
    check(r.returncode == 0, f"F16 run: {r.stderr}")
    check(r.stderr == "", f"stderr not empty with --quiet: {r.stderr!r}")
    # off a terminal progress is a line every 5 s and one at the end (src/cli/cli.h)
    r = run(model, os.path.join(tmp, "f16_p.gguf"), "F16", "--threads", "2")
    check(r.returncode == 0 and r.stderr.splitlines()[-1:] == ["[20/20] blk.1.ffn_down.weight -> f16"],
          f"progress on a pipe: {r.stderr!r}")
    src_r, src = tensors(model)
    dst_r, dst = tensors(out)
    check(list(src) == list(dst), "tensor order changed")
    for name, t in src.items():
        d = dst[name]
        if t.data.ndim == 1:
            check(d.tensor_type == GGMLQuantizationType.F32 and np.array_equal(d.data, t.data), f"{name} copied")
        else:
            check(d.tensor_type == GGMLQuantizationType.F16, f"{name} type {d.tensor_type}")
            check(np.array_equal(np.asarray(d.data).view(np.uint16), t.data.astype(np.float16).view(np.uint16)),
                  f"{name}: F16 bits differ from numpy's")
    f = dst_r.fields
    check(f["general.file_type"].contents() == 1, "general.file_type")
    check(f["general.quantization_version"].contents() == 2, "general.quantization_version")
    check(f["hfq.quantize.preset"].contents() == "F16", "hfq.quantize.preset")
    check("hfq.quantize.version" in f, "hfq.quantize.version")
    check(f["general.name"].contents() == "cli-test" and f["test.array"].contents() == [1, 2, 3], "keys copied")

    out2 = os.path.join(tmp, "f16_t1.gguf")
    r = run(model, out2, "F16", "--threads", "1")
    check(r.returncode == 0 and open(out, "rb").read() == open(out2, "rb").read(), "bytes depend on threads")


def test_bf16_run(tmp, model):
    out = os.path.join(tmp, "bf16.gguf")
    r = run(model, out, "BF16")
    check(r.returncode == 0, f"BF16 run: {r.stderr}")
    _, src = tensors(model)
    _, dst = tensors(out)
    for name in ("token_embd.weight", "blk.1.ffn_down.weight"):
        check(np.array_equal(np.asarray(dst[name].data).view(np.uint16), bf16_bits(src[name].data)),
              f"{name}: BF16 bits")


def test_refusals(tmp):
    nan_model = make_model(os.path.join(tmp, "nan.gguf"), nan_at="blk.1.attn_k.weight")
    out = os.path.join(tmp, "nan_out.gguf")
    r = run(nan_model, out, "F16")
    check(r.returncode == 1 and "blk.1.attn_k.weight" in r.stderr and "NaN" in r.stderr,
          f"NaN input: {r.returncode} {r.stderr}")
    check(not os.path.exists(out), "NaN input left an output")
    check(not [n for n in os.listdir(tmp) if n.startswith("nan_out")], "temporary file left behind")

    q8 = make_model(os.path.join(tmp, "q8.gguf"), q8=True)
    r = run(q8, out, "F16")
    check(r.returncode == 1 and "--allow-requantize" in r.stderr and "token_embd.weight" in r.stderr,
          f"requantize refusal: {r.returncode} {r.stderr}")
    check(not os.path.exists(out), "requantize refusal left an output")
    r = run(q8, out, "F16", "--allow-requantize")
    check(r.returncode == 0, f"--allow-requantize: {r.stderr}")
    if r.returncode == 0:
        _, a = tensors(q8)
        _, b = tensors(out)
        want = quants.dequantize(np.asarray(a["blk.0.ffn_up.weight"].data), GGMLQuantizationType.Q8_0)
        check(np.array_equal(np.asarray(b["blk.0.ffn_up.weight"].data).view(np.uint16),
                             want.astype(np.float16).view(np.uint16)), "Q8_0 -> F16 values")
        os.unlink(out)
    # a tensor already in its target format is copied, as llama-quantize does
    q8_out = os.path.join(tmp, "q8_out.gguf")
    r = run(q8, q8_out, "Q8_0")
    check(r.returncode == 0, f"Q8_0 of a Q8_0 model: {r.stderr}")
    if r.returncode == 0:
        _, a = tensors(q8)
        _, b = tensors(q8_out)
        check(all(np.array_equal(np.asarray(a[n].data), np.asarray(b[n].data)) for n in a), "Q8_0 copied")


def e4m3_decode(codes):
    """OCP E4M3FN code -> float (writers never emit the NaN codes)."""
    c = codes.astype(np.int32)
    sign = np.where(c & 0x80, -1.0, 1.0)
    exp, man = (c >> 3) & 0xF, c & 7
    mag = np.where(exp == 0, man * 2.0 ** -9, (1 + man / 8.0) * 2.0 ** (exp - 7.0))
    return sign * mag


def test_int8_fp8(tmp, model):
    _, src = tensors(model)
    x = src["blk.0.attn_q.weight"].data.astype(np.float32)
    amax = np.abs(x).max(axis=1)

    out = os.path.join(tmp, "int8.gguf")
    r = run(model, out, "INT8")
    check(r.returncode == 0, f"INT8 run: {r.stderr}")
    rd, ts = tensors(out)
    w, sc = ts["blk.0.attn_q.weight"], ts["blk.0.attn_q.scale"]
    check(w.tensor_type == GGMLQuantizationType.I8 and sc.tensor_type == GGMLQuantizationType.F32, "INT8 types")
    check([int(v) for v in sc.shape] == [1, 64], f"INT8 scale shape {sc.shape}")
    scale = np.asarray(sc.data, dtype=np.float32).reshape(-1)
    check(np.array_equal(scale, amax / np.float32(127)), "INT8 scales are amax/127 per row")
    v = (x / scale[:, None]).astype(np.float64)
    want = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5), -127, 127)  # roundf: half away from zero
    check(np.array_equal(np.asarray(w.data).astype(np.int8).reshape(x.shape), want.astype(np.int8)), "INT8 codes")
    f = rd.fields
    check(f["hfq.qext.blk.0.attn_q.weight"].contents() == "int8" and f["hfq.qext.version"].contents() == 1, "qext keys")
    check("hfq.qext.token_embd.weight" not in f, "head has no qext key")
    check(ts["token_embd.weight"].tensor_type == GGMLQuantizationType.F16, "INT8 keeps the head 16-bit")
    check(ts["output_norm.weight"].tensor_type == GGMLQuantizationType.F32, "INT8 norm")
    order = []
    for name in src:
        order += [name] + ([name[:-len(".weight")] + ".scale"] if ts[name].tensor_type == GGMLQuantizationType.I8 else [])
    check(list(ts) == order, "each scale tensor follows its weight")

    out = os.path.join(tmp, "fp8.gguf")
    r = run(model, out, "FP8_E4M3", "--threads", "2")
    check(r.returncode == 0, f"FP8 run: {r.stderr}")
    rd, ts = tensors(out)
    scale = np.asarray(ts["blk.0.attn_q.scale"].data, dtype=np.float32).reshape(-1)
    check(np.array_equal(scale, amax / np.float32(448)), "FP8 scales are amax/448 per row")
    codes = np.asarray(ts["blk.0.attn_q.weight"].data).view(np.uint8).reshape(x.shape)
    check(not np.any((codes & 0x7F) == 0x7F), "FP8 NaN codes written")
    y = e4m3_decode(codes) * scale[:, None]
    # round to nearest with 3 mantissa bits: error <= 2^-4 relative, or half
    # the smallest subnormal step (2^-10 * scale) near zero
    bound = np.maximum(np.abs(x) * 2.0 ** -4, 2.0 ** -10 * scale[:, None]) * 1.0001
    check(np.all(np.abs(y - x) <= bound), "FP8 values off by more than half a step")
    check(rd.fields["hfq.qext.blk.0.attn_q.weight"].contents() == "fp8_e4m3", "FP8 qext key")


def test_tensor_marks(tmp):
    """A tensor's activation mark (docs/format-quant-ext.md) holds for its
    type: quantize drops it from the tensors it converts (the runner would
    refuse the file), but keeps FP8_BLOCK's per-group FP8 activations of a
    float weight that stays float."""
    key = "hfq.act_quant.blk.0.attn_q.weight"
    model = make_model(os.path.join(tmp, "marked.gguf"), marks={key: "fp8_e4m3_g32"})
    for preset, kept in (("Q8_0", False), ("F16", True)):
        out = os.path.join(tmp, f"marked-{preset}.gguf")
        r = run(model, out, preset, "--quiet")
        check(r.returncode == 0, f"marked {preset}: {r.stderr}")
        if r.returncode == 0:
            field = GGUFReader(out).fields.get(key)
            value = bytes(field.parts[field.data[0]]).decode() if field else None
            check(value == ("fp8_e4m3_g32" if kept else None), f"marked {preset}: {key} = {value!r}")


def test_fp4(tmp, model):
    _, src = tensors(model)
    out = os.path.join(tmp, "nvfp4.gguf")
    r = run(model, out, "NVFP4")
    check(r.returncode == 0, f"NVFP4 run: {r.stderr}")
    _, ts = tensors(out)
    x = src["blk.1.ffn_up.weight"].data.astype(np.float32)
    w, sc = ts["blk.1.ffn_up.weight"], ts["blk.1.ffn_up.scale"]
    check(w.tensor_type == GGMLQuantizationType.NVFP4 and [int(v) for v in sc.shape] == [1], "NVFP4 tensors")
    g = np.float32(np.asarray(sc.data).reshape(-1)[0])
    # gate and up share the global scale of their larger amax (src/quantize/fused.h)
    amax = max(np.abs(x).max(), np.abs(src["blk.1.ffn_gate.weight"].data.astype(np.float32)).max())
    check(g == amax / np.float32(6 * 448), f"NVFP4 global scale {g}")
    g_gate = np.float32(np.asarray(ts["blk.1.ffn_gate.scale"].data).reshape(-1)[0])
    check(g_gate == g, f"NVFP4 ffn_gate's global scale {g_gate}, ffn_up's {g}")
    y = quants.dequantize(np.asarray(w.data), GGMLQuantizationType.NVFP4).reshape(x.shape) * g
    sub_amax = np.repeat(np.abs(x).reshape(-1, 16).max(axis=1), 16).reshape(x.shape)
    check(np.all(np.abs(y - x) <= sub_amax / 6 * 1.07 + 1e-12), "NVFP4 error above half a step")
    # 96-wide ffn_down: 64-blocks do not fit -> MXFP4, which has no scale tensor
    check(ts["blk.0.ffn_down.weight"].tensor_type == GGMLQuantizationType.MXFP4, "NVFP4 fallback")
    check("blk.0.ffn_down.scale" not in ts, "MXFP4 fallback got a scale tensor")
    check(ts["output_norm.weight"].tensor_type == GGMLQuantizationType.F32, "NVFP4 norm")

    # --pure: the (tied) token_embd is NVFP4 too, but llama.cpp loads no .scale
    # beside it: no global scale there, its block scales alone give the values
    out = os.path.join(tmp, "nvfp4_pure.gguf")
    r = run(model, out, "NVFP4", "--pure")
    check(r.returncode == 0, f"NVFP4 --pure run: {r.stderr}")
    _, ts = tensors(out)
    e = ts["token_embd.weight"]
    check(e.tensor_type == GGMLQuantizationType.NVFP4 and "token_embd.scale" not in ts
          and "blk.1.ffn_up.scale" in ts, "NVFP4 --pure: a scale only beside the layer weights")
    x = src["token_embd.weight"].data.astype(np.float32)
    y = quants.dequantize(np.asarray(e.data), GGMLQuantizationType.NVFP4).reshape(x.shape)
    sub_amax = np.repeat(np.abs(x).reshape(-1, 16).max(axis=1), 16).reshape(x.shape)
    check(np.all(np.abs(y - x) <= sub_amax / 6 * 1.07 + 1e-12), "NVFP4 token_embd error above half a step")

    out = os.path.join(tmp, "mxfp4.gguf")
    r = run(model, out, "MXFP4", "--token-embedding-type", "f16")
    check(r.returncode == 0, f"MXFP4 run: {r.stderr}")
    _, ts = tensors(out)
    for name in ("blk.0.attn_k.weight", "blk.1.ffn_down.weight"):
        ref = quants.quantize(src[name].data.astype(np.float32), GGMLQuantizationType.MXFP4)
        check(np.array_equal(np.asarray(ts[name].data), ref), f"{name}: MXFP4 bytes differ from gguf-py's")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        model = make_model(os.path.join(tmp, "m.gguf"))
        test_usage(tmp, model)
        test_dry_run(tmp, model)
        test_f16_run(tmp, model)
        test_bf16_run(tmp, model)
        test_refusals(tmp)
        test_int8_fp8(tmp, model)
        test_fp4(tmp, model)
        test_tensor_marks(tmp)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
