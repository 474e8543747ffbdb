#!/usr/bin/env bash
# The wheel users install anywhere: `pip wheel .` (pyproject.toml: libtern.so and the CLI, built by CMake),
# then auditwheel copies the Debian libraries both link that a manylinux system need not have (protobuf,
# onnx_proto, the OpenCL ICD loader, cpp-httplib and its TLS/compression libraries) into
# tern_runtime.libs, points the binaries at them and tags the wheel with the oldest manylinux glibc its
# symbols allow (manylinux_2_35 when built on Debian 12: glibc 2.34+ symbols and GCC 12's libstdc++).
#   bash scripts/wheel.sh [OUT_DIR]        default OUT_DIR: build-python/dist; prints the wheel's path last
# Tools: a venv outside the repository ($TERN_PYTHON_VENV, default ~/.cache/tern/python-venv) with
# python/wheel-requirements.txt. The build prints CMake's progress (pip -v), a few minutes on 2 cores.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$repo/build-python/dist}
venv=${TERN_PYTHON_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tern/python-venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q -r "$repo/python/wheel-requirements.txt"
raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT
# With ccache installed, CMake builds in build-wheel/ (beside build/, so the command lines match: CMakeLists.txt's
# TERN_CCACHE) with build/'s generator and compilers (scikit-build-core would pick g++ where CMake picks c++, and
# ccache hashes the compiler's name), and what scripts/build.sh compiled is not compiled again.
config=()
if command -v ccache > /dev/null; then
  export CMAKE_GENERATOR="Unix Makefiles"
  config=(-C build-dir="$repo/build-wheel" -C cmake.define.TERN_CCACHE=ON)
  if [ -f "$repo/build/CMakeCache.txt" ]; then
    CC=$(sed -n 's/^CMAKE_C_COMPILER:FILEPATH=//p' "$repo/build/CMakeCache.txt")
    CXX=$(sed -n 's/^CMAKE_CXX_COMPILER:FILEPATH=//p' "$repo/build/CMakeCache.txt")
    export CC CXX
  fi
fi
# (-v: pip shows the build backend's output only when verbose; CMake's [n/m] lines are the progress shown)
if ! "$venv/bin/pip" wheel -v --no-deps "${config[@]}" -w "$raw" "$repo" 2>&1 | tee "$raw/build.log" |
    { grep --line-buffered -E '^\s*\[[0-9]+/[0-9]+\]' >&2 || true; }; then
  tail -n 40 "$raw/build.log" >&2
  echo "wheel.sh: pip wheel failed (the end of its log is above)" >&2
  exit 1
fi
built=$(ls "$raw"/tern_runtime-*.whl)
mkdir -p "$out"
rm -f "$out"/tern_runtime-*.whl
if ! PATH="$venv/bin:$PATH" "$venv/bin/auditwheel" repair -w "$out" "$built" > "$raw/repair.log" 2>&1; then
  cat "$raw/repair.log" >&2
  echo "wheel.sh: auditwheel could not make $(basename "$built") portable (its log is above)" >&2
  exit 1
fi
ls "$out"/tern_runtime-*manylinux*.whl
