// NonZero: the indices of the input's non-zero elements, [rank, count] int64, in row-major order. Its length
// depends on the data: the shape rule counts when the input's value is known (always at run time), else leaves
// the count unknown. (Optimum's Cohere export builds repeat_interleave of the RoPE frequencies with it.)
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {

template <typename T>
bool is_nonzero(T v) {
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) return static_cast<float>(v) != 0.0f;
  else return v != T(0);
}

int64_t count_nonzero(const Tensor& x) {
  return visit_numeric(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    int64_t n = 0;
    for (int64_t i = 0; i < x.numel(); ++i) n += is_nonzero(x.data<T>()[i]);
    return n;
  });
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
    visit_numeric(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* in = x.data<T>();
      int64_t* out = y.data<int64_t>();
      int64_t found = 0;
      for (int64_t i = 0; i < x.numel() && found < count; ++i) {
        if (!is_nonzero(in[i])) continue;
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
