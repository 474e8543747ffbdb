#!/usr/bin/env bash
# The kernel tests at ISA tier TIER, forced with TERN_ISA, when this CPU runs it and tern does not pick it here
# (unit_tests runs the tests at the tier tern picks: under qemu-aarch64 running that one twice had doubled this
# test's time; the int8 GEMV's test compares the tiers with each other in one process). Each tier is a ctest entry
# of its own (tests/CMakeLists.txt lists them), so two run side by side. Prints what it ran.
#   kernel_tiers.sh TERN_CLI TERN_TESTS TIER
set -euo pipefail
cli=$1 tests=$2 tier=$3
if ! TERN_ISA=$tier "$cli" devices > /dev/null 2>&1; then  # a tier this CPU cannot run, or of the other architecture
  echo "kernel tests at tier $tier: not on this CPU"
  exit 0
fi
picked=$("$cli" devices 2> /dev/null | sed -n 's/.*ISA tier \([a-z0-9]*\).*/\1/p' | head -n 1)
if [ "$tier" = "$picked" ]; then
  echo "kernel tests at tier $tier: in unit_tests"
  exit 0
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
TERN_ISA=$tier "$tests" -tc="*gemm*,*gemv*,*matmul*,*attention*,*kernel*,*norm*,*swiglu*" > "$log" 2>&1 ||
  { cat "$log"; echo "kernel tests failed at tier $tier"; exit 1; }
echo "kernel tests at tier $tier: $(grep -oE 'test cases: +[0-9]+ \| +[0-9]+ passed' "$log")"
