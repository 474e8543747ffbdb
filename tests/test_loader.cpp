// The loader against bad and tricky files: every failure names the file, node or tensor.
#include <doctest/doctest.h>

#include <google/protobuf/descriptor.h>
#include <onnx/onnx_pb.h>
#include <chrono>
#include <cmath>
#include <fstream>
#include <set>
#include <thread>

#include "graph/onnx_loader.h"
#include "graph/onnx_wire.h"
#include "graph/raw_data_in_place.h"
#include "model_builder.h"
#include "runtime/machine.h"
#include "runtime/session.h"
#include "test_util.h"

using namespace tern;
using namespace tern::test;
namespace fs = std::filesystem;

namespace {

// y = x + w, with w an initializer of 4 floats that tests can make external.
ModelBuilder add_model() {
  ModelBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {4}).output("y");
  b.node("Add", {"x", "w"}, {"y"});
  b.initializer_f32("w", {4}, {1, 2, 3, 4});
  return b;
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f << bytes;
}

std::string float_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// Turns initializer w external: location/offset/length as given.
void make_external(ModelBuilder& b, const std::string& location, int64_t offset, int64_t length) {
  auto* t = b.graph().mutable_initializer(0);
  t->clear_float_data();
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const char* k, const std::string& v) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", location);
  if (offset >= 0) add("offset", std::to_string(offset));
  if (length >= 0) add("length", std::to_string(length));
}

std::vector<float> run_add(const std::string& path) {
  Session s(path);
  auto out = s.run({{"x", Tensor::from_vector<float>({10, 20, 30, 40}, {4})}});
  const float* y = out.at("y").data<float>();
  return {y[0], y[1], y[2], y[3]};
}

}  // namespace

TEST_CASE("a missing, truncated or corrupt model file is refused with its path") {
  TempDir d;
  std::string missing = (d.path / "nope.onnx").string();
  CHECK(contains(error_of([&] { load_onnx(missing); }), "nope.onnx"));

  std::string good = add_model().save(d.path / "m.onnx");
  std::string bytes;
  {
    std::ifstream f(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  write_bytes(d.path / "truncated.onnx", bytes.substr(0, bytes.size() - 7));
  std::string e = error_of([&] { Session s((d.path / "truncated.onnx").string()); });
  CHECK(contains(e, "truncated.onnx"));
  CHECK(!e.empty());

  write_bytes(d.path / "garbage.onnx", std::string("\xff\xff\xff\xff this is not protobuf"));
  e = error_of([&] { load_onnx((d.path / "garbage.onnx").string()); });
  CHECK(contains(e, "garbage.onnx"));
  CHECK(contains(e, "not a valid ONNX model"));
}

TEST_CASE("an unknown op is reported with its domain and node, all at once") {
  TempDir d;
  ModelBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {2}).output("z");
  b.node("FancyOp", {"x"}, {"y"}, "com.example").set_name("layer0/fancy");
  b.node("OtherOp", {"y"}, {"z"}).set_name("layer0/other");
  auto os = b.proto().add_opset_import();
  os->set_domain("com.example");
  os->set_version(1);
  std::string path = b.save(d.path / "m.onnx");
  try {
    Session s(path);
    FAIL("expected UnsupportedError");
  } catch (const UnsupportedError& e) {
    std::string m = e.what();
    CHECK(contains(m, "FancyOp (domain 'com.example', node 'layer0/fancy')"));
    CHECK(contains(m, "OtherOp (domain 'ai.onnx', node 'layer0/other')"));
  }
}

TEST_CASE("a node input nothing produces is named") {
  TempDir d;
  ModelBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {2}).output("y");
  b.node("Add", {"x", "ghost"}, {"y"});
  std::string e = error_of([&] { load_onnx(b.save(d.path / "m.onnx")); });
  CHECK(contains(e, "'ghost' is not produced"));
  CHECK(contains(e, "Add node"));
}

TEST_CASE("raw_data whose size does not match the shape is refused naming the tensor") {
  TempDir d;
  ModelBuilder b = add_model();
  auto* t = b.graph().mutable_initializer(0);
  t->clear_float_data();
  t->set_raw_data(float_bytes({1, 2, 3}));  // 12 bytes for a [4] float tensor
  std::string e = error_of([&] { load_onnx(b.save(d.path / "m.onnx")); });
  CHECK(contains(e, "tensor 'w'"));
  CHECK(contains(e, "needs 16"));
}

TEST_CASE("external data: zero-copy when aligned, copied when not, values exact") {
  TempDir d;
  write_bytes(d.path / "weights.bin", float_bytes({1, 2, 3, 4}));
  ModelBuilder b = add_model();
  make_external(b, "weights.bin", -1, -1);
  CHECK(run_add(b.save(d.path / "m.onnx")) == std::vector<float>{11, 22, 33, 44});

  write_bytes(d.path / "odd.bin", "abc" + float_bytes({5, 6, 7, 8}));  // offset 3: not float-aligned
  ModelBuilder c = add_model();
  make_external(c, "odd.bin", 3, 16);
  CHECK(run_add(c.save(d.path / "m2.onnx")) == std::vector<float>{15, 26, 37, 48});

  fs::create_directories(d.path / "sub");
  write_bytes(d.path / "sub" / "w.bin", float_bytes({0, 0, 0, 1}));
  ModelBuilder e = add_model();
  make_external(e, "sub/w.bin", -1, -1);
  CHECK(run_add(e.save(d.path / "m3.onnx")) == std::vector<float>{10, 20, 30, 41});
}

TEST_CASE("a weights file truncated or written over under a session: its runs fail naming it, the process lives on") {
  TempDir d;
  const std::vector<float> weights(4096, 1.0f);  // 4 pages, so a truncation leaves pages past the end
  write_bytes(d.path / "weights.bin", float_bytes(weights));
  ModelBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {4096}).output("y");
  b.node("Add", {"x", "w"}, {"y"});
  b.initializer_f32("w", {4096}, weights);
  make_external(b, "weights.bin", -1, -1);
  Session s(b.save(d.path / "m.onnx"));
  const Tensor x = Tensor::from_vector<float>(std::vector<float>(4096, 2.0f), {4096});
  CHECK(s.run({{"x", x}}).at("y").data<float>()[4095] == 3.0f);
  CHECK(s.changed_file().empty());
  fs::resize_file(d.path / "weights.bin", 100);  // a `cp` over it starts so: the pages past byte 100 are gone (SIGBUS)
  for (int k = 0; k < 2; ++k) {                  // and stay void
    const std::string e = error_of([&] { s.run({{"x", x}}); });
    CHECK(contains(e, "weights.bin' changed while this session used it (truncated or written over)"));
  }
  CHECK(contains(s.changed_file(), "weights.bin"));

  // Written over in place at the same length: no fault, but its times moved.
  write_bytes(d.path / "w2.bin", float_bytes(weights));
  ModelBuilder c = add_model();
  make_external(c, "w2.bin", 0, 16);
  Session t(c.save(d.path / "m2.onnx"));
  CHECK(t.run({{"x", Tensor::from_vector<float>({10, 20, 30, 40}, {4})}}).at("y").data<float>()[0] == 11.0f);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // (a coarse file-system clock)
  write_bytes(d.path / "w2.bin", float_bytes(std::vector<float>(4096, 9.0f)));
  CHECK(contains(error_of([&] { t.run({{"x", Tensor::from_vector<float>({10, 20, 30, 40}, {4})}}); }), "w2.bin' changed"));
}

TEST_CASE("external data beyond 4 GiB offsets (a sparse file) loads exactly") {
  TempDir d;
  const int64_t offset = (int64_t{1} << 32) + 4096;  // past 2 GiB and 4 GiB: 64-bit offsets throughout
  {
    std::ofstream f(d.path / "big.bin", std::ios::binary);
    f.seekp(offset);
    f << float_bytes({0.5f, 1.5f, 2.5f, 3.5f});
  }
  REQUIRE(fs::file_size(d.path / "big.bin") == static_cast<uintmax_t>(offset + 16));
  ModelBuilder b = add_model();
  make_external(b, "big.bin", offset, 16);
  CHECK(run_add(b.save(d.path / "m.onnx")) == std::vector<float>{10.5f, 21.5f, 32.5f, 43.5f});
}

TEST_CASE("external data: missing, short, or outside the model folder is refused") {
  TempDir d;
  fs::create_directories(d.path / "model");
  write_bytes(d.path / "outside.bin", float_bytes({1, 2, 3, 4}));
  write_bytes(d.path / "model" / "short.bin", float_bytes({1, 2}));

  auto err = [&](const std::string& loc, int64_t off, int64_t len) {
    ModelBuilder b = add_model();
    make_external(b, loc, off, len);
    return error_of([&] { load_onnx(b.save(d.path / "model" / "m.onnx")); });
  };
  std::string e = err("absent.bin", -1, -1);
  CHECK(contains(e, "absent.bin"));
  CHECK(contains(e, "does not exist"));

  e = err("short.bin", -1, -1);
  CHECK(contains(e, "tensor 'w'"));
  CHECK(contains(e, "past the end of 'short.bin'"));

  e = err("short.bin", 100, 16);
  CHECK(contains(e, "past the end"));

  e = err("short.bin", 0, 12);
  CHECK(contains(e, "needs 16"));

  e = err("../outside.bin", -1, -1);
  CHECK(contains(e, "leaves the model folder"));

  e = err((d.path / "outside.bin").string(), -1, -1);
  CHECK(contains(e, "absolute path"));

  fs::create_symlink(d.path / "outside.bin", d.path / "model" / "link.bin");
  e = err("link.bin", -1, -1);
  CHECK(contains(e, "outside the model folder"));

  e = err("", -1, -1);
  CHECK(contains(e, "no location"));
}

TEST_CASE("typed data fields decode for every stored dtype") {
  TempDir d;
  ModelBuilder b;
  b.output("h").output("i8").output("u64").output("b").output("i4");
  auto add = [&](const char* name, int dt, std::vector<int64_t> dims) {
    auto* t = b.graph().add_initializer();
    t->set_name(name);
    t->set_data_type(dt);
    for (auto x : dims) t->add_dims(x);
    return t;
  };
  auto* h = add("h", onnx::TensorProto::FLOAT16, {2});
  h->add_int32_data(0x3c00);  // 1.0
  h->add_int32_data(0xc000);  // -2.0
  auto* i8 = add("i8", onnx::TensorProto::INT8, {3});
  for (int v : {-128, 0, 127}) i8->add_int32_data(v);
  auto* u = add("u64", onnx::TensorProto::UINT64, {1});
  u->add_uint64_data(18446744073709551615ull);
  auto* bo = add("b", onnx::TensorProto::BOOL, {2});
  bo->add_int32_data(1);
  bo->add_int32_data(0);
  auto* i4 = add("i4", 22 /* INT4 */, {3});
  i4->add_int32_data(0x21);  // packed: 1, 2
  i4->add_int32_data(0x0f);  // packed: -1, pad
  Model m = load_onnx(b.save(d.path / "m.onnx"));
  const Graph& g = *m.graph;
  auto val = [&](const char* n) { return *g.values[static_cast<size_t>(g.find_value(n))].constant; };
  CHECK(val("h").at_f64(0) == 1.0);
  CHECK(val("h").at_f64(1) == -2.0);
  CHECK(val("i8").to_i64_vector() == std::vector<int64_t>{-128, 0, 127});
  CHECK(val("u64").data<uint64_t>()[0] == 18446744073709551615ull);
  CHECK(val("b").to_i64_vector() == std::vector<int64_t>{1, 0});
  CHECK(val("i4").nbytes() == 2);
  CHECK(static_cast<const uint8_t*>(val("i4").raw())[0] == 0x21);

  ModelBuilder c;
  c.output("w");
  auto* w = c.graph().add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(3);
  w->add_float_data(1);  // 1 value for 3 elements
  std::string e = error_of([&] { load_onnx(c.save(d.path / "c.onnx")); });
  CHECK(contains(e, "tensor 'w'"));
  CHECK(contains(e, "has 1 values"));
}

TEST_CASE("test-data TensorProto files round-trip through save_tensor_pb/load_tensor_pb") {
  TempDir d;
  Tensor t = Tensor::from_vector<int32_t>({1, -2, 3, -4, 5, -6}, {2, 3});
  save_tensor_pb(t, "ids", (d.path / "t.pb").string());
  std::string name;
  Tensor r = load_tensor_pb((d.path / "t.pb").string(), &name);
  CHECK(name == "ids");
  CHECK(r.shape() == Shape{2, 3});
  CHECK(r.to_i64_vector() == t.to_i64_vector());
  write_bytes(d.path / "bad.pb", "\x0a\xff\xff");
  CHECK(contains(error_of([&] { load_tensor_pb((d.path / "bad.pb").string()); }), "bad.pb"));
}

// The loader's pre-parse walk reads onnx_wire's table, not descriptors (protobuf-lite has none): here the
// table is held to the descriptors of Debian's onnx-ml classes, every length-delimited field of every message
// reachable from ModelProto, both ways.
TEST_CASE("onnx_wire's schema is the onnx-ml descriptors' schema") {
  using google::protobuf::FieldDescriptor;
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  std::set<std::string> listed;
  for (const onnx_wire::Message& m : onnx_wire::messages()) {
    CAPTURE(m.name);
    listed.insert(m.name);
    const google::protobuf::Descriptor* d = pool->FindMessageTypeByName(m.name);
    REQUIRE(d);
    int delimited = 0;
    for (int i = 0; i < d->field_count(); ++i) {
      const FieldDescriptor* f = d->field(i);
      CAPTURE(f->name());
      onnx_wire::Kind kind;
      if (f->type() == FieldDescriptor::TYPE_MESSAGE) kind = onnx_wire::Kind::Message;
      else if (f->type() == FieldDescriptor::TYPE_STRING) kind = onnx_wire::Kind::String;
      else if (f->type() == FieldDescriptor::TYPE_BYTES) kind = onnx_wire::Kind::Bytes;
      else if (f->is_packable())
        kind = f->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT || f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE
                   ? onnx_wire::Kind::PackedFixed
                   : onnx_wire::Kind::PackedVarint;
      else continue;  // a single number: never length-delimited
      ++delimited;
      const onnx_wire::Field* w = m.find(f->number());
      REQUIRE(w);
      CHECK(w->name == f->name());
      CHECK(w->kind == kind);
      if (kind == onnx_wire::Kind::Message)
        CHECK(onnx_wire::messages()[static_cast<size_t>(w->message)].name == f->message_type()->full_name());
    }
    CHECK(m.fields.size() == static_cast<size_t>(delimited));
  }
  CHECK(std::string(onnx_wire::messages()[static_cast<size_t>(onnx_wire::model_proto())].name) == "onnx.ModelProto");
  CHECK(std::string(onnx_wire::messages()[static_cast<size_t>(onnx_wire::tensor_proto())].name) == "onnx.TensorProto");
  // Every message type reachable from ModelProto has its entry.
  std::vector<const google::protobuf::Descriptor*> todo{onnx::ModelProto::descriptor()};
  std::set<std::string> seen;
  while (!todo.empty()) {
    const auto* d = todo.back();
    todo.pop_back();
    if (!seen.insert(d->full_name()).second) continue;
    CHECK_MESSAGE(listed.count(d->full_name()), d->full_name());
    for (int i = 0; i < d->field_count(); ++i)
      if (d->field(i)->message_type()) todo.push_back(d->field(i)->message_type());
  }
}

namespace {

onnx::TensorProto raw_tensor(const std::string& name, int dtype, const std::vector<int64_t>& dims, size_t bytes, int seed) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(dtype);
  for (int64_t d : dims) t.add_dims(d);
  std::string raw(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) raw[i] = static_cast<char>(i * 31 + static_cast<size_t>(seed));
  t.set_raw_data(raw);
  return t;
}

}  // namespace

// raw_data_in_place.h: what protobuf would copy stays in the mapped file. Every size around the rule's edges:
// kept in the message (8 and 1023 bytes), left in the file (1024 and more; 16 bytes, a token's own size, too).
TEST_CASE("tensors inside model.onnx are read in place from the mapped file, with protobuf's values") {
  TempDir d;
  onnx::ModelProto mp;
  mp.set_ir_version(8);
  mp.add_opset_import()->set_version(21);
  auto* g = mp.mutable_graph();
  g->set_name("g");
  struct Case {
    const char* name;
    int dtype;
    std::vector<int64_t> dims;
    size_t bytes;
    bool in_file;
  };
  const std::vector<Case> cases = {
      {"f8", onnx::TensorProto::FLOAT, {2}, 8, false},          {"f16", onnx::TensorProto::FLOAT, {4}, 16, true},
      {"u1023", onnx::TensorProto::UINT8, {1023}, 1023, false}, {"u1024", onnx::TensorProto::UINT8, {1024}, 1024, true},
      {"u5001", onnx::TensorProto::UINT8, {5001}, 5001, true},  {"f2048", onnx::TensorProto::FLOAT, {32, 16}, 2048, true},
      {"h3000", onnx::TensorProto::FLOAT16, {1500}, 3000, true}};
  int seed = 0;
  for (const Case& c : cases) {
    *g->add_initializer() = raw_tensor(c.name, c.dtype, c.dims, c.bytes, ++seed);
    g->add_output()->set_name(c.name);
  }
  // A Constant's tensor attribute, a level deeper.
  auto* node = g->add_node();
  node->set_op_type("Constant");
  node->add_output("k");
  auto* a = node->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = raw_tensor("", onnx::TensorProto::UINT8, {4096}, 4096, 99);
  g->add_output()->set_name("k");
  std::string bytes;
  REQUIRE(mp.SerializeToString(&bytes));
  const auto path = d.path / "m.onnx";
  write_bytes(path, bytes);

  // The slim message: every raw_data left in it is a token for exactly the original's bytes.
  const auto slim =
      raw_data_in_place::slim_message({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, onnx_wire::model_proto());
  REQUIRE(slim);
  CHECK(slim->size() < bytes.size() - 10000);
  onnx::ModelProto back;
  REQUIRE(back.ParseFromString(*slim));
  for (size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(cases[i].name);
    const std::string& raw = back.graph().initializer(static_cast<int>(i)).raw_data();
    const std::string& original = mp.graph().initializer(static_cast<int>(i)).raw_data();
    if (!cases[i].in_file) {
      CHECK(raw == original);
      continue;
    }
    REQUIRE(raw.size() == raw_data_in_place::kTokenBytes);
    const raw_data_in_place::FileSpan span = raw_data_in_place::read_token(raw);
    CHECK(bytes.substr(span.offset, span.length) == original);
  }
  CHECK(raw_data_in_place::read_token(back.graph().node(0).attribute(0).t().raw_data()).length == 4096);
  CHECK_FALSE(
      raw_data_in_place::slim_message({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size() - 7}, onnx_wire::model_proto()));

  // Loaded: protobuf's bytes; those left in the file are views of it when aligned for their type.
  const Model m = load_onnx(path.string());
  for (size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(cases[i].name);
    const Value& v = m.graph->values[static_cast<size_t>(m.graph->find_value(cases[i].name))];
    REQUIRE(v.constant);
    const std::string& original = mp.graph().initializer(static_cast<int>(i)).raw_data();
    CHECK(std::string(static_cast<const char*>(v.constant->raw()), v.constant->nbytes()) == original);
    if (cases[i].dtype == onnx::TensorProto::UINT8) CHECK(v.constant->buffer()->file_backed() == cases[i].in_file);
  }
  const Node& constant = m.graph->nodes.at(0);
  const Tensor& k = constant.attrs.at("value").t;
  CHECK(std::string(static_cast<const char*>(k.raw()), k.nbytes()) == mp.graph().node(0).attribute(0).t().raw_data());
  CHECK(k.buffer()->file_backed());

  // A raw_data whose length does not fit its shape is still named as raw_data, with its real length.
  mp.mutable_graph()->mutable_initializer(4)->set_dims(0, 5000);
  REQUIRE(mp.SerializeToString(&bytes));
  write_bytes(path, bytes);
  const std::string e = error_of([&] { load_onnx(path.string()); });
  CHECK(contains(e, "tensor 'u5001': raw_data has 5001 bytes"));
}

// What loading a single-file model holds at its peak: the weights once (the packed copies replacing the file's
// pages), not the file, protobuf's copy and the tensors' (3x; SmolLM2-135M's 539 MB export peaked at 1.61 GB).
// Reads the kernel's page accounting: not under qemu-user or AddressSanitizer (tests/CMakeLists.txt).
TEST_CASE("a single-file model's load peaks near its weights, not three times them") {
  TempDir d;
  constexpr int kWidth = 512, kLayers = 16;  // 16 MatMul weights of 1 MiB
  convert::OnnxBuilder b(21, "test");
  b.input("h0", DType::Float32, {1, kWidth});
  std::vector<float> w(static_cast<size_t>(kWidth) * kWidth);
  for (int l = 0; l < kLayers; ++l) {
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>((i + static_cast<size_t>(l)) % 5) - 2) / kWidth;
    const std::string name = "w" + std::to_string(l);
    b.initializer(name, Tensor::from_vector<float>(w, {kWidth, kWidth}));
    b.node("MatMul", {"h" + std::to_string(l), name}, {"h" + std::to_string(l + 1)});
  }
  b.output("h" + std::to_string(kLayers), DType::Float32);
  const auto path = d.path / "m.onnx";
  b.save(path);
  const auto file_bytes = static_cast<long>(fs::file_size(path));
  const long before = resident_memory().anon + resident_memory().file;
  reset_peak_rss();
  Session s(path.string());
  const long grew = peak_rss_bytes() - before;
  MESSAGE("model.onnx ", file_bytes >> 10, " KiB; the load's peak grew RSS by ", grew >> 10, " KiB");
  CHECK(grew < file_bytes * 5 / 4 + (4 << 20));
  auto out = s.run({{"h0", Tensor::from_vector<float>(std::vector<float>(kWidth, 1.0f), {1, kWidth})}});
  CHECK(std::isfinite(out.at("h16").data<float>()[0]));
}

// Protobuf puts a raw_data anywhere in model.onnx, so most weights of a single-file export are not aligned for
// their type. A session reads them in place all the same where every reader reads bytes (packed MatMul
// weights, a Gather table, its tied transposed head), and gives any other reader an aligned copy — outputs
// equal the same model's with 64-byte aligned external data, bit for bit (the sanitizer build's
// -fsanitize=undefined checks that no typed read meets a misaligned weight).
TEST_CASE("a single-file model's misaligned weights are read in place where bytes are read, copied aligned elsewhere") {
  TempDir d;
  constexpr int64_t V = 300, D = 64, F = 512, T = 32;
  std::vector<float> table(V * D), w(D * F), c(T * F);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(static_cast<int>(i % 13) - 6) / 16;
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i % 7) - 3) / 8;
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(i % 5) / 4;
  std::string table_name, w_name, c_name;
  fs::path single;
  bool misaligned = false;
  for (int attempt = 0; attempt < 64 && !misaligned; ++attempt) {  // name lengths move the bytes in the file
    table_name = "table" + std::string(static_cast<size_t>(attempt % 4), 't');
    w_name = "w" + std::string(static_cast<size_t>(attempt / 4 % 4), 'w');
    c_name = "c" + std::string(static_cast<size_t>(attempt / 16), 'c');
    convert::OnnxBuilder b(21, "test");
    b.input("ids", DType::Int64, {int64_t{1}, T});
    b.initializer(table_name, Tensor::from_vector<float>(table, {V, D}));
    b.initializer(w_name, Tensor::from_vector<float>(w, {D, F}));
    b.initializer(c_name, Tensor::from_vector<float>(c, {1, T, F}));
    b.node("Gather", {table_name, "ids"}, {"h"});
    b.node("MatMul", {"h", w_name}, {"m"});
    b.node("Add", {"m", c_name}, {"y"});
    convert::OnnxBuilder::attr(b.node("Transpose", {table_name}, {"tt"}), "perm", std::vector<int64_t>{1, 0});
    b.node("MatMul", {"h", "tt"}, {"logits"});
    b.output("y", DType::Float32);
    b.output("logits", DType::Float32);
    single = d.path / ("single" + std::to_string(attempt)) / "model.onnx";
    fs::create_directories(single.parent_path());
    b.save(single);
    LoadOptions views;
    views.misaligned_views = true;
    const Model m = load_onnx(single.string(), views);
    misaligned = true;
    for (const std::string& name : {table_name, w_name, c_name})
      misaligned &= !is_aligned(*m.graph->values[static_cast<size_t>(m.graph->find_value(name))].constant);
    if (misaligned) {  // the aligned twin: the same proto, its weights in a 64-byte aligned external file
      b.save(d.path / "aligned" / "model.onnx", "model.onnx.data");
      CHECK(is_aligned(*load_onnx(single.string()).graph->values[static_cast<size_t>(m.graph->find_value(w_name))].constant));
    }
  }
  REQUIRE(misaligned);
  std::vector<int64_t> ids(T);
  for (int64_t i = 0; i < T; ++i) ids[static_cast<size_t>(i)] = (i * 37) % V;
  const Tensor in = Tensor::from_vector<int64_t>(ids, {1, T});
  Session s(single.string()), twin((d.path / "aligned" / "model.onnx").string());
  const auto got = s.run({{"ids", in}}), want = twin.run({{"ids", in}});
  for (const char* name : {"y", "logits"}) {
    CAPTURE(name);
    REQUIRE(got.at(name).nbytes() == want.at(name).nbytes());
    CHECK(std::memcmp(got.at(name).raw(), want.at(name).raw(), want.at(name).nbytes()) == 0);
  }
  const Graph& g = s.graph();
  CHECK(!is_aligned(*g.values[static_cast<size_t>(g.find_value(table_name))].constant));  // the Gather's table: in place
  CHECK(is_aligned(*g.values[static_cast<size_t>(g.find_value(c_name))].constant));       // Add's: an aligned copy
  CHECK(s.memory_use().mapped_constants >= V * D * 4);
}
