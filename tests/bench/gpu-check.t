#!/bin/sh
# gpu-check.t - smoke test of scripts/gpu-check's plumbing, with stand-ins for nvidia-smi and torch (this machine
# has neither a GPU nor PyTorch): its usage errors, then a --no-build run over this build whose four PyTorch
# phases (inference and training alone, together, together under rota run) write the records its report reads,
# and the report (B, B_max, gain, p50/p99 against solo, training rate, crashes, harvest, memory waits, what rotad
# saw) is printed whole, and its memory phases (two jobs that do not fit together: the second runs out of memory
# without rota and waits under rota run); then a run whose rota preloads nothing (the check must fail it), whose shared phase
# runs out of memory, and which has no prove. The Driver-API step finds no driver here and is reported as failed (exit 1), as the script
# documents; on a machine with one it may pass.
# The stand-ins' figures mean nothing and are never asserted: the real ones come from a GPU (README).
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
if [ "${ROTA_SANITIZER:-}" = thread ]; then
    # The stand-in torch dlopens simcuda into python3, and the ThreadSanitizer runtime it needs cannot be loaded
    # after start (static TLS); preloaded, it breaks the shell. The plain and ASan builds run this test.
    echo "1..0 # SKIP thread sanitizer build: python3 cannot load a TSan-instrumented simcuda"
    exit 0
fi
SRC=${ROTA_SRCDIR:-.}
T=$(mktemp -d /tmp/rota-gpucheck-t.XXXXXX)
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
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
"""The calls gpu-check's job.py makes, sleeping for device time. Its device work is a Driver-API child on
simcuda (build/bin/workload, the training kind, while the importing process lives): it inherits what rota run
sets (librota preloaded, the job's class), so rotad sees the job's launches as it would PyTorch's."""
import atexit, ctypes, os, signal, subprocess, sys, time
_env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(os.environ["ROTA_BUILD"], "lib"),
            SIMCUDA_NODE=os.environ["GPUCHECK_T_NODE"])
_child = subprocess.Popen([os.path.join(os.environ["ROTA_BUILD"], "bin", "workload"), "--kind", "train",
                           "--mem", "16M", "--blocks", "1", "--kernels", "200x4", "--gap-us", "2000",
                           "--duration", "600", "--out", os.path.join(os.environ["GPUCHECK_T_DIR"], "child.json")], env=_env, stdout=subprocess.DEVNULL)
def _stop():
    _child.send_signal(signal.SIGTERM)
    _child.wait()
atexit.register(_stop)
class _T:
    def square(self): return self
    def mean(self): return self
    def sum(self): return self
    def item(self): time.sleep(0.001); return 0.0
    def backward(self): time.sleep(0.001)
    def __matmul__(self, o): time.sleep(0.001); return self
    def __truediv__(self, o): return self
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
__version__ = "0.0+stand-in"
class version:
    cuda = "0.0"
class cuda:
    @staticmethod
    def is_available(): return True
    @staticmethod
    def get_device_name(i): return "stand-in GPU"
    @staticmethod
    def get_device_properties(i):
        n = ctypes.c_size_t()
        _cu("cuDeviceTotalMem_v2", ctypes.byref(n), _dev())
        return type("props", (), {"total_memory": n.value})
    @staticmethod
    def synchronize(): time.sleep(0.001)
uint8, float32 = "uint8", "float32"
# Memory is real on simcuda: the Driver API through ctypes (librota's wrappers where rota run preloads it), so a
# job that does not fit runs out of memory without rota and waits under it.
_lib = None
def _cu(name, *args):
    global _lib
    if _lib is None:
        try:
            _lib = ctypes.CDLL("libcuda.so.1")  # rota run's job: simcuda is on its LD_LIBRARY_PATH
        except OSError:
            _lib = ctypes.CDLL(os.path.join(os.environ["ROTA_BUILD"], "lib", "libcuda.so.1"))
        _cu("cuInit", 0)
        ctx = ctypes.c_void_p()
        _cu("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), 0)
        _cu("cuCtxSetCurrent", ctx)
    rc = getattr(_lib, name)(*args)
    if rc == 2:  # CUDA_ERROR_OUT_OF_MEMORY
        raise RuntimeError("CUDA out of memory. Tried to allocate (stand-in)")
    if rc != 0:
        raise RuntimeError("%s: CUresult %d" % (name, rc))
def _dev(): return 0
def empty(n, dtype=None, device=None):
    p = ctypes.c_uint64()
    _cu("cuMemAlloc_v2", ctypes.byref(p), ctypes.c_size_t(n))
    return _T()
class no_grad:
    def __enter__(self): return self
    def __exit__(self, *a): return False
def device(s): return s
def manual_seed(s): pass
def randn(*a, **k):
    # GPUCHECK_T_OOM=PHASE-KIND: that job runs out of memory, as PyTorch reports it
    if os.environ.get("GPUCHECK_T_OOM") and \
            os.path.basename(sys.argv[3]) == os.environ["GPUCHECK_T_OOM"] + ".json":
        raise RuntimeError("CUDA out of memory. Tried to allocate 64.00 MiB (stand-in)")
    return _T()
PY

export GPUCHECK_T_NODE="gpucheck-t-$$" GPUCHECK_T_DIR="$T"
# rota run finds no driver here and uses simcuda: the same node as the stand-ins' jobs
export SIMCUDA_NODE="$GPUCHECK_T_NODE"
# 1G: two memory-phase jobs of 0.6 of it do not fit together
export SIMCUDA_MEM=1G
trap 'rm -rf "$T" "/dev/shm/$GPUCHECK_T_NODE"' EXIT

# gpu-share's phases on simcuda (the workload carries a RUNPATH to it here): one length, 1 s each
export GPU_SHARE_ARGS="--long-us 20000 --seconds 1"

echo 1..15
"$SRC/scripts/gpu-check" 1x >/dev/null 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "SECONDS must be a whole number" "$T/err"; ok $? "a bad SECONDS: usage error, exit 2"
"$SRC/scripts/gpu-check" 1 2 >/dev/null 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "usage error" "$T/err"; ok $? "two operands: usage error, exit 2"

# 2 s phases: rota status is read each second, and the jobs' simcuda children start slowly under a sanitizer
# (the real clients are left out: tests/realclients/real-clients.t runs them, at 20-30 s a run here)
PATH="$T/bin:$PATH" PYTHONPATH="$T/py" B="$ROTA_BUILD" ROTA_REAL_CLIENTS=skip "$SRC/scripts/gpu-check" --no-build 2 \
    >"$T/out" 2>&1
rc=$?
{ [ $rc = 0 ] || [ $rc = 1 ]; } && ! grep -q "^gpu-check: fatal" "$T/out"
ok $? "--no-build 2 with the stand-ins runs to its end (exit $rc: the Driver-API tests $(grep -q 'Driver-API tests FAILED' "$T/out" && echo failed, no driver here || echo passed))"
num='[0-9]+\.[0-9]+'
grep -Eq "^B_max $num \(solo device time $num s: inference busy $num of $num s, training $num of $num s\)$" "$T/out" &&
    grep -Eq "^exclusive +$num +$num +\+0\.0 +1\.00x +1\.00x +$num +0 " "$T/out"
ok $? "the report's B_max and exclusive row (solo runs back to back)"
grep -Eq "^shared +$num +$num +[-+]$num +$num""x +$num""x +$num +0$" "$T/out" &&
    grep -Eq "^rota +$num +$num +[-+]$num +$num""x +$num""x +$num +0$" "$T/out"
ok $? "its shared and rota rows: B, B/B_max, gain, p50 and p99 against solo, training iterations/s, crashes"
grep -Eq "^solo: inference p50 $num ms p99 $num ms busy $num; training $num it/s busy $num" "$T/out" &&
    grep -Eq "^harvest \(rota\): training's device time beside inference over the time inference leaves idle = $num \(training at $num of its solo rate\)$" "$T/out" &&
    grep -Eq "^memory waits \(rota\): 0, 0\.00 s$" "$T/out"
ok $? "the solo figures, the harvest and memory-wait lines"
# gpu-share: the tiny kernel alone and beside 20 ms kernels, time-sliced (no MPS here)
grep -Eq "^solo +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[1-9][0-9]*$" "$T/out" &&
    grep -Eq "^timesliced-20000 +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[1-9][0-9]* +-?[0-9]+ / +-?[0-9]+, [01]\.[0-9]+$" "$T/out"
ok $? "gpu-share's table: the tiny kernel alone and beside 20 ms kernels: $(grep '^timesliced' "$T/out")"
# the high job's stand-in sleeps 2 ms between its iterations: its idle probe ends those windows
grep -Eq "^idle probe \(rota\): ended [1-9][0-9]* of the inference server's idle windows at once \([0-9]+ requests\)$" "$T/out"
ok $? "the idle probe line counts the windows it ended: $(grep '^idle probe' "$T/out")"
# rotad's view of the rota phase: both jobs' launches, each in its class, went through librota
grep -Eq "^rotad saw \(rota phase\): pid [0-9]+ (high|low) [1-9][0-9]* launches, pid [0-9]+ (high|low) [1-9][0-9]* launches; hold events on GPU 0: [0-9]+$" "$T/out" &&
    grep "^rotad saw" "$T/out" | grep -q " high " && grep "^rotad saw" "$T/out" | grep -q " low " &&
    ! grep -q "librota did not see" "$T/out"
ok $? "rotad saw both jobs' launches, high and low, in the rota phase: $(grep '^rotad saw' "$T/out")"
# the memory phases (1G GPU, two jobs of 0.6 G): without rota the second runs out of memory; under rota run it
# waits for the first to end (the first computes for the 2 s phase), with either allocator setting (the
# stand-in's own workload child, 16M, waits too)
grep -Eq "^shared +ok, memory after $num s +crashed: OOM, memory after $num s +1 +-$" "$T/out"
ok $? "memory phase without rota: the second job crashes with OOM: $(grep '^shared .*memory after' "$T/out")"
late='(1\.[0-9]|[2-9]\.[0-9]|[1-9][0-9]+\.[0-9])[0-9]*'
grep -Eq "^rota +ok, memory after $num s +ok, memory after $late s +0 +[1-9][0-9]*, $late s$" "$T/out" &&
    grep -Eq "^rota-expandable +ok, memory after $num s +ok, memory after $late s +0 +[1-9][0-9]*, $late s$" "$T/out"
ok $? "under rota run the second job waits (>= 1 s) and succeeds: $(grep -E '^rota(-expandable)? .*memory after' "$T/out" | tr '\n' ';')"
# without librota in the jobs' path (rota run stood in by env, which preloads nothing) the check fails the run
mkdir -p "$T/fakeb/bin"
printf '#!/bin/sh\n[ "$1" = status ] && exec "%s" "$@"\nwhile [ "$1" != -- ]; do shift; done; shift; exec "$@"\n' \
    "$ROTA_BUILD/bin/rota" >"$T/fakeb/bin/rota"
chmod +x "$T/fakeb/bin/rota"
for f in bin/rotad bin/workload lib tests; do ln -s "$ROTA_BUILD/$f" "$T/fakeb/$f"; done
# (and the training job of the shared phase runs out of memory: the phase goes on, its row counts the crash; and
# this machine has no working prove: the test programs run one by one)
mkdir -p "$T/noprove"
printf '#!/bin/sh\nexit 127\n' >"$T/noprove/prove"
chmod +x "$T/noprove/prove"
PATH="$T/noprove:$T/bin:$PATH" PYTHONPATH="$T/py" B="$T/fakeb" GPUCHECK_T_OOM=shared-train ROTA_REAL_CLIENTS=skip \
    "$SRC/scripts/gpu-check" --no-build 1 >"$T/out2" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "^rotad saw (rota phase): no client" "$T/out2" && grep -q "librota did not see launches" "$T/out2"
ok $? "a rota that does not preload librota: 'no client', the check fails (exit $rc)"
grep -Eq "^shared +$num +$num +[-+]$num +$num""x +$num""x +0\.0 +1$" "$T/out2" && grep -Eq "^rota .* 0$" "$T/out2"
ok $? "a job out of memory: recorded, its phase's row counts 1 crash and no training progress"
grep -q "^real clients: skipped (ROTA_REAL_CLIENTS=skip)" "$T/out" &&
    grep -q "^real clients: skipped (ROTA_REAL_CLIENTS=skip)" "$T/out2"
ok $? "ROTA_REAL_CLIENTS=skip leaves the real clients out, and says so"
nt=$(ls "$ROTA_BUILD"/tests/clients/*-t "$ROTA_BUILD"/tests/shim/*-t | wc -l)
grep -q "^(no prove here: running the $nt test programs one by one)$" "$T/out2" &&
    [ "$(grep -Ec '/tests/(clients|shim)/[a-z-]+-t \.\. (ok|FAILED)$' "$T/out2")" = "$nt" ] &&
    grep -q "Driver-API tests FAILED" "$T/out2"
ok $? "without prove, the $nt test programs run one by one, each reported (no driver here: FAILED)"
