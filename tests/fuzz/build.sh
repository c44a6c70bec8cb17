#!/bin/sh
# build.sh CLANG SRCDIR HARNESS OUT - builds one libFuzzer harness with the rota sources it exercises.
set -eu
CLANG=$1 SRC=$2 H=$3 OUT=$4
CFLAGS="-std=c11 -D_GNU_SOURCE -g -O1 -fno-sanitize-recover=undefined -I$SRC"
case $(basename "$H" .c) in
fuzz-rotad)
    # rotad itself, served by a thread of the harness: every runtime source but its main and its GPU probe (the
    # harness gives rotad fake GPUs; the probe and runtime/lib/gpus.c need the CUDA headers), and the common
    # library. The scheduler's tick walks the whole client table at every decision: without comparison tracing
    # there (edge coverage stays) the harness runs about twice as many inputs a second.
    "$CLANG" $CFLAGS -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-coverage=trace-cmp \
        -c "$SRC/runtime/sched.c" -o "$OUT-sched.o"
    set -- "$OUT-sched.o" $(ls "$SRC"/runtime/*.c "$SRC"/runtime/lib/*.c | grep -v -e '/runtime/rotad-main\.c$' \
        -e '/runtime/probe\.c$' -e '/runtime/sched\.c$' -e '/runtime/lib/gpus\.c$') -lpthread -ldl -lrt -lm
    ;;
*)
    set -- "$SRC/runtime/lib/proto.c" "$SRC/runtime/lib/parse.c" "$SRC/runtime/lib/errmsg.c" "$SRC/runtime/config.c" -lm
    ;;
esac
"$CLANG" $CFLAGS -fsanitize=fuzzer,address,undefined -o "$OUT" "$H" "$@"
rm -f "$OUT-sched.o"
