// Tensor = dtype + shape + a view into a Buffer. Buffers know their device and how to free themselves
// (heap, a memory-pool slot, or a read-only view into a memory-mapped weights file).
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace tern {

using Shape = std::vector<int64_t>;

int64_t numel_of(const Shape& s);
std::string shape_str(const Shape& s);

enum class DeviceKind { CPU, OpenCL };

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int index = 0;
  bool operator==(const Device&) const = default;
};

// Bytes moved between the host and a device since it was opened (bench and tests read them).
struct TransferStats {
  int64_t to_device = 0, to_host = 0;
};

// Host memory tern owns (Buffer::allocate: weights repacked at load, folded constants, KV rings, the
// activations' pool) is counted twice: against the process (owned_host_bytes, capped by
// set_process_memory_limit — the CLI's --max-memory, tern_set_process_memory_limit — or the machine's physical
// memory) and against the MemoryAccount of the session that allocated it (SessionOptions::max_memory), so two
// sessions in one process each hold to their own cap. File mappings are not counted: their pages are the
// kernel's to drop and read again.
class MemoryAccount {
 public:
  // `owner` names the account in a MemoryLimitError (a model path); limit 0: none beyond the process's.
  MemoryAccount(std::string owner, size_t limit) : owner_(std::move(owner)), limit_(limit) {}
  size_t held() const { return held_.load(std::memory_order_relaxed); }
  size_t limit() const { return limit_; }
  const std::string& owner() const { return owner_; }

 private:
  friend void take_host_bytes(size_t, const std::shared_ptr<MemoryAccount>&);
  friend void give_host_bytes(size_t, const std::shared_ptr<MemoryAccount>&);
  const std::string owner_;
  const size_t limit_;
  std::atomic<size_t> held_{0};
};
using MemoryAccountPtr = std::shared_ptr<MemoryAccount>;

// The account this thread's allocations are charged to besides the process (null: the process only). A
// session sets it around its load and each run (MemoryScope); kernel threads charge the process only.
const MemoryAccountPtr& charged_account();
class MemoryScope {
 public:
  explicit MemoryScope(MemoryAccountPtr account);
  ~MemoryScope();
  MemoryScope(const MemoryScope&) = delete;
  MemoryScope& operator=(const MemoryScope&) = delete;

 private:
  MemoryAccountPtr saved_;
};

size_t owned_host_bytes();  // the process's count
// For allocators beside Buffer::allocate (the activations' pool, the KV rings): count `bytes` more as owned by
// the process and `account` (may be null) — throwing MemoryLimitError, with nothing counted, when that would
// pass either cap — or fewer (given back to the account they were taken from).
void take_host_bytes(size_t bytes, const MemoryAccountPtr& account);
void give_host_bytes(size_t bytes, const MemoryAccountPtr& account);
// `rounded` bytes (a multiple of 4 KiB) of fresh anonymous memory, 2 MiB aligned and advised as transparent
// huge pages unless the machine is slow to give them (its first huge page timed: tensor.cpp); null when the
// system has none to give. Not counted: Buffer::allocate and BufferArena count
// what they map; the bandwidth probe's buffer is not tern's memory. munmap(p, rounded) gives it back.
void* map_huge(size_t rounded);
// For what a parser is about to allocate outside Buffer (protobuf messages, JSON values, GGUF metadata):
// throws MemoryLimitError, its message starting with `what`, when `bytes` more would pass the process's or
// this thread's account's cap. Takes nothing — a check before the allocation, not a count of it.
void check_host_bytes(size_t bytes, const std::string& what);
// "4.2 MB", "1.07 GB": a size as the memory cap's errors name it.
std::string memory_size(size_t bytes);
// An allocation that would take owned_host_bytes() past `bytes` (0: the machine's physical memory) throws
// MemoryLimitError before anything is allocated. Set explicitly (the CLI's --max-memory,
// tern_set_process_memory_limit), never by a session.
void set_process_memory_limit(size_t bytes);

class Buffer {
 public:
  // Owns `bytes` of 64-byte aligned host memory.
  static std::shared_ptr<Buffer> allocate(size_t bytes);
  // Borrows memory kept alive by `keep_alive` (for example a file mapping); never written through.
  static std::shared_ptr<Buffer> view(void* data, size_t bytes, std::shared_ptr<void> keep_alive);

  Buffer(void* data, size_t bytes, Device device, std::function<void(void*)> release);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // Memory tern allocated and counts (Buffer::allocate), not a view into a mapping or a pool slot.
  bool owned() const { return owned_; }
  // A view into a read-only file mapping (mapped_view): its pages can be dropped at any time.
  void set_file_backed() { file_backed_ = true; }
  // For a file-backed buffer, the resident pages wholly inside [begin, begin + bytes) leave the process
  // (a later read faults them in from the file again); otherwise nothing. Lets a reader that is done
  // with part of a mapped weight give it back before it finishes the rest.
  void drop_pages(const void* begin, size_t bytes) const;
  // For a file-backed buffer, after a sparse read of [begin, begin + bytes) (a row of an embedding table): the
  // pages mapped around it, within 2 MiB and within the buffer, leave the process. Linux 6.x maps a whole
  // page-cache folio on a fault — up to 2 MiB where the file was read ahead in large folios, as loading reads
  // it — so each 8 KB row of the 1B-shape model's table kept ~1.7 MiB resident: 0.24 GB for a 128-token prompt.
  void release_read(const void* begin, size_t bytes) const;
  bool file_backed() const { return file_backed_; }
  // For a file-backed buffer, maps all its pages into the process now (MADV_POPULATE_READ), so the
  // first reads cost no page faults; returns whether it did (false: not file-backed, or unsupported).
  bool prefault() const;
  Device device() const { return device_; }

 private:
  void* data_;
  size_t bytes_;
  Device device_;
  std::function<void(void*)> release_;
  bool owned_ = false, file_backed_ = false;
  friend class BufferArena;
};

class Tensor {
 public:
  Tensor() = default;
  // Fresh host tensor; contents uninitialized.
  Tensor(DType dtype, Shape shape);
  Tensor(DType dtype, Shape shape, std::shared_ptr<Buffer> buffer, size_t offset = 0);

  template <typename T>
  static Tensor from_vector(const std::vector<T>& v, Shape shape) {
    Tensor t(dtype_of<T>::value, std::move(shape));
    TERN_CHECK(static_cast<size_t>(t.numel()) == v.size(), "from_vector: ", v.size(), " values for shape ", shape_str(t.shape()));
    for (size_t i = 0; i < v.size(); ++i) t.data<T>()[i] = v[i];
    return t;
  }
  template <typename T>
  static Tensor scalar(T v) {
    return from_vector<T>({v}, {});
  }

  bool defined() const { return buffer_ != nullptr || dtype_ != DType::Undefined; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  // shape() == dims without building a Shape (no allocation, for per-step checks).
  bool has_shape(std::initializer_list<int64_t> dims) const { return std::equal(shape_.begin(), shape_.end(), dims.begin(), dims.end()); }
  // Dim i (negative: from the end); a dim the tensor does not have fails instead of reading past its shape
  // (an op handed a tensor of lower rank than a malformed graph promised).
  int64_t dim(int64_t i) const {
    const int64_t j = i < 0 ? i + rank() : i;
    if (j < 0 || j >= rank()) fail("dimension ", i, " of a tensor of shape ", shape_str(shape_), " does not exist");
    return shape_[static_cast<size_t>(j)];
  }
  int64_t numel() const { return numel_of(shape_); }
  size_t nbytes() const { return bytes_for(dtype_, numel()); }
  Device device() const { return buffer_ ? buffer_->device() : Device{}; }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }

  void* raw() const { return buffer_ ? static_cast<char*>(buffer_->data()) + offset_ : nullptr; }
  template <typename T>
  T* data() const {
    check_type(dtype_of<T>::value);
    return static_cast<T*>(raw());
  }

  // Same data, new shape (numel must match). No copy.
  Tensor reshaped(Shape shape) const;
  // Makes this tensor a view of src's elements under its own shape (numel must match); allocates
  // nothing, so a view op can run in a decode step without touching the heap.
  void view_elements_of(const Tensor& src);
  // Deep copy into fresh memory.
  Tensor clone() const;
  // Reads element i converted to double / int64 (for shape-like tensors and tests; not for hot paths).
  double at_f64(int64_t i) const;
  int64_t at_i64(int64_t i) const;
  std::vector<int64_t> to_i64_vector() const;

 private:
  void check_type(DType t) const;
  DType dtype_ = DType::Undefined;
  Shape shape_;
  std::shared_ptr<Buffer> buffer_;
  size_t offset_ = 0;
};

// Buffers that live as long as a session — its prepared weights — side by side in huge-page slabs, where
// Buffer::allocate keeps those under 4 MiB in the heap's 4 KiB pages. A 1B-shaped Q4_0 model's int4
// attention matrices (2.1 and 3.1 MB a layer) and its scales are such buffers: in slabs its int4 decode went
// 38.6 / 38.0 / 38.8 → 42.8 / 44.2 / 41.3 tok/s (`tern bench --model /tmp/peers-1b/onnx-q4_0 --prompt-tokens 16
// --new-tokens 128 --threads 2`, Xeon, alternated). Each placed buffer keeps its slab mapped; a slab's
// pages past its last placed byte are given back when the next slab starts or the arena ends.
class BufferArena {
 public:
  BufferArena() = default;
  BufferArena(const BufferArena&) = delete;
  BufferArena& operator=(const BufferArena&) = delete;
  ~BufferArena();
  // `t` copied into the arena when it is a host tensor in tern's own memory under 4 MiB; else `t` itself.
  Tensor hold(const Tensor& t);

 private:
  struct Slab;
  void trim();
  std::shared_ptr<Slab> slab_;
  size_t used_ = 0;
};

// Whether t's elements sit where their type's size divides the address. Not so for some views of a model
// file's bytes that loading leaves in place (onnx_loader.h: LoadOptions::misaligned_views), which only
// byte-wise readers (memcpy, packing) may read; anything typed reads `aligned(t)`.
bool is_aligned(const Tensor& t);
// t itself when aligned, else an aligned copy.
Tensor aligned(const Tensor& t);
// Element-wise conversion between any two numeric dtypes (Cast semantics: float→int truncates).
void convert_tensor(const Tensor& src, Tensor& dst);
// (A misaligned src is copied first, also when it already has `dtype`.)
Tensor cast_to(const Tensor& src, DType dtype);
// `src` itself when it already has `dtype` (no copy, no allocation), else its conversion, kept in
// `scratch`. For kernels that compute in one type and must not allocate on the common path.
inline const Tensor& as_dtype(const Tensor& src, DType dtype, Tensor& scratch) {
  if (src.dtype() == dtype) return src;
  scratch = cast_to(src, dtype);
  return scratch;
}

}  // namespace tern
