#!/usr/bin/env python3
"""Split GGUF input (docs/format.md "Split files"), written by the reference
writer, gguf-py's GGUFWriter(split_max_tensors=...), from a synthetic model:

- quantize on the first file writes the same bytes as on the unsplit file
  (one file, no split.* keys), and, where llama.cpp's llama-quantize is
  built, every tensor as llama-quantize writes from the split;
- ppl-eval and generate on the first file print what they print on the
  unsplit file;
- gguf-info lists every file's tensors with the file that holds each, and
  n_files;
- any later file given, a missing file, a renamed first file, a file that
  says it is another one: exit 1, one line naming the file;
- an output that is a later file of the split input is refused (exit 2) and
  the file is left as it was.

usage: gguf_split_cli.py QUANTIZE HFCONV MKMODEL PPL_EVAL GENERATE GGUF_INFO LLAMA_QUANTIZE
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGUFReader, GGUFWriter

from gguf_common import add_keys, arch_of, check, finish, read_keys
from mixed_common import run, synthetic

QUANTIZE, HFCONV, MKMODEL, PPL_EVAL, GENERATE, GGUF_INFO, LLAMA_QUANTIZE = sys.argv[1:8]
TEXT = ("once upon a time there was a little cat who liked to play in the sun with her friend the dog. " * 40)


def split_copy(src, prefix, per_file):
    """src rewritten by gguf-py as prefix-0000K-of-0000N.gguf, per_file
    tensors a file; the list of the files written."""
    r, keys = GGUFReader(src), read_keys(src)
    w = GGUFWriter(prefix + ".gguf", arch_of(keys), split_max_tensors=per_file)
    add_keys(w, keys)
    for t in r.tensors:
        w.add_tensor(t.name, np.array(t.data), raw_shape=[int(x) for x in reversed(t.shape)],
                     raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    d = os.path.dirname(prefix)
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.startswith(os.path.basename(prefix) + "-"))


def tensors_of(path):
    return {t.name: (int(t.tensor_type), bytes(t.data.tobytes())) for t in GGUFReader(path).tensors}


def one_line_error(p, rc, path, words, what):
    lines = p.stderr.strip().splitlines()
    check(p.returncode == rc and len(lines) == 1 and path in lines[0] and words in lines[0],
          f"{what}: exit {p.returncode} (want {rc}), stderr {p.stderr!r}")


def main():
    tmp = tempfile.mkdtemp(prefix="hfq_split_")
    try:
        whole = synthetic(tmp, MKMODEL, HFCONV)
        parts = split_copy(whole, os.path.join(tmp, "part"), 10)
        n_tensors = len(GGUFReader(whole).tensors)
        check(len(parts) == -(-n_tensors // 10) and len(parts) >= 3, f"gguf-py wrote {parts}")
        first = parts[0]

        # quantize: one file, the unsplit file's bytes
        for preset in ("Q8_0", "Q4_K_M"):
            a, b = os.path.join(tmp, f"a_{preset}.gguf"), os.path.join(tmp, f"b_{preset}.gguf")
            pa, pb = run(QUANTIZE, whole, a, preset, "--quiet"), run(QUANTIZE, first, b, preset, "--quiet")
            check(pa.returncode == 0 and pb.returncode == 0, f"quantize {preset}: {pa.stderr} {pb.stderr}")
            if pa.returncode or pb.returncode:
                continue
            check(open(a, "rb").read() == open(b, "rb").read(), f"quantize {preset}: split input, other bytes")
            check(not any(k.startswith("split.") for k in GGUFReader(b).fields), f"{preset}: split keys kept")
            if os.access(LLAMA_QUANTIZE, os.X_OK):
                ref = os.path.join(tmp, f"ref_{preset}.gguf")
                p = run(LLAMA_QUANTIZE, first, ref, preset)
                check(p.returncode == 0, f"llama-quantize {preset} on the split: {p.stderr[-300:]}")
                if p.returncode == 0:
                    check(tensors_of(ref) == tensors_of(b), f"{preset}: tensors unlike llama-quantize's from the split")
            else:
                print(f"note: no {LLAMA_QUANTIZE}: llama-quantize comparison skipped")

        # the runner: the same figures
        text = os.path.join(tmp, "text.txt")
        with open(text, "w") as f:
            f.write(TEXT)
        outs = [run(PPL_EVAL, m, "--text", text, "--ctx", "64", "--chunks", "2", "--json") for m in (whole, first)]
        check(all(p.returncode == 0 for p in outs), f"ppl-eval: {[p.stderr for p in outs]}")
        if all(p.returncode == 0 for p in outs):
            ja, jb = (json.loads(p.stdout) for p in outs)
            check(ja["ppl"] == jb["ppl"] and ja["tokens_scored"] == jb["tokens_scored"] > 0,
                  f"ppl-eval: {ja['ppl']} / {jb['ppl']}")
        gens = [subprocess.run([GENERATE, m, "-p", "once upon", "-n", "8", "--temp", "0"], capture_output=True)
                for m in (whole, first)]  # bytes: a random model's tokens need not be UTF-8
        check(all(p.returncode == 0 for p in gens) and gens[0].stdout == gens[1].stdout and gens[0].stdout,
              f"generate: {[p.stdout for p in gens]} {[p.stderr for p in gens]}")

        # gguf-info
        p = run(GGUF_INFO, first, "--json")
        check(p.returncode == 0, f"gguf-info: {p.stderr}")
        if p.returncode == 0:
            info = json.loads(p.stdout)
            files = [t["file"] for t in info["tensors"]]
            want = [i // 10 for i in range(n_tensors)]
            check(info["n_files"] == len(parts) and info["n_tensors"] == n_tensors and files == want,
                  f"gguf-info: n_files {info['n_files']}, files {files}")
            check(info["file_size"] == sum(os.path.getsize(x) for x in parts), "gguf-info: file_size")
        p = run(GGUF_INFO, first)
        check(p.returncode == 0 and f"split GGUF: {len(parts)} files" in p.stdout, f"gguf-info text: {p.stdout[:300]}")

        # refusals
        one_line_error(run(PPL_EVAL, parts[1], "--text", text), 1, parts[1], f"give the first, {first}",
                       "a later file given")
        moved = os.path.join(tmp, "model.gguf")
        shutil.copy(first, moved)
        one_line_error(run(GGUF_INFO, moved), 1, moved, "its name does not end in", "first file renamed")
        last = parts[-1]
        os.rename(last, last + ".away")
        one_line_error(run(QUANTIZE, first, os.path.join(tmp, "x.gguf"), "Q8_0"), 1, last, "cannot open",
                       "a missing file")
        check(not os.path.exists(os.path.join(tmp, "x.gguf")), "a missing file: output written")
        shutil.copy(parts[1], last)  # says it is file 2
        one_line_error(run(GGUF_INFO, first), 1, last, "says it is file 2", "a file saying it is another")
        os.replace(last + ".away", last)

        # an output that is a later file of the split input
        before = open(parts[1], "rb").read()
        one_line_error(run(QUANTIZE, first, parts[1], "Q8_0"), 2, parts[1], "refusing to overwrite an input",
                       "output over a later file")
        check(open(parts[1], "rb").read() == before, "output over a later file: the file changed")
        check(not [n for n in os.listdir(tmp) if ".tmp." in n], "temporary files left")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
