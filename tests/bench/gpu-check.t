#!/bin/sh
# gpu-check.t - smoke test of scripts/gpu-check's plumbing, with stand-ins for nvidia-smi and torch (this machine
# has neither a GPU nor PyTorch): its usage errors, then a --no-build run over this build whose four PyTorch
# phases (inference and training alone, together, together under rota run) write the records its report reads,
# and the report (B, p50/p99 against solo, training rate, harvest) is printed whole. The Driver-API step finds
# no driver here and is reported as failed (exit 1), as the script documents; on a machine with one it may pass.
# The stand-ins' figures mean nothing and are never asserted: the real ones come from a GPU (README).
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
SRC=${ROTA_SRCDIR:-.}
T=$(mktemp -d /tmp/rota-gpucheck-t.XXXXXX)
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
trap 'rm -rf "$T"' EXIT
# librota.so (a sanitizer build's too) is preloaded into python3 in the rota phase
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0:detect_leaks=0"
unset CUDA_VISIBLE_DEVICES LD_PRELOAD ROTA_PRIORITY ROTA_SOCKET

mkdir -p "$T/bin" "$T/py/torch"
cat >"$T/bin/nvidia-smi" <<'SMI'
#!/bin/sh
case "$*" in
  -L) echo "GPU 0: stand-in GPU (UUID: GPU-00000000-1111-2222-3333-444444444444)" ;;
  *utilization.gpu*) while :; do echo 50; sleep 0.2; done ;;
  *query-gpu=name*) echo "name, driver_version, memory.total [MiB]"; echo "stand-in, 0.0, 1024 MiB" ;;
  *) exit 1 ;;
esac
SMI
chmod +x "$T/bin/nvidia-smi"
cat >"$T/py/torch/__init__.py" <<'PY'
"""The calls gpu-check's job.py makes, sleeping for device time."""
import time
class _T:
    def square(self): return self
    def mean(self): return self
    def sum(self): return self
    def item(self): time.sleep(0.001); return 0.0
    def backward(self): time.sleep(0.001)
class _M:
    def __init__(self, *a): pass
    def to(self, d): return self
    def eval(self): return self
    def parameters(self): return []
    def __call__(self, x): return _T()
class nn:
    Sequential = Linear = _M
class optim:
    class SGD:
        def __init__(self, p, lr): pass
        def zero_grad(self): pass
        def step(self): pass
class cuda:
    @staticmethod
    def is_available(): return True
class no_grad:
    def __enter__(self): return self
    def __exit__(self, *a): return False
def device(s): return s
def manual_seed(s): pass
def randn(*a, **k): return _T()
PY

echo 1..6
"$SRC/scripts/gpu-check" 1x >/dev/null 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "SECONDS must be a whole number" "$T/err"; ok $? "a bad SECONDS: usage error, exit 2"
"$SRC/scripts/gpu-check" 1 2 >/dev/null 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "usage error" "$T/err"; ok $? "two operands: usage error, exit 2"

PATH="$T/bin:$PATH" PYTHONPATH="$T/py" B="$ROTA_BUILD" "$SRC/scripts/gpu-check" --no-build 1 >"$T/out" 2>&1
rc=$?
{ [ $rc = 0 ] || [ $rc = 1 ]; } && ! grep -q "^gpu-check: fatal" "$T/out"
ok $? "--no-build 1 with the stand-ins runs to its end (exit $rc: the Driver-API tests $(grep -q 'Driver-API tests FAILED' "$T/out" && echo failed, no driver here || echo passed))"
num='[0-9]+\.[0-9]+'
grep -Eq "^exclusive +$num +1\.00x +1\.00x +$num" "$T/out"; ok $? "the report's exclusive row (solo runs back to back)"
grep -Eq "^shared +$num +$num""x +$num""x +$num" "$T/out" && grep -Eq "^rota +$num +$num""x +$num""x +$num" "$T/out"
ok $? "its shared and rota rows: B, p50 and p99 against solo, training iterations/s"
grep -Eq "^solo: inference p50 $num ms p99 $num ms busy $num; training $num it/s busy $num" "$T/out" &&
    grep -Eq "^harvest \(rota\): training progress alongside inference over solo = $num" "$T/out"
ok $? "the solo figures and the harvest line"
