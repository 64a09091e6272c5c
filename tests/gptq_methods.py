#!/usr/bin/env python3
"""GPTQ's sequential and act-order options on the fixtures' trained models
(docs/calibration.md, "GPTQ: sequential and act-order").

For each model: convert it to F32 GGUF (hfconv), quantize calibrated on
tinystories-train.txt with --gptq, --gptq --gptq-sequential, --gptq
--gptq-act-order and both, and score each against the F32 model on
tinystories-valid.txt (ppl-eval --base-logits: KLD, top-1, PPL). Asserted:
sequential leaves layer 0's tensors byte for byte (its Hessians are the
float model's) and changes some tensor of a later layer (their Hessians are
collected on the quantized earlier layers); act-order's bytes differ from
column order's; the options are recorded (hfq.quantize.gptq_sequential /
gptq_act_order); both together give the same bytes with --threads 1 and 2.
W4A4 (NVFP4 --act-scales) with --gptq-quantized-inputs: GPTQ's target takes
in the runner's rounding of the inputs (hfq.quantize.gptq_quantized_inputs,
a calibration pass after the statistics'); asserted: the key, the extra
pass, that some tensor's bytes differ from the float inputs' (the default),
act-order with it too, and the same bytes with --threads 1 and 2.
The default W4A4 file asks for searched activation scales (hfq.act_quant
"nvfp4_search" on each NVFP4 weight with an input scale), --no-act-search
for none with the same tensors; asserted: the marks, the same tensors, and
that the searched scales' KLD is the lower. Other KLDs are printed, not
asserted (docs/calibration.md says what paid).

usage: gptq_methods.py HFCONV QUANTIZE PPL_EVAL --model NAME [--model NAME]
         [--preset P ...] [--calib-chunks N] [--eval-chunks N] [--ctx N] [--markdown]
Exit status 0 ok, 1 failed, 77 fixtures absent.
"""
import filecmp
import json
import os
import re
import sys
import tempfile

from calib_acceptance import fixture_args
from gptq_e2e import calib_args, f32_model, gguf_keys, run, tensors

METHODS = [("gptq", []), ("sequential", ["--gptq-sequential"]), ("act-order", ["--gptq-act-order"]),
           ("sequential + act-order", ["--gptq-sequential", "--gptq-act-order"])]


def layer(name):
    m = re.match(r"blk\.(\d+)\.", name)
    return int(m.group(1)) if m else None


def w4a4_failures(a, base, calib, valid, base_logits, name, tmp):
    """NVFP4 W4A4: GPTQ against the quantized inputs (default) and float inputs."""
    failures = []
    q = ["--gptq-quantized-inputs"]
    variants = [("quantized inputs", q), ("float inputs", []),
                ("quantized inputs, act-order", q + ["--gptq", "--gptq-act-order"]),
                ("quantized inputs, 1 thread", q + ["--threads", "1"]),
                ("float inputs, max -> 6 acts", ["--no-act-search"])]
    paths, kld = {}, {}
    for i, (label, extra) in enumerate(variants):
        path = paths[label] = os.path.join(tmp, f"w4a4.{i}.gguf")
        _, err = run([a.quantize, base, path, "NVFP4", "--act-scales"] + calib + extra)
        key = gguf_keys(path).get("hfq.quantize.gptq_quantized_inputs")
        quantized = "--gptq-quantized-inputs" in extra
        if bool(key) != quantized:
            failures.append(f"{name} W4A4 {label}: hfq.quantize.gptq_quantized_inputs is {key}")
        if quantized and "calibration pass 2:" not in err:
            failures.append(f"{name} W4A4 {label}: the Hessians were not collected after the statistics' pass")
        if "--threads" not in extra:
            j = json.loads(run([a.ppl_eval, path, "--text", valid, "--base-logits", base_logits, "--kv-type", "f32",
                                "--json"])[0])
            kld[label] = j['kl']['kld']
            print(f"{name} NVFP4 W4A4 {label:28} KLD {j['kl']['kld']:.6f}  PPL {j['ppl']:.4f}  "
                  f"top-1 {j['kl']['same_top']:.4f}")
    failures += act_search_failures(name, paths["float inputs"], paths["float inputs, max -> 6 acts"], kld)
    q, f, ao = (tensors(paths[k]) for k in ("quantized inputs", "float inputs", "quantized inputs, act-order"))
    if not any(q[t] != f[t] for t in q if t.endswith(".weight")):
        failures.append(f"{name} W4A4: the quantized inputs change no weight's bytes")
    if not any(q[t] != ao[t] for t in q if t.endswith(".weight")):
        failures.append(f"{name} W4A4: act-order gives column order's bytes")
    if not filecmp.cmp(paths["quantized inputs"], paths["quantized inputs, 1 thread"], shallow=False):
        failures.append(f"{name} W4A4: bytes differ between --threads 1 and the default")
    return failures


def act_search_failures(name, searched, plain, kld):
    """--act-scales marks every NVFP4 weight that has an input scale
    hfq.act_quant "nvfp4_search"; --no-act-search marks none and writes the
    same tensors (float-input GPTQ does not see the activation rule); the
    searched activation scales score a lower KLD (docs/calibration.md)."""
    import gguf
    failures = []
    for path, want in ((searched, "nvfp4_search"), (plain, None)):
        r = gguf.GGUFReader(path)
        scaled = {t.name[:-len(".input_scale")] + ".weight" for t in r.tensors if t.name.endswith(".input_scale")}
        nvfp4 = {t.name for t in r.tensors if t.tensor_type == gguf.GGMLQuantizationType.NVFP4}
        marks = {f.name[len("hfq.act_quant."):]: f.contents() for f in r.fields.values()
                 if f.name.startswith("hfq.act_quant.")}
        expect = {w: want for w in scaled & nvfp4} if want else {}
        if not scaled & nvfp4 or marks != expect:
            failures.append(f"{name} W4A4 {os.path.basename(path)}: activation marks {marks}, expected {expect}")
    if tensors(searched) != tensors(plain):
        failures.append(f"{name} W4A4: --no-act-search changed the tensors")
    if not kld["float inputs"] < kld["float inputs, max -> 6 acts"]:
        failures.append(f"{name} W4A4: searched activation scales KLD {kld['float inputs']:.6f}, max -> 6 "
                        f"{kld['float inputs, max -> 6 acts']:.6f}")
    return failures


def model_failures(a, fixtures, train, valid, name, presets):
    """Quantizes and scores fixture model `name` by every method; what failed."""
    calib = calib_args(a, train)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        base = f32_model(a, fixtures, name, tmp)
        base_logits = os.path.join(tmp, "base.logits")
        run([a.ppl_eval, base, "--text", valid, "--ctx", str(a.ctx), "--chunks", str(a.eval_chunks),
             "--kv-type", "f32", "--save-logits", base_logits])
        if a.markdown:
            print(f"\n{name} (KLD on {a.eval_chunks} x {a.ctx} held-out tokens)\n\n"
                  "| preset | method | KLD | PPL | top-1 |\n|---|---|---:|---:|---:|")
        for preset in presets:
            paths = {}
            for i, (label, extra) in enumerate(METHODS):
                path = paths[label] = os.path.join(tmp, f"{preset}.{i}.gguf")
                _, err = run([a.quantize, base, path, preset, "--gptq"] + calib + extra)
                keys = gguf_keys(path)
                for opt, key in (("--gptq-sequential", "hfq.quantize.gptq_sequential"),
                                 ("--gptq-act-order", "hfq.quantize.gptq_act_order")):
                    if bool(keys.get(key)) != (opt in extra):
                        failures.append(f"{name} {preset} {label}: {key} is {keys.get(key)}")
                if "--gptq-sequential" in extra and "calibration pass 2:" not in err:
                    failures.append(f"{name} {preset} {label}: no second calibration pass (one a layer)")
                j = json.loads(run([a.ppl_eval, path, "--text", valid, "--base-logits", base_logits,
                                    "--kv-type", "f32", "--json"])[0])
                fmt = ("| {} | {} | {:.6f} | {:.4f} | {:.4f} |" if a.markdown
                       else "{} {:7} {:24} KLD {:.6f}  PPL {:.4f}  top-1 {:.4f}")
                print(fmt.format(*([] if a.markdown else [name]), preset, label, j["kl"]["kld"], j["ppl"],
                                 j["kl"]["same_top"]))
            col, seq, act = (tensors(paths[k]) for k in ("gptq", "sequential", "act-order"))
            first = [t for t in col if layer(t) == 0]
            later = [t for t in col if layer(t) is not None and layer(t) > 0]
            if not first or any(col[t] != seq[t] for t in first):
                failures.append(f"{name} {preset}: sequential changed layer 0's tensors")
            if not any(col[t] != seq[t] for t in later):
                failures.append(f"{name} {preset}: sequential changed no tensor of layers >= 1")
            if not any(col[t] != act[t] for t in first + later):
                failures.append(f"{name} {preset}: act-order gives column order's bytes")
        failures += w4a4_failures(a, base, calib, valid, base_logits, name, tmp)
        one, two = os.path.join(tmp, "t1.gguf"), os.path.join(tmp, "t2.gguf")
        for path, t in ((one, "1"), (two, "2")):
            run([a.quantize, base, path, presets[0], "--gptq", "--gptq-sequential", "--gptq-act-order",
                 "--threads", t, "--quiet"] + calib)
        if not filecmp.cmp(one, two, shallow=False):
            failures.append(f"{name}: sequential + act-order bytes differ between --threads 1 and 2")
    return failures


def main():
    presets = []
    while "--preset" in sys.argv:  # fixture_args parses the rest
        i = sys.argv.index("--preset")
        presets.append(sys.argv[i + 1])
        del sys.argv[i:i + 2]
    got = fixture_args()
    if not got:
        return 77
    failures = [f for name in got[0].model for f in model_failures(*got, name, presets or ["Q4_0"])]
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0

if __name__ == "__main__":
    sys.exit(main())
