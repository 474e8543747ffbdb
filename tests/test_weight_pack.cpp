// tern pack: a session recording what it prepares, the pack saved beside the model, later loads mapping it
// (or reading it into memory, --prefault) — the same logits bit for bit, nothing repacked — and packs that do
// not fit refused with a message.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "llm/generator.h"
#include "llm/model_folder.h"
#include "model_builder.h"

using namespace tern;
using namespace tern::llm;
namespace fs = std::filesystem;

namespace {

const std::string kFixtures = std::string(TERN_SOURCE_DIR) + "/tests/fixtures/";

// The fixture's folder copied into `dir` (so its pack lands there, not in the source tree).
std::string copy_fixture(const std::string& name, const fs::path& dir) {
  fs::copy(kFixtures + name, dir, fs::copy_options::recursive);
  return (dir / "model.onnx").string();
}

SessionOptions options(const std::string& onnx, SessionOptions::Pack pack, const std::string& weights = "fp32") {
  DecoderOptions d;
  d.ring_capacity = 64;
  d.weights = weights;
  SessionOptions so = decoder_session_options(d, read_model_config(fs::path(onnx).parent_path().string()), true);
  so.pack = pack;
  return so;
}

void make_pack(const std::string& onnx, const std::string& weights = "fp32") {
  Session recorder(onnx, options(onnx, SessionOptions::Pack::Record, weights));
  recorder.weights().save_pack(pack_path_for(onnx));
}

GenerateResult greedy(Session& s, const std::string& onnx) {
  Generator gen(s, read_model_config(fs::path(onnx).parent_path().string()));
  GenerateOptions o;
  o.max_new_tokens = 6;
  return gen.generate({{1, 17, 93, 5}}, o);
}

void check_same(const GenerateResult& a, const GenerateResult& b) {
  CHECK(a.tokens == b.tokens);
  REQUIRE(a.prefill_logits.numel() == b.prefill_logits.numel());
  CHECK(std::memcmp(a.prefill_logits.raw(), b.prefill_logits.raw(), a.prefill_logits.nbytes()) == 0);
}

// Rewrites the pack's JSON header with `edit` (in place: the header's room is fixed, padded with spaces).
void edit_header(const std::string& path, const std::function<void(nlohmann::json&)>& edit) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  char pre[16];
  f.read(pre, 16);
  uint32_t bytes = 0;
  std::memcpy(&bytes, pre + 12, 4);
  std::string header(bytes, ' ');
  f.read(header.data(), bytes);
  nlohmann::json h = nlohmann::json::parse(header);
  edit(h);
  std::string out = h.dump();
  REQUIRE(out.size() <= bytes);
  out.resize(bytes, ' ');
  f.seekp(16);
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
}

std::string load_error(const std::string& onnx, const std::string& weights = "fp32") {
  try {
    Session s(onnx, options(onnx, SessionOptions::Pack::Use, weights));
  } catch (const Error& e) {
    return e.what();
  }
  return "loaded";
}

}  // namespace

TEST_CASE("a packed model runs on the pack's prepared weights: the same logits bit for bit, nothing repacked") {
  for (const char* fixture : {"llama-gqa-torch", "llama-gqa-int4"})
    for (const char* weights : {"fp32", "fp16", "int4"}) {
      if (std::string(fixture) == "llama-gqa-int4" && std::string(weights) != "fp32") continue;  // no float MatMuls
      CAPTURE(fixture);
      CAPTURE(weights);
      test::TempDir dir;
      const std::string onnx = copy_fixture(fixture, dir.path / "model");
      Session plain(onnx, options(onnx, SessionOptions::Pack::Ignore, weights));
      const GenerateResult expected = greedy(plain, onnx);
      const MemoryUse plain_use = plain.memory_use();
      make_pack(onnx, weights);
      REQUIRE(fs::exists(dir.path / "model" / "model.tern-pack"));
      // Packed with --weights X, the pack loads as X without asking.
      Session packed(onnx, options(onnx, SessionOptions::Pack::Use));
      REQUIRE(packed.weights().pack() != nullptr);
      CHECK(packed.weights().pack()->reading());
      check_same(greedy(packed, onnx), expected);
      const MemoryUse use = packed.memory_use();
      CHECK(use.packed_weights == 0);                                                 // owned: none
      if (std::string(fixture) == "llama-gqa-torch") CHECK(use.mapped_prepared > 0);  // (the int4 fixture has no float MatMul)
      CHECK(use.mapped_prepared == plain_use.packed_weights);
      // The same constants kept; fused concatenations MatMulNBits reads as stored come mapped from the pack.
      CHECK(use.owned_constants + use.mapped_constants == plain_use.owned_constants + plain_use.mapped_constants);
      // (Where MatMulNBits regroups its 4-bit blocks — x86 from tier avx2 — nothing is read as stored: the
      // int4 fixture's packed weights are those groups, and the concatenations are dropped from the pack too.)
      if (std::string(fixture) == "llama-gqa-int4" && plain_use.packed_weights == 0) CHECK(use.owned_constants < plain_use.owned_constants);
      // --prefault reads the pack into owned memory: the same bits, the prepared weights owned, none mapped.
      SessionOptions in_memory = options(onnx, SessionOptions::Pack::Use);
      in_memory.prefault = true;
      Session copied(onnx, in_memory);
      REQUIRE(copied.weights().pack() != nullptr);
      CHECK(copied.weights().pack()->in_memory());
      CHECK(copied.weights().pack()->prefault());
      check_same(greedy(copied, onnx), expected);
      const MemoryUse copied_use = copied.memory_use();
      CHECK(copied_use.mapped_prepared == 0);
      CHECK(copied_use.packed_weights == plain_use.packed_weights);
    }
}

TEST_CASE("packs that do not fit the model are refused naming the pack and what is wrong") {
  test::TempDir dir;
  const std::string onnx = copy_fixture("llama-gqa-torch", dir.path / "model");
  const std::string pack = pack_path_for(onnx);
  make_pack(onnx, "int4");
  const std::string original = dir.path / "original.tern-pack";
  fs::copy_file(pack, original);
  auto restore = [&] { fs::copy_file(original, pack, fs::copy_options::overwrite_existing); };

  SUBCASE("another weight format than asked") {
    const std::string e = load_error(onnx, "fp16");
    CHECK(e.find("holds weights prepared as int4, this load asks for fp16") != std::string::npos);
    CHECK(e.find(pack) != std::string::npos);
  }
  SUBCASE("without it (Pack::Ignore) the model loads as usual") {
    Session s(onnx, options(onnx, SessionOptions::Pack::Ignore, "fp16"));
    CHECK(s.weights().pack() == nullptr);
  }
  SUBCASE("made from other model files") {
    fs::copy_file(kFixtures + "llama-gqa-int4/model.onnx", onnx, fs::copy_options::overwrite_existing);
    CHECK(load_error(onnx).find("made from other model files") != std::string::npos);
  }
  SUBCASE("one weight byte changed in place, the file's size and times as before: refused by the content hash") {
    struct stat before {};
    REQUIRE(::stat(onnx.c_str(), &before) == 0);
    {  // a float's low byte inside the weights (the middle of the file; none of the stamp's 16 sampled pages)
      std::fstream f(onnx, std::ios::in | std::ios::out | std::ios::binary);
      const auto at = static_cast<std::streamoff>(fs::file_size(onnx) * 37 / 100);
      char c = 0;
      f.seekg(at);
      f.get(c);
      f.seekp(at);
      f.put(static_cast<char>(c ^ 1));
    }
    const timespec times[2] = {before.st_atim, before.st_mtim};
    REQUIRE(::utimensat(AT_FDCWD, onnx.c_str(), times, 0) == 0);
    CHECK(fs::file_size(onnx) == static_cast<uintmax_t>(before.st_size));
    const std::string e = load_error(onnx, "int4");
    CHECK(e.find("made from other model files (content hash") != std::string::npos);
    CHECK(e.find(pack) != std::string::npos);
  }
  SUBCASE("the folder copied (new inodes and times, the same bytes): its pack is verified and used") {
    const fs::path copy = dir.path / "copy";
    fs::copy(dir.path / "model", copy, fs::copy_options::recursive);
    const std::string onnx2 = (copy / "model.onnx").string();
    Session s(onnx2, options(onnx2, SessionOptions::Pack::Use, "int4"));
    REQUIRE(s.weights().pack() != nullptr);
    CHECK(s.weights().pack()->bytes_served() > 0);
  }
  SUBCASE("not a pack, another version, truncated") {
    {
      std::fstream f(pack, std::ios::in | std::ios::out | std::ios::binary);
      f.write("NOTAPACK", 8);
    }
    CHECK(load_error(onnx).find("not a tern pack") != std::string::npos);
    restore();
    {
      std::fstream f(pack, std::ios::in | std::ios::out | std::ios::binary);
      const uint32_t v = 99;
      f.seekp(8);
      f.write(reinterpret_cast<const char*>(&v), 4);
    }
    CHECK(load_error(onnx).find("format version 99") != std::string::npos);
    restore();
    fs::resize_file(pack, fs::file_size(pack) / 2);
    CHECK(load_error(onnx).find("are not inside the file") != std::string::npos);
    fs::resize_file(pack, 20);
    CHECK(load_error(onnx).find("past the end of the file") != std::string::npos);
  }
  SUBCASE("read into memory (--prefault): the checks first, then only the bytes the entries span") {
    SessionOptions so = options(onnx, SessionOptions::Pack::Use, "int4");
    so.prefault = true;
    fs::resize_file(pack, fs::file_size(pack) + (uintmax_t{64} << 30));  // a sparse 64 GiB past the entries
    {
      Session s(onnx, so);
      REQUIRE(s.weights().pack() != nullptr);
      CHECK(s.weights().pack()->in_memory());
      CHECK(s.memory_use().packed_weights < (int64_t{1} << 30));
    }
    restore();
    edit_header(pack, [](nlohmann::json& h) { h["layout"] = "panel99"; });
    std::string e = "loaded";
    try {
      Session s(onnx, so);
    } catch (const Error& x) {
      e = x.what();
    }
    CHECK(e.find("made for the kernel layout 'panel99'") != std::string::npos);
  }
  SUBCASE("a hostile header") {
    edit_header(pack, [](nlohmann::json& h) { h["entries"][0]["tensors"][0]["bytes"] = 7; });
    CHECK(load_error(onnx).find("7 bytes for shape") != std::string::npos);
    restore();
    edit_header(pack, [](nlohmann::json& h) { h["entries"][0]["tensors"][0]["dtype"] = 8; });  // string
    CHECK(load_error(onnx).find("is not one a pack holds") != std::string::npos);
    restore();
    edit_header(pack, [](nlohmann::json& h) { h["layout"] = "panel99"; });
    CHECK(load_error(onnx).find("made for the kernel layout 'panel99'") != std::string::npos);
    restore();
    edit_header(pack, [](nlohmann::json& h) { h.erase("entries"); });
    CHECK(load_error(onnx).find("header is not valid") != std::string::npos);
    restore();
    // Well-formed, but not what the node prepares: half the blocks under one node's key.
    edit_header(pack, [](nlohmann::json& h) {
      for (auto& e : h["entries"])
        if (!e.contains("dropped")) {
          auto& t = e["tensors"][0];
          t["shape"] = {t["shape"][0].get<int64_t>() / 2};
          t["bytes"] = t["bytes"].get<int64_t>() / 2;
          break;
        }
    });
    CHECK(load_error(onnx).find("does not hold what this node prepares") != std::string::npos);
  }
}

TEST_CASE("a pack that marks a weight read as stored dropped is refused at load, not run on a null weight") {
  // Two 8-bit MatMulNBits with int8 activations (accuracy level 4) sharing x join into one over their concatenated
  // rows, which are read as stored (three blocks of 16: no whole 32-value chunks to group): the pack keeps that
  // concatenation.
  test::TempDir dir;
  const int64_t K = 48, N = 16;
  test::ModelBuilder b;
  b.add_opset("com.microsoft", 1);
  b.input("x", onnx::TensorProto::FLOAT, {1, K});
  for (const std::string y : {"a", "b"}) {
    b.initializer(y + "_B", Tensor::from_vector<uint8_t>(std::vector<uint8_t>(static_cast<size_t>(N * K), 7), {N, K / 16, 16}));
    b.initializer(y + "_scales", Tensor::from_vector<float>(std::vector<float>(static_cast<size_t>(N * K / 16), 0.5f), {N * K / 16}));
    auto& n = b.node("MatMulNBits", {"x", y + "_B", y + "_scales"}, {y}, "com.microsoft");
    convert::OnnxBuilder::attr(n, "K", K);
    convert::OnnxBuilder::attr(n, "N", N);
    convert::OnnxBuilder::attr(n, "bits", int64_t{8});
    convert::OnnxBuilder::attr(n, "block_size", int64_t{16});
    convert::OnnxBuilder::attr(n, "accuracy_level", int64_t{4});
    b.output(y);
  }
  const std::string onnx = b.save(dir.path / "model.onnx");
  SessionOptions record, use;
  record.pack = SessionOptions::Pack::Record;
  use.pack = SessionOptions::Pack::Use;
  Session(onnx, record).weights().save_pack(pack_path_for(onnx));
  CHECK(Session(onnx, use).weights().pack() != nullptr);  // the pack as written loads
  bool marked = false;
  edit_header(pack_path_for(onnx), [&](nlohmann::json& h) {
    for (auto& e : h["entries"])
      if (e["key"].get<std::string>().find("/concat_B") != std::string::npos) {
        e.erase("tensors");
        e["dropped"] = true;
        marked = true;
        break;
      }
  });
  REQUIRE(marked);
  std::string e = "loaded";
  try {
    Session s(onnx, use);
  } catch (const Error& error) {
    e = error.what();
  }
  CHECK(e.find("has no data") != std::string::npos);
  CHECK(e.find("recorded it as dropped") != std::string::npos);
}
