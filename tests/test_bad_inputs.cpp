// tests/bad_inputs: one small file a class of hostile input, replayed through the fuzz targets' own
// functions (fuzz/targets.h). tests/bad_inputs/expected.txt names the error each must end in:
//   <target>/<file>: <text the tern::Error message contains>
// Every file must be listed, and every listed file must exist: a reproducer cannot go silently unchecked.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.h"
#include "core/tensor.h"
#include "fuzz/targets.h"

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
  for (size_t n = graph.size(); ; n >>= 7) {  // its length as a varint
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
  CHECK(error.find("holds 500003 protobuf messages in 1000010 bytes; parsing it would need about 300 MB: the session's memory cap") != std::string::npos);
}
