#!/usr/bin/env bash
# Goldens from llama.cpp itself: the token ids llama.cpp's tokenizer gives each line of TEXT under the
# GGUF's vocabulary, one line of space-separated ids per text line (no BOS). llama.cpp is built outside
# the repo (bench/README.md says how); tests/test_tokenizer.cpp compares tern with these.
# Usage: tools/llama_cpp_token_ids.sh LLAMA_TOKENIZE MODEL.gguf TEXT.txt OUT.txt [--whole]
# (--whole: the ids of the whole file as one text, on one line)
set -euo pipefail
tokenize=$1 gguf=$2 text=$3 out=$4
if [ "${5:-}" = --whole ]; then
  "$tokenize" -m "$gguf" -f "$text" --ids --no-bos --no-escape --log-disable 2> /dev/null | tail -1 | tr -d '[],' > "$out"
  echo "wrote $out: $(wc -w < "$out") ids"
  exit 0
fi
: > "$out"
while IFS= read -r line || [ -n "$line" ]; do
  printf '%s' "$line" > "${out}.line"
  "$tokenize" -m "$gguf" -f "${out}.line" --ids --no-bos --no-escape --log-disable 2> /dev/null | tail -1 | tr -d '[],' >> "$out"
done < "$text"
rm -f "${out}.line"
echo "wrote $out: $(wc -l < "$out") lines"
