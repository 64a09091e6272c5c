"""Folders depend one way (docs/architecture.md): every #include "..." of the
library's sources must point to a folder the including folder may use, and
the modules (a .c with its .h) must not include each other in a circle.

usage: layering_check.py   (env: HFQ_SOURCE)
"""
import os
import re
import sys

SOURCE = os.environ.get("HFQ_SOURCE", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# folder -> the folders it may include (besides itself); the order of
# docs/architecture.md, ground first
ALLOWED = {
    "formats": set(),
    "quant": {"formats"},
    "kernels": {"formats", "quant"},
    "kernels/cpu": {"formats", "quant", "kernels"},
    "kernels/cuda": {"formats", "quant", "kernels", "kernels/cpu"},
    "calib": {"formats", "quant", "kernels"},
    "src/common": {"formats"},
    "src/tokenizer": {"formats", "src/common"},
    "src/hf": {"formats", "quant", "src/common", "src/tokenizer"},
    "src/synth": {"formats", "quant", "src/common"},
    "src/eval": {"formats", "quant", "kernels", "src/common", "src/tokenizer"},
    "src/quantize": {"formats", "quant", "kernels", "calib", "src/common", "src/tokenizer", "src/eval"},
    "src/cli": {"formats", "quant", "kernels", "src/common"},
    "src/export": {"formats", "quant", "src/common", "src/hf", "src/tokenizer"},
}
# the one sanctioned reach downward-and-back: the graph picks its default
# backend; backends see kernels/ only through kernels/ops.h and model.h
EXCEPTIONS = {("kernels/graph.c", "kernels/cpu/cpu.h")}
# folders whose modules are checked for circles (kernels/cpu's tiles and
# matmul share types both ways inside one backend, on purpose)
NO_CIRCLES = ("formats", "quant", "calib", "src")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(path):
    return os.path.dirname(path)


def main():
    bad, edges = [], {}
    for top in ("formats", "quant", "kernels", "calib", "src"):
        for root, _, files in os.walk(os.path.join(SOURCE, top)):
            rel_root = os.path.relpath(root, SOURCE)
            if rel_root.startswith("src/tools"):
                continue
            for name in files:
                if not name.endswith((".c", ".h", ".cu", ".cuh", ".inc")):
                    continue
                rel = os.path.join(rel_root, name)
                with open(os.path.join(SOURCE, rel), encoding="utf-8", errors="replace") as f:
                    includes = INCLUDE.findall(f.read())
                here = folder_of(rel)
                if here not in ALLOWED:
                    bad.append(f"{rel}: folder {here} has no rule in tests/layering_check.py")
                    continue
                module = os.path.splitext(rel)[0].removesuffix("_priv")
                for inc in includes:
                    there = folder_of(inc)
                    if (there != here and there not in ALLOWED[here] and (rel, inc) not in EXCEPTIONS and
                            os.path.exists(os.path.join(SOURCE, inc))):
                        bad.append(f"{rel} includes {inc}: {here} may not depend on {there}")
                    target = os.path.splitext(inc)[0].removesuffix("_priv")
                    if target != module and rel.startswith(NO_CIRCLES) and os.path.exists(os.path.join(SOURCE, inc)):
                        edges.setdefault(module, set()).add(target)
    # circles between modules: depth-first search for a back edge
    state, stack = {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(edges.get(m, ())):
            if state.get(n) == 1:
                bad.append("modules include each other in a circle: " + " -> ".join(stack[stack.index(n):] + [n]))
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    for b in bad:
        print("FAIL:", b)
    n = sum(len(v) for v in edges.values())
    print(f"layering: {len(edges)} modules, {n} includes between them, {len(bad)} problem(s)")
    sys.exit(1 if bad else 0)


main()
