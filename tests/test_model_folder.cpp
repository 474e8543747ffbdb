// The rules generation loads a model by (llm/model_folder.h): which file of a folder is the decoder,
// the session options a decoder runs with, and how flags and generation_config.json make the sampling.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "llm/model_folder.h"
#include "model_builder.h"
#include "test_util.h"

using namespace tern;
using namespace tern::llm;
using namespace tern::test;
namespace fs = std::filesystem;

namespace {
void touch(const fs::path& p, const std::string& text = "") { std::ofstream(p) << text; }
}  // namespace

TEST_CASE("resolve_model finds a folder's decoder: genai_config's, else model.onnx, else the only .onnx") {
  TempDir d;
  touch(d.path / "a.onnx");
  CHECK(resolve_model(d.path.string()).onnx == (d.path / "a.onnx").string());
  CHECK(resolve_model(d.path.string()).dir == d.path.string());
  touch(d.path / "b.onnx");
  CHECK(contains(error_of([&] { resolve_model(d.path.string()); }), "holds 2 .onnx files and no model.onnx: name the file"));
  touch(d.path / "model.onnx");
  CHECK(resolve_model(d.path.string()).onnx == (d.path / "model.onnx").string());
  touch(d.path / "genai_config.json", R"({"model": {"decoder": {"filename": "b.onnx"}}})");
  CHECK(resolve_model(d.path.string()).onnx == (d.path / "b.onnx").string());
  const auto file = resolve_model((d.path / "a.onnx").string());  // a file names itself; its folder holds the rest
  CHECK(file.onnx == (d.path / "a.onnx").string());
  CHECK(file.dir == d.path.string());
  CHECK(contains(error_of([&] { resolve_model((d.path / "absent").string()); }), "does not exist"));
}

TEST_CASE("resolve_model on an onnx-community repository: configs at the root, the variant --dtype names in onnx/") {
  TempDir d;
  touch(d.path / "config.json", "{}");
  touch(d.path / "tokenizer.json", "{}");
  fs::create_directory(d.path / "onnx");
  for (const char* name : {"model.onnx", "model_fp16.onnx", "model_quantized.onnx", "decoder_model_merged_q4.onnx", "model_bnb4.onnx"})
    touch(d.path / "onnx" / name, "12345");
  touch(d.path / "onnx" / "model.onnx_data", "1234567890");  // external data counts toward the variant's size
  const std::string repo = d.path.string();
  const ModelFiles def = resolve_model(repo);  // the default: q4 first (here only as a merged decoder)
  CHECK(def.dtype == "q4");
  CHECK(def.onnx == (d.path / "onnx" / "decoder_model_merged_q4.onnx").string());
  CHECK(def.dir == repo);
  std::vector<std::string> dtypes;
  for (const OnnxVariant& v : def.variants) dtypes.push_back(v.dtype);
  CHECK(dtypes == std::vector<std::string>{"q4", "fp32", "q8", "fp16", "bnb4"});
  CHECK(def.variants[1].bytes == 15);
  CHECK(resolve_model(repo, "q8").onnx == (d.path / "onnx" / "model_quantized.onnx").string());
  CHECK(resolve_model(repo, "fp32").onnx == (d.path / "onnx" / "model.onnx").string());
  CHECK(contains(error_of([&] { resolve_model(repo, "int8"); }), "has no int8 variant; it has q4, fp32, q8, fp16, bnb4"));
  CHECK(contains(error_of([&] { resolve_model(repo, "f16"); }), "--dtype 'f16' is not one of fp32, fp16, q8"));
  // A variant named directly reads the repository's configs and tokenizer, not onnx/'s.
  const ModelFiles file = resolve_model((d.path / "onnx" / "model_fp16.onnx").string());
  CHECK(file.dir == repo);
  CHECK(file.dtype.empty());
  // --dtype means nothing for a folder or file that names one decoder.
  CHECK(contains(error_of([&] { resolve_model((d.path / "onnx" / "model.onnx").string(), "q4"); }),
                 "picks a variant in a repository's onnx/"));
}

TEST_CASE("decoder_session_options: the last position's logits, a ring as long as the context (to 2^17) unless asked otherwise") {
  ModelConfig cfg;
  cfg.context_length = 2048;
  DecoderOptions o;
  SessionOptions so = decoder_session_options(o, cfg, true);
  CHECK(so.decoder.last_position_output == "logits");
  CHECK(so.decoder.ring_capacity == 2048);
  CHECK_FALSE(so.decoder.ring_required);  // a graph the ring cannot take keeps its own cache (with a warning)
  CHECK(decoder_session_options(o, ModelConfig{}, true).decoder.ring_capacity == 4096);  // context unknown
  CHECK(decoder_session_options(o, cfg, false).decoder.ring_capacity == 0);              // beam search, no cache
  ModelConfig huge;  // a million positions claimed: the default window stops at 2^17 (RoPE tables are W rows)
  huge.context_length = 1'000'000;
  CHECK(decoder_session_options(o, huge, true).decoder.ring_capacity == kDefaultMaxWindow);
  o.ring_capacity = kMaxContextTokens + 1;
  CHECK(contains(error_of([&] { decoder_session_options(o, cfg, true); }), "--window 16777217 is past tern's largest window"));
  o.ring_capacity = 64;
  o.kv_dtype = "fp16";
  o.weights = "int4";
  so = decoder_session_options(o, cfg, true);
  CHECK(so.decoder.ring_capacity == 64);
  CHECK(so.decoder.ring_required);  // asked for: a miss is an error naming where matching stopped
  CHECK(so.decoder.kv_dtype == kernels::KvStorage::F16);
  CHECK(so.weights == WeightFormat::Int4);
  CHECK(contains(error_of([&] { decoder_session_options(o, cfg, false); }), "--window needs the KV cache (not --no-cache)"));
  o.kv_dtype = "int8";
  CHECK(contains(error_of([&] { decoder_session_options(o, cfg, true); }), "--kv-dtype must be fp32, fp16, q8_0 or q4_0, got 'int8'"));
}

TEST_CASE("sampling_options: what the caller sets wins, generation_config.json fills the rest, greedy unless sampling is asked") {
  ModelConfig cfg;
  cfg.temperature = 0.6f;
  cfg.top_p = 0.9f;
  CHECK(sampling_options({}, cfg).greedy);  // the config does not say do_sample
  cfg.do_sample = true;
  SamplingOptions s = sampling_options({}, cfg);
  CHECK_FALSE(s.greedy);
  CHECK(s.temperature == 0.6f);
  CHECK(s.top_p == 0.9f);
  SamplingChoices c;
  c.greedy = true;
  CHECK(sampling_options(c, cfg).greedy);
  cfg.do_sample = false;
  c = {};
  c.temperature = 0.8f;  // any sampling parameter asks for sampling
  s = sampling_options(c, cfg);
  CHECK_FALSE(s.greedy);
  CHECK(s.temperature == 0.8f);
  CHECK(s.top_p == 0.9f);
}

TEST_CASE("sampling_options: a conversation samples at 0.7 / 0.9 when neither the caller nor the config says") {
  ModelConfig cfg;  // generation_config.json silent (no do_sample)
  const SamplingOptions chat = sampling_options({}, cfg, SamplingUse::Conversation);
  CHECK_FALSE(chat.greedy);
  CHECK(chat.temperature == kConversationTemperature);
  CHECK(chat.top_p == kConversationTopP);
  CHECK(sampling_options({}, cfg, SamplingUse::Completion).greedy);
  SamplingChoices c;
  c.greedy = true;  // --greedy, or temperature 0 over HTTP
  CHECK(sampling_options(c, cfg, SamplingUse::Conversation).greedy);
  c = {};
  c.temperature = 1.2f;
  CHECK(sampling_options(c, cfg, SamplingUse::Conversation).temperature == 1.2f);
  CHECK(sampling_options(c, cfg, SamplingUse::Conversation).top_p == kConversationTopP);
  cfg.sampling_said = true;  // the file says do_sample false: greedy, as it says
  CHECK(sampling_options({}, cfg, SamplingUse::Conversation).greedy);
  const tern::test::TempDir dir;
  std::ofstream(dir.path / "config.json") << R"({"model_type": "llama"})";
  std::ofstream(dir.path / "generation_config.json") << R"({"do_sample": false, "temperature": 0.6})";
  CHECK(read_model_config(dir.path.string()).sampling_said);
  std::ofstream(dir.path / "generation_config.json") << R"({"eos_token_id": 2})";
  CHECK_FALSE(read_model_config(dir.path.string()).sampling_said);
}

TEST_CASE("--max-memory sizes: bytes or K/M/G/T in powers of 1024; anything else is refused naming the flag") {
  CHECK(llm::parse_memory_size("1000") == 1000);
  CHECK(llm::parse_memory_size("6G") == size_t{6} << 30);
  CHECK(llm::parse_memory_size("512MiB") == size_t{512} << 20);
  CHECK(llm::parse_memory_size("1.5GB") == size_t{3} << 29);
  CHECK(llm::parse_memory_size("64k") == size_t{64} << 10);
  for (const char* bad : {"", "G", "-1G", "6X", "six", "0"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(llm::parse_memory_size(bad), doctest::Contains("--max-memory"), Error);
  }
}
