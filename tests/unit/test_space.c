/* test_space.c — tuning spaces (tuner/space/space.c): loading, errors, enumeration, configs. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tuner/space/space.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- a small space, built from sections so that each load error can replace one ---------- */

enum {
    S_NAME,
    S_KERNEL,
    S_SOURCE,
    S_PROBLEM,
    S_DEVICE,
    S_PARAMS,
    S_DERIVED,
    S_CONSTRAINTS,
    S_DEFINES,
    S_LAUNCH,
    S_ARGS,
    S_DEFAULTS,
    S_COUNT
};

static const char *const sections[S_COUNT] = {
    [S_NAME] = "name: toy\n",
    [S_KERNEL] = "kernel: toy_kernel\n",
    [S_SOURCE] = "source: toy.cl\n",
    [S_PROBLEM] = "problem: [m, n]\n",
    [S_DEVICE] = "device: [max_work_group_size, local_mem_bytes]\n",
    [S_PARAMS] = "parameters:\n"
                 "  BM: [8, 16, 32, 64]\n"
                 "  TM: [1, 2, 4]\n"
                 "  VW: [1, 2, 4, 8]\n",
    [S_DERIVED] = "derived:\n"
                  "  THREADS: BM / TM\n"
                  "  LMEM: BM * VW * 4\n",
    [S_CONSTRAINTS] = "constraints:\n"
                      "  - BM % (TM * VW) == 0\n"
                      "  - THREADS <= device.max_work_group_size\n"
                      "  - LMEM <= device.local_mem_bytes\n",
    [S_DEFINES] = "defines:\n"
                  "  EDGE_M: m % BM != 0\n"
                  "  HALF: \"THREADS > 8 ? 1 : 0\"\n",
    [S_LAUNCH] = "launch:\n"
                 "  global: [ceil_div(m, BM) * THREADS, n]\n"
                 "  local: [THREADS]\n",
    [S_ARGS] = "arguments:\n"
               "  - i32: m\n"
               "  - f64: alpha\n"
               "  - buffer: X\n"
               "  - workspace\n",
    [S_DEFAULTS] = "defaults:\n"
                   "  - {BM: 32, TM: 2, VW: 4}\n"
                   "  - BM: 8\n"
                   "    TM: 1\n"
                   "    VW: 1\n",
};

/* The YAML with section `which` replaced by `repl` ("" removes it; which < 0 keeps all), then
 * `extra` appended. malloc'd. */
static char *build(int which, const char *repl, const char *extra)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    buf[0] = '\0';
    for (int i = 0; i < S_COUNT; i++) {
        const char *t = i == which ? repl : sections[i];
        size_t l = strlen(t);
        assert_true(n + l < cap);
        memcpy(buf + n, t, l + 1);
        n += l;
    }
    if (extra) {
        size_t l = strlen(extra);
        buf = realloc(buf, n + l + 1);
        assert_non_null(buf);
        memcpy(buf + n, extra, l + 1);
    }
    return buf;
}

static at_space *load_ok(const char *yaml)
{
    at_space *s = NULL;
    at_status st = at_space_load(yaml, strlen(yaml), &s);
    if (st != AT_OK) print_error("load failed: %s\n", at_errmsg());
    assert_int_equal(st, AT_OK);
    assert_non_null(s);
    return s;
}

static at_space *load_toy(int64_t m, int64_t n, int64_t wg, int64_t lmem)
{
    char *y = build(-1, NULL, NULL);
    at_space *s = load_ok(y);
    free(y);
    assert_int_equal(at_space_set(s, "m", m), AT_OK);
    assert_int_equal(at_space_set(s, "n", n), AT_OK);
    assert_int_equal(at_space_set(s, "device.max_work_group_size", wg), AT_OK);
    assert_int_equal(at_space_set(s, "local_mem_bytes", lmem), AT_OK);
    return s;
}

static void expect_load_error(const char *yaml, const char *part1, const char *part2);
static void expect_section_error(int which, const char *repl, const char *p1, const char *p2);

static const int64_t BMS[] = {8, 16, 32, 64}, TMS[] = {1, 2, 4}, VWS[] = {1, 2, 4, 8};

static bool toy_valid(int64_t bm, int64_t tm, int64_t vw, int64_t wg, int64_t lmem)
{
    return bm % (tm * vw) == 0 && bm / tm <= wg && bm * vw * 4 <= lmem;
}

/* ---- loading and the structure ----------------------------------------------------------- */

static void test_load_structure(void **state)
{
    (void)state;
    at_space *s = load_toy(100, 50, 16, 512);
    assert_string_equal(s->name, "toy");
    assert_string_equal(s->kernel, "toy_kernel");
    assert_string_equal(s->source, "toy.cl");
    assert_int_equal(s->nparams, 3);
    assert_string_equal(s->params[0].name, "BM");
    assert_string_equal(s->params[1].name, "TM");
    assert_string_equal(s->params[2].name, "VW");
    assert_int_equal(s->params[0].nvalues, 4);
    assert_int_equal(s->params[0].values[3], 64);
    assert_int_equal(s->nproblem, 2);
    assert_string_equal(s->problem_vars[1], "n");
    assert_int_equal(s->ndevice, 2);
    assert_string_equal(s->device_vars[0], "max_work_group_size");
    assert_int_equal(s->nderived, 2);
    assert_string_equal(s->derived[1].name, "LMEM");
    assert_string_equal(at_expr_text(s->derived[1].expr), "BM * VW * 4");
    assert_int_equal(s->nconstraints, 3);
    assert_int_equal(s->ndefines, 2);
    assert_string_equal(s->defines[1].name, "HALF");
    assert_int_equal(s->launch_dims, 2);
    assert_non_null(s->global[0]);
    assert_non_null(s->global[1]);
    assert_null(s->global[2]);
    assert_non_null(s->local[0]);
    assert_null(s->local[1]);
    assert_int_equal(s->nargs, 4);
    assert_int_equal(s->args[0].kind, AT_ARG_SCALAR);
    assert_int_equal(s->args[0].type, AT_ARG_I32);
    assert_string_equal(s->args[0].name, "m");
    assert_int_equal(s->args[1].type, AT_ARG_F64);
    assert_int_equal(s->args[2].kind, AT_ARG_BUFFER);
    assert_string_equal(s->args[2].name, "X");
    assert_int_equal(s->args[3].kind, AT_ARG_WORKSPACE);
    assert_null(s->args[3].name);
    /* YAML splits the flow sequence at the comma inside ceil_div(...); it is joined again */
    assert_string_equal(at_expr_text(s->global[0]), "ceil_div(m, BM) * THREADS");
    assert_string_equal(at_expr_text(s->global[1]), "n");
    assert_int_equal(s->nslots, 3 + 2 + 2 + 2);
    assert_int_equal(s->fixed[0], 100);
    assert_int_equal(s->fixed[1], 50);
    assert_int_equal(s->fixed[2], 16);
    assert_int_equal(s->fixed[3], 512);
    assert_int_equal(at_space_total(s), 48);
    at_space_free(s);
    at_space_free(NULL);
}

static void test_set(void **state)
{
    (void)state;
    at_space *s = load_toy(0, 0, 0, 0);
    assert_int_equal(at_space_set(s, "m", 7), AT_OK);
    assert_int_equal(s->fixed[0], 7);
    assert_int_equal(at_space_set(s, "device.local_mem_bytes", 9), AT_OK);
    assert_int_equal(s->fixed[3], 9);
    assert_int_equal(at_space_set(s, "max_work_group_size", 11), AT_OK);
    assert_int_equal(s->fixed[2], 11);
    assert_int_equal(at_space_set(s, "k", 1), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_errmsg(), "'k'"));
    assert_int_equal(at_space_set(s, "device.m", 1), AT_ERR_INVALID_ARG);
    assert_int_equal(at_space_set(s, "BM", 1), AT_ERR_INVALID_ARG);      /* a parameter */
    assert_int_equal(at_space_set(s, "THREADS", 1), AT_ERR_INVALID_ARG); /* derived */
    at_space_free(s);
}

static void test_enumerate_matches_brute_force(void **state)
{
    (void)state;
    const int64_t wgs[] = {16, 4, 1000, 0}, lmems[] = {512, 64, 100000, 0};
    for (int t = 0; t < 4; t++) {
        at_space *s = load_toy(100, 50, wgs[t], lmems[t]);
        int64_t *cfgs = NULL;
        uint16_t *idx = NULL;
        size_t n = 99;
        assert_int_equal(at_space_enumerate(s, &cfgs, &idx, &n), AT_OK);
        size_t want = 0;
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 3; b++)
                for (int c = 0; c < 4; c++) {
                    if (!toy_valid(BMS[a], TMS[b], VWS[c], wgs[t], lmems[t])) {
                        int64_t cfg[3] = {BMS[a], TMS[b], VWS[c]};
                        char why[128] = "x";
                        assert_false(at_space_valid(s, cfg, why, sizeof why));
                        assert_true(why[0] != '\0');
                        continue;
                    }
                    /* same order: first parameter slowest */
                    assert_true(want < n);
                    assert_int_equal(cfgs[want * 3 + 0], BMS[a]);
                    assert_int_equal(cfgs[want * 3 + 1], TMS[b]);
                    assert_int_equal(cfgs[want * 3 + 2], VWS[c]);
                    assert_int_equal(idx[want * 3 + 0], a);
                    assert_int_equal(idx[want * 3 + 1], b);
                    assert_int_equal(idx[want * 3 + 2], c);
                    char why[128] = "x";
                    assert_true(at_space_valid(s, &cfgs[want * 3], why, sizeof why));
                    assert_string_equal(why, "");
                    want++;
                }
        assert_int_equal(n, want);
        if (t == 0) assert_true(n > 0 && n < 48);
        if (t == 3) assert_int_equal(n, 0);
        free(cfgs);
        free(idx);

        /* without the index form */
        size_t n2 = 0;
        assert_int_equal(at_space_enumerate(s, &cfgs, NULL, &n2), AT_OK);
        assert_int_equal(n2, want);
        free(cfgs);
        at_space_free(s);
    }
}

static void test_valid_why(void **state)
{
    (void)state;
    at_space *s = load_toy(100, 50, 16, 512);
    int64_t cfg[3] = {64, 1, 1}; /* THREADS = 64 > 16 */
    char why[256];
    assert_false(at_space_valid(s, cfg, why, sizeof why));
    assert_string_equal(why, "THREADS <= device.max_work_group_size");
    assert_false(at_space_valid(s, cfg, NULL, 0));
    int64_t cfg2[3] = {8, 4, 4}; /* 8 % 16 != 0 */
    assert_false(at_space_valid(s, cfg2, why, sizeof why));
    assert_string_equal(why, "BM % (TM * VW) == 0");
    char tiny[4];
    assert_false(at_space_valid(s, cfg2, tiny, sizeof tiny));
    assert_string_equal(tiny, "BM ");
    at_space_free(s);
}

static void test_derived_and_values(void **state)
{
    (void)state;
    at_space *s = load_toy(100, 50, 16, 512);
    int64_t cfg[3] = {32, 2, 4};
    int64_t slots[16];
    assert_true(at_space_slots(s, cfg, slots));
    assert_int_equal(slots[0], 32);
    assert_int_equal(slots[2], 4);
    assert_int_equal(slots[3], 100); /* m */
    assert_int_equal(slots[4], 50);  /* n */
    assert_int_equal(slots[5], 16);  /* device.max_work_group_size */
    assert_int_equal(slots[6], 512);
    assert_int_equal(slots[7], 16);  /* THREADS */
    assert_int_equal(slots[8], 512); /* LMEM */
    int64_t v = 0;
    assert_int_equal(at_space_value(s, cfg, "THREADS", &v), AT_OK);
    assert_int_equal(v, 16);
    assert_int_equal(at_space_value(s, cfg, "LMEM", &v), AT_OK);
    assert_int_equal(v, 512);
    assert_int_equal(at_space_value(s, cfg, "VW", &v), AT_OK);
    assert_int_equal(v, 4);
    assert_int_equal(at_space_value(s, cfg, "n", &v), AT_OK);
    assert_int_equal(v, 50);
    assert_int_equal(at_space_value(s, cfg, "device.local_mem_bytes", &v), AT_OK);
    assert_int_equal(v, 512);
    assert_int_equal(at_space_value(s, cfg, "max_work_group_size", &v), AT_OK);
    assert_int_equal(v, 16);
    assert_int_equal(at_space_value(s, cfg, "nope", &v), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_errmsg(), "'nope'"));
    at_space_free(s);

    /* a derived value that cannot be evaluated */
    char *y = build(S_DERIVED,
                    "derived:\n  THREADS: BM / TM\n  LMEM: BM * VW * 4\n"
                    "  Q: m / (n - 1)\n",
                    NULL);
    s = load_ok(y);
    free(y);
    at_space_set(s, "m", 10);
    at_space_set(s, "n", 1);
    assert_false(at_space_slots(s, cfg, slots));
    char why[256];
    assert_false(at_space_valid(s, cfg, why, sizeof why));
    assert_non_null(strstr(why, "'Q'"));
    assert_int_equal(at_space_value(s, cfg, "THREADS", &v), AT_OK); /* before Q: fine */
    assert_int_equal(at_space_value(s, cfg, "Q", &v), AT_ERR_TEMPLATE);
    at_space_set(s, "n", 3);
    assert_true(at_space_slots(s, cfg, slots));
    assert_int_equal(slots[9], 5);
    at_space_free(s);
}

static void test_launch_and_arguments(void **state)
{
    (void)state;
    at_space *s = load_toy(100, 50, 16, 512);
    int64_t cfg[3] = {32, 2, 4};
    size_t g[3] = {0}, l[3] = {0};
    assert_int_equal(at_space_launch(s, cfg, g, l), AT_OK);
    assert_int_equal(g[0], 4 * 16); /* ceil_div(100, 32) * THREADS */
    assert_int_equal(g[1], 50);
    assert_int_equal(g[2], 1);
    assert_int_equal(l[0], 16);
    assert_int_equal(l[1], 1);
    assert_int_equal(l[2], 1);
    at_space_set(s, "n", 0); /* a zero global size is an error */
    assert_int_equal(at_space_launch(s, cfg, g, l), AT_ERR_TEMPLATE);
    assert_non_null(strstr(at_errmsg(), "global[1]"));
    at_space_free(s);

    /* 3 dimensions, no local */
    char *y = build(S_LAUNCH, "launch:\n  global: [m, n, 3]\n", NULL);
    s = load_ok(y);
    free(y);
    at_space_set(s, "m", 7);
    at_space_set(s, "n", 5);
    assert_int_equal(s->launch_dims, 3);
    assert_int_equal(at_space_launch(s, cfg, g, l), AT_OK);
    assert_int_equal(g[0], 7);
    assert_int_equal(g[1], 5);
    assert_int_equal(g[2], 3);
    assert_int_equal(l[0], 1);
    at_space_free(s);

    /* commas inside parentheses of flow sequences, nested; quoted items stay whole */
    y = build(S_LAUNCH,
              "launch:\n  global: [max(min(m, 4), ceil_div(n, 2)), min(3,2), \"max(1, 2)\"]\n"
              "  local: [ min( 1 , 2 ) ]\n",
              "constraints2: 0\n");
    y[strstr(y, "constraints2") - y] = '\0';
    s = load_ok(y);
    free(y);
    assert_int_equal(s->launch_dims, 3);
    assert_string_equal(at_expr_text(s->global[0]), "max(min(m, 4), ceil_div(n, 2))");
    assert_string_equal(at_expr_text(s->global[1]), "min(3, 2)");
    assert_string_equal(at_expr_text(s->global[2]), "max(1, 2)");
    assert_string_equal(at_expr_text(s->local[0]), "min( 1, 2 )");
    at_space_set(s, "m", 7);
    at_space_set(s, "n", 9);
    assert_int_equal(at_space_launch(s, cfg, g, l), AT_OK);
    assert_int_equal(g[0], 5);
    assert_int_equal(g[1], 2);
    assert_int_equal(g[2], 2);
    assert_int_equal(l[0], 1);
    at_space_free(s);
    y = build(S_CONSTRAINTS, "constraints: [min(BM, 16) >= TM, max(VW,1) > 0]\n", NULL);
    s = load_ok(y);
    free(y);
    assert_int_equal(s->nconstraints, 2);
    assert_string_equal(at_expr_text(s->constraints[0]), "min(BM, 16) >= TM");
    at_space_free(s);
    /* an unbalanced parenthesis is reported by the expression parser */
    y = build(S_LAUNCH, "launch:\n  global: [min(m, n]\n", NULL);
    expect_load_error(y, "launch global[0]", "')'");
    free(y);

    /* a tensor map: its expressions see parameters, problem, device and derived values, in
     * the fingerprint; box is [columns, rows]; `when` defaults to 1 */
    y = build(S_ARGS,
              "arguments:\n  - buffer: X\n"
              "  - tensormap: {buffer: X, when: TM > 1, cols: m, rows: \"n\", ld: m + 8,\n"
              "                box: [min(BM, 8), THREADS], swizzle: \"VW > 2 ? 128 : 64\"}\n"
              "  - tensormap:\n      buffer: X\n      cols: 4\n      rows: 4\n      ld: 4\n"
              "      box: [4, 4]\n      swizzle: 0\n",
              NULL);
    s = load_ok(y);
    free(y);
    assert_int_equal(s->nargs, 3);
    assert_int_equal(s->args[1].kind, AT_ARG_TENSORMAP);
    assert_string_equal(s->args[1].name, "X");
    at_space_set(s, "m", 100);
    at_space_set(s, "n", 50);
    int64_t v[AT_TMAP_NEXPR];
    assert_int_equal(at_space_tmap(s, cfg, 1, v), AT_OK); /* BM 32, TM 2, VW 4 */
    assert_int_equal(v[AT_TMAP_COLS], 100);
    assert_int_equal(v[AT_TMAP_ROWS], 50);
    assert_int_equal(v[AT_TMAP_LD], 108);
    assert_int_equal(v[AT_TMAP_BOX0], 8);
    assert_int_equal(v[AT_TMAP_BOX1], 16); /* THREADS = BM / TM */
    assert_int_equal(v[AT_TMAP_SWIZZLE], 128);
    assert_int_equal(v[AT_TMAP_WHEN], 1);
    const int64_t cfg1[3] = {32, 1, 2};
    assert_int_equal(at_space_tmap(s, cfg1, 1, v), AT_OK);
    assert_int_equal(v[AT_TMAP_WHEN], 0);
    assert_int_equal(v[AT_TMAP_SWIZZLE], 64);
    assert_int_equal(at_space_tmap(s, cfg, 2, v), AT_OK);
    assert_int_equal(v[AT_TMAP_WHEN], 1);                              /* no `when`: always */
    assert_int_equal(at_space_tmap(s, cfg, 0, v), AT_ERR_INVALID_ARG); /* a buffer */
    const uint64_t h = at_space_fingerprint(s, 1);
    at_space_free(s);
    y = build(S_ARGS,
              "arguments:\n  - buffer: X\n"
              "  - tensormap: {buffer: X, when: TM > 1, cols: m, rows: \"n\", ld: m + 8,\n"
              "                box: [min(BM, 8), THREADS], swizzle: \"VW > 2 ? 128 : 32\"}\n"
              "  - tensormap:\n      buffer: X\n      cols: 4\n      rows: 4\n      ld: 4\n"
              "      box: [4, 4]\n      swizzle: 0\n",
              NULL);
    s = load_ok(y);
    free(y);
    assert_true(at_space_fingerprint(s, 1) != h); /* a map's expression is part of the code */
    at_space_free(s);

    /* no arguments: none (a standalone space; templates need them) */
    y = build(S_ARGS, "", NULL);
    s = load_ok(y);
    free(y);
    assert_int_equal(s->nargs, 0);
    /* a local size that divides by zero */
    at_space_free(s);
    y = build(S_LAUNCH, "launch:\n  global: m\n  local: 64 / n\n", NULL);
    s = load_ok(y);
    free(y);
    at_space_set(s, "m", 128);
    assert_int_equal(s->launch_dims, 1);
    assert_int_equal(at_space_launch(s, cfg, g, l), AT_ERR_TEMPLATE);
    assert_non_null(strstr(at_errmsg(), "local[0]"));
    at_space_set(s, "n", 16);
    assert_int_equal(at_space_launch(s, cfg, g, l), AT_OK);
    assert_int_equal(g[0], 128);
    assert_int_equal(l[0], 4);
    at_space_free(s);
}

/* `launch: shared:`, `workspace:` and `scratch:`: optional byte counts, 0 when absent. */
static void test_shared_and_workspace(void **state)
{
    (void)state;
    int64_t cfg[3] = {32, 2, 4};
    size_t sh = 7, ws = 7, sc = 7;
    at_space *s = load_toy(100, 50, 16, 512);
    assert_null(s->shared);
    assert_null(s->workspace);
    assert_null(s->scratch);
    assert_int_equal(at_space_memory(s, cfg, &sh, &ws, &sc), AT_OK);
    assert_int_equal(sh, 0);
    assert_int_equal(ws, 0);
    assert_int_equal(sc, 0);
    at_space_free(s);

    /* the scratch is in the fingerprint (a space without one keeps its old hash) */
    char *y = build(S_LAUNCH, "launch:\n  global: [m]\n  local: [THREADS]\n  shared: LMEM * 2\n",
                    "workspace: \"VW > 2 ? 4 * m * n + 64 : 0\"\n");
    s = load_ok(y);
    free(y);
    const uint64_t plain = at_space_fingerprint(s, 0);
    at_space_free(s);
    y = build(S_LAUNCH, "launch:\n  global: [m]\n  local: [THREADS]\n  shared: LMEM * 2\n",
              "workspace: \"VW > 2 ? 4 * m * n + 64 : 0\"\nscratch: 8 * m\n");
    s = load_ok(y);
    free(y);
    at_space_set(s, "m", 10);
    at_space_set(s, "n", 3);
    assert_int_equal(at_space_memory(s, cfg, &sh, &ws, &sc), AT_OK);
    assert_int_equal(sh, 32 * 4 * 4 * 2);
    assert_int_equal(ws, 4 * 10 * 3 + 64);
    assert_int_equal(sc, 8 * 10);
    assert_true(at_space_fingerprint(s, 0) != plain);
    cfg[2] = 2; /* VW = 2: no workspace */
    assert_int_equal(at_space_memory(s, cfg, &sh, NULL, NULL), AT_OK);
    assert_int_equal(sh, 32 * 2 * 4 * 2);
    assert_int_equal(at_space_memory(s, cfg, NULL, &ws, NULL), AT_OK);
    assert_int_equal(ws, 0);
    at_space_set(s, "n", -2); /* a negative size is an error naming the key */
    cfg[2] = 4;
    assert_int_equal(at_space_memory(s, cfg, NULL, &ws, NULL), AT_ERR_TEMPLATE);
    assert_non_null(strstr(at_errmsg(), "workspace"));
    assert_non_null(strstr(at_errmsg(), "negative"));
    at_space_free(s);

    y = build(S_LAUNCH, "launch:\n  global: [m]\n  shared: 1024 / (n - 3)\n", NULL);
    s = load_ok(y);
    free(y);
    at_space_set(s, "n", 3);
    assert_int_equal(at_space_memory(s, cfg, &sh, NULL, NULL), AT_ERR_TEMPLATE);
    assert_non_null(strstr(at_errmsg(), "launch shared"));
    assert_non_null(strstr(at_errmsg(), "cannot be evaluated"));
    at_space_set(s, "n", 5);
    assert_int_equal(at_space_memory(s, cfg, &sh, NULL, NULL), AT_OK);
    assert_int_equal(sh, 512);
    at_space_free(s);

    /* `launch: cluster:` (blocks per cluster along dimension 0): 1 when absent; must divide
     * the grid's blocks; in the fingerprint only when present (older hashes stay) */
    size_t cl = 0;
    s = load_toy(100, 50, 16, 512);
    assert_null(s->cluster);
    assert_int_equal(at_space_cluster(s, cfg, &cl), AT_OK);
    assert_int_equal(cl, 1);
    const uint64_t h0 = at_space_fingerprint(s, 1);
    at_space_free(s);
    y = build(S_LAUNCH, "launch:\n  global: [ceil_div(m, BM) * THREADS, n]\n  local: [THREADS]\n",
              NULL);
    s = load_ok(y);
    free(y);
    assert_true(at_space_fingerprint(s, 1) == h0);
    at_space_free(s);
    y = build(S_LAUNCH,
              "launch:\n  global: [ceil_div(m, BM) * THREADS, n]\n  local: [THREADS]\n"
              "  cluster: VW / 2\n",
              NULL);
    s = load_ok(y);
    free(y);
    assert_true(at_space_fingerprint(s, 1) != h0);
    at_space_set(s, "m", 128); /* 4 blocks of BM = 32 along dimension 0 */
    at_space_set(s, "n", 3);
    assert_int_equal(at_space_cluster(s, cfg, &cl), AT_OK); /* VW 4 */
    assert_int_equal(cl, 2);
    at_space_set(s, "m", 96); /* 3 blocks: clusters of 2 do not divide them */
    assert_int_equal(at_space_cluster(s, cfg, &cl), AT_ERR_TEMPLATE);
    assert_non_null(strstr(at_errmsg(), "does not divide the grid's 3 blocks"));
    cfg[2] = 1; /* VW 1: a cluster of 0 */
    assert_int_equal(at_space_cluster(s, cfg, &cl), AT_ERR_TEMPLATE);
    assert_non_null(strstr(at_errmsg(), "launch cluster"));
    assert_non_null(strstr(at_errmsg(), "not positive"));
    cfg[2] = 4;
    at_space_free(s);
    expect_section_error(S_LAUNCH, "launch:\n  global: [m]\n  cluster: BM +\n", "launch cluster",
                         NULL);

    /* load errors name the key */
    expect_section_error(S_LAUNCH, "launch:\n  global: [m]\n  shared: BM +\n", "launch shared",
                         NULL);
    expect_section_error(S_LAUNCH, "launch:\n  global: [m]\n  shared:\n", "launch shared",
                         "expected an expression");
    expect_section_error(S_LAUNCH, "launch:\n  global: [m]\n  shared: 1\n  shared: 2\n",
                         "duplicate key 'shared'", NULL);
    y = build(-1, NULL, "workspace: nope * 2\n");
    expect_load_error(y, "'workspace'", "nope");
    free(y);
}

static void test_defaults(void **state)
{
    (void)state;
    at_space *s = load_toy(100, 50, 16, 512);
    assert_int_equal(s->ndefaults, 2);
    assert_int_equal(s->defaults[0], 32);
    assert_int_equal(s->defaults[1], 2);
    assert_int_equal(s->defaults[2], 4);
    assert_int_equal(s->defaults[3], 8);
    assert_int_equal(s->defaults[4], 1);
    assert_int_equal(s->defaults[5], 1);
    for (size_t i = 0; i < s->ndefaults; i++)
        assert_true(at_space_valid(s, &s->defaults[i * 3], NULL, 0));
    at_space_free(s);
    /* none */
    char *y = build(S_DEFAULTS, "", NULL);
    s = load_ok(y);
    free(y);
    assert_int_equal(s->ndefaults, 0);
    at_space_free(s);
}

static void test_defines(void **state)
{
    (void)state;
    at_space *s = load_toy(100, 50, 16, 512);
    int64_t cfg[3] = {32, 2, 4};
    char buf[256];
    assert_int_equal(at_config_defines(s, cfg, buf, sizeof buf), AT_OK);
    assert_string_equal(buf, "-DBM=32 -DTM=2 -DVW=4 -DEDGE_M=1 -DHALF=1");
    at_space_set(s, "m", 128);
    int64_t cfg2[3] = {8, 1, 2};
    assert_int_equal(at_config_defines(s, cfg2, buf, sizeof buf), AT_OK);
    assert_string_equal(buf, "-DBM=8 -DTM=1 -DVW=2 -DEDGE_M=0 -DHALF=0");
    /* too small: exactly one byte short, and tiny */
    size_t need = strlen(buf) + 1;
    assert_int_equal(at_config_defines(s, cfg2, buf, need), AT_OK);
    assert_int_equal(at_config_defines(s, cfg2, buf, need - 1), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_errmsg(), "too small"));
    assert_int_equal(at_config_defines(s, cfg2, buf, 3), AT_ERR_INVALID_ARG);
    at_space_free(s);

    /* a define that cannot be evaluated */
    char *y = build(S_DEFINES, "defines:\n  BAD: 1 / (m - 5)\n", NULL);
    s = load_ok(y);
    free(y);
    at_space_set(s, "m", 5);
    assert_int_equal(at_config_defines(s, cfg, buf, sizeof buf), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_errmsg(), "BAD"));
    at_space_set(s, "m", 6);
    assert_int_equal(at_config_defines(s, cfg, buf, sizeof buf), AT_OK);
    assert_string_equal(buf, "-DBM=32 -DTM=2 -DVW=4 -DBAD=1");
    at_space_free(s);

    /* no defines: parameters only */
    y = build(S_DEFINES, "", NULL);
    s = load_ok(y);
    free(y);
    assert_int_equal(at_config_defines(s, cfg, buf, sizeof buf), AT_OK);
    assert_string_equal(buf, "-DBM=32 -DTM=2 -DVW=4");
    at_space_free(s);
}

static void test_config_roundtrip(void **state)
{
    (void)state;
    at_space *s = load_toy(100, 50, 1000, 100000);
    int64_t *cfgs;
    size_t n;
    assert_int_equal(at_space_enumerate(s, &cfgs, NULL, &n), AT_OK);
    assert_true(n > 0);
    for (size_t i = 0; i < n; i++) {
        char buf[128];
        size_t len = at_config_format(s, &cfgs[i * 3], buf, sizeof buf);
        assert_int_equal(len, strlen(buf));
        int64_t back[3] = {0};
        assert_int_equal(at_config_parse(s, buf, back), AT_OK);
        assert_memory_equal(back, &cfgs[i * 3], sizeof back);
    }
    free(cfgs);

    int64_t cfg[3] = {64, 4, 8};
    char buf[64];
    assert_int_equal(at_config_format(s, cfg, buf, sizeof buf), 15);
    assert_string_equal(buf, "BM=64,TM=4,VW=8");
    /* truncation is safe */
    assert_int_equal(at_config_format(s, cfg, buf, 8), 7);
    assert_string_equal(buf, "BM=64,T");
    assert_int_equal(at_config_format(s, cfg, buf, 1), 0);
    assert_string_equal(buf, "");
    assert_int_equal(at_config_format(s, cfg, buf, 0), 0);

    /* any order, spaces around items */
    int64_t back[3];
    assert_int_equal(at_config_parse(s, "VW=8, TM=4 ,BM=64", back), AT_OK);
    assert_memory_equal(back, cfg, sizeof back);
    at_space_free(s);
}

static void test_config_parse_errors(void **state)
{
    (void)state;
    at_space *s = load_toy(100, 50, 1000, 100000);
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"BM=64,TM=4,VW=8,XX=1", "unknown parameter 'XX'"},
        {"BM=64,TM=4", "missing parameter 'VW'"},
        {"", "missing parameter 'BM'"},
        {"BM=64,TM=4,VW=8,BM=64", "duplicate parameter 'BM'"},
        {"BM=65,TM=4,VW=8", "65 is not an allowed value of 'BM'"},
        {"BM=64,TM=4,VW=x8", "bad value 'x8' for 'VW'"},
        {"BM=64,TM=4,VW=8x", "bad value '8x' for 'VW'"},
        {"BM=64,TM=4,VW=", "bad value '' for 'VW'"},
        {"BM=64,TM=4,VW=99999999999999999999999", "bad value"},
        {"BM=64,TM=4,VW", "'VW' is not NAME=VALUE"},
        {"BM=64,,TM=4,VW=8", "'' is not NAME=VALUE"},
        {"BM=64,TM=4,VW=8,", "trailing ','"},
        {"garbage", "'garbage' is not NAME=VALUE"},
        {"=64,TM=4,VW=8", "unknown parameter ''"},
        {"BM=64;TM=4;VW=8", "bad value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t cfg[3] = {-1, -1, -1};
        at_errclear();
        at_status st = at_config_parse(s, bad[i].text, cfg);
        if (st != AT_ERR_INVALID_ARG || !strstr(at_errmsg(), bad[i].msg))
            print_error("\"%s\": %d \"%s\", want \"%s\"\n", bad[i].text, st, at_errmsg(),
                        bad[i].msg);
        assert_int_equal(st, AT_ERR_INVALID_ARG);
        assert_non_null(strstr(at_errmsg(), bad[i].msg));
        assert_int_equal(cfg[0], -1); /* untouched on failure */
        assert_int_equal(cfg[2], -1);
    }
    at_space_free(s);
}

/* ---- load errors ------------------------------------------------------------------------- */

static void expect_load_error(const char *yaml, const char *part1, const char *part2)
{
    at_space *s = (at_space *)&s;
    at_errclear();
    at_status st = at_space_load(yaml, strlen(yaml), &s);
    const char *msg = at_errmsg();
    bool good =
        st == AT_ERR_TEMPLATE && (!part1 || strstr(msg, part1)) && (!part2 || strstr(msg, part2));
    if (!good)
        print_error("load gave %d \"%s\", want \"%s\" and \"%s\"\nYAML:\n%s\n", st, msg,
                    part1 ? part1 : "", part2 ? part2 : "", yaml);
    assert_int_equal(st, AT_ERR_TEMPLATE);
    assert_null(s);
    if (part1) assert_non_null(strstr(msg, part1));
    if (part2) assert_non_null(strstr(msg, part2));
}

static void expect_section_error(int which, const char *repl, const char *p1, const char *p2)
{
    char *y = build(which, repl, NULL);
    expect_load_error(y, p1, p2);
    free(y);
}

static int count_lines_before(const char *yaml, const char *needle)
{
    const char *at = strstr(yaml, needle);
    assert_non_null(at);
    int line = 1;
    for (const char *p = yaml; p < at; p++) line += *p == '\n';
    return line;
}

static void test_load_errors_top_level(void **state)
{
    (void)state;
    /* unknown key: named with its line */
    char *y = build(-1, NULL, "colour: red\n");
    char want[64];
    snprintf(want, sizeof want, "line %d", count_lines_before(y, "colour"));
    expect_load_error(y, "unknown key 'colour'", want);
    free(y);
    y = build(S_ARGS, "arguments: [workspace]\nlaunh: {}\n", NULL);
    snprintf(want, sizeof want, "line %d", count_lines_before(y, "launh"));
    expect_load_error(y, "unknown key 'launh'", want);
    free(y);
    /* device_types: cpu and gpu only */
    y = build(-1, NULL, "device_types: [cpu, tpu]\n");
    expect_load_error(y, "'device_types': 'tpu' is not cpu or gpu", NULL);
    free(y);
    y = build(-1, NULL, "device_types: [gpu, cpu]\n");
    at_space *ok = NULL;
    assert_int_equal(at_space_load(y, strlen(y), &ok), AT_OK);
    assert_int_equal(ok->ndevice_types, 2);
    assert_true(at_space_lists(ok->device_types, ok->ndevice_types, "cpu", 0));
    at_space_free(ok);
    free(y);
    /* duplicate key */
    y = build(-1, NULL, "name: again\n");
    expect_load_error(y, "duplicate key 'name'", NULL);
    free(y);
    /* missing required keys */
    expect_section_error(S_NAME, "", "missing key 'name'", NULL);
    expect_section_error(S_KERNEL, "", "missing key 'kernel'", NULL);
    expect_section_error(S_SOURCE, "", "missing key 'source'", NULL);
    expect_section_error(S_PARAMS, "", "missing key 'parameters'", NULL);
    expect_section_error(S_LAUNCH, "", "missing key 'launch'", NULL);
    /* wrong shapes */
    expect_section_error(S_NAME, "name: [a]\n", "'name'", "line 1");
    expect_section_error(S_KERNEL, "kernel:\n", "'kernel'", NULL);
    expect_section_error(S_PROBLEM, "problem: m\n", "'problem'", NULL);
    expect_section_error(S_PROBLEM, "problem: [m, 2x]\n", "'problem'", "'2x'");
    expect_section_error(S_PROBLEM, "problem: [m, n, m]\n", "'problem'", "duplicate name 'm'");
    expect_section_error(S_PROBLEM, "problem: [m, n, BM]\n", "'problem'", "duplicate name 'BM'");
    expect_section_error(S_DEVICE, "device: [a, a]\n", "'device'", "duplicate name 'a'");
    expect_section_error(S_DEVICE, "device: {a: 1}\n", "'device'", NULL);
    expect_section_error(S_PARAMS, "parameters: [BM]\n", "'parameters'", NULL);
    expect_section_error(S_PARAMS, "parameters: {}\n", "'parameters'", NULL);
    expect_section_error(S_DERIVED, "derived: [a]\n", "'derived'", NULL);
    expect_section_error(S_CONSTRAINTS, "constraints: {a: 1}\n", "'constraints'", NULL);
    expect_section_error(S_DEFINES, "defines: [a]\n", "'defines'", NULL);
    expect_section_error(S_DEFAULTS, "defaults: {BM: 8}\n", "'defaults'", NULL);
    expect_section_error(S_DEFAULTS, "defaults: [3]\n", "'defaults'[0]", NULL);
    /* not YAML / not a mapping / empty */
    expect_load_error("name: [unclosed\n", "YAML", "line");
    expect_load_error("- a\n- b\n", "top level", NULL);
    expect_load_error("", "empty", NULL);
    at_space *s = NULL;
    assert_int_equal(at_space_load(NULL, 0, &s), AT_ERR_INVALID_ARG);
    assert_int_equal(at_space_load("name: x", 7, NULL), AT_ERR_INVALID_ARG);
}

static void test_load_errors_parameters(void **state)
{
    (void)state;
    const char *head = "parameters:\n  BM: [8, 16]\n";
    char buf[4096];
    /* no values */
    snprintf(buf, sizeof buf, "%s  TM: []\n", head);
    expect_section_error(S_PARAMS, buf, "parameter 'TM'", "non-empty");
    snprintf(buf, sizeof buf, "%s  TM:\n  VW: [1]\n", head);
    expect_section_error(S_PARAMS, buf, "parameter 'TM'", NULL);
    /* too many values */
    int n = snprintf(buf, sizeof buf, "%s  TM: [1", head);
    for (int i = 2; i <= AT_MAX_VALUES + 1; i++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, ", %d", i);
    snprintf(buf + n, sizeof buf - (size_t)n, "]\n  VW: [1]\n");
    expect_section_error(S_PARAMS, buf, "parameter 'TM' has 65 values", NULL);
    /* exactly AT_MAX_VALUES is fine */
    n = snprintf(buf, sizeof buf, "%s  TM: [1", head);
    for (int i = 2; i <= AT_MAX_VALUES; i++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, ", %d", i);
    snprintf(buf + n, sizeof buf - (size_t)n, "]\n  VW: [1]\n");
    char *y = build(S_PARAMS, buf, NULL);
    y[strstr(y, "defaults:") - y] = '\0'; /* the defaults use other values */
    at_space *s = load_ok(y);
    free(y);
    assert_int_equal(s->params[1].nvalues, AT_MAX_VALUES);
    assert_int_equal(at_space_total(s), 2 * AT_MAX_VALUES);
    at_space_free(s);
    /* non-integer values */
    snprintf(buf, sizeof buf, "%s  TM: [1, two]\n  VW: [1]\n", head);
    expect_section_error(S_PARAMS, buf, "parameter 'TM'", "'two' is not an integer");
    snprintf(buf, sizeof buf, "%s  TM: [1, 2.5]\n  VW: [1]\n", head);
    expect_section_error(S_PARAMS, buf, "parameter 'TM'", "'2.5' is not an integer");
    snprintf(buf, sizeof buf, "%s  TM: [1, [2]]\n  VW: [1]\n", head);
    expect_section_error(S_PARAMS, buf, "parameter 'TM'", "not an integer");
    snprintf(buf, sizeof buf, "%s  TM: 4\n  VW: [1]\n", head);
    expect_section_error(S_PARAMS, buf, "parameter 'TM'", NULL);
    /* duplicates */
    snprintf(buf, sizeof buf, "%s  TM: [1]\n  BM: [1]\n", head);
    expect_section_error(S_PARAMS, buf, "duplicate name 'BM'", "line 9");
    snprintf(buf, sizeof buf, "%s  TM: [1, 2, 1]\n  VW: [1]\n", head);
    expect_section_error(S_PARAMS, buf, "parameter 'TM'", "duplicate value 1");
    snprintf(buf, sizeof buf, "%s  T-M: [1]\n  VW: [1]\n", head);
    expect_section_error(S_PARAMS, buf, "'T-M' is not a valid name", NULL);
    /* too many parameters */
    n = snprintf(buf, sizeof buf, "parameters:\n");
    for (int i = 0; i < AT_MAX_PARAMS + 1; i++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "  P%d: [1]\n", i);
    expect_section_error(S_PARAMS, buf, "'parameters'", "33 parameters, at most 32");
}

static void test_load_errors_expressions(void **state)
{
    (void)state;
    expect_section_error(S_CONSTRAINTS, "constraints:\n  - BM % foo == 0\n", "constraints[0]",
                         "unknown name 'foo' in \"BM % foo == 0\"");
    expect_section_error(S_CONSTRAINTS, "constraints:\n  - BM > 0\n  - BM +\n", "constraints[1]",
                         "line 15");
    expect_section_error(S_CONSTRAINTS, "constraints:\n  - max_work_group_size > 0\n",
                         "unknown name 'max_work_group_size'", NULL);
    expect_section_error(S_CONSTRAINTS, "constraints:\n  - [1]\n", "constraints[0]",
                         "expected an expression");
    /* a derived value may use only the ones above it */
    expect_section_error(S_DERIVED, "derived:\n  A: B + 1\n  B: BM\n", "derived 'A'",
                         "unknown name 'B'");
    expect_section_error(S_DERIVED, "derived:\n  A: A + 1\n", "derived 'A'", "unknown name 'A'");
    expect_section_error(S_DERIVED, "derived:\n  m: BM\n", "'derived'", "duplicate name 'm'");
    expect_section_error(S_DERIVED, "derived:\n  A: 1\n  A: 2\n", "'derived'",
                         "duplicate name 'A'");
    expect_section_error(S_DERIVED, "derived:\n  A:\n", "derived 'A'", "expected an expression");
    expect_section_error(S_DEFINES, "defines:\n  BM: 1\n", "'defines'", "duplicate name 'BM'");
    expect_section_error(S_DEFINES, "defines:\n  E: 1 +* 2\n", "defines 'E'", "column");
    expect_section_error(S_ARGS, "arguments:\n  - i16: m\n", "'arguments'[0]",
                         "unknown kind 'i16'");
    expect_section_error(S_ARGS, "arguments:\n  - buffer: 2x\n", "'arguments'[0]",
                         "'2x' is not a valid name");
    expect_section_error(S_ARGS, "arguments:\n  - blob: tmap\n", "'arguments'[0]",
                         "unknown kind 'blob' (buffer, i32, i64, f32, f64, workspace, tensormap)");
    /* tensor maps: a mapping with every key but `when`, each once, expressions that parse
     * (%s: the keys of a good one) */
    static const struct {
        const char *args, *part1, *part2;
    } tm_bad[] = {
        {"  - tensormap: X\n", "'arguments'[0]", "'tensormap' must be a mapping"},
        {"  - tensormap: {%s}\n", "'arguments'[0]", "tensormap: missing 'buffer'"},
        {"  - i32: m\n  - tensormap: {buffer: X, cols: m}\n", "'arguments'[1]",
         "tensormap: missing 'rows'"},
        {"  - tensormap: {buffer: X, %s, swizle: 1}\n", "'arguments'[0]", "unknown key 'swizle'"},
        {"  - tensormap: {buffer: X, %s, buffer: X}\n", "tensormap 'buffer'", "given twice"},
        {"  - tensormap: {buffer: 2x, %s}\n", "tensormap 'buffer'", "'2x' is not a buffer name"},
        {"  - tensormap: {buffer: X, %s, when: BM >}\n", "'arguments'[0] tensormap 'when'",
         "column"},
        {"  - tensormap: {buffer: X, cols: m, rows: n, ld: m, box: [BM], swizzle: 0}\n",
         "tensormap 'box'", "expected [COLS, ROWS]"},
        {"  - tensormap: {buffer: X, cols: m, rows: nn, ld: m, box: [1, 1], swizzle: 0}\n",
         "tensormap 'rows'", "unknown name 'nn'"},
    };
    for (size_t i = 0; i < sizeof tm_bad / sizeof tm_bad[0]; i++) {
        char args[256], y[512];
        snprintf(args, sizeof args, tm_bad[i].args,
                 "cols: m, rows: n, ld: m, box: [BM, 8], swizzle: 0");
        snprintf(y, sizeof y, "arguments:\n%s", args);
        expect_section_error(S_ARGS, y, tm_bad[i].part1, tm_bad[i].part2);
    }
    expect_section_error(S_ARGS, "arguments: [workspace, workspace]\n", "'arguments'[1]",
                         "a second workspace");
    expect_section_error(S_ARGS, "arguments:\n  - {i32: m, f32: a}\n", "'arguments'[0]",
                         "expected 'workspace' or one 'KIND: NAME'");
    expect_section_error(S_ARGS, "arguments: []\n", "'arguments'", "a list of arguments");
    expect_section_error(S_ARGS, "supersedes: [63b7a31c876b7b7]\n", "'supersedes'",
                         "is not a template hash");
    expect_section_error(S_ARGS, "supersedes: [63B7A31C876B7B70]\n", "'supersedes'",
                         "is not a template hash");
    expect_section_error(S_LAUNCH, "launch:\n  global: [m, n]\n  locl: [1]\n", "'launch'",
                         "unknown key 'locl'");
    expect_section_error(S_LAUNCH, "launch:\n  local: [1]\n", "'launch'", "missing key 'global'");
    expect_section_error(S_LAUNCH, "launch:\n  global: [1, 2, 3, 4]\n", "'launch'", "'global'");
    expect_section_error(S_LAUNCH, "launch:\n  global: []\n", "'launch'", "'global'");
    expect_section_error(S_LAUNCH, "launch:\n  global: [1]\n  local: [1, 1]\n", "'launch'",
                         "'local'");
    expect_section_error(S_LAUNCH, "launch:\n  global: [1, zz]\n", "launch global[1]",
                         "unknown name 'zz'");
    expect_section_error(S_LAUNCH, "launch: [1]\n", "'launch'", NULL);
}

static void test_load_errors_defaults(void **state)
{
    (void)state;
    expect_section_error(S_DEFAULTS, "defaults:\n  - {BM: 32, TM: 2}\n", "'defaults'[0]",
                         "missing parameter 'VW'");
    expect_section_error(S_DEFAULTS, "defaults:\n  - {BM: 32, TM: 2, VW: 1}\n  - {BM: 8, TM: 1}\n",
                         "'defaults'[1]", "missing parameter 'VW'");
    expect_section_error(S_DEFAULTS, "defaults:\n  - {BM: 32, TM: 2, VW: 1, XX: 1}\n",
                         "'defaults'[0]", "unknown parameter 'XX'");
    expect_section_error(S_DEFAULTS, "defaults:\n  - {BM: 32, TM: 2, VW: 1, BM: 8}\n",
                         "'defaults'[0]", "duplicate parameter 'BM'");
    expect_section_error(S_DEFAULTS, "defaults:\n  - {BM: 33, TM: 2, VW: 1}\n", "'defaults'[0]",
                         "'33' is not an allowed value of 'BM'");
    expect_section_error(S_DEFAULTS, "defaults:\n  - {BM: 32, TM: two, VW: 1}\n", "'defaults'[0]",
                         "'two' is not an allowed value of 'TM'");
}

/* ---- totals and speed -------------------------------------------------------------------- */

static void test_total_saturates(void **state)
{
    (void)state;
    /* 32 parameters of 64 values: 2^192 configurations */
    size_t cap = 64 * 1024, n = 0;
    char *y = malloc(cap);
    assert_non_null(y);
    n += (size_t)snprintf(y + n, cap - n, "name: big\nkernel: k\nsource: k.cl\nparameters:\n");
    for (int p = 0; p < AT_MAX_PARAMS; p++) {
        n += (size_t)snprintf(y + n, cap - n, "  P%d: [0", p);
        for (int v = 1; v < AT_MAX_VALUES; v++) n += (size_t)snprintf(y + n, cap - n, ",%d", v);
        n += (size_t)snprintf(y + n, cap - n, "]\n");
    }
    snprintf(y + n, cap - n, "launch: {global: [P0 + 1]}\n");
    at_space *s = load_ok(y);
    free(y);
    assert_int_equal(s->nparams, AT_MAX_PARAMS);
    assert_true(at_space_total(s) == UINT64_MAX);
    int64_t *cfgs = NULL;
    size_t cnt = 1;
    assert_int_equal(at_space_enumerate(s, &cfgs, NULL, &cnt), AT_ERR_TEMPLATE);
    assert_null(cfgs);
    assert_int_equal(cnt, 0);
    at_space_free(s);
}

static bool under_valgrind(void)
{
    const char *p = getenv("LD_PRELOAD");
    return p && strstr(p, "vgpreload");
}

static void test_enumerate_speed(void **state)
{
    (void)state;
    /* 20 * 20 * 20 * 5 * 5 = 200000 raw configurations */
    const char *y = "name: fast\nkernel: k\nsource: k.cl\nproblem: [m]\n"
                    "device: [max_work_group_size]\n"
                    "parameters:\n"
                    "  A: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]\n"
                    "  B: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]\n"
                    "  C: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]\n"
                    "  D: [1, 2, 4, 8, 16]\n"
                    "  E: [0, 1, 2, 3, 4]\n"
                    "derived:\n"
                    "  T: A * B\n"
                    "  U: ceil_div(m, C) + E\n"
                    "constraints:\n"
                    "  - T <= device.max_work_group_size\n"
                    "  - (A + B + C) % D == 0 || E == 0\n"
                    "  - U % 2 == 0 && pow2(D)\n"
                    "launch: {global: [T]}\n";
    at_space *s = load_ok(y);
    at_space_set(s, "m", 1000);
    at_space_set(s, "max_work_group_size", 128);
    assert_int_equal(at_space_total(s), 200000);
    size_t want = 0;
    for (int a = 1; a <= 20; a++)
        for (int b = 1; b <= 20; b++)
            for (int c = 1; c <= 20; c++)
                for (int d = 1; d <= 16; d *= 2)
                    for (int e = 0; e <= 4; e++) {
                        int u = (1000 + c - 1) / c + e;
                        want += a * b <= 128 && ((a + b + c) % d == 0 || e == 0) && u % 2 == 0;
                    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int64_t *cfgs = NULL;
    uint16_t *idx = NULL;
    size_t n = 0;
    assert_int_equal(at_space_enumerate(s, &cfgs, &idx, &n), AT_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    assert_int_equal(n, want);
    assert_true(n > 1000);
    int64_t *cfgs2 = NULL;
    size_t n2 = 0;
    assert_int_equal(at_space_enumerate(s, &cfgs2, NULL, &n2), AT_OK); /* without idx */
    assert_int_equal(n2, n);
    assert_memory_equal(cfgs2, cfgs, n * 5 * sizeof *cfgs);
    free(cfgs2);
    for (size_t i = 0; i < n; i += 997) {
        assert_int_equal(cfgs[i * 5 + 0], s->params[0].values[idx[i * 5 + 0]]);
        assert_int_equal(cfgs[i * 5 + 4], s->params[4].values[idx[i * 5 + 4]]);
        assert_true(at_space_valid(s, &cfgs[i * 5], NULL, 0));
    }
    /* A guard against a pathological (e.g. quadratic) enumerator, not a timing test: it takes
     * ~0.1 s, and a loaded machine under ASan must not fail it. */
    if (!under_valgrind()) {
        if (dt >= 10) print_error("enumerating 200000 configurations took %.3f s\n", dt);
        assert_true(dt < 10);
    }
    free(cfgs);
    free(idx);
    at_space_free(s);
}

/* ---- the real GEMM space, when present ----------------------------------------------------- */

static void test_gemm_yaml(void **state)
{
    (void)state;
    const char *path = getenv("AT_TEST_GEMM_YAML"); /* another file to check this way */
    if (!path || !*path) path = AT_SOURCE_DIR "/templates/gemm/gemm.yaml";
    if (access(path, F_OK) != 0) {
        skip();
        return;
    }
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(at_read_file(path, &text, &len), AT_OK);
    at_space *s = NULL;
    at_status st = at_space_load(text, len, &s);
    free(text);
    if (st != AT_OK) print_error("gemm.yaml: %s\n", at_errmsg());
    assert_int_equal(st, AT_OK);
    static const struct {
        const char *name;
        int64_t value;
    } vars[] = {{"m", 1024},
                {"n", 1024},
                {"k", 1024},
                {"ta", 0},
                {"tb", 0},
                {"device.max_work_group_size", 1024},
                {"device.max_work_item_size0", 1024},
                {"device.max_work_item_size1", 1024},
                {"device.max_work_item_size2", 64},
                {"device.local_mem_bytes", 49152},
                {"device.compute_units", 80},
                {"device.warp_size", 32},
                {"device.is_cpu", 0}};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        at_status r = at_space_set(s, vars[i].name, vars[i].value);
        assert_true(r == AT_OK || r == AT_ERR_INVALID_ARG); /* the space may not use every one */
    }
    int64_t *cfgs = NULL;
    size_t n = 0;
    assert_int_equal(at_space_enumerate(s, &cfgs, NULL, &n), AT_OK);
    assert_true(n > 0);
    assert_true(s->ndefaults > 0);
    /* A space may have defaults for GPUs and others for CPUs (is_cpu): each must be valid on
     * one of them, and each kind of device must have one. */
    bool cpu_var = at_space_set(s, "device.is_cpu", 0) == AT_OK;
    size_t valid_on[2] = {0, 0};
    for (size_t i = 0; i < s->ndefaults; i++) {
        const int64_t *cfg = &s->defaults[i * s->nparams];
        char why[512], name[512];
        at_config_format(s, cfg, name, sizeof name);
        bool ok = false;
        for (int cpu = 0; cpu < (cpu_var ? 2 : 1); cpu++) {
            if (cpu_var) at_space_set(s, "device.is_cpu", cpu);
            bool v = at_space_valid(s, cfg, cpu ? NULL : why, sizeof why);
            valid_on[cpu] += v;
            ok = ok || v;
        }
        if (cpu_var) at_space_set(s, "device.is_cpu", 0);
        if (!ok) print_error("gemm default %zu (%s) is not valid: %s\n", i, name, why);
        assert_true(ok);
        size_t g[3], l[3];
        assert_int_equal(at_space_launch(s, cfg, g, l), AT_OK);
        char defs[2048];
        assert_int_equal(at_config_defines(s, cfg, defs, sizeof defs), AT_OK);
        int64_t back[AT_MAX_PARAMS];
        assert_int_equal(at_config_parse(s, name, back), AT_OK);
        assert_memory_equal(back, cfg, s->nparams * sizeof *cfg);
    }
    assert_true(valid_on[0] > 0);
    if (cpu_var) assert_true(valid_on[1] > 0);
    for (size_t i = 0; i < n; i += 1 + n / 50) {
        size_t g[3], l[3];
        assert_int_equal(at_space_launch(s, &cfgs[i * s->nparams], g, l), AT_OK);
    }
    assert_true(s->nargs > 0);
    free(cfgs);
    at_space_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_structure),
        cmocka_unit_test(test_set),
        cmocka_unit_test(test_enumerate_matches_brute_force),
        cmocka_unit_test(test_valid_why),
        cmocka_unit_test(test_derived_and_values),
        cmocka_unit_test(test_launch_and_arguments),
        cmocka_unit_test(test_shared_and_workspace),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_defines),
        cmocka_unit_test(test_config_roundtrip),
        cmocka_unit_test(test_config_parse_errors),
        cmocka_unit_test(test_load_errors_top_level),
        cmocka_unit_test(test_load_errors_parameters),
        cmocka_unit_test(test_load_errors_expressions),
        cmocka_unit_test(test_load_errors_defaults),
        cmocka_unit_test(test_total_saturates),
        cmocka_unit_test(test_enumerate_speed),
        cmocka_unit_test(test_gemm_yaml),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
