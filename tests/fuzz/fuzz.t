#!/bin/sh
# fuzz.t - builds the libFuzzer harnesses (tests/fuzz/fuzz-*.c, clang -fsanitize=fuzzer,address,undefined) and runs
# each for FUZZ_T_SECONDS (default 10) in CI; `make fuzz` runs them longer (FUZZ_SECONDS). Skips without clang.
set -u
SRC=${ROTA_SRCDIR:-.}
CLANG=${FUZZ_CC:-clang}
SECS=${FUZZ_T_SECONDS:-10}
if ! command -v "$CLANG" >/dev/null; then echo "1..0 # SKIP no $CLANG"; exit 0; fi
T=$(mktemp -d /tmp/rota-fuzz-t.XXXXXX)
trap 'rm -rf "$T"' EXIT
# fuzz-rotad makes its rotad's folder under TMPDIR: here, so that nothing stays behind even when it crashes; run as
# root it connects as another user too, who must be able to pass through to that folder's socket.
chmod 711 "$T"
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }' > "$T/probe.c"
if ! "$CLANG" -fsanitize=fuzzer -o "$T/probe" "$T/probe.c" 2>/dev/null; then
    echo "1..0 # SKIP $CLANG has no libFuzzer"
    exit 0
fi
n=0
fail=0
for h in "$SRC"/tests/fuzz/fuzz-*.c; do
    name=$(basename "$h" .c)
    n=$((n + 1))
    if ! "$SRC/tests/fuzz/build.sh" "$CLANG" "$SRC" "$h" "$T/$name" 2>"$T/$name.log"; then
        echo "not ok $n - $name builds"; sed 's/^/# /' "$T/$name.log"; fail=1; continue
    fi
    mkdir -p "$T/$name.corpus"
    # The harnesses are clang's ASan builds: they must load no library of the build under test (a gcc-ASan
    # simcuda or NVML there is another sanitizer runtime), and rotad's NVML questions are not what they test.
    if env -u LD_LIBRARY_PATH TMPDIR="$T" ROTA_REAL_NVML=none "$T/$name" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=1024 -artifact_prefix="$T/" \
        "$T/$name.corpus" "$SRC/tests/fuzz/seeds/$name" >"$T/$name.log" 2>&1; then
        runs=$(grep -o 'Done [0-9]* runs' "$T/$name.log" | grep -o '[0-9]*')
        echo "ok $n - $name: no crash in ${runs:-?} runs ($SECS s)"
    else
        echo "not ok $n - $name found a crash"; tail -30 "$T/$name.log" | sed 's/^/# /' | tee /dev/stderr; fail=1
    fi
done
echo "1..$n"
exit $fail
