// The ONNX test-data folder layout: input_<i>.pb / output_<i>.pb, one serialized TensorProto each,
// i-th graph input / output. Used by `tern run` and the conformance runner.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "runtime/session.h"

namespace tern {

// Reads input_0.pb, input_1.pb, … from `dir` and names each after the session's i-th input (or after
// the TensorProto's own name when it names an input).
std::vector<std::pair<std::string, Tensor>> read_input_dir(const Session& session, const std::string& dir);
// Reads output_0.pb, output_1.pb, … from `dir`.
std::vector<Tensor> read_output_dir(const std::string& dir);
void write_output_dir(const Outputs& outputs, const std::string& dir);

// Compares with the ONNX test tolerances: |actual − expected| <= atol + rtol·|expected| with
// float32/64 rtol 1e-3 atol 1e-4, float16 1e-2, bfloat16 2e-2; other types exactly; NaN equals NaN.
// Returns "" when equal, else what differs.
std::string compare_tensors(const Tensor& expected, const Tensor& actual);

}  // namespace tern
