// The kernels written once over the vector width (the *_impl.h headers), as one compilation of them provides
// them: the baseline build's in namespace `baseline` (the wrappers in this folder's files), tier avx2's twins of
// an x86-64-v2 build in `float_avx2` (x86/float_avx2/, kernels.h). width_kernels.inc declares each set inside its
// namespace, with the fill that puts the set in a kernel table (kernel_table.h).
#pragma once
#include "kernels/cpu/kernel_table.h"

namespace tern::kernels::baseline {
#include "kernels/cpu/width_kernels.inc"
}  // namespace tern::kernels::baseline
