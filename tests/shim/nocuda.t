#!/bin/sh
# nocuda.t - a process that never calls the driver pays nothing for librota: no files, threads, driver, output.
#
# Runs ordinary programs (ls, cat, grep, true) with librota preloaded and compares them with the same
# programs without it. Under a sanitizer build, librota needs its runtime preloaded first; the baseline then
# preloads that runtime alone, so only librota's own cost is compared.
lib="$ROTA_BUILD/lib/librota.so"
if [ -z "$ROTA_BUILD" ] || [ ! -r "$lib" ]; then
    echo "Bail out! ROTA_BUILD is not set or $lib is missing"
    exit 255
fi
rt=$(ldd "$lib" 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*lib[at]san\.so[^ ]*\).*/\1/p' | head -n 1)
# clang links its runtime statically into instrumented programs only: its librota.so names none, and the
# Makefile's ROTA_SANITIZER_RT is clang's shared runtime, to preload first.
if [ -z "$rt" ] && [ -n "${ROTA_SANITIZER_RT:-}" ]; then
    rt=$ROTA_SANITIZER_RT
    if [ ! -r "$rt" ]; then
        echo "1..0 # SKIP clang's shared sanitizer runtime $rt is not installed"
        exit 0
    fi
    # The runtime alone, without librota: clang 14's shared TSan runtime crashes in any uninstrumented program
    # (libstdc++'s constructor reaches its __cxa_atexit interceptor before it is initialised).
    if ! LD_PRELOAD="$rt" env true 2>/dev/null; then
        echo "1..0 # SKIP $rt cannot be preloaded into an uninstrumented program even without librota"
        exit 0
    fi
fi
if [ -n "$rt" ]; then base="$rt"; pre="$rt:$lib"; else base=""; pre="$lib"; fi
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
# Bad values and debug logging must stay silent too: they are reported at the first driver call only.
export ROTA_LOG=debug ROTA_MEM_WAIT=bogus
n=0
check() { # check DESCRIPTION COMMAND...
    n=$((n + 1)); d=$1; shift
    if "$@"; then echo "ok $n - $d"; else echo "not ok $n - $d"; fi
}
echo 1..7

maps=$(LD_PRELOAD="$pre" cat /proc/self/maps)
check "librota is really loaded into cat" sh -c 'printf "%s\n" "$1" | grep -q librota' - "$maps"
check "... and the driver is not (no dlopen before the first driver call)" \
    sh -c '! printf "%s\n" "$1" | grep -q libcuda' - "$maps"

fd0=$(LD_PRELOAD="$base" ls /proc/self/fd | wc -l)
fd1=$(LD_PRELOAD="$pre" ls /proc/self/fd | wc -l)
check "no file descriptors opened ($fd1 with librota, $fd0 without)" test "$fd0" = "$fd1"

th=$(LD_PRELOAD="$pre" grep '^Threads:' /proc/self/status | tr -dc 0-9)
th0=$(LD_PRELOAD="$base" grep '^Threads:' /proc/self/status | tr -dc 0-9)
check "no threads started ($th with librota, $th0 without)" test "$th" = "$th0"

out=$(LD_PRELOAD="$pre" env true 2>&1) # env: a program, not the shell's builtin true
check "nothing printed, even with ROTA_LOG=debug and a bad ROTA_MEM_WAIT" test -z "$out"

sock=$(LD_PRELOAD="$pre" ls -l /proc/self/fd | grep -c 'socket:')
check "no socket open ($sock)" test "$sock" -eq 0

LD_PRELOAD="$pre" sh -c 'exit 3'
check "exit status passes through" test $? -eq 3
