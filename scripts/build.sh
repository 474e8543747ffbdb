#!/usr/bin/env bash
# Configures and builds tern into build/ (build-asan/ with --sanitize: AddressSanitizer + UBSan, and with it the
# libFuzzer binary — --fuzz builds that alone — both by clang 16 (what scripts/setup.sh --ci installs, and what
# CI's fixed-seed fuzz replay was run with) or else the newest clang whose libFuzzer runtime is installed, 16 or
# later (its tests capture structured bindings in lambdas), else by g++ without the fuzz binary;
# build-no-opencl/ with --no-opencl: -DTERN_OPENCL=OFF; build-aarch64/ with --aarch64: cross-compiled for
# AArch64 Linux;
# build-tsan/ with --tsan: the concurrency tests with ThreadSanitizer (g++'s libtsan), CPU only).
# --x86-64-v3: build-x86-64-v3/ for AVX2 machines only (-DTERN_ARCH_FLAGS=-march=x86-64-v3; the default build's
# x86-64-v2 baseline runs on every x86-64 and as fast: docs/build.md).
# --minimal, alone or after --aarch64 or --x86-64-v3, builds the embedded variant instead (build-minimal/,
# build-aarch64-minimal/, build-x86-64-v3-minimal/): -DTERN_MINIMAL=ON -DTERN_STATIC=ON, a static CLI of the
# commands that run decoders (docs/embedded.md).
# It builds the CLI (and the libraries it links); --tests after the options builds every target, the test
# programs too (scripts/test.sh): the README's first command needs no test compiled.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build
flags=(-DCMAKE_BUILD_TYPE=Release)
minimal=()
targets=(--target tern_cli)
if [ $# -gt 0 ] && [ "${!#}" = "--tests" ]; then
  targets=()
  set -- "${@:1:$#-1}"
fi
# The sanitizer and fuzz builds: -O1 with line tables only (-g1), all a sanitizer's report needs. Full -g made
# each of their seven test binaries 215-370 MB and their compile and link the longest part of CI.
debug_flags=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-g1 -O1" "-DCMAKE_C_FLAGS_DEBUG=-g1 -O1")
if [ $# -gt 0 ] && [ "${!#}" = "--minimal" ]; then
  minimal=(-DTERN_MINIMAL=ON -DTERN_STATIC=ON)
  set -- "${@:1:$#-1}"
fi
# The sanitizer build's compiler: a clang (16 or later) with libFuzzer's runtime, so the fuzz targets link
# against the objects the sanitizer tests ran (one compile of the library, not two: 7 minutes of CI's).
fuzz_clang() {
  local c
  for c in clang++-16 $(compgen -c clang++- | sort -t- -k2 -n -r -u); do  # 16, then the newest first
    [[ $c =~ ^clang\+\+-([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -ge 16 ] || continue
    if echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
       "$c" -x c++ -fsanitize=fuzzer,address - -o /dev/null 2> /dev/null; then echo "$c"; return; fi
  done
}
case "${1:-}" in
  --sanitize|--fuzz)
    dir=build-asan
    flags=("${debug_flags[@]}" -DTERN_SANITIZE=ON)
    cxx=$(fuzz_clang)
    if [ -n "$cxx" ]; then
      export CXX=$cxx CC=${cxx/clang++/clang}
      flags+=(-DTERN_FUZZ=ON)
    elif [ "$1" = --fuzz ]; then
      echo "no clang 16 or later with libFuzzer's runtime (Debian: clang-16 and libclang-rt-16-dev; scripts/setup.sh --ci)" >&2
      exit 1
    fi
    [ "$1" = --fuzz ] && targets=(--target tern_fuzz) ;;
  --x86-64-v3)
    dir=build-x86-64-v3
    flags+=(-DTERN_ARCH_FLAGS=-march=x86-64-v3) ;;
  --no-opencl)  # the CPU-only build: no OpenCL package compiled in or linked
    dir=build-no-opencl
    flags+=(-DTERN_OPENCL=OFF) ;;
  --aarch64)  # cross-compiled for AArch64 (cmake/aarch64-linux-gnu.cmake); ctest runs it under qemu-aarch64
    dir=build-aarch64
    flags+=(-DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake) ;;
  --tsan)
    dir=build-tsan
    flags=("${debug_flags[@]}" -DTERN_TSAN=ON -DTERN_OPENCL=OFF)
    cmake -S . -B "$dir" "${flags[@]}" > /dev/null
    exec cmake --build "$dir" -j "$(nproc)" --target tern_concurrency_tests test_c_threads ;;
esac
if [ ${#minimal[@]} -gt 0 ]; then
  dir=$dir-minimal
  flags+=("${minimal[@]}")
fi
# The plain Release build compiles the objects the wheel's build does again (scripts/wheel.sh): through ccache,
# when it is installed, the second compile is a cache hit.
if [ "$dir" = build ] && command -v ccache > /dev/null; then flags+=(-DTERN_CCACHE=ON); fi
cmake -S . -B "$dir" "${flags[@]}" > /dev/null
cmake --build "$dir" -j "$(nproc)" "${targets[@]}"
