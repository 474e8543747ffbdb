#include "passes/pipeline.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "ops/op.h"
#include "passes/canonicalize.h"
#include "passes/shape_values.h"

namespace tern {
namespace {

void append(std::vector<Fusion>& to, std::vector<Fusion> more) { to.insert(to.end(), more.begin(), more.end()); }

// Standard ops whose inputs the passes read by position, and how many ONNX (opsets 14–24) gives each. An op's own
// shape rule reports a missing input, but only once its inputs' types are known, and a pass may look first: a
// hostile Add with one input reached the RoPE matcher (fuzz target onnx_model).
int required_inputs(const Node& n) {
  static const std::unordered_map<std::string, int> required = {
      {"Add", 2},       {"Sub", 2},        {"Mul", 2},        {"Div", 2},    {"Pow", 2},    {"MatMul", 2}, {"Equal", 2},
      {"Reshape", 2},   {"Gather", 2},     {"Expand", 2},     {"Slice", 3},  {"Where", 3},  {"Range", 3},  {"Neg", 1},
      {"Sqrt", 1},      {"Reciprocal", 1}, {"Sigmoid", 1},    {"Tanh", 1},   {"Exp", 1},    {"Cast", 1},   {"Softmax", 1},
      {"Transpose", 1}, {"Shape", 1},      {"ReduceMean", 1}, {"Concat", 1}, {"Squeeze", 1}};
  if (!n.domain.empty() && n.domain != "ai.onnx") return 0;
  const auto it = required.find(n.op_type);
  return it == required.end() ? 0 : it->second;
}

void check_input_counts(const Graph& g) {
  for (const Node& n : g.nodes) {
    const int need = required_inputs(n);
    int given = 0;
    for (int i = 0; i < need && i < static_cast<int>(n.inputs.size()); ++i) given += n.inputs[static_cast<size_t>(i)] >= 0;
    if (given < need) fail(n.describe(), ": ", n.op_type, " takes ", need, " inputs, the file gives ", given);
  }
}

void run_passes(Graph& g, const PipelineOptions& o, PipelineResult& r) {
  check_input_counts(g);
  PassStats* stats = &r.stats;
  if (o.optimize || o.decoder.ring_capacity > 0) {  // (a merged decoder: one flat graph)
    stats->canonicalized = inline_known_branches(g, &r.merged);
    if (!r.merged.flag.empty())  // (said where inspect --fusions lists rewrites)
      r.fusions.push_back({"Optimum's merged decoder: If on " + r.merged.flag + " → its branch with past, inlined", r.merged.flag});
  }
  if (o.optimize) {  // before folding would copy the weight it reads
    stats->canonicalized += matmul_transposed_weights(g);
    remove_dead_nodes(g, stats);  // the Transposes
  }
  // The ring-buffer fusion reads inferred shapes and folded constants: with a window, fold first.
  infer_and_fold(g, stats, o.optimize || o.decoder.ring_capacity > 0);
  if (o.optimize || o.decoder.ring_capacity > 0) {  // one spelling before the fusions look
    stats->canonicalized += canonicalize(g);
    remove_dead_nodes(g, stats);  // what it bypassed
  }
  if (o.decoder.ring_capacity > 0) {
    if (cache_io_in_compute_type(g)) remove_dead_nodes(g, stats);  // the Casts the float16 cache no longer passes
    auto cached = fuse_cached_attention(g, {o.decoder.ring_capacity, o.decoder.kv_sinks, o.decoder.kv_dtype});
    r.cached_layers = static_cast<int>(cached.fused.size());
    append(r.fusions, std::move(cached.fused));
    r.misses = std::move(cached.missed);
    if (r.cached_layers == 0 && o.decoder.ring_required) {
      std::string why;
      for (const auto& miss : r.misses) why += "\n  " + miss.str();
      if (why.empty()) why = " the graph has no past key/value inputs";
      fail_unsupported(
          "the attention does not match a ring-buffer cache pattern (passes/attention/attention.h lists them); run "
          "without a window:",
          why);
    }
    infer_and_fold(g, stats, true);
    remove_dead_nodes(g, stats);  // the replaced attention nodes
  }
#ifndef TERN_MINIMAL  // (the integer products are not in that build: ops/register_all.h)
  // Exact, and before the hidden state is looked for (the fused node is a projection it passes).
  if (o.optimize || o.decoder.ring_capacity > 0) {
    append(r.fusions, fuse_dynamic_quantized_matmuls(g));
    remove_dead_nodes(g, stats);
  }
#endif
  // Before the logits are sliced: the hidden state is wanted at every position.
  if (!o.decoder.hidden_state_of.empty()) {
#ifdef TERN_MINIMAL  // (embeddings are tern serve's, which a minimal build leaves out: 2 KB of code it need not carry)
    fail_unsupported("a decoder's hidden state as an output (embeddings) is not in this build (TERN_MINIMAL)");
#else
    append(r.fusions, expose_hidden_state(g, o.decoder.hidden_state_of, kHiddenStateOutput));
#endif
  }
  // (Not where GroupQueryAttention keeps its own cache: a right-padded row's last token is not the last position.)
  if (!o.decoder.last_position_output.empty() && !reads_prompts_right_padded(g)) {
    append(r.fusions, slice_logits_to_last_position(g, o.decoder.last_position_output));
    infer_and_fold(g, stats, o.optimize);
  }
  if (!o.optimize) return;
  remove_dead_nodes(g, stats);
  for (auto pass : {fuse_rms_norm, fuse_swiglu}) append(r.fusions, pass(g));
  remove_dead_nodes(g, stats);  // fuse_shared_input_matmuls checks single consumers
  append(r.fusions, fuse_shared_input_matmuls(g, o.pack));
  for (auto pass : {fuse_kv_matmuls, fuse_rotary_embedding, fuse_skip_rms_norm}) append(r.fusions, pass(g));
  remove_dead_nodes(g, stats);
  infer_and_fold(g, stats, true);  // shapes of the new values
  stats->shape_values = resolve_shape_values(g);
  remove_dead_nodes(g, stats);                // the chains that computed them
  append(r.fusions, hoist_last_position(g));  // reads the fused nodes' shapes
  infer_and_fold(g, stats, false);            // the shorter rows'
  const auto& registry = OpRegistry::instance();
  stats->merged_nodes = merge_duplicate_nodes(g, [&](const Node& n) { return registry.create(n)->traits().foldable; });
}

}  // namespace

bool reads_prompts_right_padded(const Graph& g) {
  return std::any_of(g.nodes.begin(), g.nodes.end(),
                     [](const Node& n) { return n.op_type == "GroupQueryAttention" && n.domain == "com.microsoft"; });
}

PipelineResult optimize_graph(Graph& g, const PipelineOptions& options, const std::string& model_path) {
  PipelineResult r;
  try {
    run_passes(g, options, r);
  } catch (const Error&) {
    rethrow_prefixed(model_path + ": ");
  }
  return r;
}

}  // namespace tern
