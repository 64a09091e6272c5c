"""compressed-tensors mixtures of experts: hfconv dequantizes each expert exactly into the stacked tensor.

A small Qwen3-MoE (transformers 5, saved one tensor per expert, the layout
llm-compressor's MoE checkpoints have) is compressed by the compressed-tensors
package in three schemes, every projection of attention and of each expert
quantized, the router (mlp.gate) and lm_head in `ignore` as llm-compressor's MoE
recipes leave them (hf_quantized_input.py's compress: the format's own
compressor on each weight's min/max qparams). Then:

- `hfconv --outtype f32`: each expert's slice of ffn_{gate,up,down}_exps equals
  compressed-tensors' decompression of that expert bit for bit;
- `hfconv` without --outtype: the stacked experts are BF16 (the decompression
  dtype) and each is named on stderr as dequantized (where the dense
  projections are kept as codes in the same file);
- weight-only schemes (INT4 groups of 32, INT8 per channel): our runner on the
  F32 GGUF against transformers on the decompressed weights: mean KL <= 1e-5,
  same top token >= 99.9 % (the BF16 GGUF's KL is printed: our BF16 matmul
  rounds activations to BF16, as llama.cpp's). FP8_DYNAMIC is checked for values only: its per-token
  activation quantization is not emulated for dequantized weights
  (docs/hfconv.md).

Skips (exit 77) without torch, transformers or compressed-tensors.

usage: hf_moe_ct.py HFCONV TEST_RUNNER_LOGITS MKMODEL QUANTIZE
"""
import json
import os
import sys
import tempfile
import types

import numpy as np

import hf_quantized_input as Q   # skips (77) without torch / transformers / compressed-tensors
from gguf_common import check, finish

import torch  # noqa: E402 (after the skip)
import transformers  # noqa: E402
from compressed_tensors.quantization import preset_name_to_scheme  # noqa: E402
from gguf import GGUFReader  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

N_EXPERTS, MAX_KL, MIN_TOP = 4, 1e-5, 0.999
FIELDS = dict(Q.FIELDS, num_experts=N_EXPERTS, num_experts_per_tok=2, moe_intermediate_size=64, head_dim=32,
              norm_topk_prob=True)
N_LAYERS = FIELDS["num_hidden_layers"]
EXPS = {"ffn_gate_exps": "gate_proj", "ffn_up_exps": "up_proj", "ffn_down_exps": "down_proj"}
ROUTER_IGNORED = r"re:.*mlp\.gate$"

# label, scheme, format, whether the runner is compared with transformers
CASES = [
    ("w4a16-g32", Q.custom(dict(num_bits=4, type="int", strategy="group", group_size=32)), "pack-quantized", True),
    ("w8a16-channel", Q.custom(dict(num_bits=8, type="int", strategy="channel")), "pack-quantized", True),
    ("fp8-dynamic", preset_name_to_scheme("FP8_DYNAMIC", ["Linear"]), "float-quantized", False),
]


def compressed(label, src, scheme, fmt, tmp):
    """(folder, {module: (compressed, decompressed)}) of the per-expert checkpoint in src."""
    folder = os.path.join(tmp, label)
    Q.SRC = src
    per_expert = load_file(os.path.join(src, "model.safetensors"))
    modules = Q.compress(types.SimpleNamespace(state_dict=lambda: per_expert), scheme, fmt, {}, folder)
    path = os.path.join(folder, "config.json")
    cfg = json.load(open(path))
    cfg["quantization_config"]["ignore"].append(ROUTER_IGNORED)
    json.dump(cfg, open(path, "w"), indent=1)
    return folder, modules


def reference_logits(folder, modules, ids, tmp):
    """transformers on the decompressed weights (the other tensors as the checkpoint stores them)."""
    state = {k: v for k, v in load_file(os.path.join(folder, "model.safetensors")).items()
             if k.rsplit(".", 1)[0] not in modules}
    state.update({m + ".weight": w for m, (_, w) in modules.items()})
    ref = folder + "-decompressed"
    os.makedirs(ref, exist_ok=True)
    save_file({k: v.float().contiguous() for k, v in state.items()}, os.path.join(ref, "model.safetensors"))
    cfg = json.load(open(os.path.join(folder, "config.json")))
    del cfg["quantization_config"]
    json.dump(cfg, open(os.path.join(ref, "config.json"), "w"))
    model = transformers.Qwen3MoeForCausalLM.from_pretrained(ref, dtype=torch.float32).eval()
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].double().numpy()


def one(label, scheme, fmt, compare, src, ids, tmp):
    folder, modules = compressed(label, src, scheme, fmt, tmp)
    deq = os.path.join(tmp, label + "-f32.gguf")
    r = Q.run([Q.HFCONV, folder, "-o", deq, "--outtype", "f32", "-q"])
    if not Q.ok(r.returncode == 0, f"{label}: hfconv --outtype f32 failed: {r.stderr.strip()}"):
        return
    same = total = 0
    for t in GGUFReader(deq).tensors:
        parts = t.name.split(".")
        if len(parts) != 4 or parts[2] not in EXPS:
            continue
        layer, kind = parts[1], parts[2]
        stacked = np.array(t.data, dtype=np.float32).reshape(N_EXPERTS, int(t.shape[1]), int(t.shape[0]))
        for e in range(N_EXPERTS):
            theirs = modules[f"model.layers.{layer}.mlp.experts.{e}.{EXPS[kind]}"][1].numpy()
            total += 1
            same += stacked[e].shape == theirs.shape and np.array_equal(stacked[e].view(np.uint32),
                                                                        theirs.view(np.uint32))
    want = N_LAYERS * len(EXPS) * N_EXPERTS
    check(same == total == want, f"{label}: {same} of {total} experts ({want} expected) bit-identical to "
                                 "compressed-tensors' decompression")
    gguf = os.path.join(tmp, label + ".gguf")
    r = Q.run([Q.HFCONV, folder, "-o", gguf])
    if not Q.ok(r.returncode == 0, f"{label}: hfconv failed: {r.stderr.strip()}"):
        return
    types_ = {t.tensor_type.name for t in GGUFReader(gguf).tensors if t.name.split(".")[2:3] in ([k] for k in EXPS)}
    notes = [ln for ln in r.stderr.splitlines() if "_exps.weight" in ln and "dequantized exactly to bf16" in ln]
    check(types_ == {"BF16"} and len(notes) == N_LAYERS * len(EXPS),
          f"{label}: expert types {types_}, {len(notes)} notes: {r.stderr[-300:]}")
    msg = f"{label}: {same}/{want} experts bit-identical to compressed-tensors' decompression, stacked as {types_}"
    if compare:
        # the F32 file: the BF16 one holds the same values, but our BF16 matmul
        # rounds the activations to BF16 as llama.cpp's does (its KL printed)
        mine, bf16 = Q.our_logits(deq, ids, tmp), Q.our_logits(gguf, ids, tmp)
        theirs = reference_logits(folder, modules, ids, tmp)
        if mine is None or bf16 is None:
            return
        kl = Q.mean_kl(theirs, mine)
        top = float(np.mean(theirs.argmax(1) == mine.argmax(1)))
        check(kl <= MAX_KL and top >= MIN_TOP, f"{label}: KL(transformers || ours) {kl:.3g}, same top {top:.4f}")
        msg += (f"; runner (F32 file) vs transformers on the decompressed weights: KL {kl:.3g}, same top {top:.4f} "
                f"(BF16 file: KL {Q.mean_kl(theirs, bf16):.3g})")
    print(msg)


def main():
    ids = [int(i) for i in np.random.default_rng(24).integers(3, Q.VOCAB, Q.N_POS)]
    with tempfile.TemporaryDirectory() as tmp:
        src, _ = Q.build_checkpoint("ctmoe", transformers.Qwen3MoeConfig, transformers.Qwen3MoeForCausalLM, FIELDS,
                                    tmp, Q.MKMODEL, Q.VOCAB)
        for label, scheme, fmt, compare in CASES:
            one(label, scheme, fmt, compare, src, ids, tmp)
    sys.exit(finish())


if __name__ == "__main__":
    main()
