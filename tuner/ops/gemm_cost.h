/* gemm_cost.h — an analytic GEMM cost model: ranks the configs of a bound GEMM space on a
 * device before any is measured, as the model-based search's prior. */
#ifndef AT_GEMM_COST_H
#define AT_GEMM_COST_H

#include "tuner/backend.h"

#include "tuner/space/space.h"

/* What the model looks at in one config. */
typedef struct at_gemm_cost_in {
    int64_t m, n, k;     /* problem */
    int64_t bm, bn, bk;  /* block tile: C rows and columns per work-group, K step */
    int64_t threads;     /* work-items per work-group */
    int64_t local_bytes; /* local (shared) memory per work-group; 0 if none */
    int64_t vw;          /* vector width of the global accesses; 1 if none */
    int64_t elem_bytes;  /* bytes per operand element */
} at_gemm_cost_in;

/* Predicted time in arbitrary units (lower is better): the FLOPs inflated by tile
 * quantization (edge blocks doing padded work), by waves of blocks over the compute units
 * (the last wave partly idle) with occupancy from threads and local memory, by the shortfall of
 * the block's arithmetic intensity against the device's compute / bandwidth balance, and by
 * per-thread work too small to hide latency or too large for the registers. */
double at_gemm_cost(const at_gemm_cost_in *c, const at_device_info *d);

/* What the CPU model looks at in one config of gemm_cpu.yaml (names as there). */
typedef struct at_gemm_cpu_cost_in {
    int64_t m, n, k, ta, tb; /* problem */
    int64_t vw, rs, nv;      /* micro-tile: RS rows x NV vectors of VW floats */
    int64_t mt, kc;          /* MT strips per work-item, K block KC */
    int64_t pa, pb;          /* packed A / B panels */
    int64_t uk;              /* k-loop unroll */
    int64_t dot;             /* 1: vectors along K (RS x NV block of C per strip, no packing) */
    int64_t nt;              /* NT column strips per work-item sharing the A panel (0 = 1) */
    int64_t sp;              /* 1: every panel packed once, shared by the work-items using it */
} at_gemm_cpu_cost_in;

/* Predicted time in arbitrary units (cycles of one core, roughly) of a CPU micro-kernel config:
 * the padded FMAs over the vector lanes the device has, the micro-kernel's issue rate (FMA
 * latency against the accumulators, load ports against broadcasts and vector loads, spills past
 * the registers), the cost of packing per K block (the copies, and operands larger than the
 * L2 read from farther out: a line and, at 4-KiB strides, a page per panel row), strided
 * in-place reads (a new cache line and page per k-step, L1 set conflicts at power-of-two
 * strides), the packed panels against the L1 and L2 sizes, shared packs (a panel's copy split
 * over its users, each reading it from another core's cache), and work-items over the cores.
 * docs/search.md, "GEMM cost model". */
double at_gemm_cpu_cost(const at_gemm_cpu_cost_in *c, const at_device_info *d);

/* The prior of each of n configs (n * s->nparams values) of a GEMM space already bound to its
 * problem and device: reads BM, BN, BK, VW (or their absence), the launch geometry and a
 * LOCAL_BYTES or SMEM_BYTES derived value; a space with RS, NV, MT and KC (gemm_cpu.yaml) gets
 * at_gemm_cpu_cost instead. Returns AT_ERR_UNSUPPORTED when the space has neither (not a tiled
 * GEMM); out is then untouched. */
at_status at_gemm_cost_prior(const at_space *s, const at_device_info *d, const int64_t *configs,
                             size_t n, double *out);

#endif
