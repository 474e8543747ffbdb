#include "llm/sampler.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tern::llm {

int64_t argmax(const float* v, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

void top_k_indices(const float* v, int64_t n, int64_t k, std::vector<int64_t>& ids) {
  ids.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
  const auto last = ids.begin() + std::clamp<int64_t>(k, 0, n);
  std::partial_sort(ids.begin(), last, ids.end(), [&](int64_t x, int64_t y) { return v[x] > v[y] || (v[x] == v[y] && x < y); });
  ids.erase(last, ids.end());
}

TokenLogprobs token_logprobs(const float* logits, int64_t n, int64_t token, int64_t top, std::vector<int64_t>& scratch) {
  // log softmax = logit − (max + log Σ exp(logit − max)), the sum in double: a 256k vocabulary's float sum
  // would lose the small terms.
  const float m = logits[argmax(logits, n)];
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - m);
  const double log_z = m + std::log(sum);
  TokenLogprobs r;
  r.token = token;
  r.logprob = static_cast<float>(logits[token] - log_z);
  if (top > 0) {
    top_k_indices(logits, n, top, scratch);
    for (int64_t id : scratch) r.top.emplace_back(id, static_cast<float>(logits[id] - log_z));
  }
  return r;
}

Sampler::Sampler(SamplingOptions o) : o_(o), rng_(o.seed) {
  auto need = [](bool ok, const char* flag, float v, const char* range) {
    if (!ok) fail(flag, " ", v, ": must be ", range);
  };
  // (Written so that NaN fails every check.)
  need(o.temperature >= 0.0f && std::isfinite(o.temperature), "--temperature", o.temperature, "a finite number >= 0 (0: greedy)");
  need(o.top_k >= 0, "--top-k", static_cast<float>(o.top_k), ">= 0 (0: off)");
  need(o.top_p > 0.0f && o.top_p <= 1.0f, "--top-p", o.top_p, "in (0, 1] (1: off)");
  need(o.min_p >= 0.0f && o.min_p <= 1.0f, "--min-p", o.min_p, "in [0, 1] (0: off)");
  need(o.repetition_penalty > 0.0f && std::isfinite(o.repetition_penalty), "--repetition-penalty", o.repetition_penalty,
       "a finite number > 0 (1: off)");
  need(o.frequency_penalty >= -2.0f && o.frequency_penalty <= 2.0f, "--frequency-penalty", o.frequency_penalty, "in [-2, 2] (0: off)");
  need(o.presence_penalty >= -2.0f && o.presence_penalty <= 2.0f, "--presence-penalty", o.presence_penalty, "in [-2, 2] (0: off)");
}

int64_t Sampler::next(const float* logits, int64_t n, const std::vector<int64_t>& history, int64_t draft) {
  scores_.assign(logits, logits + n);
  if (o_.repetition_penalty != 1.0f) {  // as HF: shrink positive scores, push negative ones further down
    seen_.assign(static_cast<size_t>(n), 0);
    for (int64_t t : history)
      if (t >= 0 && t < n && !seen_[static_cast<size_t>(t)]++) {
        float& l = scores_[static_cast<size_t>(t)];
        l = l > 0 ? l / o_.repetition_penalty : l * o_.repetition_penalty;
      }
  }
  if (o_.frequency_penalty != 0.0f || o_.presence_penalty != 0.0f) {
    // Counted over the history and zeroed again the same way: O(history) a step, not O(vocabulary).
    if (count_.size() != static_cast<size_t>(n)) count_.assign(static_cast<size_t>(n), 0);
    for (int64_t t : history)
      if (t >= 0 && t < n) ++count_[static_cast<size_t>(t)];
    for (int64_t t : history)
      if (t >= 0 && t < n && count_[static_cast<size_t>(t)] > 0) {
        const auto c = static_cast<size_t>(t);
        scores_[c] -= o_.frequency_penalty * static_cast<float>(count_[c]) + o_.presence_penalty;
        count_[c] = 0;  // (once per token; all zero again after the loop)
      }
  }
  if (o_.greedy || o_.temperature <= 0.0f) return argmax(scores_.data(), n);
  for (float& l : scores_) l /= o_.temperature;
  // Candidates: tokens within 50 of the best score. A token further down has exp(−50) ≈ 2e-22 times the
  // best one's weight, under half an ulp of every sum it would join, so leaving it out changes no
  // candidate's probability — and saves sorting 100k+ entries per token.
  const float best = scores_[static_cast<size_t>(argmax(scores_.data(), n))];
  order_.clear();
  for (int64_t i = 0; i < n; ++i)
    if (scores_[static_cast<size_t>(i)] >= best - 50.0f) order_.push_back(i);
  const auto better = [&](int64_t a, int64_t b) {  // higher score first, then lower id (a stable order)
    const float x = scores_[static_cast<size_t>(a)], y = scores_[static_cast<size_t>(b)];
    return x > y || (x == y && a < b);
  };
  if (o_.top_k > 0 && static_cast<size_t>(o_.top_k) < order_.size()) {
    std::partial_sort(order_.begin(), order_.begin() + o_.top_k, order_.end(), better);
    order_.resize(static_cast<size_t>(o_.top_k));
  } else {
    std::sort(order_.begin(), order_.end(), better);
  }
  size_t keep = order_.size();
  const float mx = scores_[static_cast<size_t>(order_[0])];
  p_.resize(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += p_[i] = std::exp(static_cast<double>(scores_[static_cast<size_t>(order_[i])] - mx));
  for (double& x : p_) x /= sum;
  if (o_.min_p > 0.0f) {  // drop tokens below min_p × the top probability
    size_t k = 1;
    while (k < keep && p_[k] >= o_.min_p * p_[0]) ++k;
    keep = k;
  }
  if (o_.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p
    double acc = 0;
    size_t k = 0;
    while (k < keep) {
      acc += p_[k++];
      if (acc >= o_.top_p) break;
    }
    keep = std::max<size_t>(k, 1);
  }
  double mass = 0;
  for (size_t i = 0; i < keep; ++i) mass += p_[i];
  if (const auto d = std::find(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(keep), draft);
      d != order_.begin() + static_cast<std::ptrdiff_t>(keep)) {
    double& pd = p_[static_cast<size_t>(d - order_.begin())];
    if (std::uniform_real_distribution<double>(0.0, mass)(rng_) < pd) return draft;
    mass -= pd;  // rejected: drawn from the rest
    pd = 0;
    if (mass <= 0) return draft;  // (nothing else left: p(draft) was 1 but for rounding)
  }
  double u = std::uniform_real_distribution<double>(0.0, mass)(rng_);
  size_t last = 0;  // (the last candidate left: a rejected draft's probability is 0)
  for (size_t i = 0; i < keep; ++i) {
    if (p_[i] <= 0) continue;
    u -= p_[i];
    last = i;
    if (u <= 0) return order_[i];
  }
  return order_[last];
}

}  // namespace tern::llm
