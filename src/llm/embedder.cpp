#include "llm/embedder.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "passes/pipeline.h"

namespace tern::llm {
namespace {

// A request's inputs go through in batches of at most this many rows and this many positions (rows x the
// longest): 32 of MiniLM's 256-token inputs, but 4 of a decoder's 2048 (its attention holds rows x heads x
// positions^2 scores).
constexpr size_t kBatchRows = 32, kBatchPositions = 8192;

// A JSON file of the folder, or null when the folder has none.
nlohmann::json optional_json(const std::string& dir, const std::string& name) {
  if (!folder_holds(dir, name)) return nullptr;
  return read_json_file(confined_file(dir, name, name));
}

}  // namespace

Pooling parse_pooling(const std::string& name) {
  if (name == "mean") return Pooling::Mean;
  if (name == "cls") return Pooling::Cls;
  if (name == "max") return Pooling::Max;
  if (name == "last") return Pooling::LastToken;
  fail("pooling '", name, "': one of mean, cls, max, last");
}

bool is_encoder_folder(const std::string& path) {
  return std::filesystem::is_directory(path) && (folder_holds(path, "modules.json") || folder_holds(path, "sentence_bert_config.json"));
}

Embedder::Embedder(const std::string& folder, SessionOptions options) {
  // Optimum writes model.onnx; sentence-transformers repositories keep theirs in onnx/.
  const std::string name = folder_holds(folder, "model.onnx") ? "model.onnx" : "onnx/model.onnx";
  session_ = std::make_unique<Session>(confined_file(folder, name, "the encoder model"), std::move(options));
  own_tok_ = load_tokenizer(folder);
  tok_ = own_tok_.get();
  vocab_ = tok_->vocab_size();

  bool ids = false, mask = false;
  for (const IOInfo& in : session_->inputs()) {
    if (in.name == "input_ids") ids = true;
    else if (in.name == "attention_mask") mask = true;
    else if (in.name == "token_type_ids") token_types_ = true;
    else if (in.name == "position_ids") position_ids_ = true;  // (a decoder exported for feature extraction)
    else
      fail("'", folder, "/", name, "': input '", in.name,
           "' is not one an encoder takes (input_ids, attention_mask, token_type_ids, position_ids)");
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

Embedder::Embedder(Session& decoder, const ModelConfig& config, const Tokenizer& tok, Pooling pooling, bool normalize)
    : tok_(&tok), pooling_(pooling), normalize_(normalize) {
  bool exposed = false;
  for (const IOInfo& o : decoder.outputs()) exposed = exposed || o.name == kHiddenStateOutput;
  if (!exposed) fail("'", decoder.model().path, "': the session does not expose the hidden state (hidden_state_of unset)");
  decoder_ = std::make_unique<Generator>(decoder, config);
  vocab_ = config.vocab_size > 0 ? config.vocab_size : tok.vocab_size();
  const int64_t window = decoder.options().decoder.ring_capacity;
  max_tokens_ = config.context_length > 0 ? config.context_length : window > 0 ? window : 2048;
  if (decoder_->io().layout == PastLayout::Internal) max_tokens_ = std::min(max_tokens_, window);
  dims_ = static_cast<int64_t>(embed({{0}})[0].size());
}

Embedder::~Embedder() = default;

Tensor Embedder::encoder_hidden(const std::vector<std::vector<int64_t>>& rows, size_t first, size_t n, size_t len) const {
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
  if (position_ids_) {  // 0, 1, … on every row: right padding leaves the real tokens' positions as they are
    Tensor pos(DType::Int64, {b, t});
    for (int64_t i = 0; i < b * t; ++i) pos.data<int64_t>()[i] = i % t;
    feeds.emplace_back("position_ids", pos);
  }
  const Outputs result = session_->run(feeds);
  for (const auto& [name, tensor] : result.items)
    if (name == hidden_output_) return tensor;
  fail("the encoder gave no output '", hidden_output_, "'");
}

std::vector<float> Embedder::pool(const float* row, int64_t start, int64_t used, int64_t h) const {
  std::vector<double> acc(static_cast<size_t>(h), pooling_ == Pooling::Max ? -INFINITY : 0.0);
  // Mean and max over the row's real tokens (sentence-transformers sums in the model's float; double here).
  if (pooling_ == Pooling::Cls || pooling_ == Pooling::LastToken) {
    const float* tok = row + (pooling_ == Pooling::Cls ? start : start + used - 1) * h;
    for (int64_t k = 0; k < h; ++k) acc[static_cast<size_t>(k)] = tok[k];
  } else {
    for (int64_t p = start; p < start + used; ++p)
      for (int64_t k = 0; k < h; ++k) {
        const double v = row[p * h + k];
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
  return e;
}

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
  for (size_t first = 0, n = 0; first < rows.size(); first += n) {
    size_t len = 0;
    for (n = 0; first + n < rows.size() && n < kBatchRows; ++n) {
      const size_t longer = std::max(len, rows[first + n].size());
      if (n > 0 && (n + 1) * longer > kBatchPositions) break;
      len = longer;
    }
    const int64_t b = static_cast<int64_t>(n), t = static_cast<int64_t>(len);
    std::unique_lock<std::mutex> decoder_run(decoder_mu_, std::defer_lock);
    Tensor hidden;
    if (decoder_) {  // padded as generation pads (the generator's rule); the tensor is the session's until the next run
      decoder_run.lock();
      hidden = decoder_->prefill_output(
          {rows.begin() + static_cast<std::ptrdiff_t>(first), rows.begin() + static_cast<std::ptrdiff_t>(first + n)}, kHiddenStateOutput);
    } else {
      hidden = encoder_hidden(rows, first, n, len);
    }
    if (hidden.dtype() == DType::Float16 || hidden.dtype() == DType::BFloat16) hidden = cast_to(hidden, DType::Float32);
    if (hidden.dtype() != DType::Float32 || hidden.shape().size() != 3 || hidden.shape()[0] != b || hidden.shape()[1] != t)
      fail("the model's hidden state is not float32 [batch, sequence, hidden] for ", b, " rows of ", t, " tokens");
    const int64_t h = hidden.shape()[2];
    const bool left_padded = decoder_ && !decoder_->io().prompts_right_padded;
    for (size_t r = 0; r < n; ++r) {
      const int64_t used = static_cast<int64_t>(rows[first + r].size());
      out.push_back(pool(hidden.data<float>() + static_cast<int64_t>(r) * t * h, left_padded ? t - used : 0, used, h));
    }
  }
  return out;
}

}  // namespace tern::llm
