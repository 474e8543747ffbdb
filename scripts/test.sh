#!/usr/bin/env bash
# Builds and runs every test: unit tests, CLI checks and the ONNX node-test conformance suite
# (which reads ../shared/onnx-node-tests and skips with a message when it is absent).
# --sanitize does the same in a separate AddressSanitizer + UBSan build, --no-opencl in a build without
# the OpenCL path (-DTERN_OPENCL=OFF), --aarch64 in a build cross-compiled for AArch64 whose tests run under
# qemu-aarch64 (scripts/setup.sh --aarch64 installs the cross compiler, arm64 libraries and qemu-user).
# --minimal (or --aarch64 --minimal) checks the embedded variant against the full build (tests/minimal_build.sh),
# on x86-64 under `qemu-x86_64 -cpu Westmere` (no AVX at all: the baseline's own kernels) when qemu-user is there.
# --tsan runs the concurrency tests (many threads on one session, sessions side by side, the kernels' pool, the
# C API from C threads) in a ThreadSanitizer build, failing on any report.
# Without an option it ends with the Python package's tests: the wheel built by `pip wheel .`, installed in a
# venv outside the repository, pytest against it (tests/python/run.sh; skipped with a message without PyPI).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ] && [ "${!#}" = "--minimal" ]; then
  [ -x build/tern ] || bash scripts/build.sh
  bash scripts/build.sh "$@"
  case "$1" in
    --aarch64) dir=build-aarch64-minimal runner=(qemu-aarch64) ;;
    --x86-64-v3) dir=build-x86-64-v3-minimal runner=() ;;
    *) dir=build-minimal runner=()
       [ "$(uname -m)" = x86_64 ] && command -v qemu-x86_64 > /dev/null && runner=(qemu-x86_64 -cpu Westmere) ;;
  esac
  exec bash tests/minimal_build.sh "$dir/tern" build/tern ../shared "$dir/minimal-check" "${runner[@]}"
fi
if [ "${1:-}" = "--tsan" ]; then
  bash scripts/build.sh --tsan
  export TSAN_OPTIONS="halt_on_error=1 abort_on_error=1 second_deadlock_stack=1"
  build-tsan/tests/tern_concurrency_tests  # tests/test_concurrency.cpp
  build-tsan/tests/test_c_threads models/default
  echo "ThreadSanitizer: no reports"
  exit 0
fi
bash scripts/build.sh "$@" --tests
dir=build
[ "${1:-}" = "--sanitize" ] && dir=build-asan
[ "${1:-}" = "--no-opencl" ] && dir=build-no-opencl
[ "${1:-}" = "--aarch64" ] && dir=build-aarch64
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan_suppressions.txt  # PoCL's own allocations
run=()
[ "$dir" = build-aarch64 ] && run=(qemu-aarch64)
cpu=$("${run[@]}" "$dir/tern" devices | sed -n 1p)  # the kernels' ISA tier here (the kernel tests run every tier it has)
echo "$cpu"
# Two at a time on two cores (the tests that time answers are RUN_SERIAL); the source-tree checks (LABELS
# source) only in the main pass.
jobs=(-j "$(nproc)")
[ "$dir" = build ] || jobs+=(-LE source)
# Under qemu-aarch64 the unit, kernel-tier, conformance and C API tests: the CLI's own checks run the same
# library code natively and under ASan (3 of qemu's minutes), and the text compare below runs the CLI there.
# (Not the scalar tier there: portable C++ that the x86-64 passes run natively and under ASan, 241 s of qemu's time.)
[ "$dir" = build-aarch64 ] && jobs+=(-R "^(unit_tests|unit_tests_models|kernel_tier_neon.*|onnx_node_conformance|contrib_op_conformance|c_api|c_example)$")
ctest --test-dir "$dir" --output-on-failure "${jobs[@]}" || {
  # A long test's output is cut in the middle by log viewers: its failures, crashes and sanitizer reports
  # again, last, with the test case each came from.
  grep -n -B12 -A40 -E "CRASHED|ERROR: (Address|Leak)Sanitizer|runtime error:|terminate called|is NOT correct|ERROR: test case THREW" \
    "$dir/Testing/Temporary/LastTest.log" | tail -n 150
  exit 1
}
grep -h "kernel tests at tier" "$dir/Testing/Temporary/LastTest.log" || true  # each tier they ran at, by name
# (what skipped in this pass, for the last line: a test whose data or CPU feature is missing passes with a message)
skips=$(grep -i "skipped" "$dir/Testing/Temporary/LastTest.log" | grep -v -c -E "[0-9]+ skipped" || true)
# On a machine above AVX2, the tests that run whole models again at the tier of AVX2-only machines (Zen 3, Haswell
# to Comet Lake): the kernels' own tests already ran every tier this machine has (kernel_tier_*); what is left to see
# at avx2 is each model's path through the kernels it then picks. On one whose own tier is avx2 the first run was
# that run. (Every test again is the whole ctest pass again: 166 s on 2 Zen 3 cores, `ctest --test-dir build -j2`.)
at_or_below_avx2='ISA tier (sse42|avx2) '
if [ "$dir" = build ] && [ "$(uname -m)" = x86_64 ] && [[ ! $cpu =~ $at_or_below_avx2 ]]; then
  echo "== the model tests again with TERN_ISA=avx2 =="
  TERN_ISA=avx2 ctest --test-dir build --output-on-failure -j "$(nproc)" \
    -R "^(unit_tests_models|onnx_node_conformance|contrib_op_conformance|cli_generate|cli_chat|c_example)$"
fi
if [ "$dir" = build-aarch64 ] && [ -x build/tern ]; then  # the same text as the x86-64 build, byte for byte
  for model in models/default; do
    a=$(build/tern generate --model "$model" --prompt "And God said" --max-new-tokens 48 --greedy 2>/dev/null)
    b=$("${run[@]}" build-aarch64/tern generate --model "$model" --prompt "And God said" --max-new-tokens 48 --greedy 2>/dev/null)
    [ "$a" = "$b" ] || { printf 'x86-64:  %s\naarch64: %s\n' "$a" "$b"; exit 1; }
    echo "aarch64 and x86-64 generate the same text from $model"
  done
fi
if [ $# -eq 0 ]; then
  bash tests/python/run.sh
fi
# The last line: what did not run (../shared, models/ from scripts/get-models.sh, CPU features), so a run without them
# does not read as a full pass.
if [ ! -d ../shared ]; then
  echo "SKIPPED: ../shared is absent (the ONNX node tests, ORT-GenAI models, stories260K); $skips skip messages in the main ctest pass"
elif [ "$skips" -gt 0 ]; then
  echo "tests passed; $skips checks skipped for missing models or CPU features (their messages: grep -i skipped in the main ctest pass)"
else
  echo "tests passed, none skipped"
fi
