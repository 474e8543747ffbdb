// Fast kernels against the reference path: same results (within fp32 summation-order rounding), every
// tail handled, and the same bits whatever the thread count.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/tensor.h"
#include "kernels/cpu/bnb4.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_avx512.h"
#include "kernels/cpu/gemm_integer.h"
#include "kernels/cpu/gemm_packed.h"
#include "kernels/cpu/gemv.h"
#include "kernels/cpu/gemv_nbits.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/nbits.h"
#include "kernels/cpu/parallel.h"
#include "test_util.h"

using namespace tern;

TEST_CASE("each ISA tier's kernel table is the one below it with its own entries; the scalar tier runs anywhere") {
  const std::vector<kernels::Isa> tiers = kernels::machine_isas();
  REQUIRE(tiers.front() == kernels::Isa::Scalar);                               // (lowest, never the default)
  if (!std::getenv("TERN_ISA")) CHECK(kernels::default_isa() == tiers.back());  // (the machine's highest)
  CHECK(kernels::isa_named("scalar") == kernels::Isa::Scalar);
  const kernels::KernelTable& scalar = kernels::kernel_table(kernels::Isa::Scalar);
  CHECK(std::string(scalar.nbits_grouped_rows.name) == "scalar");
  CHECK(!scalar.nbits_i8_rows.fn);  // no instruction-set kernels: int8 dot products, bf16 products
  CHECK(!scalar.integer_dots.fn);
  CHECK(!scalar.gemm_bf16.fn);
  CHECK(!kernels::isa_has_int8_dot(kernels::Isa::Scalar));
  const bool baseline_tiles = scalar.gemm_tiles.fn == kernels::kernel_table(tiers.at(1)).gemm_tiles.fn;  // (the baseline's)
  CHECK(baseline_tiles);
  for (kernels::Isa isa : tiers) {  // every entry every caller runs unconditionally is there at every tier
    CAPTURE(kernels::isa_name(isa));
    const kernels::KernelTable& t = kernels::kernel_table(isa);
    CHECK((t.gemm_tiles.fn && t.gemv_panels.fn && t.dequantize_nbits_block.fn && t.gemv_nbits.fn && t.gemv_nbits_i8.fn));
    CHECK((t.integer_rows_s8.fn && t.integer_rows_u8.fn && t.ring_attention_f32.fn && t.ring_attention_f16.fn && t.ring_attention_q8_0.fn &&
           t.ring_attention_q4_0.fn && t.chunk_attention.fn));
    CHECK((t.swiglu_rows.fn && t.normalize_rows.fn && t.fma_chains.fn));
  }
#if defined(__x86_64__)
  const auto has = [&](kernels::Isa isa) { return std::find(tiers.begin(), tiers.end(), isa) != tiers.end(); };
  if (has(kernels::Isa::Avx2)) {
    CHECK(std::string(kernels::kernel_table(kernels::Isa::Avx2).nbits_i8_rows.name) == "avx2");
  }
  if (has(kernels::Isa::Avx512Vnni)) {  // from avx512: its tiles; its own: the VNNI rows
    const kernels::KernelTable& t = kernels::kernel_table(kernels::Isa::Avx512Vnni);
    CHECK(std::string(t.gemm_tiles.name) == "avx512");
    CHECK(std::string(t.nbits_i8_rows.name) == "avx512vnni");
  }
  if (has(kernels::Isa::Sse42)) CHECK(!kernels::kernel_table(kernels::Isa::Sse42).nbits_i8_rows.fn);
#endif
}

TEST_CASE("gemv_f32 equals the reference GEMM for 1–4 rows, odd, narrow and wide sizes, at any thread count") {
  test::KernelContext cx(2);
  std::mt19937 g(7);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t M = 1; M <= kernels::kGemvMaxRows; ++M)
    for (auto [K, N] : {std::pair<int64_t, int64_t>{1, 1}, {3, 5}, {7, 33}, {64, 96}, {130, 257}, {515, 1031}, {20, 4500}}) {
      std::vector<float> x(static_cast<size_t>(M * K)), w(static_cast<size_t>(K * N));
      for (float& v : x) v = u(g);
      for (float& v : w) v = u(g);
      std::vector<float> ref(static_cast<size_t>(M * N)), y1(ref.size(), 7.0f), y2(ref.size(), 7.0f), y3(ref.size());
      kernels::gemm<float>(cx, false, false, M, N, K, 1.0f, x.data(), K, w.data(), N, 0.0f, ref.data(), N);
      {
        test::KernelContext one(1);
        kernels::gemv_f32(one, x.data(), M, K, w.data(), K, N, y1.data(), N);
      }
      {
        test::KernelContext three(3);  // more threads than this machine's cores: another split
        kernels::gemv_f32(three, x.data(), M, K, w.data(), K, N, y2.data(), N);
        kernels::gemv_f32(three, x.data(), M, K, w.data(), K, N, y3.data(), N);
      }
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {  // against a float64 sum, within float32 rounding of the terms
          double exact = 0, magnitude = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double t = static_cast<double>(x[static_cast<size_t>(m * K + k)]) * w[static_cast<size_t>(k * N + n)];
            exact += t;
            magnitude += std::abs(t);
          }
          const size_t i = static_cast<size_t>(m * N + n);
          CHECK(std::abs(y1[i] - exact) <= 1e-6 * magnitude + 1e-30);
          CHECK(std::abs(y2[i] - exact) <= 1e-6 * magnitude + 1e-30);
          CHECK(std::abs(ref[i] - exact) <= 1e-6 * magnitude + 1e-30);  // the bound is fair to the reference too
          CHECK(y2[i] == y3[i]);                                        // the same threads: the same bits
        }
    }
}

namespace {
// Random block-quantized weights N × K (random codes, zero points and positive scales) and their view.
struct RandomNBits {
  std::vector<uint8_t> q, zp;
  std::vector<float> scales;
  kernels::NBitsWeights w;
  RandomNBits(std::mt19937& g, int64_t N, int64_t K, int64_t bits, int64_t block, bool with_zp) {
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> u(0, 1);
    const int64_t kb = (K + block - 1) / block;
    q.resize(static_cast<size_t>(N * kb * block * bits / 8));
    zp.resize(static_cast<size_t>(N * ((kb * bits + 7) / 8)));
    scales.resize(static_cast<size_t>(N * kb));
    for (auto& v : q) v = static_cast<uint8_t>(byte(g));
    for (auto& v : zp) v = static_cast<uint8_t>(byte(g));
    for (auto& v : scales) v = 0.01f + 0.1f * u(g);
    w.N = N;
    w.K = K;
    w.bits = bits;
    w.block = block;
    w.data = q.data();
    w.scales = scales.data();
    w.zp_packed = with_zp ? zp.data() : nullptr;
  }
  // Zero points in form 0 (none), 1 (packed) or 2 (floats in [0, 15], a GGUF Q4_1 block's); the floats are drawn
  // in every form, so each form sees the same weights.
  static RandomNBits with_zero_points(std::mt19937& g, int64_t N, int64_t K, int64_t bits, int64_t block, int form) {
    RandomNBits r(g, N, K, bits, block, form == 1);
    std::uniform_real_distribution<float> zu(0, 15);
    r.zp_floats.resize(static_cast<size_t>(N * ((K + block - 1) / block)));
    for (auto& v : r.zp_floats) v = zu(g);
    if (form == 2) r.w.zp_float = r.zp_floats.data();
    return r;
  }
  std::vector<float> zp_floats;
};
}  // namespace

namespace {
// max |got − want| ≤ 1e-5 · Σ|terms| per element, against a float64 product of the same inputs.
void check_product(const std::vector<float>& A, const std::vector<float>& B, int64_t M, int64_t K, int64_t N,
                   const std::vector<float>& got) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double t = static_cast<double>(A[static_cast<size_t>(m * K + k)]) * B[static_cast<size_t>(k * N + n)];
        ref += t;
        mag += std::abs(t);
      }
      REQUIRE(std::abs(got[static_cast<size_t>(m * N + n)] - ref) <= 1e-5 * mag + 1e-6);
    }
}
}  // namespace

TEST_CASE("gemv_nbits equals dequantize-then-multiply for 2-, 4- and 8-bit blocks, with and without zero points, any tail") {
  test::KernelContext cx(2);
  std::mt19937 g(11);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t bits : {2, 4, 8})
    for (int64_t block : {16, 32, 128})
      for (auto [K, N] : {std::pair<int64_t, int64_t>{16, 1}, {48, 7}, {100, 9}, {256, 64}, {1000, 300}})
        for (bool with_zp : {false, true})
          for (int64_t M = 1; M <= kernels::kGemvMaxRows; M += 3) {
            if (bits == 2 && block == 16) continue;  // (2-bit blocks of 16 go to gemm_nbits: 4 bytes, half a group)
            CAPTURE(bits);
            CAPTURE(block);
            CAPTURE(K);
            CAPTURE(N);
            CAPTURE(with_zp);
            CAPTURE(M);
            const RandomNBits r(g, N, K, bits, block, with_zp);
            const kernels::NBitsWeights& w = r.w;
            std::vector<float> x(static_cast<size_t>(M * K));
            for (auto& v : x) v = u(g);
            REQUIRE(kernels::gemv_nbits_supported(w));
            std::vector<float> W(static_cast<size_t>(K * N)), y(static_cast<size_t>(M * N), 7.0f), y_again(y.size());
            kernels::dequantize_nbits_transposed(w, W.data());
            for (kernels::Isa isa : kernels::machine_isas()) {  // (AVX-512 reads 2-bit and 4-bit-16 rows its own way)
              CAPTURE(kernels::isa_name(isa));
              kernels::gemv_nbits(cx.at(isa), x.data(), M, w, y.data());
              kernels::gemv_nbits(cx.at(isa), x.data(), M, w, y_again.data());
              CHECK(y == y_again);  // same bits run to run
              check_product(x, W, M, K, N, y);
            }
          }
}

TEST_CASE(
    "gemv_nbits over grouped 4-, 2- and 8-bit weights: each ISA tier this CPU runs gives the scalar tier's bits, near the "
    "dequantized product") {
  test::KernelContext cx(2);
  std::mt19937 g(12);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t bits : {4, 2, 8})
    for (int64_t block : {16, 32, 64, 128})
      for (int zp_form : {0, 1, 2})  // none, packed, float
        for (auto [K, N] : {std::pair<int64_t, int64_t>{32, 1}, {100, 9}, {256, 64}, {1000, 300}, {2048, 33}})
          for (int64_t M : {1, 2, 3, 4, 6}) {
            if (block == 16 && (K + 15) / 16 % 2) continue;  // (blocks of 16 group in pairs)
            CAPTURE(bits);
            CAPTURE(block);
            CAPTURE(zp_form);
            CAPTURE(K);
            CAPTURE(N);
            CAPTURE(M);
            RandomNBits r = RandomNBits::with_zero_points(g, N, K, bits, block, zp_form);
            if (block == 64)  // scales that are exactly fp16: grouped as fp16
              for (float& v : r.scales) v = static_cast<float>(f16(v));
            const kernels::QuantizedWeights grouped = kernels::group_nbits_rows(cx, r.w);
            REQUIRE(kernels::gemv_nbits_supported(grouped.view()));
            std::vector<float> x(static_cast<size_t>(M * K)), W(static_cast<size_t>(K * N));
            for (auto& v : x) v = u(g);
            kernels::dequantize_nbits_transposed(r.w, W.data());
            std::vector<float> scalar(static_cast<size_t>(M * N), 7.0f);
            kernels::gemv_nbits(cx.at(kernels::Isa::Scalar), x.data(), M, grouped.view(), scalar.data());
            for (kernels::Isa isa : kernels::machine_isas()) {
              CAPTURE(kernels::isa_name(isa));
              std::vector<float> y(scalar.size(), 7.0f);
              kernels::gemv_nbits(cx.at(isa), x.data(), M, grouped.view(), y.data());
              CHECK(y == scalar);
            }
            check_product(x, W, M, K, N, scalar);
          }
}

TEST_CASE("gemv_nbits_i8 equals the product with per-block int8 activations, at every ISA tier this CPU runs, bit for bit") {
  test::KernelContext cx(2);
  std::vector<std::string> tiers;
  for (kernels::Isa isa : kernels::machine_isas()) tiers.push_back(kernels::isa_name(isa));
  MESSAGE("int8 GEMV tiers tested on this CPU (" << kernels::cpu_feature_list() << "): " << [&] {
    std::string s;
    for (const auto& t : tiers) s += t + " ";
    return s;
  }());
  std::mt19937 g(13);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t bits : {4, 8})
    for (int64_t block : {16, 32, 64, 128})  // 16: 8-bit on x86 (GGUF's Q6_K), K a multiple of 32
      for (auto [K, N] :
           {std::pair<int64_t, int64_t>{32, 1}, {100, 9}, {256, 64}, {224, 7}, {1000, 301}})  // 224: 7 blocks of 32, an odd last pair
        for (int zp_form : {0, 1, 2})  // none, packed, float (a GGUF Q4_1 block's −min/scale)
          for (int64_t M = 1; M <= kernels::kGemvMaxRows; M += 3) {
            CAPTURE(bits);
            CAPTURE(block);
            CAPTURE(K);
            CAPTURE(N);
            CAPTURE(zp_form);
            CAPTURE(M);
            RandomNBits r(g, N, K, bits, block, zp_form == 1);
            const int64_t k_blocks = (K + block - 1) / block;
            std::vector<float> zp_float(static_cast<size_t>(N * k_blocks));
            for (auto& v : zp_float) v = (u(g) + 1) * 0.5f * static_cast<float>((1 << bits) - 1);
            if (zp_form == 2) r.w.zp_float = zp_float.data();
            // Scales that are exactly fp16 (as GGUF's are) half the time: grouped, they are kept as fp16.
            const bool half_scales = (M + zp_form) % 2 == 0;
            if (half_scales)
              for (float& v : r.scales) v = static_cast<float>(f16(v));
            // On x86 the kernel takes the weights re-laid 16 rows at a time (nbits.h; 8-bit blocks of 16 in whole
            // chunks), as ops hand them over for int8 activations (AArch64's the file's layout).
            const kernels::QuantizedWeights grouped =
                kernels::nbits_groups_native(r.w, cx.isa, true) ? kernels::group_nbits_rows(cx, r.w) : kernels::QuantizedWeights{};
            if (grouped.grouped) CHECK(grouped.scales.dtype() == (half_scales ? DType::Float16 : DType::Float32));
            const kernels::NBitsWeights w = grouped.grouped ? grouped.view() : r.w;
#if defined(__x86_64__)
            const bool takes_16 = bits == 8 && K % 32 == 0;  // (two to a 32-byte chunk)
#else
            const bool takes_16 = bits == 8;  // (16 bytes at a time)
#endif
            if ((block == 16 && !takes_16) || !kernels::isa_has_int8_dot(cx.isa)) {  // (the float path's)
              CHECK(!kernels::gemv_nbits_i8_supported(w, cx.isa));
              continue;
            }
            REQUIRE(kernels::gemv_nbits_i8_supported(w, cx.isa));
            std::vector<float> x(static_cast<size_t>(M * K)), W(static_cast<size_t>(K * N));
            for (auto& v : x) v = u(g);
            kernels::dequantize_nbits_transposed(r.w, W.data());
            // The activations as the kernel must see them: per block xs = max|x| / 127, xq = round(x / xs).
            std::vector<double> xd(x.size());
            for (int64_t m = 0; m < M; ++m)
              for (int64_t kb = 0; kb < k_blocks; ++kb) {
                const int64_t k0 = kb * block, k1 = std::min(K, k0 + block);
                float amax = 0;
                for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::abs(x[static_cast<size_t>(m * K + k)]));
                for (int64_t k = k0; k < k1; ++k) {
                  const size_t i = static_cast<size_t>(m * K + k);
                  xd[i] = amax > 0 ? std::nearbyint(x[i] * (127.0f / amax)) * static_cast<double>(amax / 127.0f) : 0.0;
                }
              }
            std::vector<float> first;
            for (kernels::Isa isa : kernels::machine_isas()) {
              if (!kernels::isa_has_int8_dot(isa)) continue;
              CAPTURE(kernels::isa_name(isa));
              std::vector<float> y(static_cast<size_t>(M * N), 7.0f);
              kernels::gemv_nbits_i8(cx.at(isa), x.data(), M, w, y.data());
              if (M > 1) {  // rows of a batch read the weights together: each gets its bits of a batch of one
                std::vector<float> last(static_cast<size_t>(N));
                kernels::gemv_nbits_i8(cx.at(isa), x.data() + (M - 1) * K, 1, w, last.data());
                CHECK(std::equal(last.begin(), last.end(), y.begin() + (M - 1) * N));
              }
              for (int64_t m = 0; m < M; ++m)
                for (int64_t n = 0; n < N; ++n) {
                  double ref = 0, mag = 0, fp32 = 0;
                  for (int64_t k = 0; k < K; ++k) {
                    const double wk = W[static_cast<size_t>(k * N + n)];
                    ref += xd[static_cast<size_t>(m * K + k)] * wk;
                    mag += std::abs(xd[static_cast<size_t>(m * K + k)] * wk);
                    fp32 += static_cast<double>(x[static_cast<size_t>(m * K + k)]) * wk;
                  }
                  const float got = y[static_cast<size_t>(m * N + n)];
                  REQUIRE(std::abs(got - ref) <= 1e-5 * mag + 1e-6);
                  CHECK(std::abs(got - fp32) <= 0.01 * mag + 1e-6);  // int8 activations stay near the fp32 product
                }
              // The integer dot products are exact and the float steps the same: every tier, the same bits.
              if (first.empty()) first = y;
              else CHECK(y == first);
            }
          }
}

TEST_CASE("transpose_matrix (tiles of 64) and a 2-D transpose put element (r, c) at (c, r), every tail and element size") {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {1, 70}, {63, 65}, {64, 64}, {130, 3}, {129, 200}})
    for (size_t es : {1, 2, 4, 8}) {
      CAPTURE(rows);
      CAPTURE(cols);
      CAPTURE(es);
      std::vector<uint8_t> src(static_cast<size_t>(rows * cols) * es), dst(src.size(), 0), via(src.size(), 0);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 37 + i / 251);
      kernels::transpose_matrix(src.data(), rows, cols, dst.data(), es);
      kernels::transpose(src.data(), {rows, cols}, {1, 0}, via.data(), es);
      int wrong = 0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          wrong += std::memcmp(&dst[static_cast<size_t>(c * rows + r) * es], &src[static_cast<size_t>(r * cols + c) * es], es) != 0;
      CHECK(wrong == 0);
      CHECK(via == dst);
    }
}

TEST_CASE("DynamicQuantizeLinear's range and codes are the rule's at every ISA tier this CPU runs: halves to even, clamps, NaN") {
  test::KernelContext cx(1);
  // The rule, element by element: the range stretched to include 0 (NaN passed over), codes round(x / scale) + zp
  // rounded half to even, clamped to [0, 255], NaN to the lowest code.
  std::mt19937 g(17);
  std::uniform_real_distribution<float> u(-3, 5);
  for (int64_t n : {1, 7, 8, 16, 33, 1000}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = u(g);
    if (n >= 8) x[3] = std::nanf(""), x[5] = -0.0f;
    float lo = 0, hi = 0;
    for (float v : x) lo = v < lo ? v : lo, hi = v > hi ? v : hi;
    for (kernels::Isa isa : kernels::machine_isas()) {
      CAPTURE(n);
      CAPTURE(kernels::isa_name(isa));
      const kernels::Context at = cx.at(isa);
      const kernels::U8Quantization p = kernels::dynamic_u8_quantization(at, x.data(), n);
      CHECK(p.scale == (hi == lo ? 1.0f : (hi - lo) / 255.0f));
      CHECK(p.zero_point == static_cast<uint8_t>(std::nearbyint(std::min(0.0f - lo / p.scale, 255.0f))));
      for (auto [scale, zp] : {std::pair<float, uint8_t>{p.scale, p.zero_point}, {0.5f, 0}, {0.5f, 255}, {0.25f, 128}}) {
        std::vector<float> y = x;
        for (size_t i = 0; i < y.size() && i < 6; ++i) y[i] = scale * (static_cast<float>(i) - 2.5f);  // halves: -2.5 … 2.5
        std::vector<uint8_t> q(y.size());
        kernels::quantize_u8(at, y.data(), n, {scale, zp}, q.data());
        int wrong = 0;
        for (size_t i = 0; i < y.size(); ++i) {
          const float v = y[i] / scale, l = -static_cast<float>(zp), h = 255.0f - static_cast<float>(zp);
          wrong += q[i] != static_cast<uint8_t>(static_cast<int>(std::nearbyint(v >= l ? std::min(v, h) : l)) + zp);
        }
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("gemm_integer equals the int64 sums (A − a_zp)·(B − b_zp) exactly, int8 and uint8 weights, every zero point form and tail") {
  test::KernelContext cx(2);
  // At the tier in use (kernel_tiers runs the others): VNNI's flipped u8·s8 dots and the int16 pairs below it give
  // the same integers. Codes and weights drawn from the whole range, extremes included.
  std::mt19937 g(11);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t M : {1, 2, 3, 4, 5, 9, 16, 37, 64})  // (16 and up: prefill's tiles at amx)
    for (auto [K, N] : {std::pair<int64_t, int64_t>{1, 1}, {3, 5}, {64, 16}, {100, 9}, {257, 13}, {130, 70}, {2048, 8}})
      for (bool is_signed : {false, true})
        for (int zero_form : {0, 1, 2}) {  // weight zero points: none, one, one per column
          CAPTURE(M);
          CAPTURE(K);
          CAPTURE(N);
          CAPTURE(is_signed);
          CAPTURE(zero_form);
          std::vector<uint8_t> A(static_cast<size_t>(M * K)), B(static_cast<size_t>(K * N));
          for (auto& v : A) v = static_cast<uint8_t>(byte(g));
          for (auto& v : B) v = static_cast<uint8_t>(byte(g));
          auto weight = [&](int64_t k, int64_t n) -> int32_t {
            const uint8_t b = B[static_cast<size_t>(k * N + n)];
            return is_signed ? static_cast<int8_t>(b) : b;
          };
          std::vector<int32_t> zeros;
          for (int64_t i = 0; i < (zero_form == 0 ? 0 : zero_form == 1 ? 1 : N); ++i) zeros.push_back(is_signed ? byte(g) - 128 : byte(g));
          kernels::IntegerRows a{A.data(), M, {}};
          for (int64_t m = 0; m < (M % 2 ? 1 : M); ++m) a.zero_points.push_back(byte(g));  // one, or one per row
          const kernels::IntegerMatrix w = kernels::pack_integer_matrix(B.data(), is_signed, K, N, zeros);
          std::vector<int32_t> c(static_cast<size_t>(M * N), 7);
          kernels::gemm_integer(cx, a, w, c.data());
          std::vector<float> scales(static_cast<size_t>(N)), bias(static_cast<size_t>(N)), y(c.size());
          for (int64_t n = 0; n < N; ++n)
            scales[static_cast<size_t>(n)] = 0.001f * static_cast<float>(n + 1), bias[static_cast<size_t>(n)] = 0.5f;
          kernels::gemm_integer_to_float(cx, a, w, 0.25f, scales.data(), N, bias.data(), y.data());
          int mismatches = 0;
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              const int64_t az = a.zero_points[a.zero_points.size() == 1 ? 0 : static_cast<size_t>(m)];
              const int64_t bz = zeros.empty() ? 0 : zeros[zeros.size() == 1 ? 0 : static_cast<size_t>(n)];
              int64_t want = 0;
              for (int64_t k = 0; k < K; ++k) want += (A[static_cast<size_t>(m * K + k)] - az) * (weight(k, n) - bz);
              const size_t i = static_cast<size_t>(m * N + n);
              mismatches += c[i] != want;
              mismatches += y[i] != static_cast<float>(want) * (0.25f * scales[static_cast<size_t>(n)]) + 0.5f;
            }
          CHECK(mismatches == 0);
        }
  // The widest sums: every product −255·255 (code 255 at zero point 0, weight −128 at zero point 127) over K = 8192.
  const int64_t K = 8192, N = 5;
  std::vector<uint8_t> A(static_cast<size_t>(2 * K), 255), B(static_cast<size_t>(K * N), 0x80);
  const kernels::IntegerMatrix w = kernels::pack_integer_matrix(B.data(), true, K, N, {127});
  std::vector<int32_t> c(static_cast<size_t>(2 * N));
  kernels::gemm_integer(cx, kernels::IntegerRows{A.data(), 2, {0}}, w, c.data());
  for (int32_t v : c) CHECK(v == -255 * 255 * K);
}

TEST_CASE("matmul_packed (fp32, fp16, bf16 panels) equals the float64 product for GEMV and GEMM row counts, every tail") {
  test::KernelContext cx(2);
  std::mt19937 g(5);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t M : {1, 2, 3, 4, 5, 7, 13, 16, 17, 64})
    for (auto [K, N] : {std::pair<int64_t, int64_t>{1, 1}, {3, 17}, {64, 16}, {300, 33}, {513, 100}}) {
      CAPTURE(M);
      CAPTURE(K);
      CAPTURE(N);
      std::vector<float> A(static_cast<size_t>(M * K)), B(static_cast<size_t>(K * N));
      for (float& v : A) v = u(g);
      for (float& v : B) v = u(g);
      for (DType type : {DType::Float32, DType::Float16, DType::BFloat16}) {  // --weights fp16 / bf16: the
        CAPTURE(dtype_name(type));                                            // product of the rounded weights
        std::vector<float> rounded(B);
        for (float& v : rounded)
          v = type == DType::Float16 ? static_cast<float>(f16(v)) : type == DType::BFloat16 ? static_cast<float>(bf16(v)) : v;
        const kernels::PackedMatrix P = kernels::pack_matrix(cx, Tensor::from_vector<float>(B, {K, N}), type);
        std::vector<float> C(static_cast<size_t>(M * N), 7.0f), again(C.size());
        kernels::matmul_packed(cx, A.data(), M, P, C.data());
        kernels::matmul_packed(cx, A.data(), M, P, again.data());
        CHECK(C == again);
        std::vector<float> a(A);  // the bf16 GEMM of tier avx512bf16 rounds the activations too
        if (kernels::matmul_packed_kernel(M, P, cx.isa).rfind("gemm_bf16 ", 0) == 0)
          for (float& v : a) v = static_cast<float>(bf16(v));
        check_product(a, rounded, M, K, N, C);
      }
    }
}

#if defined(__x86_64__)
TEST_CASE("gemm_bf16_avx512bf16 and gemm_bf16_amx equal the float64 product of the bf16-rounded operands, every tail") {
  test::KernelContext cx(2);
  using Kernel = void (*)(const kernels::Context&, const float*, int64_t, int64_t, int64_t, const uint16_t*, float*);
  const std::vector<kernels::Isa> isas = kernels::machine_isas();
  for (auto [isa, kernel] : {std::pair<kernels::Isa, Kernel>{kernels::Isa::Avx512Bf16, kernels::gemm_bf16_avx512bf16},
                             {kernels::Isa::Amx, kernels::gemm_bf16_amx}}) {
    CAPTURE(kernels::isa_name(isa));
    if (std::find(isas.begin(), isas.end(), isa) == isas.end()) {
      MESSAGE(("skipped " + std::string(kernels::isa_name(isa)) + ": this CPU cannot run it (" + kernels::cpu_feature_list() + ")"));
      continue;
    }
    std::mt19937 g(8);
    std::uniform_real_distribution<float> u(-1, 1);
    for (int64_t M : {1, 11, 12, 13, 25, 33, 40})  // tails of 8-row tiles (avx512bf16) and of 32-row blocks (amx)
      for (auto [K, N] : {std::pair<int64_t, int64_t>{1, 1}, {2, 16}, {3, 17}, {255, 32}, {257, 33}, {513, 100}, {1100, 47}}) {
        CAPTURE(M);
        CAPTURE(K);
        CAPTURE(N);  // odd K, K past a tile step and past K blocks, lone panels
        std::vector<float> A(static_cast<size_t>(M * K)), B(static_cast<size_t>(K * N));
        for (float& v : A) v = u(g);
        for (float& v : B) v = u(g);
        const kernels::PackedMatrix P = kernels::pack_matrix(cx, Tensor::from_vector<float>(B, {K, N}), DType::BFloat16);
        std::vector<float> C(static_cast<size_t>(M * N), 7.0f);
        kernel(cx, A.data(), M, K, N, static_cast<const uint16_t*>(P.panels->data()), C.data());
        for (float& v : A) v = static_cast<float>(bf16(v));
        for (float& v : B) v = static_cast<float>(bf16(v));
        check_product(A, B, M, K, N, C);
      }
  }
}
#endif

TEST_CASE("matmul_packed gives a row the same bits whatever the other rows, GEMV or GEMM (continuous batching)") {
  test::KernelContext cx(2);
  std::mt19937 g(6);
  std::uniform_real_distribution<float> u(-1, 1);
  const int64_t K = 700, N = 75;
  const int64_t most = kernels::kPanelGemvMaxRows + 9;  // past it: the GEMM
  std::vector<float> A(static_cast<size_t>(most * K)), B(static_cast<size_t>(K * N));
  for (float& v : A) v = u(g);
  for (float& v : B) v = u(g);
  for (DType type : {DType::Float32, DType::Float16}) {
    CAPTURE(dtype_name(type));
    const kernels::PackedMatrix P = kernels::pack_matrix(cx, Tensor::from_vector<float>(B, {K, N}), type);
    std::vector<float> alone(static_cast<size_t>(N)), all(static_cast<size_t>(most * N));
    for (int64_t M = 2; M <= most; ++M) {
      CAPTURE(M);
      kernels::matmul_packed(cx, A.data(), M, P, all.data());
      for (int64_t m = 0; m < M; ++m) {
        kernels::matmul_packed(cx, A.data() + m * K, 1, P, alone.data());
        CHECK(std::equal(alone.begin(), alone.end(), all.begin() + m * N));
      }
    }
  }
}

// tern eval's arithmetic (NBitsActivations::Int8EveryRow): a prefill of many rows gives each row the bits that
// row gets decoded alone — where Int8 alone hands rows past kGemvMaxRows to the GEMM's fp32 (or bf16) tiles.
TEST_CASE("matmul_nbits with int8 activations on every row gives each prefill row its decode bits") {
  test::KernelContext cx(2);
  if (!kernels::isa_has_int8_dot(cx.isa)) {
    MESSAGE("skipped: tier " << std::string(kernels::isa_name(cx.isa)) << " has no int8 dot product");
    return;
  }
  std::mt19937 g(29);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t bits : {4, 8}) {
    CAPTURE(bits);
    const int64_t K = 256, N = 40, M = 37;  // 37: nine passes of four rows and one of one
    RandomNBits r(g, N, K, bits, 32, true);
    const kernels::QuantizedWeights grouped =
        kernels::nbits_groups_native(r.w, cx.isa, true) ? kernels::group_nbits_rows(cx, r.w) : kernels::QuantizedWeights{};
    const kernels::NBitsWeights w = grouped.grouped ? grouped.view() : r.w;
    REQUIRE(kernels::gemv_nbits_i8_supported(w, cx.isa));
    std::vector<float> x(static_cast<size_t>(M * K)), every(static_cast<size_t>(M * N)), prefill(every.size()), row(static_cast<size_t>(N));
    for (auto& v : x) v = u(g);
    kernels::matmul_nbits(cx, x.data(), M, w, every.data(), kernels::NBitsActivations::Int8EveryRow);
    kernels::matmul_nbits(cx, x.data(), M, w, prefill.data(), kernels::NBitsActivations::Int8);
    CHECK(kernels::matmul_nbits_kernel(M, w, kernels::NBitsActivations::Int8EveryRow, cx.isa).starts_with("gemv_nbits_i8"));
    CHECK(kernels::matmul_nbits_kernel(M, w, kernels::NBitsActivations::Int8, cx.isa).starts_with("gemm_nbits"));
    for (int64_t m = 0; m < M; ++m) {
      CAPTURE(m);
      kernels::matmul_nbits(cx, x.data() + m * K, 1, w, row.data(), kernels::NBitsActivations::Int8);  // a decode row
      CHECK(std::equal(row.begin(), row.end(), every.begin() + m * N));
    }
    CHECK(every != prefill);  // (the GEMM's rows keep their fp32 activations)
  }
}

TEST_CASE("gemm_nbits (prefill on 4-bit weights, dequantized a panel block at a time) equals the float64 product") {
  test::KernelContext cx(2);
  std::mt19937 g(9);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t bits : {2, 4, 8})
    for (auto [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{5, 32, 3}, {20, 300, 40}, {9, 600, 17}, {40, 1088, 33}}) {
      CAPTURE(bits);
      CAPTURE(M);
      CAPTURE(K);
      CAPTURE(N);
      const RandomNBits r(g, N, K, bits, 32, true);
      const kernels::NBitsWeights& w = r.w;
      std::vector<float> A(static_cast<size_t>(M * K));
      for (auto& v : A) v = u(g);
      std::vector<float> W(static_cast<size_t>(K * N)), C(static_cast<size_t>(M * N));
      kernels::dequantize_nbits_transposed(w, W.data());
      kernels::gemm_nbits(cx, A.data(), M, w, C.data());
      check_product(A, W, M, K, N, C);
      // With precision to spare (accuracy_level 4): at tier amx both operands rounded to bf16, else the same.
      const auto act = kernels::NBitsActivations::Int8;
      kernels::gemm_nbits(cx, A.data(), M, w, C.data(), act);
      if (kernels::matmul_nbits_kernel(M, w, act, cx.isa).find("bf16 amx") != std::string::npos) {
        for (float& v : A) v = static_cast<float>(bf16(v));
        for (float& v : W) v = static_cast<float>(bf16(v));
      }
      check_product(A, W, M, K, N, C);
    }
}

TEST_CASE(
    "matmul_bnb4 (codes read as used; a prefill dequantized a block at a time) equals the float64 product of ORT's dequantized weight") {
  test::KernelContext cx(2);
  std::mt19937 g(11);
  std::uniform_real_distribution<float> u(-1, 1);
  std::uniform_int_distribution<int> byte(0, 255);
  // Decode rows (1, 3, 8: the codes looked up) and prefill rows (12, 13, 20); a K the block divides and one it does not (a
  // block across two rows of W), one past the GEMM's K block (600: its K blocks start inside a weight block), blocks of 16
  // and 64, both formats.
  for (auto [M, K, N, block] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{1, 128, 37, 64},
                                {3, 256, 9, 16},
                                {8, 64, 70, 64},
                                {12, 192, 33, 64},
                                {2, 40, 7, 16},
                                {13, 40, 7, 16},
                                {20, 600, 45, 64}})
    for (auto type : {kernels::Bnb4Type::NF4, kernels::Bnb4Type::FP4}) {
      CAPTURE(M);
      CAPTURE(K);
      CAPTURE(N);
      CAPTURE(block);
      std::vector<uint8_t> codes(static_cast<size_t>((N * K + 1) / 2));
      for (auto& c : codes) c = static_cast<uint8_t>(byte(g));
      std::vector<float> absmax(static_cast<size_t>((N * K + block - 1) / block)), A(static_cast<size_t>(M * K));
      for (auto& v : absmax) v = std::abs(u(g)) + 0.1f;
      for (auto& v : A) v = u(g);
      std::vector<float> Wt(static_cast<size_t>(N * K)), W(static_cast<size_t>(K * N)), C(static_cast<size_t>(M * N));
      kernels::dequantize_bnb4(cx, codes.data(), absmax.data(), N * K, block, type, Wt.data());
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) W[static_cast<size_t>(k * N + n)] = Wt[static_cast<size_t>(n * K + k)];
      kernels::matmul_bnb4(cx, A.data(), M, {codes.data(), absmax.data(), K, N, block, type}, C.data());
      check_product(A, W, M, K, N, C);
    }
}

TEST_CASE("a fused concatenation packed from its parts: each part's panels and row groups land where the whole's do, bit for bit") {
  test::KernelContext cx(2);
  std::mt19937 g(31);
  std::uniform_real_distribution<float> u(-1, 1), zu(0, 15);
  // Panels: column blocks [K, N_i], each but the last a multiple of kPanel wide, the last ragged.
  const int64_t K = 37, P = kernels::kPanel;
  const std::vector<int64_t> widths{2 * P, P, 5};
  int64_t N = 0;
  for (int64_t w : widths) N += w;
  std::vector<float> B(static_cast<size_t>(K * N));
  for (float& v : B) v = u(g);
  std::vector<Tensor> blocks;
  for (int64_t w : widths) {
    int64_t at = 0;
    for (const Tensor& b : blocks) at += b.dim(1);
    Tensor t(DType::Float32, {K, w});
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < w; ++c) t.data<float>()[k * w + c] = B[static_cast<size_t>(k * N + at + c)];
    blocks.push_back(t);
  }
  std::vector<const Tensor*> columns;
  for (const Tensor& t : blocks) columns.push_back(&t);
  for (DType type : {DType::Float32, DType::Float16, DType::BFloat16}) {
    CAPTURE(dtype_name(type));
    const kernels::PackedMatrix whole = kernels::pack_matrix(cx, Tensor::from_vector<float>(B, {K, N}), type);
    const kernels::PackedMatrix parts = kernels::pack_matrix(cx, columns, type);
    REQUIRE(parts.bytes() == whole.bytes());
    CHECK(std::memcmp(parts.panels->data(), whole.panels->data(), static_cast<size_t>(whole.bytes())) == 0);
  }
  // A block narrower than a panel before the last cannot stack.
  const Tensor narrow(DType::Float32, {K, 5});
  CHECK(test::contains(test::error_of([&] {
                         kernels::pack_matrix(cx, std::vector<const Tensor*>{&narrow, &blocks[0]}, DType::Float32);
                       }),
                       "each but the last a multiple of"));
  // Row groups: rows [0, 32), [32, 48), [48, 57) of 4-, 2- and 8-bit weights, every zero-point form, fp16-exact
  // scales or not.
  for (int64_t bits : {4, 2, 8})
    for (int64_t block : {32, 64})
      for (int zp_form : {0, 1, 2})
        for (bool half : {true, false}) {
          CAPTURE(block);
          CAPTURE(zp_form);
          CAPTURE(half);
          CAPTURE(bits);
          const int64_t rows = 57, cols = 256, k_blocks = cols / block;
          RandomNBits r = RandomNBits::with_zero_points(g, rows, cols, bits, block, zp_form);
          for (float& v : r.scales) v = static_cast<float>(f16(v));
          if (!half) r.scales.back() += 1e-7f;  // one scale in the last part that fp16 does not hold: all go fp32
          std::vector<kernels::NBitsWeights> part_views;
          for (auto [n0, n1] : {std::pair<int64_t, int64_t>{0, 32}, {32, 48}, {48, rows}}) {
            kernels::NBitsWeights p = r.w;
            p.N = n1 - n0;
            p.data += n0 * k_blocks * block * bits / 8;
            p.scales += n0 * k_blocks;
            if (p.zp_packed) p.zp_packed += n0 * ((k_blocks * bits + 7) / 8);
            if (p.zp_float) p.zp_float += n0 * k_blocks;
            part_views.push_back(p);
          }
          std::vector<std::tuple<size_t, int64_t, int64_t>> done;
          const kernels::QuantizedWeights whole = kernels::group_nbits_rows(cx, r.w);
          const kernels::QuantizedWeights stacked =
              kernels::group_nbits_rows(cx, part_views, [&](size_t p, int64_t n0, int64_t n1) { done.emplace_back(p, n0, n1); });
          CHECK(stacked.scales.dtype() == (half ? DType::Float16 : DType::Float32));
          for (auto [a, b] : {std::pair<const Tensor*, const Tensor*>{&stacked.data, &whole.data},
                              {&stacked.scales, &whole.scales},
                              {&stacked.zero_points, &whole.zero_points}}) {
            REQUIRE(a->defined() == b->defined());
            if (!a->defined()) continue;
            REQUIRE(a->nbytes() == b->nbytes());
            CHECK(std::memcmp(a->raw(), b->raw(), a->nbytes()) == 0);
          }
          CHECK(done == std::vector<std::tuple<size_t, int64_t, int64_t>>{{0, 0, 32}, {1, 0, 16}, {2, 0, 9}});  // each part's rows, once
        }
}

TEST_CASE(
    "dequantize_nbits_block (vectorized for 4-bit rows of 8 and 32-value chunks, as stored or grouped; 2-bit, 8-bit and blocks of "
    "16 too) gives the scalar rule's bits") {
  test::KernelContext cx(2);
  std::mt19937 g(21);
  for (int64_t bits : {4, 2, 8})
    for (int64_t block : {16, 32, 64, 128})
      for (int zp_form : {0, 1, 2}) {  // none, packed, float
        CAPTURE(bits);
        CAPTURE(block);
        CAPTURE(zp_form);
        const int64_t N = 24, K = 256, k_blocks = K / block, mask = (1 << bits) - 1;
        RandomNBits r = RandomNBits::with_zero_points(g, N, K, bits, block, zp_form);
        if (block == 64)  // scales that are exactly fp16: grouped, kept as fp16
          for (float& v : r.scales) v = static_cast<float>(f16(v));
        const kernels::NBitsWeights& w = r.w;
        const kernels::QuantizedWeights grouped = kernels::group_nbits_rows(cx, w);  // the same weights, 16 rows a group
        CHECK(grouped.scales.dtype() == (block == 64 ? DType::Float16 : DType::Float32));
        for (auto [n0, n1, k0, k1] :
             {std::tuple<int64_t, int64_t, int64_t, int64_t>{0, 24, 0, 256}, {8, 24, 64, 192}, {16, 24, 224, 256}, {3, 21, 40, 200}})
          for (const kernels::NBitsWeights& form : {w, grouped.view()}) {
            CAPTURE(n0);
            CAPTURE(k0);
            CAPTURE(form.grouped);
            const int64_t ld = n1 - n0 + 3;  // a row stride wider than the block
            std::vector<float> got(static_cast<size_t>((k1 - k0) * ld), -1.0f);
            kernels::dequantize_nbits_block(form, n0, n1, k0, k1, got.data(), ld);
            for (int64_t n = n0; n < n1; ++n)
              for (int64_t k = k0; k < k1; ++k) {
                const int64_t kb = k / block, bit = (k % block) * bits, zp_bit = kb * bits;
                const uint8_t byte = w.data[(n * k_blocks + kb) * block * bits / 8 + bit / 8];
                const float q = static_cast<float>((byte >> (bit % 8)) & mask);
                const float zp =
                    zp_form == 2   ? r.zp_floats[static_cast<size_t>(n * k_blocks + kb)]
                    : zp_form == 1 ? static_cast<float>((w.zp_packed[n * ((k_blocks * bits + 7) / 8) + zp_bit / 8] >> (zp_bit % 8)) & mask)
                                   : static_cast<float>(1 << (bits - 1));
                REQUIRE(got[static_cast<size_t>((k - k0) * ld + (n - n0))] == (q - zp) * w.scales[n * k_blocks + kb]);
              }
          }
      }
}

TEST_CASE("quantize_nbits: every weight comes back within half a step of its block, zero exact, both bit widths") {
  test::KernelContext cx(2);
  std::mt19937 g(13);
  std::normal_distribution<float> d(0, 0.05f);
  const int64_t K = 100, N = 7;  // a partial last block
  std::vector<float> W(static_cast<size_t>(K * N));
  for (float& v : W) v = d(g);
  W[5] = 0.0f;
  for (int64_t bits : {4, 8}) {
    CAPTURE(bits);
    const kernels::QuantizedWeights q = kernels::quantize_nbits(cx, W.data(), K, N, bits, 32);
    std::vector<float> back(W.size());
    kernels::dequantize_nbits_transposed(q.view(), back.data());
    const int64_t k_blocks = (K + 31) / 32;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) {
        const float step = q.scales.data<float>()[n * k_blocks + k / 32];
        CHECK(std::abs(back[static_cast<size_t>(k * N + n)] - W[static_cast<size_t>(k * N + n)]) <= 0.5f * step * 1.0001f);
      }
    CHECK(back[5] == 0.0f);
  }
}
