#!/usr/bin/env bash
# `tern chat` as a user types it, under tmux: two turns (the second prefills only its own tokens), /stats,
# Ctrl-C stopping an answer, Ctrl-D quitting. On models/default (a running-text model) always; on
# models/smollm2-135m-instruct (scripts/get-models.sh) when it is there, with a fixed greedy answer.
# Usage: cli_chat.sh TERN_BINARY REPO_DIR WORK_DIR
set -euo pipefail
tern=$1 repo=$2 work=$3
command -v tmux > /dev/null || { echo "skipped: tmux is not installed"; exit 0; }
rm -rf "$work" && mkdir -p "$work"
session=tern-chat-$$
# A tmux server of this test's own (-L): killing the last session stops a server, and a new session asked
# of it while it stops fails with "server exited unexpectedly" (seen once in CI) — so a start is retried.
tm() { tmux -L "$session" "$@"; }
start() {  # COMMAND: a new detached session running it
  for _ in 1 2 3 4 5; do tm new-session -d -s "$session" -x 200 -y 100 "$1" && return 0; sleep 0.5; done
  echo "tmux would not start a session"; exit 1
}
trap 'tm kill-server 2> /dev/null || true' EXIT

# Waits (up to 120 s) until the pane shows `pattern` on at least N (default 1) lines.
wait_for() {
  for _ in $(seq 1 240); do
    tm capture-pane -p -J -S - -t "$session" > "$work/pane.txt"
    [ "$(grep -c -- "$1" "$work/pane.txt")" -ge "${2:-1}" ] && return 0
    sleep 0.5
  done
  echo "timed out waiting for: $1"; cat "$work/pane.txt"; exit 1
}

chat() {  # MODEL FIRST SECOND [MAX_NEW_TOKENS [FLAGS]] → leaves the pane in $work/pane.txt
  start "$tern chat $1 --greedy --max-new-tokens ${4:-24} --threads 2 ${5:-}; echo CHAT-EXITED; sleep 600"
  wait_for "Ctrl-D quits"
  tm send-keys -t "$session" "/stats" Enter
  wait_for "speed after each answer: on"
  tm send-keys -t "$session" "$2" Enter
  wait_for "prefilled .* of .* conversation tokens"
  tm send-keys -t "$session" "$3" Enter
  wait_for "prefilled .* of .* conversation tokens" 2
}

chat "$repo/models/default" "And God said" "Let there be light" 24
# The second turn is fed on top of the first's cache: fewer positions than the conversation has.
second=$(grep -o "prefilled [0-9]* of [0-9]*" "$work/pane.txt" | sed -n 2p)
read -r fed total <<< "$(echo "$second" | awk '{print $2, $4}')"
[ "$fed" -lt "$total" ] || { echo "the second turn was prefilled whole: $second"; exit 1; }
tm send-keys -t "$session" C-d
wait_for "CHAT-EXITED"
tm kill-session -t "$session"
# A draft model (the model itself): /stats counts its drafts on both turns.
chat "$repo/models/default" "And God said" "Let there be light" 24 "--draft-model $repo/models/default"
[ "$(grep -cE "; [0-9]+ of [1-9][0-9]* drafts accepted\]" "$work/pane.txt")" -ge 2 ] || {
  echo "no drafts counted:"; cat "$work/pane.txt"; exit 1; }
tm send-keys -t "$session" C-d
wait_for "CHAT-EXITED"
tm kill-session -t "$session"
# An answer that would run for minutes: Ctrl-C stops it and the conversation goes on.
start "$tern chat $repo/models/default --greedy --max-new-tokens 1000000 --threads 2; echo CHAT-EXITED; sleep 600"
wait_for "Ctrl-D quits"
tm send-keys -t "$session" "And God said" Enter
sleep 1
tm send-keys -t "$session" C-c
wait_for "\[stopped\]"
wait_for "^> " 2
tm send-keys -t "$session" C-d
wait_for "CHAT-EXITED"
tm kill-session -t "$session"
echo "chat: a resumed second turn ($second), drafts counted with --draft-model, Ctrl-C stopped an answer, Ctrl-D quit"

smol=$repo/models/smollm2-135m-instruct
if [ -f "$smol/model.onnx" ]; then
  # With fp32 activations: the first answer starts at a near-tie ("The" 25.253, "L" 25.227 after an fp32 prefill), and
  # the import's int8 activations (llama.cpp's) prefill in bf16 at tier amx, which flips it ("L'Étoile, la
  # Marseillaise…"): `tern generate --json --top-logits 4` on the templated prompt, TERN_ISA=amx against avx512bf16.
  exact="--activations fp32"
  chat "$smol" "What is the capital of France?" "And of Germany?" 40 "$exact"
  grep -q "The capital of France is Paris." "$work/pane.txt"
  grep -q "The capital of Germany is Berlin." "$work/pane.txt"
  echo "chat: SmolLM2-135M-Instruct answers both turns"
  # --tools with --tool-choice required: the first answer is a call whose arguments fit the tool's schema, its
  # result is asked for, and the model answers with it (stdin, not tmux: nothing here is timed).
  echo "[$(cat "$repo/tests/fixtures/tools/get_weather.json")]" > "$work/tools.json"
  printf 'What is the weather in Paris?\n{"temperature": 21, "sky": "clear"}\n' |
    "$tern" chat "$smol" --tools "$work/tools.json" --tool-choice required --greedy --max-new-tokens 120 --threads 2 $exact \
      > "$work/tools.txt" 2>&1
  grep -q 'the chat template renders no tools' "$work/tools.txt"  # (SmolLM2's does not: said, and the call made anyway)
  grep -q '^\[get_weather {"city":"Paris",.*"unit":"celsius"}\] result> The weather in Paris is' "$work/tools.txt" ||
    { cat "$work/tools.txt"; echo "no call, result and answer"; exit 1; }
  echo "chat: SmolLM2 calls get_weather under --tool-choice required, takes the result and answers with it"
else
  echo "skipped the SmolLM2 turns: $smol is absent (scripts/get-models.sh fetches it)"
fi
