#!/usr/bin/env bash
# The CLI as a user types it: convert llama2.c stories260K, then generate its reference text; --json
# on a model whose output is not valid UTF-8.
# Usage: cli_generate.sh TERN_BINARY SHARED_DIR WORK_DIR
set -euo pipefail
tern=$1 shared=$2/models/stories260K work=$3
if [ ! -f "$shared/stories260K.bin" ]; then
  echo "skipped: $shared not found (shared data lives at ../shared)"
  exit 0
fi
rm -rf "$work" && mkdir -p "$work"
"$tern" convert llama2c "$shared/stories260K.bin" --tokenizer "$shared/tok512.bin" --out "$work/model"
"$tern" generate --model "$work/model" --prompt Zoo --max-new-tokens 57 > "$work/zoo.txt"
printf '%s' "$(cat "$work/zoo.txt")" | cmp - "$shared/expected_greedy_prompt_Zoo_n60.txt"
# --speculate: llama2.c's text again, several tokens a run (--stats says how many drafts were accepted).
"$tern" generate --model "$work/model" --prompt "" --max-new-tokens 200 --speculate ngram:4 --stats > "$work/spec-text.txt" 2> "$work/spec.txt"
printf '%s' "$(cat "$work/spec-text.txt")" | cmp - "$shared/expected_greedy_empty_prompt_n200.txt"
grep -qE "^speculation: [1-9][0-9]* of [0-9]+ drafted tokens accepted" "$work/spec.txt"
echo "--speculate: llama2.c's greedy text"
# --stop: the text ends with the token that completes the stop string (a prefix of the full text).
"$tern" generate --model "$work/model" --prompt Zoo --max-new-tokens 57 --stop "red ball" > "$work/zoo-stop.txt"
stopped=$(cat "$work/zoo-stop.txt")
[[ "$(cat "$shared/expected_greedy_prompt_Zoo_n60.txt")" == "$stopped"* ]] && [[ "$stopped" == *"red ball" ]] || {
  echo "--stop: got '$stopped'"; exit 1; }
# tern pack: the same text from a packed copy (int4 weights chosen at pack time), the original untouched.
"$tern" pack "$work/model" "$work/packed" --weights int4 > "$work/pack.txt"
[ -f "$work/packed/model.tern-pack" ] && [ ! -e "$work/model/model.tern-pack" ]
"$tern" generate --model "$work/packed" --prompt Zoo --max-new-tokens 20 > "$work/zoo-pack.txt"
"$tern" generate --model "$work/packed" --prompt Zoo --max-new-tokens 20 --no-pack --weights int4 > "$work/zoo-int4.txt"
cmp "$work/zoo-pack.txt" "$work/zoo-int4.txt"
# --draft-model: the packed int4 copy drafts for the fp32 model — llama2.c's text again; another vocabulary is refused.
"$tern" generate --model "$work/model" --prompt "" --max-new-tokens 200 --draft-model "$work/packed" --stats > "$work/draft-text.txt" 2> "$work/draft.txt"
printf '%s' "$(cat "$work/draft-text.txt")" | cmp - "$shared/expected_greedy_empty_prompt_n200.txt"
grep -qE "^speculation: [1-9][0-9]* of [0-9]+ drafted tokens accepted" "$work/draft.txt"
default_model="$(cd "$(dirname "$0")/.." && pwd)/models/default"
if "$tern" generate --model "$work/model" --prompt Zoo --draft-model "$default_model" > /dev/null 2> "$work/err.txt"; then exit 1; fi
grep -qF "its tokenizer has 1024 tokens, the model's ('$work/model') 512: a draft must share the model's vocabulary" "$work/err.txt"
if "$tern" generate --model "$work/model" --prompt Zoo --draft-model "$work/packed" --speculate ngram > /dev/null 2> "$work/err.txt"; then exit 1; fi
grep -qF "a --draft-model is given: its drafts are --speculate draft[:N]" "$work/err.txt"
echo "--draft-model: llama2.c's greedy text from the int4 copy's drafts"
if "$tern" generate --model "$work/packed" --prompt Zoo --weights fp16 2> "$work/err.txt"; then exit 1; fi
grep -q "holds weights prepared as int4" "$work/err.txt"
if "$tern" pack "$work/model" "$work/model/inner" 2> "$work/err.txt"; then exit 1; fi
grep -q "is inside MODEL_DIR" "$work/err.txt"
echo "tern pack: a packed int4 copy generates what --weights int4 does"
# tern eval scores decode's int8 activations on every position: not the fp32 score (the prefill's GEMM kept the
# activations fp32, or bf16 on AMX, whatever --activations said).
story=$(dirname "$0")/fixtures/story.txt
nll() { "$tern" eval --model "$work/model" --text "$story" --weights int4 --activations "$1" --quiet | sed -n 's/.*mean NLL \([0-9.]*\) nats.*/\1/p'; }
int8=$(nll int8) fp32=$(nll fp32)
[ -n "$int8" ] && [ -n "$fp32" ] && [ "$int8" != "$fp32" ] || { echo "tern eval: int8 '$int8', fp32 '$fp32'"; exit 1; }
echo "tern eval: int8 activations scored ($int8 nats against fp32's $fp32)"
# Without a tokenizer, --prompt says what is missing and --ids still works.
rm "$work/model/tokenizer.bin"
if "$tern" generate --model "$work/model" --prompt Zoo 2> "$work/err.txt"; then exit 1; fi
grep -q -- "--ids" "$work/err.txt"
"$tern" generate --model "$work/model" --ids "1,410,469,347;1,403" --max-new-tokens 3 > "$work/ids.txt"
[ "$(wc -l < "$work/ids.txt")" -eq 2 ]
echo "stories260K CLI: conversion and generation match llama2.c"
# Random weights emit stray byte tokens: --json must still print valid JSON.
gpt2=$2/models/ort-genai/tiny-random-gpt2-fp32
"$tern" generate --model "$gpt2" --ids "98,464,207,758,218;98,116,318" --max-new-tokens 32 --json > "$work/gpt2.json"
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert len(j['tokens']) == 2" "$work/gpt2.json"
echo "--json output is valid JSON"
# --top-logits: per sequence, per step, N (token, logit) pairs, highest first, the first the greedy token.
"$tern" generate --model "$gpt2" --ids "98,464,207;98,116" --max-new-tokens 4 --greedy --json --top-logits 3 > "$work/top.json"
python3 - "$work/top.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for seq, steps in zip(j["tokens"], j["top_logits"]):
    assert len(steps) == 4, steps
    for k, step in enumerate(steps):
        assert len(step) == 3 and step[0][1] >= step[1][1] >= step[2][1], step
        assert step[0][0] == seq[len(seq) - 4 + k], (step, seq)
PY
if "$tern" generate --model "$gpt2" --ids "98" --top-logits 3 2> "$work/err.txt"; then exit 1; fi
grep -q -- "--top-logits needs --json" "$work/err.txt"
echo "--top-logits lists each step's best logits"
# Malformed flags fail naming the flag and the range, before anything is printed.
while IFS='|' read -r flags message; do
  # shellcheck disable=SC2086  # the flags split into words on purpose
  if "$tern" generate --model "$gpt2" --ids "98,464" $flags > "$work/out.txt" 2> "$work/err.txt"; then exit 1; fi
  grep -qF -- "$message" "$work/err.txt" || { echo "$flags: got $(cat "$work/err.txt"), want $message"; exit 1; }
  [ ! -s "$work/out.txt" ]
done <<'CASES'
--max-new-tokens 12abc|--max-new-tokens: '12abc' is not an integer
--max-new-tokens 99999999999999999999|is not an integer
--max-new-tokens -1|--max-new-tokens -1: must not be negative
--threads 0|--threads 0: must be at least 1
--top-p 5|--top-p 5: must be in (0, 1]
--temperature nan|--temperature nan: must be a finite number >= 0
--ids 98,x1|--ids: 'x1' is not an integer
--device opencl:99999999999|device 'opencl:99999999999': use cpu, opencl or opencl:N
--speculate ngram:99|--speculate 'ngram:99': N must be a number of drafts from 1 to 16
--speculate lookahead|--speculate 'lookahead': expected ngram, draft, ngram:N or draft:N
--speculate draft:2|draft needs --draft-model DIR
--speculate ngram --window 0|--speculate needs the ring-buffer KV cache
CASES
echo "malformed flags are named"

# An onnx-community repository (configs at the root, variants in onnx/): the default variant and --dtype, said on
# stderr; inspect lists the variants; a dtype the repository lacks names those it has.
fixtures="$(cd "$(dirname "$0")" && pwd)/fixtures/exports" repo="$work/repo"
mkdir -p "$repo/onnx"
cp "$fixtures"/llama-optimum/{config.json,generation_config.json,tokenizer.json} "$repo/"
cp "$fixtures/llama-optimum/model.onnx" "$repo/onnx/model.onnx"
cp "$fixtures/llama-tjs-q8/model.onnx" "$repo/onnx/model_quantized.onnx"
cp "$fixtures/llama-ort-int4/model.onnx" "$repo/onnx/model_q4.onnx"
"$tern" generate --model "$repo" --ids 1,17,200 --max-new-tokens 2 --greedy 2> "$work/err.txt" > /dev/null
grep -q "onnx/model_q4.onnx (--dtype q4, the default; also here: fp32, q8)" "$work/err.txt"
"$tern" generate --model "$repo" --dtype q8 --ids 1,17,200 --max-new-tokens 2 --greedy 2> "$work/err.txt" > /dev/null
grep -q "onnx/model_quantized.onnx (--dtype q8; also here: q4, fp32)" "$work/err.txt"
"$tern" inspect "$repo" 2> /dev/null | grep >/dev/null "^  q8 .* MB  .*onnx/model_quantized.onnx"
if "$tern" generate --model "$repo" --dtype fp16 --max-new-tokens 1 2> "$work/err.txt"; then exit 1; fi
grep -q "has no fp16 variant; it has q4, fp32, q8" "$work/err.txt"
echo "a repository's variants by --dtype"
