"""ppl-eval and generate on stories260K (an F32 GGUF with its tokenizer,
written with gguf-py as in runner_stories.py):

- generate --temp 0 from an empty prompt prints the story llama2.c documents;
  sampling is reproducible by seed;
- ppl-eval gives the perplexity a numpy float64 forward pass gives when it
  scores the same way (SentencePiece tokens, chunks with BOS first, second
  halves), plain or gzip text, text and JSON output;
- bad usage exits 2, bad input 1, with one-line messages (usage errors
  without the whole help).

usage: runner_tools.py PPL_EVAL GENERATE
"""
import gzip
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import runner_stories as rs

PPL_EVAL, GENERATE = sys.argv[1], sys.argv[2]
TEXT = os.path.join(rs.FIXTURES, "text", "tinystories-valid.txt")
check = rs.check


def run(args):
    return subprocess.run(args, capture_output=True, text=True)


def reference_ppl(ref, tokens, n_ctx, n_chunks, bos):
    """PPL and its standard error, scored as llama.cpp's perplexity tool."""
    first, nll = n_ctx // 2, []
    for c in range(n_chunks):
        chunk = list(tokens[c * n_ctx:(c + 1) * n_ctx])
        chunk[0] = bos
        logits = ref.logits(chunk[:-1])
        for j in range(first, n_ctx - 1):
            row = logits[j] - logits[j].max()
            nll.append(np.log(np.exp(row).sum()) - row[chunk[j + 1]])
    nll = np.array(nll)
    ppl = np.exp(nll.mean())
    return ppl, ppl * np.sqrt((np.mean(nll ** 2) - nll.mean() ** 2) / (len(nll) - 1)), len(nll)


def test_generate(model, sp):
    p = run([GENERATE, model, "-p", "", "--temp", "0", "-n", "40"])
    check(p.returncode == 0, f"generate: {p.stderr}")
    print("greedy:", repr(p.stdout))
    check(p.stdout.startswith(rs.json.load(open(rs.GOLDEN))["greedy"]["text_prefix"][:60]),
          f"greedy story: {p.stdout!r}")
    check("tokens/s" in p.stderr, "speed on stderr")
    p2 = run([GENERATE, model, "-p", "Once upon a time", "--temp", "0", "-n", "20"])
    check(p2.stdout.startswith("Once upon a time, there was a little girl named Lily"), f"prompt: {p2.stdout!r}")
    outs = [run([GENERATE, model, "-p", "The cat", "--temp", "1", "--seed", s, "-n", "30"]).stdout
            for s in ("5", "5", "6")]
    check(outs[0] == outs[1], "same seed, same text")
    check(outs[0] != outs[2], "another seed, another text")
    check(all(o.startswith("The cat") for o in outs), "samples continue the prompt")


def test_ppl(model, sp, ref):
    n_ctx, n_chunks = 64, 6
    with open(TEXT, encoding="utf-8") as f:
        text = f.read()
    tokens = [sp.bos_id()] + sp.encode(text)
    want, want_err, n_scored = reference_ppl(ref, tokens, n_ctx, n_chunks, sp.bos_id())
    # an F32 KV cache, as the float64 reference keeps K and V
    args = [PPL_EVAL, model, "--ctx", str(n_ctx), "--chunks", str(n_chunks), "--kv-type", "f32"]
    p = run(args + ["--text", TEXT, "--json"])
    check(p.returncode == 0, f"ppl-eval: {p.stderr}")
    if p.returncode != 0:
        return
    got = json.loads(p.stdout)
    print(f"ppl-eval {got['ppl']:.6f} +/- {got['ppl_err']:.6f}, numpy {want:.6f} +/- {want_err:.6f}")
    check(abs(got["ppl"] - want) <= 1e-5 * want, f"ppl {got['ppl']} vs {want}")
    check(abs(got["ppl_err"] - want_err) <= 1e-3 * want_err, f"ppl_err {got['ppl_err']} vs {want_err}")
    check(got["n_tokens"] == len(tokens), f"tokens: {got['n_tokens']} vs SentencePiece {len(tokens)}")
    check(got["tokens_scored"] == n_scored and got["n_chunks"] == n_chunks, f"counts {got}")
    with tempfile.TemporaryDirectory() as tmp:
        gz = os.path.join(tmp, "text.gz")
        with gzip.open(gz, "wb") as f:
            f.write(text.encode())
        pg = run(args + ["--text", gz, "--json", "--threads", "1"])
        check(pg.returncode == 0 and json.loads(pg.stdout)["ppl"] == got["ppl"], f"gzip text: {pg.stderr}")
        with open(gz, "rb") as f:
            data = f.read()
        with open(gz, "wb") as f:
            f.write(data[: len(data) // 2])
        pt = run(args + ["--text", gz])
        check(pt.returncode == 1 and "truncated gzip" in pt.stderr, f"truncated gzip: {pt.returncode} {pt.stderr}")
        short = os.path.join(tmp, "short.txt")
        with open(short, "w") as f:
            f.write("Once upon a time there was a cat.")
        ps = run([PPL_EVAL, model, "--text", short])
        check(ps.returncode == 1 and "needs at least 1024" in ps.stderr, f"short text: {ps.stderr}")
    pt = run(args + ["--text", TEXT, "--parallel", "1"])
    check(pt.returncode == 0 and pt.stdout.startswith(f"PPL = {got['ppl']:.4f} +/- "), f"text output: {pt.stdout}")
    for bad in (["--text"], ["--text", TEXT, "--ctx", "2"], ["--text", TEXT, "--chunks", "x"], ["--bogus"], []):
        pb = run([PPL_EVAL, model] + bad)
        check(pb.returncode == 2 and pb.stderr.startswith("ppl-eval: ") and pb.stderr.count("\n") == 1,
              f"usage {bad} in one line: {pb.returncode} {pb.stderr}")
    pm = run([PPL_EVAL, TEXT, "--text", TEXT])
    check(pm.returncode == 1 and pm.stderr.count("\n") == 1, f"not a model: {pm.stderr}")


def main():
    if not os.path.isfile(os.path.join(rs.MODEL_DIR, "model.safetensors")) or not os.path.isfile(TEXT):
        print(f"SKIP: no stories260K fixture or text under {rs.FIXTURES}")
        return 77
    import sentencepiece
    cfg = json.load(open(os.path.join(rs.MODEL_DIR, "config.json")))
    w = rs.read_safetensors(os.path.join(rs.MODEL_DIR, "model.safetensors"))
    sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(rs.MODEL_DIR, "tokenizer.model"))
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "stories260K.gguf")
        rs.write_gguf(model, cfg, w, sp)
        test_generate(model, sp)
        test_ppl(model, sp, rs.Reference(cfg, w))
    print(f"{rs.failures} failure(s)")
    return 1 if rs.failures else 0


if __name__ == "__main__":
    sys.exit(main())
