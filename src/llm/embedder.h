// Sentence embeddings from an encoder model folder as sentence-transformers saves one (all-MiniLM, BGE, E5:
// model.onnx from Optimum or torch.onnx, tokenizer.json, 1_Pooling/config.json, modules.json): token ids in,
// the graph's last hidden state pooled over the real tokens (mean, CLS, max or last token, as the folder's
// pooling config says) and L2-normalized when its modules end with Normalize — what
// sentence_transformers.SentenceTransformer.encode returns.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "llm/tokenizer.h"
#include "runtime/session.h"

namespace tern::llm {

enum class Pooling { Mean, Cls, Max, LastToken };

// Whether `path` is a folder sentence-transformers saved (modules.json or sentence_bert_config.json): an encoder
// whose output is an embedding, not a decoder (tern serve serves such a --model on /v1/embeddings alone).
bool is_encoder_folder(const std::string& path);

class Embedder {
 public:
  // Loads the folder (or fails naming the file or the graph input/output that does not fit an encoder).
  Embedder(const std::string& folder, SessionOptions options = {});
  ~Embedder();

  const Tokenizer& tokenizer() const { return *tok_; }
  // The most tokens one input may hold: sentence_bert_config.json's max_seq_length, else config.json's
  // max_position_embeddings, else 512. Longer inputs are refused, not truncated.
  int64_t max_tokens() const { return max_tokens_; }
  int64_t dimensions() const { return dims_; }
  Pooling pooling() const { return pooling_; }
  bool normalizes() const { return normalize_; }
  // Token ids of one text with the tokenizer's [CLS] … [SEP].
  std::vector<int64_t> encode(const std::string& text) const { return tok_->encode(text, true); }
  // One embedding per row (each of 1 to max_tokens() ids within the vocabulary), the rows run as right-padded
  // batches with their attention mask. Safe to call from several threads at once.
  std::vector<std::vector<float>> embed(const std::vector<std::vector<int64_t>>& rows) const;

 private:
  std::unique_ptr<Session> session_;
  std::unique_ptr<Tokenizer> tok_;
  std::string hidden_output_;
  bool token_types_ = false;  // the graph takes token_type_ids (all 0: one segment)
  Pooling pooling_ = Pooling::Mean;
  bool normalize_ = false;
  int64_t max_tokens_ = 512, dims_ = 0, vocab_ = 0;
};

}  // namespace tern::llm
