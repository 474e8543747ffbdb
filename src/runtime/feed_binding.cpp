#include "runtime/feed_binding.h"

#include <algorithm>
#include <set>

#include "passes/shape_values.h"

namespace tern {

void FeedBinding::prepare(const Graph& g, const std::string& model_path) {
  graph_ = &g;
  model_path_ = model_path;
  for (int id : g.inputs) {
    const Value& v = g.values[static_cast<size_t>(id)];
    inputs_.push_back({v.name, v.dtype, v.shape});
  }
  // Replayable when every node output's shape was inferred from dims the graph inputs name.
  std::set<std::string> symbols;
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (inputs_[i].shape)
      for (size_t a = 0; a < inputs_[i].shape->size(); ++a)
        if (const Dim& d = (*inputs_[i].shape)[a]; !d.is_known() && !d.symbol.empty()) {
          input_dims_.push_back({i, a, d.symbol, -1, {}});
          symbols.insert(d.symbol);
        }
  for (size_t i = 0; i < input_dims_.size(); ++i) {
    InputDim& d = input_dims_[i];
    auto first = [&](const std::string& symbol) -> int {
      for (size_t j = 0; j < input_dims_.size(); ++j)
        if (input_dims_[j].symbol == symbol) return static_cast<int>(j);
      return -1;
    };
    if (const int j = first(d.symbol); j >= 0 && static_cast<size_t>(j) < i) d.same_as = j;
    const auto terms = symbol_terms(d.symbol);
    for (size_t t = 0; t < terms.size() && terms.size() > 1; ++t) {
      const int j = first(terms[t]);
      if (j < 0) {
        d.terms.clear();
        break;
      }
      d.terms.push_back(static_cast<size_t>(j));
    }
  }
  replayable_ = true;
  for (const Node& n : g.nodes)
    for (int o : n.outputs) {
      if (o < 0) continue;
      const Value& v = g.values[static_cast<size_t>(o)];
      if (!v.shape_inferred || !v.shape) replayable_ = false;
      else
        for (const Dim& d : *v.shape)
          if (!d.is_known() && !symbols.count(d.symbol)) replayable_ = false;
    }
}

void FeedBinding::check_feed(const IOInfo& info, const Tensor& t) const {
  if (info.dtype != DType::Undefined && t.dtype() != info.dtype)
    fail_input("input '", info.name, "': expected ", dtype_name(info.dtype), ", got ", dtype_name(t.dtype()));
  if (!info.shape) return;
  const SymShape& s = *info.shape;
  if (static_cast<size_t>(t.rank()) != s.size())
    fail_input("input '", info.name, "': expected rank ", s.size(), " ", sym_shape_str(s), ", got shape ", shape_str(t.shape()));
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i].is_known() && s[i].value != t.shape()[i])
      fail_input("input '", info.name, "': expected shape ", sym_shape_str(s), ", got ", shape_str(t.shape()));
}

void FeedBinding::bind(const std::vector<std::pair<std::string, Tensor>>& feeds, std::vector<Tensor>& values, std::vector<char>& fed,
                       std::vector<int64_t>& binding) const {
  const Graph& g = *graph_;
  fed.assign(g.inputs.size(), 0);
  for (const auto& [name, tensor] : feeds) {
    int id = g.find_value(name);
    auto it = std::find(g.inputs.begin(), g.inputs.end(), id);
    if (id < 0 || it == g.inputs.end()) {
      std::string names;
      for (const auto& i : inputs_) names += (names.empty() ? "" : ", ") + i.name;
      fail_input("'", name, "' is not an input of ", model_path_, " (inputs: ", names, ")");
    }
    check_feed(inputs_[static_cast<size_t>(it - g.inputs.begin())], tensor);
    if (tensor.device().kind != DeviceKind::CPU) fail_input("input '", name, "' must be a host tensor (the session moves it)");
    values[static_cast<size_t>(id)] = tensor;
    fed[static_cast<size_t>(it - g.inputs.begin())] = 1;
  }
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (!fed[i]) fail_input("missing input '", inputs_[i].name, "' of ", model_path_);
  binding.resize(input_dims_.size());
  for (size_t i = 0; i < input_dims_.size(); ++i) {
    const InputDim& d = input_dims_[i];
    binding[i] = values[static_cast<size_t>(g.inputs[d.input])].dim(static_cast<int64_t>(d.axis));
  }
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

bool FeedBinding::shapes_follow(const std::vector<int64_t>& binding, const std::vector<Shape>& shapes) const {
  const Graph& g = *graph_;
  std::map<std::string, int64_t> dims;
  for (size_t i = 0; i < input_dims_.size(); ++i) dims[input_dims_[i].symbol] = binding[i];
  for (const Node& node : g.nodes)
    for (int o : node.outputs) {
      if (o < 0) continue;
      const Value& v = g.values[static_cast<size_t>(o)];
      const Shape& actual = shapes[static_cast<size_t>(o)];
      if (v.shape->size() != actual.size()) return false;
      for (size_t a = 0; a < actual.size(); ++a) {
        const Dim& d = (*v.shape)[a];
        if ((d.is_known() ? d.value : dims.at(d.symbol)) != actual[a]) return false;
      }
    }
  return true;
}

}  // namespace tern
