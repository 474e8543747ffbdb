// `tern quantize`: a copy of an ONNX model whose MatMul weights are block-quantized. Every MatMul whose
// weight is a constant 2-D float matrix becomes com.microsoft MatMulNBits (bits 4 or 8, `block` values
// per scale, asymmetric with zero points — the layout and scheme of ONNX Runtime's own quantizer, so
// ONNX Runtime runs the result too). Everything else is copied; initializers of 1 KB or more go to
// `<out>_data` next to the output.
#pragma once
#include <cstdint>
#include <string>

#include "core/progress.h"

namespace tern::convert {

// Returns how many MatMuls were rewritten. `progress`: a step per node of the graph, one more for the save.
int quantize_model(const std::string& in_path, const std::string& out_path, int64_t bits, int64_t block, const Progress& progress = {});

}  // namespace tern::convert
