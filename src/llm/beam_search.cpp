#include "llm/beam_search.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace tern::llm {

namespace {
double normalized(double sum_logprobs, size_t length, float penalty) {
  return sum_logprobs / std::pow(static_cast<double>(std::max<size_t>(length, 1)), penalty);
}
}  // namespace

BeamSearch::BeamSearch(Generator& generator, Rows prompts, const GenerateOptions& options)
    : g_(generator),
      prompts_(std::move(prompts)),
      opt_(options),
      B_(static_cast<int64_t>(prompts_.size())),
      nb_(options.num_beams),
      ring_(generator.io_.layout == PastLayout::Internal),
      cached_(options.use_cache && generator.io_.layout != PastLayout::None),
      pad_(generator.pad_id()) {
  g_.check_request(prompts_, opt_);
  g_.resumable_.reset();  // (the search takes the caches a resuming generate() kept)
  g_.resumable_tokens_.clear();
  if (ring_) g_.sequence_->reset();
  int64_t longest = 0, total = 0;
  for (const auto& p : prompts_) {
    longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
    total += static_cast<int64_t>(p.size());
  }
  g_.check_cache_memory(B_ * nb_, longest, opt_);
  const size_t n = static_cast<size_t>(B_ * nb_);
  if (ring_) {
    ring_row_.resize(n);
    for (size_t r = 0; r < n; ++r) ring_row_[r] = static_cast<int64_t>(r) / nb_ * nb_;  // the prefill's row, until the first step
  } else {
    Rows padded, padded_mask;
    pad_prompts(prompts_, pad_, g_.io_.prompts_right_padded, padded, padded_mask);
    for (size_t r = 0; r < n; ++r) {
      seq_.push_back(padded[r / static_cast<size_t>(nb_)]);
      mask_.push_back(padded_mask[r / static_cast<size_t>(nb_)]);
    }
    if (cached_) cache_.emplace(g_.io_, B_ * nb_);
  }
  score_.assign(n, -1e9);
  for (int64_t b = 0; b < B_; ++b) score_[static_cast<size_t>(b * nb_)] = 0;
  generated_.resize(n);
  hypotheses_.resize(static_cast<size_t>(B_));
  prompt_done_.assign(static_cast<size_t>(B_), 0);
  timing_.prompt_tokens = ring_ ? total : longest * B_;  // (a graph cache's rows are fed padded)
}

bool BeamSearch::done() const {
  return steps_ >= opt_.max_new_tokens || std::all_of(prompt_done_.begin(), prompt_done_.end(), [](char d) { return d != 0; });
}

const Tensor& BeamSearch::forward() {
  const size_t n = static_cast<size_t>(B_ * nb_);
  logits_row_.assign(n, -1);
  if (!ring_) {
    for (size_t r = 0; r < n; ++r) logits_row_[r] = static_cast<int64_t>(r);
    return g_.forward(seq_, mask_, cache_ ? &*cache_ : nullptr, g_.prefill_chunk(opt_));
  }
  Rows feed;
  std::vector<int64_t> held, rows;
  if (steps_ > 0) {  // each running beam's last token
    for (size_t r = 0; r < n; ++r) {
      const size_t b = r / static_cast<size_t>(nb_);
      if (prompt_done_[b]) continue;
      feed.push_back({generated_[r].back()});
      held.push_back(static_cast<int64_t>(prompts_[b].size() + generated_[r].size()) - 1);
      rows.push_back(ring_row_[r]);
      logits_row_[r] = static_cast<int64_t>(feed.size()) - 1;
    }
    return g_.run_rows(feed, held, rows, B_ * nb_);
  }
  // The prefill: each prompt in its beams' first row (in chunks of prefill_chunk when asked); every beam of a
  // prompt starts from the logits at its last token.
  std::vector<size_t> fed(static_cast<size_t>(B_), 0), which;
  for (;;) {
    feed.clear();
    held.clear();
    rows.clear();
    which.clear();
    for (size_t b = 0; b < prompts_.size(); ++b) {
      const auto& p = prompts_[b];
      const size_t left = p.size() - fed[b];
      if (left == 0) continue;
      const size_t take = g_.prefill_chunk(opt_) > 0 ? std::min(left, static_cast<size_t>(g_.prefill_chunk(opt_))) : left;
      feed.emplace_back(p.begin() + static_cast<std::ptrdiff_t>(fed[b]), p.begin() + static_cast<std::ptrdiff_t>(fed[b] + take));
      held.push_back(static_cast<int64_t>(fed[b]));
      rows.push_back(static_cast<int64_t>(b) * nb_);
      which.push_back(b);
    }
    if (feed.empty()) break;
    const Tensor& logits = g_.run_rows(feed, held, rows, B_ * nb_);
    const int64_t V = logits.dim(1);
    if (!prefill_.defined()) prefill_ = Tensor(DType::Float32, {B_, V});
    for (size_t i = 0; i < which.size(); ++i) {
      const size_t b = which[i];
      fed[b] += feed[i].size();
      if (fed[b] == prompts_[b].size())
        std::copy_n(logits.data<float>() + static_cast<int64_t>(i) * V, V, prefill_.data<float>() + static_cast<int64_t>(b) * V);
    }
  }
  for (size_t r = 0; r < n; ++r) logits_row_[r] = static_cast<int64_t>(r) / nb_;
  return prefill_;
}

void BeamSearch::move_ring_rows(const std::vector<int64_t>& from) {
  std::vector<int64_t> row(ring_row_);
  std::vector<char> taken(static_cast<size_t>(nb_));
  std::vector<size_t> second;
  for (int64_t b = 0; b < B_; ++b) {
    if (prompt_done_[static_cast<size_t>(b)]) continue;  // (never fed again)
    const int64_t first = b * nb_;
    std::fill(taken.begin(), taken.end(), 0);
    second.clear();
    for (int64_t k = 0; k < nb_; ++k) {
      const size_t r = static_cast<size_t>(first + k);
      const int64_t parent = ring_row_[static_cast<size_t>(from[r])];
      if (taken[static_cast<size_t>(parent - first)]) {
        second.push_back(r);
      } else {
        taken[static_cast<size_t>(parent - first)] = 1;
        row[r] = parent;
      }
    }
    // A row no beam continues is no beam's parent: a second child's copy may overwrite it.
    int64_t free = first;
    for (size_t r : second) {
      while (taken[static_cast<size_t>(free - first)]) ++free;
      taken[static_cast<size_t>(free - first)] = 1;
      g_.sequence_->copy_row(ring_row_[static_cast<size_t>(from[r])], free);
      row[r] = free;
    }
  }
  ring_row_.swap(row);
}

void BeamSearch::add_hypothesis(std::vector<Hypothesis>& into, double score, std::vector<int64_t> tokens) const {
  into.push_back({normalized(score, tokens.size(), opt_.length_penalty), std::move(tokens)});
  std::sort(into.begin(), into.end(), [](const Hypothesis& x, const Hypothesis& y) { return x.score > y.score; });
  if (into.size() > static_cast<size_t>(nb_)) into.pop_back();
}

void BeamSearch::step() {
  if (done()) return;
  const auto t0 = std::chrono::steady_clock::now();
  const Tensor& logits = forward();
  const int64_t V = logits.dim(1);
  const size_t n = static_cast<size_t>(B_ * nb_), nb = static_cast<size_t>(nb_);
  if (steps_ == 0 && ring_) {
    timing_.prefill_logits = prefill_;  // (already one row a prompt, never written again)
  } else if (steps_ == 0) {
    timing_.prefill_logits = Tensor(DType::Float32, {B_, V});
    for (int64_t b = 0; b < B_; ++b)
      std::copy_n(logits.data<float>() + logits_row_[static_cast<size_t>(b * nb_)] * V, V, timing_.prefill_logits.data<float>() + b * V);
  }
  auto is_end = [&](int64_t t) { return std::find(opt_.eos_token_ids.begin(), opt_.eos_token_ids.end(), t) != opt_.eos_token_ids.end(); };
  const std::vector<char> was_done = prompt_done_;
  std::vector<int64_t> from(n), token(n);
  std::vector<double> score(n);
  auto& candidates = candidates_;
  for (size_t b = 0; b < static_cast<size_t>(B_); ++b) {
    if (was_done[b]) {  // (a graph cache's rows idle on padding: the batch keeps its shape)
      for (size_t r = b * nb; r < b * nb + nb; ++r) from[r] = static_cast<int64_t>(r), token[r] = pad_, score[r] = score_[r];
      continue;
    }
    // No end token before min_new_tokens: its logit is −∞ before the log-softmax, as a logits processor sets it.
    const bool ends_allowed = static_cast<int64_t>(generated_[b * nb].size()) >= opt_.min_new_tokens;
    candidates.clear();
    candidates.reserve(nb * static_cast<size_t>(V));
    for (size_t k = 0; k < nb; ++k) {
      const float* row = logits.data<float>() + logits_row_[b * nb + k] * V;
      double mx = -INFINITY, sum = 0;
      for (int64_t v = 0; v < V; ++v)
        if (ends_allowed || !is_end(v)) mx = std::max<double>(mx, row[v]);
      for (int64_t v = 0; v < V; ++v)
        if (ends_allowed || !is_end(v)) sum += std::exp(row[v] - mx);
      const double lse = mx + std::log(sum);
      for (int64_t v = 0; v < V; ++v)
        if (ends_allowed || !is_end(v)) candidates.push_back({score_[b * nb + k] + row[v] - lse, static_cast<int64_t>(k), v});
    }
    // The best 2·num_beams, as Hugging Face takes: num_beams of them may end, the others run on (with more than
    // one end token, more may end: one more num_beams for each).
    const size_t keep = std::min(candidates.size(), nb * (1 + std::max<size_t>(opt_.eos_token_ids.size(), 1)));
    std::partial_sort(
        candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(keep), candidates.end(),
        [](const Candidate& x, const Candidate& y) { return x.s > y.s || (x.s == y.s && (x.k * 1000003 + x.v) < (y.k * 1000003 + y.v)); });
    size_t next = 0;
    for (size_t rank = 0; rank < keep && next < nb; ++rank) {
      const Candidate& c = candidates[rank];
      const size_t parent = b * nb + static_cast<size_t>(c.k);
      if (is_end(c.v)) {
        if (rank >= nb) continue;
        std::vector<int64_t> tokens = generated_[parent];
        tokens.push_back(c.v);
        add_hypothesis(hypotheses_[b], c.s, std::move(tokens));
        continue;
      }
      const size_t r = b * nb + next++;
      from[r] = static_cast<int64_t>(parent);
      token[r] = c.v;
      score[r] = c.s;
    }
    if (hypotheses_[b].size() >= nb) {
      const double best_running = normalized(score[b * nb], generated_[b * nb].size() + 1, opt_.length_penalty);
      if (opt_.early_stopping || hypotheses_[b].back().score >= best_running) prompt_done_[b] = 1;
    }
  }
  Rows generated(n);
  for (size_t r = 0; r < n; ++r) {
    generated[r] = generated_[static_cast<size_t>(from[r])];
    if (!was_done[r / nb]) generated[r].push_back(token[r]);
    score_[r] = score[r];
  }
  if (!ring_) {
    Rows seq(n), mask(n);
    for (size_t r = 0; r < n; ++r) {
      seq[r] = seq_[static_cast<size_t>(from[r])];
      mask[r] = mask_[static_cast<size_t>(from[r])];
      seq[r].push_back(token[r]);
      mask[r].push_back(1);
    }
    seq_.swap(seq);
    mask_.swap(mask);
    if (cache_) cache_->reorder(from);
  } else {
    move_ring_rows(from);
  }
  generated_.swap(generated);
  last_.resize(n);
  for (size_t r = 0; r < n; ++r)
    if (!was_done[r / nb]) last_[r] = token[r];
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (steps_++ == 0) {
    timing_.prefill_ms = ms;
  } else {
    timing_.decode_ms += ms;
    ++timing_.decode_steps;
  }
}

BeamSearch::Rows BeamSearch::best(int64_t count) const {
  if (count < 1 || count > nb_) fail("beam search: ", count, " sequences a prompt asked for; it keeps 1 to ", nb_, " (num_beams)");
  Rows out;
  for (size_t b = 0; b < static_cast<size_t>(B_); ++b) {
    std::vector<Hypothesis> h = hypotheses_[b];
    if (!prompt_done_[b])  // unfinished beams compete with finished hypotheses
      for (size_t r = b * static_cast<size_t>(nb_); r < (b + 1) * static_cast<size_t>(nb_); ++r)
        add_hypothesis(h, score_[r], generated_[r]);
    for (int64_t i = 0; i < count; ++i) {
      out.push_back(prompts_[b]);
      const auto& tokens = h[static_cast<size_t>(i)].tokens;
      out.back().insert(out.back().end(), tokens.begin(), tokens.end());
    }
  }
  return out;
}

GenerateResult BeamSearch::result() const {
  GenerateResult res = timing_;
  res.tokens = best(1);
  res.weight_bytes_per_token = g_.session_.weights().bytes_per_token();
  return res;
}

}  // namespace tern::llm
