#!/usr/bin/env bash
# The Debian package (`cpack -G DEB`, CMakeLists.txt): built from the build folder, its control fields and
# files checked, then unpacked into a scratch root (no dpkg database or root rights needed) whose tern runs
# models/default to the build's own text (the model's own sampling), and whose header, library and pkg-config
# file build the C example.
#   deb_package.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -euo pipefail
build=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
(cd "$build" && cpack -G DEB -B "$work" > "$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
deb=$(ls "$work"/tern_*.deb)
dpkg-deb --field "$deb" Package Version Architecture Depends | tee "$work/fields.txt"
grep -q "^Depends: .*libprotobuf" "$work/fields.txt" || { echo "no library dependencies in $deb"; exit 1; }
dpkg-deb --contents "$deb" > "$work/contents.txt"
for f in ./usr/bin/tern ./usr/include/tern/tern.h ./usr/lib/libtern.so ./usr/lib/libtern.a ./usr/lib/pkgconfig/tern.pc ./usr/share/doc/tern/LICENSE \
         ./usr/share/bash-completion/completions/tern; do
  grep -q " $f\( \|$\)" "$work/contents.txt" || { echo "$deb lacks $f"; exit 1; }
done
root=$work/root
dpkg-deb -x "$deb" "$root"
want=$("$build/tern" generate --model "$src/models/default" --prompt "And God said" --max-new-tokens 16 --threads 2 2> /dev/null)
got=$("$root/usr/bin/tern" generate --model "$src/models/default" --prompt "And God said" --max-new-tokens 16 --threads 2 2> /dev/null)
[ "$want" = "$got" ] || { printf 'build: %s\npackage: %s\n' "$want" "$got"; exit 1; }
"$root/usr/bin/tern" --version | head -n 1
sed -i "s|^prefix=.*|prefix=$root/usr|" "$root/usr/lib/pkgconfig/tern.pc"
# shellcheck disable=SC2046
cc -std=c99 "$src/examples/c/generate.c" -o "$work/c_example" $(PKG_CONFIG_PATH="$root/usr/lib/pkgconfig" pkg-config --cflags --libs tern) \
  -Wl,-rpath,"$root/usr/lib"
text=$("$work/c_example" "$src/models/default" "And God said" 16 2)
[ "$text" = "$want" ] || { printf 'build: %s\nC example on the package: %s\n' "$want" "$text"; exit 1; }
echo "the package's tern and libtern give the build's text: $want"
