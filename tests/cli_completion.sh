#!/usr/bin/env bash
# tools/completion/tern.bash: commands and a command's flags complete from the binary's own usage.
#   cli_completion.sh TERN_CLI SOURCE_DIR
set -euo pipefail
tern=$1 src=$2
# shellcheck source=/dev/null
source "$src/tools/completion/tern.bash"
complete_line() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _tern; echo "${COMPREPLY[*]}"; }
[ "$(complete_line "$tern" gen)" = "generate" ] || { echo "tern gen<TAB>: $(complete_line "$tern" gen)"; exit 1; }
[ "$(complete_line "$tern" import)" = "import-gguf" ] || { echo "tern import<TAB>: $(complete_line "$tern" import)"; exit 1; }
got=$(complete_line "$tern" generate --max)
[ "$got" = "--max-memory --max-new-tokens" ] || { echo "tern generate --max<TAB>: $got"; exit 1; }
got=$(complete_line "$tern" bench --pro)
[ "$got" = "--prompt-tokens" ] || { echo "tern bench --pro<TAB>: $got"; exit 1; }
echo "completes commands and each command's flags"
