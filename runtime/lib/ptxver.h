/* ptxver.h - PTX ISA versions: which one a CUDA driver loads, which one a PTX image declares, and lowering it. */
#ifndef ROTA_PTXVER_H
#define ROTA_PTXVER_H

/*
 * A driver JITs PTX whose `.version` directive is no newer than the PTX ISA of its own CUDA release, and refuses
 * newer PTX with CUDA_ERROR_UNSUPPORTED_PTX_VERSION, whatever the code uses. nvcc writes its toolkit's version,
 * so PTX from CUDA 13 (ISA 9.0) does not load on a CUDA 12 driver. PTX that uses nothing the older ISA lacks (our
 * kernels, tools/kernels/kernels.cu) loads once the directive says the older version: that is what kernels_load
 * (tools/kernels/load.h) does on that error, and what simcuda checks (SIMCUDA_DRIVER_VERSION).
 *
 * ISA versions are written major * 10 + minor (PTX minors are one digit): 84 is ISA 8.4. CUDA versions are as
 * cuDriverGetVersion reports them: 12040 is CUDA 12.4.
 */

/* The newest PTX ISA a driver of CUDA cuda_version loads, from NVIDIA's PTX release history (12.6 loads 8.5,
 * 12.7 loads 8.6); a release newer than the table gets the newest ISA in it. 0 below CUDA 10.0. */
int ptxver_for_driver(int cuda_version);

/* The ISA that PTX text declares (its `.version X.Y` line), or -ENOENT when image is not PTX text (a cubin or
 * fatbin, or text without the directive before its first non-text byte) and -EINVAL for a malformed directive.
 * Reads a NUL-terminated text, stopping at the first byte that text would not have, so a binary image is read
 * no further than its first bytes. */
int ptxver_of_image(const void *image);

/* A copy of the PTX text ptx (malloc'ed, in *out) whose `.version` directive says isa instead; the rest is the
 * same bytes. 0, -ENOENT (no directive), -EINVAL (isa out of 10..99) or -ENOMEM. */
int ptxver_rewrite(const char *ptx, int isa, char **out);

#endif
