#include "llm/draft_model.h"

#include <algorithm>

#include "core/error.h"
#include "llm/tokenizer.h"

namespace tern::llm {

DraftModel::DraftModel(Session& session, ModelConfig config, int64_t target_vocab, int64_t rows)
    : gen_(session, config),
      target_vocab_(target_vocab),
      vocab_(config.vocab_size),
      held_(static_cast<size_t>(std::max<int64_t>(rows, 1))) {
  if (gen_.io().layout != PastLayout::Internal)
    fail_unsupported(
        "--draft-model: the draft's attention did not take the ring-buffer KV cache (or --window 0 was given): its "
        "proposals are rolled back on the ring");
}

int64_t DraftModel::roll_back(int64_t row, const std::vector<int64_t>& history, int64_t upto) {
  auto& held = held_.at(static_cast<size_t>(row));
  auto common = static_cast<int64_t>(std::mismatch(held.begin(), held.end(), history.begin(), history.begin() + upto).first - held.begin());
  common = std::min(common, upto - 1);
  if (common == 0 || static_cast<int64_t>(held.size()) > window()) {  // (a slid ring starts again)
    gen_.sequence().reset_row(row);
    common = 0;
  } else {
    gen_.sequence().keep_prefix(row, common);
  }
  held.resize(static_cast<size_t>(common));
  return common;
}

const Tensor& DraftModel::feed(const std::vector<int64_t>& which, std::vector<std::vector<int64_t>>& tokens) {
  const auto n = which.size();
  for (;;) {  // a prefill-sized piece of each row's longest stretches, until what is left fits one run
    run_rows_.clear(), run_held_.clear(), run_tokens_.clear();
    for (size_t i = 0; i < n; ++i) {
      auto& t = tokens[i];
      if (static_cast<int64_t>(t.size()) <= kDefaultPrefillChunk) continue;
      run_rows_.push_back(which[i]);
      run_held_.push_back(static_cast<int64_t>(held_[static_cast<size_t>(which[i])].size()));
      run_tokens_.emplace_back(t.begin(), t.begin() + kDefaultPrefillChunk);
      t.erase(t.begin(), t.begin() + kDefaultPrefillChunk);
    }
    if (run_rows_.empty()) break;
    gen_.run_rows(run_tokens_, run_held_, run_rows_, rows());
    for (size_t i = 0; i < run_rows_.size(); ++i) {
      auto& held = held_[static_cast<size_t>(run_rows_[i])];
      held.insert(held.end(), run_tokens_[i].begin(), run_tokens_[i].end());
    }
  }
  run_held_.clear();
  for (int64_t r : which) run_held_.push_back(static_cast<int64_t>(held_[static_cast<size_t>(r)].size()));
  const Tensor& logits = gen_.run_rows(tokens, run_held_, which, rows());
  for (size_t i = 0; i < n; ++i) {
    auto& held = held_[static_cast<size_t>(which[i])];
    held.insert(held.end(), tokens[i].begin(), tokens[i].end());
  }
  return logits;
}

bool DraftModel::readable(const std::vector<int64_t>& history) const {
  return !history.empty() && static_cast<int64_t>(history.size()) < window() &&
         std::none_of(history.begin(), history.end(), [&](int64_t t) { return t < 0 || (vocab_ > 0 && t >= vocab_); });
}

void DraftModel::prefill(const std::vector<int64_t>& history) {
  const auto upto = static_cast<int64_t>(history.size()) - 1;
  if (upto < 1 || !readable(history)) return;
  const int64_t kept = roll_back(0, history, upto);
  std::vector<std::vector<int64_t>> rest{{history.begin() + kept, history.begin() + upto}};
  feed({0}, rest);
}

void DraftModel::propose(const std::vector<Proposal>& proposals) {
  // (member scratch, reused step after step: rows drafting, how many drafts each may make, where they go, what each feeds)
  auto &rows = drafting_, &limit = limits_;
  auto& out = outs_;
  auto& tokens = pending_;
  rows.clear(), limit.clear(), out.clear();
  size_t n = 0;
  for (const Proposal& p : proposals) {
    p.drafts->clear();
    const auto H = static_cast<int64_t>(p.history->size());
    const int64_t most = std::min(p.max_drafts, window() - H);  // (the last draft is never fed: the ring holds H + most − 1)
    if (most <= 0 || !readable(*p.history)) continue;
    const int64_t kept = roll_back(p.row, *p.history, H);
    rows.push_back(p.row);
    limit.push_back(most);
    out.push_back(p.drafts);
    if (tokens.size() <= n) tokens.resize(n + 1);
    tokens[n++].assign(p.history->begin() + kept, p.history->end());
  }
  tokens.resize(n);
  while (!rows.empty()) {
    const Tensor& logits = feed(rows, tokens);
    const int64_t width = logits.dim(-1), V = target_vocab_ > 0 ? std::min(width, target_vocab_) : width;
    size_t still = 0;  // the rows drafting on, moved to the front
    for (size_t i = 0; i < rows.size(); ++i) {
      const int64_t next = argmax(logits.data<float>() + static_cast<int64_t>(i) * width, width);
      if (next >= V) continue;
      out[i]->push_back(next);
      if (static_cast<int64_t>(out[i]->size()) == limit[i]) continue;
      rows[still] = rows[i], limit[still] = limit[i], out[still] = out[i];
      tokens[still++].assign(1, next);
    }
    rows.resize(still), limit.resize(still), out.resize(still), tokens.resize(still);
  }
}

void DraftModel::propose(const std::vector<int64_t>& history, int64_t max_drafts, std::vector<int64_t>& drafts) {
  one_.assign(1, Proposal{0, &history, max_drafts, &drafts});
  propose(one_);
}

void check_same_vocabulary(const Tokenizer* target, const Tokenizer* draft, const ModelConfig& target_config,
                           const ModelConfig& draft_config, const std::string& target_dir, const std::string& draft_dir) {
  auto refuse = [&](const auto&... what) {
    fail("--draft-model '", draft_dir, "': ", what..., ": a draft must share the model's vocabulary");
  };
  if (!target || !draft) {
    if (draft_config.vocab_size != target_config.vocab_size)
      refuse("a vocabulary of ", draft_config.vocab_size, " tokens, the model's ('", target_dir, "') ", target_config.vocab_size);
    return;
  }
  const int64_t n = target->vocab_size();
  if (draft->vocab_size() != n) refuse("its tokenizer has ", draft->vocab_size(), " tokens, the model's ('", target_dir, "') ", n);
  for (int64_t id = 0; id < n; ++id)
    if (target->decode({id}) != draft->decode({id}))
      refuse("token ", id, " reads '", draft->decode({id}), "' there and '", target->decode({id}), "' in '", target_dir, "'");
}

}  // namespace tern::llm
