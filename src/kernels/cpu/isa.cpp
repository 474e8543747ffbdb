#include "kernels/cpu/isa.h"

#include <cpuid.h>

#include <cstdlib>

#include "core/error.h"

namespace tern::kernels {
namespace {

// Features __builtin_cpu_supports does not name in every compiler tern builds with (clang 14 knows
// neither "avxvnni" nor "amx-tile"), read from CPUID leaf 7 directly.
bool avx_vnni() {
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1);  // leaf 7.1 EAX bit 4
}
bool amx_tile() {
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 24 & 1);  // leaf 7.0 EDX bit 24
}

bool has_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq");
}

bool can_run(Isa isa) {
  switch (isa) {
    case Isa::Avx2: return true;  // the baseline the binary was built for
    case Isa::AvxVnni: return avx_vnni();
    case Isa::Avx512: return has_avx512();
    case Isa::Avx512Vnni: return has_avx512() && __builtin_cpu_supports("avx512vnni");
  }
  return false;
}

constexpr Isa kAll[] = {Isa::Avx2, Isa::AvxVnni, Isa::Avx512, Isa::Avx512Vnni};

Isa choose() {
  const std::vector<Isa> have = machine_isas();
  const char* forced = std::getenv("TERN_ISA");
  if (!forced || !*forced) return have.back();
  for (Isa isa : kAll)
    if (isa_name(isa) == std::string(forced)) {
      if (!can_run(isa)) fail("TERN_ISA=", forced, ": this CPU cannot run it (it has ", cpu_feature_list(), ")");
      return isa;
    }
  fail("TERN_ISA=", forced, ": unknown tier (use avx2, avxvnni, avx512 or avx512vnni)");
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx2: return "avx2";
    case Isa::AvxVnni: return "avxvnni";
    case Isa::Avx512: return "avx512";
    case Isa::Avx512Vnni: return "avx512vnni";
  }
  return "?";
}

std::vector<Isa> machine_isas() {
  std::vector<Isa> out;
  for (Isa isa : kAll)
    if (can_run(isa)) out.push_back(isa);
  return out;
}

Isa active_isa() {
  static const Isa isa = choose();
  return isa;
}

std::string cpu_feature_list() {
  std::string out;
  auto add = [&](const char* name, bool present) {
    if (!present) return;
    if (!out.empty()) out += ' ';
    out += name;
  };
  add("avx2", __builtin_cpu_supports("avx2"));
  add("fma", __builtin_cpu_supports("fma"));
  add("avxvnni", avx_vnni());
  add("avx512f", __builtin_cpu_supports("avx512f"));
  add("avx512bw", __builtin_cpu_supports("avx512bw"));
  add("avx512vl", __builtin_cpu_supports("avx512vl"));
  add("avx512dq", __builtin_cpu_supports("avx512dq"));
  add("avx512vnni", __builtin_cpu_supports("avx512vnni"));
  add("avx512bf16", __builtin_cpu_supports("avx512bf16"));
  add("amx-tile", amx_tile());
  return out;
}

}  // namespace tern::kernels
