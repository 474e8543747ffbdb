// The OpenCL path on whatever device is installed (PoCL in CI): device listing, the program cache, and
// each kernel against a plain-loop reference on the host.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <vector>

#include "kernels/cpu/gemm_packed.h"
#include "kernels/cpu/kv_ring_buffer.h"
#include "kernels/cpu/nbits.h"
#include "kernels/opencl/device.h"
#include "kernels/opencl/kernels.h"
#include "kernels/opencl/sources.h"
#include "llm/generator.h"
#include "model_builder.h"
#include "test_util.h"

using namespace tern;
using namespace tern::test;
namespace ocl = tern::kernels::opencl;

namespace {

// Device 0, or null (with a message) when this machine has no OpenCL device; CI must have one (PoCL).
std::unique_ptr<cl::Context> device_or_skip() {
  if (cl::list_devices().empty()) {
    const char* ci = std::getenv("CI");
    if (ci && std::string(ci) == "true") FAIL("CI needs an OpenCL device: apt-get install pocl-opencl-icd");
    MESSAGE("skipped: no OpenCL device (apt-get install pocl-opencl-icd)");
    return nullptr;
  }
  return std::make_unique<cl::Context>(0);
}

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(g);
  return v;
}

template <typename T>
std::unique_ptr<cl::Buffer> upload(cl::Context& c, const std::vector<T>& v) {
  auto b = std::make_unique<cl::Buffer>(c, v.size() * sizeof(T));
  c.upload(*b, v.data(), v.size() * sizeof(T));
  return b;
}

std::unique_ptr<cl::Buffer> upload(cl::Context& c, const Tensor& t) {
  auto b = std::make_unique<cl::Buffer>(c, t.nbytes());
  c.upload(*b, t.raw(), t.nbytes());
  return b;
}

template <typename T>
std::vector<T> download(cl::Context& c, const cl::Buffer& b, size_t n) {
  std::vector<T> v(n);
  c.download(b, v.data(), n * sizeof(T));
  return v;
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

}  // namespace

TEST_CASE("OpenCL devices are listed with what they can do; a missing one is named") {
  const auto devices = cl::list_devices();
  for (const auto& d : devices) {
    CHECK(!d.name.empty());
    CHECK(d.max_work_group >= 1);
    CHECK(d.global_mem_bytes > 0);
  }
  CHECK(contains(error_of([&] { cl::Context c(static_cast<int>(devices.size()) + 3); }), "no OpenCL device"));
}

TEST_CASE("OpenCL programs build once per context and are cached on disk per device") {
  auto c = device_or_skip();
  if (!c) return;
  TempDir d;
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old ? old : "";
  setenv("XDG_CACHE_HOME", d.path.c_str(), 1);
  const std::string src = "__kernel void twice(__global float* x) { x[get_global_id(0)] *= 2.0f; }\n";
  cl_program p = c->program(src);
  CHECK(c->program(src) == p);  // the same program object, not rebuilt
  CHECK(c->compiled_programs() == 1);
  cl::Context fresh(0);
  fresh.program(src);
  CHECK(fresh.compiled_programs() == 0);  // loaded from the binary the first context saved
  auto x = upload(fresh, std::vector<float>{1, 2, 3, 4});
  cl::Kernel k = fresh.kernel(fresh.program(src), "twice");
  k.args(*x);
  fresh.launch(k, 4, 1);
  CHECK(download<float>(fresh, *x, 4) == std::vector<float>{2, 4, 6, 8});
  CHECK(fresh.transfers().to_device == 16);
  CHECK(fresh.transfers().to_host == 16);
  CHECK(contains(error_of([&] { fresh.program("__kernel void broken( {"); }), "building kernels"));
  if (old) setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else unsetenv("XDG_CACHE_HOME");
}

TEST_CASE("OpenCL decoder kernels equal the host reference") {
  test::KernelContext cx(2);
  auto c = device_or_skip();
  if (!c) return;
  ocl::Kernels k(*c);
  ocl::Kernels per_group(*c, false), per_item(*c, true);  // both GEMV forms, whatever this device prefers
  const int M = 2, K = 200, N = 37;                       // K not a multiple of any work-group size
  const auto x = random_floats(static_cast<size_t>(M * K), 1), w = random_floats(static_cast<size_t>(N * K), 2);
  std::vector<float> ref(static_cast<size_t>(M * N));
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = 0;
      for (int i = 0; i < K; ++i) s += static_cast<double>(x[static_cast<size_t>(m * K + i)]) * w[static_cast<size_t>(n * K + i)];
      ref[static_cast<size_t>(m * N + n)] = static_cast<float>(s);
    }
  auto xb = upload(*c, x), yb = std::make_unique<cl::Buffer>(*c, ref.size() * 4);
  SUBCASE("gemv fp32 and fp16 weights") {
    const Tensor w16 = cast_to(Tensor::from_vector<float>(w, {N, K}), DType::Float16);
    const uint16_t* h = static_cast<const uint16_t*>(w16.raw());
    for (ocl::Kernels* g : {&per_group, &per_item})
      for (int k_len : {K, K - 3}) {  // a K that is not a multiple of 4 takes the scalar tail
        CAPTURE(k_len);
        std::vector<float> expect(static_cast<size_t>(M * N));
        for (int m = 0; m < M; ++m)
          for (int n = 0; n < N; ++n)
            for (int i = 0; i < k_len; ++i)
              expect[static_cast<size_t>(m * N + n)] += x[static_cast<size_t>(m * k_len + i)] * w[static_cast<size_t>(n * k_len + i)];
        g->gemv(*xb, *upload(*c, w), false, *yb, M, k_len, N);
        CHECK(max_diff(download<float>(*c, *yb, ref.size()), expect) < 1e-4f);
        if (k_len == K) CHECK(max_diff(download<float>(*c, *yb, ref.size()), ref) < 1e-4f);
      }
    for (ocl::Kernels* g : {&per_group, &per_item}) {
      g->gemv(*xb, *upload(*c, std::vector<uint16_t>(h, h + N * K)), true, *yb, M, K, N);
      CHECK(max_diff(download<float>(*c, *yb, ref.size()), ref) < 2e-2f);  // fp16 weights: ~1e-3 relative
    }
  }
  SUBCASE("gemv of MatMulNBits blocks equals the CPU kernel") {
    // K - 3: x ends inside a 32-bit word of the last block (the GPU form's partial word)
    for (int k_len : {K, K - 3})
      for (int bits : {4, 8}) {
        CAPTURE(k_len);
        CAPTURE(bits);
        // quantize_nbits takes W as [K, N] (ONNX MatMul) and stores it as [N, k_blocks, blob]
        std::vector<float> wkn(static_cast<size_t>(k_len * N));
        for (int n = 0; n < N; ++n)
          for (int i = 0; i < k_len; ++i) wkn[static_cast<size_t>(i * N + n)] = w[static_cast<size_t>(n * K + i)];
        const auto q = kernels::quantize_nbits(cx, wkn.data(), k_len, N, bits, 32);
        std::vector<float> cpu(ref.size());
        kernels::matmul_nbits(cx, x.data(), M, q.view(), cpu.data());
        auto zp = upload(*c, q.zero_points);
        for (ocl::Kernels* g : {&per_group, &per_item}) {
          g->gemv_nbits(*xb, *upload(*c, q.data), *upload(*c, q.scales), *zp, *yb, M, k_len, N, bits, 32);
          CHECK(max_diff(download<float>(*c, *yb, ref.size()), cpu) < 1e-4f);
        }
      }
  }
  SUBCASE("many rows: the tiled GEMM (GPU form) and the row GEMV (CPU form), fp32, half and MatMulNBits weights") {
    const int R = 37;  // not a multiple of the 16×16 tiles, nor K = 200, nor N = 37
    const auto xs = random_floats(static_cast<size_t>(R * K), 9);
    std::vector<float> expect(static_cast<size_t>(R * N));
    for (int m = 0; m < R; ++m)
      for (int n = 0; n < N; ++n) {
        double acc = 0;
        for (int i = 0; i < K; ++i) acc += static_cast<double>(xs[static_cast<size_t>(m * K + i)]) * w[static_cast<size_t>(n * K + i)];
        expect[static_cast<size_t>(m * N + n)] = static_cast<float>(acc);
      }
    auto xr = upload(*c, xs);
    cl::Buffer yr(*c, expect.size() * 4);
    const Tensor w16 = cast_to(Tensor::from_vector<float>(w, {N, K}), DType::Float16);
    const uint16_t* h = static_cast<const uint16_t*>(w16.raw());
    for (ocl::Kernels* g : {&per_group, &per_item}) {
      g->gemv(*xr, *upload(*c, w), false, yr, R, K, N);
      CHECK(max_diff(download<float>(*c, yr, expect.size()), expect) < 1e-4f);
      g->gemv(*xr, *upload(*c, std::vector<uint16_t>(h, h + N * K)), true, yr, R, K, N);
      CHECK(max_diff(download<float>(*c, yr, expect.size()), expect) < 2e-2f);
    }
    std::vector<float> wkn(static_cast<size_t>(K * N));
    for (int n = 0; n < N; ++n)
      for (int i = 0; i < K; ++i) wkn[static_cast<size_t>(i * N + n)] = w[static_cast<size_t>(n * K + i)];
    for (int bits : {4, 8}) {
      const auto q = kernels::quantize_nbits(cx, wkn.data(), K, N, bits, 32);
      std::vector<float> cpu(expect.size());
      kernels::matmul_nbits(cx, xs.data(), R, q.view(), cpu.data());
      for (ocl::Kernels* g : {&per_group, &per_item}) {
        g->gemv_nbits(*xr, *upload(*c, q.data), *upload(*c, q.scales), *upload(*c, q.zero_points), yr, R, K, N, bits, 32);
        CHECK(max_diff(download<float>(*c, yr, expect.size()), cpu) < 1e-4f);
      }
    }
  }
  SUBCASE("rms_norm, plain and with a residual") {
    const int R = 3, D = 300;
    const auto a = random_floats(R * D, 3), r = random_floats(R * D, 4), scale = random_floats(D, 5);
    std::vector<float> plain(R * D), skip(R * D), sum(R * D);
    for (int row = 0; row < R; ++row)
      for (bool with_residual : {false, true}) {
        double ss = 0;
        for (int i = 0; i < D; ++i) {
          const float v = a[row * D + i] + (with_residual ? r[row * D + i] : 0.0f);
          if (with_residual) sum[row * D + i] = v;
          ss += static_cast<double>(v) * v;
        }
        const double inv = 1.0 / std::sqrt(ss / D + 1e-5);
        for (int i = 0; i < D; ++i)
          (with_residual ? skip : plain)[row * D + i] =
              static_cast<float>((a[row * D + i] + (with_residual ? r[row * D + i] : 0.0f)) * inv * scale[i]);
      }
    auto ab = upload(*c, a), rb = upload(*c, r), sb = upload(*c, scale);
    cl::Buffer y(*c, R * D * 4), s(*c, R * D * 4);
    k.rms_norm(*ab, nullptr, nullptr, *sb, y, R, D, 1e-5f);
    CHECK(max_diff(download<float>(*c, y, R * D), plain) < 1e-5f);
    k.rms_norm(*ab, *rb, s, *sb, y, R, D, 1e-5f);
    CHECK(max_diff(download<float>(*c, y, R * D), skip) < 1e-5f);
    CHECK(max_diff(download<float>(*c, s, R * D), sum) == 0);
  }
  SUBCASE("swiglu, add, embedding rows and argmax") {
    const int R = 2, F = 70;
    const auto gu = random_floats(R * 2 * F, 6);
    std::vector<float> sw(R * F);
    for (int row = 0; row < R; ++row)
      for (int i = 0; i < F; ++i) {
        const float g = gu[row * 2 * F + i], u = gu[row * 2 * F + F + i];
        sw[row * F + i] = g / (1 + std::exp(-g)) * u;
      }
    cl::Buffer y(*c, R * F * 4);
    k.swiglu(*upload(*c, gu), nullptr, y, R, F);
    CHECK(max_diff(download<float>(*c, y, R * F), sw) < 1e-6f);
    std::vector<float> gate(R * F), up(R * F);  // the same as two tensors
    for (int row = 0; row < R; ++row)
      for (int i = 0; i < F; ++i) gate[row * F + i] = gu[row * 2 * F + i], up[row * F + i] = gu[row * 2 * F + F + i];
    k.swiglu(*upload(*c, gate), *upload(*c, up), y, R, F);
    CHECK(max_diff(download<float>(*c, y, R * F), sw) < 1e-6f);
    k.add(*upload(*c, sw), *upload(*c, sw), y, R * F);
    const auto twice = download<float>(*c, y, R * F);
    CHECK(twice[5] == 2 * sw[5]);

    const int rows = 10, D = 7;
    const auto table = random_floats(rows * D, 7);
    cl::Buffer e(*c, 3 * D * 4);
    k.embed_rows(*upload(*c, std::vector<int32_t>{9, 0, 4}), *upload(*c, table), e, 3, D);
    const auto got = download<float>(*c, e, 3 * D);
    CHECK(std::vector<float>(got.begin(), got.begin() + D) == std::vector<float>(table.begin() + 9 * D, table.begin() + 10 * D));
    CHECK(std::vector<float>(got.begin() + 2 * D, got.end()) == std::vector<float>(table.begin() + 4 * D, table.begin() + 5 * D));

    auto logits = random_floats(1000, 8);
    logits[613] = 5;
    logits[777] = 5;  // a tie: the first wins
    cl::Buffer out(*c, 4);
    k.argmax(*upload(*c, logits), 0, 1000, out);
    CHECK(download<int32_t>(*c, out, 1)[0] == 613);
    k.argmax(*upload(*c, logits), 700, 300, out);  // a row further on: 777 is the largest there, index 77
    CHECK(download<int32_t>(*c, out, 1)[0] == 77);
    // top-k against a host partial sort with the sampler's order (higher score, then lower id)
    logits[10] = 5;  // a three-way tie at the top
    std::vector<int32_t> order(1000);
    for (int i = 0; i < 1000; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
    auto lb = upload(*c, logits);
    cl::Buffer sv(*c, ocl::Kernels::kTopKItems * 64 * 4), si(*c, ocl::Kernels::kTopKItems * 64 * 4), tv(*c, 64 * 4), ti(*c, 64 * 4);
    for (int kk : {1, 3, 40, 64}) {
      k.top_k(*lb, 0, 1000, kk, sv, si, tv, ti);
      const auto ids = download<int32_t>(*c, ti, static_cast<size_t>(kk));
      const auto vals = download<float>(*c, tv, static_cast<size_t>(kk));
      CHECK(ids == std::vector<int32_t>(order.begin(), order.begin() + kk));
      for (int j = 0; j < kk; ++j) CHECK(vals[j] == logits[ids[j]]);
    }
  }
}

TEST_CASE("the device ring-buffer KV cache attends as the CPU ring does, sliding past its window with sinks") {
  test::KernelContext cx(2);
  auto c = device_or_skip();
  if (!c) return;
  ocl::Kernels k(*c);
  const int Hq = 4, Hkv = 2, D = 8, W = 6, S = 2, positions = 16;
  for (bool half : {false, true}) {
    CAPTURE(half);
    kernels::KvRingBuffer ring({1, Hkv, D, W, S, half ? kernels::KvStorage::F16 : kernels::KvStorage::F32});
    std::vector<float> cos(positions * D / 2), sin(positions * D / 2);
    for (int p = 0; p < positions; ++p)
      for (int j = 0; j < D / 2; ++j) {
        cos[p * D / 2 + j] = std::cos(p * std::pow(100.0f, -2.0f * j / D));
        sin[p * D / 2 + j] = std::sin(p * std::pow(100.0f, -2.0f * j / D));
      }
    const kernels::RopeTable rope{cos.data(), sin.data(), D, false};
    auto cos_b = upload(*c, cos), sin_b = upload(*c, sin);
    const ocl::DeviceRope drope{*cos_b, *sin_b, D, false};
    const int row = (Hq + 2 * Hkv) * D;  // packed [q | k | v] rows, as GroupQueryAttention's
    cl::Buffer keys(*c, W * Hkv * D * 4), values(*c, W * Hkv * D * 4), scores(*c, 4 * Hq * W * 4), out(*c, 4 * Hq * D * 4);
    const float scale = 0.35f;
    int seen = 0;
    // A 4-token prompt chunk, then 8 single tokens: the window (6, 2 sinks) slides from the 7th on.
    for (int count : {4, 1, 1, 1, 1, 1, 1, 1, 1}) {
      const auto rows = random_floats(static_cast<size_t>(count * row), static_cast<unsigned>(100 + seen));
      std::vector<float> cpu(static_cast<size_t>(count * Hq * D));
      for (int s = 0; s < count; ++s) ring.append(0, rows.data() + s * row + Hq * D, rows.data() + s * row + (Hq + Hkv) * D);
      if (count > 1) ring.attend_chunk(cx, 0, rows.data(), row, count, Hq, {scale}, rope, cpu.data(), Hq * D);
      else ring.attend(cx, 0, rows.data(), Hq, {scale}, rope, cpu.data());
      auto src = upload(*c, rows);
      k.ring_write(*src, Hq * D, row, *src, (Hq + Hkv) * D, row, count, seen, W, S, Hkv * D, half, keys, values);
      seen += count;
      k.ring_attend(*src, 0, row, count, Hq, Hkv, D, std::min(seen, W), seen, W, S, half, keys, values, drope, scale, scores, out, 0,
                    Hq * D);
      CHECK(max_diff(download<float>(*c, out, cpu.size()), cpu) < 1e-5f);
    }
  }
}

namespace {

struct DeviceRun {
  llm::GenerateResult result;
  std::vector<std::string> host_nodes;
  int64_t up = 0, down = 0;  // bytes host → device and back during the decode steps after the first
};

DeviceRun generate_on(const std::string& model, Device device, int64_t window, int64_t sinks, int64_t new_tokens,
                      llm::SamplingOptions sampling = {}, llm::SpeculationOptions speculation = {}) {
  SessionOptions so;
  so.device = device;
  so.decoder.ring_capacity = window;
  so.decoder.kv_sinks = sinks;
  so.decoder.last_position_output = "logits";
  Session s((std::filesystem::path(TERN_SOURCE_DIR) / "tests" / "fixtures" / model / "model.onnx").string(), so);
  REQUIRE(s.passes().cached_layers > 0);
  llm::Generator gen(s, llm::read_model_config((std::filesystem::path(TERN_SOURCE_DIR) / "tests" / "fixtures" / model).string()));
  llm::GenerateOptions o;
  o.max_new_tokens = new_tokens;
  o.sampling = sampling;
  o.speculation = speculation;
  DeviceRun r;
  int64_t step = 0;
  r.result = gen.generate({{1, 5, 9, 200, 31, 7, 64}}, o, [&](size_t, int64_t) {
    if (const auto* t = s.device_transfers(); t && ++step == 2) r.up = -t->to_device, r.down = -t->to_host;
    return true;
  });
  if (const auto* t = s.device_transfers()) {
    r.up += t->to_device, r.down += t->to_host;
    r.host_nodes = s.host_nodes();
  }
  return r;
}

}  // namespace

TEST_CASE("the decoder on the OpenCL device: the CPU's tokens and logits, weights and KV cache kept there") {
  if (cl::list_devices().empty()) {
    (void)device_or_skip();
    return;
  }
  for (const std::string model : {"llama-gqa-torch", "llama-gqa-int4", "llama-gqa-opset23", "llama-gqa-static24"}) {
    for (int64_t window : {int64_t{128}, int64_t{8}}) {  // the fixtures' context, and a window that slides (2 sinks)
      CAPTURE(model);
      CAPTURE(window);
      const DeviceRun cpu = generate_on(model, Device{}, window, 2, 40);
      const DeviceRun gpu = generate_on(model, Device{DeviceKind::OpenCL, 0}, window, 2, 40);
      CHECK(gpu.result.tokens == cpu.result.tokens);
      double worst = 0;
      for (int64_t i = 0; i < cpu.result.prefill_logits.numel(); ++i)
        worst = std::max(
            worst, static_cast<double>(std::fabs(cpu.result.prefill_logits.data<float>()[i] - gpu.result.prefill_logits.data<float>()[i])));
      CHECK(worst < 1e-3);
      std::string host;
      for (const auto& n : gpu.host_nodes) host += n + " ";
      CAPTURE(host);
      CHECK(gpu.host_nodes.empty());  // every node of these fp32 decoders runs on the device
      // Per decode token after the first: one token id up and the chosen id down (int32 each).
      const int64_t steps = static_cast<int64_t>(gpu.result.tokens[0].size()) - 7 - 2;
      CHECK(gpu.up == steps * 4);
      CHECK(gpu.down == steps * 4);
    }
  }
}

TEST_CASE("top-k sampling on the OpenCL device: the CPU's tokens from k candidates a step") {
  if (cl::list_devices().empty()) {
    (void)device_or_skip();
    return;
  }
  llm::SamplingOptions s;
  s.greedy = false;
  s.temperature = 0.9f;
  s.top_k = 20;
  s.top_p = 0.95f;
  s.seed = 11;
  const DeviceRun cpu = generate_on("llama-gqa-torch", Device{}, 128, 4, 40, s);
  const DeviceRun gpu = generate_on("llama-gqa-torch", Device{DeviceKind::OpenCL, 0}, 128, 4, 40, s);
  CHECK(gpu.result.tokens == cpu.result.tokens);
  const int64_t steps = static_cast<int64_t>(gpu.result.tokens[0].size()) - 7 - 2;
  CHECK(gpu.up == steps * 4);
  CHECK(gpu.down == steps * 20 * 8);  // 20 scores and 20 ids a step
}

TEST_CASE("speculation on the OpenCL device: the CPU's greedy tokens, each check's logits read back whole") {
  if (cl::list_devices().empty()) {
    (void)device_or_skip();
    return;
  }
  llm::SpeculationOptions spec;
  spec.drafts = 3;
  spec.ngram = 1;  // (a random model repeats little: 1-token lookups draft often, and most drafts are rolled back)
  const DeviceRun cpu = generate_on("llama-gqa-torch", Device{}, 128, 4, 40);
  const DeviceRun gpu = generate_on("llama-gqa-torch", Device{DeviceKind::OpenCL, 0}, 128, 4, 40, {}, spec);
  CHECK(gpu.result.tokens == cpu.result.tokens);
  CHECK(gpu.result.drafted_tokens > 0);
}

TEST_CASE("nodes the device cannot take run on the CPU, with the same tokens (fp16 Llama, GPT-2 graph cache)") {
  if (cl::list_devices().empty()) {
    (void)device_or_skip();
    return;
  }
  for (const char* name : {"tiny-random-LlamaForCausalLM-fp16", "tiny-random-gpt2-fp32"}) {
    CAPTURE(name);
    const auto dir = std::filesystem::path(TERN_SHARED_DIR) / "models" / "ort-genai" / name;
    if (!std::filesystem::exists(dir)) {
      MESSAGE("skipped: ", dir.string(), " not found (shared data lives at ../shared)");
      continue;
    }
    std::vector<std::vector<int64_t>> tokens;
    std::vector<std::string> host_nodes;
    for (Device device : {Device{}, Device{DeviceKind::OpenCL, 0}}) {
      SessionOptions so;
      so.device = device;
      so.decoder.last_position_output = "logits";
      const auto cfg = llm::read_model_config(dir.string());
      std::string file = (dir / "model.onnx").string();
      if (!std::filesystem::exists(file))
        for (const auto& e : std::filesystem::directory_iterator(dir))
          if (e.path().extension() == ".onnx") file = e.path().string();
      so.decoder.ring_capacity = cfg.context_length > 0 ? cfg.context_length : 4096;
      so.decoder.ring_required = false;
      Session s(file, so);
      llm::Generator gen(s, cfg);
      llm::GenerateOptions o;
      o.max_new_tokens = 12;
      tokens.push_back(gen.generate({{1, 5, 9, 200}}, o).tokens[0]);
      host_nodes = s.host_nodes();
    }
    CHECK(tokens[0] == tokens[1]);
    CHECK(!host_nodes.empty());  // fp16 activations / the graph's own attention: not on the device yet
  }
}
