// The command line's declared flags: each command's table (tools/cli/commands.cpp) is what the parser
// accepts, what `tern COMMAND --help` prints and what the shell completion offers — one list, so a flag
// cannot be read without being declared, nor declared without being shown.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tern::cli {

// What a flag's value is; the parser checks Int and Number values before the command runs.
enum class Arg { Switch, Text, Int, Number };

struct FlagSpec {
  std::string name;  // without the dashes: "max-new-tokens"
  Arg arg = Arg::Text;
  std::string value_name;  // in the help: "N", "PATH"
  std::string fallback;    // the value when the flag is not given ("" when none, or when it depends on the model)
  std::string help;        // one line; says the default in words when `fallback` cannot ("the model's context")
  int arity = 1;           // values per use (profile's --compare A.json B.json: 2)
};

struct CommandSpec {
  std::string name;
  // The positional arguments, in order, each filling the flag of that name ("model": `tern chat DIR` is
  // `tern chat --model DIR`); optional ones are shown in brackets.
  struct Positional {
    std::string flag, shown;
    bool required = false;
  };
  std::vector<Positional> positionals;
  std::string summary;  // one line, for `tern --help`
  std::string about;    // the details, printed under the flags by `tern COMMAND --help`
  std::vector<FlagSpec> flags;
  const FlagSpec* find(const std::string& name) const;
};

// Every command's table, in the order `tern --help` lists them.
const std::vector<CommandSpec>& command_specs();
const CommandSpec* find_command(const std::string& name);
// The closest of `known` to `typed` when it is close enough to be a typo, else "".
std::string closest(const std::string& typed, const std::vector<std::string>& known);

// A command line parsed against its table. Reading a flag the table does not declare is a bug in tern and
// throws (tests/test_cli_flags.cpp reads every command's flags through it).
class Flags {
 public:
  Flags(const CommandSpec& spec) : spec_(&spec) {}
  // Given on the command line (or positionally).
  bool has(const std::string& name) const;
  // The last value given, else the table's fallback.
  std::string get(const std::string& name) const;
  // Every value given, in order (repeatable flags: --prompt, --stop).
  std::vector<std::string> all(const std::string& name) const;
  // get() as an integer / a number, at least `min`; else an error naming the flag.
  int64_t integer(const std::string& name, int64_t min = INT64_MIN) const;
  float number(const std::string& name) const;
  void add(const std::string& name, std::string value);
  const CommandSpec& spec() const { return *spec_; }

 private:
  const FlagSpec& declared(const std::string& name) const;
  const CommandSpec* spec_;
  std::map<std::string, std::vector<std::string>> values_;
};

// argv[2..] of `tern COMMAND ...`: `--name value`, `--name=value`, a switch alone, llama.cpp's aliases
// (-m -p -n -c -t -s --temp --repeat-penalty --ctx-size --n-predict) where the command has the flag they
// stand for, `_` for `-` in names, and the positionals. An unknown flag, a missing or malformed value, or
// an extra argument is an error naming it (and the closest declared flag).
Flags parse(int argc, char** argv, const CommandSpec& spec);
// `tern COMMAND --help`: usage line, flags with value names and defaults, then the details.
std::string command_help(const CommandSpec& spec);

// `text` as an integer, the whole of it; else an error naming `what` (a flag, a list's field).
int64_t to_int(const std::string& text, const std::string& what);

}  // namespace tern::cli
