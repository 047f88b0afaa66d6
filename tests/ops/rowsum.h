/* rowsum.h — the test operation's typed problem and calls (what at_gemm_* are to GEMM):
 * Y[i] = alpha * sum_j X[i, j]. */
#ifndef AT_TEST_ROWSUM_H
#define AT_TEST_ROWSUM_H

#include "autotune.h"

typedef struct rowsum_problem {
    int64_t rows, cols; /* each >= 1 */
    float alpha;
    int64_t ld; /* leading dimension of X in elements; 0: packed */
} rowsum_problem;

at_status rowsum_tune(at_context *ctx, const rowsum_problem *p, const at_tune_options *opts,
                      at_tune_report *report, at_kernel **out);
at_status rowsum_get(at_context *ctx, const rowsum_problem *p, unsigned flags, at_kernel **out,
                     at_source *source);
at_status rowsum_launch(at_kernel *k, at_devptr x, at_devptr y, void *stream);

#endif
