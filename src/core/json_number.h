// Numbers read from JSON files, checked. nlohmann's get<int64_t>() of 1e300, or get<float>() of 1e300, is a
// float conversion out of range — undefined behaviour, not an exception — so numbers tern takes from a file
// (tokenizer.json, generation_config.json, a pack's header) come through these instead.
#pragma once
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"

namespace tern {

// An integer in [lo, hi]; `what` names the field in the error.
inline int64_t json_int(const nlohmann::json& v, const std::string& what, int64_t lo = std::numeric_limits<int64_t>::min(),
                        int64_t hi = std::numeric_limits<int64_t>::max()) {
  if (!v.is_number_integer()) fail(what, " must be an integer, not ", v.dump().substr(0, 40));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) fail(what, " ", v.dump(), " is out of range");
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) fail(what, " ", x, " is out of range [", lo, ", ", hi, "]");
  return x;
}

// A finite number that fits a float.
inline float json_float(const nlohmann::json& v, const std::string& what) {
  if (!v.is_number()) fail(what, " must be a number, not ", v.dump().substr(0, 40));
  const double d = v.get<double>();
  if (!(std::fabs(d) <= FLT_MAX)) fail(what, " ", d, " does not fit a float");
  return static_cast<float>(d);
}

}  // namespace tern
