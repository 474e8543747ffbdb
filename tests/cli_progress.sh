#!/usr/bin/env bash
# Progress bars: drawn on a terminal (script(1) gives the command a pseudo-terminal), absent when stderr is a
# pipe or with --quiet — for an import (tern import-gguf), a quantization and a load (generate).
#   cli_progress.sh TERN_CLI SOURCE_DIR WORK_DIR
set -euo pipefail
tern=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
gguf=$src/tests/fixtures/gguf_arch/llama/model.gguf
on_tty() { script -qec "$1" /dev/null < /dev/null | tr '\r' '\n'; }
on_tty "$tern import-gguf $gguf $work/imported" > "$work/import.txt"
grep -Eq "^importing \[#+ *\] +[0-9]+% [0-9]+/[0-9]+" "$work/import.txt" || { cat "$work/import.txt"; echo "no import bar on a terminal"; exit 1; }
grep -Eq "^importing \[#{30}\] 100% ([0-9]+)/\1$" "$work/import.txt" || { cat "$work/import.txt"; echo "the import bar does not end at 100%"; exit 1; }
on_tty "$tern quantize --model $src/tests/fixtures/llama-gqa-torch --out $work/q4" | grep >/dev/null "^quantizing \[#\{30\}\] 100%" ||
  { echo "no quantize bar"; exit 1; }
on_tty "$tern generate --model $work/imported --ids 72,101 --max-new-tokens 2 --greedy" | grep >/dev/null "^loading \[#\{30\}\] 100%" ||
  { echo "no load bar"; exit 1; }
# Not a terminal, or --quiet: no bar.
"$tern" import-gguf "$gguf" "$work/imported2" 2> "$work/pipe.txt" > /dev/null
! grep -q "importing \[" "$work/pipe.txt" || { echo "a bar on a pipe"; exit 1; }
on_tty "$tern import-gguf $gguf $work/imported3 --quiet" > "$work/quiet.txt"
! grep -q "importing \[" "$work/quiet.txt" || { echo "a bar with --quiet"; exit 1; }
echo "bars on a terminal (import, quantize, load); none on a pipe or with --quiet"
