#!/usr/bin/env bash
# Decode cost of the KV cache as the context grows: ms per decode step at several prompt lengths for
# tern's ring buffer (--window), tern running the graph's own past/present cache, and ONNX Runtime
# (past/present fed back each step, its graph optimizations on), same model and threads.
#   bench/ring_vs_ort.sh MODEL_DIR THREADS "64 512 2048" [NEW_TOKENS]
# e.g. on a Llama-3.2-1B-shaped model from tools/make_bench_model.py --shape 1b --out /tmp/llama-1b-fp32.
# Needs tools/ort/node_modules (cd tools/ort && npm install --ignore-scripts) and a built tern.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1 threads=$2 contexts=$3 new=${4:-16}
echo "model: $dir   threads: $threads   new tokens: $new   ($(date -u +%F), $(nproc) cores)"
printf "%8s  %16s  %16s  %16s\n" context "tern ring ms/tok" "tern graph-cache" "onnxruntime"
for n in $contexts; do
  ids=$(/usr/bin/python3 -c "import sys; print(','.join(str(1 + i * 37 % 500) for i in range(int(sys.argv[1]))))" "$n")
  ms() { /usr/bin/python3 -c "import json,sys; print('%.2f' % json.loads(sys.stdin.read().splitlines()[0])['decode_ms_per_token'])"; }
  ring=$(./build/tern generate --model "$dir" --ids "$ids" --max-new-tokens "$new" --greedy --threads "$threads" \
           --window $((n + new)) --prefill-chunk 256 --json 2>/dev/null | ms)
  graph=$(./build/tern generate --model "$dir" --ids "$ids" --max-new-tokens "$new" --greedy --threads "$threads" \
            --json 2>/dev/null | ms)
  ort=$(THREADS=$threads ORT_OPT=all node tools/ort/greedy_goldens.mjs "$dir/model.onnx" "$(mktemp -d)" "[[$ids]]" "$new" 0 -1 |
          tail -1 | sed -E 's/.*\(([0-9.]+) ms\/step\).*/\1/')
  printf "%8s  %16s  %16s  %16s\n" "$n" "$ring" "$graph" "$ort"
done
