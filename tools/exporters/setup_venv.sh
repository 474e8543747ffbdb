#!/usr/bin/env bash
# Makes the exporters' venv (torch, transformers, Optimum, onnxruntime, onnxruntime-genai…) from the
# pinned requirements.txt, outside the repository: $TERN_VENV, default ~/.cache/tern/venv. PyPI's torch
# is the CUDA build (about 4 GB with its libraries); it runs on the CPU. Prints the venv's python.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${TERN_VENV:-$HOME/.cache/tern/venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q -r "$here/requirements.txt"
echo "$venv/bin/python"
