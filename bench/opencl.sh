#!/usr/bin/env bash
# tern on an OpenCL device against tern on the CPU, same random-weight Llama-shaped model (tools/make_bench_gguf.py
# → `tern import-gguf`), fp32 and --weights int4: prefill tok/s of a PROMPT-token prompt, decode tok/s of NEW tokens
# after it, the weight bytes a decode token reads per second, and the bytes crossing host↔device per token.
# Medians over ROUNDS alternated rounds (device, CPU, device, CPU, …).
#
#   bench/opencl.sh WORK_DIR [DEVICE=opencl] [THREADS=nproc] [ROUNDS=2]
#   env: TERN=./build/tern  SHAPE=1b|135m|tiny (135m)  PROMPT=128  NEW=64
#
# A container whose OpenCL driver is mounted but not registered with the ICD loader (NVIDIA's images: no
# /etc/OpenCL/vendors/nvidia.icd) needs it named first, e.g.
#   mkdir -p /tmp/icd && echo /usr/lib/libnvidia-opencl.so.1 > /tmp/icd/nvidia.icd && export OCL_ICD_VENDORS=/tmp/icd
# WORK_DIR keeps the model between runs. The model maker needs numpy and gguf (bench/requirements.txt), in the venv
# bench/peers.sh makes ($TERN_PEERS_VENV, default ~/.cache/tern/peers-venv), made here when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$1 device=${2:-opencl} threads=${3:-$(nproc)} rounds=${4:-2}
shape=${SHAPE:-135m} prompt=${PROMPT:-128} new=${NEW:-64}
tern=${TERN:-./build/tern}
venv=${TERN_PEERS_VENV:-$HOME/.cache/tern/peers-venv}
[ -x "$venv/bin/python" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q -r bench/requirements.txt; }
mkdir -p "$work"
model=$work/onnx-f32
if [ ! -f "$model/model.onnx" ]; then  # each step named as it starts: a run cut short shows where it was
  echo "making the $shape model ($(date -u +%T))"
  "$venv/bin/python" tools/make_bench_gguf.py --shape "$shape" --out "$work/f32.gguf" > /dev/null
  echo "importing it ($(date -u +%T))"
  "$tern" import-gguf "$work/f32.gguf" "$model" > /dev/null
  rm -f "$work/f32.gguf"
fi
"$tern" devices
echo "shape $shape   prompt $prompt   new $new   threads $threads   ($(date -u +%F), $(nproc) cores,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2))"

rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
for ((r = 0; r < rounds; ++r)); do
  for weights in fp32 int4; do
    for dev in "$device" cpu; do
      echo "round $((r + 1)): $weights on $dev ($(date -u +%T))"
      "$tern" bench --model "$model" --weights "$weights" --device "$dev" --threads "$threads" --prompt-tokens "$prompt" \
        --new-tokens "$new" --json | "$venv/bin/python" -c "import json, sys; d = json.load(sys.stdin); d['row'] = sys.argv[1]; print(json.dumps(d))" "$weights $dev" >> "$rows"
    done
  done
done
"$venv/bin/python" - "$rows" <<'EOF'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    runs.setdefault(d["row"], []).append(d)
cols = [("prefill_tok_s", "prefill tok/s"), ("decode_tok_s", "decode tok/s"), ("achieved_gb_s", "weights GB/s"),
        ("host_to_device_bytes_per_token", "bytes to device / token")]
print(f"\nmedians of {len(next(iter(runs.values())))} round(s)\n| weights, device | " + " | ".join(h for _, h in cols) + " |")
print("| --- |" + " --- |" * len(cols))
for name, rs in runs.items():
    cells = [f"{statistics.median(r.get(k, 0) for r in rs):.1f}" if any(k in r for r in rs) else "" for k, _ in cols]
    print(f"| {name} | " + " | ".join(cells) + " |")
EOF
