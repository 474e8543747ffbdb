#include "llm/continuous_batch.h"

#include <algorithm>

#include "llm/draft_model.h"
#include "llm/speculation.h"

namespace tern::llm {

ContinuousBatcher::ContinuousBatcher(Session& session, Generator& generator, int64_t rows, int64_t prefill_chunk, bool reuse_prefixes)
    : session_(session), generator_(generator), prefill_chunk_(prefill_chunk), reuse_prefixes_(reuse_prefixes) {
  if (rows < 1 || rows > 1024) fail("continuous batching: ", rows, " rows (1 to 1024)");
  if (prefill_chunk < 0) fail("continuous batching: prefill chunk ", prefill_chunk, " must not be negative");
  if (generator.io().layout != PastLayout::Internal)
    fail_unsupported("continuous batching needs the ring-buffer cache (a window), which this model's attention did not take");
  rows_.resize(static_cast<size_t>(rows));
  new_tokens_.resize(static_cast<size_t>(rows));
  generator_.sequence().reset();  // the rings are made at the first run, `rows` wide
}

int64_t ContinuousBatcher::active() const {
  return std::count_if(rows_.begin(), rows_.end(), [](const Row& r) { return r.active; });
}

int64_t ContinuousBatcher::held_tokens() const {
  int64_t n = 0;
  for (const Row& r : rows_)
    if (r.active) n += std::min(r.fed, session_.options().decoder.ring_capacity);
  return n;
}

int64_t ContinuousBatcher::add(SequenceRequest request) {
  std::vector<SequenceRequest> one;
  one.push_back(std::move(request));
  const auto rows = add_group(std::move(one));
  return rows.empty() ? -1 : rows[0];
}

void ContinuousBatcher::check_memory(const std::vector<SequenceRequest>& group) const {
  if (group.empty()) return;
  GenerateOptions o;
  o.max_new_tokens = group[0].max_new_tokens;  // (a group shares its prompt and max_new_tokens)
  generator_.check_cache_memory(rows(), static_cast<int64_t>(group[0].prompt.size()), o);
}

std::vector<int64_t> ContinuousBatcher::add_group(std::vector<SequenceRequest> group) {
  for (const auto& request : group) {
    GenerateOptions o;
    o.max_new_tokens = request.max_new_tokens;
    o.sampling = request.sampling;
    o.top_logits = request.top_logprobs;  // (the same range: 0 to the vocabulary)
    generator_.check_request({request.prompt}, o);
    if (request.prompt != group[0].prompt) fail("continuous batching: the sequences of a group must share their prompt");
    if (request.speculation.draft && request.speculation.draft->rows() != rows())
      fail("continuous batching: the draft model drafts for ", request.speculation.draft->rows(), " rows; the batch has ", rows());
  }
  if (!group.empty() && group[0].max_new_tokens == 0) {  // (a group shares max_new_tokens in practice)
    for (auto& request : group)
      if (request.on_finish) request.on_finish(FinishReason::Length);
    return {};
  }
  if (static_cast<int64_t>(group.size()) > free_rows())
    fail("continuous batching: ", group.size(), " sequence(s) need a row each; ", free_rows(), " of ", rows_.size(), " rows are free");
  check_memory(group);
  std::vector<int64_t> taken;
  for (auto& request : group) {
    // The leader may find its prompt's beginning in an idle row; its followers copy the leader's row once its
    // prompt is in.
    int64_t reuse = 0;
    const size_t b = pick_row(taken.empty() && reuse_prefixes_ ? &request.prompt : nullptr, reuse);
    if (taken.empty() && reuse_prefixes_) ++(reuse > 0 ? prefix_hits_ : prefix_misses_);
    reused_tokens_ += reuse;
    if (reuse > 0) generator_.sequence().keep_prefix(static_cast<int64_t>(b), reuse);
    else generator_.sequence().reset_row(static_cast<int64_t>(b));
    Row& r = rows_[b];
    r.active = true;
    r.holds = false;
    r.sampler.emplace(request.sampling);
    r.tokens = request.prompt;
    r.tokens.reserve(r.tokens.size() + static_cast<size_t>(std::min<int64_t>(request.max_new_tokens, 1 << 16)));
    r.fed = reuse;
    r.generated = 0;
    r.followers.clear();
    r.following = !taken.empty();
    r.request = std::move(request);
    if (r.following) rows_[static_cast<size_t>(taken[0])].followers.push_back(b);
    taken.push_back(static_cast<int64_t>(b));
  }
  return taken;
}

size_t ContinuousBatcher::pick_row(const std::vector<int64_t>* prompt, int64_t& reuse) const {
  // How many of the prompt's tokens row r holds (at least the prompt's last token is fed: its logits give the first
  // new token).
  auto held_prefix = [&](const Row& r) -> int64_t {
    if (!prompt || !r.holds || prompt->size() < 2) return 0;
    const auto most = static_cast<std::ptrdiff_t>(std::min<size_t>(static_cast<size_t>(r.fed), prompt->size() - 1));
    return std::mismatch(prompt->begin(), prompt->begin() + most, r.tokens.begin()).first - prompt->begin();
  };
  // A row whose whole cache begins the prompt (nothing of it is lost) or that holds 16 of its tokens or more, the
  // longest match; else the least recently used row — a row matching only BOS is not worth another's cache.
  constexpr int64_t kWorthATakenRow = 16;
  size_t best = rows_.size(), lru = rows_.size();
  reuse = 0;
  for (size_t b = 0; b < rows_.size(); ++b) {
    const Row& r = rows_[b];
    if (r.active) continue;
    if (lru == rows_.size() || r.last_used < rows_[lru].last_used) lru = b;
    const int64_t same = held_prefix(r);
    if ((same >= kWorthATakenRow || (same > 0 && same == r.fed)) && same > reuse) reuse = same, best = b;
  }
  if (best == rows_.size()) best = lru, reuse = lru == rows_.size() ? 0 : held_prefix(rows_[lru]);
  return best;
}

void ContinuousBatcher::finish(size_t row, FinishReason why) {
  Row& r = rows_[row];
  r.active = false;
  r.last_used = ++clock_;
  // Its cache stays for a prompt that begins with its tokens — unless its run failed, or its window slid (the first
  // tokens are gone).
  r.holds = reuse_prefixes_ && why != FinishReason::Error && r.fed <= session_.options().decoder.ring_capacity;
  if (!r.holds) generator_.sequence().reset_row(static_cast<int64_t>(row));
  if (r.request.on_finish) r.request.on_finish(why);
  r.request = {};  // the callbacks' captures go now, not when the row is next taken
}

void ContinuousBatcher::end_all() {
  for (size_t b = 0; b < rows_.size(); ++b)
    if (rows_[b].active) finish(b, FinishReason::Error);
}

bool ContinuousBatcher::step() {
  for (size_t b = 0; b < rows_.size(); ++b) {
    Row& r = rows_[b];
    // (prefilling rows only: a decoding row's on_token already says stop, so the decode path asks once a token)
    const bool prefilling = r.fed < static_cast<int64_t>(r.tokens.size());
    if (!r.active || r.following || !prefilling || !r.request.cancelled || !r.request.cancelled()) continue;
    for (size_t f : r.followers) finish(f, FinishReason::Stop);  // (its choices, waiting for its prompt)
    r.followers.clear();
    finish(b, FinishReason::Stop);
  }
  // A decoding row speculates while its rings' windows have room to take the drafts back (Generator::generate's
  // rule): prompt lookup's drafts, or a draft model's — every such row's proposed in one batch of the draft's runs.
  DraftModel* draft = nullptr;
  proposals_.clear();
  for (size_t b = 0; b < rows_.size(); ++b) {
    Row& r = rows_[b];
    r.drafts.clear();
    const SpeculationOptions& spec = r.request.speculation;
    if (!r.active || r.following || spec.drafts == 0 || r.fed + 1 != static_cast<int64_t>(r.tokens.size()) || r.generated == 0) continue;
    const int64_t room = draft_room(spec, r.request.max_new_tokens - r.generated, r.fed, generator_.io().ring_window);
    if (room == 0) continue;
    if (!spec.draft) {
      ngram_draft(r.tokens, spec.ngram, room, r.drafts);
      continue;
    }
    if (draft && spec.draft != draft) fail_unsupported("continuous batching with two draft models at once");
    draft = spec.draft;
    proposals_.push_back({static_cast<int64_t>(b), &r.tokens, room, &r.drafts});
  }
  if (draft) draft->propose(proposals_);
  size_t n = 0;             // active rows, in row order
  int64_t logits_rows = 1;  // positions whose logits come back per row: 1 + the most drafts a row feeds
  held_.clear();
  ring_rows_.clear();
  for (size_t b = 0; b < rows_.size(); ++b) {
    Row& r = rows_[b];
    if (!r.active || r.following) continue;
    auto& feed = new_tokens_[n++];
    const int64_t left = static_cast<int64_t>(r.tokens.size()) - r.fed;  // the prompt's rest, or the last token
    const int64_t take = prefill_chunk_ > 0 ? std::min(left, prefill_chunk_) : left;
    feed.assign(r.tokens.begin() + r.fed, r.tokens.begin() + r.fed + take);
    feed.insert(feed.end(), r.drafts.begin(), r.drafts.end());
    logits_rows = std::max<int64_t>(logits_rows, 1 + static_cast<int64_t>(r.drafts.size()));
    held_.push_back(r.fed);
    ring_rows_.push_back(static_cast<int64_t>(b));
  }
  if (n == 0) return false;
  const auto& feeds = new_tokens_;  // (a vector a row, capacity reused: the first n are this run's)
  const Tensor* run = nullptr;
  try {
    run = &generator_.run_rows(feeds, held_, ring_rows_, rows(), logits_rows);
  } catch (...) {
    end_all();
    throw;
  }
  const Tensor& logits = *run;
  const int64_t V = logits.dim(-1);
  for (size_t i = 0; i < n; ++i) {
    const size_t b = static_cast<size_t>(ring_rows_[i]);
    Row& r = rows_[b];
    // Row i's logits at its last position, and before it one for each draft.
    const float* row_logits = logits.data<float>() + (static_cast<int64_t>(i) * logits_rows + logits_rows - 1) * V;
    if (!r.drafts.empty()) {
      const auto k = static_cast<int64_t>(r.drafts.size());
      drafted_tokens_ += k;
      r.fed += 1;  // the last token; each draft the row's own choice confirms is kept too
      std::optional<FinishReason> why;
      for (int64_t j = 0; j <= k; ++j) {
        int64_t token = -1;
        why = choose(b, row_logits - (k - j) * V, V, j < k ? r.drafts[static_cast<size_t>(j)] : -1, token);
        if (why || j == k || token != r.drafts[static_cast<size_t>(j)]) break;
        ++r.fed;
        ++accepted_tokens_;
      }
      generator_.sequence().keep_prefix(static_cast<int64_t>(b), r.fed);  // (the rejected drafts leave the ring)
      if (why) finish(b, *why);
      continue;
    }
    r.fed += static_cast<int64_t>(feeds[i].size());
    if (r.fed < static_cast<int64_t>(r.tokens.size())) continue;  // more prompt to feed
    // The prompt is in: its followers copy the cache before the leader's first token (which may end it).
    for (size_t f : r.followers) {
      generator_.sequence().copy_row(static_cast<int64_t>(b), static_cast<int64_t>(f));
      rows_[f].fed = r.fed;
      rows_[f].following = false;
      take_token(f, row_logits, V);
    }
    r.followers.clear();
    take_token(b, row_logits, V);
  }
  return true;
}

void ContinuousBatcher::take_token(size_t b, const float* logits, int64_t V) {
  int64_t token = -1;
  if (const auto why = choose(b, logits, V, -1, token)) finish(b, *why);
}

std::optional<FinishReason> ContinuousBatcher::choose(size_t b, const float* logits, int64_t V, int64_t draft, int64_t& next) {
  Row& r = rows_[b];
  JsonConstraint* constraint = r.request.constraint.get();
  const float* choose_from = logits;
  if (constraint) {
    masked_.assign(logits, logits + V);
    // (no token can come and still close the value in the tokens left: cut short, as a length limit cuts)
    if (constraint->mask(masked_.data(), V, r.request.max_new_tokens - r.generated) == 0) return FinishReason::Length;
    choose_from = masked_.data();
  }
  next = r.sampler->next(choose_from, V, r.tokens, draft);
  if (constraint) constraint->accept(next);
  r.tokens.push_back(next);
  ++r.generated;
  if (r.request.on_logprobs) r.request.on_logprobs(token_logprobs(logits, V, next, r.request.top_logprobs, top_ids_));
  const bool go = !r.request.on_token || r.request.on_token(next);
  const bool eos = std::find(r.request.eos_token_ids.begin(), r.request.eos_token_ids.end(), next) != r.request.eos_token_ids.end();
  if (!go || eos || (constraint && constraint->complete())) return FinishReason::Stop;
  if (r.generated >= r.request.max_new_tokens) return FinishReason::Length;
  return std::nullopt;
}

}  // namespace tern::llm
