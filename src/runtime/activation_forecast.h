// What a run's activations will take from the session's pool, told before the run from the graph's symbolic
// shapes and the feeds' dims (FeedBinding): each node's outputs acquired in node order and released after
// their last reader (a view holding its source's block), as Session::run_nodes does, played against the
// pool's free blocks by the pool's own rules (BufferPool::DryRun). So a run that would pass a memory cap
// fails before its first node, naming the sizes, and a generator checks its prefill's activations together
// with the KV cache it will grow to.
#pragma once
#include <cstdint>
#include <vector>

#include "graph/ir.h"
#include "runtime/buffer_pool.h"
#include "runtime/feed_binding.h"

namespace tern {

class ActivationForecast {
 public:
  // At load, after FeedBinding::prepare: `views[k]` when node k's outputs view its input 0 (Op::outputs_are_views);
  // `is_graph_output[v]` by value id; `release_after[k]`: the values whose last reader is node k (graph outputs
  // are never released).
  void prepare(const Graph& g, const FeedBinding& feeds, const std::vector<char>& views, const std::vector<char>& is_graph_output,
               const std::vector<std::vector<int>>& release_after);

  struct Result {
    size_t pool_growth = 0;  // bytes the pool would take from the system (saturating at SIZE_MAX)
    size_t most_live = 0;    // the most bytes of one run's values held at once (their blocks' capacities)
    int64_t uncounted = 0;   // node outputs whose size the feeds' dims do not give (a shape read from data): left out
  };
  // The most blocks one run acquires (a DryRun's room: BufferPool::DryRun's `releases`).
  size_t blocks_per_run() const { return blocks_per_run_; }
  // A run with `binding` (FeedBinding::bind or bind_shapes) played on `pool` (a DryRun of the session's pool as
  // it is now, or after the runs played on it before this one), added to `result`. `caller_holds`: the blocks of
  // the graph outputs the caller holds from its previous run — held through this run, given back at its end, as
  // Session::collect_outputs replaces them — and on return this run's.
  void forecast(const std::vector<int64_t>& binding, BufferPool::DryRun& pool, Result& result, std::vector<size_t>& caller_holds) const;
  // The step plan a second run with `binding` makes (Session::build_plan): every node output but views and graph
  // outputs acquired at once and kept, when they come to at most `max_bytes`. Whether it is made; `plan_blocks`
  // then gives back the plan it replaces (Session: r.plan = the new one) and holds the new one's.
  bool forecast_plan(const std::vector<int64_t>& binding, size_t max_bytes, BufferPool::DryRun& pool, Result& result,
                     std::vector<size_t>& plan_blocks) const;
  // The blocks a plan for `binding` holds, as the smallest capacity each could have: what a plan made before the
  // forecast gives back when a new one replaces it (at least that much: the forecast errs high, not low).
  std::vector<size_t> plan_blocks(const std::vector<int64_t>& binding) const;
  // A plan's first replay after another run: its graph outputs in fresh blocks (the caller hands back no buffer of
  // the plan's), and the caller's earlier ones given back; later replays take nothing.
  // (The plan keeps those blocks: they join `plan_blocks`.)
  void forecast_replay(const std::vector<int64_t>& binding, BufferPool::DryRun& pool, Result& result, std::vector<size_t>& caller_holds,
                       std::vector<size_t>& plan_blocks) const;

 private:
  // A node output's bytes: its elements, the product of its dims' sizes (FeedBinding::dims_of), in its dtype.
  struct Size {
    int value = -1;
    int view_of = -1;  // the value whose block a view output holds (-1: a block of its own)
    bool graph_output = false;
    DType dtype = DType::Undefined;
    const std::vector<FeedBinding::SizeFormula>* dims = nullptr;  // (the FeedBinding's; null: unknown)
  };
  struct Step {
    std::vector<Size> outputs;
    std::vector<int> releases;
  };
  // Its bytes for `binding` (a size no machine has reads as 2^60: the caps refuse it, and sums of such stay in range).
  static size_t bytes_of(const Size& s, const std::vector<int64_t>& binding);
  std::vector<Step> steps_;  // per node
  size_t values_ = 0, blocks_per_run_ = 0;
};

}  // namespace tern
