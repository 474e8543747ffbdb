// What MatMul (matmul.cpp) shares with its OpenCL variant (opencl/matmul_opencl.cpp): the weight it
// repacked at load, which the device takes as it is; and with MatMulNBits (matmul_nbits.cpp): 4-bit
// weights grouped for the int8 decode GEMV.
#pragma once
#include <optional>

#include "kernels/cpu/gemm_packed.h"
#include "ops/op.h"
#include "ops/weight_packer.h"

namespace tern {

// What MatMul keeps of a constant weight: its panels, or its block-quantized form and the activations its decode
// rows run with; neither when the node's weight is not a repacked constant.
struct MatMulWeights {
  std::optional<kernels::PackedMatrix> packed;  // or
  std::optional<kernels::QuantizedWeights> quantized;
  kernels::NBitsActivations activations = kernels::NBitsActivations::Float32;  // for quantized
};

class RepackedMatMul : public Op {
 public:
  // After pack: the constant weight in the kernels' panel layout, or block-quantized; null both when
  // the node's weight is not a repacked constant.
  virtual const kernels::PackedMatrix* packed() const = 0;
  virtual const kernels::QuantizedWeights* quantized() const = 0;
};

// Whether a session packing with `options` regroups 2- and 4-bit weights shaped like `w` for a decode with
// activations `act` (kernels::nbits_groups_native: on x86 from tier avx2, on AArch64 for fp32 activations), not on
// a device (whose variant uploads the file's layout).
bool regroups_nbits(const kernels::NBitsWeights& w, const PackSettings& options, kernels::NBitsActivations act);
// The grouped weights: the pack's entry `<node>/<part>` or make()'s, checked against `w`'s sizes.
kernels::QuantizedWeights prepared_nbits_groups(const PackTarget& options, const std::string& part, const kernels::NBitsWeights& w,
                                                const std::function<kernels::QuantizedWeights()>& make);

}  // namespace tern
