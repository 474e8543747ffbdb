// KvRingBuffer: wrap-around, sinks, RoPE re-basing against a straightforward reference computed on the
// same cached keys, equality with plain attention inside the window, and no allocation per token.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <random>

#include "fixture_models.h"
#include "kernels/cpu/kv_ring_buffer.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/rope.h"
#include "llm/continuous_batch.h"
#include "llm/generator.h"
#include "llm/model_folder.h"
#include "ops/attention_common.h"
#include "runtime/session.h"
#include "test_util.h"

using namespace tern;
using namespace tern::llm;
using tern::kernels::KvRingBuffer;
using tern::kernels::KvRingConfig;
using tern::kernels::KvStorage;

// Counts every allocation through operator new in this test binary, so a test can assert a loop
// allocates nothing. The whole new/delete family is replaced, all on malloc/free, so every pair matches.
static std::atomic<long> g_allocations{0};
static void* counted(std::size_t n, std::size_t align = 0) {
  ++g_allocations;
  if (n == 0) n = 1;
  return align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align) : std::malloc(n);
}
static void* or_throw(void* p) {
  if (!p) throw std::bad_alloc();
  return p;
}
void* operator new(std::size_t n) { return or_throw(counted(n)); }
void* operator new[](std::size_t n) { return or_throw(counted(n)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted(n); }
void* operator new(std::size_t n, std::align_val_t a) { return or_throw(counted(n, static_cast<std::size_t>(a))); }
void* operator new[](std::size_t n, std::align_val_t a) { return or_throw(counted(n, static_cast<std::size_t>(a))); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept { return counted(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept { return counted(n, static_cast<std::size_t>(a)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

std::vector<float> held_keys_first_dim(const KvRingBuffer& r, int64_t b) {
  std::vector<float> v;
  for (int64_t i = 0; i < r.held(b); ++i) v.push_back(r.key(b, r.slot(b, i), 0));
  return v;
}

struct Rope {
  std::vector<float> cos, sin;
  kernels::RopeTable table;
  Rope(int64_t positions, int64_t rot, bool interleaved) {
    for (int64_t p = 0; p < positions; ++p)
      for (int64_t i = 0; i < rot / 2; ++i) {
        const double angle = p / std::pow(10000.0, 2.0 * i / rot);
        cos.push_back(static_cast<float>(std::cos(angle)));
        sin.push_back(static_cast<float>(std::sin(angle)));
      }
    table = {cos.data(), sin.data(), rot, interleaved};
  }
};

std::vector<float> randoms(size_t n, std::mt19937& g) {
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

}  // namespace

TEST_CASE("ring buffer: fills in order, then keeps sinks and the most recent tokens") {
  test::KernelContext cx(2);
  KvRingBuffer r({/*batch*/ 2, /*kv_heads*/ 1, /*head_dim*/ 2, /*capacity*/ 6, /*sinks*/ 2});
  auto push = [&](int64_t b, float t) {
    const float kv[2] = {t, t};
    r.append(b, kv, kv);
  };
  for (int t = 0; t < 3; ++t) push(0, static_cast<float>(t));
  CHECK(held_keys_first_dim(r, 0) == std::vector<float>{0, 1, 2});
  for (int t = 3; t < 10; ++t) push(0, static_cast<float>(t));
  CHECK(r.seen(0) == 10);
  CHECK(r.held(0) == 6);
  CHECK(held_keys_first_dim(r, 0) == std::vector<float>{0, 1, 6, 7, 8, 9});  // sinks 0, 1 stay
  CHECK(r.held(1) == 0);                                                     // sequences are independent

  KvRingBuffer plain({1, 1, 2, 4, 0});
  for (int t = 0; t < 10; ++t) {
    const float kv[2] = {static_cast<float>(t), 0};
    plain.append(0, kv, kv);
  }
  CHECK(held_keys_first_dim(plain, 0) == std::vector<float>{6, 7, 8, 9});
  CHECK(test::contains(test::error_of([] { KvRingBuffer bad({1, 1, 2, 4, 4}); }), "sinks"));
  CHECK(test::contains(test::error_of([&] {
                         KvRingBuffer empty({1, 1, 2, 4, 0});
                         float q[2] = {1, 1}, out[2];
                         empty.attend(cx, 0, q, 1, {1.0f}, {}, out);
                       }),
                       "before any token"));
}

TEST_CASE("ring attention rotates cached keys by their window position (RoPE re-basing)") {
  test::KernelContext cx(2);
  for (auto [interleaved, D] : {std::pair<bool, int64_t>{false, 8}, {true, 8}, {true, 40}, {true, 64}}) {  // (40, 64: SIMD pairs, tails)
    CAPTURE(interleaved);
    CAPTURE(D);
    const int64_t Hq = 4, Hkv = 2, W = 8, S = 2, tokens = 13;
    std::mt19937 g(3);
    Rope rope(W, D, interleaved);
    KvRingBuffer r({1, Hkv, D, W, S});
    std::vector<std::vector<float>> keys, values;
    for (int64_t t = 0; t < tokens; ++t) {
      keys.push_back(randoms(static_cast<size_t>(Hkv * D), g));
      values.push_back(randoms(static_cast<size_t>(Hkv * D), g));
      r.append(0, keys.back().data(), values.back().data());
    }
    const std::vector<float> q = randoms(static_cast<size_t>(Hq * D), g);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    std::vector<float> out(static_cast<size_t>(Hq * D));
    r.attend(cx, 0, q.data(), Hq, {scale}, rope.table, out.data());

    // Reference: the window holds tokens 0, 1 (sinks) and 7…12; key i is rotated to position i, the
    // query to the last position; plain softmax attention in double.
    const std::vector<int64_t> window{0, 1, 7, 8, 9, 10, 11, 12};
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kvh = h / (Hq / Hkv);
      std::vector<float> qr(D), kr(D);
      kernels::rope_rotate(q.data() + h * D, qr.data(), rope.cos.data() + (W - 1) * D / 2, rope.sin.data() + (W - 1) * D / 2, D, D,
                           interleaved);
      std::vector<double> score;
      for (size_t i = 0; i < window.size(); ++i) {
        const float* k = keys[static_cast<size_t>(window[i])].data() + kvh * D;
        kernels::rope_rotate(k, kr.data(), rope.cos.data() + i * D / 2, rope.sin.data() + i * D / 2, D, D, interleaved);
        double s = 0;
        for (int64_t d = 0; d < D; ++d) s += static_cast<double>(qr[static_cast<size_t>(d)]) * kr[static_cast<size_t>(d)];
        score.push_back(s * scale);
      }
      double mx = score[0], sum = 0;
      for (double s : score) mx = std::max(mx, s);
      for (double& s : score) sum += (s = std::exp(s - mx));
      for (int64_t d = 0; d < D; ++d) {
        double o = 0;
        for (size_t i = 0; i < window.size(); ++i)
          o += score[i] / sum * values[static_cast<size_t>(window[i])][static_cast<size_t>(kvh * D + d)];
        CHECK(out[static_cast<size_t>(h * D + d)] == doctest::Approx(o).epsilon(1e-5));
      }
    }
  }
}

namespace {
// T tokens appended to a ring of W ≥ T slots, then one query: equals plain attention over the same keys
// rotated at their absolute positions.
void check_ring_equals_plain(int64_t Hq, int64_t Hkv, int64_t D, int64_t T, int64_t W) {
  test::KernelContext cx(2);
  std::mt19937 g(11);
  Rope rope(W, D, false);
  KvRingBuffer r({1, Hkv, D, W, 4});
  Tensor K(DType::Float32, {1, Hkv, T, D}), V(DType::Float32, {1, Hkv, T, D}), Q(DType::Float32, {1, Hq, 1, D});
  for (int64_t t = 0; t < T; ++t) {
    auto k = randoms(static_cast<size_t>(Hkv * D), g), v = randoms(static_cast<size_t>(Hkv * D), g);
    r.append(0, k.data(), v.data());
    for (int64_t h = 0; h < Hkv; ++h) {  // the plain graph's cache: keys rotated at their absolute position
      kernels::rope_rotate(k.data() + h * D, K.data<float>() + (h * T + t) * D, rope.cos.data() + t * D / 2, rope.sin.data() + t * D / 2, D,
                           D, false);
      std::copy_n(v.data() + h * D, D, V.data<float>() + (h * T + t) * D);
    }
  }
  auto q = randoms(static_cast<size_t>(Hq * D), g);
  for (int64_t h = 0; h < Hq; ++h)
    kernels::rope_rotate(q.data() + h * D, Q.data<float>() + h * D, rope.cos.data() + (T - 1) * D / 2, rope.sin.data() + (T - 1) * D / 2, D,
                         D, false);
  AttentionCall call;
  call.scale = 0.25f;
  Tensor plain = attention(Q, K, V, call);
  std::vector<float> out(static_cast<size_t>(Hq * D)), one_thread(out.size());
  r.attend(cx, 0, q.data(), Hq, {0.25f}, rope.table, out.data());
  for (int64_t i = 0; i < Hq * D; ++i) CHECK(out[static_cast<size_t>(i)] == doctest::Approx(plain.data<float>()[i]).epsilon(1e-5));
  // The key blocks depend on the key count only: one thread gives the same bits as several.
  {
    test::KernelContext alone(1);
    r.attend(alone, 0, q.data(), Hq, {0.25f}, rope.table, one_thread.data());
  }
  CHECK(one_thread == out);
}
}  // namespace

TEST_CASE("inside the window, ring attention equals plain attention over post-RoPE keys") {
  check_ring_equals_plain(4, 2, 16, 9, 32);
  // several key blocks, KV heads split over threads, head size with SIMD tails
  check_ring_equals_plain(8, 2, 64, 150, 256);
  check_ring_equals_plain(6, 3, 20, 200, 256);
  check_ring_equals_plain(6, 2, 64, 2500, 3000);  // past 2,048 keys blocks grow (64 blocks at most)
}

namespace {
// A ring fed `lead` tokens one by one, then a chunk of the rest attended at once (kernels/cpu/chunk_attention):
// equals attending token by token (the decode kernel, checked against plain attention above), and one
// thread gives the chunk the same bits as several. A quantized ring's chunk reads the newest tokens exact as of the
// chunk's end (KvRingBuffer::exact_from), so there token by token runs over a float ring holding the window so.
void check_chunk_equals_tokens(int64_t Hq, int64_t Hkv, int64_t D, int64_t n, int64_t lead, kernels::Scoring scoring) {
  test::KernelContext cx(2);
  const int64_t W = 300;
  for (KvStorage storage : {KvStorage::F32, KvStorage::F16, KvStorage::Q8_0, KvStorage::Q4_0}) {
    if (D % tern::kernels::kv_storage_unit_elements(storage) != 0) continue;  // (blocks of 32)
    CAPTURE(std::string(tern::kernels::kv_storage_name(storage)));
    std::mt19937 g(3);
    Rope rope(W, D, false);
    const auto k = randoms(static_cast<size_t>(n * Hkv * D), g), v = randoms(k.size(), g);
    const auto q = randoms(static_cast<size_t>(n * Hq * D), g);
    const bool quantized = KvRingBuffer::keeps_exact(storage);
    KvRingBuffer one({1, Hkv, D, W, 4, quantized ? KvStorage::F32 : storage}), chunk({1, Hkv, D, W, 4, storage});
    // (q4_0's offset and scales: the chunk applies them as the decode kernel does)
    one.calibrate_keys(0, k.data(), 3, Hkv * D, q.data(), Hq * D, Hq);
    chunk.calibrate_keys(0, k.data(), 3, Hkv * D, q.data(), Hq * D, Hq);
    std::vector<float> by_token(static_cast<size_t>(n * Hq * D)), at_once(by_token.size()), one_thread(by_token.size());
    for (int64_t t = 0; t < n; ++t) {
      chunk.append(0, k.data() + t * Hkv * D, v.data() + t * Hkv * D);
      if (t < lead) chunk.attend(cx, 0, q.data() + t * Hq * D, Hq, scoring, rope.table, at_once.data() + t * Hq * D);
    }
    chunk.attend_chunk(cx, 0, q.data() + lead * Hq * D, Hq * D, n - lead, Hq, scoring, rope.table, at_once.data() + lead * Hq * D, Hq * D);
    std::vector<float> key(static_cast<size_t>(Hkv * D)), value(key.size());
    for (int64_t t = 0; t < n; ++t) {
      const float *kt = k.data() + t * Hkv * D, *vt = v.data() + t * Hkv * D;
      if (quantized && t < chunk.exact_from(0)) {  // (the window has not slid: token t in slot t)
        for (int64_t d = 0; d < Hkv * D; ++d)
          key[static_cast<size_t>(d)] = chunk.key(0, t, d), value[static_cast<size_t>(d)] = chunk.value(0, t, d);
        kt = key.data(), vt = value.data();
      }
      one.append(0, kt, vt);
      one.attend(cx, 0, q.data() + t * Hq * D, Hq, scoring, rope.table, by_token.data() + t * Hq * D);
    }
    // (a quantized ring's lead tokens read all exact then — fewer than 65 held — and its stored ones after)
    for (size_t i = quantized ? static_cast<size_t>(lead * Hq * D) : 0; i < by_token.size(); ++i)
      REQUIRE(at_once[i] == doctest::Approx(by_token[i]).epsilon(1e-5));
    {
      test::KernelContext alone(1);
      std::copy_n(at_once.begin(), lead * Hq * D, one_thread.begin());
      chunk.attend_chunk(alone, 0, q.data() + lead * Hq * D, Hq * D, n - lead, Hq, scoring, rope.table, one_thread.data() + lead * Hq * D,
                         Hq * D);
    }
    CHECK(one_thread == at_once);
  }
}
}  // namespace

TEST_CASE("a prompt chunk attended at once equals appending and attending token by token (every storage)") {
  check_chunk_equals_tokens(6, 2, 20, 150, 10, {0.3f});      // a head size with SIMD tails, ten key blocks
  check_chunk_equals_tokens(32, 8, 64, 70, 0, {0.125f});     // Llama-3.2-1B's heads
  check_chunk_equals_tokens(4, 4, 128, 37, 5, {0.09f});      // no grouping, rows not a multiple of four
  check_chunk_equals_tokens(14, 2, 64, 33, 1, {0.125f});     // groups of 7 (Qwen2.5-0.5B)
  check_chunk_equals_tokens(8, 4, 32, 40, 3, {0.2f, 5.0f});  // soft-capped scores (Gemma 2)
}

TEST_CASE("a speculative check's rows attended at once equal decode's token by token, bit for bit (every storage)") {
  // (Hq, Hkv, D, keys before the rows, rows): key counts across a block's end (31 → 33), past 2,048 keys, one row,
  // a q4_0 ring's exact newest tokens after its stored ones (100 → 104: exact from 64 on).
  struct Case {
    int64_t Hq, Hkv, D, held, rows;
  };
  for (Case c : {Case{6, 2, 20, 29, 4}, Case{9, 3, 64, 30, 3}, Case{4, 4, 128, 2100, 4}, Case{8, 1, 32, 5, 2}, Case{4, 2, 32, 40, 1},
                 Case{8, 2, 64, 100, 4}}) {
    CAPTURE(c.held);
    CAPTURE(c.rows);
    test::KernelContext cx(2);
    const int64_t W = 4096, n = c.held + c.rows, Hq = c.Hq, Hkv = c.Hkv, D = c.D;
    for (KvStorage storage : {KvStorage::F32, KvStorage::F16, KvStorage::Q8_0, KvStorage::Q4_0}) {
      if (D % tern::kernels::kv_storage_unit_elements(storage) != 0) continue;  // (blocks of 32)
      CAPTURE(std::string(tern::kernels::kv_storage_name(storage)));
      std::mt19937 g(5);
      Rope rope(W, D, false);
      const auto k = randoms(static_cast<size_t>(n * Hkv * D), g), v = randoms(k.size(), g);
      // Queries as a packed QKV run lays them out: rows `stride` floats apart.
      const int64_t stride = (Hq + 2 * Hkv) * D;
      const auto q = randoms(static_cast<size_t>(n * stride), g);
      KvRingBuffer one({1, Hkv, D, W, 4, storage}), rows({1, Hkv, D, W, 4, storage});
      one.calibrate_keys(0, k.data(), 3, Hkv * D);
      rows.calibrate_keys(0, k.data(), 3, Hkv * D);
      std::vector<float> by_token(static_cast<size_t>(c.rows * Hq * D)), at_once(by_token.size());
      for (int64_t t = 0; t < n; ++t) {
        if (t == c.held) REQUIRE(rows.takes_rows(0, c.rows));
        one.append(0, k.data() + t * Hkv * D, v.data() + t * Hkv * D);
        rows.append(0, k.data() + t * Hkv * D, v.data() + t * Hkv * D);
        if (t >= c.held) one.attend(cx, 0, q.data() + t * stride, Hq, {0.2f}, rope.table, by_token.data() + (t - c.held) * Hq * D);
      }
      rows.attend_rows(cx, 0, q.data() + c.held * stride, stride, c.rows, Hq, {0.2f}, rope.table, at_once.data());
      CHECK(at_once == by_token);
    }
  }
  test::KernelContext cx(1);
  KvRingBuffer slid({1, 1, 32, 8, 2, KvStorage::F32});
  const std::vector<float> kv(32, 0.5f), q(32, 0.25f);
  for (int t = 0; t < 10; ++t) slid.append(0, kv.data(), kv.data());
  std::vector<float> out(64);
  CHECK_THROWS_WITH_AS(slid.attend_rows(cx, 0, q.data(), 0, 2, 1, {1.0f}, {}, out.data()), doctest::Contains("a window that has not slid"),
                       Error);
}

TEST_CASE("fp16 storage halves the cache and stays within fp16 rounding of fp32") {
  test::KernelContext cx(2);
  const int64_t Hq = 4, Hkv = 2, D = 16;
  std::mt19937 g(9);
  Rope rope(64, D, false);
  KvRingBuffer r32({1, Hkv, D, 16, 2}), r16({1, Hkv, D, 16, 2, KvStorage::F16});
  for (int t = 0; t < 40; ++t) {  // wraps
    auto k = randoms(static_cast<size_t>(Hkv * D), g), v = randoms(static_cast<size_t>(Hkv * D), g);
    r32.append(0, k.data(), v.data());
    r16.append(0, k.data(), v.data());
  }
  CHECK(r16.key(0, 5, 3) == doctest::Approx(r32.key(0, 5, 3)).epsilon(1e-3));
  auto q = randoms(static_cast<size_t>(Hq * D), g);
  std::vector<float> a(static_cast<size_t>(Hq * D)), b(a.size());
  r32.attend(cx, 0, q.data(), Hq, {0.25f}, rope.table, a.data());
  r16.attend(cx, 0, q.data(), Hq, {0.25f}, rope.table, b.data());
  for (size_t i = 0; i < a.size(); ++i) CHECK(b[i] == doctest::Approx(a[i]).epsilon(1e-2).scale(1.0));
}

TEST_CASE(
    "q8_0 and q4_0 rings keep blocks of 32 with one fp16 scale (q4_0 of the block's Hadamard transform, less a key offset), by hand") {
  const int64_t D = 32;
  // q4_0 stores each block's Walsh–Hadamard transform y = H·x. A key e0 + 0.5·e1 transforms to 1.5 at even j and
  // 0.5 at odd j. Of the scales that put the extreme 1.5 at −8 … −5.5 or 7 … 5 steps, the least squared error's is
  // −0.25 (−6 steps), where 0.5 is −2 steps: both exact, so the key comes back exactly (llama.cpp's −8 steps, scale
  // −0.1875, would give 0.5 as −3 steps = 0.5625, and back 1.03125·e0 + 0.46875·e1). A constant value 0.75
  // transforms to 24·e0, kept exactly, so comes back exactly.
  std::vector<float> k(D, 0.0f), v(D, 0.75f);
  k[0] = 1.0f;
  k[1] = 0.5f;
  KvRingBuffer q4({1, 1, D, 8, 0, KvStorage::Q4_0});
  q4.append(0, k.data(), v.data());
  for (int64_t j = 0; j < D; ++j) {
    CAPTURE(j);
    CHECK(q4.key(0, 0, j) == (j == 0 ? 1.0f : j == 1 ? 0.5f : 0.0f));
    CHECK(q4.value(0, 0, j) == 0.75f);
  }
  for (int64_t j = 0; j < D; ++j) {
    k[static_cast<size_t>(j)] = static_cast<float>(j % 16 - 8);         // −8 … 7, twice
    v[static_cast<size_t>(j)] = 0.5f * static_cast<float>(8 - j % 16);  // 4 … −3.5, twice
  }
  // q8_0: scale max|x| / 127 (8/127 for the key), each element the nearest multiple: within half a step (plus the
  // scale's fp16 rounding) of the original; the extreme is ±127 steps.
  KvRingBuffer q8({1, 1, D, 8, 0, KvStorage::Q8_0});
  q8.append(0, k.data(), v.data());
  const float step = 8.0f / 127;
  for (int64_t j = 0; j < D; ++j) CHECK(std::fabs(q8.key(0, 0, j) - k[static_cast<size_t>(j)]) <= step * 0.5f + 8.0f / 2048);
  CHECK(q8.key(0, 0, 0) == doctest::Approx(-8.0f).epsilon(1e-3));   // −127 steps
  CHECK(q8.value(0, 0, 0) == doctest::Approx(4.0f).epsilon(1e-3));  // +127 steps of 4/127
  // A NaN (a broken model's key) is stored as step 0, never an undefined float-to-int conversion.
  k.assign(D, 1.0f);
  k[3] = std::nanf("");
  KvRingBuffer qn({1, 1, D, 8, 0, KvStorage::Q8_0});
  qn.append(0, k.data(), v.data());
  CHECK(qn.key(0, 0, 3) == 0.0f);
  CHECK(qn.key(0, 0, 0) == doctest::Approx(1.0f).epsilon(1e-3));
  // A q4_0 ring's key offset (calibrate_keys: the mean of a first run's keys, here 0.25 + e2 and 0.75 + 3·e2) is
  // taken from each key stored and added back: the offset itself comes back exactly, μ + e0 + 0.5·e1 as μ + the
  // round trip above; a copied row keeps it; once a row holds tokens its offset stays.
  {
    std::vector<float> run(2 * D, 0.25f), mu(D, 0.5f), kx(D), v0(D, 0.0f);
    for (int64_t j = D; j < 2 * D; ++j) run[static_cast<size_t>(j)] = 0.75f;
    run[2] += 1.0f, run[D + 2] += 3.0f, mu[2] = 2.5f;
    KvRingBuffer r({2, 1, D, 8, 0, KvStorage::Q4_0});
    r.calibrate_keys(0, run.data(), 2, D);
    for (int64_t j = 0; j < D; ++j) CHECK(r.key_offset(0)[j] == mu[static_cast<size_t>(j)]);
    r.append(0, mu.data(), v0.data());
    for (int64_t j = 0; j < D; ++j) kx[static_cast<size_t>(j)] = mu[static_cast<size_t>(j)] + (j == 0 ? 1.0f : j == 1 ? 0.5f : 0.0f);
    r.append(0, kx.data(), v0.data());
    r.copy_row(0, 1);
    for (int64_t row : {0, 1})
      for (int64_t j = 0; j < D; ++j) {
        CAPTURE(j);
        const float m = mu[static_cast<size_t>(j)];
        CHECK(r.key(row, 0, j) == m);
        CHECK(r.key(row, 1, j) == m + (j == 0 ? 1.0f : j == 1 ? 0.5f : 0.0f));
      }
    CHECK(test::contains(test::error_of([&] { r.calibrate_keys(0, run.data(), 2, D); }),
                         "sequence 0's key offset set while it holds 2 tokens"));
    CHECK(KvRingBuffer({1, 1, D, 8, 0, KvStorage::Q8_0}).key_offset(0) == nullptr);
  }
  // Calibrated with its first run's queries too: keys ±8 on the RoPE pair (0, 16) and ±1 elsewhere, queries 8 on the
  // pair (1, 17) and 1 elsewhere. Channel RMS, key over query: 8 on (0, 16), 1/8 on (1, 17), 1 elsewhere, so the
  // scales (their square roots, geometric mean 1) are √8, 1/√8 and 1 — kept, as (Σ k·q)² / (Σ k² · Σ q²) =
  // 60² / 158² < ½. With every channel's RMS equal the balance predicts no gain and the scales stay 1.
  {
    std::vector<float> run(2 * D, 1.0f), queries(2 * D, 1.0f);
    for (int64_t j = D; j < 2 * D; ++j) run[static_cast<size_t>(j)] = -1.0f;
    for (int64_t j : {0, 16}) run[static_cast<size_t>(j)] = 8.0f, run[static_cast<size_t>(D + j)] = -8.0f;
    for (int64_t j : {1, 17}) queries[static_cast<size_t>(j)] = 8.0f, queries[static_cast<size_t>(D + j)] = 8.0f;
    KvRingBuffer r({1, 1, D, 8, 0, KvStorage::Q4_0});
    r.calibrate_keys(0, run.data(), 2, D, queries.data(), D, 1);
    for (int64_t j = 0; j < D; ++j) {
      CAPTURE(j);
      CHECK(r.key_offset(0)[j] == 0.0f);
      const double want = j % 16 == 0 ? std::sqrt(8.0) : j % 16 == 1 ? 1 / std::sqrt(8.0) : 1.0;
      CHECK(r.key_scale(0)[j] == doctest::Approx(want).epsilon(1e-5));
    }
    std::vector<float> key(D, 0.0f), zero(D, 0.0f);
    key[0] = 6.0f, key[1] = -0.5f, key[5] = 1.0f;
    r.append(0, key.data(), zero.data());
    for (int64_t j = 0; j < D; ++j) CHECK(std::fabs(r.key(0, 0, j) - key[static_cast<size_t>(j)]) <= 0.5f);  // (a few q4_0 steps)
    KvRingBuffer flat({1, 1, D, 8, 0, KvStorage::Q4_0});
    flat.calibrate_keys(0, run.data(), 2, D, run.data(), D, 1);  // (queries shaped as the keys: nothing to balance)
    for (int64_t j = 0; j < D; ++j) CHECK(flat.key_scale(0)[j] == 1.0f);
  }
  // Bytes per token (a growth's, 256 → 512 slots: a q4_0 ring's exact newest tokens are a fixed cost): 34 and 18 a
  // block against fp16's 64 — 0.53x and 0.28x.
  auto bytes = [&](KvStorage s) {
    const KvRingConfig c{1, 8, 64, 4096, 0, s};
    return static_cast<double>(KvRingBuffer::bytes_for(c, 300) - KvRingBuffer::bytes_for(c, 200));
  };
  CHECK(bytes(KvStorage::Q8_0) / bytes(KvStorage::F16) == doctest::Approx(34.0 / 64));
  CHECK(bytes(KvStorage::Q4_0) / bytes(KvStorage::F16) == doctest::Approx(18.0 / 64));
  CHECK(test::contains(test::error_of([] {
                         KvRingBuffer bad({1, 2, 48, 8, 0, KvStorage::Q8_0});
                       }),
                       "a q8_0 ring needs head_dim a multiple of 32 (its blocks), got 48"));
}

// (kernel_tiers.sh reruns it at every tier: "*attention*")
TEST_CASE("a quantized ring's attention equals a float ring's over the same dequantized keys and values") {
  const int64_t Hq = 8, Hkv = 2, D = 64, W = 96;
  std::mt19937 g(11);
  Rope rope(W + 8, D, false);
  test::KernelContext cx(2);
  for (KvStorage storage : {KvStorage::Q8_0, KvStorage::Q4_0}) {
    CAPTURE(std::string(tern::kernels::kv_storage_name(storage)));
    KvRingBuffer quant({1, Hkv, D, W, 4, storage}), plain({1, Hkv, D, W, 4});
    auto first = randoms(static_cast<size_t>(2 * Hkv * D), g);  // a first run's keys, with a large mean
    for (size_t i = 0; i < first.size(); i += 7) first[i] += 4.0f;
    // Queries of a first run that look where the keys are small: a q4_0 ring scales its key channels (calibrate_keys).
    auto first_q = randoms(static_cast<size_t>(2 * Hq * D), g);
    for (size_t i = 0; i < first.size(); ++i) first[i] *= i % D < 8 ? 6.0f : 1.0f;
    for (size_t i = 0; i < first_q.size(); ++i) first_q[i] *= i % D >= 8 && i % D < 16 ? 6.0f : 1.0f;
    quant.calibrate_keys(0, first.data(), 2, Hkv * D, first_q.data(), Hq * D, Hq);
    if (storage == KvStorage::Q4_0) CHECK(quant.key_scale(0)[0] != 1.0f);
    // Each token as appended and as stored; the float ring holds the window as the quantized one reads it: its
    // newest tokens exact (KvRingBuffer::exact_from), the others as stored.
    std::vector<std::vector<float>> exact, stored;
    std::vector<float> a(static_cast<size_t>(Hq * D)), b(a.size());
    for (int t = 0; t < 2 * W + 5; ++t) {  // slides past the window twice
      const auto k = randoms(static_cast<size_t>(Hkv * D), g), v = randoms(k.size(), g), q = randoms(a.size(), g);
      quant.append(0, k.data(), v.data());
      const int64_t s = quant.slot(0, quant.held(0) - 1);
      std::vector<float> kv = k;
      kv.insert(kv.end(), v.begin(), v.end());
      exact.push_back(kv);
      for (int64_t d = 0; d < Hkv * D; ++d)
        kv[static_cast<size_t>(d)] = quant.key(0, s, d), kv[static_cast<size_t>(Hkv * D + d)] = quant.value(0, s, d);
      stored.push_back(kv);
      plain.clear();
      for (int64_t i = 0; i < quant.held(0); ++i) {
        const auto& row =
            (i >= quant.exact_from(0) ? exact : stored)[static_cast<size_t>(tern::kernels::ring_token_of_index(i, t + 1, W, 4))];
        plain.append(0, row.data(), row.data() + Hkv * D);
      }
      if (t >= 64) CHECK((quant.exact_from(0) > 0 && quant.held(0) - quant.exact_from(0) > 32));
      quant.attend(cx, 0, q.data(), Hq, {0.125f}, rope.table, a.data());
      plain.attend(cx, 0, q.data(), Hq, {0.125f}, rope.table, b.data());
      for (size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == doctest::Approx(b[i]).epsilon(1e-5).scale(1.0));
    }
  }
}

TEST_CASE("a quantized ring reads its newest tokens exact: from its second-newest whole group of 32, through short roll backs") {
  const int64_t D = 32;
  KvRingBuffer r({1, 1, D, 4096, 0, KvStorage::Q4_0});
  const std::vector<float> kv(D, 0.5f);
  auto append = [&](int64_t n) {
    for (int64_t t = 0; t < n; ++t) r.append(0, kv.data(), kv.data());
  };
  // By hand: tokens 0 … 63 all exact; at 65 held the line moves to token 32, at 97 to 64 (33 to 64 exact).
  append(64);
  CHECK(r.exact_from(0) == 0);
  append(1);
  CHECK(r.exact_from(0) == 32);
  append(31);
  CHECK(r.exact_from(0) == 32);
  append(1);
  CHECK(r.exact_from(0) == 64);
  // A speculative step's roll back (16 drafts) keeps the copies: back to 90 held, the line at 32 again.
  append(3);  // 100
  r.keep_prefix(0, 90);
  CHECK(r.exact_from(0) == 32);
  // A reused prompt's long one: the copies of tokens 0 … 99 were overwritten by 100 … 199, so 100 held read as stored;
  // the tokens appended after them get copies again (from 100, not the line's 96).
  append(110);  // 200
  r.keep_prefix(0, 100);
  CHECK(r.exact_from(0) == 100);
  append(30);
  CHECK(r.exact_from(0) == 100);
  append(40);  // 170: the line passes
  CHECK(r.exact_from(0) == 128);
  // Rows read alike only within one line: 3 rows at 95 … 97 held straddle it (no after clear_row).
  r.clear_row(0);
  append(94);
  CHECK(!r.takes_rows(0, 3));
  CHECK(r.takes_rows(0, 2));
  KvRingBuffer f32({1, 1, D, 4096, 0, KvStorage::F32});
  for (int t = 0; t < 94; ++t) f32.append(0, kv.data(), kv.data());
  CHECK(f32.takes_rows(0, 3));
  CHECK(f32.exact_from(0) == 94);
  // A copied row reads as its source: its blocks, and its exact copies with their line.
  test::KernelContext cx(1);
  Rope rope(128, D, false);
  std::mt19937 g(21);
  for (KvStorage storage : {KvStorage::Q8_0, KvStorage::Q4_0}) {
    CAPTURE(std::string(tern::kernels::kv_storage_name(storage)));
    KvRingBuffer two({2, 1, D, 128, 0, storage});
    for (int t = 0; t < 100; ++t) {
      const auto k = randoms(D, g), v = randoms(D, g);
      two.append(0, k.data(), v.data());
    }
    two.copy_row(0, 1);
    CHECK(two.exact_from(1) == two.exact_from(0));
    const auto q = randoms(2 * D, g);
    std::vector<float> a(2 * D), b(2 * D);
    two.attend(cx, 0, q.data(), 2, {0.2f}, rope.table, a.data());
    two.attend(cx, 1, q.data(), 2, {0.2f}, rope.table, b.data());
    CHECK(a == b);
  }
}

TEST_CASE("appending and attending allocate nothing once the buffer exists") {
  test::KernelContext cx(2);
  const int64_t Hq = 8, Hkv = 2, D = 32;
  std::mt19937 g(5);
  Rope rope(64, D, false);
  KvRingBuffer r({1, Hkv, D, 64, 4});
  auto k = randoms(static_cast<size_t>(Hkv * D), g), q = randoms(static_cast<size_t>(Hq * D), g);
  std::vector<float> out(static_cast<size_t>(Hq * D));
  r.append(0, k.data(), k.data());
  r.attend(cx, 0, q.data(), Hq, {0.2f}, rope.table, out.data());  // sizes the scratch once
  const long before = g_allocations.load();
  for (int step = 0; step < 200; ++step) {  // wraps around the 64 slots three times
    r.append(0, k.data(), k.data());
    r.attend(cx, 0, q.data(), Hq, {0.2f}, rope.table, out.data());
  }
  CHECK(g_allocations.load() == before);
  { std::vector<int> probe(16); }  // the counter does see allocations
  CHECK(g_allocations.load() > before);
}

TEST_CASE("a replayed decode step allocates a handful of objects, however many nodes the graph has") {
  const std::string model = TERN_SOURCE_DIR "/tests/fixtures/llama-gqa-torch/model.onnx";  // (no operator+: GCC 12 -O3 warned falsely)
  SessionOptions so;
  so.decoder.ring_capacity = 64;
  Session s(model, so);
  // One decode step's feeds; the mask covers only the new token, as the generator feeds a ring.
  const std::vector<std::pair<std::string, Tensor>> feeds{{"input_ids", Tensor::from_vector<int64_t>({5}, {1, 1})},
                                                          {"attention_mask", Tensor::from_vector<int64_t>({1}, {1, 1})},
                                                          {"position_ids", Tensor::from_vector<int64_t>({3}, {1, 1})}};
  for (int i = 0; i < 3; ++i) s.run(feeds);  // infer, infer + plan, first replay
  const long before = g_allocations.load();
  for (int i = 0; i < 10; ++i) s.run(feeds);
  const double per_step = (g_allocations.load() - before) / 10.0;
  MESSAGE("allocations per replayed decode step: ", per_step, " for ", s.graph().nodes.size(), " nodes");
  // What is left is per run, not per node: the returned output's buffer (pool bookkeeping, its shape)
  // and the Outputs list handed back (6 today; 1437 before step plans).
  CHECK(per_step <= 8);

  // Handing the last outputs back: the step writes into them and allocates nothing at all.
  Outputs out;
  s.run(feeds, out);
  s.run(feeds, out);
  const Tensor first = out[0].clone();
  const void* where = out[0].raw();
  const long bound_before = g_allocations.load();
  for (int i = 0; i < 10; ++i) s.run(feeds, out);
  CHECK(g_allocations.load() == bound_before);
  CHECK(out[0].raw() == where);
  CHECK(std::equal(first.data<float>(), first.data<float>() + first.numel(), out[0].data<float>()) == false);  // the ring moved on
  // An output the caller still holds elsewhere is not overwritten: the next run gets new memory.
  const Tensor kept = out[0];
  const Tensor kept_copy = kept.clone();
  s.run(feeds, out);
  CHECK(out[0].raw() != kept.raw());
  CHECK(std::equal(kept.data<float>(), kept.data<float>() + kept.numel(), kept_copy.data<float>()));
}

namespace {
using test::decoder_feeds;
using test::gqa_ring_session;
using test::kGqaFixture;
using test::shapes_of;
}  // namespace

TEST_CASE("generating more tokens allocates nothing more: decode steps are allocation-free, greedy or sampled") {
  const auto s = gqa_ring_session(128);
  Generator gen(*s, read_model_config(kGqaFixture));
  for (const bool greedy : {true, false}) {
    CAPTURE(greedy);
    GenerateOptions o;
    o.sampling.greedy = greedy;
    o.sampling.temperature = 0.8f;
    o.sampling.top_p = 0.9f;
    o.sampling.repetition_penalty = 1.1f;
    auto allocations_for = [&](int64_t new_tokens) {
      o.max_new_tokens = new_tokens;
      const long before = g_allocations.load();
      const GenerateResult r = gen.generate({{1, 17, 93}}, o);
      REQUIRE(r.tokens[0].size() == static_cast<size_t>(3 + new_tokens));  // (no EOS in the way)
      return g_allocations.load() - before;
    };
    allocations_for(20);  // warm: scratch sized, plans made
    const long short_run = allocations_for(20), long_run = allocations_for(60);
    MESSAGE("allocations for 20 tokens: ", short_run, ", for 60: ", long_run);
    CHECK(long_run == short_run);
  }
}

TEST_CASE("a long window allocates slots as it fills; held tokens survive each growth, per sequence") {
  const int64_t Hkv = 2, D = 8, W = 1000;
  KvRingBuffer r({2, Hkv, D, W, 4});
  auto row = [&](int64_t b, int64_t t, float base) {
    std::vector<float> v(static_cast<size_t>(Hkv * D));
    for (size_t i = 0; i < v.size(); ++i) v[i] = base + static_cast<float>(b * 100000 + t * 16) + static_cast<float>(i) / 16;
    return v;
  };
  for (int64_t t = 0; t < 1100; ++t)  // 256 → 512 → 1000 slots, then wraps
    for (int64_t b = 0; b < 2; ++b) {
      if (b == 1 && t >= 700) continue;  // sequence 1 stops early
      auto k = row(b, t, 0.0f), v = row(b, t, 0.5f);
      r.append(b, k.data(), v.data());
    }
  CHECK(r.held(0) == W);
  CHECK(r.held(1) == 700);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i : {int64_t{0}, int64_t{3}, int64_t{255}, int64_t{256}, int64_t{511}, int64_t{699}}) {
      const int64_t t = b == 0 && i >= 4 ? 1100 - (W - i) : i;  // sequence 0 slid: window index i holds token t
      CHECK(r.key(b, r.slot(b, i), 5) == doctest::Approx(row(b, t, 0.0f)[5]));
      CHECK(r.value(b, r.slot(b, i), 9) == doctest::Approx(row(b, t, 0.5f)[9]));
    }
}

TEST_CASE("a resumed turn feeds only its new tokens and gives what a fresh prefill of the whole prompt gives") {
  const auto s = gqa_ring_session(128);
  Generator gen(*s, read_model_config(kGqaFixture));
  GenerateOptions o;
  o.max_new_tokens = 6;
  o.resume = true;
  const GenerateResult first = gen.generate({{1, 17, 93}}, o);
  std::vector<int64_t> next = first.tokens[0];
  next.insert(next.end(), {5, 42});
  const GenerateResult resumed = gen.generate({next}, o);
  CHECK(resumed.prompt_tokens == 3);  // the last answer token and the two new ones
  o.resume = false;
  const GenerateResult fresh = gen.generate({next}, o);
  CHECK(fresh.prompt_tokens == static_cast<int64_t>(next.size()));
  CHECK(resumed.tokens == fresh.tokens);
  // A prompt that does not continue the cached tokens starts over.
  o.resume = true;
  gen.generate({{1, 17, 93}}, o);
  const GenerateResult other = gen.generate({{1, 18, 93, 4}}, o);
  CHECK(other.prompt_tokens == 4);
}

TEST_CASE("memory_use accounts for what a decoding session owns: packed weights, the KV ring, activations (within 5%)") {
  const size_t before = owned_host_bytes();
  {
    const auto s = gqa_ring_session(64);
    Generator gen(*s, read_model_config(kGqaFixture));
    GenerateOptions o;
    o.max_new_tokens = 40;
    gen.generate({{1, 17, 93}}, o);
    const MemoryUse m = s->memory_use();
    const double owned = static_cast<double>(owned_host_bytes() - before);
    MESSAGE("owned ", owned, " B: packed ", m.packed_weights, ", constants ", m.owned_constants, " (mapped ", m.mapped_constants, "), KV ",
            m.kv_cache, ", activations ", m.activations);
    CHECK(m.kv_cache > 0);
    CHECK(m.activations > 0);
    CHECK(m.packed_weights + m.owned_constants > 0);
    CHECK(std::abs(static_cast<double>(m.owned()) - owned) <= 0.05 * owned);
  }
  CHECK(owned_host_bytes() == before);  // all of it given back with the session
}

TEST_CASE("KvRingBuffer::keep_prefix: a row keeps its first n tokens, the next append lands after them; refused once slid") {
  KvRingConfig c;
  c.batch = 2, c.kv_heads = 1, c.head_dim = 2, c.capacity = 8;
  KvRingBuffer ring(c);
  for (int t = 0; t < 5; ++t) {
    const float k[2] = {float(t), 0}, v[2] = {0, float(t)};
    ring.append(0, k, v);
    ring.append(1, k, v);
  }
  ring.keep_prefix(0, 3);
  CHECK(ring.held(0) == 3);
  CHECK(ring.held(1) == 5);  // (the other row keeps its tokens)
  const float k[2] = {42, 0}, v[2] = {0, 42};
  ring.append(0, k, v);
  CHECK(ring.held(0) == 4);
  CHECK(ring.key(0, ring.slot(0, 2), 0) == 2);   // the kept tokens, as they were
  CHECK(ring.key(0, ring.slot(0, 3), 0) == 42);  // the new one after them
  CHECK(tern::test::error_of([&] { ring.keep_prefix(0, 5); }).find("cannot keep its first 5 tokens (4 seen") != std::string::npos);
  for (int t = 0; t < 6; ++t) ring.append(1, k, v);  // 11 seen: the window (8) slid past the first tokens
  CHECK(tern::test::error_of([&] { ring.keep_prefix(1, 2); }).find("window 8") != std::string::npos);
}

TEST_CASE("a generation's KV cache is checked against the memory cap before it starts: the prediction is what the rings hold") {
  const auto s = gqa_ring_session(1024);
  const ModelConfig config = read_model_config(kGqaFixture);
  Generator gen(*s, config);
  GenerateOptions o;
  o.max_new_tokens = 600;  // 603 tokens: the rings grow 256 → 512 → 1024 slots
  const int64_t predicted = s->state_peak_bytes(1, 603);
  gen.generate({{1, 17, 93}}, o);
  const int64_t held = gen.sequence().held_bytes(), layers = s->passes().cached_layers;
  REQUIRE(held > 0);
  CHECK(predicted == held + held / layers);  // every ring at 1024 slots, and one ring's 512 old ones beside it
  // Under a cap that holds the model but not that cache, the request fails before its prefill, naming the sizes,
  // and the session serves the next request that fits.
  const size_t cap = owned_host_bytes() - static_cast<size_t>(held) + static_cast<size_t>(held / 2);
  set_process_memory_limit(cap);
  const std::string error = test::error_of([&] { gen.generate({{1, 17, 93}}, o); });
  CAPTURE(error);
  CHECK(test::contains(error, "600 new tokens after a prompt of 3 (1 row) would hold " + memory_size(static_cast<size_t>(predicted)) +
                                  " more of KV cache at the last"));
  CHECK(gen.sequence().held_bytes() < held / 4);  // (the rings it reset: nothing grown)
  o.max_new_tokens = 100;
  CHECK(gen.generate({{1, 17, 93}}, o).tokens[0].size() == 103);
  set_process_memory_limit(0);
}

TEST_CASE("on the ring a prompt goes in chunks of 512 by default: the whole prompt's logits, a fraction of its activations") {
  const ModelConfig config = read_model_config(kGqaFixture);
  std::vector<int64_t> prompt(8000);  // past the window of 128: the ring slides inside the prompt
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = 3 + static_cast<int64_t>(i * 37 % 300);
  GenerateOptions chunked, whole;
  chunked.max_new_tokens = whole.max_new_tokens = 4;
  whole.prefill_chunk = 0;
  const auto s = gqa_ring_session(128);
  Generator gen(*s, config);
  CHECK(gen.prefill_chunk(chunked) == kDefaultPrefillChunk);
  const size_t chunked_bytes = gen.forecast_activations(1, 8000, chunked).pool_growth;
  const size_t whole_bytes = gen.forecast_activations(1, 8000, whole).pool_growth;
  MESSAGE("activations forecast for an 8000-token prompt: ", memory_size(chunked_bytes), " in chunks of 512, ", memory_size(whole_bytes),
          " whole");
  CHECK(chunked_bytes * 2 < whole_bytes);
  const GenerateResult a = gen.generate({prompt}, chunked), b = gen.generate({prompt}, whole);
  CHECK(a.tokens == b.tokens);
  REQUIRE(a.prefill_logits.numel() == b.prefill_logits.numel());
  CHECK(std::memcmp(a.prefill_logits.raw(), b.prefill_logits.raw(), a.prefill_logits.nbytes()) == 0);
  // A cap the whole prompt would pass says so, and how to take less.
  const auto fresh = gqa_ring_session(128);
  Generator capped(*fresh, config);
  set_process_memory_limit(owned_host_bytes() + (chunked_bytes + whole_bytes) / 2);
  const std::string error = test::error_of([&] { capped.generate({prompt}, whole); });
  CHECK(test::contains(error, "(forecast, the prompt in one run: --prefill-chunk 512 takes less)"));
  CHECK(capped.generate({prompt}, chunked).tokens == a.tokens);
  set_process_memory_limit(0);
}

TEST_CASE("continuous batching: a request whose cache would pass the memory cap is refused alone; the running row goes on") {
  const auto s = gqa_ring_session(1024);
  Generator gen(*s, read_model_config(kGqaFixture));
  ContinuousBatcher batcher(*s, gen, 2, 0);
  std::vector<int64_t> got;
  FinishReason ended = FinishReason::Error;
  SequenceRequest small;
  small.prompt = {1, 17, 93};
  small.max_new_tokens = 100;  // 103 tokens: the rings' first 256 slots
  small.on_token = [&](int64_t t) {
    got.push_back(t);
    return true;
  };
  small.on_finish = [&](FinishReason why) { ended = why; };
  batcher.add(small);
  batcher.step();
  batcher.step();
  // 600 new tokens would grow both rows' rings to 1024 slots (a ring's slots are per row, as the longest needs).
  const int64_t more = s->state_peak_bytes(2, 603) - gen.sequence().held_bytes();
  set_process_memory_limit(owned_host_bytes() + static_cast<size_t>(more / 2));
  SequenceRequest big = small;
  big.max_new_tokens = 600;
  big.on_finish = [](FinishReason) { FAIL("a refused request never runs"); };
  CHECK_THROWS_AS(batcher.add(big), MemoryLimitError);
  const std::string error = test::error_of([&] { batcher.add(big); });
  CHECK(test::contains(error, "600 new tokens after a prompt of 3 (2 rows) would hold " + memory_size(static_cast<size_t>(more)) +
                                  " more of KV cache at the last"));
  CHECK(batcher.active() == 1);
  while (batcher.step()) {
  }
  CHECK(ended == FinishReason::Length);
  CHECK(got.size() == 100);
  set_process_memory_limit(0);
}

TEST_CASE("a generation over the graph's own cache is checked against the memory cap before it starts") {
  // Optimum's Llama cell (2 layers, 1 KV head of 16): a step holds the past it reads beside the present it
  // writes, float32 keys and values — 2 x 103 positions x (2 layers x 2 x 16 x 4 bytes) at the last of 100 new
  // tokens after 3 = 52,736 bytes.
  const std::string dir = (test::exports_dir() / "llama-optimum").string();
  Session s(dir + "/model.onnx");
  Generator gen(s, read_model_config(dir));
  GenerateOptions o;
  o.max_new_tokens = 100;
  set_process_memory_limit(owned_host_bytes() + 40000);
  const std::string error = test::error_of([&] { gen.generate({{1, 17, 93}}, o); });
  CAPTURE(error);
  CHECK(test::contains(error, "100 new tokens after a prompt of 3 (1 row) would hold " + memory_size(52736) + " more of KV cache"));
  set_process_memory_limit(0);
  CHECK(gen.generate({{1, 17, 93}}, o).tokens[0].size() == 103);
}

TEST_CASE("a run's activations are forecast before it runs: the forecast is what the pool takes; past a cap the run fails first") {
  // The ring session at shapes its pool has not seen, then at seen ones: the pool grows by what the forecast says,
  // to the byte. (tests/test_exports.cpp: the same over every exporter cell.)
  const auto s = gqa_ring_session(64);
  for (auto [batch, seq] : {std::pair{1, 7}, {2, 33}, {1, 7}, {1, 1}, {3, 64}, {2, 33}}) {
    CAPTURE(batch);
    CAPTURE(seq);
    s->sequence().reset();
    const auto feeds = decoder_feeds(*s, batch, seq, 0);
    const ActivationForecast::Result f = s->forecast_activations({shapes_of(feeds)});
    const size_t before = s->pool().held_bytes();
    s->run(feeds);
    CHECK(f.uncounted == 0);
    CHECK(s->pool().held_bytes() - before == f.pool_growth);
    CHECK(f.most_live > 0);
  }
  // Runs forecast one after another from a fresh pool: what they take in all.
  {
    const auto fresh = gqa_ring_session(64);
    std::vector<std::vector<std::pair<std::string, Tensor>>> runs;
    for (int64_t seq : {5, 48, 1}) runs.push_back(decoder_feeds(*fresh, 2, seq, 0));
    std::vector<std::vector<std::pair<std::string, Shape>>> shapes;
    for (const auto& r : runs) shapes.push_back(shapes_of(r));
    const size_t all = fresh->forecast_activations(shapes).pool_growth;
    for (const auto& r : runs) {
      fresh->sequence().reset();
      fresh->run(r);
    }
    CHECK(fresh->pool().held_bytes() == all);
  }
  // The graph's own cache: GQA's grouped reads (kv_groups, [batch, 2, 2 x seq, 16]) have a length no input dim
  // names, so those values are left out and said to be: the forecast is then a floor.
  {
    Session own(kGqaFixture + "/model.onnx");
    for (auto [batch, seq, past] : {std::tuple{1, 7, 0}, {2, 33, 0}, {1, 1, 40}}) {
      const auto feeds = decoder_feeds(own, batch, seq, past);
      const ActivationForecast::Result f = own.forecast_activations({shapes_of(feeds)});
      const size_t before = own.pool().held_bytes();
      own.run(feeds);
      CHECK(f.uncounted > 0);
      CHECK(own.pool().held_bytes() - before >= f.pool_growth);
    }
  }
  // Under a cap between what the pool holds and what a longer run needs, that run fails before its first node,
  // naming its dims and the forecast; nothing is allocated, and a run within the cap goes on.
  SessionOptions o = llm::decoder_session_options({}, llm::read_model_config(kGqaFixture), true);
  int nodes_run = 0;
  o.on_node = [&](const NodeRun&) { ++nodes_run; };
  Session capped(kGqaFixture + "/model.onnx", o);
  capped.run(decoder_feeds(capped, 1, 4, 0));
  const auto big = decoder_feeds(capped, 4, 512, 0);
  const size_t growth = capped.forecast_activations({shapes_of(big)}).pool_growth, held = capped.pool().held_bytes();
  REQUIRE(growth > 0);
  set_process_memory_limit(owned_host_bytes() + growth / 2);
  nodes_run = 0;
  capped.sequence().reset();
  const std::string error = test::error_of([&] { capped.run(big); });
  CAPTURE(error);
  CHECK(test::contains(
      error, "model.onnx: a run with batch_size 4, sequence_length 512, total_sequence_length 512, logits_positions 1 would take " +
                 memory_size(growth) + " more for its activations (forecast before its first node): the memory cap (--max-memory"));
  CHECK(nodes_run == 0);
  CHECK(capped.pool().held_bytes() == held);
  capped.sequence().reset();
  capped.run(decoder_feeds(capped, 1, 4, 0));
  CHECK(nodes_run > 0);
  set_process_memory_limit(0);
}

TEST_CASE("a generation's activations are forecast with its KV cache: prefill chunks, decode steps and their plan") {
  for (const int64_t chunk : {0, 16}) {
    CAPTURE(chunk);
    const auto s = gqa_ring_session(1024);
    Generator gen(*s, read_model_config(kGqaFixture));
    GenerateOptions o;
    o.max_new_tokens = 30;
    o.prefill_chunk = chunk;
    std::vector<int64_t> prompt(50);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = 1 + static_cast<int64_t>(i * 7 % 200);
    const ActivationForecast::Result first = gen.forecast_activations(1, 50, o);
    gen.generate({prompt}, o);
    MESSAGE("first: forecast ", first.pool_growth, ", pool ", s->pool().held_bytes());
    CHECK(first.uncounted == 0);
    CHECK(s->pool().held_bytes() == first.pool_growth);
    // Again, twice: the pool's blocks and the step plan serve more of it each time. A plan made before the forecast
    // is replaced at its smallest size (chunks and decode steps make one each, in turn), so the forecast errs high.
    for (int again = 0; again < 2; ++again) {
      const ActivationForecast::Result f = gen.forecast_activations(1, 50, o);
      const size_t before = s->pool().held_bytes();
      gen.generate({prompt}, o);
      const size_t grew = s->pool().held_bytes() - before;
      MESSAGE("again: forecast ", f.pool_growth, ", grew ", grew);
      if (chunk == 0) CHECK(f.pool_growth == grew);
      else CHECK(f.pool_growth >= grew);
    }
  }
}

TEST_CASE("a replayed step that fails leaves its plan whole: the next step replays it and gives what it would have") {
  const auto s = gqa_ring_session(64), reference = gqa_ring_session(64);
  auto step = [](Session& session, int64_t id, int64_t position) {
    auto feeds = decoder_feeds(session, 1, 1, 0);
    for (auto& [name, t] : feeds) t.data<int64_t>()[0] = name == "position_ids" ? position : name == "input_ids" ? id : 1;
    return session.run(feeds);
  };
  for (Session* x : {s.get(), reference.get()})
    for (int64_t p = 0; p < 4; ++p) step(*x, 10 + p, p);                           // (the plan made at the second step, replayed after)
  CHECK(test::contains(test::error_of([&] { step(*s, 1 << 30, 4); }), "Gather"));  // an id past the vocabulary
  const Outputs got = step(*s, 42, 4), want = step(*reference, 42, 4);
  const Tensor &a = got[0], &b = want[0];
  REQUIRE(a.numel() == b.numel());
  CHECK(std::equal(a.data<float>(), a.data<float>() + a.numel(), b.data<float>()));
}
