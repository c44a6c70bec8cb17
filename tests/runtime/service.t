#!/bin/sh
# service.t - rotad as the node's service: READY=1 / RELOADING=1 / STOPPING=1 over a NOTIFY_SOCKET of the test's
# own; SIGHUP reloads --config without dropping a client (a bad file keeps the old one and logs FILE:LINE); --log
# FILE and a detached rotad that writes nothing to the terminal; contrib/systemd/rotad.service passes
# `systemd-analyze verify` (where installed) and `make install DESTDIR=...` puts it under lib/systemd/system.
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
: "${ROTA_SRCDIR:?ROTA_SRCDIR must name the source folder}"
ROTA=$ROTA_BUILD/bin/rota
ROTAD=$ROTA_BUILD/bin/rotad
WL=$ROTA_BUILD/bin/workload
T=$(mktemp -d /tmp/rota-service-t.XXXXXX)
S=$T/rotad.sock
NODE=rota-service-t-$$
PIDS=""
n=0
fail=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
cleanup() { for p in $PIDS; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; rm -f "/dev/shm/$NODE"; }
trap cleanup EXIT
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 missing"; exit 0; }
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
unset CUDA_VISIBLE_DEVICES LD_PRELOAD ROTA_PRIORITY ROTA_WEIGHT ROTA_MEM_LIMIT ROTA_GPU ROTA_LIBROTA ROTA_TRACE NOTIFY_SOCKET
export SIMCUDA_NODE=$NODE SIMCUDA_MEM=1G ROTA_SOCKET=$S
# waitfor FILE PATTERN: up to 10 s for a line matching PATTERN
waitfor() { for i in $(seq 200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done; return 1; }

# the test's own notify socket: every datagram, one per line ('|' for newlines)
python3 -c "
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.bind('$T/notify'); s.settimeout(30)
with open('$T/notified', 'a') as f:
    while True:
        try: d = s.recv(4096)
        except socket.timeout: break
        f.write(d.decode().replace('\n', '|') + '\n'); f.flush()
        if d.startswith(b'STOPPING=1'): break
" &
NP=$!
PIDS="$PIDS $NP"
for i in $(seq 100); do [ -S "$T/notify" ] && break; sleep 0.05; done

printf 'group / limit 1G\ncredit 0\n' >"$T/rotad.conf"
NOTIFY_SOCKET=$T/notify ROTA_LOG=info "$ROTAD" --foreground --no-probe --socket "$S" --config "$T/rotad.conf" \
    2>>"$T/log" &
RPID=$!
PIDS="$PIDS $RPID"
waitfor "$T/notified" "^READY=1|STATUS=serving|MAINPID=$RPID|"; ok $? "READY=1 with MAINPID over NOTIFY_SOCKET"
"$ROTA" status --sample 0 >/dev/null; ok $? "rotad serves once it said READY=1"

"$ROTA" run -- "$WL" --kind batch --duration 4 --mem 256M --out "$T/a.json" 2>>"$T/jobs" &
JA=$!
PIDS="$PIDS $JA"
for i in $(seq 100); do "$ROTA" status --json --sample 0 | grep -q '"comm":"workload"' && break; sleep 0.05; done
cpid=$("$ROTA" status --json --sample 0 | python3 -c 'import json,sys; print(json.load(sys.stdin)["clients"][0]["pid"])')
[ -n "$cpid" ]; ok $? "a client registered (pid $cpid)"

groups() { "$ROTA" status --json --sample 0 | python3 -c 'import json,sys; print(" ".join("%s=%d" % (g["path"], g["limit"]) for g in json.load(sys.stdin)["groups"]))'; }
printf '# more room\ngroup / limit 2G\ncredit 0\n' >"$T/rotad.conf"
kill -HUP $RPID
waitfor "$T/log" "SIGHUP: reloaded"; ok $? "SIGHUP: rotad logs the reload: $(grep 'SIGHUP' "$T/log" | tail -1)"
g=$(groups)
[ "$g" = "/=2147483648" ]; ok $? "the new limit applies ($g)"
waitfor "$T/notified" "^RELOADING=1"; ok $? "RELOADING=1 over NOTIFY_SOCKET"
[ "$(grep -c '^READY=1' "$T/notified")" = 2 ]; ok $? "then READY=1 again"
"$ROTA" status --json --sample 0 | grep -q "\"pid\":$cpid,"; ok $? "the client is still registered"

printf 'group / limit 3G\ngroup /batch limits 1G\n' >"$T/rotad.conf"
kill -HUP $RPID
waitfor "$T/log" "config not reloaded"; ok $? "a bad file is refused"
grep -q "config not reloaded, keeping the current one: $T/rotad.conf:2: expected 'group CGROUP-PATH limit SIZE'" "$T/log"
ok $? "the log names FILE:LINE"
g=$(groups)
[ "$g" = "/=2147483648" ]; ok $? "the old limit stays ($g)"

printf 'group / limit 3G\ngroup /batch limit 1G\n' >"$T/rotad.conf"
kill -HUP $RPID
for i in $(seq 100); do [ "$(grep -c 'config not reloaded' "$T/log")" = 2 ] && break; sleep 0.05; done
grep -q "config not reloaded, keeping the current one: $T/rotad.conf: its group and user lines name other groups" "$T/log"
ok $? "a file naming other groups is refused, with the reason"
g=$(groups)
[ "$g" = "/=2147483648" ]; ok $? "the old limit stays ($g)"
"$ROTA" status --json --sample 0 | grep -q "\"pid\":$cpid,"; ok $? "the client is still registered"
wait $JA; ok $? "the client ran to its end across three reloads"

kill -TERM $RPID; wait $RPID; ok $? "rotad stops cleanly"
waitfor "$T/notified" "^STOPPING=1"; ok $? "STOPPING=1 over NOTIFY_SOCKET"
wait $NP

# without --config, SIGHUP only says so
mkfifo "$T/ready"
ROTA_LOG=info "$ROTAD" --foreground --no-probe --socket "$S" --notify-fd 3 3>"$T/ready" 2>"$T/log2" &
RPID=$!
PIDS="$PIDS $RPID"
timeout 10 head -c 1 "$T/ready" >/dev/null
kill -HUP $RPID
waitfor "$T/log2" "SIGHUP: no --config file to reload"; ok $? "SIGHUP without --config: a warning"
"$ROTA" status --sample 0 >/dev/null; ok $? "and rotad still serves"
kill -TERM $RPID; wait $RPID

# usage errors
NOTIFY_SOCKET=relative/path "$ROTAD" --foreground --no-probe --socket "$S" 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "NOTIFY_SOCKET" "$T/err"; ok $? "a relative NOTIFY_SOCKET: usage error"
"$ROTAD" --foreground --no-probe --socket "$S" --log "$T/no/such/dir/log" 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "^rotad: fatal: --log: unable to open $T/no/such/dir/log" "$T/err"; ok $? "--log into a missing folder: usage error"

# detached: nothing on the terminal, the log in the --log file
ROTA_LOG=info "$ROTAD" --no-probe --socket "$S" --log "$T/d.log" >"$T/term.out" 2>"$T/term.err"; rc=$?
[ $rc = 0 ]; ok $? "detached rotad: the parent exits 0"
[ ! -s "$T/term.out" ] && [ ! -s "$T/term.err" ]; ok $? "it wrote nothing to the terminal"
DPID=$("$ROTA" status --json --sample 0 | sed 's/.*"rotad_pid":\([0-9]*\).*/\1/')
PIDS="$PIDS $DPID"
grep -q "^rotad: info: listening on $S (pid $DPID" "$T/d.log"; ok $? "its log is in the --log file"
kill -TERM "$DPID"; for i in $(seq 100); do [ -e "$S" ] || break; sleep 0.05; done
waitfor "$T/d.log" "^rotad: info: stopped"; ok $? "down to its last line"

# the unit
U=$ROTA_SRCDIR/contrib/systemd/rotad.service.in
sed "s|@BINDIR@|$ROTA_BUILD/bin|g" "$U" >"$T/rotad.service"
grep -q '^Type=notify$' "$T/rotad.service" && grep -q '^ExecReload=/bin/kill -HUP \$MAINPID$' "$T/rotad.service" &&
    grep -q '^RuntimeDirectory=rota$' "$T/rotad.service" && grep -q -- '--foreground --log stderr' "$T/rotad.service"
ok $? "rotad.service: Type=notify, ExecReload sends SIGHUP, RuntimeDirectory=rota, journald log"
if command -v systemd-analyze >/dev/null; then
    systemd-analyze verify "$T/rotad.service" >"$T/verify" 2>&1; rc=$?
    [ $rc = 0 ] && [ ! -s "$T/verify" ]; ok $? "systemd-analyze verify: no error, no warning $(tr '\n' ' ' <"$T/verify")"
else
    skip "systemd-analyze not installed"
fi
if command -v make >/dev/null && [ -f "$ROTA_SRCDIR/Makefile" ]; then
    make -s -C "$ROTA_SRCDIR" install B="$ROTA_BUILD" DESTDIR="$T/dest" PREFIX=/usr >"$T/install" 2>&1
    ok $? "make install DESTDIR=... PREFIX=/usr"
    grep -q "^ExecStart=/usr/bin/rotad --foreground" "$T/dest/usr/lib/systemd/system/rotad.service"
    ok $? "it installs the unit under \$(DESTDIR)\$(PREFIX)/lib/systemd/system, ExecStart in \$(BINDIR)"
else
    skip "make missing"
    skip "make missing"
fi
echo "1..$n"
exit $fail
