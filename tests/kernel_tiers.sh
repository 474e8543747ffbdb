#!/usr/bin/env bash
# The kernel tests at every other ISA tier this CPU runs, each forced with TERN_ISA (unit_tests runs them at the
# tier tern picks here, so that one is not run twice: under qemu-aarch64 that halved this test's 290 s; the int8
# GEMV's test compares the tiers with each other in one process). Prints the tiers run.
#   kernel_tiers.sh TERN_CLI TERN_TESTS
set -euo pipefail
cli=$1 tests=$2
ran=()
picked=$("$cli" devices 2> /dev/null | sed -n 's/.*ISA tier \([a-z0-9]*\).*/\1/p' | head -n 1)
for tier in sse42 avx2 avxvnni avx512 avx512vnni avx512bf16 amx neon neondot neoni8mm; do
  TERN_ISA=$tier "$cli" devices > /dev/null 2>&1 || continue  # a tier this CPU cannot run, or of the other architecture
  [ "$tier" != "$picked" ] || { ran+=("$tier: in unit_tests"); continue; }
  TERN_ISA=$tier "$tests" -tc="*gemm*,*gemv*,*matmul*,*attention*,*kernel*,*norm*,*swiglu*" > /tmp/kernel-tier-$$.log 2>&1 ||
    { cat /tmp/kernel-tier-$$.log; echo "kernel tests failed at tier $tier"; exit 1; }
  ran+=("$tier: $(grep -oE 'test cases: +[0-9]+ \| +[0-9]+ passed' /tmp/kernel-tier-$$.log)")
done
rm -f /tmp/kernel-tier-$$.log
printf 'kernel tests at tier %s\n' "${ran[@]}"
