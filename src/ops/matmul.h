// What MatMul (matmul.cpp) shares with its OpenCL variant (opencl/matmul_opencl.cpp): the weight it
// repacked at load, which the device takes as it is.
#pragma once
#include "kernels/cpu/gemm_packed.h"
#include "ops/op.h"

namespace tern {

class RepackedMatMul : public Op {
 public:
  // After prepack: the constant weight in the kernels' panel layout, or block-quantized; null both when
  // the node's weight is not a repacked constant.
  virtual const kernels::PackedMatrix* packed() const = 0;
  virtual const kernels::QuantizedWeights* quantized() const = 0;
};

}  // namespace tern
