// llama2.c tokenizer.bin: int32 max_token_length, then per token {float32 score, int32 length, bytes}.
// Encoding follows llama2.c's run.c: a dummy-prefix space, one piece per UTF-8 character (byte-fallback
// ids 3 + byte when a character has no piece), then repeatedly merge the adjacent pair whose
// concatenation is a piece with the highest score (llm/merge_pairs.h).
#include <cstring>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "core/mapped_file.h"
#include "llm/merge_pairs.h"
#include "llm/tokenizer.h"

namespace tern::llm {
namespace {

class Llama2cTokenizer : public Tokenizer {
 public:
  Llama2cTokenizer(const std::string& path, int64_t vocab_size) {
    // (a regular file, read whole: llama2.c's 32,000-token tokenizer.bin is 424 KB)
    std::istringstream f(read_file_bytes(path, size_t{64} << 20, "llama2.c tokenizer"));
    // Unknown characters fall back to byte tokens, which llama2.c's vocabularies keep at ids 3..258
    // (<0x00>..<0xFF> after <unk>, <s>, </s>); a smaller vocabulary has nowhere to put them.
    if (vocab_size < 259)
      fail("'", path, "': a vocabulary of ", vocab_size, " tokens; llama2.c tokenizers hold at least 259 (the 256 byte tokens at 3..258)");
    int32_t max_len = 0;
    if (!f.read(reinterpret_cast<char*>(&max_len), 4)) fail("'", path, "' is empty");
    for (int64_t i = 0; i < vocab_size; ++i) {
      float score;
      int32_t len;
      if (!f.read(reinterpret_cast<char*>(&score), 4) || !f.read(reinterpret_cast<char*>(&len), 4))
        fail("'", path, "' ends at token ", i, " of ", vocab_size, " (vocab size of the model)");
      if (len < 0 || len > 1 << 16) fail("'", path, "': token ", i, " has length ", len);
      std::string text(static_cast<size_t>(len), '\0');
      if (!f.read(text.data(), len)) fail("'", path, "' ends inside token ", i);
      longest_ = std::max(longest_, text.size());
      lookup_.emplace(text, i);
      pieces_.push_back(std::move(text));
      scores_.push_back(score);
    }
  }

  std::vector<int64_t> encode_text(const std::string& text, bool add_bos, const CancelCheck& cancelled) const override {
    std::vector<int64_t> ids;
    if (add_bos) ids.push_back(1);
    if (text.empty()) return ids;
    std::vector<int64_t> t;
    if (auto it = lookup_.find(" "); it != lookup_.end()) t.push_back(it->second);
    for (size_t i = 0; i < text.size();) {
      size_t n = 1;  // bytes of this UTF-8 character (continuation bytes are 10xxxxxx), at most 4
      while (i + n < text.size() && n < 4 && (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80) ++n;
      auto it = lookup_.find(text.substr(i, n));
      if (it != lookup_.end()) {
        t.push_back(it->second);
      } else {
        for (size_t k = 0; k < n; ++k) t.push_back(static_cast<unsigned char>(text[i + k]) + 3);
      }
      i += n;
    }
    // The highest score first: priority −score (run.c keeps the first of equal scores, as merge_pairs does).
    std::string joined;
    auto lookup = [&](int64_t a, int64_t b) -> std::optional<PairMerge> {
      joined.assign(pieces_[static_cast<size_t>(a)]).append(pieces_[static_cast<size_t>(b)]);
      const auto it = lookup_.find(joined);
      // (run.c's `score > best`, best starting at -1e10, never picks a NaN score or one at or below -1e10)
      if (it == lookup_.end() || !(scores_[static_cast<size_t>(it->second)] > -1e10f)) return std::nullopt;
      return PairMerge{-static_cast<double>(scores_[static_cast<size_t>(it->second)]), it->second};
    };
    for (const MergedSymbol& m : merge_pairs(t, lookup, cancelled)) ids.push_back(m.id);
    return ids;
  }

  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string s;
    int64_t prev = -1;
    for (int64_t id : ids) {
      s += piece(prev, id);
      prev = id;
    }
    return s;
  }

  int64_t vocab_size() const override { return static_cast<int64_t>(pieces_.size()); }
  int64_t piece_id(const std::string& piece) const override {
    const auto it = lookup_.find(piece);
    return it == lookup_.end() ? -1 : it->second;
  }
  size_t longest_token_bytes() const override { return longest_; }

 private:
  // What token `id` prints after `prev`, as llama2.c's decode() does.
  std::string piece(int64_t prev, int64_t id) const {
    if (id < 0 || id >= vocab_size()) fail("token id ", id, " is outside the vocabulary of ", vocab_size());
    if (id == 1 || id == 2) return "";  // <s> and </s> are control tokens, not text
    const std::string& p = pieces_[static_cast<size_t>(id)];
    if (const int byte = byte_piece(p); byte >= 0) return std::string(1, static_cast<char>(byte));
    if (prev == 1 && !p.empty() && p[0] == ' ') return p.substr(1);  // SentencePiece drops it after BOS
    return p;
  }

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  size_t longest_ = 0;  // longest_token_bytes()
  std::unordered_map<std::string, int64_t> lookup_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::string& path, int64_t vocab_size) {
  return std::make_unique<Llama2cTokenizer>(path, vocab_size);
}

}  // namespace tern::llm
