// Continuous batching (llm/continuous_batch.h): requests joining and leaving a running batch get the tokens
// they get alone — bitwise, greedy and sampled — and rows are emptied and reused; serve's queue in front of it.
#include <doctest/doctest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>

#include "llm/continuous_batch.h"
#include "llm/draft_model.h"
#include "llm/model_folder.h"
#include "llm/request_queue.h"
#include "llm/tokenizer.h"
#include "test_util.h"

using namespace tern;
using namespace tern::llm;

namespace {
const std::string kModel = std::string(TERN_SOURCE_DIR) + "/models/default";

std::unique_ptr<Session> ring_session(int64_t window, const std::string& weights = "fp32") {
  DecoderOptions d;
  d.ring_capacity = window;
  d.threads = 2;
  d.weights = weights;
  return std::make_unique<Session>(kModel + "/model.onnx", decoder_session_options(d, read_model_config(kModel), true));
}

// Prompts of different lengths (token ids of the default model's vocabulary).
std::vector<std::vector<int64_t>> prompts(size_t n) {
  std::vector<std::vector<int64_t>> p;
  for (size_t i = 0; i < n; ++i) {
    std::vector<int64_t> t{0};
    for (size_t k = 0; k < 3 + 5 * i; ++k) t.push_back(static_cast<int64_t>(17 + 31 * i + 7 * k) % 1000 + 1);
    p.push_back(t);
  }
  return p;
}

SamplingOptions sampling(bool greedy, uint64_t seed) {
  SamplingOptions s;
  s.greedy = greedy;
  s.temperature = 0.9f;
  s.top_p = 0.95f;
  s.seed = seed;
  return s;
}

// Runs `requests` through a batcher of `rows` rows, request i joining at step join_step[i] (or as soon
// as a row is free after that), request i sampling with seed first_seed + i; returns each request's new tokens.
// drafts > 0: every request speculates (`accepted`, when given, gets the drafts the batcher saw accepted) — with
// draft_model, on drafts from the model's int4 copy, else by prompt lookup.
std::vector<std::vector<int64_t>> run_batched(int64_t rows, int64_t chunk, const std::vector<std::vector<int64_t>>& ps,
                                              const std::vector<int>& join_step, bool greedy, int64_t max_new, uint64_t first_seed = 100,
                                              int64_t drafts = 0, int64_t* accepted = nullptr, bool draft_model = false) {
  auto s = ring_session(256);
  Generator gen(*s, read_model_config(kModel));
  ContinuousBatcher batcher(*s, gen, rows, chunk);
  auto int4 = draft_model ? ring_session(256, "int4") : nullptr;
  std::unique_ptr<DraftModel> draft;
  if (int4) draft = std::make_unique<DraftModel>(*int4, read_model_config(kModel), read_model_config(kModel).vocab_size, rows);
  std::vector<std::vector<int64_t>> out(ps.size());
  std::vector<char> finished(ps.size(), 0), added(ps.size(), 0);
  for (int step = 0; step < 10000; ++step) {
    for (size_t i = 0; i < ps.size(); ++i) {
      if (added[i] || step < join_step[i] || batcher.active() == batcher.rows()) continue;
      SequenceRequest r;
      r.prompt = ps[i];
      r.max_new_tokens = max_new;
      r.sampling = sampling(greedy, first_seed + i);
      r.speculation.drafts = drafts;
      r.speculation.draft = draft.get();
      r.on_token = [&out, i](int64_t t) {
        out[i].push_back(t);
        return true;
      };
      r.on_finish = [&finished, i](FinishReason why) {
        CHECK(why == FinishReason::Length);
        finished[i] = 1;
      };
      batcher.add(std::move(r));
      added[i] = 1;
    }
    if (!batcher.step() && std::all_of(added.begin(), added.end(), [](char a) { return a != 0; })) break;
  }
  for (size_t i = 0; i < ps.size(); ++i) CHECK_MESSAGE(finished[i], "request ", i, " did not finish");
  if (accepted) *accepted = batcher.accepted_tokens();
  return out;
}
}  // namespace

TEST_CASE("continuous batching: each request's tokens are the same alone and joining a batch of 8, bitwise") {
  const auto ps = prompts(8);
  for (const bool greedy : {true, false}) {
    CAPTURE(greedy);
    // Alone: each request by itself in the 8-row batcher.
    std::vector<std::vector<int64_t>> alone;
    for (size_t i = 0; i < ps.size(); ++i) alone.push_back(run_batched(8, 8, {ps[i]}, {0}, greedy, 24, 100 + i)[0]);
    // Together: joining at different steps, so prompts are prefilled in chunks beside others decoding.
    const auto together = run_batched(8, 8, ps, {0, 0, 1, 3, 4, 9, 10, 17}, greedy, 24);
    for (size_t i = 0; i < ps.size(); ++i) {
      CAPTURE(i);
      CHECK(together[i] == alone[i]);
    }
    // And as Generator::generate gives them, one prompt a call (a batch of one, its own ring).
    auto s = ring_session(256);
    Generator gen(*s, read_model_config(kModel));
    for (size_t i = 0; i < ps.size(); ++i) {
      GenerateOptions o;
      o.max_new_tokens = 24;
      o.prefill_chunk = 8;
      o.sampling = sampling(greedy, 100 + i);
      const auto r = gen.generate({ps[i]}, o);
      CHECK(std::vector<int64_t>(r.tokens[0].begin() + static_cast<std::ptrdiff_t>(ps[i].size()), r.tokens[0].end()) == alone[i]);
    }
  }
}

TEST_CASE("continuous batching: rows are emptied and reused; more requests than rows all complete") {
  const auto ps = prompts(12);
  const std::vector<int> join(12, 0);
  const auto three_rows = run_batched(3, 4, ps, join, true, 10);
  const auto eight_rows = run_batched(8, 4, ps, join, true, 10);
  for (size_t i = 0; i < ps.size(); ++i) {
    CAPTURE(i);
    CHECK(three_rows[i].size() == 10);
    CHECK(three_rows[i] == eight_rows[i]);
  }
}

TEST_CASE("continuous batching: bad requests are refused before they take a row") {
  auto s = ring_session(64);
  Generator gen(*s, read_model_config(kModel));
  ContinuousBatcher batcher(*s, gen, 2, 0);
  SequenceRequest r;
  r.prompt = {0, 5000};
  CHECK_THROWS_WITH_AS(batcher.add(r), doctest::Contains("token id 5000 is outside the vocabulary of 1024"), Error);
  r.prompt = {};
  CHECK_THROWS_WITH_AS(batcher.add(r), doctest::Contains("a prompt has no tokens"), Error);
  r.prompt = {0, 5};
  r.sampling.top_p = 2;
  CHECK_THROWS_WITH_AS(batcher.add(r), doctest::Contains("top"), Error);
  CHECK(batcher.active() == 0);
  r.sampling = {};
  batcher.add(r);
  batcher.add(r);
  CHECK_THROWS_WITH_AS(batcher.add(r), doctest::Contains("0 of 2 rows are free"), Error);
}

TEST_CASE("continuous batching: n sequences of one prompt share its prefill and sample as n solo requests") {
  const auto p = prompts(3)[2];
  for (const int64_t max_new : {int64_t{1}, int64_t{16}}) {  // 1: the leader ends at the token its followers copy with
    CAPTURE(max_new);
    auto s = ring_session(256);
    Generator gen(*s, read_model_config(kModel));
    ContinuousBatcher batcher(*s, gen, 4, 4);
    std::vector<std::vector<int64_t>> out(3);
    std::vector<SequenceRequest> group(3);
    for (size_t i = 0; i < 3; ++i) {
      group[i].prompt = p;
      group[i].max_new_tokens = max_new;
      group[i].sampling = sampling(false, 200 + i);
      group[i].on_token = [&out, i](int64_t t) {
        out[i].push_back(t);
        return true;
      };
    }
    CHECK(batcher.add_group(std::move(group)).size() == 3);
    CHECK(batcher.free_rows() == 1);
    while (batcher.step()) {
    }
    CHECK(batcher.active() == 0);
    for (size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      CHECK(out[i] == run_batched(4, 4, {p}, {0}, false, max_new, 200 + i)[0]);
    }
  }
}

TEST_CASE("continuous batching: logprobs are the log-softmax of the Generator's logits for the same tokens") {
  // The reference: the Generator alone with every logit kept (--top-logits V), log-softmax taken here in double.
  const auto p = prompts(2)[1];
  auto s = ring_session(256);
  Generator gen(*s, read_model_config(kModel));
  GenerateOptions o;
  o.max_new_tokens = 6;
  o.sampling = sampling(false, 7);
  o.top_logits = 1024;
  const GenerateResult ref = gen.generate({p}, o);
  REQUIRE(ref.top_logits.at(0).size() == 6);

  auto bs = ring_session(256);
  Generator bgen(*bs, read_model_config(kModel));
  ContinuousBatcher batcher(*bs, bgen, 2, 4);
  SequenceRequest r;
  r.prompt = p;
  r.max_new_tokens = 6;
  r.sampling = sampling(false, 7);
  r.top_logprobs = 3;
  std::vector<TokenLogprobs> got;
  r.on_logprobs = [&](const TokenLogprobs& lp) { got.push_back(lp); };
  batcher.add(std::move(r));
  while (batcher.step()) {
  }
  REQUIRE(got.size() == 6);
  for (size_t k = 0; k < got.size(); ++k) {
    CAPTURE(k);
    std::map<int64_t, double> logit;
    double m = -1e30, z = 0;
    for (const auto& [id, l] : ref.top_logits[0][k]) logit[id] = l, m = std::max<double>(m, l);
    for (const auto& [id, l] : logit) z += std::exp(l - m);
    const double log_z = m + std::log(z);
    CHECK(got[k].token == ref.tokens[0][p.size() + k]);
    CHECK(got[k].logprob == doctest::Approx(logit[got[k].token] - log_z).epsilon(1e-5));
    REQUIRE(got[k].top.size() == 3);
    for (size_t j = 0; j < 3; ++j) {
      CHECK(got[k].top[j].first == ref.top_logits[0][k][j].first);  // most likely first, as the Generator's
      CHECK(got[k].top[j].second == doctest::Approx(ref.top_logits[0][k][j].second - log_z).epsilon(1e-5));
    }
  }
}

TEST_CASE("continuous batching: a prompt beginning with what an idle row holds reuses it, with the tokens fed whole") {
  // A conversation: turn 1, then turn 2 = turn 1's prompt + its answer + more; and a stranger between them. Each
  // request's tokens with reuse equal those of a batcher that feeds every prompt whole, greedy and sampled.
  std::vector<int64_t> system{0};
  for (int k = 0; k < 60; ++k) system.push_back(1 + (37 * k) % 997);
  for (const bool greedy : {true, false}) {
    CAPTURE(greedy);
    auto run = [&](bool reuse, int64_t& hits, int64_t& reused) {
      auto s = ring_session(256);
      Generator gen(*s, read_model_config(kModel));
      ContinuousBatcher batcher(*s, gen, 2, 16, reuse);
      std::vector<std::vector<int64_t>> out;
      auto one = [&](const std::vector<int64_t>& prompt, uint64_t seed) {
        SequenceRequest r;
        r.prompt = prompt;
        r.max_new_tokens = 12;
        r.sampling = sampling(greedy, seed);
        auto& got = out.emplace_back();
        r.on_token = [&got](int64_t t) {
          got.push_back(t);
          return true;
        };
        batcher.add(std::move(r));
        while (batcher.step()) {
        }
        return got;
      };
      std::vector<int64_t> turn1 = system;
      turn1.insert(turn1.end(), {5, 6, 7});
      const auto answer1 = one(turn1, 1);
      one(prompts(1)[0], 2);  // a stranger: the other row
      std::vector<int64_t> turn2 = turn1;
      turn2.insert(turn2.end(), answer1.begin(), answer1.end());
      turn2.insert(turn2.end(), {8, 9});
      one(turn2, 3);
      std::vector<int64_t> other = system;  // the system prompt, another question
      other.push_back(11);
      one(other, 4);
      hits = batcher.prefix_hits(), reused = batcher.reused_tokens();
      return out;
    };
    int64_t hits = 0, reused = 0, no_hits = 0, none = 0;
    const auto with = run(true, hits, reused);
    const auto without = run(false, no_hits, none);
    CHECK(with == without);
    CHECK(no_hits == 0);
    CHECK(none == 0);
    // Turn 2 finds turn 1's 64 prompt tokens and 11 of its 12 answer tokens (the last was never fed); the other
    // question the 61 system tokens. The stranger matches only BOS there: it takes the other row, turn 1's stays.
    CHECK(hits == 2);
    CHECK(reused == (64 + 11) + 61);
  }
}

TEST_CASE("continuous batching: a constrained value that cannot be whole in the tokens left ends as length, not stop") {
  // (issue 79: json_object with max_tokens 1 answered 200, content "", finish_reason "stop" — as if whole)
  auto s = ring_session(256);
  Generator gen(*s, read_model_config(kModel));
  ContinuousBatcher batcher(*s, gen, 1, 64);
  const auto vocabulary = std::make_shared<const JsonVocabulary>(*load_tokenizer(kModel));
  for (const int64_t budget : {1, 40}) {
    CAPTURE(budget);
    SequenceRequest r;
    r.prompt = prompts(1)[0];
    r.max_new_tokens = budget;
    r.sampling = sampling(true, 1);
    r.constraint = std::make_shared<JsonConstraint>(vocabulary);
    auto constraint = r.constraint;
    std::optional<FinishReason> why;
    r.on_finish = [&why](FinishReason w) { why = w; };
    batcher.add(std::move(r));
    while (batcher.step()) {
    }
    REQUIRE(why);
    CHECK(*why == (budget == 1 ? FinishReason::Length : FinishReason::Stop));  // ("{}" needs two tokens at least)
    CHECK(constraint->complete() == (budget != 1));
  }
}

TEST_CASE("continuous batching with speculation: each request's greedy tokens are the batch's without it") {
  // Rows join at different steps, so drafting rows share runs with prefilling and plain decoding ones; each row's
  // drafts are checked in its own positions and the rejected ones leave its ring alone.
  const auto ps = prompts(6);
  const std::vector<int> join{0, 0, 2, 5, 9, 14};
  const auto plain = run_batched(4, 8, ps, join, true, 40);
  int64_t accepted = 0;
  const auto spec = run_batched(4, 8, ps, join, true, 40, 100, 3, &accepted);
  CHECK(spec == plain);
  CHECK(accepted > 0);
  // Sampled: each row's tokens come from the same distribution, and the run completes and repeats with its seeds.
  CHECK(run_batched(4, 8, ps, join, false, 24, 7, 3) == run_batched(4, 8, ps, join, false, 24, 7, 3));
  // A draft model (the model's int4 copy, a ring row for each of the batch's): its drafts batched across the rows
  // drafting, each row's ring rolled back on its own.
  int64_t from_draft = 0;
  CHECK(run_batched(4, 8, ps, join, true, 40, 100, 4, &from_draft, true) == plain);
  CHECK(from_draft > accepted);
  CHECK(run_batched(4, 8, ps, join, false, 24, 7, 3, nullptr, true) == run_batched(4, 8, ps, join, false, 24, 7, 3, nullptr, true));
  // Its rows must be the batch's.
  auto s = ring_session(256);
  Generator gen(*s, read_model_config(kModel));
  ContinuousBatcher batcher(*s, gen, 4, 8);
  DraftModel two_rows(*s, read_model_config(kModel), 0, 2);
  SequenceRequest r;
  r.prompt = ps[0];
  r.speculation.drafts = 3;
  r.speculation.draft = &two_rows;
  CHECK(test::contains(test::error_of([&] { batcher.add(std::move(r)); }), "the draft model drafts for 2 rows; the batch has 4"));
}

// The serve scheduler (llm/request_queue.h): a request whose client is gone (or whose deadline passed) while every
// row is taken leaves the queue unrun — it never gets a token, its finish is Stop, and the count says so — while
// the request on the row runs on. (cli_serve.sh's deadline check cannot force this over HTTP: with one deadline
// for all, a queued request's passes after the running one's, and whether it passes before the row is free is a
// race between curl's arrivals and one decode step.)
TEST_CASE("serve's queue: a request gone while it waits for a row leaves unrun") {
  auto s = ring_session(256);
  Generator gen(*s, read_model_config(kModel));
  ContinuousBatcher batcher(*s, gen, 1, 8);
  RequestQueue queue(batcher, 4);
  queue.start();
  std::mutex mu;
  std::condition_variable cv;
  int64_t running_tokens = 0, waiting_tokens = 0;
  std::optional<FinishReason> running_end, waiting_end;
  auto group = [&](int64_t max_new, int64_t& tokens, std::optional<FinishReason>& end, bool gone) {
    RequestQueue::Group g;
    SequenceRequest& r = g.sequences.emplace_back();
    r.prompt = prompts(1)[0];
    r.max_new_tokens = max_new;
    r.sampling = sampling(true, 1);
    r.on_token = [&](int64_t) {
      std::lock_guard<std::mutex> lock(mu);
      ++tokens;
      cv.notify_all();
      return queue.stats().dropped == 0;  // the row's request runs until the other has left the queue
    };
    r.on_finish = [&](FinishReason why) {
      std::lock_guard<std::mutex> lock(mu);
      end = why;
      cv.notify_all();
    };
    g.gone = [gone](RequestQueue::Clock::time_point) { return gone; };
    std::vector<RequestQueue::Group> groups;
    groups.push_back(std::move(g));
    return groups;
  };
  REQUIRE(queue.push(group(200, running_tokens, running_end, false)) == RequestQueue::Admission::Queued);
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return running_tokens > 0; }));
  }
  REQUIRE(queue.push(group(8, waiting_tokens, waiting_end, true)) == RequestQueue::Admission::Queued);
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return running_end && waiting_end; }));
  }
  CHECK(queue.stats().dropped == 1);
  CHECK(waiting_tokens == 0);
  CHECK(*waiting_end == FinishReason::Stop);
  CHECK(running_tokens < 200);  // (it stopped once the other left: the row was held all the while)
}
