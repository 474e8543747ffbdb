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
#include "kernels/cpu/kernel_table.h"

namespace tern::kernels {

// Each tier's fill, in its folder (the tier list below names them).
#ifndef TERN_MINIMAL
void fill_tier_scalar(KernelTable& t);
#endif
#if defined(__x86_64__)
void fill_tier_avx2(KernelTable& t);
void fill_tier_avxvnni(KernelTable& t);
void fill_tier_avx512(KernelTable& t);
void fill_tier_avx512vnni(KernelTable& t);
void fill_tier_avx512bf16(KernelTable& t);
void fill_tier_amx(KernelTable& t);
#elif defined(__aarch64__)
void fill_tier_neon(KernelTable& t);
void fill_tier_neondot(KernelTable& t);
void fill_tier_neoni8mm(KernelTable& t);
#endif

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

bool avx512_tier() { return cpu_has_x86_64_v3() && has_avx512(); }  // (its files start from x86-64-v3)
bool avx512vnni_tier() { return avx512_tier() && __builtin_cpu_supports("avx512vnni"); }
bool avx512bf16_tier() { return avx512vnni_tier() && __builtin_cpu_supports("avx512bf16"); }
#elif defined(__aarch64__)
bool hwcap(unsigned long bit) { return (getauxval(AT_HWCAP) & bit) != 0; }
#endif

// A tier: its name, the tier whose table its own starts from (a root, below == isa, starts from the baseline's
// entries: width_kernels.cpp's fill_baseline), the fill that sets the entries its files provide, and whether this
// CPU runs it. Lowest first; adding a tier is its folder and one line here (with its fill's declaration; its name
// in isa.h's enum, and in tests/CMakeLists.txt's tier list for its ctest entry).
struct Tier {
  Isa isa;
  const char* name;
  Isa below;
  void (*fill)(KernelTable&);
  bool (*can_run)();
};
bool any_cpu() { return true; }

#if defined(__x86_64__) && defined(__AVX2__)
constexpr Isa kBaseline = Isa::Avx2;  // an x86-64-v3 build: all its code may use AVX2
#elif defined(__x86_64__)
constexpr Isa kBaseline = Isa::Sse42;
#elif defined(__aarch64__)
constexpr Isa kBaseline = Isa::Neon;
#endif

constexpr Tier kTiers[] = {
#ifndef TERN_MINIMAL  // (the tests' reference, scalar/tier_scalar.cpp: not in a build for small machines)
    {Isa::Scalar, "scalar", kBaseline, fill_tier_scalar, any_cpu},
#endif
#if defined(__x86_64__)
#if !defined(__AVX2__)
    {Isa::Sse42, "sse42", Isa::Sse42, nullptr, any_cpu},  // the baseline of an x86-64-v2 build
    {Isa::Avx2, "avx2", Isa::Sse42, fill_tier_avx2, cpu_has_x86_64_v3},
#else
    {Isa::Avx2, "avx2", Isa::Avx2, fill_tier_avx2, any_cpu},  // (core/cpu_baseline.cpp refuses CPUs without it)
#endif
    {Isa::AvxVnni, "avxvnni", Isa::Avx2, fill_tier_avxvnni, [] { return cpu_has_x86_64_v3() && avx_vnni(); }},
    {Isa::Avx512, "avx512", Isa::Avx2, fill_tier_avx512, avx512_tier},
    {Isa::Avx512Vnni, "avx512vnni", Isa::Avx512, fill_tier_avx512vnni, avx512vnni_tier},
    {Isa::Avx512Bf16, "avx512bf16", Isa::Avx512Vnni, fill_tier_avx512bf16, avx512bf16_tier},
    {Isa::Amx, "amx", Isa::Avx512Bf16, fill_tier_amx, [] { return avx512bf16_tier() && amx_tile() && amx_bf16_int8() && amx_permitted(); }},
#elif defined(__aarch64__)
    {Isa::Neon, "neon", Isa::Neon, fill_tier_neon, any_cpu},  // the baseline
    {Isa::NeonDot, "neondot", Isa::Neon, fill_tier_neondot, [] { return hwcap(HWCAP_ASIMDDP); }},
    {Isa::NeonI8mm, "neoni8mm", Isa::NeonDot, fill_tier_neoni8mm,
     [] { return hwcap(HWCAP_ASIMDDP) && (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0; }},
#endif
};

const Tier* tier_of(Isa isa) {
  for (const Tier& t : kTiers)
    if (t.isa == isa) return &t;
  return nullptr;
}
// The tier named `name`; `source` says where the name came from ("TERN_ISA=", "ISA tier ").
Isa tier_named(const std::string& name, const char* source) {
  for (const Tier& t : kTiers)
    if (t.name == name) {
      if (!t.can_run()) fail(source, name, ": this CPU cannot run it (it has ", cpu_feature_list(), ")");
      return t.isa;
    }
  fail(source, name, ": unknown tier (use ", isa_tier_names(", "), ")");
}

// The tables of the tiers this CPU runs, built once (the fills of tiers it cannot run are never called: their
// files are compiled with instructions it lacks).
struct Tables {
  KernelTable table[kIsaCount];
  bool built[kIsaCount];
};
void build(Tables& out, const Tier& tier) {
  const int at = static_cast<int>(tier.isa);
  if (out.built[at]) return;
  KernelTable t{};
  if (tier.below == tier.isa) {
    fill_baseline(t);
  } else {
    build(out, *tier_of(tier.below));
    t = out.table[static_cast<int>(tier.below)];
  }
  if (tier.fill) tier.fill(t);
  out.table[at] = t;
  out.built[at] = true;
}

// The default tier once first asked for (-1 before): TERN_ISA is read once.
std::atomic<int> chosen{-1};
std::mutex choice_mutex;

}  // namespace

const char* isa_name(Isa isa) {
  const Tier* t = tier_of(isa);
  return t ? t->name : "?";
}

std::string isa_tier_names(const char* sep) {
  std::string names;
  for (const Tier& t : kTiers) names += (names.empty() ? "" : sep) + std::string(t.name);
  return names;
}

bool isa_tier_exists(const std::string& name) {
  for (const Tier& t : kTiers)
    if (t.name == name) return true;
  return false;
}

std::vector<Isa> machine_isas() {
  std::vector<Isa> out;
  for (const Tier& t : kTiers)
    if (t.can_run()) out.push_back(t.isa);
  return out;
}

const KernelTable& kernel_table(Isa isa) {
  static const Tables tables = [] {
    Tables out{};
    for (const Tier& t : kTiers)
      if (t.can_run()) build(out, t);
    return out;
  }();
  const int at = static_cast<int>(isa);
  if (at < 0 || at >= kIsaCount || !tables.built[at])
    fail("ISA tier ", isa_name(isa), ": this CPU cannot run it (it has ", cpu_feature_list(), ")");
  return tables.table[at];
}

std::string profile_name(const std::string& what, const char* entry_name) { return *entry_name ? what + " " + entry_name : what; }

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

bool isa_has_int8_dot(Isa isa) { return kernel_table(isa).nbits_i8_rows.fn != nullptr; }

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
