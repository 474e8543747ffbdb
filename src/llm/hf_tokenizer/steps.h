// The steps of a Hugging Face tokenizer.json's pipeline as its library names them — normalizers, pre-tokenizers,
// decoders (a file each here; the models, BPE and WordPiece, and the added tokens are hf_tokenizer.cpp's) — each
// read from its JSON into a function the tokenizer applies in turn. A step tern does not implement fails at
// load, naming it.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

namespace tern::llm {

using json = nlohmann::json;
inline const std::string kSpm = "\xe2\x96\x81";  // "▁", SentencePiece's visible space

// GPT-2's reversible map from bytes to printable characters (so BPE never sees raw control bytes).
struct ByteMap {
  char32_t to_char[256];
  std::unordered_map<char32_t, uint8_t> to_byte;
  ByteMap() {
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      to_char[b] = printable ? static_cast<char32_t>(b) : next++;
      to_byte[to_char[b]] = static_cast<uint8_t>(b);
    }
  }
};
const ByteMap& byte_map();

// What a tokenizer's text may grow to through its normalizers or its decoders: 16 times what went in, plus 4 KiB.
// Real ones shrink it or grow it a little ("▁" for " "); a hostile Sequence of Replace steps multiplied a prompt's
// text past gigabytes (60 s and counting).
inline size_t text_budget(size_t in) { return 16 * in + 4096; }

// `s` with every `from` replaced by `to`, in one pass; `where` names the step ("decoder Replace") when the
// result would pass text_budget.
std::string replace_all(const std::string& s, const std::string& from, const std::string& to, const char* where);

// Replace's pattern: a string (a regex is refused, naming `where`).
std::string string_pattern(const json& step, const char* where);

// BERT's character rules, as Hugging Face's BertNormalizer and BertPreTokenizer spell them (its whitespace, \t \n \r
// and Unicode's White_Space, is is_whitespace: White_Space holds all three).
bool is_bert_punctuation(char32_t c);

// The pieces only sentence encoders use (WordPiece, BERT's normalizer and pre-tokenizer, NFD, StripAccents, the
// WordPiece decoder, BERT's post-processor) are left out of a minimal build, which runs decoders: its size budget
// (tests/minimal_build.sh) had 5.7 KB left, and these with their Unicode decomposition table take ~45 KB. There a
// tokenizer.json that names one is refused, naming it; elsewhere encoder_piece() does nothing.
#ifdef TERN_MINIMAL
constexpr bool kEncoderPieces = false;
[[noreturn]] void encoder_piece(const char* kind, const std::string& type);
#else
constexpr bool kEncoderPieces = true;
inline void encoder_piece(const char*, const std::string&) {}
#endif

// read(step, its type) for the step `j` names, or for each step of a Sequence (its list under `members`, Sequences
// within it too); nothing for null. Every reader of a pipeline stage (the post-processor too) goes through it.
template <class Read>
void each_step(const json& j, const char* members, const Read& read) {
  if (j.is_null()) return;
  const std::string type = j.at("type");
  if (type != "Sequence") return read(j, type);
  for (const auto& s : j.at(members)) each_step(s, members, read);
}

using Normalizer = std::function<std::string(const std::string&)>;
using PreTokenizer = std::function<std::vector<std::string>(const std::string& text, bool first)>;
using Decoder = std::function<void(std::vector<std::string>& tokens)>;
// Each appends the steps its JSON object (a Sequence: its members, in order) names; null names none.
void read_normalizer(const json& n, std::vector<Normalizer>& steps);
void read_pre_tokenizer(const json& p, std::vector<PreTokenizer>& steps);
void read_decoder(const json& d, std::vector<Decoder>& steps);

}  // namespace tern::llm
