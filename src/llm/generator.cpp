#include "llm/generator.h"

#include "llm/beam_search.h"
#include "llm/draft_model.h"
#include "llm/speculation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace tern::llm {
namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Appends row's n highest logits, highest first (ties: lower id first), to sequence b's steps; `ids` is
// scratch kept across steps.
void record_top_logits(const float* row, int64_t V, int64_t n, GenerateResult& res, int64_t b, std::vector<int64_t>& ids) {
  if (res.top_logits.size() <= static_cast<size_t>(b)) res.top_logits.resize(static_cast<size_t>(b) + 1);
  top_k_indices(row, V, n, ids);
  auto& step = res.top_logits[static_cast<size_t>(b)].emplace_back();
  for (int64_t id : ids) step.emplace_back(id, row[id]);
}
}  // namespace

Generator::Generator(Session& session, ModelConfig config)
    : session_(session), sequence_(session.new_sequence()), config_(std::move(config)), io_(detect_decoder_io(session)) {
  // The vocabulary bounds every token id the generator accepts: the config's claim must be the weights' own.
  if (config_.vocab_size > 0 && io_.vocab > 0 && config_.vocab_size != io_.vocab)
    fail(session.model().path, ": the config's vocab_size ", config_.vocab_size, " does not match the ", io_.vocab,
         " logits the model computes");
  if (config_.vocab_size == 0) config_.vocab_size = io_.vocab;
}

void Generator::set_feed(size_t slot, const std::string& name, const std::vector<int64_t>& values, int64_t rows, int64_t cols) {
  if (feeds_.size() <= slot) feeds_.resize(slot + 1);
  auto& [feed_name, t] = feeds_[slot];
  if (feed_name != name) feed_name = name;
  if (!t.defined() || t.buffer().use_count() > 2 || !t.has_shape({rows, cols}))  // held by us and the session's last run only
    t = Tensor(io_.ids_dtype, {rows, cols});
  if (io_.ids_dtype == DType::Int64) std::copy(values.begin(), values.end(), t.data<int64_t>());
  else std::transform(values.begin(), values.end(), t.data<int32_t>(), [](int64_t v) { return static_cast<int32_t>(v); });
}

void Generator::set_flag_feeds(size_t& slot, int64_t logits_rows) {
  if (!io_.use_cache_branch.empty()) {
    if (feeds_.size() <= slot) feeds_.resize(slot + 1);
    if (feeds_[slot].first != io_.use_cache_branch) feeds_[slot] = {io_.use_cache_branch, Tensor::from_vector<bool>({true}, {1})};
    ++slot;
  }
  if (!io_.logits_positions.empty()) {
    if (feeds_.size() <= slot) feeds_.resize(slot + 1);
    auto& [name, t] = feeds_[slot++];
    if (name != io_.logits_positions || t.buffer().use_count() > 2 || !t.has_shape({logits_rows})) {
      name = io_.logits_positions;
      t = Tensor(DType::Int64, {logits_rows});
      for (int64_t i = 0; i < logits_rows; ++i) t.data<int64_t>()[i] = i - logits_rows;  // the last logits_rows positions
    }
  }
}

void Generator::check_request(const Rows& prompts, const GenerateOptions& opt) const {
  if (prompts.empty()) fail("nothing to generate from: no prompts");
  const int64_t V = config_.vocab_size;
  if (opt.max_new_tokens < 0) fail("--max-new-tokens ", opt.max_new_tokens, ": must not be negative");
  if (opt.min_new_tokens < 0) fail("--min-new-tokens ", opt.min_new_tokens, ": must not be negative");
  if (opt.prefill_chunk < kAutoPrefillChunk)
    fail("--prefill-chunk ", opt.prefill_chunk, ": must not be negative (0: the whole prompt; left out: ", kDefaultPrefillChunk,
         " on the ring cache)");
  if (opt.num_beams < 1 || (V > 0 && opt.num_beams > V))  // each beam ends in a token of its own
    fail("--num-beams ", opt.num_beams, ": must be at least 1 and at most the vocabulary (", V, ")");
  if (!std::isfinite(opt.length_penalty)) fail("--length-penalty ", opt.length_penalty, ": must be finite");
  if (opt.top_logits < 0 || (V > 0 && opt.top_logits > V))
    fail("--top-logits ", opt.top_logits, ": must be between 0 and the vocabulary (", V, ")");
  Sampler{opt.sampling};  // its options' check
  if (opt.constraint && (prompts.size() != 1 || opt.num_beams > 1)) fail_unsupported("a JSON constraint on more than one sequence");
  if (opt.speculation.drafts < 0 || opt.speculation.ngram < 1) fail("speculation: drafts must be >= 0 and ngram >= 1");
  if (opt.speculation.drafts > 0) {
    if (prompts.size() != 1 || opt.num_beams > 1) fail_unsupported("--speculate on more than one sequence or with beams");
    if (!opt.use_cache || io_.layout != PastLayout::Internal)
      fail_unsupported(
          "--speculate needs the ring-buffer KV cache, which this model's attention did not take (or --window 0 / "
          "--no-cache was given): rejected drafts are rolled back on the ring");
  }
  int64_t longest = 0;
  for (const auto& p : prompts) {
    if (p.empty()) fail("a prompt has no tokens (add BOS or text)");
    for (int64_t t : p)
      if (t < 0 || (V > 0 && t >= V)) fail("token id ", t, " is outside the vocabulary of ", V);
    longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  }
  if (opt.prefill_chunk > 0 && (!opt.use_cache || io_.layout == PastLayout::None))
    fail("--prefill-chunk needs a KV cache (the model has none, or --no-cache was given)");
  // (A chunk past a shorter prompt's end would hold only its padding, which GroupQueryAttention writes over its keys.)
  if (opt.prefill_chunk > 0 && io_.prompts_right_padded &&
      std::any_of(prompts.begin(), prompts.end(), [&](const auto& p) { return p.size() != prompts[0].size(); }))
    fail_unsupported(
        "--prefill-chunk with prompts of different lengths on GroupQueryAttention's own cache: run with a window "
        "(the ring cache), or without --prefill-chunk");
  if (io_.layout == PastLayout::Internal) {  // a sliding window re-bases positions: no context limit
    if (!opt.use_cache) fail("--no-cache cannot be used with a ring-buffer cache (--window)");
    return;
  }
  // (Compared as room left, not as a sum: --max-new-tokens may be near INT64_MAX.)
  if (io_.cache_capacity > 0 && opt.max_new_tokens > io_.cache_capacity - longest)
    fail("prompt of ", longest, " tokens plus ", opt.max_new_tokens, " new tokens exceeds the ", io_.cache_capacity,
         " positions of the model's static cache ('", io_.past[0], "')");
  if (config_.context_length > 0 && opt.max_new_tokens > config_.context_length - longest)
    fail("prompt of ", longest, " tokens plus ", opt.max_new_tokens, " new tokens exceeds the context length ", config_.context_length,
         " of the model");
}

int64_t Generator::prefill_chunk(const GenerateOptions& opt) const {
  if (opt.prefill_chunk != kAutoPrefillChunk) return opt.prefill_chunk;
  return io_.layout == PastLayout::Internal ? kDefaultPrefillChunk : 0;
}

void Generator::check_cache_memory(int64_t rows, int64_t longest, const GenerateOptions& opt) const {
  if (!opt.use_cache || io_.layout == PastLayout::None) return;
  const int64_t new_tokens = std::min(opt.max_new_tokens, std::numeric_limits<int64_t>::max() - longest);
  double need = 0;  // (in double: a sliding window may be asked for INT64_MAX new tokens)
  if (io_.layout == PastLayout::Internal) {
    need = static_cast<double>(session_.state_peak_bytes(rows, longest + new_tokens) - sequence_->held_bytes());
  } else {
    const double position = static_cast<double>(io_.kv_heads * io_.head_size) * static_cast<double>(dtype_size(io_.cache_dtype)) *
                            static_cast<double>(io_.past.size()) * (io_.layout == PastLayout::Stacked ? 2 : 1);
    const double positions = io_.cache_capacity > 0 ? static_cast<double>(io_.cache_capacity) : static_cast<double>(longest + new_tokens);
    need = 2 * static_cast<double>(rows) * positions * position;  // the past a step reads beside the present it writes
  }
  // (The pool keeps what the prefill takes while the rings grow: the two add up.)
  const size_t activations = forecast_activations(rows, longest, opt).pool_growth;
  if (need <= 0 && activations == 0) return;
  const auto cache = static_cast<size_t>(std::clamp(need, 0.0, 9e18));
  const size_t bytes = cache > SIZE_MAX - activations ? SIZE_MAX : cache + activations;
  MemoryScope charge(session_.memory_account());
  auto chunk_said = [&](const GenerateOptions& o) {  // (a cap refusing says what the prompt's chunking takes)
    const int64_t chunk = prefill_chunk(o);
    return chunk > 0 && chunk < longest ? "the prompt in chunks of " + std::to_string(chunk) + ": a smaller --prefill-chunk takes less"
                                        : std::string("the prompt in one run: --prefill-chunk 512 takes less");
  };
  try {
    check_host_bytes(bytes, "");
  } catch (...) {  // (the message made only when it is needed)
    rethrow_prefixed(detail::concat(
        new_tokens, " new tokens after a prompt of ", longest, " (", rows, rows == 1 ? " row" : " rows", ") would hold ",
        memory_size(cache), " more of KV cache at the last",
        activations ? " and " + memory_size(activations) + " more of activations (forecast, " + chunk_said(opt) + ")" : "", ": "));
  }
}

ActivationForecast::Result Generator::forecast_activations(int64_t rows, int64_t longest, const GenerateOptions& opt) const {
  return session_.forecast_activations(run_shapes(rows, longest, opt));
}

std::vector<std::vector<std::pair<std::string, Shape>>> Generator::run_shapes(int64_t rows, int64_t longest,
                                                                              const GenerateOptions& opt) const {
  std::vector<std::vector<std::pair<std::string, Shape>>> runs;
  if (io_.layout != PastLayout::Internal) return runs;
  // The feeds forward() makes for `n` new tokens of `total`.
  auto step = [&](int64_t n, int64_t total) {
    std::vector<std::pair<std::string, Shape>> shapes{{io_.input_ids, {rows, n}}};
    if (!io_.attention_mask.empty()) shapes.push_back({io_.attention_mask, {rows, mask_columns(n, total)}});
    if (!io_.position_ids.empty()) shapes.push_back({io_.position_ids, {rows, n}});
    if (!io_.use_cache_branch.empty()) shapes.push_back({io_.use_cache_branch, {1}});
    if (!io_.logits_positions.empty()) shapes.push_back({io_.logits_positions, {1}});
    return shapes;
  };
  // The prompt's chunks (forward()), then decode steps: three of a kind show all a session does with them (the
  // first runs, the second makes a step plan, the third replays it), and a chunk's mask may grow, so the first
  // and last three.
  const int64_t asked = prefill_chunk(opt), chunk = asked > 0 ? asked : longest, chunks = (longest + chunk - 1) / chunk;
  for (int64_t c = 0; c < chunks; ++c) {
    if (c == 3 && chunks > 6) c = chunks - 3;
    const int64_t upto = std::min(longest, (c + 1) * chunk);
    runs.push_back(step(upto - c * chunk, upto));
  }
  for (int64_t t = 1; t < std::min<int64_t>(opt.max_new_tokens, 4); ++t) runs.push_back(step(1, longest + t));
  return runs;
}

int64_t Generator::pad_id() const {
  return config_.pad_token_id >= 0 ? config_.pad_token_id : !config_.eos_token_ids.empty() ? config_.eos_token_ids[0] : 0;
}

void pad_prompts(const std::vector<std::vector<int64_t>>& prompts, int64_t pad, bool right, std::vector<std::vector<int64_t>>& seq,
                 std::vector<std::vector<int64_t>>& mask) {
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  seq.clear();
  mask.clear();
  for (const auto& p : prompts) {
    const auto at = right ? 0 : static_cast<std::ptrdiff_t>(longest - p.size());
    std::vector<int64_t> s(longest, pad), m(longest, 0);
    std::copy(p.begin(), p.end(), s.begin() + at);
    std::fill_n(m.begin() + at, p.size(), 1);
    seq.push_back(std::move(s));
    mask.push_back(std::move(m));
  }
}

const Tensor& Generator::forward(const Rows& seq, const Rows& mask, KvCache* cache, int64_t chunk, int64_t logits_rows) {
  const int64_t full = static_cast<int64_t>(seq[0].size());
  // A long prompt goes through in chunks: each run feeds at most `chunk` positions the cache lacks.
  while (chunk > 0 && cache && full - cache->length() > chunk) {
    Rows s(seq.size()), m(mask.size());
    const size_t upto = static_cast<size_t>(cache->length() + chunk);
    for (size_t b = 0; b < seq.size(); ++b) {
      s[b].assign(seq[b].begin(), seq[b].begin() + static_cast<std::ptrdiff_t>(upto));
      m[b].assign(mask[b].begin(), mask[b].begin() + static_cast<std::ptrdiff_t>(upto));
    }
    forward(s, m, cache, 0);
  }
  const int64_t B = static_cast<int64_t>(seq.size());
  const int64_t total = full;
  const int64_t first = cache ? cache->length() : 0;  // first position this run computes
  const int64_t n = total - first;
  std::vector<int64_t>&ids = step_ids_, &m = step_mask_, &pos = step_pos_, &last = step_last_;
  ids.clear();
  m.clear();
  pos.clear();
  last.assign(static_cast<size_t>(B), n - 1);
  for (int64_t b = 0; b < B; ++b) {
    const auto& mb = mask[static_cast<size_t>(b)];
    int64_t p = -1;  // position = (real tokens so far) − 1; padding gets 1
    for (int64_t t = 0; t < total; ++t) {
      p += mb[static_cast<size_t>(t)];
      if (t >= first) {
        ids.push_back(seq[static_cast<size_t>(b)][static_cast<size_t>(t)]);
        pos.push_back(mb[static_cast<size_t>(t)] ? p : 1);
        if (mb[static_cast<size_t>(t)]) last[static_cast<size_t>(b)] = t - first;  // (right padding: before the run's end)
      }
    }
    m.insert(m.end(), mb.begin() + (io_.mask_new_tokens_only ? first : 0), mb.end());
  }
  // Feeds reuse last step's tensors when their shapes match: a decode step allocates nothing here.
  size_t slot = 0;
  set_feed(slot++, io_.input_ids, ids, B, n);
  if (!io_.attention_mask.empty()) set_feed(slot++, io_.attention_mask, m, B, mask_columns(n, total));
  if (!io_.position_ids.empty()) set_feed(slot++, io_.position_ids, pos, B, n);
  set_flag_feeds(slot, logits_rows);
  feeds_.resize(slot);
  if (cache) cache->add_feeds(feeds_);
  else if (io_.layout != PastLayout::None) KvCache(io_, B).add_feeds(feeds_);  // empty past every step
  if (io_.layout == PastLayout::Internal) sequence_->set_batch_rows({}, 0);    // (after a continuous batch) row b is b
  return run_feeds(B, cache, n, logits_rows);
}

const Tensor& Generator::run_rows(const Rows& new_tokens, const std::vector<int64_t>& held, const std::vector<int64_t>& rows,
                                  int64_t total_rows, int64_t logits_rows) {
  if (io_.layout != PastLayout::Internal)
    fail_unsupported("continuous batching needs the ring-buffer cache (a window), which this model's attention did not take");
  if (!io_.attention_mask.empty() && !io_.mask_new_tokens_only)
    fail_unsupported("continuous batching: the model's attention_mask is read by more than the ring-buffer attention");
  const int64_t B = static_cast<int64_t>(rows.size());
  int64_t n = logits_rows;
  for (int64_t b = 0; b < B; ++b) n = std::max<int64_t>(n, static_cast<int64_t>(new_tokens[static_cast<size_t>(b)].size()));
  const int64_t pad = pad_id();
  std::vector<int64_t>&ids = step_ids_, &m = step_mask_, &pos = step_pos_;
  step_last_.clear();  // (rows right-aligned: each one's last token is the last position)
  ids.assign(static_cast<size_t>(B * n), pad);
  m.assign(static_cast<size_t>(B * n), 0);
  pos.assign(static_cast<size_t>(B * n), 1);  // padding gets position 1, as in forward()
  for (int64_t b = 0; b < B; ++b) {
    const auto& t = new_tokens[static_cast<size_t>(b)];
    const int64_t k = static_cast<int64_t>(t.size()), at = b * n + n - k;  // right-aligned
    for (int64_t i = 0; i < k; ++i) {
      ids[static_cast<size_t>(at + i)] = t[static_cast<size_t>(i)];
      m[static_cast<size_t>(at + i)] = 1;
      pos[static_cast<size_t>(at + i)] = held[static_cast<size_t>(b)] + i;
    }
  }
  size_t slot = 0;
  set_feed(slot++, io_.input_ids, ids, B, n);
  if (!io_.attention_mask.empty()) set_feed(slot++, io_.attention_mask, m, B, n);
  if (!io_.position_ids.empty()) set_feed(slot++, io_.position_ids, pos, B, n);
  set_flag_feeds(slot, logits_rows);
  feeds_.resize(slot);
  sequence_->set_batch_rows(rows, total_rows);
  return run_feeds(B, nullptr, n, logits_rows);
}

const Tensor& Generator::extend(const std::vector<int64_t>& tokens, KvCache* cache) {
  return forward({tokens}, {std::vector<int64_t>(tokens.size(), 1)}, cache);
}

const Tensor& Generator::prefill_output(const Rows& prompts, const std::string& output) {
  GenerateOptions none;
  none.max_new_tokens = 0;
  check_request(prompts, none);
  if (io_.layout == PastLayout::Internal) sequence_->reset();
  Rows seq, mask;
  pad_prompts(prompts, pad_id(), io_.prompts_right_padded, seq, mask);
  forward(seq, mask, nullptr);
  return step_out_.at(output);
}

void Generator::score(const std::vector<int64_t>& tokens, int64_t chunk, const std::function<void(int64_t, const Tensor&)>& take) {
  if (chunk < 1) fail("score: chunks of ", chunk, " positions");
  if (io_.layout == PastLayout::Internal) sequence_->reset();
  KvCache cache(io_, 1);
  const auto n = static_cast<int64_t>(tokens.size());
  for (int64_t at = 0; at < n; at += chunk) {
    const int64_t upto = std::min(n, at + chunk);
    const Rows seq{std::vector<int64_t>(tokens.begin(), tokens.begin() + upto)}, mask{std::vector<int64_t>(static_cast<size_t>(upto), 1)};
    const Tensor& logits = forward(seq, mask, &cache, 0, upto - at);  // ([1, vocab] for a run of one: the same rows)
    take(at, logits);
  }
}

const Tensor& Generator::run_feeds(int64_t B, KvCache* cache, int64_t n, int64_t logits_rows) {
  session_.run(feeds_, step_out_, sequence_.get());
  const Outputs& out = step_out_;
  if (cache) cache->update(out, n);
  const Tensor& given = out.at(io_.logits);
  if (sequence_->device_top_k() > 0) {  // only the best scores came back: the others are as good as never
    const int64_t V = given.dim(2);
    if (last_.buffer().use_count() != 1 || !last_.has_shape({1, V})) last_ = Tensor(DType::Float32, {1, V});
    float* row = last_.data<float>();
    std::fill(row, row + V, -std::numeric_limits<float>::infinity());
    const auto& ids = sequence_->top_k_ids();
    const auto& values = sequence_->top_k_values();
    for (size_t j = 0; j < ids.size(); ++j)
      if (ids[j] >= 0) row[ids[j]] = ids.size() == 1 ? 0.0f : values[j];
    return last_;
  }
  const bool f32 = given.dtype() == DType::Float32;
  const Tensor converted = f32 ? Tensor() : cast_to(given, DType::Float32);  // (no copy of fp32 logits)
  const Tensor& logits = f32 ? given : converted;
  const int64_t S = logits.dim(1), V = logits.dim(2);
  if (logits_rows > 1) {  // each row's last positions (speculative steps, scoring; rows right-aligned or one)
    if (logits.rank() != 3 || S < logits_rows)
      fail("the model gives logits ", shape_str(logits.shape()), " a run; the last ", logits_rows, " positions' were asked for");
    if (last_.buffer().use_count() != 1 || !last_.has_shape({B, logits_rows, V})) last_ = Tensor(DType::Float32, {B, logits_rows, V});
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(logits.data<float>() + (b * S + S - logits_rows) * V, logits_rows * V, last_.data<float>() + b * logits_rows * V);
    return last_;
  }
  if (last_.buffer().use_count() != 1 || !last_.has_shape({B, V})) last_ = Tensor(DType::Float32, {B, V});  // (kept by a caller)
  const bool per_row = static_cast<int64_t>(step_last_.size()) == B && S == n;  // (a sliced graph gives the last position alone)
  for (int64_t b = 0; b < B; ++b)
    std::copy_n(logits.data<float>() + (b * S + (per_row ? step_last_[static_cast<size_t>(b)] : S - 1)) * V, V,
                last_.data<float>() + b * V);
  return last_;
}

GenerateResult Generator::generate(const std::vector<std::vector<int64_t>>& prompts, const GenerateOptions& opt,
                                   const std::function<bool(size_t, int64_t)>& on_token) {
  if (opt.num_beams > 1) {
    BeamSearch search(*this, prompts, opt);
    while (!search.done()) search.step();
    return search.result();
  }
  check_request(prompts, opt);
  const int64_t B = static_cast<int64_t>(prompts.size());
  const bool cached = opt.use_cache && io_.layout != PastLayout::None;
  const bool resume = opt.resume && cached && B == 1 && resumable_ && resumable_tokens_.size() < prompts[0].size() &&
                      std::equal(resumable_tokens_.begin(), resumable_tokens_.end(), prompts[0].begin());
  std::unique_ptr<KvCache> kept = std::move(resumable_);
  resumable_tokens_.clear();
  if (io_.layout == PastLayout::Internal && !resume) sequence_->reset();  // a new batch starts with empty rings
  int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  check_cache_memory(B, longest, opt);
  const int64_t pad = pad_id();
  Rows seq, mask;
  pad_prompts(prompts, pad, io_.prompts_right_padded, seq, mask);
  GenerateResult res;
  res.tokens = prompts;
  // Room for the new tokens, so decoding does not reallocate — up to 64k of them: a sliding window may be
  // asked for any number, and a reserve of INT64_MAX would throw.
  const size_t room = static_cast<size_t>(std::min<int64_t>(opt.max_new_tokens, 1 << 16));
  for (size_t b = 0; b < prompts.size(); ++b) {
    seq[b].reserve(seq[b].size() + room);
    mask[b].reserve(mask[b].size() + room);
    res.tokens[b].reserve(res.tokens[b].size() + room);
  }
  std::vector<char> done(static_cast<size_t>(B), 0);
  std::vector<Sampler> samplers;
  for (int64_t b = 0; b < B; ++b) {
    SamplingOptions s = opt.sampling;
    s.seed += static_cast<uint64_t>(b);
    samplers.emplace_back(s);
  }
  KvCache cache = resume ? std::move(*kept) : KvCache(io_, B);
  res.prompt_tokens = (static_cast<int64_t>(seq[0].size()) - cache.length()) * B;  // what the prefill feeds
  // One sequence on an OpenCL device, greedy or top-k sampling without a repetition penalty: after the
  // prefill (whose logits the result keeps), only the k best scores of each step come back — the
  // sampler sees every other token at −∞, which its top-k would have cut anyway.
  const auto& so = opt.sampling;
  const int device_k = so.greedy || so.temperature <= 0.0f ? 1 : so.top_k;
  const bool device_top_k = session_.device_transfers() && B == 1 && device_k >= 1 && device_k <= Session::max_device_top_k() &&
                            so.repetition_penalty == 1.0f && io_.layout == PastLayout::Internal && opt.top_logits <= device_k &&
                            !opt.constraint && opt.speculation.drafts == 0;  // --top-logits, a constraint and drafts need the scores
  struct TopKOff {  // whatever happens, this sequence downloads its logits again afterwards
    SequenceState& s;
    ~TopKOff() { s.set_device_top_k("", 0); }
  } top_k_off{*sequence_};
  std::vector<int64_t> top_ids;  // record_top_logits' scratch
  std::vector<float> ended_not;  // a row's logits with its end tokens at −∞ (min_new_tokens)
  std::vector<float> allowed;    // a row's logits with what the constraint refuses at −∞
  int64_t made = 0;              // new tokens per sequence so far (a finished one's: padding)
  // Row b's next token from its logits `row` (`draft` >= 0: the token speculation proposed there, Sampler::next's
  // rejection rule), recorded and shown; pad when b has ended.
  auto take = [&](int64_t b, const float* row, int64_t V, int64_t draft) -> int64_t {
    const auto sb = static_cast<size_t>(b);
    if (done[sb]) return pad;
    if (static_cast<int64_t>(res.tokens[sb].size() - prompts[sb].size()) < opt.min_new_tokens) {
      ended_not.assign(row, row + V);  // no end token yet
      for (int64_t e : opt.eos_token_ids)
        if (e >= 0 && e < V) ended_not[static_cast<size_t>(e)] = -std::numeric_limits<float>::infinity();
      row = ended_not.data();
    }
    if (opt.constraint) {
      allowed.assign(row, row + V);
      row = allowed.data();
      if (opt.constraint->mask(allowed.data(), V, opt.max_new_tokens - made) == 0) {  // (nothing can come: it ends)
        done[sb] = 1;
        return pad;
      }
    }
    if (opt.top_logits > 0) record_top_logits(row, V, opt.top_logits, res, b, top_ids);
    const int64_t next = samplers[sb].next(row, V, res.tokens[sb], draft);
    res.tokens[sb].push_back(next);
    if (on_token && !on_token(sb, next)) done[sb] = 1;
    for (int64_t e : opt.eos_token_ids) done[sb] |= next == e;
    if (opt.constraint) {
      opt.constraint->accept(next);
      done[sb] |= opt.constraint->complete();
    }
    return next;
  };
  // Speculation (one sequence on the ring, check_request): a step feeds the last token and the drafts, and the ring
  // keeps what was taken. Drafting pauses where the run would slide a ring's window: a slid window cannot roll back.
  const SpeculationOptions& spec = opt.speculation;
  std::vector<int64_t> drafts;
  auto step_t0 = std::chrono::steady_clock::now();
  for (int64_t run = 0; made < opt.max_new_tokens; ++run) {
    if (device_top_k && run == 1) sequence_->set_device_top_k(io_.logits, device_k);
    drafts.clear();
    if (spec.drafts > 0 && run > 0) {
      const int64_t room = draft_room(spec, opt.max_new_tokens - made, cache.length(), io_.ring_window);
      if (room > 0 && spec.draft) spec.draft->propose(res.tokens[0], room, drafts);
      else if (room > 0) ngram_draft(res.tokens[0], spec.ngram, room, drafts);
      seq[0].insert(seq[0].end(), drafts.begin(), drafts.end());
      mask[0].insert(mask[0].end(), drafts.size(), 1);
    }
    const auto k = static_cast<int64_t>(drafts.size());
    const Tensor& logits = forward(seq, mask, cached ? &cache : nullptr, prefill_chunk(opt), 1 + k);
    const int64_t V = logits.dim(-1);
    if (run == 0) res.prefill_logits = logits;  // shares the buffer: the next step writes a new one
    if (k == 0) {
      for (int64_t b = 0; b < B; ++b) {
        seq[static_cast<size_t>(b)].push_back(take(b, logits.data<float>() + b * V, V, -1));
        mask[static_cast<size_t>(b)].push_back(1);
      }
      ++made;
    } else {
      seq[0].resize(seq[0].size() - static_cast<size_t>(k));  // (the tokens taken come back)
      mask[0].resize(seq[0].size());
      res.drafted_tokens += k;
      for (int64_t i = 0; i <= k; ++i) {
        const int64_t next = take(0, logits.data<float>() + i * V, V, i < k ? drafts[static_cast<size_t>(i)] : -1);
        seq[0].push_back(next);
        mask[0].push_back(1);
        ++made;
        if (done[0] || i == k || next != drafts[static_cast<size_t>(i)]) break;
        ++res.accepted_tokens;
      }
      // The rings hold the run's 1 + k positions: they keep those fed now, all but the last token taken.
      const int64_t fed = static_cast<int64_t>(seq[0].size()) - 1;
      sequence_->keep_prefix(0, fed);
      cache.rewind(fed);
    }
    if (run == 0) {
      if (spec.draft && spec.drafts > 0) spec.draft->prefill(res.tokens[0]);
      res.prefill_ms = ms_since(step_t0);
      step_t0 = std::chrono::steady_clock::now();
    } else {
      ++res.decode_steps;
    }
    if (std::all_of(done.begin(), done.end(), [](char d) { return d != 0; })) break;
  }
  res.decode_tokens = std::max<int64_t>(made - 1, 0);
  res.decode_ms = ms_since(step_t0);
  res.weight_bytes_per_token = session_.weights().bytes_per_token();
  res.cache_bytes_per_token = io_.layout == PastLayout::Internal ? sequence_->bytes_per_token() : cache.bytes_per_token();
  if (opt.resume && cached && B == 1) {  // for a next turn: the cache and the tokens it holds
    resumable_tokens_.assign(seq[0].begin(), seq[0].begin() + cache.length());
    resumable_ = std::make_unique<KvCache>(std::move(cache));
  }
  return res;
}

}  // namespace tern::llm
