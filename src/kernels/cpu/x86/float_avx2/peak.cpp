// peak.cpp's FMA chains at tier avx2 of an x86-64-v2 build (kernels.h): the FLOP limit at the tier's width.
#include "kernels/cpu/peak_impl.h"
#include "kernels/cpu/x86/float_avx2/kernels.h"

namespace tern::kernels::float_avx2 {

FmaChains fma_chains(int64_t iterations, float seed) { return fma_chains_at_width(iterations, seed); }

}  // namespace tern::kernels::float_avx2
