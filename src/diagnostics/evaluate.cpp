#include "diagnostics/evaluate.h"

#include <algorithm>
#include <cmath>

#include "llm/decoder_io.h"
#include "llm/kv_cache.h"

namespace tern::llm {

double Perplexity::perplexity() const { return std::exp(mean_nll); }

Perplexity perplexity(Session& session, const std::vector<int64_t>& ids, int64_t context, bool second_half, int64_t bos,
                      const Progress& progress) {
  const DecoderIO io = detect_decoder_io(session);
  if (io.layout == PastLayout::Internal) fail("perplexity needs the graph's own cache (load without a ring window)");
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
    std::vector<int64_t> positions(static_cast<size_t>(n)), ones(static_cast<size_t>(n), 1);
    for (int64_t i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = i;
    std::vector<std::pair<std::string, Tensor>> feeds;
    auto ints = [&](const std::vector<int64_t>& v) { return cast_to(Tensor::from_vector<int64_t>(v, {1, n}), io.ids_dtype); };
    feeds.emplace_back(io.input_ids, ints(window));
    if (!io.attention_mask.empty()) feeds.emplace_back(io.attention_mask, ints(ones));
    if (!io.position_ids.empty()) feeds.emplace_back(io.position_ids, ints(positions));
    KvCache(io, 1).add_feeds(feeds);  // an empty past
    const Tensor logits = cast_to(session.run(feeds).at(io.logits), DType::Float32);
    if (logits.rank() != 3 || logits.dim(1) != n)
      fail("perplexity needs logits for every position; the graph gives ", shape_str(logits.shape()));
    const int64_t V = logits.dim(2);
    for (int64_t i = second_half ? context / 2 : 0; i + 1 < n; ++i) {  // log-softmax of position i at the next token
      const float* row = logits.data<float>() + i * V;
      const int64_t next = window[static_cast<size_t>(i + 1)];
      if (next < 0 || next >= V) fail("token id ", next, " is outside the vocabulary of ", V);
      const float mx = *std::max_element(row, row + V);
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v] - mx));
      nll += std::log(sum) + mx - row[next];
      ++r.predictions;
    }
  }
  if (progress) progress(windows, windows);
  if (r.predictions == 0) fail("the text has no whole window of ", context, " tokens to score");
  r.mean_nll = nll / static_cast<double>(r.predictions);
  return r;
}

}  // namespace tern::llm
