// tests/bad_inputs: one small file a class of hostile input, replayed through the fuzz targets' own
// functions (fuzz/targets.h). tests/bad_inputs/expected.txt names the error each must end in:
//   <target>/<file>: <text the tern::Error message contains>
// Every file must be listed, and every listed file must exist: a reproducer cannot go silently unchecked.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "convert/gguf_import.h"
#include "core/error.h"
#include "core/tensor.h"
#include "fuzz/targets.h"
#include "llm/chat_template.h"
#include "llm/model_config.h"
#include "llm/model_folder.h"
#include "llm/tokenizer.h"
#include "model_builder.h"
#include "runtime/session.h"
#include "test_util.h"

#include <sys/stat.h>

#include <limits>

namespace fs = std::filesystem;

TEST_CASE("hostile inputs (tests/bad_inputs) each end in their expected error") {
  const fs::path root = fs::path(TERN_SOURCE_DIR) / "tests" / "bad_inputs";
  std::map<std::string, std::string> expected;
  std::ifstream list(root / "expected.txt");
  REQUIRE(list);
  for (std::string line; std::getline(list, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(": ");
    REQUIRE_MESSAGE(colon != std::string::npos, "expected.txt: '", line, "' is not '<target>/<file>: <error>'");
    expected[line.substr(0, colon)] = line.substr(colon + 2);
  }
  size_t files = 0;
  tern::set_process_memory_limit(tern::fuzz::kMemoryCap);  // as the fuzzer runs them
  for (const tern::fuzz::Target& target : tern::fuzz::targets()) {
    if (!fs::exists(root / target.name)) continue;
    for (const auto& entry : fs::directory_iterator(root / target.name)) {
      const std::string key = std::string(target.name) + "/" + entry.path().filename().string();
      CAPTURE(key);
      auto it = expected.find(key);
      CHECK_MESSAGE(it != expected.end(), key, " has no line in expected.txt");
      if (it == expected.end()) continue;
      std::ifstream f(entry.path(), std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(f)), {});
      std::string error = "(no error)";
      try {
        target.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      } catch (const tern::Error& e) {
        error = e.what();
      }
      CAPTURE(error);
      CHECK(error.find(it->second) != std::string::npos);
      expected.erase(it);
      ++files;
    }
  }
  tern::set_process_memory_limit(0);
  for (const auto& [key, text] : expected) FAIL_CHECK("expected.txt lists ", key, ", which does not exist");
  MESSAGE(files, " hostile inputs replayed");
}

TEST_CASE("a model of half a million empty nodes is refused before protobuf parses it") {
  // An empty NodeProto is 2 bytes on disk and ~600 in memory once parsed; 500,000 of them in 1 MB would
  // need ~300 MB, past the fuzz targets' 256 MB cap (a 100 MB file would need 30 GB).
  std::string graph;
  for (int i = 0; i < 500000; ++i) graph += std::string("\x0a\x00", 2);
  std::string model = std::string("\x08\x08\x42\x02\x10\x11\x3a", 7);  // ir_version 8, opset 17, graph:
  for (size_t n = graph.size();; n >>= 7) {                            // its length as a varint
    model += static_cast<char>((n & 0x7f) | (n >> 7 ? 0x80 : 0));
    if (!(n >> 7)) break;
  }
  model += graph;
  std::string error = "(no error)";
  try {
    tern::fuzz::find_target("onnx_model")->run(reinterpret_cast<const uint8_t*>(model.data()), model.size());
  } catch (const tern::Error& e) {
    error = e.what();
  }
  CAPTURE(error);
  CHECK(error.find("holds 500003 protobuf messages in 1000010 bytes; parsing it would need about 300 MB: the session's memory cap") !=
        std::string::npos);
}

// ---- hostile input, round two: what a file cannot carry as bytes (FIFOs), or would be megabytes to commit ----

namespace {
// A tokenizer.json whose decoder is `depth` Sequences deep.
std::string deep_decoder(int depth) {
  std::string s = R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"decoder":)";
  s.reserve(s.size() + static_cast<size_t>(depth) * 40);
  for (int i = 0; i < depth; ++i) s += R"({"type":"Sequence","decoders":[)";
  s += R"({"type":"Fuse"})";
  for (int i = 0; i < depth; ++i) s += "]}";
  return s + "}";
}
}  // namespace

TEST_CASE("a model folder's files that are FIFOs are refused at once, not waited on") {
  tern::test::TempDir d;
  const fs::path dir = d.path;
  for (const char* name : {"config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "model.onnx"})
    REQUIRE(mkfifo((dir / name).c_str(), 0600) == 0);
  auto refused = [](const std::string& error, const char* file) {
    CAPTURE(error);
    CHECK(error.find(file) != std::string::npos);
    CHECK(error.find("is not a regular file") != std::string::npos);
  };
  refused(tern::test::error_of([&] { tern::llm::read_model_config(dir.string()); }), "config.json");
  refused(tern::test::error_of([&] { tern::llm::load_tokenizer(dir.string()); }), "tokenizer.json");
  refused(tern::test::error_of([&] { tern::llm::ChatTemplate::load(dir.string()); }), "tokenizer_config.json");
  fs::remove(dir / "tokenizer_config.json");
  refused(tern::test::error_of([&] { tern::llm::ChatTemplate::load(dir.string()); }), "chat_template.jinja");
  refused(tern::test::error_of([&] { tern::Session s((dir / "model.onnx").string()); }), "model.onnx");
}

TEST_CASE("a tokenizer.json nested 200,000 deep is refused naming its depth, not a stack overflow") {
  tern::test::TempDir d;
  std::ofstream(d.path / "tokenizer.json") << deep_decoder(200000);
  const std::string error = tern::test::error_of([&] { tern::llm::load_hf_tokenizer((d.path / "tokenizer.json").string()); });
  CAPTURE(error);
  CHECK(error.find("its JSON nests deeper than 128 levels") != std::string::npos);
  std::ofstream(d.path / "tokenizer.json") << deep_decoder(60);  // (within the limit: it loads)
  CHECK(tern::llm::load_hf_tokenizer((d.path / "tokenizer.json").string())->decode({0, 0}) == "aa");
}

TEST_CASE("100,000 added tokens and a long prompt: matched in linear time, longest first") {
  tern::test::TempDir d;
  std::string json = R"({"model":{"type":"BPE","vocab":{"x":0,"y":1},"merges":[]},"added_tokens":[)";
  for (int i = 0; i < 100000; ++i)
    json.append(i ? "," : "")
        .append(R"({"id":)")
        .append(std::to_string(2 + i))
        .append(R"(,"content":"<t)")
        .append(std::to_string(i))
        .append(R"(>"})");
  json += R"(,{"id":100002,"content":"<t1"}]})";
  std::ofstream(d.path / "tokenizer.json") << json;
  const auto tok = tern::llm::load_hf_tokenizer((d.path / "tokenizer.json").string());
  std::string prompt;
  for (int i = 0; i < 20000; ++i) prompt += i % 2 ? "x<t" + std::to_string(i % 100000) + ">" : "<t1y";  // 200 KB
  const std::vector<int64_t> ids = tok->encode(prompt, false);
  REQUIRE(ids.size() == 40000);
  CHECK(ids[0] == 100002);  // "<t1" (no "<t1y" token)
  CHECK(ids[1] == 1);
  CHECK(ids[2] == 0);
  CHECK(ids[3] == 2 + 1);  // "<t1>", the longest there
}

TEST_CASE("shape arithmetic at the edges of int64: a step of INT64_MIN takes one element; reducing a [0, 2^40, 2^40] tensor") {
  tern::test::TempDir d;
  tern::test::ModelBuilder b(21);
  b.input("x", onnx::TensorProto::FLOAT, {4}).output("y").output("z");
  const int64_t min = std::numeric_limits<int64_t>::min();
  b.initializer_i64("starts", {1}, {-1});
  b.initializer_i64("ends", {1}, {min});
  b.initializer_i64("axes", {1}, {0});
  b.initializer_i64("steps", {1}, {min});
  b.node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
  b.initializer_f32("empty", {0, int64_t{1} << 40, int64_t{1} << 40}, {});
  b.initializer_i64("reduce_axes", {2}, {1, 2});
  b.node("ReduceSum", {"empty", "reduce_axes"}, {"z"});
  tern::Session s(b.save(d.path / "m.onnx"));
  const tern::Outputs out = s.run({{"x", tern::Tensor::from_vector<float>({1, 2, 3, 4}, {4})}});
  REQUIRE(out[0].numel() == 1);
  CHECK(out[0].data<float>()[0] == 4);
  CHECK(out[1].shape() == tern::Shape{0, 1, 1});
}

TEST_CASE("every file a model folder names or holds stays inside it: genai_config's decoder, symlinks out, /dev/zero") {
  tern::test::TempDir outside, d;
  const fs::path dir = d.path / "model";
  fs::create_directories(dir);
  const fs::path model = fs::path(TERN_SOURCE_DIR) / "models" / "default";
  fs::copy_file(model / "model.onnx", outside.path / "model.onnx");
  fs::copy_file(model / "config.json", outside.path / "config.json");
  auto refused = [](const std::string& error, const char* what) {
    CAPTURE(error);
    CHECK(error.find(what) != std::string::npos);
  };
  // genai_config.json's decoder filename: absolute, or up and out.
  std::ofstream(dir / "genai_config.json") << R"({"model":{"decoder":{"filename":")" << (outside.path / "model.onnx").string() << R"("}}})";
  refused(tern::test::error_of([&] { tern::llm::resolve_model(dir.string()); }), "decoder filename '/");
  refused(tern::test::error_of([&] { tern::llm::resolve_model(dir.string()); }), "is an absolute path");
  std::ofstream(dir / "genai_config.json") << R"({"model":{"decoder":{"filename":"../../)" << outside.path.filename().string()
                                           << R"(/model.onnx"}}})";
  refused(tern::test::error_of([&] { tern::llm::resolve_model(dir.string()); }), "leaves the model folder ('..')");
  fs::remove(dir / "genai_config.json");
  // Symlinks: a model.onnx, config.json and tokenizer.json that resolve outside; a chat template linked to /dev/zero.
  fs::create_symlink(outside.path / "model.onnx", dir / "model.onnx");
  refused(tern::test::error_of([&] { tern::llm::resolve_model(dir.string()); }), "resolves outside the model folder");
  fs::create_symlink(outside.path / "config.json", dir / "config.json");
  refused(tern::test::error_of([&] { tern::llm::read_model_config(dir.string()); }), "resolves outside the model folder");
  fs::create_symlink("/etc/passwd", dir / "tokenizer.json");
  refused(tern::test::error_of([&] { tern::llm::load_tokenizer(dir.string()); }), "resolves outside the model folder");
  fs::create_symlink("/dev/zero", dir / "chat_template.jinja");
  refused(tern::test::error_of([&] { tern::llm::ChatTemplate::load(dir.string()); }), "is not a regular file");
  // A link that stays inside the folder is followed.
  fs::remove(dir / "config.json");
  fs::copy_file(model / "config.json", dir / "real_config.json");
  fs::create_symlink("real_config.json", dir / "config.json");
  CHECK(tern::llm::read_model_config(dir.string()).vocab_size == 1024);
}

TEST_CASE("a Hugging Face hub cache snapshot loads: its links into its own repository's blobs count as inside, no others") {
  tern::test::TempDir hub;
  const fs::path repo = hub.path / "models--org--tiny", snapshot = repo / "snapshots" / "0123abcd";
  fs::create_directories(repo / "blobs");
  fs::create_directories(snapshot);
  const fs::path model = fs::path(TERN_SOURCE_DIR) / "models" / "default";
  for (const char* f : {"model.onnx", "config.json", "tokenizer.json"}) {  // as the hub lays them out: blob per file
    fs::copy_file(model / f, repo / "blobs" / (std::string("sha-") + f));
    fs::create_symlink(std::string("../../blobs/sha-") + f, snapshot / f);
  }
  CHECK(tern::llm::resolve_model(snapshot.string()).onnx == (snapshot / "model.onnx").string());
  CHECK(tern::llm::read_model_config(snapshot.string()).vocab_size == 1024);
  CHECK(tern::llm::load_tokenizer(snapshot.string())->vocab_size() == 1024);
  {  // with external data (an import's model.onnx.data), linked the same way: a session loads and runs
    const fs::path imported = hub.path / "imported", ext = hub.path / "models--org--ext";
    tern::convert::import_gguf(std::string(TERN_SOURCE_DIR) + "/tests/fuzz/corpus/gguf/llama_f32.gguf", imported.string());
    fs::create_directories(ext / "blobs");
    fs::create_directories(ext / "snapshots" / "rev");
    for (const auto& e : fs::directory_iterator(imported)) {
      const std::string name = e.path().filename().string();
      fs::copy_file(e.path(), ext / "blobs" / ("sha-" + name));
      fs::create_symlink("../../blobs/sha-" + name, ext / "snapshots" / "rev" / name);
    }
    tern::Session s(tern::llm::resolve_model((ext / "snapshots" / "rev").string()).onnx);
    CHECK(s.outputs().size() >= 1);
  }
  // Another repository's blobs, or anything else of the cache, stay outside.
  const fs::path other = hub.path / "models--org--other" / "blobs";
  fs::create_directories(other);
  fs::copy_file(model / "config.json", other / "sha-config.json");
  fs::remove(snapshot / "config.json");
  fs::create_symlink("../../../models--org--other/blobs/sha-config.json", snapshot / "config.json");
  CHECK(tern::test::error_of([&] { tern::llm::read_model_config(snapshot.string()); }).find("resolves outside the model folder") !=
        std::string::npos);
  // A folder that only looks like part of a snapshot (no models-- repository above it) gets no such room.
  const fs::path plain = hub.path / "x" / "snapshots" / "rev";
  fs::create_directories(plain);
  fs::create_directories(hub.path / "x" / "blobs");
  fs::copy_file(model / "config.json", hub.path / "x" / "blobs" / "c.json");
  fs::create_symlink("../../blobs/c.json", plain / "config.json");
  CHECK(tern::test::error_of([&] { tern::llm::read_model_config(plain.string()); }).find("resolves outside the model folder") !=
        std::string::npos);
}
