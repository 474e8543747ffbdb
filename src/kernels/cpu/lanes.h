// The float vector of the file that includes this — xsimd's batch at that file's flags (the baseline's SSE width,
// AVX2 in x86/float_avx2/) — and its lane count. In an unnamed namespace: each per-ISA copy keeps its own, and
// the kernels that share them define them once (also within one unity-build batch, TERN_UNITY).
#pragma once
#include <cstdint>
#include <xsimd/xsimd.hpp>

namespace tern::kernels {
namespace {

using batch = xsimd::batch<float>;
constexpr int64_t kLanes = static_cast<int64_t>(batch::size);

}  // namespace
}  // namespace tern::kernels
