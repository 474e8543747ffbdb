#include "llm/embedder.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"
#include "core/mapped_file.h"

namespace tern::llm {
namespace {

// Rows per run: a request's inputs go through in batches of this many, padded to the longest in each.
constexpr size_t kBatchRows = 32;

// A JSON file of the folder, or null when the folder has none.
nlohmann::json optional_json(const std::string& dir, const std::string& name) {
  if (!folder_holds(dir, name)) return nullptr;
  return read_json_file(confined_file(dir, name, name));
}

}  // namespace

bool is_encoder_folder(const std::string& path) {
  return std::filesystem::is_directory(path) && (folder_holds(path, "modules.json") || folder_holds(path, "sentence_bert_config.json"));
}

Embedder::Embedder(const std::string& folder, SessionOptions options) {
  // Optimum writes model.onnx; sentence-transformers repositories keep theirs in onnx/.
  const std::string name = folder_holds(folder, "model.onnx") ? "model.onnx" : "onnx/model.onnx";
  session_ = std::make_unique<Session>(confined_file(folder, name, "the encoder model"), std::move(options));
  tok_ = load_tokenizer(folder);
  vocab_ = tok_->vocab_size();

  bool ids = false, mask = false;
  for (const IOInfo& in : session_->inputs()) {
    if (in.name == "input_ids") ids = true;
    else if (in.name == "attention_mask") mask = true;
    else if (in.name == "token_type_ids") token_types_ = true;
    else fail("'", folder, "/", name, "': input '", in.name, "' is not one an encoder takes (input_ids, attention_mask, token_type_ids)");
  }
  if (!ids || !mask) fail("'", folder, "/", name, "': an encoder needs inputs input_ids and attention_mask");
  // The per-token output: last_hidden_state (Optimum, transformers), token_embeddings, else the first output.
  const auto& outs = session_->outputs();
  if (outs.empty()) fail("'", folder, "/", name, "' has no outputs");
  hidden_output_ = outs[0].name;
  for (const IOInfo& o : outs)
    if (o.name == "last_hidden_state" || o.name == "token_embeddings") hidden_output_ = o.name;

  const nlohmann::json st = optional_json(folder, "sentence_bert_config.json"), cfg = optional_json(folder, "config.json");
  try {
    if (st.is_object() && st.contains("max_seq_length"))
      max_tokens_ = json_int(st["max_seq_length"], "sentence_bert_config.json: max_seq_length", 1, 1 << 20);
    else if (cfg.is_object() && cfg.contains("max_position_embeddings"))
      max_tokens_ = json_int(cfg["max_position_embeddings"], "config.json: max_position_embeddings", 1, 1 << 20);
    // Pooling as sentence-transformers' Pooling module says (1_Pooling/config.json; mean when there is none).
    const nlohmann::json pool = optional_json(folder, "1_Pooling/config.json");
    if (pool.is_object()) {
      int modes = 0;
      for (const auto& [key, kind] : {std::pair{"pooling_mode_mean_tokens", Pooling::Mean},
                                      {"pooling_mode_cls_token", Pooling::Cls},
                                      {"pooling_mode_max_tokens", Pooling::Max},
                                      {"pooling_mode_lasttoken", Pooling::LastToken}})
        if (pool.value(key, false)) pooling_ = kind, ++modes;
      if (pool.value("pooling_mode_mean_sqrt_len_tokens", false) || pool.value("pooling_mode_weightedmean_tokens", false))
        fail_unsupported("'", folder, "/1_Pooling/config.json': only mean, cls, max and last-token pooling are supported");
      if (modes != 1) fail("'", folder, "/1_Pooling/config.json': ", modes, " pooling modes are set (tern takes exactly one)");
    }
    const nlohmann::json modules = optional_json(folder, "modules.json");
    if (modules.is_array())
      for (const auto& m : modules)
        if (m.is_object() && m.value("type", std::string()) == "sentence_transformers.models.Normalize") normalize_ = true;
  } catch (const nlohmann::json::exception& e) {
    fail("'", folder, "': ", e.what());
  }
  // The width: one run of the shortest input.
  dims_ = static_cast<int64_t>(embed({{0}})[0].size());
}

Embedder::~Embedder() = default;

std::vector<std::vector<float>> Embedder::embed(const std::vector<std::vector<int64_t>>& rows) const {
  std::vector<std::vector<float>> out;
  out.reserve(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].empty()) fail("input ", r, " has no tokens");
    if (static_cast<int64_t>(rows[r].size()) > max_tokens_)
      fail("input ", r, " has ", rows[r].size(), " tokens; this encoder takes at most ", max_tokens_);
    for (int64_t id : rows[r])
      if (id < 0 || id >= vocab_) fail("input ", r, ": token id ", id, " is outside the vocabulary of ", vocab_);
  }
  for (size_t first = 0; first < rows.size(); first += kBatchRows) {
    const size_t n = std::min(kBatchRows, rows.size() - first);
    size_t len = 0;
    for (size_t r = 0; r < n; ++r) len = std::max(len, rows[first + r].size());
    const int64_t b = static_cast<int64_t>(n), t = static_cast<int64_t>(len);
    Tensor ids(DType::Int64, {b, t}), mask(DType::Int64, {b, t});
    std::fill_n(ids.data<int64_t>(), b * t, 0);
    std::fill_n(mask.data<int64_t>(), b * t, 0);
    for (size_t r = 0; r < n; ++r)
      for (size_t k = 0; k < rows[first + r].size(); ++k) {
        ids.data<int64_t>()[r * len + k] = rows[first + r][k];
        mask.data<int64_t>()[r * len + k] = 1;
      }
    std::vector<std::pair<std::string, Tensor>> feeds{{"input_ids", ids}, {"attention_mask", mask}};
    if (token_types_) {
      Tensor types(DType::Int64, {b, t});
      std::fill_n(types.data<int64_t>(), b * t, 0);
      feeds.emplace_back("token_type_ids", types);
    }
    const Outputs result = session_->run(feeds);
    const Tensor* hidden = nullptr;
    for (const auto& [name, tensor] : result.items)
      if (name == hidden_output_) hidden = &tensor;
    if (!hidden || hidden->dtype() != DType::Float32 || hidden->shape().size() != 3 || hidden->shape()[0] != b || hidden->shape()[1] != t)
      fail("the encoder's output '", hidden_output_, "' is not float32 [batch, sequence, hidden] for ", b, " rows of ", t, " tokens");
    const int64_t h = hidden->shape()[2];
    const float* x = hidden->data<float>();
    for (size_t r = 0; r < n; ++r) {
      const size_t used = rows[first + r].size();
      const float* row = x + static_cast<int64_t>(r) * t * h;
      std::vector<double> acc(static_cast<size_t>(h), pooling_ == Pooling::Max ? -INFINITY : 0.0);
      // Mean and max over the row's real tokens (sentence-transformers sums in the model's float; double here).
      if (pooling_ == Pooling::Cls || pooling_ == Pooling::LastToken) {
        const float* tok = row + (pooling_ == Pooling::Cls ? 0 : static_cast<int64_t>(used - 1) * h);
        for (int64_t k = 0; k < h; ++k) acc[static_cast<size_t>(k)] = tok[k];
      } else {
        for (size_t p = 0; p < used; ++p)
          for (int64_t k = 0; k < h; ++k) {
            const double v = row[static_cast<int64_t>(p) * h + k];
            double& a = acc[static_cast<size_t>(k)];
            a = pooling_ == Pooling::Max ? std::max(a, v) : a + v;
          }
        if (pooling_ == Pooling::Mean)
          for (double& a : acc) a /= static_cast<double>(used);
      }
      double norm = 1;
      if (normalize_) {
        double sq = 0;
        for (double a : acc) sq += a * a;
        norm = std::max(std::sqrt(sq), 1e-12);  // (torch.nn.functional.normalize's eps)
      }
      std::vector<float> e(static_cast<size_t>(h));
      for (int64_t k = 0; k < h; ++k) e[static_cast<size_t>(k)] = static_cast<float>(acc[static_cast<size_t>(k)] / norm);
      out.push_back(std::move(e));
    }
  }
  return out;
}

}  // namespace tern::llm
