"""gguf-info command line: text and JSON output, --verify (exit 4 on a flipped
byte, a note for files without hashes), --no-tensors, errors and usage.

usage: gguf_info_cli.py SPEC_WRITER GGUF_INFO
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from gguf_common import check, finish, write_spec
from gguf import GGUFWriter

SPEC_WRITER, GGUF_INFO = sys.argv[1], sys.argv[2]


def run(*args):
    return subprocess.run([GGUF_INFO, *args], capture_output=True, text=True)


def write_sample(tmp):
    spec = {
        "kv": [{"key": "general.architecture", "type": "str", "value": "llama"},
               {"key": "general.name", "type": "str", "value": "line\nbreak " + "x" * 300},
               {"key": "tokenizer.ggml.tokens", "type": "arr", "elem_type": "str",
                "value": [f"tok{i}" for i in range(50)]},
               {"key": "a.long", "type": "arr", "elem_type": "u32", "value": [str(i) for i in range(100)]}],
        "tensors": [{"name": "a.weight", "type": "f32", "ne": [16, 4], "seed": 1},
                    {"name": "b.weight", "type": "q8_0", "ne": [64, 3], "seed": 2},
                    {"name": "c.weight", "type": "f16", "ne": [10], "seed": 3}],
    }
    return write_spec(SPEC_WRITER, spec, tmp, "m")


def test_text(path):
    r = run(path)
    check(r.returncode == 0 and r.stderr == "", f"text: exit {r.returncode} {r.stderr}")
    out = r.stdout
    check("GGUF v3, 5 keys, 3 tensors, alignment 32" in out, "text: summary line")
    check("  tokenizer.ggml.tokens: arr[str; 50] [\"tok0\", \"tok1\"" in out and "\"tok7\", ...]" in out
          and "tok8" not in out, "text: string array abbreviated to 8")
    check("a.long: arr[u32; 100] [0, 1, 2, 3, 4, 5, 6, 7, ...]" in out, "text: numeric array abbreviated")
    check("general.name: str \"line\\nbreak xxx" in out and "...(311 bytes)" in out, "text: long string cut")
    check("general.name" in out and len([l for l in out.splitlines() if "general.name" in l]) == 1,
          "text: one line per key")
    rows = [l.split() for l in out.splitlines() if l.strip().startswith(("0 ", "1 ", "2 "))]
    check(rows == [["0", "a.weight", "f32", "[16,", "4]", "256", "0"],
                   ["1", "b.weight", "q8_0", "[64,", "3]", "204", "256"],
                   ["2", "c.weight", "f16", "[10]", "20", "480"]], f"text: tensor table {rows}")
    full = run(path, "--full-arrays").stdout
    check("\"tok49\"]" in full and "x" * 300 in full, "text: --full-arrays shows everything")
    nt = run(path, "--no-tensors").stdout
    check("tensors:" not in nt and "a.weight" not in nt and "metadata:" in nt, "text: --no-tensors")


def test_json(path):
    r = run(path, "--json")
    check(r.returncode == 0, f"json: exit {r.returncode}")
    info = json.loads(r.stdout)
    check(info["version"] == 3 and info["n_tensors"] == 3 and info["n_kv"] == 5, "json: header")
    check(info["file_size"] == os.path.getsize(path), "json: file size")
    toks = info["metadata"]["tokenizer.ggml.tokens"]
    check(toks["count"] == 50 and toks["truncated"] and toks["value"] == [f"tok{i}" for i in range(16)],
          "json: abbreviated array")
    check(info["metadata"]["general.name"]["value"] == "line\nbreak " + "x" * 300, "json: whole string")
    check([t["name"] for t in info["tensors"]] == ["a.weight", "b.weight", "c.weight"], "json: tensors")
    check(info["tensors"][1] == {"name": "b.weight", "type": "q8_0", "type_id": 8, "ne": [64, 3],
                                 "n_bytes": 204, "offset": 256, "file": 0}, f"json: tensor {info['tensors'][1]}")
    check("tensors" not in json.loads(run(path, "--json", "--no-tensors").stdout), "json: --no-tensors")
    return info


def test_verify(path, info, tmp):
    r = run(path, "--verify", "--no-tensors")
    check(r.returncode == 0 and "verify: all 3 tensor hashes match" in r.stdout, f"verify ok: {r.stdout}")
    v = json.loads(run(path, "--verify", "--json").stdout)["verify"]
    check(v == {"mismatches": [], "status": "ok"}, f"verify json {v}")

    # flip one byte inside b.weight's data
    with open(path, "rb") as f:
        data = bytearray(f.read())
    pos = info["data_offset"] + info["tensors"][1]["offset"] + 100
    data[pos] ^= 0x40
    bad = os.path.join(tmp, "flipped.gguf")
    with open(bad, "wb") as f:
        f.write(data)
    r = run(bad, "--verify")
    check(r.returncode == 4, f"flipped: exit {r.returncode}")
    check("verify: tensor 'b.weight': hash mismatch" in r.stdout and "a.weight': hash" not in r.stdout,
          f"flipped: names the tensor: {r.stdout}")
    check(r.stderr.startswith(bad + ": verify failed: 1 of 3 tensors"), f"flipped stderr: {r.stderr}")
    r = run(bad, "--verify", "--json")
    v = json.loads(r.stdout)["verify"]
    check(r.returncode == 4 and v == {"mismatches": ["b.weight"], "status": "mismatch"}, f"flipped json {v}")
    check(run(bad).returncode == 0, "without --verify a flipped data byte is not noticed")

    # a file without stored hashes (gguf-py's writer): a note, exit 0
    ref = os.path.join(tmp, "ref.gguf")
    w = GGUFWriter(ref, "test")
    w.add_tensor("t", np.arange(6, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = run(ref, "--verify")
    check(r.returncode == 0 and "no stored hashes" in r.stdout, f"no hashes: {r.returncode} {r.stdout}")
    v = json.loads(run(ref, "--verify", "--json").stdout)["verify"]
    check(v == {"status": "no_hashes"}, f"no hashes json {v}")


def test_errors(path, tmp):
    r = run("--help")
    check(r.returncode == 0 and "--verify" in r.stdout and "usage: gguf-info" in r.stdout, "--help")
    for args in (["--bogus", path], [], [path, path]):
        r = run(*args)
        check(r.returncode == 2 and r.stdout == "", f"usage error {args}: exit {r.returncode}")
    missing = os.path.join(tmp, "missing.gguf")
    r = run(missing)
    check(r.returncode == 1 and r.stderr == missing + ": cannot open: No such file or directory\n",
          f"missing file: {r.stderr!r}")
    with open(path, "rb") as f:
        data = f.read()
    cut = os.path.join(tmp, "cut.gguf")
    with open(cut, "wb") as f:
        f.write(data[:-300])
    for args in ([cut], [cut, "--json"], [cut, "--verify"]):
        r = run(*args)
        check(r.returncode == 1 and r.stdout == "" and r.stderr.count("\n") == 1
              and r.stderr.startswith(cut + ": tensor '") and "data extends past end of file" in r.stderr,
              f"truncated file {args}: {r.returncode} {r.stderr!r}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        path = write_sample(tmp)
        test_text(path)
        info = test_json(path)
        test_verify(path, info, tmp)
        test_errors(path, tmp)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
