#!/usr/bin/env bash
# Every C and C++ file git tracks is as .clang-format lays it out (Debian 12's clang-format-14, which
# scripts/setup.sh --ci installs; another version may lay some lines out differently, so it is not used).
# Without clang-format-14 the check is skipped with a message. Fix: git ls-files '*.cpp' '*.h' '*.c' | xargs clang-format-14 -i
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format-14 > /dev/null; then
  echo "skipped: clang-format-14 is not installed (scripts/setup.sh --ci installs it)"
  exit 0
fi
if ! git rev-parse --git-dir > /dev/null 2>&1; then
  echo "skipped: not a git checkout (the files to check are the tracked ones)"
  exit 0
fi
bad=()
while IFS= read -r f; do
  [ -f "$f" ] || continue
  clang-format-14 --dry-run -Werror "$f" > /dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.cpp' '*.h' '*.c')
if [ ${#bad[@]} -gt 0 ]; then
  printf 'not formatted as .clang-format says:\n'
  printf '  %s\n' "${bad[@]}"
  printf 'fix: clang-format-14 -i FILE…\n'
  exit 1
fi
echo "every tracked C/C++ file is formatted"
