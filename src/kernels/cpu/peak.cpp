#include "kernels/cpu/peak.h"

#include "kernels/cpu/peak_impl.h"
#include "kernels/cpu/width_kernels.h"

namespace tern::kernels {

FmaChains baseline::fma_chains(int64_t iterations, float seed) { return fma_chains_at_width(iterations, seed); }

FmaChains run_fma_chains(int64_t iterations, float seed) { return kernel_table(default_isa()).fma_chains.fn(iterations, seed); }

}  // namespace tern::kernels
