#!/usr/bin/env bash
# The default (x86-64-v2) build on a CPU without AVX: under `qemu-x86_64 -cpu Westmere` (SSE4.2, no AVX at
# all) the CLI chooses tier sse42, the baseline's own kernels, and its greedy text on models/default equals the
# native run's (this machine's tier: the avx2 twins and up) — a short prompt (panel GEMV) and one of 79 tokens
# (the GEMM's tiles, their edges too).
# Usage: cli_without_avx.sh QEMU_X86_64 TERN MODEL
set -euo pipefail
qemu=$1 tern=$2 model=$3
westmere() { env -u TERN_ISA "$qemu" -cpu Westmere "$tern" "$@"; }  # (the native run may be held to a tier: scripts/test.sh's avx2 pass)
westmere --version | grep >/dev/null -E "this CPU runs: (scalar )?sse42" || { echo "under Westmere the CLI does not run tier sse42:"; westmere --version; exit 1; }
long="Once upon a time there was a little girl named Lily who lived in a small house near the big forest with her"
long+=" mother and her father and her dog. Every day she went out to play in the garden and look at the flowers and the birds"
for prompt in "And God said" "$long"; do
  args=(generate --model "$model" --prompt "$prompt" --max-new-tokens 32 --greedy)
  native=$("$tern" "${args[@]}" 2> /dev/null)
  emulated=$(westmere "${args[@]}" 2> /dev/null)
  [ "$native" = "$emulated" ] || { printf 'native:   %s\nWestmere: %s\n' "$native" "$emulated"; exit 1; }
  echo "same text without AVX: ${prompt:0:40}…"
done
