// Gather, GatherElements, GatherND, ScatterND, ScatterElements. Every index is bounds-checked and
// out-of-range indices fail with the node named (never an out-of-bounds read).
#include <cstring>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gather.h"
#include "ops/op.h"
#include "ops/register_all.h"

namespace tern {
namespace {}  // namespace

std::vector<int64_t> checked_indices(const Node& node, const Tensor& t, int64_t dim) {
  if (t.dtype() != DType::Int64 && t.dtype() != DType::Int32) fail(node.describe(), ": indices must be int32 or int64");
  std::vector<int64_t> v = t.to_i64_vector();
  for (int64_t& i : v) {
    if (i < -dim || i >= dim) fail(node.describe(), ": index ", i, " is out of range for a dimension of size ", dim);
    if (i < 0) i += dim;
  }
  return v;
}

namespace {

class GatherOp : public Op, public CostedOp {
 public:
  explicit GatherOp(const Node& n) : axis_(n.attr_int("axis", 0)) {}
  // Reads only the rows it copies (an embedding lookup touches a few rows of the table).
  OpCost cost(const std::vector<const Tensor*>& in, const std::vector<Tensor>& out, const OpState*) const override {
    return {0, static_cast<double>(in[1]->nbytes() + 2 * out[0].nbytes())};
  }
  void infer(InferContext& ctx) const override {
    const SymShape& data = ctx.shape(0);
    const SymShape& idx = ctx.shape(1);
    int64_t axis = normalize_axis(ctx.node, axis_, static_cast<int64_t>(data.size()));
    SymShape out(data.begin(), data.begin() + axis);
    out.insert(out.end(), idx.begin(), idx.end());
    out.insert(out.end(), data.begin() + axis + 1, data.end());
    ctx.set(0, ctx.dtype(0), out);
    // Picking dims out of a shape-like vector (Shape(x)[1]) keeps them symbolic.
    auto elems = ctx.shape_value(0);
    if (data.size() == 1 && elems && ctx.value(1)) {
      SymShape picked;
      const int64_t n = static_cast<int64_t>(elems->size());
      for (int64_t i : ctx.value(1)->to_i64_vector()) {
        if (i < -n || i >= n) ctx.fail("index ", i, " is out of range for a dimension of size ", n);
        picked.push_back((*elems)[static_cast<size_t>(i < 0 ? i + n : i)]);
      }
      ctx.set_sym_value(0, picked);
    }
  }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    int64_t axis = normalize_axis(ctx.node, axis_, x.rank());
    const AxisSplit at = split_at_axis(x.shape(), axis);  // not a structured binding: clang 14 cannot capture one
    const int64_t outer = at.outer, n = at.n, inner = at.inner;
    const Tensor& ids = ctx.in(1);
    // int64 indices already in [0, n) (token ids, mostly) are used in place; others are normalized.
    const int64_t* direct = nullptr;
    if (ids.dtype() == DType::Int64) {
      direct = ids.data<int64_t>();
      for (int64_t i = 0; i < ids.numel() && direct; ++i)
        if (direct[i] < 0 || direct[i] >= n) direct = nullptr;
    }
    std::vector<int64_t> idx;
    if (!direct) idx = checked_indices(ctx.node, ids, n);
    const int64_t* rows = direct ? direct : idx.data();
    const size_t row_bytes = bytes_for(x.dtype(), inner);
    if (outer == 1 && x.buffer() && x.buffer()->file_backed()) {
      // A table read from the model file's mapping (an embedding): a row at a time, its pages given back once
      // copied (Buffer::release_read), or a prompt's rows would keep megabytes each resident.
      for (int64_t i = 0; i < ids.numel(); ++i) {
        kernels::gather_rows(x.raw(), 1, n, row_bytes, rows + i, 1, static_cast<char*>(ctx.out(0).raw()) + i * row_bytes);
        x.buffer()->release_read(static_cast<const char*>(x.raw()) + rows[i] * row_bytes, row_bytes);
      }
      return;
    }
    kernels::gather_rows(x.raw(), outer, n, row_bytes, rows, ids.numel(), ctx.out(0).raw());
  }

 private:
  int64_t axis_;
};

// The data elements GatherElements reads and ScatterElements writes, after checking what the kernel
// assumes: indices of the data's rank, no larger than the data off the axis, each inside the axis.
std::vector<int64_t> element_offsets(const Node& node, const Tensor& data, const Tensor& indices, int64_t axis) {
  if (indices.rank() != data.rank())
    fail(node.describe(), ": indices of rank ", indices.rank(), " for data of rank ", data.rank(), " (they must match)");
  for (int64_t k = 0; k < data.rank(); ++k)
    if (k != axis && indices.dim(k) > data.dim(k))
      fail(node.describe(), ": indices shape ", shape_str(indices.shape()), " exceeds data shape ", shape_str(data.shape()),
           " off the axis");
  std::vector<int64_t> idx = checked_indices(node, indices, data.dim(axis));
  return kernels::element_offsets(data.shape(), indices.shape(), idx.data(), axis);
}

class GatherElementsOp : public Op {
 public:
  explicit GatherElementsOp(const Node& n) : axis_(n.attr_int("axis", 0)) {}
  void infer(InferContext& ctx) const override {
    if (ctx.rank(0) != ctx.rank(1)) ctx.fail("data and indices must have the same rank");
    ctx.set(0, ctx.dtype(0), ctx.shape(1));
  }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const Tensor& it = ctx.in(1);
    std::vector<int64_t> off = element_offsets(ctx.node, x, it, normalize_axis(ctx.node, axis_, x.rank()));
    visit_by_size(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* s = static_cast<const T*>(x.raw());
      T* d = static_cast<T*>(ctx.out(0).raw());
      for (size_t i = 0; i < off.size(); ++i) d[i] = s[off[i]];
    });
  }

 private:
  int64_t axis_;
};

enum class Reduction { None, Add, Mul, Max, Min };

Reduction reduction_of(const Node& n) {
  std::string r = n.attr_string("reduction", "none");
  if (r == "none") return Reduction::None;
  if (r == "add") return Reduction::Add;
  if (r == "mul") return Reduction::Mul;
  if (r == "max") return Reduction::Max;
  if (r == "min") return Reduction::Min;
  fail(n.describe(), ": unknown reduction '", r, "'");
}

// dst[off[i] .. off[i]+len) (op)= upd[i*len .. (i+1)*len)
void scatter_apply(Tensor& out, const std::vector<int64_t>& off, int64_t len, const Tensor& upd, Reduction red) {
  visit_numeric(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = kernels::compute_t<T>;
    T* d = out.data<T>();
    const T* u = upd.data<T>();
    for (size_t i = 0; i < off.size(); ++i)
      for (int64_t j = 0; j < len; ++j) {
        T& t = d[off[i] + j];
        C a = static_cast<C>(t), b = static_cast<C>(u[static_cast<int64_t>(i) * len + j]);
        switch (red) {
          case Reduction::None: t = u[static_cast<int64_t>(i) * len + j]; continue;
          case Reduction::Add: a = static_cast<C>(a + b); break;
          case Reduction::Mul: a = static_cast<C>(a * b); break;
          case Reduction::Max: a = a > b ? a : b; break;
          case Reduction::Min: a = a < b ? a : b; break;
        }
        t = static_cast<T>(a);
      }
  });
}

class ScatterElementsOp : public Op {
 public:
  explicit ScatterElementsOp(const Node& n) : axis_(n.attr_int("axis", 0)), red_(reduction_of(n)) {}
  void infer(InferContext& ctx) const override { ctx.same_as_input(0, 0); }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const Tensor& it = ctx.in(1);
    Tensor& y = ctx.out(0);
    if (it.shape() != ctx.in(2).shape()) fail(ctx.node.describe(), ": indices and updates shapes differ");
    std::vector<int64_t> off = element_offsets(ctx.node, x, it, normalize_axis(ctx.node, axis_, x.rank()));
    std::memcpy(y.raw(), x.raw(), x.nbytes());
    scatter_apply(y, off, 1, ctx.in(2), red_);
  }

 private:
  int64_t axis_;
  Reduction red_;
};

// Element offsets of the slices an N-D index tuple selects: data[b..., i_0..i_{k-1}, :].
std::vector<int64_t> nd_offsets(const Node& node, const Shape& data, const Tensor& indices, int64_t batch_dims, int64_t* slice_len) {
  const int64_t k = indices.dim(-1);
  if (k < 1 || batch_dims + k > static_cast<int64_t>(data.size()))
    fail(node.describe(), ": index tuples of length ", k, " do not fit data of rank ", data.size());
  Shape strides(data.size(), 1);
  for (size_t d = data.size(); d-- > 1;) strides[d - 1] = strides[d] * data[d];
  *slice_len = strides[static_cast<size_t>(batch_dims + k - 1)];
  std::vector<int64_t> raw = indices.to_i64_vector();
  const int64_t tuples = static_cast<int64_t>(raw.size()) / k;
  int64_t batch = 1;
  for (int64_t b = 0; b < batch_dims; ++b) batch *= data[static_cast<size_t>(b)];
  const int64_t per_batch = batch ? tuples / batch : 0;
  const int64_t batch_stride = batch_dims ? strides[static_cast<size_t>(batch_dims - 1)] : 0;
  std::vector<int64_t> off(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t o = per_batch ? (t / per_batch) * batch_stride : 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t dim = data[static_cast<size_t>(batch_dims + j)];
      int64_t i = raw[static_cast<size_t>(t * k + j)];
      if (i < -dim || i >= dim) fail(node.describe(), ": index ", i, " is out of range for a dimension of size ", dim);
      o += (i < 0 ? i + dim : i) * strides[static_cast<size_t>(batch_dims + j)];
    }
    off[static_cast<size_t>(t)] = o;
  }
  return off;
}

class GatherNDOp : public Op {
 public:
  explicit GatherNDOp(const Node& n) : batch_dims_(n.attr_int("batch_dims", 0)) {}
  void infer(InferContext& ctx) const override {
    const SymShape& data = ctx.shape(0);
    const SymShape& idx = ctx.shape(1);
    if (idx.empty() || !idx.back().is_known()) throw ShapeUnknown{};
    int64_t k = idx.back().value;
    if (batch_dims_ + k > static_cast<int64_t>(data.size())) ctx.fail("index tuples too long for the data rank");
    SymShape out(idx.begin(), idx.end() - 1);
    out.insert(out.end(), data.begin() + batch_dims_ + k, data.end());
    ctx.set(0, ctx.dtype(0), out);
  }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    int64_t len = 0;
    std::vector<int64_t> off = nd_offsets(ctx.node, x.shape(), ctx.in(1), batch_dims_, &len);
    size_t es = dtype_size(x.dtype());
    for (size_t t = 0; t < off.size(); ++t)
      std::memcpy(static_cast<char*>(ctx.out(0).raw()) + t * static_cast<size_t>(len) * es,
                  static_cast<const char*>(x.raw()) + static_cast<size_t>(off[t]) * es, static_cast<size_t>(len) * es);
  }

 private:
  int64_t batch_dims_;
};

class ScatterNDOp : public Op {
 public:
  explicit ScatterNDOp(const Node& n) : red_(reduction_of(n)) {}
  void infer(InferContext& ctx) const override { ctx.same_as_input(0, 0); }
  void run(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    Tensor& y = ctx.out(0);
    std::memcpy(y.raw(), x.raw(), x.nbytes());
    int64_t len = 0;
    std::vector<int64_t> off = nd_offsets(ctx.node, x.shape(), ctx.in(1), 0, &len);
    if (ctx.in(2).numel() != static_cast<int64_t>(off.size()) * len)
      fail(ctx.node.describe(), ": updates has ", ctx.in(2).numel(), " elements, indices select ", static_cast<int64_t>(off.size()) * len);
    scatter_apply(y, off, len, ctx.in(2), red_);
  }

 private:
  Reduction red_;
};

}  // namespace

void register_gather_scatter(OpRegistry& r) {
  r.add("", "Gather", factory<GatherOp>());
  r.add("", "GatherElements", factory<GatherElementsOp>());
  r.add("", "GatherND", factory<GatherNDOp>());
  r.add("", "ScatterND", factory<ScatterNDOp>());
  r.add("", "ScatterElements", factory<ScatterElementsOp>());
  r.add("", "Scatter", factory<ScatterElementsOp>());
}

}  // namespace tern
