#!/usr/bin/env bash
# Installs everything tern needs to build and test on Debian 12, from Debian packages only.
# Safe to run again: apt-get skips what is already installed.
set -euo pipefail
packages=(
  cmake g++ make pkg-config
  libonnx-dev libprotobuf-dev protobuf-compiler
  libeigen3-dev libxsimd-dev doctest-dev nlohmann-json3-dev libomp-dev
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd
  python3-onnx python3-numpy python3-venv
  libcpp-httplib-dev libxxhash-dev
  dpkg-dev  # dpkg-shlibdeps: the .deb's dependencies (cpack -G DEB, tests/deb_package.sh)
  ccache    # a rebuild, and the wheel's compile of build/'s objects (scripts/wheel.sh), from the cache
)
# --ci: also what only some tests need — headless Chromium renders the profiler's HTML report, tmux
# types into `tern chat`, clang 16 with its sanitizer and libFuzzer runtimes builds the sanitizer pass and the fuzz targets
# (scripts/fuzz.sh), nginx balances two `tern serve` replicas (tests/cli_serve.sh), strace proves a model folder's
# files are never opened outside it (tests/cli_confinement.sh).
[ "${1:-}" = "--ci" ] && packages+=(chromium tmux clang-16 libclang-rt-16-dev clang-format-14 nginx-light strace)
# --aarch64 (and --ci): the AArch64 cross build — Debian's cross compiler, arm64 multiarch libraries and
# qemu-user to run it. (libonnx-dev:arm64 cannot sit beside the amd64 one — both ship /usr/lib/libonnxifi.so
# — so only its runtime library is installed; cmake/aarch64-linux-gnu.cmake uses the host's headers.)
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
if [ "${1:-}" = "--ci" ] || [ "${1:-}" = "--aarch64" ]; then
  packages+=(g++-aarch64-linux-gnu qemu-user libprotobuf-dev:arm64 libonnx1:arm64 libstdc++6:arm64)
  dpkg --print-foreign-architectures | grep >/dev/null -x arm64 || $sudo_cmd dpkg --add-architecture arm64
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep >/dev/null 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
