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
  if (depth_ == 0 && c != '{' && !(schema_ && c == '[')) return false;  // (json_object: the top level is an object)
  if (!schema_value_start(c)) return false;
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

bool JsonGrammar::space(unsigned char c) {
  if (!schema_ || schema_->key_spaces() < 0) return spaces_ < kMostSpaces && ++spaces_;
  // (x-guidance's fixed separators: their spaces after ':' and ',', no other whitespace)
  int most = 0;
  if (mode_ == Mode::Value && depth_ > 0) most = stack_[depth_ - 1] == '{' ? schema_->key_spaces() : schema_->item_spaces();
  else if (mode_ == Mode::Key) most = schema_->item_spaces();
  return c == ' ' && spaces_ < most && ++spaces_;
}

bool JsonGrammar::close(unsigned char c) {
  if (depth_ == 0 || c != (stack_[depth_ - 1] == '{' ? '}' : ']')) return false;
  if (!schema_close(c)) return false;
  --depth_;
  mode_ = depth_ == 0 ? Mode::Done : Mode::AfterValue;
  return true;
}

bool JsonGrammar::after_value(unsigned char c) {
  if (is_space(c)) return space(c);
  if (c == ',') {
    mode_ = stack_[depth_ - 1] == '{' ? Mode::Key : Mode::Value;
    return schema_comma();
  }
  return close(c);
}

bool JsonGrammar::schema_value_start(unsigned char c) {
  if (!schema_) return true;
  int node = JsonSchema::kRoot;
  if (depth_ > 0 && stack_[depth_ - 1] == '[') {
    Frames::Frame& array = frames_.f[frames_.n - 1];
    const JsonSchema::Node& a = schema_->node(array.node);
    if (array.count >= a.max_items) return false;
    ++array.count;
    node = a.items;
  } else if (depth_ > 0) {
    node = value_node_;
  }
  const JsonSchema::Node& n = schema_->node(node);
  const uint8_t kind = c == '{'                  ? JsonSchema::kObject
                       : c == '['                ? JsonSchema::kArray
                       : c == '"'                ? JsonSchema::kString
                       : c == '-' || is_digit(c) ? JsonSchema::kNumber | JsonSchema::kInteger
                       : c == 't' || c == 'f'    ? JsonSchema::kBoolean
                       : c == 'n'                ? JsonSchema::kNull
                                                 : 0;
  if (!(n.types & kind)) return false;
  node_ = static_cast<uint16_t>(node);
  integer_only_ = (kind & JsonSchema::kInteger) && !(n.types & JsonSchema::kNumber);
  if (c == '{' || c == '[') {
    if (frames_.n >= kMaxDepth) return false;
    frames_.f[frames_.n++] = {0, static_cast<uint16_t>(node), 0};
    return true;
  }
  literal_check_ = !n.literals.empty();
  if (!literal_check_) return true;
  candidates_ = n.literals.size() == 64 ? ~uint64_t{0} : (uint64_t{1} << n.literals.size()) - 1;
  matched_ = 0;
  return schema_literal_byte(c);
}

bool JsonGrammar::schema_literal_byte(unsigned char c) {
  const auto& literals = schema_->node(node_).literals;
  for (uint64_t left = candidates_; left; left &= left - 1) {
    const int i = __builtin_ctzll(left);
    const std::string& l = literals[static_cast<size_t>(i)];
    if (matched_ >= l.size() || static_cast<unsigned char>(l[matched_]) != c) candidates_ &= ~(uint64_t{1} << i);
  }
  ++matched_;
  return candidates_ != 0;
}

bool JsonGrammar::schema_value_end() {
  if (!schema_) return true;
  integer_only_ = false;
  if (!literal_check_) return true;
  literal_check_ = false;
  const auto& literals = schema_->node(node_).literals;
  for (uint64_t left = candidates_; left; left &= left - 1) {
    const auto i = static_cast<size_t>(__builtin_ctzll(left));
    if (literals[i].size() != matched_) continue;
    if (depth_ > 0 && stack_[depth_ - 1] == '{') {  // a union's discriminating value: the object is now its branch's
      Frames::Frame& object = frames_.f[frames_.n - 1];
      const JsonSchema::Node& o = schema_->node(object.node);
      if (!o.variants.empty()) object.node = static_cast<uint16_t>(o.variants[i].node), object.used = uint64_t{1} << o.variants[i].key;
    }
    return true;
  }
  return false;
}

bool JsonGrammar::begin_key() {
  mode_ = Mode::String, key_ = true;
  if (!schema_) return true;
  const Frames::Frame& object = frames_.f[frames_.n - 1];
  const JsonSchema::Node& n = schema_->node(object.node);
  const size_t count = n.properties.size();
  const uint64_t all = count == 64 ? ~uint64_t{0} : (uint64_t{1} << count) - 1;
  // (other keys allowed: a used name is matched too, so that writing it again is refused when it closes)
  candidates_ = n.additional ? all : all & ~object.used;
  matched_ = 0;
  return candidates_ != 0 || n.additional;
}

bool JsonGrammar::schema_key_byte(unsigned char c, bool closing) {
  Frames::Frame& object = frames_.f[frames_.n - 1];
  const JsonSchema::Node& n = schema_->node(object.node);
  if (closing) {
    for (uint64_t left = candidates_; left; left &= left - 1) {
      const int i = __builtin_ctzll(left);
      if (n.properties[static_cast<size_t>(i)].first.size() != matched_) continue;
      if (object.used >> i & 1) return false;  // (a key written twice)
      object.used |= uint64_t{1} << i;
      value_node_ = static_cast<uint16_t>(n.properties[static_cast<size_t>(i)].second);
      return true;
    }
    value_node_ = JsonSchema::kAnyNode;
    return n.additional;
  }
  for (uint64_t left = candidates_; left; left &= left - 1) {
    const int i = __builtin_ctzll(left);
    const std::string& name = n.properties[static_cast<size_t>(i)].first;
    if (matched_ >= name.size() || static_cast<unsigned char>(name[matched_]) != c) candidates_ &= ~(uint64_t{1} << i);
  }
  if (matched_ < UINT16_MAX) ++matched_;
  return candidates_ != 0 || n.additional;
}

bool JsonGrammar::schema_close(unsigned char c) {
  if (!schema_) return true;
  const Frames::Frame& top = frames_.f[frames_.n - 1];
  const JsonSchema::Node& n = schema_->node(top.node);
  if (c == '}' && (n.required & ~top.used)) return false;  // a required key is missing
  if (c == ']' && top.count < n.min_items) return false;
  --frames_.n;
  return true;
}

bool JsonGrammar::schema_comma() const {
  if (!schema_) return true;
  const Frames::Frame& top = frames_.f[frames_.n - 1];
  const JsonSchema::Node& n = schema_->node(top.node);
  if (stack_[depth_ - 1] == '[') return top.count < n.max_items;
  const size_t count = n.properties.size();
  const uint64_t all = count == 64 ? ~uint64_t{0} : (uint64_t{1} << count) - 1;
  return n.additional || (all & ~top.used) != 0;  // (another key must be possible)
}

bool JsonGrammar::feed(unsigned char c) {
  const JsonGrammar before = *this;
  if (step(c)) return true;
  *this = before;
  return false;
}

bool JsonGrammar::step(unsigned char c) {
  const bool spaced = mode_ != Mode::String && mode_ != Mode::Escape && mode_ != Mode::Hex && is_space(c);
  if (!spaced) spaces_ = 0;
  bool ok = false;
  switch (mode_) {
    case Mode::Value: ok = spaced ? space(c) : value_start(c); break;
    case Mode::FirstKey: ok = spaced ? space(c) : c == '"' ? begin_key() : close(c); break;
    case Mode::Key: ok = spaced ? space(c) : c == '"' && begin_key(); break;
    case Mode::Colon: ok = spaced ? space(c) : c == ':' && (mode_ = Mode::Value, true); break;
    case Mode::AfterValue: ok = after_value(c); break;
    case Mode::FirstItem: ok = spaced ? space(c) : c == ']' ? close(c) : value_start(c); break;
    case Mode::String:
      if (schema_ && key_ && !schema_key_byte(c, utf8_left_ == 0 && c == '"')) return false;
      if (schema_ && !key_ && literal_check_ && !schema_literal_byte(c)) return false;
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
        ok = c >= 0x20 && (c != '"' || key_ || schema_value_end());
      }
      break;
    case Mode::Escape:
      if (schema_ && key_ && !schema_key_byte(c, false)) return false;
      if (schema_ && !key_ && literal_check_ && !schema_literal_byte(c)) return false;
      if (c == 'u') mode_ = Mode::Hex, hex_left_ = 4;
      else mode_ = Mode::String;
      ok = c == 'u' || (c != 0 && std::strchr("\"\\/bfnrt", c) != nullptr);
      break;
    case Mode::Hex:
      if (schema_ && key_ && !schema_key_byte(c, false)) return false;
      if (schema_ && !key_ && literal_check_ && !schema_literal_byte(c)) return false;
      if (--hex_left_ == 0) mode_ = Mode::String;
      ok = is_hex(c);
      break;
    case Mode::NumberSign:
      mode_ = c == '0' ? Mode::NumberZero : Mode::NumberInt;
      ok = is_digit(c) && (!literal_check_ || schema_literal_byte(c));
      break;
    case Mode::NumberDot:  // (a digit must come: the fraction's, or the exponent's after its sign)
    case Mode::NumberESign:
      mode_ = mode_ == Mode::NumberDot ? Mode::NumberFraction : Mode::NumberExponent;
      ok = is_digit(c) && (!literal_check_ || schema_literal_byte(c));
      break;
    case Mode::NumberE:
      mode_ = is_digit(c) ? Mode::NumberExponent : Mode::NumberESign;
      ok = (is_digit(c) || c == '+' || c == '-') && (!literal_check_ || schema_literal_byte(c));
      break;
    case Mode::NumberZero:
    case Mode::NumberInt:
    case Mode::NumberFraction:
    case Mode::NumberExponent:
      if (is_digit(c) && mode_ != Mode::NumberZero) ok = true;
      else if (c == '.' && (mode_ == Mode::NumberZero || mode_ == Mode::NumberInt)) ok = !integer_only_ && (mode_ = Mode::NumberDot, true);
      else if ((c == 'e' || c == 'E') && mode_ != Mode::NumberExponent) ok = !integer_only_ && (mode_ = Mode::NumberE, true);
      else {  // the number ended: c follows it
        ok = schema_value_end() && (mode_ = Mode::AfterValue, after_value(c));
        break;
      }
      if (ok && literal_check_) ok = schema_literal_byte(c);
      break;
    case Mode::Literal: {
      const unsigned char expected = static_cast<unsigned char>(*literal_);
      if (c == expected && !*++literal_) mode_ = Mode::AfterValue;
      ok = c == expected && (!literal_check_ || schema_literal_byte(c)) && (mode_ != Mode::AfterValue || schema_value_end());
      break;
    }
    case Mode::Done: ok = false; break;
  }
  return ok;
}

bool JsonGrammar::feed(const std::string& bytes) { return feed(bytes.data(), bytes.size()); }

bool JsonGrammar::feed(const char* bytes, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!step(static_cast<unsigned char>(bytes[i]))) return false;
  return true;
}

int JsonGrammar::closing_bytes() const {
  if (schema_) return schema_closing_bytes();
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

// The same under a schema: the least completion the schema allows — the value in progress at its shortest, then
// each open container's missing required keys (with a comma, quotes, colon and their least value each), items
// short of minItems, and its closer. Exact enough that some byte always takes it down by one: a mask that keeps
// only tokens after which it fits the tokens left then never reaches a state with nothing to choose.
int JsonGrammar::schema_closing_bytes() const {
  using Node = JsonSchema::Node;
  auto least = [&](int node) { return schema_->node(node).min_bytes; };
  auto key_cost = [&](const Node& n, size_t i) {  // ,"name":value
    return static_cast<int>(n.properties[i].first.size()) + 4 + least(n.properties[i].second);
  };
  auto rest = [&](int d) -> int {  // after its current value (at most 2^20: a budget no request has)
    const Frames::Frame& fr = frames_.f[static_cast<size_t>(d)];
    const Node& n = schema_->node(fr.node);
    int64_t r = 1;
    if (stack_[static_cast<size_t>(d)] == '[') {
      r += std::min<int64_t>(std::max<int64_t>(n.min_items - fr.count, 0), 1 << 20) * (least(n.items) + 1);
    } else if (!n.variants.empty()) {  // (once its key is written, the value in progress counts its branch's keys)
      r += (fr.used & 1) ? 0 : n.least_keys;
    } else {
      for (size_t i = 0; i < n.properties.size(); ++i)
        if ((n.required >> i & 1) && !(fr.used >> i & 1)) r += key_cost(n, i);
    }
    return static_cast<int>(std::min<int64_t>(r, 1 << 20));
  };
  int total = 0;
  for (int d = 0; d < depth_; ++d) total += rest(d);
  const bool in_array = depth_ > 0 && stack_[depth_ - 1] == '[';
  const Frames::Frame* top = depth_ > 0 ? &frames_.f[static_cast<size_t>(depth_ - 1)] : nullptr;
  const Node* container = top ? &schema_->node(top->node) : nullptr;
  const bool missing = container && !in_array && (container->required & ~top->used) != 0;
  // The value of a union's discriminating key: its least literal with the keys of the branch it picks.
  const bool picking = container && !in_array && !container->variants.empty();
  auto least_pick = [&]() {
    int best = 1 << 20;
    const auto& literals = schema_->node(container->properties[0].second).literals;
    for (size_t i = 0; i < literals.size(); ++i) best = std::min(best, static_cast<int>(literals[i].size()) + container->variants[i].extra);
    return best;
  };
  // The bytes left of the literal being read at its shortest candidate (a union's key: with its branch's keys).
  auto literal_left = [&]() {
    int best = 1 << 16;
    for (uint64_t left = candidates_; left; left &= left - 1) {
      const auto i = static_cast<size_t>(__builtin_ctzll(left));
      best = std::min(best,
                      static_cast<int>(schema_->node(node_).literals[i].size()) - matched_ + (picking ? container->variants[i].extra : 0));
    }
    return best;
  };
  switch (mode_) {
    case Mode::Value:
      if (depth_ == 0) return least(JsonSchema::kRoot);
      if (!in_array) return total + (picking ? least_pick() : least(value_node_));
      // (after ',' or '[': rest() counted the item with its comma when short of minItems)
      return total + (top->count < container->min_items ? -1 : least(container->items));
    case Mode::FirstItem: return total - (top->count < container->min_items ? 1 : 0);
    case Mode::FirstKey: return total - (missing ? 1 : 0);  // (the first key takes no comma)
    case Mode::Key: {                                       // after ',': a key must come
      if (missing) return total - 1;
      int cheapest = container->additional ? 4 : 1 << 16;  // "":0
      for (size_t i = 0; i < container->properties.size(); ++i)
        if (!(top->used >> i & 1)) cheapest = std::min(cheapest, key_cost(*container, i) - 1);
      return total + cheapest;
    }
    case Mode::Colon: return total + 1 + (picking ? least_pick() : least(value_node_));
    case Mode::String:
    case Mode::Escape:
    case Mode::Hex: {
      const int in_char = mode_ == Mode::String ? utf8_left_ : mode_ == Mode::Escape ? 1 : hex_left_;
      if (key_) {  // the key's least ending: a candidate's remaining name, or (other keys allowed) its closing quote
        int best = container->additional ? in_char + 3 : 1 << 16;  // ":0
        for (uint64_t left = candidates_; left; left &= left - 1) {
          const size_t i = static_cast<size_t>(__builtin_ctzll(left));
          if (top->used >> i & 1) continue;
          const int own = static_cast<int>(container->properties[i].first.size()) - matched_ + 2 + least(container->properties[i].second);
          // (a required one is counted in rest() already, at its full cost)
          best = std::min(best, own - ((container->required >> i & 1) ? key_cost(*container, i) : 0));
        }
        return total + best;
      }
      if (literal_check_) return total + literal_left();
      return total + in_char + 1;
    }
    case Mode::NumberSign:
    case Mode::NumberDot:
    case Mode::NumberE:
    case Mode::NumberESign:
    case Mode::NumberZero:
    case Mode::NumberInt:
    case Mode::NumberFraction:
    case Mode::NumberExponent: {
      int own = mode_ == Mode::NumberSign || mode_ == Mode::NumberDot || mode_ == Mode::NumberE || mode_ == Mode::NumberESign ? 1 : 0;
      if (literal_check_) own = literal_left();
      return total + own;
    }
    case Mode::Literal: return total + static_cast<int>(std::strlen(literal_));
    case Mode::AfterValue:
    case Mode::Done: return total;
  }
  return total;
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
  auto group = [&](const std::string& b) {
    return static_cast<size_t>(static_cast<unsigned char>(b[0])) * 257 + (b.size() > 1 ? 1 + static_cast<unsigned char>(b[1]) : 0);
  };
  prefix_start.assign(kGroups + 1, 0);
  for (size_t id = 0; id < V; ++id) {
    ids.back() = static_cast<int64_t>(id);
    const std::string text = tok.decode(ids);
    bytes[id] = text.compare(0, before_text.size(), before_text) == 0 ? text.substr(before_text.size()) : tok.decode({ids.back()});
    if (bytes[id].empty()) continue;  // (control tokens: BOS, EOS, chat markers)
    ++prefix_start[group(bytes[id]) + 1];
    JsonGrammar in_string;  // (the grammar decides: fed inside a string, it is still there, between characters)
    in_string.feed("{\"a\":\"");
    // (no quote: `","` also ends inside a string, a key's, having closed the value and begun another)
    plain[id] = bytes[id].find('"') == std::string::npos && in_string.feed(bytes[id]) && in_string.in_text();
  }
  for (size_t g = 0; g < kGroups; ++g) prefix_start[g + 1] += prefix_start[g];
  by_prefix.resize(static_cast<size_t>(prefix_start[kGroups]));
  std::vector<int32_t> next(prefix_start.begin(), prefix_start.end() - 1);
  for (size_t id = 0; id < V; ++id)
    if (!bytes[id].empty()) by_prefix[static_cast<size_t>(next[group(bytes[id])]++)] = static_cast<int32_t>(id);
}

namespace {

// Marks in `allowed` the tokens (of n) that continue `grammar` and leave it closable in at most most_open bytes;
// returns how many.
int64_t allow_tokens(const JsonVocabulary& v, const JsonGrammar& grammar, int64_t n, int most_open, std::vector<char>& allowed) {
  allowed.assign(static_cast<size_t>(n), 0);
  const bool in_text = grammar.closing_bytes() <= most_open && grammar.in_text();
  auto tokens = [&](size_t g) { return std::pair{v.prefix_start[g], v.prefix_start[g + 1]}; };
  for (size_t b0 = 0; b0 < 256; ++b0) {
    const size_t g0 = b0 * 257;
    if (v.prefix_start[g0] == v.prefix_start[g0 + 257]) continue;  // (no token begins with b0)
    JsonGrammar first = grammar;
    if (!first.feed(static_cast<unsigned char>(b0))) continue;
    const bool first_closes = first.closing_bytes() <= most_open;
    for (auto [k, end] = tokens(g0); k < end; ++k)
      if (const int32_t id = v.by_prefix[static_cast<size_t>(k)]; id < n) allowed[static_cast<size_t>(id)] = first_closes;
    for (size_t b1 = 0; b1 < 256; ++b1) {
      const auto [from, end] = tokens(g0 + 1 + b1);
      if (from == end) continue;
      JsonGrammar second = first;
      if (!second.feed(static_cast<unsigned char>(b1))) continue;
      for (int32_t k = from; k < end; ++k) {
        const int32_t id = v.by_prefix[static_cast<size_t>(k)];
        if (id >= n) continue;
        if (in_text && v.plain[static_cast<size_t>(id)]) {  // text inside a string: the grammar stays as it is
          allowed[static_cast<size_t>(id)] = 1;
          continue;
        }
        const std::string& b = v.bytes[static_cast<size_t>(id)];
        JsonGrammar g = second;
        allowed[static_cast<size_t>(id)] = g.feed(b.data() + 2, b.size() - 2) && g.closing_bytes() <= most_open;
      }
    }
  }
  return std::count(allowed.begin(), allowed.end(), 1);
}

}  // namespace

int64_t JsonConstraint::mask(float* logits, int64_t n, int64_t remaining) {
  if (!in_value()) return n;  // (free text, before a trigger)
  // A token may come when the tokens left after it can still close the object (a closing token takes a byte off
  // closing_bytes() at least). When none can — a schema whose least value is longer than max_tokens allows — any
  // token that continues the value may: the answer is then the value's beginning, cut at max_tokens (finish
  // "length"), not nothing (an 8-level schema under max_tokens 48 answered "": issue 79).
  const int most_open = static_cast<int>(std::min<int64_t>(remaining - 1, std::numeric_limits<int>::max()));
  if (allow_tokens(*vocab_, grammar_, n, most_open, allowed_) == 0)
    allow_tokens(*vocab_, grammar_, n, std::numeric_limits<int>::max(), allowed_);
  int64_t left = 0;
  for (int64_t t = 0; t < n; ++t) {
    if (allowed_[static_cast<size_t>(t)]) ++left;
    else logits[t] = -std::numeric_limits<float>::infinity();
  }
  return left;
}

void JsonConstraint::accept(int64_t token) {
  if (token < 0 || static_cast<size_t>(token) >= vocab_->bytes.size()) return;
  const std::string& bytes = vocab_->bytes[static_cast<size_t>(token)];
  if (in_value()) {
    grammar_.feed(bytes);
    if (triggered_ && grammar_.complete()) triggered_ = false, grammar_ = JsonGrammar(schema_.get());  // (text again)
    return;
  }
  recent_ += bytes;
  const size_t at = recent_.find(trigger_);
  if (at == std::string::npos) {
    if (recent_.size() > trigger_.size()) recent_.erase(0, recent_.size() - trigger_.size());
    return;
  }
  // The value begins after the trigger: what this token wrote after it is its first bytes (when they can be).
  JsonGrammar g(schema_.get());
  if (g.feed(recent_.substr(at + trigger_.size()))) triggered_ = true, grammar_ = g;
  recent_.clear();
}

}  // namespace tern::llm
