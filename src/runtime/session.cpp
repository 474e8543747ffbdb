#include "runtime/session.h"

#include <algorithm>

#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "kernels/cpu/parallel.h"
#include "ops/execute.h"
#include "passes/shape_values.h"
#include "runtime/device_executor.h"

namespace tern {

double node_clock_us() { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

const Tensor& Outputs::at(const std::string& name) const {
  for (const auto& kv : items)
    if (kv.first == name) return kv.second;
  fail_input("no output named '", name, "'");
}

#ifndef TERN_OPENCL
std::unique_ptr<DeviceExecutor> DeviceExecutor::open(const Device&) {
  fail_unsupported("this tern was built without OpenCL (-DTERN_OPENCL=OFF): use --device cpu");
}
int DeviceExecutor::max_top_k() { return 0; }
std::string DeviceExecutor::describe_devices() { return "opencl    not built (-DTERN_OPENCL=OFF)\n"; }
#endif

Device parse_device(const std::string& name) {
  if (name == "cpu") return {};
  if (name == "opencl") return {DeviceKind::OpenCL, 0};
  if (name.rfind("opencl:", 0) == 0 && name.size() > 7 && name.size() <= 10 &&  // up to 3 digits
      name.find_first_not_of("0123456789", 7) == std::string::npos)
    return {DeviceKind::OpenCL, std::stoi(name.substr(7))};
  fail("device '", name, "': use cpu, opencl or opencl:N (tern devices lists the OpenCL devices)");
}

namespace {
// The memory cap holds from the first byte loaded.
Model load_charged(const std::string& model_path, const MemoryAccountPtr& account) {
  MemoryScope charge(account);
  try {
    LoadOptions options;
    options.misaligned_views = true;  // (SessionWeights::align_constants gives typed readers aligned copies)
    return load_onnx(model_path, options);
  } catch (const MemoryLimitError& e) {
    throw MemoryLimitError(std::string("loading stopped before passing the memory cap: ") + e.what());
  }
}
// An output's shape as inference left it, its unknown dims filled from the file's declared shape of the same rank.
std::optional<SymShape> with_declared_dims(std::optional<SymShape> shape, const std::map<std::string, SymShape>& declared,
                                           const std::string& name) {
  const auto it = declared.find(name);
  if (!shape || it == declared.end() || it->second.size() != shape->size()) return shape;
  for (size_t i = 0; i < shape->size(); ++i)
    if (!(*shape)[i].is_known() && it->second[i].is_known()) (*shape)[i] = it->second[i];
  return shape;
}
MemoryAccountPtr account_for(const std::string& model_path, const SessionOptions& options) {
  return std::make_shared<MemoryAccount>(model_path, options.max_memory);
}
}  // namespace

// What one run writes, and the step plan serial runs on it replay.
struct Session::RunState {
  std::vector<Tensor> values;       // the values of the current run, by value id
  std::vector<const Tensor*> ins;   // the current node's inputs
  std::vector<char> fed;            // which graph inputs the feeds gave
  std::vector<Tensor> host_copies;  // device inputs downloaded for a node run on the CPU
  std::vector<int64_t> binding, last_binding;
  StepPlan plan;
  bool constants_bound = false;  // values holds the graph's constants (a plan's replay reads them there)
  kernels::Workspace scratch;    // the kernels' buffers, kept from run to run (charged to the session)
};

// A RunState taken from the session's idle ones for one run (the most recently returned: serial runs keep
// theirs and its plan) and returned after it, whatever happens. Its values are emptied by the run itself.
class Session::RunLease {
 public:
  explicit RunLease(Session& s) : s_(s) {
    {
      std::lock_guard<std::mutex> lock(s_.idle_runs_mutex_);
      if (!s_.idle_runs_.empty()) {
        run_ = std::move(s_.idle_runs_.back());
        s_.idle_runs_.pop_back();
      }
    }
    if (!run_) {
      run_ = std::make_unique<RunState>();
      run_->values.resize(s_.model_.graph->values.size());
    }
  }
  ~RunLease() {
    std::lock_guard<std::mutex> lock(s_.idle_runs_mutex_);
    s_.idle_runs_.push_back(std::move(run_));
  }
  RunState& operator*() { return *run_; }

 private:
  Session& s_;
  std::unique_ptr<RunState> run_;
};

Session::Session(const std::string& model_path, SessionOptions options)
    : account_(account_for(model_path, options)), model_(load_charged(model_path, account_)), options_(std::move(options)) {
  prepare();
}

Session::Session(Model model, SessionOptions options)
    : account_(account_for(model.path, options)), model_(std::move(model)), options_(std::move(options)) {
  prepare();
}

Session::~Session() = default;

MemoryUse Session::memory_use() const {
  MemoryUse m;
  weights_.count(m);
  {
    std::lock_guard<std::mutex> lock(sequences_mutex_);
    for (const SequenceState* seq : sequences_) m.kv_cache += seq->held_bytes();
  }
  m.activations = static_cast<int64_t>(pool_->held_bytes());
  std::lock_guard<std::mutex> lock(idle_runs_mutex_);
  for (const auto& r : idle_runs_) m.scratch += r->scratch.held_bytes();
  return m;
}

int64_t Session::state_peak_bytes(int64_t rows, int64_t positions) const {
  const Graph& g = *model_.graph;
  int64_t total = 0, largest = 0;
  std::vector<const Value*> inputs;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (!ops_[k]->stateful()) continue;
    inputs.clear();
    for (int in : g.nodes[k].inputs) inputs.push_back(in >= 0 ? &g.values[static_cast<size_t>(in)] : nullptr);
    const StatefulOp* stateful = ops_[k]->stateful();
    const int64_t bytes = stateful ? stateful->state_bytes(rows, positions, inputs) : 0;
    total += bytes;
    largest = std::max(largest, bytes);
  }
  return total + largest;  // (a ring's old slots are at most its new ones)
}

std::string Session::changed_file() const {
  for (const auto& file : model_.mappings)
    if (file->changed()) return file->path;
  const WeightPack* pack = weights_.pack();
  return pack && pack->mapping() && pack->mapping()->changed() ? pack->mapping()->path : "";
}

const TransferStats* Session::device_transfers() const { return device_ ? &device_->transfers() : nullptr; }

int Session::max_device_top_k() { return DeviceExecutor::max_top_k(); }

void Session::prepare() {
  // Whatever the load allocates counts against this session's cap; kernels it runs (packing) use its threads.
  MemoryScope charge(account_);
  if (options_.threads <= 0) options_.threads = kernels::hardware_threads();
  if (!options_.isa) options_.isa = kernels::default_isa();
  try {
    if (options_.device.kind == DeviceKind::OpenCL) device_ = DeviceExecutor::open(options_.device);
    pool_ = BufferPool::create(account_);
    prepare_graph();
  } catch (const MemoryLimitError& e) {
    throw MemoryLimitError(model_.path + ": loading stopped before passing the memory cap: " + e.what());
  }
}

void Session::prepare_graph() {
  Graph& g = *model_.graph;
  // Report every unsupported op at once: users want the whole list, not the first.
  std::set<std::string> missing;
  const auto& registry = OpRegistry::instance();
  for (const Node& n : g.nodes)
    if (!registry.has(n.domain, n.op_type))
      missing.insert(n.op_type + " (domain '" + (n.domain.empty() ? "ai.onnx" : n.domain) + "', node '" + n.name + "')");
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += "\n  " + m;
    fail_unsupported(model_.path, ": unsupported ops:", list);
  }
  for (const auto& list : {g.inputs, g.outputs})
    for (int id : list)
      if (!g.values[static_cast<size_t>(id)].unsupported.empty())
        fail_unsupported(model_.path, ": ", g.values[static_cast<size_t>(id)].unsupported);
  apply_overrides(g);
  weights_.open_pack(model_, options_);
  SessionWeights::align_constants(g);
  passes_ = optimize_graph(g, {options_.optimize, options_.decoder, weights_.pack()}, model_.path);
  feeds_.prepare(g, model_.path);
  for (int id : g.outputs) {
    const Value& v = g.values[static_cast<size_t>(id)];
    outputs_.push_back({v.name, v.dtype, with_declared_dims(v.shape, g.declared_output_shapes, v.name)});
  }
  for (const Node& n : g.nodes) {
    ops_.push_back(registry.create(n, options_.device.kind));
    if (ops_.back()->traits().shapes_from_run) feeds_.never_replay();  // (a step plan needs its shapes before the run)
  }
  weights_.prepare(g, ops_, options_, device_ ? device_->kernels() : nullptr);
  sequence_ = new_sequence();
  for (const auto& state : sequence_->states_) stateful_ = stateful_ || state != nullptr;

  // Liveness: free each intermediate after its last consumer (graph outputs and constants stay).
  std::vector<int> last_use(g.values.size(), -1);
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (int in : g.nodes[k].inputs)
      if (in >= 0) last_use[static_cast<size_t>(in)] = static_cast<int>(k);
  is_graph_output_.assign(g.values.size(), 0);
  for (int o : g.outputs) is_graph_output_[static_cast<size_t>(o)] = 1;
  release_after_.assign(g.nodes.size(), {});
  for (size_t v = 0; v < g.values.size(); ++v)
    if (last_use[v] >= 0 && !is_graph_output_[v] && !g.values[v].constant)
      release_after_[static_cast<size_t>(last_use[v])].push_back(static_cast<int>(v));
  std::vector<char> views(ops_.size());
  for (size_t k = 0; k < ops_.size(); ++k) views[k] = ops_[k]->traits().outputs_are_views;
  forecast_.prepare(g, feeds_, views, is_graph_output_, release_after_);
}

ActivationForecast::Result Session::forecast_activations(const std::vector<std::vector<std::pair<std::string, Shape>>>& runs) const {
  ActivationForecast::Result result;
  if (device_ || runs.empty()) return result;
  // The runs as run_claimed takes them, from the run state the next run takes (RunLease: the last returned): a
  // plan's binding replays, a binding twice in a row makes a plan.
  std::vector<int64_t> last, plan, binding;
  bool plan_ready = false, replaying = false;
  {
    std::lock_guard<std::mutex> lock(idle_runs_mutex_);
    if (!idle_runs_.empty()) {
      last = idle_runs_.back()->last_binding;
      plan = idle_runs_.back()->plan.binding;
      plan_ready = idle_runs_.back()->plan.ready;
    }
  }
  BufferPool::DryRun pool(*pool_, (runs.size() + 2) * forecast_.blocks_per_run());
  std::vector<size_t> caller_holds;  // (what the caller holds now is in use, not free: nothing to give back)
  std::vector<size_t> plan_blocks = plan_ready ? forecast_.plan_blocks(plan) : std::vector<size_t>{};
  for (const auto& shapes : runs) {
    feeds_.bind_shapes(shapes, binding);
    if (plan_ready && binding == plan && feeds_.replayable()) {
      if (!replaying) forecast_.forecast_replay(binding, pool, result, caller_holds, plan_blocks);
      replaying = true;
      last = binding;
      continue;
    }
    replaying = false;
    forecast_.forecast(binding, pool, result, caller_holds);
    if (feeds_.replayable() && binding == last && forecast_.forecast_plan(binding, kMaxPlanBytes, pool, result, plan_blocks)) {
      plan = binding;
      plan_ready = true;
    }
    last = binding;
  }
  return result;
}

void Session::check_activations(const RunState& r) const {
  ActivationForecast::Result f;
  BufferPool::DryRun pool(*pool_, forecast_.blocks_per_run());
  std::vector<size_t> caller_holds;
  forecast_.forecast(r.binding, pool, f, caller_holds);
  if (f.pool_growth == 0) return;
  try {
    check_host_bytes(f.pool_growth, "");
  } catch (...) {  // (the message made only when it is needed: runs that fit allocate nothing for it)
    rethrow_prefixed(detail::concat(model_.path, ": a run with ", feeds_.describe(r.binding), " would take ", memory_size(f.pool_growth),
                                    " more for its activations (forecast before its first node): "));
  }
}

void Session::apply_overrides(Graph& g) const {
  for (int id : g.inputs) {
    Value& v = g.values[static_cast<size_t>(id)];
    if (!v.shape) continue;
    for (Dim& d : *v.shape)
      if (const auto it = options_.fixed_dims.find(d.symbol); !d.is_known() && it != options_.fixed_dims.end()) {
        if (it->second < 0) fail("dim '", it->first, "' fixed to ", it->second, ": must not be negative");
        d = Dim::known(it->second);
      }
  }
  for (const auto& [name, t] : options_.initializers) {
    const int id = g.find_value(name);
    if (id < 0 || !g.values[static_cast<size_t>(id)].constant) fail("add_initializer: '", name, "' is not an initializer of ", model_.path);
    const Tensor& c = *g.values[static_cast<size_t>(id)].constant;
    if (c.dtype() != t.dtype() || c.shape() != t.shape())
      fail("add_initializer: '", name, "' is ", dtype_name(c.dtype()), " ", shape_str(c.shape()), " in ", model_.path, ", not ",
           dtype_name(t.dtype()), " ", shape_str(t.shape()));
    g.values[static_cast<size_t>(id)].constant = t;
  }
}

void Session::gather_inputs(RunState& r, const Node& node) const {
  r.ins.assign(node.inputs.size(), nullptr);
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const int id = node.inputs[i];
    if (id < 0) continue;
    const Tensor& t = r.values[static_cast<size_t>(id)];
    if (!t.defined()) fail(node.describe(), ": input '", model_.graph->values[static_cast<size_t>(id)].name, "' has no value");
    r.ins[i] = &t;
  }
}

Outputs Session::run(const std::vector<std::pair<std::string, Tensor>>& feeds, SequenceState* sequence) {
  Outputs out;
  run(feeds, out, sequence);
  return out;
}

namespace {

// A merged decoder fed as Optimum feeds its branch without past — use_cache_branch false beside a dummy past (length
// 1, zeros) that branch never reads: the inlined with-past branch reads those inputs, so they go in empty, which is
// what the other branch computes (passes/inline_branches.h MergedDecoder). Other feeds are passed through.
const std::vector<std::pair<std::string, Tensor>>& without_unread_past(const MergedDecoder& merged,
                                                                       const std::vector<std::pair<std::string, Tensor>>& feeds,
                                                                       std::vector<std::pair<std::string, Tensor>>& storage) {
#ifdef TERN_MINIMAL  // (ONNX Runtime's callers' convention, the Python package's: 8 KB of a budget for small machines)
  (void)merged, (void)storage;
  return feeds;
#else
  if (merged.flag.empty()) return feeds;
  const auto flag = std::find_if(feeds.begin(), feeds.end(), [&](const auto& f) { return f.first == merged.flag; });
  if (flag == feeds.end() || flag->second.dtype() != DType::Bool || flag->second.numel() != 1 ||
      static_cast<const uint8_t*>(flag->second.raw())[0] != 0)
    return feeds;
  storage = feeds;
  for (auto& [name, t] : storage)
    if (t.rank() == 4 && std::count(merged.past.begin(), merged.past.end(), name)) {  // [batch, heads, positions, size]
      Shape empty = t.shape();
      empty[2] = 0;
      t = Tensor(t.dtype(), empty);
    }
  return storage;
#endif
}

}  // namespace

void Session::run(const std::vector<std::pair<std::string, Tensor>>& given, Outputs& out, SequenceState* sequence) {
  std::vector<std::pair<std::string, Tensor>> storage;
  const auto& feeds = without_unread_past(passes_.merged, given, storage);
  SequenceState& seq = sequence ? *sequence : *sequence_;
  if (&seq.session_ != this) fail("run: the sequence belongs to another session");
  // A sequence's caches take one run at a time: a second one fails here rather than interleave two token
  // streams in one cache (each thread wants a sequence of its own: new_sequence()).
  if (stateful_ && seq.busy_.exchange(true, std::memory_order_acquire))
    throw SequenceBusyError(model_.path +
                            ": another run is feeding this sequence's KV cache: runs on one sequence go one at a "
                            "time; give each thread its own (Session::new_sequence, a Generator each)");
  struct Release {
    SequenceState* seq;
    ~Release() {
      if (seq) seq->busy_.store(false, std::memory_order_release);
    }
  } release{stateful_ ? &seq : nullptr};
  std::unique_lock<std::mutex> device_lock(device_mutex_, std::defer_lock);
  if (device_) device_lock.lock();
  // This run's allocations, its kernels' scratch included, count against the session's cap.
  MemoryScope charge(account_);
  RunLease lease(*this);
  RunState& r = *lease;
  // A weights file that changed under its mapping (truncated: its pages now read as zeros) voids the run,
  // whatever it computed or however it failed.
  auto check_files = [&] {
    const std::string changed = changed_file();
    if (!changed.empty())
      fail(model_.path, ": the weights file '", changed,
           "' changed while this session used it (truncated or written over): this run's results are void; load the model again");
  };
  try {
    run_claimed(r, feeds, out, seq);
    check_files();
  } catch (...) {
    for (Tensor& t : r.values) t = Tensor();  // nothing of a failed run stays held
    r.constants_bound = false;                // (a replay after it binds them again)
    check_files();
    throw;
  }
}

void Session::run_claimed(RunState& r, const std::vector<std::pair<std::string, Tensor>>& feeds, Outputs& out, SequenceState& seq) {
  const int64_t index = runs_.fetch_add(1, std::memory_order_relaxed);
  feeds_.bind(feeds, r.values, r.fed, r.binding);
  // Step plans are for the CPU: a device session keeps its outputs in the device's memory.
  if (!device_ && r.plan.ready && r.binding == r.plan.binding && feeds_.replayable()) {
    if (!r.constants_bound) bind_constants(r);  // (a run of other dims came between: a prompt, the plan kept)
    r.last_binding = r.binding;                 // (so the next prompt, once, makes no plan of its own)
    return run_nodes(r, seq, index, true, nullptr, out);
  }
  if (!device_) check_activations(r);
  // The same symbolic dims twice in a row (decode steps): plan them on this run, replay from the next. A plan
  // stays through runs of other dims (the next request's prefill), so decode steps replay it at once.
  const bool make_plan = !device_ && feeds_.replayable() && r.binding == r.last_binding;
  r.last_binding = r.binding;
  if (!make_plan) return run_nodes(r, seq, index, false, nullptr, out);
  std::vector<Shape> shapes(model_.graph->values.size());
  run_nodes(r, seq, index, false, &shapes, out);
  build_plan(r, shapes);
}

void Session::collect_outputs(RunState& r, bool planned, Outputs& result) const {
  const Graph& g = *model_.graph;
  result.items.resize(g.outputs.size());
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const int o = g.outputs[i];
    const Tensor& t = r.values[static_cast<size_t>(o)];
    if (!t.defined()) fail("graph output '", g.values[static_cast<size_t>(o)].name, "' was not computed");
    // A planned output that views a plan buffer would change under the caller at the next run.
    const int p = g.values[static_cast<size_t>(o)].producer;
    const bool own = p >= 0 && owns_graph_output(static_cast<size_t>(p), o);
    auto& [name, tensor] = result.items[i];
    if (name != g.values[static_cast<size_t>(o)].name) name = g.values[static_cast<size_t>(o)].name;
    if (planned && !own) tensor = t.clone();
    else tensor = t;  // (not `?:`, whose result would be a copy)
  }
}

void Session::run_nodes(RunState& r, SequenceState& seq, int64_t index, bool planned, std::vector<Shape>* shapes, Outputs& out) {
  const Graph& g = *model_.graph;
  if (!planned) bind_constants(r);  // (a plan holds them from when it was built)
  if (device_) host_nodes_.clear();
  const Allocator pool_allocator = [this](DType dt, const Shape& shape) {
    return Tensor(dt, shape, pool_->acquire(bytes_for(dt, numel_of(shape))));
  };
  std::vector<Tensor> fresh;
  const kernels::Context cpu{options_.threads, &r.scratch, *options_.isa};
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& node = g.nodes[k];
    const Op& op = *ops_[k];
    OpState* state = seq.states_[k].get();
    gather_inputs(r, node);
    const bool on_device = device_ && op.runs_on(options_.device, r.ins);
    if (device_ && !on_device) {
      host_nodes_.push_back(node.name + " (" + node.op_type + ")");
      r.host_copies.clear();
      r.host_copies.reserve(r.ins.size());
      for (auto& in : r.ins)
        if (in && device_->holds(*in)) {
          r.host_copies.push_back(device_->to_host(*in));
          in = &r.host_copies.back();
        }
    }
    const Device where = on_device ? options_.device : Device{};
    kernels::opencl::Kernels* kernels = on_device ? device_->kernels() : nullptr;
    const double t0 = options_.on_node ? node_clock_us() : 0;
    std::vector<Tensor>& outs = planned ? planned_outputs(r, k, out) : fresh;
    if (planned) {
      RunContext ctx{node, r.ins, outs, where, cpu, kernels, state};
      run_op(op, ctx);
    } else {
      outs = execute_node(op, node, r.ins, on_device ? device_->allocator(k) : pool_allocator, cpu, where, kernels, state);
    }
    if (options_.on_node) {
      if (device_) device_->finish();  // the node's kernels have run, not only been queued
      options_.on_node(NodeRun{node, op, r.ins, outs, state, on_device, t0, node_clock_us(), index, cpu});
    }
    for (size_t i = 0; i < node.outputs.size(); ++i)
      if (const int o = node.outputs[i]; o >= 0) {
        if (shapes) (*shapes)[static_cast<size_t>(o)] = outs[i].shape();
        if (planned) r.values[static_cast<size_t>(o)] = outs[i];
        else r.values[static_cast<size_t>(o)] = std::move(outs[i]);
      }
    if (!planned)
      for (int v : release_after_[k]) r.values[static_cast<size_t>(v)] = Tensor();
  }
  if (device_) bring_outputs_to_host(r, seq);
  collect_outputs(r, planned, out);
  if (!planned) {
    for (Tensor& t : r.values) t = Tensor();  // nothing of this run stays held
    r.constants_bound = false;
  }
}

void Session::bind_constants(RunState& r) const {
  const Graph& g = *model_.graph;
  for (size_t v = 0; v < g.values.size(); ++v)
    if (g.values[v].constant) r.values[v] = *g.values[v].constant;
  r.constants_bound = true;
}

std::vector<Tensor>& Session::planned_outputs(RunState& r, size_t k, const Outputs& out) const {
  const Graph& g = *model_.graph;
  const Node& node = g.nodes[k];
  std::vector<Tensor>& outs = r.plan.outputs[k];
  for (size_t i = 0; i < node.outputs.size(); ++i)  // graph outputs get fresh memory each run…
    if (owns_graph_output(k, node.outputs[i])) {
      const int o = node.outputs[i];
      const auto& last = outs[i].buffer();
      // …unless the caller handed back the one it got from this plan last run and holds it alone
      // (besides this plan and this run's values).
      const size_t at = static_cast<size_t>(std::find(g.outputs.begin(), g.outputs.end(), o) - g.outputs.begin());
      const bool handed_back = at < out.items.size() && last && out.items[at].second.buffer() == last &&
                               last.use_count() == 2 + (r.values[static_cast<size_t>(o)].buffer() == last);
      if (!handed_back) outs[i] = Tensor(outs[i].dtype(), outs[i].shape(), pool_->acquire(outs[i].nbytes()));
    }
  return outs;
}

void Session::build_plan(RunState& r, const std::vector<Shape>& shapes) {
  const Graph& g = *model_.graph;
  // The shapes this run produced must be the symbolic ones with this run's dims put in; if not, the
  // graph's shapes depend on more than the input dims and it is never replayed.
  if (!feeds_.shapes_follow(r.binding, shapes)) return feeds_.never_replay();
  StepPlan plan;
  plan.binding = r.binding;
  plan.outputs.resize(g.nodes.size());
  size_t bytes = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& node = g.nodes[k];
    plan.outputs[k].resize(node.outputs.size());
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const int o = node.outputs[i];
      if (o < 0) continue;
      const Shape& actual = shapes[static_cast<size_t>(o)];
      plan.outputs[k][i] = Tensor(g.values[static_cast<size_t>(o)].dtype, actual, nullptr);
      if (!ops_[k]->traits().outputs_are_views && !owns_graph_output(k, o))
        bytes += bytes_for(plan.outputs[k][i].dtype(), numel_of(actual));
    }
  }
  // Every intermediate of the step stays allocated while the plan lives: worth it for small steps. (Sized
  // before anything is taken from the pool: a 128-token prefill of the 1B shape, too big to plan, had left the
  // pool holding its 344 MB of would-be plan buffers, and peak RSS grew by them.)
  if (bytes > kMaxPlanBytes) return;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (size_t i = 0; i < g.nodes[k].outputs.size(); ++i) {  // views and graph outputs: no plan memory
      const int o = g.nodes[k].outputs[i];
      if (o < 0 || ops_[k]->traits().outputs_are_views || owns_graph_output(k, o)) continue;
      Tensor& t = plan.outputs[k][i];
      t = Tensor(t.dtype(), t.shape(), pool_->acquire(t.nbytes()));
    }
  bind_constants(r);
  plan.ready = true;
  r.plan = std::move(plan);
}

void Session::bring_outputs_to_host(RunState& r, SequenceState& seq) {
  const Graph& g = *model_.graph;
  for (int o : g.outputs) {
    Tensor& t = r.values[static_cast<size_t>(o)];
    if (!t.defined()) continue;
    if (seq.top_k_ > 0 && g.values[static_cast<size_t>(o)].name == seq.top_k_output_) {  // only the best scores
      device_->top_k(t, seq.top_k_, seq.top_ids_, seq.top_values_);
      t = Tensor(t.dtype(), t.shape(), nullptr);  // shape only: the scores stay where they are
      continue;
    }
    if (device_->holds(t)) t = device_->to_host(t);
  }
}

}  // namespace tern
