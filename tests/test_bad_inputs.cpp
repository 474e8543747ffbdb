// tests/bad_inputs: one small file a class of hostile input, replayed through the fuzz targets' own
// functions (fuzz/targets.h). tests/bad_inputs/expected.txt names the error each must end in:
//   <target>/<file>: <text the tern::Error message contains>
// Every file must be listed, and every listed file must exist: a reproducer cannot go silently unchecked.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.h"
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
  for (const auto& [key, text] : expected) FAIL_CHECK("expected.txt lists ", key, ", which does not exist");
  MESSAGE(files, " hostile inputs replayed");
}
