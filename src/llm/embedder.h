// Sentence embeddings: token ids in, a model's last hidden state pooled over the real tokens, L2-normalized or not.
//  - From an encoder model folder as sentence-transformers saves one (all-MiniLM, BGE, E5: model.onnx from Optimum
//    or torch.onnx, tokenizer.json, 1_Pooling/config.json, modules.json): mean, CLS, max or last token as the
//    folder's pooling config says, normalized when its modules end with Normalize — what
//    sentence_transformers.SentenceTransformer.encode returns.
//  - From a decoder (`tern serve --embeddings`, as llama-server's): its final norm's output, the input of the
//    vocabulary projection (DecoderRewrites::hidden_state_of), on a session the generator shares — last-token
//    pooling by default (what decoder embedding models such as Qwen3-Embedding and E5-Mistral are trained for),
//    normalized.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "llm/generator.h"
#include "llm/tokenizer.h"
#include "runtime/session.h"

namespace tern::llm {

enum class Pooling { Mean, Cls, Max, LastToken };
// "mean", "cls", "max" or "last" (llama-server's --pooling names); fails naming the choices.
Pooling parse_pooling(const std::string& name);

// Whether `path` is a folder sentence-transformers saved (modules.json or sentence_bert_config.json): an encoder
// whose output is an embedding, not a decoder (tern serve serves such a --model on /v1/embeddings alone).
bool is_encoder_folder(const std::string& path);

class Embedder {
 public:
  // Loads the folder (or fails naming the file or the graph input/output that does not fit an encoder).
  Embedder(const std::string& folder, SessionOptions options = {});
  // A decoder's embeddings: `decoder` made with hidden_state_of = its logits output (it may serve generation too;
  // this embedder runs its own sequence state), `tok` outliving this. Inputs up to the model's context.
  Embedder(Session& decoder, const ModelConfig& config, const Tokenizer& tok, Pooling pooling, bool normalize = true);
  ~Embedder();

  const Tokenizer& tokenizer() const { return *tok_; }
  // The most tokens one input may hold: sentence_bert_config.json's max_seq_length, else config.json's
  // max_position_embeddings, else 512 (a decoder's: its context). Longer inputs are refused, not truncated.
  int64_t max_tokens() const { return max_tokens_; }
  int64_t dimensions() const { return dims_; }
  Pooling pooling() const { return pooling_; }
  bool normalizes() const { return normalize_; }
  // An encoder's weights file that changed under its session (Session::changed_file); empty otherwise.
  std::string changed_file() const { return session_ ? session_->changed_file() : ""; }
  // Token ids of one text with the tokenizer's special tokens ([CLS] … [SEP]; a decoder's BOS where it adds one).
  std::vector<int64_t> encode(const std::string& text) const { return tok_->encode(text, true); }
  // One embedding per row (each of 1 to max_tokens() ids within the vocabulary), the rows run as padded batches
  // with their attention mask (an encoder's on the right, a decoder's on the left as generation pads). Safe to
  // call from several threads at once (a decoder's run one at a time).
  std::vector<std::vector<float>> embed(const std::vector<std::vector<int64_t>>& rows) const;

 private:
  // The hidden states of rows[first, first + n) padded to `len` tokens, [n, len, hidden] float32.
  Tensor encoder_hidden(const std::vector<std::vector<int64_t>>& rows, size_t first, size_t n, size_t len) const;
  std::vector<float> pool(const float* row, int64_t start, int64_t used, int64_t h) const;

  std::unique_ptr<Session> session_;    // an encoder's own (null for a decoder)
  std::unique_ptr<Tokenizer> own_tok_;  // (an encoder's)
  const Tokenizer* tok_ = nullptr;
  std::unique_ptr<Generator> decoder_;  // a decoder's runs, on its session (null for an encoder)
  mutable std::mutex decoder_mu_;       // one decoder run at a time (its sequence state)
  std::string hidden_output_;
  bool token_types_ = false;   // the graph takes token_type_ids (all 0: one segment)
  bool position_ids_ = false;  // the graph takes position_ids
  Pooling pooling_ = Pooling::Mean;
  bool normalize_ = false;
  int64_t max_tokens_ = 512, dims_ = 0, vocab_ = 0;
};

}  // namespace tern::llm
