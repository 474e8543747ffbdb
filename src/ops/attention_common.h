// Pieces every attention op shares (ONNX Attention, and ONNX Runtime's Attention and
// MultiHeadAttention): layout changes, cache concatenation, and the per-(batch, head) loop over the
// attention kernel with grouped KV heads and an additive bias.
#pragma once
#include <limits>

#include "core/tensor.h"
#include "graph/ir.h"
#include "ops/op.h"

namespace tern {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// [B, H, S, D] float32 copy of a [B, S, H·D] tensor (or float32 view of a 4-D [B, H, S, D] one).
Tensor to_bhsd(const Tensor& t, int64_t heads);
// [B, S, H·D] from [B, H, S, D].
Tensor from_bhsd(const Tensor& t);
// concat(past, cur) along the sequence axis (2) of [B, H, S, D] float32 tensors; past may be null.
Tensor concat_seq(const Tensor* past, const Tensor& cur);

// Bias [B, H, S, T] that is 0 where allowed(b, i, j) — query i of batch b may see key j — and `masked`
// elsewhere (the same for every head).
template <typename Allowed>
Tensor allowed_bias(int64_t B, int64_t H, int64_t S, int64_t T, float masked, Allowed&& allowed) {
  Tensor bias(DType::Float32, {B, H, S, T});
  float* p = bias.data<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < S; ++i)
      for (int64_t j = 0; j < T; ++j) {
        const float v = allowed(b, i, j) ? 0.0f : masked;
        for (int64_t h = 0; h < H; ++h) p[((b * H + h) * S + i) * T + j] = v;
      }
  return bias;
}

// Adds an attention_bias input [B or 1, H or 1, S, T'] to the first T' <= T key columns of `bias`
// [B, H, S, T]; fails naming the node when it does not fit.
void add_attention_bias(Tensor& bias, const Tensor& extra, const Node& node);

struct AttentionCall {
  float scale = 1, softcap = 0;
  const Tensor* bias = nullptr;  // [B, Hq, Sq, T] float32 additive, or null
  Tensor* record = nullptr;      // optional [B, Hq, Sq, T] copy of the scores at record_stage
  int record_stage = 0;
};

// Y [B, Hq, Sq, Dv] = softmax(Q·Kᵀ·scale + bias)·V; query head h reads KV head h / (Hq / Hkv).
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionCall& call);

// CostedOp::cost of these attention ops: Q·Kᵀ and the weighted sum of V over every key, 2 flops per
// multiply-add (K's and V's head sizes taken as the output's), every input read and output written once.
// The keys: the present cache's length ([.., T, D]; a shared max-length buffer counts whole), else K's
// sequence, else the query's own (self-attention on packed projections).
OpCost attention_cost(const std::vector<const Tensor*>& in, const std::vector<Tensor>& out);

}  // namespace tern
