#!/usr/bin/env bash
# Speculative decoding's speed-up: decode tok/s of `tern generate --speculate ngram[:N]` (or draft[:N] with
# --draft-model DRAFT_DIR) against plain greedy decoding on the same chat prompt, alternated ROUNDS times (the
# medians), with the drafts accepted and a check that both gave the same text.
#   bench/speculation.sh MODEL_DIR PROMPT_FILE [NEW_TOKENS] [THREADS] [ROUNDS] [SPECULATE] [DRAFT_DIR]
# e.g. bench/speculation.sh models/smollm2-135m-instruct bench/prompts/copy.txt 200 2 5 ngram
#      bench/speculation.sh "$(~/.cache/tern/venv/bin/python tools/exporters/real_models.py --tern build/tern --fp32-only)" \
#        bench/prompts/open.txt 200 2 5 draft:6 models/smollm2-135m-instruct
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1 prompt=$2 new=${3:-200} threads=${4:-2} rounds=${5:-5} spec=${6:-ngram} draft=${7:-}
draft_flags=()
[ -z "$draft" ] || draft_flags=(--draft-model "$draft")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "model: $dir   prompt: $prompt   new tokens: $new   threads: $threads   --speculate $spec ${draft:+--draft-model $draft}  ($(date -u +%F), $(nproc) cores)"
run() {  # run NAME FLAGS…: one generation; its decode tok/s appended to $work/NAME
  local name=$1
  shift
  ./build/tern generate --model "$dir" --chat --prompt-file "$prompt" --max-new-tokens "$new" --greedy --threads "$threads" \
    --stats "$@" > "$work/$name.txt" 2> "$work/$name.err"
  sed -nE 's/.*decode: [0-9]+ tokens, ([0-9]+) tok\/s.*/\1/p' "$work/$name.err" >> "$work/$name.tps"
}
for _ in $(seq "$rounds"); do
  run plain
  run spec --speculate "$spec" "${draft_flags[@]}"
  cmp -s "$work/plain.txt" "$work/spec.txt" || { echo "the texts differ"; exit 1; }
done
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
grep "^speculation:" "$work/spec.err"
p=$(median "$work/plain.tps") s=$(median "$work/spec.tps")
echo "decode tok/s, plain: $(tr '\n' ' ' < "$work/plain.tps")(median $p)"
echo "decode tok/s, --speculate $spec: $(tr '\n' ' ' < "$work/spec.tps")(median $s)"
awk -v p="$p" -v s="$s" 'BEGIN { printf "speed-up %.2fx; the same text every round\n", s / p }'
