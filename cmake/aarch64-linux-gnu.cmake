# Cross-compiling tern for AArch64 Linux on a Debian x86-64 host (scripts/build.sh --aarch64):
#   Debian's g++-aarch64-linux-gnu, arm64 multiarch libraries (libprotobuf-dev:arm64, libonnx1:arm64,
#   installed by scripts/setup.sh --aarch64) and qemu-user to run what was built (ctest runs every test
#   binary through CMAKE_CROSSCOMPILING_EMULATOR).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Libraries from /usr/lib/aarch64-linux-gnu (multiarch); headers and CMake packages of header-only
# libraries (Eigen, xsimd, nlohmann-json, doctest) from the host's /usr, which serve every architecture.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# The target's own glibc and libstdc++ from /usr/lib/aarch64-linux-gnu (not qemu -L with the cross
# toolchain's copies: its ld.so with the multiarch libc.so hangs in the first pthread_create).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
set(TERN_ONNX_PROTO_LIBRARY /usr/lib/aarch64-linux-gnu/libonnx_proto.so.1 CACHE FILEPATH "")
set(TERN_OPENCL OFF CACHE BOOL "")
set(TERN_SERVE OFF CACHE BOOL "")
