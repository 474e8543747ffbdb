// What the row normalizations (normalization.cpp) read from their node, shared with their OpenCL
// variant (opencl/normalization_opencl.cpp).
#pragma once
#include "ops/op.h"

namespace tern {

struct NormParams {
  bool rms = false;
  int skip = -1, scale = -1, beta = -1, bias = -1;  // input indices; -1 when the op has no such input
  int64_t axis = -1;
  float eps = 1e-5f;
  bool statistics = false;  // the node reads a Mean / InvStdDev output
};
// From the op type (which inputs it has) and attributes; fails naming a node that is no normalization.
NormParams norm_params(const Node& n);

}  // namespace tern
