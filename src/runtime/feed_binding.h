// How a run's feeds meet the graph's inputs: each checked (name, dtype, shape, host memory) and bound to its
// slot, and the sizes of the inputs' symbolic dims read off them — the key of a step plan. When every node's
// output shapes follow from those dims (decided at load), a run whose dims equal the previous run's replays a
// plan: outputs preallocated once, no shape rules, no allocation per node — a decode step (session.cpp builds
// and replays them).
#pragma once
#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graph/ir.h"

namespace tern {

struct IOInfo {
  std::string name;
  DType dtype = DType::Undefined;
  std::optional<SymShape> shape;
};

class FeedBinding {
 public:
  // At load, after the passes: the graph's inputs and their symbolic dims; whether runs can replay plans.
  void prepare(const Graph& g, const std::string& model_path);
  const std::vector<IOInfo>& inputs() const { return inputs_; }

  // Binds `feeds` (matched by name; every graph input must be given) to the graph-input slots of `values`;
  // `binding` gets the size of each symbolic input dim (`fed`: scratch, so a decode step allocates nothing).
  // Fails naming the input and what is wrong, also when two inputs disagree on a dim's size.
  void bind(const std::vector<std::pair<std::string, Tensor>>& feeds, std::vector<Tensor>& values, std::vector<char>& fed,
            std::vector<int64_t>& binding) const;
  // The binding feeds of these shapes would get, before there is any data (ActivationForecast): bind's checks
  // on names, ranks, fixed dims and dims that must agree.
  void bind_shapes(const std::vector<std::pair<std::string, Shape>>& shapes, std::vector<int64_t>& binding) const;
  // How a dim's size follows from the binding: a constant plus terms, each a coefficient times factors, each
  // factor a sum of binding entries — "past_sequence_length + sequence_length", "2*batch_size*sequence_length",
  // "batch*(past + seq)" (graph/ir.h's dim arithmetic). nullopt when a symbol in it is no input's dim.
  struct SizeFormula {
    struct Term {
      int64_t coefficient = 1;
      std::vector<std::vector<size_t>> factors;
    };
    int64_t constant = 0;
    std::vector<Term> terms;
    // Its size for `binding` (saturating at INT64_MAX).
    int64_t size(const std::vector<int64_t>& binding) const;
  };
  std::optional<SizeFormula> formula(const Dim& d) const;
  // A node output's dims as formulas (prepare), or null when some dim is none (or its shape was not inferred).
  const std::vector<SizeFormula>* dims_of(int value) const {
    const auto& d = output_dims_[static_cast<size_t>(value)];
    return d ? &*d : nullptr;
  }
  // "batch_size 1, sequence_length 9000": the binding's dims by name (errors name a run by them); "inputs of
  // fixed shapes" when there are none.
  std::string describe(const std::vector<int64_t>& binding) const;
  // Whether `shapes` (what a run with `binding` produced, by value id) are the graph's symbolic shapes with the
  // binding's sizes put in. If not, the shapes depend on more than the input dims: call never_replay().
  bool shapes_follow(const std::vector<int64_t>& binding, const std::vector<Shape>& shapes) const;
  bool replayable() const { return replayable_.load(std::memory_order_relaxed); }
  void never_replay() { replayable_.store(false, std::memory_order_relaxed); }

 private:
  // `dtype` Undefined: not checked (bind_shapes).
  void check_feed(const IOInfo& info, DType dtype, const Shape& shape) const;
  // binding[i] = input_dims_[i]'s size as `shape_of` (by input index) gives it, then the checks that dims agree.
  void fill_binding(const std::function<const Shape&(size_t input)>& shape_of, std::vector<int64_t>& binding) const;
  int first_dim(const std::string& symbol) const;  // the first input_dims_ entry naming `symbol`, or -1
  [[noreturn]] void fail_not_input(const std::string& name) const;
  struct InputDim {
    size_t input;  // index in inputs_
    size_t axis;
    std::string symbol;
    // Feeds must agree on what a symbol is (tern::DimsOf reads each from one input): the earlier input
    // dim with this symbol, if any, and for a sum ("past_sequence_length + sequence_length") the input
    // dims of its terms, when every term has one.
    int same_as = -1;
    std::vector<size_t> terms;
  };
  const Graph* graph_ = nullptr;
  std::vector<std::optional<std::vector<SizeFormula>>> output_dims_;  // by value id: dims_of
  std::string model_path_;
  std::vector<IOInfo> inputs_;
  std::vector<InputDim> input_dims_;
  // Set at load: a graph whose shapes turn out to depend on more than the input dims is never planned.
  std::atomic<bool> replayable_{false};
};

}  // namespace tern
