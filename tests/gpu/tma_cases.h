/* tma_cases.h — the gemm_wgmma configurations and shapes tests/gpu/test_tma.c runs on a GPU:
 * config c meets shapes c % 2, c % 2 + 2, ... in the 16-bit type AT_TMA_DTYPE(c, s), where the
 * space allows it, AT_TMA_RUNS pairs in all. test_cuda_gemm counts those pairs on a compile-only
 * sm_90a target, so the count a GPU run expects is checked where there is none. */
#ifndef AT_TESTS_TMA_CASES_H
#define AT_TESTS_TMA_CASES_H

#include "autotune.h"

static const char *const at_tma_configs[] = {
    "BM=128,BN=128,BK=64,WN=128,WGS=1,STAGES=4,SPLITK=1,GROUP_M=1,SWAP=0,"
    "LOAD=1,PERSIST=0,STORE=0,CLUSTER=1",
    "BM=128,BN=256,BK=64,WN=256,WGS=2,STAGES=4,SPLITK=1,GROUP_M=8,SWAP=0,"
    "LOAD=2,PERSIST=0,STORE=0,CLUSTER=1",
    "BM=128,BN=128,BK=64,WN=128,WGS=1,STAGES=4,SPLITK=1,GROUP_M=1,SWAP=0,"
    "LOAD=2,PERSIST=0,STORE=0,CLUSTER=1",
    "BM=64,BN=128,BK=32,WN=128,WGS=1,STAGES=6,SPLITK=1,GROUP_M=1,SWAP=0,"
    "LOAD=1,PERSIST=0,STORE=0,CLUSTER=1",
    "BM=128,BN=128,BK=64,WN=128,WGS=2,STAGES=3,SPLITK=2,GROUP_M=1,SWAP=0,"
    "LOAD=2,PERSIST=0,STORE=0,CLUSTER=1",
    "BM=128,BN=16,BK=64,WN=16,WGS=1,STAGES=6,SPLITK=1,GROUP_M=1,SWAP=1,"
    "LOAD=2,PERSIST=0,STORE=0,CLUSTER=1",
    "BM=128,BN=32,BK=64,WN=32,WGS=1,STAGES=6,SPLITK=1,GROUP_M=1,SWAP=1,"
    "LOAD=1,PERSIST=0,STORE=0,CLUSTER=1",
    /* persistent, the ring running on across tiles (valid on the 4096 x 4096 shape) */
    "BM=128,BN=256,BK=64,WN=256,WGS=2,STAGES=4,SPLITK=1,GROUP_M=8,SWAP=0,"
    "LOAD=2,PERSIST=1,STORE=0,CLUSTER=1",
    /* the TMA-store epilogue (STORE): thread 0 and the producer warpgroup, persistent too;
     * beta != 0 shapes run its register epilogue */
    "BM=128,BN=128,BK=64,WN=128,WGS=1,STAGES=4,SPLITK=1,GROUP_M=1,SWAP=0,"
    "LOAD=1,PERSIST=0,STORE=1,CLUSTER=1",
    "BM=128,BN=256,BK=64,WN=256,WGS=2,STAGES=3,SPLITK=1,GROUP_M=8,SWAP=0,"
    "LOAD=2,PERSIST=1,STORE=1,CLUSTER=1",
    /* 2x1 clusters sharing B by multicast (cuLaunchKernelEx): LOAD 1 (1024^3 nn: the B box
     * split along k; 520 rows: 5 tile rows, a ragged last unit; tt), LOAD 2 persistent
     * (4096^2; not valid on the other shapes it meets) */
    "BM=128,BN=128,BK=64,WN=128,WGS=1,STAGES=4,SPLITK=1,GROUP_M=1,SWAP=0,LOAD=1,PERSIST=0,"
    "STORE=0,CLUSTER=2",
    "BM=128,BN=256,BK=64,WN=256,WGS=2,STAGES=4,SPLITK=1,GROUP_M=8,SWAP=0,LOAD=2,PERSIST=1,"
    "STORE=0,CLUSTER=2",
};
static const struct {
    int m, n, k;
    at_layout lay;
    float beta;
} at_tma_shapes[] = {
    /* a config meets every other shape: small m at an even and an odd place, for SWAP */
    {1024, 1024, 1024, AT_LAYOUT_NN, 0.0f}, {4096, 4096, 256, AT_LAYOUT_NN, 0.0f},
    {520, 264, 136, AT_LAYOUT_NT, 0.0f},    {264, 520, 1000, AT_LAYOUT_TN, -1.0f},
    {24, 1000, 256, AT_LAYOUT_NT, 0.5f},    {16, 4096, 512, AT_LAYOUT_NN, 0.0f},
    {1000, 1000, 776, AT_LAYOUT_TT, 0.5f},
};

#define AT_TMA_NCONFIGS    (sizeof at_tma_configs / sizeof at_tma_configs[0])
#define AT_TMA_NSHAPES     (sizeof at_tma_shapes / sizeof at_tma_shapes[0])
#define AT_TMA_DTYPE(c, s) (((c) + (s)) % 4 ? AT_DTYPE_BF16 : AT_DTYPE_F16)
#define AT_TMA_RUNS        27 /* every config on at least one shape */

#endif
