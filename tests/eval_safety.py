"""ppl-eval and generate lose nothing and say what they do (issue 25), on
stories260K (hfconv F32, quantize Q4_K_M) and a subset of tinystories-valid.txt:

- --save-logits that is (or links to) an input, is a folder or lies in a
  missing folder is refused before any work (exit 2, one line naming it);
  the inputs stay byte for byte, no temporary file is left;
- --min-top1 is a fraction in [0, 1], as the JSON's same_top (a percent is a
  usage error that says the unit); gate limits that could not fail are
  refused;
- a context past the model's trained one (llama.context_length, 512) is one
  warning line, in ppl-eval (--ctx) and in generate (prompt + -n);
- the text is valid non-empty UTF-8: a binary file or an empty text is one
  line naming the text file; every error names the file it is about;
- unknown options are named, with the nearest known one, and every usage
  error is one line; --version and -h;
- progress also off a terminal (whole lines), silenced by --quiet.

usage: eval_safety.py PPL_EVAL GENERATE HFCONV QUANTIZE
"""
import glob
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile

import ppl_kld_common as pk
from ppl_kld_common import check

PPL_EVAL, GENERATE, HFCONV, QUANTIZE = sys.argv[1:5]
TRAINED = 512    # stories260K's max_position_embeddings


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def one_line(p, rc, *parts, what):
    """Exit rc and a single stderr line holding every part."""
    ok = p.returncode == rc and p.stderr.count("\n") == 1 and all(s in p.stderr for s in parts)
    return check(ok, f"{what}: exit {p.returncode} (want {rc}), stderr {p.stderr!r}, want one line with {parts}")


def ppl(*args):
    return pk.run([PPL_EVAL] + list(args))


def gen(*args):
    return pk.run([GENERATE] + list(args))


def test_save_logits(top, m, q4, text):
    """Each refusal leaves every input as it was and no temporary file. On
    copies, so that a build that loses them fails here alone."""
    tmp = os.path.join(top, "save")
    os.mkdir(tmp)
    m, q4, text = (shutil.copy(p, tmp) for p in (m, q4, text))
    link = os.path.join(tmp, "link.hfql")
    os.symlink(m, link)
    hard = os.path.join(tmp, "hard.hfql")
    os.link(q4, hard)
    before = {p: digest(p) for p in (m, q4, text)}
    cases = [
        ([m, "--text", text, "--save-logits", m], "the model", m),
        ([q4, "--text", text, "--base", m, "--save-logits", m], "--base", m),
        ([m, "--text", text, "--save-logits", text], "--text", text),
        ([q4, "--text", text, "--base", m, "--save-logits", link], "--base", link),   # a link to the base
        ([q4, "--text", text, "--save-logits", hard], "the model", hard),   # a hard link to the model
        ([m, "--text", text, "--save-logits", tmp], "is a folder", tmp),
        ([m, "--text", text, "--save-logits", os.path.join(tmp, "missing", "b.hfql")], "does not exist",
         os.path.join(tmp, "missing")),
        # before any work: the text is not even opened
        ([m, "--text", os.path.join(tmp, "no-such.txt"), "--save-logits", m], "the model", m),
    ]
    for args, what, path in cases:
        p = ppl(*args, "--ctx", pk.CTX, "--chunks", 2)
        one_line(p, 2, "--save-logits", what, path, what=f"--save-logits {os.path.relpath(args[-1], tmp)}")
        check("tokens evaluated" not in p.stderr, "refused before any work")
    after = {p: digest(p) for p in before}
    check(after == before, f"inputs changed: {[p for p in before if before[p] != after[p]]}")
    check(os.path.islink(link) and os.path.samefile(hard, q4), "the links are left as they were")
    left = glob.glob(os.path.join(tmp, "**", "*.tmp.*"), recursive=True)
    check(not left, f"temporary files left: {left}")
    # a new file next to the inputs is fine
    out = os.path.join(tmp, "new.hfql")
    p = ppl(m, "--text", text, "--ctx", pk.CTX, "--chunks", 2, "--save-logits", out)
    check(p.returncode == 0 and os.path.getsize(out) > 0, f"a new --save-logits: {p.stderr}")
    return out


def test_gates(m, q4, text):
    base = ("--text", text, "--ctx", pk.CTX, "--chunks", pk.CHUNKS, "--base", m)
    for bad in ("94", "90%", "1.5", "-0.1", "nan", "x"):
        one_line(ppl(q4, *base, "--min-top1", bad), 2,
                 f"--min-top1: takes a fraction in [0, 1] (0.9 = 90 %), got {bad}", what=f"--min-top1 {bad}")
    for opt in ("--max-kld", "--max-ppl-ratio"):
        for bad in ("-1", "nan", "inf", "-inf"):
            one_line(ppl(q4, *base, opt, bad), 2, f"{opt}: expects a number", what=f"{opt} {bad}")
    # a fraction that the percent reading (0.999 %) would have passed
    p = ppl(q4, *base, "--min-top1", "0.999", "--json")
    j = json.loads(p.stdout) if p.stdout.strip() else {}
    same_top = j.get("kl", {}).get("same_top", -1)
    gate = {g["gate"]: g for g in j.get("gates", [])}.get("min_top1", {})
    check(p.returncode == 3 and 0 < same_top < 0.999, f"--min-top1 0.999: exit {p.returncode}, same top {same_top}")
    check(gate.get("limit") == 0.999 and gate.get("value") == same_top and gate.get("passed") is False,
          f"the gate in JSON, fractions both: {gate} (same_top {same_top})")
    lines = [line for line in p.stderr.splitlines() if "gate failed" in line]
    check(len(lines) == 1 and f"{same_top:.6g} < --min-top1 0.999" in lines[0], f"gate line: {lines}")
    # the statistic itself as the limit passes (>=): the same double both ways
    p = ppl(q4, *base, "--min-top1", repr(same_top))
    check(p.returncode == 0 and "gate failed" not in p.stderr and
          f"gate --min-top1 {same_top:g}: same-top fraction {same_top:.6g} passed" in p.stdout,
          f"--min-top1 at the value: {p.returncode} {p.stdout[-200:]}")
    check("F in [0, 1] (0.9 = 90 %)" in ppl("--help").stdout, "--help says the unit of --min-top1")


def test_context(m, text):
    p = ppl(m, "--text", text, "--ctx", 1024, "--chunks", 1, "--quiet")
    check(p.returncode == 0 and p.stderr == f"ppl-eval: warning: --ctx 1024 is past the model's trained context "
                                            f"({TRAINED})\n", f"ppl-eval past the context: {p.stderr!r}")
    p = ppl(m, "--text", text, "--ctx", TRAINED, "--chunks", 1, "--quiet")
    check(p.returncode == 0 and p.stderr == "", f"ppl-eval at the context: {p.stderr!r}")
    prompt = "Once upon a time"
    p = gen(m, "-p", prompt, "-n", 600, "--ctx", 1024, "--temp", 0, "--ignore-eos")
    warn = [line for line in p.stderr.splitlines() if "warning" in line]
    want = rf"generate: warning: the prompt's \d+ tokens \+ -n 600 are past the model's trained context \({TRAINED}\)"
    check(p.returncode == 0 and len(warn) == 1 and re.fullmatch(want, warn[0]), f"generate past the context: {warn}")
    p = gen(m, "-p", prompt, "-n", 600, "--temp", 0, "--ignore-eos")
    warn = [line for line in p.stderr.splitlines() if "warning" in line]
    check(p.returncode == 0 and len(warn) == 1 and warn[0].endswith(f"({TRAINED}); stopping there (--ctx N goes past)")
          and f"context of {TRAINED} positions is full" in p.stderr, f"generate capped at the context: {p.stderr!r}")
    for args in (["-n", 20], ["-n", 600, "--ctx", 100]):
        p = gen(m, "-p", prompt, "--temp", 0, *args)
        check(p.returncode == 0 and "warning" not in p.stderr, f"generate {args}: no warning: {p.stderr!r}")


def test_text_errors(tmp, m, q4, text):
    """Errors name the file they are about; the text file, not the model."""
    empty, blank = os.path.join(tmp, "empty.txt"), os.path.join(tmp, "blank.txt")
    open(empty, "w").close()
    with open(blank, "w") as f:
        f.write("  \n")
    missing = os.path.join(tmp, "missing.gguf")
    cases = [
        ([m, "--text", q4], q4, "invalid UTF-8 at byte", "a GGUF as --text"),
        ([m, "--text", empty], empty, "the text is empty", "an empty --text"),
        ([m, "--text", blank, "--ctx", pk.CTX], blank, "a context of 128 needs at least 256", "a blank --text"),
        ([m, "--text", blank, "--ctx", pk.CTX, "--base", q4], blank, "needs at least", "a blank --text with --base"),
        ([missing, "--text", text], missing, "cannot open", "a missing model"),
        ([m, "--text", missing], missing, "cannot open", "a missing --text"),
        ([m, "--text", text, "--base", missing], missing, "cannot open", "a missing --base"),
        ([m, "--text", text, "--base", text], text, "", "a text as --base"),
        ([m, "--text", text, "--base-logits", missing], missing, "cannot open", "a missing --base-logits"),
    ]
    for args, path, msg, what in cases:
        p = ppl(*args)
        if one_line(p, 1, path + ": ", msg, what=what) and path != m:
            check(m + ":" not in p.stderr, f"{what}: blamed on the model: {p.stderr!r}")
    one_line(gen(missing, "-p", "x"), 1, missing + ": ", what="generate: a missing model")
    one_line(gen(text, "-p", "x"), 1, text + ": ", what="generate: a text as the model")
    one_line(gen(m, "-p", "Once upon a time", "--ctx", 2), 1, m + ": ", "do not fit in a context of 2",
             what="generate: a prompt longer than --ctx")


def test_command_line(m, text):
    cases = [
        (gen(m, "-p", "x", "--bogus"), "generate: unknown option '--bogus' (see generate --help)"),
        (gen(m, "-p", "x", "--tmep", "0"), "generate: unknown option '--tmep' (did you mean '--temp'?)"),
        (gen(m, "-p"), "generate: -p: needs a value"),
        (gen(m, "-p", "x", "extra"), "unexpected argument 'extra'"),
        (gen(m), "a model and -p PROMPT are required"),
        (ppl(m, "--text", text, "--chunk", 4), "ppl-eval: unknown option '--chunk' (did you mean '--chunks'?)"),
        (ppl(m, "--text", text, "--jsn"), "unknown option '--jsn' (did you mean '--json'?)"),
        (ppl(m, "--text"), "ppl-eval: --text: needs a value"),
        (ppl(m, "--text", text, "--ctx", 2), "--ctx: expects an integer in [4, "),
        (ppl(m, "--text", text, "other.gguf"), "unexpected argument 'other.gguf'"),
        (ppl(m), "a model and --text FILE are required"),
        (ppl(), "a model and --text FILE are required"),
    ]
    for p, msg in cases:
        one_line(p, 2, msg, what=f"usage error {msg!r}")
        check("usage:" not in p.stderr and p.stdout == "", f"usage error without the help: {p.stderr!r}")
    for tool, run in (("ppl-eval", ppl), ("generate", gen)):
        p = run("--version")
        check(p.returncode == 0 and p.stdout.startswith(f"{tool} (hfq) ") and p.stdout.count("\n") == 1,
              f"{tool} --version: {p.returncode} {p.stdout!r} {p.stderr!r}")
        for h in ("-h", "--help"):
            p = run(h)
            check(p.returncode == 0 and p.stdout.startswith(f"usage: {tool} ") and "--version" in p.stdout,
                  f"{tool} {h}: {p.returncode} {p.stderr!r}")


def test_progress(m, text, saved):
    """stderr is a pipe here: progress comes as whole lines; --quiet silences it."""
    args = [m, "--text", text, "--ctx", pk.CTX, "--chunks", 2, "--base-logits", saved]
    p = ppl(*args)
    lines = p.stderr.splitlines()
    check(p.returncode == 0 and "\r" not in p.stderr and "\033" not in p.stderr and
          any(line.startswith("[2/2] chunks ") and "tokens/s" in line for line in lines),
          f"progress lines off a terminal: {p.stderr!r}")
    p = ppl(*args, "--quiet")
    check(p.returncode == 0 and p.stderr == "" and p.stdout.startswith("PPL = "), f"--quiet: {p.stderr!r}")
    # fewer chunks than asked: said, not silent
    short = pk.write_subset(text + ".short", n_bytes=3000)
    p = ppl(m, "--text", short, "--ctx", pk.CTX, "--chunks", 100, "--quiet")
    check(p.returncode == 0 and p.stderr.startswith(f"ppl-eval: warning: --chunks 100: {short} holds ") and
          p.stderr.count("\n") == 1, f"--chunks past the text: {p.stderr!r}")


def main():
    pk.skip_without_fixtures()
    with tempfile.TemporaryDirectory() as tmp:
        text = pk.write_subset(os.path.join(tmp, "text.txt"))
        models = pk.build_models(HFCONV, QUANTIZE, tmp, "stories260K", ("Q4_K_M",))
        m, q4 = models["f32"], models["Q4_K_M"]
        saved = test_save_logits(tmp, m, q4, text)
        test_gates(m, q4, text)
        test_context(m, text)
        test_text_errors(tmp, m, q4, text)
        test_command_line(m, text)
        test_progress(m, text, saved)
    return pk.finish()


if __name__ == "__main__":
    sys.exit(main())
