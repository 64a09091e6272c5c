"""Cross-check: our Q8_0/Q4_0/Q5_0/Q5_1 quantizers produce the same bytes as
gguf-py's numpy implementations (gguf.quants.quantize), an independent
reimplementation of ggml's reference quantizers."""
import os
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

FORMATS = {"q8_0": T.Q8_0, "q4_0": T.Q4_0, "q5_0": T.Q5_0, "q5_1": T.Q5_1}


def rows(rng, n_per_row):
    """Rows of the distributions gguf-py handles like ggml (normal float
    scales; subnormal-scale corner cases are covered against ggml itself)."""
    yield "gauss", rng.standard_normal((8, n_per_row))
    yield "uniform", rng.uniform(-1, 1, (8, n_per_row))
    heavy = rng.standard_normal((8, n_per_row)) / np.sqrt(rng.uniform(0, 1, (8, n_per_row)) + 0.01)
    yield "heavy", heavy
    yield "offset", 5 + rng.uniform(0, 1, (8, n_per_row))
    yield "integers", rng.integers(-4, 5, (8, n_per_row)).astype(np.float64)
    yield "zeros", np.zeros((2, n_per_row))
    block_scale = 10.0 ** rng.uniform(-3, 3, (8, n_per_row // 32, 1))
    yield "block_scaled", (rng.standard_normal((8, n_per_row // 32, 32)) * block_scale).reshape(8, n_per_row)


def main():
    exe = os.path.join(os.environ["HFQ_BUILD"], "tests", "quant_dump")
    rng = np.random.default_rng(7)
    failures = cases = 0
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "x.f32"), os.path.join(tmp, "q.bin")
        for n_per_row in (256, 1024):
            for kind, x in rows(rng, n_per_row):
                x = x.astype(np.float32)
                x.tofile(src)
                for name, qtype in FORMATS.items():
                    subprocess.run([exe, name, str(n_per_row), src, dst], check=True)
                    cases += 1
                    ours = np.fromfile(dst, dtype=np.uint8)
                    theirs = quants.quantize(x, qtype).reshape(-1)
                    if ours.shape != theirs.shape or not np.array_equal(ours, theirs):
                        failures += 1
                        diff = np.flatnonzero(ours != theirs) if ours.shape == theirs.shape else []
                        print(f"{name} {kind} n={n_per_row}: bytes differ (first at {diff[:1]})", file=sys.stderr)
    print(f"{failures} of {cases} cases differ")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
