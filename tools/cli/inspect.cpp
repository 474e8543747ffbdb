#include "tools/cli/cli.h"

#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>

#include "graph/onnx_loader.h"
#include "llm/generator.h"

namespace tern::cli {

// What the fusion passes make of a model, as `generate --window` loads it.
namespace {

void print_fusions(const llm::ModelFiles& files, const Flags& flags, size_t nodes_before) {
  const std::string& path = files.onnx;
  const auto cfg = llm::read_model_config(files.dir);
  const SessionOptions o = llm::decoder_session_options(decoder_options(flags), cfg, true);
  std::cout << "\nfusions (--window " << o.decoder.ring_capacity << "):\n";
  Session s(path, o);
  for (const auto& f : s.passes().fusions) std::cout << "  " << f.node << ": " << f.pattern << "\n";
  if (!s.passes().misses.empty()) {
    std::cout << "ring-buffer KV cache: not used (every layer must match; the graph keeps its past/present). Where matching "
                 "stopped, per layer:\n";
    for (const auto& miss : s.passes().misses) std::cout << "  " << miss.str() << "\n";
  }
  const PassStats& stats = s.passes().stats;
  std::cout << s.passes().fusions.size() << " rewrite(s), " << stats.canonicalized << " no-op node(s) bypassed by canonicalization, "
            << stats.shape_values << " shape computation(s) resolved from the input dims, " << stats.merged_nodes
            << " duplicate node(s) merged; " << nodes_before << " nodes in the file, " << s.graph().nodes.size()
            << " after folding, fusion and dead-node removal.\n";
}

}  // namespace

int inspect(int argc, char** argv) {
  Flags flags = parse(argc, argv, *find_command("inspect"));
  apply_memory_cap(flags);
  const llm::ModelFiles files = model_files(flags.get("model"), flags.get("dtype"));
  if (!files.variants.empty()) {
    std::cout << "variants (--dtype):\n";
    for (const llm::OnnxVariant& v : files.variants)
      std::cout << (v.dtype == files.dtype ? "* " : "  ") << v.dtype << std::string(7 - std::min<size_t>(v.dtype.size(), 6), ' ')
                << std::fixed << std::setprecision(1) << static_cast<double>(v.bytes) / 1e6 << " MB  " << v.file << "\n";
    std::cout << "\n";
  }
  Model m = load_onnx(files.onnx);
  const Graph& g = *m.graph;
  std::cout << "model:    " << m.path << "\nir:       " << m.ir_version << "\nproducer: " << m.producer << "\nopsets:  ";
  for (const auto& [d, v] : g.opsets) std::cout << " " << (d.empty() ? "ai.onnx" : d) << "=" << v;
  std::cout << "\n\ninputs:\n";
  for (int id : g.inputs) {
    const Value& v = g.values[static_cast<size_t>(id)];
    std::cout << "  " << io_line({v.name, v.dtype, v.shape}) << "\n";
  }
  std::cout << "outputs:\n";
  for (int id : g.outputs) {
    const Value& v = g.values[static_cast<size_t>(id)];
    std::cout << "  " << io_line({v.name, v.dtype, v.shape}) << "\n";
  }
  size_t n_init = 0, init_bytes = 0;
  for (const auto& v : g.values)
    if (v.constant) {
      ++n_init;
      init_bytes += v.constant->nbytes();
    }
  std::cout << "initializers: " << n_init << " (" << init_bytes << " bytes)\n\nops (" << g.nodes.size() << " nodes):\n";
  std::map<std::string, int> hist;
  std::set<std::string> missing;
  const auto& reg = OpRegistry::instance();
  for (const auto& n : g.nodes) {
    std::string key = (n.domain.empty() ? "" : n.domain + ".") + n.op_type;
    ++hist[key];
    if (!reg.has(n.domain, n.op_type)) missing.insert(key);
  }
  for (const auto& [k, c] : hist) std::cout << "  " << c << "\t" << k << (missing.count(k) ? "   (not supported)" : "") << "\n";
  if (missing.empty()) std::cout << "\ntern can run every op in this model.\n";
  else {
    std::cout << "\ntern cannot run " << missing.size() << " op type(s):";
    for (const auto& k : missing) std::cout << " " << k;
    std::cout << "\n";
  }
  if (flags.has("fusions")) print_fusions(files, flags, g.nodes.size());
  if (flags.has("device")) {  // which nodes run where: decided per run, so one short greedy generation tells
    const auto cfg = llm::read_model_config(files.dir);
    Session s(files.onnx, llm::decoder_session_options(decoder_options(flags), cfg, true));
    llm::Generator gen(s, cfg);
    llm::GenerateOptions go;
    go.max_new_tokens = 2;
    gen.generate({synthetic_prompt(cfg, 4)}, go);
    std::cout << "\n";
    print_host_nodes(s, flags.get("device"));
  }
  return 0;
}

}  // namespace tern::cli
