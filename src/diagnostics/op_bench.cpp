#include "diagnostics/op_bench.h"

#include <algorithm>
#include <cstdint>

#include "convert/onnx_builder.h"
#include "runtime/profiler.h"
#include "runtime/session.h"

namespace tern {
using convert::DeclaredDim;
using convert::OnnxBuilder;
namespace {

// A fixed-seed LCG: the same inputs every run.
struct Lcg {
  uint64_t s;
  explicit Lcg(uint64_t seed) : s(seed * 6364136223846793005ULL + 1442695040888963407ULL) {}
  uint64_t next() { return s = s * 6364136223846793005ULL + 1442695040888963407ULL; }
};

// Values in [-1, 1).
Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed) {
  Tensor t(DType::Float32, shape);
  float* p = t.data<float>();
  Lcg g(seed);
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = static_cast<float>(static_cast<double>(g.next() >> 40) / static_cast<double>(1ULL << 24) * 2.0 - 1.0);
  return dtype == DType::Float32 ? t : cast_to(t, dtype);
}

// Random bytes: block codes and packed zero points (uint8), 8-bit weights (int8).
Tensor random_bytes(const Shape& shape, uint64_t seed, DType dtype = DType::UInt8) {
  Tensor t(dtype, shape);
  auto* p = static_cast<uint8_t*>(t.raw());
  Lcg g(seed);
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<uint8_t>(g.next() >> 56);
  return t;
}

std::string dims(const Shape& s) { return shape_str(s); }

void need(const OpBenchSpec& s, size_t n, const char* meaning) {
  if (s.shape.size() != n) fail("bench-op ", s.op, " needs --shape ", meaning);
  for (int64_t d : s.shape)
    if (d <= 0) fail("bench-op ", s.op, ": --shape dims must be positive");
}

}  // namespace

const char* op_bench_usage() {
  return "  matmul    --shape M,K,N      [M,K] activations x a constant [K,N] weight (--weights fp32|fp16|bf16|int8|int4\n"
         "                               [--activations fp32|int8])\n"
         "  matmulnbits --shape M,K,N    MatMulNBits (com.microsoft) over random [N,K] blocks with packed zero points\n"
         "                               (--bits 2|4|8, default 4; --block B, default 32; accuracy level 0: fp32\n"
         "                               activations unless --activations int8)\n"
         "  dynamicquantizematmul --shape M,K,N   DynamicQuantizeMatMul (com.microsoft): fp32 activations quantized\n"
         "                               to uint8 per tensor, times a random int8 [K,N] weight (model_quantized.onnx)\n"
         "  rmsnorm   --shape ROWS,DIM   RMSNormalization over the last dim\n"
         "  rope      --shape SEQ,HEADS,HEAD_DIM   RotaryEmbedding of [1, SEQ, HEADS*HEAD_DIM]\n"
         "  softmax   --shape ROWS,N     Softmax over the last dim\n"
         "  swiglu    --shape ROWS,FFN   silu(gate) * up from a packed [ROWS, 2*FFN] input\n"
         "  attention --shape HEADS,KV_HEADS,HEAD_DIM,CONTEXT   one decode token over CONTEXT cached tokens\n"
         "            (tern's ring-buffer attention, keys rotated as read; --kv-dtype fp32|fp16|q8_0|q4_0)\n";
}

OpBenchResult bench_op(const OpBenchSpec& spec) {
  OnnxBuilder b(23, "bench_op");
  b.add_opset("tern", 1);
  std::vector<std::pair<std::string, Tensor>> feeds;  // the timed run's
  std::vector<std::pair<std::string, Tensor>> first;  // attention: the prefill that fills the cache first
  OpBenchResult r;
  const DType dt = spec.dtype;
  auto input = [&](const std::string& name, const Tensor& t) {
    std::vector<DeclaredDim> d;
    for (int64_t x : t.shape()) d.emplace_back(x);
    b.input(name, t.dtype(), d);
    feeds.emplace_back(name, t);
  };
  const auto& s = spec.shape;
  if (spec.op == "matmul") {
    need(spec, 3, "M,K,N");
    input("x", random_tensor({s[0], s[1]}, dt, 1));
    b.initializer("w", random_tensor({s[1], s[2]}, dt, 2));
    b.node("MatMul", {"x", "w"}, {"y"});
    r.graph = "MatMul " + dims({s[0], s[1]}) + " x " + dims({s[1], s[2]}) + " (constant weight)";
  } else if (spec.op == "matmulnbits") {
    need(spec, 3, "M,K,N");
    const int64_t K = s[1], N = s[2], bits = spec.bits, block = spec.block, k_blocks = (K + block - 1) / block;
    b.add_opset("com.microsoft", 1);
    input("x", random_tensor({s[0], K}, DType::Float32, 1));
    b.initializer("B", random_bytes({N, k_blocks, block * bits / 8}, 2));
    Tensor scales = random_tensor({N * k_blocks}, DType::Float32, 3);
    for (int64_t i = 0; i < scales.numel(); ++i) scales.data<float>()[i] = 0.01f + 0.005f * scales.data<float>()[i];
    b.initializer("scales", scales);
    b.initializer("zero_points", random_bytes({N * ((k_blocks * bits + 7) / 8)}, 4));
    auto& n = b.node("MatMulNBits", {"x", "B", "scales", "zero_points"}, {"y"}, "com.microsoft");
    OnnxBuilder::attr(n, "K", K);
    OnnxBuilder::attr(n, "N", N);
    OnnxBuilder::attr(n, "bits", bits);
    OnnxBuilder::attr(n, "block_size", block);
    r.graph = "MatMulNBits " + dims({s[0], K}) + " x " + std::to_string(bits) + "-bit blocks of " + std::to_string(block) + " [" +
              std::to_string(N) + ", " + std::to_string(K) + "]";
  } else if (spec.op == "dynamicquantizematmul") {
    need(spec, 3, "M,K,N");
    b.add_opset("com.microsoft", 1);
    input("x", random_tensor({s[0], s[1]}, DType::Float32, 1));
    b.initializer("w", random_bytes({s[1], s[2]}, 2, DType::Int8));
    b.initializer("scale", Tensor::from_vector<float>({0.01f}, {}));
    b.node("DynamicQuantizeMatMul", {"x", "w", "scale"}, {"y"}, "com.microsoft");
    r.graph = "DynamicQuantizeMatMul " + dims({s[0], s[1]}) + " x int8 " + dims({s[1], s[2]});
  } else if (spec.op == "rmsnorm") {
    need(spec, 2, "ROWS,DIM");
    input("x", random_tensor({s[0], s[1]}, dt, 1));
    b.initializer("scale", random_tensor({s[1]}, dt, 2));
    b.node("RMSNormalization", {"x", "scale"}, {"y"});
    r.graph = "RMSNormalization " + dims({s[0], s[1]});
  } else if (spec.op == "rope") {
    need(spec, 3, "SEQ,HEADS,HEAD_DIM");
    const int64_t S = s[0], H = s[1], D = s[2];
    if (D % 2) fail("bench-op rope: HEAD_DIM must be even");
    input("x", random_tensor({1, S, H * D}, dt, 1));
    b.initializer("cos", random_tensor({S, D / 2}, dt, 2));
    b.initializer("sin", random_tensor({S, D / 2}, dt, 3));
    std::vector<int64_t> pos(static_cast<size_t>(S));
    for (int64_t i = 0; i < S; ++i) pos[static_cast<size_t>(i)] = i;
    b.initializer("pos", Tensor::from_vector<int64_t>(pos, {1, S}));
    OnnxBuilder::attr(b.node("RotaryEmbedding", {"x", "cos", "sin", "pos"}, {"y"}), "num_heads", H);
    r.graph = "RotaryEmbedding " + dims({1, S, H * D}) + ", " + std::to_string(H) + " heads";
  } else if (spec.op == "softmax") {
    need(spec, 2, "ROWS,N");
    input("x", random_tensor({s[0], s[1]}, dt, 1));
    b.node("Softmax", {"x"}, {"y"});
    r.graph = "Softmax " + dims({s[0], s[1]});
  } else if (spec.op == "swiglu") {
    need(spec, 2, "ROWS,FFN");
    input("x", random_tensor({s[0], 2 * s[1]}, dt, 1));
    b.node("SwiGLU", {"x"}, {"y"}, "tern");
    r.graph = "SwiGLU " + dims({s[0], 2 * s[1]}) + " packed";
  } else if (spec.op == "attention") {
    need(spec, 4, "HEADS,KV_HEADS,HEAD_DIM,CONTEXT");
    const int64_t H = s[0], Hkv = s[1], D = s[2], C = s[3];
    if (H % Hkv || D % 2) fail("bench-op attention: KV_HEADS must divide HEADS and HEAD_DIM be even");
    // A window of C + 1 tokens: full after the first warm-up run, it slides from then on, so every timed
    // run attends over exactly C + 1 keys with the ring at its final size (no growth inside a run).
    const int64_t window = C + 1;
    for (const char* n : {"q", "k", "v"}) b.input(n, dt, {int64_t{1}, std::string("s"), (n[0] == 'q' ? H : Hkv) * D});
    b.input("mask", DType::Int64, {int64_t{1}, std::string("total")});
    b.initializer("cos", random_tensor({window, D / 2}, DType::Float32, 4));
    b.initializer("sin", random_tensor({window, D / 2}, DType::Float32, 5));
    auto& n = b.node("CachedAttention", {"q", "k", "v", "cos", "sin", "mask"}, {"y"}, "tern");
    OnnxBuilder::attr(n, "q_num_heads", H);
    OnnxBuilder::attr(n, "kv_num_heads", Hkv);
    OnnxBuilder::attr(n, "ring_capacity", window);
    OnnxBuilder::attr(n, "storage", std::string(kernels::kv_storage_name(spec.kv_dtype)));
    auto step = [&](int64_t S, int64_t total) {
      return std::vector<std::pair<std::string, Tensor>>{
          {"q", random_tensor({1, S, H * D}, dt, 1)},
          {"k", random_tensor({1, S, Hkv * D}, dt, 2)},
          {"v", random_tensor({1, S, Hkv * D}, dt, 3)},
          {"mask", Tensor::from_vector<int64_t>(std::vector<int64_t>(total, 1), {1, total})}};
    };
    first = step(C, C);
    feeds = step(1, C + 1);  // the mask's length is not read for a decode token past the prefill
    r.graph = "CachedAttention " + std::to_string(H) + " heads (" + std::to_string(Hkv) + " KV) x " + std::to_string(D) +
              ", one token over " + std::to_string(C) + " cached (" + kernels::kv_storage_name(spec.kv_dtype) + " ring)";
  } else {
    fail("bench-op: unknown op '", spec.op, "'; one of:\n", op_bench_usage());
  }
  b.output("y");

  SessionOptions so;
  so.threads = spec.threads;
  so.weights = spec.weights;
  so.activations = spec.activations;
  so.device = spec.device;
  Profiler prof;
  prof.attach(so);
  Session session(load_onnx(b.proto(), "bench-op " + spec.op), so);
  prof.set_phase("");
  if (!first.empty()) session.run(first);
  for (int i = 0; i < 3; ++i) session.run(feeds);  // warm: plans made, caches filled
  prof.set_phase("run");
  std::vector<double> ms;
  double total = 0;
  while (ms.size() < 10000 && (ms.size() < 10 || total < spec.seconds * 1000)) {
    const size_t before = prof.events().size();
    session.run(feeds);
    double run_ms = 0;
    for (size_t i = before; i < prof.events().size(); ++i) run_ms += prof.events()[i].dur_us / 1000.0;
    ms.push_back(run_ms);
    total += run_ms;
  }
  const auto& e = prof.events();
  r.runs = static_cast<int64_t>(ms.size());
  r.on_device = spec.device.kind != DeviceKind::CPU && session.host_nodes().empty();
  r.kernel = e.front().kernel;
  double flops = 0, bytes = 0;
  for (const auto& ev : e) flops += ev.flops, bytes += ev.bytes;
  r.flops = flops / static_cast<double>(ms.size()), r.bytes = bytes / static_cast<double>(ms.size());
  std::sort(ms.begin(), ms.end());
  r.median_ms = ms[ms.size() / 2], r.min_ms = ms.front();
  return r;
}

}  // namespace tern
