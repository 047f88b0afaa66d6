/* cost.c — see cost.h. */
#include "tuner/ops/cost.h"

at_cost_block at_cost_block_of(const at_space *s, const int64_t *cfg)
{
    at_cost_block b = {1, 0, 4};
    int64_t v;
    if (at_space_value(s, cfg, "LOCAL_BYTES", &b.local_bytes) != AT_OK &&
        at_space_value(s, cfg, "SMEM_BYTES", &b.local_bytes) != AT_OK)
        b.local_bytes = 0;
    if (at_space_value(s, cfg, "dt", &v) == AT_OK) b.elem_bytes = 2;
    size_t global[3], local[3];
    if (at_space_launch(s, cfg, global, local) == AT_OK)
        b.threads = (int64_t)(local[0] * local[1] * local[2]);
    return b;
}
