// The few Unicode facilities tokenizers need: UTF-8 ↔ code points and the \p{L}, \p{N}, \s classes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tern::llm {

// Code points of `s`; an invalid byte decodes as itself (U+0080..U+00FF range is never produced by
// valid UTF-8 lead bytes, so callers see a replacement-free, lossless split).
std::vector<char32_t> utf8_decode(const std::string& s);
std::string utf8_encode(char32_t c);
std::string utf8_encode(const std::vector<char32_t>& cs, size_t from = 0, size_t to = SIZE_MAX);

bool is_letter(char32_t c);      // \p{L}
bool is_number(char32_t c);      // \p{N}
bool is_whitespace(char32_t c);  // \s (White_Space)

}  // namespace tern::llm
