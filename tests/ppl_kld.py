"""ppl-eval's KL-divergence statistics on stories260K and TinyStories-656K
(converted by hfconv, quantized by our quantize tool), on a subset of
tinystories-valid.txt:

- a model against itself (--base): KLD 0 everywhere, same top token 100 %,
  PPL ratio 1;
- the ordering F16 ~ F32 < Q8_0 < Q4_K_M in mean KLD (and the reverse in
  top-token agreement), with margins far above the noise;
- saved base log-probabilities (--save-logits, then --base-logits) give the
  statistics of running the base, within the 16/65535-nat steps of the
  stored codes; the file is the same bytes whoever saves it (the base model
  itself, or --base beside a quantized one) and whatever the threads;
- every instruction set's kernels (HFQ_CPU_ISA=avx2, portable) give the
  same PPL within float rounding (F32; Q4_K_M close), and within each set
  batches and threads change no bit;
- activation quantization (--act-quant) changes W8A8/W4A4 results as it
  should: INT8 with float activations is closer to the base than with
  per-token int8 ones, NVFP4 W4A4 further than with Q8_0 activations, and
  "auto" is what the files say (no input_scale: INT8 dynamic, NVFP4 none).

usage: ppl_kld.py PPL_EVAL HFCONV QUANTIZE
"""
import filecmp
import os
import sys
import tempfile

import ppl_kld_common as pk
from ppl_kld_common import check

PPL_EVAL, HFCONV, QUANTIZE = sys.argv[1:4]


def test_self(ev, models):
    for fmt in ("f32", "Q4_K_M"):
        j = ev.json(models[fmt], "--base", models[fmt])
        k = j.get("kl", {})
        zeros = [key for key in k if key.startswith(("kld", "dp")) and not key.endswith("err")]
        check(len(zeros) == 2 + 11 + 13 + 1, f"{fmt}: KL fields {sorted(k)}")
        check(all(k[key] == 0 for key in zeros), f"{fmt} against itself: {({key: k[key] for key in zeros})}")
        check(k.get("same_top") == 1 and k.get("ln_ppl_ratio") == 0 and k.get("ppl_ratio") == 1,
              f"{fmt} against itself: same top {k.get('same_top')}, ln ratio {k.get('ln_ppl_ratio')}")
        check(k.get("ppl") == k.get("ppl_base") and abs(k.get("ppl", 0) - j.get("ppl", 1)) <= 1e-6 * j.get("ppl", 1),
              f"{fmt}: PPL(Q) {k.get('ppl')}, PPL(base) {k.get('ppl_base')}, plain PPL {j.get('ppl')}")


def test_ordering(ev, name, models, base_file):
    kl = {fmt: ev.json(models[fmt], "--base-logits", base_file).get("kl", {}) for fmt in ("f16", "Q8_0", "Q4_K_M")}
    print(name, {fmt: (round(k.get("kld", -1), 7), round(k.get("same_top", -1), 4)) for fmt, k in kl.items()})
    kld = {fmt: k.get("kld", float("nan")) for fmt, k in kl.items()}
    # F16 ~ F32: far below Q8_0 (measured 4e-7 / 1e-6 against 8e-4 / 9e-4)
    check(kld["f16"] < 2e-5 and kld["f16"] < kld["Q8_0"] / 20, f"{name}: KLD F16 {kld['f16']} vs Q8_0 {kld['Q8_0']}")
    # Q8_0 < Q4_K_M (measured 8e-4 / 9e-4 against 2.7e-2 / 1.2e-2)
    check(kld["Q8_0"] < kld["Q4_K_M"] / 4, f"{name}: KLD Q8_0 {kld['Q8_0']} vs Q4_K_M {kld['Q4_K_M']}")
    top = {fmt: k.get("same_top", 0) for fmt, k in kl.items()}
    # F16 weights: at most one near-tie flipped in ~190 tokens (with the default F16 KV
    # cache the sanitizer build, compiled otherwise, measured one)
    check(top["f16"] >= 0.99 and top["f16"] >= top["Q8_0"] and top["Q8_0"] >= top["Q4_K_M"] - 0.01,
          f"{name}: same top {top}")
    for fmt, k in kl.items():   # quantiles in order
        q = [k.get(f"kld_{key}", 0) for key in ("max", "p99_9", "p99", "p95", "p90", "median", "p10", "p5", "p1",
                                                "p0_1", "min")]
        check(all(a >= b for a, b in zip(q, q[1:])), f"{name} {fmt}: KLD quantiles out of order {q}")


def test_round_trip(ev, tmp, name, models, base_file):
    """--base-logits against --base for Q4_K_M."""
    saved = os.path.join(tmp, f"{name}-beside.hfql")
    live = ev.json(models["Q4_K_M"], "--base", models["f32"], "--save-logits", saved).get("kl", {})
    stored = ev.json(models["Q4_K_M"], "--base-logits", base_file).get("kl", {})
    check(filecmp.cmp(saved, base_file, shallow=False), f"{name}: --base F32 saved other bytes than F32 itself")
    one_thread = os.path.join(tmp, f"{name}-t1.hfql")
    p = ev.run(models["f32"], "--save-logits", one_thread, "--threads", "1", "--batch", "17")
    check(p.returncode == 0 and filecmp.cmp(one_thread, base_file, shallow=False),
          f"{name}: 1 thread, batches of 17 saved other bytes {p.stderr}")
    # stored log-probs are within 16/65535/2 nats of the exact ones: PPL(base)
    # moves by about that over a few hundred tokens, KLD by far less than its size
    diffs = {key: abs(live.get(key, 0) - stored.get(key, 1)) for key in live}
    print(name, "round trip |diff|:", {key: f"{diffs[key]:.2g}" for key in ("ppl", "ppl_base", "kld", "same_top")})
    check(live.get("ppl") == stored.get("ppl"), f"{name}: PPL(Q) {live.get('ppl')} vs {stored.get('ppl')}")
    check(diffs.get("ppl_base", 1) <= 2e-5 * live.get("ppl_base", 0), f"{name}: PPL(base) moved {diffs.get('ppl_base')}")
    check(diffs.get("kld", 1) <= 1e-3 * live.get("kld", 0) + 1e-6, f"{name}: KLD moved {diffs.get('kld')}")
    check(diffs.get("same_top", 1) <= 2.0 / live.get("tokens", 1), f"{name}: same top moved {diffs.get('same_top')}")
    check(diffs.get("kld_median", 1) <= 1e-4 and diffs.get("dp_rms", 1) <= 1e-4,
          f"{name}: median KLD moved {diffs.get('kld_median')}, RMS dp {diffs.get('dp_rms')}")


def cpu_flags():
    """The CPU's extensions as /proc/cpuinfo names them (empty elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((set(l.split(":", 1)[1].split()) for l in f if l.startswith("flags")), set())
    except OSError:
        return set()


def test_isas(ev, name, models):
    """The kernels of every instruction set (HFQ_CPU_ISA caps every SIMD
    choice) give the F32 model's PPL to float rounding, and not its exact bits
    (so the cap did change the kernels: their sums go in other orders), the
    Q4_K_M model's close (an activation within rounding of an 8-bit level
    may land on the next one); within each set one thread in batches of 17
    tokens gives the same PPL, to the bit, as the default batches on all
    threads (batch and decode agree bit for bit). An F32 KV cache: an F16
    one would turn the kernels' float rounding into F16 steps of K and V
    (3e-6 of the F32 PPL between portable and AVX-512)."""
    kv = ("--kv-type", "f32")
    native = {fmt: ev.json(models[fmt], *kv).get("ppl", 0) for fmt in ("f32", "Q4_K_M")}
    for isa in ("avx2", "portable"):
        os.environ["HFQ_CPU_ISA"] = isa
        try:
            ppl = {fmt: ev.json(models[fmt], *kv).get("ppl", 0) for fmt in native}
            b17 = {fmt: ev.json(models[fmt], *kv, "--threads", "1", "--batch", "17").get("ppl", 1) for fmt in native}
        finally:
            del os.environ["HFQ_CPU_ISA"]
        print(name, f"{isa}: PPL {ppl} (every extension: {native}), batches of 17: {b17}")
        # the cap changes the F32 kernels' sums only when the CPU has a set
        # above it (AVX-512's attention sums in other orders; AVX2 vs portable)
        above = cpu_flags() & ({"avx512f"} if isa == "avx2" else {"avx2"})
        check(abs(ppl["f32"] - native["f32"]) <= 1e-6 * native["f32"] and (ppl["f32"] != native["f32"]) == bool(above),
              f"{name} {isa}: F32 PPL {ppl['f32']!r} vs {native['f32']!r} with every extension "
              f"({'a set above the cap' if above else 'no set above the cap'} on this CPU)")
        # measured: AVX2 the same bits as AVX-512 here, portable 8e-4 apart
        check(abs(ppl["Q4_K_M"] - native["Q4_K_M"]) <= 5e-3 * native["Q4_K_M"],
              f"{name} {isa}: Q4_K_M PPL {ppl['Q4_K_M']} vs {native['Q4_K_M']} with every extension")
        check(b17 == ppl, f"{name} {isa}: batches of 17 on 1 thread give PPL {b17}, default {ppl}")


def test_act_quant(ev, name, models, base_file):
    res = {}
    for fmt in ("INT8", "NVFP4"):
        for aq in ("auto", "none", "dynamic"):
            j = ev.json(models[fmt], "--base-logits", base_file, "--act-quant", aq)
            res[fmt, aq] = (j.get("ppl"), j.get("kl", {}).get("kld", float("nan")), j.get("act_quant"))
    print(name, "act-quant:", {f"{f} {a}": (round(v[0] or 0, 4), f"{v[1]:.3g}") for (f, a), v in res.items()})
    check(res["INT8", "auto"][:2] == res["INT8", "dynamic"][:2], f"{name}: INT8 auto is not dynamic")
    check(res["NVFP4", "auto"][:2] == res["NVFP4", "none"][:2], f"{name}: NVFP4 auto is not none")
    check(res["INT8", "none"][1] < res["INT8", "dynamic"][1] / 1.5,
          f"{name}: INT8 float activations KLD {res['INT8', 'none'][1]} vs int8 {res['INT8', 'dynamic'][1]}")
    check(res["NVFP4", "dynamic"][1] > res["NVFP4", "none"][1] * 1.3,
          f"{name}: NVFP4 W4A4 KLD {res['NVFP4', 'dynamic'][1]} vs Q8_0 activations {res['NVFP4', 'none'][1]}")
    check(res["INT8", "none"][2] == "none", f"{name}: JSON act_quant {res['INT8', 'none'][2]}")


def main():
    pk.skip_without_fixtures()
    with tempfile.TemporaryDirectory() as tmp:
        ev = pk.PplEval(PPL_EVAL, pk.write_subset(os.path.join(tmp, "text.txt")))
        for name in pk.MODELS:
            formats = ("Q8_0", "Q4_K_M") + (("INT8", "NVFP4") if name == "stories260K" else ())
            models = pk.build_models(HFCONV, QUANTIZE, tmp, name, formats)
            base_file = os.path.join(tmp, f"{name}-f32.hfql")
            p = ev.run(models["f32"], "--save-logits", base_file)
            check(p.returncode == 0 and os.path.isfile(base_file), f"{name}: --save-logits: {p.stderr}")
            if name == "stories260K":
                test_self(ev, models)
                test_isas(ev, name, models)
                test_act_quant(ev, name, models, base_file)
            test_ordering(ev, name, models, base_file)
            test_round_trip(ev, tmp, name, models, base_file)
    return pk.finish()


if __name__ == "__main__":
    sys.exit(main())
