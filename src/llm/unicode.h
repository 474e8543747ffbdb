// The few Unicode facilities tokenizers need: UTF-8 ↔ code points, the character classes their regexes and
// BERT's normalizer use, canonical decomposition and lowercase (tables: tools/gen_unicode_tables.py).
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

bool is_letter(char32_t c);           // \p{L}
bool is_number(char32_t c);           // \p{N}
bool is_whitespace(char32_t c);       // \s (White_Space)
bool is_punctuation(char32_t c);      // \p{P}
bool is_nonspacing_mark(char32_t c);  // \p{Mn}: what stripping accents removes after NFD
bool is_other(char32_t c);            // \p{C}: controls, format, surrogates, private use, unassigned

// Appends c's canonical decomposition (NFD of c alone: marks of neighbouring characters are not reordered)
// or its lowercase (full mapping, as Python's str.lower and Rust's char::to_lowercase: "İ" becomes two).
void append_decomposition(char32_t c, std::vector<char32_t>& out);
void append_lowercase(char32_t c, std::vector<char32_t>& out);

}  // namespace tern::llm
