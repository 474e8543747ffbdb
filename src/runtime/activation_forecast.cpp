#include "runtime/activation_forecast.h"

#include <algorithm>
#include <limits>

namespace tern {

void ActivationForecast::prepare(const Graph& g, const FeedBinding& feeds, const std::vector<char>& views,
                                 const std::vector<char>& is_graph_output, const std::vector<std::vector<int>>& release_after) {
  values_ = g.values.size();
  blocks_per_run_ = 0;
  steps_.clear();
  steps_.resize(g.nodes.size());
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& node = g.nodes[k];
    Step& step = steps_[k];
    step.releases = release_after[k];
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const int o = node.outputs[i];
      Size s;
      if (o < 0) {  // no memory for an output the node omits, but output 0 (execute_node), whose shape is unknown here
        if (i == 0) step.outputs.push_back(s);
        continue;
      }
      s.value = o;
      s.dtype = g.values[static_cast<size_t>(o)].dtype;
      s.graph_output = is_graph_output[static_cast<size_t>(o)] != 0;
      if (views[k]) s.view_of = node.inputs.empty() ? -1 : node.inputs[0];
      else if (s.dtype != DType::Undefined) s.dims = feeds.dims_of(o);
      if (s.view_of < 0) ++blocks_per_run_;
      step.outputs.push_back(std::move(s));
    }
  }
}

size_t ActivationForecast::bytes_of(const Size& s, const std::vector<int64_t>& binding) {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t numel = 1;
  for (const auto& dim : *s.dims) numel = __builtin_mul_overflow(numel, std::max<int64_t>(0, dim.size(binding)), &numel) ? kMax : numel;
  return numel > (int64_t{1} << 56) ? size_t{1} << 60 : bytes_for(s.dtype, numel);
}

bool ActivationForecast::forecast_plan(const std::vector<int64_t>& binding, size_t max_bytes, BufferPool::DryRun& dry, Result& result,
                                       std::vector<size_t>& plan_blocks) const {
  size_t bytes = 0;
  for (const Step& step : steps_)
    for (const Size& s : step.outputs) {
      if (s.view_of >= 0 || s.graph_output) continue;
      if (!s.dims) return false;  // (such a graph is never planned)
      bytes += bytes_of(s, binding);
      if (bytes > max_bytes) return false;
    }
  std::vector<size_t> made;
  for (const Step& step : steps_)
    for (const Size& s : step.outputs)
      if (s.view_of < 0 && !s.graph_output) made.push_back(dry.acquire(bytes_of(s, binding)));
  for (size_t c : plan_blocks) dry.release(c);
  plan_blocks = std::move(made);
  result.pool_growth = dry.taken();
  return true;
}

std::vector<size_t> ActivationForecast::plan_blocks(const std::vector<int64_t>& binding) const {
  std::vector<size_t> blocks;
  for (const Step& step : steps_)
    for (const Size& s : step.outputs)
      if (s.view_of < 0 && !s.graph_output && s.dims) blocks.push_back(BufferPool::capacity_of(bytes_of(s, binding)));
  return blocks;
}

void ActivationForecast::forecast_replay(const std::vector<int64_t>& binding, BufferPool::DryRun& dry, Result& result,
                                         std::vector<size_t>& caller_holds, std::vector<size_t>& plan_blocks) const {
  for (const Step& step : steps_)
    for (const Size& s : step.outputs)
      if (s.graph_output && s.view_of < 0 && s.dims) plan_blocks.push_back(dry.acquire(bytes_of(s, binding)));
  for (size_t c : caller_holds) dry.release(c);
  caller_holds.clear();  // (the plan's own buffers now: never free while it lives)
  result.pool_growth = dry.taken();
}

void ActivationForecast::forecast(const std::vector<int64_t>& binding, BufferPool::DryRun& dry, Result& result,
                                  std::vector<size_t>& caller_holds) const {
  struct Block {
    size_t capacity;
    int refs;
    bool graph_output;  // a graph output is it or views it: the caller takes it
  };
  std::vector<Block> blocks;
  std::vector<int> block_of(values_, -1);
  unsigned __int128 live = 0, most = 0;  // (sizes past 2^64 saturate below, not wrap)
  auto drop = [&](int b) {
    if (b >= 0 && --blocks[static_cast<size_t>(b)].refs == 0) {
      dry.release(blocks[static_cast<size_t>(b)].capacity);
      live -= blocks[static_cast<size_t>(b)].capacity;
    }
  };
  for (const Step& step : steps_) {
    for (const Size& s : step.outputs) {
      if (s.view_of >= 0) {
        if (const int b = block_of[static_cast<size_t>(s.view_of)]; b >= 0) {
          ++blocks[static_cast<size_t>(b)].refs;
          blocks[static_cast<size_t>(b)].graph_output |= s.graph_output;
          block_of[static_cast<size_t>(s.value)] = b;
        }
        continue;
      }
      if (!s.dims) {
        ++result.uncounted;
        continue;
      }
      const size_t bytes = bytes_of(s, binding);
      const size_t capacity = dry.acquire(bytes);
      blocks.push_back({capacity, 1, s.graph_output});
      block_of[static_cast<size_t>(s.value)] = static_cast<int>(blocks.size() - 1);
      live += capacity;
      most = std::max(most, live);
    }
    for (int v : step.releases) {
      drop(block_of[static_cast<size_t>(v)]);
      block_of[static_cast<size_t>(v)] = -1;
    }
  }
  constexpr size_t kSizeMax = std::numeric_limits<size_t>::max();
  // After the run: values no node reads are freed, the caller's earlier outputs given back, this run's kept.
  for (size_t c : caller_holds) dry.release(c);
  caller_holds.clear();
  for (const Block& b : blocks) {
    if (b.refs == 0) continue;
    if (b.graph_output) caller_holds.push_back(b.capacity);
    else dry.release(b.capacity);
  }
  result.most_live = std::max(result.most_live, most > kSizeMax ? kSizeMax : static_cast<size_t>(most));
  result.pool_growth = dry.taken();
}

}  // namespace tern
