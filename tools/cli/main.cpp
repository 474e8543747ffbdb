// The `tern` command line: one file per command in tools/cli/, each a thin layer over the library.
#include <algorithm>
#include <cstring>
#include <iostream>
#include <map>
#include <vector>

#ifndef TERN_MINIMAL
#include "diagnostics/op_bench.h"
#endif
#include "kernels/cpu/isa.h"
#include "tern/tern.h"
#include "tools/cli/cli.h"

namespace {

// Every command, once; those of tools/cli/full/ are null in a minimal build (CMakeLists.txt leaves that folder out).
#ifdef TERN_MINIMAL
#define TERN_FULL_ONLY(command) nullptr
#else
#define TERN_FULL_ONLY(command) command
#endif
using Command = int (*)(int, char**);
const std::map<std::string, Command>& commands() {
  using namespace tern::cli;
  static const std::map<std::string, Command> table = {
      {"generate", generate},
      {"chat", chat},
      {"inspect", inspect},
      {"pack", pack},
      {"bench", bench},
      {"devices", devices},
      {"run", TERN_FULL_ONLY(run)},
      {"eval", TERN_FULL_ONLY(eval)},
      {"profile", TERN_FULL_ONLY(profile)},
      {"quantize", TERN_FULL_ONLY(quantize)},
      {"convert", TERN_FULL_ONLY(convert)},
      {"import-gguf", TERN_FULL_ONLY(import_gguf)},
      {"bench-op", TERN_FULL_ONLY(bench_op)},
      {"serve", TERN_FULL_ONLY(serve)},
  };
  return table;
}

// `tern --help`: the commands, a line each, from their tables (tools/cli/commands.cpp).
std::string usage() {
  std::string out =
      "usage: tern <command> [flags]      tern COMMAND --help: that command's flags, their defaults and details\n"
      "       tern --version               version, commit, compiler, ISA tiers built and run here\n"
      "On a terminal, imports, quantization, packing, loads and eval draw a progress bar on stderr; --quiet\n"
      "(any command) draws none.\n\ncommands:\n";
  for (const tern::cli::CommandSpec& c : tern::cli::command_specs())
    out += "  " + c.name + std::string(c.name.size() < 12 ? 12 - c.name.size() : 1, ' ') + c.summary + "\n";
#ifdef TERN_MINIMAL
  out +=
      "(this build, TERN_MINIMAL, has these; a full build adds run, eval, profile, bench-op, quantize, convert,\n"
      "import-gguf and serve)\n";
#endif
  return out;
}

// `tern COMMAND --help`.
std::string command_usage(const tern::cli::CommandSpec& spec) {
  std::string out = tern::cli::command_help(spec);
#ifndef TERN_MINIMAL
  if (spec.name == "bench-op") out += std::string("\nOPs:\n") + tern::op_bench_usage();
#endif
  return out;
}

// `tern --version`: the library's build line (version, commit, compiler, the tier in use, OpenCL), then the
// ISA tiers this build has kernels for and those this CPU runs.
std::string version() {
  namespace k = tern::kernels;
  std::string runs;
  for (k::Isa isa : k::machine_isas()) runs += std::string(runs.empty() ? "" : " ") + k::isa_name(isa);
  return std::string(tern_build_info()) + "\nISA tiers built: " + k::isa_tier_names(" ") + "; this CPU runs: " + runs + "\n";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tern::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::cout << usage();
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "-V")) {
    try {
      std::cout << version();
    } catch (const std::exception& e) {  // (TERN_ISA naming a tier this CPU lacks)
      std::cerr << "tern: " << e.what() << "\n";
      return 1;
    }
    return 0;
  }
  const std::string cmd = argv[1];
  // --quiet, anywhere after the command: no progress bars (cli.h). Taken off before the command parses.
  std::vector<char*> args(argv, argv + argc);
  if (const auto q = std::find_if(args.begin() + 2, args.end(), [](const char* a) { return !std::strcmp(a, "--quiet"); });
      q != args.end()) {
    args.erase(q);
    set_quiet(true);
    argc = static_cast<int>(args.size());
    argv = args.data();
  }
  const auto it = commands().find(cmd);
  if (it != commands().end() && !it->second) {
    std::cerr << "tern: '" << cmd << "' is not in this build (TERN_MINIMAL); a full build has it\n";
    return 2;
  }
  const CommandSpec* spec = find_command(cmd);
  if (!spec || it == commands().end()) {
    std::vector<std::string> names;
    for (const CommandSpec& c : command_specs()) names.push_back(c.name);
    const std::string near = closest(cmd, names);
    std::cerr << "tern: unknown command '" << cmd << "'" << (near.empty() ? "" : "; did you mean '" + near + "'?")
              << " (tern --help lists the commands)\n";
    return 2;
  }
  for (int i = 2; i < argc; ++i)  // `tern generate --help` and the like: that command's table
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::cout << command_usage(*spec);
      return 0;
    }
  try {
    return it->second(argc, argv);
  } catch (const tern::UnsupportedError& e) {
    std::cerr << "tern: " << e.what() << "\n";
    return 3;
  } catch (const std::bad_alloc&) {  // (what tern allocates is checked first: this is the system refusing)
    std::cerr << "tern: " << cmd
              << ": out of memory: an allocation failed (--max-memory makes tern refuse, naming what, "
                 "before the system does)\n";
    return 1;
  } catch (const std::length_error& e) {
    std::cerr << "tern: " << cmd << ": a size is larger than any allocation (" << e.what() << ")\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tern: " << e.what() << "\n";
    return 1;
  }
}
