/* attention_peers.c — the library-side measurements of benchmarks/pocl/attention.sh: for one
 * attention problem (f32, layout bhsd, on autotune's OpenCL device) it times
 *   - "ours": the tuned fused attention kernel, taken from the database the
 *     `autotune attention ... --db DIR` run filled (at_attention_get, no fallback), and
 *   - "unfused": three steps built from our own tuned GEMM through the library, per (batch,
 *     head): S = scale * Q K^T (at_gemm, layout nt), a row softmax with the causal mask
 *     (a small OpenCL kernel of this file, on the same context and queue), O = P V (at_gemm,
 *     nn). The two GEMM shapes are tuned first (at_gemm_tune, --gemm-budget seconds each;
 *     a shape tuned before in the same database answers from it).
 * Both outputs are checked against a CPU reference (double accumulation, two-pass softmax) on
 * a spread of rows before anything is timed.
 *
 * Usage: attention_peers --batch B --heads H [--kv-heads G] --seq S [--seq-kv S2]
 *                        --head-dim D [--causal] --db DIR [--gemm-budget SECONDS]
 *                        [--min-seconds T] [--max-runs N] [--no-ours] [--no-unfused]
 * Prints a human log on stderr and one JSON object on stdout.
 *
 * Timing (the same rule for both, and for PyTorch in attention.sh): one untimed warm-up call,
 * then calls until --min-seconds (default 1) of timed calls or --max-runs (default 10) calls,
 * at least 3; each call is host wall time (CLOCK_MONOTONIC) from the first enqueue to
 * clFinish; the median is reported. Causal alignment is bottom-right, as autotune's
 * (docs/attention.md).
 *
 * Built by CMake (target attention_peers) against the library (its clock and sort helpers too)
 * and libOpenCL. */
#define _POSIX_C_SOURCE          200809L
#define CL_TARGET_OPENCL_VERSION 120
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CL/cl.h>

#include "autotune.h"
#include "base/util.h" /* at_now, at_cmp_double */

#define MIN_RUNS 3

/* ---- helpers ------------------------------------------------------------------------------ */

#define AT_CHECK(call)                                                                             \
    do {                                                                                           \
        at_status st_ = (call);                                                                    \
        if (st_ != AT_OK) {                                                                        \
            fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, at_strerror(st_),   \
                    ctx ? at_context_last_error(ctx) : "");                                        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CL_CHECK(call)                                                                             \
    do {                                                                                           \
        cl_int e_ = (call);                                                                        \
        if (e_ != CL_SUCCESS) {                                                                    \
            fprintf(stderr, "%s:%d: %s: OpenCL error %d\n", __FILE__, __LINE__, #call, e_);        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static at_context *ctx; /* for AT_CHECK's message */

/* Deterministic inputs in [-1, 1) (xorshift). */
static void fill(float *x, size_t n, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
    }
}

/* ---- the problem and the CPU reference ---------------------------------------------------- */

typedef struct shape {
    int64_t b, h, g, s, s2, d;
    int causal;
    float scale;
} shape;

/* Element offsets of head (b, h) of Q / O and of its key/value head in K / V (bhsd). */
static size_t q_off(const shape *p, int64_t b, int64_t h)
{
    return (size_t)(((b * p->h + h) * p->s) * p->d);
}
static size_t kv_off(const shape *p, int64_t b, int64_t h)
{
    return (size_t)(((b * p->g + h / (p->h / p->g)) * p->s2) * p->d);
}

/* Keys query row i sees: all, or up to the bottom-right diagonal. */
static int64_t visible(const shape *p, int64_t i)
{
    if (!p->causal) return p->s2;
    int64_t n = i + (p->s2 - p->s) + 1;
    return n < p->s2 ? n : p->s2;
}

/* The largest error of o's row (b, h, i) against a double reference, relative to
 * sum_j p_j |v_j| (the scale of its terms), as autotune's check. */
static double row_error(const shape *p, const float *q, const float *k, const float *v,
                        const float *o, int64_t b, int64_t h, int64_t i)
{
    const float *qr = q + q_off(p, b, h) + (size_t)(i * p->d);
    const float *kh = k + kv_off(p, b, h), *vh = v + kv_off(p, b, h);
    int64_t n = visible(p, i);
    double *sc = malloc((size_t)n * sizeof *sc), mx = -INFINITY, sum = 0, worst = 0;
    for (int64_t j = 0; j < n; j++) {
        double acc = 0;
        for (int64_t t = 0; t < p->d; t++) acc += (double)qr[t] * kh[j * p->d + t];
        sc[j] = acc * p->scale;
        if (sc[j] > mx) mx = sc[j];
    }
    for (int64_t j = 0; j < n; j++) sum += (sc[j] = exp(sc[j] - mx));
    for (int64_t t = 0; t < p->d; t++) {
        double ref = 0, mag = 0;
        for (int64_t j = 0; j < n; j++) {
            ref += sc[j] / sum * vh[j * p->d + t];
            mag += sc[j] / sum * fabs(vh[j * p->d + t]);
        }
        double got = o[q_off(p, b, h) + (size_t)(i * p->d + t)];
        double e = fabs(got - ref) / (mag > 0 ? mag : 1);
        if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
    }
    free(sc);
    return worst;
}

/* The largest row error over a spread of rows: first and last (batch, head), and in each the
 * first, middle and last query rows. */
static double check(const shape *p, const float *q, const float *k, const float *v, const float *o)
{
    double worst = 0;
    int64_t bs[2] = {0, p->b - 1}, hs[2] = {0, p->h - 1}, is[3] = {0, p->s / 2, p->s - 1};
    for (int x = 0; x < 2; x++)
        for (int y = 0; y < 2; y++)
            for (int z = 0; z < 3; z++) {
                double e = row_error(p, q, k, v, o, bs[x], hs[y], is[z]);
                if (!(e <= worst)) worst = e;
            }
    return worst;
}

/* ---- timing ------------------------------------------------------------------------------- */

typedef struct timing {
    double median_ms, min_ms, max_ms;
    int runs;
} timing;

typedef void (*call_fn)(void *user);

static timing time_calls(call_fn fn, void *user, cl_command_queue queue, double min_s, int max_runs)
{
    double t[1024];
    int n = 0;
    double total = 0;
    fn(user); /* warm-up */
    CL_CHECK(clFinish(queue));
    if (max_runs > 1024) max_runs = 1024;
    while (n < MIN_RUNS || (n < max_runs && total < min_s)) {
        double t0 = at_now();
        fn(user);
        CL_CHECK(clFinish(queue));
        t[n] = at_now() - t0;
        total += t[n++];
    }
    qsort(t, (size_t)n, sizeof *t, at_cmp_double);
    timing r = {.runs = n, .min_ms = t[0] * 1e3, .max_ms = t[n - 1] * 1e3};
    r.median_ms = (n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2])) * 1e3;
    return r;
}

/* ---- ours: the tuned fused kernel --------------------------------------------------------- */

typedef struct ours_call {
    at_kernel *k;
    at_devptr q, kk, v, o, lse;
} ours_call;

static void ours_run(void *user)
{
    ours_call *c = user;
    AT_CHECK(at_attention_launch(c->k, c->q, c->kk, c->v, c->o, c->lse, NULL));
}

/* ---- unfused: GEMM, softmax, GEMM --------------------------------------------------------- */

/* One work-item a row of the scores (rows of all heads one after another, seq_kv long, each
 * head's rows starting at a multiple of head_stride): the causal mask, then max, exp and the
 * normalisation in place; masked keys become 0 so that P V sums over the visible keys only. */
static const char *const SOFTMAX_SRC =
    "__kernel void softmax_rows(__global float *s, int seq, int seq_kv, int causal, int rows,\n"
    "                           long head_stride)\n"
    "{\n"
    "    int r = get_global_id(0);\n"
    "    if (r >= rows) return;\n"
    "    int i = r % seq;\n"
    "    __global float *p = s + (long)(r / seq) * head_stride + (long)i * seq_kv;\n"
    "    int n = causal ? min(seq_kv, i + (seq_kv - seq) + 1) : seq_kv;\n"
    "    float m = -INFINITY, sum = 0;\n"
    "    for (int j = 0; j < n; j++) m = fmax(m, p[j]);\n"
    "    for (int j = 0; j < n; j++) {\n"
    "        float e = exp(p[j] - m);\n"
    "        p[j] = e;\n"
    "        sum += e;\n"
    "    }\n"
    "    float inv = 1 / sum;\n"
    "    for (int j = 0; j < n; j++) p[j] *= inv;\n"
    "    for (int j = n; j < seq_kv; j++) p[j] = 0;\n"
    "}\n";

typedef struct unfused_call {
    const shape *p;
    at_kernel *qk, *pv;
    cl_kernel softmax;
    cl_command_queue queue;
    int64_t heads;                  /* batch * heads */
    cl_mem *qh, *kh, *vh, *oh, *sh; /* per (batch, head) sub-buffers */
} unfused_call;

static void unfused_run(void *user)
{
    unfused_call *c = user;
    for (int64_t x = 0; x < c->heads; x++)
        AT_CHECK(at_gemm_launch(c->qk, at_devptr_from_handle(c->qh[x]),
                                at_devptr_from_handle(c->kh[x]), at_devptr_from_handle(c->sh[x]),
                                c->queue));
    size_t rows = (size_t)(c->heads * c->p->s);
    CL_CHECK(clEnqueueNDRangeKernel(c->queue, c->softmax, 1, NULL, &rows, NULL, 0, NULL, NULL));
    for (int64_t x = 0; x < c->heads; x++)
        AT_CHECK(at_gemm_launch(c->pv, at_devptr_from_handle(c->sh[x]),
                                at_devptr_from_handle(c->vh[x]), at_devptr_from_handle(c->oh[x]),
                                c->queue));
}

static cl_mem sub(cl_mem parent, size_t offset_elems, size_t elems)
{
    cl_buffer_region r = {offset_elems * sizeof(float), elems * sizeof(float)};
    cl_int e;
    cl_mem m = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &e);
    CL_CHECK(e);
    return m;
}

/* A GEMM tuned for the problem (or answered from the database), with its report as JSON. */
static at_kernel *tuned_gemm(const at_gemm_problem *g, double budget_s, const char *name)
{
    at_tune_options o = {0};
    o.max_seconds = budget_s;
    at_tune_report rep;
    at_kernel *k = NULL;
    fprintf(stderr, "tuning %s gemm m=%lld n=%lld k=%lld %s (budget %.0f s)\n", name,
            (long long)g->m, (long long)g->n, (long long)g->k,
            g->layout == AT_LAYOUT_NT ? "nt" : "nn", budget_s);
    AT_CHECK(at_gemm_tune(ctx, g, &o, &rep, &k));
    printf("\"gemm_%s\":{\"m\":%lld,\"n\":%lld,\"k\":%lld,\"layout\":\"%s\",\"config\":\"%s\","
           "\"time_us\":%.3f,\"gflops\":%.3f,\"evaluated\":%lld,\"cache_hit\":%d,"
           "\"seconds\":%.2f},",
           name, (long long)g->m, (long long)g->n, (long long)g->k,
           g->layout == AT_LAYOUT_NT ? "nt" : "nn", rep.best_config, rep.best_time_us,
           rep.best_gflops, (long long)rep.evaluated, rep.cache_hit, rep.seconds);
    return k;
}

/* ---- main --------------------------------------------------------------------------------- */

static void usage(void)
{
    fputs("usage: attention_peers --batch B --heads H [--kv-heads G] --seq S [--seq-kv S2]\n"
          "                       --head-dim D [--causal] --db DIR [--gemm-budget SECONDS]\n"
          "                       [--min-seconds T] [--max-runs N] [--no-ours] [--no-unfused]\n",
          stderr);
    exit(2);
}

static int64_t arg_i64(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) usage();
    char *end;
    long long v = strtoll(argv[++*i], &end, 10);
    if (*end || v < 1) usage();
    return v;
}

int main(int argc, char **argv)
{
    shape p = {.b = 0, .h = 0, .g = 0, .s = 0, .s2 = 0, .d = 0};
    const char *db = NULL;
    double gemm_budget = 30, min_s = 1;
    int max_runs = 10, do_ours = 1, do_unfused = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--batch"))
            p.b = arg_i64(argc, argv, &i);
        else if (!strcmp(a, "--heads"))
            p.h = arg_i64(argc, argv, &i);
        else if (!strcmp(a, "--kv-heads"))
            p.g = arg_i64(argc, argv, &i);
        else if (!strcmp(a, "--seq"))
            p.s = arg_i64(argc, argv, &i);
        else if (!strcmp(a, "--seq-kv"))
            p.s2 = arg_i64(argc, argv, &i);
        else if (!strcmp(a, "--head-dim"))
            p.d = arg_i64(argc, argv, &i);
        else if (!strcmp(a, "--causal"))
            p.causal = 1;
        else if (!strcmp(a, "--db") && i + 1 < argc)
            db = argv[++i];
        else if (!strcmp(a, "--gemm-budget"))
            gemm_budget = (double)arg_i64(argc, argv, &i);
        else if (!strcmp(a, "--min-seconds") && i + 1 < argc)
            min_s = atof(argv[++i]);
        else if (!strcmp(a, "--max-runs"))
            max_runs = (int)arg_i64(argc, argv, &i);
        else if (!strcmp(a, "--no-ours"))
            do_ours = 0;
        else if (!strcmp(a, "--no-unfused"))
            do_unfused = 0;
        else
            usage();
    }
    if (!p.g) p.g = p.h;
    if (!p.s2) p.s2 = p.s;
    if (!p.b || !p.h || !p.s || !p.d || !db || p.h % p.g) usage();
    if (p.causal && p.s2 < p.s) {
        fputs("attention_peers: seq-kv < seq with causal (bottom-right alignment)\n", stderr);
        return 2;
    }
    p.scale = (float)(1 / sqrt((double)p.d));

    at_context_options co = {0};
    co.backend = AT_BACKEND_OPENCL;
    co.db_path = db;
    at_status st = at_context_create(&co, &ctx);
    if (st != AT_OK) {
        fprintf(stderr, "attention_peers: no OpenCL context: %s (%s)\n", at_strerror(st),
                ctx ? at_context_last_error(ctx) : "");
        return 1;
    }
    cl_context clctx = at_context_native_context(ctx);
    cl_command_queue queue = at_context_native_queue(ctx);
    fprintf(stderr, "device: %s\n", at_context_device_name(ctx));

    /* Inputs, (batch, heads, seq, head_dim) contiguous. */
    size_t nq = (size_t)(p.b * p.h * p.s * p.d), nkv = (size_t)(p.b * p.g * p.s2 * p.d);
    float *hq = malloc(nq * 4), *hk = malloc(nkv * 4), *hv = malloc(nkv * 4), *ho = malloc(nq * 4);
    if (!hq || !hk || !hv || !ho) return 1;
    fill(hq, nq, 1);
    fill(hk, nkv, 2);
    fill(hv, nkv, 3);
    at_buffer *bq, *bk, *bv, *bo, *blse;
    AT_CHECK(at_buffer_create(ctx, nq * 4, &bq));
    AT_CHECK(at_buffer_create(ctx, nkv * 4, &bk));
    AT_CHECK(at_buffer_create(ctx, nkv * 4, &bv));
    AT_CHECK(at_buffer_create(ctx, nq * 4, &bo));
    AT_CHECK(at_buffer_create(ctx, (size_t)(p.b * p.h * p.s) * 4, &blse));
    AT_CHECK(at_buffer_write(bq, 0, hq, nq * 4));
    AT_CHECK(at_buffer_write(bk, 0, hk, nkv * 4));
    AT_CHECK(at_buffer_write(bv, 0, hv, nkv * 4));

    printf("{\"problem\":{\"batch\":%lld,\"heads\":%lld,\"kv_heads\":%lld,\"seq\":%lld,"
           "\"seq_kv\":%lld,\"head_dim\":%lld,\"causal\":%s,\"dtype\":\"f32\","
           "\"layout\":\"bhsd\"},\"device\":\"%s\",\"min_seconds\":%g,\"max_runs\":%d,",
           (long long)p.b, (long long)p.h, (long long)p.g, (long long)p.s, (long long)p.s2,
           (long long)p.d, p.causal ? "true" : "false", at_context_device_name(ctx), min_s,
           max_runs);

    /* ---- ours ---- */
    if (do_ours) {
        at_attention_problem ap = {.batch = p.b,
                                   .heads = p.h,
                                   .kv_heads = p.g,
                                   .seq = p.s,
                                   .seq_kv = p.s2,
                                   .head_dim = p.d,
                                   .causal = p.causal,
                                   .dtype = AT_DTYPE_F32,
                                   .layout = AT_ATTENTION_BHSD};
        at_kernel *k = NULL;
        at_source src;
        st = at_attention_get(ctx, &ap, AT_GET_NO_FALLBACK, &k, &src);
        if (st != AT_OK) {
            fprintf(stderr, "ours: no tuned kernel in %s: %s (%s)\n", db, at_strerror(st),
                    at_context_last_error(ctx));
            printf("\"ours\":{\"status\":\"no tuned kernel\",\"error\":\"%s\"},", at_strerror(st));
        } else {
            ours_call c = {k,
                           at_buffer_devptr(bq),
                           at_buffer_devptr(bk),
                           at_buffer_devptr(bv),
                           at_buffer_devptr(bo),
                           at_buffer_devptr(blse)};
            memset(ho, 0xff, nq * 4); /* NaN: a row never written fails the check */
            AT_CHECK(at_buffer_write(bo, 0, ho, nq * 4));
            ours_run(&c);
            AT_CHECK(at_context_synchronize(ctx));
            AT_CHECK(at_buffer_read(bo, 0, ho, nq * 4));
            double err = check(&p, hq, hk, hv, ho);
            timing t = time_calls(ours_run, &c, queue, min_s, max_runs);
            fprintf(stderr, "ours: %s, error %.2g, median %.3f ms (%d runs)\n", at_kernel_config(k),
                    err, t.median_ms, t.runs);
            printf("\"ours\":{\"status\":\"%s\",\"config\":\"%s\",\"max_rel_error\":%.3g,"
                   "\"median_ms\":%.4f,\"min_ms\":%.4f,\"max_ms\":%.4f,\"runs\":%d},",
                   err < 1e-3 ? "ok" : "large_error", at_kernel_config(k), err, t.median_ms,
                   t.min_ms, t.max_ms, t.runs);
            at_kernel_destroy(k);
        }
    }

    /* ---- unfused ---- */
    if (do_unfused) {
        int64_t heads = p.b * p.h;
        /* Each head's scores start on a multiple of 32 floats: sub-buffer origins must be
         * aligned (128 bytes on PoCL). */
        size_t head_stride = ((size_t)(p.s * p.s2) + 31) / 32 * 32;
        at_buffer *bs;
        AT_CHECK(at_buffer_create(ctx, (size_t)heads * head_stride * 4, &bs));
        at_gemm_problem qk = {.m = p.s,
                              .n = p.s2,
                              .k = p.d,
                              .dtype = AT_DTYPE_F32,
                              .layout = AT_LAYOUT_NT,
                              .alpha = p.scale,
                              .beta = 0};
        at_gemm_problem pv = {.m = p.s,
                              .n = p.d,
                              .k = p.s2,
                              .dtype = AT_DTYPE_F32,
                              .layout = AT_LAYOUT_NN,
                              .alpha = 1,
                              .beta = 0};
        unfused_call c = {.p = &p, .queue = queue, .heads = heads};
        c.qk = tuned_gemm(&qk, gemm_budget, "qk");
        c.pv = tuned_gemm(&pv, gemm_budget, "pv");

        cl_int e;
        cl_device_id dev;
        CL_CHECK(clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof dev, &dev, NULL));
        const char *src = SOFTMAX_SRC;
        cl_program prog = clCreateProgramWithSource(clctx, 1, &src, NULL, &e);
        CL_CHECK(e);
        CL_CHECK(clBuildProgram(prog, 1, &dev, "-cl-std=CL1.2", NULL, NULL));
        c.softmax = clCreateKernel(prog, "softmax_rows", &e);
        CL_CHECK(e);
        cl_mem smem = at_buffer_devptr(bs).handle;
        cl_int a_seq = (cl_int)p.s, a_skv = (cl_int)p.s2, a_causal = p.causal,
               a_rows = (cl_int)(heads * p.s);
        cl_long a_stride = (cl_long)head_stride;
        CL_CHECK(clSetKernelArg(c.softmax, 0, sizeof smem, &smem));
        CL_CHECK(clSetKernelArg(c.softmax, 1, sizeof a_seq, &a_seq));
        CL_CHECK(clSetKernelArg(c.softmax, 2, sizeof a_skv, &a_skv));
        CL_CHECK(clSetKernelArg(c.softmax, 3, sizeof a_causal, &a_causal));
        CL_CHECK(clSetKernelArg(c.softmax, 4, sizeof a_rows, &a_rows));
        CL_CHECK(clSetKernelArg(c.softmax, 5, sizeof a_stride, &a_stride));

        c.qh = malloc((size_t)heads * 5 * sizeof(cl_mem));
        if (!c.qh) return 1;
        c.kh = c.qh + heads;
        c.vh = c.kh + heads;
        c.oh = c.vh + heads;
        c.sh = c.oh + heads;
        for (int64_t x = 0; x < heads; x++) {
            int64_t b = x / p.h, h = x % p.h;
            c.qh[x] = sub(at_buffer_devptr(bq).handle, q_off(&p, b, h), (size_t)(p.s * p.d));
            c.oh[x] = sub(at_buffer_devptr(bo).handle, q_off(&p, b, h), (size_t)(p.s * p.d));
            c.kh[x] = sub(at_buffer_devptr(bk).handle, kv_off(&p, b, h), (size_t)(p.s2 * p.d));
            c.vh[x] = sub(at_buffer_devptr(bv).handle, kv_off(&p, b, h), (size_t)(p.s2 * p.d));
            c.sh[x] = sub(smem, (size_t)x * head_stride, (size_t)(p.s * p.s2));
        }
        memset(ho, 0xff, nq * 4);
        AT_CHECK(at_buffer_write(bo, 0, ho, nq * 4));
        unfused_run(&c);
        CL_CHECK(clFinish(queue));
        AT_CHECK(at_buffer_read(bo, 0, ho, nq * 4));
        double err = check(&p, hq, hk, hv, ho);
        timing t = time_calls(unfused_run, &c, queue, min_s, max_runs);
        fprintf(stderr, "unfused: error %.2g, median %.3f ms (%d runs)\n", err, t.median_ms,
                t.runs);
        printf("\"unfused\":{\"status\":\"%s\",\"qk_config\":\"%s\",\"pv_config\":\"%s\","
               "\"max_rel_error\":%.3g,\"median_ms\":%.4f,\"min_ms\":%.4f,\"max_ms\":%.4f,"
               "\"runs\":%d,\"scores_mb\":%.1f},",
               err < 1e-3 ? "ok" : "large_error", at_kernel_config(c.qk), at_kernel_config(c.pv),
               err, t.median_ms, t.min_ms, t.max_ms, t.runs,
               (double)heads * (double)head_stride * 4 / 1e6);
        for (int64_t x = 0; x < 5 * heads; x++) clReleaseMemObject(c.qh[x]);
        free(c.qh);
        clReleaseKernel(c.softmax);
        clReleaseProgram(prog);
        at_kernel_destroy(c.qk);
        at_kernel_destroy(c.pv);
        at_buffer_destroy(bs);
    }
    printf("\"status\":\"ok\"}\n");

    at_buffer_destroy(bq);
    at_buffer_destroy(bk);
    at_buffer_destroy(bv);
    at_buffer_destroy(bo);
    at_buffer_destroy(blse);
    at_context_destroy(ctx);
    free(hq);
    free(hk);
    free(hv);
    free(ho);
    return 0;
}
