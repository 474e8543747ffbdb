// Reference scaled dot-product attention for one (batch, head): float32, scores materialized.
// The cached, streaming attention of the KV-cache issue replaces this on the LLM path.
#pragma once
#include <cstdint>

#include <cmath>

namespace tern::kernels {

// How a query·key dot product becomes an attention score: times scale, then, when softcap > 0,
// softcap·tanh(score/softcap) (Gemma-2's logit soft-capping), before any mask. Every attention kernel
// scores through this.
struct Scoring {
  float scale = 1;
  float softcap = 0;
  float operator()(float dot) const {
    const float s = dot * scale;
    return softcap > 0 ? softcap * std::tanh(s / softcap) : s;
  }
};

struct AttentionArgs {
  int64_t q_len = 0, kv_len = 0, head = 0, v_head = 0;
  Scoring scoring;              // scores before the bias
  const float* bias = nullptr;  // [q_len, kv_len] added to the scores (-inf masks), may be null
  float* scores = nullptr;      // [q_len, kv_len] workspace; holds the probabilities on return
  float* record = nullptr;      // optional copy of the scores at stage `record_stage`
  int record_stage = 0;         // 0: after scale (and softcap), 1: + bias, 2: probabilities
};

// out[q_len, v_head] = softmax(q·kᵀ·scale (+softcap) + bias) · v
void attention_head(const float* q, const float* k, const float* v, float* out, const AttentionArgs& a);

}  // namespace tern::kernels
