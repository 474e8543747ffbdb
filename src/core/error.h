// Every failure tern reports is a tern::Error whose message names the file, node or tensor at fault.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace tern {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An op or data type tern does not implement: callers (conformance runner, `tern inspect`) treat it
// as "not supported" rather than "wrong".
struct UnsupportedError : Error {
  using Error::Error;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(detail::concat(args...));
}

template <typename... Args>
[[noreturn]] void fail_unsupported(const Args&... args) {
  throw UnsupportedError(detail::concat(args...));
}

#define TERN_CHECK(cond, ...) \
  do {                        \
    if (!(cond)) ::tern::fail(__VA_ARGS__); \
  } while (0)

}  // namespace tern
