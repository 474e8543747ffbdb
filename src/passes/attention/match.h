// The pieces the attention matchers share (internal to src/passes/attention; passes/attention/attention.h is
// the passes' interface). See README.md here for how a new attention shape is added.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "passes/matcher.h"

namespace tern::attention {

// What a CachedAttention node is made of.
struct CachedAttentionSpec {
  int attention_node = -1;     // the node the CachedAttention replaces (it keeps its output)
  int q = -1, k = -1, v = -1;  // [B, S, H·D] before RoPE; k = v = -1: q packs Q, K and V
  int cos = -1, sin = -1;      // [positions, rotary_dim / 2]
  int past_k = -1, past_v = -1, present_k = -1, present_v = -1;
  int64_t q_heads = 0, kv_heads = 0;
  std::optional<float> scale;
  float softcap = 0;                   // > 0: scores soft-capped (Gemma-2)
  int64_t local_window = 0;            // > 0: the layer attends to its last local_window keys (Mistral, Gemma)
  int mask_bias = -1, mask_gate = -1;  // decomposed: the mask, for reading its window off a long probe
  bool interleaved = false;
  int64_t rotary_dim = 0;        // 0: the head size
  std::string pattern;           // what matched, for `tern inspect --fusions`
  std::vector<int> heads_first;  // q/k/v values laid out [B, H, S, D] (the rewrite transposes them)
};

// Where and why one attempt to match stopped: the first reason recorded wins (the outer matcher
// records only what its helpers did not already explain).
struct Why {
  std::string node, reason;
  std::nullopt_t stop(const Node* n, std::string r) {
    if (reason.empty()) {
      node = n ? n->op_type + " '" + n->name + "'" : "";
      reason = std::move(r);
    }
    return std::nullopt;
  }
};

// ---- probes (probe.cpp): running parts of a graph on sequences the generator would feed ----

// How sequence_bindings binds the cache inputs.
enum class CacheBinding { Zeros, Shapes };
// The probe for what a graph derives from attention_mask (masks, indices, cache lengths): one sequence of
// kProbeTotal positions whose first is padding, kProbeNew of them new — mask 0 1 1 1 1, positions 2 3.
constexpr int64_t kProbeTotal = 5, kProbeNew = 2;

std::optional<Tensor> evaluate_with(const Graph& g, int target, const std::vector<std::pair<int, Tensor>>& bindings);
std::vector<std::pair<int, Tensor>> sequence_bindings(const Matcher& m, int64_t past, int64_t n, std::vector<int64_t> mask = {},
                                                      CacheBinding caches = CacheBinding::Zeros);
std::vector<std::pair<int, Tensor>> probe_bindings(const Matcher& m);
const Node* only_consumer(const Matcher& m, int id, const char* op_type);
const Node* data_consumer(const Matcher& m, int id, const char* op_type);
std::vector<int> cache_inputs(const Matcher& m);
bool is_causal_padding_mask(const Matcher& m, int bias, bool causal, int gate = -1);
bool attention_masks_like_cache(const Matcher& m, const Node& attention);
bool probes_to(const Matcher& m, int id, int64_t expected);
std::optional<std::pair<Tensor, Tensor>> rope_tables(const Matcher& m, int cos, int sin, int64_t W, int64_t D, bool interleaved, Why& why);
std::optional<int64_t> mask_window(const Matcher& m, int bias, int gate, int64_t W);

// ---- attention ops with their RoPE visible (match_ops.cpp) ----

struct OpPattern;
const OpPattern* op_pattern(const Node& n);  // the pattern an attention op node starts, or null
std::optional<CachedAttentionSpec> match_attention_op(const Matcher& m, const Node& n, int mask, Why& why);
std::optional<CachedAttentionSpec> match_static_cache_attention(const Matcher& m, const Node& n, Why& why);

// ---- decomposed attention (match_decomposed.cpp): torch.onnx.export, the dynamo exporter, Optimum ----

// Collects the nodes a decomposed match consumed (they die once the attention is replaced).
struct Decomposed {
  const Matcher& m;
  Why& why;
  std::vector<int> nodes;
  std::vector<int> heads_first;  // see CachedAttentionSpec
  const Node* take(const Node* n) {
    if (n) nodes.push_back(m.index_of(n));
    return n;
  }
};

// y = x·cos + rotate_half(x)·sin, rotate_half(x) = Concat(−x[..., D/2:], x[..., :D/2]) (operands in any order).
struct RotateHalf {
  int x = -1, cos = -1, sin = -1;
  int64_t rotary_dim = 0;    // 0: the whole head
  bool interleaved = false;  // pairs (x[2j], x[2j+1]) rotate, not the halves
};

// Data-movement nodes (any spelling of repeat_kv and of a transpose of the last two axes) read back from
// an attention operand: `chain` from the operand up, and `source`, the value they read.
struct MovesBack {
  std::vector<const Node*> chain;
  int source = -1;
};

std::optional<RotateHalf> match_rope(Decomposed& d, int y);
int match_split_heads(Decomposed& d, int x);
const Node* match_merge_heads(const Matcher& m, int y, int64_t width);
MovesBack walk_moves_back(const Matcher& m, int operand);
bool reads_as_repeat_kv(const Matcher& m, int operand, int source, bool keys, int64_t heads);
std::optional<CachedAttentionSpec> match_decomposed(const Matcher& m, const Node& softmax, int mask, int input_ids, Why& why);

}  // namespace tern::attention
