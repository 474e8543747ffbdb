#include "convert/gguf_hparams.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"
#include "llm/model_config.h"

namespace tern::convert {

namespace {

// The GGUF's hyperparameters as DecoderShape, checked for plausibility.
DecoderShape shape_of(const GgufFile& f, const Architecture& arch, int64_t& context, double& theta) {
  auto key = [&](const std::string& k) { return std::string(arch.gguf_name) + "." + k; };
  DecoderShape s;
  s.arch = &arch;
  s.layers = f.integer(key("block_count"));
  s.hidden = f.integer(key("embedding_length"));
  s.ffn = f.integer(key("feed_forward_length"));
  s.heads = f.integer(key("attention.head_count"));
  s.kv_heads = f.has(key("attention.head_count_kv")) ? f.integer(key("attention.head_count_kv")) : s.heads;
  const double eps = f.number(key("attention.layer_norm_rms_epsilon"));
  if (!(eps > 0 && eps < 1)) fail("'", f.path(), "': ", key("attention.layer_norm_rms_epsilon"), " ", eps, " is not in (0, 1)");
  s.rms_eps = static_cast<float>(eps);
  context = f.integer(key("context_length"));
  if (s.layers <= 0 || s.layers > 1024 || s.hidden <= 0 || s.ffn <= 0 || s.heads <= 0 || s.kv_heads <= 0 || s.heads % s.kv_heads ||
      context <= 0 || context > llm::kMaxContextTokens)
    fail("'", f.path(), "': implausible hyperparameters (layers ", s.layers, ", hidden ", s.hidden, ", heads ", s.heads, "/", s.kv_heads,
         ", context ", context, ")");
  // The head size: attention.key_length where the family sets it apart from hidden / heads (Qwen3).
  if (f.has(key("attention.key_length"))) {
    s.head_dim = f.integer(key("attention.key_length"));
    const int64_t v = f.has(key("attention.value_length")) ? f.integer(key("attention.value_length")) : s.head_dim;
    if (s.head_dim <= 0 || s.head_dim > 65536 || v != s.head_dim)
      fail("'", f.path(), "': ", key("attention.key_length"), " ", s.head_dim, " and value_length ", v, " are not one head size");
  } else if (s.hidden % s.heads) {
    fail("'", f.path(), "': embedding_length ", s.hidden, " is not a multiple of the ", s.heads, " heads");
  }
  s.rotary_dim = f.has(key("rope.dimension_count")) ? f.integer(key("rope.dimension_count")) : s.head();
  if (s.rotary_dim <= 0 || s.rotary_dim > s.head() || s.rotary_dim % 2)
    fail("'", f.path(), "': rope.dimension_count ", s.rotary_dim, " does not fit head size ", s.head());
  theta = f.has(key("rope.freq_base")) ? f.number(key("rope.freq_base")) : 10000.0;
  if (!(theta > 1 && theta < 1e30)) fail("'", f.path(), "': ", key("rope.freq_base"), " ", theta, " is not a rope base");
  return s;
}

// The layers' sliding windows (DecoderShape::window) as the family and the metadata give them.
std::vector<int64_t> layer_windows(const GgufFile& f, const Architecture& arch, int64_t layers, int64_t context) {
  const std::string key = std::string(arch.gguf_name) + ".attention.sliding_window";
  if (!f.has(key) && !arch.swa_window) return {};
  const int64_t window = f.has(key) ? f.integer(key) : arch.swa_window;
  if (window == 0) return {};  // "no window", as llama.cpp's converters write it for Phi-4 and MobileLLM
  if (window < 0 || window > llm::kMaxContextTokens) fail("'", f.path(), "': ", key, " ", window, " is not a window size");
  std::vector<int64_t> windows(static_cast<size_t>(layers), std::min(window, context));
  const std::string pattern_key = key + "_pattern";
  if (f.has(pattern_key) && f.find(pattern_key)->type == GgufValue::Type::Array) {  // one bool per layer
    const auto& per_layer = f.array(pattern_key);
    if (static_cast<int64_t>(per_layer.size()) != layers)
      fail("'", f.path(), "': ", pattern_key, " has ", per_layer.size(), " values for ", layers, " layers");
    for (size_t l = 0; l < windows.size(); ++l) windows[l] = per_layer[l].i ? windows[l] : 0;
    return windows;
  }
  const int64_t pattern = f.has(pattern_key) ? f.integer(pattern_key) : arch.swa_pattern;
  if (pattern < 0 || pattern > layers + 1) fail("'", f.path(), "': ", pattern_key, " ", pattern, " is not a layer pattern");
  for (int64_t l = 0; pattern > 1 && l < layers; ++l)  // every pattern-th layer global (llama.cpp's rule)
    if (l % pattern == pattern - 1) windows[static_cast<size_t>(l)] = 0;
  return windows;
}

// Metadata that changes the math in ways tern does not import, with the value that leaves the math as tern
// computes it (NaN: any value); a key present with another value is refused. llama.cpp's names (constants.py
// of its gguf package); the families tern imports write none of them with other values.
struct UnimportedKey {
  const char* key;  // after "<architecture>."
  double neutral;
  const char* what;
};
constexpr double kAny = NAN;
constexpr UnimportedKey kUnimported[] = {
    {"expert_count", 0, "a mixture of experts"},
    {"expert_used_count", 0, "a mixture of experts"},
    {"expert_shared_count", 0, "a mixture of experts"},
    {"attention.clamp_kqv", 0, "q, k and v clamped"},
    {"attention.max_alibi_bias", 0, "ALiBi position biases"},
    {"attention.scale", 0, "attention scores scaled by a factor of their own"},
    {"attention.output_scale", 1, "attention outputs scaled"},
    {"attention.temperature_scale", kAny, "attention temperature tuning"},
    {"logit_scale", 1, "logits scaled"},
    {"embedding_scale", 1, "embeddings scaled"},
    {"residual_scale", 1, "residuals scaled"},
    {"swiglu_clamp_exp", kAny, "a clamped SwiGLU"},
    {"rope.dimension_sections", kAny, "multimodal RoPE sections"},
    {"rope.scaling.alpha", kAny, "NTK-alpha RoPE scaling"},
    {"rope.scaling.attn_factor", 1, "RoPE tables scaled by their own attention factor"},
    {"rope.scaling.yarn_ext_factor", kAny, "YaRN with its own extrapolation mix"},
    {"rope.scaling.yarn_attn_factor", kAny, "YaRN with its own attention factor"},
    {"rope.scaling.yarn_log_multiplier", 0, "YaRN with a log multiplier (DeepSeek's)"},
};

void refuse_unimported_keys(const GgufFile& f, const Architecture& arch) {
  for (const UnimportedKey& u : kUnimported) {
    const std::string key = std::string(arch.gguf_name) + "." + u.key;
    const GgufValue* v = f.find(key);
    if (!v) continue;
    const bool scalar = v->is_integer() || v->is_float() || v->type == GgufValue::Type::Bool;
    if (!std::isnan(u.neutral) && scalar && f.number(key) == u.neutral) continue;
    std::string value = scalar ? std::to_string(f.number(key)) : v->type == GgufValue::Type::String ? "'" + v->s + "'" : "(an array)";
    if (scalar && f.number(key) == std::floor(f.number(key))) value = std::to_string(static_cast<long long>(f.number(key)));
    fail_unsupported("'", f.path(), "': ", key, " ", value, ": ", u.what, " — tern does not import that math yet");
  }
  for (const char* t : {"rope_factors_long.weight", "rope_factors_short.weight"})
    if (f.tensor(t))
      fail_unsupported("'", f.path(), "': tensor ", t,
                       ": RoPE with long and short per-frequency factors (LongRoPE: Phi-3's 128k variants) is not imported yet");
}

// A positive, finite scaling number, or a failure naming the key.
double positive(const GgufFile& f, const std::string& key) {
  const double x = f.number(key);
  if (!(x > 0 && x < 1e30)) fail("'", f.path(), "': ", key, " ", x, " is not a RoPE scaling value (positive, finite)");
  return x;
}

// rope.scaling.* as llama.cpp reads it: the type defaults to linear, the factor to rope.scale_linear; a factor
// of 0 or none means no scaling.
RopeScaling rope_scaling_of(const GgufFile& f, const Architecture& arch, int64_t rotary_dim, int64_t context) {
  auto key = [&](const std::string& k) { return std::string(arch.gguf_name) + ".rope." + k; };
  RopeScaling r;
  const std::string type = f.has(key("scaling.type")) ? f.string(key("scaling.type")) : "linear";
  const std::string factor_key = f.has(key("scaling.factor")) ? key("scaling.factor") : key("scale_linear");
  const bool scaled = f.has(factor_key) && f.number(factor_key) != 0;
  if (type != "none" && type != "linear" && type != "yarn")
    fail_unsupported("'", f.path(), "': ", key("scaling.type"), " '", type, "': tern imports RoPE scaling none, linear and yarn");
  if (type != "none" && scaled) {
    r.kind = type == "yarn" ? RopeScaling::Kind::Yarn : RopeScaling::Kind::Linear;
    r.factor = positive(f, factor_key);
  }
  if (r.kind == RopeScaling::Kind::Yarn) {
    const std::string orig = key("scaling.original_context_length");
    r.original_context = f.has(orig) ? f.integer(orig) : context;
    if (r.original_context <= 0 || r.original_context > llm::kMaxContextTokens)
      fail("'", f.path(), "': ", orig, " ", r.original_context, " is not a context length");
    if (f.has(key("scaling.yarn_beta_fast"))) r.beta_fast = positive(f, key("scaling.yarn_beta_fast"));
    if (f.has(key("scaling.yarn_beta_slow"))) r.beta_slow = positive(f, key("scaling.yarn_beta_slow"));
  }
  r.divisors = f.tensor("rope_freqs.weight");
  if (r.divisors) {
    if (r.divisors->type != GgmlType::F32 || r.divisors->dims != std::vector<int64_t>{rotary_dim / 2})
      fail("'", f.path(), "': tensor rope_freqs.weight is not ", rotary_dim / 2, " float32 values (one per RoPE frequency)");
    if (r.kind == RopeScaling::Kind::Yarn)
      fail_unsupported("'", f.path(), "': rope_freqs.weight with YaRN scaling: tern imports the two apart, not together");
    for (int64_t i = 0; i < rotary_dim / 2; ++i) {
      float x;
      std::memcpy(&x, r.divisors->data + 4 * i, 4);
      if (!(x > 0 && x < 1e30f)) fail("'", f.path(), "': rope_freqs.weight[", i, "] ", x, " is not a frequency factor (positive, finite)");
    }
  }
  return r;
}

// YaRN's inverse frequencies and attention factor, as transformers' _compute_yarn_parameters computes them (in
// float where it computes in float32): high frequencies kept, low ones divided by the factor, a linear ramp
// between the dimensions that turn beta_fast and beta_slow times over the original context.
std::vector<float> yarn_frequencies(const RopeScaling& r, int64_t dim, double base, float& attention_factor) {
  const double factor = r.factor;
  attention_factor = factor <= 1 ? 1.0f : static_cast<float>(0.1 * std::log(factor) + 1.0);
  auto correction_dim = [&](double rotations) {
    return dim * std::log(static_cast<double>(r.original_context) / (rotations * 2 * M_PI)) / (2 * std::log(base));
  };
  const double low = std::max(std::floor(correction_dim(r.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(r.beta_slow)), static_cast<double>(dim - 1));
  if (low == high) high += 0.001;
  std::vector<float> freq(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float pos_freq = std::pow(static_cast<float>(base), static_cast<float>(2 * i) / static_cast<float>(dim));
    const float extrapolation = 1.0f / pos_freq, interpolation = 1.0f / (static_cast<float>(factor) * pos_freq);
    const float ramp = std::clamp((static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low), 0.0f, 1.0f);
    const float keep = 1.0f - ramp;
    freq[static_cast<size_t>(i)] = interpolation * (1.0f - keep) + extrapolation * keep;
  }
  return freq;
}

}  // namespace

GgufHparams read_gguf_hparams(const GgufFile& f, const Architecture& arch) {
  refuse_unimported_keys(f, arch);
  GgufHparams h;
  DecoderShape& s = h.shape;
  s = shape_of(f, arch, h.context, h.theta);
  s.local_window = layer_windows(f, arch, s.layers, h.context);
  if (arch.hidden_scale_layers && s.layers == arch.hidden_scale_layers)
    s.attn_scale = 1.0f / std::sqrt(static_cast<float>(s.hidden / s.heads));
  auto softcap = [&](const char* name, double dflt) {
    const std::string k = std::string(arch.gguf_name) + "." + name;
    const double c = f.has(k) ? f.number(k) : dflt;
    if (!(c >= 0 && c < 1e30)) fail("'", f.path(), "': ", k, " ", c, " is not a soft-cap");
    return static_cast<float>(c);
  };
  s.attn_softcap = softcap("attn_logit_softcapping", arch.attn_softcap);
  s.final_softcap = softcap("final_logit_softcapping", arch.final_softcap);
  const std::string base_key = std::string(arch.gguf_name) + ".rope.freq_base_swa";
  const double local_base = f.has(base_key) ? f.number(base_key) : arch.swa_rope_base;
  if (local_base != 0 && local_base != h.theta &&
      std::any_of(s.local_window.begin(), s.local_window.end(), [](int64_t x) { return x > 0; })) {
    if (!(local_base > 1 && local_base < 1e30)) fail("'", f.path(), "': ", base_key, " ", local_base, " is not a rope base");
    h.local_theta = local_base;
  }
  h.rope = rope_scaling_of(f, arch, s.rotary_dim, h.context);
  return h;
}

void gguf_rope_tables(const GgufHparams& h, DecoderWeights& w) {
  const RopeScaling& r = h.rope;
  const int64_t dim = h.shape.rotary_dim;
  float attention_factor = 1;
  std::vector<float> freq;
  if (r.kind == RopeScaling::Kind::Yarn) {
    freq = yarn_frequencies(r, dim, h.theta, attention_factor);
  } else {
    freq = rope_frequencies(dim, static_cast<float>(h.theta));
    for (size_t i = 0; r.divisors && i < freq.size(); ++i) {
      float d;
      std::memcpy(&d, r.divisors->data + 4 * i, 4);
      freq[i] /= d;
    }
    if (r.kind == RopeScaling::Kind::Linear)
      for (float& x : freq) x /= static_cast<float>(r.factor);
  }
  rope_tables(h.context, freq, attention_factor, w.cos, w.sin);
  if (h.local_theta) rope_tables(h.context, rope_frequencies(dim, static_cast<float>(h.local_theta)), 1.0f, w.cos_local, w.sin_local);
}

}  // namespace tern::convert
