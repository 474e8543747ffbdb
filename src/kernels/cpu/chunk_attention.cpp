#include "kernels/cpu/chunk_attention.h"

#include "kernels/cpu/chunk_attention_impl.h"
#include "kernels/cpu/width_kernels.h"

namespace tern::kernels {

int64_t chunk_attention_scratch_floats(int64_t head_dim) { return kRows * head_dim; }

void baseline::chunk_attention(const ChunkAttentionArgs& a) { chunk_attention_at_width(a); }

void chunk_attention(const ChunkAttentionArgs& a) { kernel_table(a.isa).chunk_attention.fn(a); }

}  // namespace tern::kernels
