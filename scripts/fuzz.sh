#!/usr/bin/env bash
# Fuzzes tern's parsers with libFuzzer under AddressSanitizer + UBSan (tests/fuzz/targets.h lists the targets):
#   bash scripts/fuzz.sh TARGET SECONDS     one target
#   bash scripts/fuzz.sh all SECONDS        every target, two at a time
#   TERN_FUZZ_SEED=N bash scripts/fuzz.sh ...  a fixed libFuzzer seed (default: a random one each run)
#   TERN_FUZZ_RUNS=N bash scripts/fuzz.sh ...  stop after N executions, if SECONDS have not passed first
# CI runs `TERN_FUZZ_SEED=1 ... all 30`: with the seed fixed and the corpus starting from the same seeds, the
# mutations are the same on every machine, and a slower machine runs a prefix of them — so CI replays a fuzz
# session already run crash-free here (twice as long) instead of failing a commit on a new random finding.
# New findings come from long runs with random seeds; each becomes a reproducer in tests/bad_inputs.
# Builds build-asan/tests/tern_fuzz with clang first (scripts/build.sh --fuzz: the sanitizer pass's build; this
# script's files go to build-asan/fuzz/). Seeds come from tests/fuzz/corpus/TARGET (read only) — for
# onnx_model also the ONNX node tests' models when ../shared has them; what the fuzzer
# finds new goes to build-asan/fuzz/corpus/TARGET. A crash, leak, timeout or sanitizer report fails the run and
# leaves its input in build-asan/fuzz/crashes/: add it to tests/bad_inputs/TARGET/ with the error it must now
# end in (REPRODUCERS in tests/fuzz/make_corpus.py) once fixed. Each target's final stats line is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: scripts/fuzz.sh TARGET|all SECONDS}
seconds=${2:?usage: scripts/fuzz.sh TARGET|all SECONDS}
bash scripts/build.sh --fuzz
bin=build-asan/tests/tern_fuzz
seed=(); [ -z "${TERN_FUZZ_SEED:-}" ] || seed=(-seed="$TERN_FUZZ_SEED")
runs=(); [ -z "${TERN_FUZZ_RUNS:-}" ] || runs=(-runs="$TERN_FUZZ_RUNS")
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

run_one() {
  local t=$1
  local dict=() seeds=(tests/fuzz/corpus/"$t")
  case $t in
    onnx_model|external_data) dict=(-dict=tests/fuzz/dicts/onnx.dict) ;;
    tokenizer_json|model_config|chat_template|serve_request|json_schema) dict=(-dict=tests/fuzz/dicts/json.dict) ;;
    gguf) dict=(-dict=tests/fuzz/dicts/gguf.dict) ;;
  esac
  if [ "$t" = onnx_model ] && [ -d ../shared/onnx-node-tests/node ]; then
    if [ ! -d build-asan/fuzz/node-test-seeds ]; then  # links, never copies, to the node tests' models
      mkdir -p build-asan/fuzz/node-test-seeds
      local root d
      root=$(realpath ../shared/onnx-node-tests/node)
      for d in "$root"/*/; do
        d=${d%/}
        [ -f "$d/model.onnx" ] && ln -s "$d/model.onnx" "build-asan/fuzz/node-test-seeds/${d##*/}.onnx"
      done
    fi
    seeds+=(build-asan/fuzz/node-test-seeds)
  fi
  # What the fuzzer finds new is kept across runs, except in a fixed-seed replay, which starts from the seeds alone.
  local found=build-asan/fuzz/corpus/"$t"
  if [ ${#seed[@]} -gt 0 ]; then found=build-asan/fuzz/replay/"$t"; rm -rf "$found"; fi
  mkdir -p "$found" build-asan/fuzz/crashes
  local log=build-asan/fuzz/fuzz-$t.log
  # -timeout: one input may take 10 s; -rss_limit_mb: past it is a bug (targets run under a 256 MB cap).
  if TERN_FUZZ_TARGET=$t "$bin" "$found" "${seeds[@]}" "${dict[@]}" "${seed[@]}" "${runs[@]}" -max_total_time="$seconds" \
       -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
       -artifact_prefix=build-asan/fuzz/crashes/"$t"- > "$log" 2>&1; then
    echo "fuzz $t: $(grep -E '^Done [0-9]+ runs' "$log" | tail -1) · $(grep -E 'stat::number_of_executed_units' "$log" | awk '{print $2}') executions, coverage $(grep -oE 'cov: [0-9]+' "$log" | tail -1)"
  else
    echo "fuzz $t FAILED (log $log):"
    grep -E 'ERROR|SUMMARY|terminate|what\(\)|Test unit written|#[0-9]+ 0x' "$log" | head -40
    return 1
  fi
}

if [ "$target" = all ]; then
  mapfile -t all < <(TERN_FUZZ_TARGET=list "$bin" | awk '/^  [a-z_0-9]+ /{print $1}')
  status=0
  for ((i = 0; i < ${#all[@]}; i += 2)); do
    run_one "${all[i]}" & a=$!
    b=""
    if [ $((i + 1)) -lt ${#all[@]} ]; then run_one "${all[i + 1]}" & b=$!; fi
    wait $a || status=1
    [ -z "$b" ] || wait $b || status=1
  done
  exit $status
fi
run_one "$target"
