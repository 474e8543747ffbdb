// Arithmetic on sizes a file gives — dims, pads, slice bounds and steps, split sizes, repeats. Signed overflow
// is undefined behaviour, and a release build would carry on with a wrapped size (UBSan found pads near 2^62,
// a step of INT64_MIN and split sizes near INT64_MAX doing so). Shape rules do their sums, products and
// negations of such values through these, which fail naming `what` instead.
#pragma once
#include <cstdint>
#include <limits>

#include "core/error.h"

namespace tern {

inline int64_t checked_add(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail(what, ": ", a, " + ", b, " does not fit an int64");
  return r;
}
inline int64_t checked_sub(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) fail(what, ": ", a, " - ", b, " does not fit an int64");
  return r;
}
inline int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail(what, ": ", a, " x ", b, " does not fit an int64");
  return r;
}
inline int64_t checked_neg(int64_t a, const char* what) {
  if (a == std::numeric_limits<int64_t>::min()) fail(what, ": -(", a, ") does not fit an int64");
  return -a;
}

}  // namespace tern
