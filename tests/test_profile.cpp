// The profiler and what is built on it: costs, per-op-type and per-node rows, layers of a step, Chrome
// traces, the HTML report, comparisons with ONNX Runtime profiles, bench-op, the machine's cached peaks.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "diagnostics/op_bench.h"
#include "diagnostics/profile_compare.h"
#include "diagnostics/profile_report.h"
#include "kernels/cpu/gemm_packed.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/kernel_table.h"
#include "model_builder.h"
#include "runtime/profiler.h"
#include "runtime/session.h"
#include "test_util.h"

using namespace tern;
using namespace tern::test;
namespace fs = std::filesystem;

TEST_CASE("profiler: hand-derived MatMul cost, per-op-type rows that add up, a Chrome trace with ORT's fields") {
  TempDir d;
  ModelBuilder b(17);
  b.input("x", onnx::TensorProto::FLOAT, {2, 3}).output("y");
  b.initializer_f32("w", {3, 4}, std::vector<float>(12, 0.5f));
  b.node("MatMul", {"x", "w"}, {"xw"});
  b.node("Relu", {"xw"}, {"y"});
  SessionOptions so;
  Profiler prof;
  prof.attach(so);
  Session s(b.save(d.path / "m.onnx"), so);
  prof.set_phase("prefill");
  s.run({{"x", Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3})}});
  prof.add_step_time("prefill", 1.0);
  const auto rows = prof.by_op_type("prefill");
  REQUIRE(rows.size() == 2);
  for (const auto& r : rows) {
    CHECK(r.calls == 1);
    if (r.op_type == "MatMul") {
      CHECK(r.flops == 2 * 2 * 3 * 4);
      // x 24 bytes + the weight as MatMul keeps it (one panel of kPanel columns — 16 on x86-64, 8 with
      // NEON — of 3 floats each) + y 32
      CHECK(r.bytes == 24 + 3 * kernels::kPanel * 4 + 32);
    } else {
      CHECK(r.op_type == "Relu");
      CHECK(r.flops == 8);
      CHECK(r.bytes == 64);
    }
  }
  CHECK(rows[0].ms + rows[1].ms == doctest::Approx(prof.node_ms("prefill")));
  prof.write_chrome_trace((d.path / "trace.json").string());
  std::ifstream f(d.path / "trace.json");
  const auto trace = nlohmann::json::parse(f);
  REQUIRE(trace.size() == 3);  // the run, then its two nodes
  CHECK(trace[0]["cat"] == "Session");
  CHECK(trace[0]["name"] == "model_run");
  for (const auto& e : {trace[1], trace[2]}) {
    CHECK(e["cat"] == "Node");
    CHECK(e["ph"] == "X");
    CHECK(e.contains("ts"));
    CHECK(e.contains("dur"));
    CHECK(e["args"].contains("op_name"));
  }
  CHECK(trace[1]["args"]["kernel"] == "gemv_panels fp32");  // 2 rows: the packed weight streamed once
  CHECK(trace[1]["args"]["input_type_shape"] == nlohmann::json::parse(R"([{"float":[2,3]},{"float":[3,4]}])"));
  CHECK(trace[1]["args"]["output_type_shape"] == nlohmann::json::parse(R"([{"float":[2,4]}])"));
}

TEST_CASE("profiler: rows by node over runs, intensity and roofline share by hand") {
  TempDir d;
  ModelBuilder b(17);
  b.input("x", onnx::TensorProto::FLOAT, {-1, 8}, {"rows"}).output("y");
  b.initializer_f32("w", {8, 8}, std::vector<float>(64, 0.25f));
  b.node("MatMul", {"x", "w"}, {"y"}).set_name("proj");
  SessionOptions so;
  Profiler prof;
  prof.attach(so);
  Session s(b.save(d.path / "m.onnx"), so);
  prof.set_phase("prefill");
  s.run({{"x", Tensor(DType::Float32, {20, 8})}});
  prof.set_phase("decode");
  for (int i = 0; i < 3; ++i) s.run({{"x", Tensor(DType::Float32, {1, 8})}});
  prof.set_phase("");  // left out: recorded nowhere
  s.run({{"x", Tensor(DType::Float32, {1, 8})}});
  CHECK(prof.phases() == std::vector<std::string>{"prefill", "decode"});
  CHECK(prof.runs("prefill") == 1);
  CHECK(prof.runs("decode") == 3);
  const auto nodes = prof.by_node("decode");
  REQUIRE(nodes.size() == 1);
  CHECK(nodes[0].name == "proj");
  CHECK(nodes[0].calls == 3);
  CHECK(nodes[0].kernel == "gemv_panels fp32");
  CHECK(nodes[0].flops == 3 * 2 * 8 * 8);
  CHECK(prof.by_node("prefill")[0].kernel.rfind("gemm_panels fp32", 0) == 0);  // 20 rows: past kPanelGemvMaxRows, the GEMM
  // 1 GFLOP over 1 GB in 100 ms: 10 GFLOP/s at 1 flop/byte; under a 10 GB/s roof that is all of it.
  Profiler::Row r;
  r.ms = 100, r.flops = 1e9, r.bytes = 1e9;
  const MachinePeaks m{100, 10, "test"};
  CHECK(r.gflops_per_s() == doctest::Approx(10));
  CHECK(r.gb_per_s() == doctest::Approx(10));
  CHECK(r.roofline_pct(m) == doctest::Approx(100));
  r.flops = 1e11;  // 100 flop/byte: compute-bound, 1000 GFLOP/s achieved of a 100 peak
  CHECK(roofline_bound(m, r.intensity()) == doctest::Approx(100));
  CHECK(r.roofline_pct(m) == doctest::Approx(1000));
  std::ostringstream table;
  prof.write_table(table, m, 5);
  CHECK(contains(table.str(), "decode (3 run(s))"));
  CHECK(contains(table.str(), "slowest nodes"));
  CHECK(contains(table.str(), "profiler overhead"));
}

TEST_CASE("a step's layers: from the norm before each attention to the final norm") {
  // embedding; two pre-norm layers (norm, qkv, attention, o, add, norm, ffn, add); final norm, head
  const std::vector<std::string> ops = {
      "Gather", "RMSNormalization", "MatMul", "CachedAttention", "MatMul", "Add", "RMSNormalization", "MatMul", "SwiGLU", "MatMul",
      "Add",    "RMSNormalization", "MatMul", "CachedAttention", "MatMul", "Add", "RMSNormalization", "MatMul", "SwiGLU", "MatMul",
      "Add",    "RMSNormalization", "MatMul"};
  const StepLayers s = split_layers(ops);
  CHECK(s.layers == 2);
  CHECK(s.row == std::vector<int>{0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3});
  const StepLayers none = split_layers({"MatMul", "Relu"});
  CHECK(none.layers == 0);
  CHECK(none.row == std::vector<int>{0, 0});
}

TEST_CASE("the HTML report and the roofline SVG hold every chart") {
  TempDir d;
  SessionOptions so;
  so.decoder.ring_capacity = 64;  // attention fused into CachedAttention nodes: one per layer
  Profiler prof;
  prof.attach(so);
  Session s((fs::path(TERN_SOURCE_DIR) / "tests" / "fixtures" / "llama-gqa-torch" / "model.onnx").string(), so);
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const auto& in : s.inputs()) {  // one prefill of 4 tokens, an empty past
    if (in.name.rfind("past", 0) == 0)
      feeds.emplace_back(in.name, Tensor(DType::Float32, {1, (*in.shape)[1].value, 0, (*in.shape)[3].value}));
    else if (in.name == "position_ids") feeds.emplace_back(in.name, Tensor::from_vector<int64_t>({0, 1, 2, 3}, {1, 4}));
    else feeds.emplace_back(in.name, Tensor::from_vector<int64_t>({1, 1, 1, 1}, {1, 4}));
  }
  prof.set_phase("prefill");
  s.run(feeds);
  const MachinePeaks m{100, 10, "test"};
  write_html_report(prof, m, "fixture", (d.path / "r.html").string());
  write_roofline_svg(prof, m, (d.path / "r.svg").string());
  std::ifstream h(d.path / "r.html"), v(d.path / "r.svg");
  const std::string html((std::istreambuf_iterator<char>(h)), {}), svg((std::istreambuf_iterator<char>(v)), {});
  for (const char* id : {"id='roofline'", "id='time-by-op'", "id='timeline-prefill'", "id='render-check'", "class='roof'"})
    CHECK(contains(html, id));
  CHECK(contains(html, "class='mark op-point'"));
  CHECK(contains(html, ">layer 1<"));  // the fixture's two layers found
  CHECK(svg.rfind("<?xml", 0) == 0);
  CHECK(contains(svg, "id='roofline'"));
  CHECK(!contains(svg, "timeline"));
}

TEST_CASE("profile comparison reads tern traces and ONNX Runtime profiles") {
  TempDir d;
  const ProfileTotals ort =
      read_profile_trace((fs::path(TERN_SOURCE_DIR) / "tests" / "fixtures" / "ort_profile_llama_gqa_torch.json").string());
  CHECK(ort.runs.at("all") == 1);
  CHECK(ort.ms.at("all").count("MatMul"));
  SessionOptions so;
  Profiler prof;
  prof.attach(so);
  ModelBuilder b(17);
  b.input("x", onnx::TensorProto::FLOAT, {2, 3}).output("y");
  b.initializer_f32("w", {3, 4}, std::vector<float>(12, 0.5f));
  b.node("MatMul", {"x", "w"}, {"y"});
  Session s(b.save(d.path / "m.onnx"), so);
  prof.set_phase("prefill");
  s.run({{"x", Tensor(DType::Float32, {2, 3})}});
  prof.write_chrome_trace((d.path / "t.json").string());
  const ProfileTotals tern_trace = read_profile_trace((d.path / "t.json").string());
  CHECK(tern_trace.runs.at("prefill") == 1);
  std::ostringstream same, mixed;
  compare_profiles(tern_trace, tern_trace, same);
  CHECK(contains(same.str(), "1.00x"));
  CHECK(contains(same.str(), "prefill"));
  compare_profiles(tern_trace, ort, mixed);
  CHECK(contains(mixed.str(), "over all phases together"));
  CHECK(contains(mixed.str(), "SimplifiedLayerNormalization"));  // ORT's fused op, on B's side only
  std::ofstream(d.path / "bad.json") << "{\"not\": \"a trace\"}";
  CHECK(contains(error_of([&] { read_profile_trace((d.path / "bad.json").string()); }), "bad.json"));
}

TEST_CASE("bench-op: the op as a session runs it, with its kernel and cost") {
  OpBenchSpec spec;
  spec.op = "matmul";
  spec.shape = {1, 64, 48};
  spec.seconds = 0;
  OpBenchResult r = bench_op(spec);
  CHECK(r.kernel == "gemv_panels fp32");
  CHECK(r.flops == 2 * 64 * 48);
  CHECK(r.runs >= 10);
  CHECK(r.median_ms >= r.min_ms);
  spec.weights = WeightFormat::Int4;
  const kernels::Isa isa = kernels::default_isa();  // (an x86-64-v2 build's sse42 has no int8 dot products)
  kernels::NBitsWeights shape;                      // the weights as --weights int4 makes them: grouped where x86 runs them so
  shape.N = 48, shape.K = 64;
  const std::string tier = std::string(" ") + kernels::isa_name(isa);
  CHECK(bench_op(spec).kernel == "gemv_nbits int4" + (kernels::nbits_groups_native(shape, isa) ? tier : ""));
  spec.activations = ActivationFormat::Int8;                              // the session option reaches the op: int8 decode rows
  const char* int8_rows = kernels::kernel_table(isa).nbits_i8_rows.name;  // (avx512 without VNNI: avx2's)
  CHECK(bench_op(spec).kernel == (int8_rows ? "gemv_nbits_i8 int4 " + std::string(int8_rows) : "gemv_nbits int4"));
  spec.shape = {16, 64, 48};  // prefill rows int8 too, four a pass, but at amx (bf16 tiles there: ops/weight_packer.cpp)
  const bool every_row = int8_rows && isa != kernels::Isa::Amx;
  CHECK(bench_op(spec).kernel.rfind(every_row ? "gemv_nbits_i8 int4" : "gemm_nbits int4", 0) == 0);
  // MatMulNBits itself, over random blocks: grouped for decode where this machine's GEMV reads them so.
  spec.op = "matmulnbits", spec.shape = {1, 64, 48}, spec.weights = WeightFormat::AsStored, spec.activations = ActivationFormat::AsModel;
  for (int64_t bits : {2, 4, 8})
    for (int64_t block : {16, 32}) {  // (blocks of 16: two to a grouped chunk)
      CAPTURE(bits);
      CAPTURE(block);
      spec.bits = shape.bits = bits;
      spec.block = shape.block = block;
      r = bench_op(spec);
      CHECK(r.graph == "MatMulNBits [1,64] x " + std::to_string(bits) + "-bit blocks of " + std::to_string(block) + " [48, 64]");
      const bool grouped = kernels::nbits_groups_native(shape, isa);
      if (!grouped && bits == 2 && block == 16)  // (as stored, 2-bit blocks of 16 have no GEMV: the panel GEMM's)
        CHECK(r.kernel.rfind("gemm_nbits int2", 0) == 0);
      else CHECK(r.kernel == "gemv_nbits int" + std::to_string(bits) + (grouped ? tier : ""));
      CHECK(r.bytes >= 48 * 64 * bits / 8);
    }
  spec = {};
  spec.op = "attention";
  spec.shape = {4, 2, 16, 32};
  spec.seconds = 0;
  r = bench_op(spec);
  CHECK(r.kernel == "ring attend");
  CHECK(r.flops >= 4.0 * 32 * 4 * 16);  // scores and sums over at least the 32 cached tokens, 4 heads of 16
  for (const char* op : {"rmsnorm", "softmax", "swiglu"}) {
    spec = {};
    spec.op = op;
    spec.shape = {3, 32};
    spec.seconds = 0;
    r = bench_op(spec);
    CHECK(r.bytes > 0);
    // Norms and SwiGLU run their tier's table entry and say so (Softmax: its own loop).
    const kernels::KernelTable& table = kernels::kernel_table(isa);
    const std::string rows = std::string(op) == "rmsnorm"  ? kernels::profile_name("normalize_rows", table.normalize_rows.name)
                             : std::string(op) == "swiglu" ? kernels::profile_name("swiglu_rows", table.swiglu_rows.name)
                                                           : "";
    CHECK(r.kernel == rows);
  }
  spec = {};
  spec.op = "rope";
  spec.shape = {4, 2, 8};
  spec.seconds = 0;
  CHECK(bench_op(spec).runs >= 10);
  spec.op = "conv";
  CHECK(contains(error_of([&] { bench_op(spec); }), "unknown op 'conv'"));
  spec.op = "matmul";
  spec.shape = {1, 64};
  CHECK(contains(error_of([&] { bench_op(spec); }), "M,K,N"));
}

TEST_CASE("the machine's peaks are measured once and cached") {
  TempDir d;
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old ? old : "";
  setenv("XDG_CACHE_HOME", d.path.c_str(), 1);
  const MachinePeaks first = machine_peaks(1);
  CHECK(first.source == "measured now");
  CHECK(first.gflops > 0);
  CHECK(first.gb_s > 0);
  const MachinePeaks again = machine_peaks(1);
  CHECK(contains(again.source, "cached in"));
  CHECK(again.gflops == doctest::Approx(first.gflops));
  CHECK(again.gb_s == doctest::Approx(first.gb_s));
  std::ofstream(d.path / "tern" / "machine.json") << "not json";  // unreadable: measured again
  CHECK(machine_peaks(1).source == "measured now");
  if (old) setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else unsetenv("XDG_CACHE_HOME");
}

TEST_CASE("attention's cost: Q·Kᵀ and the sum over V for every key, by hand") {
  TempDir d;
  ModelBuilder b(23);
  b.input("q", onnx::TensorProto::FLOAT, {1, 2, 3, 4}).input("k", onnx::TensorProto::FLOAT, {1, 2, 5, 4});
  b.input("v", onnx::TensorProto::FLOAT, {1, 2, 5, 4}).output("y");
  b.node("Attention", {"q", "k", "v"}, {"y"});
  SessionOptions so;
  Profiler prof;
  prof.attach(so);
  Session s(b.save(d.path / "m.onnx"), so);
  s.run({{"q", Tensor(DType::Float32, {1, 2, 3, 4})},
         {"k", Tensor(DType::Float32, {1, 2, 5, 4})},
         {"v", Tensor(DType::Float32, {1, 2, 5, 4})}});
  const auto rows = prof.by_op_type("run");
  REQUIRE(rows.size() == 1);
  // 2 heads × 3 queries × 5 keys: a 4-long dot product and a 4-long weighted sum each, 2 flops per multiply-add
  CHECK(rows[0].flops == 2 * 3 * 5 * (2 * 4 + 2 * 4));
  CHECK(rows[0].bytes == 4 * (24 + 40 + 40 + 24));
}
