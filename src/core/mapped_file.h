// Read-only whole-file memory maps, shared by the tensors that view them (ONNX external data, GGUF).
#pragma once
#include <memory>
#include <string>

#include "core/tensor.h"

namespace tern {

// A read-only file mapping that lives as long as any tensor viewing it.
//
// A file truncated or written over while mapped (a `cp` over a served model) would end the process with
// SIGBUS at the next read past its new end. map_file registers each mapping with a SIGBUS handler (installed
// once, process-wide — a signal handler cannot be anything else — chaining to the one it replaced for
// addresses not in a mapping): a fault inside one turns the rest of that mapping into zero pages, so the read
// returns and the run finishes, and marks the mapping lost. Whoever ran on it then fails with check() —
// Session::run after every run, the GGUF importer after an import — instead of returning what zeros computed.
// The file's size, modification and status-change times are compared too: a write over that leaves the file
// as long (no fault) is caught the same way.
struct MappedFile {
  void* data = nullptr;
  size_t size = 0;
  std::string path;
  // Whether the file changed under the mapping since map_file: a page past its end faulted, or fstat differs.
  bool changed() const;
  // Fails naming the file when changed(): "'P' changed while tern was using it (truncated or written over) …".
  void check() const;
  ~MappedFile();

  int fd = -1;    // kept open for the fstat of changed()
  int slot = -1;  // the SIGBUS handler's entry for this mapping; -1: none (all 1024 taken)
  int64_t mapped_size = 0, mtime_ns = 0, ctime_ns = 0;
};

// Maps `path` (a regular file); fails naming it. Opened non-blocking and checked with fstat before anything
// is read: a FIFO, device or directory in a model folder is refused at once instead of blocking the load.
std::shared_ptr<MappedFile> map_file(const std::string& path);
// The one confinement rule for every file a model folder names or holds (ONNX external data, genai_config's
// decoder, config.json, the tokenizer, the chat template): `name` is relative to `dir`, has no "..", exists,
// is a regular file, and — symlinks resolved — lies inside `dir`'s real path. Returns that real path; fails
// naming `what` (e.g. "external data location") with the name and the rule it breaks. One layout widens
// "inside": a Hugging Face hub cache snapshot (models--ORG--NAME/snapshots/REV), whose files are links to its
// own repository's blobs (../../blobs/SHA) — those blobs count as inside, nothing else of the cache does.
std::string confined_file(const std::string& dir, const std::string& name, const std::string& what);
// Whether `dir` has an entry `name` at all — a symlink counts, wherever it points (confined_file then judges it).
bool folder_holds(const std::string& dir, const std::string& name);
// The bytes of `path` (a regular file, as map_file) when it holds at most `max_bytes`; else fails naming it
// and `what` it was read as ("chat template", "tokenizer").
std::string read_file_bytes(const std::string& path, size_t max_bytes, const std::string& what);

// The pages of a read-only file mapping wholly inside [begin, begin + bytes) leave the process
// (MADV_DONTNEED: a later read faults them in from the file again).
void drop_mapped_pages(const void* begin, size_t bytes);

// A tensor's bytes inside a mapping. When the last tensor viewing them goes (a weight repacked at load),
// the pages wholly inside them leave the process (MADV_DONTNEED on a read-only file mapping loses
// nothing: a later read would fault them in from the file again).
std::shared_ptr<Buffer> mapped_view(const std::shared_ptr<MappedFile>& file, void* at, size_t bytes);

}  // namespace tern
