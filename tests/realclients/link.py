"""link.py - linking: NVRTC's relocatable PTX linked by cuda.core's Linker (nvJitLink from the toolkit), and by the
driver's own linker through cuda.bindings (cuLinkCreate, cuLinkAddData, cuLinkComplete with JIT log options),
each result loaded as a module whose kernels resolve, an unknown name refused."""
import ctypes
import sys

from cuda.bindings import driver
from cuda.core.experimental import Linker, LinkerOptions, Program, ProgramOptions

from rc_common import KERNELS, check, device


def ok(res, what):
    err = res[0]
    check(err == driver.CUresult.CUDA_SUCCESS, f"{what}: {err}")
    return res[1:] if len(res) > 2 else (res[1] if len(res) == 2 else None)


dev = device()
opts = ProgramOptions(arch=f"sm_{dev.arch}", relocatable_device_code=True)
ptx = Program(KERNELS, code_type="c++", options=opts).compile("ptx")
linked = Linker(ptx, options=LinkerOptions(arch=f"sm_{dev.arch}")).link("cubin")
check(linked.get_kernel("rc_fill") is not None, "cuda.core Linker: rc_fill")

# the driver's linker, as cuda.bindings exposes it
log = bytearray(256)
jit = [driver.CUjit_option.CU_JIT_INFO_LOG_BUFFER, driver.CUjit_option.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES]
state = ok(driver.cuLinkCreate(len(jit), jit, [log, len(log)]), "cuLinkCreate")
code = ptx.code if isinstance(ptx.code, bytes) else bytes(ptx.code)
if not code.endswith(b"\0"):
    code += b"\0"
ok(driver.cuLinkAddData(state, driver.CUjitInputType.CU_JIT_INPUT_PTX, code, len(code), b"kernels.ptx", 0, None,
                        None), "cuLinkAddData")
bad = b"not an image\0"
err = driver.cuLinkAddData(state, driver.CUjitInputType.CU_JIT_INPUT_PTX, bad, len(bad), b"bad", 0, None, None)[0]
check(err == driver.CUresult.CUDA_ERROR_INVALID_IMAGE, f"cuLinkAddData of text that is not PTX: {err}")
cubin, size = ok(driver.cuLinkComplete(state), "cuLinkComplete")
check(size > 0, "a linked image")
image = ctypes.string_at(cubin, size)
mod = ok(driver.cuModuleLoadData(image), "cuModuleLoadData of the linked image")
ok(driver.cuModuleGetFunction(mod, b"rc_scale"), "rc_scale in the linked image")
err = driver.cuModuleGetFunction(mod, b"nope")[0]
check(err == driver.CUresult.CUDA_ERROR_NOT_FOUND, f"an unknown name: {err}")
ok(driver.cuModuleUnload(mod), "cuModuleUnload")
ok(driver.cuLinkDestroy(state), "cuLinkDestroy")
print("linked 2")
sys.exit(0)
