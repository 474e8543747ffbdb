#pragma once
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/error.h"
#include "kernels/cpu/context.h"

namespace tern::test {

// What a kernel called from a test runs with: `threads` threads and scratch of its own (a session gives each run
// one: runtime/session.cpp RunState).
struct KernelContext : kernels::Context {
  explicit KernelContext(int threads = 1) : kernels::Context{threads, &own} {}
  KernelContext(const KernelContext&) = delete;
  KernelContext& operator=(const KernelContext&) = delete;
  // The same at tier `isa` (one the CPU runs).
  kernels::Context at(kernels::Isa tier) const { return {threads, scratch, tier}; }
  kernels::Workspace own;
};

// The message of the tern::Error `f` throws ("" if it throws none); other exceptions propagate.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const tern::Error& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A file's bytes ("" when it cannot be read: the comparison that reads it then fails).
inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace tern::test
