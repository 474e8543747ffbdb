#!/usr/bin/env bash
# Writes the example program of include/tern/tern.h's opening comment (the lines after " * Example", each
# " *   " taken off, up to the first line that is neither such a line nor " *") as a C file, which
# tests/CMakeLists.txt compiles as C99 and runs: what the header shows must build and work.
#   header_example.sh TERN_H OUT.c
set -euo pipefail
awk '/^ \* Example/ { inside = 1; next }
     inside { if ($0 == " *") print ""; else if (sub(/^ \*   /, "")) print; else exit }' "$1" > "$2"
grep -q "int main" "$2" || { echo "header_example.sh: no example program found in $1" >&2; exit 1; }
