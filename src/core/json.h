// JSON from files tern is handed (tokenizer.json, config.json, tokenizer_config.json, genai_config.json, a
// pack's header), parsed and read with checks.
#pragma once
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.h"

namespace tern {

// Parses `text`, failing with an error naming `what` (a file) when it is not JSON or when the parse would
// pass the memory cap. A file's size bounds little: "[[],[],…]" is 3 bytes a value on disk and 55 parsed
// (measured with nlohmann 3.11), so the values are counted first (a SAX pass that keeps nothing) and their
// cost — 64 bytes a value, 96 more an object member, plus the strings' bytes — checked before anything is
// allocated. (The cost overestimates: SmolLM2's 2.1 MB tokenizer.json parses into 5.8 MB.)
// Nesting deeper than kMaxJsonDepth arrays and objects is refused before the parse (what reads the values —
// tokenizer components, chat-template values — recurses, and 200,000 levels overflowed its stack): real
// files nest under 10 (tokenizer.json), a JSON schema in a request some 30.
constexpr int kMaxJsonDepth = 128;
// `keep` (optional) sees each value as it is parsed (nlohmann's parser callback) and drops it from the tree
// by returning false: a reader takes out the bulk of a large file as it parses, so no tree of it is built.
nlohmann::json parse_json(std::string_view text, const std::string& what, const nlohmann::json::parser_callback_t& keep = nullptr);
// The file at `path`, as parse_json; fails naming it when it cannot be read.
nlohmann::json read_json_file(const std::string& path, const nlohmann::json::parser_callback_t& keep = nullptr);

// Whether `s` is well-formed UTF-8 (RFC 3629: no overlong forms, surrogates or code points past U+10FFFF).
// JSON text is UTF-8 and nlohmann's dump throws on a string that is not, so names read from model files
// (which tern later writes into tokenizer.json, pack headers, profiles, HTTP replies) are checked as read.
bool is_utf8(std::string_view s);

// Numbers read from JSON files, checked. nlohmann's get<int64_t>() of 1e300, or get<float>() of 1e300, is a
// float conversion out of range — undefined behaviour, not an exception — so numbers tern takes from a file
// come through these instead.

// An integer in [lo, hi]; `what` names the field in the error.
inline int64_t json_int(const nlohmann::json& v, const std::string& what, int64_t lo = std::numeric_limits<int64_t>::min(),
                        int64_t hi = std::numeric_limits<int64_t>::max()) {
  if (!v.is_number_integer()) fail(what, " must be an integer, not ", v.dump().substr(0, 40));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    fail(what, " ", v.dump(), " is out of range [", lo, ", ", hi, "]");
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) fail(what, " ", x, " is out of range [", lo, ", ", hi, "]");
  return x;
}

// A finite number that fits a float.
inline float json_float(const nlohmann::json& v, const std::string& what) {
  if (!v.is_number()) fail(what, " must be a number, not ", v.dump().substr(0, 40));
  const double d = v.get<double>();
  if (!(std::fabs(d) <= FLT_MAX)) fail(what, " ", d, " does not fit a float");
  return static_cast<float>(d);
}

}  // namespace tern
