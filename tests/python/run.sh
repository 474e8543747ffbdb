#!/usr/bin/env bash
# The Python package's tests, against the wheel a user gets: builds it from this checkout (scripts/wheel.sh:
# `pip wheel .`, the CMake build pyproject.toml drives, made portable by auditwheel), installs it into a venv
# outside the repository beside the test requirements, and runs pytest from outside the source tree, so `import tern` is the installed package.
#   bash tests/python/run.sh [PYTEST ARGS]     venv: $TERN_PYTHON_VENV, default ~/.cache/tern/python-venv
# Needs PyPI (the build backend, onnxruntime): without it, says so and exits 0 — as the openai client check does.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
venv=${TERN_PYTHON_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tern/python-venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if ! "$venv/bin/pip" install -q -r "$repo/tests/python/requirements.txt"; then
  echo "python: tests skipped (PyPI not reachable for tests/python/requirements.txt)"
  exit 0
fi
start=$(date +%s)
log=$(mktemp)
wheel=$(TERN_PYTHON_VENV="$venv" bash "$repo/scripts/wheel.sh" "$repo/build-python/dist" 2>"$log") ||
  { tail -n 60 "$log"; echo "python: scripts/wheel.sh failed"; exit 1; }
echo "python: built $(basename "$wheel") ($(( $(date +%s) - start )) s, $(du -k "$wheel" | cut -f1) KB)"
"$venv/bin/pip" install -q --force-reinstall --no-deps "$wheel"
cd "$(mktemp -d)"
env -u TERN_LIBRARY TERN_C_EXAMPLE="$repo/build/tests/c_example" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider --rootdir "$repo/tests/python" "$repo/tests/python" "$@"
