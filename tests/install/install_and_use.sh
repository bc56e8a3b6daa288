#!/usr/bin/env bash
# Installs the build into a fresh prefix and uses it as an application would:
# the tbc command, find_package(tbc) (examples/embed against tbc::tbcrt_static
# and tbc::tbcrt, examples/jit against tbc::tbc), pkg-config (examples/embed
# against tbcrt.pc), and libtbc.so exporting exactly what tbc.h declares.
# usage: install_and_use.sh BUILD_DIR SOURCE_DIR WORK_DIR CC [FLAGS]
set -euo pipefail
build=$1 src=$2 work=$3 cc=$4 flags=${5:-}
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name libtbcrt.a | head -1)")

"$prefix/bin/tbc" --version
model=$src/examples/models/tiny_cnn.onnx
(cd "$work" && "$prefix/bin/tbc" compile "$model" -o model.o --prefix model)

echo "== find_package(tbc)"
cmake -S "$src/tests/install/consumer" -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
      -DEXAMPLES="$src/examples" -DMODEL_DIR="$work" >/dev/null
ninja -C "$work/consumer" >/dev/null
"$work/consumer/embed_static"
"$work/consumer/embed_shared"
"$work/consumer/jit" "$model" "$src/examples/models/tiny_cnn.image.npy"

echo "== pkg-config tbcrt"
export PKG_CONFIG_PATH=$libdir/pkgconfig
# shellcheck disable=SC2046,SC2086
$cc $flags -std=c17 -Wall -Wextra -Werror $(pkg-config --cflags tbcrt) -I "$work" "$src/examples/embed/main.c" \
    "$work/model.o" $(pkg-config --libs tbcrt) -o "$work/embed_pc"
LD_LIBRARY_PATH=$libdir "$work/embed_pc"
# shellcheck disable=SC2046
[ "$(pkg-config --modversion tbc)" = "$(pkg-config --modversion tbcrt)" ]

echo "== libtbc.so exports what include/tbc/tbc.h declares, and nothing else"
grep -E '^[A-Za-z].*[ *]tbc_[a-z0-9_]+\(' "$prefix/include/tbc/tbc.h" | sed -E 's/.*[ *](tbc_[a-z0-9_]+)\(.*/\1/' |
  sort -u >"$work/declared"
nm -D --defined-only "$libdir/libtbc.so" | awk '$2 == "T" {print $3}' | sort >"$work/exported"
diff "$work/declared" "$work/exported"
echo "installed package OK"
