#include "runtime/machine.h"

#include "core/tensor.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>
#include <xsimd/xsimd.hpp>

#include "core/error.h"
#include "core/output_files.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/peak.h"

namespace tern {

namespace {

// fn(t, threads) on `threads` threads of their own, t = 0..threads-1; the sum of what they return. Plain
// threads, not the kernels' pool: a measurement must run on exactly `threads`, whatever a session set.
template <typename Fn>
float on_threads(int threads, const Fn& fn) {
  threads = std::max(threads, 1);
  std::vector<float> part(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back([&, t] { part[static_cast<size_t>(t)] = fn(t, threads); });
  part[0] = fn(0, threads);
  for (auto& th : pool) th.join();
  float total = 0;
  for (float v : part) total += v;
  return total;
}

}  // namespace

// Read as the decode kernels stream their weights: from memory the size of a model's (2 MiB pages where the
// kernel gives them, as weights repacked at load), each line requested into L2 3 KB ahead. Without the prefetch
// and the huge pages the probe read less than the int4 and fp32 GEMVs stream (rooflines over 100%): on the
// 2-core Xeon VM (tier amx), `tern bench --machine --threads 2`, 3 alternated runs, 21.9-22.2 -> 32.2-34.3 GB/s.
constexpr size_t kReadPrefetchBytes = 3072;

double measure_read_bandwidth(int threads) {
  using batch = xsimd::batch<float>;
  constexpr size_t kBytes = size_t{512} << 20;
  const size_t n = kBytes / sizeof(float);
  // map_huge rather than Buffer::allocate: the probe is not tern's memory and must not count against
  // --max-memory (bench probes again after loading the model under it).
  void* m = map_huge(kBytes);
  if (!m) fail("measure_read_bandwidth: cannot map ", kBytes, " bytes");
  const std::unique_ptr<void, std::function<void(void*)>> mapping(m, [](void* p) { munmap(p, kBytes); });
  float* a = static_cast<float*>(m);
  on_threads(threads, [&](int t, int count) {  // each thread touches (and so places) the part it reads
    const size_t part = n / static_cast<size_t>(count);
    std::fill(a + part * static_cast<size_t>(t), t + 1 == count ? a + n : a + part * static_cast<size_t>(t + 1), 1.0f);
    return 0.0f;
  });
  double best = 0;
  volatile float sink = 0;
  for (int pass = 0; pass < 6; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    const float total = on_threads(threads, [&](int thread, int count) {
      const size_t T = static_cast<size_t>(count), t = static_cast<size_t>(thread);
      const size_t step = 4 * batch::size, chunk = n / T / step * step;
      const float* p = a + t * chunk;
      batch s0(0.0f), s1(0.0f), s2(0.0f), s3(0.0f);
      for (size_t i = 0; i < chunk; i += step) {  // four independent sums keep the loads in flight
        const char* ahead = reinterpret_cast<const char*>(p + i) + kReadPrefetchBytes;
        for (size_t line = 0; line < step * sizeof(float); line += 64) __builtin_prefetch(ahead + line, 0, 2);
        s0 += batch::load_aligned(p + i);
        s1 += batch::load_aligned(p + i + batch::size);
        s2 += batch::load_aligned(p + i + 2 * batch::size);
        s3 += batch::load_aligned(p + i + 3 * batch::size);
      }
      return xsimd::hadd((s0 + s1) + (s2 + s3));
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink = sink + total;
    if (pass > 0) best = std::max(best, static_cast<double>(kBytes) / s / 1e9);  // the first pass warms up
  }
  return best;
}

BandwidthProber::BandwidthProber(int threads) {
  int sv[2];  // (a socket pair, not pipes: a prober that died answers an error on send, not SIGPIPE)
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    fail("bandwidth probe: cannot make a socket pair: ", std::strerror(errno));
  pid_ = fork();
  if (pid_ < 0) {
    close(sv[0]), close(sv[1]);
    fail("bandwidth probe: cannot fork: ", std::strerror(errno));
  }
  if (pid_ == 0) {  // the prober: a measurement for every byte asked, until the socket closes
    close(sv[0]);
    for (char c; read(sv[1], &c, 1) == 1;) {
      double gb_s = 0;  // (0: unmeasured)
      try {
        gb_s = measure_read_bandwidth(threads);
      } catch (const std::exception&) {
      }
      if (send(sv[1], &gb_s, sizeof gb_s, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof gb_s)) break;
    }
    _exit(0);
  }
  close(sv[1]);
  socket_ = sv[0];
}

double BandwidthProber::measure() {
  double gb_s = 0;
  const char c = 'm';
  if (socket_ < 0 || send(socket_, &c, 1, MSG_NOSIGNAL) != 1 ||
      recv(socket_, &gb_s, sizeof gb_s, MSG_WAITALL) != static_cast<ssize_t>(sizeof gb_s))
    fail("bandwidth probe: the probing process did not answer");
  return gb_s;
}

long BandwidthProber::finish() {
  if (pid_ > 0) {
    close(socket_);
    socket_ = -1;
    int status = 0;
    rusage u{};
    if (wait4(pid_, &status, 0, &u) == pid_) peak_ = u.ru_maxrss * 1024L;
    pid_ = -1;
  }
  return peak_;
}

BandwidthProber::~BandwidthProber() { finish(); }

double measure_peak_gflops(int threads) {
  constexpr int64_t kIterations = 20'000'000;
  double best = 0;
  volatile float sink = 0;
  for (int pass = 0; pass < 3; ++pass) {
    double flops = 0;
    const auto t0 = std::chrono::steady_clock::now();
    const float total = on_threads(threads, [&](int thread, int) {
      const kernels::FmaChains run = kernels::run_fma_chains(kIterations, static_cast<float>(thread) * 1e-3f);
      if (thread == 0) flops = run.flops * threads;
      return run.sum;
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink = sink + total;
    best = std::max(best, flops / s / 1e9);
  }
  return best;
}

namespace {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) return line.substr(line.find(':') + 2);
  return "unknown cpu";
}

std::filesystem::path machine_cache_path() {
  const std::filesystem::path dir = cache_dir("");
  return dir.empty() ? dir : dir / "machine.json";
}

}  // namespace

MachinePeaks machine_peaks(int threads, bool remeasure) {
  const auto path = machine_cache_path();
  // Keyed by tier too: TERN_ISA=avx2 on an AVX-512 machine has half the peak. ("tier " since the probe runs at
  // its tier's width, the kernel table's fma_chains: before, an x86-64-v2 build's avx2 entry was measured at SSE
  // width — 34.8 against 83.0 GFLOP/s on one Zen 3 thread — and the new key leaves such entries unread.)
  const std::string key =
      cpu_model() + ", tier " + kernels::isa_name(kernels::default_isa()) + ", " + std::to_string(threads) + " thread(s)";
  nlohmann::json cache = nlohmann::json::object();
  if (!path.empty()) {
    std::ifstream f(path);
    if (f) cache = nlohmann::json::parse(f, nullptr, false);
    if (!cache.is_object()) cache = nlohmann::json::object();  // unreadable: measured again, rewritten
  }
  if (!remeasure && cache.contains(key) && cache[key].is_object()) {
    const auto& e = cache[key];
    if (e.value("gflops", 0.0) > 0 && e.value("gb_s", 0.0) > 0)
      return {e["gflops"].get<double>(), e["gb_s"].get<double>(),
              "cached in " + path.string() + " (measured " + e.value("date", std::string("?")) + "; tern bench --machine measures again)"};
  }
  MachinePeaks p{measure_peak_gflops(threads), measure_read_bandwidth(threads), "measured now"};
  if (!path.empty()) {  // a cache that cannot be written only costs a measurement next time
    char date[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%d %H:%M", std::localtime(&now));
    cache[key] = {{"gflops", p.gflops}, {"gb_s", p.gb_s}, {"date", date}};
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    std::ofstream(path) << cache.dump(2) << "\n";
  }
  return p;
}

long peak_rss_bytes() {
  std::ifstream status("/proc/self/status");  // VmHWM honours reset_peak_rss; getrusage's maximum does not
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6)) * 1024L;
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss * 1024L;
}

void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

ResidentMemory resident_memory() {
  ResidentMemory r;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("RssAnon:", 0) == 0) r.anon = std::stol(line.substr(8)) * 1024L;
    if (line.rfind("RssFile:", 0) == 0) r.file = std::stol(line.substr(8)) * 1024L;
  }
  return r;
}

}  // namespace tern
