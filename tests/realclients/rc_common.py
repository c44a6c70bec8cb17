"""rc_common.py - what the real-client programs share: the kernels (CUDA C, compiled at run time by NVRTC) and
the exit codes the suite (real-clients.t) reads. Only documented public APIs of cuda.core are used."""
import sys

from cuda.core.experimental import Device, Program, ProgramOptions

# Exit codes: 0 passed, 1 a check failed, 3 out of memory (CUDA_ERROR_OUT_OF_MEMORY from an allocation).
EXIT_FAIL = 1
EXIT_OOM = 3

KERNELS = r"""
extern "C" __global__ void rc_fill(unsigned *p, unsigned v, unsigned long long n)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = v;
}
extern "C" __global__ void rc_scale(float *p, float a, unsigned long long n)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n)
        p[i] *= a;
}
"""


def fail(msg):
    print(f"{sys.argv[0]}: fatal: {msg}", file=sys.stderr)
    sys.exit(EXIT_FAIL)


def check(cond, msg):
    if not cond:
        fail(msg)


def device():
    dev = Device()
    dev.set_current()
    return dev


def compile_kernels(dev, target="cubin"):
    """The module of KERNELS built by NVRTC for this device, as a cubin or as PTX the driver JITs."""
    prog = Program(KERNELS, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
    return prog.compile(target)


def is_oom(exc):
    return "CUDA_ERROR_OUT_OF_MEMORY" in str(exc)
