// The command line's flag tables (tools/cli/commands.cpp): what each command accepts, refuses and prints.
#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <set>
#include <stdexcept>

#include "core/error.h"
#include "tools/cli/flags.h"

using namespace tern::cli;

namespace {

// parse() over `tern CMD args...`; with `positionals`, each required positional after them ("P"), but
// for the flag `except` (given by name instead).
Flags parse_line(const std::string& cmd, std::vector<std::string> args, bool positionals = false, const std::string& except = "") {
  std::vector<std::string> words = {"tern", cmd};
  words.insert(words.end(), args.begin(), args.end());
  if (positionals)
    for (const CommandSpec::Positional& p : find_command(cmd)->positionals)
      if (p.required && p.flag != except) words.push_back("P");
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  return parse(static_cast<int>(argv.size()), argv.data(), *find_command(cmd));
}

std::string refusal(const std::string& cmd, std::vector<std::string> args, bool positionals = false) {
  try {
    parse_line(cmd, std::move(args), positionals);
  } catch (const tern::Error& e) {
    return e.what();
  }
  return "(accepted)";
}

std::string sample_value(const FlagSpec& fs) {
  const std::string one = fs.arg == Arg::Int ? "3" : fs.arg == Arg::Number ? "0.5" : "x";
  return fs.arity == 2 ? one + "\n" + one : one;
}

}  // namespace

TEST_CASE("every command's flag table: each flag parses, in both spellings, and --help shows it") {
  for (const CommandSpec& c : command_specs()) {
    CAPTURE(c.name);
    std::set<std::string> names;
    for (const FlagSpec& fs : c.flags) {
      CAPTURE(fs.name);
      CHECK(names.insert(fs.name).second);  // declared once
      CHECK(!fs.help.empty());
      CHECK((fs.arg == Arg::Switch) == fs.value_name.empty());
      if (fs.arg == Arg::Int && !fs.fallback.empty()) CHECK_NOTHROW(to_int(fs.fallback, fs.name));
      // --name value / --name=value (each of an arity-2 flag's values its own word)
      std::vector<std::string> spaced = {"--" + fs.name};
      if (fs.arg != Arg::Switch)
        for (int k = 0; k < fs.arity; ++k) spaced.push_back(fs.arg == Arg::Int ? "3" : fs.arg == Arg::Number ? "0.5" : "x");
      const Flags f = parse_line(c.name, spaced, true, fs.name);
      CHECK(f.has(fs.name));
      if (fs.arg != Arg::Switch) CHECK(f.get(fs.name) == sample_value(fs));
      if (fs.arg != Arg::Switch && fs.arity == 1)
        CHECK(parse_line(c.name, {"--" + fs.name + "=" + sample_value(fs)}, true, fs.name).get(fs.name) == sample_value(fs));
      if (fs.arg == Arg::Switch) CHECK(refusal(c.name, {"--" + fs.name + "=1"}).find("takes no value") != std::string::npos);
      else CHECK(refusal(c.name, {"--" + fs.name}).find("needs") != std::string::npos);
      if (fs.arg == Arg::Int) CHECK(refusal(c.name, {"--" + fs.name, "2x"}).find("'2x' is not an integer") != std::string::npos);
      if (fs.arg == Arg::Number) CHECK(refusal(c.name, {"--" + fs.name, "fast"}).find("'fast' is not a number") != std::string::npos);
      // A typo (two inner letters swapped) is refused naming the flag meant.
      if (fs.name.size() >= 5) {
        std::string typo = fs.name;
        std::swap(typo[2], typo[3]);
        if (typo != fs.name && !c.find(typo))
          CHECK(refusal(c.name, {"--" + typo, "1"}).find("did you mean --" + fs.name + "?") != std::string::npos);
      }
      // --help: the flag, its value's name and its default.
      const std::string help = command_help(c);
      CHECK(help.find("--" + fs.name + (fs.arg == Arg::Switch ? "" : " " + fs.value_name)) != std::string::npos);
      if (!fs.fallback.empty()) CHECK(help.find("(default " + fs.fallback + ")") != std::string::npos);
    }
    for (const CommandSpec::Positional& p : c.positionals) CHECK(c.find(p.flag) != nullptr);
    // A flag no command declares, and reading one the table lacks (a bug in tern, not the user's).
    CHECK(refusal(c.name, {"--no-such-flag-at-all", "1"}).find("unknown flag --no-such-flag-at-all") != std::string::npos);
    CHECK_THROWS_AS(parse_line(c.name, {}, true).get("no-such-flag"), std::logic_error);
  }
}

TEST_CASE("each command file reads only the flags its table declares") {
  // The commands' sources, read as text: every f.get("x") / has / integer / number / all names a declared flag.
  const std::regex read(R"re(\b(?:f|flags)\.(?:get|has|integer|number|all)\("([a-z0-9-]+)")re");
  const std::map<std::string, std::string> files = {
      {"bench", "tools/cli/bench.cpp"},
      {"chat", "tools/cli/chat.cpp"},
      {"generate", "tools/cli/generate.cpp"},
      {"inspect", "tools/cli/inspect.cpp"},
      {"pack", "tools/cli/pack.cpp"},
      {"bench-op", "tools/cli/full/bench_op.cpp"},
      {"convert", "tools/cli/full/convert.cpp"},
      {"eval", "tools/cli/full/eval.cpp"},
      {"import-gguf", "tools/cli/full/import_gguf.cpp"},
      {"profile", "tools/cli/full/profile.cpp"},
      {"quantize", "tools/cli/full/quantize.cpp"},
      {"run", "tools/cli/full/run.cpp"},
      {"serve", "tools/cli/full/serve.cpp"},
  };
  for (const auto& [cmd, file] : files) {
    std::ifstream in(std::string(TERN_SOURCE_DIR) + "/" + file);
    REQUIRE(in);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    int reads = 0;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), read); it != std::sregex_iterator(); ++it, ++reads) {
      CAPTURE(cmd);
      CAPTURE((*it)[1].str());
      CHECK(find_command(cmd)->find((*it)[1].str()) != nullptr);
    }
    CHECK(reads > 0);
  }
}

TEST_CASE("the command line as users type it: llama.cpp's aliases, --flag=value, positionals, typos") {
  // llama-cli's spellings map onto ours.
  const Flags g = parse_line("generate", {"-m", "models/default", "-p", "And God said", "-n", "8", "--temp", "0", "-c", "64", "-t", "2",
                                          "-s", "7", "--repeat-penalty", "1.1", "--top_k", "5"});
  CHECK(g.get("model") == "models/default");
  CHECK(g.get("prompt") == "And God said");
  CHECK(g.integer("max-new-tokens") == 8);
  CHECK(g.number("temperature") == 0.0f);
  CHECK(g.integer("window") == 64);
  CHECK(g.integer("threads") == 2);
  CHECK(g.integer("seed") == 7);
  CHECK(g.number("repetition-penalty") == doctest::Approx(1.1));
  CHECK(g.integer("top-k") == 5);
  CHECK(parse_line("generate", {"--n-predict", "5", "--ctx-size", "32"}).integer("max-new-tokens") == 5);
  // --flag=value, with '=' inside the value kept.
  CHECK(parse_line("generate", {"--model=models/default"}).get("model") == "models/default");
  CHECK(parse_line("generate", {"--prompt=a=b"}).get("prompt") == "a=b");
  // Unset flags read as the table's fallback; repeated ones accumulate, the last wins for get().
  const Flags d = parse_line("generate", {"--stop", "a", "--stop", "b"});
  CHECK(d.integer("max-new-tokens") == 128);
  CHECK(d.all("stop") == std::vector<std::string>{"a", "b"});
  CHECK(d.get("stop") == "b");
  CHECK_FALSE(d.has("temperature"));
  // The issue's examples, each refused naming what was meant.
  CHECK(refusal("generate", {"--temprature", "0.5"}).find("unknown flag --temprature; did you mean --temperature?") != std::string::npos);
  CHECK(refusal("generate", {"--greedyy"}).find("did you mean --greedy?") != std::string::npos);
  CHECK(refusal("serve", {"m", "--parallell", "8"}).find("did you mean --parallel?") != std::string::npos);
  CHECK(refusal("generate", {"--ctx", "64"}).find("unknown flag --ctx") != std::string::npos);
  // An alias only where the command has the flag: bench has no --prompt, so -p is unknown there.
  CHECK(refusal("bench", {"-p", "x"}).find("unknown flag -p") != std::string::npos);
  // The model positionally in every command that takes one, or by flag — not both.
  for (const char* cmd : {"generate", "chat", "bench", "eval", "profile", "inspect", "serve", "pack", "quantize", "run"})
    CHECK(parse_line(cmd, {"DIR"}).get("model") == "DIR");
  CHECK(parse_line("pack", {"A", "B"}).get("out") == "B");
  CHECK(parse_line("import-gguf", {"f.gguf", "OUT"}).get("out") == "OUT");
  CHECK(refusal("chat", {"--model", "A", "B"}).find("unexpected argument 'B'") != std::string::npos);
  CHECK(refusal("devices", {"x"}).find("it takes only flags") != std::string::npos);
  CHECK(refusal("serve", {}).find("serve needs MODEL") != std::string::npos);
  CHECK(refusal("import-gguf", {"f.gguf"}).find("needs OUT_DIR") != std::string::npos);
  CHECK(parse_line("profile", {"--compare", "a.json", "b.json"}).get("compare") == "a.json\nb.json");
  CHECK(refusal("profile", {"--compare", "a.json"}).find("needs 2 values") != std::string::npos);
  // Commands, too, suggest the closest.
  std::vector<std::string> names;
  for (const CommandSpec& c : command_specs()) names.push_back(c.name);
  CHECK(closest("genrate", names) == "generate");
  CHECK(closest("serv", names) == "serve");
  CHECK(closest("zzzzzz", names).empty());
}
