#!/usr/bin/env bash
# A model folder whose files point outside it (genai_config.json's decoder by '..', config.json and tokenizer.json
# as symlinks to files elsewhere) is refused — and, traced with strace, tern never opens a file outside it.
# Usage: cli_confinement.sh TERN_BINARY REPO_DIR WORK_DIR   (skips with a message without strace)
set -euo pipefail
tern=$1 repo=$2 work=$3
command -v strace > /dev/null || { echo "confinement: strace not installed (scripts/setup.sh --ci installs it): skipped"; exit 0; }
rm -rf "$work" && mkdir -p "$work/model" "$work/outside"
cp "$repo"/models/default/{model.onnx,tokenizer.json,tokenizer_config.json} "$work/outside/"
cp "$repo"/models/default/config.json "$work/outside/secret.json"
check() {  # NAME EXPECTED-ERROR: tern generate fails with it and opens nothing under outside/
  if strace -f -qq -e trace=open,openat -o "$work/trace" "$tern" generate --model "$work/model" --prompt hi --max-new-tokens 2 \
       2> "$work/err"; then echo "confinement: $1 loaded"; exit 1; fi
  grep -q "$2" "$work/err" || { echo "confinement: $1: $(cat "$work/err")"; exit 1; }
  if grep -v ENOENT "$work/trace" | grep >/dev/null "$work/outside"; then echo "confinement: $1 opened:"; grep "$work/outside" "$work/trace"; exit 1; fi
  echo "confinement: $1 refused ($(tail -1 "$work/err" | cut -c1-120)), nothing outside opened"
}
printf '{"model": {"decoder": {"filename": "../outside/model.onnx"}}}' > "$work/model/genai_config.json"
check "genai_config.json's decoder '../outside/model.onnx'" "leaves the model folder"
rm "$work/model/genai_config.json"
cp "$repo"/models/default/model.onnx "$work/model/"
ln -s "$work/outside/secret.json" "$work/model/config.json"
check "config.json linked outside" "resolves outside the model folder"
rm "$work/model/config.json" && cp "$repo"/models/default/config.json "$work/model/"
ln -s "$work/outside/tokenizer.json" "$work/model/tokenizer.json"
check "tokenizer.json linked outside" "resolves outside the model folder"
