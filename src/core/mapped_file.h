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

// Maps `path` (a regular file); fails naming it.
std::shared_ptr<MappedFile> map_file(const std::string& path);

// A tensor's bytes inside a mapping. When the last tensor viewing them goes (a weight repacked at load),
// the pages wholly inside them leave the process (MADV_DONTNEED on a read-only file mapping loses
// nothing: a later read would fault them in from the file again).
// The pages of a read-only file mapping wholly inside [begin, begin + bytes) leave the process
// (MADV_DONTNEED: a later read faults them in from the file again).
void drop_mapped_pages(const void* begin, size_t bytes);

std::shared_ptr<Buffer> mapped_view(const std::shared_ptr<MappedFile>& file, void* at, size_t bytes);

}  // namespace tern
