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

// Memory tern would own past the --max-memory cap (core/tensor.h take_host_bytes).
struct MemoryLimitError : Error {
  using Error::Error;
};

// A run's feeds that do not fit the graph — a name it lacks, an input missing, a wrong type or shape: the caller's
// argument, not a fault of the model (the C API's TERN_ERROR_INVALID_ARGUMENT, onnxruntime's InvalidArgument).
struct InvalidInputError : Error {
  using Error::Error;
};

// Inside a catch block: the tern error being handled again, its message prefixed (a file, a node) and
// its type kept, so callers can still tell "unsupported" and "over the memory cap" from other errors.
// Anything else is rethrown as it is.
[[noreturn]] inline void rethrow_prefixed(const std::string& prefix) {
  try {
    throw;
  } catch (const UnsupportedError& e) {
    throw UnsupportedError(prefix + e.what());
  } catch (const MemoryLimitError& e) {
    throw MemoryLimitError(prefix + e.what());
  } catch (const InvalidInputError& e) {
    throw InvalidInputError(prefix + e.what());
  } catch (const Error& e) {
    throw Error(prefix + e.what());
  }
}

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

template <typename... Args>
[[noreturn]] void fail_input(const Args&... args) {
  throw InvalidInputError(detail::concat(args...));
}

#define TERN_CHECK(cond, ...)               \
  do {                                      \
    if (!(cond)) ::tern::fail(__VA_ARGS__); \
  } while (0)

}  // namespace tern
