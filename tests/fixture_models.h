// The models the tests load: where they lie, the GQA fixture loaded as `tern generate` loads it, SmolLM2's golden prompts.
#pragma once
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "llm/decoder_io.h"
#include "llm/model_config.h"
#include "llm/model_folder.h"
#include "runtime/session.h"

namespace tern::test {

// The bundled default model (scripts/get-models.sh, README).
inline const std::string kDefaultModel = std::string(TERN_SOURCE_DIR) + "/models/default";
// The torch-exported Llama with grouped-query attention (tests/fixtures/README.md).
inline const std::string kGqaFixture = std::string(TERN_SOURCE_DIR) + "/tests/fixtures/llama-gqa-torch";

// SmolLM2-135M-Instruct as scripts/get-models.sh imports it (the GGUF's Q4_1 blocks), or "" — said — when absent.
inline std::string smollm2_dir() {
  const std::string dir = std::string(TERN_SOURCE_DIR) + "/models/smollm2-135m-instruct";
  if (std::filesystem::exists(dir + "/model.onnx")) return dir;
  MESSAGE("skipped: ", dir, " is absent (scripts/get-models.sh imports it)");
  return "";
}
// tests/fixtures/smollm2_llama_cpp_greedy.txt, a line a prompt: its ids | the 32 tokens llama.cpp's greedy decoding
// gives on the GGUF itself (tools/llama_cpp_greedy.sh, llama.cpp c392e5094).
struct GoldenPrompt {
  std::string line;
  std::vector<int64_t> prompt, want;
};
inline std::vector<GoldenPrompt> smollm2_llama_cpp_greedy() {
  std::ifstream golden(std::string(TERN_SOURCE_DIR) + "/tests/fixtures/smollm2_llama_cpp_greedy.txt");
  std::vector<GoldenPrompt> all;
  for (std::string line; std::getline(golden, line);) {
    const size_t bar = line.find('|');
    if (bar == std::string::npos) fail("smollm2_llama_cpp_greedy.txt: a line without '|': ", line);
    GoldenPrompt g{line, {}, {}};
    std::istringstream p(line.substr(0, bar)), w(line.substr(bar + 1));
    for (int64_t id; p >> id;) g.prompt.push_back(id);
    for (int64_t id; w >> id;) g.want.push_back(id);
    all.push_back(std::move(g));
  }
  return all;
}

// kGqaFixture as tern generate loads it, with a ring of `window` tokens, on `threads` (0: every core).
inline std::unique_ptr<Session> gqa_ring_session(int64_t window, int threads = 0) {
  llm::DecoderOptions d;
  d.ring_capacity = window;
  d.threads = threads;
  return std::make_unique<Session>(kGqaFixture + "/model.onnx", llm::decoder_session_options(d, llm::read_model_config(kGqaFixture), true));
}

// Feeds for every input of a decoder session, `batch` rows of `seq` new tokens after `past` cached ones, by the
// dim names the exports use (batch, batch_size, sequence_length, past_sequence_length, total_sequence_length
// or their sum): token ids and mask 1, positions from `past`, caches zero. Fails naming a dim it does not know.
inline std::vector<std::pair<std::string, Tensor>> decoder_feeds(const Session& s, int64_t batch, int64_t seq, int64_t past) {
  std::vector<std::pair<std::string, Tensor>> feeds;
  std::optional<llm::DecoderIO> io;  // (a cache input's head count or size named, not fixed: the genai builder's)
  for (const IOInfo& in : s.inputs()) {
    if (in.name == kLogitsPositionsInput) continue;  // (left out: the last position)
    Shape shape;
    for (const Dim& d : *in.shape) {
      const std::string& n = d.symbol;
      const auto axis = shape.size();
      if (d.is_known()) shape.push_back(d.value);
      else if (in.name.rfind("past_key_values.", 0) == 0 && (axis == 1 || axis == 3)) {
        if (!io) io = llm::detect_decoder_io(s);
        shape.push_back(axis == 1 ? io->kv_heads : io->head_size);
      } else if (n == "batch" || n == "batch_size") shape.push_back(batch);
      else if (n == "sequence_length") shape.push_back(seq);
      else if (n == "past_sequence_length") shape.push_back(past);
      else if (n == "total_sequence_length" || n == "past_sequence_length + sequence_length") shape.push_back(past + seq);
      else fail("decoder_feeds: input '", in.name, "' has dim '", n, "'");
    }
    Tensor t(in.dtype, shape);
    if (t.nbytes()) std::memset(t.raw(), 0, t.nbytes());
    for (int64_t i = 0; i < t.numel(); ++i) {
      const int64_t v = in.name == "position_ids" ? past + i % shape.back() : 1;
      if (in.dtype == DType::Int64) t.data<int64_t>()[i] = v;
      else if (in.dtype == DType::Int32) t.data<int32_t>()[i] = static_cast<int32_t>(v);
      else if (in.dtype == DType::Bool) static_cast<uint8_t*>(t.raw())[i] = 1;  // (a merged decoder's use_cache_branch)
    }
    feeds.emplace_back(in.name, std::move(t));
  }
  return feeds;
}
// The feeds' shapes (Session::forecast_activations).
inline std::vector<std::pair<std::string, Shape>> shapes_of(const std::vector<std::pair<std::string, Tensor>>& feeds) {
  std::vector<std::pair<std::string, Shape>> shapes;
  for (const auto& [name, t] : feeds) shapes.emplace_back(name, t.shape());
  return shapes;
}

// The exporter matrix: tests/fixtures/exports (tools/exporters/make_exports.py).
inline std::filesystem::path exports_dir() { return std::filesystem::path(TERN_SOURCE_DIR) / "tests" / "fixtures" / "exports"; }

// Optimum's Gemma-2 export takes no position_ids: its positions count from the cache length, left padding
// included, so ORT's tokens for a left-padded batch are not what the ring (positions from attention_mask, as
// Hugging Face's generate feeds them) computes; only its unpadded rows compare.
inline bool positions_from_cache_length(const std::string& cell) { return cell == "gemma2-optimum"; }

}  // namespace tern::test
