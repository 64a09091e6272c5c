"""Small transformers checkpoints for the Python tests: random weights from
the config's initializer, norm weights 1 + noise and biases noise (transformers
makes them 1 and 0, which would hide a tensor mapped wrongly), saved with
save_pretrained beside mkmodel's tokenizer files."""
import os
import shutil
import subprocess

import torch


def build_checkpoint(label, cfg_cls, model_cls, fields, tmp, mkmodel, vocab):
    """(folder, model) of config fields, seeded by label, in tmp/label."""
    torch.manual_seed(sum(map(ord, label)))
    cfg = cfg_cls(**fields)
    cfg._attn_implementation = "eager"
    model = model_cls(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_((1.0 if "norm" in name else 0.0) + 0.3 * torch.randn_like(p))
    out = os.path.join(tmp, label)
    model.save_pretrained(out)
    tok = os.path.join(tmp, "tok")
    if not os.path.isdir(tok):
        subprocess.run([mkmodel, tok, "--vocab", str(vocab)], check=True, capture_output=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(tok, f), out)
    return out, model
