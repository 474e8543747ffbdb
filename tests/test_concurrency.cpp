// Many threads on one session, many sessions in one process: concurrent runs give the serial runs' outputs bit
// for bit (the kernels' chunk bounds depend on the session's thread count alone), sequences claimed by two runs
// fail cleanly, and each session keeps its own thread count and memory cap. The ThreadSanitizer pass
// (scripts/test.sh --tsan) runs these.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "fixture_models.h"
#include "kernels/cpu/gemv_nbits.h"
#include "kernels/cpu/nbits.h"
#include "kernels/cpu/parallel.h"
#include "llm/generator.h"
#include "llm/model_folder.h"
#include "model_builder.h"
#include "runtime/session.h"
#include "test_util.h"

using namespace tern;
using namespace tern::llm;
using namespace tern::test;

namespace {

using Feeds = std::vector<std::pair<std::string, Tensor>>;

// A decoder graph's feeds for one sequence: `n` new tokens after `past` cached ones (random keys and values).
Feeds decoder_feeds(const Session& s, int seed, int64_t n, int64_t past) {
  std::mt19937 g(static_cast<unsigned>(seed));
  Feeds feeds;
  for (const IOInfo& in : s.inputs()) {
    if (in.name == "input_ids" || in.name == "position_ids") {
      std::vector<int64_t> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = in.name == "input_ids" ? static_cast<int64_t>(g() % 1000) : past + i;
      feeds.emplace_back(in.name, Tensor::from_vector<int64_t>(v, {1, n}));
    } else if (in.name == "attention_mask") {
      feeds.emplace_back(in.name, Tensor::from_vector<int64_t>(std::vector<int64_t>(static_cast<size_t>(past + n), 1), {1, past + n}));
    } else {  // past_key_values.*: [batch, kv heads, past, head size]
      const Shape shape{1, (*in.shape)[1].value, past, (*in.shape)[3].value};
      std::vector<float> v(static_cast<size_t>(numel_of(shape)));
      std::normal_distribution<float> d;
      for (float& x : v) x = d(g);
      feeds.emplace_back(in.name, Tensor::from_vector<float>(v, shape));
    }
  }
  return feeds;
}

bool same(const Outputs& a, const Outputs& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].shape() != b[i].shape() || a[i].nbytes() != b[i].nbytes() || std::memcmp(a[i].raw(), b[i].raw(), a[i].nbytes()) != 0)
      return false;
  return true;
}

}  // namespace

TEST_CASE("one session, 8 threads x 50 runs: every output equals the serial run's, no errors") {
  SessionOptions o;
  o.threads = 2;
  Session s(test::kDefaultModel + "/model.onnx", o);
  // Prefills and decode steps of several lengths (so runs both replay step plans and make new ones).
  std::vector<Feeds> cases;
  for (int k = 0; k < 8; ++k) cases.push_back(decoder_feeds(s, k, k % 2 ? 1 : 3 + k, k % 3 ? 5 + k : 0));
  std::vector<Outputs> serial;
  for (const Feeds& f : cases) serial.push_back(s.run(f));
  std::atomic<int> differences{0}, errors{0};
  std::mutex first_error_mutex;
  std::string first_error;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      Outputs out;  // handed back each run, as a decode loop does
      for (int i = 0; i < 50; ++i) {
        const size_t k = static_cast<size_t>(t + i) % cases.size();
        try {
          s.run(cases[k], out);
          if (!same(out, serial[k])) ++differences;
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> lock(first_error_mutex);
          if (errors++ == 0) first_error = e.what();
        }
      }
    });
  for (auto& th : threads) th.join();
  CAPTURE(first_error);
  CHECK(differences == 0);
  CHECK(errors == 0);
}

TEST_CASE("one ring-cache session, 8 threads with a Generator each: the tokens and prefill logits each gives alone") {
  const auto s = test::gqa_ring_session(64, 2);
  const ModelConfig config = read_model_config(test::kGqaFixture);
  GenerateOptions greedy;
  greedy.max_new_tokens = 8;
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t k = 0; k < 8; ++k) prompts.push_back({1, 17 + k, 93, 4 + k, 250 - k});
  std::vector<std::vector<int64_t>> alone;
  std::vector<Tensor> alone_logits;  // the prefill's last-position logits, compared bit for bit too
  {
    Generator gen(*s, config);
    for (const auto& p : prompts) {
      const GenerateResult r = gen.generate({p}, greedy);
      alone.push_back(r.tokens[0]);
      alone_logits.push_back(r.prefill_logits.clone());
    }
  }
  std::atomic<int> differences{0}, errors{0};
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      Generator gen(*s, config);           // a sequence of its own on the shared weights
      for (int rep = 0; rep < 6; ++rep) {  // 6 generations of 9 runs each: 54 runs a thread
        const size_t k = (t + static_cast<size_t>(rep)) % prompts.size();
        try {
          const GenerateResult r = gen.generate({prompts[k]}, greedy);
          const Tensor& l = r.prefill_logits;
          if (r.tokens[0] != alone[k] || l.nbytes() != alone_logits[k].nbytes() ||
              std::memcmp(l.raw(), alone_logits[k].raw(), l.nbytes()) != 0)
            ++differences;
        } catch (const std::exception&) {
          ++errors;
        }
      }
    });
  for (auto& th : threads) th.join();
  CHECK(differences == 0);
  CHECK(errors == 0);
}

TEST_CASE("two Generators on one session, interleaved step by step, give the tokens each gives alone") {
  const auto s = test::gqa_ring_session(64, 1);
  const ModelConfig config = read_model_config(test::kGqaFixture);
  Generator a(*s, config), b(*s, config);
  const std::vector<int64_t> pa{1, 17, 93, 4}, pb{1, 250, 3};
  GenerateOptions one;
  one.max_new_tokens = 10;
  const auto alone_a = a.generate({pa}, one).tokens[0], alone_b = b.generate({pb}, one).tokens[0];
  // Continuous-batching steps alternate between the two: a's cache is never b's.
  std::vector<int64_t> ta = pa, tb = pb;
  std::vector<int64_t> held_a{0}, held_b{0}, row{0};
  a.sequence().reset();
  b.sequence().reset();
  std::vector<std::vector<int64_t>> feed_a{pa}, feed_b{pb};
  auto argmax = [](const Tensor& logits) {
    const float* l = logits.data<float>();
    return static_cast<int64_t>(std::max_element(l, l + logits.dim(1)) - l);
  };
  while (ta.size() < alone_a.size()) {
    const int64_t na = argmax(a.run_rows(feed_a, held_a, row, 1));
    held_a[0] += static_cast<int64_t>(feed_a[0].size());
    const int64_t nb = argmax(b.run_rows(feed_b, held_b, row, 1));
    held_b[0] += static_cast<int64_t>(feed_b[0].size());
    ta.push_back(na), tb.push_back(nb);
    feed_a = {{na}}, feed_b = {{nb}};
  }
  CHECK(ta == alone_a);
  CHECK(tb == alone_b);
}

TEST_CASE("a sequence fed by two runs at once: the second fails naming the conflict, the first is unharmed") {
  SessionOptions o;
  std::string nested;
  Session* self = nullptr;
  Feeds step;
  bool tried = false;
  o.on_node = [&](const NodeRun& r) {  // inside a run on the session's own sequence, another run on it
    if (tried || !r.state) return;
    tried = true;
    nested = test::error_of([&] { self->run(step); });
  };
  DecoderOptions d;
  d.ring_capacity = 64;
  SessionOptions so = decoder_session_options(d, read_model_config(test::kGqaFixture), true);
  so.on_node = o.on_node;
  Session s(test::kGqaFixture + "/model.onnx", so);
  self = &s;
  step = {{"input_ids", Tensor::from_vector<int64_t>({1, 17, 93}, {1, 3})},
          {"attention_mask", Tensor::from_vector<int64_t>({1, 1, 1}, {1, 3})},
          {"position_ids", Tensor::from_vector<int64_t>({0, 1, 2}, {1, 3})}};
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (auto& f : step)
    for (const IOInfo& in : s.inputs())
      if (in.name == f.first) feeds.push_back(f);
  step = feeds;
  const Outputs first = s.run(step);
  CAPTURE(nested);
  CHECK(tried);
  CHECK(test::contains(nested, "another run is feeding this sequence's KV cache"));
  // A sequence of its own runs beside it; the session's own is free again after the run.
  tried = true;
  const auto other = s.new_sequence();
  const Outputs again = s.run(step, other.get());
  CHECK(same(first, again));
  s.sequence().reset();
  CHECK(same(s.run(step), first));
}

TEST_CASE("two sessions with 1 and 2 threads in one process each run on their own count") {
  std::mutex m;
  std::map<int, std::set<int>> seen_counts;      // session → the kernels' thread count seen inside its runs
  std::map<int, std::set<std::thread::id>> ran;  // session → threads that ran a probe job's chunks
  std::vector<std::unique_ptr<Session>> sessions;
  for (int threads : {1, 2}) {
    SessionOptions o;
    o.threads = threads;
    o.on_node = [&, threads](const NodeRun& r) {
      std::set<std::thread::id> ids;
      std::mutex ids_mutex;
      kernels::parallel_chunks(r.cpu.threads, 16, 16, [&](int64_t, int64_t, int) {
        std::this_thread::sleep_for(std::chrono::microseconds(300));  // long enough for a worker to join in
        std::lock_guard<std::mutex> lock(ids_mutex);
        ids.insert(std::this_thread::get_id());
      });
      std::lock_guard<std::mutex> lock(m);
      seen_counts[threads].insert(r.cpu.threads);
      ran[threads].insert(ids.begin(), ids.end());
    };
    sessions.push_back(std::make_unique<Session>(test::kDefaultModel + "/model.onnx", o));
  }
  const Feeds feeds = decoder_feeds(*sessions[0], 1, 4, 0);
  // Both at once (each keeps its count), then each alone (the pool is free for the 2-thread one).
  std::thread other([&] { sessions[1]->run(feeds); });
  sessions[0]->run(feeds);
  other.join();
  for (const auto& s : sessions) s->run(feeds);
  CHECK(seen_counts[1] == std::set<int>{1});
  CHECK(seen_counts[2] == std::set<int>{2});
  CHECK(ran[1].size() == 1);  // only the calling thread
  CHECK(ran[2].size() >= 2);  // the caller and a worker (the two runs' callers each, at most 3)
  CHECK(ran[2].size() <= 3);
}

TEST_CASE("two sessions at two ISA tiers in one process: each runs its own tier's kernels, side by side, to the same result") {
  TempDir d;
  std::vector<float> w;  // one 1024x1024 float32 weight, taken as int4 blocks (the decode GEMV differs by tier)
  const std::string path = write_matmul_1024_model(d.path / "m.onnx", w);
  const std::vector<kernels::Isa> tiers = kernels::machine_isas();
  const kernels::Isa low = tiers.front(), high = tiers.back();  // (sse42 and the machine's highest on a v2 build)
  std::mutex m;
  std::map<kernels::Isa, std::set<std::string>> seen;  // session's tier → the tiers and kernels its runs used
  std::vector<std::unique_ptr<Session>> sessions;
  for (kernels::Isa isa : {low, high}) {
    SessionOptions o;
    o.isa = isa;
    o.threads = 2;
    o.weights = WeightFormat::Int4;
    o.on_node = [&, isa](const NodeRun& r) {
      std::lock_guard<std::mutex> lock(m);
      seen[isa].insert(kernels::isa_name(r.cpu.isa));
      seen[isa].insert(op_kernel(r.op, r.inputs, r.cpu.isa));
    };
    sessions.push_back(std::make_unique<Session>(path, o));
  }
  std::vector<float> x(1024);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 13) * 0.1f - 0.6f;
  const std::vector<std::pair<std::string, Tensor>> feeds{{"x", Tensor::from_vector<float>(x, {1, 1024})}};
  std::vector<std::vector<float>> y(2);
  auto run = [&](size_t k) {
    for (int rep = 0; rep < 20; ++rep) {
      const Outputs out = sessions[k]->run(feeds);
      y[k].assign(out[0].data<float>(), out[0].data<float>() + 1024);
    }
  };
  std::thread other(run, 1);
  run(0);
  other.join();
  CAPTURE(kernels::isa_name(low));
  CAPTURE(kernels::isa_name(high));
  CHECK(seen[low].count(kernels::isa_name(low)) == 1);
  CHECK(seen[high].count(kernels::isa_name(high)) == 1);
  if (low != high) {
    CHECK(seen[low].count(kernels::isa_name(high)) == 0);
    CHECK(seen[low] != seen[high]);  // (the profile's kernel names follow the tier)
  }
  for (size_t n = 0; n < 1024; ++n) CHECK(y[0][n] == doctest::Approx(y[1][n]).epsilon(1e-4));
}

TEST_CASE("two sessions' memory caps hold independently: one fails past its cap while the other keeps working") {
  TempDir d;
  std::vector<float> w;  // one 1024x1024 float32 weight: 4 MiB read, 4 MiB more repacked at load
  const std::string path = write_matmul_1024_model(d.path / "m.onnx", w);
  SessionOptions roomy;
  roomy.max_memory = 64 << 20;
  roomy.threads = 1;
  Session working(path, roomy);
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0}, runs{0};
  std::thread worker([&] {
    std::vector<float> x(1024, 0.0f);
    x[1] = 1.0f;  // y = row 1 of w
    while (!stop || runs < 5) {
      const Outputs out = working.run({{"x", Tensor::from_vector<float>(x, {1, 1024})}});
      if (out[0].data<float>()[5] != w[1024 + 5]) ++wrong;
      ++runs;
    }
  });
  SessionOptions tight;
  tight.max_memory = 6 << 20;  // the weight fits, its repacked copy beside it does not
  const std::string error = test::error_of([&] { Session s(path, tight); });
  stop = true;
  worker.join();
  CAPTURE(error);
  CHECK(test::contains(error, "the session's memory cap (max_memory 6.3 MB"));
  CHECK(wrong == 0);
  CHECK(runs >= 5);
  // The working session's account holds what it owns, within its own cap.
  CHECK(working.memory_account()->held() >= size_t{4} << 20);
  CHECK(working.memory_account()->held() <= size_t{64} << 20);
}

TEST_CASE("parallel_chunks runs every chunk once, in the bounds it names, nested and from two threads at once") {
  for (int threads : {1, 2, 3}) {
    CAPTURE(threads);
    for (auto [n, chunks] : {std::pair<int64_t, int64_t>{1000, 7}, {5, 12}, {64, 64}, {0, 4}}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      std::atomic<int> bad_slot{0}, calls{0};
      kernels::parallel_chunks(threads, n, chunks, [&](int64_t b, int64_t e, int slot) {
        ++calls;
        if (slot < 0 || slot >= threads) ++bad_slot;
        for (int64_t i = b; i < e; ++i) ++seen[static_cast<size_t>(i)];
        // A nested call runs on this thread, whole.
        int64_t inner = 0;
        kernels::parallel_chunks(threads, 10, 5, [&](int64_t ib, int64_t ie, int) { inner += ie - ib; });
        CHECK(inner == 10);
      });
      CHECK(calls == std::min(chunks, std::max<int64_t>(n, 0)));
      CHECK(bad_slot == 0);
      for (auto& s : seen) CHECK(s == 1);
    }
    // Two callers at once (two sessions' threads): each job completes, whichever runs it.
    std::vector<int64_t> sums(2, 0);
    auto job = [&](int k) {
      for (int rep = 0; rep < 200; ++rep) {
        std::atomic<int64_t> sum{0};
        kernels::parallel_chunks(threads, 100, 8, [&](int64_t b, int64_t e, int) {
          for (int64_t i = b; i < e; ++i) sum += i;
        });
        sums[static_cast<size_t>(k)] += sum;
      }
    };
    std::thread other(job, 1);
    job(0);
    other.join();
    CHECK(sums[0] == 200 * 4950);
    CHECK(sums[1] == 200 * 4950);
  }
}

TEST_CASE("grouped 2-bit decode rows from two threads at once: each caller's per-thread pair tables give the serial bits") {
  // (gemv_nbits_grouped's tables live in the caller's workspace, a part for each kernel thread, filled by the pool's
  // workers.)
  const int64_t N = 256, K = 1024, block = 32, k_blocks = K / block;
  std::mt19937 g(5);
  std::vector<uint8_t> q(static_cast<size_t>(N * K / 4)), zp(static_cast<size_t>(N * ((k_blocks * 2 + 7) / 8)));
  std::vector<float> scales(static_cast<size_t>(N * k_blocks));
  for (auto& b : q) b = static_cast<uint8_t>(g());
  for (auto& b : zp) b = static_cast<uint8_t>(g());
  for (auto& v : scales) v = static_cast<float>(g() % 1000 + 1) * 1e-4f;
  kernels::NBitsWeights w;
  w.N = N, w.K = K, w.bits = 2, w.block = block, w.data = q.data(), w.scales = scales.data(), w.zp_packed = zp.data();
  test::KernelContext cx(2);
  const kernels::QuantizedWeights grouped = kernels::group_nbits_rows(cx, w);
  REQUIRE(kernels::gemv_nbits_supported(grouped.view()));
  // Per caller: M = 6 rows (two passes of pair tables), its own activations; the serial answers first.
  auto inputs = [&](int caller) {
    std::mt19937 gx(static_cast<unsigned>(100 + caller));
    std::normal_distribution<float> d;
    std::vector<float> x(static_cast<size_t>(6 * K));
    for (float& v : x) v = d(gx);
    return x;
  };
  std::vector<std::vector<float>> x{inputs(0), inputs(1)}, serial(2, std::vector<float>(static_cast<size_t>(6 * N)));
  for (int c = 0; c < 2; ++c)
    kernels::gemv_nbits(cx, x[static_cast<size_t>(c)].data(), 6, grouped.view(), serial[static_cast<size_t>(c)].data());
  CHECK(serial[0] != serial[1]);
  std::atomic<int> wrong{0};
  auto caller = [&](int c) {
    test::KernelContext mine(2);
    std::vector<float> y(static_cast<size_t>(6 * N));
    for (int rep = 0; rep < 50; ++rep) {
      kernels::gemv_nbits(mine, x[static_cast<size_t>(c)].data(), rep % 2 ? 6 : 1, grouped.view(), y.data());
      const size_t n = static_cast<size_t>((rep % 2 ? 6 : 1) * N);
      if (!std::equal(y.begin(), y.begin() + static_cast<std::ptrdiff_t>(n), serial[static_cast<size_t>(c)].begin())) ++wrong;
    }
  };
  std::thread other(caller, 1);
  caller(0);
  other.join();
  CHECK(wrong == 0);
}
