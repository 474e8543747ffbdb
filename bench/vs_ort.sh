#!/usr/bin/env bash
# tern and ONNX Runtime on the same model, prompt and threads: prefill and decode tokens/s and their
# ratio, each process's peak RSS, plus tern's share of the machine's read bandwidth.
#   bench/vs_ort.sh MODEL_DIR [PROMPT_TOKENS=128] [NEW_TOKENS=64] [THREADS=2] [tern bench flags…]
# e.g. bench/vs_ort.sh /tmp/llama-1b-fp32 128 64 2   (models from tools/make_bench_model.py)
#      bench/vs_ort.sh /tmp/llama-1b-fp32 128 64 2 --window 4096
# The prompt is `tern bench`'s synthetic one (id 1 + i·7919 mod (vocab − 1)); ONNX Runtime runs with its
# graph optimizations on and feeds its past/present cache back each step (tools/ort/greedy_goldens.mjs).
# Needs tools/ort/node_modules (cd tools/ort && npm install --ignore-scripts) and a built tern.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1 prompt=${2:-128} new=${3:-64} threads=${4:-2}
shift $(( $# < 4 ? $# : 4 ))
vocab=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['vocab_size'])" "$dir/config.json")
ids=$(/usr/bin/python3 -c "import sys; n, v = int(sys.argv[1]), int(sys.argv[2]); print(','.join(str(1 + i * 7919 % (v - 1)) for i in range(n)))" "$prompt" "$vocab")
echo "model: $dir   prompt: $prompt tokens   new: $new   threads: $threads   $*   ($(date -u +%F), $(nproc) cores)"
rss=$(mktemp -d)  # each process's peak resident set (GNU time's %M, KiB): weights, cache and runtime together
tern=$(/usr/bin/time -f %M -o "$rss/tern" ./build/tern bench --model "$dir" --prompt-tokens "$prompt" --new-tokens "$new" \
  --threads "$threads" --json "$@")
ort=$(THREADS=$threads ORT_OPT=all /usr/bin/time -f %M -o "$rss/ort" node tools/ort/greedy_goldens.mjs "$dir/model.onnx" \
  "$(mktemp -d)" "[[$ids]]" "$new" 0 -1 | tail -1)
/usr/bin/python3 - "$tern" "$ort" "$(cat "$rss/tern")" "$(cat "$rss/ort")" <<'PY'
import json, re, sys
t = json.loads(sys.argv[1])
tern_rss, ort_rss = int(sys.argv[3]) / 1024, int(sys.argv[4]) / 1024
m = re.search(r"prefill: (\d+) tokens, (\d+) tok/s; decode: (\d+) tokens, (\d+) tok/s \(([\d.]+) ms/step\)", sys.argv[2])
ort_prefill, ort_decode = float(m.group(2)), 1000.0 / float(m.group(5))
print(f"{'':14}{'prefill tok/s':>14}{'decode tok/s':>14}")
print(f"{'tern':14}{t['prefill_tok_s']:14.1f}{t['decode_tok_s']:14.2f}")
print(f"{'onnxruntime':14}{ort_prefill:14.1f}{ort_decode:14.2f}")
print(f"{'tern / ORT':14}{t['prefill_tok_s'] / ort_prefill:14.2f}{t['decode_tok_s'] / ort_decode:14.2f}")
print(f"peak RSS: tern {tern_rss:.0f} MB, onnxruntime (node) {ort_rss:.0f} MB, tern / ORT {tern_rss / ort_rss:.2f}")
if t["read_bandwidth_gb_s"] > 0:  # (not measured with --no-probe)
    print(f"tern decode reads {(t['weight_bytes_per_token'] + t['cache_bytes_per_token']) / 1e9:.3f} GB/token: "
          f"{t['achieved_gb_s']:.1f} GB/s = {100 * t['achieved_gb_s'] / t['read_bandwidth_gb_s']:.0f}% of {t['read_bandwidth_gb_s']:.1f} GB/s measured")
PY
