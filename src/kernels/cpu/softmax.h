// Softmax-family kernels over one axis of a tensor viewed as [outer, n, inner].
#pragma once
#include <cstdint>

namespace tern::kernels {

enum class SoftmaxKind { Softmax, LogSoftmax, Hardmax };

void softmax(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, SoftmaxKind kind);

}  // namespace tern::kernels
