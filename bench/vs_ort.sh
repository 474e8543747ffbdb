#!/usr/bin/env bash
# Prefill and decode speed of tern and ONNX Runtime on the same model, prompts and threads, with the
# same generation loop (greedy, KV cache, left-padded batch).
#   bench/vs_ort.sh MODEL_DIR MODEL_FILE IDS MAX_NEW THREADS     e.g.
#   bench/vs_ort.sh ../shared/models/ort-genai/tiny-random-gpt2-fp32 past.onnx "98,464,207;98,116" 64 2
# Needs tools/ort/node_modules (cd tools/ort && npm install --ignore-scripts) and a built tern.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1 file=$2 ids=$3 new=$4 threads=$5
json=$(/usr/bin/python3 -c "import sys; print('[' + ','.join('[' + r + ']' for r in sys.argv[1].split(';')) + ']')" "$ids")
echo "model: $dir/$file   prompts: $ids   new tokens: $new   threads: $threads   ($(date -u +%F))"
for run in 1 2; do  # the first run warms caches; report the second
  tern=$(./build/tern generate --model "$dir" --ids "$ids" --max-new-tokens "$new" --threads "$threads" --json 2>&1 >/dev/null | tail -1)
  ort=$(THREADS=$threads ORT_OPT=all node tools/ort/greedy_goldens.mjs "$dir/$file" "$(mktemp -d)" "$json" "$new" 0 -1 | tail -1)
done
echo "tern        $tern"
echo "$ort"
