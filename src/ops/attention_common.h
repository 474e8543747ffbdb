// Pieces every attention op shares (ONNX Attention, and ONNX Runtime's Attention and
// MultiHeadAttention): layout changes, cache concatenation, and the per-(batch, head) loop over the
// attention kernel with grouped KV heads and an additive bias.
#pragma once
#include <limits>

#include "core/tensor.h"

namespace tern {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// [B, H, S, D] float32 copy of a [B, S, H·D] tensor (or float32 view of a 4-D [B, H, S, D] one).
Tensor to_bhsd(const Tensor& t, int64_t heads);
// [B, S, H·D] from [B, H, S, D].
Tensor from_bhsd(const Tensor& t);
// concat(past, cur) along the sequence axis (2) of [B, H, S, D] float32 tensors; past may be null.
Tensor concat_seq(const Tensor* past, const Tensor& cur);

struct AttentionCall {
  float scale = 1, softcap = 0;
  const Tensor* bias = nullptr;  // [B, Hq, Sq, T] float32 additive, or null
  Tensor* record = nullptr;      // optional [B, Hq, Sq, T] copy of the scores at record_stage
  int record_stage = 0;
};

// Y [B, Hq, Sq, Dv] = softmax(Q·Kᵀ·scale + bias)·V; query head h reads KV head h / (Hq / Hkv).
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionCall& call);

}  // namespace tern
