#!/usr/bin/env bash
# Builds and runs every test: unit tests, CLI checks and the ONNX node-test conformance suite
# (which reads ../shared/onnx-node-tests and skips with a message when it is absent).
# --sanitize does the same in a separate AddressSanitizer + UBSan build, --no-opencl in a build without
# the OpenCL path (-DTERN_OPENCL=OFF).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh "$@"
dir=build
[ "${1:-}" = "--sanitize" ] && dir=build-asan
[ "${1:-}" = "--no-opencl" ] && dir=build-no-opencl
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan_suppressions.txt  # PoCL's own allocations
"$dir/tern" devices | sed -n 1p  # the kernels' ISA tier on this machine (the kernel tests run every tier it has)
ctest --test-dir "$dir" --output-on-failure
