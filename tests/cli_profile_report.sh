#!/usr/bin/env bash
# `tern profile --html/--svg/--trace` as a user runs it, the report opened in headless Chromium: the page's
# own check lists each chart the browser laid out (id:WIDTHxHEIGHT:marks), and a screenshot is taken.
# Then `profile --compare` of the trace against ONNX Runtime's profile of the same model, and `bench-op`.
# Usage: cli_profile_report.sh TERN_BINARY SOURCE_DIR WORK_DIR
set -euo pipefail
tern=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
model=$src/tests/fixtures/llama-gqa-torch
"$tern" profile --model "$model" --prompt-tokens 16 --new-tokens 4 --threads 1 \
  --html "$work/report.html" --svg "$work/roofline.svg" --trace "$work/trace.json" > "$work/table.txt"
grep -q "slowest nodes" "$work/table.txt"
grep -q "profiler overhead" "$work/table.txt"
head -c 5 "$work/roofline.svg" | grep >/dev/null "<?xml"
"$tern" profile --compare "$work/trace.json" "$src/tests/fixtures/ort_profile_llama_gqa_torch.json" > "$work/compare.txt"
grep -q "over all phases together" "$work/compare.txt"
grep -Eq "^  MatMul +[0-9.]+ +[0-9.]+ " "$work/compare.txt"
"$tern" bench-op matmul --shape 1,256,512 --weights int4 --threads 1 > "$work/bench_op.txt"
grep -q "kernel   gemv_nbits int4" "$work/bench_op.txt"
grep -q "% of the roofline" "$work/bench_op.txt"

browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
  if [ "${CI:-}" = "true" ]; then echo "CI needs chromium (scripts/setup.sh --ci installs it)"; exit 1; fi
  echo "skipped the browser check: no chromium (apt-get install chromium)"
  exit 0
fi
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$work/chromium")
"$browser" "${flags[@]}" --dump-dom "file://$work/report.html" 2> "$work/chromium.log" > "$work/dom.html"
check=$(grep -o '<p id="render-check"[^>]*>[^<]*' "$work/dom.html" | sed 's/.*>//')
echo "rendered: $check"
for chart in roofline time-by-op timeline-prefill timeline-decode; do
  # laid out with a real size and at least one mark (point, bar, node) drawn
  echo "$check" | grep -Eq "(^| )$chart:[1-9][0-9]*x[1-9][0-9]*:[1-9][0-9]*( |$)" || { echo "chart $chart missing: $check"; exit 1; }
done
"$browser" "${flags[@]}" --window-size=1100,2400 --screenshot="$work/report.png" "file://$work/report.html" 2>> "$work/chromium.log"
# A PNG of the window's size (IHDR width and height), and more than an empty page compresses to.
[ "$(head -c 8 "$work/report.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]
[ "$(od -An -tu1 -j16 -N8 "$work/report.png" | tr -s ' ' | sed 's/^ //')" = "0 0 4 76 0 0 9 96" ]
[ "$(stat -c %s "$work/report.png")" -gt 50000 ]
echo "screenshot: $work/report.png"
