#include "llm/speculation.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/cpu/kv_ring_buffer.h"
#include "llm/draft_model.h"

namespace tern::llm {

// Drafts a step at most: a step rolls back its rejected drafts, and a quantized ring keeps its newest tokens exact
// through a roll back that long (so speculation's greedy tokens stay plain greedy's there too).
constexpr int kMaxDrafts = 16;
static_assert(kMaxDrafts <= kernels::KvRingBuffer::kExactRollback);

SpeculationOptions parse_speculation(const std::string& text, DraftModel* draft) {
  SpeculationOptions o;
  if (text == "off" || (text.empty() && !draft)) return o;
  const std::string kind = text.empty() ? "draft" : text.substr(0, text.find(':'));
  if (kind != "ngram" && kind != "draft")
    fail("--speculate '", text, "': expected ngram, draft, ngram:N or draft:N (N drafts a step, 1 to 16)");
  if ((kind == "draft") != (draft != nullptr))
    fail("--speculate '", text,
         "': ", draft ? "a --draft-model is given: its drafts are --speculate draft[:N]" : "draft needs --draft-model DIR");
  o.draft = draft;
  o.drafts = 3;
  if (kind.size() < text.size()) {
    const std::string n = text.substr(kind.size() + 1);
    if (n.empty() || n.size() > 2 || !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; }) || std::stoi(n) < 1 ||
        std::stoi(n) > kMaxDrafts)
      fail("--speculate '", text, "': N must be a number of drafts from 1 to 16");
    o.drafts = std::stoi(n);
  }
  return o;
}

int64_t draft_room(const SpeculationOptions& o, int64_t tokens_left, int64_t held, int64_t window) {
  if (o.draft) window = std::min(window, o.draft->window());
  const int64_t room = std::min(std::min(o.drafts, tokens_left - 1), window - held - 1);
  return room > 0 ? room : 0;
}

void ngram_draft(const std::vector<int64_t>& history, int64_t ngram, int64_t max_drafts, std::vector<int64_t>& drafts) {
  drafts.clear();
  const auto H = static_cast<int64_t>(history.size()), n = ngram;
  if (n < 1 || max_drafts <= 0 || H <= n) return;
  // Of the earlier starts s < H − n whose n tokens equal the last n, the one whose match reaches furthest back (the
  // newest of those): it follows the passage being repeated, not wherever those n tokens last appeared.
  int64_t best = -1, best_len = 0;
  for (int64_t s = H - n - 1; s >= 0; --s) {
    if (!std::equal(history.begin() + s, history.begin() + s + n, history.end() - n)) continue;
    int64_t len = n;
    while (s - (len - n) > 0 && history[static_cast<size_t>(s - (len - n) - 1)] == history[static_cast<size_t>(H - len - 1)]) ++len;
    if (len > best_len) best = s, best_len = len;
  }
  if (best < 0) return;
  const int64_t from = best + n, upto = std::min(H, from + max_drafts);
  drafts.assign(history.begin() + from, history.begin() + upto);
}

}  // namespace tern::llm
