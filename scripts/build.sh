#!/usr/bin/env bash
# Configures and builds tern into build/ (or build-asan/ with --sanitize: AddressSanitizer + UBSan).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build
flags=(-DCMAKE_BUILD_TYPE=Release)
if [ "${1:-}" = "--sanitize" ]; then
  dir=build-asan
  flags=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-g -O1" -DTERN_SANITIZE=ON)
fi
cmake -S . -B "$dir" "${flags[@]}" > /dev/null
cmake --build "$dir" -j "$(nproc)"
