/* test_cuda_gemm.c — the portable GEMM template compiles with NVRTC for real CUDA targets
 * without a GPU (a spread of its space per target, every layout and edge pattern), candidates
 * are rejected by their compiler-reported resources, and gemm_wgmma's TMA configurations (LOAD 1,
 * 2, and STORE's map of C) get the tensor maps the emulator's kernels run on and compile, as do
 * the split-K and
 * persistent parts of the tensor-core spaces. Without NVRTC the rest runs and the program exits
 * 77 (ctest: skipped). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/gpu/tma_cases.h"
#include "tests/unit/test_support.h"
#include "tuner/backends/cuda_report.h"
#include "tuner/ops/gemm.h"

#include <stdlib.h>
#include <string.h>

static char g_no_nvrtc[512]; /* why NVRTC is not there; "" when it is */

static void compile_sample(const char *arch, at_dtype dtype, at_layout layout, int64_t m, int64_t n,
                           int64_t k)
{
    at_gemm_problem p = {.m = m, .n = n, .k = k, .dtype = dtype, .layout = layout, .alpha = 1};
    at_compile_report r;
    char why[1024] = "";
    /* wgmma kernels take ~3 s each to compile: fewer of them (ctest -L slow compiles all) */
    const int hopper16 = strcmp(arch, "sm_90a") == 0 && dtype != AT_DTYPE_F32,
              want = hopper16 ? 3 : 6;
    at_status s = at_gemm_compile_space("cuda", arch, &p, want, 1, 0, &r, why, sizeof why);
    if (s != AT_OK) fail_msg("%s: %s", arch, why);
    if (r.compile_errors) fail_msg("%s %s: %s", arch, at_layout_name(layout), r.first_error);
    assert_int_equal(r.attempted, want);
    assert_int_equal(r.compiled + r.resource_rejected, want);
    assert_true(r.space > 100);
    /* the Hopper template: no spills and no serialized wgmma (C7515) anywhere in its space */
    if (hopper16) assert_int_equal(r.resource_rejected, 0);
}

static void test_gemm_compiles_for_sm80_and_sm90a(void **state)
{
    (void)state;
    AT_TEST_NEED(g_no_nvrtc);
    const char *archs[] = {"sm_80", "sm_90a"};
    for (int a = 0; a < 2; a++) {
        for (int d = 0; d < 3; d++) { /* f32: portable template; f16, bf16: mma.sync, and wgmma
                                       * on sm_90a */
            compile_sample(archs[a], (at_dtype)d, AT_LAYOUT_NN, 1024, 1024, 1024); /* no edges */
            compile_sample(archs[a], (at_dtype)d, AT_LAYOUT_TT, 1000, 999, 77);    /* every edge */
        }
    }
    compile_sample("sm_80", AT_DTYPE_F32, AT_LAYOUT_NT, 33, 65, 4096);
    compile_sample("sm_90a", AT_DTYPE_BF16, AT_LAYOUT_TN, 4096, 64, 31);
}

/* A template bound to a problem on a compile-only target, and its valid configs. */
typedef struct bound {
    at_device_info info;
    at_bdev *d;
    at_template *t;
    at_gemm_problem p;
    int64_t *cfgs;
    size_t n;
} bound;

static void bind_open(bound *b, const char *tname, const char *arch, at_dtype dtype,
                      at_layout layout, int64_t m, int64_t n, int64_t k)
{
    memset(b, 0, sizeof *b);
    b->p = (at_gemm_problem){.m = m, .n = n, .k = k, .dtype = dtype, .layout = layout, .alpha = 1};
    assert_int_equal(at_cuda_backend.open_target(arch, &b->info, &b->d), AT_OK);
    assert_int_equal(at_template_load(tname, "cuda", &b->t), AT_OK);
    assert_int_equal(at_template_bind_device(b->t, &b->info), AT_OK);
    assert_int_equal(at_gemm_bind(&b->p, b->t->space), AT_OK);
    assert_int_equal(at_space_enumerate(b->t->space, &b->cfgs, NULL, &b->n), AT_OK);
}

static void bind_close(bound *b)
{
    free(b->cfgs);
    at_template_free(b->t);
    at_cuda_backend.close(b->d);
}

static int64_t value_of(const bound *b, size_t i, const char *name)
{
    int64_t v = 0;
    assert_int_equal(at_space_value(b->t->space, b->cfgs + i * b->t->space->nparams, name, &v),
                     AT_OK);
    return v;
}

/* Compiles config cfg of b's template; it must compile and fit (no spill, no serialized
 * wgmma). */
static void compile_fits(const bound *b, const int64_t *cfg, const char *what)
{
    const at_space *s = b->t->space;
    char config[512], options[4096], why[512] = "";
    at_config_format(s, cfg, config, sizeof config);
    assert_int_equal(at_config_defines(s, cfg, options, sizeof options), AT_OK);
    size_t g[3], l[3];
    assert_int_equal(at_space_launch(s, cfg, g, l), AT_OK);
    at_bprog *prog = NULL;
    char *log = NULL;
    double t0 = at_now();
    if (at_cuda_backend.compile(b->d, b->t->source, options, s->kernel, &prog, &log) != AT_OK)
        fail_msg("%s %s: %s", what, config, log ? log : at_errmsg());
    at_resources r;
    assert_int_equal(at_cuda_backend.resources(prog, &r), AT_OK);
    if (getenv("AT_TEST_VERBOSE"))
        printf("%s %s: %lld registers, %lld spill bytes, %.1f s\n", what, config,
               (long long)r.registers, (long long)r.spill_bytes, at_now() - t0);
    if (!at_resources_fit(&b->info, &r, (int64_t)l[0], why, sizeof why))
        fail_msg("%s %s: %s", what, config, why);
    free(log);
    at_cuda_backend.program_free(prog);
}

/* Compiles `count` configs of template tname whose parameter `param` is at least `min` (and
 * `param2` at least `min2`, when given), spread through that part of the space for the
 * problem, with NVRTC for arch; every one must compile and fit (no spill, no serialized
 * wgmma). */
/* Checks config i's launch geometry and workspace (what its part of the space promises). */
typedef void (*launch_check)(const bound *b, size_t i, const size_t g[3], const size_t l[3],
                             size_t ws);

static void compile_where(const char *tname, const char *arch, at_dtype dtype, at_layout layout,
                          int64_t m, int64_t n, int64_t k, const char *param, int64_t min,
                          const char *param2, int64_t min2, launch_check check, size_t count)
{
    bound b;
    bind_open(&b, tname, arch, dtype, layout, m, n, k);
    const at_space *s = b.t->space;
    size_t *pick = malloc((b.n + 1) * sizeof *pick), npick = 0;
    assert_non_null(pick);
    for (size_t i = 0; i < b.n; i++)
        if (value_of(&b, i, param) >= min && (!param2 || value_of(&b, i, param2) >= min2))
            pick[npick++] = i;
    if (npick < count)
        fail_msg("%s %lldx%lldx%lld: only %zu configs with %s >= %lld%s%s", arch, (long long)m,
                 (long long)n, (long long)k, npick, param, (long long)min, param2 ? " and " : "",
                 param2 ? param2 : "");
    for (size_t c = 0; c < count; c++) {
        const size_t i = pick[c * npick / count];
        const int64_t *cfg = b.cfgs + i * s->nparams;
        if (check) {
            size_t g[3], l[3], ws = 0, shared = 0;
            assert_int_equal(at_space_launch(s, cfg, g, l), AT_OK);
            assert_int_equal(at_space_memory(s, cfg, &shared, &ws, NULL), AT_OK);
            check(&b, i, g, l, ws);
        }
        compile_fits(&b, cfg, arch);
    }
    free(pick);
    bind_close(&b);
}

/* split-K: grid z = SPLITK, blocks of depth 1, a workspace */
static void check_splitk(const bound *b, size_t i, const size_t g[3], const size_t l[3], size_t ws)
{
    assert_int_equal(g[2], (size_t)value_of(b, i, "SPLITK"));
    assert_int_equal(l[2], 1);
    assert_true(ws > 0);
}

static void compile_splitk(const char *arch, at_dtype dtype, at_layout layout, int64_t m, int64_t n,
                           int64_t k, size_t count)
{
    compile_where("gemm_mma", arch, dtype, layout, m, n, k, "SPLITK", 2, NULL, 0, check_splitk,
                  count);
}

/* Split-K configs for the small-m and large-k LLM shapes and edge shapes (K not a multiple of
 * BK, ranges that end up empty), both targets, both 16-bit types, all layouts between them. */
static void test_splitk_compiles(void **state)
{
    (void)state;
    AT_TEST_NEED(g_no_nvrtc);
    compile_splitk("sm_90a", AT_DTYPE_BF16, AT_LAYOUT_NN, 16, 8192, 8192, 2);
    compile_splitk("sm_80", AT_DTYPE_F16, AT_LAYOUT_NT, 4096, 1024, 14336, 1);
    compile_splitk("sm_80", AT_DTYPE_BF16, AT_LAYOUT_TN, 17, 999, 777, 1);
    compile_splitk("sm_90a", AT_DTYPE_F16, AT_LAYOUT_TT, 100, 300, 1000, 1);
}

/* ---- gemm_wgmma's tensor maps (LOAD 1, 2) ------------------------------------------------- */

/* The maps tests/unit/wgmma_emu/instance.cpp builds for the emulated kernel of config i (in
 * the kernel's view: with SWAP its A is the problem's B), as descriptions of the problem's
 * buffers (role 0 = A, 1 = B, 2 = C): A's and B's, then C's when STORE. Returns how many. */
static int emulator_maps(const bound *b, size_t i, at_tmap_desc want[3])
{
    const at_gemm_problem *p = &b->p;
    const int ta = p->layout == AT_LAYOUT_TN || p->layout == AT_LAYOUT_TT,
              tb = p->layout == AT_LAYOUT_NT || p->layout == AT_LAYOUT_TT;
    const int64_t BM = value_of(b, i, "BM"), BN = value_of(b, i, "BN"), BK = value_of(b, i, "BK"),
                  SWAP = value_of(b, i, "SWAP"), KSW = BK < 64 ? BK : 64,
                  CL = value_of(b, i, "CLUSTER");
    const int64_t lda = ta ? p->m : p->k, ldb = tb ? p->k : p->n; /* packed */
    const int64_t km = SWAP ? p->n : p->m, kn = SWAP ? p->m : p->n;
    const int64_t klda = SWAP ? ldb : lda, kldb = SWAP ? lda : ldb;
    const int KTA = SWAP ? 1 - tb : ta, KTB = SWAP ? 1 - ta : tb;
    const uint8_t dt = (uint8_t)p->dtype;
    /* instance.cpp: KTA ? {km, k, klda*2, 64, BK, 128} : {k, km, klda*2, KSW, BM, KSW*2} */
    want[0] = KTA ? (at_tmap_desc){(uint64_t)km,
                                   (uint64_t)p->k,
                                   (uint64_t)klda * 2,
                                   {64, (uint32_t)BK},
                                   128,
                                   0,
                                   dt,
                                   1}
                  : (at_tmap_desc){(uint64_t)p->k,
                                   (uint64_t)km,
                                   (uint64_t)klda * 2,
                                   {(uint32_t)KSW, (uint32_t)BM},
                                   (uint32_t)KSW * 2,
                                   0,
                                   dt,
                                   1};
    /* KTB ? {k, kn, kldb*2, KSW, BN/CL, KSW*2} : {kn, k, kldb*2, 64, BK/CL, 128} (CL: CLUSTER) */
    want[1] = KTB ? (at_tmap_desc){(uint64_t)p->k,
                                   (uint64_t)kn,
                                   (uint64_t)kldb * 2,
                                   {(uint32_t)KSW, (uint32_t)(BN / CL)},
                                   (uint32_t)KSW * 2,
                                   0,
                                   dt,
                                   1}
                  : (at_tmap_desc){(uint64_t)kn,
                                   (uint64_t)p->k,
                                   (uint64_t)kldb * 2,
                                   {64, (uint32_t)(BK / CL)},
                                   128,
                                   0,
                                   dt,
                                   1};
    want[0].buffer = SWAP ? 1 : 0;
    want[1].buffer = SWAP ? 0 : 1;
    if (!value_of(b, i, "STORE")) return 2;
    /* instance.cpp: {n, m, ldc*2, 64, BM, 128} (never SWAP) */
    want[2] = (at_tmap_desc){
        (uint64_t)p->n, (uint64_t)p->m, (uint64_t)p->n * 2, {64, (uint32_t)BM}, 128, 2, dt, 1};
    return 3;
}

static void assert_desc(const at_tmap_desc *got, const at_tmap_desc *want, const char *config)
{
    if (got->cols != want->cols || got->rows != want->rows || got->ld_bytes != want->ld_bytes ||
        got->box[0] != want->box[0] || got->box[1] != want->box[1] ||
        got->swizzle != want->swizzle || got->buffer != want->buffer || got->dtype != want->dtype ||
        !got->present)
        fail_msg("%s: map of buffer %u: %llux%llu ld %llu box %ux%u swizzle %u, the emulator's "
                 "buffer %u: %llux%llu ld %llu box %ux%u swizzle %u",
                 config, got->buffer, (unsigned long long)got->cols, (unsigned long long)got->rows,
                 (unsigned long long)got->ld_bytes, got->box[0], got->box[1], got->swizzle,
                 want->buffer, (unsigned long long)want->cols, (unsigned long long)want->rows,
                 (unsigned long long)want->ld_bytes, want->box[0], want->box[1], want->swizzle);
}

static int g_encoded;               /* maps the fake encoder made */
static at_tmap_desc g_enc_desc[4];  /* ... of these */
static const void *g_enc_handle[4]; /* ... for these buffers */
static at_status fake_encode(at_bdev *d, const at_tmap_desc *t, const void *handle, void *out)
{
    (void)d;
    assert_true(g_encoded < 4);
    assert_int_equal((uintptr_t)out % 64, 0); /* cuTensorMapEncodeTiled's rule */
    g_enc_desc[g_encoded] = *t;
    g_enc_handle[g_encoded++] = handle;
    memset(out, 0xa0 + g_encoded, AT_TMAP_BYTES);
    return AT_OK;
}

/* Every valid config of gemm_wgmma for the problem: LOAD 0 passes no map, LOAD 1 and 2 pass two,
 * and STORE 1 a third (C's), exactly the emulator's, encoded with the exact
 * cuTensorMapEncodeTiled call, and built into the launch's arguments after the others. Returns
 * how many configs had LOAD > 0; *nstore (when given) counts those with STORE. */
static size_t check_maps(at_dtype dtype, at_layout layout, int64_t m, int64_t n, int64_t k,
                         size_t *nstore)
{
    bound b;
    bind_open(&b, "gemm_wgmma", "sm_90a", dtype, layout, m, n, k);
    const at_space *s = b.t->space;
    at_problem prob = at_problem_view(&at_op_gemm, &b.p);
    at_backend_ops fake = at_cuda_backend;
    fake.encode_tensor_map = fake_encode;
    void *handles[3] = {(void *)0x100000, (void *)0x200000, (void *)0x300000};
    static const int ws_token = 1;
    size_t ntma = 0, nswap = 0, nst = 0;
    for (size_t i = 0; i < b.n; i++) {
        const int64_t *cfg = b.cfgs + i * s->nparams;
        char config[512];
        at_config_format(s, cfg, config, sizeof config);
        at_tmap_desc maps[AT_MAX_ARGS];
        assert_int_equal(at_args_maps(s, cfg, &prob, maps), AT_OK);
        at_tmap_desc want[3], got[AT_MAX_ARGS];
        int nwant = 0;
        size_t np = 0;
        for (size_t a = 0; a < s->nargs; a++)
            if (maps[a].present) got[np++] = maps[a];
        const int64_t load = value_of(&b, i, "LOAD"), splitk = value_of(&b, i, "SPLITK");
        if (load == 0) {
            assert_int_equal(np, 0);
        } else {
            ntma++;
            nswap += value_of(&b, i, "SWAP") != 0;
            nwant = emulator_maps(&b, i, want);
            nst += nwant == 3;
            assert_int_equal(np, nwant);
            for (int j = 0; j < nwant; j++) {
                assert_desc(&got[j], &want[j], config);
                /* the driver call, and the hardware's alignment rule */
                at_cu_tmap_call c;
                char why[512];
                assert_int_equal(at_cuda_tmap_call(&got[j], 0x7f0000010000ull, &c, why, sizeof why),
                                 0);
                assert_int_equal(c.dtype, dtype == AT_DTYPE_BF16 ? 9 : 6); /* BFLOAT16, FLOAT16 */
                assert_int_equal(c.rank, 2);
                assert_true(c.dims[0] == want[j].cols && c.dims[1] == want[j].rows);
                assert_true(c.strides[0] == want[j].ld_bytes);
                assert_true(c.box[0] == want[j].box[0] && c.box[1] == want[j].box[1]);
                assert_true(c.elem_strides[0] == 1 && c.elem_strides[1] == 1);
                assert_int_equal(c.swizzle, want[j].swizzle == 128 ? 3 : 2); /* _128B, _64B */
                assert_int_equal(c.interleave, 0);
                assert_int_equal(c.l2, 3); /* L2_256B */
                assert_int_equal(c.oob, 0);
                assert_int_equal(at_cuda_tmap_call(&got[j], 0x7f0000010008ull, &c, why, sizeof why),
                                 -1);
                assert_non_null(strstr(why, "not 16-byte aligned"));
            }
        }
        /* the launch's argument list: the maps after the others, for the right buffers */
        const at_tmap_src src = {maps, &fake, NULL};
        at_arglist args;
        g_encoded = 0;
        assert_int_equal(at_args_build(s->args, s->nargs, &prob, handles,
                                       splitk > 1 ? &ws_token : NULL, &src, &args),
                         AT_OK);
        const size_t base = 11 + (splitk > 1);
        assert_int_equal(args.n, base + (size_t)nwant);
        assert_int_equal(g_encoded, nwant);
        for (int j = 0; j < nwant; j++) {
            assert_int_equal(args.a[base + j].size, AT_TMAP_BYTES);
            assert_int_equal(((const unsigned char *)args.a[base + j].ptr)[0], 0xa1 + j);
            assert_ptr_equal(g_enc_handle[j], handles[want[j].buffer]);
            assert_desc(&g_enc_desc[j], &want[j], config);
        }
    }
    if (getenv("AT_TEST_VERBOSE"))
        printf("%s %s %lldx%lldx%lld: %zu configs, %zu with TMA (%zu SWAP, %zu STORE)\n",
               at_dtype_name(dtype), at_layout_name(layout), (long long)m, (long long)n,
               (long long)k, b.n, ntma, nswap, nst);
    bind_close(&b);
    if (nstore) *nstore = nst;
    return ntma;
}

static void test_tma_maps(void **state)
{
    (void)state;
    AT_TEST_NEED(g_no_nvrtc); /* open_target loads NVRTC */
    size_t nstore = 0;
    assert_true(check_maps(AT_DTYPE_BF16, AT_LAYOUT_NN, 1024, 1000, 1000, &nstore) > 0);
    assert_true(nstore > 0); /* STORE: C's rows of 1000 halves are 16-byte multiples */
    assert_true(check_maps(AT_DTYPE_F16, AT_LAYOUT_TN, 512, 520, 256, NULL) > 0);
    assert_true(check_maps(AT_DTYPE_BF16, AT_LAYOUT_NT, 256, 512, 136, NULL) > 0);
    assert_true(check_maps(AT_DTYPE_F16, AT_LAYOUT_TT, 40, 1000, 256, NULL) > 0); /* SWAP too */
    assert_true(check_maps(AT_DTYPE_BF16, AT_LAYOUT_NN, 16, 4096, 512, NULL) > 0);
    assert_true(check_maps(AT_DTYPE_F16, AT_LAYOUT_NT, 16, 4096, 512, NULL) > 0);
    /* n = 1004: A's and B's rows map, C's (ldc = n) do not: TMA loads, no STORE */
    assert_true(check_maps(AT_DTYPE_BF16, AT_LAYOUT_NT, 512, 1004, 256, &nstore) > 0);
    assert_int_equal(nstore, 0);
    /* rows of 1001 halves are not 16-byte multiples: no tensor map, no LOAD > 0 */
    assert_int_equal(check_maps(AT_DTYPE_BF16, AT_LAYOUT_NN, 64, 64, 1001, NULL), 0);
}

/* A few TMA configurations (LOAD 1 and 2 alternate in the spread), SWAP and STORE among them,
 * compile with NVRTC for sm_90a: no spill, no serialized wgmma. */
static void test_tma_compiles(void **state)
{
    (void)state;
    AT_TEST_NEED(g_no_nvrtc);
    compile_where("gemm_wgmma", "sm_90a", AT_DTYPE_BF16, AT_LAYOUT_NN, 4096, 4096, 4096, "LOAD", 1,
                  NULL, 0, NULL, 2);
    compile_where("gemm_wgmma", "sm_90a", AT_DTYPE_BF16, AT_LAYOUT_NN, 4096, 4096, 4096, "LOAD", 2,
                  NULL, 0, NULL, 2);
    compile_where("gemm_wgmma", "sm_90a", AT_DTYPE_F16, AT_LAYOUT_NT, 16, 4096, 512, "LOAD", 2,
                  "SWAP", 1, NULL, 1);
    /* the TMA store (STORE), with every edge: its epilogue and buffer on top of the ring */
    compile_where("gemm_wgmma", "sm_90a", AT_DTYPE_F16, AT_LAYOUT_TN, 1000, 1000, 776, "STORE", 1,
                  NULL, 0, NULL, 2);
    /* the defaults that put the loaders first in every tuning run (8192^3: GROUP_M 8 valid) */
    bound b;
    bind_open(&b, "gemm_wgmma", "sm_90a", AT_DTYPE_BF16, AT_LAYOUT_NN, 8192, 8192, 8192);
    const at_space *s = b.t->space;
    size_t ntma = 0;
    for (size_t d = 0; d < s->ndefaults; d++) {
        const int64_t *cfg = s->defaults + d * s->nparams;
        int64_t load = 0;
        assert_int_equal(at_space_value(s, cfg, "LOAD", &load), AT_OK);
        if (!load) continue;
        ntma++;
        char why[512];
        if (!at_space_valid(s, cfg, why, sizeof why)) fail_msg("a TMA default: %s", why);
        compile_fits(&b, cfg, "default");
    }
    assert_int_equal(ntma, 7);
    bind_close(&b);
}

static void test_bad_targets(void **state)
{
    (void)state;
    at_gemm_problem p = {.m = 64, .n = 64, .k = 64, .alpha = 1};
    at_compile_report r;
    char why[512] = "";
    if (!g_no_nvrtc[0]) {
        assert_int_equal(at_gemm_compile_space("cuda", "sm_75", &p, 1, 0, 0, &r, why, sizeof why),
                         AT_ERR_INVALID_ARG);
        assert_non_null(strstr(why, "sm_90a"));
    }
    assert_int_equal(at_gemm_compile_space("opencl", "sm_80", &p, 1, 0, 0, &r, why, sizeof why),
                     AT_ERR_UNSUPPORTED);
    assert_int_equal(at_gemm_compile_space("metal", "x", &p, 1, 0, 0, &r, why, sizeof why),
                     AT_ERR_NO_BACKEND);
}

static void test_resource_rules(void **state)
{
    (void)state;
    at_device_info d = {.max_registers_per_block = 65536};
    char why[256];
    at_resources ok = {.registers = 64, .spill_bytes = 0, .shared_bytes = 0, .local_bytes = 0};
    assert_true(at_resources_fit(&d, &ok, 1024, why, sizeof why));
    at_resources heavy = {.registers = 128, .spill_bytes = 0};
    assert_false(at_resources_fit(&d, &heavy, 1024, why, sizeof why));
    assert_non_null(strstr(why, "128 registers x 1024 threads"));
    at_resources spills = {.registers = 255, .spill_bytes = 152};
    assert_false(at_resources_fit(&d, &spills, 64, why, sizeof why));
    assert_non_null(strstr(why, "spills 152 bytes"));
    at_resources unknown = {.registers = -1, .spill_bytes = -1};
    assert_true(at_resources_fit(&d, &unknown, 1024, why, sizeof why));
    at_resources small_group = {.registers = -1, .spill_bytes = -1, .max_threads = 256};
    assert_false(at_resources_fit(&d, &small_group, 512, why, sizeof why));
    assert_non_null(strstr(why, "limit of 256"));
    assert_true(at_resources_fit(&d, &small_group, 256, why, sizeof why));
    at_device_info sm = {.local_mem_bytes = 48 * 1024};
    at_resources smem = {.registers = -1, .spill_bytes = -1, .shared_bytes = 48 * 1024 + 4};
    assert_false(at_resources_fit(&sm, &smem, 256, why, sizeof why));
    assert_non_null(strstr(why, "49156 bytes of static shared memory"));
    smem.shared_bytes = 48 * 1024;
    assert_true(at_resources_fit(&sm, &smem, 256, why, sizeof why));
    at_resources serial = {.registers = 182, .spill_bytes = 0, .serialized = 1};
    assert_false(at_resources_fit(&d, &serial, 128, why, sizeof why));
    assert_non_null(strstr(why, "serialized"));
    at_device_info opencl = {0}; /* no register budget known */
    assert_true(at_resources_fit(&opencl, &heavy, 1024, why, sizeof why));
}

/* persistent (PERSIST): one row of min(tiles, SMs) blocks (132 SMs for a compile-only sm_90a
 * target), more tiles than blocks, no split-K and no workspace */
static void check_persist(const bound *b, size_t i, const size_t g[3], const size_t l[3], size_t ws)
{
    assert_true(value_of(b, i, "TILES") > 132);
    assert_int_equal(g[0], 132 * l[0]);
    assert_int_equal(g[1], 1);
    assert_int_equal(g[2], 1);
    assert_int_equal(ws, 0);
}

/* Persistent configs of gemm_wgmma compile for sm_90a with no spill and no C7515 and launch
 * one wave: grids of more than one wave, without and with every edge. */
static void test_persistent_compiles(void **state)
{
    (void)state;
    AT_TEST_NEED(g_no_nvrtc);
    compile_where("gemm_wgmma", "sm_90a", AT_DTYPE_BF16, AT_LAYOUT_NN, 8192, 8192, 8192, "PERSIST",
                  1, NULL, 0, check_persist, 2);
    compile_where("gemm_wgmma", "sm_90a", AT_DTYPE_F16, AT_LAYOUT_TT, 4000, 3999, 777, "PERSIST", 1,
                  NULL, 0, check_persist, 1);
}

/* 2x1 clusters (CLUSTER 2): the launch's cluster is 2 and divides the grid's blocks along
 * dimension 0, which are 2 per unit of two tile rows (not persistent: 2 x tile columns by
 * ceil(tile rows / 2)) or 2 x min(units, 66) persistent ones (132 SMs) */
static void check_cluster(const bound *b, size_t i, const size_t g[3], const size_t l[3], size_t ws)
{
    size_t cluster = 0;
    assert_int_equal(at_space_cluster(b->t->space, b->cfgs + i * b->t->space->nparams, &cluster),
                     AT_OK);
    assert_int_equal(cluster, 2);
    const int64_t gm = value_of(b, i, "GM"), gn = value_of(b, i, "GN"), units = gn * ((gm + 1) / 2);
    if (value_of(b, i, "PERSIST"))
        assert_int_equal(g[0] / l[0], 2 * (units < 66 ? units : 66));
    else
        assert_true(g[0] / l[0] == (size_t)(2 * gn) && g[1] == (size_t)(gm + 1) / 2);
    assert_int_equal(g[2], 1);
    assert_int_equal(ws, 0);
}

/* Cluster configs of gemm_wgmma (LOAD 1 and 2, persistent or not) compile for sm_90a with no
 * spill and no C7515: whole tiles, and every edge (2904 rows: 23 tile rows of 128, a ragged
 * last unit; m and k multiples of 8, as TMA needs rows of 16-byte multiples). */
static void test_cluster_compiles(void **state)
{
    (void)state;
    AT_TEST_NEED(g_no_nvrtc);
    compile_where("gemm_wgmma", "sm_90a", AT_DTYPE_BF16, AT_LAYOUT_NN, 8192, 8192, 8192, "CLUSTER",
                  2, "LOAD", 1, check_cluster, 2);
    compile_where("gemm_wgmma", "sm_90a", AT_DTYPE_F16, AT_LAYOUT_TT, 2904, 3999, 776, "CLUSTER", 2,
                  "LOAD", 1, check_cluster, 2);
}

/* The pairs of configuration and shape tests/gpu/test_tma runs on a GPU, counted where there is
 * none: the same space on a compile-only sm_90a target (the GPU run asserts the count). */
static void test_tma_cases_counted(void **state)
{
    (void)state;
    AT_TEST_NEED(g_no_nvrtc);
    at_device_info info;
    at_bdev *d = NULL;
    assert_int_equal(at_cuda_backend.open_target("sm_90a", &info, &d), AT_OK);
    size_t pairs = 0;
    for (size_t c = 0; c < AT_TMA_NCONFIGS; c++) {
        size_t here = 0;
        for (size_t s = c % 2; s < AT_TMA_NSHAPES; s += 2) {
            at_template *t = NULL;
            at_gemm_problem p = {.m = at_tma_shapes[s].m,
                                 .n = at_tma_shapes[s].n,
                                 .k = at_tma_shapes[s].k,
                                 .dtype = AT_TMA_DTYPE(c, s),
                                 .layout = at_tma_shapes[s].lay,
                                 .alpha = 1,
                                 .beta = at_tma_shapes[s].beta};
            assert_int_equal(at_template_load("gemm_wgmma", "cuda", &t), AT_OK);
            assert_int_equal(at_template_bind_device(t, &info), AT_OK);
            assert_int_equal(at_gemm_bind(&p, t->space), AT_OK);
            int64_t cfg[AT_MAX_PARAMS];
            assert_int_equal(at_config_parse(t->space, at_tma_configs[c], cfg), AT_OK);
            here += (size_t)at_space_valid(t->space, cfg, NULL, 0);
            at_template_free(t);
        }
        if (!here) fail_msg("%s meets no shape it is valid on", at_tma_configs[c]);
        pairs += here;
    }
    assert_int_equal(pairs, AT_TMA_RUNS);
    at_cuda_backend.close(d);
}

int main(void)
{
    at_test_have_compiler(&at_cuda_backend, "sm_80", g_no_nvrtc, sizeof g_no_nvrtc);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resource_rules),
        cmocka_unit_test(test_bad_targets),
        cmocka_unit_test(test_gemm_compiles_for_sm80_and_sm90a),
        cmocka_unit_test(test_splitk_compiles),
        cmocka_unit_test(test_tma_maps),
        cmocka_unit_test(test_tma_compiles),
        cmocka_unit_test(test_persistent_compiles),
        cmocka_unit_test(test_cluster_compiles),
        cmocka_unit_test(test_tma_cases_counted),
    };
    return at_test_exit(cmocka_run_group_tests(tests, NULL, NULL), g_no_nvrtc);
}
