"""Measured allocation (`quantize --target-bpw / --target-size`,
docs/mixed.md) on the synthetic model (mkmodel: 4 layers, hidden 256, ffn
768, so K-quants apply), calibrated on tinystories-train.txt:

- measurements are the same bytes for 1 and 2 threads; the output is the same
  bytes twice, and the same whether measured in the same run or read back
  from --measurements;
- at the bits per weight of Q4_K_M, and at a --target-size, the written
  tensor data is within 1 % of the budget (never above it) and equals the
  prediction;
- recipe rules pin or restrict tensors under a budget;
- budgets below the smallest plan, and measurements of another model, of
  another shape or lacking a format, fail with one line and no output.

- at the bits per weight of Q4_K_M the allocation's mean KL divergence from
  the F32 model over tinystories-valid.txt is lower than Q4_K_M's (as
  tests/mixed_alloc_kld.py asserts on the real fixtures).

usage: mixed_alloc.py QUANTIZE MKMODEL HFCONV PPL_EVAL
"""
import filecmp
import json
import os
import sys
import tempfile

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter, quants

from gguf_common import check, finish
from mixed_common import TRAIN, VALID, kl_scores, plan, run, synthetic

QUANTIZE, MKMODEL, HFCONV, PPL_EVAL = sys.argv[1:5]
MEASURE = ["--calibration-file", TRAIN, "--calib-ctx", "64", "--calib-chunks", "4", "--measure-kl-chunks", "1"]


def quantize(*args):
    return run(QUANTIZE, *args)


def allocate(model, out, *args):
    """A real run with --json; returns its JSON or None."""
    p = quantize(model, out, *args, "--json")
    check(p.returncode == 0, f"allocation {args}: {p.stderr}")
    return json.loads(p.stdout) if p.returncode == 0 else None


def within_budget(res, what):
    a = res["allocation"]
    budget, written = a["budget_bytes"], res["written_tensor_bytes"]
    print(f"{what}: budget {budget:.0f} bytes, written {written:.0f} ({100 * (written - budget) / budget:+.3f} %), "
          f"{a['n_chosen']:.0f} tensors chosen, predicted KL sum {a['measured_error']:.4g}")
    check(written == a["predicted_bytes"] == res["totals"]["out_bytes"], f"{what}: written = predicted")
    check(budget * 0.99 <= written <= budget, f"{what}: {written} not within 1 % below {budget}")


def same_tensors(a, b):
    """The same tensors, types and bytes (the metadata records where the
    statistics came from, a file or a text, and may differ there)."""
    ta, tb = GGUFReader(a).tensors, GGUFReader(b).tensors
    return len(ta) == len(tb) and all(x.name == y.name and x.tensor_type == y.tensor_type and
                                      np.array_equal(x.data, y.data) for x, y in zip(ta, tb))


def test_determinism(model, tmp):
    m1, m2 = os.path.join(tmp, "m1.json"), os.path.join(tmp, "m2.json")
    stats = os.path.join(tmp, "stats.gguf")
    p = quantize(model, *MEASURE, "--save-measurements", m1, "--save-stats", stats, "--threads", "1")
    check(p.returncode == 0 and "measured" in p.stdout, f"measuring: {p.stderr}")
    with open(m1) as f:
        meas = json.load(f)
    check(all(t.get("kl_format") for t in meas["tensors"] if sum(e is not None for e in t["errors"]) > 1),
          "every tensor with a choice has its KL probe")
    q4 = plan(QUANTIZE, model, "Q4_K_M")
    bpw = repr(q4["totals"]["out_bpw"])
    outs = [os.path.join(tmp, f"a{k}.gguf") for k in range(3)]
    # the statistics serve the write too (importance-weighted rounding):
    # reading measurements back takes the same statistics from their file
    res = allocate(model, outs[0], "--measurements", m1, "--stats", stats, "--target-bpw", bpw)
    if res:
        within_budget(res, f"target-bpw {float(bpw):.4f} (Q4_K_M)")
        check(abs(res["allocation"]["budget_bytes"] - q4["totals"]["out_bytes"]) <= 1, "budget = Q4_K_M's bytes")
    allocate(model, outs[1], "--measurements", m1, "--stats", stats, "--target-bpw", bpw)
    allocate(model, outs[2], *MEASURE, "--save-measurements", m2, "--threads", "2", "--target-bpw", bpw)
    check(filecmp.cmp(m1, m2, shallow=False), "measurements do not depend on the thread count")
    check(filecmp.cmp(outs[0], outs[1], shallow=False), "the same bytes twice")
    check(same_tensors(outs[0], outs[2]), "measuring in the run = reading the measurements")
    q4_path = os.path.join(tmp, "q4.gguf")
    check(quantize(model, q4_path, "Q4_K_M").returncode == 0, "Q4_K_M run")
    r = kl_scores(PPL_EVAL, VALID, "64", "8", model, [q4_path, outs[0]], tmp)
    if r:
        print(f"synthetic model KLD: Q4_K_M {r[0]['kld']:.5f}, measured allocation {r[1]['kld']:.5f}")
        check(r[1]["kld"] < r[0]["kld"], "the measured allocation's KLD is below Q4_K_M's")
    res = allocate(model, os.path.join(tmp, "size.gguf"), "--measurements", m1, "--target-size", "1.9M")
    if res:
        within_budget(res, "target-size 1.9M")
        check(res["allocation"]["budget_bytes"] == int(1.9 * 1024 * 1024), "1.9M = 1.9 MiB")
    return m1


def test_recipe_constraints(model, meas, tmp):
    recipe = os.path.join(tmp, "constraints.json")
    with open(recipe, "w") as f:
        json.dump({"name": "constraints", "rules": [
            {"output": True, "format": "q8_0"},
            {"match": "ffn_", "candidates": ["q4_K", "q6_K"]},
            {"match": "attn_v", "layers": "0", "format": "q6_K"}]}, f)
    res = allocate(model, os.path.join(tmp, "c.gguf"), "--measurements", meas, "--target-bpw", "5.5", "--recipe", recipe)
    if not res:
        return
    within_budget(res, "target-bpw 5.5 with a recipe")
    to = {t["name"]: t["to"] for t in res["tensors"]}
    check(to["output.weight"] == "q8_0" and to["blk.0.attn_v.weight"] == "q6_K", "pinned formats")
    ffn = {v for k, v in to.items() if "ffn_" in k and "norm" not in k}
    check(ffn <= {"q4_K", "q6_K"} and len(ffn) == 2, f"ffn tensors within their candidates: {ffn}")
    others = {v for k, v in to.items() if "attn_" in k and "norm" not in k and k != "blk.0.attn_v.weight"}
    check(len(others) >= 2, f"the other tensors choose among the defaults: {others}")


def expect_fail(tmp, args, code, text):
    out = os.path.join(tmp, "fail.gguf")
    p = quantize(*[out if a == "OUT" else a for a in args])
    err = p.stderr.strip().splitlines()
    check(p.returncode == code, f"{args}: exit {p.returncode}, want {code}: {p.stderr}")
    check(bool(err) and text in err[0] and (len(err) == 1 or code == 2), f"{args}: '{text}' not in {err}")
    check(not os.path.exists(out), f"{args}: output left behind")


def edited(tmp, meas, name, edit):
    with open(meas) as f:
        doc = json.load(f)
    edit(doc)
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def test_errors(model, meas, tmp):
    expect_fail(tmp, [model, "OUT", "--measurements", meas, "--target-bpw", "1"], 1, "below the smallest plan")
    with open(meas) as f:
        text = f.read()
    cut = os.path.join(tmp, "cut.json")
    with open(cut, "w") as f:
        f.write(text[:len(text) // 2])
    expect_fail(tmp, [model, "OUT", "--measurements", cut, "--target-bpw", "5"], 1, "cut.json: invalid JSON")

    def rename(d):
        d["tensors"][3]["name"] = "blk.9.attn_q.weight"
    name = json.loads(text)["tensors"][3]["name"]
    expect_fail(tmp, [model, "OUT", "--measurements", edited(tmp, meas, "renamed.json", rename), "--target-bpw", "5"],
                1, f"no measurements for tensor {name}")

    def reshape(d):
        d["tensors"][3]["ne"][0] *= 2
    expect_fail(tmp, [model, "OUT", "--measurements", edited(tmp, meas, "shape.json", reshape), "--target-bpw", "5"],
                1, "measured with another shape")

    def negative(d):
        d["tensors"][0]["errors"][0] = -1
    expect_fail(tmp, [model, "OUT", "--measurements", edited(tmp, meas, "neg.json", negative), "--target-bpw", "5"],
                1, "is not a number >= 0 or null")
    expect_fail(tmp, [model, "OUT", "--measurements", meas, "--target-bpw", "5", "--candidates", "q8_0,int8"], 1,
                "format int8 was not measured")
    expect_fail(tmp, [model, "OUT", "--measurements", meas, "--save-measurements", "x.json", "--target-bpw", "5"], 2,
                "--save-measurements needs --calibration-file")


def test_measure_formula(model, tmp):
    """--stats reads llama.cpp's imatrix layout; each error is
    sum_rows sum_j (W - Q(W))^2 in_sum2_j / count, checked with numpy for Q8_0
    (gguf-py's quantizer, bit-exact with ggml's) and F16; token_embd, absent
    from the file, is weighted uniformly over its rows."""
    rng = np.random.default_rng(3)
    weights = {t.name: np.array(t.data, dtype=np.float32).reshape([int(x) for x in reversed(t.shape)])
               for t in GGUFReader(model).tensors}
    stats = os.path.join(tmp, "imatrix.gguf")
    w = GGUFWriter(stats, "imatrix")
    w.add_type("imatrix")  # as llama-imatrix writes it
    moments = {}
    for name, a in weights.items():
        if a.ndim != 2 or name == "token_embd.weight":
            continue
        sum2 = rng.uniform(0.1, 3.0, size=(1, a.shape[1])).astype(np.float32)
        count = np.array([[float(rng.integers(50, 500))]], dtype=np.float32)
        moments[name] = sum2[0].astype(np.float64) / float(count[0, 0])
        w.add_tensor(name + ".in_sum2", sum2)
        w.add_tensor(name + ".counts", count)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    meas = os.path.join(tmp, "stats.json")
    p = quantize(model, "--stats", stats, "--candidates", "q8_0,f16", "--save-measurements", meas)
    check(p.returncode == 0, f"--stats: {p.stderr}")
    if p.returncode != 0:
        return
    with open(meas) as f:
        got = {t["name"]: t for t in json.load(f)["tensors"]}
    check(set(got) == set(moments) | {"token_embd.weight"}, f"measured tensors: {sorted(got)}")
    worst = 0.0
    for name, t in got.items():
        a = weights[name]
        back = {"q8_0": quants.dequantize(quants.quantize(a, GGMLQuantizationType.Q8_0), GGMLQuantizationType.Q8_0),
                "f16": a.astype(np.float16).astype(np.float32)}
        for k, fmt in enumerate(("q8_0", "f16")):
            d2 = (a.astype(np.float64) - back[fmt].astype(np.float64)) ** 2
            want = (d2 * moments[name]).sum() if name in moments else d2.sum() / a.shape[0]
            worst = max(worst, abs(t["errors"][k] - want) / want)
        check("kl_format" not in t, f"{name}: no KL probe without a text")
    print(f"--stats: {len(got)} tensors, errors equal numpy's to {worst:.2e} (relative)")
    check(worst < 1e-9, f"measured errors vs numpy: {worst}")
    # NVFP4 is priced as the driver writes it (--stats: importance in both):
    # token_embd without a global scale (llama.cpp loads none there), the
    # layers with theirs
    p = quantize(model, "--stats", stats, "--candidates", "nvfp4", "--save-measurements", meas)
    check(p.returncode == 0, f"--stats nvfp4: {p.stderr}")
    nv = os.path.join(tmp, "nv.gguf")
    p = quantize(model, nv, "NVFP4", "--pure", "--stats", stats)
    check(p.returncode == 0, f"nvfp4 file: {p.stderr}")
    if p.returncode == 0:
        with open(meas) as f:
            got = {t["name"]: t["errors"][0] for t in json.load(f)["tensors"]}
        rd = GGUFReader(nv)
        scales = {t.name: float(np.array(t.data)[0]) for t in rd.tensors if t.name.endswith(".scale")}
        check("token_embd.scale" not in scales and "blk.0.attn_output.scale" in scales, f"scales: {sorted(scales)[:4]}")
        # gguf-py decodes ggml's NVFP4 blocks; the global scale multiplies them
        dec = {t.name: quants.dequantize(np.array(t.data), GGMLQuantizationType.NVFP4).astype(np.float64) *
               scales.get(t.name.replace(".weight", ".scale"), 1.0)
               for t in rd.tensors if t.tensor_type == GGMLQuantizationType.NVFP4}
        def written(name):
            d2 = (weights[name].astype(np.float64) - dec[name]) ** 2
            return (d2 * moments[name]).sum() if name in moments else d2.sum() / weights[name].shape[0]
        emb = abs(got["token_embd.weight"] - written("token_embd.weight")) / written("token_embd.weight")
        print(f"nvfp4: measured error of token_embd equals the written file's to {emb:.2e}")
        check(emb < 1e-6, f"nvfp4 token_embd measured error vs the written file: {emb}")
        # a layer's global scale is searched with the statistics (tensor_scale.h),
        # which never does worse than the amax-derived one the measurement prices
        # (not q/k/v or gate/up: those share their group's scale, fused.h)
        name = "blk.0.attn_output.weight"
        check(written(name) <= got[name] * (1 + 1e-9), f"{name}: written error {written(name)} above measured {got[name]}")
    bad = os.path.join(tmp, "bad_imatrix.gguf")
    w = GGUFWriter(bad, "imatrix")
    w.add_type("imatrix")
    w.add_tensor("blk.0.attn_q.weight.in_sum2", np.ones((1, 256), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    expect_fail(tmp, [model, "--stats", bad, "--save-measurements", "OUT"], 1,
                "tensor blk.0.attn_q.weight.in_sum2 has no blk.0.attn_q.weight.counts")


def main():
    if not os.path.exists(TRAIN):
        print(f"SKIP: the calibration text {TRAIN} is absent")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        model = synthetic(tmp, MKMODEL, HFCONV)
        meas = test_determinism(model, tmp)
        test_recipe_constraints(model, meas, tmp)
        test_errors(model, meas, tmp)
        test_measure_formula(model, tmp)
    sys.exit(finish())


main()
