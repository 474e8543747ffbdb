// NonZero: the indices of the input's non-zero elements, [rank, count] int64, in row-major order. Its length
// depends on the data: the shape rule counts when the input's value is known (always at run time), else leaves
// the count unknown. (Optimum's Cohere export builds repeat_interleave of the RoPE frequencies with it.)
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

// Calls f(bits, mask) over the input's elements as unsigned words of their size: an element is non-zero when
// bits & mask is (the mask drops a float's sign bit: −0 is zero, NaN is not). One loop per size, not per type.
template <typename F>
void visit_bits(const Tensor& x, F&& f) {
  visit_by_size(x.dtype(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U mask = is_float(x.dtype()) ? static_cast<U>(~(U{1} << (8 * sizeof(U) - 1))) : static_cast<U>(~U{0});
    f(static_cast<const U*>(x.raw()), mask);  // (as words: data<U>() would insist on the dtype)
  });
}

int64_t count_nonzero(const Tensor& x) {
  int64_t n = 0;
  visit_bits(x, [&](const auto* in, auto mask) {
    for (int64_t i = 0; i < x.numel(); ++i) n += (in[i] & mask) != 0;
  });
  return n;
}

class NonZeroOp : public Op {
 public:
  explicit NonZeroOp(const Node&) {}
  void infer(InferContext& ctx) const override {
    const Dim rank = Dim::known(static_cast<int64_t>(ctx.shape(0).size()));
    if (const Tensor* x = ctx.value(0)) ctx.set(0, DType::Int64, Shape{rank.value, count_nonzero(*x)});
    else ctx.set(0, DType::Int64, SymShape{rank, Dim{}});
  }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    Tensor& y = ctx.out(0);
    const int64_t rank = x.rank(), count = y.dim(1);
    visit_bits(x, [&](const auto* in, auto mask) {
      int64_t* out = y.data<int64_t>();
      int64_t found = 0;
      for (int64_t i = 0; i < x.numel() && found < count; ++i) {
        if ((in[i] & mask) == 0) continue;
        for (int64_t a = rank - 1, rest = i; a >= 0; --a) {  // the flat index as coordinates, last axis fastest
          out[a * count + found] = rest % x.dim(a);
          rest /= x.dim(a);
        }
        ++found;
      }
    });
  }
};

}  // namespace

void register_nonzero(OpRegistry& r) { r.add("", "NonZero", factory<NonZeroOp>()); }

}  // namespace tern
