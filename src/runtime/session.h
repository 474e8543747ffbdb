// tern::Session — load an ONNX model once, run it many times, from as many threads as you like.
//
//   tern::Session session("model.onnx");
//   auto outputs = session.run({{"input_ids", ids}, {"attention_mask", mask}});
//   const tern::Tensor& logits = outputs.at("logits");
//
// Threads (as ONNX Runtime's run()): a session is the model, prepared once and immutable after load, plus a set
// of run contexts (feeds, values, step plans) — each run() takes one of its own, so concurrent runs on one session
// are safe and give what serial runs give. Sequence state (the ring-buffer KV caches of DecoderRewrites::ring_capacity)
// lives in SequenceState objects: the session's own (sequence()) and any made by new_sequence(), one per
// independent sequence on the same weights. Runs that feed the same sequence go one at a time — a run that finds
// its sequence in use by another fails with SequenceBusyError rather than interleave two token streams in one
// cache. A session on an OpenCL device runs one run at a time (the device queue), the others waiting.
#pragma once
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/progress.h"
#include "graph/onnx_loader.h"
#include "graph/weight_pack.h"
#include "ops/execute.h"
#include "ops/op.h"
#include "ops/weight_packer.h"
#include "passes/pipeline.h"
#include "runtime/activation_forecast.h"
#include "runtime/buffer_pool.h"
#include "runtime/feed_binding.h"
#include "runtime/session_weights.h"

namespace tern {

// One node's run, as the per-node hook sees it.
struct NodeRun {
  const Node& node;
  const Op& op;
  const std::vector<const Tensor*>& inputs;
  const std::vector<Tensor>& outputs;
  const OpState* state;         // the node's sequence state after the run (null for stateless ops)
  bool on_device;               // computed by the session's device (else the CPU)
  double start_us, end_us;      // steady clock (node_clock_us)
  int64_t run_index;            // which Session::run this node belongs to (counts from 0 per session, in the order runs start)
  const kernels::Context& cpu;  // what its CPU kernels ran with: the session's threads, the run's scratch
};

// The clock NodeRun's times come from: the steady clock, in microseconds.
double node_clock_us();

// A run that asked for a sequence another run is feeding (SequenceState).
struct SequenceBusyError : Error {
  using Error::Error;
};

// Where a session's memory goes. Owned parts are counted in owned_host_bytes (core/tensor.h); the
// mapped ones are file pages the kernel keeps resident only as far as they are read.
struct MemoryUse {
  int64_t packed_weights = 0;    // weights repacked at load (WeightPacker::packed_bytes)
  int64_t owned_constants = 0;   // constants kept in owned memory: folded results, weights read from the protobuf
  int64_t mapped_constants = 0;  // constants viewing a mapped weights file (Gather tables, MatMulNBits as stored)
  int64_t mapped_prepared = 0;   // prepared weights read from the model's pack (tern pack), not owned
  int64_t kv_cache = 0;          // the ops' sequence state (KV rings) as allocated so far
  int64_t activations = 0;       // the activations' pool: every block it holds, in use or free
  int64_t scratch = 0;           // the kernels' scratch (kernels/cpu/context.h) of the runs not under way
  int64_t owned() const { return packed_weights + owned_constants + kv_cache + activations + scratch; }
};

struct SessionOptions {
  // Where nodes run: the CPU, or an OpenCL device (kernels/opencl/device.h; needs -DTERN_OPENCL=ON) —
  // nodes whose op variant takes them there (ops/opencl/, Op::runs_on) do, with their outputs and the
  // ops' weights and caches kept in device memory; the others run on the CPU with their inputs
  // downloaded (Session::host_nodes lists them).
  Device device;
  int threads = 0;  // 0: all cores
  // The CPU kernels' tier (kernels/cpu/isa.h), any this CPU runs; unset: the default (TERN_ISA, else the machine's
  // highest). Per session: two sessions in one process may run at two tiers.
  std::optional<kernels::Isa> isa;
  bool optimize = true;  // constant folding + dead-node removal
  // How the passes reshape a decoder for generation: the ring-buffer KV cache, the last position's logits, the
  // hidden state (passes/pipeline.h). The LLM layer fills it; the defaults run the graph as the file has it.
  DecoderRewrites decoder;
  // Weights of MatMuls with a constant 2-D float matrix, converted once at load (WeightPacker::pack).
  WeightFormat weights = WeightFormat::AsStored;
  // Activations of block-quantized products in decode rows: as the model asks, or fp32 / int8 throughout.
  ActivationFormat activations = ActivationFormat::AsModel;
  // Block-quantized products run every row as a decode row does: with int8 activations where `activations`
  // gives decode rows them, a prefill's rows too (no bf16 or fp32 GEMM) — the default but at tier amx, whose
  // prefill runs bf16 tiles. What tern eval scores: the perplexity of the arithmetic each generated token is
  // computed with.
  bool every_row_as_decode = false;
  // Host memory this session may own (bytes; 0: no cap of its own): weights repacked at load, folded constants,
  // KV rings, activations (its MemoryAccount, core/tensor.h). Loading or a run that would pass it fails with a
  // MemoryLimitError naming the numbers, instead of the process being killed for memory. Per session: other
  // sessions keep their own caps; the process's cap (set_process_memory_limit) holds over all of them.
  size_t max_memory = 0;
  // Maps every weight still read from the model's files into the process at load (weights used as
  // stored, such as MatMulNBits blocks; not Gather tables, read a row a token), so the first run takes
  // no page faults for them; the load takes them instead.
  bool prefault = false;
  // Prepared weights from a pack (`tern pack`, graph/weight_pack.h). Use: when <model>.tern-pack lies
  // beside the model, the session maps it and takes what it holds instead of preparing it; the pack then
  // sets the weight format (`weights` asking another one fails). Ignore: the model's files alone.
  // Record: prepares as usual and keeps everything it prepared for save_pack().
  enum class Pack { Use, Ignore, Record };
  Pack pack = Pack::Use;
  // Per-node hook (the profiler builds on it), after each node runs. Unset: no clock is read at all. Called on
  // the thread of the run the node belongs to: concurrent runs call it concurrently.
  std::function<void(const NodeRun& run)> on_node;
  // The load's weight preparation, node by node (tern pack's work too): the CLI's progress bar.
  Progress on_load_progress;
  // onnxruntime's add_free_dimension_override_by_name: a named dim of the graph's inputs fixed before shape
  // inference (feeds must then have it).
  std::map<std::string, int64_t> fixed_dims;
  // onnxruntime's add_initializer: initializers replaced by the caller's tensors (same dtype and shape; read in
  // place, so they must outlive the session).
  std::vector<std::pair<std::string, Tensor>> initializers;
};

// "cpu", "opencl" (device 0) or "opencl:N" (`tern devices` lists them); fails naming the choices.
Device parse_device(const std::string& name);

class Outputs {
 public:
  std::vector<std::pair<std::string, Tensor>> items;
  const Tensor& at(const std::string& name) const;
  const Tensor& operator[](size_t i) const { return items.at(i).second; }
  size_t size() const { return items.size(); }
};

class DeviceExecutor;
class Session;

// The state of one sequence: each op's (StatefulOp::make_state — the KV rings of the layers the session caches). Made
// by Session::new_sequence (or the session's own, Session::sequence()); must not outlive its session.
class SequenceState {
 public:
  ~SequenceState();
  SequenceState(const SequenceState&) = delete;
  SequenceState& operator=(const SequenceState&) = delete;
  // Empties every cache.
  void reset();
  // Empties row `row` of every cache, keeping the other rows (continuous batching).
  void reset_row(int64_t row);
  // Row `to` of every cache becomes a copy of row `from` (continuous batching: choices sharing a prompt).
  void copy_row(int64_t from, int64_t to);
  // Row `row` of every cache keeps its first n tokens (OpState::keep_prefix): a prompt beginning with them reuses them.
  void keep_prefix(int64_t row, int64_t n);
  // Continuous batching: the next runs feed sequences `rows` (distinct, each < total) of caches holding
  // `total` — batch index i is row rows[i] — so idle rows cost nothing. Empty: index i is row i.
  void set_batch_rows(const std::vector<int64_t>& rows, int64_t total);
  // Bytes the caches move per decode token, at their current fill.
  int64_t bytes_per_token() const;
  // Bytes the caches hold now.
  int64_t held_bytes() const;
  // With an OpenCL session and a single sequence: from this sequence's next run on, the graph output `name`
  // ([1, S, V] scores) is not downloaded; the k best scores of its last position are found on the
  // device and only they come back (k = 1: the argmax's id alone), best first, ties to the lower index —
  // all a greedy or top-k sampler needs. Greedy decoding then moves one token id each way per step.
  // k = 0: back to downloading the output. k ≤ Session::max_device_top_k(). Per sequence: other
  // generators on the session keep downloading theirs.
  void set_device_top_k(const std::string& name, int k);
  int device_top_k() const { return top_k_; }
  const std::vector<int32_t>& top_k_ids() const { return top_ids_; }
  const std::vector<float>& top_k_values() const { return top_values_; }  // (k = 1: not fetched, 0)

 private:
  friend class Session;
  explicit SequenceState(const Session& session);
  const Session& session_;
  std::vector<std::unique_ptr<OpState>> states_;  // parallel to the session's ops
  std::atomic<bool> busy_{false};                 // a run is feeding it
  std::string top_k_output_;                      // set_device_top_k's, and what its runs found
  int top_k_ = 0;
  std::vector<int32_t> top_ids_;
  std::vector<float> top_values_;
};

class Session {
 public:
  explicit Session(const std::string& model_path, SessionOptions options = {});
  Session(Model model, SessionOptions options);
  ~Session();

  const std::vector<IOInfo>& inputs() const { return feeds_.inputs(); }
  const std::vector<IOInfo>& outputs() const { return outputs_; }
  const Model& model() const { return model_; }
  const Graph& graph() const { return *model_.graph; }
  // What the passes did at load: counts, the rewrites fusions made, why attention missed the ring (with a window,
  // per layer; empty when it did not), how many layers' KV caches the session holds (DecoderRewrites::ring_capacity).
  const PipelineResult& passes() const { return passes_; }
  const BufferPool& pool() const { return *pool_; }

  // Feeds are matched by name; every graph input must be given (a merged decoder's past is taken as empty where
  // use_cache_branch is fed false: passes/inline_branches.h). Outputs come in graph-output order and
  // stay valid after later runs. `sequence`: the state the run reads and advances (null: the session's own,
  // sequence()). Safe to call from several threads at once (see the top of this file).
  Outputs run(const std::vector<std::pair<std::string, Tensor>>& feeds, SequenceState* sequence = nullptr);
  // The same, into `out`: pass back the previous run's Outputs and a replayed step writes into the
  // tensors it returned last time when nothing else holds them (so hand back only outputs you are done
  // with) — with the step plan, a decode step allocates nothing.
  void run(const std::vector<std::pair<std::string, Tensor>>& feeds, Outputs& out, SequenceState* sequence = nullptr);
  // The session's own sequence (runs given no other feed it) and fresh ones: independent sequences on one
  // set of weights (a generator each).
  SequenceState& sequence() { return *sequence_; }
  std::unique_ptr<SequenceState> new_sequence() const;
  // Whether any op keeps sequence state (runs then claim their SequenceState).
  bool stateful() const { return stateful_; }
  const SessionOptions& options() const { return options_; }
  // The memory this session holds now, by what it is for (bytes; kv_cache: every live SequenceState's).
  MemoryUse memory_use() const;
  // The first file the session's weights view (the model file, its external data, its pack) that changed under
  // its mapping since the load (core/mapped_file.h); empty when none. Each run fails when one has.
  std::string changed_file() const;
  // The most bytes one sequence's state (SequenceState: the KV rings) holds at once while `positions` tokens a
  // row of `rows` rows pass: every layer's ring at that fill, and the old slots of the one growing last beside
  // its new ones. 0 for a session without such state.
  int64_t state_peak_bytes(int64_t rows, int64_t positions) const;
  // Before running: what runs with feeds of these shapes (every graph input, by name), one after another, would
  // take for their activations — the bytes the pool would take from the system as it holds its blocks now (it
  // keeps them: a second run of the same shapes takes none) and the most one run holds at once — from the graph's
  // symbolic shapes (runtime/activation_forecast.h), with the step plans the runs make and replay (a decode step
  // repeated). Every CPU run that replays no step plan checks its own against the memory caps before its first
  // node. Zero on an OpenCL device (its memory is not counted).
  ActivationForecast::Result forecast_activations(const std::vector<std::vector<std::pair<std::string, Shape>>>& runs) const;
  // What the session's memory cap counts (SessionOptions::max_memory).
  const MemoryAccountPtr& memory_account() const { return account_; }
  // The weights as the load prepared them: the pack, bytes a decode step reads, saving a recorded pack.
  const SessionWeights& weights() const { return weights_; }
  // With an OpenCL device: bytes moved host↔device so far (null on the CPU), and the nodes the last run
  // computed on the CPU instead ("name (op type)"). (Device sessions run one run at a time.)
  const TransferStats* device_transfers() const;
  // The largest k SequenceState::set_device_top_k takes.
  static int max_device_top_k();
  const std::vector<std::string>& host_nodes() const { return host_nodes_; }

 private:
  // What one run() writes: taken from idle_runs_ for the run (or made), given back after it, so concurrent
  // runs never share one and serial runs reuse the same one — with its step plan.
  struct RunState;
  class RunLease;
  void prepare();        // under the session's memory account and threads…
  void prepare_graph();  // …the passes, the ops, their weights
  // SessionOptions::fixed_dims and initializers, before the passes.
  void apply_overrides(Graph& g) const;
  void bind_constants(RunState& r) const;  // the graph's constants into r.values
  // Points r.ins at the node's input values; fails naming an input that has none.
  void gather_inputs(RunState& r, const Node& node) const;
  // Fails (MemoryLimitError) before the run when its activations' forecast passes a memory cap.
  void check_activations(const RunState& r) const;
  void run_claimed(RunState& r, const std::vector<std::pair<std::string, Tensor>>& feeds, Outputs& out, SequenceState& seq);
  // The node loop, for every run: each node on the device when the session has one and the node's op
  // takes its inputs there, else on the CPU (device inputs downloaded first). `planned`: into the step
  // plan's outputs, no shape rules; else shape rule → outputs → kernel, recording each value's shape in
  // `shapes` when given (to build a plan from).
  void run_nodes(RunState& r, SequenceState& seq, int64_t index, bool planned, std::vector<Shape>* shapes, Outputs& out);
  // Node k's plan outputs, graph outputs given fresh memory unless the caller handed last run's back.
  std::vector<Tensor>& planned_outputs(RunState& r, size_t k, const Outputs& out) const;
  // With a device: graph outputs downloaded, or only their best scores (set_device_top_k).
  void bring_outputs_to_host(RunState& r, SequenceState& seq);
  void build_plan(RunState& r, const std::vector<Shape>& shapes);
  void collect_outputs(RunState& r, bool planned, Outputs& out) const;
  // A graph output that node k computes into memory of its own (not a view of another value).
  bool owns_graph_output(size_t k, int value) const {
    return value >= 0 && is_graph_output_[static_cast<size_t>(value)] && !ops_[k]->traits().outputs_are_views;
  }
  static constexpr size_t kMaxPlanBytes = size_t{64} << 20;

  friend class SequenceState;
  MemoryAccountPtr account_;  // (before model_: loading is charged to it)
  Model model_;
  SessionOptions options_;
  std::atomic<int64_t> runs_{0};  // Session::run calls so far (NodeRun::run_index)
  PipelineResult passes_;         // what the passes did at load
  FeedBinding feeds_;             // the inputs, and the symbolic dims that key step plans
  std::vector<IOInfo> outputs_;
  std::vector<std::unique_ptr<Op>> ops_;         // parallel to graph().nodes
  bool stateful_ = false;                        // some op makes state
  std::vector<std::vector<int>> release_after_;  // values whose last consumer is node k
  ActivationForecast forecast_;                  // what a run's activations take from pool_, before it runs
  std::shared_ptr<BufferPool> pool_;
  SessionWeights weights_;
  // Every live SequenceState (memory_use counts their caches); the session's own is one.
  mutable std::mutex sequences_mutex_;
  mutable std::vector<const SequenceState*> sequences_;
  std::unique_ptr<SequenceState> sequence_;

  // Step plans (feed_binding.h): what a run replays when its inputs' symbolic dims equal the previous run's.
  struct StepPlan {
    std::vector<int64_t> binding;              // the feeds' symbolic dims it was made for
    std::vector<std::vector<Tensor>> outputs;  // per node, its outputs (graph outputs get a buffer per run)
    bool ready = false;
  };
  std::vector<char> is_graph_output_;  // by value id
  mutable std::mutex idle_runs_mutex_;
  std::vector<std::unique_ptr<RunState>> idle_runs_;
  std::unique_ptr<DeviceExecutor> device_;
  std::mutex device_mutex_;  // a device session's runs, one at a time
  std::vector<std::string> host_nodes_;
};

}  // namespace tern
