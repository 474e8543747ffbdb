#!/usr/bin/env bash
# Decode under competition for the cores (issue 18: "no spin-wait collapse"): tern bench's decode tok/s
# alone and with BUSY CPU-bound processes running beside it, alternated ROUNDS times; prints each round,
# the medians and the ratio. With a llama.cpp build dir and its GGUF, llama-bench's tg64 the same way, for
# how a peer degrades on the same machine.
#   bench/contention.sh TERN_MODEL_DIR [THREADS=2] [BUSY=1] [ROUNDS=5] [LLAMA_CPP_BUILD_BIN MODEL.gguf]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1 threads=${2:-2} busy=${3:-1} rounds=${4:-5} bin=${5:-} gguf=${6:-}
echo "tern folder: $dir   threads: $threads   busy processes: $busy   ($(date -u +%F), $(nproc) cores, ISA $(./build/tern devices | sed -n 's/.*ISA tier \([a-z0-9]*\).*/\1/p'))"
pids=()
start_busy() { for _ in $(seq 1 "$busy"); do (while :; do :; done) & pids+=($!); done; }
stop_busy() { kill "${pids[@]}" 2> /dev/null || true; wait "${pids[@]}" 2> /dev/null || true; pids=(); }
trap stop_busy EXIT
tern_tg() { ./build/tern bench --model "$dir" --prompt-tokens 16 --new-tokens 64 --threads "$threads" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["decode_tok_s"])'; }
llama_tg() {
  [ -n "$bin" ] || { echo 0; return; }
  "$bin/llama-bench" -m "$gguf" -t "$threads" -p 0 -n 64 -r 1 -o json 2> /dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["avg_ts"])'
}
rows=()
for r in $(seq 1 "$rounds"); do
  ta=$(tern_tg) la=$(llama_tg)
  start_busy
  tb=$(tern_tg) lb=$(llama_tg)
  stop_busy
  rows+=("$ta $tb $la $lb")
  echo "round $r: tern alone $ta, loaded $tb; llama.cpp alone $la, loaded $lb"
done
python3 - "${rows[@]}" <<'PY'
import statistics, sys
rows = [[float(x) for x in a.split()] for a in sys.argv[1:]]
m = [statistics.median(r[i] for r in rows) for i in range(4)]
print(f"median decode tok/s: tern alone {m[0]:.1f}, loaded {m[1]:.1f} ({m[1] / m[0]:.2f}x)")
if m[2] > 0:
    print(f"median decode tok/s: llama.cpp alone {m[2]:.1f}, loaded {m[3]:.1f} ({m[3] / m[2]:.2f}x)")
PY
