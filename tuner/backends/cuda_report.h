/* cuda_report.h — the reader of the ptxas resource report (--ptxas-options=-v) that NVRTC leaves
 * in its program log; defined in cuda.c, declared here so tests can feed it captured text. */
#ifndef AT_CUDA_REPORT_H
#define AT_CUDA_REPORT_H

#include "tuner/backend.h"

/* Fills *out from the report for entry function `kernel` (its symbol: the plain name for an
 * extern "C" kernel) in log; with kernel NULL, from the first entry function. The lines read:
 *
 *   ptxas info    : Compiling entry function 'k' for 'sm_90a'
 *   ptxas info    : Function properties for k
 *   ptxas         .     624 bytes stack frame, 964 bytes spill stores, 1000 bytes spill loads
 *   ptxas info    : Used 40 registers, used 1 barriers, 8192 bytes smem, 364 bytes cmem[0]
 *
 * registers = "Used N registers", spill_bytes = stores + loads, shared_bytes = "N bytes smem" (0
 * when absent), local_bytes = the stack frame. A field the report lacks is -1. Returns 0 when the
 * entry function and its "Used N registers" line were found, -1 otherwise (*out all -1). */
int at_cuda_parse_ptxas(const char *log, const char *kernel, at_resources *out);

/* The arguments of cuTensorMapEncodeTiled for a tensor map (values of cuda.h's enums). */
typedef struct at_cu_tmap_call {
    int dtype;
    unsigned int rank;
    uint64_t dims[2], strides[1];
    uint32_t box[2], elem_strides[2];
    int interleave, swizzle, l2, oob;
} at_cu_tmap_call;

/* The call encoding t for the buffer at device address addr: 0, or -1 with why naming the
 * requirement of cuTensorMapEncodeTiled it breaks (16-byte aligned address and row stride,
 * sizes, box at most 256 per side and a box row within the swizzle span). Defined in cuda.c,
 * declared here so tests check the exact call without a driver. */
int at_cuda_tmap_call(const at_tmap_desc *t, uint64_t addr, at_cu_tmap_call *out, char *why,
                      size_t len);

#endif
