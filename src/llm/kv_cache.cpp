#include "llm/kv_cache.h"

#include <cstring>

#include "kernels/cpu/gather.h"

namespace tern::llm {

KvCache::KvCache(const DecoderIO& io, int64_t batch) : io_(io), batch_(batch) { clear(); }

void KvCache::clear() {
  length_ = 0;
  past_.clear();
  for (size_t i = 0; i < io_.past.size(); ++i) {
    const int64_t n = io_.cache_capacity;  // a static cache starts as zeros, a growing one empty
    Shape shape = io_.layout == PastLayout::Stacked ? Shape{2, batch_, io_.kv_heads, n, io_.head_size}
                                                    : Shape{batch_, io_.kv_heads, n, io_.head_size};
    past_.emplace_back(io_.cache_dtype, shape);
    std::memset(past_.back().raw(), 0, past_.back().nbytes());
  }
}

void KvCache::rewind(int64_t n) {
  if (io_.layout != PastLayout::Internal || n < 0 || n > length_)
    fail("KvCache: cannot rewind a cache of ", length_, " positions to ", n, " (only the ring cache rewinds)");
  length_ = n;
}

void KvCache::add_feeds(std::vector<std::pair<std::string, Tensor>>& feeds) const {
  for (size_t i = 0; i < io_.past.size(); ++i) feeds.emplace_back(io_.past[i], past_[i]);
}

int64_t KvCache::bytes_per_token() const {
  int64_t past = 0;
  for (const Tensor& t : past_) past += static_cast<int64_t>(t.nbytes());
  return 3 * past;
}

void KvCache::reorder(const std::vector<int64_t>& rows) {
  for (Tensor& t : past_) {
    const int64_t batch_axis = io_.layout == PastLayout::Stacked ? 1 : 0;
    const int64_t outer = batch_axis == 1 ? t.dim(0) : 1, n = t.dim(batch_axis);
    Tensor out(t.dtype(), t.shape());
    const size_t row_bytes = (outer * n != 0) ? t.nbytes() / static_cast<size_t>(outer * n) : 0;
    kernels::gather_rows(t.raw(), outer, n, row_bytes, rows.data(), static_cast<int64_t>(rows.size()), out.raw());
    t = out;
  }
}

void KvCache::update(const Outputs& outputs, int64_t fed) {
  if (io_.layout == PastLayout::Internal) {  // the session's ring buffers hold the keys
    length_ += fed;
    return;
  }
  for (size_t i = 0; i < io_.present.size(); ++i) past_[i] = outputs.at(io_.present[i]);
  if (!past_.empty()) length_ = io_.cache_capacity > 0 ? length_ + fed : past_[0].dim(-2);
}

}  // namespace tern::llm
