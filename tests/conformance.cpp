// ONNX backend node-test conformance: runs every case in ../shared/onnx-node-tests/node whose ops tern
// implements, compares every output with the reference data, and prints
// "N passed, N failed, N skipped". Exit status is non-zero when a case fails that the allowlist does
// not name.
//
//   tern_conformance [--dir DIR] [--allowlist FILE] [--filter SUBSTRING] [--verbose]
#include <fnmatch.h>
#include <filesystem>

#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "diagnostics/test_data.h"
#include "runtime/session.h"

namespace fs = std::filesystem;
using tern::DType;
using tern::Tensor;

namespace {

std::map<std::string, std::string> read_allowlist(const std::string& path) {
  std::map<std::string, std::string> m;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto sp = line.find_first_of(" \t");
    m[line.substr(0, sp)] = sp == std::string::npos ? "" : line.substr(line.find_first_not_of(" \t", sp));
  }
  return m;
}

// "unsupported op X" or the last clause of the message: what a skip is for, to group skips by.
std::string skip_reason(const std::string& why) {
  auto p = why.find("unsupported ops:");
  if (p != std::string::npos) {
    auto b = why.find_first_not_of(" \n", p + 16);
    return "unsupported op " + why.substr(b, why.find(" (", b) - b);
  }
  auto q = why.rfind(": ");
  return q == std::string::npos ? why : why.substr(q + 2);
}

// Skipped: the model uses an op tern does not implement. Unsupported: every op is implemented but
// the case needs a data type or feature tern lacks; that is a gap and counts as a failure unless the
// allowlist names the case.
enum class Result { Passed, Failed, Skipped, Unsupported };

Result unsupported(const std::string& why) {
  return why.find("unsupported ops:") != std::string::npos ? Result::Skipped : Result::Unsupported;
}

Result run_case(const fs::path& dir, std::string* why) {
  std::unique_ptr<tern::Session> session;
  try {
    tern::SessionOptions opt;
    opt.threads = 1;
    session = std::make_unique<tern::Session>((dir / "model.onnx").string(), opt);
  } catch (const tern::UnsupportedError& e) {
    *why = e.what();
    return unsupported(*why);
  } catch (const std::exception& e) {
    *why = std::string("load: ") + e.what();
    return Result::Failed;
  }
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  for (const auto& set : sets) {
    try {
      auto feeds = tern::read_input_dir(*session, set.string());
      auto expected = tern::read_output_dir(set.string());
      if (expected.empty()) {
        *why = set.filename().string() + ": no expected outputs (output_0.pb) to compare with";
        return Result::Failed;
      }
      auto outputs = session->run(feeds);
      if (expected.size() > outputs.size()) {
        *why = set.filename().string() + ": " + std::to_string(outputs.size()) + " outputs, expected " + std::to_string(expected.size());
        return Result::Failed;
      }
      for (size_t i = 0; i < expected.size(); ++i) {
        std::string d = tern::compare_tensors(expected[i], outputs[i]);
        if (!d.empty()) {
          *why = set.filename().string() + " output '" + outputs.items[i].first + "': " + d;
          return Result::Failed;
        }
      }
    } catch (const tern::UnsupportedError& e) {
      *why = e.what();
      return unsupported(*why);
    } catch (const std::exception& e) {
      *why = set.filename().string() + ": " + e.what();
      return Result::Failed;
    }
  }
  return Result::Passed;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "../shared/onnx-node-tests/node", allow_path, filter;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else if (a == "--allowlist" && i + 1 < argc) allow_path = argv[++i];
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else if (a == "--verbose") verbose = true;
    else {
      std::cerr << "unknown argument " << a << "\n";
      return 2;
    }
  }
  if (!fs::is_directory(dir)) {
    std::cout << "SKIP: ONNX node tests not found at '" << dir << "' (put the shared data at ../shared)\n";
    std::cout << "0 passed, 0 failed, 0 skipped\n";
    return 0;
  }
  auto allow = allow_path.empty() ? std::map<std::string, std::string>{} : read_allowlist(allow_path);
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && (filter.empty() || e.path().filename().string().find(filter) != std::string::npos)) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  int passed = 0, failed = 0, skipped = 0, allowed = 0;
  std::map<std::string, int> used;
  std::map<std::string, int> skip_reasons;
  for (const auto& c : cases) {
    std::string name = c.filename().string(), why;
    Result r = run_case(c, &why);
    std::string listed_as;  // the allowlist pattern naming this case
    for (const auto& [pattern, reason] : allow)
      if (fnmatch(pattern.c_str(), name.c_str(), 0) == 0) listed_as = pattern;
    const bool listed = !listed_as.empty();
    if (r == Result::Passed) {
      ++passed;
      if (listed) std::cout << "NOTE " << name << " passes now but the allowlist pattern '" << listed_as << "' names it\n";
      if (verbose) std::cout << "PASS " << name << "\n";
    } else if (r == Result::Skipped) {
      ++skipped;
      ++skip_reasons[skip_reason(why)];
      if (verbose) std::cout << "SKIP " << name << ": " << why << "\n";
    } else if (listed) {
      ++allowed;
      ++used[listed_as];
      if (verbose) std::cout << "ALLOWED " << name << ": " << why << "\n";
    } else {
      ++failed;
      std::cout << (r == Result::Unsupported ? "GAP  " : "FAIL ") << name << ": " << why << "\n";
    }
  }
  for (const auto& [pattern, reason] : allow)
    if (!used.count(pattern)) std::cout << "NOTE allowlist pattern '" << pattern << "' matches no failing case\n";
  if (verbose) {
    std::cout << "\nskip reasons:\n";
    for (const auto& [k, v] : skip_reasons) std::cout << "  " << v << "  " << k << "\n";
  }
  std::cout << "\nconformance: " << passed << " of " << cases.size() << " node tests pass; " << allowed << " allowlisted cases ("
            << allow.size() << " allowlist entries); " << skipped << " use ops tern does not implement\n";
  std::cout << passed << " passed, " << failed << " failed, " << skipped + allowed << " skipped\n";
  return failed ? 1 : 0;
}
