// `tern quantize`: a copy of an ONNX model whose MatMul weights are block-quantized. Every MatMul whose
// weight is a constant 2-D float matrix becomes com.microsoft MatMulNBits (bits 4 or 8, `block` values
// per scale, asymmetric with zero points or symmetric — the layout and schemes of ONNX Runtime's own
// quantizer, so ONNX Runtime runs the result too). Everything else is copied; initializers of 1 KB or more go to
// `<out>_data` next to the output.
#pragma once
#include <cstdint>
#include <string>

#include "core/progress.h"

namespace tern::convert {

struct QuantizeOptions {
  int64_t bits = 4;            // 4 or 8
  int64_t block = 32;          // values per scale: a power of 2 >= 16
  bool symmetric = false;      // no zero points (kernels::quantize_nbits)
  int64_t accuracy_level = 4;  // MatMulNBits' attribute: 4 lets decode quantize activations to int8 (tern and
                               // ONNX Runtime both), 0 (not written) keeps them fp32; docs/quantize.md
};

// Returns how many MatMuls were rewritten. `progress`: a step per node of the graph, one more for the save.
int quantize_model(const std::string& in_path, const std::string& out_path, const QuantizeOptions& options = {},
                   const Progress& progress = {});

}  // namespace tern::convert
