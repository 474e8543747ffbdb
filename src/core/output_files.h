// Files tern writes — converter outputs, packs — written whole or not at all.
//   OutputFile: every write checked; a failure names the file and the system's reason ("No space left on
//     device", not "Input/output error" or a bare "cannot write"), and a file that failed is removed.
//   StagedFolder: an output folder (import-gguf, convert, quantize) written into a temporary folder beside it,
//     its files synced to disk, then renamed into place in one step — a kill at any moment leaves the old
//     folder or the new one, never old graph with new weights. A folder the last run left is swapped
//     (renameat2 RENAME_EXCHANGE) only when every file in it is one the new output holds too (or a pack):
//     a folder with anything else in it is never replaced.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

namespace tern {

class OutputFile {
 public:
  explicit OutputFile(std::filesystem::path path);  // created or truncated; fails naming it and why
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();  // not closed: closed and removed (a partial file)
  void write(const void* data, size_t bytes);
  void write(std::string_view text) { write(text.data(), text.size()); }
  void sync();   // its data on disk (fsync); fails naming the file and why
  void close();  // fails naming the file and why (a write the kernel deferred may fail here)
  int fd() const { return fd_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  [[noreturn]] void fail_io(const char* doing);
  std::filesystem::path path_;
  int fd_ = -1;
};

// `bytes` written to `path` as one OutputFile.
void write_whole_file(const std::filesystem::path& path, std::string_view bytes);

// tern's cache folder, `sub` in it: $XDG_CACHE_HOME/tern/sub, else $HOME/.cache/tern/sub; empty when neither
// variable is set. The machine's peaks, OpenCL binaries and imported GGUF folders live there.
std::filesystem::path cache_dir(std::string_view sub);

class StagedFolder {
 public:
  // Fails at once when `target` exists and is not a folder, or is a folder with files but no model.onnx
  // (no earlier output of a tern converter: it would not be replaced at commit anyway). Removes what
  // killed runs for the same target left beside it (their process gone).
  explicit StagedFolder(const std::filesystem::path& target);
  StagedFolder(const StagedFolder&) = delete;
  StagedFolder& operator=(const StagedFolder&) = delete;
  ~StagedFolder();                                                // not committed: the temporary folder removed
  const std::filesystem::path& path() const { return staging_; }  // where the output is written
  // Syncs every file and the folder, then moves it into place (swapping out and removing an earlier
  // output); fails naming what would be lost or what the system refused.
  void commit();

 private:
  std::filesystem::path target_, staging_;
  bool committed_ = false;
};

}  // namespace tern
