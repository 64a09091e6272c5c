"""Static FP8 KV-cache scales end to end on stories260K (docs/calibration.md,
"KV-cache scales"):

1. quantize --calibration-file T --kv-scales writes hfq.kv_cache.k_scale /
   v_scale: per layer the largest |K| (after rope) and |V| of the calibration
   chunks over 448, against transformers running the same chunks (K captured
   at apply_rotary_pos_emb's output, V at v_proj's; the maximum over a head is
   the same in Hugging Face's row order and hfconv's);
2. --save-stats keeps the maxima, --stats FILE --kv-scales gives the same keys;
3. ppl-eval --kv-type fp8_e4m3 on the file says "static", --kv-dynamic says
   "dynamic" and equals the run on the file without the keys bit for bit;
   static and dynamic differ;
4. --calib-kv-type picks the calibration run's cache: f32 for 1 (as
   transformers keeps K and V), fp8_e4m3 gives other maxima past layer 0,
   recorded in hfq.calib.kv_type_k / _v;
5. llama.cpp's llama-perplexity loads the file (skipped when not built).

usage: kv_scales.py QUANTIZE HFCONV PPL_EVAL GGUF_INFO TOKENIZE LLAMA_PERPLEXITY
"""
import json
import os
import subprocess
import sys
import tempfile

from llama_tools import run_llama
from ppl_kld_common import FIXTURES, TEXT, check, finish, skip_without_fixtures, stories_f32_and_text

QUANTIZE, HFCONV, PPL_EVAL, GGUF_INFO, TOKENIZE, LLAMA_PPL = sys.argv[1:7]
MODEL = os.path.join(FIXTURES, "models", "stories260K")
CTX, CHUNKS = 128, 4


def run(argv):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True)


def must(argv):
    p = run(argv)
    check(p.returncode == 0, f"{os.path.basename(str(argv[0]))} {argv[1:]}: exit {p.returncode}: {p.stderr[-500:]}")
    return p


def meta(gguf):
    return json.loads(must([GGUF_INFO, "--json", gguf]).stdout)["metadata"]


def ppl(model, *extra):
    p = must([PPL_EVAL, model, "--text", TEXT, "--ctx", CTX, "--chunks", CHUNKS, "--json", "--quiet", *extra])
    return json.loads(p.stdout) if p.returncode == 0 else {}


def hf_maxima(text):
    """Per-layer max |K| after rope and max |V| of transformers over the calibration chunks."""
    import torch
    import transformers
    from transformers.models.llama import modeling_llama
    ids = [int(t) for t in must([TOKENIZE, "--tokenizer-dir", MODEL, "--text", text]).stdout.split()]
    model = transformers.AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32).eval()
    n_layer = model.config.num_hidden_layers
    k_max, v_max, calls = [0.0] * n_layer, [0.0] * n_layer, [0]
    rope = modeling_llama.apply_rotary_pos_emb

    def rope_hook(q, k, cos, sin, *a, **kw):
        qe, ke = rope(q, k, cos, sin, *a, **kw)
        il = calls[0] % n_layer
        calls[0] += 1
        k_max[il] = max(k_max[il], float(ke.abs().max()))
        return qe, ke

    def v_hook(il):
        def hook(_m, _i, out):
            v_max[il] = max(v_max[il], float(out.abs().max()))
        return hook

    modeling_llama.apply_rotary_pos_emb = rope_hook
    for il, layer in enumerate(model.model.layers):
        layer.self_attn.v_proj.register_forward_hook(v_hook(il))
    try:
        with torch.no_grad():
            for c in range(CHUNKS):   # as calibration: chunks of CTX tokens, BOS first
                chunk = [model.config.bos_token_id] + ids[c * CTX + 1:(c + 1) * CTX]
                model(torch.tensor([chunk]))
    finally:
        modeling_llama.apply_rotary_pos_emb = rope
    check(calls[0] == CHUNKS * n_layer, f"apply_rotary_pos_emb seen {calls[0]} times, not {CHUNKS * n_layer}")
    return k_max, v_max


def main():
    skip_without_fixtures()
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        print("SKIP: torch / transformers not installed")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        out, stats = (os.path.join(tmp, n) for n in ("kv.gguf", "stats.gguf"))
        f32, text = stories_f32_and_text(tmp, HFCONV)
        if not f32:
            return finish()
        calib = ["--calibration-file", text, "--calib-ctx", CTX, "--calib-chunks", CHUNKS]
        # an F32 cache, as transformers keeps K and V (the default F16 one rounds what later layers see)
        must([QUANTIZE, f32, out, "F32", *calib, "--calib-kv-type", "f32", "--kv-scales", "--save-stats", stats,
              "--quiet"])
        m = meta(out)
        k = m.get("hfq.kv_cache.k_scale", {}).get("value", [])
        v = m.get("hfq.kv_cache.v_scale", {}).get("value", [])
        check("kv_scales" in m.get("hfq.calib.applied", {}).get("value", []), "hfq.calib.applied lacks kv_scales")
        hk, hv = hf_maxima(text)
        check(len(k) == len(hk) and len(v) == len(hv), f"{len(k)}, {len(v)} scales for {len(hk)} layers")
        for il in range(min(len(k), len(hk))):
            print(f"layer {il}: K max {k[il] * 448:.6g} (transformers {hk[il]:.6g}), "
                  f"V max {v[il] * 448:.6g} (transformers {hv[il]:.6g})")
            check(abs(k[il] * 448 - hk[il]) <= 1e-4 * hk[il], f"layer {il}: K scale {k[il]} is not {hk[il]} / 448")
            check(abs(v[il] * 448 - hv[il]) <= 1e-4 * hv[il], f"layer {il}: V scale {v[il]} is not {hv[il]} / 448")

        # the statistics file carries the maxima: the same keys from it
        again = os.path.join(tmp, "again.gguf")
        must([QUANTIZE, f32, again, "F32", "--stats", stats, "--kv-scales", "--quiet"])
        m2 = meta(again)
        check(m2.get("hfq.kv_cache.k_scale") == m.get("hfq.kv_cache.k_scale") and
              m2.get("hfq.kv_cache.v_scale") == m.get("hfq.kv_cache.v_scale"), "--stats gives other scales")

        # the runner: static scales by default, --kv-dynamic as without them
        st, dy, plain = ppl(out, "--kv-type", "fp8_e4m3"), ppl(out, "--kv-type", "fp8_e4m3", "--kv-dynamic"), \
            ppl(f32, "--kv-type", "fp8_e4m3")
        check(st.get("kv_type", {}).get("scales") == "static", f"static run: kv_type {st.get('kv_type')}")
        check(dy.get("kv_type", {}).get("scales") == "dynamic", f"--kv-dynamic run: kv_type {dy.get('kv_type')}")
        check(plain.get("kv_type", {}).get("scales") == "dynamic", "a file without scales: not dynamic")
        check(dy.get("ppl") == plain.get("ppl"), f"--kv-dynamic PPL {dy.get('ppl')} != {plain.get('ppl')}")
        check(st.get("ppl") != dy.get("ppl"), "static and dynamic scales give the same PPL")
        check("scales" not in ppl(out).get("kv_type", {"scales": 1}), "an F16 cache reports FP8 scales")
        print(f"PPL fp8_e4m3 static {st.get('ppl')}, dynamic {dy.get('ppl')}")

        # calibrating under the FP8 cache: recorded, and later layers see other K, V
        fp8 = os.path.join(tmp, "fp8cal.gguf")
        must([QUANTIZE, f32, fp8, "F32", *calib, "--kv-scales", "--calib-kv-type", "fp8_e4m3", "--quiet"])
        m3 = meta(fp8)
        check(m3.get("hfq.calib.kv_type_k", {}).get("value") == "fp8_e4m3", "hfq.calib.kv_type_k not recorded")
        k3 = m3.get("hfq.kv_cache.k_scale", {}).get("value", [])
        check(k3[:1] == k[:1] and k3 != k, f"--calib-kv-type fp8_e4m3: K scales {k3} against {k}")

        if os.path.exists(LLAMA_PPL):
            p = run_llama([LLAMA_PPL, "-m", out, "-f", TEXT, "-c", CTX, "--chunks", 4, "-b", CTX, "-t", 2],
                          "Final estimate")
            check(p.returncode == 0 and "Final estimate" in p.stdout + p.stderr,
                  f"llama-perplexity does not load a file with static KV scales: {p.stderr[-400:]}")
        else:
            print("llama-perplexity not built: the llama.cpp load is not checked")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
