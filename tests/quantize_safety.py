#!/usr/bin/env python3
"""`quantize`: nothing lost, nothing silent (docs/quantize-tool.md, docs/calibration.md).

- Outputs (OUT.gguf, --save-stats, --save-measurements) that are, or link to
  (symbolic or hard link), an input (IN.gguf, --stats, --calibration-file,
  --recipe, --measurements) or another output, that are a folder, or that lie
  in a missing folder are refused before any work: exit 2, one line naming
  the path, every file byte-identical afterwards, nothing new (no *.tmp.*).
- Importance is on with any calibration; naming --awq keeps it;
  --no-importance turns it off; with no use named, the preset's default
  (importance, plus SmoothQuant with a searched alpha for NVFP4 and AWQ for INT8 when
  the statistics hold samples).
- The output records what calibration changed: FP8 with one scale per tensor
  with statistics writes the tensors it writes without them, records no
  importance and says so in one stderr line; hfq.quantize.importance_tensors names the tensors rounded
  with importance; hfq.calib.requested / hfq.calib.applied.
- A dry run refuses what the real run refuses (requantizing without
  --allow-requantize), and the real run refuses it before calibrating.
- --calib-ctx past {arch}.context_length: one warning line.
- Usage errors: exactly one stderr line; unknown options name the nearest
  one; --version.
- Progress off a terminal (a line at the end of each phase), --quiet.
- Errors name the file they are about (--calib-chat: the model, not the text).

usage: quantize_safety.py QUANTIZE HFCONV MKMODEL
"""
import hashlib
import json
import os
import re
import sys
import tempfile

from gguf import GGUFReader

from gguf_common import check, finish
from mixed_common import FIXTURES, run

QUANTIZE, HFCONV, MKMODEL = sys.argv[1:4]
WORDS = ("once upon a time there was a little cat who liked to play in the sun with her friend the dog "
         "they ran to the park and found a big red ball one day the bird sang a happy song").split()


def ok(*args):
    r = run(*args)
    check(r.returncode == 0, f"{' '.join(map(str, args))}: exit {r.returncode}: {r.stderr}")
    return r


def snapshot(d):
    """Every file under d (links by their target), with its bytes' hash."""
    out = {}
    for root, dirs, files in os.walk(d):
        for n in files + [x for x in dirs if os.path.islink(os.path.join(root, x))]:
            p = os.path.join(root, n)
            key = os.path.relpath(p, d)
            if os.path.islink(p):
                out[key] = "-> " + os.readlink(p)
            else:
                with open(p, "rb") as f:
                    out[key] = hashlib.sha256(f.read()).hexdigest()
    return out


def fields(path):
    return {k: f.contents() for k, f in GGUFReader(path).fields.items() if k.startswith(("hfq.", "general."))}


def tensor_bytes(path):
    return {t.name: (int(t.tensor_type), t.data.tobytes()) for t in GGUFReader(path).tensors}


def setup(tmp):
    src = os.path.join(tmp, "src")
    ok(MKMODEL, src, "--hidden", 64, "--ffn", 128, "--layers", 2, "--heads", 4, "--kv-heads", 2)
    model = os.path.join(tmp, "in.gguf")
    ok(HFCONV, src, "-o", model, "--outtype", "f32", "-q")
    text = os.path.join(tmp, "text.txt")
    seed, words = 7, []
    for _ in range(6000):
        seed = (seed * 1103515245 + 12345) % (1 << 31)
        words.append(WORDS[seed % len(WORDS)])
    with open(text, "w") as f:
        f.write(" ".join(words) + "\n")
    stats = os.path.join(tmp, "stats.gguf")
    ok(QUANTIZE, model, "--calibration-file", text, "--calib-ctx", 64, "--calib-chunks", 4, "--save-stats", stats)
    return model, text, stats


# ---------------------------------------------------------------- 1. outputs


def test_outputs(tmp, model, text, stats):
    d = os.path.join(tmp, "paths")
    os.makedirs(os.path.join(d, "outdir"))
    names = {}
    for n, src in (("in.gguf", model), ("text.txt", text), ("stats.gguf", stats)):
        names[n] = os.path.join(d, n)
        with open(src, "rb") as f, open(names[n], "wb") as g:
            g.write(f.read())
    m, t, s = names["in.gguf"], names["text.txt"], names["stats.gguf"]
    recipe = os.path.join(d, "recipe.json")
    with open(recipe, "w") as f:
        json.dump({"name": "r", "default": {"format": "q8_0"}}, f)
    meas = os.path.join(d, "meas.json")
    ok(QUANTIZE, m, "--stats", s, "--candidates", "q8_0,f16", "--save-measurements", meas, "--quiet")
    os.symlink("in.gguf", os.path.join(d, "link.gguf"))
    os.link(m, os.path.join(d, "hard.gguf"))
    o = os.path.join(d, "o.gguf")
    cal = ["--calibration-file", t, "--calib-ctx", 64, "--calib-chunks", 2]
    cases = [
        ("--save-stats is IN.gguf (calibrating only)", [m, *cal, "--save-stats", m], m, "refusing to overwrite"),
        ("--save-stats is OUT.gguf", [m, o, "Q4_K_M", *cal, "--save-stats", o], o, "name the same file"),
        ("OUT.gguf is IN.gguf", [m, m, "Q8_0"], m, "refusing to overwrite"),
        ("OUT.gguf is IN.gguf (dry run)", [m, m, "Q8_0", "--dry-run"], m, "refusing to overwrite"),
        ("OUT.gguf links to IN.gguf", [m, os.path.join(d, "link.gguf"), "Q8_0"], "link.gguf", "is IN.gguf"),
        ("OUT.gguf is a hard link of IN.gguf", [m, os.path.join(d, "hard.gguf"), "Q8_0"], "hard.gguf", "is IN.gguf"),
        ("OUT.gguf is --stats", [m, s, "Q8_0", "--stats", s], s, "is --stats"),
        ("OUT.gguf is --calibration-file", [m, t, "Q8_0", *cal], t, "is --calibration-file"),
        ("OUT.gguf is --recipe", [m, recipe, "--recipe", recipe], recipe, "is --recipe"),
        ("OUT.gguf is --measurements", [m, meas, "--measurements", meas, "--target-bpw", 9], meas,
         "is --measurements"),
        ("--save-measurements is --stats", [m, "--stats", s, "--save-measurements", s], s, "is --stats"),
        ("--save-stats is --save-measurements", [m, *cal, "--save-stats", o, "--save-measurements", o], o,
         "name the same file"),
        ("OUT.gguf is a folder", [m, os.path.join(d, "outdir"), "Q8_0"], "outdir", "is a folder"),
        ("--save-measurements in a missing folder", [m, *cal, "--save-measurements", os.path.join(d, "nodir", "m.json")],
         "nodir", "does not exist"),
        ("OUT.gguf in a missing folder", [m, os.path.join(d, "nodir", "o.gguf"), "Q8_0"], "nodir", "does not exist"),
    ]
    for what, args, names_path, says in cases:
        before = snapshot(d)
        r = run(QUANTIZE, *args)
        after = snapshot(d)
        lines = r.stderr.splitlines()
        check(r.returncode == 2, f"{what}: exit {r.returncode}, want 2: {r.stderr!r}")
        check(len(lines) == 1 and os.path.basename(names_path) in lines[0] and says in lines[0],
              f"{what}: want one line naming {os.path.basename(names_path)} with {says!r}: {r.stderr!r}")
        check(before == after, f"{what}: files changed: {sorted(set(before.items()) ^ set(after.items()))[:4]}")
        print(f"{what}: {lines[0] if lines else ''}")


# ---------------------------------------------------------------- 2. and 3. calibration's uses and records


def test_uses(tmp, model, text, stats):
    out = os.path.join(tmp, "u.gguf")
    # --awq named alone keeps importance (it used to turn it off)
    ok(QUANTIZE, model, out, "Q4_0", "--stats", stats, "--awq", "--quiet")
    k = fields(out)
    check(k.get("hfq.calib.requested") == ["importance", "awq"] and "importance" in k.get("hfq.calib.applied", [])
          and k.get("hfq.quantize.importance") is True, f"--awq alone keeps importance: {k.get('hfq.calib.applied')}")
    awq_imp = tensor_bytes(out)
    ok(QUANTIZE, model, out, "Q4_0", "--stats", stats, "--awq", "--no-importance", "--quiet")
    k = fields(out)
    check(k.get("hfq.calib.requested") == ["awq"] and "hfq.quantize.importance" not in k,
          f"--no-importance: {k.get('hfq.calib.requested')}")
    check(tensor_bytes(out) != awq_imp, "--no-importance changed no byte")
    # the presets' defaults with no use named (docs/calibration.md, "Defaults")
    for preset, want in (("Q4_K_M", ["importance"]), ("NVFP4", ["importance", "smoothquant"]),
                        ("INT8", ["importance", "awq"])):
        ok(QUANTIZE, model, out, preset, "--stats", stats, "--quiet")
        got = fields(out).get("hfq.calib.requested")
        check(got == want, f"{preset} default uses: {got}, want {want}")
        if preset == "NVFP4":   # the alpha is searched per group, not the fixed 0.5
            alpha = fields(out).get("hfq.calib.smoothquant_alpha")
            check(alpha == "auto", f"NVFP4 default SmoothQuant alpha: {alpha!r}, want 'auto'")
    # calibrating at once and from the saved statistics: the same default, the same bytes
    a = os.path.join(tmp, "at_once.gguf")
    ok(QUANTIZE, model, a, "INT8", "--calibration-file", text, "--calib-ctx", 64, "--calib-chunks", 4, "--quiet")
    check(tensor_bytes(a) == tensor_bytes(out), "INT8 default: calibrated at once differs from --stats")
    # statistics without samples cannot serve AWQ: the default says it leaves it out
    nos = os.path.join(tmp, "nosample.gguf")
    ok(QUANTIZE, model, "--calibration-file", text, "--calib-ctx", 64, "--calib-chunks", 4, "--calib-samples", 0,
       "--save-stats", nos)
    for preset, fold in (("INT8", "AWQ"), ("NVFP4", "SmoothQuant")):  # NVFP4's alpha is searched on the samples
        r = ok(QUANTIZE, model, out, preset, "--stats", nos, "--quiet")
        check(fields(out).get("hfq.calib.requested") == ["importance"] and
              f"{fold}, {preset}'s default, is left out" in r.stderr and "or samples" in r.stderr,
              f"{preset} no samples: {r.stderr!r}")
    for what, args, says in (("--importance with --no-importance", ["--importance", "--no-importance"], "contradict"),
                             ("--no-importance alone", ["--no-importance"], "leaves no use")):
        r = run(QUANTIZE, model, out, "Q4_K_M", "--stats", stats, *args)
        check(r.returncode == 2 and r.stderr.count("\n") == 1 and says in r.stderr, f"{what}: {r.stderr!r}")


def test_records(tmp, model, text, stats):
    covered = {k[:-len(".in_sum2")] for k in (t.name for t in GGUFReader(stats).tensors) if k.endswith(".in_sum2")}
    # FP8 with one scale per tensor takes no importance (its searched scale measured no gain)
    recipe = os.path.join(tmp, "fp8t.json")
    with open(recipe, "w") as f:
        json.dump({"name": "fp8t", "default": {"format": "fp8_e4m3", "granularity": "tensor"}}, f)
    plain, cal = os.path.join(tmp, "fp8t.gguf"), os.path.join(tmp, "fp8t_cal.gguf")
    ok(QUANTIZE, model, plain, "--recipe", recipe, "--quiet")
    r = ok(QUANTIZE, model, cal, "--recipe", recipe, "--stats", stats, "--quiet")
    check(tensor_bytes(plain) == tensor_bytes(cal), "FP8 per tensor with statistics wrote other tensor bytes")
    k = fields(cal)
    check("hfq.quantize.importance" not in k and "hfq.quantize.importance_tensors" not in k and
          k.get("hfq.calib.applied") == [] and k.get("hfq.calib.requested") == ["importance"],
          f"FP8 per tensor records importance it did not use: {k}")
    n_fp8 = sum(1 for t in GGUFReader(cal).tensors if t.name in covered and int(t.tensor_type) == 24)
    want = (f"quantize: calibration: importance does not change fp8_e4m3:tensor ({n_fp8} tensors): "
            "its one scale per tensor stays amax/max (a searched scale measured no gain)")
    check(r.stderr.splitlines() == [want], f"FP8 per tensor note: {r.stderr!r}, want {want!r}")
    # Q4_0: the 64-wide weights take importance, the output layer falls back to q8_0, which
    # keeps llama-quantize --imatrix's bytes outside the Q8_0 preset
    out = os.path.join(tmp, "q4.gguf")
    r = ok(QUANTIZE, model, out, "Q4_0", "--stats", stats, "--quiet")
    k = fields(out)
    types = {t.name: int(t.tensor_type) for t in GGUFReader(out).tensors}
    want_names = sorted(n for n in covered if types.get(n) in (2, 6, 7))  # q4_0, q5_0, q5_1
    check(k.get("hfq.quantize.importance") is True and sorted(k.get("hfq.quantize.importance_tensors", [])) == want_names,
          f"importance_tensors {k.get('hfq.quantize.importance_tensors')}, want {want_names}")
    q8_note = ("importance does not change q8_0 (1 tensor): llama.cpp's Q8_0 has no importance-weighted "
               "rounding (ours serves the Q8_0 preset only)")
    check(q8_note in r.stderr, f"Q4_0 note: {r.stderr!r}")
    r = ok(QUANTIZE, model, "Q4_0", "--stats", stats, "--dry-run", "--quiet")
    check(q8_note in r.stderr, f"the dry run says it too: {r.stderr!r}")
    # the Q8_0 preset takes it (its block-scale search: tests/calib_scales.py)
    q8 = os.path.join(tmp, "q8_cal.gguf")
    r = ok(QUANTIZE, model, q8, "Q8_0", "--stats", stats, "--quiet")
    n_q8 = sum(1 for t in GGUFReader(q8).tensors if t.name in covered and int(t.tensor_type) == 8)
    # (the one note: GPTQ, the Q8_0 preset's default with a text, needs Hessians a file lacks)
    gptq_note = ("quantize: calibration: GPTQ, Q8_0's default, is left out: statistics files hold no Hessians "
                 "(calibrate with --calibration-file)\n")
    check(n_q8 > 0 and len(fields(q8).get("hfq.quantize.importance_tensors", [])) == n_q8 and r.stderr == gptq_note,
          f"Q8_0 preset: {n_q8} q8_0 tensors, importance on {fields(q8).get('hfq.quantize.importance_tensors')}, "
          f"stderr {r.stderr!r}")
    r = ok(QUANTIZE, model, out, "Q4_0", "--stats", stats, "--act-scales", "--quiet")
    check("--act-scales changes no tensor" in r.stderr and fields(out).get("hfq.calib.applied") == ["importance"],
          f"--act-scales on Q4_0: {r.stderr!r}")


# ---------------------------------------------------------------- 5. dry run = real run's checks


def test_dry_run_checks(tmp, model, text, stats):
    q8 = os.path.join(tmp, "q8in.gguf")
    ok(QUANTIZE, model, q8, "Q8_0", "--quiet")
    recipe = os.path.join(tmp, "q4.json")
    with open(recipe, "w") as f:
        json.dump({"name": "q4", "default": {"format": "q4_0"}}, f)
    for what, args in (("preset", [q8, "Q4_0", "--dry-run"]), ("recipe", [q8, "--recipe", recipe, "--dry-run"]),
                       ("real run, before calibrating",
                        [q8, os.path.join(tmp, "x.gguf"), "Q4_0", "--calibration-file", text, "--calib-ctx", 64])):
        r = run(QUANTIZE, *args)
        check(r.returncode == 1 and r.stderr.count("\n") == 1 and "--allow-requantize" in r.stderr,
              f"{what}: requantizing without --allow-requantize: exit {r.returncode} {r.stderr!r}")
    check(not os.path.exists(os.path.join(tmp, "x.gguf")), "refused run left its output")
    ok(QUANTIZE, q8, "Q4_0", "--dry-run", "--allow-requantize")
    # what the uses read is checked in the dry run too: AWQ needs the samples
    # (statistics without them: written by test_uses)
    nos = os.path.join(tmp, "nosample.gguf")
    r = run(QUANTIZE, model, "Q4_0", "--dry-run", "--stats", nos, "--awq")
    check(r.returncode == 1 and r.stderr.count("\n") == 1 and "no activation sample" in r.stderr,
          f"dry run of --awq without samples: exit {r.returncode} {r.stderr!r}")


# ---------------------------------------------------------------- 6. trained context


def test_context(tmp, model, text, stats):
    r = ok(QUANTIZE, model, "--calibration-file", text, "--calib-ctx", 300, "--calib-chunks", 1,
           "--save-stats", os.path.join(tmp, "c.gguf"), "--quiet")
    check("quantize: warning: --calib-ctx 300 is past the model's trained context (256)\n" in r.stderr,
          f"past the trained context: {r.stderr!r}")
    r = ok(QUANTIZE, model, "--calibration-file", text, "--calib-ctx", 256, "--calib-chunks", 1,
           "--save-stats", os.path.join(tmp, "c.gguf"), "--quiet")
    check("warning" not in r.stderr, f"within the trained context: {r.stderr!r}")
    s260 = os.path.join(FIXTURES, "models", "stories260K")
    train = os.path.join(FIXTURES, "text", "tinystories-train.txt")
    if not os.path.isdir(s260) or not os.path.exists(train):
        print("note: fixtures absent, stories260K's context not checked")
        return
    g = os.path.join(tmp, "s260.gguf")
    ok(HFCONV, s260, "-o", g, "-q")
    r = ok(QUANTIZE, g, "--calibration-file", train, "--calib-ctx", 1024, "--calib-chunks", 1,
           "--save-stats", os.path.join(tmp, "c.gguf"), "--quiet")
    check(r.stderr == "quantize: warning: --calib-ctx 1024 is past the model's trained context (512)\n",
          f"stories260K: {r.stderr!r}")


# ---------------------------------------------------------------- 7. command line


def test_command_line(tmp, model, text, stats):
    out = os.path.join(tmp, "cl.gguf")
    r = run(QUANTIZE, model, out, "Q8_0", "--stast", stats)
    check(r.returncode == 2 and r.stderr == "quantize: unknown option '--stast' (did you mean '--stats'?) "
          "(see quantize --help)\n", f"unknown option: {r.stderr!r}")
    r = run(QUANTIZE, model, out, "Q8_0", "--no-importanse", "--stats", stats)
    check(r.returncode == 2 and "did you mean '--no-importance'?" in r.stderr, f"nearest: {r.stderr!r}")
    for args in ([model], [model, out, "Q9_9"], [model, out, "Q8_0", "--threads", "x"], [model, out, "Q8_0", "--awq"],
                 [model, out, "Q8_0", "--stats", stats, "--calib-ctx", 64], [model, "--target-bpw", 5],
                 [model, out, "Q8_0", "--stats", stats, "--smoothquant", "--awq"], [model, out, "Q8_0", "--stats"]):
        r = run(QUANTIZE, *args)
        check(r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.endswith("(see quantize --help)\n"),
              f"{args[1:]}: one line: {r.stderr!r}")
    r = run(QUANTIZE, "--version")
    check(r.returncode == 0 and r.stdout.startswith("quantize (hfq) ") and r.stderr == "", f"--version: {r.stdout!r}")
    check(not os.path.exists(out), "a usage error wrote the output")


# ---------------------------------------------------------------- 8. progress


def test_progress(tmp, model, text, stats):
    out = os.path.join(tmp, "p.gguf")
    r = ok(QUANTIZE, model, out, "Q8_0", "--calibration-file", text, "--calib-ctx", 64, "--calib-chunks", 3)
    lines = r.stderr.splitlines()
    check("[3/3] calibrating" in lines and any(re.fullmatch(r"\[(\d+)/\1\] \S+ -> \w+", l) for l in lines),
          f"progress off a terminal: {lines}")
    r = ok(QUANTIZE, model, "--calibration-file", text, "--calib-ctx", 64, "--calib-chunks", 3,
           "--candidates", "q8_0,f16", "--save-measurements", os.path.join(tmp, "m.json"))
    check(any("measuring" in l for l in r.stderr.splitlines()), f"measuring progress: {r.stderr!r}")
    # NVFP4 rounds every covered tensor with importance: no note either
    r = ok(QUANTIZE, model, out, "NVFP4", "--calibration-file", text, "--calib-ctx", 64, "--calib-chunks", 3, "--quiet")
    check(r.stderr == "", f"--quiet: {r.stderr!r}")


# ---------------------------------------------------------------- 9. errors name their file


def test_error_files(tmp, model, text, stats):
    lines = os.path.join(tmp, "lines.txt")
    with open(lines, "w") as f:
        f.write("Once upon a time.\nA cat sat.\n")
    r = run(QUANTIZE, model, "--calibration-file", lines, "--calib-lines", "--calib-chat",
            "--save-stats", os.path.join(tmp, "e.gguf"))
    check(r.returncode == 1 and r.stderr.startswith(f"quantize: {model}: --calib-chat"),
          f"a missing template names the model: {r.stderr!r}")
    for what, args, name in (("--stats", ["Q8_0", "--stats", os.path.join(tmp, "none.gguf")], "none.gguf"),
                             ("--recipe", ["--recipe", os.path.join(tmp, "none.json")], "none.json"),
                             ("--calibration-file", ["Q8_0", "--calibration-file", os.path.join(tmp, "none.txt"),
                                                     "--calib-ctx", 64], "none.txt")):
        r = run(QUANTIZE, model, os.path.join(tmp, "e.gguf"), *args)
        check(r.returncode == 1 and r.stderr.count("\n") == 1 and name in r.stderr, f"{what}: {r.stderr!r}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        inputs = setup(tmp)
        for test in (test_outputs, test_uses, test_records, test_dry_run_checks, test_context, test_command_line,
                     test_progress, test_error_files):
            test(tmp, *inputs)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
