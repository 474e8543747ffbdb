// Hugging Face tokenizer.json with a BPE model — byte-level (GPT-2, Llama-3, Qwen) and SentencePiece-style with
// "▁" and byte fallback (Llama-2, TinyLlama, Mistral) — or a WordPiece model (BERT and the sentence encoders
// built on it: all-MiniLM, BGE, E5). The pipeline is the library's: added tokens split the text first; each
// other segment is normalized, pre-tokenized into words, and each word is BPE-merged by merge rank or split
// into the longest vocabulary pieces (WordPiece); a post-processor adds BOS or [CLS] … [SEP].
// Components tern does not implement fail at load, naming the component.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/json.h"
#include "llm/hf_tokenizer/steps.h"
#include "llm/merge_pairs.h"
#include "llm/tokenizer.h"
#include "llm/unicode.h"

namespace tern::llm {

namespace {

class HfTokenizer : public Tokenizer {
 public:
  explicit HfTokenizer(const std::string& path) {
    // model.vocab and model.merges go into the tables as they parse, never kept as a JSON tree or a list:
    // Gemma 3's 33 MB file (262,144 tokens, 513,511 merges) peaked at 225 MB as a tree (then 214 MB as lists)
    // and 1.8 s. Merges written before the vocabulary (nlohmann's sorted keys) wait as string pairs.
    // Each merge is read in place (string views, one reused buffer for the joined piece): copying its parts
    // and the vocabulary's rehashing took ~30% of Gemma's 2.0 s load (perf, Xeon).
    std::vector<std::pair<std::string, std::string>> early_merges;
    bool have_vocab = false;
    int rank = 0;
    std::string joined;
    auto merge = [&](std::string_view left, std::string_view right) {
      if (have_vocab) add_merge(left, right, rank, joined);
      else early_merges.emplace_back(left, right);
    };
    auto read_merge = [&](const json& mg) {
      try {
        if (mg.is_array()) return merge(mg.at(0).get_ref<const std::string&>(), mg.at(1).get_ref<const std::string&>());
        const std::string_view s = mg.get_ref<const std::string&>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos) fail("'", path, "': merge '", s, "' has no space");
        merge(s.substr(0, sp), s.substr(sp + 1));
      } catch (const json::exception& e) {
        fail("'", path, "': merge ", rank, " is neither \"a b\" nor [\"a\", \"b\"]: ", e.what());
      }
    };
    std::string keys[4];  // the key at each depth on the way down
    // added_tokens' entries are taken out as they end: nlohmann 3.11's callback parser scans an object's whole
    // parent array for discarded values each time an object ends, so 100,000 kept in the tree took 6.5 s (184 s
    // under ASan) — quadratic; taken out, the array stays empty.
    std::vector<json> added_tokens;
    const json j = read_json_file(path, [&](int depth, json::parse_event_t e, json& v) {
      using E = json::parse_event_t;
      if (e == E::key && depth < 4) keys[depth] = v.get<std::string>();
      if (depth == 2 && e == E::object_end && keys[1] == "added_tokens") {
        added_tokens.push_back(std::move(v));
        return false;
      }
      if (depth == 2 && e == E::object_end && keys[1] == "model" && keys[2] == "vocab") {
        have_vocab = true;
        merges_.reserve(2 * ids_.size());  // (BPE files hold up to about two merges per token)
      }
      if (depth != 3 || keys[1] != "model" || (e != E::value && e != E::object_end && e != E::array_end)) return true;
      if (keys[2] == "vocab") {
        add_token(keys[3], json_int(v, "tokenizer.json: the id of '" + keys[3] + "'"));
      } else if (keys[2] == "merges") {
        read_merge(v);
        ++rank;
      } else {
        return true;
      }
      return false;
    });
    merges_.reserve(merges_.size() + early_merges.size());
    for (size_t i = 0; i < early_merges.size(); ++i) add_merge(early_merges[i].first, early_merges[i].second, static_cast<int>(i), joined);
    early_merges = {};
    // Fields of the wrong kind or missing surface as the JSON library's message, naming the file.
    try {
      const json& m = j.at("model");
      const std::string type = m.value("type", std::string("BPE"));
      if (type != "BPE" && type != "WordPiece") fail_unsupported("'", path, "': model type ", type, " (tern supports BPE and WordPiece)");
      word_piece_ = type == "WordPiece";
      if (word_piece_) encoder_piece("model", type);
      if (!m.at("vocab").is_object() || (!word_piece_ && !m.at("merges").is_array()))
        fail("'", path, "': model.vocab is not an object or model.merges not a list");
      if (word_piece_) {
        subword_prefix_ = m.value("continuing_subword_prefix", std::string("##"));
        max_word_chars_ = json_int(m.value("max_input_chars_per_word", json(100)), "tokenizer.json: max_input_chars_per_word", 1, 1 << 20);
      }
      byte_fallback_ = m.value("byte_fallback", false);
      ignore_merges_ = m.value("ignore_merges", false);
      if (m.contains("unk_token") && m["unk_token"].is_string()) {
        auto it = ids_.find(m["unk_token"].get<std::string>());
        if (it != ids_.end()) unk_ = it->second;
      }
      if (word_piece_ && unk_ < 0) fail("'", path, "': a WordPiece model needs its unk_token in the vocabulary");
      if (j.contains("added_tokens") && !(j["added_tokens"].is_array() && j["added_tokens"].empty()))  // (objects were taken out)
        fail("'", path, "': added_tokens is not a list of objects");
      for (const auto& t : added_tokens) {
        Added a{t.at("content"), json_int(t.at("id"), "tokenizer.json: an added token's id"), t.value("special", false),
                t.value("lstrip", false), t.value("rstrip", false)};
        add_token(a.content, a.id);
        if (a.special) special_.insert(a.id);
        add_to_trie(a.content, added_.size());
        added_.push_back(a);
      }
      read_normalizer(j.value("normalizer", json()), norm_);
      read_pre_tokenizer(j.value("pre_tokenizer", json()), pre_);
      read_post_processor(j.value("post_processor", json()));
      read_decoder(j.value("decoder", json()), decoders_);
    } catch (const json::exception& e) {
      fail("'", path, "': ", e.what());
    }
    for (const std::string& t : tokens_) longest_ = std::max(longest_, t.size());
    // (WordPiece's one unk stands for a whole word of up to max_input_chars_per_word characters.)
    if (word_piece_) longest_ = std::max(longest_, 4 * static_cast<size_t>(max_word_chars_));
  }

  std::vector<int64_t> encode_text(const std::string& text, bool add_special, const CancelCheck& cancelled) const override {
    std::vector<int64_t> body;
    for (const auto& [segment, added_id] : split_added(text)) {
      if (added_id >= 0) {
        body.push_back(added_id);
        continue;
      }
      std::vector<std::string> words{normalize(segment)};
      for (const auto& step : pre_) {
        std::vector<std::string> next;
        for (size_t w = 0; w < words.size(); ++w)
          for (auto& piece : step(words[w], w == 0)) next.push_back(std::move(piece));
        words = std::move(next);
      }
      for (size_t w = 0; w < words.size(); ++w) {
        if (cancelled && w % 256 == 255 && cancelled()) throw EncodeCancelled("encoding was cancelled");
        const std::string& word = words[w];
        if (kEncoderPieces && word_piece_) {
          word_pieces(word, body);
          continue;
        }
        if (word.size() <= kMaxWordPieceBytes) {
          for (int64_t id : bpe(word, cancelled)) body.push_back(id);
          continue;
        }
        for (size_t at = 0; at < word.size();) {
          const size_t end = word_piece_end(word, at);
          for (int64_t id : bpe(word.substr(at, end - at), cancelled)) body.push_back(id);
          at = end;
        }
      }
    }
    if (!add_special) return body;
    std::vector<int64_t> out = prefix_;
    out.insert(out.end(), body.begin(), body.end());
    out.insert(out.end(), suffix_.begin(), suffix_.end());
    return out;
  }

  std::string decode(const std::vector<int64_t>& ids) const override {
    std::vector<std::string> toks;
    for (int64_t id : ids) {
      if (id < 0 || id >= vocab_size()) fail("token id ", id, " is outside the vocabulary of ", vocab_size());
      if (special_.count(id)) continue;  // BOS, EOS, pad…: control tokens, not text
      toks.push_back(tokens_[static_cast<size_t>(id)]);
    }
    auto bytes = [&] {
      size_t n = 0;
      for (const auto& t : toks) n += t.size();
      return n;
    };
    const size_t budget = text_budget(bytes());
    for (size_t k = 0; k < decoders_.size(); ++k) {
      decoders_[k](toks);
      if (const size_t n = bytes(); n > budget)  // (each step within its own budget can still multiply the next's input)
        fail("tokenizer.json: decoder step ", k + 1, " of ", decoders_.size(), " made ", n, " bytes of text from ", ids.size(),
             " tokens (more than ", budget, ")");
    }
    std::string s;
    s.reserve(bytes());
    for (const auto& t : toks) s += t;
    return s;
  }

  int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }
  int64_t piece_id(const std::string& piece) const override {
    const auto it = ids_.find(piece);
    return it == ids_.end() ? -1 : it->second;
  }
  size_t longest_token_bytes() const override { return longest_; }

 private:
  struct Added {
    std::string content;
    int64_t id;
    bool special, lstrip, rstrip;
  };

  void add_token(const std::string& tok, int64_t id) {
    if (id < 0 || id > 10'000'000) fail("tokenizer.json: token id ", id, " is out of range");
    if (tokens_.size() <= static_cast<size_t>(id)) tokens_.resize(static_cast<size_t>(id) + 1);
    tokens_[static_cast<size_t>(id)] = tok;
    ids_[tok] = id;
  }

  // The text cut at added tokens: (segment, -1) for plain text, ("", id) for an added token.
  std::vector<std::pair<std::string, int64_t>> split_added(const std::string& text) const {
    std::vector<std::pair<std::string, int64_t>> out;
    size_t start = 0;
    for (size_t i = 0; i < text.size();) {
      const Added* best = longest_added_at(text, i);
      if (!best) {
        ++i;
        continue;
      }
      std::string before = text.substr(start, i - start);
      if (best->lstrip)
        while (!before.empty() && std::isspace(static_cast<unsigned char>(before.back()))) before.pop_back();
      if (!before.empty()) out.emplace_back(before, -1);
      out.emplace_back("", best->id);
      i += best->content.size();
      if (best->rstrip)
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
      start = i;
    }
    if (start < text.size()) out.emplace_back(text.substr(start), -1);
    return out;
  }

  // The added tokens' contents as a trie, so the longest one at a text position is found by walking it: a scan
  // of every added token at every position took a long prompt past 60 s with 100,000 of them. Children are
  // kept sorted by byte; a node ends the first added token of its content.
  struct TrieNode {
    std::vector<std::pair<unsigned char, uint32_t>> next;
    int64_t added = -1;  // index in added_
  };
  void add_to_trie(const std::string& content, size_t index) {
    if (content.empty()) return;
    uint32_t node = 0;
    for (const char ch : content) {
      const auto c = static_cast<unsigned char>(ch);
      auto& next = trie_[node].next;
      auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(c, uint32_t{0}));
      if (it == next.end() || it->first != c) {
        it = next.insert(it, {c, static_cast<uint32_t>(trie_.size())});
        const uint32_t child = it->second;
        trie_.emplace_back();  // (invalidates `next`: not used after this)
        node = child;
      } else {
        node = it->second;
      }
    }
    if (trie_[node].added < 0) trie_[node].added = static_cast<int64_t>(index);
  }
  const Added* longest_added_at(const std::string& text, size_t i) const {
    const Added* best = nullptr;
    for (uint32_t node = 0; i < text.size();) {
      const auto& next = trie_[node].next;
      const auto c = static_cast<unsigned char>(text[i++]);
      auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(c, uint32_t{0}));
      if (it == next.end() || it->first != c) break;
      node = it->second;
      if (trie_[node].added >= 0) best = &added_[static_cast<size_t>(trie_[node].added)];
    }
    return best;
  }

  std::string normalize(std::string s) const {
    const size_t budget = text_budget(s.size());
    for (size_t k = 0; k < norm_.size(); ++k)
      if ((s = norm_[k](s)).size() > budget)
        fail("tokenizer.json: normalizer step ", k + 1, " of ", norm_.size(), " made ", s.size(), " bytes of text (more than ", budget,
             ")");
    return s;
  }

  // A merge whose parts or result are not tokens can never apply (Hugging Face refuses such files); an
  // earlier rank of the same pair stays.
  void add_merge(std::string_view a, std::string_view b, int rank, std::string& joined) {
    joined.assign(a).append(b);
    const auto left = ids_.find(a), right = ids_.find(b), merged = ids_.find(joined);
    if (left != ids_.end() && right != ids_.end() && merged != ids_.end())
      merges_.emplace(pair_key(left->second, right->second), Merge{rank, merged->second});
  }

  // A word longer than this is merged in pieces: a Gemma prompt is one word (no pre-tokenizer) and merging holds
  // ~80 bytes a character at its peak, on each HTTP thread of a server at once (issue 51). A piece ends before a
  // "▁" that follows a letter or digit, found in its last quarter — SentencePiece vocabularies join no word to the
  // next word's "▁" (Gemma 3's one token that crosses such a seam is ">▁</"), so the ids are the whole word's
  // (tests/test_tokenizer.cpp: llama.cpp's on an 86 KB text) — else at a character boundary, where the ids at
  // the seam may differ from the whole word's.
  static constexpr size_t kMaxWordPieceBytes = size_t{64} << 10;
  static size_t word_piece_end(const std::string& word, size_t at) {
    if (word.size() - at <= kMaxWordPieceBytes) return word.size();
    const size_t most = at + kMaxWordPieceBytes;
    for (size_t p = most; p > most - kMaxWordPieceBytes / 4; --p)
      if (word.compare(p, 3, "\xE2\x96\x81") == 0 && std::isalnum(static_cast<unsigned char>(word[p - 1]))) return p;
    size_t p = most;
    while (p > at + 1 && (static_cast<unsigned char>(word[p]) & 0xC0) == 0x80) --p;  // (not inside a character)
    return p;
  }

  static uint64_t pair_key(int64_t left, int64_t right) { return static_cast<uint64_t>(left) << 32 | static_cast<uint64_t>(right); }

  // WordPiece: the longest vocabulary piece from the start of the word, then the longest "##" piece from where it
  // ended, and so on; a word with a part no piece covers, or longer than max_input_chars_per_word characters, is
  // one unk (as Hugging Face's WordPiece model does).
  void word_pieces(const std::string& word, std::vector<int64_t>& out) const {
    if (word.empty()) return;
    std::vector<size_t> starts;  // where each character starts
    for (size_t at = 0; at < word.size(); ++at)
      if ((static_cast<unsigned char>(word[at]) & 0xC0) != 0x80) starts.push_back(at);
    if (starts.size() > static_cast<size_t>(max_word_chars_)) return out.push_back(unk_);
    starts.push_back(word.size());
    const size_t first = out.size();
    std::string piece;
    for (size_t from = 0; from + 1 < starts.size();) {
      size_t to = starts.size() - 1;
      for (; to > from; --to) {
        piece.assign(from == 0 ? "" : subword_prefix_).append(word, starts[from], starts[to] - starts[from]);
        if (const auto it = ids_.find(piece); it != ids_.end()) {
          out.push_back(it->second);
          break;
        }
      }
      if (to == from) {
        out.resize(first);
        return out.push_back(unk_);
      }
      from = to;
    }
  }

  // BPE: start from characters (or byte-level characters), merge the lowest-ranked pair until none applies
  // (the leftmost of equal ones), as Hugging Face's tokenizers do (llm/merge_pairs.h: a Gemma prompt is one word,
  // no pre-tokenizer, so the loop must not be quadratic in a word).
  std::vector<int64_t> bpe(const std::string& word, const CancelCheck& cancelled) const {
    {
      std::lock_guard<std::mutex> lock(cache_mu_);
      if (auto it = cache_.find(word); it != cache_.end()) return it->second;
    }
    std::vector<int64_t> ids;
    auto direct = ids_.find(word);
    if (ignore_merges_ && direct != ids_.end()) {
      ids.push_back(direct->second);
    } else {
      std::vector<int64_t> chars;   // one UTF-8 character each (a malformed byte alone); −1: no token
      std::vector<size_t> offsets;  // where each starts in `word`, and its end
      for (size_t at = 0; at < word.size();) {
        size_t len = 1;
        const auto c = static_cast<unsigned char>(word[at]);
        if (c >= 0xC0) len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        len = std::min(len, word.size() - at);
        const auto it = ids_.find(std::string_view(word).substr(at, len));
        chars.push_back(it == ids_.end() ? -1 : it->second);
        offsets.push_back(at);
        at += len;
      }
      offsets.push_back(word.size());
      auto lookup = [&](int64_t a, int64_t b) -> std::optional<PairMerge> {
        const auto it = merges_.find(pair_key(a, b));
        if (it == merges_.end()) return std::nullopt;
        return PairMerge{static_cast<double>(it->second.rank), it->second.id};
      };
      for (const MergedSymbol& m : merge_pairs(chars, lookup, cancelled)) {
        if (m.id >= 0) {
          ids.push_back(m.id);
          continue;
        }
        const size_t from = offsets[m.first], len = offsets[m.first + m.count] - from;
        if (byte_fallback_) {
          for (size_t k = 0; k < len; ++k) {
            char name[8];
            std::snprintf(name, sizeof(name), "<0x%02X>", static_cast<unsigned char>(word[from + k]));
            auto bt = ids_.find(name);
            if (bt == ids_.end()) fail("tokenizer.json: byte fallback token ", name, " is missing");
            ids.push_back(bt->second);
          }
        } else if (unk_ >= 0) {
          ids.push_back(unk_);
        } else {
          fail("tokenizer.json: '", word.substr(from, len), "' has no token and the tokenizer has no byte fallback or unk token");
        }
      }
    }
    if (word.size() > kMaxCachedWordBytes) return ids;
    const size_t cost = word.size() + ids.size() * sizeof(int64_t) + kCacheEntryOverhead;
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (cache_bytes_ + cost > kMaxCacheBytes) cache_.clear(), cache_bytes_ = 0;  // a server's clients may send any words
    if (cache_.emplace(word, ids).second) cache_bytes_ += cost;
    return ids;
  }

  void read_post_processor(const json& p) {
    each_step(p, "processors", [&](const json& p, const std::string& type) {
      if (type == "ByteLevel") return;                                // offsets only
      if (type == "BertProcessing" || type == "RobertaProcessing") {  // cls: [token, id], sep: [token, id]
        encoder_piece("post-processor", type);
        prefix_.push_back(json_int(p.at("cls").at(1), "tokenizer.json: the cls token's id"));
        suffix_.push_back(json_int(p.at("sep").at(1), "tokenizer.json: the sep token's id"));
        return;
      }
      if (type != "TemplateProcessing") fail_unsupported("tokenizer.json: post-processor '", type, "' is not supported");
      bool after = false;
      for (const auto& item : p.at("single")) {
        if (item.contains("Sequence")) {
          after = true;
          continue;
        }
        const std::string name = item.at("SpecialToken").at("id");
        for (const auto& id : p.at("special_tokens").at(name).at("ids"))
          (after ? suffix_ : prefix_).push_back(json_int(id, "tokenizer.json: a special token id"));
      }
    });
  }

  std::vector<std::string> tokens_;
  struct TextHash {  // (lookups by string_view: no string built per lookup)
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int64_t, TextHash, std::equal_to<>> ids_;
  struct Merge {
    int rank;
    int64_t id;  // the token the pair becomes
  };
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) → its rank and result
  std::vector<Added> added_;
  std::vector<TrieNode> trie_{1};  // (the root)
  std::unordered_set<int64_t> special_;
  bool byte_fallback_ = false, ignore_merges_ = false;
  bool word_piece_ = false;  // model.type WordPiece (else BPE)
  std::string subword_prefix_;
  int64_t max_word_chars_ = 100;
  int64_t unk_ = -1;
  std::vector<int64_t> prefix_, suffix_;
  std::vector<Normalizer> norm_;
  std::vector<PreTokenizer> pre_;
  std::vector<Decoder> decoders_;
  size_t longest_ = 0;  // longest_token_bytes()
  // word → ids, shared by the threads that encode (tern serve's HTTP threads), bounded in bytes: words of up to
  // 64 bytes (a longer one seldom comes again; 100 KB words filled a 65,536-word cap with 1.35 GB, issue 53),
  // 8 MiB in all counting ~64 bytes of map node and vector per entry, emptied when full.
  static constexpr size_t kMaxCachedWordBytes = 64, kMaxCacheBytes = size_t{8} << 20, kCacheEntryOverhead = 64;
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache_;
  mutable size_t cache_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& path) { return std::make_unique<HfTokenizer>(path); }

}  // namespace tern::llm
