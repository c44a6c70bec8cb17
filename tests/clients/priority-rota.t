#!/bin/sh
# priority-rota.t - stream priorities inside one process under rota + rotad: a lone client's launches keep the
# device's own ordering (priority-t passes with librota preloaded and rotad running, as it does without them).
# The client runs on a simulated node of its own, which rotad does not know (a GPU of "pool 0"): rotad once
# counted such a client contended even alone, tracked its launches, and the gate's in-flight bound held its
# high-priority launch on the host behind its low-priority ones (issue 22 part 3).
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
ROTAD=$ROTA_BUILD/bin/rotad
LIB=$ROTA_BUILD/lib/librota.so
PRIO=$ROTA_BUILD/tests/clients/priority-t
[ -x "$PRIO" ] || { echo "Bail out! $PRIO not built"; exit 255; }
if [ -n "${ROTA_SANITIZER_RT:-}" ] || ldd "$LIB" 2>/dev/null | grep -q 'lib[at]san\.so'; then
    echo "1..0 # SKIP sanitizer build: priority-t would need the sanitizer runtime before librota.so"; exit 0
fi
T=$(mktemp -d /tmp/rota-priority-rota-t.XXXXXX)
S=$T/rotad.sock
RPID=
cleanup() { [ -n "$RPID" ] && kill -9 "$RPID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT

echo 1..3
mkfifo "$T/ready"
ROTA_LOG=quiet "$ROTAD" --foreground --no-probe --socket "$S" --notify-fd 3 3>"$T/ready" 2>>"$T/log" &
RPID=$!
line=$(timeout 10 head -c 1 "$T/ready" | od -An -c | tr -d ' ')
if [ "$line" = '\n' ]; then echo "ok 1 - rotad is listening"; else echo "not ok 1 - rotad did not start"; fi
ROTA_SOCKET=$S ROTA_LOG=error LD_PRELOAD=$LIB "$PRIO" >"$T/out" 2>&1; rc=$?
sed 's/^/# /' "$T/out" | grep -E '^# (not ok|# round)'
if [ $rc = 0 ] && ! grep -q '^not ok' "$T/out"; then echo "ok 2 - priority-t passes under librota + rotad"
else echo "not ok 2 - priority-t fails under librota + rotad (exit $rc)"; fi
grep -q "high-priority kernel queued last completed before low kernel 2" "$T/out" &&
    ! grep -q "^not ok.*high-priority kernel queued last" "$T/out"
if [ $? = 0 ]; then echo "ok 3 - the high-priority kernel queued last overtook every queued low-priority one"
else echo "not ok 3 - the high-priority kernel did not overtake the queued low-priority ones"; fi
