/* run.c — the runner: an operation's buffers on the device, and the measurement of one compiled
 * candidate: a checked run against the operation's reference (outputs reset first, workspace
 * zeroed and required clean after), then timed runs with the cache flushed between them, and
 * every failure recorded as the candidate's outcome. */
#include "tuner/pipeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define AT_MIN_TIME_S       0.1     /* time each candidate at least this long ... */
#define AT_MIN_REPS         3       /* ... and at least this many times ... */
#define AT_MAX_REPS         50      /* ... but no more than this */
#define AT_EARLY_STOP_RATIO 2.0     /* stop timing a candidate this much slower than the best */
#define AT_TIMEOUT_MS       20000.0 /* one run longer than this is a timeout */

/* ---- the operation's buffers on the device ------------------------------------------------- */

/* Host floats to a device buffer in its element type (through the staging area). */
static at_status upload(at_runner *r, size_t i)
{
    const at_op_buffer *b = &r->data.buf[i];
    at_dtype_from_f32(b->dtype, b->init, r->stage, b->count);
    return r->ctx->ops->buffer_write(r->ctx->dev, r->bufs[i], 0, r->stage,
                                     b->count * at_dtype_size(b->dtype));
}

static at_status download(at_runner *r, size_t i)
{
    const at_op_buffer *b = &r->data.buf[i];
    AT_TRY(r->ctx->ops->buffer_read(r->ctx->dev, r->bufs[i], 0, r->stage,
                                    b->count * at_dtype_size(b->dtype)));
    at_dtype_to_f32(b->dtype, r->stage, r->out[i], b->count);
    return AT_OK;
}

at_status at_runner_open(at_runner *r, at_context *ctx, const at_problem *p)
{
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    r->p = p;
    AT_TRY(p->op->data_make(p->data, &r->data));
    while (r->nbufs < AT_MAX_BUFFERS && p->op->roles[r->nbufs]) r->nbufs++;
    size_t most = 0;
    for (size_t i = 0; i < r->nbufs; i++) {
        const at_op_buffer *b = &r->data.buf[i];
        size_t bytes = b->count * (at_dtype_size(b->dtype) > 4 ? at_dtype_size(b->dtype) : 4);
        if (bytes > most) most = bytes;
        if (b->output && !(r->out[i] = malloc(b->count * sizeof(float))))
            return at_fail(AT_ERR_NO_MEMORY, "out of host memory for the outputs");
    }
    if (!(r->stage = malloc(most ? most : 1)))
        return at_fail(AT_ERR_NO_MEMORY, "out of host memory for staging");
    for (size_t i = 0; i < r->nbufs; i++) {
        const at_op_buffer *b = &r->data.buf[i];
        AT_TRY(ctx->ops->buffer_alloc(ctx->dev, b->count * at_dtype_size(b->dtype), &r->bufs[i]));
        AT_TRY(upload(r, i));
    }
    /* On a GPU, a buffer twice the last-level cache is rewritten before each timed run. */
    if (!ctx->info.is_cpu && ctx->info.l2_bytes > 0 && ctx->ops->buffer_fill &&
        ctx->ops->buffer_alloc(ctx->dev, (size_t)ctx->info.l2_bytes * 2, &r->flush) != AT_OK)
        r->flush.handle = NULL; /* no room: time without flushing */
    return AT_OK;
}

void at_runner_close(at_runner *r)
{
    at_context *ctx = r->ctx;
    for (size_t i = 0; ctx && i < AT_MAX_BUFFERS; i++) {
        if (r->bufs[i].handle && ctx->dev) ctx->ops->buffer_free(ctx->dev, r->bufs[i]);
        free(r->out[i]);
    }
    if (ctx && ctx->dev && r->flush.handle) ctx->ops->buffer_free(ctx->dev, r->flush);
    if (ctx && ctx->dev && r->ws.handle) ctx->ops->buffer_free(ctx->dev, r->ws);
    if (r->p && r->p->op->data_free) r->p->op->data_free(&r->data);
    free(r->stage);
    memset(r, 0, sizeof *r);
}

/* ---- measuring one candidate --------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A launch failed: a fault that poisoned the context (CUDA's sticky errors) makes the
 * candidate `crashed` and the device lost; anything else is the candidate's launch_error. */
static void launch_failed(at_context *ctx, at_result_rec *rec, int *lost)
{
    char why[sizeof rec->reason];
    snprintf(why, sizeof why, "%s", at_errmsg());
    if (ctx->ops->check && ctx->ops->check(ctx->dev) == AT_ERR_DEVICE_LOST) {
        rec->status = AT_RS_CRASHED;
        *lost = 1;
    } else {
        rec->status = AT_RS_LAUNCH_ERROR;
    }
    snprintf(rec->reason, sizeof rec->reason, "%s", why);
}

/* Bytes of the first ws_bytes of ws that are not zero (reads it back); -1 if it cannot be read
 * (a fault), with at_errmsg() saying why. */
static int64_t workspace_dirty(at_context *ctx, at_bbuf ws, size_t ws_bytes)
{
    unsigned char *h = malloc(ws_bytes);
    if (!h) return at_fail(AT_ERR_NO_MEMORY, "out of memory reading a workspace"), -1;
    int64_t dirty = -1;
    if (ctx->ops->buffer_read(ctx->dev, ws, 0, h, ws_bytes) == AT_OK) {
        dirty = 0;
        for (size_t i = 0; i < ws_bytes; i++) dirty += h[i] != 0;
    }
    free(h);
    return dirty;
}

/* Resets the outputs and the workspace, launches once and checks the outputs and that the
 * workspace is clean again. *ms gets the run's time. 1 if the candidate passed. */
static int checked_run(at_runner *r, at_bprog *prog, const at_arglist *args, const size_t g[3],
                       const size_t l[3], size_t dims, size_t shared, size_t ws_bytes, double *ms,
                       at_result_rec *rec, int *lost)
{
    at_context *ctx = r->ctx;
    at_status s = AT_OK;
    for (size_t i = 0; s == AT_OK && i < r->nbufs; i++)
        if (r->data.buf[i].output) s = upload(r, i);
    if (s == AT_OK && ws_bytes) s = ctx->ops->buffer_fill(ctx->dev, r->ws, 0);
    if (s == AT_OK)
        s = ctx->ops->launch(ctx->dev, prog, args->a, args->n, g, l, dims, shared, NULL, ms);
    for (size_t i = 0; s == AT_OK && i < r->nbufs; i++)
        if (r->data.buf[i].output) s = download(r, i); /* an asynchronous fault shows here */
    if (s != AT_OK) {
        launch_failed(ctx, rec, lost);
        return 0;
    }
    int ok = 0;
    if (r->p->op->check(r->p->data, &r->data, r->out, &rec->max_rel_error, &ok) != AT_OK || !ok) {
        rec->status = AT_RS_WRONG_RESULT;
        snprintf(rec->reason, sizeof rec->reason, "max relative error %.3g exceeds the tolerance",
                 rec->max_rel_error);
        return 0;
    }
    int64_t dirty = ws_bytes ? workspace_dirty(ctx, r->ws, ws_bytes) : 0;
    if (dirty < 0) {
        launch_failed(ctx, rec, lost);
        return 0;
    }
    if (dirty > 0) { /* the next launch would start from garbage */
        rec->status = AT_RS_WRONG_RESULT;
        snprintf(rec->reason, sizeof rec->reason,
                 "left %lld of its %zu workspace bytes nonzero (it must clean up)",
                 (long long)dirty, ws_bytes);
        return 0;
    }
    if (*ms > AT_TIMEOUT_MS) {
        rec->status = AT_RS_TIMEOUT;
        snprintf(rec->reason, sizeof rec->reason, "one run took %.0f ms (limit %.0f ms)", *ms,
                 AT_TIMEOUT_MS);
        return 0;
    }
    return 1;
}

void at_runner_measure(at_runner *r, const at_template *t, const int64_t *cfg, at_bprog *prog,
                       double best_us, at_result_rec *rec, int *lost)
{
    at_context *ctx = r->ctx;
    const at_space *s = t->space;
    size_t g[3], l[3], shared = 0, ws_bytes = 0;
    at_arglist args;
    void *handles[AT_MAX_BUFFERS];
    for (size_t i = 0; i < r->nbufs; i++) handles[i] = r->bufs[i].handle;
    if (at_space_launch(s, cfg, g, l) != AT_OK ||
        at_space_memory(s, cfg, &shared, &ws_bytes) != AT_OK) {
        rec->status = AT_RS_LAUNCH_ERROR;
        snprintf(rec->reason, sizeof rec->reason, "%s", at_errmsg());
        return;
    }
    if (!at_candidate_fits(ctx, prog, l, rec->reason, sizeof rec->reason)) {
        rec->status = AT_RS_RESOURCE_LIMIT; /* rejected before it reaches the device */
        return;
    }
    if (ws_bytes && at_workspace_ensure(ctx, &r->ws, ws_bytes) != AT_OK) {
        launch_failed(ctx, rec, lost); /* no room for it, or a fault from before */
        return;
    }
    if (at_args_build(s->args, s->nargs, r->p, handles, ws_bytes ? r->ws.handle : NULL, &args) !=
        AT_OK) {
        rec->status = AT_RS_LAUNCH_ERROR;
        snprintf(rec->reason, sizeof rec->reason, "%s", at_errmsg());
        return;
    }
    double ms = 0;
    if (!checked_run(r, prog, &args, g, l, s->launch_dims, shared, ws_bytes, &ms, rec, lost))
        return;
    /* The checked run doubles as the warm-up. */
    double times[AT_MAX_REPS];
    int n = 0;
    double total = 0, min = ms;
    rec->status = AT_RS_OK;
    if (best_us > 0 && ms * 1e3 > AT_EARLY_STOP_RATIO * best_us) {
        times[n++] = ms;
        rec->early_stop = 1;
    }
    at_status st = AT_OK;
    while (!rec->early_stop && n < AT_MAX_REPS &&
           (n < AT_MIN_REPS || total < AT_MIN_TIME_S * 1e3)) {
        /* Operands larger than the cache would otherwise be timed warm after the first run. */
        if (r->flush.handle) st = ctx->ops->buffer_fill(ctx->dev, r->flush, (unsigned char)n);
        if (st == AT_OK)
            st = ctx->ops->launch(ctx->dev, prog, args.a, args.n, g, l, s->launch_dims, shared,
                                  NULL, &ms);
        if (st != AT_OK) {
            launch_failed(ctx, rec, lost);
            return;
        }
        times[n++] = ms;
        total += ms;
        if (ms < min) min = ms;
        if (best_us > 0 && n >= 2 && min * 1e3 > AT_EARLY_STOP_RATIO * best_us) rec->early_stop = 1;
    }
    qsort(times, (size_t)n, sizeof times[0], cmp_double);
    rec->reps = n;
    rec->median_us = times[n / 2] * 1e3;
    rec->min_us = times[0] * 1e3;
    rec->max_us = times[n - 1] * 1e3;
}
