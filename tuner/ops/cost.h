/* cost.h — what every operation's cost model reads alike from a configuration of a bound
 * space: the shape of its block (threads, local memory) and the element size. */
#ifndef AT_OPS_COST_H
#define AT_OPS_COST_H

#include "tuner/space/space.h"

typedef struct at_cost_block {
    int64_t threads;     /* work-items per work-group (the launch's local size); 1 if unknown */
    int64_t local_bytes; /* the derived LOCAL_BYTES or SMEM_BYTES; 0 if neither */
    int64_t elem_bytes;  /* 2 where the space declares dt (the 16-bit templates), else 4 */
} at_cost_block;

at_cost_block at_cost_block_of(const at_space *s, const int64_t *cfg);

#endif
