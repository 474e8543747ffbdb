#!/usr/bin/env bash
# A GGUF file runs in one command: `tern generate --model FILE.gguf` imports it into a cache folder once (and
# says so), later runs read that folder, and the tokens are those of the folder `tern import-gguf` writes. The
# cache is keyed by content: 24 first runs at once all succeed on one import; a same-size replacement with its
# mtime set back is imported again and the old folder goes; an unwritable cache is a message, not a crash.
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

# 24 concurrent first runs of one file: one imports, the others wait for it and reuse its folder.
export XDG_CACHE_HOME=$work/cache24
cp "$gguf" "$work/m.gguf"
pids=()
for i in $(seq 24); do
  "$tern" generate --model "$work/m.gguf" --ids "2,72,101,108" --max-new-tokens 2 --greedy --json > "$work/c$i.json" 2> "$work/c$i.err" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || { echo "a concurrent first run failed:"; cat "$work"/c*.err; exit 1; }; done
[ "$(cat "$work"/c*.err | grep -c "imported ")" = 1 ] || { echo "not exactly one import:"; cat "$work"/c*.err; exit 1; }
[ "$(ls -d "$work"/cache24/tern/gguf/m-* | wc -l)" = 1 ]

# The same size, the mtime set back: still a new file (its ctime and content say so), imported again.
cp -p "$work/m.gguf" "$work/m.orig"
python3 -c "import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[-3] ^= 0x40; open(sys.argv[1], 'wb').write(b)" "$work/m.gguf"
touch -r "$work/m.orig" "$work/m.gguf"
[ "$(stat -c %s "$work/m.gguf")" = "$(stat -c %s "$work/m.orig")" ]
"$tern" generate --model "$work/m.gguf" --ids "2,72,101,108" --max-new-tokens 2 --greedy > /dev/null 2> "$work/replaced.err"
grep -q "imported " "$work/replaced.err" || { echo "a replaced file was not imported again"; exit 1; }
[ "$(ls -d "$work"/cache24/tern/gguf/m-* | wc -l)" = 1 ] || { echo "the old folder stayed"; ls -a "$work"/cache24/tern/gguf; exit 1; }

# A cache that cannot be written: the message names the folder and the way out.
mkdir -p "$work/ro" && touch "$work/ro/tern"
if XDG_CACHE_HOME=$work/ro "$tern" generate --model "$work/m.gguf" --ids 2 --max-new-tokens 1 2> "$work/ro.err"; then exit 1; fi
grep -q "cannot create the GGUF cache folder '$work/ro/tern/gguf/.sources'" "$work/ro.err" || { cat "$work/ro.err"; exit 1; }
echo "generate --model FILE.gguf: imported once, the folder's tokens; 24 first runs at once; a same-size replacement re-imported"
