// Session behaviour: input checks, symbolic shape inference, folding, buffer reuse, timing hook.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include "kernels/cpu/nbits.h"
#include "model_builder.h"
#include "ops/weight_packer.h"
#include "runtime/session.h"
#include "test_util.h"

using namespace tern;
using namespace tern::test;

namespace {

// logits = MatMul(x [batch, seq, 4], w [4, 3]); also exposes Shape(x)[1] through a folded chain.
std::string matmul_model(const TempDir& d) {
  ModelBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {-1, -1, 4}, {"batch", "seq"}).output("logits");
  b.initializer_f32("w", {4, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1});
  b.node("MatMul", {"x", "w"}, {"logits"});
  return b.save(d.path / "m.onnx");
}

}  // namespace

TEST_CASE("inputs are checked by name, dtype, rank and fixed dims") {
  TempDir d;
  Session s(matmul_model(d));
  REQUIRE(s.inputs().size() == 1);
  CHECK(s.inputs()[0].name == "x");
  CHECK(sym_shape_str(*s.inputs()[0].shape) == "[batch,seq,4]");

  Tensor ok = Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 4});
  auto out = s.run({{"x", ok}});
  const float* y = out.at("logits").data<float>();
  CHECK(y[0] == 5);  // 1*1 + 4*1
  CHECK(y[1] == 6);
  CHECK(y[2] == 7);

  CHECK(contains(error_of([&] { s.run({}); }), "missing input 'x'"));
  CHECK(contains(error_of([&] { s.run({{"x", ok}, {"y", ok}}); }), "'y' is not an input"));
  CHECK(contains(error_of([&] {
                   s.run({{"x", Tensor::from_vector<int64_t>({1, 2, 3, 4}, {1, 1, 4})}});
                 }),
                 "input 'x': expected float32, got int64"));
  CHECK(contains(error_of([&] { s.run({{"x", Tensor::from_vector<float>({1, 2, 3, 4}, {1, 4})}}); }), "expected rank 3"));
  CHECK(contains(error_of([&] { s.run({{"x", Tensor::from_vector<float>({1, 2, 3}, {1, 1, 3})}}); }), "expected shape [batch,seq,4]"));
}

TEST_CASE("shape inference keeps symbolic dims through the graph") {
  TempDir d;
  ModelBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {-1, -1, 8}, {"batch", "seq"}).output("y");
  b.initializer_i64("shape", {4}, {0, 0, 2, 4});
  b.initializer_i64("perm_dummy", {1}, {0});
  b.node("Reshape", {"x", "shape"}, {"r"});     // [batch, seq, 2, 4]
  auto& t = b.node("Transpose", {"r"}, {"t"});  // [batch, 2, seq, 4]
  auto* perm = t.add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  for (int p : {0, 2, 1, 3}) perm->add_ints(p);
  b.node("Softmax", {"t"}, {"y"});
  Session s(b.save(d.path / "m.onnx"));
  CHECK(sym_shape_str(*s.outputs()[0].shape) == "[batch,2,seq,4]");
  CHECK(s.outputs()[0].dtype == DType::Float32);
}

TEST_CASE("constant subgraphs and Shape chains over known dims fold away") {
  TempDir d;
  ModelBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {-1, 6}, {"n"}).output("y");
  // Shape(x)[1] is known (6) even though x's first dim is symbolic: Shape(start=1) folds.
  auto& sh = b.node("Shape", {"x"}, {"s"});
  auto* start = sh.add_attribute();
  start->set_name("start");
  start->set_type(onnx::AttributeProto::INT);
  start->set_i(1);
  b.initializer_i64("minus1", {1}, {-1});
  b.node("Concat", {"minus1", "s"}, {"target"}).add_attribute()->CopyFrom([] {
    onnx::AttributeProto a;
    a.set_name("axis");
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(0);
    return a;
  }());
  b.node("Reshape", {"x", "target"}, {"y"});
  Session s(b.save(d.path / "m.onnx"));
  CHECK(s.passes().stats.folded_nodes == 2);  // Shape and Concat
  CHECK(s.graph().nodes.size() == 1);         // only Reshape runs
  auto out = s.run({{"x", Tensor::from_vector<float>(std::vector<float>(12, 1.0f), {2, 6})}});
  CHECK(out[0].shape() == Shape{2, 6});
}

TEST_CASE("dead nodes are removed; repeat runs take nothing new from the system once planned") {
  TempDir d;
  ModelBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {64}).output("y");
  b.node("Relu", {"x"}, {"a"});
  b.node("Exp", {"a"}, {"b"});
  b.node("Neg", {"b"}, {"y"});
  b.node("Sqrt", {"x"}, {"unused"});
  Session s(b.save(d.path / "m.onnx"));
  CHECK(s.passes().stats.removed_nodes == 1);
  Tensor x = Tensor::from_vector<float>(std::vector<float>(64, 0.5f), {64});
  {
    auto out = s.run({{"x", x}});
    CHECK(out[0].data<float>()[0] == doctest::Approx(-std::exp(0.5f)));
  }
  CHECK(s.pool().system_allocations() <= 3);
  s.run({{"x", x}});  // the same shapes twice: this run also makes the step plan (its buffers)
  s.run({{"x", x}});  // replayed; its output buffer and the previous one alternate from now on
  const size_t planned = s.pool().system_allocations();
  for (int i = 0; i < 5; ++i) {
    auto out = s.run({{"x", x}});  // replayed: the returned output comes from the pool
    CHECK(out[0].data<float>()[63] == doctest::Approx(-std::exp(0.5f)));
  }
  CHECK(s.pool().system_allocations() == planned);
}

TEST_CASE("the per-node hook sees every node, in order") {
  TempDir d;
  ModelBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {4}).output("y");
  b.node("Relu", {"x"}, {"a"});
  b.node("Neg", {"a"}, {"y"});
  SessionOptions opt;
  std::vector<std::string> seen;
  opt.on_node = [&](const NodeRun& r) {
    seen.push_back(r.node.op_type);
    CHECK(r.end_us >= r.start_us);
    CHECK(r.outputs[0].numel() == 4);
    CHECK(op_cost(r.op, r.inputs, r.outputs, r.state).bytes == 32);  // element-wise: 4 floats in, 4 out
  };
  Session s(b.save(d.path / "m.onnx"), opt);
  s.run({{"x", Tensor::from_vector<float>({1, -1, 2, -2}, {4})}});
  CHECK(seen == std::vector<std::string>{"Relu", "Neg"});
}

TEST_CASE("out-of-range indices fail naming the node instead of reading out of bounds") {
  TempDir d;
  ModelBuilder b;
  b.input("ids", onnx::TensorProto::INT64, {-1}, {"n"}).output("y");
  b.initializer_f32("table", {3, 2}, {1, 2, 3, 4, 5, 6});
  b.node("Gather", {"table", "ids"}, {"y"}).set_name("embed_tokens");
  Session s(b.save(d.path / "m.onnx"));
  auto ok = s.run({{"ids", Tensor::from_vector<int64_t>({2, -1, 0}, {3})}});
  CHECK(ok[0].data<float>()[0] == 5);
  CHECK(ok[0].data<float>()[2] == 5);  // -1 wraps to the last row
  std::string e = error_of([&] { s.run({{"ids", Tensor::from_vector<int64_t>({3}, {1})}}); });
  CHECK(contains(e, "embed_tokens"));
  CHECK(contains(e, "index 3 is out of range"));
}

TEST_CASE("shape errors at run time name the node") {
  TempDir d;
  ModelBuilder b;
  b.input("a", onnx::TensorProto::FLOAT, {-1}, {"n"}).input("b", onnx::TensorProto::FLOAT, {-1}, {"m"}).output("y");
  b.node("Add", {"a", "b"}, {"y"}).set_name("the_add");
  Session s(b.save(d.path / "m.onnx"));
  std::string e = error_of([&] {
    s.run({{"a", Tensor::from_vector<float>({1, 2, 3}, {3})}, {"b", Tensor::from_vector<float>({1, 2}, {2})}});
  });
  CHECK(contains(e, "the_add"));
  CHECK(contains(e, "cannot be broadcast"));
}

TEST_CASE("Shape→Gather→Unsqueeze→Concat→Reshape chains keep symbolic dims; known picks fold") {
  TempDir d;
  ModelBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {-1, -1, 8}, {"batch", "seq"}).output("y").output("width");
  auto axis0 = [](onnx::NodeProto& n) {
    auto* a = n.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(0);
  };
  b.initializer_i64("i0", {}, {0});
  b.initializer_i64("i1", {}, {1});
  b.initializer_i64("i2", {}, {2});
  b.initializer_i64("ax", {1}, {0});
  b.initializer_i64("heads", {1}, {2});
  b.initializer_i64("head", {1}, {4});
  b.node("Shape", {"x"}, {"s"});
  axis0(b.node("Gather", {"s", "i0"}, {"batch"}));
  axis0(b.node("Gather", {"s", "i1"}, {"seq"}));
  axis0(b.node("Gather", {"s", "i2"}, {"width"}));  // 8: known, folds to a constant
  b.node("Unsqueeze", {"batch", "ax"}, {"b1"});
  b.node("Unsqueeze", {"seq", "ax"}, {"s1"});
  axis0(b.node("Concat", {"b1", "s1", "heads", "head"}, {"target"}));
  b.node("Reshape", {"x", "target"}, {"y"});
  Session s(b.save(d.path / "m.onnx"));
  CHECK(sym_shape_str(*s.outputs()[0].shape) == "[batch,seq,2,4]");
  const Value& width = s.graph().values[static_cast<size_t>(s.graph().find_value("width"))];
  REQUIRE(width.constant);
  CHECK(width.constant->at_i64(0) == 8);
  auto out = s.run({{"x", Tensor::from_vector<float>(std::vector<float>(48, 1.0f), {3, 2, 8})}});
  CHECK(out.at("y").shape() == Shape{3, 2, 2, 4});
  CHECK(out.at("width").at_i64(0) == 8);
}

// Optimum's Cohere RoPE: inv_freq [1, 8, 1] tiled by [batch, 1, 1] read off position_ids. Unknown repeats
// made the attention's rank unknown and kept the model off the ring.
TEST_CASE("Tile by repeats computed from the input's dims keeps the rank; a dim of 1 takes the symbolic repeat") {
  TempDir d;
  ModelBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {-1, 3}, {"batch"}).output("y");
  b.initializer_f32("f", {1, 2, 1}, {0.5f, 0.25f});
  b.initializer_i64("i0", {1}, {0});
  b.initializer_i64("one", {1}, {1});
  b.node("Shape", {"x"}, {"s"});
  auto& g = b.node("Gather", {"s", "i0"}, {"batch"});
  ModelBuilder::attr(g, "axis", int64_t{0});
  auto& c = b.node("Concat", {"batch", "one", "one"}, {"reps"});
  ModelBuilder::attr(c, "axis", int64_t{0});
  b.node("Tile", {"f", "reps"}, {"y"});
  Session s(b.save(d.path / "m.onnx"));
  REQUIRE(s.outputs()[0].shape);
  CHECK(sym_shape_str(*s.outputs()[0].shape) == "[batch,2,1]");
  const Outputs out = s.run({{"x", Tensor(DType::Float32, {3, 3})}});
  REQUIRE(out.at("y").shape() == Shape{3, 2, 1});
  CHECK(out.at("y").data<float>()[4] == 0.5f);
}

TEST_CASE("NonZero: indices in row-major order; -0 is zero, NaN is not") {
  TempDir d;
  ModelBuilder b(17);
  b.input("x", onnx::TensorProto::FLOAT, {2, 3}).output("i", onnx::TensorProto::INT64);
  b.node("NonZero", {"x"}, {"i"});
  Session s(b.save(d.path / "m.onnx"));
  const std::vector<float> xs = {0.0f, -0.0f, 1.0f, std::nanf(""), 0.0f, 2.0f};
  const Outputs out = s.run({{"x", Tensor::from_vector<float>(xs, {2, 3})}});
  REQUIRE(out.at("i").shape() == Shape{2, 3});
  CHECK(out.at("i").to_i64_vector() == std::vector<int64_t>{0, 1, 1, 2, 0, 2});  // rows 0,1,1; columns 2,0,2
}

TEST_CASE("an empty 1-D constant and a scalar 0 are not merged: a shape sliced past its end keeps its rank") {
  // StableLM's Optimum export: Concat(Shape(a), Shape(b)[4:]) as a Reshape target, `a`'s length known only at run
  // time, beside a scalar 0 (whose bytes after the dtype equal an empty [0] tensor's dims).
  TempDir d;
  ModelBuilder b(17);
  b.input("count", onnx::TensorProto::INT64, {}).output("y");
  b.initializer_i64("zero", {}, {0});
  b.initializer_i64("one", {}, {1});
  b.initializer_i64("four", {1}, {4});
  b.initializer_i64("end", {1}, {INT64_MAX});
  b.node("Range", {"zero", "count", "one"}, {"r"});
  b.node("Shape", {"r"}, {"s"});
  b.node("Slice", {"s", "four", "end"}, {"nothing"});  // [0] int64: folded to an empty constant
  ModelBuilder::attr(b.node("Concat", {"s", "nothing"}, {"target"}), "axis", int64_t{0});
  b.node("Reshape", {"r", "target"}, {"y"});
  Session s(b.save(d.path / "m.onnx"));
  const Outputs out = s.run({{"count", Tensor::scalar<int64_t>(5)}});
  CHECK(out.at("y").shape() == Shape{5});
  CHECK(out.at("y").data<int64_t>()[4] == 4);
}

TEST_CASE("shape arithmetic becomes one DimsOf per distinct shape; duplicates merge; feeds must agree on symbols") {
  TempDir d;
  ModelBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {-1, -1, 8}, {"batch", "seq"})
      .input("past", onnx::TensorProto::FLOAT, {-1, 2, -1, 4}, {"batch", "past"})
      .input("mask", onnx::TensorProto::INT64, {-1, -1}, {"batch", "past + seq"})
      .output("y")
      .output("total");
  b.initializer_i64("i0", {}, {0});
  b.initializer_i64("i1", {}, {1});
  b.initializer_i64("i2", {}, {2});
  auto axis0 = [](onnx::NodeProto& n) { ModelBuilder::attr(n, "axis", int64_t{0}); };
  // Two "layers" that each build the same reshape target from Shape(x), with their own constants.
  for (const std::string l : {"a", "b"}) {
    b.initializer_i64(l + "ax", {1}, {0});
    b.initializer_i64(l + "heads", {1}, {2});
    b.initializer_i64(l + "head", {1}, {4});
    b.node("Shape", {"x"}, {l + "s"});
    axis0(b.node("Gather", {l + "s", "i0"}, {l + "batch"}));
    axis0(b.node("Gather", {l + "s", "i1"}, {l + "seq"}));
    b.node("Unsqueeze", {l + "batch", l + "ax"}, {l + "b1"});
    b.node("Unsqueeze", {l + "seq", l + "ax"}, {l + "s1"});
    axis0(b.node("Concat", {l + "b1", l + "s1", l + "heads", l + "head"}, {l + "target"}));
    b.node("Reshape", {"x", l + "target"}, {l + "y"});
  }
  b.node("Add", {"ay", "by"}, {"y"});
  // The total length, from the past's Shape and x's: "past + seq", which the mask's dim names.
  b.node("Shape", {"past"}, {"ps"});
  axis0(b.node("Gather", {"ps", "i2"}, {"plen"}));
  b.node("Add", {"plen", "aseq"}, {"tlen"});
  b.node("Unsqueeze", {"tlen", "aax"}, {"total"});
  Session s(b.save(d.path / "m.onnx"));
  CHECK(s.passes().stats.shape_values >= 2);
  CHECK(s.passes().stats.merged_nodes >= 1);
  int dims_of = 0;
  for (const Node& n : s.graph().nodes) {
    CHECK(n.op_type != "Shape");
    CHECK(n.op_type != "Concat");
    dims_of += n.op_type == "DimsOf";
  }
  CHECK(dims_of == 2);                 // the reshape target, once for both layers, and the total
  CHECK(s.graph().nodes.size() == 4);  // + the Add of one Reshape twice: the layers' Reshapes merged too
  std::vector<float> xs(3 * 2 * 8);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i);
  const Tensor x = Tensor::from_vector<float>(xs, {3, 2, 8});
  auto past = [](int64_t batch, int64_t len) {
    return Tensor::from_vector<float>(std::vector<float>(static_cast<size_t>(batch * 2 * len * 4), 0.f), {batch, 2, len, 4});
  };
  auto mask = [](int64_t batch, int64_t len) {
    return Tensor::from_vector<int64_t>(std::vector<int64_t>(static_cast<size_t>(batch * len), 1), {batch, len});
  };
  auto out = s.run({{"x", x}, {"past", past(3, 5)}, {"mask", mask(3, 7)}});
  CHECK(out.at("y").shape() == Shape{3, 2, 2, 4});
  CHECK(out.at("y").data<float>()[13] == 26.0f);
  CHECK(out.at("total").shape() == Shape{1});
  CHECK(out.at("total").at_i64(0) == 7);
  // What DimsOf reads from one input must hold in the others: a clear error, naming both.
  auto e = error_of([&] { s.run({{"x", x}, {"past", past(3, 5)}, {"mask", mask(3, 6)}}); });
  CHECK(contains(e, "input 'mask' dim 1 (past + seq) is 6, but the other inputs make it 7"));
  e = error_of([&] { s.run({{"x", x}, {"past", past(2, 5)}, {"mask", mask(3, 7)}}); });
  CHECK(contains(e, "input 'past' dim 0 (batch) is 2, but input 'x' dim 0 gives batch = 3"));
}

TEST_CASE("a DimsOf node whose attributes point outside its inputs is refused naming it") {
  TempDir d;
  ModelBuilder b(13);
  b.add_opset("tern", 1);
  b.input("x", onnx::TensorProto::FLOAT, {-1, 8}, {"n"}).output("y");
  auto& n = b.node("DimsOf", {"x"}, {"y"}, "tern");
  n.set_name("hostile");
  ModelBuilder::attr(n, "to", int64_t{7});
  ModelBuilder::attr(n, "shape", std::vector<int64_t>{2});
  ModelBuilder::attr(n, "constants", std::vector<int64_t>{0, 0});
  ModelBuilder::attr(n, "terms", std::vector<int64_t>{1, 3, 0});  // input 3 does not exist
  const auto e = error_of([&] { Session s(b.save(d.path / "m.onnx")); });
  CHECK(contains(e, "hostile"));
  CHECK(contains(e, "names an element, input or axis that does not exist"));
}

TEST_CASE("a device that does not exist is refused naming the ones there are; device names parse") {
  TempDir d;
  SessionOptions opt;
  opt.device = Device{DeviceKind::OpenCL, 99};
  std::string e = error_of([&] { Session s(matmul_model(d), opt); });
#ifdef TERN_OPENCL
  CHECK(contains(e, "no OpenCL device 99"));
#else  // -DTERN_OPENCL=OFF: any device is refused, saying why
  CHECK(contains(e, "built without OpenCL (-DTERN_OPENCL=OFF)"));
#endif
  CHECK(parse_device("cpu") == Device{});
  CHECK(parse_device("opencl") == Device{DeviceKind::OpenCL, 0});
  CHECK(parse_device("opencl:2") == Device{DeviceKind::OpenCL, 2});
  CHECK(contains(error_of([] { parse_device("cuda"); }), "cpu, opencl or opencl:N"));
  CHECK(contains(error_of([] { parse_device("opencl:x"); }), "opencl:N"));
}

TEST_CASE("a constant weight MatMul repacks is freed once every reader has repacked it; one still read stays") {
  TempDir d;
  ModelBuilder b(17);
  b.input("x", onnx::TensorProto::FLOAT, {2, 3}).output("y").output("z");
  b.initializer_f32("w", {3, 2}, {1, 2, 3, 4, 5, 6});
  b.initializer_f32("v", {3, 2}, {1, 0, 0, 1, 1, 1});
  b.node("MatMul", {"x", "w"}, {"y"});
  b.node("MatMul", {"x", "v"}, {"xv"});
  b.node("Identity", {"v"}, {"z"});  // reads v as it is: v stays
  Session s(b.save(d.path / "m.onnx"));
  const Graph& g = s.graph();
  CHECK(g.values[static_cast<size_t>(g.find_value("w"))].constant->raw() == nullptr);  // only MatMul read it
  CHECK(g.values[static_cast<size_t>(g.find_value("w"))].constant->nbytes() == 24);    // its size is still known
  CHECK(g.values[static_cast<size_t>(g.find_value("v"))].constant->raw() != nullptr);
  const Outputs out = s.run({{"x", Tensor::from_vector<float>({1, 0, -1, 2, 1, 0}, {2, 3})}});
  const float* y = out[0].data<float>();
  CHECK(std::vector<float>(y, y + 4) == std::vector<float>{-4, -4, 5, 8});
  const float* z = out[1].data<float>();
  CHECK(std::vector<float>(z, z + 6) == std::vector<float>{1, 0, 0, 1, 1, 1});
}

TEST_CASE("a session's memory cap: loading that would pass it fails naming the numbers; within it, it runs and gives all back") {
  TempDir d;
  std::vector<float> w;  // one 1024x1024 float32 weight: 4 MiB read, 4 MiB more repacked at load
  const std::string path = write_matmul_1024_model(d.path / "m.onnx", w);
  const size_t before = owned_host_bytes();
  // 1 MiB: the weight itself (4 MiB, read from the protobuf) cannot be loaded. 6 MiB: it can, but not
  // its repacked copy beside it — the failure names the node.
  for (auto [cap, where] : {std::pair<size_t, const char*>{1 << 20, "m.onnx"}, {6 << 20, "node 'MatMul"}}) {
    const size_t limit = cap;  // (CAPTURE's lambda cannot capture a structured binding before C++20)
    CAPTURE(limit);
    SessionOptions capped;
    capped.max_memory = cap;
    try {
      Session s(path, capped);
      FAIL("a session loaded past its memory cap");
    } catch (const MemoryLimitError& e) {
      const std::string msg = e.what();
      CAPTURE(msg);
      CHECK(msg.find("m.onnx") != std::string::npos);
      CHECK(msg.find(where) != std::string::npos);
      CHECK(msg.find("it holds") != std::string::npos);
      CHECK(msg.find("needs 4.2 MB more") != std::string::npos);
      CHECK(msg.find(cap == (1 << 20) ? "the session's memory cap (max_memory 1.0 MB" : "the session's memory cap (max_memory 6.3 MB") !=
            std::string::npos);
      // The repacking's peak is predicted before any weight is repacked (SessionWeights::check_predicted_peak).
      if (cap != (1 << 20)) CHECK(test::contains(msg, "(predicted before repacking any: 4.2 MB more at the peak, 4.2 MB made in all)"));
    }
    CHECK(owned_host_bytes() == before);  // what the failed load took is back
  }
  SessionOptions roomy;
  roomy.max_memory = 64 << 20;
  {
    Session s(path, roomy);
    CHECK(owned_host_bytes() >= before + (4 << 20));
    std::vector<float> x(1024, 0.0f);
    x[1] = 1.0f;  // y = row 1 of w
    const Outputs out = s.run({{"x", Tensor::from_vector<float>(x, {1, 1024})}});
    CHECK(out[0].data<float>()[0] == w[1024]);
    CHECK(out[0].data<float>()[5] == w[1024 + 5]);
    const MemoryUse m = s.memory_use();  // the packed weight, the input and output, all counted
    CHECK(m.packed_weights == 4 << 20);
    const double owned = static_cast<double>(owned_host_bytes() - before);
    CHECK(std::abs(static_cast<double>(m.owned()) - owned) <= 0.05 * owned);
  }
  set_process_memory_limit(0);
  CHECK(owned_host_bytes() == before);  // the session's memory came back to the count
}

TEST_CASE("the kernels' scratch counts against the session's memory cap: a cap it would pass refuses the run, naming it") {
  TempDir d;
  std::vector<float> w;  // one 1024x1024 float32 weight
  const std::string path = write_matmul_1024_model(d.path / "m.onnx", w, true);
  // 1,024 rows: their output and their scratch (A packed) each as big as the weight, so a cap the load's peak
  // (the weight read and its repacked copy) fits under can hold the one and not the other.
  std::vector<float> x(1024 * 1024, 0.0f);
  for (int64_t m = 0; m < 1024; ++m) x[static_cast<size_t>(m * 1024 + m)] = 1.0f;  // y row m = w row m
  using Feeds = std::vector<std::pair<std::string, Tensor>>;
  const Feeds one_row{{"x", Tensor::from_vector<float>(std::vector<float>(1024, 0.5f), {1, 1024})}};
  const Feeds rows{{"x", Tensor::from_vector<float>(x, {1024, 1024})}};
  // Uncapped: a row (the GEMV, no scratch), then 1,024 (the GEMM packs A in its scratch); both held after.
  SessionOptions o;
  o.threads = 2;
  size_t after_row = 0, after_rows = 0;
  int64_t scratch = 0;
  {
    Session s(path, o);
    s.run(one_row);
    after_row = s.memory_account()->held();
    CHECK(s.memory_use().scratch == 0);
    const Outputs out = s.run(rows);
    CHECK(out[0].data<float>()[5 * 1024 + 7] == w[5 * 1024 + 7]);
    after_rows = s.memory_account()->held();
    scratch = s.memory_use().scratch;
    // (A[1024, 1024] packed in row panels of 6 or 8 rows: 4.2 MB and a few rows, whatever the tier.)
    CHECK(scratch >= 1024 * 1024 * 4);
    CHECK(static_cast<int64_t>(after_rows - after_row) >= scratch);
    const double owned = static_cast<double>(s.memory_use().owned());
    CHECK(std::abs(owned - static_cast<double>(after_rows)) <= 0.05 * owned);
  }
  // Capped where the rows' activations fit but not their scratch beside them: the one-row run still runs, the
  // 1,024-row run fails naming the scratch and the cap, and the session runs again after it.
  o.max_memory = after_rows - static_cast<size_t>(scratch) / 2;
  Session s(path, o);
  s.run(one_row);
  const std::string error = test::error_of([&] { s.run(rows); });
  CAPTURE(error);
  CHECK(test::contains(error, "kernel scratch ("));
  CHECK(test::contains(error, "the session's memory cap (max_memory"));
  CHECK(test::contains(error, "node 'MatMul"));
  CHECK(s.run(one_row)[0].numel() == 1024);
}

TEST_CASE("a load's repacking peak is predicted before any weight is repacked: the prediction is what the load then makes") {
  TempDir d;
  std::vector<float> w;  // one 1024x1024 float32 weight: 4 MiB read from the protobuf (owned until repacked)
  const std::string path = write_matmul_1024_model(d.path / "m.onnx", w);
  // Under a cap that holds the weight and half its repacked form, the load stops at the prediction, whose total is
  // what an uncapped load of the same model repacks — as stored (fp32 panels), as fp16 panels, block-quantized to
  // int8 and int4.
  for (const char* format : {"fp32", "fp16", "int8", "int4"}) {
    CAPTURE(format);
    SessionOptions o;
    o.weights = parse_weight_format(format);
    int64_t packed = 0;
    {
      Session s(path, o);
      packed = s.memory_use().packed_weights;
    }
    REQUIRE(packed > 0);
    o.max_memory = (size_t{4} << 20) + (64 << 10) + static_cast<size_t>(packed / 2);
    const size_t before = owned_host_bytes();
    const std::string error = test::error_of([&] { Session s(path, o); });
    CAPTURE(error);
    CHECK(test::contains(error, "by node 'MatMul_1' (predicted before repacking any"));
    // (The grouped layout — int4's, and int8's where the fp32 GEMV reads it so — keeps its 32,768 scales as fp16 when
    // every one fits, as here; the prediction, made without reading them, counts them as fp32: 64 KiB over.)
    kernels::NBitsWeights shape;
    shape.N = shape.K = 1024, shape.block = 32, shape.bits = std::string(format) == "int8" ? 8 : 4;
    const bool grouped =
        (std::string(format) == "int4" || std::string(format) == "int8") && kernels::nbits_groups_native(shape, kernels::default_isa());
    const int64_t over = grouped ? 32768 * 2 : 0;
    CHECK(test::contains(error, memory_size(static_cast<size_t>(packed + over)) + " made in all"));
    CHECK(owned_host_bytes() == before);
  }
}

TEST_CASE("ops opt into packing, state and cost; a packer's plan makes nothing and is what its pack then makes") {
  Node matmul{"mm", "MatMul", "", 21, {0, 1}, {2}, {}};
  const std::unique_ptr<Op> op = OpRegistry::instance().create(matmul);
  Node add{"add", "Add", "", 21, {0, 1}, {2}, {}};
  const std::unique_ptr<Op> plain = OpRegistry::instance().create(add);
  CHECK(!plain->packer());  // element-wise: no packing, no state, the default cost
  CHECK(!plain->stateful());
  CHECK(!plain->costed());
  REQUIRE(op->packer());
  CHECK(!op->stateful());
  CHECK(op->costed());
  std::vector<float> values(96 * 80);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 7) - 3.0f;
  const Tensor w = Tensor::from_vector<float>(values, {96, 80});
  const std::vector<const Tensor*> constants{nullptr, &w};
  for (const char* format : {"fp32", "fp16", "int8", "int4"}) {
    CAPTURE(format);
    const std::unique_ptr<Op> fresh = OpRegistry::instance().create(matmul);
    PackSettings settings;
    settings.cpu = {1, nullptr, kernels::default_isa()};
    settings.weights = parse_weight_format(format);
    settings.node = "mm";
    const PackPlan plan = std::as_const(*fresh).packer()->plan(constants, settings);
    CHECK(fresh->packer()->packed_bytes() == 0);  // planned: nothing made, nothing kept
    CHECK(plan.bytes > 0);
    const std::vector<int> unread = fresh->packer()->pack(constants, settings);
    CHECK(unread == plan.unread);
    CHECK(unread == std::vector<int>{1});
    CHECK(fresh->packer()->packed_bytes() > 0);
    // (The grouped int4/int8 layout keeps its scales as fp16 when every one fits; the plan, made without reading
    // them, counts them as fp32.)
    CHECK(plan.bytes >= fresh->packer()->packed_bytes());
    CHECK(plan.bytes <= fresh->packer()->packed_bytes() + 80 * (96 / 32) * 2);
    if (std::string(format) == "fp32" || std::string(format) == "fp16") CHECK(plan.bytes == fresh->packer()->packed_bytes());
  }
}

TEST_CASE("dims multiply, divide and subtract symbolically: Reshape's -1, Flatten and Range over dims keep their sizes") {
  // The arithmetic (graph/ir.h): products keep a coefficient and sorted factors; a quotient only where it divides.
  const Dim b = Dim::named("batch"), s = Dim::named("seq"), sum = Dim::named("past + seq");
  CHECK(dim_product(Dim::known(2), s).str() == "2*seq");
  CHECK(dim_product(dim_product(s, b), Dim::known(4)).str() == "4*batch*seq");
  CHECK(dim_product(Dim::known(2), sum).str() == "2*(past + seq)");
  CHECK(dim_quotient(Dim::named("4*batch*seq"), dim_product(Dim::known(2), b)).str() == "2*seq");
  CHECK(dim_quotient(dim_product(Dim::known(2), sum), Dim::known(2)).str() == "past + seq");
  CHECK(dim_quotient(Dim::named("2*seq"), Dim::known(4)).str() == "?");  // (does not divide)
  CHECK(dim_quotient(Dim::named("2*seq"), b).str() == "?");
  CHECK(dim_difference(sum, Dim::named("past")).str() == "seq");
  CHECK(dim_difference(sum, sum).str() == "0");
  CHECK(dim_difference(Dim::named("seq"), Dim::named("past")).str() == "?");
  CHECK(dim_product(Dim::named("(-1)"), s).str() == "?");
  // In a graph: grouped attention's [batch, 4, seq, 16] read as [batch, 2, -1, 16] is [batch, 2, 2*seq, 16] and
  // back; [batch, seq, 8] flattened at 2 is [batch*seq, 8]; Range(past, past + seq) has seq elements.
  TempDir d;
  ModelBuilder m(17);
  m.input("x", onnx::TensorProto::FLOAT, {-1, 4, -1, 16}, {"batch", "seq"})
      .input("past", onnx::TensorProto::INT64, {}, {})
      .output("grouped")
      .output("back")
      .output("flat")
      .output("positions", onnx::TensorProto::INT64);
  m.initializer_i64("to_groups", {4}, {0, 2, -1, 16});
  m.initializer_i64("to_heads", {4}, {0, 4, -1, 16});
  m.initializer_i64("i2", {1}, {2});
  m.initializer_i64("one", {}, {1});
  m.node("Reshape", {"x", "to_groups"}, {"grouped"});
  m.node("Reshape", {"grouped", "to_heads"}, {"back"});
  auto& f = m.node("Flatten", {"x"}, {"flat"});
  ModelBuilder::attr(f, "axis", int64_t{2});
  m.node("Shape", {"x"}, {"shape"});
  auto& g = m.node("Gather", {"shape", "i2"}, {"seq1"});
  ModelBuilder::attr(g, "axis", int64_t{0});
  m.node("Squeeze", {"seq1"}, {"seq"});
  m.node("Add", {"past", "seq"}, {"end"});
  m.node("Range", {"past", "end", "one"}, {"positions"});
  Session sess(m.save(d.path / "m.onnx"));
  auto shape_of = [&](const std::string& name) {
    const Value& v = sess.graph().values[static_cast<size_t>(sess.graph().find_value(name))];
    return v.shape ? sym_shape_str(*v.shape) : std::string("-");
  };
  CHECK(shape_of("grouped") == "[batch,2,2*seq,16]");
  CHECK(shape_of("back") == "[batch,4,seq,16]");
  CHECK(shape_of("flat") == "[4*batch,16*seq]");
  const Outputs out = sess.run({{"x", Tensor(DType::Float32, {3, 4, 5, 16})}, {"past", Tensor::from_vector<int64_t>({7}, {})}});
  CHECK(out.at("grouped").shape() == Shape{3, 2, 10, 16});
  CHECK(out.at("flat").shape() == Shape{12, 80});
  CHECK(out.at("positions").to_i64_vector() == std::vector<int64_t>{7, 8, 9, 10, 11});
  // A hostile file adding and multiplying a shape by itself 64 times: the symbols stop at 256 characters (unknown
  // after), where they would have doubled to 2^64 — the load ends at once.
  ModelBuilder h(17);
  h.input("x", onnx::TensorProto::FLOAT, {-1}, {"n"}).output("y", onnx::TensorProto::INT64);
  h.node("Shape", {"x"}, {"s0"});
  std::vector<std::string> names(64, "s");
  for (int i = 0; i < 64; ++i) names[static_cast<size_t>(i)] += std::to_string(i);
  names.push_back("y");
  for (size_t i = 0; i < 64; ++i) h.node(i % 2 ? "Mul" : "Add", {names[i], names[i]}, {names[i + 1]});
  Session hostile(h.save(d.path / "hostile.onnx"));
  const Value& y = hostile.graph().values[static_cast<size_t>(hostile.graph().find_value("y"))];
  REQUIRE(y.sym_value);
  CHECK((*y.sym_value)[0].str() == "?");
}

TEST_CASE("outputs a node omits get no memory: TopK without its indices, Split with a part left out") {
  TempDir d;
  ModelBuilder m(17);
  m.input("x", onnx::TensorProto::FLOAT, {2, 6}).output("values").output("first").output("last");
  m.initializer_i64("k", {1}, {2});
  m.initializer_i64("parts", {3}, {1, 2, 3});
  m.node("TopK", {"x", "k"}, {"values", ""});
  auto& split = m.node("Split", {"x", "parts"}, {"first", "", "last"});
  ModelBuilder::attr(split, "axis", int64_t{1});
  Session s(m.save(d.path / "m.onnx"));
  const Outputs out = s.run({{"x", Tensor::from_vector<float>({0, 5, 1, 4, 2, 3, 9, 8, 7, 6, 5, 4}, {2, 6})}});
  auto floats = [&](const char* name) {
    const Tensor& t = out.at(name);
    return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
  };
  CHECK(floats("values") == std::vector<float>{5, 4, 9, 8});
  CHECK(floats("first") == std::vector<float>{0, 9});
  CHECK(floats("last") == std::vector<float>{4, 2, 3, 6, 5, 4});
}
