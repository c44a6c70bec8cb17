#!/bin/sh
# olddriver.t - the Driver-API tests pass on a driver older than the toolkit, as scripts/gpu-check runs them.
#
# nvcc of CUDA 13 writes PTX ISA 9.0, which a CUDA 12 driver refuses, and a driver refuses cuGetProcAddress
# lookups above its own version. simcuda with SIMCUDA_DRIVER_VERSION=12040 does both as a CUDA 12.4 driver does
# (build/tests/simcuda/api-module-t checks that), so these programs, run on it, show that the tests lower their
# kernels' PTX (tools/kernels/load.c) and ask for versions the driver has.
if [ -z "$ROTA_BUILD" ]; then
    echo "Bail out! ROTA_BUILD is not set"
    exit 255
fi
progs="clients/procaddr-t clients/graph-t clients/stream-t shim/binding-t shim/lifecycle-t"
n=0
for p in $progs; do n=$((n + 1)); done
echo "1..$n"
i=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for p in $progs; do
    i=$((i + 1))
    if SIMCUDA_DRIVER_VERSION=12040 "$ROTA_BUILD/tests/$p" >"$out" 2>&1 && ! grep -q '^not ok' "$out"; then
        echo "ok $i - $p passes on a simulated CUDA 12.4 driver ($(grep -c '^ok' "$out") checks)"
    else
        echo "not ok $i - $p passes on a simulated CUDA 12.4 driver"
        sed 's/^/# /' "$out" | grep -v '^# ok' | tail -n 20
    fi
done
