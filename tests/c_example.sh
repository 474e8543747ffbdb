#!/usr/bin/env bash
# examples/c/generate.c, built as C99 against the library, prints the same text as the CLI (both the model's own sampling).
#   c_example.sh EXAMPLE_BINARY TERN_CLI SOURCE_DIR
set -euo pipefail
example=$1 cli=$2 src=$3
prompt="And God said"
a=$("$example" "$src/models/default" "$prompt" 24 2)
b=$("$cli" generate --model "$src/models/default" --prompt "$prompt" --max-new-tokens 24 --threads 2 2>/dev/null)
echo "C example: $a"
echo "tern CLI:  $b"
[ "$a" = "$b" ] || { echo "the C example and the CLI differ"; exit 1; }
echo "same text"
