#!/bin/sh
# metrics-cost.sh - what scraping rotad --metrics-listen costs rotad, with N registered clients (docs/operating.md).
# usage: tools/bench/metrics-cost.sh [BUILD [N [SECONDS]]]   (defaults: build, 100, 60)
# Starts its own rotad (a temporary socket, 127.0.0.1 and a free port), registers N idle clients
# (idle-clients), then reads rotad's CPU time (utime + stime, /proc/PID/stat) over SECONDS without scraping,
# over SECONDS with one scrape a second, and over 1000 scrapes back to back. Needs curl.
set -eu
B=$(cd "${1:-build}" && pwd)
N=${2:-100}
SECS=${3:-60}
command -v curl >/dev/null || { echo "metrics-cost.sh: fatal: curl is needed" >&2; exit 1; }
T=$(mktemp -d /tmp/rota-metrics-cost.XXXXXX)
RP=""
CP=""
trap 'for p in $CP $RP; do kill "$p" 2>/dev/null || true; done; rm -rf "$T"' EXIT
export ROTA_SOCKET=$T/rotad.sock
mkfifo "$T/ready"
ROTA_LOG=info "$B/bin/rotad" --foreground --no-probe --socket "$ROTA_SOCKET" --metrics-listen 127.0.0.1:0 \
    --notify-fd 3 3>"$T/ready" 2>"$T/log" &
RP=$!
head -c 1 "$T/ready" >/dev/null
URL=$(sed -n 's|.*serving metrics on \(http://[^ ]*\)$|\1|p' "$T/log")
"$B/bin/idle-clients" "$N" >"$T/clients" &
CP=$!
for i in $(seq 200); do grep -q ready "$T/clients" && break; sleep 0.05; done
hz=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$RP/stat"; }
pct() { awk -v t="$1" -v s="$2" -v hz="$hz" 'BEGIN { printf "%.3f", 100 * t / hz / s }'; }
echo "rotad $(sed -n 's/.*(pid \([0-9]*\).*/\1/p' "$T/log"), $N clients, a scrape of $(curl -s "$URL" | wc -c) bytes; $hz ticks/s"
a=$(cpu); sleep "$SECS"; b=$(cpu)
echo "no scrape, $SECS s: $((b - a)) ticks, $(pct $((b - a)) "$SECS") % of a core"
a=$(cpu); t0=$(date +%s.%N)
for i in $(seq "$SECS"); do curl -s "$URL" >/dev/null; sleep 1; done
b=$(cpu); t1=$(date +%s.%N)
s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
echo "one scrape a second, $s s: $((b - a)) ticks, $(pct $((b - a)) "$s") % of a core"
a=$(cpu); t0=$(date +%s.%N)
for i in $(seq 1000); do curl -s "$URL" >/dev/null; done
b=$(cpu); t1=$(date +%s.%N)
echo "1000 scrapes back to back in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s: $((b - a)) ticks," \
    "$(awk -v t=$((b - a)) -v hz="$hz" 'BEGIN { printf "%.2f", 1000 * t / hz / 1000 }') ms of CPU per scrape"
