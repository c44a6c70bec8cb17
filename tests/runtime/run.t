#!/bin/sh
# run.t - `rota run`'s command line: usage errors and their exit code (125), 126/127 for a command that cannot
# run, the command's own exit status, the environment it sets (LD_PRELOAD first, ROTA_*), --help; rota top's
# and rota status's new options; `rota status --json` parses and carries the rota top fields.
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
ROTA=$ROTA_BUILD/bin/rota
ROTAD=$ROTA_BUILD/bin/rotad
LIB=$ROTA_BUILD/lib/librota.so
T=$(mktemp -d /tmp/rota-run-t.XXXXXX)
S=$T/rotad.sock
PIDS=""
n=0
fail=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }
cleanup() { for p in $PIDS; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
# No driver query for these: --gpu all leaves placement out; ROTA_SOCKET points at nothing.
export ROTA_SOCKET=$T/none.sock
# An ASan build's librota.so preloaded into /bin/true etc.: the sanitizer runtime cannot come first there.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
unset CUDA_VISIBLE_DEVICES LD_PRELOAD ROTA_PRIORITY ROTA_WEIGHT ROTA_MEM_LIMIT ROTA_GPU ROTA_LIBROTA
# okp: a test whose CMD (true, sh, env: uninstrumented) runs with librota.so preloaded. gcc's sanitizer
# librota.so loads its runtime itself (ldd shows it). clang links its runtime statically into instrumented
# programs only, so there librota.so needs clang's shared runtime (the Makefile's ROTA_SANITIZER_RT) first in
# CMD's LD_PRELOAD; rota passes on only what its own LD_PRELOAD holds, and the instrumented rota refuses a
# second runtime ("incompatible ASan runtimes"): such tests cannot run there and are skipped.
nopre=""
if [ -n "${ROTA_SANITIZER_RT:-}" ] && ! ldd "$LIB" 2>/dev/null | grep -q 'lib[at]san\.so'; then
    nopre="clang sanitizer build: rota cannot put clang's shared runtime before librota.so in an uninstrumented CMD"
fi
okp() { if [ -n "$nopre" ]; then n=$((n + 1)); echo "ok $n # SKIP $nopre"; else ok "$@"; fi; }

# usage errors: exit 125 with one fatal line naming the problem
usage() { # expected-substring args...
    want=$1; shift
    "$ROTA" run "$@" >/dev/null 2>"$T/err"; rc=$?
    [ $rc = 125 ] && grep -q "^rota run: fatal: .*$want" "$T/err"
    ok $? "rota run $* -> 125, '$want' (rc $rc)"
}
usage "no command to run"
usage "no command to run" --
usage "no command to run" --gpu all --
usage "unknown option '--bogus'" --bogus -- true
usage "--priority 'urgent'" --priority urgent -- true
usage "--priority needs a value" --priority
usage "--weight '0'" --weight 0 -- true
usage "--weight '-1'" --weight -1 -- true
usage "--weight 'abc'" --weight abc -- true
usage "--weight '1e7'" --weight 1e7 -- true
usage "--mem '10XB'" --mem 10XB -- true
usage "--mem '0'" --mem 0 -- true
usage "--mem '1.5G'" --mem 1.5G -- true
usage "--mem '18446744073709551616'" --mem 18446744073709551616 -- true
usage "--gpu 'x'" --gpu x -- true
usage "--gpu '-1'" --gpu -1 -- true
usage "--gpu '1024'" --gpu 1024 -- true
usage "--lib: empty path" --lib= -- true
"$ROTA" run --bogus -- true 2>&1 | grep -q '^usage: rota run'; ok $? "a usage error prints the usage"

"$ROTA" run --help | grep -q '^Exit codes: CMD'; ok $? "--help documents the exit codes"
"$ROTA" run --help >/dev/null; ok $? "--help exits 0"
"$ROTA" --help | grep -q '^  run '; ok $? "rota --help lists run"
"$ROTA" --help | grep -q '^  top '; ok $? "rota --help lists top"

# librota.so must exist
"$ROTA" run --lib "$T/nope.so" --gpu all -- true 2>"$T/err"; rc=$?
[ $rc = 125 ] && grep -q "unable to use librota.so at $T/nope.so" "$T/err"; ok $? "--lib to a missing file: 125 (rc $rc)"
ROTA_LIBROTA=$T/nope.so "$ROTA" run --gpu all -- true 2>/dev/null; ok $(( $? != 125 )) "ROTA_LIBROTA is used too"

# the command's status, 126 and 127
"$ROTA" run --gpu all -- true; okp $? "true -> 0"
"$ROTA" run --gpu all -- sh -c 'exit 7'; rc=$?; [ $rc = 7 ]; okp $? "the command's exit status comes back (7, got $rc)"
"$ROTA" run --gpu all -- sh -c 'kill -TERM $$' 2>/dev/null; rc=$?; [ $rc = 143 ]; okp $? "a signal death reads as 128+15 from sh (got $rc)"
"$ROTA" run --gpu all -- /nonexistent/cmd 2>"$T/err"; rc=$?
[ $rc = 127 ] && grep -q "^rota run: fatal: unable to run /nonexistent/cmd" "$T/err"; ok $? "missing command -> 127 (rc $rc)"
"$ROTA" run --gpu all -- no-such-command-rota-t 2>/dev/null; rc=$?; [ $rc = 127 ]; ok $? "not on PATH -> 127 (rc $rc)"
printf 'data\n' >"$T/notexec"; chmod 644 "$T/notexec"
"$ROTA" run --gpu all -- "$T/notexec" 2>/dev/null; rc=$?; [ $rc = 126 ]; ok $? "not executable -> 126 (rc $rc)"
"$ROTA" run --gpu all -- "$T" 2>/dev/null; rc=$?; [ $rc = 126 ]; ok $? "a directory -> 126 (rc $rc)"
# CMD's own options are not rota's
"$ROTA" run --gpu all -- sh -c 'test "$1" = --weight' sh --weight; okp $? "arguments after -- go to CMD untouched"
"$ROTA" run --gpu all sh -c 'exit 3'; rc=$?; [ $rc = 3 ]; okp $? "CMD may also start at the first non-option (rc $rc)"

# the environment
env=$("$ROTA" run --gpu all --priority high --weight 2.5 --mem 512M -- env)
echo "$env" | grep -qx "LD_PRELOAD=$(cd "$ROTA_BUILD/bin/../lib" && pwd)/librota.so" ||
    echo "$env" | grep -qx "LD_PRELOAD=$ROTA_BUILD/bin/../lib/librota.so"
okp $? "LD_PRELOAD is librota.so next to the rota binary"
echo "$env" | grep -qx "ROTA_PRIORITY=high"; okp $? "ROTA_PRIORITY=high"
echo "$env" | grep -qx "ROTA_WEIGHT=2.5"; okp $? "ROTA_WEIGHT=2.5"
echo "$env" | grep -qx "ROTA_MEM_LIMIT=536870912"; okp $? "ROTA_MEM_LIMIT in bytes"
echo "$env" | grep -q "^CUDA_VISIBLE_DEVICES="; okp $(( $? == 0 )) "--gpu all: CUDA_VISIBLE_DEVICES untouched"
echo "$env" | grep -qx "ROTA_GPU=all"; okp $? "--gpu all: ROTA_GPU=all (librota places nothing either)"
env=$(LD_PRELOAD=/lib/x86_64-linux-gnu/libc.so.6 "$ROTA" run --gpu all --lib "$LIB" -- env)
echo "$env" | grep -qx "LD_PRELOAD=$LIB:/lib/x86_64-linux-gnu/libc.so.6"; okp $? "an existing LD_PRELOAD is kept after librota"
env=$(LD_PRELOAD="/a/b.so /nonexistent/libasan.so.8" "$ROTA" run --gpu all --lib "$LIB" -- env 2>/dev/null)
echo "$env" | grep -qx "LD_PRELOAD=/nonexistent/libasan.so.8:$LIB:/a/b.so"; okp $? "a sanitizer runtime stays first in LD_PRELOAD"
env=$("$ROTA" run --gpu=all --priority=low -- env)
echo "$env" | grep -qx "ROTA_PRIORITY=low"; okp $? "--opt=value works too"
env=$("$ROTA" run --gpu all -- env)
echo "$env" | grep -q "^ROTA_PRIORITY="; okp $(( $? == 0 )) "no --priority: ROTA_PRIORITY is not set"
# one parser for the class (runtime/lib/prio.c): rota run takes what ROTA_PRIORITY takes, in any case
env=$("$ROTA" run --gpu all --priority HIGH -- env 2>"$T/err")
echo "$env" | grep -qx "ROTA_PRIORITY=high"; okp $? "--priority HIGH is accepted, as ROTA_PRIORITY=HIGH is: ROTA_PRIORITY=high"

# --gpu N without a driver to ask: the Nth CUDA_VISIBLE_DEVICES entry, or the ordinal
env=$(ROTA_REAL_LIBCUDA=$T/none.so CUDA_VISIBLE_DEVICES=5,7,9 "$ROTA" run --gpu 1 -- env)
echo "$env" | grep -qx "CUDA_VISIBLE_DEVICES=7"; okp $? "no driver: --gpu 1 picks entry 1 of CUDA_VISIBLE_DEVICES"
ROTA_REAL_LIBCUDA=$T/none.so CUDA_VISIBLE_DEVICES=5 "$ROTA" run --gpu 1 -- true 2>"$T/err"; rc=$?
[ $rc = 125 ] && grep -q "has no entry 1" "$T/err"; ok $? "no driver: --gpu 1 past the list -> 125"
ROTA_REAL_LIBCUDA=$T/none.so "$ROTA" run -- true 2>"$T/err"; rc=$?
[ $rc = 0 ] && grep -q "^rota run: warning: no CUDA driver.*not placing" "$T/err"; okp $? "no driver, auto: one warning, runs"
ROTA_REAL_LIBCUDA=$T/none.so "$ROTA" run --quiet -- true 2>"$T/err"; [ ! -s "$T/err" ]; okp $? "--quiet drops it"

# rota top and rota status options
"$ROTA" top --interval 0 2>/dev/null; rc=$?; [ $rc = 2 ]; ok $? "rota top --interval 0 -> usage error (rc $rc)"
"$ROTA" top --bogus 2>/dev/null; rc=$?; [ $rc = 2 ]; ok $? "rota top --bogus -> usage error"
"$ROTA" top --once 2>"$T/err"; rc=$?; [ $rc = 1 ] && grep -q "^rota top: fatal:" "$T/err"; ok $? "rota top without rotad -> 1"
"$ROTA" top --help | grep -q "^usage: rota top"; ok $? "rota top --help"
"$ROTA" status --sample x 2>/dev/null; rc=$?; [ $rc = 2 ]; ok $? "rota status --sample x -> usage error"

rm -f "$T/ready"; mkfifo "$T/ready"
ROTA_LOG=quiet "$ROTAD" --foreground --no-probe --socket "$S" --notify-fd 3 3>"$T/ready" 2>>"$T/log" &
PIDS="$PIDS $!"
timeout 10 head -c 1 "$T/ready" >/dev/null; ok $? "rotad is up"
out=$("$ROTA" top --once --socket "$S"); ok $? "rota top --once exits 0"
echo "$out" | grep -q '^DEV *UUID *BUSY% *DEVT/S *CAPACITY'; ok $? "rota top: the GPU header"
echo "$out" | grep -q '^PID *COMMAND *CLASS *WEIGHT *STATE *DEV *USED *LAUNCH/S *DEVT/S *DEVTIME *INFL'
ok $? "rota top: the client header"
if command -v python3 >/dev/null; then
    "$ROTA" status --json --sample 0 --socket "$S" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["clients"]==[]'
    ok $? "rota status --json --sample 0 parses"
else
    echo "ok $((n = n + 1)) # SKIP python3 missing"
fi
echo "1..$n"
exit $fail
