// The models the tests load: where they lie, and the GQA fixture loaded as `tern generate` loads it.
#pragma once
#include <filesystem>
#include <memory>
#include <string>

#include "llm/model_config.h"
#include "llm/model_folder.h"
#include "runtime/session.h"

namespace tern::test {

// The bundled default model (scripts/get-models.sh, README).
inline const std::string kDefaultModel = std::string(TERN_SOURCE_DIR) + "/models/default";
// The torch-exported Llama with grouped-query attention (tests/fixtures/README.md).
inline const std::string kGqaFixture = std::string(TERN_SOURCE_DIR) + "/tests/fixtures/llama-gqa-torch";

// kGqaFixture as tern generate loads it, with a ring of `window` tokens, on `threads` (0: every core).
inline std::unique_ptr<Session> gqa_ring_session(int64_t window, int threads = 0) {
  llm::DecoderOptions d;
  d.window = window;
  d.threads = threads;
  return std::make_unique<Session>(kGqaFixture + "/model.onnx", llm::decoder_session_options(d, llm::read_model_config(kGqaFixture), true));
}

// The exporter matrix: tests/fixtures/exports (tools/exporters/make_exports.py).
inline std::filesystem::path exports_dir() { return std::filesystem::path(TERN_SOURCE_DIR) / "tests" / "fixtures" / "exports"; }

// Optimum's Gemma-2 export takes no position_ids: its positions count from the cache length, left padding
// included, so ORT's tokens for a left-padded batch are not what the ring (positions from attention_mask, as
// Hugging Face's generate feeds them) computes; only its unpadded rows compare.
inline bool positions_from_cache_length(const std::string& cell) { return cell == "gemma2-optimum"; }

}  // namespace tern::test
