#!/bin/sh
# multiuser.t - a root rotad serving two unprivileged users (issue 21): from their accounts, the region and the
# board cannot be made writable, ADOPT is bounded, another user's jobs are invisible (rota status, rota metrics, the
# region, the client table), high priority needs the policy's permission, and a client refuses a rotad run by
# another user. Creates two users with useradd (unique names) and removes them on exit.
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
ROTAD=$ROTA_BUILD/bin/rotad
SECT=$ROTA_BUILD/tests/runtime/security-t
if [ "$(id -u)" != 0 ] || ! command -v useradd >/dev/null || ! command -v userdel >/dev/null ||
    ! command -v setpriv >/dev/null; then
    echo "1..0 # SKIP needs root, useradd, userdel and setpriv"
    exit 0
fi
# /tmp, not TMPDIR: the test users must reach T (make test's runner gives each test a private /tmp).
T=$(mktemp -d /tmp/rota-multiuser-t.XXXXXX)
chmod 755 "$T"
UA=rotat$$a
UB=rotat$$b
PIDS=""
USERS=""
n=0
fail=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }
cleanup() {
    for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
    for p in $PIDS; do wait "$p" 2>/dev/null; done
    # whatever still runs as a test user (a process a failed check left behind) goes first: userdel refuses a
    # user with processes, and the account would outlive the test
    for u in $USERS; do pkill -9 -u "$u" 2>/dev/null; done
    sleep 0.2
    for u in $USERS; do userdel "$u" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

for u in $UA $UB; do
    if ! useradd -M -N -s /bin/false "$u" 2>"$T/useradd.err"; then
        echo "1..0 # SKIP useradd $u failed: $(cat "$T/useradd.err")"
        exit 0
    fi
    USERS="$USERS $u"
done
# The programs the test users run, copied where they can reach them: the clone may lie in a directory other users
# cannot traverse (root's 0700 home, a mktemp -d folder). T is in /tmp for the same reason.
cp "$SECT" "$T/security-t" && chmod 755 "$T/security-t"
cp "$ROTA_BUILD/bin/rotad" "$T/rotad" && chmod 755 "$T/rotad"
ROTAD=$T/rotad
as() { u=$1; shift; setpriv --reuid="$u" --regid="$(id -g "$u")" --clear-groups env HOME="$T" "$@"; }

# Starts a rotad (as user $1, or root) on socket $2 in the foreground, readiness on fd 3; sets RPID.
start() {
    who=$1 sock=$2; shift 2
    rm -f "$T/ready"; mkfifo "$T/ready"; chmod 666 "$T/ready"
    if [ "$who" = root ]; then
        ROTA_LOG=warn "$ROTAD" --foreground --no-probe --socket "$sock" --notify-fd 3 "$@" 3>"$T/ready" 2>>"$T/log" &
    else
        # setpriv execs env, which execs rotad: $! is rotad's pid (a shell function here would be a subshell)
        setpriv --reuid="$who" --regid="$(id -g "$who")" --clear-groups env ROTA_LOG=warn "$ROTAD" --foreground \
            --no-probe --socket "$sock" --notify-fd 3 "$@" 3>"$T/ready" 2>>"$T/log" &
    fi
    RPID=$!
    PIDS="$PIDS $RPID"
    line=$(timeout 10 head -c 1 "$T/ready" | od -An -c | tr -d ' ')
    [ "$line" = '\n' ]
}

S=$T/rotad.sock
start root "$S"; ok $? "a root rotad serves $S"

out=$(as "$UA" env SECURITY_T_ATTACK=region ROTA_SOCKET="$S" "$T/security-t" 2>&1); rc=$?
ok $rc "user $UA cannot map the region or the board writable, re-opened or not (status $rc: $(echo $out))"
out=$(as "$UA" env SECURITY_T_ATTACK=adopt ROTA_SOCKET="$S" "$T/security-t" 2>&1); rc=$?
ok $rc "user $UA's ADOPTs of 2^56 bytes leave the ledger within the GPU ($out)"
sleep 1.1 # the ADOPT warnings above used this second's share of rotad's rate-limited log
out=$(as "$UA" env SECURITY_T_ATTACK=high ROTA_SOCKET="$S" "$T/security-t" 2>&1); rc=$?
ok $rc "user $UA asking for high priority runs as normal under the default policy ($out)"
grep -q "uid $(id -u "$UA").*asked for high priority" "$T/log"; ok $? "rotad logs the refusal"

# Redaction: UA's job is invisible to UB (rota status, rota metrics, the region, the client table), visible to UA
# and root. The job's command is its program's name: a copy of security-t called rotaprivjob.
cp "$ROTA_BUILD/bin/rota" "$T/rota" && chmod 755 "$T/rota"
ROTA=$T/rota
cp "$SECT" "$T/rotaprivjob" && chmod 755 "$T/rotaprivjob"
mkfifo "$T/held" && chmod 666 "$T/held"
# setpriv execs env, which execs the job: $! is the job's pid (the as function here would be a subshell)
setpriv --reuid="$UA" --regid="$(id -g "$UA")" --clear-groups env HOME="$T" SECURITY_T_ATTACK=hold ROTA_SOCKET="$S" \
    "$T/rotaprivjob" >"$T/held" 2>&1 &
HPID=$!
PIDS="$PIDS $HPID"
held=$(timeout 10 head -n 1 "$T/held")
[ "$held" = "held $HPID" ]; ok $? "user $UA's job holds memory through the root rotad ($held)"
out=$(as "$UB" env SECURITY_T_ATTACK=peek SECURITY_T_NEEDLE=rotaprivjob ROTA_SOCKET="$S" "$T/security-t" 2>&1); rc=$?
ok $rc "user $UB finds nothing of $UA's job in the region or in its copy of the client table ($out)"
out=$(as "$UB" "$ROTA" status --socket "$S" 2>&1); rc=$?
[ "$rc" = 0 ] && ! echo "$out" | grep -q "rotaprivjob" && ! echo "$out" | grep -qw "$HPID" &&
    echo "$out" | grep -q "1 client(s) of other users not shown"
ok $? "rota status as $UB: no pid or command of $UA's job, one client not shown"
out=$(as "$UB" "$ROTA" status --json --socket "$S" 2>&1); rc=$?
[ "$rc" = 0 ] && ! echo "$out" | grep -q "rotaprivjob" && echo "$out" | grep -q '"hidden_clients":1' &&
    echo "$out" | grep -q '"reserved":100'
ok $? "rota status --json as $UB: hidden_clients 1, the node's total (100 reserved) still shown"
out=$(as "$UB" "$ROTA" metrics --socket "$S" 2>&1); rc=$?
[ "$rc" = 0 ] && ! echo "$out" | grep -q "rotaprivjob" && ! echo "$out" | grep -q "pid=\"$HPID\"" &&
    echo "$out" | grep -q '^rota_clients 1$'
ok $? "rota metrics as $UB: no series of $UA's job, rota_clients 1"
out=$(as "$UA" "$ROTA" status --socket "$S" 2>&1); rc=$?
[ "$rc" = 0 ] && echo "$out" | grep -q "^$HPID .*rotaprivjob"
ok $? "rota status as $UA shows its own job"
out=$("$ROTA" status --socket "$S" 2>&1); rc=$?
[ "$rc" = 0 ] && echo "$out" | grep -q "^$HPID .*rotaprivjob" && ! echo "$out" | grep -q "not shown"
ok $? "rota status as root shows every job"
kill -9 "$HPID" 2>/dev/null
wait "$HPID" 2>/dev/null

# The policy may allow it: a rotad with 'high-user UA' on another socket.
echo "high-user $UA" > "$T/policy.conf"
S2=$T/rotad2.sock
start root "$S2" --config "$T/policy.conf"; ok $? "a root rotad with 'high-user $UA'"
out=$(as "$UA" env SECURITY_T_ATTACK=high ROTA_SOCKET="$S2" "$T/security-t" 2>&1); rc=$?
[ "$rc" = 1 ] && [ "$out" = "registered as high" ]; ok $? "lets $UA run high ($out)"
out=$(as "$UB" env SECURITY_T_ATTACK=high ROTA_SOCKET="$S2" "$T/security-t" 2>&1); rc=$?
ok $rc "but not $UB ($out)"

# Impersonation: UB runs a rotad and opens its socket to everyone; UA's client and root's refuse it.
mkdir "$T/b" && chown "$UB" "$T/b" && chmod 755 "$T/b"
start "$UB" "$T/b/rotad.sock"; ok $? "user $UB runs a rotad of its own"
chmod 666 "$T/b/rotad.sock"
out=$(as "$UA" env SECURITY_T_ATTACK=connect ROTA_SOCKET="$T/b/rotad.sock" "$T/security-t" 2>&1); rc=$?
[ "$rc" = 3 ] && echo "$out" | grep -q "refusing the rotad at .* it runs as uid $(id -u "$UB")"
ok $? "user $UA's client refuses $UB's rotad with one clear line ($out)"
out=$(SECURITY_T_ATTACK=connect ROTA_SOCKET="$T/b/rotad.sock" "$T/security-t" 2>&1); rc=$?
[ "$rc" = 3 ]; ok $? "so does root's ($out)"
out=$(as "$UB" env SECURITY_T_ATTACK=connect ROTA_SOCKET="$T/b/rotad.sock" "$T/security-t" 2>&1); rc=$?
ok $rc "while $UB's own client uses it ($out)"

echo "1..$n"
exit $fail
