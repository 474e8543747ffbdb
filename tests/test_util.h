#pragma once
#include <string>

#include "core/error.h"

namespace tern::test {

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

}  // namespace tern::test
