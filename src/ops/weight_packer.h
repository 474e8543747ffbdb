// The opt-in interface of ops that repack constant weights at load (MatMul's panels, MatMulNBits' groups,
// MatMulInteger's rows, CachedAttention's RoPE tables): an op writes its packing rule once, as
// PacksWeights::prepare against a PackTarget; the session asks it twice — plan() before anything is packed (the
// bytes the rule would make, checked against the memory cap), pack() to make them. The rule never asks which.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "kernels/cpu/context.h"

namespace tern::kernels {
enum class NBitsActivations;  // kernels/cpu/gemm_packed.h
}

namespace tern::kernels::opencl {
class Kernels;
}

namespace tern {

class WeightPack;

// How ops keep the constant weights they repack at load (SessionOptions::weights, `--weights`): as the
// file stores them, or converted — fewer bytes streamed per token, for some accuracy.
enum class WeightFormat { AsStored, Float16, BFloat16, Int8, Int4 };
// How block-quantized products (MatMulNBits, --weights int8/int4) treat the activations
// (SessionOptions::activations, `--activations`): as the model asks — int8 where a MatMulNBits says
// accuracy_level 4, as ONNX Runtime does, fp32 elsewhere — or fp32 / int8 everywhere. Int8 in every row, a
// prefill's too, but at tier amx, where only decode rows take it (nbits_activations).
enum class ActivationFormat { AsModel, Float32, Int8 };
// "fp32", "fp16", "bf16", "int8", "int4": the names parse_weight_format takes.
const char* weight_format_name(WeightFormat format);
// "fp32" (as stored), "fp16", "bf16", "int8", "int4"; fails naming the choices.
WeightFormat parse_weight_format(const std::string& name);
// "auto" (as the model asks), "fp32", "int8"; fails naming the choices.
ActivationFormat parse_activation_format(const std::string& name);

// What the session packs one node's weights with.
struct PackSettings {
  kernels::Context cpu;  // the load's threads (no scratch: packing needs none)
  WeightFormat weights = WeightFormat::AsStored;
  ActivationFormat activations = ActivationFormat::AsModel;
  // Every row as a decode row (SessionOptions::every_row_as_decode): int8 activations, where `activations`
  // gives them, in a prefill too.
  bool every_row_as_decode = false;
  // The OpenCL device a session runs on: device variants (ops/opencl/) upload their weights to it.
  kernels::opencl::Kernels* device = nullptr;
  // The session's pack (graph/weight_pack.h), read or being recorded; null: none.
  WeightPack* pack = nullptr;
  std::string node;  // the node being prepared: its name keys its parts in the pack
  // Where made parts under 4 MiB are kept, side by side in huge pages (core/tensor.h); null: where made.
  BufferArena* arena = nullptr;
  // For a packer that packs from parts (WeightPacker::packs_from_parts): per input, what a fusion left unmade
  // (graph/ir.h ConstantParts; null for a whole input), `constants` holding its shape-only placeholder; and
  // what makes input i whole (constants[i] then holds its data — when packing; a plan counts its bytes), which
  // the rule calls before it reads such an input whole.
  const std::vector<const ConstantParts*>* parts = nullptr;
  std::function<void(size_t)> make_whole;
};

// What a block-quantized product runs with under `settings`' activations, where the model asks for int8
// (MatMulNBits accuracy_level 4) or not (tern's own --weights int8/int4 matrices).
kernels::NBitsActivations nbits_activations(const PackSettings& settings, bool model_asks_int8);

// Where a packing rule puts what it makes: PackMaker makes it (or maps it from the pack), PackPlanner makes
// nothing and counts the bytes it would have made.
class PackTarget : public PackSettings {
 public:
  explicit PackTarget(const PackSettings& settings) : PackSettings(settings) {}
  virtual ~PackTarget() = default;
  // The tensors `part` of this node's prepared weight: from the pack when it holds them — each must have the
  // dtype and element count in `expect`, or the load fails naming the pack and the entry — else make()'s (kept
  // when the session records a pack). An `expect` dtype Undefined takes any: the rule checks it. Planned: tensors
  // of the expected sizes without data.
  virtual std::vector<Tensor> prepared(const std::string& part, const std::vector<std::pair<DType, int64_t>>& expect,
                                       const std::function<std::vector<Tensor>()>& make) const = 0;
  // A tensor the op keeps that no pack holds (a re-sorted copy, a converted table): make()'s; planned, one of
  // `dtype` and `shape` without data.
  virtual Tensor kept(DType dtype, const Shape& shape, const std::function<Tensor()>& make) const = 0;
  // Memory the op keeps that a kernel derives from what prepared() gave (column sums): counted when planned.
  virtual void derives(int64_t /*bytes*/) const {}

  // Input i's parts, for a layout made of pieces `granule` long along the concatenation's axis that stacks them
  // as they are: when each part but the last spans a multiple of it. Otherwise none, and input i is made
  // whole (none either for an input that is whole).
  std::vector<const Tensor*> stacked_parts(size_t i, int64_t granule) const;
  // Makes input i whole when it is parts (for an op reading it whole at every run).
  void ensure_whole(size_t i) const;
};

class PackMaker final : public PackTarget {
 public:
  using PackTarget::PackTarget;
  std::vector<Tensor> prepared(const std::string& part, const std::vector<std::pair<DType, int64_t>>& expect,
                               const std::function<std::vector<Tensor>()>& make) const override;
  Tensor kept(DType, const Shape&, const std::function<Tensor()>& make) const override { return make(); }
};

class PackPlanner final : public PackTarget {
 public:
  using PackTarget::PackTarget;
  std::vector<Tensor> prepared(const std::string& part, const std::vector<std::pair<DType, int64_t>>& expect,
                               const std::function<std::vector<Tensor>()>& make) const override;
  Tensor kept(DType dtype, const Shape& shape, const std::function<Tensor()>& make) const override;
  void derives(int64_t bytes) const override { bytes_ += bytes; }
  int64_t bytes() const { return bytes_; }

 private:
  mutable int64_t bytes_ = 0;
};

// What packing one node's weights would make.
struct PackPlan {
  int64_t bytes = 0;        // kept after the load
  std::vector<int> unread;  // the inputs pack() would leave unread (WeightPacker::pack)
};

class WeightPacker {
 public:
  virtual ~WeightPacker() = default;
  // What pack() would make with these constants (null for the other inputs) and settings, nothing made: the
  // session checks the memory cap against the load's predicted peak before it packs anything.
  virtual PackPlan plan(const std::vector<const Tensor*>& constants, const PackSettings& settings) const = 0;
  // Repacks the weights into its kernels' layout, once. Returns the inputs it will not read again; the session
  // frees those no other node reads (their dtype and shape stay, the data goes).
  virtual std::vector<int> pack(const std::vector<const Tensor*>& constants, const PackSettings& settings) = 0;
  // Whether pack() takes PackSettings::parts: it packs a concatenation a fusion left unmade from its parts, or
  // makes it whole (make_whole) before reading it. For any other op the session makes it whole first.
  virtual bool packs_from_parts() const { return false; }
  // Bytes of the weights pack() made (read whole at every run).
  virtual int64_t packed_bytes() const = 0;
};

// A packer whose rule is one const function, prepare(), filling a `Weights` (what run() reads): plan() runs it on
// a PackPlanner and drops what it filled, pack() on a PackMaker and keeps it.
template <typename Weights>
class PacksWeights : public WeightPacker {
 public:
  PackPlan plan(const std::vector<const Tensor*>& constants, const PackSettings& settings) const final {
    const PackPlanner planner(settings);
    Weights dropped;
    std::vector<int> unread = prepare(constants, planner, dropped);
    return {planner.bytes(), std::move(unread)};
  }
  std::vector<int> pack(const std::vector<const Tensor*>& constants, const PackSettings& settings) final {
    return prepare(constants, PackMaker(settings), weights_);
  }

 protected:
  // The packing rule: fills `into` through `to`; returns the inputs it leaves unread.
  virtual std::vector<int> prepare(const std::vector<const Tensor*>& constants, const PackTarget& to, Weights& into) const = 0;
  const Weights& prepared() const { return weights_; }

 private:
  Weights weights_;
};

}  // namespace tern
