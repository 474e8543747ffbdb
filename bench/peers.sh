#!/usr/bin/env bash
# tern, ONNX Runtime and llama.cpp on the same weights: one random-weight Llama-shaped F32 GGUF
# (tools/make_bench_gguf.py) is the source of every file — llama.cpp's own llama-quantize makes its F16 and
# Q4_0 (--pure: every matrix Q4_0), and `tern import-gguf` turns the F32 and the Q4_0 into the ONNX folders tern
# and ONNX Runtime both run (the int4 one is MatMulNBits with llama.cpp's Q4_0 blocks, accuracy_level 4). Rows:
#   fp32: tern, tern from its pack (`tern pack`, a hard-linked copy of the folder), ORT, llama.cpp F32 · fp16: tern
#   --weights fp16, llama.cpp F16 · bf16: tern --weights bf16 (against ORT fp32 and llama.cpp F16) · int4: tern,
#   tern from its pack, ORT, llama.cpp Q4_0
# Columns (medians over ROUNDS alternated rounds): prefill tok/s of a PROMPT-token prompt; the time to first token of
# that prompt in the first run after load (tern's first_prefill_ms; ORT's prefill is its first run; llama-bench
# warms up, so none for llama.cpp); decode tok/s of NEW
# tokens after it; decode tok/s of 32 tokens after a DEPTH-token prompt (llama.cpp's: llama-bench -n with -d, the
# context depth); peak RSS of the PROMPT run (tern's own count, /usr/bin/time for node and llama-bench) and load
# seconds (llama.cpp's: llama-completion's "load time"). A peer that fails stops the script with its own error.
#
#   bench/peers.sh WORK_DIR [LLAMA_CPP=/tmp/llama.cpp] [THREADS=2] [ROUNDS=3]
#   env: TERN=./build/tern  SHAPE=1b|135m|tiny (1b)  PROMPT=128  NEW=128  DEPTH=2048 (0 leaves the column out)
#        ROWS=REGEX: only the rows whose name matches (e.g. ROWS='int4|Q4_0')
#
# LLAMA_CPP is a llama.cpp checkout outside this repository (`fetch` github:ggerganov/llama.cpp and clone it);
# its build/ is made here when missing (Release, GGML_NATIVE, no curl). Never vendor or copy its code.
# WORK_DIR keeps the models between runs (1b: ~12 GB in all). Needs a built tern, tools/ort/node_modules
# (cd tools/ort && npm install --ignore-scripts), python3-venv.
set -euo pipefail
shopt -s inherit_errexit  # (a failing peer inside $(...) stops the script there)
cd "$(dirname "$0")/.."
work=$1 llama=${2:-/tmp/llama.cpp} threads=${3:-2} rounds=${4:-3}
shape=${SHAPE:-1b} prompt=${PROMPT:-128} new=${NEW:-128} depth=${DEPTH:-2048}
mkdir -p "$work"
tern=${TERN:-./build/tern}  # TERN=path/to/tern compares another build

venv=${TERN_PEERS_VENV:-$HOME/.cache/tern/peers-venv}
[ -x "$venv/bin/python" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q -r bench/requirements.txt; }
bin=$llama/build/bin
if [ ! -x "$bin/llama-bench" ] || [ ! -x "$bin/llama-quantize" ] || [ ! -x "$bin/llama-completion" ]; then
  cmake -S "$llama" -B "$llama/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DGGML_NATIVE=ON > /dev/null
  cmake --build "$llama/build" -j"$(nproc)" --target llama-bench llama-quantize llama-completion > /dev/null
fi

[ -f "$work/f32.gguf" ] || "$venv/bin/python" tools/make_bench_gguf.py --shape "$shape" --out "$work/f32.gguf"
[ -f "$work/f16.gguf" ] || "$bin/llama-quantize" "$work/f32.gguf" "$work/f16.gguf" F16 > /dev/null 2>&1
[ -f "$work/q4_0.gguf" ] || "$bin/llama-quantize" --pure "$work/f32.gguf" "$work/q4_0.gguf" Q4_0 > /dev/null 2>&1
[ -f "$work/onnx-f32/model.onnx" ] || "$tern" import-gguf "$work/f32.gguf" "$work/onnx-f32" > /dev/null
[ -f "$work/onnx-q4_0/model.onnx" ] || "$tern" import-gguf "$work/q4_0.gguf" "$work/onnx-q4_0" > /dev/null
[ -f "$work/pack-f32/model.tern-pack" ] || "$tern" pack "$work/onnx-f32" "$work/pack-f32" > /dev/null
[ -f "$work/pack-q4_0/model.tern-pack" ] || "$tern" pack "$work/onnx-q4_0" "$work/pack-q4_0" > /dev/null

vocab=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['vocab_size'])" "$work/onnx-f32/config.json")
ids() { /usr/bin/python3 -c "import sys; n, v = int(sys.argv[1]), int(sys.argv[2]); print(','.join(str(1 + i * 7919 % (v - 1)) for i in range(n)))" "$1" "$vocab"; }
ids_prompt=$(ids "$prompt") ids_depth=$( [ "$depth" -gt 0 ] && ids "$depth" || echo "")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "shape $shape   prompt $prompt   new $new   depth $depth   threads $threads   ($(date -u +%F), $(nproc) cores,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), tern ISA tier $("$tern" bench --machine | sed -n 's/.*ISA tier \([a-z0-9]*\).*/\1/p'))"

# Each function prints one JSON row: pp, ttft_ms (0: not measured), tg, tg_depth (tok/s; tg_depth 0 when DEPTH=0),
# rss_mb, load_s.
run_tern() {  # FOLDER [tern bench flags…]
  local dir=$1; shift
  local a b="{}"
  a=$("$tern" bench --model "$dir" --prompt-tokens "$prompt" --new-tokens "$new" --threads "$threads" --json "$@")
  [ "$depth" -gt 0 ] && b=$("$tern" bench --model "$dir" --prompt-tokens "$depth" --new-tokens 32 --threads "$threads" --json "$@")
  /usr/bin/python3 -c "
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(json.dumps({'pp': a['prefill_tok_s'], 'ttft_ms': a['first_prefill_ms'], 'tg': a['decode_tok_s'], 'tg_depth': b.get('decode_tok_s', 0),
                  'rss_mb': a['peak_rss_gb'] * 1000, 'load_s': a['load_s']}))" "$a" "$b"
}
run_ort() {  # FOLDER
  local a b=""
  a=$(THREADS=$threads ORT_OPT=all /usr/bin/time -o "$tmp/time" -f "%M" node tools/ort/greedy_goldens.mjs "$1/model.onnx" "$tmp" "[[$ids_prompt]]" "$new" 0 -1 | tail -1)
  [ "$depth" -gt 0 ] && b=$(THREADS=$threads ORT_OPT=all node tools/ort/greedy_goldens.mjs "$1/model.onnx" "$tmp" "[[$ids_depth]]" 32 0 -1 | tail -1)
  /usr/bin/python3 -c "
import json, re, sys
pat = r'prefill: \d+ tokens, (\d+) tok/s; decode: \d+ tokens, \d+ tok/s \(([\d.]+) ms/step\); load: ([\d.]+) s'
a, b = re.search(pat, sys.argv[1]), re.search(pat, sys.argv[2])
print(json.dumps({'pp': float(a.group(1)), 'ttft_ms': 1000 * int(sys.argv[4]) / float(a.group(1)), 'tg': 1000 / float(a.group(2)), 'tg_depth': 1000 / float(b.group(2)) if b else 0,
                  'rss_mb': int(sys.argv[3]) * 1024 / 1e6, 'load_s': float(a.group(3))}))" "$a" "$b" "$(tail -1 "$tmp/time")" "$prompt"
}
peer() {  # COMMAND...: its stdout; when it fails, its stderr and the script's exit (never a silent empty figure)
  "$@" 2> "$tmp/peer_err" || { echo "peers.sh: '$*' failed:" >&2; cat "$tmp/peer_err" >&2; exit 1; }
}
run_llama() {  # FILE.gguf
  local a b c="[]" load
  a=$(peer /usr/bin/time -o "$tmp/time" -f "%M" "$bin/llama-bench" -m "$1" -t "$threads" -p "$prompt" -n 0 -r 1 -o json)
  b=$(peer "$bin/llama-bench" -m "$1" -t "$threads" -p 0 -n "$new" -d "$prompt" -r 1 -o json)
  [ "$depth" -gt 0 ] && c=$(peer "$bin/llama-bench" -m "$1" -t "$threads" -p 0 -n 32 -d "$depth" -r 1 -o json)
  peer "$bin/llama-completion" -m "$1" -c 256 -n 1 -p hi -no-cnv -t "$threads" < /dev/null > /dev/null  # (its timings: stderr)
  load=$(sed -n 's/.*load time = *\([0-9.]*\) ms.*/\1/p' "$tmp/peer_err")
  [ -n "$load" ] || { echo "peers.sh: llama-completion printed no 'load time = ... ms'" >&2; exit 1; }
  /usr/bin/python3 -c "
import json, sys
pp, tg = json.loads(sys.argv[1]), json.loads(sys.argv[2])
depth = json.loads(sys.argv[3])
print(json.dumps({'pp': pp[0]['avg_ts'], 'ttft_ms': 0, 'tg': tg[0]['avg_ts'], 'tg_depth': depth[0]['avg_ts'] if depth else 0,
                  'rss_mb': int(sys.argv[4]) * 1024 / 1e6, 'load_s': float(sys.argv[5]) / 1000}))" "$a" "$b" "$c" "$(tail -1 "$tmp/time")" "$load"
}

rows=("tern fp32|run_tern $work/onnx-f32" "tern fp32 pack|run_tern $work/pack-f32" "ORT fp32|run_ort $work/onnx-f32"
      "llama.cpp F32|run_llama $work/f32.gguf" "tern fp16|run_tern $work/onnx-f32 --weights fp16" "llama.cpp F16|run_llama $work/f16.gguf"
      "tern bf16|run_tern $work/onnx-f32 --weights bf16"
      "tern int4|run_tern $work/onnx-q4_0" "tern int4 pack|run_tern $work/pack-q4_0" "ORT int4|run_ort $work/onnx-q4_0"
      "llama.cpp Q4_0|run_llama $work/q4_0.gguf")
if [ -n "${ROWS:-}" ]; then
  kept=()
  for row in "${rows[@]}"; do [[ ${row%%|*} =~ $ROWS ]] && kept+=("$row"); done
  rows=("${kept[@]}")
fi
: > "$tmp/results"
for r in $(seq 1 "$rounds"); do
  # Alternate the order each round so no engine always runs right after the same one.
  if (( r % 2 )); then order=("${rows[@]}"); else order=(); for ((i = ${#rows[@]} - 1; i >= 0; i--)); do order+=("${rows[i]}"); done; fi
  for row in "${order[@]}"; do
    name=${row%%|*}
    out=$(${row#*|})
    echo "round $r  $name  $out"
    echo "$name|$out" >> "$tmp/results"
  done
done
/usr/bin/python3 - "$tmp/results" "$prompt" "$new" "$depth" <<'PY'
import collections, json, statistics, sys
runs = collections.OrderedDict()
for line in open(sys.argv[1]):
    name, row = line.rstrip("\n").split("|", 1)
    runs.setdefault(name, []).append(json.loads(row))
prompt, new, depth = sys.argv[2:5]
cols = [("pp", f"pp{prompt} tok/s"), ("ttft_ms", f"first pp{prompt} ms"), ("tg", f"tg{new} tok/s"), ("tg_depth", f"tg32 @{depth}"), ("rss_mb", "peak RSS MB"), ("load_s", "load s")]
if depth == "0":
    cols = [c for c in cols if c[0] != "tg_depth"]
med = {n: {k: statistics.median(r[k] for r in rs) for k, _ in cols} for n, rs in runs.items()}
print(f"\nmedians of {len(next(iter(runs.values())))} round(s)\n| engine | " + " | ".join(h for _, h in cols) + " |")
print("| --- " * (len(cols) + 1) + "|")
for n, m in med.items():
    print(f"| {n} | " + " | ".join("-" if k == "ttft_ms" and not m[k] else f"{m[k]:.1f}" if k != "load_s" else f"{m[k]:.3f}" for k, _ in cols) + " |")
print("\nratios (tern / peer)")
for tern, peers in (("tern fp32", ("ORT fp32", "llama.cpp F32")), ("tern fp32 pack", ("ORT fp32",)), ("tern fp16", ("llama.cpp F16",)),
                    ("tern bf16", ("ORT fp32", "llama.cpp F16")),
                    ("tern int4", ("ORT int4", "llama.cpp Q4_0")), ("tern int4 pack", ("ORT int4",))):
    for p in peers:
        if tern not in med or p not in med:
            continue
        t = med[tern]
        print(f"{tern} / {p}: " + ", ".join(f"{k} {t[k] / med[p][k]:.2f}" for k, _ in cols if med[p][k] > 0 and t[k] > 0))
        # the same ratios round by round (rounds alternate the engines, so round i pairs runs minutes apart)
        pairs = list(zip(runs[tern], runs[p]))
        if len(pairs) > 1:
            print("    per round: " + ", ".join(k + " " + " / ".join(f"{a[k] / b[k]:.2f}" for a, b in pairs)
                                            for k, _ in cols if all(a[k] > 0 and b[k] > 0 for a, b in pairs)))
PY
