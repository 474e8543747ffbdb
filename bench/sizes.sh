#!/usr/bin/env bash
# Stripped sizes of every build variant (docs/embedded.md#sizes): builds what is missing, then prints one table
# row per variant — the CLI, libtern.so, libtern.a — in MiB (strip --strip-unneeded, of a copy).
# Usage: bench/sizes.sh [VARIANT...]   (default: all of them; AArch64 ones need scripts/setup.sh --aarch64)
set -euo pipefail
cd "$(dirname "$0")/.."
# name | build dir | how it is built: scripts/build.sh's flags, or cmake -D options for the combinations it has no flag for
variants=(
  "x86-64|build|"
  "x86-64, -DTERN_OPENCL=OFF|build-no-opencl|--no-opencl"
  "x86-64, -DTERN_MINIMAL=ON|build-sizes/minimal|-DTERN_MINIMAL=ON"
  "x86-64, -DTERN_STATIC=ON|build-sizes/static|-DTERN_STATIC=ON"
  "x86-64, minimal + static|build-minimal|--minimal"
  "AArch64|build-aarch64|--aarch64"
  "AArch64, minimal + static|build-aarch64-minimal|--aarch64 --minimal"
)
want=("$@")
mib() { [ -f "$1" ] || { echo "-"; return; }; local t; t=$(mktemp); "$strip" --strip-unneeded -o "$t" "$1"; awk -v b="$(stat -c %s "$t")" 'BEGIN{printf "%.2f", b/1048576}'; rm -f "$t"; }
printf '| build | `tern` CLI | `libtern.so` | `libtern.a` |\n|---|---|---|---|\n'
for v in "${variants[@]}"; do
  IFS='|' read -r name dir how <<< "$v"
  if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " == *" $dir "* ]]; then continue; fi
  if [ ! -x "$dir/tern" ]; then
    if [[ "$how" == -D* ]]; then
      cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release $how > /dev/null
      cmake --build "$dir" -j "$(nproc)" --target tern_cli tern tern_shared > /dev/null
    else
      # shellcheck disable=SC2086
      bash scripts/build.sh $how > /dev/null
    fi
  fi
  strip=strip
  [[ "$name" == AArch64* ]] && strip=aarch64-linux-gnu-strip
  linked=dynamic
  readelf -l "$dir/tern" | grep >/dev/null INTERP || linked=static
  printf '| %s (CLI %s) | %s | %s | %s |\n' "$name" "$linked" "$(mib "$dir/tern")" "$(mib "$dir/libtern.so.0.1.0")" "$(mib "$dir/libtern.a")"
done
