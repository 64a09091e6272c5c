"""`quantize --recipe` end to end (docs/mixed.md), on the synthetic model of
mkmodel (4 layers, hidden 256, ffn 768: K-quants apply) converted by hfconv:

- examples/recipes/q4_k_m.json plans what the Q4_K_M preset plans and writes
  the same tensor bytes, with hfq.quantize.recipe recorded;
- the NVFP4-attention/FP8-FFN and INT8 examples, and a recipe with INT8 per
  group / per tensor and FP8 per tensor, write scale tensors of the shapes
  docs/format-quant-ext.md gives, whose values decode (numpy) to the weights
  within half a quantization step, and the runner evaluates every one of
  them (ppl-eval) close to the base model;
- --dry-run prints every tensor with its format and bits per weight and the
  totals;
- examples/recipes/k_quants_budget.json with a budget: pinned tensors keep
  their format (noted by rule, not "no candidate fits"), the others take one
  of their rule's candidates within the budget; candidates outside the
  default list (int8:g64) are measured; a budget with a recipe that pins
  every tensor is refused before measuring;
- invalid recipes and option mixes fail with one line, exit 1 or 2, and leave
  no output file.

usage: mixed_recipe.py QUANTIZE MKMODEL HFCONV PPL_EVAL
"""
import json
import os
import sys
import tempfile

import numpy as np
from gguf import GGUFReader

from gguf_common import check, finish
from mixed_common import RECIPES, VALID, plan, run, synthetic

QUANTIZE, MKMODEL, HFCONV, PPL_EVAL = sys.argv[1:5]
TEXT = VALID


def quantize(*args):
    return run(QUANTIZE, *args)


def tensors(path):
    r = GGUFReader(path)
    return {t.name: t for t in r.tensors}, r


def field_str(r, key):
    f = r.get_field(key)
    return None if f is None else bytes(f.parts[f.data[0]]).decode()


def test_q4_k_m(model, tmp):
    recipe = os.path.join(RECIPES, "q4_k_m.json")
    a, b = plan(QUANTIZE, model, "--recipe", recipe), plan(QUANTIZE, model, "Q4_K_M")
    if not a or not b:
        return
    got = [(t["name"], t["to"], t["bytes"]) for t in a["tensors"]]
    want = [(t["name"], t["to"], t["bytes"]) for t in b["tensors"]]
    check(got == want, "q4_k_m recipe plans what Q4_K_M plans")
    check(a["totals"]["out_bytes"] == b["totals"]["out_bytes"] and a["preset"] == "Q4_K_M", "totals and file type")
    check(a.get("recipe") == recipe, "the JSON names the recipe")
    out_r, out_p = os.path.join(tmp, "r.gguf"), os.path.join(tmp, "p.gguf")
    p = quantize(model, out_r, "--recipe", recipe)
    check(p.returncode == 0, f"recipe run: {p.stderr}")
    p = quantize(model, out_p, "Q4_K_M")
    check(p.returncode == 0, f"preset run: {p.stderr}")
    tr, rr = tensors(out_r)
    tp, rp = tensors(out_p)
    check(sorted(tr) == sorted(tp), "same tensors")
    same = all(tr[n].tensor_type == tp[n].tensor_type and np.array_equal(tr[n].data, tp[n].data) for n in tp)
    check(same, "the recipe writes the preset's bytes")
    check(field_str(rr, "hfq.quantize.recipe") == "q4_k_m", "hfq.quantize.recipe")
    check(int(rr.get_field("general.file_type").parts[-1][0]) == 15, "general.file_type 15 (Q4_K_M)")


def scale_of(t, tt):
    base = t.name[:-len(".weight")]
    return tt.get(base + ".scale")


def check_i8(name, tt, weights, enc, per):
    """Decodes an I8 tensor with its scale (numpy) and compares with the F32 weights."""
    t = tt[name]
    s = scale_of(t, tt)
    check(s is not None, f"{name}: scale tensor")
    if s is None:
        return
    w = weights[name]
    q = np.array(t.data).view(np.int8).reshape(w.shape).astype(np.float64)
    sc = np.array(s.data, dtype=np.float64)
    rows, cols = w.shape
    if per == "tensor":
        check(list(s.shape) == [1], f"{name}: scale shape {list(s.shape)}")
        full = np.full(w.shape, sc.reshape(-1)[0])
    elif per == "channel":
        check(list(s.shape) == [1, rows], f"{name}: scale shape {list(s.shape)}")
        full = np.repeat(sc.reshape(rows, 1), cols, axis=1)
    elif per == "block":  # one scale per 128x128 block: its amax / 448
        nb0, nb1 = -(-cols // 128), -(-rows // 128)
        check(list(s.shape) == [nb0, nb1], f"{name}: block scale shape {list(s.shape)}")
        blk = sc.reshape(nb1, nb0)
        full = np.repeat(np.repeat(blk, 128, axis=0), 128, axis=1)[:rows, :cols]
        amax = np.array([[np.abs(w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]).max() for j in range(nb0)]
                         for i in range(nb1)], dtype=np.float32)
        check(np.array_equal(blk.astype(np.float32), amax / np.float32(448)), f"{name}: block scales = amax/448")
    else:
        g = per
        check(list(s.shape) == [cols // g, rows], f"{name}: scale shape {list(s.shape)}")
        full = np.repeat(sc.reshape(rows, cols // g), g, axis=1)
    if enc == "int8":
        back = q * full
        err = np.abs(back - w).max() / full.max()
        check(err <= 0.5 + 1e-6, f"{name}: int8 error {err} steps")
        amax = np.abs(w).max() if per == "tensor" else None
        if amax is not None:
            check(abs(sc.reshape(-1)[0] - amax / 127) <= 1e-7 * amax, f"{name}: per-tensor scale = amax/127")
    else:
        codes = np.array(t.data).view(np.uint8).reshape(w.shape)
        vals = fp8_e4m3(codes) * full
        rel = np.abs(vals - w) / np.maximum(np.abs(w), full * 2.0 ** -6)
        check(rel.max() <= 1 / 16 + 1e-6, f"{name}: fp8 relative error {rel.max()}")


def fp8_e4m3(c):
    c = c.astype(np.int64)
    sign = np.where(c & 0x80, -1.0, 1.0)
    e, m = (c >> 3) & 0xF, c & 7
    return sign * np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7))


def ppl(model):
    p = run(PPL_EVAL, model, "--text", TEXT, "--ctx", "64", "--chunks", "4", "--json")
    check(p.returncode == 0, f"ppl-eval {model}: {p.stderr}")
    return json.loads(p.stdout)["ppl"] if p.returncode == 0 else float("nan")


def test_granularity(model, tmp):
    weights = {t.name: np.array(t.data, dtype=np.float64).reshape(list(reversed([int(x) for x in t.shape])))
               for t in GGUFReader(model).tensors}
    custom = os.path.join(tmp, "gran.json")
    with open(custom, "w") as f:
        json.dump({"name": "granularity", "rules": [
            {"output": True, "format": "fp8_e4m3", "granularity": "tensor"},
            {"match": "ffn_", "format": "int8", "granularity": "group", "group_size": 64},
            {"match": "attn_(q|k)\\.", "format": "int8", "granularity": "tensor"},
            {"match": "attn_", "format": "int8"},
            {"match": "token_embd", "format": "q8_0"}], "default": {"format": "q8_0"}}, f)
    block = os.path.join(tmp, "block.json")
    with open(block, "w") as f:
        json.dump({"name": "fp8 block", "rules": [
            {"match": "blk\\.", "format": "fp8_e4m3", "granularity": "block"}], "default": {"format": "q8_0"}}, f)
    base_ppl = ppl(model) if os.path.exists(TEXT) else None
    cases = [("nvfp4_attn_fp8_ffn.json", {"blk.1.ffn_up.weight": ("fp8", "channel")}),
             ("int8_w8a8.json", {"blk.2.attn_q.weight": ("int8", "channel"), "output.weight": ("int8", "channel")}),
             (custom, {"blk.0.ffn_down.weight": ("int8", 64), "blk.3.ffn_gate.weight": ("int8", 64),
                       "blk.1.attn_k.weight": ("int8", "tensor"), "blk.1.attn_v.weight": ("int8", "channel"),
                       "output.weight": ("fp8", "tensor")}),
             (block, {"blk.0.ffn_down.weight": ("fp8", "block"), "blk.2.ffn_up.weight": ("fp8", "block"),
                      "blk.1.attn_k.weight": ("fp8", "block"), "blk.3.attn_q.weight": ("fp8", "block")})]
    for recipe, expect in cases:
        path = recipe if os.path.isabs(recipe) else os.path.join(RECIPES, recipe)
        out = os.path.join(tmp, os.path.basename(recipe) + ".gguf")
        p = quantize(model, out, "--recipe", path)
        check(p.returncode == 0, f"{recipe}: {p.stderr}")
        if p.returncode != 0:
            continue
        tt, r = tensors(out)
        for name, (enc, per) in expect.items():
            key = field_str(r, "hfq.qext." + name)
            check(key == ("int8" if enc == "int8" else "fp8_e4m3"), f"{recipe}: {name} encoding {key}")
            check_i8(name, tt, weights, enc, per)
        if recipe.startswith("nvfp4"):
            t = tt["blk.0.attn_q.weight"]
            check(t.tensor_type == 40 and list(scale_of(t, tt).shape) == [1], "nvfp4 with its global scale")
            check(tt["token_embd.weight"].tensor_type == 8, "8-bit embeddings")
        if base_ppl is not None:
            q = ppl(out)
            print(f"{os.path.basename(recipe)}: ppl {q:.3f} (base {base_ppl:.3f})")
            check(abs(q - base_ppl) <= 0.05 * base_ppl, f"{recipe}: ppl {q} vs base {base_ppl}")


def test_dry_run_text(model):
    p = quantize(model, "--recipe", os.path.join(RECIPES, "q4_k_m.json"), "--dry-run")
    check(p.returncode == 0, p.stderr)
    lines = p.stdout.splitlines()
    rows = [line for line in lines if "bpw" in line and "->" in line]
    check(len(rows) == len(GGUFReader(model).tensors), f"one line per tensor ({len(rows)})")
    check(any("q6_K" in line and "recipe rule 1" in line and "output.weight" in line for line in rows), "rule notes")
    check(any(line.startswith("output:") and "bpw" in line for line in lines), "totals")


def test_budget(model, tmp):
    if not os.path.exists(TEXT):
        print("note: fixtures absent, recipes with a budget not run (they calibrate on the text)")
        return
    calib = ["--calibration-file", TEXT, "--calib-ctx", "64", "--calib-chunks", "8", "--quiet"]
    recipe = os.path.join(RECIPES, "k_quants_budget.json")
    out = os.path.join(tmp, "budget.gguf")
    p = quantize(model, out, "--recipe", recipe, "--target-bpw", "5.5", "--json", *calib)
    check(p.returncode == 0, f"{recipe} with a budget: {p.stderr}")
    if p.returncode != 0:
        return
    j = json.loads(p.stdout)
    to = {t["name"]: t for t in j["tensors"]}
    check(to["output.weight"]["to"] == "q6_K" and to["output.weight"]["note"] == "recipe rule 1",
          f"pinned output layer: {to['output.weight']}")
    check(not any("no candidate fits" in t["note"] for t in j["tensors"]), "a tensor says no candidate fits")
    chosen = {}
    for name, t in to.items():
        if not t["convert"] or name == "output.weight":
            continue
        rule2 = any(k in name for k in ("attn_v.", "ffn_down"))
        allowed = {"q4_K", "q5_K", "q6_K"} | ({"q8_0"} if rule2 else set())
        check(t["to"] in allowed and "measured" in t["note"], f"{name}: {t['to']} ({t['note']}) not among {allowed}")
        chosen[t["to"]] = chosen.get(t["to"], 0) + 1
    check(len(chosen) >= 2, f"the budget chose one format everywhere: {chosen}")
    al = j["allocation"]
    check(j["written_tensor_bytes"] <= al["budget_bytes"] and al["n_chosen"] == sum(chosen.values()),
          f"within the budget: {al} wrote {j['written_tensor_bytes']}")
    # a candidate outside the default list is measured, not refused as unmeasured
    custom = os.path.join(tmp, "int8_cand.json")
    with open(custom, "w") as f:
        json.dump({"name": "int8_cand", "rules": [{"output": True, "format": "q8_0"},
                                                  {"match": "ffn_", "candidates": ["q4_K", "int8:g64"]}],
                   "default": {"format": "q6_K"}}, f)
    p = quantize(model, "--recipe", custom, "--target-bpw", "6", "--dry-run", "--json", *calib)
    check(p.returncode == 0, f"int8:g64 candidate: {p.stderr}")
    if p.returncode == 0:
        ffn = {t["to"] for t in json.loads(p.stdout)["tensors"] if "ffn_" in t["name"] and t["convert"]}
        check(ffn <= {"q4_K", "int8:g64"} and ffn, f"ffn tensors among their candidates: {ffn}")
    expect_fail(tmp, [model, "OUT", "--recipe", os.path.join(RECIPES, "q4_k_m.json"), "--target-bpw", "5.5", *calib],
                1, "every tensor is pinned")


def expect_fail(tmp, args, code, text, recipe=None):
    out = os.path.join(tmp, "fail.gguf")
    if recipe is not None:
        path = os.path.join(tmp, "bad.json")
        with open(path, "w") as f:
            f.write(recipe if isinstance(recipe, str) else json.dumps(recipe))
        args = [*args, "--recipe", path]
    p = quantize(*[out if a == "OUT" else a for a in args])
    err = p.stderr.strip().splitlines()
    check(p.returncode == code, f"{args}: exit {p.returncode}, want {code}: {p.stderr}")
    check(bool(err) and text in err[0], f"{args}: '{text}' not in {err[:1]}")
    if code == 1:
        check(len(err) == 1, f"one line: {err}")
    check(not os.path.exists(out), f"{args}: output left behind")


def test_errors(model, tmp):
    d = {"format": "q8_0"}
    expect_fail(tmp, [model, "OUT"], 1, "invalid JSON near byte", recipe='{"name": "x", "rules": [')
    expect_fail(tmp, [model, "OUT"], 1, "rule 1: bad regex", recipe={"name": "x", "rules": [
        {"match": "attn_(", "format": "q8_0"}], "default": d})
    expect_fail(tmp, [model, "OUT"], 1, "rule 1: unknown format 'q7_K'", recipe={"name": "x", "rules": [
        {"match": "attn", "format": "q7_K"}], "default": d})
    expect_fail(tmp, [model, "OUT"], 1, "the group size does not divide the row", recipe={"name": "x", "rules": [
        {"match": "ffn_down", "format": "int8", "granularity": "group", "group_size": 100}], "default": d})
    expect_fail(tmp, [model, "OUT"], 1, "outside the model's layers 0..3", recipe={"name": "x", "rules": [
        {"match": "ffn", "layers": "2..9", "format": "q6_K"}], "default": d})
    expect_fail(tmp, [model, "OUT"], 1, "rule 2 never fires on this model", recipe={"name": "x", "rules": [
        {"match": "ffn_", "format": "q6_K"}, {"match": "ffn_up", "format": "q8_0"}], "default": d})
    expect_fail(tmp, [model, "OUT"], 1, "rule 2: can never fire", recipe={"name": "x", "rules": [
        {"match": "ffn_", "format": "q6_K"}, {"match": "ffn_", "layers": "0", "format": "q8_0"}], "default": d})
    expect_fail(tmp, [model, "OUT"], 1, "they need --target-bpw", recipe={"name": "x", "rules": [
        {"match": "ffn_", "candidates": ["q4_K", "q6_K"]}], "default": d})
    expect_fail(tmp, [model, "OUT", "--recipe", os.path.join(tmp, "missing.json")], 1, "missing.json")
    expect_fail(tmp, [model, "OUT", "Q4_K_M"], 2, "replace PRESET", recipe={"name": "x", "default": d})
    expect_fail(tmp, [model, "OUT", "--tensor-type", "ffn=q8_0"], 2, "as recipe rules", recipe={"name": "x", "default": d})
    expect_fail(tmp, [model, "OUT", "--target-bpw", "5", "--target-size", "1M", "--measurements", "m.json"], 2,
                "not both")
    expect_fail(tmp, [model, "OUT", "--target-bpw", "5"], 2, "a budget needs --measurements")
    expect_fail(tmp, [model, "OUT", "--target-size", "4.2Q", "--measurements", "m.json"], 2, "--target-size needs")
    expect_fail(tmp, [model, "OUT", "--target-bpw", "5", "--measurements", "m.json", "--candidates", "q4_K:g32"], 2,
                "bad format 'q4_K:g32'")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        model = synthetic(tmp, MKMODEL, HFCONV)
        test_q4_k_m(model, tmp)
        test_granularity(model, tmp)
        test_dry_run_text(model)
        test_budget(model, tmp)
        test_errors(model, tmp)
    if not os.path.exists(TEXT):
        print("note: fixtures absent, the runner was not run on the recipes' outputs")
    sys.exit(finish())


main()
