#include "tools/serve/metrics.h"

#include <sstream>

namespace tern::serve {

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds.size() && v > bounds[i]) ++i;
  ++counts[i];
  sum += v;
  ++count;
}

void Histogram::write(std::ostream& o, const std::string& name, const std::string& help) const {
  o << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
  int64_t c = 0;
  for (size_t i = 0; i < bounds.size(); ++i) o << name << "_bucket{le=\"" << bounds[i] << "\"} " << (c += counts[i]) << "\n";
  o << name << "_bucket{le=\"+Inf\"} " << count << "\n" << name << "_sum " << sum << "\n" << name << "_count " << count << "\n";
}

void Metrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, status}];
}

void Metrics::count_refused(const std::string& limit) {
  std::lock_guard<std::mutex> lock(mu_);
  ++refused_[limit];
}

void Metrics::count_cancelled(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  ++cancelled_[why];
}

void Metrics::count_prompt_tokens(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += n;
}

void Metrics::count_token(double seconds, bool first) {
  std::lock_guard<std::mutex> lock(mu_);
  (first ? ttft_ : itl_).observe(seconds);
  ++completion_tokens_;
}

std::string Metrics::text(const llm::RequestQueue* queue, int64_t rows) const {
  std::ostringstream o;
  const int64_t queued = queue ? queue->waiting() : 0;
  const llm::RequestQueue::Stats q = queue ? queue->stats() : llm::RequestQueue::Stats{};
  std::lock_guard<std::mutex> m(mu_);
  o << "# HELP tern_requests_total HTTP requests by endpoint and status.\n# TYPE tern_requests_total counter\n";
  for (const auto& [k, n] : requests_)
    o << "tern_requests_total{endpoint=\"" << k.first << "\",status=\"" << k.second << "\"} " << n << "\n";
  o << "# HELP tern_prompt_tokens_total Prompt tokens of accepted requests (times n).\n# TYPE tern_prompt_tokens_total counter\n"
    << "tern_prompt_tokens_total " << prompt_tokens_ << "\n";
  o << "# HELP tern_generation_tokens_total Tokens generated.\n# TYPE tern_generation_tokens_total counter\n"
    << "tern_generation_tokens_total " << completion_tokens_ << "\n";
  o << "# HELP tern_decode_steps_total Batched model runs.\n# TYPE tern_decode_steps_total counter\n"
    << "tern_decode_steps_total " << q.steps << "\n";
  o << "# HELP tern_queue_dropped_total Requests that left the queue unrun: their deadline passed or their client left.\n"
    << "# TYPE tern_queue_dropped_total counter\ntern_queue_dropped_total " << q.dropped << "\n";
  o << "# HELP tern_refused_total Requests refused by a limit: its name (queue, max_prompt_tokens, max_tokens, max_body, "
       "context_length, parallel, shutting_down, api_key, max_memory).\n# TYPE tern_refused_total counter\n";
  for (const auto& [limit, n] : refused_) o << "tern_refused_total{limit=\"" << limit << "\"} " << n << "\n";
  o << "# HELP tern_cancelled_total Accepted requests that ended before their answer: timeout (--timeout), client_left, "
       "shutdown (--grace ended).\n# TYPE tern_cancelled_total counter\n";
  for (const auto& [why, n] : cancelled_) o << "tern_cancelled_total{reason=\"" << why << "\"} " << n << "\n";
  o << "# HELP tern_queue_depth Sequences waiting for a row.\n# TYPE tern_queue_depth gauge\ntern_queue_depth " << queued << "\n";
  o << "# HELP tern_batch_size Sequences in the running batch.\n# TYPE tern_batch_size gauge\ntern_batch_size " << q.active_rows << "\n";
  o << "# HELP tern_batch_rows Rows of the batch (--parallel).\n# TYPE tern_batch_rows gauge\ntern_batch_rows " << rows << "\n";
  o << "# HELP tern_kv_slots_in_use Ring-cache slots held by running sequences, per layer.\n# TYPE tern_kv_slots_in_use gauge\n"
    << "tern_kv_slots_in_use " << q.held_tokens << "\n";
  o << "# HELP tern_prefix_cache_hits_total Prompts that began with tokens an idle row held (fed only the rest).\n"
    << "# TYPE tern_prefix_cache_hits_total counter\ntern_prefix_cache_hits_total " << q.prefix_hits << "\n";
  o << "# HELP tern_prefix_cache_misses_total Prompts that found none of their beginning held.\n"
    << "# TYPE tern_prefix_cache_misses_total counter\ntern_prefix_cache_misses_total " << q.prefix_misses << "\n";
  o << "# HELP tern_prefix_cache_reused_tokens_total Prompt tokens not fed: their keys and values were held.\n"
    << "# TYPE tern_prefix_cache_reused_tokens_total counter\ntern_prefix_cache_reused_tokens_total " << q.reused_tokens << "\n";
  o << "# HELP tern_speculative_drafted_tokens_total Tokens speculation proposed (--speculate).\n"
    << "# TYPE tern_speculative_drafted_tokens_total counter\ntern_speculative_drafted_tokens_total " << q.drafted_tokens << "\n";
  o << "# HELP tern_speculative_accepted_tokens_total Proposed tokens the model's own choice confirmed.\n"
    << "# TYPE tern_speculative_accepted_tokens_total counter\ntern_speculative_accepted_tokens_total " << q.accepted_tokens << "\n";
  ttft_.write(o, "tern_time_to_first_token_seconds", "From a request's arrival to its first token.");
  itl_.write(o, "tern_inter_token_latency_seconds", "Between a sequence's consecutive tokens.");
  return o.str();
}

}  // namespace tern::serve
