#include "core/output_files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <utility>

#include "core/error.h"

namespace tern {
namespace fs = std::filesystem;

namespace {

// fsync of a file or folder by path; fails naming it and why.
void sync_path(const fs::path& p, bool folder) {
  const int fd = ::open(p.c_str(), (folder ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) fail("cannot open '", p.string(), "' to sync it: ", std::strerror(errno));
  const int rc = ::fsync(fd), e = errno;
  ::close(fd);
  if (rc != 0) fail("syncing '", p.string(), "' to disk failed: ", std::strerror(e));
}

const char* kStagingMark = ".tern-tmp-";

}  // namespace

OutputFile::OutputFile(fs::path path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot create '", path_.string(), "': ", std::strerror(errno));
}

OutputFile::~OutputFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(path_.c_str());
}

void OutputFile::fail_io(const char* doing) {
  const int e = errno;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(path_.c_str());
  fail(doing, " '", path_.string(), "' failed: ", std::strerror(e));
}

void OutputFile::write(const void* data, size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      fail_io("writing");
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void OutputFile::sync() {
  if (::fsync(fd_) != 0) fail_io("syncing");
}

void OutputFile::close() {
  if (::close(std::exchange(fd_, -1)) != 0) fail_io("writing");  // (the descriptor is gone either way)
}

void write_whole_file(const fs::path& path, std::string_view bytes) {
  OutputFile f(path);
  f.write(bytes);
  f.close();
}

StagedFolder::StagedFolder(const fs::path& target) : target_(fs::absolute(target).lexically_normal()) {
  if (target_.filename().empty()) target_ = target_.parent_path();
  std::error_code ec;
  if (fs::exists(target_, ec)) {
    if (!fs::is_directory(target_, ec)) fail("'", target.string(), "' exists and is not a folder");
    if (!fs::is_empty(target_, ec) && !fs::exists(target_ / "model.onnx", ec))
      fail("'", target.string(),
           "' holds files and no model.onnx: tern writes a model only into a new or empty folder, "
           "or over its own earlier output");
  }
  const fs::path parent = target_.parent_path();
  fs::create_directories(parent);
  std::string prefix = ".";  // (appended, not "." + name: g++ 12 warns -Wrestrict on that form)
  prefix += target_.filename().string();
  prefix += kStagingMark;
  for (const auto& e : fs::directory_iterator(parent, ec)) {  // left by runs that were killed
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) fs::remove_all(e.path(), ec);
  }
  staging_ = parent / (prefix + std::to_string(::getpid()));
  fs::remove_all(staging_, ec);
  if (!fs::create_directory(staging_, ec)) fail("cannot create '", staging_.string(), "': ", ec.message());
}

StagedFolder::~StagedFolder() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(staging_, ec);
}

void StagedFolder::commit() {
  std::set<std::string> written;
  for (const auto& e : fs::directory_iterator(staging_)) {
    written.insert(e.path().filename().string());
    if (e.is_regular_file()) sync_path(e.path(), false);
  }
  sync_path(staging_, true);
  std::error_code ec;
  const bool replace = fs::exists(target_, ec) && !fs::is_empty(target_, ec);
  if (replace) {
    for (const auto& e : fs::directory_iterator(target_)) {
      const std::string name = e.path().filename().string();
      if ((!e.is_regular_file() || !written.count(name)) && e.path().extension() != ".tern-pack")
        fail("'", target_.string(), "' holds '", name,
             "', which the new output does not: not replaced (move it away, "
             "or choose another output folder); the new output is not written");
    }
    if (::renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) != 0) {
      if (errno != EINVAL && errno != ENOSYS) fail("cannot move '", staging_.string(), "' into place: ", std::strerror(errno));
      // No atomic exchange on this file system: the old folder moves aside first (a kill between the two
      // renames leaves no folder at the target, never a mixed one).
      const fs::path old = staging_.string() + "-old";  // (what the constructor's clean-up also finds)
      fs::rename(target_, old);
      fs::rename(staging_, target_);
      committed_ = true;
      fs::remove_all(old, ec);
    } else {
      committed_ = true;
      fs::remove_all(staging_, ec);  // (now the earlier output)
    }
  } else {
    if (::rename(staging_.c_str(), target_.c_str()) != 0)
      fail("cannot move '", staging_.string(), "' to '", target_.string(), "': ", std::strerror(errno));
    committed_ = true;
  }
  sync_path(target_.parent_path(), true);
}

std::filesystem::path cache_dir(std::string_view sub) {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::filesystem::path(x) / "tern" / sub;
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".cache" / "tern" / sub;
  return {};
}

}  // namespace tern
