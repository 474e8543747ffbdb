// What each fuzz target feeds tern: one function a parser, taking the fuzzer's bytes as the file (or the
// text) a user would hand tern. The same functions run the libFuzzer binaries (fuzz_main.cpp) and the
// hostile-input regression files of tests/bad_inputs (test_bad_inputs.cpp), so a reproducer replays the
// exact path the fuzzer took.
//
// Contract: bad input ends in a tern::Error (its message naming the file, field, tensor or node); any other
// exception, a crash or a sanitizer report is a bug.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tern::fuzz {

struct Target {
  const char* name;  // the libFuzzer binary is fuzz_<name>; corpus and bad inputs under <name>/
  void (*run)(const uint8_t* data, size_t size);
  const char* input;  // what the bytes are, for --help and the docs
};

const std::vector<Target>& targets();
const Target* find_target(const std::string& name);

// The memory cap every target runs under: a claim past it must be refused before it is allocated, not
// discovered by the sanitizer's allocator or the OOM killer. Set process-wide (set_process_memory_limit) before
// the first input — converters allocate before any session exists — and as each session's max_memory.
constexpr size_t kMemoryCap = size_t{256} << 20;

}  // namespace tern::fuzz
