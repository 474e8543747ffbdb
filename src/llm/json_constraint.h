// Constrained decoding to a JSON object (an API's response_format {"type": "json_object"}): each step, the tokens
// whose bytes would leave the text something no JSON object begins with are masked out of the logits, and the
// sequence ends once the object is whole.
//
// JsonGrammar is JSON as a byte-level pushdown automaton (RFC 8259, the top level an object — or an array, when a
// schema's top level is one — nesting at most
// kMaxDepth, strings well-formed UTF-8: byte-level vocabularies hold tokens that are parts of a character).
// JsonVocabulary holds every token's bytes once per tokenizer, grouped by their first two bytes, so a step tries only
// the tokens whose first two bytes can come next — and inside a string, where most tokens are whole characters of
// text, takes those without feeding them. Near the end of max_tokens the mask keeps only tokens after which the
// tokens left can still close the object (JsonGrammar::closing_bytes), so it ends whole within the budget
// whenever the vocabulary has the single-byte tokens (byte-level BPE and byte-fallback vocabularies do); when no
// token can (a schema whose least value is longer than the budget), every token that continues the value may, and
// the answer is its beginning, cut by length.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "llm/json_schema.h"

namespace tern::llm {

class Tokenizer;

class JsonGrammar {
 public:
  static constexpr int kMaxDepth = 32;
  // With a schema (json_schema.h; it must outlive the grammar), the object must also be one the schema takes:
  // each value of the type its place asks, keys among its properties, the required ones present, enums and
  // array lengths kept.
  explicit JsonGrammar(const JsonSchema* schema = nullptr) : schema_(schema) {}
  // Feeds one byte; false when it cannot continue the text (the grammar is then unchanged).
  bool feed(unsigned char c);
  bool feed(const std::string& bytes);  // every byte, or false (then the grammar is left part-way: feed a copy)
  bool feed(const char* bytes, size_t n);
  bool complete() const { return mode_ == Mode::Done; }
  // Inside a string, between characters, where text leaves the grammar as it is (not a key or an enum's string
  // under a schema: their bytes are matched).
  bool in_text() const { return mode_ == Mode::String && utf8_left_ == 0 && !(schema_ && (key_ || literal_check_)); }
  // The fewest bytes that would make the text a whole JSON object (under a schema, about: its required keys).
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
  bool step(unsigned char c);  // feed() without the undo
  bool value_start(unsigned char c);
  bool after_value(unsigned char c);  // (a value just ended)
  bool close(unsigned char c);
  bool space(unsigned char c);  // whitespace between tokens: bounded, or under a schema's fixed separators theirs
  // The schema's part (all true without one).
  bool schema_value_start(unsigned char c);
  bool begin_key();                                     // a key's opening quote
  bool schema_key_byte(unsigned char c, bool closing);  // a byte inside a key (closing: its closing quote)
  bool schema_literal_byte(unsigned char c);            // a byte of a value that must be one of its node's literals
  bool schema_value_end();                              // a scalar value ended
  bool schema_close(unsigned char c);
  bool schema_comma() const;
  int schema_closing_bytes() const;
  Mode mode_ = Mode::Value;
  bool key_ = false;       // the string is a key
  uint8_t hex_left_ = 0;   // Hex
  uint8_t utf8_left_ = 0;  // String: continuation bytes the character still needs, the next one in [utf8_lo_, utf8_hi_]
  unsigned char utf8_lo_ = 0x80, utf8_hi_ = 0xBF;
  uint8_t spaces_ = 0;                   // whitespace bytes in a row (bounded: a model must not pad forever)
  uint8_t depth_ = 0;                    // open containers
  const char* literal_ = nullptr;        // Literal: the bytes still to come
  std::array<char, kMaxDepth> stack_{};  // '{' or '['
  // The schema's state: the node the next object value takes (set as its key closes), the node of the scalar
  // being read, which keys or literals its bytes so far still match and how many bytes that is.
  const JsonSchema* schema_ = nullptr;
  uint16_t value_node_ = 0, node_ = 0, matched_ = 0;
  uint64_t candidates_ = 0;
  bool literal_check_ = false, integer_only_ = false;
  // Per open container: its node, the properties written (objects) or items (arrays). Copied only as deep as it
  // is in use: the mask copies a grammar per token tried.
  struct Frames {
    struct Frame {
      uint64_t used = 0;
      uint16_t node = 0;
      uint32_t count = 0;
    };
    Frames() = default;
    Frames(const Frames& o) : n(o.n) { std::copy_n(o.f.begin(), n, f.begin()); }
    Frames& operator=(const Frames& o) {
      n = o.n;
      std::copy_n(o.f.begin(), n, f.begin());
      return *this;
    }
    uint8_t n = 0;
    std::array<Frame, kMaxDepth> f;
  } frames_;
};

// Every token's bytes as they extend a text (decoded after another token, so SentencePiece's leading space is
// kept), empty for control tokens (never allowed), grouped by their first two bytes. Immutable once made: shared
// by every constrained sequence of a tokenizer.
struct JsonVocabulary {
  explicit JsonVocabulary(const Tokenizer& tok);
  std::vector<std::string> bytes;
  // Group b0·257 holds the one-byte token b0, group b0·257 + 1 + b1 the tokens beginning b0 b1: a step feeds each
  // group's two bytes once and skips the whole group when they cannot come (" x" after a value: byte-level
  // vocabularies begin half their tokens with a space). Group g is by_prefix[prefix_start[g], prefix_start[g + 1]).
  static constexpr size_t kGroups = 256 * 257;
  std::vector<int32_t> by_prefix, prefix_start;
  std::vector<char> plain;  // whole characters, no '"', '\' or control byte: inside a string, text that leaves it as it was
};

// One sequence's constraint: its grammar over the tokens chosen so far.
class JsonConstraint {
 public:
  // `schema`: null for any JSON object (json_object), else the value must be one it takes (json_schema).
  // `trigger` (a tool call the model may make: "<tool_call>"): the text is free until the sequence writes the
  // trigger, then a value under the schema follows, whole, then the text is free again, up to the next trigger.
  explicit JsonConstraint(std::shared_ptr<const JsonVocabulary> vocabulary, std::shared_ptr<const JsonSchema> schema = nullptr,
                          std::string trigger = "")
      : vocab_(std::move(vocabulary)), schema_(std::move(schema)), trigger_(std::move(trigger)), grammar_(schema_.get()) {}
  // Sets the logits of tokens that cannot come next to -inf (of the n logits; tokens past the vocabulary table
  // too); `remaining`: the tokens the sequence may still make. Returns how many are left: 0 ends the sequence.
  int64_t mask(float* logits, int64_t n, int64_t remaining);
  void accept(int64_t token);
  // The value is whole (with a trigger: never — the sequence ends at its end token).
  bool complete() const { return trigger_.empty() && grammar_.complete(); }
  bool in_value() const { return trigger_.empty() || triggered_; }

 private:
  std::shared_ptr<const JsonVocabulary> vocab_;
  std::shared_ptr<const JsonSchema> schema_;
  std::string trigger_, recent_;  // recent_: the free text's last bytes, where the trigger is looked for
  bool triggered_ = false;
  JsonGrammar grammar_;
  std::vector<char> allowed_;  // per token, this step (kept: a step allocates nothing)
};

}  // namespace tern::llm
