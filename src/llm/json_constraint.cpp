#include "llm/json_constraint.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "llm/tokenizer.h"

namespace tern::llm {

namespace {
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_hex(unsigned char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
// Whitespace bytes allowed in a row between tokens: an indented object's lines, not endless padding.
constexpr uint8_t kMostSpaces = 16;
}  // namespace

bool JsonGrammar::value_start(unsigned char c) {
  if (depth_ == 0 && c != '{') return false;  // (json_object: the top level is an object)
  switch (c) {
    case '{':
    case '[':
      if (depth_ == kMaxDepth) return false;
      stack_[depth_++] = static_cast<char>(c);
      mode_ = c == '{' ? Mode::FirstKey : Mode::FirstItem;
      return true;
    case '"': mode_ = Mode::String, key_ = false; return true;
    case '-': mode_ = Mode::NumberSign; return true;
    case '0': mode_ = Mode::NumberZero; return true;
    case 't': mode_ = Mode::Literal, literal_ = "rue"; return true;
    case 'f': mode_ = Mode::Literal, literal_ = "alse"; return true;
    case 'n': mode_ = Mode::Literal, literal_ = "ull"; return true;
    default:
      if (c < '1' || c > '9') return false;
      mode_ = Mode::NumberInt;
      return true;
  }
}

bool JsonGrammar::close(unsigned char c) {
  if (depth_ == 0 || c != (stack_[depth_ - 1] == '{' ? '}' : ']')) return false;
  --depth_;
  mode_ = depth_ == 0 ? Mode::Done : Mode::AfterValue;
  return true;
}

bool JsonGrammar::after_value(unsigned char c) {
  if (is_space(c)) return spaces_ < kMostSpaces && ++spaces_;
  if (c == ',') {
    mode_ = stack_[depth_ - 1] == '{' ? Mode::Key : Mode::Value;
    return true;
  }
  return close(c);
}

bool JsonGrammar::feed(unsigned char c) {
  const JsonGrammar before = *this;
  const bool spaced = mode_ != Mode::String && mode_ != Mode::Escape && mode_ != Mode::Hex && is_space(c);
  if (!spaced) spaces_ = 0;
  bool ok = false;
  switch (mode_) {
    case Mode::Value: ok = spaced ? spaces_ < kMostSpaces && ++spaces_ : value_start(c); break;
    case Mode::FirstKey:
      ok = spaced ? spaces_ < kMostSpaces && ++spaces_ : c == '"' ? (mode_ = Mode::String, key_ = true) : close(c);
      break;
    case Mode::Key: ok = spaced ? spaces_ < kMostSpaces && ++spaces_ : c == '"' && (mode_ = Mode::String, key_ = true); break;
    case Mode::Colon: ok = spaced ? spaces_ < kMostSpaces && ++spaces_ : c == ':' && (mode_ = Mode::Value, true); break;
    case Mode::AfterValue: ok = after_value(c); break;
    case Mode::FirstItem: ok = spaced ? spaces_ < kMostSpaces && ++spaces_ : c == ']' ? close(c) : value_start(c); break;
    case Mode::String:
      if (utf8_left_ > 0) {  // (RFC 3629's ranges: no overlong forms, surrogates or code points past U+10FFFF)
        ok = c >= utf8_lo_ && c <= utf8_hi_;
        --utf8_left_, utf8_lo_ = 0x80, utf8_hi_ = 0xBF;
      } else if (c >= 0x80) {
        ok = c >= 0xC2 && c <= 0xF4;
        utf8_left_ = c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
        utf8_lo_ = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
        utf8_hi_ = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
      } else {
        if (c == '"') mode_ = key_ ? Mode::Colon : Mode::AfterValue;
        else if (c == '\\') mode_ = Mode::Escape;
        ok = c >= 0x20;
      }
      break;
    case Mode::Escape:
      if (c == 'u') mode_ = Mode::Hex, hex_left_ = 4;
      else mode_ = Mode::String;
      ok = c == 'u' || (c != 0 && std::strchr("\"\\/bfnrt", c) != nullptr);
      break;
    case Mode::Hex:
      if (--hex_left_ == 0) mode_ = Mode::String;
      ok = is_hex(c);
      break;
    case Mode::NumberSign:
      mode_ = c == '0' ? Mode::NumberZero : Mode::NumberInt;
      ok = is_digit(c);
      break;
    case Mode::NumberDot:  // (a digit must come: the fraction's, or the exponent's after its sign)
    case Mode::NumberESign:
      mode_ = mode_ == Mode::NumberDot ? Mode::NumberFraction : Mode::NumberExponent;
      ok = is_digit(c);
      break;
    case Mode::NumberE:
      mode_ = is_digit(c) ? Mode::NumberExponent : Mode::NumberESign;
      ok = is_digit(c) || c == '+' || c == '-';
      break;
    case Mode::NumberZero:
    case Mode::NumberInt:
    case Mode::NumberFraction:
    case Mode::NumberExponent:
      if (is_digit(c) && mode_ != Mode::NumberZero) ok = true;
      else if (c == '.' && (mode_ == Mode::NumberZero || mode_ == Mode::NumberInt)) ok = (mode_ = Mode::NumberDot, true);
      else if ((c == 'e' || c == 'E') && mode_ != Mode::NumberExponent) ok = (mode_ = Mode::NumberE, true);
      else ok = (mode_ = Mode::AfterValue, after_value(c));  // the number ended: c follows it
      break;
    case Mode::Literal:
      if (c == static_cast<unsigned char>(*literal_) && !*++literal_) mode_ = Mode::AfterValue;
      ok = c == static_cast<unsigned char>(before.literal_[0]);
      break;
    case Mode::Done: ok = false; break;
  }
  if (!ok) *this = before;
  return ok;
}

bool JsonGrammar::feed(const std::string& bytes) {
  for (unsigned char c : bytes)
    if (!feed(c)) return false;
  return true;
}

int JsonGrammar::closing_bytes() const {
  const int string_end = key_ ? 3 : 1;  // '"', and after a key ":0"
  int pending = 0;
  switch (mode_) {
    case Mode::Value: pending = depth_ == 0 ? 2 : 1; break;  // "{}" or "0"
    case Mode::Key: pending = 4; break;                      // "":0
    case Mode::Colon: pending = 2; break;                    // :0
    case Mode::String: pending = utf8_left_ + string_end; break;
    case Mode::Escape: pending = 1 + string_end; break;
    case Mode::Hex: pending = hex_left_ + string_end; break;
    case Mode::NumberSign:
    case Mode::NumberDot:
    case Mode::NumberE:
    case Mode::NumberESign: pending = 1; break;
    case Mode::Literal: pending = static_cast<int>(std::strlen(literal_)); break;
    default: break;  // a container may close, a number may end, or the object is whole
  }
  return pending + depth_;  // (each open container its closer)
}

JsonVocabulary::JsonVocabulary(const Tokenizer& tok) {
  // Each token decoded after a plain letter, less that letter's text: SentencePiece drops a leading space only at
  // the start of a text, and a token's bytes here are what it adds in the middle of one.
  const std::vector<int64_t> before = tok.encode("a", false);
  const std::string before_text = tok.decode(before);
  const auto V = static_cast<size_t>(tok.vocab_size());
  bytes.resize(V);
  plain.assign(V, 0);
  std::vector<int64_t> ids = before;
  ids.push_back(0);
  for (size_t id = 0; id < V; ++id) {
    ids.back() = static_cast<int64_t>(id);
    const std::string text = tok.decode(ids);
    bytes[id] = text.compare(0, before_text.size(), before_text) == 0 ? text.substr(before_text.size()) : tok.decode({ids.back()});
    if (bytes[id].empty()) continue;  // (control tokens: BOS, EOS, chat markers)
    by_first_byte[static_cast<unsigned char>(bytes[id][0])].push_back(static_cast<int32_t>(id));
    JsonGrammar in_string;  // (the grammar decides: fed inside a string, it is still there, between characters)
    in_string.feed("{\"a\":\"");
    plain[id] = in_string.feed(bytes[id]) && in_string.in_text();
  }
}

int64_t JsonConstraint::mask(float* logits, int64_t n, int64_t remaining) {
  const JsonVocabulary& v = *vocab_;
  allowed_.assign(static_cast<size_t>(n), 0);
  // A token may come when the tokens left after it can still close the object (a closing token takes a byte off
  // closing_bytes() at least).
  const int most_open = static_cast<int>(std::min<int64_t>(remaining - 1, std::numeric_limits<int>::max()));
  const bool in_text = grammar_.closing_bytes() <= most_open && grammar_.in_text();
  for (int b = 0; b < 256; ++b) {
    JsonGrammar first = grammar_;
    if (!first.feed(static_cast<unsigned char>(b))) continue;
    for (const int32_t id : v.by_first_byte[static_cast<size_t>(b)]) {
      if (id >= n) continue;
      if (in_text && v.plain[static_cast<size_t>(id)]) {  // text inside a string: the grammar stays as it is
        allowed_[static_cast<size_t>(id)] = 1;
        continue;
      }
      JsonGrammar g = grammar_;
      allowed_[static_cast<size_t>(id)] = g.feed(v.bytes[static_cast<size_t>(id)]) && g.closing_bytes() <= most_open;
    }
  }
  int64_t left = 0;
  for (int64_t t = 0; t < n; ++t) {
    if (allowed_[static_cast<size_t>(t)]) ++left;
    else logits[t] = -std::numeric_limits<float>::infinity();
  }
  return left;
}

void JsonConstraint::accept(int64_t token) {
  if (token >= 0 && static_cast<size_t>(token) < vocab_->bytes.size()) grammar_.feed(vocab_->bytes[static_cast<size_t>(token)]);
}

}  // namespace tern::llm
