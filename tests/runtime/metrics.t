#!/bin/sh
# metrics.t - rotad --metrics-listen and rota metrics: a scrape of a rotad serving a high, a low and a memory-waiting
# job is valid Prometheus text (strict checks here; promtool check metrics where installed), agrees with two
# rota status --json taken around it, counts holds by reason and queue-instead-of-OOM outcomes, survives idle
# connections past its cap; bad --metrics-listen values are usage errors; rota metrics prints the same families.
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
: "${ROTA_SRCDIR:?ROTA_SRCDIR must name the source folder}"
ROTA=$ROTA_BUILD/bin/rota
ROTAD=$ROTA_BUILD/bin/rotad
WL=$ROTA_BUILD/bin/workload
PC="python3 $ROTA_SRCDIR/tests/runtime/promcheck.py"
T=$(mktemp -d /tmp/rota-metrics-t.XXXXXX)
S=$T/rotad.sock
NODE=rota-metrics-t-$$
PIDS=""
n=0
fail=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
cleanup() { for p in $PIDS; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; rm -f "/dev/shm/$NODE"; }
trap cleanup EXIT
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 missing"; exit 0; }
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
unset CUDA_VISIBLE_DEVICES LD_PRELOAD ROTA_PRIORITY ROTA_WEIGHT ROTA_MEM_LIMIT ROTA_GPU ROTA_LIBROTA ROTA_TRACE
export SIMCUDA_NODE=$NODE SIMCUDA_MEM=1G ROTA_SOCKET=$S

# usage errors
for v in 70000 "127.0.0.1:" "localhost:9" "1.2.3.4.5:80" "[::1]" ""; do
    "$ROTAD" --foreground --no-probe --socket "$S" --metrics-listen "$v" 2>"$T/err"; rc=$?
    [ $rc = 2 ] && grep -qF "rotad: fatal: --metrics-listen: '$v' is not" "$T/err"; ok $? "--metrics-listen '$v': usage error (rc $rc)"
done
"$ROTA" metrics --bogus 2>/dev/null; rc=$?; [ $rc = 2 ]; ok $? "rota metrics --bogus: 2"
"$ROTA" metrics >"$T/none" 2>/dev/null; rc=$?; [ $rc = 1 ] && [ ! -s "$T/none" ]; ok $? "rota metrics without rotad: 1, nothing printed"

mkfifo "$T/ready"
ROTAD_BIN=$ROTAD
"$ROTAD" --foreground --no-probe --socket "$S" --metrics-clients 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -qF "only with --metrics-listen" "$T/err"; ok $? "--metrics-clients alone: usage error (rc $rc)"
ROTA_LOG=info "$ROTAD" --foreground --no-probe --socket "$S" --metrics-listen 127.0.0.1:0 --metrics-clients \
    --notify-fd 3 3>"$T/ready" 2>>"$T/log" &
RPID=$!
PIDS="$PIDS $RPID"
for _ in $(seq 100); do [ -s "$T/ready" ] || ! kill -0 $RPID 2>/dev/null && break; sleep 0.1; done
if grep -q "built without GNU libmicrohttpd" "$T/log"; then
    echo "1..$n # SKIP rotad was built without GNU libmicrohttpd (libmicrohttpd-dev)"
    exit 0
fi
timeout 10 head -c 1 "$T/ready" >/dev/null; ok $? "rotad is up"
PORT=$(sed -n 's|.*serving metrics on http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$T/log")
[ -n "$PORT" ]; ok $? "rotad logs the metrics address (port $PORT)"

# a high request server, a low batch job sharing the GPU with it, and a job that must wait for memory
export ROTA_TRACE=$T/trace.jsonl # the jobs' decisions, for rota trace below
"$ROTA" run --priority high --mem 384M -- "$WL" --kind infer --load 0.3 --duration 4 --mem 384M --out "$T/a.json" \
    2>>"$T/jobs" &
JA=$!
"$ROTA" run --priority low --mem 384M -- "$WL" --kind batch --duration 4 --kernels 500 --mem 384M --out "$T/b.json" \
    2>>"$T/jobs" &
JB=$!
PIDS="$PIDS $JA $JB"
sleep 1.5
"$ROTA" run --gpu 0 -- "$WL" --kind batch --iters 3 --mem 512M --out "$T/c.json" 2>>"$T/jobs" &
JC=$!
PIDS="$PIDS $JC"
sleep 1
"$ROTA" status --json --sample 0 >"$T/s1.json"
$PC fetch 127.0.0.1 "$PORT" "$T/m1.txt" 2>"$T/err"; ok $? "GET /metrics: 200, text format 0.0.4 ($(cat "$T/err"))"
"$ROTA" status --json --sample 0 >"$T/s2.json"
$PC format "$T/m1.txt" >"$T/out" 2>&1; ok $? "the scrape passes the strict format checks: $(cat "$T/out")"
$PC compare "$T/m1.txt" "$T/s1.json" "$T/s2.json" >"$T/out" 2>&1; ok $? "values agree with rota status --json: $(cat "$T/out")"
[ "$($PC value "$T/m1.txt" rota_clients)" = 3.000000000 ]; ok $? "three clients"
w=$($PC value "$T/m1.txt" rota_client_memory_waiting_bytes class=normal)
python3 -c "import sys; sys.exit(not float('$w') > 0)"; ok $? "the third job's allocation is queued ($w bytes)"
[ "$($PC value "$T/m1.txt" rota_gpu_memory_waiters)" = 1.000000000 ]; ok $? "one waiter on the GPU"
h=$($PC value "$T/m1.txt" rota_client_held_seconds_total class=low reason=priority)
python3 -c "import sys; sys.exit(not float('$h') > 0)"; ok $? "the low job was held for priority ($h s)"
h=$($PC value "$T/m1.txt" rota_gpu_hold_latency_seconds_count)
python3 -c "import sys; sys.exit(not float('$h') > 0)"; ok $? "hold latency histogram has observations ($h)"
if command -v promtool >/dev/null; then
    promtool check metrics <"$T/m1.txt" >"$T/out" 2>&1; ok $? "promtool check metrics: $(tr '\n' ' ' <"$T/out")"
else
    skip "promtool not installed (Debian package prometheus)"
fi

# idle connections past the cap: rotad keeps serving its clients and, once they go, scrapes again
$PC idle 127.0.0.1 "$PORT" 24 1 &
IP=$!
sleep 0.3
"$ROTA" status --sample 0 >/dev/null; ok $? "rota status answers while 24 idle connections are open"
wait $IP
$PC fetch 127.0.0.1 "$PORT" "$T/m2.txt" 2>"$T/err"; ok $? "scrape after they close ($(cat "$T/err"))"
printf 'GET /nothing HTTP/1.0\r\n\r\n' >"$T/req"
python3 -c "
import socket,sys
s=socket.create_connection(('127.0.0.1',$PORT)); s.sendall(open('$T/req','rb').read()); d=s.recv(100)
sys.exit(not d.startswith(b'HTTP/1.1 404'))"; ok $? "another path: 404"
python3 -c "
import socket,sys
s=socket.create_connection(('127.0.0.1',$PORT)); s.settimeout(5); s.sendall(b'GET /metrics'+b'x'*20000); d=s.recv(100)
sys.exit(not (d.startswith(b'HTTP/1.1 431') or d.startswith(b'HTTP/1.1 414')))"; ok $? "an endless request line: 414 or 431"
# issue 32, item 6: a request with a NUL byte is answered, not kept; a slowloris from one address (40 half-sent
# requests trickling a byte every 0.5 s, a new one every 20 ms) does not keep another address's scrapes out
timeout 10 python3 -c "
import socket,sys
s=socket.create_connection(('127.0.0.1',$PORT)); s.settimeout(3)
s.sendall(b'GET /metr\x00ics HTTP/1.1\r\nHost: x\r\n\r\n'); d=s.recv(100)
sys.exit(not d.startswith(b'HTTP/1.1 4'))"; ok $? "a request with a NUL byte is refused at once, not kept"
timeout 60 python3 - "$PORT" >"$T/slow" 2>&1 <<'P'
import socket, sys, time, threading
port = int(sys.argv[1])
stop = False
held = []
def attack():
    last = 0
    while not stop:
        if len(held) < 40 or time.time() - last > 0.02:
            try:
                s = socket.socket(); s.bind(('127.0.0.2', 0)); s.settimeout(0.5)
                s.connect(('127.0.0.1', port)); s.sendall(b'GET /metrics HTTP/1.1\r\nX-a: '); held.append(s)
            except OSError:
                pass
            last = time.time()
        for s in list(held[:40]):
            try: s.send(b'a')
            except OSError: held.remove(s)
        time.sleep(0.02)
t = threading.Thread(target=attack); t.start()
time.sleep(1)
good = 0
for i in range(20):
    try:
        s = socket.create_connection(('127.0.0.1', port), timeout=2); s.settimeout(2)
        s.sendall(b'GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
        d = b''
        while True:
            b = s.recv(65536)
            if not b: break
            d += b
        good += d.startswith(b'HTTP/1.1 200') and b'rota_clients' in d
    except OSError:
        pass
    time.sleep(0.25)
stop = True; t.join()
print(good)
sys.exit(0 if good == 20 else 1)
P
ok $? "20 of 20 scrapes through during a slowloris from another address (got $(cat "$T/slow"))"

wait $JA; ok $? "the high job ran"
wait $JB; ok $? "the low job ran"
wait $JC; ok $? "the waiting job got its memory and ran"
unset ROTA_TRACE
"$ROTA" trace -o "$T/trace.json" "$T/trace.jsonl" 2>"$T/err"; ok $? "rota trace of the jobs' ROTA_TRACE: $(cat "$T/err")"
python3 - "$T/trace.json" "$JB" "$JC" >"$T/out" 2>&1 <<'P'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
low, waiter = int(sys.argv[2]), int(sys.argv[3])
held = [e for e in ev if e["name"] == "held (prio)" and e["pid"] == low]
waits = [e for e in ev if e["name"] == "memory wait (granted)" and e["pid"] == waiter]
assert held and all(e["ph"] == "X" and e["dur"] >= 0 for e in held), "no priority hold of the low job"
long = max((e["dur"] for e in waits), default=0)
assert long > 500000, waits
print("%d priority holds of the low job, the third job's longest wait %.0f ms" % (len(held), long / 1000))
P
ok $? "the trace shows the low job held for priority and the third job's memory wait: $(cat "$T/out")"
"$ROTA" metrics >"$T/m3.txt"; ok $? "rota metrics exits 0"
$PC format "$T/m3.txt" >"$T/out" 2>&1; ok $? "rota metrics passes the strict format checks: $(cat "$T/out")"
g=$($PC value "$T/m3.txt" rota_gpu_memory_waits_total outcome=granted)
[ "$g" = 1.000000000 ]; ok $? "one memory wait granted ($g)"
ws=$($PC value "$T/m3.txt" rota_gpu_memory_wait_seconds_total)
python3 -c "import sys; sys.exit(not float('$ws') > 0.5)"; ok $? "it waited for the first jobs' memory ($ws s)"
$PC fetch 127.0.0.1 "$PORT" "$T/m4.txt" 2>/dev/null
[ "$(grep -v '^rota_start_time' "$T/m3.txt" | grep -c .)" = "$(grep -v '^rota_start_time' "$T/m4.txt" | grep -c .)" ] &&
    [ "$(cut -d' ' -f1 "$T/m3.txt" | md5sum)" = "$(cut -d' ' -f1 "$T/m4.txt" | md5sum)" ]
ok $? "rota metrics prints the series the endpoint serves"

kill -TERM $RPID; wait $RPID; ok $? "rotad stops cleanly"

# Without --metrics-clients the endpoint, which cannot tell who scrapes it, serves no client's pid or command;
# rota metrics, which rotad answers per uid, still shows root every client.
S2=$T/rotad2.sock
rm -f "$T/ready2"; mkfifo "$T/ready2"
ROTA_LOG=info "$ROTAD_BIN" --foreground --no-probe --socket "$S2" --metrics-listen 127.0.0.1:0 --notify-fd 3 \
    3>"$T/ready2" 2>>"$T/log2" &
RPID2=$!
PIDS="$PIDS $RPID2"
timeout 10 head -c 1 "$T/ready2" >/dev/null; ok $? "a rotad without --metrics-clients is up"
PORT2=$(sed -n 's|.*serving metrics on http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$T/log2")
ROTA_SOCKET=$S2 "$ROTA" run -- "$WL" --kind batch --duration 3 --mem 64M --out "$T/d.json" 2>>"$T/jobs" &
JD=$!
PIDS="$PIDS $JD"
for i in $(seq 50); do
    ROTA_SOCKET=$S2 "$ROTA" metrics >"$T/m6.txt" 2>/dev/null
    grep -q "^rota_client_memory_used_bytes{pid=\"$JD\"" "$T/m6.txt" && break
    sleep 0.1
done
$PC fetch 127.0.0.1 "$PORT2" "$T/m5.txt" 2>"$T/err"
[ "$($PC value "$T/m5.txt" rota_clients)" = 1.000000000 ] && ! grep -q '^rota_client_\|^rota_group_' "$T/m5.txt"
ok $? "the endpoint counts the job (rota_clients 1) but serves no per-client sample"
grep -q "^rota_client_memory_used_bytes{pid=\"$JD\"" "$T/m6.txt"
ok $? "rota metrics (root, through the socket) shows the job's series"
wait $JD; ok $? "that job ran"
kill -TERM $RPID2; wait $RPID2; ok $? "the second rotad stops cleanly"
echo "1..$n"
exit $fail
