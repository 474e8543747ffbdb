#!/usr/bin/env bash
# Goldens from llama.cpp itself: for each line of PROMPTS, the prompt's token ids and the N tokens
# llama.cpp's greedy decoding continues it with, on the GGUF's own weights — read from llama-cli's
# verbose log ("eval: [ 'text':id … ]" lines: the prompt in one batch, then one generated token each).
# Writes one line per prompt: prompt ids | generated ids. llama.cpp is built outside the repo
# (bench/vs_llama_cpp.sh says how); tests/test_gguf.cpp checks tern's greedy tokens against these.
# Usage: tools/llama_cpp_greedy.sh LLAMA_CLI MODEL.gguf PROMPTS.txt N OUT.txt
set -euo pipefail
cli=$1 gguf=$2 prompts=$3 n=$4 out=$5
: > "$out"
while IFS= read -r prompt || [ -n "$prompt" ]; do
  # n + 1: the last token llama-cli samples is never evaluated, so never logged.
  "$cli" -m "$gguf" -p "$prompt" -n $((n + 1)) -t 2 --temp 0 -no-cnv --no-display-prompt -v < /dev/null 2>&1 \
    | /usr/bin/python3 -c '
import re, sys
evals = [re.findall(r"'"'"':(\d+)", m) for m in re.findall(r"eval: \[(.*?)\]", sys.stdin.read())]
print(" ".join(evals[0]), "|", " ".join(t for e in evals[1:] for t in e))' >> "$out"
done < "$prompts"
echo "wrote $out: $(wc -l < "$out") prompts"
