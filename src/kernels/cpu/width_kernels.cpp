#include "kernels/cpu/width_kernels.h"

namespace tern::kernels {

void fill_baseline(KernelTable& t) { baseline::fill_width_kernels(t, ""); }

}  // namespace tern::kernels
