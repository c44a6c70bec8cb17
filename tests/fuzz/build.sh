#!/bin/sh
# build.sh CLANG SRCDIR HARNESS OUT - builds one libFuzzer harness with the rota sources it exercises.
set -eu
CLANG=$1 SRC=$2 H=$3 OUT=$4
exec "$CLANG" -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$SRC" -o "$OUT" "$H" "$SRC/runtime/lib/proto.c" "$SRC/runtime/lib/parse.c" "$SRC/runtime/config.c" -lm
