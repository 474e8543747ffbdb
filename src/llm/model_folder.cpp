#include "llm/model_folder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json.h"
#include "core/mapped_file.h"

namespace tern::llm {
namespace fs = std::filesystem;

namespace {

// transformers.js's dtype names and the file suffixes its scripts/quantize.py writes, with the order a repository's
// default takes them on a CPU (`preference`, lowest first): q4 (4-bit blocks on tern's grouped decode kernels: 2.2-3.1x
// ONNX Runtime's decode on the 1B shape, bench/README), then the fp32 file, exact, then the 8-bit ones (exact integer
// sums; 2.9-3.0x ORT's decode of the same file on SmolLM2's shape, docs/quantize.md, but quantized activations), then
// fp16 and q4f16 (ORT's tokens only up to float16 near-ties), bnb4 last (dequantized to float32 at load: 8x its file
// in memory).
struct DtypeName {
  const char* dtype;
  const char* suffix;
  int preference;
};
constexpr DtypeName kDtypes[] = {{"fp32", "", 1},        {"fp16", "_fp16", 5}, {"q8", "_quantized", 2}, {"int8", "_int8", 3},
                                 {"uint8", "_uint8", 4}, {"q4", "_q4", 0},     {"q4f16", "_q4f16", 6},  {"bnb4", "_bnb4", 7}};
// A variant's file stems, the first present taken: Optimum's merged decoder is what older repositories hold.
constexpr const char* kStems[] = {"model", "decoder_model_merged"};

// The .onnx file and its external data (files in its folder that start with its name: model.onnx_data,
// model_q4.onnx_data_1…).
int64_t variant_bytes(const fs::path& onnx) {
  int64_t bytes = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(onnx.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(onnx.filename().string(), 0) == 0 && e.is_regular_file(ec)) bytes += static_cast<int64_t>(e.file_size(ec));
  }
  return bytes;
}

// A repository's root for an .onnx file in its onnx/ folder (the configs and tokenizer sit there), else the file's folder.
std::string folder_of(const fs::path& onnx) {
  const fs::path dir = onnx.parent_path();
  if (dir.filename() == "onnx" && !folder_holds(dir.string(), "config.json") && !folder_holds(dir.string(), "tokenizer.json")) {
    const fs::path repo = dir.parent_path();
    if (folder_holds(repo.string(), "config.json") || folder_holds(repo.string(), "tokenizer.json")) return repo.string();
  }
  return dir.string();
}

// "fp32, fp16, q8, …": what --dtype takes.
std::string dtype_choices() {
  std::string names;
  for (const DtypeName& d : kDtypes) names += (names.empty() ? "" : ", ") + std::string(d.dtype);
  return names;
}

int preference_of(const std::string& dtype) {
  for (const DtypeName& d : kDtypes)
    if (dtype == d.dtype) return d.preference;
  return -1;
}

}  // namespace

std::vector<OnnxVariant> onnx_variants(const std::string& repo) {
  std::vector<OnnxVariant> out;
  const fs::path dir = fs::path(repo) / "onnx";
  if (!fs::is_directory(dir)) return out;
  for (const DtypeName& d : kDtypes)
    for (const char* stem : kStems) {
      const std::string name = std::string(stem) + d.suffix + ".onnx";
      if (!folder_holds(dir.string(), name)) continue;
      confined_file(repo, "onnx/" + name, "the model");  // (named as in the folder: see resolve_model's decoder)
      out.push_back({d.dtype, (dir / name).lexically_normal().string(), variant_bytes(dir / name)});
      break;
    }
  std::sort(out.begin(), out.end(),
            [](const OnnxVariant& a, const OnnxVariant& b) { return preference_of(a.dtype) < preference_of(b.dtype); });
  return out;
}

ModelFiles resolve_model(const std::string& path, const std::string& dtype) {
  if (!fs::exists(path)) fail("model '", path, "' does not exist");
  const bool repository = fs::is_directory(path) && !folder_holds(path, "model.onnx") && !folder_holds(path, "genai_config.json") &&
                          fs::is_directory(fs::path(path) / "onnx");
  if (!dtype.empty() && !repository)
    fail("--dtype ", dtype, " picks a variant in a repository's onnx/ folder, and '", path, "' has none (it names one decoder)");
  if (repository) {
    ModelFiles files;
    files.dir = path;
    files.variants = onnx_variants(path);
    if (files.variants.empty()) fail("'", path, "/onnx' holds none of transformers.js's decoder files (model.onnx, model_q4.onnx…)");
    if (!dtype.empty() && preference_of(dtype) < 0) fail("--dtype '", dtype, "' is not one of ", dtype_choices());
    for (const OnnxVariant& v : files.variants)
      if (dtype.empty() || v.dtype == dtype) {
        files.onnx = v.file;
        files.dtype = v.dtype;
        return files;
      }
    std::string present;
    for (const OnnxVariant& v : files.variants) present += (present.empty() ? "" : ", ") + v.dtype;
    fail("'", path, "/onnx' has no ", dtype, " variant; it has ", present);
  }
  if (!fs::is_directory(path)) return {path, folder_of(fs::path(path)), {}, {}};
  // The decoder as named in the folder (checked by the confinement rule): its external data is looked up beside
  // that name, which in a Hugging Face cache snapshot is a link into the blobs, not beside the blob.
  auto decoder = [&](const std::string& name, const char* what) -> ModelFiles {
    confined_file(path, name, what);
    return {(fs::path(path) / name).lexically_normal().string(), path, {}, {}};
  };
  if (folder_holds(path, "genai_config.json")) {
    const nlohmann::json j = read_json_file(confined_file(path, "genai_config.json", "the genai config"));
    if (j.is_object() && j.contains("model") && j["model"].is_object() && j["model"].contains("decoder") &&
        j["model"]["decoder"].is_object() && j["model"]["decoder"].contains("filename") && j["model"]["decoder"]["filename"].is_string())
      return decoder(j["model"]["decoder"]["filename"].get<std::string>(), "genai_config.json's decoder filename");
  }
  if (folder_holds(path, "model.onnx")) return decoder("model.onnx", "the model");
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(path))
    if (e.path().extension() == ".onnx") found.push_back(e.path().string());
  if (found.size() == 1) return decoder(fs::path(found[0]).filename().string(), "the model");
  fail("'", path, "' holds ", found.size(), " .onnx files and no model.onnx: name the file");
}

std::string default_model_dir(const std::string& exe) {
  for (const fs::path& p : {fs::path("models/default"), fs::path(exe).parent_path() / ".." / "models" / "default"})
    if (fs::exists(p / "model.onnx")) return p.lexically_normal().string();
  fail("no --model given and no models/default found (run from the tern folder, or give --model PATH)");
}

size_t parse_memory_size(const std::string& text) {
  size_t used = 0;
  double v = -1;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
  }
  std::string unit = text.substr(used);
  for (const std::string tail : {"iB", "B"})
    if (unit.ends_with(tail)) {
      unit.resize(unit.size() - tail.size());
      break;
    }
  const std::string units = "KMGT";
  const size_t at = unit.size() == 1 ? units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0])))) : std::string::npos;
  if (!(v > 0) || (!unit.empty() && at == std::string::npos))
    fail("--max-memory: '", text, "' is not a size (bytes, or a number with K, M, G or T: 6G, 512MiB)");
  const double bytes = v * (unit.empty() ? 1.0 : static_cast<double>(size_t{1} << (10 * (at + 1))));
  if (bytes >= 1e19) fail("--max-memory: '", text, "' is too large");
  return static_cast<size_t>(bytes);
}

SessionOptions load_session_options(const DecoderOptions& o) {
  SessionOptions so;
  so.threads = o.threads;
  if (!o.isa.empty()) so.isa = kernels::isa_named(o.isa);
  if (!o.max_memory.empty()) so.max_memory = parse_memory_size(o.max_memory);
  so.prefault = o.prefault;
  so.pack = o.use_pack ? SessionOptions::Pack::Use : SessionOptions::Pack::Ignore;
  so.device = parse_device(o.device);
  so.weights = parse_weight_format(o.weights);
  so.activations = parse_activation_format(o.activations);
  return so;
}

kernels::KvStorage parse_kv_dtype(const std::string& name) {
  const auto kv = kernels::kv_storage_named(name);
  if (!kv) fail("--kv-dtype must be ", kernels::kv_storage_names(" or "), ", got '", name, "'");
  return *kv;
}

SessionOptions decoder_session_options(const DecoderOptions& o, const ModelConfig& cfg, bool ring_possible) {
  SessionOptions so = load_session_options(o);
  so.decoder.last_position_output = "logits";  // the generator reads no other position
  so.decoder.kv_sinks = o.sinks;
  so.decoder.kv_dtype = parse_kv_dtype(o.kv_dtype);
  if (o.ring_capacity) {
    so.decoder.ring_capacity = *o.ring_capacity;
    if (so.decoder.ring_capacity < 0 || so.decoder.kv_sinks < 0) fail("--window and --sinks must not be negative");
    if (so.decoder.ring_capacity > kMaxContextTokens)
      fail("--window ", so.decoder.ring_capacity, " is past tern's largest window (", kMaxContextTokens, " tokens)");
    if (so.decoder.ring_capacity > 0 && !ring_possible) fail("--window needs the KV cache (not --no-cache)");
  } else if (ring_possible) {  // the ring is allocated as it fills; the RoPE tables are not (W x head size floats)
    so.decoder.ring_capacity = cfg.context_length > 0 ? std::min(cfg.context_length, kDefaultMaxWindow) : 4096;
    so.decoder.ring_required = false;
  }
  return so;
}

std::string graph_cache_warning(const Session& s) {
  if (s.passes().misses.empty()) return {};
  std::ostringstream w;
  w << "the attention did not fuse into tern's ring-buffer KV cache; this model runs on the graph's own past/present "
       "cache instead: no sliding window (generation stops at the context length), keys and values copied by Concat "
       "every step. Where matching stopped:\n";
  for (const auto& miss : s.passes().misses) w << "  " << miss.str() << "\n";
  return w.str();
}

SamplingOptions sampling_options(const SamplingChoices& c, const ModelConfig& cfg, SamplingUse use) {
  SamplingOptions s;
  const bool sampling_set = c.temperature || c.top_k || c.top_p || c.min_p;
  const bool chat_default = use == SamplingUse::Conversation && !cfg.sampling_said;
  s.greedy = c.greedy || (!sampling_set && !cfg.do_sample && !chat_default);
  s.temperature = c.temperature.value_or(chat_default ? kConversationTemperature : cfg.temperature);
  s.top_k = c.top_k.value_or(cfg.top_k);
  s.top_p = c.top_p.value_or(chat_default ? kConversationTopP : cfg.top_p);
  s.min_p = c.min_p.value_or(0.0f);
  s.repetition_penalty = c.repetition_penalty.value_or(cfg.repetition_penalty);
  s.frequency_penalty = c.frequency_penalty.value_or(0.0f);
  s.presence_penalty = c.presence_penalty.value_or(0.0f);
  s.seed = c.seed;
  return s;
}

}  // namespace tern::llm
