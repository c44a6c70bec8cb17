#!/usr/bin/env bash
# manifests.t - contrib/kubernetes's manifests, offline: each validates against Kubernetes' schemas (strict:
# no unknown field) with kubernetes-validate (PyPI, pinned in the venv of make k8s-venv), and a broken copy does
# not; the DaemonSet's rota-device-plugin arguments are ones the plugin accepts, its ConfigMap is a config rotad
# starts with, and the examples ask for the resources the plugin advertises. Skipped without the venv.
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
: "${ROTA_SRCDIR:?ROTA_SRCDIR must name the source folder}"
V=${ROTA_K8S_VENV:-$ROTA_SRCDIR/build/venv-k8s}/bin
K=$ROTA_SRCDIR/contrib/kubernetes
KVERS="1.34.0 1.29.0" # the newest schemas the pinned validator has, and an older release still in use
[ -x "$V/kubernetes-validate" ] || { echo "1..0 # SKIP no kubernetes-validate: run make k8s-venv"; exit 0; }
T=$(mktemp -d /tmp/rota-k8s-manifests-t.XXXXXX)
RPID=""
cleanup() {
    [ -z "$RPID" ] || kill -KILL "$RPID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
n=0
fail=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }

files=$(cd "$K" && ls deploy/*.yaml examples/*.yaml)
[ -n "$files" ] || { echo "Bail out! no manifests in $K"; exit 1; }
for f in $files; do
    for v in $KVERS; do
        "$V/kubernetes-validate" --strict --quiet -k "$v" "$K/$f" >"$T/out" 2>&1
        ok $? "$f is valid for Kubernetes $v$(grep -v '^INFO' "$T/out" | head -3 | sed 's/^/ # /' | tr '\n' ' ')"
    done
done
# the validator is not blind: a misspelt field and a wrong type are refused
sed 's/hostPID: true/hostPid: true/' "$K/deploy/rota.yaml" >"$T/bad1.yaml"
! "$V/kubernetes-validate" --strict --quiet "$T/bad1.yaml" >/dev/null 2>&1; ok $? "a misspelt field (hostPid) is refused"
sed 's/periodSeconds: 10/periodSeconds: ten/' "$K/deploy/rota.yaml" >"$T/bad2.yaml"
! "$V/kubernetes-validate" --strict --quiet "$T/bad2.yaml" >/dev/null 2>&1; ok $? "a wrong type (periodSeconds: ten) is refused"

# what the DaemonSet runs: the plugin's arguments, rotad's config, the resource names
"$V/python3" - "$K" "$T" <<'PY' >"$T/facts" || { echo "Bail out! unable to read the manifests"; exit 1; }
import glob, os, sys, yaml
k, t = sys.argv[1:]
docs = [d for f in sorted(glob.glob(k + "/deploy/*.yaml") + glob.glob(k + "/examples/*.yaml"))
        for d in yaml.safe_load_all(open(f)) if d]
ds = [d for d in docs if d["kind"] == "DaemonSet"][0]
cm = [d for d in docs if d["kind"] == "ConfigMap"][0]
ctr = {c["name"]: c for c in ds["spec"]["template"]["spec"]["containers"]}
open(t + "/plugin.args", "w").write("\n".join(ctr["device-plugin"]["command"][1:]) + "\n")
open(t + "/rotad.conf", "w").write(cm["data"]["rotad.conf"])
res = set()
def walk(x):
    if isinstance(x, dict):
        for kk, v in x.items():
            if "rota.io/" in kk and kk != "rota.io/node":
                res.add(kk.replace("requests.", "", 1))
            walk(v)
    elif isinstance(x, list):
        for v in x:
            walk(v)
walk(docs)
print(" ".join(sorted(res)))
PY
mapfile -t args <"$T/plugin.args"
"$ROTA_BUILD/bin/rota-device-plugin" "${args[@]}" --help >/dev/null 2>"$T/err"
ok $? "the DaemonSet's rota-device-plugin arguments are accepted ($(head -1 "$T/err"))"
res=$(cat "$T/facts")
bad=$(for r in $res; do case $r in rota.io/gpu-mem-high|rota.io/gpu-mem-normal|rota.io/gpu-mem-low) ;; *) echo "$r";; esac; done)
[ -n "$res" ] && [ -z "$bad" ]; ok $? "the manifests ask only for the plugin's resources ($res${bad:+; unknown: $bad})"
export LD_LIBRARY_PATH=$ROTA_BUILD/lib SIMCUDA_NODE=rota-k8s-manifests-t-$$ ROTA_LOG=quiet
"$ROTA_BUILD/bin/rotad" --foreground --no-probe --socket "$T/rotad.sock" --config "$T/rotad.conf" --notify-fd 3 \
    3>"$T/ready" 2>"$T/rotad.err" &
RPID=$!
for _ in $(seq 50); do [ -s "$T/ready" ] || ! kill -0 $RPID 2>/dev/null && break; sleep 0.1; done
[ -s "$T/ready" ]; ok $? "rotad starts with the ConfigMap's rotad.conf$(head -1 "$T/rotad.err" | sed 's/^/: /')"
kill -TERM $RPID 2>/dev/null; wait $RPID 2>/dev/null; RPID=""
echo "1..$n"
exit $fail
