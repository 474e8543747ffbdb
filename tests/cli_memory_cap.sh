#!/usr/bin/env bash
# --max-memory holds for every command that loads a model, before the load: `tern run` and `tern inspect` too
# (a 1,000,000-node graph of 24 MB peaked at 1.43 GB in run with no cap to stop it: issue 79), and a prompt
# fed whole that would pass the cap is refused naming --prefill-chunk, while the default chunks fit.
# Usage: cli_memory_cap.sh TERN_BINARY SOURCE_DIR WORK_DIR
set -euo pipefail
tern=$1 model=$2/models/default work=$3
rm -rf "$work" && mkdir -p "$work/in"
refused() {  # COMMAND... : exits non-zero naming the cap
  if "$@" > /dev/null 2> "$work/err"; then echo "not refused: $*"; exit 1; fi
  grep -q "the memory cap (--max-memory 1.0 MB) would be passed" "$work/err" || { echo "$*: $(cat "$work/err")"; exit 1; }
}
refused "$tern" inspect "$model" --max-memory 1M
refused "$tern" run "$model/model.onnx" --input-dir "$work/in" --max-memory 1M
refused "$tern" generate --model "$model" --prompt x --max-memory 1M

# 5,216 tokens of prompt: whole, its activations (57.7 MB forecast) pass 40 MB; in the default chunks of 512 they
# fit. (Kept short: 20,000 tokens took 93 s under AddressSanitizer.)
head -c 15000 "$model/validation.txt" > "$work/long.txt"
if "$tern" generate --model "$model" --prompt-file "$work/long.txt" -n 1 --prefill-chunk 0 --max-memory 40M > /dev/null 2> "$work/err"; then
  echo "a whole 5k-token prompt fit 40 MB"; exit 1
fi
grep -q "more of activations (forecast, the prompt in one run: --prefill-chunk 512 takes less)" "$work/err" || { cat "$work/err"; exit 1; }
"$tern" generate --model "$model" --prompt-file "$work/long.txt" -n 1 --max-memory 40M > /dev/null 2> "$work/err"
echo "--max-memory: inspect, run and generate refuse before loading; a whole long prompt refused naming --prefill-chunk, the default chunks fit"
