"""quantize --export compressed-tensors, proven with compressed-tensors and transformers.

Small transformers checkpoints (random weights scaled so the logits are
peaked, norms and biases randomized) of four families: Llama (q/k rows
permuted by hfconv, so the export must undo it), Qwen2 (q/k/v biases), Qwen3
(q/k norms, tied embeddings), Phi-3 as Phi-4 (fused qkv_proj, gate_up_proj). Each is converted with `hfconv --outtype f32`,
then for every preset both written as our GGUF (`quantize IN OUT.gguf PRESET`)
and exported (`quantize IN --export compressed-tensors DIR CT_PRESET`, the same
options, so the same codes and scales):

- the folder's quantization_config validates against compressed-tensors' own
  pydantic model (QuantizationConfig) and names the expected scheme;
- transformers loads the folder with compressed-tensors decompressing it
  (CompressedTensorsConfig(run_compressed=False)); its modules keep the
  scheme, so activations are quantized as in a serving engine (static scale
  or per token) by compressed-tensors' own code;
- its logits match our runner's on our GGUF of the same preset: per position
  KL(transformers || ours) averaged <= 1e-4 (same codes and scales: float
  rounding, and ties of activation rounding, apart);
- round trip: every decompressed weight equals our GGUF's weight decoded
  (codes times scales, q/k rows back in Hugging Face's order) to float
  rounding; refusals: a block-format tensor, a family it cannot write back
  (Gemma), a non-empty OUT_DIR, nothing left;
- a mixed recipe (FP8 per tensor, FP8 per channel, INT8 per group) gives one
  config group per scheme, targeting its layers by name;
- W4A16 / W4A16_ASYM (no GGUF of ours holds INT4 in groups of 128): every
  packed weight, scale, zero point and shape bit-identical to
  compressed-tensors' own compression of the same BF16 weights, and the
  folder loads and runs in transformers; calibrated: importance-weighted
  scales (--importance) and GPTQ (the default), whose decompressed weights are
  exactly its codes' (q - z) * s and whose bytes do not depend on threads.

Skips (exit 77) without torch, transformers or compressed-tensors.

usage: export_ct.py QUANTIZE HFCONV TEST_RUNNER_LOGITS MKMODEL
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from gguf_common import check, finish

try:
    import torch
    import transformers
    from compressed_tensors.quantization import QuantizationConfig
    from safetensors.torch import load_file
    from hf_checkpoint import build_checkpoint  # imports torch
    from ct_common import ct_model, hf_order, mean_kl, runner_logits
except ImportError as e:
    print(f"SKIP: torch/transformers/compressed-tensors not installed ({e})")
    sys.exit(77)

QUANTIZE, HFCONV, RUNNER, MKMODEL = sys.argv[1:5]
SOURCE = os.environ.get("HFQ_SOURCE", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
CALIB = ["--calibration-file", os.path.join(SOURCE, "docs", "architecture.md"), "--calib-ctx", "64",
         "--calib-chunks", "8"]
VOCAB, N_POS, MAX_KL = 512, 96, 1e-4
# Weights N(0, 0.05): logits spread enough that activation quantization is
# visible (the control below: switching compressed-tensors' activation
# quantization off must move the logits past MAX_KL), not so chaotic that a
# tie rounded the other way in layer 0 swamps the comparison.
INIT = 0.05


def base(**kw):
    d = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=512, rms_norm_eps=1e-5,
             initializer_range=INIT, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    d.update(kw)
    return d


CASES = {
    "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM, base()),
    "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM, base()),
    "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM, base(head_dim=16, tie_word_embeddings=True)),
    # Phi-4's layout: fused qkv_proj and gate_up_proj exported under their own names
    "phi4": (transformers.Phi3Config, transformers.Phi3ForCausalLM, base(
        pad_token_id=0, sliding_window=None, original_max_position_embeddings=512)),
}

# label: (CT_PRESET, extra options, expected weight strategy, input activations (strategy, dynamic) or None)
PRESETS = [
    ("fp8-dynamic", "FP8_DYNAMIC", [], "channel", ("token", True)),
    ("fp8-static", "FP8", CALIB + ["--act-scales"], "channel", ("tensor", False)),
    ("w8a8-dynamic", "W8A8", CALIB + ["--no-importance", "--smoothquant"], "channel", ("token", True)),
    ("w8a8-static", "W8A8", CALIB + ["--act-scales"], "channel", ("tensor", False)),
    ("nvfp4a16", "NVFP4A16", [], "tensor_group", None),
    ("nvfp4-w4a4", "NVFP4", CALIB + ["--act-scales"], "tensor_group", ("tensor_group", "local")),
]
# A mixed recipe: FP8 per tensor, FP8 per channel, INT8 per group of 32 -> three config groups
# (static activation scales: see docs/export.md on compressed-tensors' dynamic INT8 scale).
RECIPE = {"name": "export-mixed", "rules": [
    {"match": "attn_v", "format": "fp8_e4m3", "granularity": "tensor"},
    {"match": "attn_", "format": "fp8_e4m3"},
    {"match": "ffn_", "format": "int8", "granularity": "group", "group_size": 32}],
    "default": {"format": "f16"}}
OUR_PRESET = {"FP8_DYNAMIC": "FP8_E4M3", "FP8": "FP8_E4M3", "W8A8": "INT8", "NVFP4A16": "NVFP4", "NVFP4": "NVFP4"}


def build(label, tmp):
    cfg_cls, model_cls, fields = CASES[label]
    return build_checkpoint(label, cfg_cls, model_cls, fields, tmp, MKMODEL, VOCAB)[0]


def ok(cond, msg):
    check(cond, msg)
    return cond


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def our_logits(gguf, ids, tmp):
    return runner_logits(RUNNER, gguf, ids, VOCAB, tmp)


def check_config(tag, folder, ct_preset, w_strategy, acts):
    cfg = json.load(open(os.path.join(folder, "config.json")))
    qc = cfg.get("quantization_config")
    try:
        parsed = QuantizationConfig.model_validate(qc)
    except Exception as e:   # the pydantic error, whatever its class
        check(False, f"{tag}: quantization_config does not validate: {e}")
        return
    groups = list(parsed.config_groups.values())
    check(len(groups) == 1 and groups[0].targets == ["Linear"], f"{tag}: expected one group on Linear: {qc}")
    w, a = groups[0].weights, groups[0].input_activations
    check(w.strategy == w_strategy, f"{tag}: weight strategy {w.strategy}, expected {w_strategy}")
    if acts is None:
        check(a is None, f"{tag}: input activations {a}, expected none")
    else:
        check(a is not None and (a.strategy, a.dynamic) == acts, f"{tag}: input activations {a}, expected {acts}")
    check(parsed.ignore == ["lm_head"], f"{tag}: ignore {parsed.ignore}, expected ['lm_head']")


def gguf_weights(gguf):
    """Our GGUF's quantized weights decoded with numpy: {name: float32 [rows, cols]}."""
    from gguf import GGUFReader
    from gguf.quants import dequantize
    r = GGUFReader(gguf)
    t = {x.name: x for x in r.tensors}
    qext = {k[len("hfq.qext."):]: f.contents() for k, f in r.fields.items() if k.startswith("hfq.qext.") and
            k != "hfq.qext.version"}
    out = {}
    for name, x in t.items():
        if not name.endswith(".weight") or name.startswith(("token_embd", "output")) or len(x.shape) != 2:
            continue
        scale = t.get(name[:-len("weight")] + "scale")
        if name in qext:
            codes = np.array(x.data).reshape(int(x.shape[1]), int(x.shape[0]))
            if qext[name] == "int8":
                vals = codes.view(np.int8).astype(np.float32)
            else:
                vals = torch.from_numpy(codes.view(np.uint8).copy()).view(torch.float8_e4m3fn).float().numpy()
            s = np.array(scale.data, dtype=np.float32).reshape(-1)
            sh = [int(v) for v in scale.shape]
            if len(sh) == 2 and sh[1] < codes.shape[0]:   # FP8 128x128 blocks: scale ne [cols/128, rows/128]
                full = np.repeat(np.repeat(s.reshape(sh[1], sh[0]), 128, 0), 128, 1)
                out[name] = vals * full[:codes.shape[0], :codes.shape[1]]
                continue
            s = s.reshape(codes.shape[0], -1) if s.size > 1 else s.reshape(1, 1)
            out[name] = (vals.reshape(codes.shape[0], s.shape[1], -1) * s[:, :, None]).reshape(codes.shape)
        elif int(x.tensor_type) == 40:
            vals = dequantize(x.data, x.tensor_type).reshape(int(x.shape[1]), int(x.shape[0])).astype(np.float32)
            out[name] = vals * (np.float32(scale.data[0]) if scale is not None else np.float32(1))
    return out


def check_round_trip(tag, label, model, gguf, tol):
    ours = gguf_weights(gguf)
    sd = model.state_dict()
    heads = {"attn_q": 4, "attn_k": 2}
    worst, n = 0.0, 0
    names = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
             "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
             "ffn_down": "mlp.down_proj"}
    fused = CASES[label][0] is transformers.Phi3Config
    if fused:   # attn_qkv and ffn_up (gate and up) as Phi-3 names them
        names.update(attn_qkv="self_attn.qkv_proj", ffn_up="mlp.gate_up_proj")
    for name, w in ours.items():
        _, layer, kind, _ = name.split(".")
        hf = names[kind]
        if label == "llama" and kind in heads:
            w = hf_order(w, heads[kind])
        theirs = sd[f"model.layers.{layer}.{hf}.weight"].float().numpy()
        err = float(np.max(np.abs(theirs - w) / np.maximum(np.abs(w), 1e-30)))
        worst, n = max(worst, err), n + 1
    want = (4 if fused else 7) * CASES[label][2]["num_hidden_layers"]
    check(n == want, f"{tag}: {n} quantized weights compared, expected {want}")
    check(worst <= tol, f"{tag}: decompressed weights differ from our GGUF's by {worst:.3g} (relative to amax)")
    return worst


def check_mixed_config(tag, label, folder):
    qc = json.load(open(os.path.join(folder, "config.json")))["quantization_config"]
    try:
        parsed = QuantizationConfig.model_validate(qc)
    except Exception as e:
        check(False, f"{tag}: quantization_config does not validate: {e}")
        return
    got = sorted((g.weights.type, g.weights.strategy, g.weights.group_size, tuple(sorted(g.targets)))
                 for g in parsed.config_groups.values())
    layers = range(CASES[label][2]["num_hidden_layers"])
    # Phi-3's fused projections: attn_qkv takes the "attn_" rule, not attn_v's
    fused = CASES[label][0] is transformers.Phi3Config
    per_tensor = [] if fused else [("float", "tensor", None,
                                    tuple(f"model.layers.{i}.self_attn.v_proj" for i in layers))]
    want = sorted(per_tensor + [
        ("float", "channel", None, tuple(sorted(f"model.layers.{i}.self_attn.{p}_proj" for i in layers
                                                for p in (("qkv", "o") if fused else ("q", "k", "o"))))),
        ("int", "group", 32, tuple(sorted(f"model.layers.{i}.mlp.{p}_proj" for i in layers
                                          for p in (("gate_up", "down") if fused else ("gate", "up", "down")))))])
    check(got == want, f"{tag}: config groups {got}, expected {want}")
    check(parsed.format == "mixed-precision", f"{tag}: format {parsed.format}, expected mixed-precision")


def check_fused_scales(tag, label, folder):
    """NVFP4: q/k/v and gate/up of a layer hold one weight_global_scale (and input_global_scale), the
    smallest of the members' own 448 * 6 / amax, as llm-compressor writes them for vLLM's fused layers."""
    sd = {}
    for f in os.listdir(folder):
        if f.endswith(".safetensors"):
            sd.update(load_file(os.path.join(folder, f)))
    groups = [("self_attn", ("q_proj", "k_proj", "v_proj")), ("mlp", ("gate_proj", "up_proj"))]
    n = 0
    for layer in range(CASES[label][2]["num_hidden_layers"]):
        for block, members in groups:
            names = [f"model.layers.{layer}.{block}.{m}" for m in members]
            if f"{names[0]}.weight_packed" not in sd:   # Phi-3's fused qkv_proj / gate_up_proj: one tensor
                continue
            for kind in ("weight_global_scale", "input_global_scale"):
                vals = [float(sd[f"{x}.{kind}"]) for x in names if f"{x}.{kind}" in sd]
                check(len(set(vals)) <= 1, f"{tag}: {kind} of {names} differ: {vals}")
            n += 1
    fused = CASES[label][0] is transformers.Phi3Config
    check(n == (0 if fused else 2 * CASES[label][2]["num_hidden_layers"]), f"{tag}: {n} fused groups checked")


W4A4_MORE = [list(np.random.default_rng(seed).integers(3, VOCAB, N_POS)) for seed in (8, 9)]


def w4a4_kl(model, gguf, ids, tmp):
    """KL(transformers || ours) on another sequence, activation quantization on."""
    for m in model.modules():
        if hasattr(m, "quantization_scheme"):
            m.quantization_enabled = True
    with torch.no_grad():
        theirs = model(torch.tensor([ids])).logits[0].double().numpy()
    mine = our_logits(gguf, ids, tmp)
    return float("inf") if mine is None else mean_kl(theirs, mine)


def one(label, folder, gguf, tmp, ids):
    recipe = os.path.join(tmp, "recipe.json")
    json.dump(RECIPE, open(recipe, "w"))
    for tag_p, ct_preset, extra, w_strategy, acts in PRESETS + [("mixed", None, CALIB + ["--act-scales"], None, None)]:
        tag = f"{label}/{tag_p}"
        ours_gguf = os.path.join(tmp, f"{label}-{tag_p}.gguf")
        out_dir = os.path.join(tmp, f"{label}-{tag_p}-ct")
        how = [OUR_PRESET[ct_preset]] if ct_preset else ["--recipe", recipe]
        # the export's engines round NVFP4 activations max -> 6: the GGUF compared with it too
        search = ["--no-act-search"] if "--act-scales" in extra else []
        r = run([QUANTIZE, gguf, ours_gguf, "--quiet"] + how + extra + search)
        if not ok(r.returncode == 0, f"{tag}: quantize failed: {r.stderr.strip()}"):
            continue
        how = [ct_preset] if ct_preset else ["--recipe", recipe]
        r = run([QUANTIZE, gguf, "--export", "compressed-tensors", out_dir, "--quiet", "--tokenizer-from", folder]
                + how + extra)
        if not ok(r.returncode == 0, f"{tag}: export failed: {r.stderr.strip()}"):
            continue
        check(os.path.exists(os.path.join(out_dir, "tokenizer.json")), f"{tag}: no tokenizer.json")
        check(not os.path.exists(os.path.join(out_dir, "quantized.gguf")), f"{tag}: the temporary GGUF is left")
        if ct_preset and ct_preset.startswith("NVFP4"):
            check_fused_scales(tag, label, out_dir)
        if ct_preset:
            check_config(tag, out_dir, ct_preset, w_strategy, acts)
        else:
            check_mixed_config(tag, label, out_dir)
        try:
            model = ct_model(out_dir)
        except Exception as e:
            check(False, f"{tag}: transformers/compressed-tensors cannot load the export: {e}")
            continue
        # NVFP4 decompressed in float32 (ct_model): 1 / weight_global_scale rounds, 2^-23
        worst = check_round_trip(tag, label, model, ours_gguf, 1e-6)
        with torch.no_grad():
            theirs = model(torch.tensor([ids])).logits[0].double().numpy()
            for m in model.modules():
                if hasattr(m, "quantization_scheme"):
                    m.quantization_enabled = False
            float_acts = model(torch.tensor([ids])).logits[0].double().numpy()
        mine = our_logits(ours_gguf, ids, tmp)
        if mine is None:
            continue
        kl, control = mean_kl(theirs, mine), mean_kl(float_acts, mine)
        top = float(np.mean(np.argmax(theirs, 1) == np.argmax(mine, 1)))
        more = ""
        if acts and acts[0] == "tensor_group":
            # W4A4: an activation value at an FP4 rounding tie goes either way with the 1-ulp difference of
            # 1 / input_global_scale and changes every layer after it (docs/export.md); such a tie is in one
            # sequence, a wrong scale in all: the median over three sequences is held to the limit
            kls = [kl] + [w4a4_kl(model, ours_gguf, seq, tmp) for seq in W4A4_MORE]
            kl = float(np.median(kls))
            more = f" (median of {', '.join(f'{k:.3g}' for k in kls)})"
        check(kl <= MAX_KL, f"{tag}: KL(transformers || ours) {kl:.3g} > {MAX_KL}{more}")
        print(f"{tag}: weights within {worst:.2g}, KL {kl:.3g}{more} (float activations: {control:.3g}), "
              f"top-1 agreement {top:.3f}")


W4_CASE = (transformers.LlamaConfig, transformers.LlamaForCausalLM,
           base(hidden_size=128, intermediate_size=256))   # rows of whole groups of 128


def int4_reference(w, asym):
    """compressed-tensors' own W4A16 compression of weight w (bfloat16 [rows, cols]):
    calculate_qparams on each group's min/max, then PackedQuantizationCompressor.compress."""
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    from compressed_tensors.quantization import preset_name_to_scheme
    from compressed_tensors.quantization.utils import calculate_qparams
    scheme = preset_name_to_scheme("W4A16_ASYM" if asym else "W4A16", ["Linear"])
    g = w.unflatten(-1, (w.shape[1] // 128, 128))
    scale, zp = calculate_qparams(g.amin(-1), g.amax(-1), scheme.weights)
    state = {"weight": w, "weight_scale": scale, "weight_zero_point": zp}
    return PackedQuantizationCompressor.compress(state, scheme)


def int4(tmp, ids):
    """W4A16 and W4A16_ASYM: no GGUF format of ours holds them, so the proof is
    bit-exactness with compressed-tensors' own compressor on the same BF16
    weights, and the folder loading and running in transformers."""
    cfg_cls, model_cls, fields = W4_CASE
    CASES["llama-w4"] = W4_CASE
    folder = build("llama-w4", tmp)
    gguf, ref = os.path.join(tmp, "llama-w4.gguf"), os.path.join(tmp, "llama-w4-bf16.gguf")
    r = run([HFCONV, folder, "-o", gguf, "--outtype", "f32", "-q"])
    r2 = run([QUANTIZE, gguf, ref, "BF16", "--quiet"])
    if not ok(r.returncode == 0 and r2.returncode == 0, f"llama-w4: hfconv/quantize failed: {r.stderr}{r2.stderr}"):
        return
    from gguf import GGUFReader
    weights = {t.name: t for t in GGUFReader(ref).tensors}
    kinds = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
             "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
             "ffn_down": "mlp.down_proj"}
    heads = {"attn_q": fields["num_attention_heads"], "attn_k": fields["num_key_value_heads"]}
    mine = our_logits(ref, ids, tmp)
    for preset, asym in (("W4A16", False), ("W4A16_ASYM", True)):
        tag = f"llama-w4/{preset}"
        out_dir = os.path.join(tmp, f"llama-w4-{preset}-ct")
        r = run([QUANTIZE, gguf, "--export", "compressed-tensors", out_dir, preset, "--quiet"])
        if not ok(r.returncode == 0, f"{tag}: export failed: {r.stderr.strip()}"):
            continue
        qc = QuantizationConfig.model_validate(json.load(open(os.path.join(out_dir, "config.json")))["quantization_config"])
        w = list(qc.config_groups.values())[0].weights
        check((w.num_bits, w.type, w.strategy, w.group_size, w.symmetric) == (4, "int", "group", 128, not asym),
              f"{tag}: weight args {w}")
        ours = load_file(os.path.join(out_dir, "model.safetensors"))
        same = 0
        for name, t in weights.items():
            parts = name.split(".")
            if len(parts) != 4 or parts[2] not in kinds:
                continue
            bits = np.array(t.data).view(np.uint16).reshape(int(t.shape[1]), int(t.shape[0]))
            if parts[2] in heads:
                bits = hf_order(bits, heads[parts[2]])
            theirs = int4_reference(torch.from_numpy(bits.astype(np.int16)).view(torch.bfloat16), asym)
            base_name = f"model.layers.{parts[1]}.{kinds[parts[2]]}"
            equal = all(torch.equal(ours[f"{base_name}.{k}"], v) for k, v in theirs.items())
            check(equal and set(theirs) == {k[len(base_name) + 1:] for k in ours if k.startswith(base_name + ".")},
                  f"{tag}: {base_name}: tensors differ from compressed-tensors' compression "
                  f"({sorted(theirs)} against {sorted(k for k in ours if k.startswith(base_name + '.'))})")
            same += equal
        check(same == 14, f"{tag}: {same} of 14 weights bit-identical to compressed-tensors' compression")
        try:
            model = ct_model(out_dir)
        except Exception as e:
            check(False, f"{tag}: transformers/compressed-tensors cannot load the export: {e}")
            continue
        with torch.no_grad():
            theirs = model(torch.tensor([ids])).logits[0].double().numpy()
        check(np.all(np.isfinite(theirs)), f"{tag}: non-finite logits")
        if mine is not None:
            print(f"{tag}: {same}/14 weights bit-identical to compressed-tensors' W4A16 compression; KL(INT4 "
                  f"transformers || our BF16 runner) {mean_kl(theirs, mine):.3g}")
            int4_calibrated(tag, gguf, preset, mine, mean_kl(theirs, mine), ours, ids, tmp)


def int4_calibrated(tag, gguf, preset, mine, kl_rtn, rtn, ids, tmp):
    """W4A16 with --calibration-file --importance: importance-weighted group scales (ct_int4.h), still a
    folder compressed-tensors validates and loads, closer to the BF16 model than min-max."""
    out_dir = os.path.join(tmp, f"llama-w4-{preset}-calib-ct")
    r = run([QUANTIZE, gguf, "--export", "compressed-tensors", out_dir, preset, "--quiet", "--importance"] + CALIB)
    if not ok(r.returncode == 0, f"{tag} calibrated: export failed: {r.stderr.strip()}"):
        return
    QuantizationConfig.model_validate(json.load(open(os.path.join(out_dir, "config.json")))["quantization_config"])
    cal = load_file(os.path.join(out_dir, "model.safetensors"))
    scales = [k for k in cal if k.endswith(".weight_scale")]
    moved = sum(int((cal[k] != rtn[k]).sum()) for k in scales)
    total = sum(cal[k].numel() for k in scales)
    check(0 < moved < total, f"{tag} calibrated: {moved} of {total} group scales differ from min-max")
    model = ct_model(out_dir)
    with torch.no_grad():
        theirs = model(torch.tensor([ids])).logits[0].double().numpy()
    kl = mean_kl(theirs, mine)
    check(kl < kl_rtn, f"{tag} calibrated: KL {kl:.3g} to our BF16 runner, min-max {kl_rtn:.3g}")
    print(f"{tag} calibrated: {moved} of {total} group scales moved, KL(INT4 transformers || our BF16 runner) "
          f"{kl:.3g} (min-max {kl_rtn:.3g})")
    int4_gptq(tag, gguf, preset, mine, kl, cal, ids, tmp)


def int4_decoded(state, base_name):
    """(q - z) * s in float32 (exact for BF16 scales) from the folder's packed codes, scales and zero points."""
    packed, scale = state[f"{base_name}.weight_packed"], state[f"{base_name}.weight_scale"]
    rows, groups = scale.shape
    shifts = 4 * torch.arange(8, dtype=torch.int32)
    q = ((packed.unsqueeze(-1) >> shifts) & 0xF).reshape(rows, -1) - 8
    z = torch.zeros(rows, groups, dtype=torch.int32)
    if f"{base_name}.weight_zero_point" in state:
        zp = state[f"{base_name}.weight_zero_point"]
        z = ((zp.unsqueeze(1) >> shifts.view(1, 8, 1)) & 0xF).reshape(-1, groups)[:rows] - 8
    g = q.shape[1] // groups
    return (q - z.repeat_interleave(g, 1)).float() * scale.float().repeat_interleave(g, 1)


def int4_gptq(tag, gguf, preset, mine, kl_imp, imp, ids, tmp):
    """W4A16 with --calibration-file and nothing named: GPTQ rounds the codes (src/export/ct_int4_gptq.h),
    the folder validates and loads, compressed-tensors decompresses every weight to exactly (q - z) * s of
    our codes (what the codec fed back), the codes differ from the importance-only export's, and the bytes
    do not depend on threads and are --gptq's. Its KL is printed, not asserted: on these random weights GPTQ is no better
    than importance alone; export_w4a16_e2e.py asserts it on the fixtures' trained models."""
    outs = [os.path.join(tmp, f"llama-w4-{preset}-gptq{n}-ct") for n in (1, 2, 3)]
    for out_dir, extra in zip(outs, (["--threads", "1"], ["--threads", "2"], ["--gptq"])):
        r = run([QUANTIZE, gguf, "--export", "compressed-tensors", out_dir, preset, "--quiet"] + extra + CALIB)
        if not ok(r.returncode == 0, f"{tag} GPTQ: export failed: {r.stderr.strip()}"):
            return
    explicit = open(os.path.join(outs[2], "model.safetensors"), "rb").read()
    check(explicit == open(os.path.join(outs[0], "model.safetensors"), "rb").read(),
          f"{tag} GPTQ: --gptq named and the default wrote different tensors")
    QuantizationConfig.model_validate(json.load(open(os.path.join(outs[0], "config.json")))["quantization_config"])
    same = open(os.path.join(outs[0], "model.safetensors"), "rb").read() == \
        open(os.path.join(outs[1], "model.safetensors"), "rb").read()
    check(same, f"{tag} GPTQ: --threads 1 and 2 wrote different tensors")
    state = load_file(os.path.join(outs[0], "model.safetensors"))
    model = ct_model(outs[0])
    params = dict(model.named_parameters())
    bases = [k[:-len(".weight_packed")] for k in state if k.endswith(".weight_packed")]
    exact = sum(torch.equal(params[b + ".weight"].to(torch.float32), int4_decoded(state, b).to(torch.float32))
                for b in bases)
    check(exact == len(bases) == 14, f"{tag} GPTQ: {exact} of {len(bases)} weights decompress to (q - z) * s")
    moved = sum(not torch.equal(state[b + ".weight_packed"], imp[b + ".weight_packed"]) for b in bases)
    check(moved == len(bases), f"{tag} GPTQ: {moved} of {len(bases)} weights' codes differ from importance only")
    with torch.no_grad():
        theirs = model(torch.tensor([ids])).logits[0].double().numpy()
    kl = mean_kl(theirs, mine)
    check(np.all(np.isfinite(theirs)), f"{tag} GPTQ: non-finite logits")
    print(f"{tag} GPTQ: {exact} of 14 weights decompress to our codes' values, threads 1 = 2: {same}, "
          f"KL(INT4 transformers || our BF16 runner) {kl:.3g} (importance only {kl_imp:.3g})")


def shards(gguf, tmp, ids):
    """--export-shard-size: several safetensors files and their index, loaded as one."""
    out = os.path.join(tmp, "sharded")
    r = run([QUANTIZE, gguf, "--export", "compressed-tensors", out, "FP8_DYNAMIC", "--quiet",
             "--export-shard-size", "64K"])
    if not ok(r.returncode == 0, f"sharded export failed: {r.stderr.strip()}"):
        return
    index = json.load(open(os.path.join(out, "model.safetensors.index.json")))
    files = sorted(n for n in os.listdir(out) if n.endswith(".safetensors"))
    check(len(files) > 1 and sorted(set(index["weight_map"].values())) == files,
          f"shards {files} against the index's {sorted(set(index['weight_map'].values()))}")
    sizes = sum(t.nbytes for f in files for t in load_file(os.path.join(out, f)).values())
    check(index["metadata"]["total_size"] == sizes, f"index total_size {index['metadata']['total_size']}, tensors {sizes}")
    model = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    single = transformers.AutoModelForCausalLM.from_pretrained(os.path.join(tmp, "llama-fp8-dynamic-ct"),
                                                               dtype=torch.float32)
    with torch.no_grad():
        a = model(torch.tensor([ids])).logits
        b = single(torch.tensor([ids])).logits
    check(torch.equal(a, b), "the sharded export runs differently from the single file")
    print(f"sharded: {len(files)} files, index total_size {sizes}")


def refusals(gguf, tmp):
    out = os.path.join(tmp, "refused")
    r = run([QUANTIZE, gguf, "--export", "compressed-tensors", out, "FP8_DYNAMIC", "--quiet",
             "--tensor-type", "ffn_down=q8_0"])
    check(r.returncode == 1 and "blk.0.ffn_down.weight" in r.stderr and "q8_0" in r.stderr and
          len(r.stderr.strip().splitlines()) == 1, f"K-quant not refused in one line naming it: {r.stderr!r}")
    check(r.stderr.startswith(f"quantize: {out}: "), f"the refusal does not name OUT_DIR: {r.stderr!r}")
    left = [n for n in os.listdir(tmp) if n.startswith("refused")]
    check(not left, f"a refused export left {left}")
    # a family whose checkpoint the export cannot write back (Gemma: norms
    # stored as 1 + w): the same file named gemma (5 bytes for 5, keys too)
    gemma = os.path.join(tmp, "as-gemma.gguf")
    open(gemma, "wb").write(open(gguf, "rb").read().replace(b"llama", b"gemma"))
    r = run([QUANTIZE, gemma, "--export", "compressed-tensors", out, "FP8_DYNAMIC", "--quiet"])
    check(r.returncode == 1 and "general.architecture 'gemma': export to transformers is not supported" in r.stderr
          and len(r.stderr.strip().splitlines()) == 1, f"a gemma export not refused in one line: {r.stderr!r}")
    check(not [n for n in os.listdir(tmp) if n.startswith("refused")], "a refused gemma export left files")
    os.makedirs(out)
    open(os.path.join(out, "keep"), "w").write("x")
    r = run([QUANTIZE, gguf, "--export", "compressed-tensors", out, "FP8_DYNAMIC", "--quiet"])
    check(r.returncode == 1 and "not empty" in r.stderr, f"non-empty OUT_DIR not refused: {r.stderr!r}")
    check(os.listdir(out) == ["keep"], "the non-empty OUT_DIR was changed")
    # a link to an empty folder (or a dangling one) is refused before any work
    empty, link = os.path.join(tmp, "empty"), os.path.join(tmp, "link")
    os.makedirs(empty)
    os.symlink(empty, link)
    for target in (link, link + "/"):
        r = run([QUANTIZE, gguf, "--export", "compressed-tensors", target, "FP8_DYNAMIC", "--quiet"])
        check(r.returncode == 1 and "symbolic link" in r.stderr and "quantize:" in r.stderr and
              "%" not in r.stderr, f"OUT_DIR {target} as a link not refused up front: {r.stderr!r}")
    check(os.listdir(empty) == [] and not [n for n in os.listdir(tmp) if n.startswith("link.")],
          "a refused link export left files")
    os.unlink(link)
    r = run([QUANTIZE, gguf, "--export", "compressed-tensors", out + "2", "NVFP4A16", "--quiet"] + CALIB +
            ["--act-scales"])
    check(r.returncode == 2 and "--act-scales" in r.stderr, f"NVFP4A16 with --act-scales not a usage error: {r.stderr!r}")
    for extra in (CALIB + ["--smoothquant"], ["--tensor-type", "ffn_down=q8_0"]):
        r = run([QUANTIZE, gguf, "--export", "compressed-tensors", out + "2", "W4A16", "--quiet"] + extra)
        check(r.returncode == 2 and "W4A16" in r.stderr, f"W4A16 with {extra[0]} not a usage error: {r.stderr!r}")
    r = run([QUANTIZE, gguf, "--export", "compressed-tensors", out + "2", "FP8", "--quiet"])
    check(r.returncode == 2 and "--act-scales" in r.stderr, f"FP8 without --act-scales not a usage error: {r.stderr!r}")
    r = run([QUANTIZE, gguf, "--export", "compressed-tensors", out + "2", "NVFP4", "--quiet"])
    check(r.returncode == 2 and "--act-scales" in r.stderr, f"NVFP4 without --act-scales not a usage error: {r.stderr!r}")


# Llama 3 rope scaling: hfconv writes rope_freqs.weight (head_dim 32: four smoothed frequencies between
# 4096 / 8 and 4096), the export states rope_parameters again (src/hf/rope_llama3.h)
# (and Llama 3.1's and 3.2's own parameters on their head size, 128: config.json checked only)
LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 8.0, "original_max_position_embeddings": 4096}
LLAMA31_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}


def llama3_rope(tmp, ids):
    for factor in (8.0, 32.0):
        label = f"llama31rope{int(factor)}"
        want = dict(LLAMA31_ROPE, factor=factor)
        CASES[label] = (transformers.LlamaConfig, transformers.LlamaForCausalLM,
                        base(hidden_size=128, num_attention_heads=1, num_key_value_heads=1,
                             max_position_embeddings=131072, rope_parameters=dict(want)))
        gguf, out_dir = os.path.join(tmp, label + ".gguf"), os.path.join(tmp, label + "-ct")
        for cmd in ([HFCONV, build(label, tmp), "-o", gguf, "--outtype", "f32", "-q"],
                    [QUANTIZE, gguf, "--export", "compressed-tensors", out_dir, "FP8_DYNAMIC", "--quiet"]):
            r = run(cmd)
            check(r.returncode == 0, f"{label}: {os.path.basename(cmd[0])} failed: {r.stderr.strip()}")
        if os.path.isdir(out_dir):
            rp = json.load(open(os.path.join(out_dir, "config.json")))["rope_parameters"]
            check(rp == want, f"{label}: rope_parameters {rp}, expected {want}")
    label = "llama3rope"
    CASES[label] = (transformers.LlamaConfig, transformers.LlamaForCausalLM,
                    base(hidden_size=128, num_attention_heads=4, max_position_embeddings=32768,
                         rope_parameters=dict(LLAMA3_ROPE)))
    folder = build(label, tmp)
    gguf, ours_gguf = os.path.join(tmp, label + ".gguf"), os.path.join(tmp, label + "-fp8.gguf")
    out_dir = os.path.join(tmp, label + "-ct")
    for cmd in ([HFCONV, folder, "-o", gguf, "--outtype", "f32", "-q"], [QUANTIZE, gguf, ours_gguf, "FP8_E4M3", "--quiet"],
                [QUANTIZE, gguf, "--export", "compressed-tensors", out_dir, "FP8_DYNAMIC", "--quiet"]):
        r = run(cmd)
        if not ok(r.returncode == 0, f"{label}: {os.path.basename(cmd[0])} failed: {r.stderr.strip()}"):
            return
    rp = json.load(open(os.path.join(out_dir, "config.json")))["rope_parameters"]
    check(rp == LLAMA3_ROPE, f"{label}: rope_parameters {rp}, expected {LLAMA3_ROPE}")
    model = ct_model(out_dir)
    with torch.no_grad():
        theirs = model(torch.tensor([ids])).logits[0].double().numpy()
    mine = our_logits(ours_gguf, ids, tmp)
    if mine is not None:
        kl = mean_kl(theirs, mine)
        check(kl <= MAX_KL, f"{label}: KL(transformers || ours) {kl:.3g} > {MAX_KL}")
        print(f"{label}: rope_parameters {rp}, KL {kl:.3g}")


def float_acts_copy(src, dst):
    """A copy of GGUF src whose I8 weights carry hfq.act_quant = none (float activations)."""
    from gguf import GGUFReader, GGUFValueType, GGUFWriter
    r = GGUFReader(src)
    w = GGUFWriter(dst, r.fields["general.architecture"].contents(), use_temp_file=False)
    for k, f in r.fields.items():
        if k.startswith("GGUF.") or k == "general.architecture":
            continue
        vt = f.types[0]
        w.add_key_value(k, f.contents(), vt, sub_type=f.types[-1] if vt == GGUFValueType.ARRAY else None)
    for t in r.tensors:
        w.add_tensor(t.name, np.array(t.data), raw_shape=list(reversed([int(n) for n in t.shape])),
                     raw_dtype=t.tensor_type)
        if int(t.tensor_type) == 24:
            w.add_key_value("hfq.act_quant." + t.name, "none", GGUFValueType.STRING)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def fp8_block(tmp, ids):
    """FP8_BLOCK: weights with 128x128 block scales (several blocks a matrix), exported; the config
    validates (block_structure [128, 128], activations dynamic per group of 128), compressed-tensors
    decompresses exactly our GGUF's values, and transformers on them with float activations matches our
    runner on the block GGUF with float activations (hfq.act_quant none: the runner quantizes
    activations per token, not per group of 128, so the quantized paths are only reported)."""
    label, tag = "llama", "llama/fp8-block"
    fields = base(hidden_size=256, intermediate_size=384)
    folder = build_checkpoint("fp8block", transformers.LlamaConfig, transformers.LlamaForCausalLM, fields, tmp,
                              MKMODEL, VOCAB)[0]
    gguf, ours = os.path.join(tmp, "fp8block.gguf"), os.path.join(tmp, "fp8block-ours.gguf")
    recipe, out_dir = os.path.join(tmp, "block.json"), os.path.join(tmp, "fp8block-ct")
    json.dump({"name": "b", "rules": [{"match": "blk\\.", "format": "fp8_e4m3", "granularity": "block"}],
               "default": {"format": "f32"}}, open(recipe, "w"))
    for cmd in ([HFCONV, folder, "-o", gguf, "--outtype", "f32", "-q"],
                [QUANTIZE, gguf, ours, "--recipe", recipe, "--quiet"],
                [QUANTIZE, gguf, "--export", "compressed-tensors", out_dir, "FP8_BLOCK", "--quiet",
                 "--tokenizer-from", folder]):
        r = run(cmd)
        if not ok(r.returncode == 0, f"{tag}: {os.path.basename(cmd[0])} failed: {r.stderr.strip()}"):
            return
    check_config(tag, out_dir, "FP8_BLOCK", "block", ("group", True))
    qc = QuantizationConfig.model_validate(json.load(open(os.path.join(out_dir, "config.json")))["quantization_config"])
    g = list(qc.config_groups.values())[0]
    check(g.weights.block_structure == [128, 128] and g.input_activations.group_size == 128,
          f"{tag}: block_structure {g.weights.block_structure}, activation groups {g.input_activations.group_size}")
    sd = load_file(os.path.join(out_dir, "model.safetensors"))
    check(list(sd["model.layers.0.mlp.down_proj.weight_scale"].shape) == [2, 3] and
          list(sd["model.layers.0.mlp.up_proj.weight_scale"].shape) == [3, 2], f"{tag}: weight_scale shapes")
    # round trip: hfconv keeps the export's block codes and scales (docs/hfconv.md)
    back = os.path.join(tmp, "fp8block-back.gguf")
    r = run([HFCONV, out_dir, "-o", back, "-q"])
    if ok(r.returncode == 0, f"{tag}: hfconv of the export failed: {r.stderr.strip()}"):
        from gguf import GGUFReader
        a = {t.name: t for t in GGUFReader(ours).tensors}
        b = {t.name: t for t in GGUFReader(back).tensors}
        names = [n for n in a if n.startswith("blk.") and (n.endswith(".scale") or int(a[n].tensor_type) == 24)]
        same = [n for n in names if n in b and int(a[n].tensor_type) == int(b[n].tensor_type) and
                list(a[n].shape) == list(b[n].shape) and np.array_equal(np.array(a[n].data), np.array(b[n].data))]
        check(len(names) == 28 and same == names, f"{tag}: hfconv of the export differs in {sorted(set(names) - set(same))}")
    model = ct_model(out_dir)
    worst = check_round_trip(tag, label, model, ours, 0.0)
    flat = os.path.join(tmp, "fp8block-float-acts.gguf")
    float_acts_copy(ours, flat)
    with torch.no_grad():
        quant_acts = model(torch.tensor([ids])).logits[0].double().numpy()
        for m in model.modules():
            if hasattr(m, "quantization_scheme"):
                m.quantization_enabled = False
        theirs = model(torch.tensor([ids])).logits[0].double().numpy()
    # the hfconv of the export carries hfq.act_quant fp8_e4m3_g128: the checkpoint's own activations
    mine, mine_q, mine_g = (our_logits(f, ids, tmp) for f in (flat, ours, back))
    if mine is None or mine_q is None or mine_g is None:
        return
    kl, kl_g = mean_kl(theirs, mine), mean_kl(quant_acts, mine_g)
    check(kl <= MAX_KL, f"{tag}: KL(transformers || ours), float activations, {kl:.3g} > {MAX_KL}")
    check(kl_g <= MAX_KL, f"{tag}: KL(transformers || ours), per-group FP8 activations, {kl_g:.3g} > {MAX_KL}")
    print(f"{tag}: weights within {worst:.2g}, KL {kl:.3g} with float activations, {kl_g:.3g} with per-group FP8 "
          f"activations on both sides (the export read back); ours per token on the quantize GGUF "
          f"{mean_kl(quant_acts, mine_q):.3g}")


def main():
    ids = list(np.random.default_rng(7).integers(3, VOCAB, N_POS))
    with tempfile.TemporaryDirectory() as tmp:
        for label in CASES:
            folder = build(label, tmp)
            gguf = os.path.join(tmp, label + ".gguf")
            r = run([HFCONV, folder, "-o", gguf, "--outtype", "f32", "-q"])
            if not ok(r.returncode == 0, f"{label}: hfconv failed: {r.stderr.strip()}"):
                continue
            one(label, folder, gguf, tmp, ids)
            if label == "llama":
                refusals(gguf, tmp)
                shards(gguf, tmp, ids)
        int4(tmp, ids)
        fp8_block(tmp, ids)
        llama3_rope(tmp, ids)
    sys.exit(finish())


if __name__ == "__main__":
    main()
