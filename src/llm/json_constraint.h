// Constrained decoding to a JSON object (an API's response_format {"type": "json_object"}): each step, the tokens
// whose bytes would leave the text something no JSON object begins with are masked out of the logits, and the
// sequence ends once the object is whole.
//
// JsonGrammar is JSON as a byte-level pushdown automaton (RFC 8259, the top level an object, nesting at most
// kMaxDepth, strings well-formed UTF-8: byte-level vocabularies hold tokens that are parts of a character).
// JsonVocabulary holds every token's bytes once per tokenizer, bucketed by first byte, so a step tries only the
// tokens whose first byte can come next — and inside a string, where most tokens are whole characters of text,
// takes those without feeding them. Near the end of max_tokens the mask keeps only tokens after which the
// tokens left can still close the object (JsonGrammar::closing_bytes), so it ends whole within the budget
// whenever the vocabulary has the single-byte tokens (byte-level BPE and byte-fallback vocabularies do).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tern::llm {

class Tokenizer;

class JsonGrammar {
 public:
  static constexpr int kMaxDepth = 32;
  // Feeds one byte; false when it cannot continue the text (the grammar is then unchanged).
  bool feed(unsigned char c);
  bool feed(const std::string& bytes);  // every byte, or false (then the grammar is left part-way: feed a copy)
  bool complete() const { return mode_ == Mode::Done; }
  bool in_text() const { return mode_ == Mode::String && utf8_left_ == 0; }  // inside a string, between characters
  // The fewest bytes that would make the text a whole JSON object.
  int closing_bytes() const;

 private:
  enum class Mode : uint8_t {
    Value,           // a value must come (the top level: an object)
    FirstKey,        // after '{': a key or '}'
    Key,             // after ',' in an object: a key
    Colon,           // after a key
    AfterValue,      // ',' or the container's closer
    FirstItem,       // after '[': a value or ']'
    String,          // inside a string (key_ tells which)
    Escape,          // after '\' in a string
    Hex,             // in \uXXXX (hex_left digits to go)
    NumberSign,      // after '-': a digit
    NumberZero,      // a leading 0: '.', 'e' or the end
    NumberInt,       // integer digits
    NumberDot,       // after '.': a digit
    NumberFraction,  // fraction digits
    NumberE,         // after 'e': a sign or a digit
    NumberESign,     // after the exponent's sign: a digit
    NumberExponent,  // exponent digits
    Literal,         // in true / false / null (literal_ the rest)
    Done,            // the object is whole
  };
  bool value_start(unsigned char c);
  bool after_value(unsigned char c);  // (a value just ended)
  bool close(unsigned char c);
  Mode mode_ = Mode::Value;
  bool key_ = false;       // the string is a key
  uint8_t hex_left_ = 0;   // Hex
  uint8_t utf8_left_ = 0;  // String: continuation bytes the character still needs, the next one in [utf8_lo_, utf8_hi_]
  unsigned char utf8_lo_ = 0x80, utf8_hi_ = 0xBF;
  uint8_t spaces_ = 0;                   // whitespace bytes in a row (bounded: a model must not pad forever)
  uint8_t depth_ = 0;                    // open containers
  const char* literal_ = nullptr;        // Literal: the bytes still to come
  std::array<char, kMaxDepth> stack_{};  // '{' or '['
};

// Every token's bytes as they extend a text (decoded after another token, so SentencePiece's leading space is
// kept), empty for control tokens (never allowed), bucketed by first byte. Immutable once made: shared by
// every constrained sequence of a tokenizer.
struct JsonVocabulary {
  explicit JsonVocabulary(const Tokenizer& tok);
  std::vector<std::string> bytes;
  std::array<std::vector<int32_t>, 256> by_first_byte;
  std::vector<char> plain;  // whole characters, no '"', '\' or control byte: inside a string, text that leaves it as it was
};

// One sequence's constraint: its grammar over the tokens chosen so far.
class JsonConstraint {
 public:
  explicit JsonConstraint(std::shared_ptr<const JsonVocabulary> vocabulary) : vocab_(std::move(vocabulary)) {}
  // Sets the logits of tokens that cannot come next to -inf (of the n logits; tokens past the vocabulary table
  // too); `remaining`: the tokens the sequence may still make. Returns how many are left: 0 ends the sequence.
  int64_t mask(float* logits, int64_t n, int64_t remaining);
  void accept(int64_t token);
  bool complete() const { return grammar_.complete(); }

 private:
  std::shared_ptr<const JsonVocabulary> vocab_;
  JsonGrammar grammar_;
  std::vector<char> allowed_;  // per token, this step (kept: a step allocates nothing)
};

}  // namespace tern::llm
