"""hfconv --lora (merging PEFT LoRA adapters) and --adapter-out (llama.cpp's
LoRA GGUF), proven against peft itself and llama.cpp's runtime.

hf_transformers' Llama (linear rope scaling) and Qwen2 (q/k/v biases)
checkpoints, built by transformers with random weights scaled so the logits
are peaked, are the bases. peft 0.21 makes
adapters of each kind on them, all factors randomized (peft starts B at 0):
plain LoRA on every projection, rsLoRA, rank_pattern / alpha_pattern,
fan_in_fan_out (peft resets it for Linear layers: we warn and do the same),
modules_to_save, embed_tokens and lm_head targets, an embed_tokens target whose
saved base_layer.weight was changed (peft loads it over the base's, then its
factors apply on top), DoRA, and two adapters at
scales 0.7 and -0.4. For each:
  - merge: peft's merge_and_unload (set_scale for a scale; the second adapter
    loaded onto the first's merge), saved and converted by hfconv, against
    hfconv --lora on the base: the same tensors within float rounding, per
    tensor max |ours - peft| <= 8 eps (max |W| + sum |s| |B| |A|), eps the
    float32 epsilon: both round W + s B A in float32, peft with a float32
    B A, we with a double one; some tensors must have moved by more than
    that bound, and the runner on the base alone must be far from peft's
    merge (KL > 100 x the gate below): the test sees a dropped adapter;
  - our runner's logits on our merged GGUF against transformers' on peft's
    merged model: mean KL <= 1e-5, top-1 >= 99.9 % (hf_transformers' gates);
  - --adapter-out (where llama.cpp's format can hold the adapter): the gguf
    reader parses it (general.type adapter, adapter.type lora, lora_a/lora_b
    pairs of llama.cpp's shapes), llama-perplexity loads it with --lora on our
    base GGUF and gives the perplexity llama-perplexity gives on our merged
    GGUF within 2e-4 relative (the same runtime computing W x + s B (A x)
    where the merge has (W + s B A) x: measured up to 4.3e-5 apart), and
    ppl-eval's on the merged GGUF within 2e-3 (another runtime; llama.cpp keeps
    K and V in F16: measured up to 4.7e-4 apart, 1.1e-3 on other bases).
Then refusals, each one line naming the file, exit status 1, nothing
written: DoRA and modules_to_save for --adapter-out, lm_head on a base that
ties it to the embedding, DoRA on a tensor another
adapter changes too (peft's merge then depends on more than the row), an adapter for another
base (shapes), an unknown target module, missing adapter files, bad r /
lora_alpha, a rank that contradicts r, a math-changing key (lora_bias), and
a warning (not an error) for an absolute base_model_name_or_path that does
not exist. And the streaming design: a base tensor's edit loads only that
tensor's factors, so merging a 20 MiB adapter (rank 256 on every projection
of a base with 3 MiB tensors) may raise hfconv's peak resident memory by at
most twice the largest tensor's factors and 4 MiB (GNU time's maximum RSS).

usage: hf_lora.py HFCONV TEST_RUNNER_LOGITS MKMODEL PPL_EVAL LLAMA_PERPLEXITY
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGUFReader
from safetensors.numpy import load_file, save_file

from gguf_common import check, finish
from llama_tools import run_llama

try:
    import torch
    import transformers
    import peft
except ImportError as e:
    print(f"SKIP: torch/transformers/peft not installed ({e}); run scripts/test.sh (scripts/setup_tests_torch.sh)")
    sys.exit(77)

# hf_transformers reads the same first arguments: its checkpoints and comparisons
import hf_transformers as hft  # noqa: E402

HFCONV, RUNNER, MKMODEL, PPL_EVAL, LLAMA_PPL = sys.argv[1:6]
EPS = float(np.finfo(np.float32).eps)
# llama-perplexity with --lora against itself on the merge: the same runtime,
# W x + s B (A x) against (W + s B A) x (measured up to 4.3e-5 apart); against
# ppl-eval: another runtime, llama.cpp's K and V in F16 (up to 4.7e-4 apart here,
# 1.1e-3 on other random bases)
SAME_RUNTIME_TOL, CROSS_RUNTIME_TOL = 2e-4, 2e-3
LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

# family: its hf_transformers checkpoint (a Llama with linear rope scaling; Qwen2 with q/k/v biases)
FAMILIES = {"llama": "llama-linear", "qwen2": "qwen2"}

# label: (LoraConfig fields, scale, GGUF-able, config.json edits after saving)
ADAPTERS = {
    "plain": (dict(r=4, lora_alpha=8, target_modules=LINEAR), 1.0, True, {}),
    "rslora": (dict(r=8, lora_alpha=4, use_rslora=True, target_modules=["q_proj", "v_proj", "down_proj"]), 1.0,
               True, {}),
    "patterns": (dict(r=4, lora_alpha=8, target_modules=["q_proj", "k_proj", "down_proj"],
                      rank_pattern={"layers.1.self_attn.q_proj": 2, "down_proj": 6}, alpha_pattern={"k_proj": 3}),
                 1.0, True, {}),
    "fan-in-fan-out": (dict(r=4, lora_alpha=4, target_modules=["k_proj", "up_proj"]), 1.0, True,
                       {"fan_in_fan_out": True}),
    "embed-head": (dict(r=4, lora_alpha=16, target_modules=["embed_tokens", "lm_head", "q_proj"]), 1.0, True, {}),
    "modules-to-save": (dict(r=4, lora_alpha=8, target_modules=["q_proj"], modules_to_save=["v_proj"]), 1.0,
                        False, {}),
    "dora": (dict(r=4, lora_alpha=8, use_dora=True, target_modules=["q_proj", "k_proj", "o_proj"]), 1.0, False, {}),
    "scaled": (dict(r=4, lora_alpha=8, target_modules=LINEAR), 0.7, True, {}),
    # peft saves embed_tokens.base_layer.weight next to its factors; changed, it
    # replaces the base's and the factors apply on top (no LoRA GGUF can hold it)
    "embed-base-layer": (dict(r=4, lora_alpha=16, target_modules=["embed_tokens", "q_proj"]), 1.0, False, {}),
}
# label: the saved tensors whose name ends so are moved (0.1 x N(0, 1) added)
BASE_LAYER_EDITS = {"embed-base-layer": "embed_tokens.base_layer.weight"}
# several adapters on one command line, each with its scale
STACKS = {"two-adapters": [("plain", 0.7), ("patterns", -0.4)]}


def load(folder):
    return transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                             attn_implementation="eager").eval()


def make_adapter(base_dir, label, tmp):
    """A saved peft adapter with every trainable tensor randomized."""
    fields, _, _, edits = ADAPTERS[label]
    torch.manual_seed(sum(map(ord, label)))
    pm = peft.get_peft_model(load(base_dir), peft.LoraConfig(**fields))
    with torch.no_grad():
        for name, p in pm.named_parameters():
            if "lora_magnitude_vector" in name:
                p.mul_(1 + 0.2 * torch.randn_like(p))
            elif "lora_" in name or "modules_to_save" in name:
                p.copy_(0.15 * torch.randn_like(p) if "lora_" in name else p + 0.1 * torch.randn_like(p))
    out = os.path.join(tmp, f"{os.path.basename(base_dir)}-{label}")
    pm.save_pretrained(out)
    if label in BASE_LAYER_EDITS:
        path = os.path.join(out, "adapter_model.safetensors")
        saved = load_file(path)
        moved = [k for k in saved if k.endswith(BASE_LAYER_EDITS[label])]
        check(len(moved) == 1, f"{label}: peft saved {sorted(saved)}: no single {BASE_LAYER_EDITS[label]}")
        rng = np.random.default_rng(sum(map(ord, label)))
        for k in moved:
            saved[k] = (saved[k] + 0.1 * rng.standard_normal(saved[k].shape)).astype(saved[k].dtype)
        save_file(saved, path)
    if edits:
        path = os.path.join(out, "adapter_config.json")
        c = json.load(open(path))
        c.update(edits)
        json.dump(c, open(path, "w"), indent=2)
    return out


def peft_merge(base_dir, adapters, tmp, tag):
    """peft's merge_and_unload of adapters [(dir, scale)] in turn, saved as a checkpoint."""
    model = load(base_dir)
    for folder, scale in adapters:
        pm = peft.PeftModel.from_pretrained(model, folder)
        if scale != 1.0:
            for mod in pm.modules():
                if isinstance(mod, peft.tuners.lora.LoraLayer):
                    mod.set_scale("default", scale)
        model = pm.merge_and_unload()
    out = os.path.join(tmp, tag + "-peft")
    model.save_pretrained(out)
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(base_dir, f), out)
    return out, model.eval()


def hfconv(args):
    return subprocess.run([HFCONV] + args + ["-q"], capture_output=True, text=True)


def tensors(path):
    return {t.name: np.array(t.data, dtype=np.float64).reshape([int(n) for n in reversed(t.shape)])
            for t in GGUFReader(path).tensors}


def lora_bound(adapters, name):
    """sum |s| |B| |A| over the adapters' factors of a base tensor (HF name), elementwise max."""
    total = 0.0
    module = name[:-len(".weight")]
    for folder, scale in adapters:
        st = load_file(os.path.join(folder, "adapter_model.safetensors"))
        c = json.load(open(os.path.join(folder, "adapter_config.json")))
        for a_key, b_key in ((".lora_A.weight", ".lora_B.weight"), (".lora_embedding_A", ".lora_embedding_B")):
            a, b = st.get("base_model.model." + module + a_key), st.get("base_model.model." + module + b_key)
            if a is None:
                continue
            r = a.shape[0]
            alpha = c["lora_alpha"]
            for k, v in (c.get("alpha_pattern") or {}).items():
                if re.match(rf"(.*\.)?({k})$", module):
                    alpha = v
                    break
            s = abs(scale) * alpha / (np.sqrt(r) if c.get("use_rslora") else r)
            total += s * float((np.abs(b.astype(np.float64)) @ np.abs(a.astype(np.float64))).max())
    return total


def compare_merge(tag, ours_path, peft_path, base_path, adapters):
    ours, theirs, base = tensors(ours_path), tensors(peft_path), tensors(base_path)
    check(ours.keys() == theirs.keys(), f"{tag}: tensor names differ from peft's merge")
    worst, moved = 0.0, 0
    for name in sorted(ours.keys() & theirs.keys()):
        a, b = ours[name], theirs[name]
        diff = float(np.abs(a - b).max())
        hf_name = gguf_to_hf(name)
        bound = 8 * EPS * (float(np.abs(b).max()) + lora_bound(adapters, hf_name) if hf_name else 0.0)
        bound = max(bound, 8 * EPS * float(np.abs(b).max()))
        worst = max(worst, diff / bound if bound else diff)
        check(diff <= bound, f"{tag}: {name}: max |ours - peft| {diff:.3e} > {bound:.3e}")
        if float(np.abs(b - base[name]).max()) > bound:
            moved += 1
    print(f"{tag}: {len(ours)} tensors against peft's merge, worst {worst:.2f} of the bound, {moved} moved by the "
          f"adapters")
    check(moved > 0, f"{tag}: the adapters moved no tensor")
    return moved


GGUF_TO_HF = [(r"^token_embd\.weight$", "model.embed_tokens.weight"), (r"^output\.weight$", "lm_head.weight"),
              (r"^blk\.(\d+)\.attn_q\.weight$", r"model.layers.\1.self_attn.q_proj.weight"),
              (r"^blk\.(\d+)\.attn_k\.weight$", r"model.layers.\1.self_attn.k_proj.weight"),
              (r"^blk\.(\d+)\.attn_v\.weight$", r"model.layers.\1.self_attn.v_proj.weight"),
              (r"^blk\.(\d+)\.attn_output\.weight$", r"model.layers.\1.self_attn.o_proj.weight"),
              (r"^blk\.(\d+)\.ffn_gate\.weight$", r"model.layers.\1.mlp.gate_proj.weight"),
              (r"^blk\.(\d+)\.ffn_up\.weight$", r"model.layers.\1.mlp.up_proj.weight"),
              (r"^blk\.(\d+)\.ffn_down\.weight$", r"model.layers.\1.mlp.down_proj.weight")]


def gguf_to_hf(name):
    for pat, rep in GGUF_TO_HF:
        if re.match(pat, name):
            return re.sub(pat, rep, name)
    return None


def patient_llama(argv, marker):
    """run_llama, again up to twice more: on a loaded machine its three tries
    have all lost their output past the start."""
    for _ in range(3):
        p = run_llama(argv, marker)
        if p.returncode != 0 or marker in p.stdout + p.stderr:
            break
    return p


def check_adapter_gguf(tag, path, base_gguf, merged_gguf):
    r = GGUFReader(path)
    f = {k: v.contents() for k, v in r.fields.items()}
    check(f.get("general.type") == "adapter" and f.get("adapter.type") == "lora" and "adapter.lora.alpha" in f,
          f"{tag}: adapter keys {f.get('general.type')!r}, {f.get('adapter.type')!r}")
    base = {t.name: [int(n) for n in t.shape] for t in GGUFReader(base_gguf).tensors}
    names = {t.name: [int(n) for n in t.shape] for t in r.tensors}
    for name, shape in names.items():
        stem, kind = name.rsplit(".", 1)
        other = names.get(stem + (".lora_b" if kind == "lora_a" else ".lora_a"))
        check(stem in base and other is not None, f"{tag}: {name}: no base tensor or no partner")
        if stem not in base or other is None or kind != "lora_a":
            continue
        ne = base[stem]   # [cols, rows]; token_embd's factors are transposed (llama-adapter.cpp)
        fits = (other[1] == ne[0] and shape[1] == ne[1]) if stem == "token_embd.weight" else \
            (shape[0] == ne[0] and other[1] == ne[1] and shape[1] == other[0])
        check(fits, f"{tag}: {stem}: lora_a {shape}, lora_b {other} do not fit the base's {ne}")
    args = ["-f", hft.PPL_TEXT, "-c", hft.PPL_CTX, "--chunks", hft.PPL_CHUNKS, "-t", "2"]
    # the running perplexity after the last chunk is the final estimate, and
    # printed earlier: llama.cpp's logger may drop its last lines (llama_tools)
    last = f"[{hft.PPL_CHUNKS}]"
    with_lora, merged = (patient_llama([LLAMA_PPL, "-m", m] + extra + args, last)
                         for m, extra in ((base_gguf, ["--lora", path]), (merged_gguf, [])))
    q = subprocess.run([PPL_EVAL, merged_gguf, "--text", hft.PPL_TEXT, "--ctx", str(hft.PPL_CTX), "--chunks",
                        str(hft.PPL_CHUNKS), "--json", "--quiet"], capture_output=True, text=True)
    got = [re.search(re.escape(last) + r"([0-9.]+[0-9])", p.stdout + p.stderr) for p in (with_lora, merged)]
    for what, p, m in (("--lora", with_lora, got[0]), ("on the merge", merged, got[1])):
        check(m is not None, f"{tag}: llama-perplexity {what}: {p.returncode} {p.stderr.strip()[-300:]}")
    check(q.returncode == 0, f"{tag}: ppl-eval: {q.stderr.strip()[-300:]}")
    if not all(got) or q.returncode != 0:
        return
    lora_ppl, merged_ppl, ours = float(got[0].group(1)), float(got[1].group(1)), json.loads(q.stdout)["ppl"]
    print(f"{tag}: llama-perplexity --lora {lora_ppl:.4f}, on the merge {merged_ppl:.4f} "
          f"({abs(merged_ppl - lora_ppl) / lora_ppl:.1e} apart), ppl-eval {ours:.4f} "
          f"({abs(ours - lora_ppl) / lora_ppl:.1e})")
    check(abs(merged_ppl - lora_ppl) <= SAME_RUNTIME_TOL * lora_ppl,
          f"{tag}: --lora PPL {lora_ppl} vs llama-perplexity on our merged GGUF {merged_ppl}")
    check(abs(ours - lora_ppl) <= CROSS_RUNTIME_TOL * lora_ppl,
          f"{tag}: --lora PPL {lora_ppl} vs ppl-eval on our merged GGUF {ours}")


def merge_case(family, base_dir, base_gguf, tag, adapters, gguf_able, ids, tmp):
    peft_dir, peft_model = peft_merge(base_dir, adapters, tmp, tag)
    theirs = os.path.join(tmp, tag + "-peft.gguf")
    ours = os.path.join(tmp, tag + "-ours.gguf")
    r = hfconv([peft_dir, "-o", theirs, "--outtype", "f32"])
    check(r.returncode == 0, f"{tag}: hfconv on peft's merge: {r.stderr.strip()}")
    args = [base_dir, "-o", ours, "--outtype", "f32"]
    for folder, scale in adapters:
        args += ["--lora", folder if scale == 1.0 else f"{folder}:{scale}"]
    r = hfconv(args)
    check(r.returncode == 0, f"{tag}: hfconv --lora: {r.stderr.strip()}")
    if r.returncode != 0:
        return None
    if "fan-in-fan-out" in tag:
        check("warning: " in r.stderr and "fan_in_fan_out" in r.stderr, f"{tag}: no fan_in_fan_out warning")
    compare_merge(tag, ours, theirs, base_gguf, adapters)
    ref = hft.hf_logits(peft_model, ids)
    logits = [run_logits(path, ids, tmp) for path in (ours, base_gguf)]
    check(logits[0] is not None and logits[1] is not None, f"{tag}: the runner failed")
    if logits[0] is not None and logits[1] is not None:
        hft.compare(f"{tag}: runner vs transformers on peft's merge", ref, logits[0])
        # the comparison sees the adapters: the base is far from the merge
        lp, lq = hft.log_softmax(ref), hft.log_softmax(logits[1])
        kl = float((np.exp(lp) * (lp - lq)).sum(axis=1).mean())
        check(kl > 100 * hft.MAX_KL, f"{tag}: the base alone is as close to peft's merge (KL {kl:.2e})")
    if len(adapters) != 1:
        return ours
    folder, scale = adapters[0]
    out = os.path.join(tmp, tag + "-adapter.gguf")
    r = hfconv([base_dir, "--lora", folder if scale == 1.0 else f"{folder}:{scale}", "--adapter-out", out])
    if not gguf_able:
        check(r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and folder in r.stderr and
              not os.path.exists(out), f"{tag}: --adapter-out not refused in one line: {r.returncode} {r.stderr!r}")
        return ours
    check(r.returncode == 0, f"{tag}: --adapter-out: {r.stderr.strip()}")
    if r.returncode == 0 and os.access(LLAMA_PPL, os.X_OK):
        check_adapter_gguf(tag, out, base_gguf, ours)
    elif r.returncode == 0:
        print(f"{tag}: SKIP llama.cpp's --lora: {LLAMA_PPL} is not built (scripts/build_reference.sh)")
    return ours


def run_logits(gguf, ids, tmp):
    out = os.path.join(tmp, "logits.f32")
    r = subprocess.run([RUNNER, gguf, "logits", out] + [str(i) for i in ids], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"runner on {gguf}: {r.stderr.strip()}")
        return None
    return np.fromfile(out, dtype="<f4").reshape(len(ids), hft.VOCAB).astype(np.float64)


def refuse(tag, args, needle, tmp):
    out = os.path.join(tmp, "refused.gguf")
    r = hfconv(args + ["-o", out])
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 1 and len(lines) == 1 and needle in r.stderr and not os.path.exists(out),
          f"{tag}: expected one line naming {needle!r}, exit 1, nothing written; got {r.returncode} {r.stderr!r}")
    print(f"{tag}: refused: {lines[-1] if lines else ''}")


def edited_copy(src, dst, config=None, tensors_fn=None):
    shutil.copytree(src, dst)
    if config:
        path = os.path.join(dst, "adapter_config.json")
        c = json.load(open(path))
        c.update(config)
        json.dump(c, open(path, "w"))
    if tensors_fn:
        path = os.path.join(dst, "adapter_model.safetensors")
        save_file(tensors_fn(load_file(path)), path)
    return dst


def refusals(llama_dir, adapters, tmp):
    plain = adapters["plain"]
    bad = os.path.join(tmp, "bad")
    os.makedirs(bad)
    refuse("another base", [llama_dir, "--lora", edited_copy(
        plain, os.path.join(bad, "shapes"),
        tensors_fn=lambda t: {k: (np.concatenate([v, v], axis=1) if "q_proj.lora_A" in k else v)
                              for k, v in t.items()})], "shape does not fit", tmp)
    refuse("unknown target", [llama_dir, "--lora", edited_copy(
        plain, os.path.join(bad, "target"),
        tensors_fn=lambda t: {k.replace("q_proj", "c_attn"): v for k, v in t.items()})], "c_attn", tmp)
    empty = os.path.join(bad, "empty")
    os.makedirs(empty)
    refuse("missing adapter_config.json", [llama_dir, "--lora", empty], "adapter_config.json", tmp)
    no_weights = edited_copy(plain, os.path.join(bad, "noweights"))
    os.remove(os.path.join(no_weights, "adapter_model.safetensors"))
    refuse("missing weights", [llama_dir, "--lora", no_weights], "adapter_model.safetensors", tmp)
    refuse("bad r", [llama_dir, "--lora", edited_copy(plain, os.path.join(bad, "r0"), {"r": 0})], "'r'", tmp)
    refuse("bad alpha", [llama_dir, "--lora", edited_copy(plain, os.path.join(bad, "alpha"), {"lora_alpha": -2})],
           "lora_alpha", tmp)
    refuse("rank against r", [llama_dir, "--lora", edited_copy(plain, os.path.join(bad, "r8"), {"r": 8})],
           "rank 4", tmp)
    refuse("lora_bias", [llama_dir, "--lora", edited_copy(plain, os.path.join(bad, "bias"), {"lora_bias": True})],
           "lora_bias", tmp)
    refuse("DoRA with another adapter", [llama_dir, "--lora", plain, "--lora", adapters["dora"]],
           "which another adapter changes too", tmp)
    tied = os.path.join(bad, "tied-base")
    shutil.copytree(llama_dir, tied)
    edit = os.path.join(tied, "config.json")
    json.dump(dict(json.load(open(edit)), tie_word_embeddings=True), open(edit, "w"))
    refuse("lm_head of a tied base", [tied, "--lora", adapters["embed-head"]], "ties to the embeddings", tmp)
    # an absolute base_model_name_or_path that is not there: a warning only
    moved = edited_copy(plain, os.path.join(bad, "moved"), {"base_model_name_or_path": "/nonexistent/base"})
    out = os.path.join(tmp, "moved.gguf")
    r = hfconv([llama_dir, "--lora", moved, "-o", out, "--outtype", "f32"])
    check(r.returncode == 0 and "warning:" in r.stderr and "/nonexistent/base" in r.stderr and os.path.exists(out),
          f"missing base_model_name_or_path: expected a warning and a file, got {r.returncode} {r.stderr!r}")


def peak_rss_kib(args):
    """Peak resident memory of hfconv with args (GNU time's %M), or None without /usr/bin/time."""
    r = subprocess.run(["/usr/bin/time", "-f", "%M", HFCONV] + args + ["-q"], capture_output=True, text=True)
    check(r.returncode == 0, f"hfconv {args}: {r.stderr.strip()[-300:]}")
    return int(r.stderr.strip().splitlines()[-1]) if r.returncode == 0 else None


def bounded_memory(tmp):
    """A base of 3 MiB tensors and a rank-256 adapter on all of them (24 MiB of
    factors, 2 MiB the largest tensor's): merging may add at most twice the
    largest tensor's factors (as floats) and 4 MiB to the plain conversion's
    peak, far less than the adapter; loading it whole would add all of it."""
    if not os.access("/usr/bin/time", os.X_OK):
        print("SKIP memory check: no /usr/bin/time")
        return
    if b"__asan_init" in open(HFCONV, "rb").read():
        print("SKIP memory check: hfconv is built with AddressSanitizer (freed memory is held in quarantine)")
        return
    fields = hft.base(hidden_size=512, intermediate_size=1536, num_hidden_layers=2, num_attention_heads=8,
                      num_key_value_heads=8)
    torch.manual_seed(5)
    folder = os.path.join(tmp, "wide")
    transformers.LlamaForCausalLM(transformers.LlamaConfig(**fields)).save_pretrained(folder)
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(tmp, "tok", f), folder)
    pm = peft.get_peft_model(load(folder), peft.LoraConfig(r=256, lora_alpha=16, target_modules=LINEAR))
    adapter = os.path.join(tmp, "wide-adapter")
    pm.save_pretrained(adapter)
    out = os.path.join(tmp, "wide.gguf")
    plain = peak_rss_kib([folder, "-o", out, "--outtype", "f32"])
    merged = peak_rss_kib([folder, "-o", out, "--outtype", "f32", "--lora", adapter])
    size_kib = os.path.getsize(os.path.join(adapter, "adapter_model.safetensors")) // 1024
    largest_kib = 256 * (512 + 1536) * 4 // 1024
    if plain is None or merged is None:
        return
    print(f"peak RSS: {plain} KiB plain, {merged} KiB merging a {size_kib} KiB adapter "
          f"(largest tensor's factors {largest_kib} KiB)")
    check(merged - plain <= 2 * largest_kib + 4096,
          f"merging added {merged - plain} KiB of peak memory: more than one tensor's factors")


def main():
    rng = np.random.default_rng(17)
    ids = [1] + [int(i) for i in rng.integers(3, hft.VOCAB, hft.N_POS - 1)]
    tmp = tempfile.mkdtemp(prefix="hfq-lora-")
    adapters = {}
    try:
        for family in FAMILIES:
            base_dir, _ = hft.build(FAMILIES[family], tmp)
            base_gguf = os.path.join(tmp, family + ".gguf")
            r = hfconv([base_dir, "-o", base_gguf, "--outtype", "f32"])
            check(r.returncode == 0, f"{family}: hfconv: {r.stderr.strip()}")
            for label, (_, scale, gguf_able, _) in ADAPTERS.items():
                folder = make_adapter(base_dir, label, tmp)
                adapters[f"{family}-{label}" if family != "llama" else label] = folder
                merge_case(family, base_dir, base_gguf, f"{family} {label}", [(folder, scale)], gguf_able, ids, tmp)
            for label, parts in STACKS.items():
                stack = [(adapters[p if family == "llama" else f"{family}-{p}"], s) for p, s in parts]
                merge_case(family, base_dir, base_gguf, f"{family} {label}", stack, False, ids, tmp)
        refusals(os.path.join(tmp, FAMILIES["llama"]), adapters, tmp)
        bounded_memory(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(finish())


if __name__ == "__main__":
    main()
