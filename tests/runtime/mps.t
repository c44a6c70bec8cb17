#!/bin/sh
# mps.t - rotad --mps with simcuda's stand-in MPS control daemon: rotad starts it (or attaches to a running one),
# each class's process gets its SM share as CUDA_MPS_ACTIVE_THREAD_PERCENTAGE before its driver starts (seen by
# simcuda's own debug line), a process may only lower it; when the daemon dies rotad logs it and starts another,
# and while none can start new processes get no share (time slicing with holds); rotad quits a daemon it started
# and leaves one it attached to; usage errors.
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
ROTA=$ROTA_BUILD/bin/rota
ROTAD=$ROTA_BUILD/bin/rotad
WL=$ROTA_BUILD/bin/workload
CTL=$ROTA_BUILD/bin/nvidia-cuda-mps-control
T=$(mktemp -d /tmp/rota-mps-t.XXXXXX)
S=$T/rotad.sock
NODE=rota-mps-t-$$
PIDS=""
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
ctl_pid() { cat "$T/pipe/nvidia-cuda-mps-control.pid" 2>/dev/null; }
answers() { echo get_default_active_thread_percentage | "$CTL" 2>/dev/null | grep -q '^[0-9]'; }
cleanup() {
    for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
    p=$(ctl_pid); [ -n "$p" ] && kill -9 "$p" 2>/dev/null
    rm -rf "$T"; rm -f "/dev/shm/$NODE"
}
trap cleanup EXIT
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
unset CUDA_VISIBLE_DEVICES LD_PRELOAD ROTA_PRIORITY ROTA_WEIGHT ROTA_MEM_LIMIT ROTA_GPU ROTA_LIBROTA ROTA_TRACE \
    CUDA_MPS_ACTIVE_THREAD_PERCENTAGE NOTIFY_SOCKET
export SIMCUDA_NODE=$NODE SIMCUDA_MEM=1G SIMCUDA_MPS=1 ROTA_SOCKET=$S CUDA_MPS_PIPE_DIRECTORY=$T/pipe
# waitfor FILE PATTERN: up to 10 s for a line matching PATTERN
waitfor() { for i in $(seq 200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done; return 1; }

# A wrapper around the stand-in that fails while $T/broken exists (a daemon that cannot start).
cat >"$T/ctl" <<EOF
#!/bin/sh
[ -e "$T/broken" ] && { echo "broken for the test" >&2; exit 1; }
exec "$CTL" "\$@"
EOF
chmod +x "$T/ctl"

# start ARGS: rotad --mps in the foreground, readiness on fd 3; sets RPID.
start() {
    rm -f "$T/ready"; mkfifo "$T/ready"
    ROTA_LOG=info "$ROTAD" --foreground --no-probe --socket "$S" --notify-fd 3 --mps --mps-control "$T/ctl" "$@" \
        3>"$T/ready" 2>>"$T/log" &
    RPID=$!
    PIDS="$PIDS $RPID"
    line=$(timeout 10 head -c 1 "$T/ready" | od -An -c | tr -d ' ')
    [ "$line" = '\n' ]
}
# share CLASS [ENV...]: the SM share simcuda's driver saw in a process of CLASS under rota ('-' for none).
share() {
    c=$1; shift
    env "$@" ROTA_LOG=debug "$ROTA" run --priority "$c" -- "$WL" --list-devices >/dev/null 2>"$T/client"
    v=$(sed -n 's/.*CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=\([0-9.]*\).*/\1/p' "$T/client" | grep -v '^$' | tail -1)
    # simcuda logs its default (100) when nobody set the variable: tell that from a share librota gave
    grep -q "MPS: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=" "$T/client" || v="-$v"
    echo "${v:--}"
}

start --mps-share normal=50,low=30 --mps-check-ms 100; ok $? "rotad --mps is ready"
answers; ok $? "it started the control daemon (it answers)"
grep -q "rotad: info: MPS: started the control daemon" "$T/log"; ok $? "and said so"
grep -q "SM shares: high 100 %, normal 50 %, low 30 %" "$T/log"; ok $? "with the shares"
# The daemon outlives what rotad had open: not its readiness FIFO (a reader waiting for EOF would hang), nor its log.
! ls -l "/proc/$(ctl_pid)/fd" 2>/dev/null | grep -q -e "$T/ready" -e "$T/log"
ok $? "the daemon holds none of rotad's descriptors ($(ls -l "/proc/$(ctl_pid)/fd" 2>/dev/null | grep -c -e "$T/"))"
[ "$(share low)" = 30 ]; ok $? "a low process's driver sees CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30 ($(share low))"
[ "$(share normal)" = 50 ]; ok $? "a normal one's 50"
[ "$(share high)" = 100 ]; ok $? "a high one's 100 (root and rotad's user may run high)"
[ "$(share low CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=10)" = 10 ]; ok $? "a low process that set 10 keeps it (lower)"
[ "$(share low CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=90)" = 30 ]; ok $? "one that set 90 gets 30 (never above its class's)"

# The daemon dies: rotad notices, says so, starts another.
old=$(ctl_pid)
kill -9 "$old"
waitfor "$T/log" "does not answer"; ok $? "the daemon killed: rotad logs that it does not answer"
waitfor "$T/log" "answers again"; ok $? "and starts another, which answers"
new=$(ctl_pid)
[ -n "$new" ] && [ "$new" != "$old" ] && answers; ok $? "a new daemon runs (pid $old, then $new)"
[ "$(share low)" = 30 ]; ok $? "a low process gets its share again"

# One that cannot start: the shares go (time slicing with holds) until one answers again.
touch "$T/broken"
kill -9 "$(ctl_pid)"
waitfor "$T/log" "unable to start the control daemon: '$T/ctl -d' failed: broken for the test"
ok $? "a daemon that cannot start is logged, with why"
[ "$(share low)" = "-100.0" ] || [ "$(share low)" = "-100" ]; ok $? "meanwhile a low process gets no share ($(share low))"
rm -f "$T/broken"
for i in $(seq 100); do [ "$(grep -c "answers again" "$T/log")" -ge 2 ] && break; sleep 0.05; done
[ "$(grep -c "answers again" "$T/log")" -ge 2 ]; ok $? "once one starts, rotad says so"
[ "$(share low)" = 30 ]; ok $? "and the share is back"

kill -TERM "$RPID"; wait "$RPID"; rc=$?
[ $rc = 0 ]; ok $? "SIGTERM: rotad exits 0 (got $rc)"
! answers; ok $? "and quits the daemon it started"

# Attach: a daemon already runs; rotad uses it and leaves it running.
"$CTL" -d; ok $? "a control daemon started by hand"
: >"$T/log"
start; ok $? "rotad --mps is ready"
grep -q "attached to the running control daemon" "$T/log"; ok $? "it attached to that daemon"
grep -q "SM shares: high 100 %, normal 60 %, low 50 %" "$T/log"; ok $? "default shares: normal 60, low 50"
kill -TERM "$RPID"; wait "$RPID"
answers; ok $? "rotad leaves a daemon it attached to running"
echo quit | "$CTL"

# Usage and start errors
"$ROTAD" --foreground --no-probe --socket "$S" --mps-share low=10 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "only with --mps" "$T/err"; ok $? "--mps-share without --mps: usage error ($(cat "$T/err"))"
"$ROTAD" --foreground --no-probe --socket "$S" --mps --mps-share high=50 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "'high' is not normal or low" "$T/err"; ok $? "high's share is not settable ($(cat "$T/err"))"
"$ROTAD" --foreground --no-probe --socket "$S" --mps --mps-share low=70 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "low's 70 % is above normal's 60 %" "$T/err"; ok $? "low above normal: usage error"
"$ROTAD" --foreground --no-probe --socket "$S" --mps --mps-share low=0 2>"$T/err"; rc=$?
[ $rc = 2 ]; ok $? "a share of 0: usage error ($(cat "$T/err"))"
touch "$T/broken"
ROTA_LOG=quiet "$ROTAD" --foreground --no-probe --socket "$S" --mps --mps-control "$T/ctl" 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "rotad: fatal: --mps: unable to start the MPS control daemon: '$T/ctl -d' failed" "$T/err"
ok $? "no daemon can start: exit 1 with why ($(cat "$T/err"))"
[ ! -e "$S" ]; ok $? "and no socket left behind"
echo "1..$n"
