#!/usr/bin/env python3
"""quantize's calibration end to end (docs/calibration.md):

- statistics files interchange with llama.cpp in both directions: our
  statistics given to llama-quantize --imatrix and llama-imatrix's given to
  ours give byte-identical tensors (a synthetic model whose rows are multiples
  of 256, so the K-quants are used, and stories260K, whose K-quants fall
  back to Q5_0/Q8_0); our sums of squares equal llama-imatrix's on the same
  text, context and chunks (to float accumulation);
- statistics written then read give identical quantized bytes, for every use;
- SmoothQuant and AWQ leave an unquantized model's logits unchanged;
- static activation scales are the calibrated maxima over the format's
  largest code; hfq.calib.* metadata;
- --calib-lines and --calib-chat sequences (token counts against the
  tokenize tool on the same lines / rendered turns);
- bad input (short, empty or invalid-UTF-8 text, statistics of another model,
  llama-imatrix statistics for uses that need ours, not a statistics file)
  fails with one line and writes nothing; bad usage exits 2.

usage: calib_cli.py QUANTIZE HFCONV MKMODEL TOKENIZE RUNNER_LOGITS LLAMA_BIN_DIR [llama|uses|input]
(the last argument runs one part: the llama.cpp interchange, the uses, or
the input handling; all by default)
"""
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGUFReader

from gguf_common import check, finish

QUANTIZE, HFCONV, MKMODEL, TOKENIZE, RUNNER_LOGITS, LLAMA_BIN = sys.argv[1:7]
PARTS = sys.argv[7:] or ["llama", "uses", "input"]
FIXTURES = os.environ.get("HFQ_FIXTURES", "")
TRAIN = os.path.join(FIXTURES, "text", "tinystories-train.txt")


def run(*args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True)


def ok(*args):
    r = run(*args)
    check(r.returncode == 0, f"{' '.join(map(str, args))}: {r.stdout}{r.stderr}")
    return r


def tensors(path):
    return {t.name: (int(t.tensor_type), t.data.tobytes()) for t in GGUFReader(path).tensors}


def arrays(path):
    return {t.name: np.array(t.data) for t in GGUFReader(path).tensors}


def keys(path):
    out = {}
    for k, f in GGUFReader(path).fields.items():
        if not k.startswith("GGUF."):
            out[k] = f.contents()
    return out


def same_tensors(a, b, what):
    ta, tb = tensors(a), tensors(b)
    diff = sorted(k for k in set(ta) | set(tb) if ta.get(k) != tb.get(k))
    check(not diff, f"{what}: tensors differ: {diff[:6]}")


def llama(tool):
    path = os.path.join(LLAMA_BIN, tool)
    return path if os.access(path, os.X_OK) else None


def models(tmp):
    syn_dir = os.path.join(tmp, "syn")
    ok(MKMODEL, syn_dir, "--hidden", 256, "--ffn", 512, "--layers", 2, "--heads", 4, "--kv-heads", 2,
       "--vocab", 512, "--outliers", 4)
    syn = os.path.join(tmp, "syn.gguf")
    ok(HFCONV, syn_dir, "-o", syn, "--outtype", "f32", "-q")
    s260 = os.path.join(tmp, "s260.gguf")
    ok(HFCONV, os.path.join(FIXTURES, "models", "stories260K"), "-o", s260, "--outtype", "f32", "-q")
    return syn_dir, syn, s260


def test_llama_interchange(tmp, syn, s260):
    lq, li = llama("llama-quantize"), llama("llama-imatrix")
    if not lq or not li:
        print(f"SKIP part: llama-quantize / llama-imatrix not built in {LLAMA_BIN}")
        return
    for name, model, ctx, presets in [("syn", syn, 128, ["Q4_K_M", "Q5_K_S", "Q4_0", "Q5_1"]),
                                      ("s260", s260, 256, ["Q4_K_M"])]:
        ours = os.path.join(tmp, f"{name}.ours.imatrix")
        theirs = os.path.join(tmp, f"{name}.llama.imatrix")
        ok(QUANTIZE, model, "--calibration-file", TRAIN, "--save-stats", ours, "--calib-ctx", ctx, "--calib-chunks", 8)
        r = run(li, "-m", model, "-f", TRAIN, "-o", theirs, "-c", ctx, "--chunks", 8, "-t", 2)
        check(r.returncode == 0, f"llama-imatrix: {r.stderr[-500:]}")
        a, b = arrays(ours), arrays(theirs)
        common = [k for k in b if k.endswith(".in_sum2")]
        check(len(common) > 0 and all(k in a for k in common), f"{name}: llama-imatrix entries missing from ours")
        worst = max(float(np.max(np.abs(a[k] - b[k]) / (np.abs(b[k]) + 1e-6))) for k in common if k in a)
        counts_equal = all(np.array_equal(a[k.replace("in_sum2", "counts")], b[k.replace("in_sum2", "counts")])
                           for k in common if k in a)
        print(f"{name}: sums of squares vs llama-imatrix: worst relative difference {worst:.2e}")
        check(worst < 2e-3 and counts_equal, f"{name}: our statistics differ from llama-imatrix's ({worst:.2e})")
        for preset in presets:
            for stats in (ours, theirs):
                mine, ref = os.path.join(tmp, "mine.gguf"), os.path.join(tmp, "ref.gguf")
                ok(QUANTIZE, model, mine, preset, "--stats", stats)
                r = run(lq, "--imatrix", stats, model, ref, preset)
                check(r.returncode == 0, f"llama-quantize {preset}: {r.stderr[-500:]}")
                same_tensors(mine, ref, f"{name} {preset} with {os.path.basename(stats)}")
        # the statistics matter: without them the bytes differ
        plain = os.path.join(tmp, "plain.gguf")
        ok(QUANTIZE, model, plain, "Q4_K_M")
        ok(QUANTIZE, model, os.path.join(tmp, "mine.gguf"), "Q4_K_M", "--stats", ours)
        check(tensors(plain) != tensors(os.path.join(tmp, "mine.gguf")), f"{name}: importance changed nothing")


def test_roundtrip(tmp, model):
    stats = os.path.join(tmp, "rt.stats")
    for preset, uses in [("Q4_K_M", ["--importance"]), ("NVFP4", ["--importance", "--act-scales"]),
                         ("INT8", ["--smoothquant", "--importance"]), ("INT8", ["--awq", "--importance", "--act-scales"]),
                         ("FP8_E4M3", ["--importance", "--act-scales"]),
                         ("INT8", ["--smoothquant", "--smoothquant-alpha", "auto"])]:
        a, b = os.path.join(tmp, "rt_a.gguf"), os.path.join(tmp, "rt_b.gguf")
        ok(QUANTIZE, model, a, preset, "--calibration-file", TRAIN, "--calib-ctx", 128, "--calib-chunks", 6,
           "--save-stats", stats, *uses)
        ok(QUANTIZE, model, b, preset, "--stats", stats, *uses)
        same_tensors(a, b, f"{preset} {' '.join(uses)}: calibrated at once vs saved and reloaded")
        ka, kb = keys(a), keys(b)
        # importance is the base of every use (no longer dropped when another
        # is named); each named use changed some tensor here, so it is applied
        want = {u[2:].replace("-", "_") for u in uses if u in ("--importance", "--act-scales", "--smoothquant", "--awq")}
        want.add("importance")
        check(set(ka.get("hfq.calib.applied", [])) == want, f"hfq.calib.applied: {ka.get('hfq.calib.applied')}")
        check(set(ka.get("hfq.calib.requested", [])) == want, f"hfq.calib.requested: {ka.get('hfq.calib.requested')}")
        for k in ("hfq.calib.text", "hfq.calib.text_xxh3", "hfq.calib.chunk_count", "hfq.calib.n_tokens"):
            check(k in ka and ka.get(k) == kb.get(k), f"{k}: {ka.get(k)} vs {kb.get(k)}")
    st = keys(stats)
    check(st["general.type"] == "imatrix" and st["imatrix.chunk_count"] == 6 and st["imatrix.chunk_size"] == 128
          and st["hfq.calib.n_tokens"] == 6 * 128 and st["hfq.calib.mode"] == "chunks"
          and st["imatrix.datasets"] == [TRAIN], f"statistics keys: {st}")


def logits(model, ids, out):
    ok(RUNNER_LOGITS, model, "logits", out, *ids)
    return np.fromfile(out, dtype=np.float32)


def test_equivalence(tmp, model, label):
    stats = os.path.join(tmp, "eq.stats")
    ok(QUANTIZE, model, "--calibration-file", TRAIN, "--calib-ctx", 128, "--calib-chunks", 6, "--save-stats", stats)
    ids = [1, 400, 50, 300, 20, 7, 99, 250, 33, 100, 5, 321]
    ref = logits(model, ids, os.path.join(tmp, "ref.f32"))
    for uses in (["--smoothquant"], ["--smoothquant", "--smoothquant-alpha", "0.8"], ["--awq", "--awq-format", "q4_0"]):
        out = os.path.join(tmp, "eq.gguf")
        ok(QUANTIZE, model, out, "F32", "--stats", stats, *uses)
        folded = keys(out).get("hfq.calib.folded_groups", 0)
        norms_changed = any(not np.array_equal(v, arrays(model)[k]) for k, v in arrays(out).items() if "norm" in k)
        got = logits(out, ids, os.path.join(tmp, "got.f32"))
        rel = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
        print(f"{label} {' '.join(uses)}: {folded} groups folded, logits max relative difference {rel:.2e}")
        check(folded > 0 and norms_changed, f"{label} {uses}: nothing was rescaled")
        check(rel < 1e-4, f"{label} {uses}: logits changed by {rel:.2e}")


def test_act_scales(tmp, model):
    stats = os.path.join(tmp, "act.stats")
    ok(QUANTIZE, model, "--calibration-file", TRAIN, "--calib-ctx", 128, "--calib-chunks", 4, "--save-stats", stats)
    st = arrays(stats)
    for preset, div in [("INT8", 127.0), ("FP8_E4M3", 448.0), ("FP8_E5M2", 57344.0), ("NVFP4", 6.0 * 448.0)]:
        out = os.path.join(tmp, "act.gguf")
        ok(QUANTIZE, model, out, preset, "--stats", stats, "--act-scales")
        got = arrays(out)
        scaled = [k for k in got if k.endswith(".input_scale")]
        check(len(scaled) == 14, f"{preset}: {len(scaled)} input scales")
        for k in scaled:
            w = k.replace(".input_scale", ".weight")
            want = np.float32(st[w + ".in_max"].max()) / np.float32(div)
            check(abs(float(got[k][0]) - float(want)) <= 1e-6 * float(want), f"{preset} {k}: {got[k][0]} vs {want}")
    out = os.path.join(tmp, "act.gguf")
    ok(QUANTIZE, model, out, "INT8", "--stats", stats, "--act-scales", "--act-percentile", "50")
    p50 = arrays(out)["blk.0.attn_q.input_scale"][0] * 127.0
    hist = st["blk.0.attn_q.weight.tok_max_hist"]
    edges = 2.0 ** (-20 + np.arange(len(hist)) / 8.0)
    cum = np.cumsum(hist)
    want = edges[np.searchsorted(cum, np.ceil(0.5 * cum[-1]))]
    check(abs(p50 - want) <= 1e-5 * want, f"median per-token max: {p50} vs histogram {want}")


def tokens(model, text, special=False, bos=True):
    args = [TOKENIZE, model, "-p", text] + (["--parse-special"] if special else []) + ([] if bos else ["--no-bos"])
    r = ok(*args)
    return [int(t) for t in r.stdout.split()]


def test_lines(tmp, syn_dir, syn):
    lines = ["Once upon a time there was a cat.", "", "   ", "The dog ran to the park and played.",
             "A bird sang.\r", "She smiled at the sun and the sky."]
    text = os.path.join(tmp, "lines.txt")
    with open(text, "w", newline="") as f:
        f.write("\n".join(lines) + "\n")
    stats = os.path.join(tmp, "lines.stats")
    ok(QUANTIZE, syn, "--calibration-file", text, "--calib-lines", "--calib-ctx", 8, "--calib-chunks", 3,
       "--save-stats", stats)
    kept = [l.rstrip("\r") for l in lines if l.strip()][:3]
    want = sum(min(len(tokens(syn, l)), 8) for l in kept)
    k = keys(stats)
    check(k["hfq.calib.mode"] == "lines" and k["imatrix.chunk_count"] == 3 and k["hfq.calib.n_tokens"] == want,
          f"lines: {k['hfq.calib.mode']} {k['imatrix.chunk_count']} {k['hfq.calib.n_tokens']} vs {want}")
    # a chat template (the fixture Llama 3 tokenizer's) in the synthetic model
    cfg_path = os.path.join(FIXTURES, "tokenizers", "llama3", "tokenizer_config.json")
    chat_dir = os.path.join(tmp, "chat")
    shutil.copytree(syn_dir, chat_dir)
    with open(os.path.join(chat_dir, "tokenizer_config.json")) as f:
        cfg = json.load(f)
    with open(cfg_path) as f:
        cfg["chat_template"] = json.load(f)["chat_template"]
    with open(os.path.join(chat_dir, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f)
    chat = os.path.join(tmp, "chat.gguf")
    ok(HFCONV, chat_dir, "-o", chat, "--outtype", "f32", "-q")
    ok(QUANTIZE, chat, "--calibration-file", text, "--calib-lines", "--calib-chat", "--save-stats", stats)
    want = 0
    for l in [l.rstrip("\r") for l in lines if l.strip()]:
        rendered = ("<s><|start_header_id|>user<|end_header_id|>\n\n" + l.strip() +
                    "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
        ids = tokens(chat, rendered, special=True, bos=False)
        check(ids[0] == 1, "the template's BOS is the BOS token")
        want += len(ids)
    k = keys(stats)
    check(k["hfq.calib.mode"] == "lines-chat" and k["hfq.calib.n_tokens"] == want,
          f"chat: {k['hfq.calib.mode']} {k['hfq.calib.n_tokens']} vs {want}")
    r = run(QUANTIZE, syn, "--calibration-file", text, "--calib-lines", "--calib-chat", "--save-stats", stats + "2")
    check(r.returncode == 1 and "chat_template" in r.stderr and not os.path.exists(stats + "2"),
          f"--calib-chat without a template: {r.returncode} {r.stderr}")


def test_summary(tmp, syn):
    """Calibrating alone prints where the outliers are: mkmodel --outliers makes 4 channels
    of the q/k/v and gate/up inputs 8x larger, not those of attn_output / ffn_down."""
    r = ok(QUANTIZE, syn, "--calibration-file", TRAIN, "--calib-ctx", 64, "--calib-chunks", 4,
           "--save-stats", os.path.join(tmp, "summary.stats"), "--json")
    j = json.loads(r.stdout)
    ws = {w["name"]: w for w in j["weights"]}
    check(j["n_tokens"] == 256 and j["n_chunks"] == 4 and len(ws) == 15, f"summary: {j['n_tokens']} {len(ws)}")
    for name in ("blk.0.attn_q.weight", "blk.1.ffn_up.weight"):
        check(ws[name]["outlier_ratio"] > 4, f"{name}: outlier ratio {ws[name]['outlier_ratio']}")
    check(ws["blk.0.attn_output.weight"]["outlier_ratio"] < 4, "attn_output's input has no outlier channel")
    w = ws["blk.0.attn_q.weight"]
    check(0 < w["token_max_p50"] <= w["token_max_p99"] <= w["amax"], f"percentiles: {w}")


def test_gzip(tmp, syn):
    gz = os.path.join(tmp, "train.txt.gz")
    with open(TRAIN, "rb") as f, gzip.open(gz, "wb") as g:
        g.write(f.read())
    a, b = os.path.join(tmp, "plain.stats"), os.path.join(tmp, "gz.stats")
    ok(QUANTIZE, syn, "--calibration-file", TRAIN, "--calib-ctx", 64, "--calib-chunks", 3, "--save-stats", a)
    ok(QUANTIZE, syn, "--calibration-file", gz, "--calib-ctx", 64, "--calib-chunks", 3, "--save-stats", b)
    ta, tb = tensors(a), tensors(b)
    check(ta == tb, "gzip text gives other statistics")
    check(keys(a)["hfq.calib.text_xxh3"] != keys(b)["hfq.calib.text_xxh3"], "the hash is of the file as stored")


def expect_failure(tmp, what, args, code=1, says=None):
    out = os.path.join(tmp, "bad_out.gguf")
    stats = os.path.join(tmp, "bad.stats")
    for p in (out, stats):
        if os.path.exists(p):
            os.remove(p)
    r = run(QUANTIZE, *[out if a == "OUT" else stats if a == "STATS" else a for a in args])
    lines = r.stderr.strip().splitlines()
    check(r.returncode == code, f"{what}: exit {r.returncode}, want {code}: {r.stderr}")
    if code == 1:
        check(len(lines) == 1, f"{what}: not one line: {r.stderr!r}")
    check(says is None or says in r.stderr, f"{what}: {r.stderr!r} lacks {says!r}")
    check(not os.path.exists(out) and not os.path.exists(stats), f"{what}: left a file behind")
    print(f"{what}: {lines[0] if lines else ''}")


def test_bad_input(tmp, syn, s260):
    short, empty, bad_utf8 = (os.path.join(tmp, n) for n in ("short.txt", "empty.txt", "bad.txt"))
    with open(short, "w") as f:
        f.write("Once upon a time.\n")
    open(empty, "w").close()
    with open(bad_utf8, "wb") as f:
        f.write(b"Once upon a time \xff\xfe there was a cat.\n" * 200)
    for what, text, extra, says in [("short text", short, [], "fewer than one chunk"),
                                    ("empty text", empty, [], "empty"),
                                    ("invalid UTF-8", bad_utf8, [], "invalid UTF-8 at byte 17"),
                                    ("blank lines only", os.path.join(tmp, "blank.txt"), ["--calib-lines"], "no line")]:
        if what == "blank lines only":
            with open(text, "w") as f:
                f.write("\n  \n\t\n")
        # --calib-ctx 128: the synthetic model is trained at 256, and a longer
        # chunk adds a warning line (tests/quantize_safety.py)
        expect_failure(tmp, what, [syn, "OUT", "Q4_K_M", "--calibration-file", text, "--save-stats", "STATS",
                                   "--calib-ctx", 128] + extra, says=says)
    s260_stats = os.path.join(tmp, "s260.stats")
    ok(QUANTIZE, s260, "--calibration-file", TRAIN, "--calib-ctx", 64, "--calib-chunks", 2, "--save-stats", s260_stats)
    expect_failure(tmp, "statistics of another model (names)", [syn, "OUT", "Q4_K_M", "--stats", s260_stats],
                   says="another model")
    other_dir = os.path.join(tmp, "other")
    ok(MKMODEL, other_dir, "--hidden", 64, "--ffn", 128, "--layers", 5, "--heads", 8, "--kv-heads", 4, "--vocab", 512)
    other = os.path.join(tmp, "other.gguf")
    ok(HFCONV, other_dir, "-o", other, "--outtype", "f32", "-q")
    expect_failure(tmp, "statistics of another model (sizes)", [other, "OUT", "Q4_K_M", "--stats", s260_stats],
                   says="another model")
    expect_failure(tmp, "a model as statistics", [s260, "OUT", "Q4_K_M", "--stats", s260], says="not a statistics file")
    truncated = os.path.join(tmp, "trunc.stats")
    with open(s260_stats, "rb") as f, open(truncated, "wb") as g:
        g.write(f.read()[:5000])
    expect_failure(tmp, "truncated statistics", [s260, "OUT", "Q4_K_M", "--stats", truncated])
    li = llama("llama-imatrix")
    if li:
        theirs = os.path.join(tmp, "s260.llama.imatrix")
        run(li, "-m", s260, "-f", TRAIN, "-o", theirs, "-c", 64, "--chunks", 2)
        for use in ("--smoothquant", "--awq", "--act-scales"):
            expect_failure(tmp, f"llama-imatrix statistics for {use}", [s260, "OUT", "INT8", "--stats", theirs, use],
                           says="llama-imatrix")
    for what, args in [("SmoothQuant with AWQ", ["--stats", s260_stats, "--smoothquant", "--awq"]),
                       ("--calib-chat without --calib-lines", ["--calibration-file", TRAIN, "--calib-chat"]),
                       ("--save-stats without a text", ["--stats", s260_stats, "--save-stats", "STATS"]),
                       ("a use without statistics", ["--awq"]),
                       ("--act-percentile after SmoothQuant",
                        ["--stats", s260_stats, "--smoothquant", "--act-scales", "--act-percentile", "99"])]:
        expect_failure(tmp, what, [s260, "OUT", "INT8"] + args, code=2)
    # one calibration flag everywhere: mixed precision measures on the same
    # statistics and rounds with them (importance, as with a preset)
    mixed = os.path.join(tmp, "mixed.gguf")
    ok(QUANTIZE, s260, mixed, "--target-bpw", "8", "--stats", s260_stats)
    keys = {f.name: f.contents() for f in GGUFReader(mixed).fields.values() if f.name.startswith("hfq.")}
    check(keys.get("hfq.calib.stats_file") == s260_stats and "importance" in keys.get("hfq.calib.applied", []),
          f"mixed precision with --stats records its statistics and importance: {keys}")


def main():
    if not os.path.exists(TRAIN) or not os.path.isdir(os.path.join(FIXTURES, "models", "stories260K")):
        print(f"SKIP: fixtures not found under {FIXTURES!r}")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        syn_dir, syn, s260 = models(tmp)
        if "llama" in PARTS:
            test_llama_interchange(tmp, syn, s260)
        if "uses" in PARTS:
            test_roundtrip(tmp, s260)
            test_equivalence(tmp, syn, "synthetic (outliers)")
            test_equivalence(tmp, s260, "stories260K")
            test_act_scales(tmp, syn)
        if "input" in PARTS:
            test_lines(tmp, syn_dir, syn)
            test_summary(tmp, syn)
            test_gzip(tmp, syn)
            test_bad_input(tmp, syn, s260)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
