// The `tern` command line: one function per subcommand, each a thin layer over the library.
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "ops/op.h"
#include "runtime/session.h"
#include "runtime/test_data.h"

namespace {

const char* kUsage = R"(usage: tern <command> [options]

commands:
  run MODEL.onnx --input-dir DIR [--output-dir OUT] [--threads N]
      Runs the model on input_<i>.pb TensorProtos (the ONNX test layout) and writes output_<i>.pb.
      When DIR also holds output_<i>.pb, compares with them and exits 4 on a mismatch.
  inspect MODEL.onnx
      Prints opsets, inputs/outputs with shapes, an op histogram and the ops tern cannot run.
)";

// Flags after the positional argument: --name value pairs.
std::map<std::string, std::string> parse_flags(int argc, char** argv, int first) {
  std::map<std::string, std::string> f;
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) tern::fail("unexpected argument '", a, "'");
    if (i + 1 >= argc) tern::fail("flag ", a, " needs a value");
    f[a.substr(2)] = argv[++i];
  }
  return f;
}

std::string io_line(const tern::IOInfo& io) {
  return io.name + "  " + tern::dtype_name(io.dtype) + "  " + (io.shape ? tern::sym_shape_str(*io.shape) : "[?]");
}

int cmd_run(int argc, char** argv) {
  if (argc < 3) tern::fail("run needs a model path");
  auto flags = parse_flags(argc, argv, 3);
  if (!flags.count("input-dir")) tern::fail("run needs --input-dir DIR");
  tern::SessionOptions opt;
  if (flags.count("threads")) opt.threads = std::stoi(flags["threads"]);
  tern::Session session(argv[2], opt);
  auto feeds = tern::read_input_dir(session, flags["input-dir"]);
  auto outputs = session.run(feeds);
  for (const auto& [name, t] : outputs.items)
    std::cout << name << "  " << tern::dtype_name(t.dtype()) << "  " << tern::shape_str(t.shape()) << "\n";
  if (flags.count("output-dir")) tern::write_output_dir(outputs, flags["output-dir"]);
  auto expected = tern::read_output_dir(flags["input-dir"]);
  int mismatches = 0;
  for (size_t i = 0; i < expected.size() && i < outputs.size(); ++i) {
    std::string d = tern::compare_tensors(expected[i], outputs[i]);
    std::cout << "  " << outputs.items[i].first << ": " << (d.empty() ? "matches output_" + std::to_string(i) + ".pb" : d) << "\n";
    mismatches += !d.empty();
  }
  return mismatches ? 4 : 0;
}

int cmd_inspect(int argc, char** argv) {
  if (argc < 3) tern::fail("inspect needs a model path");
  tern::Model m = tern::load_onnx(argv[2]);
  const tern::Graph& g = *m.graph;
  std::cout << "model:    " << m.path << "\nir:       " << m.ir_version << "\nproducer: " << m.producer << "\nopsets:  ";
  for (const auto& [d, v] : g.opsets) std::cout << " " << (d.empty() ? "ai.onnx" : d) << "=" << v;
  std::cout << "\n\ninputs:\n";
  for (int id : g.inputs) {
    const tern::Value& v = g.values[static_cast<size_t>(id)];
    std::cout << "  " << io_line({v.name, v.dtype, v.shape}) << "\n";
  }
  std::cout << "outputs:\n";
  for (int id : g.outputs) {
    const tern::Value& v = g.values[static_cast<size_t>(id)];
    std::cout << "  " << io_line({v.name, v.dtype, v.shape}) << "\n";
  }
  size_t n_init = 0, init_bytes = 0;
  for (const auto& v : g.values)
    if (v.constant) { ++n_init; init_bytes += v.constant->nbytes(); }
  std::cout << "initializers: " << n_init << " (" << init_bytes << " bytes)\n\nops (" << g.nodes.size() << " nodes):\n";
  std::map<std::string, int> hist;
  std::set<std::string> missing;
  const auto& reg = tern::OpRegistry::instance();
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
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  try {
    if (cmd == "run") return cmd_run(argc, argv);
    if (cmd == "inspect") return cmd_inspect(argc, argv);
    std::cerr << "tern: unknown command '" << cmd << "'\n" << kUsage;
    return 2;
  } catch (const tern::UnsupportedError& e) {
    std::cerr << "tern: " << e.what() << "\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "tern: " << e.what() << "\n";
    return 1;
  }
}
