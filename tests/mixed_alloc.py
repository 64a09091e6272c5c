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

A random synthetic model's KL divergence says little about formats, so its
KLD is only printed here; tests/mixed_alloc_kld.py asserts the KLD ordering on
the real fixtures.

usage: mixed_alloc.py QUANTIZE MKMODEL HFCONV ALLOC_KLD
"""
import filecmp
import json
import os
import sys
import tempfile

from gguf_common import check, finish
from mixed_common import TRAIN, VALID, plan, run, synthetic

QUANTIZE, MKMODEL, HFCONV, ALLOC_KLD = sys.argv[1:5]
MEASURE = ["--measure-text", TRAIN, "--measure-ctx", "64", "--measure-chunks", "8", "--measure-kl-chunks", "2"]


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


def test_determinism(model, tmp):
    m1, m2 = os.path.join(tmp, "m1.json"), os.path.join(tmp, "m2.json")
    for path, threads in ((m1, "1"), (m2, "2")):
        p = quantize(model, *MEASURE, "--save-measurements", path, "--threads", threads)
        check(p.returncode == 0 and "measured" in p.stdout, f"measuring: {p.stderr}")
    check(filecmp.cmp(m1, m2, shallow=False), "measurements do not depend on the thread count")
    with open(m1) as f:
        meas = json.load(f)
    check(all(t.get("kl_format") for t in meas["tensors"] if sum(e is not None for e in t["errors"]) > 1),
          "every tensor with a choice has its KL probe")
    q4 = plan(QUANTIZE, model, "Q4_K_M")
    bpw = repr(q4["totals"]["out_bpw"])
    outs = [os.path.join(tmp, f"a{k}.gguf") for k in range(3)]
    res = allocate(model, outs[0], "--measurements", m1, "--target-bpw", bpw)
    if res:
        within_budget(res, f"target-bpw {float(bpw):.4f} (Q4_K_M)")
        check(abs(res["allocation"]["budget_bytes"] - q4["totals"]["out_bytes"]) <= 1, "budget = Q4_K_M's bytes")
    allocate(model, outs[1], "--measurements", m1, "--target-bpw", bpw)
    allocate(model, outs[2], *MEASURE, "--target-bpw", bpw)
    check(filecmp.cmp(outs[0], outs[1], shallow=False), "the same bytes twice")
    check(filecmp.cmp(outs[0], outs[2], shallow=False), "measuring in the run = reading the measurements")
    q4_path = os.path.join(tmp, "q4.gguf")
    check(quantize(model, q4_path, "Q4_K_M").returncode == 0, "Q4_K_M run")
    p = run(ALLOC_KLD, VALID, "64", "8", model, q4_path, outs[0])
    check(p.returncode == 0, f"the runner evaluates the allocation: {p.stderr}")
    if p.returncode == 0:
        r = json.loads(p.stdout)["models"]
        print(f"synthetic model KLD (not asserted): Q4_K_M {r[0]['kld']:.5f}, measured allocation {r[1]['kld']:.5f}")
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
                "--save-measurements needs --measure-text")


def main():
    if not os.path.exists(TRAIN):
        print(f"SKIP: the calibration text {TRAIN} is absent")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        model = synthetic(tmp, MKMODEL, HFCONV)
        meas = test_determinism(model, tmp)
        test_recipe_constraints(model, meas, tmp)
        test_errors(model, meas, tmp)
    sys.exit(finish())


main()
