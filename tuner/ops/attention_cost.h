/* attention_cost.h — an analytic cost model of fused attention (FlashAttention / flash-decoding
 * templates): ranks the configs of a bound attention space on a device before any is measured,
 * as the model-based search's prior (the GEMM one is gemm_cost.h). */
#ifndef AT_ATTENTION_COST_H
#define AT_ATTENTION_COST_H

#include "tuner/backend.h"

#include "tuner/space/space.h"

/* What the model looks at in one config. */
typedef struct at_attention_cost_in {
    int64_t sq, skv, d;  /* problem: query and key lengths, head dimension */
    int64_t causal;      /* 1: query i sees keys j <= i + (skv - sq) */
    int64_t bh;          /* batch * query heads */
    int64_t bq, bkv;     /* query rows per block, keys per K/V tile */
    int64_t split;       /* split-KV factor: blocks per query block, each a share of the keys */
    int64_t threads;     /* work-items per work-group */
    int64_t local_bytes; /* local (shared) memory per work-group; 0 if none */
    int64_t vw;          /* vector width of the global accesses; 1 if none */
    int64_t elem_bytes;  /* bytes per Q, K, V, O element */
} at_attention_cost_in;

/* Predicted time in arbitrary units (lower is better). Each block (BQ padded query rows, one
 * SPLIT share of the key tiles, fewer under the causal mask) costs the larger of its FLOPs —
 * with a per-tile overhead for the online softmax's rescale and the tile's barrier, which
 * small BKV pays more often — and its global bytes (the K/V tiles it re-reads, its Q tile, its
 * O or split partial, the combine) times the device's FLOP/byte balance: a unit's share of the
 * bandwidth, so few blocks cannot use the whole memory system. The blocks run on the compute
 * units (the busiest unit sets the time); resident groups a unit (threads, local memory) hide
 * latency up to 8 warps on a GPU; the per-thread accumulators (BQ * d / threads), partial
 * warps and narrow vectors cost as in the GEMM model. */
double at_attention_cost(const at_attention_cost_in *c, const at_device_info *d);

/* The prior of each of n configs (n * s->nparams values) of an attention space already bound to
 * its problem and device: reads BQ, BKV, SPLIT and VW (SPLIT, VW 1 when absent), the launch
 * geometry, a LOCAL_BYTES or SMEM_BYTES derived value and the problem variables sq skv d
 * causal bh dt. Returns AT_ERR_UNSUPPORTED when the space has no BQ and BKV; out is then
 * untouched. */
at_status at_attention_cost_prior(const at_space *s, const at_device_info *d,
                                  const int64_t *configs, size_t n, double *out);

#endif
