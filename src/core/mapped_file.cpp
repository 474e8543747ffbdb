#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>

namespace tern {

namespace {

// The SIGBUS handler's table of live mappings: lock-free, as a handler may read it at any instant.
constexpr int kSlots = 1024;
struct Slot {
  std::atomic<bool> used{false}, lost{false};
  std::atomic<uintptr_t> begin{0}, end{0};
};
Slot g_slots[kSlots];
uintptr_t g_page = 4096;
struct sigaction g_previous {};

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const auto at = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& s : g_slots) {
    const uintptr_t begin = s.begin.load(std::memory_order_acquire), end = s.end.load(std::memory_order_acquire);
    if (at < begin || at >= end) continue;
    // The file ended under the mapping: from this page on, zeros (mmap is a plain system call on Linux, safe here).
    const uintptr_t page = at / g_page * g_page;
    if (mmap(reinterpret_cast<void*>(page), end - page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
      s.lost.store(true, std::memory_order_release);
      return;  // the faulting read runs again, on a zero page
    }
  }
  if ((g_previous.sa_flags & SA_SIGINFO) && g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, info, context);
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) return g_previous.sa_handler(sig);
  struct sigaction dfl {};  // not a mapping of ours: the fault repeats and ends the process as it would have
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGBUS, &dfl, nullptr);
}

int guard_mapping(void* data, size_t size) {
  static const bool installed = [] {  // (once per process)
    g_page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGBUS, &sa, &g_previous) == 0;
  }();
  (void)installed;
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (!g_slots[i].used.compare_exchange_strong(expected, true)) continue;
    g_slots[i].lost.store(false);
    g_slots[i].end.store(reinterpret_cast<uintptr_t>(data) + size, std::memory_order_release);
    g_slots[i].begin.store(reinterpret_cast<uintptr_t>(data), std::memory_order_release);
    return i;
  }
  return -1;
}

int64_t ns(const struct timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; }

}  // namespace

MappedFile::~MappedFile() {
  if (slot >= 0) {
    g_slots[slot].begin.store(0, std::memory_order_release);
    g_slots[slot].end.store(0, std::memory_order_release);
    g_slots[slot].used.store(false, std::memory_order_release);
  }
  if (data && size) munmap(data, size);
  if (fd >= 0) ::close(fd);
}

bool MappedFile::changed() const {
  if (slot >= 0 && g_slots[slot].lost.load(std::memory_order_acquire)) return true;
  struct stat st {};
  return fd >= 0 && (fstat(fd, &st) != 0 || st.st_size != mapped_size || ns(st.st_mtim) != mtime_ns || ns(st.st_ctim) != ctime_ns);
}

void MappedFile::check() const {
  if (changed())
    fail("'", path, "' changed while tern was using it (truncated or written over): what was computed from it is void; ",
         "load the model again");
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
  m->path = path;
  m->fd = fd;  // (closed by ~MappedFile from here on)
  m->size = static_cast<size_t>(st.st_size);
  m->mapped_size = st.st_size, m->mtime_ns = ns(st.st_mtim), m->ctime_ns = ns(st.st_ctim);
  if (m->size > 0) {
    m->data = mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m->data == MAP_FAILED) {
      m->data = nullptr;
      fail("cannot map '", path, "': ", std::strerror(errno));
    }
    m->slot = guard_mapping(m->data, m->size);
  }
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
