#include "runtime/session_weights.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "kernels/cpu/gemm_packed.h"
#include "kernels/cpu/parallel.h"
#include "runtime/session.h"

namespace tern {

void SessionWeights::open_pack(const Model& model, SessionOptions& options) {
  if (options.pack == SessionOptions::Pack::Ignore) return;
  const std::string path = pack_path_for(model.path);
  const bool record = options.pack == SessionOptions::Pack::Record;
  std::error_code ec;
  if (!record && !std::filesystem::exists(path, ec)) return;
  std::vector<std::string> files{model.path};
  files.insert(files.end(), model.external_files.begin(), model.external_files.end());
  // What the panels look like to the kernels; a pack made by a build with other panels is refused.
  PackIdentity identity{source_stamp(files), "", "panel" + std::to_string(kernels::kPanel), weight_format_name(options.weights)};
  if (record) {
    identity.content = source_content_hash(files);
    pack_ = std::make_shared<WeightPack>(identity);
    return;
  }
  pack_ = WeightPack::open(path, identity, files, options.prefault, options.threads);
  const WeightFormat packed = parse_weight_format(pack_->identity().weights);
  if (options.weights != WeightFormat::AsStored && options.weights != packed)
    fail("pack '", path, "' holds weights prepared as ", pack_->identity().weights, ", this load asks for ",
         weight_format_name(options.weights), ": run `tern pack` with that --weights, or load without the pack");
  options.weights = packed;
}

namespace {

// Whether `n` reads its input `i` byte-wise whatever its alignment: a MatMul/Gemm weight (packed at prepare;
// the packers read bytes), a Gather table (rows copied), a Transpose of a MatMul's weight (canonicalize makes
// the pair one FusedMatMul reading it transposed). After prepare, only the Gather tables stay.
bool reads_misaligned(const Graph& g, const Node& n, size_t i, const std::vector<std::vector<int>>& readers) {
  const bool standard = n.domain.empty();
  if (i == 0 && standard && n.op_type == "Gather") return true;
  if (i == 1 &&
      ((standard && (n.op_type == "MatMul" || n.op_type == "Gemm")) || (n.domain == "com.microsoft" && n.op_type == "FusedMatMul")))
    return true;
  if (i == 0 && standard && n.op_type == "Transpose" && n.outputs.size() == 1 && n.outputs[0] >= 0) {
    for (int k : readers[static_cast<size_t>(n.outputs[0])]) {
      const Node& r = g.nodes[static_cast<size_t>(k)];
      if (!(r.domain.empty() && r.op_type == "MatMul" && r.inputs.size() == 2 && r.inputs[1] == n.outputs[0] &&
            r.inputs[0] != n.outputs[0]))
        return false;
    }
    return !std::count(g.outputs.begin(), g.outputs.end(), n.outputs[0]);
  }
  return false;
}

// The constant's aligned copy replaces it; the file's pages under the view leave the process.
void align_in_place(Tensor& c) {
  if (is_aligned(c)) return;
  Tensor copy = c.clone();
  if (c.buffer()) c.buffer()->drop_pages(c.raw(), c.nbytes());
  c = copy;
}

}  // namespace

void SessionWeights::align_constants(Graph& g) {
  std::vector<std::vector<int>> readers(g.values.size());
  for (size_t k = 0; k < g.nodes.size(); ++k)  // (a subgraph's reads are its node's inputs: graph/ir.h outer_values_read)
    for (int in : g.nodes[k].inputs)
      if (in >= 0) readers[static_cast<size_t>(in)].push_back(static_cast<int>(k));
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (!g.values[v].constant || is_aligned(*g.values[v].constant)) continue;
    bool byte_wise = !std::count(g.outputs.begin(), g.outputs.end(), static_cast<int>(v));
    for (int k : readers[v]) {
      const Node& n = g.nodes[static_cast<size_t>(k)];
      for (size_t i = 0; i < n.inputs.size() && byte_wise; ++i)
        if (n.inputs[i] == static_cast<int>(v)) byte_wise = reads_misaligned(g, n, i, readers);
    }
    if (!byte_wise) align_in_place(*g.values[v].constant);
  }
}

namespace {

// How many nodes read each constant (-1: a graph output, kept whatever its readers do).
std::vector<int> constant_readers(const Graph& g) {
  std::vector<int> readers(g.values.size(), 0);
  for (const Node& n : g.nodes)
    for (int in : n.inputs)
      if (in >= 0 && g.values[static_cast<size_t>(in)].constant) ++readers[static_cast<size_t>(in)];
  for (int o : g.outputs) readers[static_cast<size_t>(o)] = -1;  // handed to the caller: kept
  return readers;
}

// Node n's constant inputs (null for the others).
void constant_inputs(const Graph& g, const Node& n, std::vector<const Tensor*>& constants) {
  constants.assign(n.inputs.size(), nullptr);
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (n.inputs[i] >= 0 && g.values[static_cast<size_t>(n.inputs[i])].constant)
      constants[i] = &*g.values[static_cast<size_t>(n.inputs[i])].constant;
}

// Node n's inputs a fusion left as parts (graph/ir.h ConstantParts; null for the others); whether it has any.
bool constant_parts(const Graph& g, const Node& n, std::vector<const ConstantParts*>& parts) {
  parts.assign(n.inputs.size(), nullptr);
  bool any = false;
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (n.inputs[i] >= 0 && g.values[static_cast<size_t>(n.inputs[i])].parts) {
      parts[i] = g.values[static_cast<size_t>(n.inputs[i])].parts.get();
      any = true;
    }
  return any;
}

// Bytes a repacked concatenation's parts give back once the parts are let go: those in owned memory nothing else
// holds (file pages are the packers' to drop as they read them).
int64_t owned_part_bytes(const ConstantParts& parts) {
  int64_t bytes = 0;
  for (const Tensor& t : parts.tensors)
    if (t.buffer() && t.buffer()->owned() && t.buffer().use_count() == 1) bytes += static_cast<int64_t>(t.buffer()->bytes());
  return bytes;
}

}  // namespace

PackSettings SessionWeights::pack_settings(const SessionOptions& options, const Node& n) const {
  PackSettings settings;
  settings.cpu = {options.threads, nullptr, *options.isa};
  settings.weights = options.weights;
  settings.activations = options.activations;
  settings.every_row_as_decode = options.every_row_as_decode;
  settings.pack = pack_.get();
  settings.node = n.name;
  return settings;
}

void SessionWeights::check_predicted_peak(const Graph& g, const std::vector<std::unique_ptr<Op>>& ops,
                                          const SessionOptions& options) const {
  // Each node's packer plans (WeightPacker::plan: the sizes of what it would make, nothing made); the walk adds
  // what each node makes and takes away the owned originals its repacking frees, as prepare() will. The highest
  // point, beyond what is held now, must fit both caps. A concatenation left as parts counts its whole where the
  // op makes it (then freed with it, as an owned constant), else the parts' owned bytes freed once repacked from them.
  std::vector<int> readers = constant_readers(g), done_with(g.values.size(), 0);
  std::vector<const Tensor*> constants;
  std::vector<const ConstantParts*> parts;
  int64_t made = 0, freed = 0, peak = 0;
  size_t at_peak = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    const WeightPacker* packer = ops[k]->packer();
    constant_inputs(g, n, constants);
    if (std::none_of(constants.begin(), constants.end(), [](const Tensor* t) { return t != nullptr; })) continue;
    const bool has_parts = constant_parts(g, n, parts);
    int64_t whole_bytes = 0;
    std::vector<char> made_whole(n.inputs.size(), 0);
    PackPlan plan;
    try {
      auto make_whole = [&](size_t i) {
        if (!parts[i]) return;
        whole_bytes += static_cast<int64_t>(constants[i]->nbytes());
        made_whole[i] = 1;
        parts[i] = nullptr;
      };
      if (has_parts && !(packer && packer->packs_from_parts()))
        for (size_t i = 0; i < parts.size(); ++i) make_whole(i);
      if (packer) {
        PackSettings settings = pack_settings(options, n);
        settings.parts = has_parts ? &parts : nullptr;
        settings.make_whole = make_whole;
        plan = packer->plan(constants, settings);
      }
    } catch (...) {
      rethrow_naming(n);
    }
    made += whole_bytes + plan.bytes;
    if (made - freed > peak) peak = made - freed, at_peak = k;
    for (int i : plan.unread) {
      const auto v = static_cast<size_t>(n.inputs[static_cast<size_t>(i)]);
      const Tensor& c = *g.values[v].constant;
      if (made_whole[static_cast<size_t>(i)]) freed += static_cast<int64_t>(c.nbytes());
      else if (g.values[v].parts) freed += owned_part_bytes(*g.values[v].parts);
      else if (++done_with[v] == readers[v] && c.buffer() && c.raw() && c.buffer()->owned()) freed += static_cast<int64_t>(c.nbytes());
    }
  }
  if (peak > 0)
    check_host_bytes(static_cast<size_t>(peak),
                     detail::concat("repacking the weights would pass it by node '", g.nodes[at_peak].name,
                                    "' (predicted before repacking any: ", memory_size(static_cast<size_t>(peak)), " more at the peak, ",
                                    memory_size(static_cast<size_t>(made)), " made in all): "));
}

void SessionWeights::prepare(Graph& g, const std::vector<std::unique_ptr<Op>>& ops, const SessionOptions& options,
                             kernels::opencl::Kernels* device_kernels) {
  graph_ = &g;
  ops_ = &ops;
  // (On a device the variants upload to its memory, which the caps do not count.)
  if (!device_kernels) check_predicted_peak(g, ops, options);
  std::vector<int> readers = constant_readers(g), done_with(g.values.size(), 0);
  constant_reads_.assign(g.values.size(), 0);
  std::vector<const Tensor*> constants;
  std::vector<const ConstantParts*> parts;
  BufferArena arena;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    constant_inputs(g, n, constants);
    const bool has_parts = constant_parts(g, n, parts);
    std::vector<int> repacked;
    try {
      // (In place: constants[i] points at the value's tensor, which then holds the concatenation.)
      auto make_whole = [&](size_t i) {
        Value& v = g.values[static_cast<size_t>(n.inputs[i])];
        if (!parts[i] || !v.parts) return;
        *v.constant = v.parts->whole();
        v.parts.reset();
        parts[i] = nullptr;
      };
      WeightPacker* packer = ops[k]->packer();
      if (has_parts && !(packer && packer->packs_from_parts()))
        for (size_t i = 0; i < parts.size(); ++i) make_whole(i);
      if (packer) {
        PackSettings settings = pack_settings(options, n);
        settings.device = device_kernels;
        settings.arena = &arena;
        settings.parts = has_parts ? &parts : nullptr;
        settings.make_whole = make_whole;
        repacked = packer->pack(constants, settings);
      }
    } catch (...) {
      rethrow_naming(n);
    }
    for (int i : repacked) g.values[static_cast<size_t>(n.inputs[static_cast<size_t>(i)])].parts.reset();  // (packed from them)
    // A constant with no data (a concatenation a pack recorded as dropped, or one left as parts) must be one this
    // node repacked: a hostile or stale pack could otherwise hand a run a null weight.
    for (size_t i = 0; i < constants.size(); ++i)
      if (constants[i] && constants[i]->numel() > 0 && !constants[i]->raw() &&
          std::find(repacked.begin(), repacked.end(), static_cast<int>(i)) == repacked.end())
        fail(n.describe(), ": its input '", g.values[static_cast<size_t>(n.inputs[i])].name, "' has no data (",
             pack_ ? "the pack '" + pack_->path() + "' recorded it as dropped; run `tern pack` again" : "dropped at load", ")");
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const int v = n.inputs[i];
      if (v < 0 || !g.values[static_cast<size_t>(v)].constant ||
          std::find(repacked.begin(), repacked.end(), static_cast<int>(i)) != repacked.end())  // read from its copy
        continue;
      // Runs read a misaligned view only as a Gather table (align_constants); a weight this node did not
      // repack after all (on a device, or not 2-D) gets its aligned copy now.
      if (!(i == 0 && n.domain.empty() && n.op_type == "Gather")) align_in_place(*g.values[static_cast<size_t>(v)].constant);
      char& r = constant_reads_[static_cast<size_t>(v)];
      r = n.op_type == "Gather" && i == 0 && r != 1 ? 2 : 1;
    }
    for (int i : repacked) {
      // A weight every reader has repacked is dropped at once (load never holds two copies of all the
      // weights): its shape-only placeholder keeps the bookkeeping, the memory — or the file pages it
      // was mapped from — goes back to the system.
      const auto v = static_cast<size_t>(n.inputs[static_cast<size_t>(i)]);
      if (++done_with[v] == readers[v]) {
        Tensor& c = *g.values[v].constant;
        if (c.buffer() && c.raw()) c.buffer()->drop_pages(c.raw(), c.nbytes());  // (a file mapping's: its pages read)
        c = Tensor(c.dtype(), c.shape(), nullptr);
      }
    }
    if (options.on_load_progress) options.on_load_progress(static_cast<int64_t>(k) + 1, static_cast<int64_t>(g.nodes.size()));
  }
  bytes_per_token_ = count_bytes_per_token();
  if (options.prefault) {
    prefault_mapped(g);
    if (pack_) pack_->prefault();
  }
}

void SessionWeights::save_pack(const std::string& path) const {
  if (!pack_ || pack_->reading()) fail("save_pack: the session was not loaded with SessionOptions::Pack::Record");
  pack_->save(path);
}

void SessionWeights::count(MemoryUse& m) const {
  for (const auto& op : *ops_)
    if (const WeightPacker* p = op->packer()) m.packed_weights += p->packed_bytes();
  if (pack_ && pack_->reading() && !pack_->in_memory()) {  // (read into memory: owned, packed weights)
    m.mapped_prepared = pack_->bytes_served();
    m.packed_weights -= m.mapped_prepared;
  }
  std::set<const Buffer*> seen;  // a buffer several constants view counts once
  for (const Value& v : graph_->values)
    if (v.constant && v.constant->buffer() && seen.insert(v.constant->buffer().get()).second)
      (v.constant->buffer()->owned() ? m.owned_constants : m.mapped_constants) += static_cast<int64_t>(v.constant->buffer()->bytes());
}

void SessionWeights::prefault_mapped(const Graph& g) const {
  // Gather tables are left to fault row by row: mapping all of one (a 1 GB embedding) costs its size in
  // RSS for the few rows a prompt reads — also when a tied LM head reads the same table, from its copy.
  for (size_t v = 0; v < g.values.size(); ++v)
    if (constant_reads_[v] == 1 && g.values[v].constant && g.values[v].constant->buffer()) g.values[v].constant->buffer()->prefault();
}

int64_t SessionWeights::count_bytes_per_token() const {
  const Graph& g = *graph_;
  const std::vector<char>& reads = constant_reads_;
  int64_t n = 0;
  for (const auto& op : *ops_)  // weights repacked at load, as they are kept
    if (const WeightPacker* p = op->packer()) n += p->packed_bytes();
  for (size_t v = 0; v < g.values.size(); ++v) {
    const auto& c = g.values[v].constant;
    if (!reads[v] || !c || !c->raw() || c->numel() < 1024) continue;  // small constants are not weights
    const int64_t bytes = static_cast<int64_t>(c->nbytes());
    n += reads[v] == 2 ? bytes / std::max<int64_t>(c->dim(0), 1) : bytes;
  }
  return n;
}

}  // namespace tern
