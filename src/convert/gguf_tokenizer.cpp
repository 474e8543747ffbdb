#include "convert/gguf_tokenizer.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

#include "core/error.h"
#include "llm/tokenizer.h"

namespace tern::convert {
using json = nlohmann::json;

namespace {

// llama.cpp's token types (tokenizer.ggml.token_type).
enum TokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kByte = 6 };

struct Vocabulary {
  const std::vector<GgufValue>& tokens;
  std::vector<int64_t> types;  // one per token (normal when the file has none)
  json vocab = json::object(), added = json::array();
};

// The tokens and their types; control and user-defined tokens become added tokens, matched whole before
// the model runs (control ones are "special": skipped when decoding with skip_special_tokens).
Vocabulary vocabulary(const GgufFile& f) {
  Vocabulary v{f.array("tokenizer.ggml.tokens"), {}, json::object(), json::array()};
  const std::vector<GgufValue> none;
  const auto& types = f.has("tokenizer.ggml.token_type") ? f.array("tokenizer.ggml.token_type") : none;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.tokens[i].type != GgufValue::Type::String) fail("'", f.path(), "': tokenizer.ggml.tokens[", i, "] is not a string");
    v.types.push_back(i < types.size() ? types[i].i : kNormal);
    v.vocab[v.tokens[i].s] = i;
    if (v.types[i] == kControl || v.types[i] == kUserDefined)
      v.added.push_back({{"id", i},
                         {"content", v.tokens[i].s},
                         {"single_word", false},
                         {"lstrip", false},
                         {"rstrip", false},
                         {"normalized", false},
                         {"special", v.types[i] == kControl}});
  }
  return v;
}

// BOS before every encoded text when the file asks for it (tokenizer.ggml.add_bos_token).
json bos_post_processor(const GgufFile& f, const Vocabulary& v) {
  if (!f.has("tokenizer.ggml.add_bos_token") || !f.integer("tokenizer.ggml.add_bos_token") || !f.has("tokenizer.ggml.bos_token_id"))
    return nullptr;
  const int64_t bos_id = f.integer("tokenizer.ggml.bos_token_id");
  if (bos_id < 0 || bos_id >= static_cast<int64_t>(v.tokens.size()))
    fail("'", f.path(), "': tokenizer.ggml.bos_token_id ", bos_id, " is outside the vocabulary of ", v.tokens.size());
  const std::string bos = v.tokens[static_cast<size_t>(bos_id)].s;
  return {{"type", "TemplateProcessing"},
          {"single", {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
          {"pair", json::array()},
          {"special_tokens", {{bos, {{"id", bos}, {"ids", {bos_id}}, {"tokens", {bos}}}}}}};
}

// gpt2-style byte-level BPE: the file's merges, and the pre-tokenizer llama.cpp names (tokenizer.ggml.pre)
// in Hugging Face's terms.
json byte_level_bpe(const GgufFile& f) {
  Vocabulary v = vocabulary(f);
  json merges = json::array();
  for (const auto& m : f.array("tokenizer.ggml.merges")) merges.push_back(m.s);
  const std::string pre = f.has("tokenizer.ggml.pre") ? f.string("tokenizer.ggml.pre") : "default";
  json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  json pre_tokenizer;
  if (pre == "default" || pre == "gpt2") {
    pre_tokenizer = byte_level;
  } else if (pre == "smollm") {  // digits one by one, then GPT-2's split
    pre_tokenizer = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, byte_level}}};
  } else if (pre == "llama-bpe" || pre == "llama3" || pre == "qwen2") {
    byte_level["use_regex"] = false;
    const json split = {{"type", "Split"},
                        {"pattern", {{"Regex", pre == "qwen2" ? llm::kQwen2SplitRegex : llm::kLlama3SplitRegex}}},
                        {"behavior", "Isolated"},
                        {"invert", false}};
    pre_tokenizer = {{"type", "Sequence"}, {"pretokenizers", {split, byte_level}}};
  } else {
    fail_unsupported("'", f.path(), "': pre-tokenizer '", pre,
                     "' is not imported yet (tern knows default, gpt2, smollm, llama-bpe, qwen2)");
  }
  return {{"version", "1.0"},
          {"added_tokens", v.added},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre_tokenizer},
          {"post_processor", bos_post_processor(f, v)},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
          {"model", {{"type", "BPE"}, {"vocab", v.vocab}, {"merges", merges}, {"ignore_merges", false}, {"byte_fallback", false}}}};
}

// Where UTF-8 characters start in `s` (continuation bytes 10xxxxxx excluded), and s.size() last.
std::vector<size_t> char_starts(const std::string& s) {
  std::vector<size_t> at;
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) at.push_back(i);
  at.push_back(s.size());
  return at;
}

// SentencePiece (tokenizer.ggml.model "llama"). llama.cpp merges the adjacent pair whose concatenation is the
// highest-scoring normal piece; as BPE that is every split of a normal piece into two normal pieces, ranked
// by the piece's score (higher first; ties by piece id, then the parts' ids), as Hugging Face's
// SentencePiece converter writes them. Spaces are "▁" (U+2581), with one before the text when the file says
// tokenizer.ggml.add_space_prefix (default true); pieces no merge reaches fall back to <0xXX> byte tokens.
json sentencepiece_bpe(const GgufFile& f) {
  Vocabulary v = vocabulary(f);
  const auto& scores = f.array("tokenizer.ggml.scores");
  if (scores.size() != v.tokens.size())
    fail("'", f.path(), "': tokenizer.ggml.scores has ", scores.size(), " values for ", v.tokens.size(), " tokens");
  std::unordered_map<std::string, int64_t> normal;
  for (size_t i = 0; i < v.tokens.size(); ++i)
    if (v.types[i] == kNormal) normal.emplace(v.tokens[i].s, static_cast<int64_t>(i));
  std::vector<std::tuple<double, int64_t, int64_t, int64_t>> ranked;  // (−score, piece, left, right)
  for (const auto& [piece, id] : normal) {
    const std::vector<size_t> at = char_starts(piece);
    for (size_t c = 1; c + 1 < at.size(); ++c) {
      const auto left = normal.find(piece.substr(0, at[c])), right = normal.find(piece.substr(at[c]));
      if (left != normal.end() && right != normal.end())
        ranked.emplace_back(-scores[static_cast<size_t>(id)].f, id, left->second, right->second);
    }
  }
  std::sort(ranked.begin(), ranked.end());
  json merges = json::array();
  for (const auto& [score, piece, left, right] : ranked)
    merges.push_back({v.tokens[static_cast<size_t>(left)].s, v.tokens[static_cast<size_t>(right)].s});

  const bool space_prefix = !f.has("tokenizer.ggml.add_space_prefix") || f.integer("tokenizer.ggml.add_space_prefix") != 0;
  const std::string space = "\xE2\x96\x81";
  json normalizer = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", space}};
  json decoders = {
      {{"type", "Replace"}, {"pattern", {{"String", space}}}, {"content", " "}}, {{"type", "ByteFallback"}}, {{"type", "Fuse"}}};
  if (space_prefix) {
    normalizer = {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", space}}, normalizer}}};
    decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  }
  json model = {{"type", "BPE"},         {"vocab", v.vocab}, {"merges", merges},  {"ignore_merges", false},
                {"byte_fallback", true}, {"fuse_unk", true}, {"dropout", nullptr}};
  if (f.has("tokenizer.ggml.unknown_token_id")) {
    const int64_t unk = f.integer("tokenizer.ggml.unknown_token_id");
    if (unk >= 0 && unk < static_cast<int64_t>(v.tokens.size())) model["unk_token"] = v.tokens[static_cast<size_t>(unk)].s;
  }
  return {{"version", "1.0"},
          {"added_tokens", v.added},
          {"normalizer", normalizer},
          {"pre_tokenizer", nullptr},
          {"post_processor", bos_post_processor(f, v)},
          {"decoder", {{"type", "Sequence"}, {"decoders", decoders}}},
          {"model", model}};
}

}  // namespace

json gguf_tokenizer_json(const GgufFile& f) {
  const std::string model = f.string("tokenizer.ggml.model");
  if (model == "gpt2") return byte_level_bpe(f);
  if (model == "llama") return sentencepiece_bpe(f);
  fail_unsupported("'", f.path(), "': tokenizer model '", model,
                   "' is not imported yet (tern imports gpt2-style BPE and SentencePiece, tokenizer.ggml.model 'llama')");
}

}  // namespace tern::convert
