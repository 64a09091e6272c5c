"""ppl-eval's command line in KL-divergence mode, on stories260K and
TinyStories-656K (hfconv, quantize) and a subset of tinystories-valid.txt:

- quality gates: failing ones exit 3 with one stderr line each, passing
  ones 0; --json carries every statistic and each gate's result (--min-top1
  and its value are fractions, as same_top);
- the text output has llama-perplexity's lines;
- mismatches between a base and the run are one-line errors (exit 1):
  another context, text, vocabulary, too few saved chunks, a base model
  with another vocabulary, not a base-logits file, a text too short;
- bad usage exits 2;
- progress (chunks, tokens/s, ETA) goes to stderr: redrawn on a TTY, whole
  lines elsewhere.

usage: ppl_kld_cli.py PPL_EVAL HFCONV QUANTIZE
"""
import json
import os
import pty
import subprocess
import sys
import tempfile

import ppl_kld_common as pk
from ppl_kld_common import check

PPL_EVAL, HFCONV, QUANTIZE = sys.argv[1:4]
QUANTILE_KEYS = ["kld_" + k for k in ("max", "p99_9", "p99", "p95", "p90", "median", "p10", "p5", "p1", "p0_1", "min")]
QUANTILE_KEYS += ["dp_" + k for k in ("max", "p99_9", "p99", "p95", "p90", "p75", "median", "p25", "p10", "p5", "p1",
                                      "p0_1", "min")]
KL_KEYS = ["tokens", "ppl", "ppl_err", "ppl_base", "ppl_base_err", "ln_ppl_cor", "ln_ppl_ratio", "ln_ppl_ratio_err",
           "ppl_ratio", "ppl_ratio_err", "ppl_diff", "ppl_diff_err", "kld", "kld_err", "dp", "dp_err", "dp_rms",
           "dp_rms_err", "same_top", "same_top_err"] + QUANTILE_KEYS


def gate_lines(stderr):
    return [line for line in stderr.splitlines() if "gate failed" in line]


def test_gates(ev, q4, base):
    p = ev.run(q4, "--base-logits", base, "--json", "--max-kld", "1e-6", "--max-ppl-ratio", "0.5", "--min-top1", "0.9999")
    check(p.returncode == 3, f"all gates failing: exit {p.returncode} {p.stderr}")
    lines = gate_lines(p.stderr)
    check(len(lines) == 3, f"one line per failed gate: {lines}")
    check(any("mean KLD" in l and "> --max-kld 1e-06" in l for l in lines), f"KLD gate line: {lines}")
    check(any("PPL(Q)/PPL(base)" in l and "> --max-ppl-ratio 0.5" in l for l in lines), f"ratio gate line: {lines}")
    check(any("same-top fraction" in l and "< --min-top1 0.9999" in l for l in lines), f"top-1 gate line: {lines}")
    j = json.loads(p.stdout) if p.stdout.strip() else {}
    gates = {g.get("gate"): g for g in j.get("gates", [])}
    check(set(gates) == {"max_kld", "max_ppl_ratio", "min_top1"} and not j.get("gates_passed", True),
          f"JSON gates {j.get('gates')}")
    check(all(not g["passed"] for g in gates.values()), "every gate failed in JSON")
    kl = j.get("kl", {})
    check(gates.get("max_kld", {}).get("value") == kl.get("kld") and
          gates.get("min_top1", {}).get("value") == kl.get("same_top") and
          gates.get("min_top1", {}).get("limit") == 0.9999,
          f"gate values {gates} vs statistics")
    check(sorted(kl) == sorted(KL_KEYS), f"JSON kl keys {sorted(set(kl) ^ set(KL_KEYS))}")
    check(all(isinstance(kl[k], (int, float)) for k in kl), "numbers only")
    for key in ("model", "text", "base_logits", "act_quant", "n_ctx", "n_chunks", "n_tokens", "tokens_scored", "ppl"):
        check(key in j, f"JSON key {key}")
    check(j.get("tokens_scored") == kl.get("tokens") == pk.CHUNKS * (pk.CTX - pk.CTX // 2 - 1), "tokens scored")

    # one failing gate of three: exit 3, one line
    p = ev.run(q4, "--base-logits", base, "--max-kld", "1", "--max-ppl-ratio", "2", "--min-top1", "0.9999")
    check(p.returncode == 3 and len(gate_lines(p.stderr)) == 1 and "--min-top1" in gate_lines(p.stderr)[0],
          f"one failed gate: {p.returncode} {gate_lines(p.stderr)}")
    check("gate --max-kld 1: mean KLD" in p.stdout and "passed" in p.stdout and "FAILED" in p.stdout,
          f"gate results in the text output: {p.stdout[-300:]}")
    # all passing
    p = ev.run(q4, "--base-logits", base, "--json", "--max-kld", "1", "--max-ppl-ratio", "2", "--min-top1", "0.5")
    j = json.loads(p.stdout) if p.returncode == 0 else {}
    check(p.returncode == 0 and j.get("gates_passed") is True and not gate_lines(p.stderr),
          f"passing gates: {p.returncode} {p.stderr}")


def test_text_output(ev, q4, base):
    p = ev.run(q4, "--base-logits", base)
    check(p.returncode == 0, p.stderr)
    for line in ("PPL = ", "====== Perplexity statistics ======", "Mean PPL(Q)                   :",
                 "Cor(ln(PPL(Q)), ln(PPL(base))):", "Mean ln(PPL(Q)/PPL(base))     :", "====== KL divergence statistics",
                 "Mean    KLD:", "Maximum KLD:", "99.9%   KLD:", "Median  KLD:", " 0.1%   KLD:", "Minimum KLD:",
                 "Mean    Δp:", "75.0%   Δp:", "RMS Δp    :", "Same top p:"):
        check(line in p.stdout, f"text output lacks {line!r}")
    progress = [l for l in p.stderr.splitlines() if " chunks " in l]
    check("\r" not in p.stderr and progress and progress[-1].startswith(f"[{pk.CHUNKS}/{pk.CHUNKS}] chunks ") and
          "ETA" in progress[-1], f"progress as whole lines when stderr is not a TTY: {p.stderr!r}")


def test_progress(ev, q4, base):
    master, slave = pty.openpty()
    args = [ev.exe, q4, "--text", ev.text, "--ctx", str(pk.CTX), "--chunks", "3", "--base-logits", base]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    err = b""
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        err += data
    proc.wait()
    os.close(master)
    text = err.decode(errors="replace")
    check(proc.returncode == 0, f"progress run: {text}")
    check("   3/   3] chunks" in text and "tokens/s" in text and "ETA 0:00:00" in text and "\r\033[K[" in text,
          f"progress on a TTY: {text!r}")


def expect_error(p, rc, msg, what):
    check(p.returncode == rc and msg in p.stderr, f"{what}: exit {p.returncode}, stderr {p.stderr.strip()!r}, "
                                                  f"expected {rc} and {msg!r}")


def test_mismatches(ev, tmp, m260, m656, base):
    expect_error(ev.run(m260["Q8_0"], "--base-logits", base, ctx=64), 1,
                 "saved with a context of 128; this run uses 64 (--ctx)", "other context")
    other = pk.PplEval(PPL_EVAL, pk.write_subset(os.path.join(tmp, "other.txt"), skip=50000))
    expect_error(other.run(m260["Q8_0"], "--base-logits", base), 1, "saved for another text or tokenizer", "other text")
    expect_error(ev.run(m656["Q8_0"], "--base-logits", base), 1,
                 "saved for a vocabulary of 512 tokens; the model has 2048", "other vocabulary")
    expect_error(ev.run(m260["Q8_0"], "--base-logits", base, chunks=pk.CHUNKS + 1), 1,
                 f"holds {pk.CHUNKS} chunks; {pk.CHUNKS + 1} asked for (--chunks)", "too few chunks saved")
    expect_error(ev.run(m656["Q8_0"], "--base", m260["f32"]), 1, "vocabulary mismatch", "base of another vocabulary")
    expect_error(ev.run(m260["Q8_0"], "--base-logits", m260["f32"]), 1, "not a base-logits file", "a GGUF as base logits")
    short = pk.PplEval(PPL_EVAL, pk.write_subset(os.path.join(tmp, "short.txt"), n_bytes=400))
    expect_error(short.run(m260["Q8_0"], "--base", m260["f32"]), 1, "a context of 128 needs at least 256",
                 "text too short")
    # no file is left behind when the run fails
    out = os.path.join(tmp, "never.hfql")
    expect_error(short.run(m260["f32"], "--save-logits", out), 1, "needs at least", "save with a short text")
    check(not os.path.exists(out) and not [f for f in os.listdir(tmp) if f.startswith("never.hfql")],
          "nothing left behind")
    # without --ctx/--chunks the saved file's are used
    p = ev.run(m260["Q8_0"], "--base-logits", base, "--json", ctx=None, chunks=None)
    j = json.loads(p.stdout) if p.returncode == 0 else {}
    check(j.get("n_ctx") == pk.CTX and j.get("n_chunks") == pk.CHUNKS, f"the file's context and chunks: {p.stderr}")


def test_usage(ev, m260, base):
    cases = [
        (["--max-kld", "0.1"], "need --base or --base-logits"),
        (["--base", m260["f32"], "--min-top1", "101"], "--min-top1: takes a fraction in [0, 1] (0.9 = 90 %), got 101"),
        (["--base", m260["f32"], "--base-logits", base], "exclude each other"),
        (["--base-logits", base, "--save-logits", "x.hfql"], "with --base-logits there is none to save"),
        (["--act-quant", "sometimes"], "--act-quant: expects auto, none, dynamic or static"),
        (["--base"], "--base: needs a value"),
    ]
    for extra, msg in cases:
        expect_error(ev.run(m260["Q8_0"], *extra), 2, msg, f"usage {extra}")
    expect_error(ev.run(m260["INT8"], "--act-quant", "static"), 1,
                 "has no input_scale for static activation quantization", "static without input scales")


def main():
    pk.skip_without_fixtures()
    with tempfile.TemporaryDirectory() as tmp:
        ev = pk.PplEval(PPL_EVAL, pk.write_subset(os.path.join(tmp, "text.txt")))
        m260 = pk.build_models(HFCONV, QUANTIZE, tmp, "stories260K", ("Q8_0", "Q4_K_M", "INT8"))
        m656 = pk.build_models(HFCONV, QUANTIZE, tmp, "TinyStories-656K", ("Q8_0",))
        base = os.path.join(tmp, "base.hfql")
        p = ev.run(m260["f32"], "--save-logits", base)
        check(p.returncode == 0 and "saved the model's log-probabilities" in p.stderr, p.stderr)
        test_gates(ev, m260["Q4_K_M"], base)
        test_text_output(ev, m260["Q4_K_M"], base)
        test_progress(ev, m260["Q4_K_M"], base)
        test_mismatches(ev, tmp, m260, m656, base)
        test_usage(ev, m260, base)
    return pk.finish()


if __name__ == "__main__":
    sys.exit(main())
