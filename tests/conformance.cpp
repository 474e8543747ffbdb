// ONNX backend node-test conformance: runs every case in ../shared/onnx-node-tests/node whose ops tern
// implements, compares every output with the reference data, and prints
// "N passed, N failed, N skipped". Exit status is non-zero when a case fails that the allowlist does
// not name.
//
//   tern_conformance [--dir DIR] [--allowlist FILE] [--filter SUBSTRING] [--verbose]
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "runtime/session.h"
#include "runtime/test_data.h"

namespace fs = std::filesystem;
using tern::DType;
using tern::Tensor;

namespace {

// Empty when equal within tolerance, else what differs.
std::string compare(const Tensor& expected, const Tensor& actual) {
  if (expected.dtype() != actual.dtype())
    return std::string("dtype ") + tern::dtype_name(actual.dtype()) + ", expected " + tern::dtype_name(expected.dtype());
  if (expected.shape() != actual.shape())
    return "shape " + tern::shape_str(actual.shape()) + ", expected " + tern::shape_str(expected.shape());
  double rtol = 0, atol = 0;
  switch (expected.dtype()) {
    case DType::Float32: case DType::Float64: rtol = 1e-3; atol = 1e-4; break;
    case DType::Float16: rtol = 1e-2; atol = 1e-2; break;
    case DType::BFloat16: rtol = 2e-2; atol = 2e-2; break;
    default: break;
  }
  if (!tern::is_float(expected.dtype())) {
    if (std::memcmp(expected.raw(), actual.raw(), expected.nbytes()) == 0) return "";
  }
  for (int64_t i = 0; i < expected.numel(); ++i) {
    double e = expected.at_f64(i), a = actual.at_f64(i);
    if (std::isnan(e) && std::isnan(a)) continue;
    if (std::isinf(e) && e == a) continue;
    if (std::abs(a - e) <= atol + rtol * std::abs(e)) continue;
    std::ostringstream os;
    os << "element " << i << " is " << a << ", expected " << e;
    return os.str();
  }
  return "";
}

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

enum class Result { Passed, Failed, Skipped };

Result run_case(const fs::path& dir, std::string* why) {
  std::unique_ptr<tern::Session> session;
  try {
    tern::SessionOptions opt;
    opt.threads = 1;
    session = std::make_unique<tern::Session>((dir / "model.onnx").string(), opt);
  } catch (const tern::UnsupportedError& e) {
    *why = e.what();
    return Result::Skipped;
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
      auto outputs = session->run(feeds);
      if (expected.size() > outputs.size()) {
        *why = set.filename().string() + ": " + std::to_string(outputs.size()) + " outputs, expected " +
               std::to_string(expected.size());
        return Result::Failed;
      }
      for (size_t i = 0; i < expected.size(); ++i) {
        std::string d = compare(expected[i], outputs[i]);
        if (!d.empty()) {
          *why = set.filename().string() + " output '" + outputs.items[i].first + "': " + d;
          return Result::Failed;
        }
      }
    } catch (const tern::UnsupportedError& e) {
      *why = e.what();
      return Result::Skipped;
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
    else { std::cerr << "unknown argument " << a << "\n"; return 2; }
  }
  if (!fs::is_directory(dir)) {
    std::cout << "SKIP: ONNX node tests not found at '" << dir << "' (put the shared data at ../shared)\n";
    std::cout << "0 passed, 0 failed, 0 skipped\n";
    return 0;
  }
  auto allow = allow_path.empty() ? std::map<std::string, std::string>{} : read_allowlist(allow_path);
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && (filter.empty() || e.path().filename().string().find(filter) != std::string::npos))
      cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  int passed = 0, failed = 0, skipped = 0, allowed = 0;
  std::map<std::string, int> skip_reasons;
  for (const auto& c : cases) {
    std::string name = c.filename().string(), why;
    Result r = run_case(c, &why);
    bool listed = allow.count(name) != 0;
    if (r == Result::Passed) {
      ++passed;
      if (listed) std::cout << "NOTE " << name << " passes now; remove it from the allowlist\n";
      if (verbose) std::cout << "PASS " << name << "\n";
    } else if (r == Result::Skipped) {
      ++skipped;
      ++skip_reasons[skip_reason(why)];
      if (verbose) std::cout << "SKIP " << name << ": " << why << "\n";
    } else if (listed) {
      ++allowed;
      if (verbose) std::cout << "ALLOWED " << name << ": " << why << "\n";
    } else {
      ++failed;
      std::cout << "FAIL " << name << ": " << why << "\n";
    }
  }
  if (verbose) {
    std::cout << "\nskip reasons:\n";
    for (const auto& [k, v] : skip_reasons) std::cout << "  " << v << "  " << k << "\n";
  }
  std::cout << "\nconformance: " << passed << " of " << cases.size() << " node tests pass; " << allowed
            << " allowlisted failures (" << allow.size() << " allowlist entries); " << skipped
            << " use ops or types tern does not implement\n";
  std::cout << passed << " passed, " << failed << " failed, " << skipped + allowed << " skipped\n";
  return failed ? 1 : 0;
}
