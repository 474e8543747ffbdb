// Whether this x86-64 CPU has x86-64-v3's vector instructions (AVX2, FMA, F16C; the CPU library also checks
// the OS saves their registers): the avx2 tier, and the baseline of an x86-64-v3 build.
#pragma once

namespace tern {

#if defined(__x86_64__)
bool cpu_has_x86_64_v3();
#endif

}  // namespace tern
