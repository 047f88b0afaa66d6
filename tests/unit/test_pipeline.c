/* test_pipeline.c — the candidate pipeline's GPU-side logic on a fake backend that runs on the
 * host: statuses (ok, compile_error, resource_limit, wrong_result, crashed), the cache flush
 * before each timed run, a poisoned context recycled with the run resumed from the database,
 * dynamic shared memory, workspaces and split-K (a host emulation of gemm_mma's reduction
 * protocol) reaching the launch, and tensor maps (TMA) encoded for the buffers each launch
 * passes. No device needed. */
#define _DEFAULT_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tuner/pipeline.h"
#include "tuner/tuner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- the fake backend ------------------------------------------------------------------------ */

struct at_bdev {
    int poisoned;
};
struct at_bprog {
    char options[1024];
};

static int g_opens, g_fills, g_launches, g_crashes, g_compiles;
static size_t g_read_bytes;                    /* read back from the device */
static size_t g_shared_max, g_splitk_launches; /* largest dynamic shared size seen; split-K runs */

static int has(const at_bprog *p, const char *define) { return strstr(p->options, define) != NULL; }

static at_status f_probe(char *why, size_t len)
{
    if (why && len) why[0] = '\0';
    return AT_OK;
}
static int f_count(void) { return 1; }
static at_status f_info(int idx, at_device_info *o)
{
    (void)idx;
    memset(o, 0, sizeof *o);
    snprintf(o->backend, sizeof o->backend, "fake");
    snprintf(o->name, sizeof o->name, "fake GPU");
    snprintf(o->key, sizeof o->key, "fake/gpu/1");
    o->max_work_group_size = 1024;
    o->max_work_item_sizes[0] = o->max_work_item_sizes[1] = o->max_work_item_sizes[2] = 1024;
    o->local_mem_bytes = 48 * 1024;
    o->max_shared_optin = 100 * 1024;
    o->compute_units = 4;
    o->max_registers_per_block = 65536;
    o->l2_bytes = 4096; /* a GPU: the pipeline flushes this much before each timed run */
    o->tma = 1;
    return AT_OK;
}
static at_status f_open(int idx, at_bdev **out)
{
    (void)idx;
    g_opens++;
    *out = calloc(1, sizeof **out);
    return AT_OK;
}
static void f_close(at_bdev *d) { free(d); }
static const char *f_version(at_bdev *d)
{
    (void)d;
    return "fake 1";
}
static at_status f_compile(at_bdev *d, const char *src, const char *options, const char *name,
                           at_bprog **out, char **log)
{
    (void)d, (void)src, (void)name;
    *log = NULL;
    g_compiles++;
    if (strstr(options, "-DBM=16 -DBN=16 ")) {
        *log = strdup("gemm.cl:1: error: deliberately broken");
        return at_fail(AT_ERR_COMPILE, "compile failed");
    }
    *out = calloc(1, sizeof **out);
    snprintf((*out)->options, sizeof(*out)->options, "%s ", options);
    return AT_OK;
}
static at_status f_binary(at_bprog *p, void **bin, size_t *len)
{
    *len = strlen(p->options) + 1;
    *bin = strdup(p->options);
    return AT_OK;
}
static at_status f_load(at_bdev *d, const void *bin, size_t len, const char *name, at_bprog **out,
                        char **log)
{
    (void)d, (void)name, (void)log;
    /* A binary is the options it was compiled with: anything else is a broken binary. */
    if (len < 3 || strncmp(bin, "-D", 2) != 0 || ((const char *)bin)[len - 1] != '\0')
        return at_fail(AT_ERR_COMPILE, "not a binary of this device");
    *out = calloc(1, sizeof **out);
    snprintf((*out)->options, sizeof(*out)->options, "%s", (const char *)bin);
    return AT_OK;
}
static void f_free(at_bprog *p) { free(p); }
static at_status f_resources(at_bprog *p, at_resources *r)
{
    *r = (at_resources){.registers = 32, .spill_bytes = has(p, "-DBM=32 -DBN=16 ") ? 64 : 0};
    return AT_OK;
}
static at_status f_alloc(at_bdev *d, size_t bytes, at_bbuf *out)
{
    (void)d;
    out->handle = calloc(1, bytes);
    out->bytes = bytes;
    return out->handle ? AT_OK : AT_ERR_NO_MEMORY;
}
static at_status f_write(at_bdev *d, at_bbuf b, size_t off, const void *src, size_t n)
{
    if (d->poisoned) return at_fail(AT_ERR_LAUNCH, "context poisoned");
    memcpy((char *)b.handle + off, src, n);
    return AT_OK;
}
static at_status f_read(at_bdev *d, at_bbuf b, size_t off, void *dst, size_t n)
{
    if (d->poisoned) return at_fail(AT_ERR_LAUNCH, "context poisoned");
    memcpy(dst, (char *)b.handle + off, n);
    g_read_bytes += n;
    return AT_OK;
}
static void f_buf_free(at_bdev *d, at_bbuf b)
{
    (void)d;
    free(b.handle);
}
/* The middle of a buffer, for guard zones (freed with the buffer). */
static at_status f_view(at_bdev *d, at_bbuf b, size_t off, size_t bytes, at_bbuf *out)
{
    (void)d;
    out->handle = (char *)b.handle + off;
    out->bytes = bytes;
    return off + bytes <= b.bytes ? AT_OK : at_fail(AT_ERR_INVALID_ARG, "view out of range");
}
static at_status f_fill(at_bdev *d, at_bbuf b, unsigned char v)
{
    (void)d;
    memset(b.handle, v, b.bytes);
    g_fills++;
    return AT_OK;
}
static at_status f_check(at_bdev *d) { return d->poisoned ? AT_ERR_DEVICE_LOST : AT_OK; }
static at_status f_finish(at_bdev *d)
{
    (void)d;
    return AT_OK;
}

/* The template the pipeline runs (loaded by each test): the fake reads the kernel's arguments by
 * the names its `arguments:` list gives them, through the library's own argument index. */
static at_template *g_tpl;

static const void *arg(const at_karg *a, at_arg_kind kind, const char *name)
{
    int i = at_args_index(g_tpl->space->args, g_tpl->space->nargs, kind, name);
    assert_true(i >= 0);
    return a[i].ptr;
}
#define I32(name) (*(const int *)arg(a, AT_ARG_SCALAR, name))
#define F32(name) (*(const float *)arg(a, AT_ARG_SCALAR, name))
#define BUF(role) (*(float *const *)arg(a, AT_ARG_BUFFER, role))

static int64_t define_of(const at_bprog *p, const char *name)
{
    char pat[64];
    snprintf(pat, sizeof pat, "-D%s=", name);
    const char *at = strstr(p->options, pat);
    return at ? strtoll(at + strlen(pat), NULL, 10) : -1;
}

/* gemm_mma's split-K protocol on the host, block by block in a scrambled order: block (tile,
 * split) computes its K range (whole BK tiles, possibly empty), adds the partial tile into the
 * f32 workspace, counts its arrival on the tile's counter; the last to arrive reads the sums,
 * writes alpha*acc + beta*C (C not read when beta == 0) and zeroes the tile and the counter.
 * BM=32,SPLITK=8 "forgets" to reset its counters (the pipeline must notice). */
static at_status splitk_emulate(const at_bprog *p, const at_karg *a, size_t n, const size_t g[3],
                                const size_t l[3])
{
    const int64_t S = define_of(p, "SPLITK"), BM = define_of(p, "BM"), BN = define_of(p, "BN"),
                  BK = define_of(p, "BK");
    int M = I32("m"), N = I32("n"), K = I32("k");
    float alpha = F32("alpha"), beta = F32("beta");
    const float *A = BUF("A"), *B = BUF("B");
    float *C = BUF("C");
    int lda = I32("lda"), ldb = I32("ldb"), ldc = I32("ldc");
    if (n != 12 || g[2] != (size_t)S || l[2] != 1)
        return at_fail(AT_ERR_LAUNCH, "split-K launch: %zu arguments, global[2] %zu", n, g[2]);
    float *ws = *(float *const *)arg(a, AT_ARG_WORKSPACE, NULL);
    const int64_t tm = (M + BM - 1) / BM, tn = (N + BN - 1) / BN, tiles = tm * tn;
    unsigned *count = (unsigned *)(ws + tiles * BM * BN);
    const int64_t KT = (K + BK - 1) / BK, tps = (KT + S - 1) / S, blocks = tiles * S;
    for (int64_t b0 = 0; b0 < blocks; b0++) {
        const int64_t b = (b0 * 7919) % blocks, tile = b / S, split = b % S;
        const int64_t i0 = (tile / tn) * BM, j0 = (tile % tn) * BN;
        const int64_t k0 = split * tps * BK,
                      k1 = (split + 1) * tps * BK < K ? (split + 1) * tps * BK : K;
        float *wt = ws + tile * BM * BN;
        for (int64_t i = 0; i < BM; i++)
            for (int64_t j = 0; j < BN; j++) {
                double s = 0;
                for (int64_t q = k0; i0 + i < M && j0 + j < N && q < k1; q++)
                    s += (double)A[(i0 + i) * lda + q] * B[q * ldb + j0 + j];
                wt[i * BN + j] += (float)s; /* atomicAdd */
            }
        if (++count[tile] != (unsigned)S) continue; /* __threadfence(); atomicAdd(count) */
        for (int64_t i = 0; i < BM; i++)
            for (int64_t j = 0; j < BN; j++) {
                float v = alpha * wt[i * BN + j];
                wt[i * BN + j] = 0.0f; /* atomicExch(.., 0) */
                if (i0 + i >= M || j0 + j >= N) continue;
                float *c = &C[(i0 + i) * ldc + j0 + j];
                *c = beta != 0.0f ? v + beta * *c : v;
            }
        if (!(BM == 32 && S == 8)) count[tile] = 0;
    }
    g_splitk_launches++;
    return AT_OK;
}

/* A tensor map as the fake encodes it: the description, then the buffer's address. */
typedef struct fake_map {
    at_tmap_desc desc;
    const void *handle;
} fake_map;
static int g_encodes;

/* Refuses what the hardware would (an address not 16-byte aligned) and, to see a failed
 * encode recorded as the candidate's outcome, boxes of 16 rows. */
static at_status f_encode(at_bdev *d, const at_tmap_desc *t, const void *handle, void *out)
{
    (void)d;
    g_encodes++;
    if ((uintptr_t)handle % 16) return at_fail(AT_ERR_INVALID_ARG, "not 16-byte aligned");
    if (t->box[1] == 16) return at_fail(AT_ERR_INVALID_ARG, "box of %u rows", t->box[1]);
    assert_int_equal((uintptr_t)out % 64, 0);
    memset(out, 0, AT_TMAP_BYTES);
    memcpy(out, &(fake_map){*t, handle}, sizeof(fake_map));
    return AT_OK;
}

/* LOAD=1 kernels of the TMA space take a map of A after C: it must be A's, as it is passed. */
static at_status check_map(const at_bprog *p, const at_karg *a, size_t n)
{
    const int64_t load = define_of(p, "LOAD");
    if (n != (size_t)(11 + load))
        return at_fail(AT_ERR_LAUNCH, "LOAD=%lld: %zu arguments", (long long)load, n);
    if (!load) return AT_OK;
    if (a[11].size != AT_TMAP_BYTES)
        return at_fail(AT_ERR_LAUNCH, "a map of %zu bytes", a[11].size);
    fake_map m;
    memcpy(&m, a[11].ptr, sizeof m);
    if (m.handle != BUF("A") || m.desc.cols != (uint64_t)I32("k") ||
        m.desc.rows != (uint64_t)I32("m") || m.desc.ld_bytes != (uint64_t)I32("lda") * 4 ||
        m.desc.box[0] != 4 || m.desc.box[1] != (uint32_t)define_of(p, "BM") ||
        m.desc.dtype != AT_DTYPE_F32 || m.desc.buffer != 0)
        return at_fail(AT_ERR_LAUNCH, "a wrong map");
    return AT_OK;
}

/* Runs the GEMM on the host (nn layout); BM=16,BN=32 is wrong, BM=32,BN=32,SA=1 faults.
 * Configs with SPLITK > 1 run splitk_emulate. */
static at_status f_launch(at_bdev *d, at_bprog *p, const at_karg *a, size_t n, const size_t g[3],
                          const size_t l[3], size_t dims, size_t cluster, size_t shared_bytes,
                          void *stream, double *ms)
{
    (void)n, (void)g, (void)l, (void)dims, (void)stream;
    if (d->poisoned) return at_fail(AT_ERR_LAUNCH, "context poisoned");
    /* `launch: cluster:` reaches the launch: CL in the cluster space, else none */
    const int64_t cl = define_of(p, "CL");
    if (cluster != (size_t)(cl > 0 ? cl : 1))
        return at_fail(AT_ERR_LAUNCH, "launched in clusters of %zu", cluster);
    g_launches++;
    if (shared_bytes > g_shared_max) g_shared_max = shared_bytes;
    if (define_of(p, "SPLITK") >= 1) { /* the split-K space of test_splitk_workspace_shared */
        if (shared_bytes != (size_t)(1024 * define_of(p, "BM")))
            return at_fail(AT_ERR_LAUNCH, "dynamic shared memory %zu", shared_bytes);
        at_status s = define_of(p, "SPLITK") > 1 ? splitk_emulate(p, a, n, g, l) : AT_OK;
        if (s != AT_OK) return s;
        if (ms) *ms = 10.0 / (double)define_of(p, "SPLITK") + (define_of(p, "BM") == 16);
        if (define_of(p, "SPLITK") > 1) return AT_OK;
    }
    /* the space of test_scratch: a 16-byte workspace that must be zero, then SC * 64 bytes of
     * scratch that SC=1 writes before it reads and SC=2 reads as if it were zero */
    float from_scratch = 0.0f;
    if (define_of(p, "SC") >= 1) {
        unsigned char *ws = *(unsigned char *const *)arg(a, AT_ARG_WORKSPACE, NULL);
        for (int i = 0; i < 16; i++)
            if (ws[i]) return at_fail(AT_ERR_LAUNCH, "a workspace that is not zero");
        float *scratch = (float *)(ws + 16);
        if (define_of(p, "SC") == 1) scratch[0] = 0.0f;
        from_scratch = scratch[0];
    }
    if (define_of(p, "LOAD") >= 0) {
        at_status s = check_map(p, a, n);
        if (s != AT_OK) return s;
    }
    if (has(p, "-DBM=32 -DBN=32 ") && has(p, "-DSA=1 ")) {
        d->poisoned = 1;
        g_crashes++;
        return at_fail(AT_ERR_LAUNCH, "illegal address");
    }
    int M = I32("m"), N = I32("n"), K = I32("k");
    float alpha = F32("alpha"), beta = F32("beta");
    const float *A = BUF("A"), *B = BUF("B");
    float *C = BUF("C");
    int lda = I32("lda"), ldb = I32("ldb"), ldc = I32("ldc");
    double *acc = malloc((size_t)N * sizeof *acc); /* a row at a time: B read in order */
    if (!acc) return at_fail(AT_ERR_NO_MEMORY, "fake launch");
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) acc[j] = 0;
        for (int q = 0; q < K; q++) {
            const double aq = A[i * lda + q];
            const float *bq = B + (size_t)q * ldb;
            for (int j = 0; j < N; j++) acc[j] += aq * bq[j];
        }
        for (int j = 0; j < N; j++)
            C[i * ldc + j] = (float)(alpha * acc[j] + (beta != 0.0f ? beta * C[i * ldc + j] : 0.0));
    }
    free(acc);
    C[0] += from_scratch;
    if (has(p, "-DBM=16 -DBN=32 ")) C[0] += 1.0f;
    /* Bigger tiles are faster on the fake GPU, so the best is known. */
    if (ms && define_of(p, "SPLITK") < 0)
        *ms = 1.0 + 100.0 / (double)(strstr(p->options, "-DBM=32") ? 32 : 16) -
              0.5 * (define_of(p, "LOAD") == 1);
    return AT_OK;
}
static void *f_native(at_bdev *d)
{
    (void)d;
    return NULL;
}

static const at_backend_ops fake = {
    .name = "fake",
    .probe = f_probe,
    .device_count = f_count,
    .device_info = f_info,
    .open = f_open,
    .close = f_close,
    .compiler_version = f_version,
    .compile = f_compile,
    .program_binary = f_binary,
    .load_binary = f_load,
    .program_free = f_free,
    .resources = f_resources,
    .buffer_alloc = f_alloc,
    .buffer_write = f_write,
    .buffer_read = f_read,
    .buffer_free = f_buf_free,
    .buffer_view = f_view,
    .buffer_fill = f_fill,
    .launch = f_launch,
    .check = f_check,
    .finish = f_finish,
    .native_context = f_native,
    .native_queue = f_native,
    .encode_tensor_map = f_encode,
};

/* ---- the test ---------------------------------------------------------------------------------
 */

static char g_dir[64];

static int count_status(void *user, const char *key, const char *value)
{
    (void)key;
    const char **want = user;
    if (strstr(value, want[0])) want[1]++; /* a counter smuggled in the second slot */
    return 0;
}

/* A context on the fake GPU with its database in g_dir. */
static at_context fake_context(int threads)
{
    at_context ctx = {.ops = &fake, .compile_threads = threads};
    f_info(0, &ctx.info);
    assert_int_equal(at_db_open(g_dir, 0, &ctx.db), AT_OK);
    assert_int_equal(fake.open(0, &ctx.dev), AT_OK);
    return ctx;
}

static void test_statuses_flush_and_recycle(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/at-test-pipe-XXXXXX");
    assert_non_null(mkdtemp(g_dir));
    /* A tiny space: the real gemm.yaml with 2 x 2 x 2 values (without its GPU-only pruning),
     * and an empty preamble. */
    char cmd[2048];
    snprintf(
        cmd, sizeof cmd,
        "mkdir -p %s/tpl/gemm %s/tpl/common && "
        "cp %s/templates/gemm/gemm.cl %s/templates/gemm/gemm_problem.h %s/tpl/gemm/ && "
        ": > %s/tpl/common/fake.h && "
        "sed -e 's/^  BM: .*/  BM: [16, 32]/' -e 's/^  BN: .*/  BN: [16, 32]/' "
        "-e 's/^  BK: .*/  BK: [8]/' -e 's/^  TM: .*/  TM: [2]/' -e 's/^  TN: .*/  TN: [2]/' "
        "-e 's/^  VW: .*/  VW: [1]/' -e 's/^  STRN: .*/  STRN: [0]/' -e 's/^  SB: .*/  SB: [0]/' "
        "-e 's/^  PAD: .*/  PAD: [0]/' -e 's/^  UNROLL: .*/  UNROLL: [1]/' -e '/^defaults:/,$d' "
        "-e '/device.is_cpu ||/d' -e 's/^backends: .*/backends: [fake]/' "
        "%s/templates/gemm/gemm.yaml > %s/tpl/gemm/gemm.yaml && "
        "echo 'defaults: []' >> %s/tpl/gemm/gemm.yaml",
        g_dir, g_dir, AT_SOURCE_DIR, AT_SOURCE_DIR, g_dir, g_dir, AT_SOURCE_DIR, g_dir, g_dir);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/tpl", g_dir);
    setenv("AUTOTUNE_TEMPLATE_PATH", cmd, 1);
    assert_int_equal(at_template_load("gemm", "fake", &g_tpl), AT_OK);

    at_context ctx = fake_context(2);

    at_gemm_problem p = {.m = 9, .n = 7, .k = 5, .alpha = 1};
    at_tune_options o = {.strategy = "exhaustive"};
    at_tune_report r;
    at_kernel *k = NULL;
    /* A kernel built before the run, on the device the crash will make it recycle. */
    at_problem gp0 = at_problem_view(&at_op_gemm, &p);
    at_template *t0 = NULL;
    at_kernel *k0 = NULL;
    assert_int_equal(at_template_for(&gp0, &ctx.info, NULL, &t0), AT_OK);
    assert_int_equal(
        at_kernel_build(&ctx, t0, &gp0,
                        "BM=32,BN=32,BK=8,TM=2,TN=2,VW=1,STRN=0,SB=0,PAD=0,UNROLL=1,SA=0", &k0),
        AT_OK);
    at_template_free(t0);
    g_opens = 0;
    assert_int_equal(at_gemm_tune(&ctx, &p, &o, &r, &k), AT_OK);
    /* ... is stale now: refused at launch, destroyed without touching the new device (its
     * program was on the old one; the fake's is plain memory, freed here) */
    assert_int_equal(ctx.recycles, 1);
    float dummy[64];
    at_devptr bufs[3] = {{dummy}, {dummy}, {dummy}};
    assert_int_equal(at_kernel_launch(k0, bufs, 3, NULL), AT_ERR_DEVICE_LOST);
    assert_non_null(strstr(at_errmsg(), "built before a faulting candidate"));
    at_bprog *stale_prog = k0->prog;
    at_kernel_destroy(k0);
    f_free(stale_prog);
    assert_int_equal(k->recycles, 1); /* the best kernel: built on the new device */
    /* 8 configs: 2 do not compile (BM=16,BN=16), 2 spill (BM=32,BN=16), 2 are wrong
     * (BM=16,BN=32), SA=1 of BM=32,BN=32 crashes; one (BM=32,BN=32,SA=0) is fine. */
    assert_int_equal(r.space, 8);
    assert_int_equal(r.evaluated, 8);
    assert_int_equal(r.failed, 7);
    assert_int_equal(g_crashes, 1);
    assert_int_equal(g_opens, 1); /* the poisoned context was recycled once */
    assert_non_null(strstr(r.best_config, "BM=32,BN=32"));
    assert_non_null(strstr(r.best_config, "SA=0"));
    assert_true(g_fills >= 3); /* the cache was flushed before every timed run */
    assert_non_null(k);
    at_kernel_destroy(k);

    const char *want[][2] = {{"status=compile_error", 0},
                             {"status=resource_limit", 0},
                             {"status=wrong_result", 0},
                             {"status=crashed", 0},
                             {"status=ok", 0}};
    const intptr_t expect[] = {2, 2, 2, 1, 1};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(at_db_scan(ctx.db, "results", "gemm/f32/nn/9x7x5|", count_status, want[i]),
                         AT_OK);
        if ((intptr_t)want[i][1] != expect[i])
            fail_msg("%s: %ld records, want %ld", want[i][0], (long)(intptr_t)want[i][1],
                     (long)expect[i]);
    }

    /* Schema 2.1: every result names its template; the device's identity is stored. */
    const char *tmpl[2] = {"template=\"gemm\"", 0};
    assert_int_equal(at_db_scan(ctx.db, "results", "gemm/f32/nn/9x7x5|", count_status, tmpl),
                     AT_OK);
    assert_int_equal((intptr_t)tmpl[1], 8);
    at_device_rec dev;
    assert_int_equal(at_db_get_device(ctx.db, "fake/gpu/1", &dev), AT_OK);
    assert_string_equal(dev.backend, "fake");
    assert_string_equal(dev.name, "fake GPU");
    assert_string_equal(dev.compiler, "fake 1");
    assert_true(dev.when > 0);

    /* A second run measures nothing: the crashed candidate is not run again. */
    int launches = g_launches;
    o.force = 0;
    assert_int_equal(at_gemm_tune(&ctx, &p, &o, &r, NULL), AT_OK);
    assert_int_equal(r.cache_hit, 1);
    assert_int_equal(g_launches, launches);

    /* The best kernel's binary was stored: building it again loads it and compiles nothing. */
    at_problem gp = at_problem_view(&at_op_gemm, &p);
    at_template *t = NULL;
    assert_int_equal(at_template_for(&gp, &ctx.info, NULL, &t), AT_OK);
    int compiles = g_compiles;
    assert_int_equal(at_kernel_build(&ctx, t, &gp, r.best_config, &k), AT_OK);
    assert_int_equal(k->from_binary, 1);
    assert_int_equal(g_compiles, compiles);
    at_kernel_destroy(k);
    /* A broken binary in the table is not trusted: the kernel is compiled from source. */
    char **keys = NULL;
    size_t nkeys = 0;
    assert_int_equal(at_db_keys(ctx.db, "binaries", NULL, &keys, &nkeys), AT_OK);
    assert_true(nkeys > 0);
    for (size_t i = 0; i < nkeys; i++)
        assert_int_equal(at_db_put_binary(ctx.db, keys[i], "broken", 6), AT_OK);
    at_db_keys_free(keys, nkeys);
    assert_int_equal(at_kernel_build(&ctx, t, &gp, r.best_config, &k), AT_OK);
    assert_int_equal(k->from_binary, 0);
    assert_int_equal(g_compiles, compiles + 1);
    at_kernel_destroy(k);
    at_template_free(t);

    /* A big problem (above 2^30 multiply-adds): the reference is kept for a spread of 64 of
     * C's 66 rows and only they come back, with C's guards; C (beta 0: all NaN before a run)
     * is reset by a fill on the device, not an upload. A wrong value in row 0 is still seen. */
    at_gemm_problem big = {.m = 66, .n = 2048, .k = 8192, .alpha = 1};
    at_problem bp = at_problem_view(&at_op_gemm, &big);
    at_result_rec rec;
    const char *cfg_ok = "BM=32,BN=32,BK=8,TM=2,TN=2,VW=1,STRN=0,SB=0,PAD=0,UNROLL=1,SA=0";
    int fills = g_fills;
    g_read_bytes = 0;
    assert_int_equal(at_template_for(&bp, &ctx.info, NULL, &t), AT_OK);
    assert_int_equal(at_config_run(&ctx, t, &bp, cfg_ok, 0, &rec), AT_OK);
    if (rec.status != AT_RS_OK) fail_msg("big problem: %s", rec.reason);
    assert_true(rec.max_rel_error < 1e-3);
    size_t in_bytes = (66 * 8192 + 8192 * 2048) * sizeof(float) + 4 * AT_GUARD_BYTES;
    assert_int_equal(g_read_bytes, in_bytes + 64 * 2048 * sizeof(float) + 2 * AT_GUARD_BYTES);
    assert_int_equal(g_fills, fills + 1);
    const char *cfg_wrong = "BM=16,BN=32,BK=8,TM=2,TN=2,VW=1,STRN=0,SB=0,PAD=0,UNROLL=1,SA=0";
    assert_int_equal(at_config_run(&ctx, t, &bp, cfg_wrong, 0, &rec), AT_OK);
    assert_int_equal(rec.status, AT_RS_WRONG_RESULT);
    at_template_free(t);

    /* On the caller's context (native handles) the crash is not recovered: the context is
     * theirs, never closed and reopened; the run ends with AT_ERR_DEVICE_LOST. */
    ctx.native = 1;
    o.force = 1;
    g_opens = 0;
    assert_int_equal(at_gemm_tune(&ctx, &p, &o, &r, NULL), AT_ERR_DEVICE_LOST);
    assert_non_null(strstr(at_context_last_error(&ctx), "native_context"));
    assert_int_equal(g_opens, 0);

    fake.close(ctx.dev);
    at_db_close(ctx.db);
    at_template_free(g_tpl);
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    assert_int_equal(system(cmd), 0);
}

/* What every fake GEMM template below starts with, and the first of its kernel arguments (the
 * operation's, in gemm.cl's order); each template adds what it tests. */
#define FAKE_GEMM_HEAD                                                                             \
    "name: gemm\noperation: gemm\nbackends: [fake]\nkernel: gemm\nsource: gemm.cl\n"
#define FAKE_GEMM_ARGS                                                                             \
    "arguments: [i32: m, i32: n, i32: k, f32: alpha, f32: beta, buffer: A, i32: lda,\n"            \
    "            buffer: B, i32: ldb, buffer: C, i32: ldc"

static const char YAML_SPLITK[] = FAKE_GEMM_HEAD
    "problem: [m, n, k, ta, tb, big]\n"
    "device: [max_shared_optin]\n"
    "parameters:\n  BM: [16, 32, 128]\n  BN: [8]\n  BK: [4]\n  SPLITK: [1, 2, 4, 8]\n"
    "derived:\n  TILES: ceil_div(m, BM) * ceil_div(n, BN)\n  SMEM: 1024 * BM\n"
    "constraints:\n  - SMEM <= device.max_shared_optin\n"
    "launch:\n  global: [ceil_div(n, BN) * 32, ceil_div(m, BM), SPLITK]\n"
    "  local: [32, 1, 1]\n  shared: SMEM\n"
    "workspace: \"SPLITK > 1 ? TILES * (BM * BN + 1) * 4 : 0\"\n" FAKE_GEMM_ARGS ", workspace]\n";

/* A temporary folder (g_dir) with a database and templates: an empty common/fake.h, an empty
 * gemm.cl and gemm.yaml = yaml, loaded into g_tpl; AUTOTUNE_TEMPLATE_PATH points there. */
static void fake_templates(const char *yaml)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/at-test-pipe-XXXXXX");
    assert_non_null(mkdtemp(g_dir));
    char path[128];
    static const char *const dirs[] = {"tpl", "tpl/common", "tpl/gemm"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", g_dir, dirs[i]);
        assert_int_equal(mkdir(path, 0700), 0);
    }
    snprintf(path, sizeof path, "%s/tpl", g_dir);
    const char *const files[][2] = {{"common/fake.h", ""},
                                    {"gemm/gemm.cl", "KERNEL void gemm(void) {}\n"},
                                    {"gemm/gemm.yaml", yaml}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char f[160];
        snprintf(f, sizeof f, "%s/%s", path, files[i][0]);
        FILE *fp = fopen(f, "w");
        assert_non_null(fp);
        fputs(files[i][1], fp);
        fclose(fp);
    }
    setenv("AUTOTUNE_TEMPLATE_PATH", path, 1);
    assert_int_equal(at_template_load("gemm", "fake", &g_tpl), AT_OK);
}

static void fake_templates_remove(void)
{
    at_template_free(g_tpl);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    assert_int_equal(system(cmd), 0);
    unsetenv("AUTOTUNE_TEMPLATE_PATH");
}

/* A split-K space with dynamic shared memory and a workspace, on the fake GPU: the shared size
 * and the workspace reach every launch, split-K results are checked like any other, a kernel
 * that leaves its workspace dirty is a wrong_result, and the tuned kernel launched on the
 * caller's buffers uses the workspace kept with it (zero again after each launch). */
static void test_splitk_workspace_shared(void **state)
{
    (void)state;
    fake_templates(YAML_SPLITK);
    at_context ctx = fake_context(2);
    /* k = 13: 4 K tiles of 4, so SPLITK = 8 has 4 empty ranges; every tile has an M or N edge */
    at_gemm_problem p = {.m = 37, .n = 20, .k = 13, .alpha = 1.5f, .beta = 0.5f};
    at_tune_options o = {.strategy = "exhaustive"};
    at_tune_report r;
    at_kernel *k = NULL;
    g_splitk_launches = g_shared_max = 0;
    at_status st = at_gemm_tune(&ctx, &p, &o, &r, &k);
    if (st != AT_OK) fail_msg("tune: %s", at_errmsg());
    assert_int_equal(r.space, 8); /* BM = 128 needs 128 KiB > the 100 KiB opt-in limit */
    assert_int_equal(r.failed, 1);
    assert_true(g_splitk_launches >= 5);
    assert_int_equal(g_shared_max, 32 * 1024);
    assert_string_equal(r.best_config, "BM=16,BN=8,BK=4,SPLITK=8");
    const char *want[2] = {"left", 0};
    assert_int_equal(at_db_scan(ctx.db, "results", "gemm/f32/nn/37x20x13|", count_status, want),
                     AT_OK);
    assert_int_equal((intptr_t)want[1], 1); /* the one that does not reset its counters */

    /* the tuned kernel on the caller's buffers: its own zeroed workspace, shared size kept */
    assert_non_null(k);
    assert_int_equal(k->shared_bytes, 16 * 1024);
    assert_null(k->workspace.handle); /* made at the first launch */
    assert_int_equal(k->ws_bytes, 3 * 3 * (16 * 8 + 1) * 4);
    float A[37 * 13], B[13 * 20], C[37 * 20], want_c[37 * 20];
    for (int i = 0; i < 37 * 13; i++) A[i] = (float)((i * 7) % 11) - 5.0f;
    for (int i = 0; i < 13 * 20; i++) B[i] = (float)((i * 5) % 9) - 4.0f;
    for (int i = 0; i < 37 * 20; i++) C[i] = want_c[i] = (float)(i % 3);
    for (int rep = 0; rep < 2; rep++) { /* twice: the second starts from the cleaned workspace */
        for (int i = 0; i < 37; i++)
            for (int j = 0; j < 20; j++) {
                double s = 0;
                for (int q = 0; q < 13; q++) s += (double)A[i * 13 + q] * B[q * 20 + j];
                want_c[i * 20 + j] = (float)(1.5 * s + 0.5 * want_c[i * 20 + j]);
            }
        size_t before = g_splitk_launches;
        assert_int_equal(at_gemm_launch(k, (at_devptr){A}, (at_devptr){B}, (at_devptr){C}, NULL),
                         AT_OK);
        assert_int_equal(g_splitk_launches, before + 1);
        for (int i = 0; i < 37 * 20; i++) assert_float_equal(C[i], want_c[i], 1e-3);
        assert_int_equal(k->workspace.bytes, 3 * 3 * (16 * 8 + 1) * 4);
        const unsigned char *w = k->workspace.handle;
        for (size_t i = 0; i < k->workspace.bytes; i++) assert_int_equal(w[i], 0);
    }
    at_kernel_destroy(k);

    fake.close(ctx.dev);
    at_db_close(ctx.db);
    fake_templates_remove();
}

/* Loads yaml as the fake GPU's only GEMM template and tunes p over its whole space in *ctx (one
 * compile thread; the tuned kernel keeps a pointer to it): the caller's to close, with
 * fake_templates_remove. */
static void tune_fake(const char *yaml, at_gemm_problem p, at_context *ctx, at_tune_report *r,
                      at_kernel **k)
{
    fake_templates(yaml);
    *ctx = fake_context(1);
    at_tune_options o = {.strategy = "exhaustive"};
    if (at_gemm_tune(ctx, &p, &o, r, k) != AT_OK) fail_msg("tune: %s", at_errmsg());
}

/* `scratch:` on the fake GPU: the bytes after the workspace are poisoned before a checked run,
 * so a kernel that reads them before writing them is a wrong_result there (though the library's
 * first launch would find them zero), the workspace before them is zero, and neither is
 * checked for being left clean; the tuned kernel's buffer holds both. */
static void test_scratch(void **state)
{
    (void)state;
    at_tune_report r;
    at_kernel *k = NULL;
    at_context ctx;
    tune_fake(FAKE_GEMM_HEAD
              "problem: [m, n, k, ta, tb, big]\n"
              "parameters:\n  BM: [16, 32]\n  BN: [8]\n  SC: [1, 2]\n"
              "launch:\n  global: [m]\nworkspace: 16\nscratch: 64 * SC\n" FAKE_GEMM_ARGS
              ", workspace]\n",
              (at_gemm_problem){.m = 9, .n = 7, .k = 5, .alpha = 1.0f}, &ctx, &r, &k);
    assert_int_equal(r.space, 4);
    assert_int_equal(r.failed, 2); /* SC=2, with either BM */
    assert_string_equal(r.best_config, "BM=32,BN=8,SC=1");
    const char *want[2] = {"max relative error", 0};
    assert_int_equal(at_db_scan(ctx.db, "results", "gemm/f32/nn/9x7x5|", count_status, want),
                     AT_OK);
    assert_int_equal((intptr_t)want[1], 2);
    assert_non_null(k);
    assert_int_equal(k->ws_bytes, 16 + 64);
    at_kernel_destroy(k);

    fake.close(ctx.dev);
    at_db_close(ctx.db);
    fake_templates_remove();
}

/* Tensor maps on the fake GPU: a config's map reaches the device half and is encoded there for
 * the buffer the kernel gets (LOAD=0 configs take none: `when:`), a map the device refuses is
 * that candidate's launch_error, a problem whose rows are not 16-byte multiples has no TMA
 * config (the space's constraint), and the tuned kernel's map is encoded at every launch for the
 * caller's buffer — a misaligned one is a clear AT_ERR_INVALID_ARG. */
static void test_tensor_maps(void **state)
{
    (void)state;
    at_gemm_problem p = {.m = 20, .n = 8, .k = 12, .alpha = 1.0f};
    at_tune_report r;
    at_kernel *k = NULL;
    g_encodes = 0;
    at_context ctx;
    tune_fake(FAKE_GEMM_HEAD
              "problem: [m, n, k, ta, tb, big, lda]\ndevice: [tma]\n"
              "parameters:\n  BM: [16, 32]\n  LOAD: [0, 1]\n"
              "constraints:\n  - LOAD == 0 || (device.tma && lda % 4 == 0)\n"
              "launch:\n  global: [32, ceil_div(m, BM)]\n  local: [32, 1]\n" FAKE_GEMM_ARGS ",\n"
              "            tensormap: {buffer: A, when: LOAD, cols: k, rows: m, ld: lda,\n"
              "                        box: [4, BM], swizzle: 0}]\n",
              p, &ctx, &r, &k);
    assert_int_equal(r.space, 4);
    assert_int_equal(r.failed, 1); /* BM=16,LOAD=1: a box of 16 rows */
    assert_true(g_encodes >= 2);
    assert_string_equal(r.best_config, "BM=32,LOAD=1");
    const char *want[2] = {"box of 16 rows", 0};
    assert_int_equal(at_db_scan(ctx.db, "results", "gemm/f32/nn/20x8x12|", count_status, want),
                     AT_OK);
    assert_int_equal((intptr_t)want[1], 1);

    /* the tuned kernel on the caller's buffers: encoded for them at each launch */
    _Alignas(16) float A[20 * 12 + 4], B[12 * 8], C[20 * 8];
    for (int i = 0; i < 20 * 12 + 4; i++) A[i] = (float)(i % 5);
    for (int i = 0; i < 12 * 8; i++) B[i] = (float)(i % 3);
    g_encodes = 0;
    assert_int_equal(at_gemm_launch(k, (at_devptr){A}, (at_devptr){B}, (at_devptr){C}, NULL),
                     AT_OK);
    assert_int_equal(g_encodes, 1);
    double s = 0;
    for (int q = 0; q < 12; q++) s += (double)A[q] * B[q * 8];
    assert_float_equal(C[0], s, 1e-4);
    assert_int_equal(at_gemm_launch(k, (at_devptr){A + 1}, (at_devptr){B}, (at_devptr){C}, NULL),
                     AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_context_last_error(&ctx), "tensor map of buffer A"));
    assert_non_null(strstr(at_context_last_error(&ctx), "16-byte"));
    at_kernel_destroy(k);

    /* lda = 13: rows of 52 bytes, no TMA config */
    at_gemm_problem q = {.m = 20, .n = 8, .k = 12, .lda = 13, .alpha = 1.0f};
    at_space_info si;
    assert_int_equal(at_gemm_space(&ctx, &q, &si, NULL, NULL), AT_OK);
    assert_int_equal(si.valid, 2);

    fake.close(ctx.dev);
    at_db_close(ctx.db);
    fake_templates_remove();
}

/* Thread-block clusters: a config's `launch: cluster:` reaches the device half's launch (the
 * fake refuses any other), and the tuned kernel's reaches at_gemm_launch's. */
static void test_cluster_launch(void **state)
{
    (void)state;
    at_gemm_problem p = {.m = 20, .n = 8, .k = 12, .alpha = 1.0f};
    at_tune_report r;
    at_kernel *k = NULL;
    at_context ctx;
    tune_fake(FAKE_GEMM_HEAD "problem: [m, n, k, ta, tb, big]\n"
                             "parameters:\n  BM: [16, 32]\n  CL: [1, 2]\n"
                             "launch:\n  global: [32 * CL, ceil_div(m, BM)]\n  local: [32, 1]\n"
                             "  cluster: CL\n" FAKE_GEMM_ARGS "]\n",
              p, &ctx, &r, &k);
    assert_int_equal(r.space, 4);
    assert_int_equal(r.failed, 0);
    at_kernel_destroy(k);
    k = NULL;
    at_problem gp = at_problem_view(&at_op_gemm, &p);
    at_template *t = NULL;
    assert_int_equal(at_template_for(&gp, &ctx.info, NULL, &t), AT_OK);
    assert_int_equal(at_kernel_build(&ctx, t, &gp, "BM=32,CL=2", &k), AT_OK);
    assert_int_equal(k->cluster, 2);
    _Alignas(16) float A[20 * 12], B[12 * 8], C[20 * 8];
    for (int i = 0; i < 20 * 12; i++) A[i] = 1.0f;
    for (int i = 0; i < 12 * 8; i++) B[i] = 1.0f;
    assert_int_equal(at_gemm_launch(k, (at_devptr){A}, (at_devptr){B}, (at_devptr){C}, NULL),
                     AT_OK);
    assert_float_equal(C[0], 12.0f, 1e-6);
    at_kernel_destroy(k);
    at_template_free(t);
    fake.close(ctx.dev);
    at_db_close(ctx.db);
    fake_templates_remove();
}

/* A database written by autotune 0.1 (tests/fixtures/db-v1, tuned on PoCL) still answers: its
 * tuned entries are hits for a context with its device key, through the template version the
 * GEMM template supersedes, and a neighbour gets the nearest of them. */
static int first_best_key(void *user, const char *key, const char *value)
{
    (void)value;
    snprintf(user, 640, "%s", key);
    return 1;
}

static void test_v1_database_answers(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/at-test-pipe-XXXXXX");
    assert_non_null(mkdtemp(g_dir));
    char cmd[256];
    snprintf(cmd, sizeof cmd, "cp %s/tests/fixtures/db-v1/data.mdb %s/", AT_SOURCE_DIR, g_dir);
    assert_int_equal(system(cmd), 0);
    setenv("AUTOTUNE_TEMPLATE_PATH", AT_SOURCE_DIR "/templates", 1);

    /* The fake device stands in for the PoCL device that tuned it: its key, a CPU. */
    at_context ctx = {.ops = &fake, .compile_threads = 1};
    f_info(0, &ctx.info);
    snprintf(ctx.info.backend, sizeof ctx.info.backend, "opencl");
    ctx.info.is_cpu = true;
    ctx.info.l2_bytes = 0;
    assert_int_equal(at_db_open(g_dir, 0, &ctx.db), AT_OK);
    char key[640] = "";
    assert_int_equal(at_db_scan(ctx.db, "best", "gemm/f32/nn/24x20x16|", first_best_key, key),
                     AT_OK);
    snprintf(ctx.info.key, sizeof ctx.info.key, "%s", strchr(key, '|') + 1);
    at_best_rec b;
    assert_int_equal(at_db_get_best(ctx.db, key, &b), AT_OK);
    assert_string_equal(b.template_name, ""); /* from before templates were named */
    assert_int_equal(fake.open(0, &ctx.dev), AT_OK);

    at_gemm_problem p = {.m = 24, .n = 20, .k = 16, .alpha = 1};
    at_kernel *k = NULL;
    at_source src;
    assert_int_equal(at_gemm_get(&ctx, &p, AT_GET_NO_FALLBACK, &k, &src), AT_OK);
    assert_int_equal(src, AT_SOURCE_HIT);
    assert_string_equal(at_kernel_config(k), b.config);
    at_kernel_destroy(k);
    at_tune_report r;
    int launches = g_launches;
    assert_int_equal(at_gemm_tune(&ctx, &p, NULL, &r, NULL), AT_OK);
    assert_int_equal(r.cache_hit, 1);
    assert_int_equal(r.space, 0); /* not recorded in 0.1 */
    assert_true(r.best_time_us == b.time_us);
    assert_int_equal(g_launches, launches);
    p.m = 26; /* a neighbour: the nearest tuned shape */
    assert_int_equal(at_gemm_get(&ctx, &p, 0, &k, &src), AT_OK);
    assert_int_equal(src, AT_SOURCE_NEAREST);
    assert_string_equal(at_kernel_config(k), b.config);
    at_kernel_destroy(k);

    fake.close(ctx.dev);
    at_db_close(ctx.db);
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    assert_int_equal(system(cmd), 0);
    unsetenv("AUTOTUNE_TEMPLATE_PATH");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_statuses_flush_and_recycle),
                                       cmocka_unit_test(test_splitk_workspace_shared),
                                       cmocka_unit_test(test_scratch),
                                       cmocka_unit_test(test_tensor_maps),
                                       cmocka_unit_test(test_cluster_launch),
                                       cmocka_unit_test(test_v1_database_answers)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
