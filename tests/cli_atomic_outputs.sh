#!/usr/bin/env bash
# import-gguf, convert and quantize write their folder whole or not at all (core/output_files.h StagedFolder).
# - import-gguf over an earlier output, killed (strace injects SIGKILL) at every call of every file-system syscall a
#   clean run makes: the folder is always the earlier output or the new one, byte for byte — never old graph with
#   new weights — and the next run clears what the killed ones left beside it.
# - A disk that fills (ENOSPC injected into a write) is reported as "No space left on device" by import-gguf,
#   convert, quantize and pack (in place, and into an OUT_DIR); the earlier output stays, nothing partial is left.
# Usage: cli_atomic_outputs.sh TERN_BINARY REPO_DIR WORK_DIR   (skips with a message without strace)
set -euo pipefail
tern=$1 repo=$2 work=$3
command -v strace > /dev/null || { echo "atomic outputs: strace not installed (scripts/setup.sh --ci installs it): skipped"; exit 0; }
# LeakSanitizer cannot run under ptrace (strace): in the sanitizer build its leak check is off here (the other
# tests run these commands with it).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
rm -rf "$work" && mkdir -p "$work"
a=$repo/tests/fuzz/corpus/gguf/llama_f32.gguf b=$repo/tests/fuzz/corpus/gguf/llama_q8_0.gguf
digest() { [ -d "$1" ] || { echo absent; return; }; (cd "$1" && find . -type f | sort | xargs sha256sum) | sha256sum | cut -c1-16; }
leftovers() { find "$work" -maxdepth 1 -name '.*tern-tmp*' | wc -l; }
"$tern" import-gguf "$a" "$work/ref-a" > /dev/null
"$tern" import-gguf "$b" "$work/ref-b" > /dev/null
A=$(digest "$work/ref-a") B=$(digest "$work/ref-b")
[ "$A" != "$B" ] || { echo "atomic outputs: the two imports are the same"; exit 1; }

# The calls a clean import over an earlier output makes, and how many of each.
calls=openat,write,fsync,close,rename,renameat2,mkdir,unlink,unlinkat,rmdir
cp -r "$work/ref-a" "$work/out"
strace -qq -o "$work/trace" -e trace=$calls "$tern" import-gguf "$b" "$work/out" > /dev/null
[ "$(digest "$work/out")" = "$B" ] || { echo "atomic outputs: a clean import did not give the new output"; exit 1; }
runs=0 old=0 new=0 left=0
while read -r n call; do
  for k in $(seq 1 "$n"); do
    rm -rf "$work/out" && cp -r "$work/ref-a" "$work/out"
    (strace -qq -o /dev/null -e trace="$call" -e inject="$call":signal=KILL:when="$k" "$tern" import-gguf "$b" "$work/out"; true) \
      > /dev/null 2>&1 || true
    left=$((left + $(leftovers)))
    d=$(digest "$work/out")
    if [ "$d" = "$A" ]; then old=$((old + 1)); elif [ "$d" = "$B" ]; then new=$((new + 1)); else
      echo "atomic outputs: killed at $call #$k of $n, the folder is neither output ($d):"; ls -la "$work/out"; exit 1
    fi
    runs=$((runs + 1))
  done
done < <(grep -v '^<' "$work/trace" | sed -E 's/\(.*//' | sort | uniq -c)
echo "atomic outputs: import-gguf killed at each of $runs syscalls: $old times the earlier output, $new times the new one, never a mix"
"$tern" import-gguf "$b" "$work/out" > /dev/null
[ "$(leftovers)" = 0 ] || { echo "atomic outputs: the temporary folders of killed runs were not cleared:"; ls -a "$work"; exit 1; }
echo "atomic outputs: $left killed runs left a temporary folder beside it; each was cleared by the run after"

# A folder holding anything the new output does not write is not replaced.
echo "mine" > "$work/out/notes.txt"
if "$tern" import-gguf "$a" "$work/out" > /dev/null 2> "$work/err"; then echo "atomic outputs: a folder with notes.txt was replaced"; exit 1; fi
grep -q "holds 'notes.txt', which the new output does not: not replaced" "$work/err" && [ -f "$work/out/notes.txt" ] ||
  { echo "atomic outputs: over a folder with notes.txt: $(cat "$work/err")"; exit 1; }
rm "$work/out/notes.txt"

# A full disk, at the first write into the output's weights and at the first into its graph. Which write that is
# (counting all of the process's, the sanitizer runtime's too) is read off a traced run of the same command into
# another folder.
write_ordinal() {  # PATTERN COMMAND...: the ordinal of the first write(2) to a file whose path matches PATTERN
  local pattern=$1; shift
  strace -qq -y -e trace=write -o "$work/wtrace" "$@" > /dev/null 2>&1 || true
  grep '^write(' "$work/wtrace" | grep -n "$pattern" | head -1 | cut -d: -f1
}
enospc() {  # NAME WRITE# COMMAND...: fails with "No space left on device"
  local name=$1 at=$2; shift 2
  [ -n "$at" ] || { echo "atomic outputs: $name: no write to its output found in a traced run"; exit 1; }
  if strace -qq -o /dev/null -e trace=write -e inject=write:error=ENOSPC:when="$at" "$@" > /dev/null 2> "$work/err"; then
    echo "atomic outputs: $name succeeded on a full disk"; exit 1; fi
  grep -q "No space left on device" "$work/err" || { echo "atomic outputs: $name on a full disk said: $(cat "$work/err")"; exit 1; }
  echo "atomic outputs: $name, disk full at write $at: $(tail -1 "$work/err" | cut -c1-150)"
}
rm -rf "$work/out" "$work/probe" && cp -r "$work/ref-a" "$work/out" && cp -r "$work/ref-a" "$work/probe"
weights=$(write_ordinal 'model.onnx.data>' "$tern" import-gguf "$b" "$work/probe")
rm -rf "$work/probe" && cp -r "$work/ref-a" "$work/probe"
graph=$(write_ordinal 'model.onnx>' "$tern" import-gguf "$b" "$work/probe")
for at in "$weights" "$graph"; do
  enospc import-gguf "$at" "$tern" import-gguf "$b" "$work/out"
  [ "$(digest "$work/out")" = "$A" ] || { echo "atomic outputs: import-gguf on a full disk changed the earlier output"; exit 1; }
done
convert=("$tern" convert llama2c "$repo/tests/fuzz/corpus/llama2c_checkpoint/tiny.bin" --tokenizer "$repo/tests/fuzz/corpus/llama2c_tokenizer/ascii.bin" --out)
enospc "convert llama2c" "$(write_ordinal 'model.onnx.data' "${convert[@]}" "$work/probe-converted")" "${convert[@]}" "$work/converted"
[ ! -e "$work/converted" ] || { echo "atomic outputs: convert on a full disk left '$work/converted'"; exit 1; }
quantize=("$tern" quantize --model "$repo/models/default" --out)
enospc quantize "$(write_ordinal 'model.onnx_data' "${quantize[@]}" "$work/probe-quantized")" "${quantize[@]}" "$work/quantized"
[ ! -e "$work/quantized" ] || { echo "atomic outputs: quantize on a full disk left '$work/quantized'"; exit 1; }
cp -r "$work/ref-a" "$work/packed" && cp -r "$work/ref-a" "$work/probe-packed"
enospc pack "$(write_ordinal 'tern-pack.partial' "$tern" pack "$work/probe-packed")" "$tern" pack "$work/packed"
[ -z "$(find "$work/packed" -name '*.tern-pack*')" ] || { echo "atomic outputs: pack on a full disk left a file"; exit 1; }
enospc "pack OUT_DIR" "$(write_ordinal 'tern-pack.partial' "$tern" pack "$work/ref-a" "$work/probe-pack-out")" "$tern" pack "$work/ref-a" "$work/pack-out"
[ ! -e "$work/pack-out" ] || { echo "atomic outputs: pack into OUT_DIR on a full disk left '$work/pack-out'"; exit 1; }
[ "$(leftovers)" = 0 ] || { echo "atomic outputs: a failed run left its temporary folder:"; ls -a "$work"; exit 1; }
echo "atomic outputs: passed"
