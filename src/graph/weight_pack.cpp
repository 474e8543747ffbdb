#include "graph/weight_pack.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/hash.h"
#include "core/json.h"
#include "core/output_files.h"

// XXH3 (Debian's libxxhash-dev), inlined from its header so no library is linked: hashing a model's weights
// whole at 7 GB/s (1 GiB in 0.15 s from the page cache) where FNV-1a, a multiply per byte, ran at 0.74 GB/s.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace tern {
namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'T', 'E', 'R', 'N', 'P', 'A', 'C', 'K'};
// Bumped whenever what a session prepares changes meaning (a layout, a key, a quantization rule): an
// older pack is then refused rather than misread.
constexpr uint32_t kFormatVersion = 3;  // 3: the sources' content hash beside their stamp
// Each tensor starts on a page. With 64-byte starts (version 1) the 1B-shape fp32 pack prefilled 128 tokens at
// 51.2 tok/s (median of 3 peers.sh rounds) against 63.0 for the same panels packed at load into 2 MiB-aligned
// memory; page-aligned, 66.5 and 67.0 (two runs; the VM's single runs vary ±20%, and why the start matters —
// cache-set placement, likely — is not measured). The padding costs at most a page an entry.
constexpr size_t kAlign = 4096;
constexpr size_t kPreamble = sizeof(kMagic) + 2 * sizeof(uint32_t);

}  // namespace

namespace {
std::string hex64(uint64_t h) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}
}  // namespace

std::string source_stamp(const std::vector<std::string>& files) {
  uint64_t h = kFnv1aStart;
  std::vector<char> page(4096);
  for (const std::string& path : files) {
    h = fnv1a(fs::path(path).filename().string(), h);
    struct stat st {};
    std::ifstream in(path, std::ios::binary);
    if (!in || ::stat(path.c_str(), &st) != 0) fail("cannot read '", path, "' to fingerprint it");
    const uint64_t fields[] = {static_cast<uint64_t>(st.st_size),        static_cast<uint64_t>(st.st_ino),
                               static_cast<uint64_t>(st.st_mtim.tv_sec), static_cast<uint64_t>(st.st_mtim.tv_nsec),
                               static_cast<uint64_t>(st.st_ctim.tv_sec), static_cast<uint64_t>(st.st_ctim.tv_nsec)};
    h = fnv1a(fields, sizeof fields, h);
    const auto size = static_cast<uint64_t>(st.st_size);
    for (uint64_t i = 0; i < 16 && size > 0; ++i) {
      const uint64_t at = size > page.size() ? (size - page.size()) / 15 * i : 0;
      in.seekg(static_cast<std::streamoff>(at));
      in.read(page.data(), static_cast<std::streamsize>(std::min<uint64_t>(page.size(), size - at)));
      h = fnv1a(page.data(), static_cast<size_t>(in.gcount()), h);
    }
  }
  return hex64(h);
}

std::string source_content_hash(const std::vector<std::string>& files) {
  XXH3_state_t* state = XXH3_createState();
  if (!state) throw std::bad_alloc();
  const std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> owned(state, XXH3_freeState);
  XXH3_64bits_reset(state);
  std::vector<char> chunk(size_t{1} << 20);
  for (const std::string& path : files) {
    const std::string name = fs::path(path).filename().string();
    XXH3_64bits_update(state, name.data(), name.size() + 1);
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot read '", path, "' to hash it");
    uint64_t size = 0;
    while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
      XXH3_64bits_update(state, chunk.data(), static_cast<size_t>(in.gcount()));
      size += static_cast<uint64_t>(in.gcount());
    }
    if (in.bad()) fail("cannot read '", path, "' to hash it");
    XXH3_64bits_update(state, &size, sizeof size);
  }
  return hex64(XXH3_64bits_digest(state));
}

std::string pack_path_for(const std::string& onnx_path) {
  fs::path p(onnx_path);
  return p.replace_extension(".tern-pack").string();
}

std::shared_ptr<WeightPack> WeightPack::open(const std::string& path, const PackIdentity& expected, const std::vector<std::string>& sources,
                                             bool in_memory, int threads) {
  auto pack = std::make_shared<WeightPack>(PackIdentity{});
  pack->path_ = path;
  pack->file_ = map_file(path);
  const MappedFile& f = *pack->file_;
  const auto* bytes = static_cast<const char*>(f.data);
  auto bad = [&](const auto&... why) { fail("pack '", path, "': ", why...); };
  if (f.size < kPreamble || std::memcmp(bytes, kMagic, sizeof kMagic) != 0) bad("not a tern pack (no TERNPACK magic)");
  uint32_t version = 0, header_bytes = 0;
  std::memcpy(&version, bytes + 8, 4);
  std::memcpy(&header_bytes, bytes + 12, 4);
  if (version != kFormatVersion) bad("format version ", version, ", this tern reads version ", kFormatVersion, ": run `tern pack` again");
  if (header_bytes > f.size - kPreamble) bad("header of ", header_bytes, " bytes is past the end of the file (truncated?)");
  nlohmann::json h;
  try {
    h = parse_json(std::string_view(bytes + kPreamble, header_bytes), "pack '" + path + "': its header");
    pack->identity_ = {h.at("source").get<std::string>(), h.at("content").get<std::string>(), h.at("layout").get<std::string>(),
                       h.at("weights").get<std::string>()};
    for (const auto& e : h.at("entries")) {
      const std::string key = e.at("key").get<std::string>();
      Entry& entry = pack->entries_[key];
      entry.dropped = e.value("dropped", false);
      for (const auto& t : e.value("tensors", nlohmann::json::array())) {
        auto number = [&](const nlohmann::json& v, const char* field, int64_t lo) -> int64_t {
          try {
            return json_int(v, "entry '" + key + "': " + field, lo);
          } catch (const Error& e) {
            fail("pack '", path, "': ", e.what());
          }
        };
        const int64_t dtype = number(t.at("dtype"), "dtype", INT64_MIN);
        Shape shape;
        for (const auto& d : t.at("shape")) shape.push_back(number(d, "a dim", INT64_MIN));
        const auto offset = static_cast<uint64_t>(number(t.at("offset"), "offset", 0)),
                   nbytes = static_cast<uint64_t>(number(t.at("bytes"), "bytes", 0));
        if (dtype <= 0 || dtype > 64 || !dtype_size(static_cast<DType>(dtype)))  // the element types tensors hold whole
          bad("entry '", key, "': data type ", dtype, " is not one a pack holds");
        int64_t numel = 1;
        for (int64_t d : shape) {
          if (d < 0 || (d > 0 && numel > (INT64_MAX / 16) / d)) bad("entry '", key, "': shape ", shape_str(shape), " is invalid");
          numel *= d;
        }
        if (nbytes != bytes_for(static_cast<DType>(dtype), numel))
          bad("entry '", key, "': ", nbytes, " bytes for shape ", shape_str(shape), " of ", dtype_name(static_cast<DType>(dtype)));
        if (offset % kAlign != 0 || offset > f.size || nbytes > f.size - offset)
          bad("entry '", key, "': bytes ", offset, "..", offset + nbytes, " are not inside the file's ", f.size, " (truncated?)");
        entry.tensors.emplace_back(static_cast<DType>(dtype), shape,
                                   mapped_view(pack->file_, const_cast<char*>(bytes) + offset, static_cast<size_t>(nbytes)));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    bad("header is not valid: ", e.what());
  }
  if (pack->identity_.layout != expected.layout)
    bad("made for the kernel layout '", pack->identity_.layout, "', this build uses '", expected.layout, "': run `tern pack` again");
  if (pack->identity_.source != expected.source) {  // copied, touched or changed: the bytes decide
    const std::string content = source_content_hash(sources);
    if (content != pack->identity_.content)
      bad("made from other model files (content hash ", pack->identity_.content, ", these files' is ", content,
          "): run `tern pack` again, or delete it");
  }
  if (in_memory) pack->read_into_memory(threads);
  return pack;
}

// Checked first (open), then the bytes the entries span copied and the entries pointed at the copy: a file
// longer than its entries claim costs nothing, and one that fails its checks is never read whole.
void WeightPack::read_into_memory(int threads) {
  const auto* bytes = static_cast<const char*>(file_->data);
  size_t end = 0;
  for (const auto& [key, entry] : entries_)
    for (const Tensor& t : entry.tensors) end = std::max(end, static_cast<size_t>(static_cast<const char*>(t.raw()) - bytes) + t.nbytes());
  if (end == 0) return;
  const std::shared_ptr<Buffer> copy = Buffer::allocate(end);  // counted against --max-memory
  char* to = static_cast<char*>(copy->data());
  // Each chunk's file pages leave once copied: peak RSS ≈ one copy. The threads take chunks in turn, 8 a thread
  // (64 KiB to 64 MiB each): the copy is page faults on both sides more than memory traffic. `tern bench --model
  // DIR --prefault --threads 1|2`, 1B-shape packs, alternated: int4 load 0.24 / 0.23 → 0.15 / 0.14 s, fp32 2.99 /
  // 1.78 → 0.71 / 0.70 s.
  constexpr size_t kGrain = size_t{64} << 10;
  const size_t share = end / (8 * static_cast<size_t>(std::max(threads, 1)));
  const size_t chunk = std::clamp((share + kGrain - 1) / kGrain * kGrain, kGrain, size_t{64} << 20);
  const size_t chunks = (end + chunk - 1) / chunk;
  std::atomic<size_t> next{0};
  const auto copy_chunks = [&] {
    for (size_t c; (c = next++) < chunks;) {
      const size_t at = c * chunk, n = std::min(chunk, end - at);
      std::memcpy(to + at, bytes + at, n);
      drop_mapped_pages(bytes + at, n);
    }
  };
  std::vector<std::thread> helpers;
  for (int t = 1; t < threads && static_cast<size_t>(t) < chunks; ++t) helpers.emplace_back(copy_chunks);
  copy_chunks();
  for (std::thread& h : helpers) h.join();
  for (auto& [key, entry] : entries_)
    for (Tensor& t : entry.tensors) {
      const size_t at = static_cast<size_t>(static_cast<const char*>(t.raw()) - bytes);
      t = Tensor(t.dtype(), t.shape(), std::make_shared<Buffer>(to + at, t.nbytes(), Device{}, [copy](void*) {}));
    }
  in_memory_ = true;
}

std::vector<Tensor> WeightPack::prepared(const std::string& key, const std::function<std::vector<Tensor>()>& make) {
  if (reading()) {
    auto it = entries_.find(key);
    if (it == entries_.end() || it->second.dropped) return make();
    for (const Tensor& t : it->second.tensors) served_ += static_cast<int64_t>(t.nbytes());
    return it->second.tensors;
  }
  Entry& e = entries_[key];
  e.tensors = make();
  return e.tensors;
}

Tensor WeightPack::derived(const std::string& key, DType dtype, const Shape& shape, const std::function<Tensor()>& make) {
  if (reading()) {
    auto it = entries_.find(key);
    if (it != entries_.end() && it->second.dropped) return Tensor(dtype, shape, nullptr);
    if (it != entries_.end() && it->second.tensors.size() == 1 && it->second.tensors[0].dtype() == dtype &&
        it->second.tensors[0].shape() == shape)
      return it->second.tensors[0];
    return make();
  }
  Tensor t = make();
  Entry& e = entries_[key];
  e.derived = true;
  e.dtype = t.dtype();
  e.shape = t.shape();
  e.watched = t.buffer();
  return t;
}

bool WeightPack::prefault() const { return file_ && (in_memory_ || mapped_view(file_, file_->data, file_->size)->prefault()); }

void WeightPack::save(const std::string& path) const {
  struct Item {
    const void* data;
    size_t bytes;
  };
  std::vector<Item> items;
  // The header with the data starting at `start`.
  auto layout = [&](uint64_t start) {
    items.clear();
    nlohmann::json entries = nlohmann::json::array();
    uint64_t at = start;
    for (const auto& [key, e] : entries_) {
      nlohmann::json entry{{"key", key}};
      std::vector<Tensor> tensors = e.tensors;
      if (e.derived) {
        if (auto buffer = e.watched.lock()) tensors.emplace_back(e.dtype, e.shape, buffer);
        else entry["dropped"] = true;
      }
      nlohmann::json list = nlohmann::json::array();
      for (const Tensor& t : tensors) {
        at = (at + kAlign - 1) / kAlign * kAlign;
        list.push_back({{"dtype", static_cast<int64_t>(t.dtype())}, {"shape", t.shape()}, {"offset", at}, {"bytes", t.nbytes()}});
        items.push_back({t.raw(), t.nbytes()});
        at += t.nbytes();
      }
      if (!list.empty()) entry["tensors"] = list;
      entries.push_back(entry);
    }
    return nlohmann::json{{"source", identity_.source},
                          {"content", identity_.content},
                          {"layout", identity_.layout},
                          {"weights", identity_.weights},
                          {"entries", entries}}
        .dump();
  };
  // Laid out once from 0 to learn its size; moving the data past it lengthens each offset by at most 20
  // digits, so the second layout fits in that room (padded with spaces, which JSON allows).
  const size_t draft = layout(0).size();
  const uint64_t start = (kPreamble + draft + 20 * items.size() + kAlign - 1) / kAlign * kAlign;
  std::string header = layout(start);
  header.resize(start - kPreamble, ' ');
  const std::string tmp = path + ".partial";
  OutputFile out(tmp);  // (removed if anything below fails)
  const uint32_t version = kFormatVersion, header_bytes = static_cast<uint32_t>(header.size());
  out.write(kMagic, sizeof kMagic);
  out.write(&version, 4);
  out.write(&header_bytes, 4);
  out.write(header.data(), header.size());
  uint64_t at = start;
  static const char zeros[kAlign] = {};
  for (const Item& item : items) {
    const uint64_t aligned = (at + kAlign - 1) / kAlign * kAlign;
    out.write(zeros, aligned - at);
    out.write(item.data, item.bytes);
    at = aligned + item.bytes;
  }
  // On disk before the rename, and out of the page cache, so loads map pages read back from disk rather than
  // the ones write() left. Measured on the 1B-shape fp32 pack, prefill of 128 tokens: 53-59 tok/s on the
  // written pages, 70-74 once read back (single runs on a noisy VM; why is not measured — both were mostly
  // mapped 2 MiB at a time).
  out.sync();
  posix_fadvise(out.fd(), 0, 0, POSIX_FADV_DONTNEED);
  out.close();
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fail("cannot rename '", tmp, "' to '", path, "': ", ec.message());
}

}  // namespace tern
