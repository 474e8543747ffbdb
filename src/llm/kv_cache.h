// The key/value cache a decoder graph takes as past_* inputs and returns as present_* outputs.
// This storage keeps the graph's own tensors (present becomes next step's past); the ring-buffer issue
// replaces it behind the same interface.
#pragma once
#include <utility>
#include <vector>

#include "llm/decoder_io.h"

namespace tern::llm {

class KvCache {
 public:
  KvCache(const DecoderIO& io, int64_t batch);
  // Adds the past inputs for the next run.
  void add_feeds(std::vector<std::pair<std::string, Tensor>>& feeds) const;
  // Takes the presents of the run just made (which fed `fed` new positions) as the new past.
  void update(const Outputs& outputs, int64_t fed);
  void clear();
  // The ring cache (PastLayout::Internal) holds its first n positions again (a speculative step's rejected drafts
  // dropped; the session's rings are told by SequenceState::keep_prefix).
  void rewind(int64_t n);
  // Row i of the batch becomes old row rows[i] (beam search keeps the beams that survived a step).
  void reorder(const std::vector<int64_t>& rows);
  int64_t length() const { return length_; }  // cached positions per sequence
  // Bytes a decode step moves for a graph cache: the past is read into the graph and copied into a
  // present one position longer (a static cache: of the same size) (read + write), then read by attention.
  int64_t bytes_per_token() const;

 private:
  const DecoderIO& io_;
  int64_t batch_;
  int64_t length_ = 0;
  std::vector<Tensor> past_;
};

}  // namespace tern::llm
