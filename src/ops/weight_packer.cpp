#include "ops/weight_packer.h"

#include "graph/weight_pack.h"
#include "kernels/cpu/gemm_packed.h"

namespace tern {

WeightFormat parse_weight_format(const std::string& name) {
  if (name == "fp32" || name == "as-stored") return WeightFormat::AsStored;
  if (name == "fp16") return WeightFormat::Float16;
  if (name == "bf16") return WeightFormat::BFloat16;
  if (name == "int8") return WeightFormat::Int8;
  if (name == "int4") return WeightFormat::Int4;
  fail("--weights must be fp32, fp16, bf16, int8 or int4, got '", name, "'");
}

const char* weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::AsStored: return "fp32";
    case WeightFormat::Float16: return "fp16";
    case WeightFormat::BFloat16: return "bf16";
    case WeightFormat::Int8: return "int8";
    case WeightFormat::Int4: return "int4";
  }
  return "?";
}

ActivationFormat parse_activation_format(const std::string& name) {
  if (name == "auto") return ActivationFormat::AsModel;
  if (name == "fp32") return ActivationFormat::Float32;
  if (name == "int8") return ActivationFormat::Int8;
  fail("--activations must be auto, fp32 or int8, got '", name, "'");
}

kernels::NBitsActivations nbits_activations(const PackSettings& settings, bool model_asks_int8) {
  const ActivationFormat format = settings.activations;
  const bool int8 = format == ActivationFormat::Int8 || (format == ActivationFormat::AsModel && model_asks_int8);
  if (!int8) return kernels::NBitsActivations::Float32;
  // Every row, a prefill's too, as ONNX Runtime runs accuracy_level 4 (docs/quantize.md): a prompt's products are a
  // decode step's arithmetic, and the prefill mostly faster — `tern bench /tmp/smol-int4 --prompt-tokens N --threads
  // 2` (SmolLM2-135M, `tern quantize --bits 4`), alternated, Zen 5: N = 128 1823 / 1836 / 1774 → 1914 / 1986 / 2075
  // tok/s, 512 1659 / 1601 → 1819 / 1754, 2048 1046 / 1057 → 1148 / 1114; Zen 3 +16% at 128; SmolLM2's Q4_1 GGUF −6%
  // at 512 (four rows a pass). Not at tier amx, whose float prefill runs bf16 tiles, unmeasured against it there
  // (every_row_as_decode asks for it).
  const bool every_row = settings.every_row_as_decode || settings.cpu.isa != kernels::Isa::Amx;
  return every_row ? kernels::NBitsActivations::Int8EveryRow : kernels::NBitsActivations::Int8;
}

std::vector<const Tensor*> PackTarget::stacked_parts(size_t i, int64_t granule) const {
  const ConstantParts* p = parts && i < parts->size() ? (*parts)[i] : nullptr;
  if (!p) return {};
  std::vector<const Tensor*> stacked;
  for (const Tensor& t : p->tensors) {
    if (stacked.size() + 1 < p->tensors.size() && p->extent(t) % granule != 0) {
      make_whole(i);
      return {};
    }
    stacked.push_back(&t);
  }
  return stacked;
}

void PackTarget::ensure_whole(size_t i) const {
  if (parts && i < parts->size() && (*parts)[i]) make_whole(i);
}

std::vector<Tensor> PackMaker::prepared(const std::string& part, const std::vector<std::pair<DType, int64_t>>& expect,
                                        const std::function<std::vector<Tensor>()>& make) const {
  const auto made = [&] {
    std::vector<Tensor> parts = make();
    if (arena)
      for (Tensor& t : parts) t = arena->hold(t);
    return parts;
  };
  if (!pack) return made();
  const std::string key = node + "/" + part;
  std::vector<Tensor> parts = pack->prepared(key, made);
  bool fits = parts.size() == expect.size();
  for (size_t i = 0; fits && i < parts.size(); ++i)
    fits = (expect[i].first == DType::Undefined || parts[i].dtype() == expect[i].first) && parts[i].numel() == expect[i].second;
  if (!fits) fail("pack '", pack->path(), "': entry '", key, "' does not hold what this node prepares: run `tern pack` again");
  return parts;
}

std::vector<Tensor> PackPlanner::prepared(const std::string&, const std::vector<std::pair<DType, int64_t>>& expect,
                                          const std::function<std::vector<Tensor>()>&) const {
  const bool served = pack && pack->reading();  // mapped from the pack (or read whole when it was opened)
  std::vector<Tensor> parts;
  for (const auto& [dtype, count] : expect) {
    const DType type = dtype == DType::Undefined ? DType::Float32 : dtype;  // (of the forms it may take, the larger)
    if (!served) bytes_ += count * static_cast<int64_t>(dtype_size(type));
    parts.emplace_back(type, Shape{count}, nullptr);
  }
  return parts;
}

Tensor PackPlanner::kept(DType dtype, const Shape& shape, const std::function<Tensor()>&) const {
  Tensor placeholder(dtype, shape, nullptr);
  bytes_ += static_cast<int64_t>(placeholder.nbytes());
  return placeholder;
}

}  // namespace tern
