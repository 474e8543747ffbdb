#include "llm/tokenizer.h"

#include <filesystem>

#include "core/error.h"
#include "core/mapped_file.h"
#include "llm/model_config.h"

namespace tern::llm {
namespace fs = std::filesystem;

int byte_piece(std::string_view piece) {
  auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1; };
  if (piece.size() != 6 || !piece.starts_with("<0x") || piece[5] != '>') return -1;
  const int hi = hex(piece[3]), lo = hex(piece[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string StopScanner::push(const std::string& text) {
  if (stopped_) return "";
  held_ += text;
  size_t first = std::string::npos;
  for (const auto& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Hold back the longest end of the text that begins a stop string.
  size_t keep = 0;
  for (const auto& s : stops_)
    for (size_t len = std::min(s.size() - 1, held_.size()); len > keep; --len)
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopScanner::flush() {
  std::string out;
  out.swap(held_);
  return stopped_ ? "" : out;
}

std::string TextStream::push(int64_t id) {
  // Decode from the start while the sequence is short (leading-space rules apply there), then from a
  // window of recent tokens.
  const size_t from = ids_.size() < kWindow ? 0 : ids_.size() - kWindow;
  const std::vector<int64_t> before(ids_.begin() + static_cast<std::ptrdiff_t>(from), ids_.end());
  ids_.push_back(id);
  std::vector<int64_t> after = before;
  after.push_back(id);
  const std::string a = tok_.decode(before), b = tok_.decode(after);
  return utf8_.push(b.compare(0, a.size(), a) == 0 ? b.substr(a.size()) : tok_.decode({id}));
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_dir) {
  fs::path dir(model_dir);
  if (folder_holds(model_dir, "tokenizer.json")) return load_hf_tokenizer(confined_file(model_dir, "tokenizer.json", "the tokenizer"));
  if (folder_holds(model_dir, "tokenizer.bin")) {
    ModelConfig cfg = read_model_config(model_dir);
    if (cfg.vocab_size <= 0) fail("'", (dir / "config.json").string(), "' gives no vocab_size for tokenizer.bin");
    return load_llama2c_tokenizer(confined_file(model_dir, "tokenizer.bin", "the tokenizer"), cfg.vocab_size);
  }
  fail_unsupported("no tokenizer in '", model_dir, "' (looked for tokenizer.json and tokenizer.bin): pass token ids with --ids");
}

std::string Utf8Stream::push(const std::string& bytes) {
  pending_ += bytes;
  // Release everything up to the last character boundary whose character is complete.
  size_t cut = pending_.size();
  for (size_t back = 1; back <= 4 && back <= pending_.size(); ++back) {
    unsigned char c = static_cast<unsigned char>(pending_[pending_.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead byte
    size_t need = (c & 0x80) == 0 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    if (need > back) cut = pending_.size() - back;  // lead byte still waits for its continuation
    break;
  }
  std::string out = pending_.substr(0, cut);
  pending_.erase(0, cut);
  return out;
}

std::string Utf8Stream::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace tern::llm
