/* test_shapes.c — shape lists (tuner/shapes.c): expansion in the order written, de-duplication,
 * both spellings of a field, the shipped LLM lists, and every kind of bad list with the line and
 * column its message names. No device needed. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tmpdir.h"
#include "tuner/shapes.h"

#include "base/util.h"

/* Writes text to DIR/list.yaml and loads it. */
static at_status load(void **state, const char *text, at_shapes *out)
{
    char path[512];
    snprintf(path, sizeof path, "%s/list.yaml", (const char *)*state);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return at_shapes_load(path, out);
}

/* The list text loads (else the test fails with the message). */
static at_shapes loaded(void **state, const char *text)
{
    at_shapes s;
    if (load(state, text, &s) != AT_OK) fail_msg("'%s': %s", text, at_errmsg());
    return s;
}

/* The list's keys are want (NULL-terminated), in order. */
static void keys_are(const at_shapes *s, const char *const *want)
{
    size_t n = 0;
    for (; want[n]; n++)
        if (n >= s->n || strcmp(s->keys[n], want[n]) != 0)
            fail_msg("key %zu: got '%s', want '%s'", n, n < s->n ? s->keys[n] : "(none)", want[n]);
    assert_int_equal(s->n, n);
}

static void test_expand(void **state)
{
    at_shapes s = loaded(state, "# projections\n"
                                "- gemm: {m: [16, 128], n: [4096, 1024], k: 4096, layout: nt}\n"
                                "- attention: {heads: 32, kv_heads: 8, seq: 2048, head-dim: 128,\n"
                                "              causal: true}\n");
    /* The last list varies fastest. */
    keys_are(&s, (const char *[]){"gemm/f32/nt/16x4096x4096", "gemm/f32/nt/16x1024x4096",
                                  "gemm/f32/nt/128x4096x4096", "gemm/f32/nt/128x1024x4096",
                                  "attention/f32/bshd/d128/causal/1x32x8/2048x2048", NULL});
    char buf[64];
    assert_int_equal(at_problem_get(s.problems[4], "kv-heads", buf, sizeof buf), AT_OK);
    assert_string_equal(buf, "8");
    assert_int_equal(at_problem_get(s.problems[4], "causal", buf, sizeof buf), AT_OK);
    assert_string_equal(buf, "1");
    assert_int_equal(at_problem_get(s.problems[4], "seq-kv", buf, sizeof buf), AT_OK);
    assert_string_equal(buf, "2048");
    char key[256];
    for (size_t i = 0; i < s.n; i++) {
        assert_int_equal(at_problem_key(s.problems[i], key, sizeof key), AT_OK);
        assert_string_equal(key, s.keys[i]);
    }
    at_shapes_free(&s);
    assert_int_equal(s.n, 0);
    at_shapes_free(&s); /* twice: nothing left */
}

static void test_duplicates(void **state)
{
    /* kv-heads defaults to heads: the second item names the first problem again. */
    at_shapes s = loaded(state, "- gemm: {m: [16, 32, 16], n: 8, k: 8}\n"
                                "- attention: {heads: 4, seq: 64, head-dim: 64}\n"
                                "- attention: {heads: 4, kv-heads: [4, 2], seq: 64, head-dim: 64}\n"
                                "- gemm: {m: 32, n: 8, k: 8, dtype: f32, layout: nn}\n");
    keys_are(&s, (const char *[]){"gemm/f32/nn/16x8x8", "gemm/f32/nn/32x8x8",
                                  "attention/f32/bshd/d64/full/1x4x4/64x64",
                                  "attention/f32/bshd/d64/full/1x4x2/64x64", NULL});
    at_shapes_free(&s);

    /* Many problems: the de-duplicating table grows. */
    s = loaded(state, "- gemm: {m: [1,2,3,4,5,6,7,8,9,10], n: [1,2,3,4,5,6,7,8,9,10],\n"
                      "         k: [1,2,3,4,5,6,7,8,9,10]}\n"
                      "- gemm: {m: [1,2,3,4,5,6,7,8,9,10], n: [1,2,3,4,5,6,7,8,9,10],\n"
                      "         k: [1,2,3,4,5,6,7,8,9,10]}\n");
    assert_int_equal(s.n, 1000);
    assert_string_equal(s.keys[999], "gemm/f32/nn/10x10x10");
    at_shapes_free(&s);
}

/* The list fails to load and the message holds want (a "line:column: why" part). */
static void bad(void **state, const char *text, const char *want)
{
    at_shapes s;
    at_status st = load(state, text, &s);
    if (st != AT_ERR_INVALID_ARG || !strstr(at_errmsg(), want))
        fail_msg("'%s': got %d '%s', want '%s'", text, st, at_errmsg(), want);
    assert_int_equal(s.n, 0);
    assert_null(s.problems);
    assert_non_null(strstr(at_errmsg(), "/list.yaml:"));
}

static void test_bad_lists(void **state)
{
    bad(state, "", "list.yaml:1:1: an empty list");
    bad(state, "# nothing\n", "list.yaml:1:1: an empty list");
    bad(state, "[]\n", "list.yaml:1:1: an empty list");
    bad(state, "gemm: {m: 1}\n", "list.yaml:1:1: not a list");
    bad(state, "- gemm: {m: [1, 2}\n", "list.yaml:1:18: not valid YAML");
    bad(state, "- gemm: {m: 16, n: 16, k: 16}\n- conv: {m: 1}\n",
        "list.yaml:2:3: unknown operation 'conv' (one of: gemm, attention)");
    bad(state, "- gemm: {m: 16, n: 16, k: 16}\n- - gemm\n", "list.yaml:2:3: an item is a one-key");
    bad(state, "- {gemm: {m: 1}, attention: {heads: 1}}\n", "list.yaml:1:3: an item is a one-key");
    bad(state, "- gemm:\n", "list.yaml:1:8: gemm needs a map of its fields");
    bad(state, "- gemm: {m: 16, n: 16, kk: 16}\n",
        "list.yaml:1:24: unknown field 'kk' of gemm (one of: m, n, k, dtype, layout)");
    bad(state, "- gemm: {m: 16, n: 16, k: 16, alpha: 2}\n", "1:31: unknown field 'alpha'");
    bad(state, "- attention: {heads: 8, kv-heads: 2, kv_heads: 2, seq: 4, head-dim: 64}\n",
        "1:38: field 'kv-heads' of attention is given twice");
    bad(state, "- gemm: {m: 16, n: [16, 0], k: 16}\n",
        "list.yaml:1:25: n '0' is not an integer from 1 to");
    bad(state, "- gemm: {m: 16, n: 16, k: 16, dtype: f64}\n", "1:38: unknown dtype 'f64'");
    bad(state, "- gemm: {m: 16, n: [], k: 16}\n", "1:20: n: an empty list of values");
    bad(state, "- gemm: {m: 16, n: {a: 1}, k: 16}\n", "1:20: n: a value is a number or a name");
    bad(state, "- gemm: {m: 16, n: [[1]], k: 16}\n", "1:21: n: a value is a number or a name");
    bad(state, "- gemm: {m: 16, k: 16}\n", "list.yaml:1:9: gemm needs n");
    bad(state, "- attention: {heads: 6, kv-heads: 4, seq: 4, head-dim: 64}\n", "list.yaml:1:14: ");
    bad(state,
        "- gemm: {m: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,"
        "29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47], n: [1,2,3,4,5,6,7,8,9,10,11,"
        "12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,"
        "41,42,43,44,45,46,47], k: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,"
        "24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50]}\n",
        "list.yaml:1:3: the list expands to more than 100000 problems");

    at_shapes s;
    assert_int_equal(at_shapes_load("/nonexistent/list.yaml", &s), AT_ERR_IO);
    assert_non_null(strstr(at_errmsg(), "/nonexistent/list.yaml"));
    assert_int_equal(s.n, 0);
}

/* The shipped lists load, expand to their documented counts, and hold the models' shapes. */
static void test_shipped_lists(void **state)
{
    (void)state;
    static const struct {
        const char *file, *first, *attention;
        size_t n;
    } lists[] = {
        {"llama-3.1-8b.yaml", "gemm/f32/nt/16x4096x4096",
         "attention/f32/bshd/d128/causal/1x32x8/2048x2048", 9},
        {"qwen2.5-7b.yaml", "gemm/f32/nt/16x3584x3584",
         "attention/f32/bshd/d128/causal/1x28x4/2048x2048", 9},
    };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/benchmarks/shapes/%s", AT_SOURCE_DIR, lists[i].file);
        at_shapes s;
        if (at_shapes_load(path, &s) != AT_OK) fail_msg("%s: %s", path, at_errmsg());
        assert_int_equal(s.n, lists[i].n);
        assert_string_equal(s.keys[0], lists[i].first);
        int found = 0;
        for (size_t j = 0; j < s.n; j++)
            found |= strncmp(s.keys[j], lists[i].attention, strlen(lists[i].attention)) == 0;
        if (!found) fail_msg("%s: no %s", path, lists[i].attention);
        at_shapes_free(&s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_expand, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_duplicates, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_bad_lists, make_tmp, remove_tmp),
        cmocka_unit_test(test_shipped_lists),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
