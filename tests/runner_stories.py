"""The runner on real trained models (stories260K, TinyStories-656K) against
an independent numpy forward pass computed from the Hugging Face safetensors
(float64, Hugging Face's rotate-half rope on the unpermuted q/k rows).

The GGUFs are written here with gguf-py (the reference writer), permuting q/k
rows to GGUF's interleaved order as llama.cpp's converter does, so this test
does not depend on our converter; given HFCONV, the models are also converted
with `hfconv --outtype f32` and checked the same way. Checked: logits on a
few prompts, greedy decoding of stories260K from BOS (ids equal to numpy's,
text = the story llama2.c documents), and golden values recorded from the
numpy reference.

usage: runner_stories.py TEST_RUNNER_LOGITS [HFCONV]
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

RUNNER = None  # test_runner_logits, from the command line
FIXTURES = os.environ.get("HFQ_FIXTURES", "")
MODEL_DIR = os.path.join(FIXTURES, "models", "stories260K")
MODEL_656K = os.path.join(FIXTURES, "models", "TinyStories-656K")
HFCONV = None  # optional, from the command line
GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner_stories_golden.json")
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    aliases = header.get("__metadata__", {})
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", name
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(t["shape"]).astype(np.float64)
    for alias, stored in aliases.items():   # tied weights stored once (TinyStories-656K)
        if stored in out and alias not in out:
            out[alias] = out[stored]
    return out


def permute(w, n_head):
    """Hugging Face rotate-half rows -> interleaved pairs (llama.cpp convert_hf_to_gguf)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def add_vocab(g, sp):
    """tokenizer.* keys from a SentencePiece model, as llama.cpp's converter writes them."""
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i).encode())
        scores.append(sp.get_score(i))
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 5 if sp.is_unused(i)
                     else 6 if sp.is_byte(i) else 1)
    g.add_tokenizer_model("llama")
    g.add_tokenizer_pre("default")
    g.add_token_list(tokens)
    g.add_token_scores(scores)
    g.add_token_types(types)
    g.add_bos_token_id(sp.bos_id())
    g.add_eos_token_id(sp.eos_id())
    g.add_unk_token_id(sp.unk_id())
    g.add_add_bos_token(True)
    g.add_add_eos_token(False)


def write_gguf(path, cfg, w, sp=None):
    """The model as an F32 GGUF (with the tokenizer when sp is given)."""
    import gguf
    n_head, n_kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    g = gguf.GGUFWriter(path, "llama")
    if sp is not None:
        add_vocab(g, sp)
    g.add_context_length(cfg["max_position_embeddings"])
    g.add_embedding_length(cfg["hidden_size"])
    g.add_block_count(cfg["num_hidden_layers"])
    g.add_feed_forward_length(cfg["intermediate_size"])
    g.add_head_count(n_head)
    g.add_head_count_kv(n_kv)
    g.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    g.add_rope_freq_base(cfg["rope_theta"])
    g.add_rope_dimension_count(cfg["hidden_size"] // n_head)
    f32 = lambda a: np.ascontiguousarray(a, dtype=np.float32)
    g.add_tensor("token_embd.weight", f32(w["model.embed_tokens.weight"]))
    g.add_tensor("output_norm.weight", f32(w["model.norm.weight"]))
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        g.add_tensor(f"blk.{i}.attn_norm.weight", f32(w[p + "input_layernorm.weight"]))
        g.add_tensor(f"blk.{i}.attn_q.weight", f32(permute(w[p + "self_attn.q_proj.weight"], n_head)))
        g.add_tensor(f"blk.{i}.attn_k.weight", f32(permute(w[p + "self_attn.k_proj.weight"], n_kv)))
        g.add_tensor(f"blk.{i}.attn_v.weight", f32(w[p + "self_attn.v_proj.weight"]))
        g.add_tensor(f"blk.{i}.attn_output.weight", f32(w[p + "self_attn.o_proj.weight"]))
        g.add_tensor(f"blk.{i}.ffn_norm.weight", f32(w[p + "post_attention_layernorm.weight"]))
        g.add_tensor(f"blk.{i}.ffn_gate.weight", f32(w[p + "mlp.gate_proj.weight"]))
        g.add_tensor(f"blk.{i}.ffn_up.weight", f32(w[p + "mlp.up_proj.weight"]))
        g.add_tensor(f"blk.{i}.ffn_down.weight", f32(w[p + "mlp.down_proj.weight"]))
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()


class Reference:
    """Hugging Face LlamaForCausalLM in float64, one sequence, KV cache."""

    def __init__(self, cfg, w):
        self.cfg, self.w = cfg, w
        self.n_head, self.n_kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.hd = cfg["hidden_size"] // self.n_head
        self.eps, self.L = cfg["rms_norm_eps"], cfg["num_hidden_layers"]
        self.inv_freq = cfg["rope_theta"] ** (-np.arange(0, self.hd, 2) / self.hd)

    def norm(self, x, g):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * g

    def rope(self, x, pos):  # x: [T, heads, hd]; rotate_half pairs (i, i + hd/2)
        ang = np.outer(pos, self.inv_freq)                    # [T, hd/2]
        cos = np.concatenate([np.cos(ang)] * 2, axis=-1)[:, None, :]
        sin = np.concatenate([np.sin(ang)] * 2, axis=-1)[:, None, :]
        half = self.hd // 2
        rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos + rot * sin

    def logits(self, tokens):
        w, T = self.w, len(tokens)
        pos = np.arange(T)
        x = w["model.embed_tokens.weight"][tokens]           # [T, E]
        mask = np.triu(np.full((T, T), -np.inf), 1)
        for i in range(self.L):
            p = f"model.layers.{i}."
            h = self.norm(x, w[p + "input_layernorm.weight"])
            q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(T, self.n_head, self.hd)
            k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(T, self.n_kv, self.hd)
            v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, self.n_kv, self.hd)
            q, k = self.rope(q, pos), self.rope(k, pos)
            rep = self.n_head // self.n_kv
            k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
            att = np.einsum("thd,shd->hts", q, k) / np.sqrt(self.hd) + mask
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            o = np.einsum("hts,shd->thd", att, v).reshape(T, -1)
            x = x + o @ w[p + "self_attn.o_proj.weight"].T
            h = self.norm(x, w[p + "post_attention_layernorm.weight"])
            g, u = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
            x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
        out = w.get("lm_head.weight", w["model.embed_tokens.weight"])
        return self.norm(x, w["model.norm.weight"]) @ out.T


def runner_logits(gguf_path, tokens, tmp):
    out = os.path.join(tmp, "logits.f32")
    p = subprocess.run([RUNNER, gguf_path, "logits", out] + [str(t) for t in tokens], capture_output=True, text=True)
    check(p.returncode == 0, f"runner logits: {p.stderr.strip()}")
    return np.fromfile(out, dtype="<f4").reshape(len(tokens), -1) if p.returncode == 0 else None


def runner_greedy(gguf_path, prompt, n):
    p = subprocess.run([RUNNER, gguf_path, "greedy", str(n)] + [str(t) for t in prompt], capture_output=True, text=True)
    check(p.returncode == 0, f"runner greedy: {p.stderr.strip()}")
    return [int(t) for t in p.stdout.split()]


def check_logits(path, ref, prompts, tmp, label):
    """Runner logits vs the float64 reference; returns the last rows of both."""
    rows = []
    for tokens in prompts:
        ours, exact = runner_logits(path, tokens, tmp), ref.logits(tokens)
        if ours is None:
            rows.append((None, exact[-1]))
            continue
        diff = np.abs(ours - exact).max()
        print(f"{label}: {len(tokens)} tokens, max |logit diff| {diff:.2e} (logits up to {np.abs(exact).max():.1f})")
        check(diff < 1e-4, f"{label}: max abs logit diff {diff} on {tokens}")
        rows.append((ours[-1], exact[-1]))
    return rows


def gguf_files(model_dir, cfg, w, tmp):
    """The model as GGUF: written with gguf-py, and converted by hfconv when given."""
    name = os.path.basename(model_dir)
    files = [(os.path.join(tmp, name + "-gguf-py.gguf"), "gguf-py")]
    write_gguf(files[0][0], cfg, w)
    if HFCONV:
        out = os.path.join(tmp, name + "-hfconv.gguf")
        p = subprocess.run([HFCONV, model_dir, "-o", out, "--outtype", "f32", "-q"], capture_output=True, text=True)
        check(p.returncode == 0, f"hfconv {name}: {p.stderr.strip()}")
        if p.returncode == 0:
            files.append((out, "hfconv"))
    return files


def test_stories260K(tmp):
    import sentencepiece
    cfg = json.load(open(os.path.join(MODEL_DIR, "config.json")))
    w = read_safetensors(os.path.join(MODEL_DIR, "model.safetensors"))
    ref = Reference(cfg, w)
    sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(MODEL_DIR, "tokenizer.model"))
    golden = json.load(open(GOLDEN))
    prompts = [[1] + sp.encode(p["text"]) for p in golden["prompts"]]
    for path, how in gguf_files(MODEL_DIR, cfg, w, tmp):
        rows = check_logits(path, ref, prompts, tmp, f"stories260K ({how})")
        for (ours, exact), p in zip(rows, golden["prompts"]):
            # golden values recorded from the float64 reference
            check(exact.argmax() == p["argmax_last"], f"{p['text']!r}: reference argmax moved")
            check(np.allclose(exact[:8], p["logits_last_head"], atol=1e-9, rtol=0),
                  f"{p['text']!r}: reference logits moved: {exact[:8].tolist()}")
            check(ours is not None and np.allclose(ours[:8], p["logits_last_head"], atol=1e-4, rtol=0),
                  f"{p['text']!r}: golden logits ({how})")

        # greedy decoding from BOS: the story llama2.c documents for stories260K
        n = golden["greedy"]["n"]
        ours = runner_greedy(path, [1], n)
        tokens = [1]
        for _ in range(n):
            tokens.append(int(ref.logits(tokens)[-1].argmax()))
        check(ours == tokens[1:], f"greedy ids differ from the reference ({how}):\n ours {ours}\n ref  {tokens[1:]}")
        text = sp.decode(ours)
        print(f"greedy ({how}): {text!r}")
        check(text.startswith(golden["greedy"]["text_prefix"]), f"greedy story ({how}): {text!r}")


def test_656K(tmp):
    """Another shape (hidden 128, head 16, eps 1e-6, vocab 2048, the tied
    weight stored as lm_head.weight), on fixed token ids."""
    cfg = json.load(open(os.path.join(MODEL_656K, "config.json")))
    w = read_safetensors(os.path.join(MODEL_656K, "model.safetensors"))
    ref = Reference(cfg, w)
    rng = np.random.default_rng(656)
    prompts = [[1] + [int(t) for t in rng.integers(3, cfg["vocab_size"], n)] for n in (6, 40)]
    for path, how in gguf_files(MODEL_656K, cfg, w, tmp):
        check_logits(path, ref, prompts, tmp, f"TinyStories-656K ({how})")


def main():
    if not os.path.isfile(os.path.join(MODEL_DIR, "model.safetensors")):
        print(f"SKIP: no stories260K fixture under {MODEL_DIR}")
        return 77
    try:
        import gguf  # noqa: F401
        import sentencepiece  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e}")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        test_stories260K(tmp)
        if os.path.isfile(os.path.join(MODEL_656K, "model.safetensors")):
            test_656K(tmp)
        else:
            print(f"note: no TinyStories-656K fixture under {MODEL_656K}")
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    RUNNER = sys.argv[1]
    HFCONV = sys.argv[2] if len(sys.argv) > 2 else None
    sys.exit(main())
