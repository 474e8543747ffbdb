// The instruction-set tiers the CPU kernels run at, as the CPU allows them (cpuid on x86-64, the kernel's
// hwcaps on AArch64): one binary runs on every machine of its architecture and uses what the one it runs on
// has. Each session runs at one (SessionOptions::isa, handed to its kernels in Context::isa); the default is the
// machine's highest, or TERN_ISA=<tier>'s (a lower tier, for tests and for comparing paths). Asking for one the
// CPU lacks is an error.
//
// Tiers, each a set of instructions kernels may use (kernels for a tier live in x86/*_<tier>.cpp or
// arm/*_<tier>.cpp, compiled with that tier's flags; what each runs is its kernel table, kernel_table.h):
//   any:      scalar      the baseline's kernels without the instruction-set ones, the grouped n-bit GEMV in plain
//                         C++ (scalar/tier_scalar.cpp): the tests' reference, never a machine's default
//   x86-64:   sse42       SSE4.2, POPCNT — the default build's baseline (-march=x86-64-v2): CPUs without AVX
//                         (Atom/Celeron boards, pre-2013 cores); not a tier of an x86-64-v3 build
//             avx2        AVX2, FMA, F16C — its own files (x86/*_avx2.cpp, x86/float_avx2/); the whole of an
//                         x86-64-v3 build (TERN_ARCH_FLAGS=-march=x86-64-v3) is this tier
//             avxvnni     + AVX-VNNI: 256-bit u8·s8 dot products (vpdpbusd, VEX) — Alder Lake, Zen 5
//             avx512      + AVX-512 F/BW/VL/DQ (no VNNI assumed: Skylake-X has none)
//             avx512vnni  + AVX512_VNNI — Ice Lake, Sapphire Rapids, Zen 4/5
//             avx512bf16  + AVX512_BF16: bf16 pair dot products (vdpbf16ps) — Cooper Lake, Sapphire Rapids, Zen 4/5
//             amx         + AMX-TILE, AMX-BF16, AMX-INT8 with the kernel's permission to use tile data
//                         (arch_prctl ARCH_REQ_XCOMP_PERM, Linux 5.16+) — Sapphire Rapids and later Xeons
//   Each tier from avx512 up has everything of the tiers from avx512 to it (avxvnni is beside them: Zen 4
//   has AVX-512 without AVX-VNNI).
//   AArch64:  neon        Advanced SIMD and FP16 conversions — every AArch64 core (-march=armv8-a)
//             neondot     + the int8 dot product (sdot, ARMv8.2 DotProd) — Cortex-A55/A76 on, Apple M, Graviton 2+
//             neoni8mm    + the int8 matrix multiply (smmla, FEAT_I8MM: 2×8 by 8×2 in one instruction) —
//                         Neoverse V1/N2 (Graviton 3/4), Cortex-A510/A710 and later
// A machine's tier is the highest whose instructions it has all of. isa.cpp lists them, one line a tier.
#pragma once
#include <string>
#include <vector>

namespace tern::kernels {

enum class Isa { Scalar, Sse42, Avx2, AvxVnni, Avx512, Avx512Vnni, Avx512Bf16, Amx, Neon, NeonDot, NeonI8mm };
constexpr int kIsaCount = static_cast<int>(Isa::NeonI8mm) + 1;

const char* isa_name(Isa isa);
// Every tier this CPU can execute, lowest first (always starts with the build's baseline: sse42, avx2 or neon).
std::vector<Isa> machine_isas();
// The tier sessions run at unless they ask for another (SessionOptions::isa): the machine's highest, or
// TERN_ISA's (read once; an unknown name or a tier this CPU cannot run throws, naming what it has).
Isa default_isa();
// Tier `name` (one of isa_tier_names) where this CPU runs it; else fails naming what it has.
Isa isa_named(const std::string& name);
// Whether tier `isa` has the int8 dot products the int8-activation kernels need (every tier but sse42).
bool isa_has_int8_dot(Isa isa);
// The tiers of this architecture, lowest first, separated by `sep` ("avx2|avxvnni|…" with "|"), and whether
// `name` is one of them: the one list the C API's option check and the CLI's messages read.
std::string isa_tier_names(const char* sep);
bool isa_tier_exists(const std::string& name);
// The features the tiers (and later kernels) care about that this CPU has, for `tern devices` and
// `tern bench --machine`: "avx2 fma avxvnni avx512f … avx512bf16", or "neon asimddp …".
std::string cpu_feature_list();

}  // namespace tern::kernels
