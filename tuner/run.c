/* run.c — the runner, the host half of measuring candidates: a problem's buffers checked against
 * the device's memory before anything is allocated, put on the device half (worker.c) with guard
 * zones, and each compiled candidate run once against the operation's reference — outputs
 * reset (NaN where they must not be read), guards intact, inputs unchanged, workspace clean —
 * then timed; every failure recorded as the candidate's outcome, under a watchdog. */
#define _GNU_SOURCE
#include "tuner/pipeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LIMIT_BASE  1000.0 /* ms every checked run may take on top (loading its binary) */
#define LIMIT_FLOOR 5.0    /* ms: a run shorter than this is never stopped for its slowdown */

/* ---- the problem's buffers ----------------------------------------------------------------- */

static double gib(double bytes) { return bytes / 1073741824.0; }

/* The buffers' sizes against what the device can allocate and what this machine has, before
 * any host memory is spent on them. */
static at_status check_limits(const at_context *ctx, const at_problem *p, const at_op_buffer *lay,
                              size_t n)
{
    const char *const *roles = p->op->roles;
    double device = 0, host = 0;
    for (size_t i = 0; i < n; i++) {
        double bytes = (double)lay[i].count * (double)at_dtype_size(lay[i].dtype);
        if (ctx->info.max_alloc_bytes > 0 && bytes > (double)ctx->info.max_alloc_bytes)
            return at_fail(AT_ERR_UNSUPPORTED,
                           "buffer %s of this problem needs %.2f GiB, more than the %.2f GiB the "
                           "device allocates at once",
                           roles[i], gib(bytes), gib((double)ctx->info.max_alloc_bytes));
        device += bytes + 2 * AT_GUARD_BYTES;
        /* f32 contents, two staged copies, the f32 read-back and the reference of an output */
        host += (double)lay[i].count * 4 + 2 * bytes + (lay[i].output ? 16.0 * lay[i].count : 0);
    }
    if (ctx->info.global_mem_bytes > 0 && device > (double)ctx->info.global_mem_bytes)
        return at_fail(AT_ERR_UNSUPPORTED,
                       "this problem's buffers need %.2f GiB, more than the device's %.2f GiB",
                       gib(device), gib((double)ctx->info.global_mem_bytes));
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double ram = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
    if (ram > 0 && host > 0.8 * ram)
        return at_fail(AT_ERR_UNSUPPORTED,
                       "checking this problem's candidates needs about %.1f GiB of host memory; "
                       "this machine has %.1f GiB",
                       gib(host), gib(ram));
    return AT_OK;
}

/* What a checked run resets by a fill (outputs that start all NaN) and reads back of each
 * output (the rows its check reads, when the operation names them and they are few). */
static void readback_of(const at_runner *r, at_readback *rb)
{
    memset(rb, 0, sizeof *rb);
    for (size_t i = 0; i < r->nbufs; i++) {
        const at_op_buffer *b = &r->data.buf[i];
        if (!b->output) continue;
        size_t k = 0;
        while (k < b->count && isnan(b->init[k])) k++;
        if (k == b->count) rb->fill |= 1u << i;
        if (b->nrows > 0 && b->nrows <= AT_READBACK_ROWS) {
            size_t esize = at_dtype_size(b->dtype);
            rb->nrows[i] = (uint32_t)b->nrows;
            rb->stride[i] = b->row_stride * esize;
            rb->len[i] = b->row_len * esize;
            memcpy(rb->rows[i], b->rows, b->nrows * sizeof *b->rows);
        }
    }
}

at_status at_runner_open(at_runner *r, at_context *ctx, const at_problem *p,
                         const volatile int *cancel)
{
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    r->p = p;
    r->nbufs = at_op_nroles(p->op); /* at most AT_MAX_BUFFERS: the registry's rule */
    at_op_buffer lay[AT_MAX_BUFFERS];
    memset(lay, 0, sizeof lay);
    AT_TRY(p->op->layout(p->data, lay));
    AT_TRY(check_limits(ctx, p, lay, r->nbufs));
    AT_TRY(p->op->data_make(p->data, &r->data));
    for (size_t i = 0; i < r->nbufs; i++) {
        const at_op_buffer *b = &r->data.buf[i];
        r->bytes[i] = b->count * at_dtype_size(b->dtype);
        if (b->output && !(r->out[i] = malloc(b->count * sizeof(float))))
            return at_fail(AT_ERR_NO_MEMORY, "out of host memory for the outputs");
    }
    AT_TRY(at_link_open(ctx, cancel, &r->link));
    at_readback rb;
    readback_of(r, &rb);
    at_link_readback(r->link, &rb);
    /* On a GPU, a buffer twice the last-level cache is rewritten before each timed run. */
    size_t flush = !ctx->info.is_cpu && ctx->info.l2_bytes > 0 && ctx->ops->buffer_fill
                       ? (size_t)ctx->info.l2_bytes * 2
                       : 0;
    at_status st;
    if (!at_link_buffers(r->link, r->nbufs, r->bytes, flush, &st)) return st;
    for (size_t i = 0; i < r->nbufs; i++) {
        const at_op_buffer *b = &r->data.buf[i];
        at_dtype_from_f32(b->dtype, b->init, at_link_init(r->link, i), b->count);
    }
    return at_link_upload(r->link);
}

void at_runner_close(at_runner *r)
{
    at_link_close(r->link);
    for (size_t i = 0; i < AT_MAX_BUFFERS; i++) free(r->out[i]);
    if (r->p && r->p->op->data_free) r->p->op->data_free(&r->data);
    memset(r, 0, sizeof *r);
}

/* ---- measuring one candidate --------------------------------------------------------------- */

/* The launch of config cfg: geometry, memory, and the arguments in the device half's terms (the
 * one argument builder, given tokens for the buffers and the workspace). */
static at_status make_spec(const at_runner *r, const at_template *t, const int64_t *cfg,
                           at_run_spec *spec)
{
    const at_space *s = t->space;
    memset(spec, 0, sizeof *spec);
    snprintf(spec->kernel, sizeof spec->kernel, "%s", s->kernel);
    spec->dims = s->launch_dims;
    AT_TRY(at_space_launch(s, cfg, spec->global, spec->local));
    AT_TRY(at_space_memory(s, cfg, &spec->shared_bytes, &spec->ws_bytes, &spec->scratch_bytes));
    const size_t ws_total = spec->ws_bytes + spec->scratch_bytes;
    AT_TRY(at_space_cluster(s, cfg, &spec->cluster));
    void *tokens[AT_MAX_BUFFERS];
    for (size_t i = 0; i < r->nbufs; i++) tokens[i] = (void *)(uintptr_t)(i + 1);
    static const char ws_token;
    at_tmap_desc maps[AT_MAX_ARGS];
    AT_TRY(at_args_maps(s, cfg, r->p, maps));
    const at_tmap_src src = {maps, NULL, NULL}; /* encoded by the device half */
    at_arglist a;
    AT_TRY(at_args_build(s->args, s->nargs, r->p, tokens, ws_total ? &ws_token : NULL, &src, &a));
    /* The built list follows the template's, less a workspace the config does not take and
     * the tensor maps whose `when:` is false. */
    size_t k = 0;
    for (size_t i = 0; i < s->nargs; i++) {
        const at_arg *arg = &s->args[i];
        if (arg->kind == AT_ARG_WORKSPACE && !ws_total) continue;
        if (arg->kind == AT_ARG_TENSORMAP && !maps[i].present) continue;
        at_run_arg *ra = &spec->args[k];
        ra->kind = (uint8_t)arg->kind;
        if (arg->kind == AT_ARG_BUFFER)
            ra->buffer = (uint16_t)((uintptr_t)a.v[k].ptr - 1);
        else if (arg->kind == AT_ARG_TENSORMAP) {
            ra->tmap = maps[i];
            ra->buffer = maps[i].buffer;
        } else if (arg->kind == AT_ARG_SCALAR) {
            ra->size = (uint8_t)a.a[k].size;
            memcpy(ra->value, a.a[k].ptr, a.a[k].size);
        }
        k++;
    }
    spec->nargs = k;
    return AT_OK;
}

/* The checked run's verdict on what it left: guards, inputs, outputs, workspace. 1 if right. */
static int verdict(at_runner *r, int64_t ws_dirty, size_t ws_bytes, at_result_rec *rec)
{
    const char *const *roles = r->p->op->roles;
    for (size_t i = 0; i < r->nbufs; i++) {
        size_t bad = at_link_guard_errors(r->link, i);
        if (bad) {
            rec->status = AT_RS_WRONG_RESULT;
            snprintf(rec->reason, sizeof rec->reason,
                     "wrote %zu bytes outside buffer %s (its guard zones)", bad, roles[i]);
            return 0;
        }
    }
    for (size_t i = 0; i < r->nbufs; i++) {
        if (r->data.buf[i].output ||
            memcmp(at_link_out(r->link, i), at_link_init(r->link, i), r->bytes[i]) == 0)
            continue;
        rec->status = AT_RS_WRONG_RESULT;
        snprintf(rec->reason, sizeof rec->reason, "changed its input %s", roles[i]);
        return 0;
    }
    for (size_t i = 0; i < r->nbufs; i++) {
        const at_op_buffer *b = &r->data.buf[i];
        if (!b->output) continue;
        if (!b->nrows || b->nrows > AT_READBACK_ROWS) {
            at_dtype_to_f32(b->dtype, at_link_out(r->link, i), r->out[i], b->count);
            continue;
        }
        /* only the rows that came back (and that the check reads) */
        size_t esize = at_dtype_size(b->dtype);
        for (size_t k = 0; k < b->nrows; k++) {
            size_t at = (size_t)b->rows[k] * b->row_stride;
            at_dtype_to_f32(b->dtype, at_link_out(r->link, i) + at * esize, r->out[i] + at,
                            b->row_len);
        }
    }
    int ok = 0;
    if (r->p->op->check(r->p->data, &r->data, r->out, &rec->max_rel_error, &ok) != AT_OK || !ok) {
        rec->status = AT_RS_WRONG_RESULT;
        snprintf(rec->reason, sizeof rec->reason, "max relative error %.3g exceeds the tolerance",
                 rec->max_rel_error);
        return 0;
    }
    if (ws_dirty > 0) { /* the next launch would start from garbage */
        rec->status = AT_RS_WRONG_RESULT;
        snprintf(rec->reason, sizeof rec->reason,
                 "left %lld of its %zu workspace bytes nonzero (it must clean up)",
                 (long long)ws_dirty, ws_bytes);
        return 0;
    }
    return 1;
}

/* The checked run of at_runner_measure; *ms: its time, for the timing that follows. */
static at_status runner_check(at_runner *r, const at_template *t, const int64_t *cfg,
                              at_bprog *prog, double best_us, at_result_rec *rec, double *ms)
{
    at_context *ctx = r->ctx;
    at_run_spec spec;
    if (make_spec(r, t, cfg, &spec) != AT_OK) {
        rec->status = AT_RS_LAUNCH_ERROR;
        snprintf(rec->reason, sizeof rec->reason, "%s", at_errmsg());
        return AT_OK;
    }
    if (!at_candidate_fits(ctx, prog, spec.local, rec->reason, sizeof rec->reason)) {
        rec->status = AT_RS_RESOURCE_LIMIT; /* rejected before it reaches the device */
        return AT_OK;
    }
    void *bin = NULL;
    size_t len = 0;
    if (ctx->ops->program_binary(prog, &bin, &len) != AT_OK) {
        rec->status = AT_RS_LAUNCH_ERROR;
        snprintf(rec->reason, sizeof rec->reason, "no binary to run: %s", at_errmsg());
        return AT_OK;
    }
    /* The watchdog: the absolute limit, or once there is a best, `slowdown` times it (never
     * below LIMIT_FLOOR: stopping a short run saves nothing and launch jitter is not a verdict). */
    double limit = r->run_limit_ms > 0 ? r->run_limit_ms : AT_RUN_LIMIT_MS;
    double rel =
        best_us > 0 && r->slowdown > 0 ? fmax(r->slowdown * best_us / 1e3, LIMIT_FLOOR) : INFINITY;
    int slow = rel < limit;
    if (slow) limit = rel;
    uint32_t reset = 0;
    for (size_t i = 0; i < r->nbufs; i++) reset |= (uint32_t)r->data.buf[i].output << i;
    int64_t ws_dirty = 0;
    /* The watchdog waits at least a second more than LIMIT_BASE: a first launch on PoCL may
     * compile for its work-group size first, outside the kernel's own (profiled) time that the
     * limit judges. */
    at_status st = at_link_run(r->link, bin, len, &spec, reset, fmax(limit, 1000.0) + LIMIT_BASE,
                               ms, &ws_dirty, rec);
    free(bin);
    if (st != AT_OK) return st;
    if (rec->status == AT_RS_OK && *ms > limit) {
        /* in this process nothing can stop a run: it is judged afterwards */
        rec->status = AT_RS_TIMEOUT;
        snprintf(rec->reason, sizeof rec->reason, "one run took %.0f ms (limit %.0f ms)", *ms,
                 limit);
    }
    if (rec->status == AT_RS_TIMEOUT && slow) {
        char why[sizeof rec->reason];
        snprintf(why, sizeof why, "%s", rec->reason);
        snprintf(rec->reason, sizeof rec->reason, "stopped at %gx the best (%.3f ms): %s",
                 r->slowdown, best_us / 1e3, why);
        r->slow_stopped++;
    }
    if (rec->status != AT_RS_OK) return AT_OK;
    verdict(r, ws_dirty, spec.ws_bytes, rec);
    return AT_OK;
}

at_status at_runner_measure(at_runner *r, const at_template *t, const int64_t *cfg, at_bprog *prog,
                            double best_us, at_result_rec *rec)
{
    double ms = 0;
    at_status st = runner_check(r, t, cfg, prog, best_us, rec, &ms);
    if (st != AT_OK || rec->status != AT_RS_OK) return st;
    double err = rec->max_rel_error;
    /* Up to 50 repetitions and a flush each: far more than one run, never unbounded. */
    st = at_link_time(r->link, ms, best_us, LIMIT_BASE + 100.0 * fmax(ms, 1.0), rec);
    rec->max_rel_error = err;
    return st;
}

at_status at_config_run(at_context *ctx, at_template *t, const at_problem *p, const char *config,
                        int timed, at_result_rec *rec)
{
    memset(rec, 0, sizeof *rec);
    rec->when = at_unix_time();
    int64_t cfg[AT_MAX_PARAMS];
    at_kernel *k = NULL;
    double t0 = at_now();
    at_status st = at_config_parse(t->space, config, cfg);
    if (st == AT_OK) st = at_kernel_build(ctx, t, p, config, &k);
    rec->compile_ms = (at_now() - t0) * 1e3;
    if (st == AT_ERR_NO_MEMORY || st == AT_ERR_DEVICE_LOST) return st;
    if (st != AT_OK) { /* the candidate's outcome, not the run's failure */
        rec->status = st == AT_ERR_COMPILE ? AT_RS_COMPILE_ERROR : AT_RS_LAUNCH_ERROR;
        snprintf(rec->reason, sizeof rec->reason, "%s", at_errmsg());
        at_errclear();
        return AT_OK;
    }
    at_runner r;
    double ms = 0;
    st = at_runner_open(&r, ctx, k->problem, NULL);
    if (st == AT_OK)
        st = timed ? at_runner_measure(&r, t, cfg, k->prog, 0, rec)
                   : runner_check(&r, t, cfg, k->prog, 0, rec, &ms);
    at_runner_close(&r);
    at_kernel_destroy(k);
    return st;
}
