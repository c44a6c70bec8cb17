#!/bin/sh
# workload-arrivals.t - workload --arrivals periodic: one request every service/load ns on a fixed clock, and with
# --jitter each arrival within its share of the period around its tick; Poisson arrivals are not periodic.
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
W=$ROTA_BUILD/bin/workload
T=$(mktemp -d /tmp/rota-workload-arrivals-t.XXXXXX)
NODE="workload-arrivals-t-$$"
export SIMCUDA_NODE="$NODE"
trap 'rm -rf "$T" "/dev/shm/$NODE"' EXIT
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
# infer OUT [OPTIONS]: 12 requests of one 100 us kernel at load 0.5 (a period of 200 us)
infer() { out=$1; shift; "$W" --kind infer --mem 1M --blocks 1 --kernels 100 --add 0 --load 0.5 --requests 12 --out "$out" "$@"; }
# gaps FILE: the record's intervals between consecutive arrivals, ns, one a line
gaps() { sed -n 's/.*"arrival_ns": \[\([^]]*\)\].*/\1/p' "$1" | tr ',' '\n' | awk 'NR > 1 { print $1 - p } { p = $1 }'; }

echo "1..6"
infer "$T/p.json" --arrivals periodic; ok $? "periodic: exit 0"
g=$(gaps "$T/p.json")
[ "$(echo "$g" | wc -l)" = 11 ] && [ "$(echo "$g" | sort -u)" = 200000 ]; ok $? "periodic: every arrival 200 us after the one before ($(echo $g))"
infer "$T/j.json" --arrivals periodic --jitter 0.2; ok $? "periodic with --jitter 0.2: exit 0"
g=$(gaps "$T/j.json")
echo "$g" | awk '$1 < 120000 || $1 > 280000 { bad = 1 } END { exit bad || NR != 11 }' && [ "$(echo "$g" | sort -u | wc -l)" -gt 1 ]
ok $? "jitter: the gaps vary, within 200 us +- 2 x 20 % ($(echo $g))"
infer "$T/x.json" --arrivals periodic --jitter 0.6 2>/dev/null; [ $? = 2 ]; ok $? "--jitter above 0.5: a usage error (exit 2)"
infer "$T/q.json"
[ "$(gaps "$T/q.json" | sort -u | wc -l)" -gt 5 ]; ok $? "poisson (the default): the gaps differ"
