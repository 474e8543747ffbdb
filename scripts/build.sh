#!/usr/bin/env bash
# Configures and builds tern into build/ (build-asan/ with --sanitize: AddressSanitizer + UBSan;
# build-no-opencl/ with --no-opencl: -DTERN_OPENCL=OFF).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build
flags=(-DCMAKE_BUILD_TYPE=Release)
case "${1:-}" in
  --sanitize)
    dir=build-asan
    flags=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-g -O1" -DTERN_SANITIZE=ON) ;;
  --no-opencl)  # the CPU-only build: no OpenCL package compiled in or linked
    dir=build-no-opencl
    flags+=(-DTERN_OPENCL=OFF) ;;
esac
cmake -S . -B "$dir" "${flags[@]}" > /dev/null
cmake --build "$dir" -j "$(nproc)"
