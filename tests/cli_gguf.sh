#!/usr/bin/env bash
# A GGUF file runs in one command: `tern generate --model FILE.gguf` imports it into a cache folder once (and
# says so), later runs read that folder, and the tokens are those of the folder `tern import-gguf` writes.
# Usage: cli_gguf.sh TERN_BINARY SOURCE_DIR WORK_DIR
set -euo pipefail
tern=$1 gguf=$2/tests/fixtures/gguf_arch/gemma3/model.gguf work=$3
rm -rf "$work" && mkdir -p "$work"
export XDG_CACHE_HOME=$work/cache
"$tern" generate --model "$gguf" --ids "2,72,101,108" --max-new-tokens 6 --greedy --json > "$work/first.json" 2> "$work/first.err"
grep -q "imported .*model.gguf into $work/cache/tern/gguf/model-" "$work/first.err"
"$tern" generate --model "$gguf" --ids "2,72,101,108" --max-new-tokens 6 --greedy --json > "$work/second.json" 2> "$work/second.err"
if grep -q "imported" "$work/second.err"; then echo "imported twice"; exit 1; fi
"$tern" import-gguf "$gguf" "$work/folder" > /dev/null
"$tern" generate --model "$work/folder" --ids "2,72,101,108" --max-new-tokens 6 --greedy --json > "$work/folder.json" 2> /dev/null
tokens() { grep -o '"tokens":.*' "$1"; }  # (the timings differ)
[ "$(tokens "$work/first.json")" = "$(tokens "$work/second.json")" ]
[ "$(tokens "$work/first.json")" = "$(tokens "$work/folder.json")" ]
echo "generate --model FILE.gguf: imported once, the folder's tokens"
