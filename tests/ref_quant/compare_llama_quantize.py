#!/usr/bin/env python3
"""Compares our `quantize` with llama.cpp's `llama-quantize`.

For every model and preset: both tools quantize the same GGUF; the outputs
must hold the same tensors with the same types and shapes, byte-identical
data, and the same general.file_type / general.quantization_version. The
presets whose formats weigh their rounding by importance are compared a
second time with importance data: a synthetic statistics file in llama.cpp's
imatrix GGUF layout (random mean squares spread over orders of magnitude,
some zero, for every weight llama-imatrix would record), given to ours as
--stats and to llama-quantize as --imatrix.
Large shapes (written sparse) are compared by plan only: our --dry-run --json
against llama-quantize --dry-run. Exit status: 0 all equal, 1 differences,
77 when llama-quantize is missing.
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys

import enum

import gguf
import numpy as np
from gguf import constants, gguf_reader

# gguf-py 0.19 (PyPI) predates ggml's Q2_0 (type 42, ggml-common.h: 64 elements in 18
# bytes): its reader is taught that one type so that Q2_0 files can be compared
if not hasattr(constants.GGMLQuantizationType, "Q2_0"):
    _T = enum.IntEnum("GGMLQuantizationType", {**{m.name: m.value for m in constants.GGMLQuantizationType},
                                                "Q2_0": 42})
    for _m in _T:
        constants.GGML_QUANT_SIZES[_m] = (64, 18) if _m.name == "Q2_0" else \
            constants.GGML_QUANT_SIZES[constants.GGMLQuantizationType[_m.name]]
    gguf_reader.GGMLQuantizationType = _T

HERE = os.path.dirname(os.path.abspath(__file__))

# (name, mkgguf.py arguments, sparse): sparse models are compared by plan only
MODELS = {
    "q16": (["--layers", "16", "--embd", "2048", "--ff", "8192", "--heads", "32", "--kv-heads", "8",
             "--vocab", "32000"], True),
    "q16tied": (["--layers", "16", "--embd", "2048", "--ff", "8192", "--heads", "32", "--kv-heads", "8",
                 "--vocab", "32000", "--tied"], True),
    "l80": (["--layers", "80", "--embd", "256", "--ff", "512", "--heads", "8", "--kv-heads", "2",
             "--vocab", "1000"], True),
    "moe8": (["--layers", "8", "--embd", "256", "--ff", "512", "--heads", "8", "--kv-heads", "2",
              "--vocab", "1000", "--experts", "8", "--wtype", "bf16"], True),
    "small": (["--layers", "8", "--embd", "256", "--ff", "768", "--heads", "8", "--kv-heads", "2",
               "--vocab", "1000"], False),
    "small_bf16_tied": (["--layers", "3", "--embd", "512", "--ff", "1024", "--heads", "8",
                         "--kv-heads", "8", "--vocab", "700", "--tied", "--wtype", "bf16"], False),
    "moe_small": (["--layers", "3", "--embd", "256", "--ff", "512", "--heads", "8", "--kv-heads", "2",
                   "--vocab", "500", "--experts", "4", "--wtype", "bf16"], False),
    "s260": (["--layers", "5", "--embd", "64", "--ff", "172", "--heads", "8", "--kv-heads", "4",
              "--vocab", "512", "--tied", "--wtype", "f32"], False),
}

# real trained checkpoints from the fixtures (../shared/fixtures), when present
FIXTURE_MODELS = {
    "stories260K": ("models/stories260K", "f32"),
    "TinyStories-656K": ("models/TinyStories-656K", "f16"),
}

PRESETS = ["Q4_K_M", "Q4_K_S", "Q5_K_M", "Q5_K_S", "Q6_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q2_K",
           "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "IQ4_XS", "MXFP4_MOE", "F16", "BF16", "F32",
           "IQ3_S", "IQ3_M", "IQ3_XS", "IQ3_XXS", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ1_S", "IQ1_M",
           "TQ1_0", "TQ2_0", "Q2_K_S", "Q1_0", "Q2_0"]

# presets compared again with importance data (every format they use honours it); of the
# i-quant presets (whose very low-bit formats llama-quantize refuses without importance, as
# ours: the plain runs above then compare the refusals) the four that between them hold every
# importance-weighted i-quant: IQ3_XXS (iq3_xxs, iq3_s, iq2_s), IQ2_S (iq2_xs), IQ1_S (iq1_s,
# iq2_xxs), IQ1_M
IMATRIX_PRESETS = ["Q4_K_M", "Q4_K_S", "Q5_K_M", "Q5_K_S", "Q6_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q2_K",
                   "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "IQ4_XS", "IQ3_XXS", "IQ2_S", "IQ1_S", "IQ1_M",
                   "Q2_K_S"]

# tensor types whose quantizers take no importance
NO_IMPORTANCE = {"f32", "f16", "bf16", "q8_0", "mxfp4", "q1_0", "q2_0"}

# extra runs with options, for every model
OPTION_RUNS = [
    ("Q4_K_M", ["--pure"]),
    ("Q4_K_M", ["--leave-output-tensor"]),
    ("Q4_K_M", ["--output-tensor-type", "q8_0", "--token-embedding-type", "q4_0"]),
    ("Q4_K_M", ["--tensor-type", r"blk\.0\.attn_v=q8_0", "--tensor-type", "ffn_(up|gate)=q5_K"]),
    ("MXFP4_MOE", ["--pure"]),
]

LINE = re.compile(r"\[\s*\d+/\s*\d+\]\s+(\S+)\s+- \[.*\], type =\s+(\S+), size =.*?(?:\((\S+)\))?$")


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def ref_plan(llama, path, preset, opts):
    r = run([llama, "--dry-run"] + opts + [path, preset])
    if r.returncode != 0:
        return None, r.stdout + r.stderr
    plan = {}
    for line in (r.stdout + r.stderr).splitlines():
        m = LINE.match(line)
        if m:
            plan[m.group(1)] = m.group(3) or m.group(2)
    return plan, ""


def our_plan(ours, path, preset, opts):
    r = run([ours, path, preset, "--dry-run", "--json"] + opts)
    if r.returncode != 0:
        return None, r.stderr
    return {t["name"]: t["to"] for t in json.loads(r.stdout)["tensors"]}, ""


def diff_maps(a, b):
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def tensors_of(path):
    r = gguf.GGUFReader(path)
    out = {}
    for t in r.tensors:
        out[t.name] = (t.tensor_type.name.lower(), [int(x) for x in t.shape],
                       np.asarray(t.data).tobytes())
    kv = {k: r.fields[k].contents() for k in ("general.file_type", "general.quantization_version")
          if k in r.fields}
    return out, kv


def compare_files(ref_path, our_path):
    ref, ref_kv = tensors_of(ref_path)
    our, our_kv = tensors_of(our_path)
    problems = []
    if ref_kv != our_kv:
        problems.append(f"metadata {our_kv} != {ref_kv}")
    for name in sorted(set(ref) | set(our)):
        if name not in ref or name not in our:
            problems.append(f"{name}: only in {'ours' if name in our else 'llama-quantize'}")
            continue
        (rt, rs, rd), (ot, os_, od) = ref[name], our[name]
        if (rt, rs) != (ot, os_):
            problems.append(f"{name}: {ot} {os_} vs llama-quantize {rt} {rs}")
        elif rd != od:
            nd = sum(x != y for x, y in zip(rd, od))
            problems.append(f"{name} ({ot}): {nd} of {len(rd)} bytes differ")
    return problems, len(ref)


def write_imatrix(model_path, out_path, seed):
    """Statistics for every weight a matmul reads (token_embd is looked up, not
    multiplied): in_sum2 [ne0, n_mats] = mean x^2 * count, counts [1, n_mats]."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(out_path, arch="imatrix")
    w.add_type("imatrix")
    w.add_array("imatrix.datasets", ["synthetic"])
    w.add_uint32("imatrix.chunk_count", 4)
    w.add_uint32("imatrix.chunk_size", 128)
    for t in gguf.GGUFReader(model_path).tensors:
        if not t.name.endswith(".weight") or len(t.shape) < 2 or t.name == "token_embd.weight":
            continue
        ne0, n_mats = int(t.shape[0]), int(t.shape[2]) if len(t.shape) > 2 else 1
        counts = rng.integers(1, 600, size=(n_mats, 1)).astype(np.float32)
        mean_sq = np.exp(2 * rng.standard_normal((n_mats, ne0))) * (rng.random((n_mats, ne0)) >= 0.02)
        base = t.name[:-len(".weight")] + ".weight"
        w.add_tensor(base + ".in_sum2", (mean_sq * counts).astype(np.float32))
        w.add_tensor(base + ".counts", counts)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quantize", required=True, help="our quantize binary")
    ap.add_argument("--llama-quantize", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--imatrix-presets", default=",".join(IMATRIX_PRESETS),
                    help="presets compared again with importance data ('' for none)")
    ap.add_argument("--no-options", action="store_true", help="skip the extra option sets")
    ap.add_argument("--gguf", action="append", default=[], help="also compare this (non-sparse) GGUF")
    ap.add_argument("--fixtures", default=os.environ.get("HFQ_FIXTURES", os.path.join(HERE, "../../../shared/fixtures")),
                    help="fixtures folder with models/stories260K and models/TinyStories-656K")
    ap.add_argument("--threads", default="2")
    a = ap.parse_args()

    if not os.access(a.llama_quantize, os.X_OK):
        print(f"SKIP: {a.llama_quantize} not built (see tests/ref_quant/compare_llama_quantize.sh)")
        return 77
    os.makedirs(a.workdir, exist_ok=True)
    inputs = []
    for name in a.models.split(","):
        args, sparse = MODELS[name]
        # the file name carries the generator's arguments, so a stale file is never reused
        key = hashlib.sha1(" ".join(args + [str(sparse)]).encode()).hexdigest()[:10]
        path = os.path.join(a.workdir, f"{name}-{key}.gguf")
        if not os.path.exists(path):
            cmd = [sys.executable, os.path.join(HERE, "mkgguf.py"), path] + args + (["--sparse"] if sparse else [])
            subprocess.run(cmd, check=True)
        inputs.append((name, path, sparse))
    for name, (sub, wtype) in FIXTURE_MODELS.items():
        src = os.path.join(a.fixtures, sub)
        if not os.path.isdir(src):
            print(f"note: {src} absent, {name} not compared")
            continue
        path = os.path.join(a.workdir, f"{name}-{wtype}.gguf")
        if not os.path.exists(path):
            subprocess.run([sys.executable, os.path.join(HERE, "mkgguf.py"), path, "--from-hf", src,
                            "--wtype", wtype], check=True)
        inputs.append((name, path, False))
    inputs += [(os.path.basename(p), p, False) for p in a.gguf]

    presets = a.presets.split(",")
    runs = [(p, []) for p in presets] + ([] if a.no_options else OPTION_RUNS)
    imatrix_runs = [(p, ["--imatrix"]) for p in a.imatrix_presets.split(",") if p]
    n_bad = n_done = n_skip = 0
    plain_digest = {}  # (model, preset) -> digest of our plain output
    for name, path, sparse in inputs:
        stats = os.path.join(a.workdir, f"{name}.imatrix")
        if imatrix_runs and not sparse:
            write_imatrix(path, stats, seed=len(name))
        for preset, opts in runs + ([] if sparse else imatrix_runs):
            label = f"{name} {preset} {' '.join(opts)}".strip()
            # --imatrix alone marks an importance run: the file goes to ours as --stats
            ours_opts = ["--stats", stats] if opts == ["--imatrix"] else opts
            opts = ["--imatrix", stats] if opts == ["--imatrix"] else opts
            if sparse:
                ref, msg = ref_plan(a.llama_quantize, path, preset, opts)
                our, msg2 = our_plan(a.quantize, path, preset, opts)
                if ref is None or our is None:
                    problems, n = [f"failed: {msg}{msg2}".strip()], 0
                else:
                    problems, n = [f"{k}: ours {o}, llama-quantize {r}" for k, o, r in diff_maps(our, ref)], len(ref)
            else:
                ref_out = os.path.join(a.workdir, "ref.gguf")
                our_out = os.path.join(a.workdir, "ours.gguf")
                r2 = run([a.quantize, path, our_out, preset, "--threads", a.threads] + ours_opts)
                if "is not available in this build" in r2.stderr:
                    n_skip += 1
                    print(f"skip {label}: {r2.stderr.strip().split(': ')[-1]}")
                    continue
                r1 = run([a.llama_quantize] + opts + [path, ref_out, preset, a.threads])
                if (r1.returncode != 0 and r2.returncode != 0 and "requires an imatrix" in r1.stdout + r1.stderr
                        and "needs importance data" in r2.stderr):
                    problems, n = [], 0  # both refuse the very low-bit formats without importance
                elif (r1.returncode != 0 and r2.returncode != 0 and "no tensor type fallback" in r1.stdout + r1.stderr
                        and "has no fallback type" in r2.stderr):
                    problems, n = [], 0  # both refuse Q1_0 on rows that are not a multiple of 128
                elif r1.returncode != 0 or r2.returncode != 0:
                    problems, n = [f"failed: {r1.stderr[-300:]}{r2.stderr}"], 0
                else:
                    problems, n = compare_files(ref_out, our_out)
                    # an importance run must be one: llama-quantize loaded the entries and the bytes moved
                    digest = hashlib.sha1(b"".join(d for _, _, d in tensors_of(our_out)[0].values())).hexdigest()
                    if not opts:
                        plain_digest[(name, preset)] = digest
                    elif opts[0] == "--imatrix":
                        if not re.search(r"loaded [1-9]\d* importance matrix entries", r1.stdout + r1.stderr):
                            problems.append("llama-quantize loaded no importance entries")
                        # (unless the fallbacks left only formats without importance-weighted rounding)
                        weighted = any(t not in NO_IMPORTANCE for t, _, _ in tensors_of(our_out)[0].values())
                        if weighted and plain_digest.get((name, preset)) == digest:
                            problems.append("importance changed nothing")
            n_done += 1
            what = "plan" if sparse else "types+bytes"
            if problems:
                n_bad += 1
                print(f"DIFF {label} ({what}, {n} tensors):")
                for p in problems[:8]:
                    print("    " + p)
            else:
                print(f"ok   {label} ({what}, {n} tensors)")
    print(f"{n_done - n_bad} of {n_done} comparisons equal, {n_skip} skipped (formats not in this build)")
    return 1 if n_bad else 0


if __name__ == "__main__":
    sys.exit(main())
