#include "llm/model_config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"
#include "core/mapped_file.h"

namespace tern::llm {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// One of the folder's JSON files (inside it: core/mapped_file.h confined_file), or {} when it has none.
json read_json(const fs::path& dir, const char* name) {
  if (!folder_holds(dir.string(), name)) return json::object();
  return read_json_file(confined_file(dir.string(), name, name));
}

// An id field that may be a number or a list of numbers.
std::vector<int64_t> ids_of(const json& v) {
  std::vector<int64_t> r;
  if (v.is_number_integer()) r.push_back(v.get<int64_t>());
  else if (v.is_array())
    for (const auto& x : v)
      if (x.is_number_integer()) r.push_back(x.get<int64_t>());
  return r;
}

// A field in [lo, hi] when present (null counts as absent); anything else fails naming file and field.
void take_int(const json& j, const char* file, const char* key, int64_t lo, int64_t hi, int64_t& out) {
  if (j.is_object() && j.contains(key) && !j[key].is_null()) out = json_int(j[key], std::string(file) + ": " + key, lo, hi);
}

}  // namespace

ModelConfig read_model_config(const std::string& model_dir) {
  ModelConfig c;
  const fs::path dir(model_dir);
  json cfg = read_json(dir, "config.json");
  json gen = read_json(dir, "generation_config.json");
  json genai = read_json(dir, "genai_config.json");

  if (cfg.contains("model_type") && cfg["model_type"].is_string()) c.model_type = cfg["model_type"];
  constexpr int64_t kMaxId = kMaxVocabulary - 1;
  take_int(cfg, "config.json", "vocab_size", 0, kMaxVocabulary, c.vocab_size);
  for (const char* k : {"max_position_embeddings", "n_positions", "n_ctx"})
    take_int(cfg, "config.json", k, 0, kMaxContextTokens, c.context_length);
  take_int(cfg, "config.json", "pad_token_id", -1, kMaxId, c.pad_token_id);
  if (cfg.contains("eos_token_id")) c.eos_token_ids = ids_of(cfg["eos_token_id"]);

  if (genai.contains("model")) {
    const json& m = genai["model"];
    if (m.contains("type") && m["type"].is_string() && c.model_type.empty()) c.model_type = m["type"];
    take_int(m, "genai_config.json", "vocab_size", 0, kMaxVocabulary, c.vocab_size);
    take_int(m, "genai_config.json", "context_length", 0, kMaxContextTokens, c.context_length);
    take_int(m, "genai_config.json", "pad_token_id", -1, kMaxId, c.pad_token_id);
    if (m.contains("eos_token_id")) c.eos_token_ids = ids_of(m["eos_token_id"]);
  }
  // generation_config.json is what Hugging Face's generate() reads last, so it wins.
  take_int(gen, "generation_config.json", "pad_token_id", -1, kMaxId, c.pad_token_id);
  if (gen.contains("eos_token_id")) c.eos_token_ids = ids_of(gen["eos_token_id"]);
  if (gen.contains("do_sample") && gen["do_sample"].is_boolean()) c.do_sample = gen["do_sample"], c.sampling_said = true;
  auto take_float = [&](const char* k, float& v) {
    if (gen.contains(k) && gen[k].is_number()) v = json_float(gen[k], std::string("generation_config.json: ") + k);
  };
  take_float("temperature", c.temperature);
  take_float("top_p", c.top_p);
  take_float("repetition_penalty", c.repetition_penalty);
  if (gen.contains("top_k") && gen["top_k"].is_number_integer())
    c.top_k = static_cast<int>(json_int(gen["top_k"], "generation_config.json: top_k", 0, INT32_MAX));
  return c;
}

}  // namespace tern::llm
