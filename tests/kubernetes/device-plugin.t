#!/usr/bin/env bash
# device-plugin.t - rota-device-plugin against a stand-in kubelet (tests/kubernetes/kubelet.py: grpcio from PyPI,
# stubs made from contrib/kubernetes/api.proto) on simcuda GPUs and a real rotad: registration and registering
# again after a kubelet restart, ListAndWatch health as rotad stops and starts, GetPreferredAllocation asking
# rotad, Allocate's response applied by a stand-in runtime (tests/kubernetes/ctr-run.py: exactly its environment,
# its mounts in a private mount namespace, its device nodes) to containers that run a CUDA workload under rotad
# with the pod's class and limit; CDI; bad input and a malformed configuration. Skipped without the plugin
# (grpc++) or the venv (make k8s-venv), or where a private mount namespace cannot be made.
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
: "${ROTA_SRCDIR:?ROTA_SRCDIR must name the source folder}"
KDP=$ROTA_BUILD/bin/rota-device-plugin
PY=${ROTA_K8S_VENV:-$ROTA_SRCDIR/build/venv-k8s}/bin/python3
[ -x "$KDP" ] || { echo "1..0 # SKIP $KDP not built (no grpc++: apt-get install libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc)"; exit 0; }
[ -x "$PY" ] && "$PY" -c 'import grpc, grpc_tools' 2>/dev/null ||
    { echo "1..0 # SKIP no stand-in kubelet: run make k8s-venv (grpcio from PyPI)"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "1..0 # SKIP the stand-in runtime mounts and makes device nodes: needs root"; exit 0; }
unshare -m --propagation private true 2>/dev/null || { echo "1..0 # SKIP no private mount namespace here (unshare -m)"; exit 0; }
# clang sanitizer builds: librota.so needs clang's runtime preloaded first, which the containers' sh cannot get
[ -z "${ROTA_SANITIZER_RT:-}" ] || { echo "1..0 # SKIP clang sanitizer build: librota.so cannot be preloaded into uninstrumented commands"; exit 0; }

T=$(mktemp -d /tmp/rota-k8s-t.XXXXXX)
export ROTA_K8S_T_NODE=rota-k8s-t-$$
cleanup() {
    if [ -f "$T/pids" ]; then
        while read -r p; do kill -KILL "$p" 2>/dev/null; done <"$T/pids"
    fi
    # the containers' cgroups (device-plugin.py lists them, the pods' first), innermost first, once they are empty
    if [ -f "$T/cgroups" ]; then
        tac "$T/cgroups" | while read -r d; do
            for _ in 1 2 3 4 5 6 7 8 9 10; do rmdir "$d" 2>/dev/null && break; [ -d "$d" ] || break; sleep 0.2; done
        done
    fi
    rm -rf "$T" "/dev/shm/$ROTA_K8S_T_NODE"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
mkdir "$T/py"
"$PY" -m grpc_tools.protoc -I"$ROTA_SRCDIR/contrib/kubernetes" --python_out="$T/py" --grpc_python_out="$T/py" \
    "$ROTA_SRCDIR/contrib/kubernetes/api.proto" || { echo "Bail out! grpc_tools.protoc failed on api.proto"; exit 1; }
"$PY" "$ROTA_SRCDIR/tests/kubernetes/device-plugin.py" "$T"
