// Compiled for plain x86-64 whatever the build's baseline (CMakeLists.txt), so that it runs on any x86-64 CPU.
#include "core/cpu_baseline.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <unistd.h>

namespace tern {

bool cpu_has_x86_64_v3() {
  __builtin_cpu_init();  // (this may run before the CPU library's own constructor)
  unsigned a, b, c, d;
  const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);  // leaf 1 ECX bit 29
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
}

#if defined(TERN_BASELINE_X86_64_V3)
namespace {
// A build for x86-64-v3 (-DTERN_ARCH_FLAGS=-march=x86-64-v3) on a CPU without it would die of SIGILL at its first vector
// instruction, often before main. This runs first — priority 101 comes before every C++ static
// initializer of the program or library it is linked into — and says what to build instead.
__attribute__((constructor(101))) void refuse_a_cpu_below_the_baseline() {
  if (cpu_has_x86_64_v3()) return;
  static const char kMessage[] =
      "tern: this build needs an x86-64-v3 CPU (AVX2, FMA, F16C), which this one is not; tern's default build "
      "(`scripts/build.sh`, x86-64-v2: docs/build.md) runs on it\n";
  (void)!write(2, kMessage, sizeof kMessage - 1);
  _exit(1);
}
}  // namespace
#endif

}  // namespace tern
#endif
