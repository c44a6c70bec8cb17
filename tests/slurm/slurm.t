#!/usr/bin/env bash
# slurm.t - the SPANK plugin in a private one-node Slurm cluster (contrib/slurm/minicluster: munged on its own
# socket and key, slurmctld and slurmd on loopback, all state in this test's temp folder) with simcuda GPUs and a
# rotad on a temp socket: srun/sbatch/salloc jobs are coordinated with the class, weight and memory limit they
# asked for (shards -> limit, --rota-mem wins), nested steps preload librota once, bad options are refused at
# submission, a job without options gets the node's default, --rota=off runs without librota. Skipped where Slurm
# or the plugin is missing (.ci/run installs Debian's slurmctld slurmd slurm-client munge libslurm-dev).
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
: "${ROTA_SRCDIR:?ROTA_SRCDIR must name the source folder}"
SPANK=$ROTA_BUILD/lib/rota-spank.so
for b in munged slurmctld slurmd srun sbatch python3; do
    command -v $b >/dev/null 2>&1 || { echo "1..0 # SKIP $b not installed (apt-get install slurmctld slurmd slurm-client munge libslurm-dev)"; exit 0; }
done
[ -f "$SPANK" ] || { echo "1..0 # SKIP $SPANK not built (no /usr/include/slurm/spank.h)"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "1..0 # SKIP the private cluster runs SlurmUser=root: needs root"; exit 0; }
# clang sanitizer builds: librota.so needs clang's shared runtime first in LD_PRELOAD, which the jobs' uninstrumented
# sh cannot be given (tests/runtime/run.t skips the same cases)
[ -z "${ROTA_SANITIZER_RT:-}" ] || { echo "1..0 # SKIP clang sanitizer build: librota.so cannot be preloaded into uninstrumented job commands"; exit 0; }
# gcc's ASan librota.so loads its runtime itself; preloaded into sh or touch, the runtime cannot come first
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0:detect_leaks=0"

T=$(mktemp -d /tmp/rota-slurm-t.XXXXXX)
MC=$ROTA_SRCDIR/contrib/slurm/minicluster
NODE=rota-slurm-t-$$
RPID=""
cleanup() {
    for c in "$T/c" "$T/c2" "$T/c3" "$T/c4"; do "$MC" stop "$c" >/dev/null 2>&1; done
    [ -z "$RPID" ] || { kill -TERM "$RPID" 2>/dev/null; sleep 0.2; kill -KILL "$RPID" 2>/dev/null; }
    rm -rf "$T" "/dev/shm/$NODE"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
n=0
fail=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }
bail() { echo "Bail out! $*"; for f in "$T"/c/*.log "$T/rotad.log"; do [ -f "$f" ] && sed 's/^/# /' "$f" | tail -20; done; exit 1; }

unset LD_PRELOAD ROTA_PRIORITY ROTA_WEIGHT ROTA_MEM_LIMIT ROTA_GPU ROTA_LIBROTA CUDA_VISIBLE_DEVICES
export LD_LIBRARY_PATH=$ROTA_BUILD/lib SIMCUDA_NODE=$NODE SIMCUDA_DEVICES=2 SIMCUDA_MEM=4G ROTA_LOG=error
S=$T/rotad.sock
# the node: 2 GPUs of 4G, 4 shards each (1G a shard); high and low allowed, low by default, weight 2
ARGS="lib=$ROTA_BUILD/lib/librota.so socket=$S default=on allow=high,low priority=low weight=2 gpu_mem=4G shards=4"
timeout 60 "$MC" start "$T/c" --gpus 2 --shards-per-gpu 4 --plugin "$SPANK" --plugargs "$ARGS" >/dev/null 2>"$T/mc.err" ||
    bail "the private cluster did not start: $(tail -3 "$T/mc.err")"
export SLURM_CONF=$T/c/slurm.conf
ROTA_LOG=quiet "$ROTA_BUILD/bin/rotad" --foreground --socket "$S" --notify-fd 3 3>"$T/ready" 2>>"$T/rotad.log" &
RPID=$!
for _ in $(seq 100); do [ -s "$T/ready" ] && break; sleep 0.1; done
[ -s "$T/ready" ] || bail "rotad did not start"

WL="$ROTA_BUILD/bin/workload --kind train --mem 64M --kernels 200 --gap-us 2000 --duration 6"
# status_check 'python expression over the one client c' label: polls rota status --json (20 s) until one
# workload client is there, then evaluates the expression
status_check() {
    timeout 25 python3 - "$ROTA_BUILD/bin/rota" "$S" "$1" <<'PY'
import json, subprocess, sys, time
rota, sock, expr = sys.argv[1:]
for _ in range(200):
    out = subprocess.run([rota, "status", "--json", "--socket", sock], capture_output=True, text=True).stdout
    try:
        cl = [c for c in json.loads(out)["clients"] if c["comm"].startswith("workload")]
    except ValueError:
        cl = []
    if len(cl) == 1:
        c = cl[0]
        ok = eval(expr)
        if not ok: print("# client:", json.dumps(c))
        sys.exit(0 if ok else 1)
    time.sleep(0.1)
print("# no single workload client appeared")
sys.exit(1)
PY
}
G=1073741824

# 1. srun, high, weight 3, two shards: limit 2 x 1G
timeout 60 srun --rota-priority=high --rota-weight=3 --gres=shard:2 -o "$T/j1.out" $WL --out "$T/j1.json" &
J=$!
status_check "c['priority']=='high' and c['weight']==3 and c['limit']==2*$G"
ok $? "srun --rota-priority=high --rota-weight=3 --gres=shard:2: high, weight 3, limit 2G"
wait $J; ok $? "the srun job succeeded"

# 2. sbatch, low, --rota-mem wins over the shards; its nested srun preloads librota once
cat >"$T/batch.sh" <<SH
#!/bin/sh
printf '%s\n' "\$LD_PRELOAD" >"$T/batch.preload"
srun sh -c 'printf "%s\n" "\$LD_PRELOAD" >"$T/step.preload"; exec $WL --out "$T/j2.json"'
SH
timeout 60 sbatch -W -Q -o "$T/j2.out" --rota-priority=low --rota-weight=5 --rota-mem=512M --gres=shard:3 \
    "$T/batch.sh" >/dev/null &
J=$!
status_check "c['priority']=='low' and c['weight']==5 and c['limit']==512<<20"
ok $? "sbatch --rota-priority=low --rota-weight=5 --rota-mem=512M --gres=shard:3: its step is low, 5, 512M"
wait $J; ok $? "the batch job succeeded"
grep -qx "$ROTA_BUILD/lib/librota.so" "$T/batch.preload"; ok $? "the batch script has LD_PRELOAD=librota.so"
grep -qx "$ROTA_BUILD/lib/librota.so" "$T/step.preload"; ok $? "its nested srun step has librota.so once ($(cat "$T/step.preload" 2>/dev/null))"

# 3. no options: the node's default (low, weight 2), and one shard's memory
timeout 60 srun --gres=shard:1 -o "$T/j3.out" $WL --out "$T/j3.json" &
J=$!
status_check "c['priority']=='low' and c['weight']==2 and c['limit']==$G"
ok $? "srun --gres=shard:1 without options: the node's default, low, weight 2, limit 1G"
wait $J; ok $? "the default job succeeded"

# salloc's options reach the steps run in its allocation
out=$(timeout 30 salloc -Q --rota-priority=high --rota-mem=1G srun sh -c 'echo "$ROTA_PRIORITY $ROTA_MEM_LIMIT $LD_PRELOAD"' 2>&1)
[ "$out" = "high $G $ROTA_BUILD/lib/librota.so" ]; ok $? "salloc --rota-priority=high --rota-mem=1G: its srun step gets them ($out)"

# 4. the user's own LD_PRELOAD stays, after librota.so; --rota=off takes librota.so out
out=$(LD_PRELOAD=/lib/x86_64-linux-gnu/libm.so.6 timeout 30 srun --gres=shard:1 printenv LD_PRELOAD 2>&1)
[ "$out" = "$ROTA_BUILD/lib/librota.so:/lib/x86_64-linux-gnu/libm.so.6" ]; ok $? "librota.so goes first, the user's preload after ($out)"
out=$(LD_PRELOAD=$ROTA_BUILD/lib/librota.so timeout 30 srun --rota=off --gres=shard:1 sh -c 'echo "[${LD_PRELOAD-unset}]"' 2>&1)
[ "$out" = "[unset]" ]; ok $? "--rota=off: no librota.so in the job ($out)"

# 4b. issue 32: the limit the shards grant reaches rotad from the plugin, not from the job's environment; --rota-mem
# only lowers it; a user LD_PRELOAD past 8,191 characters is kept
timeout 60 srun --rota-mem=1024T --gres=shard:1 -o "$T/j4.out" $WL --out "$T/j4.json" &
J=$!
status_check "c['limit']==$G"
ok $? "srun --rota-mem=1024T --gres=shard:1: the limit stays one shard's 1G"
wait $J; ok $? "that job succeeded"
timeout 60 srun --gres=shard:1 -o "$T/j5.out" sh -c "ROTA_MEM_LIMIT=0 ROTA_PRIORITY=high exec $WL --out $T/j5.json" &
J=$!
status_check "c['limit']==$G and c['priority']=='low'"
ok $? "a job that sets ROTA_MEM_LIMIT=0 ROTA_PRIORITY=high itself still gets 1G and low from rotad"
wait $J; ok $? "that job succeeded"
long=$(printf '/lib/x86_64-linux-gnu/libm.so.6:%.0s' $(seq 300))/lib/x86_64-linux-gnu/libm.so.6
out=$(LD_PRELOAD=$long timeout 30 srun --gres=shard:1 printenv LD_PRELOAD 2>&1)
[ "$out" = "$ROTA_BUILD/lib/librota.so:$long" ]; ok $? "a user LD_PRELOAD of ${#long} characters is kept after librota.so"

# 4c. two steps at once get their own grants. This cluster runs proctrack/linuxproc: every task starts in slurmd's
# cgroup, so the plugin gives each step a cgroup of its own (rota-job<J>.<S>) to bind its grant to, and removes it
# at the step's end. The first job registers after the second one's grant was sent; sharing one cgroup, it would
# get the second one's class and limit.
CGROOT=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
timeout 60 srun --rota-priority=high --gres=shard:3 -o "$T/j6.out" sh -c "touch $T/j6.on; sleep 2; exec $WL --out $T/j6.json" &
J6=$!
for _ in $(seq 200); do [ -e "$T/j6.on" ] && break; sleep 0.1; done
timeout 60 srun --gres=shard:1 -o "$T/j7.out" $WL --out "$T/j7.json" &
J7=$!
timeout 25 python3 - "$ROTA_BUILD/bin/rota" "$S" "$G" <<'PY'
import json, subprocess, sys, time
rota, sock, g = sys.argv[1], sys.argv[2], int(sys.argv[3])
for _ in range(200):
    out = subprocess.run([rota, "status", "--json", "--socket", sock], capture_output=True, text=True).stdout
    try:
        cl = sorted((c["priority"], c["limit"]) for c in json.loads(out)["clients"] if c["comm"].startswith("workload"))
    except ValueError:
        cl = []
    if len(cl) == 2:
        print("# clients:", cl)
        sys.exit(0 if cl == [("high", 3 * g), ("low", g)] else 1)
    time.sleep(0.1)
print("# the two workload clients did not appear")
sys.exit(1)
PY
ok $? "two steps at once: the first high with 3 shards (3G), the second low with one (1G)"
wait $J6; r6=$?; wait $J7; r7=$?
[ $r6 = 0 ] && [ $r7 = 0 ]; ok $? "both jobs succeeded ($r6 $r7)"
left=$([ -n "$CGROOT" ] && find "$CGROOT" -maxdepth 4 -type d -name 'rota-job*' 2>/dev/null | head -3)
[ -n "$CGROOT" ] && [ -z "$left" ]; ok $? "the steps' cgroups are gone with them (${left:-none left} under ${CGROOT:-no cgroup2 mount})"

# 5. bad options refuse the job at submission, with one clear message and nothing run
refused() { # expected-message options...
    want=$1; shift
    timeout 30 srun "$@" touch "$T/ran" >/dev/null 2>"$T/err"; rc=$?
    [ $rc != 0 ] && grep -q "rota: $want" "$T/err" && [ ! -e "$T/ran" ]
    ok $? "srun $* refused: '$want' (rc $rc)"
}
refused "--rota-priority 'urgent': expected high, normal or low" --rota-priority=urgent
refused "--rota-priority normal is not allowed here (allowed: high, low)" --rota-priority=normal
refused "--rota-weight '0': expected a number > 0" --rota-weight=0
refused "--rota-weight 'abc'" --rota-weight=abc
refused "--rota-mem '1.5G': expected a size" --rota-mem=1.5G
refused "--rota-gpu 'x'" --rota-gpu=x
refused "--rota 'maybe': expected on or off" --rota=maybe
timeout 30 sbatch -Q --rota-priority=urgent --wrap "touch $T/ran" >/dev/null 2>"$T/err"; rc=$?
[ $rc != 0 ] && grep -q "rota: --rota-priority 'urgent'" "$T/err"; ok $? "sbatch refuses a bad option too (rc $rc)"
timeout 30 salloc -Q --rota-weight=-1 touch "$T/ran" >/dev/null 2>"$T/err"; rc=$?
[ $rc != 0 ] && grep -q "rota: --rota-weight '-1'" "$T/err" && [ ! -e "$T/ran" ]; ok $? "salloc refuses a bad option too (rc $rc)"
# a class the node does not allow, inherited from the submitting shell: the step fails, nothing runs
ROTA_PRIORITY=normal timeout 30 srun touch "$T/ran" >/dev/null 2>&1; rc=$?
[ $rc != 0 ] && [ ! -e "$T/ran" ]; ok $? "an inherited ROTA_PRIORITY the node does not allow fails the step (rc $rc)"

# 6. the node's policy: default=off (opt-in --rota=on) and place=rotad (shard jobs' binding dropped)
"$MC" stop "$T/c" >/dev/null 2>&1
ARGS="lib=$ROTA_BUILD/lib/librota.so socket=$S default=off place=rotad shard_mem=1G"
timeout 60 "$MC" start "$T/c2" --gpus 2 --shards-per-gpu 4 --plugin "$SPANK" --plugargs "$ARGS" >/dev/null 2>"$T/mc.err" ||
    bail "the second private cluster did not start: $(tail -3 "$T/mc.err")"
export SLURM_CONF=$T/c2/slurm.conf
out=$(timeout 30 srun --gres=shard:1 sh -c 'echo "[${LD_PRELOAD-unset}] [${CUDA_VISIBLE_DEVICES-unset}]"' 2>&1)
[ "$out" = "[unset] [0]" ]; ok $? "default=off: a job without --rota runs without librota, Slurm's binding kept ($out)"
out=$(timeout 30 srun --rota=on --gres=shard:2 sh -c 'echo "[$LD_PRELOAD] [${CUDA_VISIBLE_DEVICES-unset}] [$ROTA_GPU] [$ROTA_MEM_LIMIT] [$ROTA_PRIORITY]"' 2>&1)
[ "$out" = "[$ROTA_BUILD/lib/librota.so] [unset] [auto] [$((2 * G))] [normal]" ]
ok $? "--rota=on with place=rotad: rotad places the shard job, limit 2 x shard_mem, class normal ($out)"
out=$(timeout 30 srun --rota=on --gres=gpu:1 sh -c 'echo "[${CUDA_VISIBLE_DEVICES-unset}] [${ROTA_GPU-unset}]"' 2>&1)
[ "$out" = "[0] [unset]" ]; ok $? "place=rotad leaves a --gres=gpu job's binding alone ($out)"
"$MC" stop "$T/c2" >/dev/null 2>&1

# 7. a bad plugstack.conf argument fails the job rather than running it with a policy nobody meant
timeout 60 "$MC" start "$T/c3" --gpus 1 --plugin "$SPANK" --plugargs "lib=$ROTA_BUILD/lib/librota.so allow=high,urgent" \
    >/dev/null 2>"$T/mc.err"
export SLURM_CONF=$T/c3/slurm.conf
timeout 30 srun touch "$T/ran" >/dev/null 2>"$T/err"; rc=$?
[ $rc != 0 ] && grep -q "rota: plugstack.conf: bad argument 'allow=high,urgent'" "$T/err" && [ ! -e "$T/ran" ]
ok $? "a bad plugstack.conf argument refuses jobs with its reason (rc $rc)"

# 8. issue 32: lib= missing on the node fails a job that asked for rota, with the reason, never runs it unprotected
"$MC" stop "$T/c3" >/dev/null 2>&1
timeout 60 "$MC" start "$T/c4" --gpus 1 --plugin "$SPANK" --plugargs "lib=$T/nowhere/librota.so socket=$S" \
    >/dev/null 2>"$T/mc.err" || bail "the fourth private cluster did not start: $(tail -3 "$T/mc.err")"
export SLURM_CONF=$T/c4/slurm.conf
timeout 30 srun --rota-mem=2G --rota-priority=high touch "$T/ran" >/dev/null 2>"$T/err"; rc=$?
[ $rc != 0 ] && grep -q "rota: $T/nowhere/librota.so does not exist on" "$T/err" && [ ! -e "$T/ran" ]
ok $? "lib= missing on the node: the job fails with the reason, nothing runs (rc $rc)"
timeout 30 srun --rota=off touch "$T/ran" >/dev/null 2>"$T/err"; rc=$?
[ $rc = 0 ] && [ -e "$T/ran" ]; ok $? "--rota=off still runs there (rc $rc)"

echo "1..$n"
exit $fail
