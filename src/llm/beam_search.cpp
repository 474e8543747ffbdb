// Beam search with Hugging Face's semantics: num_beams rows per prompt (all but the first start at
// -1e9 so the first step does not pick duplicates); each step scores beam + log-softmax for every
// token, takes the best 2·num_beams candidates, turns candidates ending in EOS (among the first
// num_beams) into finished hypotheses and keeps the best num_beams others running. A hypothesis
// scores sum_logprobs / generated_length^length_penalty. A prompt is done when num_beams hypotheses
// exist and (early_stopping, or) no running beam can still beat the worst of them.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "llm/generator.h"

namespace tern::llm {

namespace {
struct Hypothesis {
  double score;
  std::vector<int64_t> tokens;  // generated tokens, EOS included when it ended the hypothesis
};

double normalized(double sum_logprobs, size_t length, float penalty) {
  return sum_logprobs / std::pow(static_cast<double>(std::max<size_t>(length, 1)), penalty);
}
}  // namespace

GenerateResult Generator::beam_search(const Rows& prompts, const GenerateOptions& opt) {
  const int64_t B = static_cast<int64_t>(prompts.size()), nb = opt.num_beams;
  const bool cached = opt.use_cache && io_.layout != PastLayout::None;
  const int64_t pad = pad_id();
  Rows padded, padded_mask, seq, mask;
  left_pad(prompts, pad, padded, padded_mask);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < nb; ++k) {
      seq.push_back(padded[static_cast<size_t>(b)]);
      mask.push_back(padded_mask[static_cast<size_t>(b)]);
    }
  std::vector<double> beam_score(static_cast<size_t>(B * nb), -1e9);
  for (int64_t b = 0; b < B; ++b) beam_score[static_cast<size_t>(b * nb)] = 0;
  Rows generated(static_cast<size_t>(B * nb));
  std::vector<std::vector<Hypothesis>> hyps(static_cast<size_t>(B));
  std::vector<char> done(static_cast<size_t>(B), 0);
  auto is_eos = [&](int64_t t) { return std::find(opt.eos_token_ids.begin(), opt.eos_token_ids.end(), t) != opt.eos_token_ids.end(); };
  auto add_hyp = [&](size_t b, double score, std::vector<int64_t> toks) {
    auto& h = hyps[b];
    h.push_back({normalized(score, toks.size(), opt.length_penalty), std::move(toks)});
    std::sort(h.begin(), h.end(), [](const Hypothesis& x, const Hypothesis& y) { return x.score > y.score; });
    if (h.size() > static_cast<size_t>(nb)) h.pop_back();
  };

  KvCache cache(io_, B * nb);
  GenerateResult res;
  res.prompt_tokens = static_cast<int64_t>(padded[0].size()) * B;
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < opt.max_new_tokens; ++step) {
    Tensor logits = forward(seq, mask, cached ? &cache : nullptr, opt.prefill_chunk);
    const int64_t V = logits.dim(1);
    if (step == 0) {
      res.prefill_logits = Tensor(DType::Float32, {B, V});
      for (int64_t b = 0; b < B; ++b) std::copy_n(logits.data<float>() + b * nb * V, V, res.prefill_logits.data<float>() + b * V);
    }
    std::vector<int64_t> src(static_cast<size_t>(B * nb)), token(static_cast<size_t>(B * nb));
    std::vector<double> score(static_cast<size_t>(B * nb));
    for (int64_t b = 0; b < B; ++b) {
      if (done[static_cast<size_t>(b)]) {  // keep shapes: the rows idle on padding
        for (int64_t k = 0; k < nb; ++k) {
          const size_t r = static_cast<size_t>(b * nb + k);
          src[r] = static_cast<int64_t>(r);
          token[r] = pad;
          score[r] = beam_score[r];
        }
        continue;
      }
      struct Cand {
        double s;
        int64_t k, v;
      };
      std::vector<Cand> cands;
      cands.reserve(static_cast<size_t>(nb * V));
      for (int64_t k = 0; k < nb; ++k) {
        const float* row = logits.data<float>() + (b * nb + k) * V;
        double mx = row[0], sum = 0;
        for (int64_t v = 1; v < V; ++v) mx = std::max<double>(mx, row[v]);
        for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - mx);
        const double lse = mx + std::log(sum);
        for (int64_t v = 0; v < V; ++v) cands.push_back({beam_score[static_cast<size_t>(b * nb + k)] + row[v] - lse, k, v});
      }
      const size_t keep = std::min<size_t>(cands.size(), static_cast<size_t>(2 * nb));
      std::partial_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(keep), cands.end(), [](const Cand& x, const Cand& y) {
        return x.s > y.s || (x.s == y.s && (x.k * 1000003 + x.v) < (y.k * 1000003 + y.v));
      });
      int64_t next = 0;
      for (size_t rank = 0; rank < keep && next < nb; ++rank) {
        const Cand& c = cands[rank];
        const size_t from = static_cast<size_t>(b * nb + c.k);
        if (is_eos(c.v)) {
          if (rank >= static_cast<size_t>(nb)) continue;
          std::vector<int64_t> toks = generated[from];
          toks.push_back(c.v);
          add_hyp(static_cast<size_t>(b), c.s, std::move(toks));
          continue;
        }
        const size_t r = static_cast<size_t>(b * nb + next++);
        src[r] = static_cast<int64_t>(from);
        token[r] = c.v;
        score[r] = c.s;
      }
      if (hyps[static_cast<size_t>(b)].size() >= static_cast<size_t>(nb)) {
        const double best_running =
            normalized(score[static_cast<size_t>(b * nb)], generated[static_cast<size_t>(b * nb)].size() + 1, opt.length_penalty);
        if (opt.early_stopping || hyps[static_cast<size_t>(b)].back().score >= best_running) done[static_cast<size_t>(b)] = 1;
      }
    }
    Rows seq2(seq.size()), mask2(mask.size()), gen2(generated.size());
    for (size_t r = 0; r < seq.size(); ++r) {
      const size_t s = static_cast<size_t>(src[r]);
      seq2[r] = seq[s];
      mask2[r] = mask[s];
      gen2[r] = generated[s];
      seq2[r].push_back(token[r]);
      mask2[r].push_back(1);
      if (!done[r / static_cast<size_t>(nb)] || token[r] != pad) gen2[r].push_back(token[r]);
      beam_score[r] = score[r];
    }
    seq.swap(seq2);
    mask.swap(mask2);
    generated.swap(gen2);
    if (cached) cache.reorder(src);
    if (step == 0) {
      res.prefill_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      t0 = std::chrono::steady_clock::now();
    } else {
      ++res.decode_steps;
    }
    if (std::all_of(done.begin(), done.end(), [](char d) { return d != 0; })) break;
  }
  res.decode_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (int64_t b = 0; b < B; ++b) {  // unfinished beams compete with finished hypotheses
    if (!done[static_cast<size_t>(b)])
      for (int64_t k = 0; k < nb; ++k)
        add_hyp(static_cast<size_t>(b), beam_score[static_cast<size_t>(b * nb + k)], generated[static_cast<size_t>(b * nb + k)]);
    std::vector<int64_t> out = prompts[static_cast<size_t>(b)];
    const auto& best = hyps[static_cast<size_t>(b)].front().tokens;
    out.insert(out.end(), best.begin(), best.end());
    res.tokens.push_back(std::move(out));
  }
  return res;
}

}  // namespace tern::llm
