#include "kernels/cpu/chunk_attention.h"

#include "kernels/cpu/chunk_attention_impl.h"
#include "kernels/cpu/x86/float_avx2/kernels.h"

namespace tern::kernels {

int64_t chunk_attention_scratch_floats(int64_t head_dim) { return kRows * head_dim; }

void chunk_attention(const ChunkAttentionArgs& a) {
#if TERN_FLOAT_KERNELS_AVX2
  if (float_kernels_avx2(a.isa)) return float_avx2::chunk_attention(a);
#endif
  chunk_attention_at_width(a);
}

}  // namespace tern::kernels
