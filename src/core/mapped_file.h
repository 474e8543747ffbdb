// Read-only whole-file memory maps, shared by the tensors that view them (ONNX external data, GGUF).
#pragma once
#include <memory>
#include <string>

#include "core/tensor.h"

namespace tern {

// A read-only file mapping that lives as long as any tensor viewing it.
struct MappedFile {
  void* data = nullptr;
  size_t size = 0;
  ~MappedFile();
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
