#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace tern {

MappedFile::~MappedFile() {
  if (data && size) munmap(data, size);
}

void drop_mapped_pages(const void* begin, size_t bytes) {
  static const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(begin) + bytes) / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

std::shared_ptr<Buffer> mapped_view(const std::shared_ptr<MappedFile>& file, void* at, size_t bytes) {
  auto view = std::make_shared<Buffer>(at, bytes, Device{}, [file, bytes](void* p) { drop_mapped_pages(p, bytes); });
  view->set_file_backed();
  return view;
}

std::shared_ptr<MappedFile> map_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer (forever, in a hostile folder).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail("cannot open '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("'", path, "' is not a regular file");
  }
  auto m = std::make_shared<MappedFile>();
  m->size = static_cast<size_t>(st.st_size);
  if (m->size > 0) {
    m->data = mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m->data == MAP_FAILED) {
      m->data = nullptr;
      ::close(fd);
      fail("cannot map '", path, "': ", std::strerror(errno));
    }
  }
  ::close(fd);
  return m;
}

std::string confined_file(const std::string& dir, const std::string& name, const std::string& what) {
  namespace fs = std::filesystem;
  const fs::path rel(name);
  if (rel.is_absolute()) fail(what, " '", name, "' is an absolute path; it must be relative to the model folder");
  for (const auto& part : rel)
    if (part == "..") fail(what, " '", name, "' leaves the model folder ('..')");
  const fs::path folder = dir.empty() ? fs::path(".") : fs::path(dir), full = folder / rel;
  std::error_code ec;
  if (!fs::exists(full, ec)) fail(what, " '", full.string(), "' does not exist");
  if (!fs::is_regular_file(full, ec)) fail(what, " '", full.string(), "' is not a regular file");
  const fs::path real_dir = fs::weakly_canonical(folder, ec);
  const std::string real = fs::canonical(full, ec).string();
  auto under = [&](const fs::path& root) { return real.compare(0, root.string().size() + 1, root.string() + "/") == 0; };
  const fs::path snapshots = real_dir.parent_path(), repo = snapshots.parent_path();
  const bool hub_snapshot = snapshots.filename() == "snapshots" && repo.filename().string().rfind("models--", 0) == 0;
  if (ec || !(under(real_dir) || (hub_snapshot && under(repo / "blobs"))))
    fail(what, " '", full.string(), "' resolves outside the model folder (symlink?)");
  return real;
}

bool folder_holds(const std::string& dir, const std::string& name) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::symlink_status(std::filesystem::path(dir) / name, ec));
}

std::string read_file_bytes(const std::string& path, size_t max_bytes, const std::string& what) {
  const auto file = map_file(path);
  if (file->size > max_bytes) fail("'", path, "' (", what, ") is ", file->size, " bytes; at most ", max_bytes, " are read as one");
  return std::string(static_cast<const char*>(file->data), file->size);
}

}  // namespace tern
