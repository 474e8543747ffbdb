#!/usr/bin/env bash
# tern and llama.cpp on the same GGUF weights and threads: tern runs the folder `tern import-gguf` made of
# the file (scripts/get-models.sh for SmolLM2-135M-Instruct and Gemma-3-270M), llama.cpp the file itself.
# Alternates the two ROUNDS times and prints each round and the medians: prefill tok/s of 128 tokens (tern
# bench's synthetic prompt; llama-bench pp128), decode tok/s of 64 tokens from an empty context (llama-bench
# tg64's definition; tern bench after a 1-token prompt) and after 128 prompt tokens (tern bench; llama-bench
# -d 128), and peak RSS and load+generate wall time of one 64-token greedy generation (/usr/bin/time;
# llama-completion). A peer that fails stops the script with its own error.
#   bench/vs_llama_cpp.sh LLAMA_CPP_BUILD_BIN MODEL.gguf TERN_MODEL_DIR [THREADS=2] [ROUNDS=3]
# llama.cpp is built outside the repo from a checkout (`fetch` it, or the vendor/llama.cpp of PyPI's
# llama-cpp-python sdist when the snapshot is too large to fetch), e.g.:
#   cmake -S llama.cpp -B llama.cpp/build -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DGGML_NATIVE=ON
#   cmake --build llama.cpp/build -j2 --target llama-bench llama-completion llama-tokenize llama-perplexity
# (on a VM whose CPU flags claim AMX it cannot run, GGML_NATIVE=OFF with -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON
# -DGGML_AVX512_BF16=ON -DGGML_AMX_TILE=OFF …: the native build stopped with "Illegal instruction" here.)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$1 gguf=$2 dir=$3 threads=${4:-2} rounds=${5:-3}
prompt="Once upon a time"
echo "gguf: $gguf   tern folder: $dir   threads: $threads   ($(date -u +%F), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2))"
rows=()
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq 1 "$rounds"); do
  # A peer that fails says why: its stderr is kept and shown.
  l=$("$bin/llama-bench" -m "$gguf" -t "$threads" -p 128 -n 64 -r 3 -o json 2> "$tmp/err") || { cat "$tmp/err" >&2; exit 1; }
  l128=$("$bin/llama-bench" -m "$gguf" -t "$threads" -p 0 -n 64 -d 128 -r 3 -o json 2> "$tmp/err") || { cat "$tmp/err" >&2; exit 1; }
  t=$(./build/tern bench --model "$dir" --prompt-tokens 128 --new-tokens 64 --threads "$threads" --json)
  t0=$(./build/tern bench --model "$dir" --prompt-tokens 1 --new-tokens 64 --threads "$threads" --json)
  /usr/bin/time -o "$tmp/llama" -f "%M %e" "$bin/llama-completion" -m "$gguf" -p "$prompt" -n 64 -t "$threads" --temp 0 -no-cnv \
    < /dev/null > /dev/null 2> "$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
  /usr/bin/time -o "$tmp/tern" -f "%M %e" ./build/tern generate --model "$dir" --prompt "$prompt" --max-new-tokens 64 --greedy \
    --threads "$threads" > /dev/null 2>&1
  lr=$(tail -1 "$tmp/llama") tr_=$(tail -1 "$tmp/tern")
  rows+=("$(/usr/bin/python3 - "$l" "$t" "$t0" "$lr" "$tr_" "$l128" <<'PY'
import json, sys
l, t, t0, l128 = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[6])
pp = next(x["avg_ts"] for x in l if x["n_prompt"] > 0 and x["n_gen"] == 0)
tg = next(x["avg_ts"] for x in l if x["n_gen"] > 0 and x["n_prompt"] == 0)
tg_at_128 = next(x["avg_ts"] for x in l128 if x["n_gen"] > 0)  # 64 tokens after a depth of 128 (llama-bench -d)
lr, tr = sys.argv[4].split(), sys.argv[5].split()
print(json.dumps({"llama_pp": pp, "llama_tg": tg, "llama_tg128": tg_at_128, "tern_pp": t["prefill_tok_s"],
                  "tern_tg": t0["decode_tok_s"], "tern_tg128": t["decode_tok_s"],
                  "llama_rss_mb": int(lr[0]) / 1024, "tern_rss_mb": int(tr[0]) / 1024,
                  "llama_wall_s": float(lr[1]), "tern_wall_s": float(tr[1])}))
PY
)")
  echo "round $r: ${rows[-1]}"
done
/usr/bin/python3 - "${rows[@]}" <<'PY'
import json, statistics, sys
rows = [json.loads(a) for a in sys.argv[1:]]
med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
print(f"{'median':10}{'prefill tok/s':>15}{'decode tok/s':>14}{'decode @128':>13}{'peak RSS MB':>13}{'64-token run s':>16}")
for who in ("tern", "llama"):
    print(f"{'llama.cpp' if who == 'llama' else who:10}{med[who + '_pp']:15.1f}{med[who + '_tg']:14.1f}{med[who + '_tg128']:13.1f}"
          f"{med[who + '_rss_mb']:13.0f}{med[who + '_wall_s']:16.2f}")
print(f"{'tern/llama':10}" + "".join(f"{med['tern_' + k] / med['llama_' + k]:{w}.2f}" for k, w in
      (("pp", 15), ("tg", 14), ("tg128", 13), ("rss_mb", 13), ("wall_s", 16))))
PY
