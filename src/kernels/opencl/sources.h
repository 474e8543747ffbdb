// The OpenCL C kernels of src/kernels/opencl/*.cl, embedded at build time (cmake/embed_opencl.cmake).
#pragma once
#include <map>
#include <string>

namespace tern::kernels::opencl {

// File name ("decoder.cl") → source text.
const std::map<std::string, std::string>& sources();

}  // namespace tern::kernels::opencl
