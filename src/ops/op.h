// The contract between graph nodes and kernels. One op class per ONNX op (or per family sharing one
// generic path): its constructor reads attributes once, infer() is the shape rule, run() calls kernels.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "kernels/cpu/context.h"

namespace tern::kernels::opencl {
class Kernels;
}

namespace tern {

// Thrown by InferContext when a rule needs a shape or value that is not known yet (load time only);
// the inference pass then leaves the outputs unknown.
struct ShapeUnknown {};

// What a shape rule sees: per input its dtype, shape and value. At run time all are known; at load
// time shapes may be symbolic and values exist only for constants.
class InferContext {
 public:
  struct Input {
    DType dtype = DType::Undefined;
    const SymShape* shape = nullptr;  // nullptr: rank unknown
    const Tensor* value = nullptr;    // nullptr: value unknown
    bool present = false;
    const SymShape* sym_value = nullptr;  // shape-like elements as dims (see Value::sym_value)
  };
  InferContext(const Node& node, std::vector<Input> inputs) : node(node), inputs_(std::move(inputs)) {
    outputs.resize(node.outputs.size());
  }

  const Node& node;
  struct Output {
    DType dtype = DType::Undefined;
    std::optional<SymShape> shape;
    std::optional<Tensor> value;  // set when the rule can compute the output itself (load-time folding)
    std::optional<SymShape> sym_value;
  };
  std::vector<Output> outputs;

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  bool has(int i) const { return i < num_inputs() && inputs_[static_cast<size_t>(i)].present; }
  DType dtype(int i) const;
  const SymShape& shape(int i) const;      // throws ShapeUnknown if the rank is unknown
  const Dim& dim(int i, int64_t k) const;  // dim k of input i; fails naming both when the input has fewer
  int64_t rank(int i) const { return static_cast<int64_t>(shape(i).size()); }
  const Tensor* value(int i) const { return has(i) ? inputs_[static_cast<size_t>(i)].value : nullptr; }
  const Tensor& require_value(int i) const;  // throws ShapeUnknown if unknown
  // The elements of a shape-like integer input as dims: from its value when known (negative entries
  // give nullopt), else from its symbolic value; nullopt when neither is known.
  std::optional<SymShape> shape_value(int i) const;
  // Concrete shape; throws ShapeUnknown if any dim is symbolic.
  Shape concrete_shape(int i) const;

  void set(int i, DType dtype, SymShape shape);
  void set(int i, DType dtype, const Shape& shape) { set(i, dtype, sym_shape(shape)); }
  // The output is known without running the op (Shape of known dims…): the node folds to a constant.
  void set_value(int i, Tensor value);
  // Records output i's elements as dims (after set()); when all are known the output folds to a constant.
  void set_sym_value(int i, SymShape elements);
  // Output i has input j's dtype and shape (element-wise ops).
  void same_as_input(int i, int j) { set(i, dtype(j), shape(j)); }
  // Fails with a message naming this node.
  template <typename... Args>
  [[noreturn]] void fail(const Args&... args) const {
    ::tern::fail(node.describe(), ": ", args...);
  }
  void check_dtype(int i, std::initializer_list<DType> allowed) const;

 private:
  std::vector<Input> inputs_;
};

// What an op keeps between runs of one sequence — a KV ring and how far it is filled — made by the op
// (StatefulOp::make_state), owned by the session and handed to run() as RunContext::state. Ops themselves do
// not change after prepare; a new sequence gets a new state.
class OpState {
 public:
  virtual ~OpState() = default;
  // Bytes of state a decode token reads (a KV cache's window at its fill).
  virtual int64_t bytes_per_token() const { return 0; }
  // Bytes of memory the state holds now (a KV cache as allocated so far).
  virtual int64_t held_bytes() const { return 0; }
  // Forgets sequence `row` of the batch and keeps the others: continuous batching hands the row to a
  // new request while the rest go on decoding.
  virtual void clear_row(int64_t /*row*/) {}
  // Sequence `to` becomes a copy of sequence `from` (n choices of one prompt share its prefill).
  virtual void copy_row(int64_t /*from*/, int64_t /*to*/) {}
  // Sequence `row` keeps its first n tokens and forgets the rest (a new prompt that begins with them reuses them).
  virtual void keep_prefix(int64_t /*row*/, int64_t /*n*/) {}
  // Continuous batching (SequenceState::set_batch_rows): a run's batch index i is sequence batch_rows[i] of the
  // state's total_rows, so a run feeds only the active sequences. Empty: index i is sequence i.
  std::vector<int64_t> batch_rows;
  int64_t total_rows = 0;
};

struct RunContext {
  const Node& node;
  const std::vector<const Tensor*>& inputs;    // nullptr for omitted optional inputs
  std::vector<Tensor>& outputs;                // allocated by the executor from infer()'s shapes
  Device device;                               // where outputs live and kernels run (inputs: see Op::runs_on)
  kernels::Context cpu;                        // the run's CPU kernel threads and scratch (kernels/cpu/context.h)
  kernels::opencl::Kernels* opencl = nullptr;  // the device's kernels when device is OpenCL
  OpState* state = nullptr;                    // the node's sequence state (StatefulOp::make_state), if any

  bool has(int i) const { return i < static_cast<int>(inputs.size()) && inputs[static_cast<size_t>(i)]; }
  const Tensor& in(int i) const;
  Tensor& out(int i) { return outputs[static_cast<size_t>(i)]; }
  // The inputs seen as an InferContext (values and dtypes, no shapes), so run() can reuse the
  // parameter parsing its shape rule does (Slice starts/ends, Pad pads…).
  InferContext values() const;
};

// What one run of a node costs: arithmetic and memory traffic, from its tensors' shapes and dtypes (the
// profiler's roofline). Estimates of the work the kernel must do, not counters.
struct OpCost {
  double flops = 0;  // floating-point operations (a multiply-add counts 2)
  double bytes = 0;  // bytes read and written
};

// What the session and the passes ask of every op besides its rule and its run.
struct OpTraits {
  // run() sets outputs as views of inputs (Reshape, Squeeze…): the executor then allocates nothing for them.
  bool outputs_are_views = false;
  // The output shapes are known only once run() has made the outputs (If, Loop, Scan: what their subgraphs
  // compute): the executor allocates nothing, run() sets each output, and the session plans no step.
  bool shapes_from_run = false;
  // False for ops whose result must not be computed at load time (random generators, stateful ops).
  bool foldable = true;
};

// The opt-in interface of ops that keep state per sequence (the cached attention and its KV ring).
class StatefulOp {
 public:
  virtual ~StatefulOp() = default;
  // An empty state for a new sequence.
  virtual std::unique_ptr<OpState> make_state() const = 0;
  // The bytes its state holds for a sequence of `rows` rows once `positions` tokens a row have passed (a KV
  // ring grown to that fill), from the node's inputs as shape inference left them; 0: no state that grows, or
  // sizes the shapes do not tell. What a generation checks against the memory cap before it starts.
  virtual int64_t state_bytes(int64_t /*rows*/, int64_t /*positions*/, const std::vector<const Value*>& /*inputs*/) const { return 0; }
};

// Every input read and output written once, one operation per output element: an element-wise op's cost.
OpCost elementwise_cost(const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& outputs);

// The opt-in interface of ops whose work is not element-wise or that run a named kernel: what the profiler
// asks (op_cost, op_kernel).
class CostedOp {
 public:
  virtual ~CostedOp() = default;
  // The cost of one run with these tensors (and the node's state, as the run left it).
  virtual OpCost cost(const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& outputs, const OpState* /*state*/) const {
    return elementwise_cost(inputs, outputs);
  }
  // The kernel run() picks for these inputs at tier `isa` (the run's Context::isa), named for profiles
  // ("gemv_panels fp32", "gemm_nbits int4"); empty: the op's own loop.
  virtual std::string kernel(const std::vector<const Tensor*>& /*inputs*/, kernels::Isa /*isa*/) const { return {}; }
};

class WeightPacker;  // ops/weight_packer.h

// An op: its shape rule and its run, fixed after load. What else it does it opts into by deriving from the
// interface: WeightPacker (repacks constant weights at load), StatefulOp (state per sequence), CostedOp (its own
// cost and kernel name); the accessors find them (an OpenCL variant answers with its CPU op's).
class Op {
 public:
  virtual ~Op() = default;
  virtual void infer(InferContext& ctx) const = 0;
  virtual void run(RunContext& ctx) const = 0;
  virtual OpTraits traits() const { return {}; }
  // Whether run() can compute this node on `device` with these inputs (which may be host or device
  // tensors: an op reads on the host what it needs there — ids, masks — and takes the rest as device
  // memory). The session runs the others on the CPU, moving their inputs to the host. Stateful ops
  // must answer the same for every run of a sequence.
  virtual bool runs_on(const Device& device, const std::vector<const Tensor*>& /*inputs*/) const { return device.kind == DeviceKind::CPU; }
  virtual WeightPacker* packer();
  const WeightPacker* packer() const { return const_cast<Op*>(this)->packer(); }
  virtual const StatefulOp* stateful() const { return dynamic_cast<const StatefulOp*>(this); }
  virtual const CostedOp* costed() const { return dynamic_cast<const CostedOp*>(this); }
};

// The cost of one run of `op` (CostedOp::cost). Default: elementwise_cost; nothing for outputs that view their inputs.
OpCost op_cost(const Op& op, const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& outputs, const OpState* state);
// The kernel `op` runs for these inputs (CostedOp::kernel); empty: its own loop.
std::string op_kernel(const Op& op, const std::vector<const Tensor*>& inputs, kernels::Isa isa);
// A new sequence's state for `op` (StatefulOp::make_state); null for ops without one.
std::unique_ptr<OpState> make_op_state(const Op& op);

using OpFactory = std::function<std::unique_ptr<Op>(const Node&)>;

class OpRegistry {
 public:
  static OpRegistry& instance();
  void add(const std::string& domain, const std::string& op_type, OpFactory f);
  // A device's variant of an op (ops/opencl/<op>_opencl.cpp: the CPU op with runs_on() and run() for
  // the device), built instead of the CPU op for sessions on that device.
  void add_variant(DeviceKind device, const std::string& domain, const std::string& op_type, OpFactory f);
  bool has(const std::string& domain, const std::string& op_type) const;
  // Builds the op for a node — the device's variant when it has one; throws UnsupportedError naming the
  // op, its domain and the node.
  std::unique_ptr<Op> create(const Node& node, DeviceKind device = DeviceKind::CPU) const;
  std::vector<std::string> names() const;

 private:
  OpRegistry();
  std::map<std::string, OpFactory> factories_, opencl_variants_;
};

// Convenience for the common case of an op whose constructor takes the node.
template <typename T>
OpFactory factory() {
  return [](const Node& n) { return std::make_unique<T>(n); };
}

// Normalizes a possibly negative axis against `rank`; fails naming the node when out of range.
int64_t normalize_axis(const Node& node, int64_t axis, int64_t rank);
// Indices as int64 with negatives wrapped; fails naming the node on anything outside [-dim, dim).
std::vector<int64_t> checked_indices(const Node& node, const Tensor& indices, int64_t dim);
// A shape viewed as [outer, n, inner] around `axis`: the product of the dims before it, its size, and
// the product of the dims after it.
struct AxisSplit {
  int64_t outer, n, inner;
};
AxisSplit split_at_axis(const Shape& shape, int64_t axis);
// Numpy-style broadcast of symbolic shapes; fails naming the node when incompatible.
SymShape broadcast_shapes(const Node& node, const SymShape& a, const SymShape& b);
// Fails naming the node unless `from` broadcasts to `to` exactly (no dim of `to` grows): what a kernel
// writing `from` into a tensor of shape `to` (kernels::broadcast_copy) relies on.
void check_broadcasts_to(const Node& node, const Shape& from, const Shape& to);

}  // namespace tern
