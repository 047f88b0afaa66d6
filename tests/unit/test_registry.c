/* test_registry.c — the operation registry and the template registry: operations and their
 * fields, problems from text, which template a problem gets on each backend and architecture
 * (and the messages when none or the wrong one is asked for), the one argument builder, and
 * registering an operation from outside the library. No device needed. */
#define _DEFAULT_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tuner/ops/gemm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static at_device_info device(const char *backend, const char *arch)
{
    at_device_info d = {0};
    snprintf(d.backend, sizeof d.backend, "%s", backend);
    snprintf(d.arch, sizeof d.arch, "%s", arch ? arch : "");
    return d;
}

/* The template a GEMM of dtype gets on backend/arch, "" when none (the message in at_errmsg);
 * pick_on with a CPU device (is_cpu). */
static const char *pick_on(at_dtype dt, const char *backend, const char *arch, const char *name,
                           bool cpu)
{
    static char out[64];
    at_gemm_problem g = {.m = 64, .n = 64, .k = 64, .dtype = dt, .alpha = 1};
    at_problem p = at_problem_view(&at_op_gemm, &g);
    at_device_info d = device(backend, arch);
    d.is_cpu = cpu;
    out[0] = '\0';
    if (at_template_select(&p, &d, name, out, sizeof out) != AT_OK) out[0] = '\0';
    return out;
}

static const char *pick(at_dtype dt, const char *backend, const char *arch, const char *name)
{
    return pick_on(dt, backend, arch, name, false);
}

static void test_template_per_device(void **state)
{
    (void)state;
    assert_string_equal(pick(AT_DTYPE_BF16, "cuda", "sm_80", NULL), "gemm_mma");
    assert_string_equal(pick(AT_DTYPE_BF16, "cuda", NULL, NULL), "gemm_mma");
    assert_string_equal(pick(AT_DTYPE_F16, "cuda", "sm_90", NULL), "gemm_mma");
    assert_string_equal(pick(AT_DTYPE_F16, "cuda", "sm_90a", NULL), "gemm_wgmma");
    assert_string_equal(pick(AT_DTYPE_F32, "cuda", "sm_90a", NULL), "gemm");
    assert_string_equal(pick(AT_DTYPE_F16, "hip", "gfx90a", NULL), "gemm_mfma");
    assert_string_equal(pick(AT_DTYPE_BF16, "hip", "gfx90a:sramecc+:xnack-", NULL), "gemm_mfma");
    assert_string_equal(pick(AT_DTYPE_F32, "hip", "gfx90a", NULL), "gemm");
    assert_string_equal(pick(AT_DTYPE_F32, "opencl", "", NULL), "gemm");
    assert_string_equal(pick(AT_DTYPE_F16, "opencl", "", NULL), "");
    assert_non_null(strstr(at_errmsg(), "dtype f16 is not supported on the opencl backend"));
    const char *where = strstr(at_errmsg(), "f16 runs on: ");
    assert_non_null(where);
    assert_non_null(strstr(where, "cuda"));
    assert_non_null(strstr(where, "hip"));
    /* Named: the fallback from wgmma to mma on Hopper is allowed, the rest says why not. */
    assert_string_equal(pick(AT_DTYPE_BF16, "cuda", "sm_90a", "gemm_mma"), "gemm_mma");
    assert_string_equal(pick(AT_DTYPE_BF16, "cuda", "sm_80", "gemm_wgmma"), "");
    assert_non_null(strstr(at_errmsg(), "it does not compile for sm_80"));
    assert_string_equal(pick(AT_DTYPE_F32, "opencl", "", "gemm_mma"), "");
    assert_non_null(strstr(at_errmsg(), "does not run on the opencl backend"));
    assert_string_equal(pick(AT_DTYPE_F32, "cuda", "sm_80", "gemm_mma"), "");
    assert_non_null(strstr(at_errmsg(), "does not take dtype f32"));
    /* An OpenCL CPU device gets the CPU micro-kernel template; gemm.cl stays selectable. */
    assert_string_equal(pick_on(AT_DTYPE_F32, "opencl", "", NULL, true), "gemm_cpu");
    assert_string_equal(pick_on(AT_DTYPE_F32, "opencl", "", "gemm", true), "gemm");
    assert_string_equal(pick(AT_DTYPE_F32, "opencl", "", "gemm_cpu"), "");
    assert_non_null(strstr(at_errmsg(), "it does not run on a GPU device"));
    assert_string_equal(pick(AT_DTYPE_F32, "opencl", "", "gemm_xyz"), "");
    assert_non_null(strstr(at_errmsg(), "unknown template 'gemm_xyz' (gemm templates: gemm"));
}

static void test_templates_describe_themselves(void **state)
{
    (void)state;
    static const char *const names[] = {"gemm", "gemm_mma", "gemm_wgmma", "gemm_mfma"};
    for (size_t i = 0; i < 4; i++) {
        at_template *t = NULL;
        assert_int_equal(at_template_load(names[i], "cuda", &t), AT_OK);
        assert_string_equal(t->name, names[i]);
        assert_string_equal(t->space->operation, "gemm");
        assert_true(t->space->nbackends > 0 && t->space->ndtypes > 0);
        /* The kernel's parameters: M N K alpha beta A lda B ldb C ldc [workspace] [tensor
         * maps: gemm_wgmma's five, two or three of them passed (A's, B's, and C's with STORE)] */
        size_t nmaps = 0;
        for (size_t a = 0; a < t->space->nargs; a++)
            nmaps += t->space->args[a].kind == AT_ARG_TENSORMAP;
        assert_int_equal(nmaps, i == 2 ? 5 : 0);
        assert_true(t->space->nargs - nmaps == 11 || t->space->nargs - nmaps == 12);
        assert_int_equal(at_args_index(t->space->args, t->space->nargs, AT_ARG_BUFFER, "C"), 9);
        assert_int_equal(at_args_index(t->space->args, t->space->nargs, AT_ARG_SCALAR, "alpha"), 3);
        assert_int_equal(strlen(t->hash), 16);
        /* One self-contained source: every quoted include inlined once, named by #line. */
        assert_null(strstr(t->source, "\n#include \""));
        char line[96];
        snprintf(line, sizeof line, "#line 1 \"gemm/%s.", names[i]);
        assert_non_null(strstr(t->source, line));
        if (i == 1 || i == 2) {
            const char *h = strstr(t->source, "#line 1 \"common/cuda_async.h\"");
            assert_non_null(h);
            assert_null(strstr(h + 1, "#line 1 \"common/cuda_async.h\""));
        }
        at_template_free(t);
    }
    at_template *t = NULL;
    assert_int_equal(at_template_load("nope", "opencl", &t), AT_ERR_TEMPLATE);
    assert_non_null(strstr(at_errmsg(), "no template named 'nope'"));
}

static void test_argument_builder(void **state)
{
    (void)state;
    at_template *t = NULL;
    assert_int_equal(at_template_load("gemm_mma", "cuda", &t), AT_OK);
    at_gemm_problem g = {
        .m = 7, .n = 5, .k = 3, .alpha = 1.5f, .beta = -2, .ldc = 9, .layout = AT_LAYOUT_TN};
    at_problem p = at_problem_view(&at_op_gemm, &g);
    void *bufs[3] = {(void *)0xa0, (void *)0xb0, (void *)0xc0};
    int ws = 0;
    at_arglist a;
    /* Without a workspace the trailing argument is left out. */
    assert_int_equal(at_args_build(t->space->args, t->space->nargs, &p, bufs, NULL, NULL, &a),
                     AT_OK);
    assert_int_equal(a.n, 11);
    assert_int_equal(*(const int32_t *)a.a[0].ptr, 7);
    assert_int_equal(a.a[3].size, 4);
    assert_true(*(const float *)a.a[3].ptr == 1.5f);
    assert_true(*(const float *)a.a[4].ptr == -2.0f);
    assert_ptr_equal(*(void *const *)a.a[5].ptr, bufs[0]);
    assert_int_equal(*(const int32_t *)a.a[6].ptr, 7); /* lda of a packed tn A (k x m) is m */
    assert_ptr_equal(*(void *const *)a.a[7].ptr, bufs[1]);
    assert_int_equal(*(const int32_t *)a.a[8].ptr, 5);
    assert_ptr_equal(*(void *const *)a.a[9].ptr, bufs[2]);
    assert_int_equal(*(const int32_t *)a.a[10].ptr, 9);
    assert_int_equal(at_args_build(t->space->args, t->space->nargs, &p, bufs, &ws, NULL, &a),
                     AT_OK);
    assert_int_equal(a.n, 12);
    assert_ptr_equal(*(void *const *)a.a[11].ptr, (void *)&ws);
    /* A template naming what the operation does not have is refused, naming it. */
    at_arg bad[2] = {{AT_ARG_BUFFER, AT_ARG_I32, "D", NULL},
                     {AT_ARG_SCALAR, AT_ARG_I32, "q", NULL}};
    assert_int_equal(at_args_build(bad, 1, &p, bufs, NULL, NULL, &a), AT_ERR_TEMPLATE);
    assert_non_null(strstr(at_errmsg(), "no buffer 'D'"));
    assert_int_equal(at_args_build(bad + 1, 1, &p, bufs, NULL, NULL, &a), AT_ERR_TEMPLATE);
    assert_non_null(strstr(at_errmsg(), "no value 'q'"));
    at_template_free(t);
}

static void test_operations_and_fields(void **state)
{
    (void)state;
    assert_string_equal(at_operations()[0], "gemm");
    assert_non_null(at_operation_help("gemm"));
    assert_null(at_operation_help("conv"));
    assert_null(at_operation_buffers("conv"));
    at_field_desc d;
    assert_int_equal(at_operation_field("conv", 0, &d), AT_ERR_INVALID_ARG);
    size_t n = 0, shape = 0;
    while (at_operation_field("gemm", n, &d) == AT_OK) shape += d.shape, n++;
    assert_int_equal(n, 10);
    assert_int_equal(shape, 5); /* m n k dtype layout: the key and the CLI options */
    assert_int_equal(at_operation_field("gemm", 3, &d), AT_OK);
    assert_string_equal(d.name, "dtype");
    assert_string_equal(d.choices[2], "bf16");

    at_problem *p = NULL;
    char buf[64];
    assert_int_equal(at_problem_create("gemm", &p), AT_OK);
    assert_int_equal(at_problem_set(p, "m", "1000"), AT_OK);
    assert_int_equal(at_problem_set(p, "n", "10"), AT_OK);
    assert_int_equal(at_problem_get(p, "k", buf, sizeof buf), AT_OK);
    assert_string_equal(buf, "1000"); /* k defaults to m */
    assert_int_equal(at_problem_set(p, "dtype", "f64"), AT_ERR_INVALID_ARG);
    assert_non_null(
        strstr(at_problem_last_error(), "unknown dtype 'f64' (one of: f32, f16, bf16)"));
    assert_int_equal(at_problem_set(p, "layout", "tn"), AT_OK);
    assert_int_equal(at_problem_set(p, "beta", "nan"), AT_ERR_INVALID_ARG);
    assert_int_equal(at_problem_set(p, "k", "99999999999"), AT_ERR_INVALID_ARG);
    /* Strict text: no spaces, '+', hex, fractions for integers; no hex, inf or nan for reals. */
    static const char *const bad_ints[] = {" 5", "5 ", "+5", "0x2", "1e3", "5.0", "", "-"};
    for (size_t i = 0; i < sizeof bad_ints / sizeof bad_ints[0]; i++)
        assert_int_equal(at_problem_set(p, "n", bad_ints[i]), AT_ERR_INVALID_ARG);
    static const char *const bad_reals[] = {" 1.5", "+1", "0x1p3", ".5", "5.", "inf", "nan"};
    for (size_t i = 0; i < sizeof bad_reals / sizeof bad_reals[0]; i++)
        assert_int_equal(at_problem_set(p, "alpha", bad_reals[i]), AT_ERR_INVALID_ARG);
    assert_int_equal(at_problem_set(p, "alpha", "-2.5e-3"), AT_OK);
    assert_int_equal(at_problem_key(p, buf, sizeof buf), AT_OK);
    assert_string_equal(buf, "gemm/f32/tn/1000x10x1000");
    assert_int_equal(at_problem_set(p, "k", "7"), AT_OK);
    assert_int_equal(at_problem_key(p, buf, sizeof buf), AT_OK);
    assert_string_equal(buf, "gemm/f32/tn/1000x10x7");
    assert_int_equal(at_problem_set(p, "lda", "3"), AT_OK); /* tn: lda >= m */
    assert_int_equal(at_problem_key(p, buf, sizeof buf), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_problem_last_error(), "lda = 3"));
    at_problem_destroy(p);
    assert_int_equal(at_problem_create("conv", &p), AT_ERR_INVALID_ARG);
    assert_null(p);
    at_problem_destroy(NULL);

    /* The nearest-shape distance compares like with like. */
    at_gemm_problem g = {.m = 100, .n = 100, .k = 100};
    assert_true(at_op_gemm.distance(&g, "gemm/f32/nn/100x100x100") == 0.0);
    assert_true(fabs(at_op_gemm.distance(&g, "gemm/f32/nn/200x100x50") - 2 * log(2.0)) < 1e-12);
    assert_true(isinf(at_op_gemm.distance(&g, "gemm/f16/nn/100x100x100")));
    assert_true(isinf(at_op_gemm.distance(&g, "gemm/f32/tn/100x100x100")));
    assert_true(isinf(at_op_gemm.distance(&g, "gemm/f32/nn/100x100")));
}

static void test_register(void **state)
{
    (void)state;
    assert_int_equal(at_op_register(&at_op_gemm), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_errmsg(), "'gemm' is already registered"));
    static at_op other;
    other = at_op_gemm;
    other.name = "gemm2";
    assert_int_equal(at_op_register(&other), AT_OK);
    assert_ptr_equal(at_op_find("gemm2"), &other);
    assert_string_equal(at_operations()[2], "gemm2"); /* after gemm, attention */
    /* An operation with no template gets a clear answer, not a crash. */
    at_gemm_problem g = {.m = 4, .n = 4, .k = 4, .alpha = 1};
    at_problem p = at_problem_view(&other, &g);
    at_device_info d = device("opencl", "");
    char out[64];
    assert_int_equal(at_template_select(&p, &d, NULL, out, sizeof out), AT_ERR_UNSUPPORTED);
    assert_non_null(strstr(at_errmsg(), "dtype f32 is not supported on the opencl backend"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_template_per_device),
        cmocka_unit_test(test_templates_describe_themselves),
        cmocka_unit_test(test_argument_builder),
        cmocka_unit_test(test_operations_and_fields),
        cmocka_unit_test(test_register),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
