// ring_attention.cpp's kernel at tier avx2 of an x86-64-v2 build (kernels.h).
#include "kernels/cpu/ring_attention_impl.h"
#include "kernels/cpu/x86/float_avx2/kernels.h"

namespace tern::kernels::float_avx2 {

template <typename T>
void ring_attention(const float* q, float* out, const RingAttentionArgs<T>& a) {
  ring_attention_at_width(q, out, a);
}

template void ring_attention<float>(const float*, float*, const RingAttentionArgs<float>&);
template void ring_attention<f16>(const float*, float*, const RingAttentionArgs<f16>&);
template void ring_attention<KvBlockQ8_0>(const float*, float*, const RingAttentionArgs<KvBlockQ8_0>&);
template void ring_attention<KvBlockQ4_0>(const float*, float*, const RingAttentionArgs<KvBlockQ4_0>&);

}  // namespace tern::kernels::float_avx2
