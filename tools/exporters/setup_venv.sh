#!/usr/bin/env bash
# Makes an exporters' venv outside the repository and prints its python:
#   setup_venv.sh           Optimum's (requirements.txt: optimum-onnx, which holds transformers below 4.58,
#                           onnxruntime's quantizers, gguf): $TERN_VENV, default ~/.cache/tern/venv
#   setup_venv.sh current   the newest torch.onnx, transformers and onnxruntime-genai builder
#                           (requirements-current.txt): $TERN_VENV, default ~/.cache/tern/venv-current
# make_exports.py makes in each venv the cells whose exporter runs there. PyPI's torch is the CUDA build (about
# 4 GB with its libraries); it runs on the CPU.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
case "${1:-optimum}" in
  optimum) requirements=requirements.txt default=venv ;;
  current) requirements=requirements-current.txt default=venv-current ;;
  *) echo "usage: setup_venv.sh [optimum|current]" >&2; exit 2 ;;
esac
venv="${TERN_VENV:-$HOME/.cache/tern/$default}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q -r "$here/$requirements"
echo "$venv/bin/python"
