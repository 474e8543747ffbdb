#include "core/error.h"
#include "llm/hf_tokenizer/steps.h"
#include "llm/tokenizer.h"
#include "llm/unicode.h"

namespace tern::llm {

const char* const kGpt2SplitRegex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

// The split regexes tokenizers ship, matched by hand (tern has no regex engine with \p{...}).
enum class SplitPattern { Gpt2, Llama3, Qwen2 };
SplitPattern pattern_of(const std::string& p) {
  if (p == kGpt2SplitRegex) return SplitPattern::Gpt2;
  if (p == kLlama3SplitRegex) return SplitPattern::Llama3;
  if (p == kQwen2SplitRegex) return SplitPattern::Qwen2;
  fail_unsupported("tokenizer.json: split pattern '", p, "' is not one tern knows (GPT-2, Llama-3, Qwen2)");
}

bool is_nl(char32_t c) { return c == '\r' || c == '\n'; }

// Length of the match starting at i (always >= 1), following the pattern's alternation order.
size_t match_at(const std::vector<char32_t>& s, size_t i, SplitPattern p) {
  const size_t n = s.size();
  auto letter = [&](size_t k) { return k < n && is_letter(s[k]); };
  auto number = [&](size_t k) { return k < n && is_number(s[k]); };
  auto space = [&](size_t k) { return k < n && is_whitespace(s[k]); };
  auto other = [&](size_t k) { return k < n && !is_whitespace(s[k]) && !is_letter(s[k]) && !is_number(s[k]); };
  auto run = [&](size_t k, auto pred) {
    while (pred(k)) ++k;
    return k;
  };
  // Contractions: 's 't 're 've 'm 'll 'd (case-insensitive for Llama-3/Qwen2).
  if (s[i] == '\'' && i + 1 < n) {
    auto lower = [&](size_t k) {
      return k < n ? (p == SplitPattern::Gpt2 ? s[k] : static_cast<char32_t>(std::tolower(s[k] < 128 ? static_cast<int>(s[k]) : 0))) : 0;
    };
    const char32_t a = lower(i + 1), b = lower(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  }
  if (p == SplitPattern::Gpt2) {
    const size_t j = s[i] == ' ' ? i + 1 : i;
    if (letter(j)) return run(j, letter) - i;
    if (number(j)) return run(j, number) - i;
    if (other(j)) return run(j, other) - i;
  } else {
    if (!is_nl(s[i]) && !letter(i) && !number(i) && letter(i + 1)) return run(i + 1, letter) - i;
    if (letter(i)) return run(i, letter) - i;
    if (number(i)) {
      const size_t end = run(i, number);
      return std::min<size_t>(end - i, p == SplitPattern::Llama3 ? 3 : 1);
    }
    const size_t j = s[i] == ' ' ? i + 1 : i;
    if (other(j)) return run(run(j, other), [&](size_t k) { return k < n && is_nl(s[k]); }) - i;
    if (space(i)) {  // \s*[\r\n]+ : up to the last newline of the whitespace run
      const size_t end = run(i, space);
      for (size_t k = end; k-- > i;)
        if (is_nl(s[k])) return k + 1 - i;
    }
  }
  if (space(i)) {  // \s+(?!\S) then \s+
    const size_t end = run(i, space);
    if (end < n && end - i >= 2) return end - 1 - i;
    return end - i;
  }
  return 1;
}

std::vector<std::string> regex_split(const std::string& text, SplitPattern p) {
  const std::vector<char32_t> s = utf8_decode(text);
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const size_t len = match_at(s, i, p);
    out.push_back(utf8_encode(s, i, i + len));
    i += len;
  }
  return out;
}

}  // namespace

void read_pre_tokenizer(const json& p, std::vector<PreTokenizer>& steps) {
  each_step(p, "pretokenizers", [&](const json& p, const std::string& type) {
    if (type == "ByteLevel") {
      const bool prefix = p.value("add_prefix_space", false), regex = p.value("use_regex", true);
      steps.push_back([prefix, regex](const std::string& s, bool first) {
        std::string t = (prefix && first && !s.empty() && s[0] != ' ') ? " " + s : s;
        std::vector<std::string> pieces = regex ? regex_split(t, SplitPattern::Gpt2) : std::vector<std::string>{t};
        for (auto& piece : pieces) {
          std::string mapped;
          for (unsigned char b : piece) mapped += utf8_encode(byte_map().to_char[b]);
          piece = std::move(mapped);
        }
        return pieces;
      });
    } else if (type == "Split") {
      if (!p.at("pattern").contains("Regex")) fail_unsupported("tokenizer.json: Split on a string pattern is not supported");
      if (p.value("behavior", std::string("Isolated")) != "Isolated" || p.value("invert", false))
        fail_unsupported("tokenizer.json: Split behaviour other than Isolated is not supported");
      const SplitPattern sp = pattern_of(p["pattern"]["Regex"]);
      steps.push_back([sp](const std::string& s, bool) { return regex_split(s, sp); });
    } else if (type == "Digits") {  // digits apart from the rest: each alone, or runs of them
      const bool individual = p.value("individual_digits", false);
      steps.push_back([individual](const std::string& s, bool) {
        std::vector<std::string> pieces;
        const std::vector<char32_t> u = utf8_decode(s);
        size_t start = 0;
        for (size_t i = 1; i <= u.size(); ++i) {
          const bool d = i < u.size() && is_number(u[i]), before = is_number(u[i - 1]);
          if (i == u.size() || d != before || (d && individual)) pieces.push_back(utf8_encode(u, start, i)), start = i;
        }
        return pieces;
      });
    } else if (type == "BertPreTokenizer" || type == "WhitespaceSplit") {
      encoder_piece("pre-tokenizer", type);
      // Words end at whitespace (dropped); BERT's also puts each punctuation character in a word of its own.
      const bool punctuation = type == "BertPreTokenizer";
      steps.push_back([punctuation](const std::string& s, bool) {
        std::vector<std::string> words;
        std::vector<char32_t> word;
        auto end_word = [&] {
          if (!word.empty()) words.push_back(utf8_encode(word)), word.clear();
        };
        for (char32_t c : utf8_decode(s)) {
          if (is_whitespace(c)) {
            end_word();
          } else if (punctuation && is_bert_punctuation(c)) {
            end_word();
            words.push_back(utf8_encode(c));
          } else {
            word.push_back(c);
          }
        }
        end_word();
        return words;
      });
    } else if (type == "Metaspace") {
      const std::string rep = p.value("replacement", kSpm), scheme = p.value("prepend_scheme", std::string("always"));
      const bool split = p.value("split", true);
      steps.push_back([rep, scheme, split](const std::string& s, bool first) {
        std::string t = replace_all(s, " ", rep, "pre-tokenizer Metaspace");
        if ((scheme == "always" || (scheme == "first" && first)) && t.compare(0, rep.size(), rep) != 0) t = rep + t;
        if (!split) return std::vector<std::string>{t};
        std::vector<std::string> words;
        for (size_t at = 0; at < t.size();) {
          size_t next = t.find(rep, at + (t.compare(at, rep.size(), rep) == 0 ? rep.size() : 0));
          if (next == std::string::npos) next = t.size();
          words.push_back(t.substr(at, next - at));
          at = next;
        }
        return words;
      });
    } else {
      fail_unsupported("tokenizer.json: pre-tokenizer '", type, "' is not supported");
    }
  });
}

}  // namespace tern::llm
