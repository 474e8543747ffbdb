// tern serve's /metrics: counters and histograms the HTTP threads and the scheduler's callbacks add to, written in
// Prometheus' text format with the queue's gauges.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "llm/request_queue.h"

namespace tern::serve {

// A Prometheus histogram (cumulative buckets, sum, count).
struct Histogram {
  std::vector<double> bounds;
  std::vector<int64_t> counts;  // per bucket, not cumulative; the last is +Inf
  double sum = 0;
  int64_t count = 0;
  explicit Histogram(std::vector<double> b) : bounds(std::move(b)), counts(bounds.size() + 1, 0) {}
  void observe(double v);
  void write(std::ostream& o, const std::string& name, const std::string& help) const;
};

class Metrics {
 public:
  void count_request(const std::string& endpoint, int status);
  void count_refused(const std::string& limit);  // a limit's name (queue, max_body, api_key, ...)
  void count_cancelled(const std::string& why);  // timeout, client_left, shutdown
  void count_prompt_tokens(int64_t n);
  // A generated token, `seconds` after the request arrived (its first) or after the choice's previous token.
  void count_token(double seconds, bool first);
  // The text /metrics answers; `queue` (null: an embeddings server) gives the gauges, `rows` is --parallel.
  std::string text(const llm::RequestQueue* queue, int64_t rows) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;  // (endpoint, status) → count
  int64_t prompt_tokens_ = 0, completion_tokens_ = 0;
  Histogram ttft_{{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};
  Histogram itl_{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}};
  std::map<std::string, int64_t> refused_;    // limit → requests it refused
  std::map<std::string, int64_t> cancelled_;  // why → requests ended before their answer
};

}  // namespace tern::serve
