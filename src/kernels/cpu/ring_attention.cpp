#include "kernels/cpu/ring_attention.h"

#include "kernels/cpu/ring_attention_impl.h"
#include "kernels/cpu/width_kernels.h"

namespace tern::kernels {

int64_t ring_attention_scratch_floats(int64_t q_heads, int64_t kv_heads, int64_t head_dim, int64_t n_keys, int threads, int64_t rows) {
  const Layout L = layout(q_heads, kv_heads, head_dim, std::max<int64_t>(n_keys, 1));
  return rows * (q_heads * head_dim + L.blocks * q_heads * L.partial()) + L.per_thread() * std::max(threads, 1);
}

bool ring_attention_takes_rows(int64_t n_keys, int64_t rows) {
  return rows >= 1 && n_keys >= rows && block_keys(n_keys) == block_keys(n_keys - rows + 1);
}

template <typename T>
void baseline::ring_attention(const float* q, float* out, const RingAttentionArgs<T>& a) {
  ring_attention_at_width(q, out, a);
}
template void baseline::ring_attention<float>(const float*, float*, const RingAttentionArgs<float>&);
template void baseline::ring_attention<f16>(const float*, float*, const RingAttentionArgs<f16>&);
template void baseline::ring_attention<KvBlockQ8_0>(const float*, float*, const RingAttentionArgs<KvBlockQ8_0>&);
template void baseline::ring_attention<KvBlockQ4_0>(const float*, float*, const RingAttentionArgs<KvBlockQ4_0>&);

template <>
void ring_attention<float>(const float* q, float* out, const RingAttentionArgs<float>& a) {
  kernel_table(a.isa).ring_attention_f32.fn(q, out, a);
}
template <>
void ring_attention<f16>(const float* q, float* out, const RingAttentionArgs<f16>& a) {
  kernel_table(a.isa).ring_attention_f16.fn(q, out, a);
}
template <>
void ring_attention<KvBlockQ8_0>(const float* q, float* out, const RingAttentionArgs<KvBlockQ8_0>& a) {
  kernel_table(a.isa).ring_attention_q8_0.fn(q, out, a);
}
template <>
void ring_attention<KvBlockQ4_0>(const float* q, float* out, const RingAttentionArgs<KvBlockQ4_0>& a) {
  kernel_table(a.isa).ring_attention_q4_0.fn(q, out, a);
}

}  // namespace tern::kernels
