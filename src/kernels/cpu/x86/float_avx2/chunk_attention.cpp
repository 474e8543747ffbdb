// chunk_attention.cpp's kernel at tier avx2 of an x86-64-v2 build (kernels.h).
#include "kernels/cpu/chunk_attention_impl.h"
#include "kernels/cpu/x86/float_avx2/kernels.h"

namespace tern::kernels::float_avx2 {

void chunk_attention(const ChunkAttentionArgs& a) { chunk_attention_at_width(a); }

}  // namespace tern::kernels::float_avx2
