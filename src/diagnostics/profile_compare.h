// `tern profile --compare A.json B.json`: per-op-type time deltas between two profiles — tern traces
// (--trace) or ONNX Runtime profiles (enableProfiling), which share the event fields.
#pragma once
#include <map>
#include <ostream>
#include <string>

namespace tern {

struct ProfileTotals {
  std::string path;
  std::map<std::string, std::map<std::string, double>> ms;  // phase → op type → node ms
  std::map<std::string, int64_t> runs;                      // phase → model_run events
};

// Node events ("cat":"Node", names ending in _kernel_time) summed per phase (args.phase; "all" when
// absent, as in ONNX Runtime's profiles) and args.op_name. Fails naming the file when it is not a trace.
ProfileTotals read_profile_trace(const std::string& path);

// Per phase both profiles have (else over all phases together), per op type: A ms, B ms, B − A, B / A,
// and ms per run when the run counts differ. Slowest op types first.
void compare_profiles(const ProfileTotals& a, const ProfileTotals& b, std::ostream& out);

}  // namespace tern
