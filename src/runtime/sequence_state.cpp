// SequenceState: one sequence's state in a session (each op's OpState, the KV rings, batch rows, device top-k).
#include <algorithm>

#include "runtime/device_executor.h"
#include "runtime/session.h"

namespace tern {

SequenceState::SequenceState(const Session& session) : session_(session) {
  for (const auto& op : session_.ops_) states_.push_back(make_op_state(*op));
  std::lock_guard<std::mutex> lock(session_.sequences_mutex_);
  session_.sequences_.push_back(this);
}

SequenceState::~SequenceState() {
  std::lock_guard<std::mutex> lock(session_.sequences_mutex_);
  auto& all = session_.sequences_;
  all.erase(std::find(all.begin(), all.end(), this));
}

void SequenceState::set_device_top_k(const std::string& name, int k) {
  if (k > 0 && !session_.device_) fail("device top-k needs an OpenCL session");
  if (k > Session::max_device_top_k()) fail("device top-k: k = ", k, " exceeds ", Session::max_device_top_k());
  const auto& outputs = session_.outputs();
  if (k > 0 && std::none_of(outputs.begin(), outputs.end(), [&](const IOInfo& o) { return o.name == name; }))
    fail("device top-k: no graph output named '", name, "'");
  top_k_output_ = k > 0 ? name : std::string();
  top_k_ = std::max(k, 0);
}

std::unique_ptr<SequenceState> Session::new_sequence() const { return std::unique_ptr<SequenceState>(new SequenceState(*this)); }

void SequenceState::reset() {
  MemoryScope charge(session_.account_);
  for (size_t k = 0; k < states_.size(); ++k) states_[k] = make_op_state(*session_.ops_[k]);
}

void SequenceState::set_batch_rows(const std::vector<int64_t>& rows, int64_t total) {
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= total) fail("batch row ", rows[i], " is outside the ", total, " rows");
    for (size_t k = 0; k < i; ++k)
      if (rows[k] == rows[i]) fail("batch row ", rows[i], " is named twice");
  }
  for (auto& s : states_)
    if (s) {
      s->batch_rows = rows;
      s->total_rows = rows.empty() ? 0 : total;
    }
}

void SequenceState::copy_row(int64_t from, int64_t to) {
  MemoryScope charge(session_.account_);
  for (auto& s : states_)
    if (s) s->copy_row(from, to);
}

void SequenceState::keep_prefix(int64_t row, int64_t n) {
  for (auto& s : states_)
    if (s) s->keep_prefix(row, n);
}

void SequenceState::reset_row(int64_t row) {
  for (auto& s : states_)
    if (s) s->clear_row(row);
}

int64_t SequenceState::bytes_per_token() const {
  int64_t n = 0;
  for (const auto& state : states_)
    if (state) n += state->bytes_per_token();
  return n;
}

int64_t SequenceState::held_bytes() const {
  int64_t n = 0;
  for (const auto& state : states_)
    if (state) n += state->held_bytes();
  return n;
}

}  // namespace tern
