"""Mixtures of experts (Mixtral, Qwen3-MoE) proven against transformers and llama.cpp.

Small checkpoints built and saved by transformers 5 (4 or 8 experts, top-2, 3
layers; Qwen3-MoE with norm_topk_prob true and false; weights from the
initializer scaled up so the routing is decisive and each expert counts) are
converted with `hfconv --outtype f32` and run by our runner on the same token
ids as transformers: KL(transformers || ours) <= 1e-5 on average and the top
tokens agree at >= 99.9 % of the positions. transformers 5 saves the experts
one tensor each, as transformers 4 did (model.layers.L.mlp.experts.E.*); the
transformers 4 config layout (rope_theta) converts to the same tensors. Saved
with save_original_format=False (experts fused into 3-D tensors), the same
models convert to the same bytes (fused_layout). A Qwen3-MoE with dense layers
(decoder_sparse_step 2 and mlp_only_layers) runs against transformers too.

Then, as hf_transformers.py does for the dense families (its helpers): llama.cpp's
converter on the same checkpoints (tensors byte-identical, keys equal; Qwen3-MoE
without renormalisation is compared but for our key qwen3moe.expert_weights_norm,
docs/hfconv.md), llama-perplexity vs our ppl-eval on our file (1e-3; only where
llama.cpp computes the same model: it always renormalises), llama-quantize's
Q4_K_M and Q8_0 bytes vs ours, and our calibration statistics vs
llama-imatrix's per expert (sums and counts; against_llama_imatrix) with
llama-quantize --imatrix on our statistics giving our Q4_K_M bytes.

usage: hf_moe.py HFCONV TEST_RUNNER_LOGITS MKMODEL [PPL_EVAL LLAMA_PERPLEXITY QUANTIZE LLAMA_QUANTIZE]
"""
import os
import sys
import tempfile

import numpy as np

import hf_transformers as H   # skips (77) without torch / transformers
from gguf_common import check, finish

import transformers  # noqa: E402 (after the skip)
from hf_checkpoint import build_checkpoint


def moe(**kw):
    return H.base(intermediate_size=96, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, **kw)


# label: (config class, model class, fields, llama.cpp computes the same model)
CASES = {
    "mixtral": (transformers.MixtralConfig, transformers.MixtralForCausalLM,
                moe(num_local_experts=4, num_experts_per_tok=2, sliding_window=None), True),
    "qwen3moe-norm": (transformers.Qwen3MoeConfig, transformers.Qwen3MoeForCausalLM,
                      moe(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=48, head_dim=16,
                          norm_topk_prob=True), True),
    "qwen3moe": (transformers.Qwen3MoeConfig, transformers.Qwen3MoeForCausalLM,
                 moe(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64, head_dim=32,
                     norm_topk_prob=False, tie_word_embeddings=True), False),
    # layers 0 and 2 dense by decoder_sparse_step, 3 by mlp_only_layers: only
    # layer 1 has experts; llama.cpp has no dense feed-forward in qwen3moe
    # (its converter cannot name one, its loader wants experts in every layer:
    # docs/hfconv.md), so our file is compared with transformers only
    "qwen3moe-dense": (transformers.Qwen3MoeConfig, transformers.Qwen3MoeForCausalLM,
                       moe(num_hidden_layers=4, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=48,
                           head_dim=16, norm_topk_prob=True, decoder_sparse_step=2, mlp_only_layers=[3]), False),
}
# saved again with save_original_format=False: transformers 5's fused experts
FUSED = ("mixtral", "qwen3moe-norm")
# llama.cpp's converter refuses these checkpoints (checked, so that a llama.cpp
# that learns them is noticed)
CONVERTER_REFUSES = {"qwen3moe-dense": "Can not map tensor 'model.layers.0.mlp.down_proj.weight'"}


def converter_refuses(label, folder, tmp):
    r = H.subprocess.run([sys.executable, "-c", H.RUN_CONVERTER, H.CONVERTER_DIR, folder, "--outtype", "f32",
                          "--outfile", os.path.join(tmp, label + "-llama-cpp.gguf")], capture_output=True, text=True)
    check(r.returncode != 0 and CONVERTER_REFUSES[label] in r.stderr,
          f"{label}: llama.cpp's converter no longer refuses it: {r.stderr.strip()[-300:]}")
    print(f"{label}: llama.cpp's converter refuses it ({CONVERTER_REFUSES[label]})")


def fused_layout(label, model, folder, ref, ids, tmp, have_converter):
    """The same model saved in transformers 5's own layout (experts fused into
    3-D gate_up_proj / down_proj, Mixtral's router under mlp.): our runner
    against transformers, our tensors byte-identical to those of the
    per-expert checkpoint, and (Qwen3-MoE, whose converter class reads the
    fused form; LlamaModel does not) to llama.cpp's converter's."""
    fused = os.path.join(tmp, label + "-fused")
    model.save_pretrained(fused, save_original_format=False)
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        H.shutil.copy(os.path.join(folder, f), fused)
    from safetensors import safe_open
    with safe_open(os.path.join(fused, "model.safetensors"), "pt") as f:
        names = list(f.keys())
    check(any(n.endswith("experts.gate_up_proj") for n in names), f"{label}: transformers did not fuse the experts")
    got = H.our_logits(fused, ids, tmp, label + "-fused")
    if got is None:
        return
    H.compare(f"{label} (fused experts)", ref, got)
    a = H.gguf_contents(os.path.join(tmp, label + "-fused.gguf"))[0]
    b = H.gguf_contents(os.path.join(tmp, label + "-v5.gguf"))[0]
    check(a == b, f"{label}: fused experts convert to other tensors than per-expert ones: "
          f"{sorted(n for n in a if a[n] != b.get(n))[:4]}")
    print(f"{label}: fused experts: {len(a)} tensors {'byte-identical to' if a == b else 'DIFFERENT from'} "
          "the per-expert checkpoint's")
    if have_converter and label.startswith("qwen3moe"):
        theirs = os.path.join(tmp, label + "-fused-llama-cpp.gguf")
        r = H.subprocess.run([sys.executable, "-c", H.RUN_CONVERTER, H.CONVERTER_DIR, fused, "--outtype", "f32",
                              "--outfile", theirs], capture_output=True, text=True)
        check(r.returncode == 0, f"{label}: convert_hf_to_gguf.py on fused experts: {r.stderr.strip()[-300:]}")
        if r.returncode == 0:
            c = H.gguf_contents(theirs)[0]
            check(a == c, f"{label}: fused experts differ from llama.cpp's converter: "
                  f"{sorted(n for n in a if a[n] != c.get(n))[:4]}")
            print(f"{label}: fused experts: {'byte-identical to' if a == c else 'DIFFERENT from'} llama.cpp's converter")


LLAMA_IMATRIX = os.path.join(os.path.dirname(H.LLAMA_PPL or ""), "llama-imatrix")
# A token near a routing tie may go to another expert under llama.cpp's other
# rounding (measured: up to 1.1 % of an expert's tokens), and then every later
# layer sees a different hidden state for it: sums 2.8e-3 apart measured.
ROUTE_FLIPS, SUM_TOL = 0.02, 1e-2


def imatrix_arrays(path):
    from gguf import GGUFReader
    return {t.name: np.array(t.data, dtype=np.float64).ravel() for t in GGUFReader(path).tensors}


def against_llama_imatrix(label, gguf, tmp):
    """Our --save-stats and llama-imatrix on the same text: every entry, the
    experts' per-expert counts and sums included. Routing is discrete: a token
    near a tie may go to another expert under llama.cpp's rounding, so counts
    may differ by ROUTE_FLIPS; where they are equal the sums agree to SUM_TOL.
    Then llama-quantize --imatrix OURS and our quantize --stats OURS: the same
    Q4_K_M bytes (the per-expert importance rows used alike)."""
    ours, theirs = os.path.join(tmp, label + ".ours.imatrix"), os.path.join(tmp, label + ".llama.imatrix")
    q = H.subprocess.run([H.QUANTIZE, gguf, "--calibration-file", H.PPL_TEXT, "--save-stats", ours, "--calib-ctx",
                          "128", "--calib-chunks", "4"], capture_output=True, text=True)
    r = H.run_llama([LLAMA_IMATRIX, "-m", gguf, "-f", H.PPL_TEXT, "-o", theirs, "-c", "128", "--chunks", "4",
                     "-t", "2"], "")
    check(q.returncode == 0 and r.returncode == 0, f"{label}: calibration failed: {q.stderr[-300:]} {r.stderr[-300:]}")
    if q.returncode or r.returncode:
        return
    a, b = imatrix_arrays(ours), imatrix_arrays(theirs)
    check(set(b) <= set(a), f"{label}: llama-imatrix entries missing from ours: {sorted(set(b) - set(a))[:4]}")
    worst, flips, n_exp_entries = 0.0, 0.0, 0
    for k in (k for k in b if k.endswith(".in_sum2") and k in a):
        ca, cb = a[k.replace("in_sum2", "counts")], b[k.replace("in_sum2", "counts")]
        n_in = len(b[k]) // len(cb)
        n_exp_entries += "_exps" in k
        for m in range(len(cb)):
            flips = max(flips, abs(ca[m] - cb[m]) / max(cb[m], 1.0))
            if ca[m] == cb[m]:
                x, y = a[k][m * n_in:(m + 1) * n_in], b[k][m * n_in:(m + 1) * n_in]
                worst = max(worst, float(np.max(np.abs(x - y) / (np.abs(y) + 1e-6))))
    print(f"{label}: vs llama-imatrix: {n_exp_entries} expert entries, counts at most {100 * flips:.2f} % apart, "
          f"sums where the counts agree {worst:.2e} apart")
    check(n_exp_entries > 0 and flips <= ROUTE_FLIPS and worst < SUM_TOL, f"{label}: statistics differ from llama-imatrix's")
    mine, ref = os.path.join(tmp, label + "-imx-ours.gguf"), os.path.join(tmp, label + "-imx-llama.gguf")
    q = H.subprocess.run([H.QUANTIZE, gguf, mine, "Q4_K_M", "--stats", ours, "--quiet"], capture_output=True, text=True)
    r = H.run_llama([H.LLAMA_QUANTIZE, "--imatrix", ours, gguf, ref, "Q4_K_M", "2"], "")
    check(q.returncode == 0 and r.returncode == 0, f"{label}: quantize with statistics: {q.stderr[-300:]} {r.stderr[-300:]}")
    if q.returncode == 0 and r.returncode == 0:
        from gguf import GGUFReader
        ta = {t.name: t.data.tobytes() for t in GGUFReader(mine).tensors}
        tb = {t.name: t.data.tobytes() for t in GGUFReader(ref).tensors}
        print(f"{label} Q4_K_M with our statistics: {'byte-identical to' if ta == tb else 'DIFFERENT from'} llama-quantize's")
        check(ta == tb, f"{label}: Q4_K_M with our statistics differs from llama-quantize --imatrix")


def sparse_experts(label, gguf, tmp):
    """Calibration on 8 tokens: every expert sees fewer than 16 (HFQ_CALIB_MIN_EXPERT_TOKENS),
    each expert tensor is named in a warning with its experts' counts, the
    statistics are finite and the model still quantizes."""
    stats = os.path.join(tmp, label + ".sparse.imatrix")
    out = os.path.join(tmp, label + "-sparse.gguf")
    q = H.subprocess.run([H.QUANTIZE, gguf, out, "Q4_K_M", "--calibration-file", H.PPL_TEXT, "--calib-ctx", "8",
                          "--calib-chunks", "1", "--save-stats", stats, "--quiet"], capture_output=True, text=True)
    check(q.returncode == 0, f"{label}: quantize on 8 calibration tokens: {q.stderr[-300:]}")
    warned = [ln for ln in q.stderr.splitlines() if "fewer than 16 calibration tokens" in ln]
    a = imatrix_arrays(stats) if q.returncode == 0 else {}
    exps = [k for k in a if k.endswith("_exps.weight.in_sum2")]
    check(len(warned) == len(exps) > 0 and all(np.isfinite(a[k]).all() for k in a),
          f"{label}: {len(warned)} warnings for {len(exps)} expert tensors: {q.stderr[-400:]}")
    print(f"{label}: 8 calibration tokens: {len(warned)} expert tensors named, e.g. {warned[0] if warned else ''}")


def kld_of(label, model, base):
    q = H.subprocess.run([H.PPL_EVAL, model, "--base", base, "--text", H.PPL_TEXT, "--ctx", "128", "--chunks", "4",
                          "--json", "--quiet"], capture_output=True, text=True)
    check(q.returncode == 0, f"{label}: ppl-eval --base: {q.stderr[-300:]}")
    return H.json.loads(q.stdout)["kl"]["kld"] if q.returncode == 0 else float("nan")


def all_experts(label, gguf, tmp):
    """--calib-all-experts: every expert's count is every token, the other
    statistics are those of the routed run (the forward pass is the same);
    the KL divergence of Q4_0 with each set of statistics is reported
    (docs/calibration.md)."""
    runs = {}
    for mode, extra in (("routed", []), ("all", ["--calib-all-experts"])):
        stats, out = os.path.join(tmp, f"{label}.{mode}.imatrix"), os.path.join(tmp, f"{label}-{mode}-q4_0.gguf")
        q = H.subprocess.run([H.QUANTIZE, gguf, out, "Q4_0", "--calibration-file", H.PPL_TEXT, "--calib-ctx", "128",
                              "--calib-chunks", "4", "--save-stats", stats, "--quiet"] + extra,
                             capture_output=True, text=True)
        check(q.returncode == 0, f"{label} {mode}: {q.stderr[-300:]}")
        if q.returncode:
            return
        runs[mode] = (imatrix_arrays(stats), kld_of(label, out, gguf))
    (a, kl_routed), (b, kl_all) = runs["routed"], runs["all"]
    n_tok = a["blk.0.attn_q.weight.counts"][0]
    exp_counts = [b[k] for k in b if "_exps" in k and k.endswith(".counts")]
    check(exp_counts and all((c == n_tok).all() for c in exp_counts), f"{label}: --calib-all-experts counts")
    dense_same = all(np.array_equal(a[k], b[k]) for k in a if "_exps" not in k)
    check(dense_same, f"{label}: --calib-all-experts changed the statistics outside the experts")
    print(f"{label}: Q4_0 KLD with routed statistics {kl_routed:.5f}, with --calib-all-experts {kl_all:.5f}")


# Rows of 256 (hidden and expert width), so the K-quants and IQ4_XS quantize the
# experts themselves instead of falling back as they do on the rows of 64 above:
# llama.cpp's expert rules (ffn_down_exps and the rest) on 3-D tensors; MXFP4_MOE
# makes the experts MXFP4 and the rest Q8_0.
KQUANT_CASE = (transformers.Qwen3MoeConfig, transformers.Qwen3MoeForCausalLM,
               H.base(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_experts=8,
                      num_experts_per_tok=2, moe_intermediate_size=256, head_dim=64, norm_topk_prob=True,
                      rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}))
# i8_experts: KLD from F32 at most these times Q8_0's (measured on its model: INT8 1.24x, FP8
# W8A8 8.4x; experts read with expert 0's scales: 16x and 22x)
I8_KLD_BOUND = {"INT8": 4.0, "FP8_E4M3": 16.0}
KQUANT_PRESETS = ("Q2_K", "Q3_K_M", "Q4_K_S", "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_XS", "Q4_0", "Q8_0", "MXFP4_MOE")


def i8_experts(gguf, tmp):
    """INT8 and FP8 experts (3-D codes, their per-row scales [1][rows of an
    expert][experts] as quantize writes them) load and run: KL divergence
    from the F32 model within a bound of Q8_0's (an expert read with
    another's scales is far off)."""
    klds = {}
    for preset in ("Q8_0", "INT8", "FP8_E4M3"):
        out = os.path.join(tmp, f"qwen3moe-256-{preset}.gguf")
        q = H.subprocess.run([H.QUANTIZE, gguf, out, preset, "--quiet"], capture_output=True, text=True)
        check(q.returncode == 0, f"qwen3moe-256 {preset}: quantize: {q.stderr[-300:]}")
        klds[preset] = kld_of(f"qwen3moe-256 {preset}", out, gguf) if q.returncode == 0 else float("nan")
    print("qwen3moe-256 experts, KLD from F32: " + ", ".join(f"{p} {k:.6f}" for p, k in klds.items()))
    check(klds["INT8"] <= I8_KLD_BOUND["INT8"] * klds["Q8_0"], f"qwen3moe-256 INT8 experts: KLD {klds['INT8']}")
    check(klds["FP8_E4M3"] <= I8_KLD_BOUND["FP8_E4M3"] * klds["Q8_0"],
          f"qwen3moe-256 FP8_E4M3 experts: KLD {klds['FP8_E4M3']}")


def kquants(tmp, have_llama):
    folder, _ = build_checkpoint("qwen3moe-256", *KQUANT_CASE, tmp, H.MKMODEL, H.VOCAB)
    gguf = os.path.join(tmp, "qwen3moe-256.gguf")
    r = H.subprocess.run([H.HFCONV, folder, "-o", gguf, "--outtype", "f32", "-q"], capture_output=True, text=True)
    check(r.returncode == 0, f"qwen3moe-256: hfconv: {r.stderr.strip()}")
    if r.returncode != 0:
        return
    if have_llama:
        H.against_llama_quantize("qwen3moe-256", gguf, tmp, KQUANT_PRESETS)
        mixed(gguf, tmp)
    if H.PPL_EVAL:
        i8_experts(gguf, tmp)


def nvfp4_measured_as_written(gguf, stats, weights, moments, tmp):
    """NVFP4 experts are priced as the driver writes them: each expert with
    its own global scale (the measured error of a 3-D NVFP4 tensor equals
    the error of the file quantize writes with the same statistics)."""
    from gguf import GGMLQuantizationType, GGUFReader, quants
    meas, out = os.path.join(tmp, "moe-nvfp4-meas.json"), os.path.join(tmp, "moe-nvfp4-stats.gguf")
    p = H.subprocess.run([H.QUANTIZE, gguf, "--stats", stats, "--candidates", "nvfp4", "--save-measurements", meas],
                         capture_output=True, text=True)
    q = H.subprocess.run([H.QUANTIZE, gguf, out, "NVFP4", "--pure", "--stats", stats, "--quiet"],
                         capture_output=True, text=True)
    check(p.returncode == 0 and q.returncode == 0, f"nvfp4 measured: {p.stderr[-300:]} {q.stderr[-300:]}")
    if p.returncode or q.returncode:
        return
    with open(meas) as f:
        got = {t["name"]: t["errors"][0] for t in H.json.load(f)["tensors"]}
    rd = GGUFReader(out)
    scales = {t.name: np.array(t.data, dtype=np.float64).reshape(-1) for t in rd.tensors if t.name.endswith(".scale")}
    worst, n = 0.0, 0
    for t in rd.tensors:
        if t.tensor_type != GGMLQuantizationType.NVFP4 or not t.name.endswith("_exps.weight") or t.name not in moments:
            continue
        a = weights[t.name].astype(np.float64)             # [experts][rows][cols]
        g = scales[t.name[:-len("weight")] + "scale"]
        back = quants.dequantize(np.array(t.data), GGMLQuantizationType.NVFP4).astype(np.float64)
        back = back.reshape(a.shape) * g[:, None, None]
        want = ((a - back) ** 2 * moments[t.name][:, None, :]).sum()
        worst = max(worst, abs(got[t.name] - want) / want)
        n += 1
    check(n > 0, "nvfp4 measured: no NVFP4 expert tensors")
    check(worst < 1e-6, f"nvfp4 measured errors of the experts vs the written file's: {worst}")
    print(f"nvfp4: {n} expert tensors, measured errors equal the written file's (per-expert scales) to {worst:.1e}")


def mixed(gguf, tmp):
    """Mixed precision (docs/mixed.md) on the 3-D expert tensors: with
    per-expert statistics in llama.cpp's imatrix layout (in_sum2 [experts,
    cols], counts [experts]), each measured error is
    sum_experts sum_rows sum_j (W - Q(W))^2 in_sum2[e][j] / count[e] (numpy,
    Q8_0 and F16); under a budget each 3-D tensor is one choice among the
    candidates and the written bytes are the predicted ones; a recipe rule
    gives the experts their own format."""
    from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter, quants
    rng = np.random.default_rng(5)
    weights = {t.name: np.array(t.data, dtype=np.float32).reshape([int(x) for x in reversed(t.shape)])
               for t in GGUFReader(gguf).tensors}
    stats = os.path.join(tmp, "moe-stats.gguf")
    w = GGUFWriter(stats, "imatrix")
    w.add_type("imatrix")
    moments = {}
    for name, a in weights.items():
        if a.ndim < 2 or name == "token_embd.weight" or "ffn_gate_inp" in name:
            continue
        n_mat = a.shape[0] if a.ndim == 3 else 1
        sum2 = rng.uniform(0.1, 3.0, size=(n_mat, a.shape[-1])).astype(np.float32)
        count = rng.integers(5, 500, size=(n_mat, 1)).astype(np.float32)
        moments[name] = sum2.astype(np.float64) / count.astype(np.float64)
        w.add_tensor(name + ".in_sum2", sum2)
        w.add_tensor(name + ".counts", count)
    for name in (n for n in weights if "ffn_gate_inp" in n):   # the router: its input is ffn_gate_exps'
        w.add_tensor(name + ".in_sum2", np.ones((1, weights[name].shape[-1]), dtype=np.float32))
        w.add_tensor(name + ".counts", np.ones((1, 1), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    meas = os.path.join(tmp, "moe-meas.json")
    p = H.subprocess.run([H.QUANTIZE, gguf, "--stats", stats, "--candidates", "q8_0,f16", "--save-measurements", meas],
                         capture_output=True, text=True)
    check(p.returncode == 0, f"mixed: measuring: {p.stderr[-300:]}")
    if p.returncode:
        return
    with open(meas) as f:
        got = {t["name"]: t for t in H.json.load(f)["tensors"]}
    worst, n_exps = 0.0, 0
    for name, t in got.items():
        if name not in moments:
            continue
        a = weights[name].astype(np.float32)
        back = {"q8_0": quants.dequantize(quants.quantize(a, GGMLQuantizationType.Q8_0), GGMLQuantizationType.Q8_0),
                "f16": a.astype(np.float16).astype(np.float32)}
        mom = moments[name] if a.ndim == 3 else moments[name][0]
        for k, fmt in enumerate(("q8_0", "f16")):
            d2 = (a.astype(np.float64) - back[fmt].astype(np.float64)) ** 2
            want = (d2 * (mom[:, None, :] if a.ndim == 3 else mom)).sum()
            worst = max(worst, abs(t["errors"][k] - want) / want)
        n_exps += a.ndim == 3
    check(n_exps == 6, f"mixed: {n_exps} expert tensors measured")
    check(worst < 1e-9, f"mixed: measured errors vs numpy: {worst}")
    print(f"mixed: {len(got)} tensors measured ({n_exps} of 3-D experts, per-expert statistics), errors equal "
          f"numpy's to {worst:.2e}")
    nvfp4_measured_as_written(gguf, stats, weights, moments, tmp)
    out = os.path.join(tmp, "moe-mixed.gguf")
    p = H.subprocess.run([H.QUANTIZE, gguf, out, "--measurements", meas, "--target-bpw", "12", "--json"],
                         capture_output=True, text=True)
    check(p.returncode == 0, f"mixed: allocation: {p.stderr[-300:]}")
    if p.returncode == 0:
        res = H.json.loads(p.stdout)
        exps = [t for t in res["tensors"] if "_exps" in t["name"]]
        chosen = {t["to"] for t in exps}
        check(len(exps) == 6 and all("measured: 2 options" in t.get("note", "") for t in exps),
              f"mixed: the expert tensors are not each one choice: {exps[:2]}")
        check(res["written_tensor_bytes"] == res["allocation"]["predicted_bytes"], "mixed: written = predicted")
        print(f"mixed: budget 12 bpw: the 6 expert tensors one choice each ({sorted(chosen)}), written "
              f"{res['written_tensor_bytes']} bytes = predicted")
    recipe = os.path.join(tmp, "moe-recipe.json")
    with open(recipe, "w") as f:
        H.json.dump({"name": "experts", "rules": [{"match": "_exps", "format": "q4_K"}],
                     "default": {"format": "q8_0"}}, f)
    p = H.subprocess.run([H.QUANTIZE, gguf, out, "--recipe", recipe, "--quiet"], capture_output=True, text=True)
    check(p.returncode == 0, f"mixed: recipe: {p.stderr[-300:]}")
    if p.returncode == 0:
        types = {t.name: t.tensor_type.name for t in GGUFReader(out).tensors}
        check(all(v == "Q4_K" for k, v in types.items() if "_exps" in k), f"mixed: recipe types {types}")


def nvfp4_experts(label, gguf, tmp):
    """Our NVFP4 of a MoE file: one global scale per expert ([n_expert], the
    scale llama.cpp's loader takes for *_exps), each expert's own max |w| /
    (6 * 448); llama-perplexity runs it with ppl-eval's perplexity."""
    out = os.path.join(tmp, f"{label}-nvfp4.gguf")
    q = H.subprocess.run([H.QUANTIZE, gguf, out, "NVFP4", "--quiet"], capture_output=True, text=True)
    check(q.returncode == 0, f"{label} NVFP4: quantize: {q.stderr.strip()[-300:]}")
    if q.returncode != 0:
        return
    src = {t.name: t for t in H.GGUFReader(gguf).tensors}
    got = {t.name: t for t in H.GGUFReader(out).tensors}
    n_exps = 0
    for name, t in got.items():
        if not name.endswith("_exps.weight") or t.tensor_type.name != "NVFP4":
            continue   # (rows NVFP4's 64 do not divide fall back to MXFP4)
        n_exps += 1
        w = np.asarray(src[name].data, dtype=np.float32)   # [n_expert][rows][cols]
        scale = np.asarray(got[name[:-len("weight")] + "scale"].data, dtype=np.float32)
        want = np.abs(w.reshape(w.shape[0], -1)).max(axis=1) / np.float32(6.0 * 448.0)
        check(scale.shape == (w.shape[0],) and np.array_equal(scale, want.astype(np.float32)),
              f"{label} NVFP4 {name}: scales {scale} are not each expert's max / 2688 {want}")
    check(n_exps > 0, f"{label} NVFP4: no NVFP4 expert tensors")
    # NVFP4's Q8_0 activation rows add rounding flips (llama_load_check.py's 5e-3)
    H.against_llama_runtime(f"{label} NVFP4", out, tol=5e-3)


def main():
    rng = np.random.default_rng(18)
    ids = [1] + [int(i) for i in rng.integers(3, H.VOCAB, H.N_POS - 1)]
    have_converter = os.path.isfile(os.path.join(H.CONVERTER_DIR, "convert_hf_to_gguf.py"))
    have_runtime = bool(H.PPL_EVAL and H.LLAMA_PPL and os.access(H.LLAMA_PPL, os.X_OK))
    have_quantize = bool(H.QUANTIZE and H.LLAMA_QUANTIZE and os.access(H.LLAMA_QUANTIZE, os.X_OK))
    with tempfile.TemporaryDirectory() as tmp:
        for label, (cfg_cls, model_cls, fields, same_in_llama) in CASES.items():
            v5, model = build_checkpoint(label, cfg_cls, model_cls, fields, tmp, H.MKMODEL, H.VOCAB)
            ref = H.hf_logits(model, ids)
            v4 = os.path.join(tmp, label + "-v4")
            H.to_v4(v5, v4)
            for layout, folder in (("v5", v5), ("v4", v4)):
                got = H.our_logits(folder, ids, tmp, f"{label}-{layout}")
                if got is not None:
                    H.compare(f"{label} ({layout} config)", ref, got)
            ours = os.path.join(tmp, label + "-v5.gguf")
            if not os.path.isfile(ours):
                continue
            if label in FUSED:
                fused_layout(label, model, v5, ref, ids, tmp, have_converter)
            if os.path.isfile(os.path.join(tmp, label + "-v4.gguf")):
                a, b = H.gguf_contents(ours)[0], H.gguf_contents(os.path.join(tmp, label + "-v4.gguf"))[0]
                check(a == b, f"{label}: the transformers 4 layout converts to other tensors")
            if have_converter and label in CONVERTER_REFUSES:
                converter_refuses(label, v5, tmp)
            elif have_converter:
                # our one key llama.cpp's converter does not write (docs/hfconv.md)
                keys = H.gguf_contents(ours)[1]
                extra = () if fields.get("norm_topk_prob") is not False else ("qwen3moe.expert_weights_norm",)
                check(not extra or keys.get(extra[0]) is False, f"{label}: no expert_weights_norm = false")
                apart, H.KEYS_APART = H.KEYS_APART, H.KEYS_APART + extra
                H.against_llama_cpp(label, v5, tmp)
                H.KEYS_APART = apart
            if have_runtime and same_in_llama:
                H.against_llama_runtime(label, ours)
            if have_runtime and same_in_llama and have_quantize:
                nvfp4_experts(label, ours, tmp)
            if have_quantize:
                H.against_llama_quantize(label, ours, tmp)
            if have_quantize and have_runtime and same_in_llama and os.access(LLAMA_IMATRIX, os.X_OK):
                against_llama_imatrix(label, ours, tmp)
            if have_quantize:
                sparse_experts(label, ours, tmp)
            if have_quantize and H.PPL_EVAL:
                all_experts(label, ours, tmp)
        if H.QUANTIZE:
            kquants(tmp, have_quantize)
    if not have_converter:
        print(f"SKIP (part): llama.cpp's converter is not installed in {H.CONVERTER_DIR}")
    if not have_quantize or not have_runtime:
        print("SKIP (part): llama-quantize / llama-perplexity not built (scripts/build_reference.sh)")
    sys.exit(finish())


if __name__ == "__main__":
    main()
