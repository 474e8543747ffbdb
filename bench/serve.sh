#!/usr/bin/env bash
# tern serve under load, measured from the client (bench/serve_load.py, Python's standard library):
#   bash bench/serve.sh MODEL_DIR [--tokens 64] [--streams "1 4 8 16"] [--threads N] [--weights F]
#   bash bench/serve.sh MODEL_DIR --streams "1 8 1 8 1 8"   alternated phases: paired ratios and their medians
#   bash bench/serve.sh MODEL_DIR --soak 120          16 streams for 120 s: every response complete and equal
#                                                     to its solo text, RSS sampled, /metrics against the client
#   bash bench/serve.sh MODEL_DIR --prefix-cache      8 chat requests sharing a ~1,000-token system prompt: time to
#                                                     first token with and without the prefix cache (bench/prefix_cache.py)
# One server with a row per stream (--parallel 16) serves every phase. Per concurrency: aggregate completion
# tok/s (and its ratio to one stream), p50/p99 time to first token and inter-token latency, and how many
# responses differed from their prompt's solo greedy text (must be 0: decoding is batch-invariant).
# Speed is never asserted; quote the table with the machine (`tern devices` prints the ISA tier).
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: bench/serve.sh MODEL_DIR [--tokens N] [--streams LIST] [--soak SECONDS]}
shift
tokens=64 streams="1 4 8 16" soak=0 extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --tokens) tokens=$2; shift 2 ;;
    --streams) streams=$2; shift 2 ;;
    --soak) soak=$2; shift 2 ;;
    --prefix-cache) exec python3 bench/prefix_cache.py "$model" --system-words 850 ;;
    *) extra+=("$1" "$2"); shift 2 ;;
  esac
done
log=$(mktemp) phases=$(mktemp)  # the server's stderr; serve_load.py's JSON line per phase
build/tern serve "$model" --port 0 --parallel 16 --queue 256 "${extra[@]}" 2> "$log" &
server=$!
trap 'kill $server 2>/dev/null || true; rm -f "$log" "$phases"' EXIT
url=""
for _ in $(seq 1 600); do
  url=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" || true)
  [ -n "$url" ] && break
  kill -0 $server 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.5
done
[ -n "$url" ] || { echo "tern serve did not start"; cat "$log"; exit 1; }
build/tern devices | sed -n 1p
head -1 "$log"

if [ "$soak" != 0 ]; then
  before=$(curl -s "$url/metrics" | awk '/^tern_requests_total\{endpoint="\/v1\/completions",status="200"\}/{print $2}')
  out=$(python3 bench/serve_load.py "$url" --streams 16 --tokens "$tokens" --soak "$soak" --pid $server)
  echo "$out"
  after=$(curl -s "$url/metrics" | awk '/^tern_requests_total\{endpoint="\/v1\/completions",status="200"\}/{print $2}')
  python3 - "$out" "${before:-0}" "$after" <<'EOF'
import json, sys
o, before, after = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
solo = 8  # serve_load.py's solo reference runs
served = after - before - solo
rss = o.get("rss_mb", [])
warm = rss[len(rss) // 2:] or rss  # the second half: pools and caches fill in the first
print(f"soak: {o['requests']} requests in {o['wall_s']} s, {o['mismatches']} differing from their solo text, "
      f"{len(o['errors'])} failed; /metrics counted {served} (client: {o['requests']}); "
      f"RSS after warm-up {min(warm)}..{max(warm)} MB ({len(rss)} samples)")
ok = o["requests"] > 0 and not o["errors"] and o["mismatches"] == 0 and served == o["requests"]
ok = ok and (max(warm) - min(warm)) <= 0.05 * max(warm)
sys.exit(0 if ok else 1)
EOF
  exit
fi

printf "%-8s %12s %8s %12s %8s %10s %10s %10s %10s %9s\n" streams "agg tok/s" "x one" "decode tok/s" "x one" \
  "TTFT p50" "TTFT p99" "ITL p50" "ITL p99" mismatch
# A phase's "x one" compares it with the last one-stream phase before it, so `--streams "1 8 1 8 1 8"`
# gives paired ratios, and their medians follow the table. Decode tok/s = streams / ITL p50: the steady
# rate without the prompts' prefill, which weighs on the aggregate of short completions.
for n in $streams; do
  python3 bench/serve_load.py "$url" --streams "$n" --tokens "$tokens" >> "$phases"
  python3 bench/serve_table.py "$phases" --last
done
python3 bench/serve_table.py "$phases" --medians
