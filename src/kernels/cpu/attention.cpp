#include "kernels/cpu/attention.h"

#include <cmath>
#include <cstring>

#include "kernels/cpu/softmax.h"
#include "kernels/cpu/vector_ops.h"

namespace tern::kernels {

void attention_head(const float* q, const float* k, const float* v, float* out, const AttentionArgs& a) {
  const int64_t n = a.q_len * a.kv_len;
  if (n == 0) {  // no keys: every query attends to nothing (and `scores` may be null)
    if (a.q_len * a.v_head > 0) std::memset(out, 0, static_cast<size_t>(a.q_len * a.v_head) * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < a.q_len; ++i)
    for (int64_t j = 0; j < a.kv_len; ++j)  // (59% of Gemma-3-270M's perplexity run at 1,024 tokens as a plain loop)
      a.scores[i * a.kv_len + j] = a.scoring(dot(q + i * a.head, k + j * a.head, a.head));
  if (a.record && a.record_stage == 0) std::memcpy(a.record, a.scores, static_cast<size_t>(n) * sizeof(float));
  if (a.bias)
    for (int64_t e = 0; e < n; ++e) a.scores[e] += a.bias[e];
  if (a.record && a.record_stage == 1) std::memcpy(a.record, a.scores, static_cast<size_t>(n) * sizeof(float));
  softmax(a.scores, a.scores, a.q_len, a.kv_len, 1, SoftmaxKind::Softmax);
  // A query that may attend to nothing (every key masked) gets zero weights, not NaN.
  for (int64_t i = 0; i < a.q_len; ++i) {
    float* row = a.scores + i * a.kv_len;
    bool any = false;
    for (int64_t j = 0; j < a.kv_len && !any; ++j) any = std::isfinite(row[j]);
    if (!any)
      for (int64_t j = 0; j < a.kv_len; ++j) row[j] = 0.0f;
  }
  if (a.record && a.record_stage == 2) std::memcpy(a.record, a.scores, static_cast<size_t>(n) * sizeof(float));
  for (int64_t i = 0; i < a.q_len; ++i) {
    float* o = out + i * a.v_head;
    std::memset(o, 0, static_cast<size_t>(a.v_head) * sizeof(float));
    for (int64_t j = 0; j < a.kv_len; ++j) {
      const float p = a.scores[i * a.kv_len + j];
      if (p == 0) continue;
      axpy(p, v + j * a.v_head, o, a.v_head);
    }
  }
}

}  // namespace tern::kernels
