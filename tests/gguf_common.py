"""Shared by the GGUF Python tests: check() collects failures, finish() reports
them as the exit status, write_spec() writes a GGUF file with our writer
through tests/gguf_spec_writer (see its header for the spec format)."""
import json
import os
import subprocess

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def finish():
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("ok")
    return 0


def write_spec(spec_writer, spec, tmp, name):
    spec_path, path = os.path.join(tmp, name + ".json"), os.path.join(tmp, name + ".gguf")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    r = subprocess.run([spec_writer, "write", spec_path, path], capture_output=True, text=True)
    check(r.returncode == 0, f"spec writer: {r.stderr}")
    return path


def field_value(f):
    """A gguf-py GGUFReader field's value as GGUFWriter.add_key_value takes it."""
    from gguf import GGUFValueType
    t = f.types[0]
    if t == GGUFValueType.ARRAY:
        if f.types[1] == GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode("utf-8", "surrogateescape") for i in f.data]
        return [f.parts[i][0].item() for i in f.data]
    if t == GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8", "surrogateescape")
    return f.parts[f.data[0]][0].item()


def read_keys(path):
    """A GGUF's keys as (name, value, type, element type), general.architecture
    included, for add_keys (read once: gguf-py takes seconds over a large vocabulary)."""
    from gguf import GGUFReader, GGUFValueType
    r = GGUFReader(path)
    return [(name, field_value(f), f.types[0], f.types[1] if f.types[0] == GGUFValueType.ARRAY else None)
            for name, f in r.fields.items() if not name.startswith("GGUF.")]


def add_keys(w, keys, replace=None, drop=()):
    """keys (read_keys) into a GGUFWriter made with their architecture; values
    in replace (name -> value) instead, names in drop left out."""
    for name, value, vtype, sub in keys:
        if name != "general.architecture" and name not in drop:
            w.add_key_value(name, (replace or {}).get(name, value), vtype, sub_type=sub)


def arch_of(keys):
    return next(v for n, v, _, _ in keys if n == "general.architecture")
