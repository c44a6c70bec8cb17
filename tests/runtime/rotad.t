#!/bin/sh
# rotad.t - rotad's and rota status's command lines: readiness, exit codes, lock, stale socket, permissions,
# config errors, and the status output (text and JSON).
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
ROTAD=$ROTA_BUILD/bin/rotad
ROTA=$ROTA_BUILD/bin/rota
T=$(mktemp -d /tmp/rota-rotad-t.XXXXXX)
S=$T/rotad.sock
PIDS=""
n=0
fail=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }
cleanup() { for p in $PIDS; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT

# Starts rotad in the foreground with readiness on fd 3 (a FIFO), waits for the newline; sets RPID. --no-probe:
# this test's environment names no simcuda node of its own, and rotad must not touch the default one.
start() {
    rm -f "$T/ready"; mkfifo "$T/ready"
    ROTA_LOG=quiet "$ROTAD" --foreground --no-probe --socket "$S" --notify-fd 3 "$@" 3>"$T/ready" 2>>"$T/log" &
    RPID=$!
    PIDS="$PIDS $RPID"
    line=$(timeout 10 head -c 1 "$T/ready" | od -An -c | tr -d ' ')
    [ "$line" = '\n' ]
}

start; ok $? "rotad writes a newline on --notify-fd once listening"
[ -S "$S" ]; ok $? "the socket exists"

out=$("$ROTA" status --socket "$S"); rc=$?
ok $rc "rota status exits 0"
echo "$out" | grep -q '^DEV *UUID *CAPACITY *RESERVED *WAITERS'; ok $? "text output has the devices header"
echo "$out" | grep -q '^PID *UID *COMMAND *CLASS *DEV *USED *LIMIT *WAITING'; ok $? "and the clients header"
json=$(ROTA_SOCKET=$S "$ROTA" status --json); ok $? "rota status --json (socket from ROTA_SOCKET)"
ABI=$(sed -n 's/^#define ROTA_ABI_VERSION \([0-9]*\)u.*/\1/p' "${ROTA_SRCDIR:-.}/runtime/abi.h")
echo "$json" | grep -q "^{\"abi\":$ABI,\"rotad_pid\":$RPID,\"client_limit\":4096,\"devices\":\[\],\"place_waiting\":{\"jobs\":0,\"bytes\":0,\"oldest_s\":0.000},\"viewer_uid\":$(id -u),\"all_clients\":true,\"hidden_clients\":0,\"hidden_groups\":0,\"groups\":\[\],\"clients\":\[\]}\$"
ok $? "JSON names rotad's pid, empty tables and nobody waiting for a GPU"
if command -v python3 >/dev/null; then
    echo "$json" | python3 -c 'import json,sys; json.load(sys.stdin)'; ok $? "the JSON parses"
fi
# rota top with stdout not a terminal: plain frames one after another (as top -b), no terminal escapes
timeout -k 5 -s INT 1.5 "$ROTA" top --interval 0.3 --socket "$S" >"$T/top" 2>"$T/err"
frames=$(grep -c '^rota top - rotad pid' "$T/top")
[ "$frames" -ge 2 ] && ! grep -q "$(printf '\033')" "$T/top" && ! grep -q '(q quits)' "$T/top"
ok $? "rota top into a pipe: $frames plain frames, no escapes ($(head -c 300 "$T/top" | od -c | head -2 | tr -s ' ' | tr '\n' ' '))"

err=$("$ROTAD" --foreground --socket "$S" 2>&1); rc=$?
[ $rc = 4 ]; ok $? "a second rotad on the same socket exits 4 (got $rc)"
echo "$err" | grep -q "rotad: fatal: unable to start: another rotad (pid $RPID) is already serving $S"
ok $? "with a clear message: $err"

kill -TERM $RPID; wait $RPID; rc=$?
[ $rc = 0 ]; ok $? "SIGTERM: exit 0 (got $rc)"
[ ! -e "$S" ]; ok $? "the socket is removed"

start; kill -9 $RPID; wait $RPID 2>/dev/null
[ -S "$S" ]; ok $? "kill -9 leaves a stale socket"
start; ok $? "a new rotad replaces the stale socket"
"$ROTA" status --socket "$S" >/dev/null; ok $? "and serves"
kill -TERM $RPID; wait $RPID

"$ROTA" status --socket "$S" 2>"$T/err"; rc=$?
[ $rc = 1 ]; ok $? "rota status without rotad exits 1 (got $rc)"
grep -q "rota status: fatal: rotad is not running: nothing listens on $S (from --socket)" "$T/err" &&
    grep -q "rota status: start one with 'rotad --socket $S'" "$T/err"; ok $? "clearly, with how to start one: $(cat "$T/err")"
# Without --socket: every default path tried is named (the node's; a user's own too), and how to start a rotad.
if [ -e /run/rota/rotad.sock ]; then
    n=$((n + 1)); echo "ok $n # skip a node rotad's socket exists here (/run/rota/rotad.sock)"
else
    if [ "$(id -u)" = 0 ]; then want="/run/rota/rotad.sock"; else want="/run/rota/rotad.sock (the node's) or "; fi
    env -u ROTA_SOCKET "$ROTA" top --once 2>"$T/err"; rc=$?
    [ $rc = 1 ] && grep -qF "rota top: fatal: rotad is not running: nothing listens on $want" "$T/err" &&
        grep -q "systemctl start rotad" "$T/err" && grep -q "'rotad'" "$T/err"
    ok $? "rota top with no rotad names the sockets tried and how to start one: $(cat "$T/err")"
fi

"$ROTA" status --bogus >/dev/null 2>&1; rc=$?; [ $rc = 2 ]; ok $? "rota status --bogus: usage error 2"
"$ROTA" >/dev/null 2>&1; rc=$?; [ $rc = 2 ]; ok $? "rota without a command: 2"
"$ROTA" frobnicate 2>&1 | grep -q "rota: fatal: unknown command 'frobnicate'"; ok $? "unknown command named"
"$ROTA" --help | grep -q '^  status '; ok $? "rota --help lists status"

"$ROTAD" --bogus >/dev/null 2>&1; rc=$?; [ $rc = 2 ]; ok $? "rotad --bogus: exit 2"
"$ROTAD" --notify-fd abc 2>&1 | grep -q "rotad: fatal: --notify-fd: 'abc' is not a descriptor number"; ok $? "--notify-fd abc"
"$ROTAD" --notify-fd 77 >/dev/null 2>&1; rc=$?; [ $rc = 2 ]; ok $? "--notify-fd of a closed descriptor: 2"
"$ROTAD" --socket >/dev/null 2>&1; rc=$?; [ $rc = 2 ]; ok $? "--socket without a value: 2"
for v in 0 1001 abc 2x ''; do
    err=$("$ROTAD" --foreground --socket "$S" --low-factor "$v" 2>&1); rc=$?
    [ $rc = 2 ] && echo "$err" | grep -q "^rotad: fatal: --low-factor: '$v' is not a whole number in 1..1000"
    ok $? "--low-factor '$v' refused with exit 2 (got $rc)"
done
"$ROTAD" --low-factor >/dev/null 2>&1; rc=$?; [ $rc = 2 ]; ok $? "--low-factor without a value: 2"
# the launch policy is one option, a row of runtime/sched-policy.c's table; the policies are the ones
# docs/rotad.md's synopsis lists ("[--policy share|quantum]"), in the table's order
policies=$(sed -n 's/.*\[--policy \([a-z|]*\)\].*/\1/p' "${ROTA_SRCDIR:?}/docs/rotad.md" | head -n 1)
[ -n "$policies" ] || { echo "Bail out! no [--policy ...] in docs/rotad.md's synopsis"; exit 255; }
err=$("$ROTAD" --foreground --socket "$S" --policy fair 2>&1); rc=$?
[ $rc = 2 ] && echo "$err" | grep -qF "rotad: fatal: --policy: unknown policy 'fair' (known: $policies)" &&
    echo "$err" | grep -q "^rotad: fatal: --policy: unknown policy 'fair'"
ok $? "--policy fair refused, naming the table's policies, $policies (got $rc: $err)"
"$ROTAD" --help | grep -qF "[--policy $policies]"
ok $? "rotad --help's synopsis lists the table's policies as docs/rotad.md does ($policies)"
err=$("$ROTAD" --foreground --socket "$S" --policy share --quantum-ms 5 2>&1); rc=$?
[ $rc = 2 ] && echo "$err" | grep -q "quantum-ms: only with --policy quantum"; ok $? "--quantum-ms with --policy share: 2"
"$ROTAD" --policy >/dev/null 2>&1; rc=$?; [ $rc = 2 ]; ok $? "--policy without a value: 2"
for v in 1000001 -1 abc 5us ''; do
    err=$("$ROTAD" --foreground --socket "$S" --idle-low-us "$v" 2>&1); rc=$?
    [ $rc = 2 ] && echo "$err" | grep -q "^rotad: fatal: --idle-low-us: '$v' is not a whole number of microseconds in 0..1000000"
    ok $? "--idle-low-us '$v' refused with exit 2 (got $rc)"
done
"$ROTAD" --idle-low-us >/dev/null 2>&1; rc=$?; [ $rc = 2 ]; ok $? "--idle-low-us without a value: 2"
ROTA_LOG=loud "$ROTAD" --foreground --socket "$S" 2>&1 | grep -q "ROTA_LOG: bad value 'loud'"; ok $? "bogus ROTA_LOG refused"
"$ROTAD" --help | grep -q '^Exit codes: 0 stopped cleanly'; ok $? "--help documents exit codes"

printf 'group /a limit 1G\ngroup /b limit 10XB\n' >"$T/bad.conf"
err=$("$ROTAD" --foreground --socket "$S" --config "$T/bad.conf" 2>&1); rc=$?
[ $rc = 3 ]; ok $? "config error: exit 3 (got $rc)"
echo "$err" | grep -q "^rotad: fatal: config: $T/bad.conf:2: bad limit '10XB': not a size"; ok $? "one message with file:line: $err"
[ "$(echo "$err" | wc -l)" = 1 ]; ok $? "exactly one line"
"$ROTAD" --foreground --socket "$S" --config "$T/none.conf" 2>&1 | grep -q "none.conf: unable to open"; ok $? "missing config named"

mkdir -m 0777 "$T/open"
err=$("$ROTAD" --foreground --socket "$T/open/rotad.sock" 2>&1); rc=$?
[ $rc = 1 ]; ok $? "a world-writable socket directory is refused (exit $rc)"
echo "$err" | grep -q "unsafe permissions on $T/open (mode 0777)"; ok $? "clearly: $err"
touch "$T/notsock"
err=$("$ROTAD" --foreground --socket "$T/notsock" 2>&1); rc=$?
[ $rc = 1 ] && echo "$err" | grep -q "exists and is not a socket"; ok $? "a non-socket at the path is not removed: $err"
[ -f "$T/notsock" ]; ok $? "the file is still there"
# issue 21, item 10: PATH is checked before PATH.lock is made beside it (a directory there stands in for a lock
# file rotad cannot open: the error must name the real problem, PATH)
mkdir "$T/notsock.lock"
err=$("$ROTAD" --foreground --socket "$T/notsock" 2>&1); rc=$?
[ $rc = 1 ] && echo "$err" | grep -q "$T/notsock exists and is not a socket"; ok $? "PATH checked before PATH.lock: $err"
rmdir "$T/notsock.lock"

printf '# limits\ngroup / limit 1G\ncredit 0\n' >"$T/good.conf"
start --config "$T/good.conf"; ok $? "a valid config loads"
"$ROTA" status --json --socket "$S" | grep -q '"groups":\[{"index":0,"path":"/","limit":1073741824,"used":0}\]'; ok $? "groups shown in JSON"
kill -TERM $RPID; wait $RPID

# detached mode: the parent exits 0 once the child listens
ROTA_LOG=quiet "$ROTAD" --no-probe --socket "$S" 2>>"$T/log"; rc=$?
[ $rc = 0 ]; ok $? "detached rotad: the parent exits 0 once ready"
"$ROTA" status --socket "$S" >/dev/null; ok $? "the detached rotad serves"
DPID=$("$ROTA" status --json --socket "$S" | sed 's/.*"rotad_pid":\([0-9]*\).*/\1/')
PIDS="$PIDS $DPID"
kill -TERM "$DPID"; for i in $(seq 100); do [ -e "$S" ] || break; sleep 0.05; done
[ ! -e "$S" ]; ok $? "and stops on SIGTERM"

echo "1..$n"
exit $fail
