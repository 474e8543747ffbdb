#include "llm/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tern::llm {

int64_t argmax(const float* v, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

int64_t Sampler::next(std::vector<float> logits, const std::vector<int64_t>& history) {
  const int64_t n = static_cast<int64_t>(logits.size());
  if (o_.repetition_penalty != 1.0f) {  // as HF: shrink positive scores, push negative ones further down
    std::vector<char> seen(logits.size(), 0);
    for (int64_t t : history)
      if (t >= 0 && t < n && !seen[static_cast<size_t>(t)]++) {
        float& l = logits[static_cast<size_t>(t)];
        l = l > 0 ? l / o_.repetition_penalty : l * o_.repetition_penalty;
      }
  }
  if (o_.greedy || o_.temperature <= 0.0f) return argmax(logits.data(), n);
  for (float& l : logits) l /= o_.temperature;
  std::vector<int64_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)]; });
  size_t keep = order.size();
  if (o_.top_k > 0) keep = std::min(keep, static_cast<size_t>(o_.top_k));
  const float mx = logits[static_cast<size_t>(order[0])];
  std::vector<double> p(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += p[i] = std::exp(static_cast<double>(logits[static_cast<size_t>(order[i])] - mx));
  for (double& x : p) x /= sum;
  if (o_.min_p > 0.0f) {  // drop tokens below min_p × the top probability
    size_t k = 1;
    while (k < keep && p[k] >= o_.min_p * p[0]) ++k;
    keep = k;
  }
  if (o_.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p
    double acc = 0;
    size_t k = 0;
    while (k < keep) {
      acc += p[k++];
      if (acc >= o_.top_p) break;
    }
    keep = std::max<size_t>(k, 1);
  }
  double mass = 0;
  for (size_t i = 0; i < keep; ++i) mass += p[i];
  double u = std::uniform_real_distribution<double>(0.0, mass)(rng_);
  for (size_t i = 0; i < keep; ++i) {
    u -= p[i];
    if (u <= 0) return order[i];
  }
  return order[keep - 1];
}

}  // namespace tern::llm
