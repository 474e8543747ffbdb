// What a session does with the model's weights: takes them from a pack or repacks them for the kernels at load
// (WeightPacker::pack), drops the originals nobody reads, prefaults what runs read from the files, and accounts for
// them. Built once by the session's load; read-only after it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "graph/onnx_loader.h"
#include "graph/weight_pack.h"
#include "ops/op.h"
#include "ops/weight_packer.h"

namespace tern {

struct SessionOptions;
struct MemoryUse;

class SessionWeights {
 public:
  // SessionOptions::pack: maps the pack beside the model (which then sets options.weights), or starts recording
  // one. Before the passes, which take prepared constants from it.
  void open_pack(const Model& model, SessionOptions& options);
  // Before the passes: the misaligned views of the model file the loader left (LoadOptions::misaligned_views)
  // stay only where every reader reads them byte-wise (reads_misaligned); the others become aligned copies.
  static void align_constants(Graph& g);
  // After the passes, with the graph's ops: lets each op repack its constant weights, frees the originals nobody
  // reads, notes how runs read each constant; with SessionOptions::prefault, maps in what they read.
  void prepare(Graph& g, const std::vector<std::unique_ptr<Op>>& ops, const SessionOptions& options,
               kernels::opencl::Kernels* device_kernels);

  // The pack the weights were read from or recorded for; null when none.
  const WeightPack* pack() const { return pack_.get(); }
  WeightPack* pack() { return pack_.get(); }  // (the load's passes record the weights they make into it)
  // With SessionOptions::Pack::Record: writes what the load prepared as the pack at `path`.
  void save_pack(const std::string& path) const;
  // Bytes of weights a decode step reads: every constant a node reads whole, and one row per token of a
  // table read by Gather (embeddings).
  int64_t bytes_per_token() const { return bytes_per_token_; }
  // The weights' part of Session::memory_use: packed, owned and mapped constants, prepared weights mapped from
  // the pack.
  void count(MemoryUse& m) const;

 private:
  // Fails (MemoryLimitError) when repacking the weights would pass the session's or the process's memory cap,
  // before any is repacked: a small device's load then stops at once, not minutes in, naming the node.
  // What node n packs with: the session's threads, tier, weight and activation formats, and pack (the caller adds
  // the device, arena and parts where it has them).
  PackSettings pack_settings(const SessionOptions& options, const Node& n) const;
  void check_predicted_peak(const Graph& g, const std::vector<std::unique_ptr<Op>>& ops, const SessionOptions& options) const;
  void prefault_mapped(const Graph& g) const;
  int64_t count_bytes_per_token() const;
  const Graph* graph_ = nullptr;
  const std::vector<std::unique_ptr<Op>>* ops_ = nullptr;
  std::shared_ptr<WeightPack> pack_;
  // Per value: 1 if a run reads the constant whole, 2 if only as a Gather table (a row a token), 0 if no run
  // reads it (reads of a weight an op repacked at load go to the copy).
  std::vector<char> constant_reads_;
  int64_t bytes_per_token_ = 0;
};

}  // namespace tern
