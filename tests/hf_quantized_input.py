"""hfconv on compressed-tensors checkpoints, proven with compressed-tensors and transformers.

A small Llama checkpoint (transformers, BF16) is compressed by the
compressed-tensors package itself in each scheme: qparams from each
weight's min/max (calculate_qparams, generate_gparam, the strategy's
reduction), static input scales from the float model's activations, then the
format's own compressor (float-, int-, naive-, pack-, nvfp4-pack-,
mxfp4-pack-quantized); config.json carries its QuantizationConfig. Then:

- `hfconv --outtype f32`: every quantized weight equals compressed-tensors'
  decompression of the same tensors bit for bit (q/k rows back in Hugging
  Face's order); `--outtype` forces floats, so no kept type is left;
- `hfconv` without --outtype: the formats our GGUF holds are kept (GGUF
  type I8 with hfq.qext, NVFP4, MXFP4; expected per case), the rest are BF16
  (compressed-tensors' decompression dtype) and named on stderr; the kept
  weights of weight-only schemes carry hfq.act_quant = none;
- our runner on that GGUF (its activation scheme as the file records it)
  against transformers running the checkpoint with compressed-tensors'
  fake quantization of the activations: mean KL <= 1e-4, same top token at
  >= 99 % of positions (98 % for FP8 per group and INT8 per token, DYNAMIC;
  dynamic schemes on float32 norms, see untied(): FP8
  per token and per group, MXFP4 W4A4); general.file_type as
  convert_hf_to_gguf.py writes it for FP4, quantize's own for I8 codes;
- actorder: "weight" kept as is; "group" (g_idx, built as compressed-tensors
  before 0.20 wrote it) dequantized bit for bit, see actorder_group();
- Model Optimizer: the FP8 static and NVFP4 cases renamed as ModelOpt exports
  (hf_quant_config.json, weight_scale_2, input_scale, as vLLM's loader reads
  them) give the same GGUF tensors, their scales as stored, and dequantize to
  fp4 * weight_scale * weight_scale_2 in float32 bit for bit;
- round trip: our own `quantize` (FP8_E4M3, INT8, NVFP4) exported with
  `--export compressed-tensors` and converted back by hfconv gives the
  original GGUF's codes and scales (NVFP4's global scale within one
  float32 rounding of 1 / (1 / g)).

Skips (exit 77) without torch, transformers or compressed-tensors.

usage: hf_quantized_input.py HFCONV TEST_RUNNER_LOGITS MKMODEL QUANTIZE
"""
import copy
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
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.quantization import QuantizationConfig, QuantizationScheme, preset_name_to_scheme
    from compressed_tensors.quantization.utils import maybe_pad_tensor_for_block_quant
    from compressed_tensors.quantization.utils.helpers import calculate_qparams, generate_gparam
    from safetensors.torch import save_file
    from hf_checkpoint import build_checkpoint  # imports torch
    from ct_common import ct_model, hf_order, mean_kl, runner_logits
    from gguf import GGUFReader
except ImportError as e:
    print(f"SKIP: torch/transformers/compressed-tensors/gguf not installed ({e})")
    sys.exit(77)

HFCONV, RUNNER, MKMODEL, QUANTIZE = sys.argv[1:5]
VOCAB, N_POS, MAX_KL, MIN_TOP = 512, 200, 1e-4, 0.99
HEADS, KV_HEADS = 4, 2
FIELDS = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=HEADS,
              num_key_value_heads=KV_HEADS, vocab_size=VOCAB, max_position_embeddings=512, rms_norm_eps=1e-5,
              initializer_range=0.05, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
              rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
PROJ = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output",
        "gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}


def custom(weights, inputs=None):
    return QuantizationScheme(targets=["Linear"], weights=weights, input_activations=inputs)


# label: (scheme, format, GGUF type name when kept (None: BF16), (max KL, min same top) against
# transformers, or None where compressed-tensors cannot load its own layout).
# Dynamic activations: the checkpoint's norms are float32 (see untied()).
STRICT = (MAX_KL, MIN_TOP)
# Dynamic activation codes still meet a few values within an ulp of a rounding boundary
# after untied(), where the float32 order of the sums before them decides the code: torch
# on an AVX-512 CPU (2026-12-04, its kernels summing in another order than on AVX2) moved
# 3 of 200 top tokens of fp8-block-dynamic and w8a8-dynamic (KL 3.2e-5 and 1.3e-5), with
# our runner's output unchanged bit for bit.
DYNAMIC = (MAX_KL, 0.98)
FLOAT_ACTS = "float activations"
CASES = [
    ("fp8-static", preset_name_to_scheme("FP8", ["Linear"]), "float-quantized", "I8", STRICT),
    ("fp8-dynamic", preset_name_to_scheme("FP8_DYNAMIC", ["Linear"]), "float-quantized", "I8", STRICT),
    ("fp8-block", custom(dict(num_bits=8, type="float", strategy="block", block_structure=[128, 128])),
     "float-quantized", "I8", STRICT),
    # dynamic per-group FP8 activations: FP8 codes kept, marked hfq.act_quant fp8_e4m3_g128
    ("fp8-block-dynamic", preset_name_to_scheme("FP8_BLOCK", ["Linear"]), "float-quantized", "I8", DYNAMIC),
    ("fp8-channel-group-acts", custom(dict(num_bits=8, type="float", strategy="channel"),
                                      dict(num_bits=8, type="float", strategy="group", group_size=128, dynamic=True)),
     "float-quantized", "I8", STRICT),
    ("int8-static", custom(dict(num_bits=8, type="int", strategy="channel"),
                           dict(num_bits=8, type="int", strategy="tensor", dynamic=False)), "int-quantized", "I8", STRICT),
    # dynamic per-token INT8: compressed-tensors' amax / 127.5 rule, marked hfq.act_quant int8_ct
    ("w8a8-dynamic", preset_name_to_scheme("W8A8", ["Linear"]), "int-quantized", "I8", DYNAMIC),
    ("int8-group-asym", custom(dict(num_bits=8, type="int", strategy="group", group_size=32, symmetric=False)),
     "naive-quantized", None, None),   # compressed-tensors' own loader expects this zero point packed
    ("w8a16-packed", preset_name_to_scheme("W8A16", ["Linear"]), "pack-quantized", "I8", STRICT),
    ("w4a16", preset_name_to_scheme("W4A16", ["Linear"]), "pack-quantized", None, STRICT),
    ("w4a16-asym", preset_name_to_scheme("W4A16_ASYM", ["Linear"]), "pack-quantized", None, STRICT),
    ("w4-channel-asym", custom(dict(num_bits=4, type="int", strategy="channel", symmetric=False)),
     "pack-quantized", None, STRICT),
    ("nvfp4a16", preset_name_to_scheme("NVFP4A16", ["Linear"]), "nvfp4-pack-quantized", "NVFP4", STRICT),
    ("nvfp4", preset_name_to_scheme("NVFP4", ["Linear"]), "nvfp4-pack-quantized", "NVFP4", STRICT),
    ("mxfp4a16", preset_name_to_scheme("MXFP4A16", ["Linear"]), "mxfp4-pack-quantized", "MXFP4", STRICT),
    ("mxfp4", preset_name_to_scheme("MXFP4", ["Linear"]), "mxfp4-pack-quantized", "MXFP4", STRICT),
    # actorder "weight": GPTQ's calibration order only, the groups stay contiguous (I8 kept)
    ("w8-group-actorder-weight", custom(dict(num_bits=8, type="int", strategy="group", group_size=32,
                                             actorder="weight")), "pack-quantized", "I8", STRICT),
]


def ok(cond, msg):
    check(cond, msg)
    return cond


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def reduce_minmax(w, a):
    """Per-strategy min/max of weight w (compressed-tensors' observers' reductions)."""
    if a.strategy == "tensor":
        return w.amin().reshape(1), w.amax().reshape(1)
    if a.strategy == "channel":
        return w.amin(1, keepdim=True), w.amax(1, keepdim=True)
    if a.strategy in ("group", "tensor_group"):
        g = w.unflatten(-1, (w.shape[1] // a.group_size, a.group_size))
        return g.amin(-1), g.amax(-1)
    br, bc = a.block_structure
    w = maybe_pad_tensor_for_block_quant(w, (br, bc))   # zeros: min/max take 0 in anyway
    b = w.reshape(w.shape[0] // br, br, w.shape[1] // bc, bc)
    return b.amin((1, 3)), b.amax((1, 3))


def input_amax(model, ids):
    """amax of each Linear layer's input over the token ids (static scales)."""
    amax, hooks = {}, []
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.Linear) and name != "lm_head":
            hooks.append(m.register_forward_hook(
                lambda mod, inp, out, n=name: amax.__setitem__(n, inp[0].abs().amax().float())))
    with torch.no_grad():
        model(torch.tensor([ids]))
    for h in hooks:
        h.remove()
    return amax


def group_fp8_acts(scheme):
    i = scheme.input_activations
    return i is not None and i.strategy == "group" and i.type == "float" and i.num_bits == 8


def untied(p):
    """Norm weight p in float32 with full 24-bit significands (times 1 + 2^-9 u, u uniform in [0, 1)).
    With BF16 norm weights and BF16 embeddings, a layer-0 input over its token's amax is a ratio
    of two 16-bit products, which lands exactly on an FP8 rounding tie for ~12 of 25600
    values; per-token dynamic scales then round each tie by the last ulp of the RMS norm,
    a coin flip between any two implementations (compressed-tensors' own codes, transformers'
    float32: KL 1.2e-4 against ours, mostly from those). Static scales do not cancel the
    norm, so those cases keep BF16."""
    g = torch.Generator().manual_seed(3)
    x = p.detach().float()
    return x * (1 + 2.0 ** -9 * torch.rand(x.shape, generator=g))


def compress(model, scheme, fmt, amax, out):
    """The checkpoint compressed-tensors writes for scheme: (folder, {module: (compressed state, decompressed)})."""
    comp = BaseCompressor.get_value_from_registry(fmt)
    state, modules = {}, {}
    for name, p in model.state_dict().items():
        mod = name[: -len(".weight")]
        if not (name.endswith("_proj.weight") and mod.split(".")[-1] in PROJ):
            dyn = scheme.input_activations is not None and scheme.input_activations.dynamic is True
            state[name] = (untied(p) if dyn and name.endswith("norm.weight") else p.detach().to(torch.bfloat16)).contiguous()
            continue
        w = p.detach().to(torch.bfloat16)
        a = scheme.weights
        lo, hi = reduce_minmax(w, a)
        sd = {"weight": w}
        if a.strategy == "tensor_group":
            sd["weight_global_scale"] = generate_gparam(w.amin(), w.amax())
            sd["weight_scale"], sd["weight_zero_point"] = calculate_qparams(lo, hi, a, sd["weight_global_scale"])
        else:
            sd["weight_scale"], sd["weight_zero_point"] = calculate_qparams(lo, hi, a)
        i = scheme.input_activations
        if i is not None and not i.dynamic:
            sd["input_scale"] = (amax[mod] / (448.0 if i.type == "float" else 127.0)).reshape(1)
        if i is not None and i.strategy == "tensor_group":
            sd["input_global_scale"] = generate_gparam(-amax[mod], amax[mod]).reshape(1)
        c = comp.compress(sd, scheme)
        # per-group FP8 activations (emulated): the decompression with float32 scales, as the
        # float model that loads the checkpoint holds them (hfconv writes those exact products)
        exact = {"weight_scale": c["weight_scale"].float()} if group_fp8_acts(scheme) else {}
        modules[mod] = (c, comp.decompress(dict(c) | exact, scheme)["weight"].float())
        for k, v in c.items():
            state[f"{mod}.{k}"] = v.contiguous()
    os.makedirs(out, exist_ok=True)
    save_file(state, os.path.join(out, "model.safetensors"))
    cfg = json.load(open(os.path.join(SRC, "config.json")))
    qc = QuantizationConfig(config_groups={"group_0": scheme}, format=fmt, quantization_status="compressed",
                            ignore=["lm_head"])
    cfg["quantization_config"] = qc.model_dump(mode="json")
    cfg["dtype"] = "bfloat16"
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        with open(os.path.join(SRC, f), "rb") as s, open(os.path.join(out, f), "wb") as d:
            d.write(s.read())
    return modules


def file_type(reader):
    return int(reader.fields["general.file_type"].parts[-1][0])


def gguf_float(t):
    rows = int(t.shape[1]) if len(t.shape) > 1 else 1
    return np.array(t.data, dtype=np.float32).reshape(rows, -1)


def our_logits(gguf, ids, tmp):
    return runner_logits(RUNNER, gguf, ids, VOCAB, tmp)


def is_proj(name):
    parts = name.split(".")
    return len(parts) == 4 and parts[2] in PROJ.values() and parts[3] == "weight"


def gguf_module(name):
    """blk.N.attn_q.weight -> (model.layers.N.self_attn.q_proj, heads to un-permute or 0)."""
    parts = name.split(".")
    inv = {v: k for k, v in PROJ.items()}
    proj = inv[parts[2]]
    mod = f"model.layers.{parts[1]}.{'self_attn' if proj in ('q_proj', 'k_proj', 'v_proj', 'o_proj') else 'mlp'}.{proj}"
    return mod, {"attn_q": HEADS, "attn_k": KV_HEADS}.get(parts[2], 0)


def one(label, scheme, fmt, kept, limits, model, amax, ids, tmp):
    folder = os.path.join(tmp, label)
    modules = compress(model, scheme, fmt, amax, folder)
    deq = os.path.join(tmp, label + "-f32.gguf")
    r = run([HFCONV, folder, "-o", deq, "--outtype", "f32", "-q"])
    if not ok(r.returncode == 0, f"{label}: hfconv --outtype f32 failed: {r.stderr.strip()}"):
        return
    same = 0
    for t in GGUFReader(deq).tensors:
        if not is_proj(t.name):
            continue
        mod, heads = gguf_module(t.name)
        ours = gguf_float(t)
        if heads:
            ours = hf_order(ours, heads)
        theirs = modules[mod][1].numpy()
        eq = ours.shape == theirs.shape and np.array_equal(ours.view(np.uint32), theirs.view(np.uint32))
        check(eq, f"{label}: {t.name} differs from compressed-tensors' decompression "
                  f"(max |diff| {np.abs(ours - theirs).max() if ours.shape == theirs.shape else 'shape'})")
        same += eq
    check(same == 14, f"{label}: {same} of 14 weights bit-identical to compressed-tensors' decompression")
    gguf = os.path.join(tmp, label + ".gguf")
    r = run([HFCONV, folder, "-o", gguf])
    if not ok(r.returncode == 0, f"{label}: hfconv failed: {r.stderr.strip()}"):
        return
    reader = GGUFReader(gguf)
    types = {t.tensor_type.name for t in reader.tensors
             if is_proj(t.name)}
    check(types == {kept or "BF16"}, f"{label}: weight types {types}, expected {kept or 'BF16'}")
    kept = None if kept == "F32" else kept   # F32: dequantized
    # general.file_type: convert_hf_to_gguf.py's for FP4 (gguf's LlamaFileType), MOSTLY_BF16 when
    # dequantized; I8 codes: quantize's own value, checked in round_trip()
    from gguf import LlamaFileType
    want_ft = {"NVFP4": LlamaFileType.MOSTLY_NVFP4, "MXFP4": LlamaFileType.MOSTLY_MXFP4_MOE,
               None: LlamaFileType.ALL_F32 if types == {"F32"} else LlamaFileType.MOSTLY_BF16}.get(kept)
    ft = file_type(reader)
    check(want_ft is None or ft == want_ft, f"{label}: general.file_type {ft}, expected {want_ft}")
    # weight-only schemes (W8A16, NVFP4A16, MXFP4A16) mark their kept weights float-activation,
    # MXFP4 W4A4 its dynamic MXFP4 activations
    acts = [bytes(reader.fields[k].parts[-1]).decode() for k in reader.fields if k.startswith("hfq.act_quant.")]
    i = scheme.input_activations
    int8_ct = i is not None and i.type == "int" and i.dynamic is True and i.strategy == "token"
    want = f"fp8_e4m3_g{i.group_size}" if group_fp8_acts(scheme) else \
        ("none" if i is None else "mxfp4" if fmt == "mxfp4-pack-quantized" else "int8_ct" if int8_ct else None) \
        if kept else None
    want = [want] * 14 if want else []
    check(acts == want, f"{label}: hfq.act_quant values {sorted(set(acts))} x {len(acts)}, expected {want[:1]} x {len(want)}")
    notes = [ln for ln in r.stderr.splitlines() if "dequantized exactly" in ln]
    check(len(notes) == (0 if kept else 14), f"{label}: {len(notes)} dequantization notes on stderr")
    if limits is None:
        print(f"{label}: {same}/14 bit-identical; kept as {types}")
        return
    mine = our_logits(gguf, ids, tmp)
    try:
        ref = ct_model(folder)
    except Exception as e:
        check(False, f"{label}: compressed-tensors cannot load the checkpoint: {e}")
        return
    with torch.no_grad():
        theirs = ref(torch.tensor([ids])).logits[0].double().numpy()
    if mine is None:
        return
    emulated = ""
    if limits == FLOAT_ACTS:
        emulated = f" (against the checkpoint's own activation quantization: KL {mean_kl(theirs, mine):.3g})"
        for m in ref.modules():
            if hasattr(m, "quantization_scheme"):
                m.quantization_enabled = False   # weights are decompressed already: activations only
        with torch.no_grad():
            theirs = ref(torch.tensor([ids])).logits[0].double().numpy()
        limits = STRICT
    kl = mean_kl(theirs, mine)
    top = float(np.mean(theirs.argmax(1) == mine.argmax(1)))
    check(kl <= limits[0] and top >= limits[1], f"{label}: KL(transformers || ours) {kl:.3g}, same top {top:.3f} "
                                                f"(limits {limits})")
    print(f"{label}: {same}/14 bit-identical to compressed-tensors' decompression; kept as {types}; "
          f"KL {kl:.3g}, same top {top:.3f}{emulated}")


def actorder_group(model, ids, tmp):
    """actorder "group" (GPTQ's g_idx, written by compressed-tensors before 0.20, which no
    longer writes or reads it): for each weight W and a random column permutation perm,
    compressed-tensors' pack-quantized compressor quantizes W[:, perm] in contiguous groups
    of 32 (INT4, W4A16); the checkpoint holds those codes back in W's column order, the
    same scales and weight_g_idx = argsort(perm) // 32, as that older version's GPTQ left
    them. Its decompression (_process_group: permute by argsort(g_idx), dequantize the
    groups, permute back) is the package's decompression of the permuted weight with
    columns put back: hfconv --outtype f32 must equal it bit for bit, the default GGUF holds
    BF16 (named on stderr); the runner on the F32 GGUF against transformers with those
    weights: KL <= 1e-4, same top >= 99 %."""
    from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32, unpack_from_int32
    G = 32
    scheme = custom(dict(num_bits=4, type="int", strategy="group", group_size=G))
    comp = BaseCompressor.get_value_from_registry("pack-quantized")
    gen = torch.Generator().manual_seed(5)
    state, deq = {}, {}
    for name, p in model.state_dict().items():
        mod = name[: -len(".weight")]
        if not (name.endswith("_proj.weight") and mod.split(".")[-1] in PROJ):
            state[name] = p.detach().to(torch.bfloat16).contiguous()
            continue
        w = p.detach().to(torch.bfloat16)
        perm = torch.randperm(w.shape[1], generator=gen)
        inv = torch.argsort(perm)
        wp = w[:, perm]
        sd = {"weight": wp}
        sd["weight_scale"], sd["weight_zero_point"] = calculate_qparams(*reduce_minmax(wp, scheme.weights), scheme.weights)
        c = comp.compress(sd, scheme)
        deq[mod] = comp.decompress(dict(c), scheme)["weight"].float()[:, inv]
        codes = unpack_from_int32(c["weight_packed"], 4, torch.Size(wp.shape))[:, inv]
        c["weight_packed"] = pack_to_int32(codes.contiguous(), 4)
        c["weight_g_idx"] = (inv // G).to(torch.int32)
        for k, v in c.items():
            state[f"{mod}.{k}"] = v.contiguous()
    folder = os.path.join(tmp, "w4a16-actorder-group")
    os.makedirs(folder)
    save_file(state, os.path.join(folder, "model.safetensors"))
    cfg = json.load(open(os.path.join(SRC, "config.json")))
    qc = QuantizationConfig(config_groups={"group_0": scheme}, format="pack-quantized",
                            quantization_status="compressed", ignore=["lm_head"]).model_dump(mode="json")
    qc["config_groups"]["group_0"]["weights"]["actorder"] = "group"   # 0.20's validator refuses to write it
    cfg["quantization_config"] = qc
    json.dump(cfg, open(os.path.join(folder, "config.json"), "w"), indent=1)
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        with open(os.path.join(SRC, f), "rb") as a, open(os.path.join(folder, f), "wb") as b:
            b.write(a.read())
    f32, gguf = os.path.join(tmp, "actorder-f32.gguf"), os.path.join(tmp, "actorder.gguf")
    r, r2 = run([HFCONV, folder, "-o", f32, "--outtype", "f32", "-q"]), run([HFCONV, folder, "-o", gguf])
    if not ok(r.returncode == 0 and r2.returncode == 0, f"actorder group: hfconv failed: {r.stderr}{r2.stderr}"):
        return
    same = 0
    for t in GGUFReader(f32).tensors:
        if is_proj(t.name):
            mod, heads = gguf_module(t.name)
            ours = hf_order(gguf_float(t), heads) if heads else gguf_float(t)
            same += np.array_equal(ours.view(np.uint32), deq[mod].numpy().view(np.uint32))
    check(same == 14, f"actorder group: {same} of 14 weights bit-identical to the decompression with g_idx")
    notes = [ln for ln in r2.stderr.splitlines() if "activation order): dequantized exactly" in ln]
    check(len(notes) == 14, f"actorder group: {len(notes)} dequantization notes naming the activation order")
    ref = copy.deepcopy(model).float()
    with torch.no_grad():
        for name, p in ref.named_parameters():
            mod = name[: -len(".weight")]
            p.copy_(deq[mod] if mod in deq else p.to(torch.bfloat16).float())
        theirs = ref(torch.tensor([ids])).logits[0].double().numpy()
    types = {t.tensor_type.name for t in GGUFReader(gguf).tensors if is_proj(t.name)}
    check(types == {"BF16"}, f"actorder group: default weight types {types}, expected BF16")
    # the F32 file: the BF16 one's products round the activations to BF16 too (ggml's
    # BF16 dot), which moves near-tied tops here (KL 2.8e-6, same top 98.5 %)
    mine = our_logits(f32, ids, tmp)
    if mine is None:
        return
    kl, top = mean_kl(theirs, mine), float(np.mean(theirs.argmax(1) == mine.argmax(1)))
    check(kl <= MAX_KL and top >= MIN_TOP, f"actorder group: KL {kl:.3g}, same top {top:.3f}")
    print(f"w4a16-actorder-group: {same}/14 bit-identical to the decompression with g_idx; KL {kl:.3g}, "
          f"same top {top:.3f}")


def modelopt(ct_label, algo, ids, tmp):
    """The compressed-tensors case ct_label's tensors renamed as a Model Optimizer export
    (hf_quant_config.json; NVFP4: weight, weight_scale, weight_scale_2 = 1 / weight_global_scale,
    input_scale = 1 / input_global_scale, as vLLM's modelopt loader reads them): the kept
    GGUF holds the same codes as the compressed-tensors one, the scales exactly as stored,
    and --outtype f32 is fp4 * weight_scale * weight_scale_2 in float32."""
    from safetensors.torch import load_file
    src = os.path.join(tmp, ct_label)
    out = os.path.join(tmp, f"modelopt-{algo}")
    os.makedirs(out)
    state = {}
    for k, v in load_file(os.path.join(src, "model.safetensors")).items():
        if k.endswith(("weight_global_scale", "input_global_scale")):
            v = (1.0 / v.float()).reshape(())
            k = k.replace("weight_global_scale", "weight_scale_2").replace("input_global_scale", "input_scale")
        elif k.endswith(("weight_scale", "input_scale")) and v.numel() == 1:
            v = v.float().reshape(())
        state[k.replace("weight_packed", "weight")] = v.contiguous()
    save_file(state, os.path.join(out, "model.safetensors"))
    cfg = json.load(open(os.path.join(src, "config.json")))
    del cfg["quantization_config"]
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"))
    json.dump({"producer": {"name": "modelopt", "version": "0.31.0"},
               "quantization": {"quant_algo": algo, "kv_cache_quant_algo": None, "group_size": 16,
                                "exclude_modules": ["lm_head"]}}, open(os.path.join(out, "hf_quant_config.json"), "w"))
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        with open(os.path.join(src, f), "rb") as a, open(os.path.join(out, f), "wb") as b:
            b.write(a.read())
    gguf, deq = os.path.join(tmp, f"modelopt-{algo}.gguf"), os.path.join(tmp, f"modelopt-{algo}-f32.gguf")
    r = run([HFCONV, out, "-o", gguf, "-q"])
    r2 = run([HFCONV, out, "-o", deq, "-q", "--outtype", "f32"])
    if not ok(r.returncode == 0 and r2.returncode == 0, f"modelopt {algo}: hfconv failed: {r.stderr}{r2.stderr}"):
        return
    ours = {t.name: t for t in GGUFReader(gguf).tensors}
    theirs = {t.name: t for t in GGUFReader(os.path.join(tmp, ct_label + ".gguf")).tensors}
    same, n = 0, 0
    for name, t in theirs.items():
        u = ours.get(name)
        if not ok(u is not None and u.tensor_type == t.tensor_type, f"modelopt {algo}: {name} missing or retyped"):
            continue
        if algo == "NVFP4" and name.endswith("scale"):
            mod = gguf_module(name.rsplit(".", 1)[0] + ".weight")[0]
            want = state[f"{mod}.{'weight_scale_2' if name.endswith('.scale') else 'input_scale'}"].numpy()
            eq = np.array_equal(np.array(u.data).view(np.uint32), want.reshape(1).view(np.uint32))
        else:
            eq = np.array_equal(np.array(u.data).view(np.uint8), np.array(t.data).view(np.uint8))
        check(eq, f"modelopt {algo}: {name} differs")
        same += eq
        n += 1
    exact = 0
    if algo == "NVFP4":
        e2m1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)
        for t in GGUFReader(deq).tensors:
            if not is_proj(t.name):
                continue
            mod, heads = gguf_module(t.name)
            p = state[mod + ".weight"].numpy()
            codes = np.stack([p & 15, p >> 4], -1).reshape(p.shape[0], -1)
            sc = np.repeat(state[mod + ".weight_scale"].float().numpy(), 16, axis=1)
            want = (e2m1[codes] * sc).astype(np.float32) * state[mod + ".weight_scale_2"].numpy()
            got = gguf_float(t)
            exact += np.array_equal((hf_order(got, heads) if heads else got).view(np.uint32), want.view(np.uint32))
        check(exact == 14, f"modelopt {algo}: {exact} of 14 dequantized weights equal fp4 * scale * scale_2")
    print(f"modelopt {algo}: {same}/{n} GGUF tensors as the compressed-tensors conversion's"
          + (f" (global and input scales: as stored); {exact}/14 dequantized weights exact" if algo == "NVFP4" else ""))


def round_trip(tmp):
    """quantize -> --export compressed-tensors -> hfconv gives the quantized GGUF's numbers back."""
    f32 = os.path.join(tmp, "src-f32.gguf")
    if not ok(run([HFCONV, SRC, "-o", f32, "--outtype", "f32", "-q"]).returncode == 0, "hfconv of the source"):
        return
    calib = ["--calibration-file", os.path.join(os.environ.get("HFQ_SOURCE", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")),
                                          "docs", "architecture.md"),
             "--calib-ctx", "64", "--calib-chunks", "4", "--act-scales"]
    for ours, ct, extra in (("FP8_E4M3", "FP8_DYNAMIC", []), ("INT8", "W8A8", calib), ("NVFP4", "NVFP4", calib)):
        q = os.path.join(tmp, f"rt-{ours}.gguf")
        out = os.path.join(tmp, f"rt-{ours}-ct")
        back = os.path.join(tmp, f"rt-{ours}-back.gguf")
        r1 = run([QUANTIZE, f32, q, ours, "--quiet"] + extra)
        r2 = run([QUANTIZE, f32, "--export", "compressed-tensors", out, ct, "--quiet"] + extra)
        if not ok(r1.returncode == 0 and r2.returncode == 0, f"round trip {ours}: {r1.stderr}{r2.stderr}"):
            continue
        for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            with open(os.path.join(SRC, f), "rb") as s, open(os.path.join(out, f), "wb") as d:
                d.write(s.read())
        r = run([HFCONV, out, "-o", back, "-q"])
        if not ok(r.returncode == 0, f"round trip {ours}: hfconv failed: {r.stderr.strip()}"):
            continue
        ra, rb = GGUFReader(q), GGUFReader(back)
        check(file_type(ra) == file_type(rb), f"round trip {ours}: general.file_type {file_type(rb)}, "
                                              f"quantize wrote {file_type(ra)}")
        a = {t.name: t for t in ra.tensors}
        b = {t.name: t for t in rb.tensors}
        n, worst = 0, 0.0
        for name, t in a.items():
            if t.tensor_type.name not in ("I8", "NVFP4") and not name.endswith(("scale", "input_scale")):
                continue
            u = b.get(name)
            if not ok(u is not None and u.tensor_type == t.tensor_type and list(u.shape) == list(t.shape),
                         f"round trip {ours}: {name} missing or of another type/shape"):
                continue
            x, y = np.array(t.data), np.array(u.data)
            if ours == "NVFP4" and name.endswith("scale"):
                worst = max(worst, float(np.max(np.abs(x / y - 1))))
                check(np.allclose(x, y, rtol=2 ** -23, atol=0), f"round trip {ours}: {name} {x} against {y}")
            else:
                check(np.array_equal(x.view(np.uint8), y.view(np.uint8)), f"round trip {ours}: {name} differs")
            n += 1
        print(f"round trip {ours}: {n} tensors (codes and scales) back, NVFP4 scales' worst relative "
              f"change {worst:.3g}")


def main():
    global SRC
    ids = list(np.random.default_rng(7).integers(3, VOCAB, N_POS))
    with tempfile.TemporaryDirectory() as tmp:
        SRC, model = build_checkpoint("ctin", transformers.LlamaConfig, transformers.LlamaForCausalLM, FIELDS, tmp,
                                      MKMODEL, VOCAB)
        amax = input_amax(model, ids)
        only = sys.argv[5:]
        for label, scheme, fmt, kept, limits in CASES:
            if not only or label in only:
                one(label, scheme, fmt, kept, limits, model, amax, ids, tmp)
        for ct_label, algo in (("fp8-static", "FP8"), ("nvfp4", "NVFP4")):
            if not only or ct_label in only:
                modelopt(ct_label, algo, ids, tmp)
        if not only or "actorder-group" in only:
            actorder_group(model, ids, tmp)
        if not only or "round-trip" in only:
            round_trip(tmp)
    sys.exit(finish())


if __name__ == "__main__":
    main()
