#!/usr/bin/env bash
# Makes the venv tests/cli_serve.sh calls tern serve from with the openai client (requirements.txt):
# $TERN_SERVE_VENV, default ~/.cache/tern/serve-venv. Prints its python.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${TERN_SERVE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tern/serve-venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c "import openai, jsonschema" 2>/dev/null || "$venv/bin/pip" install -q -r "$here/requirements.txt"
echo "$venv/bin/python"
