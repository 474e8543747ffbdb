#include "core/tensor.h"

#include "core/mapped_file.h"

#include <sys/mman.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>
#include <utility>

namespace tern {

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s)
    if (__builtin_mul_overflow(n, d, &n)) fail("shape ", shape_str(s), " has more elements than an int64 counts");
  return n;
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << ']';
  return os.str();
}

Buffer::Buffer(void* data, size_t bytes, Device device, std::function<void(void*)> release)
    : data_(data), bytes_(bytes), device_(device), release_(std::move(release)) {}

Buffer::~Buffer() {
  if (release_) release_(data_);
}

// Buffers of at least 4 MiB (packed weights, KV rings, big activations) are mapped directly,
// 2 MiB aligned and advised as transparent huge pages: packing the 1B-shape fp32 model's 4.9 GB of
// weights spent ~40% of its load in first-touch faults and page clearing with 4 KiB pages (perf);
// with huge pages its load went 6.8 → 5.0 s (3 alternated pairs, Zen 3). Where THP is off the
// advice does nothing.
constexpr size_t kHugePage = size_t{2} << 20;

namespace {
std::atomic<size_t> g_owned{0}, g_limit{0};

}  // namespace

// Without --max-memory the cap is the machine's physical memory: a file claiming more (a 1e12-element
// tensor, a ConstantOfShape of a huge shape) gets a MemoryLimitError before the allocation, where the
// kernel's overcommit would otherwise hand out the address space and the OOM killer end the process
// when it is touched.
size_t physical_memory() {
  static const size_t bytes = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return bytes;
}

std::string memory_size(size_t b) {
  char s[32];
  std::snprintf(s, sizeof s, b < 1000000000 ? "%.1f MB" : "%.2f GB", static_cast<double>(b) / (b < 1000000000 ? 1e6 : 1e9));
  return s;
}

namespace {
thread_local MemoryAccountPtr t_account;

// Adds `bytes` to `held` unless that passes `limit`; false (nothing added) when it would.
bool take_within(std::atomic<size_t>& held, size_t bytes, size_t limit, size_t& before) {
  before = held.fetch_add(bytes, std::memory_order_relaxed);
  const size_t now = before + bytes;
  if (now <= limit && now >= bytes) return true;
  held.fetch_sub(bytes, std::memory_order_relaxed);
  return false;
}
}  // namespace

const MemoryAccountPtr& charged_account() { return t_account; }
MemoryScope::MemoryScope(MemoryAccountPtr account) : saved_(std::exchange(t_account, std::move(account))) {}
MemoryScope::~MemoryScope() { t_account = std::move(saved_); }

void take_host_bytes(size_t bytes, const MemoryAccountPtr& account) {
  const size_t asked = g_limit.load(std::memory_order_relaxed), limit = asked ? asked : physical_memory();
  size_t before = 0;
  if (!take_within(g_owned, bytes, limit, before))
    throw MemoryLimitError(detail::concat("the memory cap (", asked ? "--max-memory " : "the machine's memory, ", memory_size(limit),
                                          ") would be passed: tern holds ", memory_size(before), " and needs ", memory_size(bytes),
                                          " more"));
  if (account && !take_within(account->held_, bytes, account->limit_ ? account->limit_ : std::numeric_limits<size_t>::max(), before)) {
    g_owned.fetch_sub(bytes, std::memory_order_relaxed);
    throw MemoryLimitError(detail::concat("the session's memory cap (max_memory ", memory_size(account->limit_), ", ", account->owner_,
                                          ") would be passed: it holds ", memory_size(before), " and needs ", memory_size(bytes), " more"));
  }
}

void check_host_bytes(size_t bytes, const std::string& what) {
  try {
    take_host_bytes(bytes, t_account);
  } catch (const MemoryLimitError& e) {
    throw MemoryLimitError(what + e.what());
  }
  give_host_bytes(bytes, t_account);
}

void give_host_bytes(size_t bytes, const MemoryAccountPtr& account) {
  g_owned.fetch_sub(bytes, std::memory_order_relaxed);
  if (account) account->held_.fetch_sub(bytes, std::memory_order_relaxed);
}

size_t owned_host_bytes() { return g_owned.load(std::memory_order_relaxed); }
void set_process_memory_limit(size_t bytes) { g_limit.store(bytes, std::memory_order_relaxed); }

namespace {
// From this size up a buffer gets a mapping of its own in huge pages; below, the heap (or a BufferArena slab).
constexpr size_t kOwnMappingBytes = 2 * kHugePage;

// Where a fresh huge page is slow to come by, mappings keep 4 KiB pages. On a VM that gives its free memory back
// to its host (Firecracker's balloon reports free 2 MiB blocks; the 2-core Zen 3 VM), faulting 540 MB in huge
// pages took 2.0-2.8 s against 0.37-0.63 s in 4 KiB pages (0.07 s in huge pages freed just before): SmolLM2's
// fp32 genai export loaded in 2.82 s (median of 5) against ONNX Runtime's 0.89, and in 0.67 s with this rule,
// for a decode 9% slower (bench/README, "Load beside ONNX Runtime on a VM"). A mapping's first huge page tells
// which: 0.16-0.29 ms from free memory, 5-31 ms when the host must back it, where 2 MiB in 4 KiB pages is 1.4-2.3.
constexpr int64_t kSlowHugePageNs = 2'000'000;
// A slow first page is a cost too (probing each of that load's 39 mappings took 0.41 s): for a second after
// one, mappings skip the probe. A process-wide observation of the machine, as the ISA is, not a setting.
constexpr int64_t kSlowHugePagesForgetNs = 1'000'000'000;
std::atomic<int64_t> g_huge_pages_slow_until{0};

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

void* map_huge(size_t rounded) {
  const size_t span = rounded + kHugePage;
  void* m = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  // Keep the 2 MiB-aligned part: unmap the head before it and the tail after it.
  const auto base = reinterpret_cast<uintptr_t>(m), aligned = (base + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > base) munmap(m, aligned - base);
  if (base + span > aligned + rounded) munmap(reinterpret_cast<void*>(aligned + rounded), base + span - aligned - rounded);
  void* p = reinterpret_cast<void*>(aligned);
  const int64_t now = steady_ns();
  if (now < g_huge_pages_slow_until.load(std::memory_order_relaxed)) {
    madvise(p, rounded, MADV_NOHUGEPAGE);
    return p;
  }
  madvise(p, rounded, MADV_HUGEPAGE);  // advice only: without THP the pages stay 4 KiB
  *static_cast<volatile char*>(p) = 0;
  const int64_t fault_ns = steady_ns() - now;
  if (fault_ns > kSlowHugePageNs) {
    if (rounded > kHugePage) madvise(static_cast<char*>(p) + kHugePage, rounded - kHugePage, MADV_NOHUGEPAGE);
    g_huge_pages_slow_until.store(now + fault_ns + kSlowHugePagesForgetNs, std::memory_order_relaxed);
  }
  return p;
}

std::shared_ptr<Buffer> Buffer::allocate(size_t bytes) {
  const bool huge = bytes >= kOwnMappingBytes;
  const size_t unit = huge ? kHugePage : 64, rounded = std::max<size_t>((bytes + unit - 1) / unit * unit, 64);
  MemoryAccountPtr account = t_account;
  take_host_bytes(rounded, account);
  void* p = huge ? map_huge(rounded) : std::aligned_alloc(64, rounded);
  if (!p) {
    give_host_bytes(rounded, account);
    fail("out of memory allocating ", bytes, " bytes");
  }
  auto b = std::make_shared<Buffer>(p, bytes, Device{}, [huge, rounded, account = std::move(account)](void* q) {
    if (huge) munmap(q, rounded);
    else std::free(q);
    give_host_bytes(rounded, account);
  });
  b->owned_ = true;
  return b;
}

void Buffer::drop_pages(const void* begin, size_t bytes) const {
  const auto lo = std::max(reinterpret_cast<uintptr_t>(begin), reinterpret_cast<uintptr_t>(data_));
  const auto hi = std::min(reinterpret_cast<uintptr_t>(begin) + bytes, reinterpret_cast<uintptr_t>(data_) + bytes_);
  if (file_backed_ && hi > lo) drop_mapped_pages(reinterpret_cast<const void*>(lo), hi - lo);
}

void Buffer::release_read(const void* begin, size_t bytes) const {
  if (!file_backed_) return;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(begin) / kHugePage * kHugePage;
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(begin) + bytes + kHugePage - 1) / kHugePage * kHugePage;
  drop_pages(reinterpret_cast<const void*>(lo), hi - lo);
}

bool Buffer::prefault() const {
#ifdef MADV_POPULATE_READ
  if (!file_backed_ || !bytes_) return false;
  static const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = reinterpret_cast<uintptr_t>(data_) / page * page, end = reinterpret_cast<uintptr_t>(data_) + bytes_;
  return madvise(reinterpret_cast<void*>(first), end - first, MADV_POPULATE_READ) == 0;
#else
  return false;
#endif
}

// A slab: kSlabBytes of address space from map_huge, of which `mapped` are still mapped (the rest given back
// by trim). Its bytes are counted as owned as they are placed, and given back with it.
constexpr size_t kSlabBytes = size_t{32} << 20;
struct BufferArena::Slab {
  char* base = nullptr;
  size_t mapped = kSlabBytes, counted = 0;
  MemoryAccountPtr account = charged_account();  // (a slab fills during one load)
  ~Slab() {
    munmap(base, mapped);
    give_host_bytes(counted, account);
  }
};

BufferArena::~BufferArena() {
  trim();
#if defined(__GLIBC__)
  // The heap copies the slabs replaced are free but still resident: glibc returns only the heap's top.
  if (slab_) malloc_trim(0);
#endif
}

// The slab's pages past its last placed byte (rounded up to a huge page: THP backs that one whole) go back.
void BufferArena::trim() {
  if (!slab_) return;
  const size_t keep = (used_ + kHugePage - 1) / kHugePage * kHugePage;
  if (keep < slab_->mapped) {
    munmap(slab_->base + keep, slab_->mapped - keep);
    slab_->mapped = keep;
  }
}

Tensor BufferArena::hold(const Tensor& t) {
  const std::shared_ptr<Buffer>& from = t.buffer();
  const size_t bytes = t.nbytes();
  if (!from || !from->owned() || from->device().kind != DeviceKind::CPU || bytes == 0 || bytes >= kOwnMappingBytes) return t;
  const size_t rounded = (bytes + 63) / 64 * 64;
  if (!slab_ || used_ + rounded > slab_->mapped) {
    trim();
    auto slab = std::make_shared<Slab>();
    slab->base = static_cast<char*>(map_huge(kSlabBytes));
    if (!slab->base) return t;  // (no address space: the heap copy stays)
    slab_ = std::move(slab);
    used_ = 0;
  }
  take_host_bytes(rounded, slab_->account);
  slab_->counted += rounded;
  char* at = slab_->base + used_;
  used_ += rounded;
  std::memcpy(at, t.raw(), bytes);
  auto buffer = std::make_shared<Buffer>(at, bytes, Device{}, [slab = slab_](void*) {});
  buffer->owned_ = true;
  return Tensor(t.dtype(), t.shape(), std::move(buffer));
}

std::shared_ptr<Buffer> Buffer::view(void* data, size_t bytes, std::shared_ptr<void> keep_alive) {
  return std::make_shared<Buffer>(data, bytes, Device{}, [keep = std::move(keep_alive)](void*) {});
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_) TERN_CHECK(d >= 0, "negative dimension in shape ", shape_str(shape_));
  buffer_ = Buffer::allocate(nbytes());
}

Tensor::Tensor(DType dtype, Shape shape, std::shared_ptr<Buffer> buffer, size_t offset)
    : dtype_(dtype), shape_(std::move(shape)), buffer_(std::move(buffer)), offset_(offset) {
  TERN_CHECK(!buffer_ || offset_ + nbytes() <= buffer_->bytes(), "tensor of shape ", shape_str(shape_), " (", nbytes(),
             " bytes) does not fit its buffer of ", buffer_ ? buffer_->bytes() : 0, " bytes");
}

void Tensor::check_type(DType t) const { TERN_CHECK(t == dtype_, "tensor holds ", dtype_name(dtype_), ", accessed as ", dtype_name(t)); }

Tensor Tensor::reshaped(Shape shape) const {
  TERN_CHECK(numel_of(shape) == numel(), "cannot reshape ", shape_str(shape_), " to ", shape_str(shape));
  return Tensor(dtype_, std::move(shape), buffer_, offset_);
}

void Tensor::view_elements_of(const Tensor& src) {
  TERN_CHECK(src.numel() == numel(), "cannot view ", shape_str(src.shape_), " as ", shape_str(shape_));
  dtype_ = src.dtype_;
  buffer_ = src.buffer_;
  offset_ = src.offset_;
}

Tensor Tensor::clone() const {
  Tensor t(dtype_, shape_);
  if (nbytes()) std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

double Tensor::at_f64(int64_t i) const {
  TERN_CHECK(i >= 0 && i < numel(), "index ", i, " out of range for tensor of shape ", shape_str(shape_));
  return visit_numeric(dtype_, [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    return static_cast<double>(static_cast<const T*>(raw())[i]);
  });
}

int64_t Tensor::at_i64(int64_t i) const {
  TERN_CHECK(i >= 0 && i < numel(), "index ", i, " out of range for tensor of shape ", shape_str(shape_));
  return visit_numeric(dtype_, [&](auto tag) -> int64_t {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
      return static_cast<int64_t>(static_cast<float>(static_cast<const T*>(raw())[i]));
    } else {
      return static_cast<int64_t>(static_cast<const T*>(raw())[i]);
    }
  });
}

std::vector<int64_t> Tensor::to_i64_vector() const {
  std::vector<int64_t> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) v[static_cast<size_t>(i)] = at_i64(i);
  return v;
}

namespace {
// float → integer per ONNX Cast: truncate toward zero; out-of-range and NaN are undefined in the spec,
// we saturate (NaN → 0) so the result is at least deterministic.
template <typename D, typename S>
D convert_one(S s) {
  if constexpr (std::is_same_v<D, bool>) {
    return static_cast<float>(s) != 0.0f || (std::is_integral_v<S> && s != S(0));
  } else if constexpr (std::is_same_v<D, f16> || std::is_same_v<D, bf16>) {
    return D(static_cast<float>(s));
  } else if constexpr (std::is_integral_v<D> && (std::is_floating_point_v<S> || std::is_same_v<S, f16> || std::is_same_v<S, bf16>)) {
    double v = static_cast<double>(static_cast<float>(s));
    if constexpr (std::is_same_v<S, double>) v = s;
    if (std::isnan(v)) return D(0);
    if (v <= static_cast<double>(std::numeric_limits<D>::lowest())) return std::numeric_limits<D>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
    return static_cast<D>(v);
  } else if constexpr (std::is_same_v<S, f16> || std::is_same_v<S, bf16>) {
    return static_cast<D>(static_cast<float>(s));
  } else {
    return static_cast<D>(s);
  }
}
}  // namespace

namespace {
bool is_packed4(DType t) { return t == DType::Int4 || t == DType::UInt4; }

// 4-bit values are stored two per byte, element 0 in the low nibble.
Tensor unpack4(const Tensor& src) {
  Tensor out(src.dtype() == DType::Int4 ? DType::Int8 : DType::UInt8, src.shape());
  const uint8_t* p = static_cast<const uint8_t*>(src.raw());
  for (int64_t i = 0; i < src.numel(); ++i) {
    uint8_t nib = (p[i / 2] >> ((i % 2) * 4)) & 0xf;
    if (src.dtype() == DType::Int4) out.data<int8_t>()[i] = static_cast<int8_t>(nib >= 8 ? nib - 16 : nib);
    else out.data<uint8_t>()[i] = nib;
  }
  return out;
}
}  // namespace

void convert_tensor(const Tensor& src, Tensor& dst) {
  TERN_CHECK(src.numel() == dst.numel(), "convert: element counts differ");
  if (is_packed4(src.dtype())) {
    Tensor wide = unpack4(src);
    if (is_packed4(dst.dtype())) std::memcpy(dst.raw(), src.raw(), src.nbytes());
    else convert_tensor(wide, dst);
    return;
  }
  if (is_packed4(dst.dtype())) {  // keep the low 4 bits of the integer value (ONNX Cast wraps)
    Tensor wide = cast_to(src, DType::Int64);
    uint8_t* p = static_cast<uint8_t*>(dst.raw());
    std::memset(p, 0, dst.nbytes());
    for (int64_t i = 0; i < src.numel(); ++i) p[i / 2] |= static_cast<uint8_t>((wide.data<int64_t>()[i] & 0xf) << ((i % 2) * 4));
    return;
  }
  const int64_t n = src.numel();
  if (src.dtype() == DType::Float16 && dst.dtype() == DType::Float32)
    return f16_to_f32(static_cast<const uint16_t*>(src.raw()), static_cast<float*>(dst.raw()), n);
  if (src.dtype() == DType::Float32 && dst.dtype() == DType::Float16)
    return f32_to_f16(static_cast<const float*>(src.raw()), static_cast<uint16_t*>(dst.raw()), n);
  visit_numeric(src.dtype(), [&](auto stag) {
    using S = typename decltype(stag)::type;
    visit_numeric(dst.dtype(), [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      const S* s = static_cast<const S*>(src.raw());
      D* d = static_cast<D*>(dst.raw());
      for (int64_t i = 0; i < n; ++i) d[i] = convert_one<D, S>(s[i]);
    });
  });
}

bool is_aligned(const Tensor& t) {
  return !t.raw() || reinterpret_cast<uintptr_t>(t.raw()) % std::max<size_t>(dtype_size(t.dtype()), 1) == 0;
}

Tensor aligned(const Tensor& t) { return is_aligned(t) ? t : t.clone(); }

Tensor cast_to(const Tensor& src, DType dtype) {
  if (!is_aligned(src)) return cast_to(src.clone(), dtype);
  if (src.dtype() == dtype) return src;
  Tensor dst(dtype, src.shape());
  convert_tensor(src, dst);
  return dst;
}

}  // namespace tern
