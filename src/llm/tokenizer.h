// Tokenizers: text ↔ token ids. One interface; implementations for llama2.c's tokenizer.bin here, and
// Hugging Face tokenizer.json (byte-level and SentencePiece-style BPE).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tern::llm {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Token ids for `text`, with the model's BOS first when `add_bos`.
  virtual std::vector<int64_t> encode(const std::string& text, bool add_bos) const = 0;
  // The bytes token `id` contributes when it follows `prev` (-1: none). May be part of a UTF-8
  // character; Utf8Stream reassembles those.
  virtual std::string decode_token(int64_t prev, int64_t id) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t bos_id() const = 0;

  std::string decode(const std::vector<int64_t>& ids) const;
};

// Loads the tokenizer of a model folder: tokenizer.json (Hugging Face) or tokenizer.bin (llama2.c).
// Fails with a message naming what was looked for.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_dir);
std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::string& path, int64_t vocab_size);

// Accepts bytes as they are generated and releases only whole UTF-8 characters, so a stream never
// prints half a character. Invalid bytes pass through rather than stall the stream.
class Utf8Stream {
 public:
  std::string push(const std::string& bytes);
  std::string flush();  // whatever is pending at the end

 private:
  std::string pending_;
};

}  // namespace tern::llm
