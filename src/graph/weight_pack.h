// A pack (`tern pack`): the weights a session prepares at load — panels in the kernels' layout, weights
// quantized by --weights, concatenations made by fusions — written once to one file beside the model
// and mapped read-only by later loads, which run on it with nothing repacked or copied.
//
// File: "TERNPACK" · u32 format version · u32 header bytes · a JSON header (what the pack was made from,
// its entries) · the data, each tensor page-aligned (4096 bytes). An entry is a list of tensors under a key (a
// node's prepared weight: "<node>/panels") or a constant made at load that no one read afterwards (its
// readers took their prepared weights from the pack), recorded as dropped so a later load does not make
// it at all.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/tensor.h"

namespace tern {

// What a pack must match to be used.
struct PackIdentity {
  std::string source;   // source_stamp of the model's files: the quick check
  std::string content;  // source_content_hash of them: checked when the stamp differs
  std::string layout;   // the kernels' packed layout, named by the session ("panel16")
  std::string weights;  // the weight format prepared ("fp32", "int4"…; SessionOptions::weights)
};

// The model's files (the .onnx and its external data) as a stamp: each name, size, inode, modification and
// status-change times (ns) and 16 pages at evenly spaced offsets. Cheap — a stat and 16 page reads a file,
// so a load stays instant. A write in place changes the status-change time even when the modification
// time is set back (utimensat cannot set it), so equal stamps mean unchanged files; unequal ones (a copy,
// a touch, an edit) send open() to the content hash.
std::string source_stamp(const std::vector<std::string>& files);
// Every byte of the model's files hashed (XXH3-64, with each name and size): a 1 GiB file in 0.15 s from the page
// cache (7 GB/s; the stamp of it: 0.2 ms).
std::string source_content_hash(const std::vector<std::string>& files);

// Where a model's pack lives: model.onnx → model.tern-pack beside it.
std::string pack_path_for(const std::string& onnx_path);

class WeightPack {
 public:
  // An empty pack that records what a session prepares, for save().
  explicit WeightPack(PackIdentity identity) : identity_(std::move(identity)) {}
  // Maps the pack at `path` for reading. Fails naming the file and what is wrong when it is not a pack
  // (magic, version, header, an entry past the end or of the wrong size), was made for another kernel
  // layout than `expected`'s, or from other files than `sources`: when the pack's stamp is not
  // `expected.source`, their content hash must be the pack's (a copied or touched model loads, a changed
  // weight is refused). `expected.content` and `.weights` are not checked (see identity()).
  // `in_memory` (--prefault), once the checks pass, copies the bytes the entries span into owned memory (2 MiB
  // pages where the kernel gives them, counted against --max-memory) and serves the entries from there: a
  // 1B-shape int4 pack decoded at 42.3-42.8 tok/s from it against 34.1-34.5 mapped (page-cache pages; huge-page
  // advice on the file mapping did not close the gap). `threads` copy it, each a share of the chunks.
  static std::shared_ptr<WeightPack> open(const std::string& path, const PackIdentity& expected, const std::vector<std::string>& sources,
                                          bool in_memory = false, int threads = 1);

  bool reading() const { return file_ != nullptr; }
  bool in_memory() const { return in_memory_; }  // read into owned memory (open's in_memory), not served mapped
  const PackIdentity& identity() const { return identity_; }
  const std::string& path() const { return path_; }
  const std::shared_ptr<MappedFile>& mapping() const { return file_; }  // null when recording

  // A weight a node prepares from its constants (`key`: "<node>/<part>"). Reading: the tensors stored
  // under it, views of the file, when it holds them; otherwise — and always when recording — make()'s,
  // which a recording pack keeps for save().
  std::vector<Tensor> prepared(const std::string& key, const std::function<std::vector<Tensor>()>& make);
  // A constant a pass makes from other constants (a fused concatenation; `key`: the new value's name).
  // Reading: the stored tensor, or — when the pack recorded it as dropped — a shape-only placeholder
  // (no data: its readers take their prepared weights from the pack), or make()'s when it holds
  // neither. Recording: make()'s, watched: save() stores it if something still holds it then, else
  // marks it dropped.
  Tensor derived(const std::string& key, DType dtype, const Shape& shape, const std::function<Tensor()>& make);

  // Writes the recorded entries to `path` (through a temporary file renamed at the end); fails naming it.
  void save(const std::string& path) const;
  // Reading: bytes of prepared weights prepared() has handed out from the file so far.
  int64_t bytes_served() const { return served_; }
  // Maps the whole file in now (MADV_POPULATE_READ), or nothing to do when it was read into memory.
  // Returns whether the weights are resident.
  bool prefault() const;

 private:
  struct Entry {
    std::vector<Tensor> tensors;  // reading: views of the file; recording: what prepared() made
    bool dropped = false;         // reading: a derived constant that was not kept
    // Recording, for derived(): the constant made, kept by save() only if something still holds it.
    bool derived = false;
    DType dtype = DType::Undefined;
    Shape shape;
    std::weak_ptr<Buffer> watched;
  };
  PackIdentity identity_;
  std::string path_;
  void read_into_memory(int threads);  // open's in_memory
  std::shared_ptr<MappedFile> file_;
  bool in_memory_ = false;
  std::map<std::string, Entry> entries_;
  int64_t served_ = 0;
};

}  // namespace tern
