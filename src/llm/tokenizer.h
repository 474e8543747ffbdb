// Tokenizers: text ↔ token ids. One interface; implementations for llama2.c's tokenizer.bin here, and
// Hugging Face tokenizer.json (byte-level and SentencePiece-style BPE).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace tern::llm {

// Asked while a long text encodes (between words, and every few thousand merges inside one): true stops it with
// EncodeCancelled — tern serve's deadline and shutdown reach a request still in tokenization.
using CancelCheck = std::function<bool()>;
struct EncodeCancelled : Error {
  using Error::Error;
};

// Its const methods may be called from several threads at once (tern serve encodes on each HTTP thread).
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Token ids for `text`, with the model's BOS first when `add_bos`.
  std::vector<int64_t> encode(const std::string& text, bool add_bos, const CancelCheck& cancelled = {}) const {
    return encode_text(text, add_bos, cancelled);
  }
  // Text of a sequence (control tokens such as BOS/EOS contribute nothing). May end inside a UTF-8
  // character when the ids do; TextStream reassembles those.
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  // The id of the vocabulary entry spelled `piece` as the vocabulary spells it ("▁the", "<0xE2>", "<|im_end|>";
  // added tokens too); -1 when there is none.
  virtual int64_t piece_id(const std::string& piece) const = 0;
  // At least the bytes of text one token can stand for (its longest piece as spelled in the vocabulary, which is
  // never shorter than the text it covers): a text of more than context × this many bytes cannot fit the
  // context, known before encoding it (tern serve refuses such a prompt without tokenizing it).
  virtual size_t longest_token_bytes() const = 0;

 protected:
  virtual std::vector<int64_t> encode_text(const std::string& text, bool add_bos, const CancelCheck& cancelled) const = 0;
};

// The pre-tokenizer split regexes tern matches (by hand: there is no \p{...} regex engine), spelled as
// tokenizer.json files spell them: GPT-2's, Llama-3's (digits in threes) and Qwen2's (digits alone).
extern const char* const kGpt2SplitRegex;
extern const char* const kLlama3SplitRegex;
extern const char* const kQwen2SplitRegex;

// Loads the tokenizer of a model folder: tokenizer.json (Hugging Face) or tokenizer.bin (llama2.c).
// Fails with a message naming what was looked for.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_dir);
std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::string& path, int64_t vocab_size);
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& tokenizer_json);

// The byte a "<0xNN>" piece stands for (SentencePiece's byte fallback: two hex digits, either case); -1 for
// any other piece.
int byte_piece(std::string_view piece);

// Accepts bytes as they are generated and releases only whole UTF-8 characters, so a stream never
// prints half a character. Invalid bytes pass through rather than stall the stream.
class Utf8Stream {
 public:
  std::string push(const std::string& bytes);
  std::string flush();  // whatever is pending at the end

 private:
  std::string pending_;
};

// Text as tokens arrive: each push returns what the new token adds to the decoded sequence, whole
// characters only. Decoders are not token-local (SentencePiece strips the space of the first word, a
// byte-fallback character spans tokens), so the new text is the difference between decoding a short
// window of recent tokens with and without the newest one — exact from the first token on.
class TextStream {
 public:
  explicit TextStream(const Tokenizer& tok, std::vector<int64_t> context = {}) : tok_(tok), ids_(std::move(context)) {}
  std::string push(int64_t id);
  std::string flush() { return utf8_.flush(); }

 private:
  static constexpr size_t kWindow = 8;
  const Tokenizer& tok_;
  std::vector<int64_t> ids_;
  Utf8Stream utf8_;
};

// Stop strings over a stream of text: push() returns what is safe to send — held back while it could be
// the start of a stop string — and stopped() tells when one was found (the text before it is sent, the
// stop string and anything after it never).
class StopScanner {
 public:
  explicit StopScanner(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  std::string push(const std::string& text);
  std::string flush();  // at the end: what was held back
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace tern::llm
