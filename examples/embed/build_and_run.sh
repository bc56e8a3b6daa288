#!/usr/bin/env bash
# Compiles MODEL to an object, builds examples/embed/main.c against it with
# plain cc and the runtime library, and runs it.
# usage: build_and_run.sh TBC LIBTBCRT_A SOURCE_DIR WORK_DIR MODEL [CC [FLAGS]]
# (CC and FLAGS default to cc and nothing; a sanitizer build passes its own,
# since its libtbcrt.a needs that compiler's sanitizer runtime)
set -euo pipefail
tbc=$1 rt=$2 src=$3 work=$4 model=$5 cc=${6:-cc} flags=${7:-}
mkdir -p "$work"
cd "$work"
"$tbc" compile "$model" -o model.o --prefix model
# shellcheck disable=SC2086
$cc $flags -std=c17 -Wall -Wextra -Werror -I "$src/include" -I . "$src/examples/embed/main.c" model.o "$rt" \
   -lm -lpthread -ldl -o embed
./embed
