// How generation finds and loads a model: the folder's decoder file, the session options a decoder runs
// with (last-position logits, the ring KV cache, weights, device) and the sampling settings a model's
// generation_config.json leaves to the caller. The CLI's flags, tests and (later) the C API all go
// through these, so the rules live here once.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "kernels/kv_storage.h"
#include "llm/model_config.h"
#include "llm/sampler.h"
#include "runtime/session.h"

namespace tern::llm {

// One decoder file of a Hugging Face onnx-community / transformers.js repository: the configs and tokenizer at
// its root, the decoder in onnx/ in several variants named by transformers.js's dtypes — model.onnx (fp32),
// model_fp16, model_quantized (q8), model_int8, model_uint8, model_q4, model_q4f16, model_bnb4 — or, in
// older repositories, decoder_model_merged with the same suffixes.
struct OnnxVariant {
  std::string dtype;  // fp32, fp16, q8, int8, uint8, q4, q4f16, bnb4
  std::string file;   // its path
  int64_t bytes = 0;  // the .onnx and its external data
};
// The variants in `repo`/onnx/, in the order a default picks them (model_folder.cpp's kDtypes); empty when there are none.
std::vector<OnnxVariant> onnx_variants(const std::string& repo);

struct ModelFiles {
  std::string onnx;  // the decoder graph
  std::string dir;   // its folder: config, tokenizer, genai_config
  // From a repository's onnx/ folder: the dtype of the variant taken (empty otherwise), and every one there.
  std::string dtype;
  std::vector<OnnxVariant> variants;
};
// A folder (model.onnx, the decoder genai_config.json names, or its only .onnx), a repository with an onnx/
// folder of variants (`dtype` picks one; empty: the first present in kDtypes' order of preference), or an .onnx file
// (in a repository's onnx/ folder: configs and tokenizer from the repository's root); fails saying what is
// missing or ambiguous. A `dtype` given for anything but a repository fails.
ModelFiles resolve_model(const std::string& path, const std::string& dtype = "");
// tern's own trained model (models/default, tools/train_default_model.py): under the working directory,
// or next to the source tree the executable at `exe` was built in (build/tern → models/default).
std::string default_model_dir(const std::string& exe);

struct DecoderOptions {
  std::string device = "cpu";        // cpu, opencl, opencl:N
  std::string weights = "fp32";      // fp32 (as stored), fp16, bf16, int8, int4
  std::string activations = "auto";  // auto, fp32, int8
  std::string kv_dtype = "fp32";     // the ring's storage: fp32, fp16, q8_0 or q4_0 (kernels/kv_storage.h)
  // The tokens the ring holds (`--window`; 0: the graph's own past/present cache). Unset: the model's context
  // length (4096 when unknown), and a graph whose attention the ring cannot take keeps its own cache.
  std::optional<int64_t> ring_capacity;
  int64_t sinks = 4;
  int threads = 0;  // 0: all cores
  std::string isa;  // the CPU kernels' tier (kernels/cpu/isa.h); empty: the default (TERN_ISA, else the highest)
  // The session's memory cap (SessionOptions::max_memory): bytes, or with K, M, G or T (powers of 1024, an
  // optional "B" or "iB" after it): "6G", "512MiB". Empty: no cap of its own (the process's still holds).
  std::string max_memory;
  bool prefault = false;  // SessionOptions::prefault
  bool use_pack = true;   // take the model's pack (tern pack) when it has one: SessionOptions::Pack::Use
};
// "q8_0" → KvStorage::Q8_0 (kernels/kv_storage.h); fails naming the flag, the names and the text.
kernels::KvStorage parse_kv_dtype(const std::string& name);
// "6G" → 6·2^30 bytes (the rule above); fails naming the flag and the text.
size_t parse_memory_size(const std::string& text);
// The session options any model loads with: threads, memory cap, prefault, pack, device, weights and
// activations (the C API's graphs take these alone).
SessionOptions load_session_options(const DecoderOptions& o);
// The session options generation loads a decoder with: those, only the last position's logits, and the ring
// KV cache unless `ring_possible` is false (--no-cache) — asking for a window then fails.
SessionOptions decoder_session_options(const DecoderOptions& o, const ModelConfig& cfg, bool ring_possible);
// One warning when a decoder's attention missed the ring-buffer cache: what it costs, and per layer
// where matching stopped (empty when it did not miss). Never a silent fallback.
std::string graph_cache_warning(const Session& s);

// What a caller sets of the sampling; the rest comes from generation_config.json (sampling only if it
// says do_sample and the caller sets no sampling parameter).
struct SamplingChoices {
  bool greedy = false;
  std::optional<float> temperature, top_p, min_p, repetition_penalty, frequency_penalty, presence_penalty;
  std::optional<int> top_k;
  uint64_t seed = 0;
};
// When neither the caller nor generation_config.json (its do_sample) says how to choose tokens, a completion is
// greedy and a conversation samples at temperature 0.7 and top-p 0.9, what chat front ends default to: a greedy
// chat repeats itself (SmolLM2 answered a follow-up with 511 tokens of one sentence, issue 76).
enum class SamplingUse { Completion, Conversation };
constexpr float kConversationTemperature = 0.7f, kConversationTopP = 0.9f;
SamplingOptions sampling_options(const SamplingChoices& c, const ModelConfig& cfg, SamplingUse use = SamplingUse::Completion);

}  // namespace tern::llm
