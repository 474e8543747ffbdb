#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tern {

MappedFile::~MappedFile() {
  if (data && size) munmap(data, size);
}

std::shared_ptr<Buffer> mapped_view(const std::shared_ptr<MappedFile>& file, void* at, size_t bytes) {
  auto view = std::make_shared<Buffer>(at, bytes, Device{}, [file, bytes](void* p) {
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  });
  view->set_file_backed();
  return view;
}

std::shared_ptr<MappedFile> map_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
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

}  // namespace tern
