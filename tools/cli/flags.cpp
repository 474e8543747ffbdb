#include "tools/cli/flags.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <stdexcept>

#include "core/error.h"

namespace tern::cli {

namespace {

// llama.cpp's spellings of our flags (its `common` arguments): taken where the command declares the flag
// they stand for, so `tern generate -m DIR -p TEXT -n 8 --temp 0` is what a llama-cli user types.
const std::map<std::string, std::string>& aliases() {
  static const std::map<std::string, std::string> a = {
      {"-m", "model"},           {"-p", "prompt"},
      {"-n", "max-new-tokens"},  {"--n-predict", "max-new-tokens"},
      {"-c", "window"},          {"--ctx-size", "window"},
      {"-t", "threads"},         {"-s", "seed"},
      {"--temp", "temperature"}, {"--repeat-penalty", "repetition-penalty"},
  };
  return a;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

void check_value(const FlagSpec& fs, const std::string& value) {
  if (fs.arg == Arg::Int) to_int(value, "--" + fs.name);
  if (fs.arg == Arg::Number) {
    char* end = nullptr;
    std::strtod(value.c_str(), &end);
    if (value.empty() || end != value.c_str() + value.size()) fail("--", fs.name, ": '", value, "' is not a number");
  }
}

}  // namespace

const FlagSpec* CommandSpec::find(const std::string& n) const {
  for (const FlagSpec& fs : flags)
    if (fs.name == n) return &fs;
  return nullptr;
}

const CommandSpec* find_command(const std::string& name) {
  for (const CommandSpec& c : command_specs())
    if (c.name == name) return &c;
  return nullptr;
}

std::string closest(const std::string& typed, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const std::string& k : known) {
    size_t d = edit_distance(typed, k);
    // A prefix of a known name ("--max" of "--max-new-tokens") is as good as one edit.
    if (k.size() > typed.size() && k.compare(0, typed.size(), typed) == 0 && typed.size() >= 3) d = std::min<size_t>(d, 1);
    if (d < best_d) best_d = d, best = k;
  }
  return best_d <= std::max<size_t>(2, typed.size() / 3) ? best : "";
}

int64_t to_int(const std::string& text, const std::string& what) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end) fail(what, ": '", text, "' is not an integer");
  return v;
}

const FlagSpec& Flags::declared(const std::string& name) const {
  const FlagSpec* fs = spec_->find(name);
  if (!fs)
    throw std::logic_error("tern " + spec_->name + " reads --" + name + ", which its table (tools/cli/commands.cpp) does not declare");
  return *fs;
}

bool Flags::has(const std::string& name) const {
  declared(name);
  return values_.count(name) > 0;
}

std::string Flags::get(const std::string& name) const {
  const FlagSpec& fs = declared(name);
  const auto it = values_.find(name);
  return it == values_.end() ? fs.fallback : it->second.back();
}

std::vector<std::string> Flags::all(const std::string& name) const {
  declared(name);
  const auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

int64_t Flags::integer(const std::string& name, int64_t min) const {
  const std::string text = get(name);
  if (text.empty()) throw std::logic_error("tern " + spec_->name + " reads --" + name + " as a number with no fallback and none given");
  const int64_t v = to_int(text, "--" + name);
  if (v < min) fail("--", name, " ", v, ": must be at least ", min);
  return v;
}

float Flags::number(const std::string& name) const {
  const std::string text = get(name);
  if (text.empty()) throw std::logic_error("tern " + spec_->name + " reads --" + name + " as a number with no fallback and none given");
  return std::strtof(text.c_str(), nullptr);  // (checked whole by parse; its range is the option's own check)
}

void Flags::add(const std::string& name, std::string value) { values_[name].push_back(std::move(value)); }

Flags parse(int argc, char** argv, const CommandSpec& spec) {
  Flags f(spec);
  std::vector<std::string> names;
  for (const FlagSpec& fs : spec.flags) names.push_back("--" + fs.name);
  size_t next_positional = 0;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() < 2 || a[0] != '-') {
      // A positional: the next flag the command takes by position, unless that flag was given by name.
      while (next_positional < spec.positionals.size() && f.has(spec.positionals[next_positional].flag)) ++next_positional;
      if (next_positional == spec.positionals.size())
        fail(spec.name, ": unexpected argument '", a, "'", spec.positionals.empty() ? " (it takes only flags)" : " (flags begin with --)");
      f.add(spec.positionals[next_positional++].flag, a);
      continue;
    }
    std::string value;
    bool has_value = false;
    if (const size_t eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
      value = a.substr(eq + 1), has_value = true;
      a.resize(eq);
    }
    const std::string typed = a;
    std::string name;
    if (const auto al = aliases().find(a); al != aliases().end() && spec.find(al->second)) name = al->second;
    else if (a.rfind("--", 0) == 0) {
      name = a.substr(2);
      std::replace(name.begin(), name.end(), '_', '-');  // --top_k, as Python spells it
    }
    const FlagSpec* fs = name.empty() ? nullptr : spec.find(name);
    if (!fs) {
      const std::string near = closest(name.empty() ? typed : "--" + name, names);
      fail(spec.name, ": unknown flag ", typed, near.empty() ? "" : "; did you mean " + near + "?", " (tern ", spec.name,
           " --help lists its flags)");
    }
    if (fs->arg == Arg::Switch) {
      if (has_value) fail(spec.name, ": --", fs->name, " takes no value (given '", value, "')");
      f.add(fs->name, "");
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) fail(spec.name, ": ", typed, " needs a value (", fs->value_name, ")");
      value = argv[++i];
    }
    for (int k = 1; k < fs->arity; ++k) {
      if (i + 1 >= argc) fail(spec.name, ": ", typed, " needs ", fs->arity, " values (", fs->value_name, ")");
      value += '\n', value += argv[++i];
    }
    check_value(*fs, value);
    f.add(fs->name, value);
  }
  for (const CommandSpec::Positional& p : spec.positionals)
    if (p.required && !f.has(p.flag)) fail(spec.name, " needs ", p.shown, " (tern ", spec.name, " --help)");
  return f;
}

std::string command_help(const CommandSpec& spec) {
  std::string out = "usage: tern " + spec.name;
  for (const CommandSpec::Positional& p : spec.positionals) out += p.required ? " " + p.shown : " [" + p.shown + "]";
  out += " [flags]\n" + spec.summary + "\n\nflags:\n";
  std::map<std::string, std::string> short_of;
  for (const auto& [alias, target] : aliases())
    if (alias.size() == 2 && spec.find(target)) short_of[target] = alias;
  for (const FlagSpec& fs : spec.flags) {
    std::string left = "  " + (short_of.count(fs.name) ? short_of[fs.name] + ", " : std::string("    ")) + "--" + fs.name;
    if (fs.arg != Arg::Switch) left += " " + fs.value_name;
    std::string line = left + std::string(left.size() < 32 ? 32 - left.size() : 1, ' ') + fs.help;
    if (!fs.fallback.empty()) line += " (default " + fs.fallback + ")";
    out += line + "\n";
  }
  std::string also;
  for (const auto& [alias, target] : aliases())
    if (alias.size() > 2 && spec.find(target)) also += (also.empty() ? "" : ", ") + alias + " = --" + target;
  if (!also.empty()) out += "  (also: " + also + ")\n";
  if (!spec.about.empty()) out += "\n" + spec.about;
  return out;
}

}  // namespace tern::cli
