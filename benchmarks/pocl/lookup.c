/* lookup.c — the layered store's lookup time on the OpenCL device (docs/shipping.md): a shipped
 * layer of N best entries, then a cold process's time to a launchable kernel (context, layers,
 * chain, build from a cached binary) and the hot at_lookup. benchmarks/pocl/lookup.sh runs it.
 *
 *   lookup prepare DIR N   DIR/layer: N GEMM best entries of this device (f32, the 4 layouts
 *                          of MxNxK, M then N then K from 16 in steps of 16; N = 10000 holds
 *                          256x256x16), the template's trusted hash and default config
 *   lookup cold DIR M N K  one at_gemm_get of MxNxK with DIR/layer on the path and DIR/user as
 *                          the user's database: milliseconds of each step and the source
 *   lookup hot DIR M N K R R at_lookup calls of MxNxK after the first, then R at_gemm_get +
 *                          at_kernel_destroy after the first (the kernel cache): microseconds
 *                          per call
 *   lookup opencl          the OpenCL runtime's own start-up (platform, device, context and
 *                          queue, what at_context_create cannot avoid), for comparison
 * $LOOKUP_LAYER replaces DIR/layer on the search path (the same entries as a bundle). */
#define _GNU_SOURCE
#include "autotune.h"
#include "tuner/tuner.h" /* the best records of the crafted layer */

#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double ms_since(double t0) { return (at_now() - t0) * 1e3; }

static int die(const char *what, at_context *ctx)
{
    fprintf(stderr, "lookup: %s: %s\n", what, ctx ? at_context_last_error(ctx) : at_errmsg());
    return 1;
}

static at_context *open_ctx(const char *dir, at_status *s)
{
    static char user[1024], layer[1024];
    snprintf(user, sizeof user, "%s/user", dir);
    snprintf(layer, sizeof layer, "%s/layer", dir);
    if (getenv("LOOKUP_LAYER")) snprintf(layer, sizeof layer, "%s", getenv("LOOKUP_LAYER"));
    at_context_options o = {.backend = AT_BACKEND_OPENCL, .db_path = user, .db_search_path = layer};
    at_context *ctx = NULL;
    *s = at_context_create(&o, &ctx);
    return ctx;
}

static int prepare(const char *dir, long n)
{
    at_status s;
    at_context *ctx = open_ctx(dir, &s);
    if (s != AT_OK) return die("context", ctx);
    char layer[1024];
    snprintf(layer, sizeof layer, "%s/layer", dir);
    at_template *t = NULL;
    if (at_template_load("gemm", "opencl", &t) != AT_OK) return die("template", NULL);
    at_db *db = NULL;
    if (at_db_open(layer, AT_DB_READWRITE, &db) != AT_OK) return die("layer", NULL);
    const char *layouts[] = {"nn", "nt", "tn", "tt"};
    char **keys = malloc((size_t)n * sizeof *keys);
    at_best_rec *recs = calloc((size_t)n, sizeof *recs);
    long made = 0;
    for (long i = 0; made < n; i++) { /* the 4 layouts of shapes 16..2048 in steps of 16 */
        long j = i / 4, m = 16 * (1 + j % 128), nn = 16 * (1 + (j / 128) % 128),
             k = 16 * (1 + (j / 16384) % 128);
        char key[128];
        snprintf(key, sizeof key, "gemm/f32/%s/%ldx%ldx%ld", layouts[i % 4], m, nn, k);
        at_gemm_problem g = {.m = m, .n = nn, .k = k, .layout = (at_layout)(i % 4), .alpha = 1};
        at_lookup_info in;
        at_problem pv = at_problem_view(&at_op_gemm, &g);
        if (at_lookup(ctx, &pv, 0, &in) != AT_OK) return die("default", ctx);
        at_best_rec *b = &recs[made];
        snprintf(b->config, sizeof b->config, "%s", in.config);
        snprintf(b->template_hash, sizeof b->template_hash, "%s", t->hash);
        snprintf(b->template_name, sizeof b->template_name, "gemm");
        b->time_us = 100;
        keys[made++] = at_db_best_key(key, at_context_device_key(ctx));
    }
    at_context_destroy(ctx);
    for (long i = 0; i < n; i++)
        if (at_db_put_best(db, keys[i], &recs[i], 1) != AT_OK) return die("put", NULL);
    for (long i = 0; i < n; i++) free(keys[i]);
    free(keys);
    free(recs);
    at_db_close(db);
    at_template_free(t);
    char lock[1100];
    snprintf(lock, sizeof lock, "%s/lock.mdb", layer);
    unlink(lock);
    printf("prepared %ld best entries in %s\n", n, layer);
    return 0;
}

/* The OpenCL runtime's start-up alone: the floor of a cold process's time to a kernel. */
static int opencl_start(void)
{
    double t0 = at_now();
    cl_platform_id p;
    cl_device_id d;
    cl_uint n = 0;
    cl_int e = clGetPlatformIDs(1, &p, &n);
    if (e == CL_SUCCESS && n) e = clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL);
    double t_platform = ms_since(t0);
    cl_context c = e == CL_SUCCESS && n ? clCreateContext(NULL, 1, &d, NULL, NULL, &e) : NULL;
    cl_command_queue q = c ? clCreateCommandQueueWithProperties(c, d, NULL, &e) : NULL;
    if (!q) return die("OpenCL", NULL);
    printf("opencl start-up: platform and device %.2f ms + context and queue %.2f ms = %.2f ms\n",
           t_platform, ms_since(t0) - t_platform, ms_since(t0));
    clReleaseCommandQueue(q);
    clReleaseContext(c);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "opencl") == 0) return opencl_start();
    if (argc == 4 && strcmp(argv[1], "prepare") == 0) return prepare(argv[2], atol(argv[3]));
    if (argc < 6 || (strcmp(argv[1], "cold") && strcmp(argv[1], "hot"))) {
        fprintf(stderr,
                "usage: lookup prepare DIR N | cold DIR M N K | hot DIR M N K R | opencl\n");
        return 2;
    }
    at_gemm_problem g = {.m = atol(argv[3]), .n = atol(argv[4]), .k = atol(argv[5]), .alpha = 1};
    double t0 = at_now();
    at_status s;
    at_context *ctx = open_ctx(argv[2], &s);
    if (s != AT_OK) return die("context", ctx);
    double t_ctx = ms_since(t0);
    at_problem pv = at_problem_view(&at_op_gemm, &g);
    if (strcmp(argv[1], "hot") == 0) {
        long r = argc > 6 ? atol(argv[6]) : 100000;
        at_lookup_info in;
        if (at_lookup(ctx, &pv, 0, &in) != AT_OK) return die("lookup", ctx);
        double t1 = at_now();
        for (long i = 0; i < r; i++) at_lookup(ctx, &pv, 0, &in);
        printf("hot at_lookup %ldx%ldx%ld: %.3f us per call (%ld calls), source %d\n", (long)g.m,
               (long)g.n, (long)g.k, (at_now() - t1) / (double)r * 1e6, r, (int)in.source);
        /* A repeated at_gemm_get: the kernel cache shares the program built by the first. */
        at_kernel *k = NULL;
        t1 = at_now();
        if (at_gemm_get(ctx, &g, 0, &k, NULL) != AT_OK) return die("get", ctx);
        double t_first = ms_since(t1);
        at_kernel_destroy(k);
        t1 = at_now();
        for (long i = 0; i < r; i++) {
            if (at_gemm_get(ctx, &g, 0, &k, NULL) != AT_OK) return die("get", ctx);
            at_kernel_destroy(k);
        }
        printf("hot at_gemm_get + at_kernel_destroy %ldx%ldx%ld: %.3f us per call (%ld calls; "
               "the first %.2f ms)\n",
               (long)g.m, (long)g.n, (long)g.k, (at_now() - t1) / (double)r * 1e6, r, t_first);
        at_context_destroy(ctx);
        return 0;
    }
    double t1 = at_now();
    at_lookup_info in;
    if (at_lookup(ctx, &pv, 0, &in) != AT_OK) return die("lookup", ctx);
    double t_lookup = ms_since(t1);
    t1 = at_now();
    at_kernel *k = NULL;
    at_source src;
    if (at_gemm_get(ctx, &g, 0, &k, &src) != AT_OK) return die("get", ctx);
    double t_build = ms_since(t1);
    at_lookup_info ki;
    at_kernel_info(k, &ki);
    printf("cold %ldx%ldx%ld: context %.2f ms + lookup %.2f ms + build %.2f ms = %.2f ms to a "
           "kernel (source %d, validated %d, from the binaries table %d)\n",
           (long)g.m, (long)g.n, (long)g.k, t_ctx, t_lookup, t_build, ms_since(t0), (int)src,
           ki.validated, k->from_binary);
    at_kernel_destroy(k);
    at_context_destroy(ctx);
    return 0;
}
