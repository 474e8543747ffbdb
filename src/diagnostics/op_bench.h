// `tern bench-op`: one op, alone, at a given shape — the op as a session runs it (its prepacked weights,
// its kernel choice), timed by the profiler's hook and costed by op_cost, for kernel work.
#pragma once
#include <string>
#include <vector>

#include "kernels/kv_storage.h"
#include "ops/op.h"
#include "ops/weight_packer.h"

namespace tern {

struct OpBenchSpec {
  std::string op;                                            // matmul, matmulnbits, rmsnorm, rope, softmax, swiglu, attention
  std::vector<int64_t> shape;                                // what each op's dims mean: op_bench_usage()
  DType dtype = DType::Float32;                              // activations (and float weights)
  WeightFormat weights = WeightFormat::AsStored;             // matmul: how the constant weight is kept
  ActivationFormat activations = ActivationFormat::AsModel;  // matmul int8/int4, matmulnbits: fp32 or int8 decode rows
  int64_t bits = 4, block = 32;                              // matmulnbits: the blocks' width and length
  kernels::KvStorage kv_dtype = kernels::KvStorage::F32;     // attention: ring storage
  int threads = 0;
  Device device;         // cpu, or an OpenCL device (the op runs there when it can)
  double seconds = 0.5;  // timed runs go on until this much node time, at least 10 and at most 10,000
};

struct OpBenchResult {
  std::string graph;       // the node benchmarked, e.g. "MatMul [1,2048] x [2048,8192] (constant, int4)"
  std::string kernel;      // op_kernel
  bool on_device = false;  // ran on spec.device (else on the CPU)
  int64_t runs = 0;
  double median_ms = 0, min_ms = 0;
  double flops = 0, bytes = 0;  // per run (op_cost)
};

OpBenchResult bench_op(const OpBenchSpec& spec);
const char* op_bench_usage();

}  // namespace tern
