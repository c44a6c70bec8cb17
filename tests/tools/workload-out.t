#!/bin/sh
# workload-out.t - workload --out never replaces what is not a regular file: a FIFO stays a FIFO, and (as root,
# inside a private mount namespace whose /dev is a tmpfs of the test's own) /dev/null stays a character device.
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
W=$ROTA_BUILD/bin/workload
T=$(mktemp -d /tmp/rota-workload-out-t.XXXXXX)
NODE="workload-out-t-$$"
export SIMCUDA_NODE="$NODE"
trap 'rm -rf "$T" "/dev/shm/$NODE"' EXIT
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
skip() { n=$((n + 1)); echo "ok $n # skip $1"; }
job() { "$W" --kind batch --mem 1M --blocks 1 --kernels 100 --iters 2 --add 0 --out "$1"; }

echo "1..7"
job "$T/rec.json"; ok $? "a regular file: exit 0"
grep -q '"status": "ok"' "$T/rec.json"; ok $? "the record is written"
[ -z "$(find "$T" -name 'rec.json.*')" ]; ok $? "no temporary file is left beside it"

mkfifo "$T/fifo"
timeout 30 cat "$T/fifo" > "$T/fifo.out" &  # bounded: a regression never opens the FIFO
job "$T/fifo"; ok $? "a FIFO: exit 0"
wait
[ -p "$T/fifo" ]; ok $? "the FIFO is still a FIFO"
grep -q '"status": "ok"' "$T/fifo.out"; ok $? "the record went through the FIFO"

# /dev/null as root: in a mount namespace of its own with a private /dev, so that a regression replaces only the
# test's own null node, never the machine's.
if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
    skip "not root or no mount namespaces"
else
    unshare -m sh -c '
        mount --make-rprivate / && mount -t tmpfs -o size=64m rota-t /dev && mkdir /dev/shm &&
        mknod -m 666 /dev/null c 1 3 || exit 99
        "$0" --kind batch --mem 1M --blocks 1 --kernels 100 --iters 2 --add 0 --out /dev/null || exit 98
        [ -c /dev/null ]' "$W"
    rc=$?; [ $rc = 0 ]; ok $? "as root, --out /dev/null leaves a character device (rc $rc)"
fi
