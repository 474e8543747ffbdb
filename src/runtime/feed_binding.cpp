#include "runtime/feed_binding.h"

#include <algorithm>
#include <limits>

namespace tern {

void FeedBinding::prepare(const Graph& g, const std::string& model_path) {
  graph_ = &g;
  model_path_ = model_path;
  for (int id : g.inputs) {
    const Value& v = g.values[static_cast<size_t>(id)];
    inputs_.push_back({v.name, v.dtype, v.shape});
  }
  // The inputs' symbolic dims: what a binding holds.
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (inputs_[i].shape)
      for (size_t a = 0; a < inputs_[i].shape->size(); ++a)
        if (const Dim& d = (*inputs_[i].shape)[a]; !d.is_known() && !d.symbol.empty()) {
          input_dims_.push_back({i, a, d.symbol, -1, {}});
        }
  for (size_t i = 0; i < input_dims_.size(); ++i) {
    InputDim& d = input_dims_[i];
    if (const int j = first_dim(d.symbol); j >= 0 && static_cast<size_t>(j) < i) d.same_as = j;
    const auto terms = symbol_terms(d.symbol);
    for (size_t t = 0; t < terms.size() && terms.size() > 1; ++t) {
      const int j = first_dim(terms[t]);
      if (j < 0) {
        d.terms.clear();
        break;
      }
      d.terms.push_back(static_cast<size_t>(j));
    }
  }
  // Replayable when every node output's shape was inferred in terms of the inputs' dims (sums and products of them).
  replayable_ = true;
  output_dims_.clear();
  output_dims_.resize(g.values.size());
  for (const Node& n : g.nodes)
    for (int o : n.outputs) {
      if (o < 0) continue;
      const Value& v = g.values[static_cast<size_t>(o)];
      std::vector<SizeFormula> dims;
      for (size_t a = 0; v.shape_inferred && v.shape && a < v.shape->size(); ++a)
        if (auto f = formula((*v.shape)[a])) dims.push_back(std::move(*f));
      if (v.shape_inferred && v.shape && dims.size() == v.shape->size()) output_dims_[static_cast<size_t>(o)] = std::move(dims);
      else replayable_ = false;
    }
}

int FeedBinding::first_dim(const std::string& symbol) const {
  for (size_t j = 0; j < input_dims_.size(); ++j)
    if (input_dims_[j].symbol == symbol) return static_cast<int>(j);
  return -1;
}

void FeedBinding::check_feed(const IOInfo& info, DType dtype, const Shape& shape) const {
  if (info.dtype != DType::Undefined && dtype != DType::Undefined && dtype != info.dtype)
    fail_input("input '", info.name, "': expected ", dtype_name(info.dtype), ", got ", dtype_name(dtype));
  if (!info.shape) return;
  const SymShape& s = *info.shape;
  if (shape.size() != s.size())
    fail_input("input '", info.name, "': expected rank ", s.size(), " ", sym_shape_str(s), ", got shape ", shape_str(shape));
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i].is_known() && s[i].value != shape[i])
      fail_input("input '", info.name, "': expected shape ", sym_shape_str(s), ", got ", shape_str(shape));
}

void FeedBinding::fail_not_input(const std::string& name) const {
  std::string names;
  for (const auto& i : inputs_) names += (names.empty() ? "" : ", ") + i.name;
  fail_input("'", name, "' is not an input of ", model_path_, " (inputs: ", names, ")");
}

void FeedBinding::bind(const std::vector<std::pair<std::string, Tensor>>& feeds, std::vector<Tensor>& values, std::vector<char>& fed,
                       std::vector<int64_t>& binding) const {
  const Graph& g = *graph_;
  fed.assign(g.inputs.size(), 0);
  for (const auto& [name, tensor] : feeds) {
    int id = g.find_value(name);
    auto it = std::find(g.inputs.begin(), g.inputs.end(), id);
    if (id < 0 || it == g.inputs.end()) fail_not_input(name);
    check_feed(inputs_[static_cast<size_t>(it - g.inputs.begin())], tensor.dtype(), tensor.shape());
    if (tensor.device().kind != DeviceKind::CPU) fail_input("input '", name, "' must be a host tensor (the session moves it)");
    values[static_cast<size_t>(id)] = tensor;
    fed[static_cast<size_t>(it - g.inputs.begin())] = 1;
  }
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (fed[i]) continue;
    const auto d = g.input_defaults.find(g.inputs[i]);
    if (d == g.input_defaults.end()) fail_input("missing input '", inputs_[i].name, "' of ", model_path_);
    values[static_cast<size_t>(g.inputs[i])] = d->second;
  }
  fill_binding([&](size_t input) -> const Shape& { return values[static_cast<size_t>(g.inputs[input])].shape(); }, binding);
}

void FeedBinding::bind_shapes(const std::vector<std::pair<std::string, Shape>>& shapes, std::vector<int64_t>& binding) const {
  std::vector<const Shape*> of(inputs_.size(), nullptr);
  for (const auto& [name, shape] : shapes) {
    size_t i = 0;
    while (i < inputs_.size() && inputs_[i].name != name) ++i;
    if (i == inputs_.size()) fail_not_input(name);
    check_feed(inputs_[i], DType::Undefined, shape);
    of[i] = &shape;
  }
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (of[i]) continue;
    const auto d = graph_->input_defaults.find(graph_->inputs[i]);
    if (d == graph_->input_defaults.end()) fail_input("missing input '", inputs_[i].name, "' of ", model_path_);
    of[i] = &d->second.shape();
  }
  fill_binding([&](size_t input) -> const Shape& { return *of[input]; }, binding);
}

void FeedBinding::fill_binding(const std::function<const Shape&(size_t input)>& shape_of, std::vector<int64_t>& binding) const {
  binding.resize(input_dims_.size());
  for (size_t i = 0; i < input_dims_.size(); ++i) binding[i] = shape_of(input_dims_[i].input)[input_dims_[i].axis];
  auto where = [&](const InputDim& d) { return "input '" + inputs_[d.input].name + "' dim " + std::to_string(d.axis); };
  for (size_t i = 0; i < input_dims_.size(); ++i) {
    const InputDim& d = input_dims_[i];
    if (d.same_as >= 0 && binding[i] != binding[static_cast<size_t>(d.same_as)]) {
      const InputDim& e = input_dims_[static_cast<size_t>(d.same_as)];
      fail_input(where(d), " (", d.symbol, ") is ", binding[i], ", but ", where(e), " gives ", d.symbol, " = ",
                 binding[static_cast<size_t>(d.same_as)]);
    }
    int64_t sum = 0;
    for (size_t t : d.terms) sum += binding[t];
    if (!d.terms.empty() && sum != binding[i])
      fail_input(where(d), " (", d.symbol, ") is ", binding[i], ", but the other inputs make it ", sum);
  }
}

std::optional<FeedBinding::SizeFormula> FeedBinding::formula(const Dim& d) const {
  SizeFormula f;
  if (d.is_known()) {
    f.constant = d.value;
    return f;
  }
  if (d.symbol.empty()) return std::nullopt;
  if (const int j = first_dim(d.symbol); j >= 0) {  // (an input's own dim, whatever its name spells)
    f.terms.push_back({1, {{static_cast<size_t>(j)}}});
    return f;
  }
  for (const std::string& t : symbol_terms(d.symbol)) {
    const auto p = dim_as_product(Dim::named(t));
    if (!p) return std::nullopt;
    SizeFormula::Term term{p->coefficient, {}};
    for (const std::string& factor : p->factors) {
      std::vector<size_t> entries;
      for (const std::string& s : factor_terms(factor)) {
        const int j = first_dim(s);
        if (j < 0) return std::nullopt;
        entries.push_back(static_cast<size_t>(j));
      }
      term.factors.push_back(std::move(entries));
    }
    if (term.factors.empty()) f.constant += term.coefficient;
    else f.terms.push_back(std::move(term));
  }
  return f;
}

int64_t FeedBinding::SizeFormula::size(const std::vector<int64_t>& binding) const {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t total = constant;
  for (const Term& t : terms) {
    int64_t product = t.coefficient;
    for (const auto& factor : t.factors) {
      int64_t sum = 0;
      for (size_t e : factor)
        if (__builtin_add_overflow(sum, binding[e], &sum)) return kMax;
      if (__builtin_mul_overflow(product, sum, &product)) return kMax;
    }
    if (__builtin_add_overflow(total, product, &total)) return kMax;
  }
  return total;
}

std::string FeedBinding::describe(const std::vector<int64_t>& binding) const {
  std::string s;
  for (size_t i = 0; i < input_dims_.size() && i < binding.size(); ++i)
    if (input_dims_[i].same_as < 0) s += (s.empty() ? "" : ", ") + input_dims_[i].symbol + " " + std::to_string(binding[i]);
  return s.empty() ? "inputs of fixed shapes" : s;
}

bool FeedBinding::shapes_follow(const std::vector<int64_t>& binding, const std::vector<Shape>& shapes) const {
  const Graph& g = *graph_;
  for (const Node& node : g.nodes)
    for (int o : node.outputs) {
      if (o < 0) continue;
      const auto* dims = dims_of(o);
      const Shape& actual = shapes[static_cast<size_t>(o)];
      if (!dims || dims->size() != actual.size()) return false;
      for (size_t a = 0; a < actual.size(); ++a)
        if ((*dims)[a].size(binding) != actual[a]) return false;
    }
  return true;
}

}  // namespace tern
