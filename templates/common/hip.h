/* hip.h — HIP preamble of the portable kernel dialect.
 *
 * Prepended to every template source when the HIP backend compiles it with hipRTC
 * (--offload-arch=gfxNNN -O3 -std=c++17, then the -D tuning parameters). HIP's device language
 * is CUDA's (threadIdx, blockIdx, __shared__, __syncthreads, float2/float4, min/max, extern "C"
 * __global__, __launch_bounds__), so the dialect is the CUDA preamble's, inlined below by the
 * template loader; this file holds only what differs on AMD.
 *
 * No #include of HIP headers: hipRTC provides the device builtins itself (ROCm 5 pre-includes
 * the HIP runtime headers; ROCm 6 and later compile against their built-in hipRTC runtime
 * header), and a second inclusion would clash. Wavefronts are 64 work-items on CDNA (gfx9) and
 * 32 on RDNA (gfx10/11) by default: templates that care read the wave size from their space
 * (device.warp_size), never assume CUDA's 32. */
#ifndef AT_HIP_H
#define AT_HIP_H

/* AT_UNROLL(n) expands to `#pragma unroll (expr)`: clang honours it but warns that CUDA would
 * want a plain literal. The templates pass tuning expressions on purpose. */
#pragma clang diagnostic ignored "-Wcuda-compat"

/* Kernels without their own bound get __launch_bounds__(256) (through the CUDA preamble's
 * AT_MAX_THREADS): HIP otherwise assumes blocks of 1024 threads and caps every kernel at 128
 * VGPRs, so register-heavy configurations spill. The bound is in the code object's metadata
 * (max_flat_workgroup_size), so a candidate launched with more threads is rejected before launch,
 * never run. The portable GEMM's GPU space uses at most 256 threads. */
#ifndef AT_MAX_THREADS
#define AT_MAX_THREADS 256
#endif

#include "cuda.h"

#endif
