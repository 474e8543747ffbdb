#include "diagnostics/evaluate.h"

#include <algorithm>
#include <cmath>

namespace tern::llm {

double Perplexity::perplexity() const { return std::exp(mean_nll); }

Perplexity perplexity(Generator& generator, const std::vector<int64_t>& ids, int64_t context, bool second_half, int64_t bos,
                      const Progress& progress, int64_t chunk) {
  if (context < 2) fail("perplexity needs a context of at least 2 tokens");
  if (ids.size() < 2) fail("perplexity needs at least 2 tokens of text");
  Perplexity r;
  double nll = 0;
  const auto windows = static_cast<int64_t>((ids.size() - 1 + static_cast<size_t>(context) - 1) / static_cast<size_t>(context));
  for (size_t start = 0; start + 1 < ids.size(); start += static_cast<size_t>(context)) {
    if (progress) progress(static_cast<int64_t>(start) / context, windows);
    const int64_t n = std::min<int64_t>(context, static_cast<int64_t>(ids.size() - start));
    if (n < 2 || (second_half && n < context)) break;
    std::vector<int64_t> window(ids.begin() + static_cast<std::ptrdiff_t>(start), ids.begin() + static_cast<std::ptrdiff_t>(start) + n);
    if (second_half && bos >= 0) window[0] = bos;  // (its prediction is never scored)
    const int64_t first_scored = second_half ? context / 2 : 0;
    generator.score(window, chunk > 0 ? chunk : n, [&](int64_t at, const Tensor& logits) {
      const int64_t V = logits.dim(logits.rank() - 1), rows = static_cast<int64_t>(logits.numel()) / V;
      for (int64_t i = std::max(at, first_scored); i < at + rows && i + 1 < n; ++i) {  // log-softmax of position i at the next token
        const float* row = logits.data<float>() + (i - at) * V;
        const int64_t next = window[static_cast<size_t>(i + 1)];
        if (next < 0 || next >= V) fail("token id ", next, " is outside the vocabulary of ", V);
        const float mx = *std::max_element(row, row + V);
        double sum = 0;
        for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v] - mx));
        nll += std::log(sum) + mx - row[next];
        ++r.predictions;
      }
    });
  }
  if (progress) progress(windows, windows);
  if (r.predictions == 0) fail("the text has no whole window of ", context, " tokens to score");
  r.mean_nll = nll / static_cast<double>(r.predictions);
  return r;
}

}  // namespace tern::llm
