#include <utility>

#include "core/error.h"
#include "core/json.h"
#include "llm/hf_tokenizer/steps.h"
#include "llm/tokenizer.h"
#include "llm/unicode.h"

namespace tern::llm {

namespace {

// What Hugging Face's cleanup_tokenization undoes of BERT's spacing around punctuation and contractions.
const std::pair<const char*, const char*> kBertCleanup[] = {{" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
                                                            {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
                                                            {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};  // (in its order)

}  // namespace

void read_decoder(const json& d, std::vector<Decoder>& steps) {
  each_step(d, "decoders", [&](const json& d, const std::string& type) {
    if (type == "ByteLevel") {
      steps.push_back([](std::vector<std::string>& toks) {
        for (auto& t : toks) {
          std::string bytes;
          for (char32_t c : utf8_decode(t)) {
            auto it = byte_map().to_byte.find(c);
            bytes += it == byte_map().to_byte.end() ? utf8_encode(c) : std::string(1, static_cast<char>(it->second));
          }
          t = std::move(bytes);
        }
      });
    } else if (type == "Replace") {
      const std::string from = string_pattern(d, "decoder"), to = d.at("content");
      steps.push_back([from, to](std::vector<std::string>& toks) {
        for (auto& t : toks) t = replace_all(t, from, to, "decoder Replace");
      });
    } else if (type == "ByteFallback") {
      steps.push_back([](std::vector<std::string>& toks) {
        for (auto& t : toks)
          if (const int b = byte_piece(t); b >= 0) t = std::string(1, static_cast<char>(b));
      });
    } else if (type == "WordPiece") {  // pieces joined, a space before each word's first; cleanup as BERT's
      encoder_piece("decoder", type);
      const std::string prefix = d.value("prefix", std::string("##"));
      const bool cleanup = d.value("cleanup", true);
      steps.push_back([prefix, cleanup](std::vector<std::string>& toks) {
        for (size_t i = 0; i < toks.size(); ++i) {
          std::string& t = toks[i];
          if (i > 0) t = t.compare(0, prefix.size(), prefix) == 0 ? t.substr(prefix.size()) : " " + t;
          if (!cleanup) continue;
          for (const auto& [from, to] : kBertCleanup) t = replace_all(t, from, to, "decoder WordPiece");
        }
      });
    } else if (type == "Fuse") {
      steps.push_back([](std::vector<std::string>& toks) {
        std::string all;
        for (const auto& t : toks) all += t;
        toks.assign(1, all);
      });
    } else if (type == "Strip") {
      const std::string c = d.value("content", std::string(" "));
      const int64_t start = json_int(d.value("start", json(0)), "tokenizer.json: Strip start", 0, 1 << 20),
                    stop = json_int(d.value("stop", json(0)), "tokenizer.json: Strip stop", 0, 1 << 20);
      steps.push_back([c, start, stop](std::vector<std::string>& toks) {
        for (auto& t : toks) {
          for (int64_t k = 0; k < start && t.compare(0, c.size(), c) == 0; ++k) t.erase(0, c.size());
          for (int64_t k = 0; k < stop && t.size() >= c.size() && t.compare(t.size() - c.size(), c.size(), c) == 0; ++k)
            t.erase(t.size() - c.size());
        }
      });
    } else if (type == "Metaspace") {
      const std::string rep = d.value("replacement", kSpm), scheme = d.value("prepend_scheme", std::string("always"));
      steps.push_back([rep, scheme](std::vector<std::string>& toks) {
        for (size_t i = 0; i < toks.size(); ++i) {
          toks[i] = replace_all(toks[i], rep, " ", "decoder Metaspace");
          if (i == 0 && scheme != "never" && !toks[i].empty() && toks[i][0] == ' ') toks[i].erase(0, 1);
        }
      });
    } else {
      fail_unsupported("tokenizer.json: decoder '", type, "' is not supported");
    }
  });
}

}  // namespace tern::llm
