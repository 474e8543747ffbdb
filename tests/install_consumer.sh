#!/usr/bin/env bash
# `cmake --install` into a scratch prefix, then examples/c built against it three ways — find_package(tern)
# with the shared and with the static library, and pkg-config — each printing the CLI's text (the model's own sampling).
#   install_consumer.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -euo pipefail
build=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
prompt="And God said"
want=$("$prefix/bin/tern" generate --model "$src/models/default" --prompt "$prompt" --max-new-tokens 24 --threads 2 2>/dev/null)
check() {
  local what=$1 got
  got=$("$2" "$src/models/default" "$prompt" 24 2 2>/dev/null)
  [ "$got" = "$want" ] || { echo "$what: '$got' differs from the CLI's '$want'"; exit 1; }
  echo "$what: the CLI's text"
}
for target in tern::tern tern::tern_static; do
  dir=$work/cmake-${target#tern::}
  cmake -S "$src/examples/c" -B "$dir" -DCMAKE_PREFIX_PATH="$prefix" -DTERN_TARGET=$target > "$dir.log"
  cmake --build "$dir" >> "$dir.log" 2>&1 || { cat "$dir.log"; exit 1; }
  check "find_package(tern), $target" "$dir/generate"
done
libdir=$(dirname "$(find "$prefix" -name tern.pc)")/..
PKG_CONFIG_PATH=$libdir/pkgconfig
export PKG_CONFIG_PATH
cc -std=c99 -Wall -Wpedantic "$src/examples/c/generate.c" $(pkg-config --cflags --libs tern) -Wl,-rpath,"$(cd "$libdir" && pwd)" -o "$work/generate-pc"
check "pkg-config tern" "$work/generate-pc"
# only the C API leaves the shared library
others=$(nm -D --defined-only "$libdir/libtern.so" | awk '$2 == "T" && $3 !~ /^tern_/ {print $3}' | head -5)
[ -z "$others" ] || { echo "libtern.so exports more than tern_*: $others"; exit 1; }
echo "libtern.so exports only tern_* functions"
