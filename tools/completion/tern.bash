# bash completion for tern (installed as share/bash-completion/completions/tern): commands, then the flags
# of the command being typed, both read from tern's own usage (`tern --help`, `tern COMMAND --help`: the
# flags section, printed from the table the parser reads), so they stay what the binary takes; paths
# everywhere else.
_tern() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  if [ "$COMP_CWORD" -eq 1 ]; then
    local commands
    commands=$("${COMP_WORDS[0]}" --help 2> /dev/null | sed -n 's/^  \([a-z][a-z0-9-]*\)\( .*\)\{0,1\}$/\1/p' | sort -u)
    mapfile -t COMPREPLY < <(compgen -W "$commands --help --version" -- "$cur")
  elif [[ $cur == --* ]]; then
    local flags
    flags=$("${COMP_WORDS[0]}" "${COMP_WORDS[1]}" --help 2> /dev/null | sed -n 's/^  \(-[a-z], \|    \)\(--[a-z][a-z0-9-]*\).*/\2/p' | sort -u)
    mapfile -t COMPREPLY < <(compgen -W "$flags --quiet --help" -- "$cur")
  else
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  fi
}
complete -o filenames -F _tern tern
