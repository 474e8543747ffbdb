#include "kernels/cpu/isa.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#elif defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "core/cpu_baseline.h"
#include "core/error.h"

namespace tern::kernels {
namespace {

#if defined(__x86_64__)
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
bool amx_bf16_int8() {
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 22 & 1) && (d >> 25 & 1);  // leaf 7.0 EDX bits 22, 25
}
// Linux hands out the 8 KB of tile registers only to processes that ask (arch_prctl ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA, Linux 5.16+); asked once, for the whole process. A kernel that refuses (older, or
// tiles disabled) leaves AMX unusable, and the tier is not offered.
bool amx_permitted() {
  static const bool granted = [] {
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return granted;
}

bool has_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq");
}

bool can_run(Isa isa) {
  switch (isa) {
    case Isa::Sse42:
      return true;  // the baseline of an x86-64-v2 build
    // (an x86-64-v3 build's baseline: always true where it runs at all, core/cpu_baseline.cpp refusing other CPUs)
    case Isa::Avx2: return cpu_has_x86_64_v3();
    case Isa::AvxVnni: return cpu_has_x86_64_v3() && avx_vnni();
    case Isa::Avx512: return has_avx512();
    case Isa::Avx512Vnni: return has_avx512() && __builtin_cpu_supports("avx512vnni");
    case Isa::Avx512Bf16: return can_run(Isa::Avx512Vnni) && __builtin_cpu_supports("avx512bf16");
    case Isa::Amx: return can_run(Isa::Avx512Bf16) && amx_tile() && amx_bf16_int8() && amx_permitted();
    default: return false;
  }
}

// An x86-64-v3 build starts at avx2: all its code may use AVX2.
#if defined(__AVX2__)
constexpr Isa kAll[] = {Isa::Avx2, Isa::AvxVnni, Isa::Avx512, Isa::Avx512Vnni, Isa::Avx512Bf16, Isa::Amx};
#else
constexpr Isa kAll[] = {Isa::Sse42, Isa::Avx2, Isa::AvxVnni, Isa::Avx512, Isa::Avx512Vnni, Isa::Avx512Bf16, Isa::Amx};
#endif
#elif defined(__aarch64__)
bool hwcap(unsigned long bit) { return (getauxval(AT_HWCAP) & bit) != 0; }

bool can_run(Isa isa) {
  switch (isa) {
    case Isa::Neon: return true;  // the baseline
    case Isa::NeonDot: return hwcap(HWCAP_ASIMDDP);
    case Isa::NeonI8mm: return hwcap(HWCAP_ASIMDDP) && (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0;
    default: return false;
  }
}

constexpr Isa kAll[] = {Isa::Neon, Isa::NeonDot, Isa::NeonI8mm};
#endif

// The tier named `name`; `source` says where the name came from ("TERN_ISA=", "ISA tier ").
Isa tier_named(const std::string& name, const char* source) {
  for (Isa isa : kAll)
    if (isa_name(isa) == name) {
      if (!can_run(isa)) fail(source, name, ": this CPU cannot run it (it has ", cpu_feature_list(), ")");
      return isa;
    }
  fail(source, name, ": unknown tier (use ", isa_tier_names(", "), ")");
}

// The default tier once first asked for (-1 before): TERN_ISA is read once.
std::atomic<int> chosen{-1};
std::mutex choice_mutex;

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Sse42: return "sse42";
    case Isa::Avx2: return "avx2";
    case Isa::AvxVnni: return "avxvnni";
    case Isa::Avx512: return "avx512";
    case Isa::Avx512Vnni: return "avx512vnni";
    case Isa::Avx512Bf16: return "avx512bf16";
    case Isa::Amx: return "amx";
    case Isa::Neon: return "neon";
    case Isa::NeonDot: return "neondot";
    case Isa::NeonI8mm: return "neoni8mm";
  }
  return "?";
}

std::string isa_tier_names(const char* sep) {
  std::string names;
  for (Isa isa : kAll) names += (names.empty() ? "" : sep) + std::string(isa_name(isa));
  return names;
}

bool isa_tier_exists(const std::string& name) {
  for (Isa isa : kAll)
    if (isa_name(isa) == name) return true;
  return false;
}

std::vector<Isa> machine_isas() {
  std::vector<Isa> out;
  for (Isa isa : kAll)
    if (can_run(isa)) out.push_back(isa);
  return out;
}

Isa default_isa() {
  const int c = chosen.load(std::memory_order_acquire);
  if (c >= 0) return static_cast<Isa>(c);
  std::lock_guard<std::mutex> lock(choice_mutex);
  if (chosen.load() < 0) {
    const char* forced = std::getenv("TERN_ISA");
    const Isa isa = forced && *forced ? tier_named(forced, "TERN_ISA=") : machine_isas().back();
    chosen.store(static_cast<int>(isa), std::memory_order_release);
  }
  return static_cast<Isa>(chosen.load());
}

bool isa_at_least(Isa isa, Isa floor) {
  return static_cast<int>(isa) >= static_cast<int>(floor) && static_cast<int>(isa) <= static_cast<int>(Isa::Amx);
}

bool isa_has_int8_dot(Isa isa) { return isa != Isa::Sse42; }

Isa isa_named(const std::string& name) { return tier_named(name, "ISA tier "); }

std::string cpu_feature_list() {
  std::string out;
  auto add = [&](const char* name, bool present) {
    if (!present) return;
    if (!out.empty()) out += ' ';
    out += name;
  };
#if defined(__x86_64__)
  add("sse4.2", __builtin_cpu_supports("sse4.2"));
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
  add("amx-bf16 amx-int8", amx_bf16_int8());
#elif defined(__aarch64__)
  add("neon", hwcap(HWCAP_ASIMD));
  add("fp16", hwcap(HWCAP_FPHP));
  add("asimddp", hwcap(HWCAP_ASIMDDP));
  add("sve", hwcap(HWCAP_SVE));
  add("i8mm", (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0);
  add("bf16", (getauxval(AT_HWCAP2) & HWCAP2_BF16) != 0);
#endif
  return out;
}

}  // namespace tern::kernels
