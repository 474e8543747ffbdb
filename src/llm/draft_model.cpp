#include "llm/draft_model.h"

#include <algorithm>

#include "core/error.h"
#include "llm/tokenizer.h"

namespace tern::llm {

DraftModel::DraftModel(Session& session, ModelConfig config, int64_t target_vocab)
    : gen_(session, config), target_vocab_(target_vocab), vocab_(config.vocab_size) {
  if (gen_.io().layout != PastLayout::Internal)
    fail_unsupported(
        "--draft-model: the draft's attention did not take the ring-buffer KV cache (or --window 0 was given): its "
        "proposals are rolled back on the ring");
}

const Tensor* DraftModel::feed(const std::vector<int64_t>& history, int64_t upto) {
  // Roll back to the prefix shared with history[0, upto), less one token when that is all of it: the last
  // token's logits are what a proposal starts from.
  auto common =
      static_cast<int64_t>(std::mismatch(held_.begin(), held_.end(), history.begin(), history.begin() + upto).first - held_.begin());
  common = std::min(common, upto - 1);
  SequenceState& ring = gen_.sequence();
  if (common == 0 || static_cast<int64_t>(held_.size()) > window()) {  // (a slid ring starts again)
    ring.reset();
    common = 0;
  } else {
    ring.keep_prefix(0, common);
  }
  held_.resize(static_cast<size_t>(common));
  const Tensor* logits = nullptr;
  for (int64_t at = common; at < upto; at += kDefaultPrefillChunk) {  // the tokens it lacks, in prefill-sized runs
    std::vector<int64_t> chunk(history.begin() + at, history.begin() + std::min(upto, at + kDefaultPrefillChunk));
    logits = &gen_.run_rows({chunk}, {static_cast<int64_t>(held_.size())}, {0}, 1);
    held_.insert(held_.end(), chunk.begin(), chunk.end());
  }
  return logits;
}

bool DraftModel::readable(const std::vector<int64_t>& history) const {
  return !history.empty() && static_cast<int64_t>(history.size()) < window() &&
         std::none_of(history.begin(), history.end(), [&](int64_t t) { return t < 0 || (vocab_ > 0 && t >= vocab_); });
}

void DraftModel::prefill(const std::vector<int64_t>& history) {
  if (readable(history) && history.size() > 1) feed(history, static_cast<int64_t>(history.size()) - 1);
}

void DraftModel::propose(const std::vector<int64_t>& history, int64_t max_drafts, std::vector<int64_t>& drafts) {
  drafts.clear();
  const auto H = static_cast<int64_t>(history.size());
  max_drafts = std::min(max_drafts, window() - H);  // (the last draft is never fed: the ring holds H + max − 1)
  if (max_drafts <= 0 || !readable(history)) return;
  const Tensor* logits = feed(history, H);
  for (;;) {
    const int64_t V = target_vocab_ > 0 ? std::min(logits->dim(-1), target_vocab_) : logits->dim(-1);
    const int64_t next = argmax(logits->data<float>(), logits->dim(-1));
    if (next >= V) return;
    drafts.push_back(next);
    if (static_cast<int64_t>(drafts.size()) == max_drafts) return;
    logits = &gen_.run_rows({{next}}, {static_cast<int64_t>(held_.size())}, {0}, 1);
    held_.push_back(next);
  }
}

void check_same_vocabulary(const Tokenizer& target, const Tokenizer& draft, const std::string& target_dir, const std::string& draft_dir) {
  const int64_t n = target.vocab_size();
  if (draft.vocab_size() != n)
    fail("--draft-model '", draft_dir, "': its tokenizer has ", draft.vocab_size(), " tokens, the model's ('", target_dir, "') ", n,
         ": a draft must share the model's vocabulary");
  for (int64_t id = 0; id < n; ++id)
    if (target.decode({id}) != draft.decode({id}))
      fail("--draft-model '", draft_dir, "': token ", id, " reads '", draft.decode({id}), "' there and '", target.decode({id}), "' in '",
           target_dir, "': a draft must share the model's vocabulary");
}

}  // namespace tern::llm
