#include "llm/decoder_io.h"

#include <algorithm>
#include <string_view>

#include "passes/pipeline.h"

namespace tern::llm {

DecoderIO detect_decoder_io(const Session& s) {
  auto has_in = [&](const std::string& n) {
    for (const auto& i : s.inputs())
      if (i.name == n) return true;
    return false;
  };
  auto has_out = [&](const std::string& n) {
    for (const auto& o : s.outputs())
      if (o.name == n) return true;
    return false;
  };
  auto describe = [&] {
    std::string m = "inputs:";
    for (const auto& i : s.inputs()) m += " " + i.name;
    m += "; outputs:";
    for (const auto& o : s.outputs()) m += " " + o.name;
    return m;
  };
  DecoderIO io;
  if (!has_in("input_ids") || !has_out("logits"))
    fail_unsupported(s.model().path, ": not a decoder tern knows (needs input_ids → logits); ", describe());
  io.input_ids = "input_ids";
  io.logits = "logits";
  for (const auto& o : s.outputs())
    if (o.name == io.logits && o.shape && !o.shape->empty()) io.vocab = std::max<int64_t>(o.shape->back().value, 0);
  if (has_in("attention_mask")) io.attention_mask = "attention_mask";
  if (has_in("position_ids")) io.position_ids = "position_ids";
  if (has_in("use_cache_branch")) io.use_cache_branch = "use_cache_branch";
  if (has_in(kLogitsPositionsInput)) io.logits_positions = kLogitsPositionsInput;
  for (const auto& i : s.inputs())
    if (i.name == "input_ids") io.ids_dtype = i.dtype;
  if (io.ids_dtype != DType::Int64 && io.ids_dtype != DType::Int32)
    fail_unsupported(s.model().path, ": input_ids is ", dtype_name(io.ids_dtype), "; tern expects int32 or int64");

  // prefix<digits>suffix, the whole name (past_key_values.3.key, past_3)
  auto numbered = [](std::string_view name, std::string_view prefix, std::string_view suffix) {
    if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix)) return false;
    const std::string_view digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    return std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  int64_t n_per_layer = 0, n_stacked = 0;
  for (const auto& i : s.inputs()) {
    if (numbered(i.name, "past_key_values.", ".key")) ++n_per_layer;
    else if (numbered(i.name, "past_", "")) ++n_stacked;
  }
  const IOInfo* first = nullptr;
  if (n_per_layer > 0) {
    io.layout = PastLayout::PerLayerKeyValue;
    for (int64_t l = 0; l < n_per_layer; ++l)
      for (const char* kv : {"key", "value"}) {
        std::string p = "past_key_values." + std::to_string(l) + "." + kv, q = "present." + std::to_string(l) + "." + kv;
        if (!has_in(p) || !has_out(q))
          fail_unsupported(s.model().path, ": cache input '", p, "' or output '", q, "' is missing; ", describe());
        io.past.push_back(p);
        io.present.push_back(q);
      }
  } else if (n_stacked > 0) {
    io.layout = PastLayout::Stacked;
    for (int64_t l = 0; l < n_stacked; ++l) {
      std::string p = "past_" + std::to_string(l), q = "present_" + std::to_string(l);
      if (!has_in(p) || !has_out(q))
        fail_unsupported(s.model().path, ": cache input '", p, "' or output '", q, "' is missing; ", describe());
      io.past.push_back(p);
      io.present.push_back(q);
    }
  }
  for (const auto& i : s.inputs())
    if (!io.past.empty() && i.name == io.past[0]) first = &i;
  if (first) {
    io.cache_dtype = first->dtype;
    const size_t r = io.layout == PastLayout::Stacked ? 5 : 4;
    if (!first->shape || first->shape->size() != r)
      fail_unsupported(s.model().path, ": cache input '", first->name, "' should have rank ", r);
    const SymShape& sh = *first->shape;
    // A head count or size the cache input names instead of fixing (the genai builder's "kv_cache_dim"): the
    // present output's, which the shape rules computed from the projections.
    const SymShape* present = nullptr;
    for (const auto& o : s.outputs())
      if (o.name == io.present[0] && o.shape && o.shape->size() == r) present = &*o.shape;
    auto fixed = [&](size_t k) { return sh[k].is_known() || !present ? sh[k].value : (*present)[k].value; };
    io.kv_heads = fixed(r - 3);
    io.head_size = fixed(r - 1);
    if (io.kv_heads <= 0 || io.head_size <= 0)
      fail_unsupported(s.model().path, ": cache input '", first->name, "' has no fixed head count and size ", sym_shape_str(sh));
    io.cache_capacity = std::max<int64_t>(sh[r - 2].value, 0);
  }
  if (s.passes().cached_layers > 0) {
    if (!io.past.empty()) fail_unsupported(s.model().path, ": some attention layers keep a graph cache and some a ring buffer");
    io.layout = PastLayout::Internal;
    const int mask = s.graph().find_value(io.attention_mask);
    bool only_cached = mask >= 0;
    for (const Node& n : s.graph().nodes)
      for (int in : n.inputs)
        if (in == mask && n.op_type != "CachedAttention") only_cached = false;
    io.mask_new_tokens_only = only_cached && std::count(s.graph().outputs.begin(), s.graph().outputs.end(), mask) == 0;
    for (const Node& n : s.graph().nodes)
      if (n.op_type == "CachedAttention" && n.domain == "tern") {
        const int64_t w = n.attr_int("ring_capacity", 0);
        io.ring_window = io.ring_window == 0 ? w : std::min(io.ring_window, w);
      }
  }
  io.prompts_right_padded = reads_prompts_right_padded(s.graph());
  for (const auto& i : s.inputs()) {
    bool known = i.name == io.input_ids || i.name == io.attention_mask || i.name == io.position_ids || i.name == io.use_cache_branch ||
                 i.name == io.logits_positions;
    for (const auto& p : io.past) known |= i.name == p;
    if (!known) fail_unsupported(s.model().path, ": input '", i.name, "' is not one tern can feed; ", describe());
  }
  return io;
}

}  // namespace tern::llm
