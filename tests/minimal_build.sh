#!/usr/bin/env bash
# The embedded variant (-DTERN_MINIMAL=ON -DTERN_STATIC=ON) against a full build of the same tree: one static
# file under 3 MiB stripped (x86-64-v2: 3 MiB + 220 KiB), the same text from every test model, the same answer
# to every hostile ONNX file (its loader runs over protobuf-lite classes), and a clear message for the commands
# it leaves out.
# Usage: minimal_build.sh MINIMAL_TERN FULL_TERN SHARED_DIR WORK_DIR [RUNNER...]  (RUNNER: qemu-aarch64 for a
# cross build, `qemu-x86_64 -cpu Westmere` for an x86-64-v2 one; the full build is then the host's, and the
# texts must still match byte for byte)
set -euo pipefail
min=$1 full=$2 shared=$3 work=$4 runner=${*:5}
cross=""; [ "${5:-}" = qemu-aarch64 ] && cross=aarch64-linux-gnu-
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
run_min() { ${runner:+$runner} "$min" "$@"; }

if readelf -l "$min" | grep >/dev/null INTERP; then echo "$min is dynamically linked"; exit 1; fi
${cross}strip -o "$work/tern" "$min"
size=$(stat -c %s "$work/tern")
echo "minimal static CLI: $size bytes stripped ($(awk "BEGIN{printf \"%.2f\", $size/1048576}") MiB)"
# Under 3 MiB; an x86-64-v2 build's SSE code is larger (each 256-bit step two 128-bit ones) and it holds the float
# kernels twice (x86/float_avx2/: 3,230,152 bytes against the x86-64-v3 build's 3,144,104): 3 MiB + 128 KiB, and
# 16 KiB more since tokenizers lowercase all of Unicode (not ASCII alone: 2.9 KB of case runs), when the x86-64-v2
# build stood at 3,271,112 bytes, 5.7 KB under; 3,279,304 after (with the encoders' tokenizer pieces left out);
# 3,291,592 with 2-bit MatMulNBits decode rows and g_idx (1.6 KB under); 3,295,688 (one 4 KiB page more) with the
# memory cap's predictions — a load's repacking peak, a generation's KV cache — which a small device needs most: +4 KiB;
# 3,303,880 (two pages more) with what onnxruntime parity put in the loader and session every program runs (declared
# output dims, dim and initializer overrides, model metadata, InvalidInputError, Tokenizer::piece_id; `nm` shows
# none of the C API's chat completion or the OpenAI layer in the CLI): +8 KiB; 3,312,072 (two pages more) with beam
# search on the ring cache (a beam a ring row, where beams needed the graph's own cache before: SmolLM2-135M's 4 beams
# peak at 165 MB RSS instead of 337, bench/README) and min_new_tokens: +8 KiB; 3,332,552 (five pages more) with the
# activations' forecast — every run refused on its predicted activations before its first node, a generation on its
# runs' with its KV cache, exact to the byte on the ring — and the symbolic dim products it sizes values with, which a
# small device needs most (a process killed for memory instead of a refusal): +20 KiB; 3,353,032 (five pages more)
# with fused q|k|v and gate|up packed from their parts (no concatenated copy at load: the 1B shape's int4 load peak
# 66 MB lower) and 4-bit blocks of 16 grouped for decode (2.0x a row), 2-bit grouping left out of this build (its
# kernels were 33 KB more: 2-bit weights decode as stored here): +20 KiB; 3,365,320 (three pages more) with the files
# people download — an onnx-community repository's onnx/ variants by --dtype (resolve_model: 5.6 KB), float16 graphs'
# float32 cache I/O made float16 for the ring (1.5 KB), float16 conversions by F16C where the CPU has it (an
# x86-64-v2 build had converted one element at a time: the fp16 prefill's products 310 -> 172 ms); the 8-bit and bnb4
# ops and their fusion stay out of this build: +16 KiB. 3,369,416 (one page more, within it) with merged decoders'
# If inlined at load (passes/inline_branches.cpp; If, Loop and Scan themselves stay out); 3,373,512 (one page more)
# with a batch right-padded where GroupQueryAttention keeps its own cache (the genai builder's exports at --window 0
# gave a shorter prompt wrong tokens) and Reshapes to their input's own shape bypassed (transformers 5's dynamo
# exports of GPT-NeoX, Phi-2, Phi-3 and StableLM back on the ring): +4 KiB. 3,652,712 with chat prompts from the model's
# own Jinja chat template (tern chat is in this build; `nm -S`: 87,024 bytes of llm::jinja, 11,055 of ChatTemplate, and
# the ordered JSON a template's tools keep their key order in) and every command's declared flags — the tables, their
# help and defaults, the parser that refuses unknown flags naming the closest (63,578 bytes of tern::cli, the full
# commands' tables left out of this build): +288 KiB (the x86-64-v2 limit 3.5 MiB; the others 3.28 MiB). 3,685,736
# (four pages more) with weights files that change under their mapping caught — the SIGBUS guard and its checks after
# every run (a served model.onnx truncated had ended the process, exit 135) — the prompt fed in chunks of 512 by
# default and the caps' messages naming it, --max-memory on run and inspect: +16 KiB. 3,669,320 with the ISA tiers'
# kernel tables (kernels/cpu/kernel_table.h) — which leave out the entries of the ops this build leaves out
# (MatMulInteger's dots, MatMulBnb4's rows): a table entry keeps its kernel past --gc-sections (3,738,952 with them).
# 3,722,728 (nine pages more) with the q8_0 / q4_0 ring — its attention for two more storage types at each width,
# the quantizer: a ring in 0.27x / 0.14x of fp32's memory, for the machines this build is for: +40 KiB. 3,739,272
# (three pages more) with --draft-model (llm/draft_model.cpp, its rows batched in continuous batching, the CLI's loading
# of a second model): a small board's decode is bound by its memory's rate, where drafts checked a run at a time pay
# most: +16 KiB. 3,747,464 (two pages more) with a speculative check's rows attending at once (attend_rows: the rows'
# keys rotated once, 1.40x -> 1.81x on SmolLM2's copying prompt with the 8-bit GEMV grouped) and the q4_0 ring's keys
# balanced against its first run's queries (calibrate_keys: Gemma-3-270M +8.9% -> +5.7% perplexity): +8 KiB.
# 3,759,752 (three pages more) with a quantized ring's newest tokens kept exact beside its blocks and read so by both
# attention kernels (KvRingBuffer::exact_from: Gemma-3-270M's q4_0 ring +8.0% -> +0.41% perplexity): +12 KiB.
max=$((3145728 + 389120)); run_min --version | grep >/dev/null "tiers built: sse42 " && max=$((max + 229376))
[ "$size" -lt "$max" ] || { echo "over $max bytes"; exit 1; }

same() {  # same() NAME ARGS... [-- MINIMAL_ARGS...]: both builds print the same text
  local name=$1 args=() margs=(); shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
  [ $# -gt 0 ] && shift && margs=("$@") || margs=("${args[@]}")
  "$full" "${args[@]}" > "$work/$name.full" 2> /dev/null
  run_min "${margs[@]}" > "$work/$name.min" 2> /dev/null
  cmp "$work/$name.full" "$work/$name.min" || { echo "$name differs"; diff "$work/$name.full" "$work/$name.min" | head; exit 1; }
  echo "same text: $name"
}
same default generate --model "$here/../models/default" --prompt "And God said" --max-new-tokens 48 --greedy
# A prompt of 79 tokens: prefill on the GEMM's tiles (its edges too), not the GEMV of up to 16 rows.
long="Once upon a time there was a little girl named Lily who lived in a small house near the big forest with her"
long+=" mother and her father and her dog. Every day she went out to play in the garden and look at the flowers and the birds"
same default-long-prompt generate --model "$here/../models/default" --prompt "$long" --max-new-tokens 8 --greedy
run_min pack "$here/../models/default" "$work/packed" --weights int4 > /dev/null
same default-int4-pack generate --model "$here/../models/default" --weights int4 --prompt "And God said" --max-new-tokens 24 --greedy \
  -- generate --model "$work/packed" --prompt "And God said" --max-new-tokens 24 --greedy
if [ -f "$shared/models/stories260K/stories260K.bin" ]; then
  s=$shared/models/stories260K
  "$full" convert llama2c "$s/stories260K.bin" --tokenizer "$s/tok512.bin" --out "$work/stories" > /dev/null
  run_min generate --model "$work/stories" --prompt Zoo --max-new-tokens 57 > "$work/zoo.txt" 2> /dev/null
  printf '%s' "$(cat "$work/zoo.txt")" | cmp - "$s/expected_greedy_prompt_Zoo_n60.txt"
  echo "stories260K: llama2.c's own text"
  g=$shared/models/ort-genai
  same llama-fp16 generate --model "$g/tiny-random-LlamaForCausalLM-fp16" --ids "1,450,4996,17354" --max-new-tokens 16
  same gpt2 generate --model "$g/tiny-random-gpt2-fp32" --ids "98,464,207,758,218" --max-new-tokens 16
else
  echo "skipped the shared models: $shared/models not found (shared data lives at ../shared)"
fi

# The C API from the minimal static library: a fully static C program prints what the CLI prints.
"${cross}gcc" -std=c99 -I"$here/../include" "$here/../examples/c/generate.c" "$(dirname "$min")/libtern.a" -static \
  -lprotobuf-lite -lstdc++ -lm -lpthread -o "$work/generate" 2> "$work/cc.txt" || { cat "$work/cc.txt"; exit 1; }
${runner:+$runner} "$work/generate" "$here/../models/default" "And God said" 48 > "$work/c.txt" 2> /dev/null
"$full" generate --model "$here/../models/default" --prompt "And God said" --max-new-tokens 48 > "$work/cli.txt" 2> /dev/null
cmp "$work/c.txt" "$work/cli.txt" || { printf 'C:   %s\nCLI: %s\n' "$(cat "$work/c.txt")" "$(cat "$work/cli.txt")"; exit 1; }
echo "a static C program over libtern.a generates the CLI's text"

# Hostile ONNX files: what the loader says (inspect loads, it builds no session) is what the full build says.
n=0
for f in "$here"/bad_inputs/onnx_model/*.onnx; do
  a=0 b=0
  "$full" inspect "$f" > "$work/bad.full" 2>&1 || a=$?
  run_min inspect "$f" > "$work/bad.min" 2>&1 || b=$?
  # (a file over an op this build leaves out — transformers.js's 8-bit and bnb4 ops, ops/register_all.h — is named
  # "not supported" here: the rest of its answer is not the minimal build's to give)
  if grep -q "(not supported)" "$work/bad.min" && ! grep -q "(not supported)" "$work/bad.full"; then continue; fi
  [ "$a" = "$b" ] && cmp -s "$work/bad.full" "$work/bad.min" || { echo "$(basename "$f"): exit $a vs $b"; diff "$work/bad.full" "$work/bad.min" | head -4; exit 1; }
  n=$((n + 1))
done
echo "hostile ONNX files: the same $n answers as the full build"

if run_min profile --model x 2> "$work/err.txt"; then exit 1; fi
grep -q "'profile' is not in this build (TERN_MINIMAL)" "$work/err.txt"
if run_min bench --machine 2> "$work/err.txt"; then exit 1; fi
grep -q "this build (TERN_MINIMAL) has no profile or bench-op" "$work/err.txt"
echo "left-out commands say so"
