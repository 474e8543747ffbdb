#include "ops/attention_common.h"

#include "kernels/cpu/attention.h"
#include "kernels/cpu/copy.h"

namespace tern {

Tensor to_bhsd(const Tensor& t, int64_t heads) {
  Tensor f = cast_to(t, DType::Float32);
  if (t.rank() == 4) return f;
  if (t.rank() != 3 || heads <= 0 || t.dim(2) % heads != 0) fail("input ", shape_str(t.shape()), " does not split into ", heads, " heads");
  const int64_t B = t.dim(0), S = t.dim(1), D = t.dim(2) / heads;
  Tensor out(DType::Float32, {B, heads, S, D});
  kernels::transpose(f.raw(), {B, S, heads, D}, {0, 2, 1, 3}, out.raw(), 4);
  return out;
}

Tensor from_bhsd(const Tensor& t) {
  const int64_t B = t.dim(0), H = t.dim(1), S = t.dim(2), D = t.dim(3);
  Tensor out(DType::Float32, {B, S, H * D});
  kernels::transpose(t.raw(), t.shape(), {0, 2, 1, 3}, out.raw(), 4);
  return out;
}

Tensor concat_seq(const Tensor* past, const Tensor& cur) {
  if (!past) return cur;
  const int64_t B = cur.dim(0), H = cur.dim(1), Sp = past->dim(2), Sc = cur.dim(2), D = cur.dim(3);
  if (past->rank() != 4 || past->dim(0) != B || past->dim(1) != H || past->dim(3) != D)
    fail("past ", shape_str(past->shape()), " does not match the new keys/values ", shape_str(cur.shape()));
  Tensor out(DType::Float32, {B, H, Sp + Sc, D});
  const size_t row = static_cast<size_t>(D) * 4;
  kernels::copy_rows(past->raw(), Sp * row, out.raw(), (Sp + Sc) * row, B * H, Sp * row);
  kernels::copy_rows(cur.raw(), Sc * row, static_cast<char*>(out.raw()) + Sp * row, (Sp + Sc) * row, B * H, Sc * row);
  return out;
}

void add_attention_bias(Tensor& bias, const Tensor& extra, const Node& node) {
  Tensor e = cast_to(extra, DType::Float32);
  const int64_t B = bias.dim(0), H = bias.dim(1), S = bias.dim(2), T = bias.dim(3);
  if (e.rank() != 4 || e.dim(2) != S || e.dim(3) > T || (e.dim(0) != 1 && e.dim(0) != B) || (e.dim(1) != 1 && e.dim(1) != H))
    fail(node.describe(), ": attention_bias ", shape_str(e.shape()), " does not fit [", B, ",", H, ",", S, ",", T, "]");
  const int64_t Te = e.dim(3);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < S; ++i) {
        const float* src = e.data<float>() + (((e.dim(0) == 1 ? 0 : b) * e.dim(1) + (e.dim(1) == 1 ? 0 : h)) * S + i) * Te;
        float* dst = bias.data<float>() + ((b * H + h) * S + i) * T;
        for (int64_t j = 0; j < Te; ++j) dst[j] += src[j];
      }
}

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionCall& call) {
  const int64_t B = q.dim(0), Hq = q.dim(1), Sq = q.dim(2), D = q.dim(3);
  const int64_t Hkv = k.dim(1), T = k.dim(2), Dv = v.dim(3);
  if (Hkv == 0 || Hq % Hkv != 0) fail(Hq, " query heads are not a multiple of ", Hkv, " key/value heads");
  if (k.dim(0) != B || v.dim(0) != B) fail("batch of queries ", B, ", keys ", k.dim(0), ", values ", v.dim(0), " differ");
  if (k.dim(3) != D) fail("query head size ", D, " differs from key head size ", k.dim(3));
  if (v.dim(2) != T || v.dim(1) != Hkv) fail("values ", shape_str(v.shape()), " do not match keys ", shape_str(k.shape()));
  Tensor y(DType::Float32, {B, Hq, Sq, Dv});
  std::vector<float> scores(static_cast<size_t>(Sq * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t g = h / (Hq / Hkv);
      kernels::AttentionArgs a;
      a.q_len = Sq;
      a.kv_len = T;
      a.head = D;
      a.v_head = Dv;
      a.scoring = {call.scale, call.softcap};
      a.bias = call.bias ? call.bias->data<float>() + (b * Hq + h) * Sq * T : nullptr;
      a.scores = scores.data();
      if (call.record) {
        a.record = call.record->data<float>() + (b * Hq + h) * Sq * T;
        a.record_stage = call.record_stage;
      }
      kernels::attention_head(q.data<float>() + (b * Hq + h) * Sq * D, k.data<float>() + (b * Hkv + g) * T * D,
                              v.data<float>() + (b * Hkv + g) * T * Dv, y.data<float>() + (b * Hq + h) * Sq * Dv, a);
    }
  return y;
}

OpCost attention_cost(const std::vector<const Tensor*>& in, const std::vector<Tensor>& out) {
  OpCost c;
  for (const Tensor* t : in)
    if (t && t->raw()) c.bytes += static_cast<double>(t->nbytes());
  for (const Tensor& t : out)
    if (t.defined()) c.bytes += static_cast<double>(t.nbytes());
  int64_t keys = in[0]->rank() >= 2 ? in[0]->dim(1) : 1;
  if (out.size() > 1 && out[1].defined() && out[1].rank() >= 2) keys = out[1].dim(out[1].rank() - 2);
  else if (in.size() > 1 && in[1] && in[1]->rank() == 3) keys = in[1]->dim(1);
  else if (in.size() > 1 && in[1] && in[1]->rank() == 4) keys = in[1]->dim(2);
  c.flops = 4.0 * static_cast<double>(out[0].numel()) * static_cast<double>(keys);
  return c;
}

}  // namespace tern
