/* test_search.c — search strategies: coverage, no repeats, budgets, seeding, degenerate spaces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "search/search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint16_t g_idx[1000];
static const size_t g_nvalues[1] = {1000};

static at_search_space space_of(size_t n)
{
    for (size_t i = 0; i < n; i++) g_idx[i] = (uint16_t)i;
    at_search_space s = {n, 1, g_idx, g_nvalues, NULL};
    return s;
}

/* Runs a search to the end, reporting time = f(config); returns the proposal order. */
static size_t run(at_search *s, size_t *order, size_t max, double (*f)(size_t))
{
    size_t n = 0, got, buf[7];
    while ((got = at_search_propose(s, 7, buf)) > 0) {
        for (size_t i = 0; i < got; i++) {
            assert_true(n < max);
            order[n++] = buf[i];
            at_search_report(s, buf[i], f(buf[i]));
        }
    }
    return n;
}

static double time_linear(size_t c) { return 1000.0 - (double)c; }
static double time_failed(size_t c)
{
    (void)c;
    return INFINITY;
}
static double time_flat(size_t c)
{
    (void)c;
    return 5.0;
}

static void test_every_strategy_covers_space_once(void **state)
{
    (void)state;
    at_search_space sp = space_of(300);
    for (const char *const *name = at_search_strategies(); *name; name++) {
        at_search_options o = {.strategy = *name, .seed = 42};
        at_search *s = NULL;
        assert_int_equal(at_search_create(&sp, &o, &s), AT_OK);
        size_t order[300];
        size_t n = run(s, order, 300, time_linear);
        assert_int_equal(n, 300);
        unsigned char seen[300] = {0};
        for (size_t i = 0; i < n; i++) {
            assert_true(order[i] < 300);
            assert_false(seen[order[i]]);
            seen[order[i]] = 1;
        }
        size_t best;
        double t;
        assert_true(at_search_best(s, &best, &t));
        assert_int_equal(best, 299);
        assert_int_equal(at_search_evaluated(s), 300);
        at_search_free(s);
    }
}

static void test_exhaustive_is_in_order(void **state)
{
    (void)state;
    at_search_space sp = space_of(50);
    at_search_options o = {.strategy = "exhaustive"};
    at_search *s = NULL;
    assert_int_equal(at_search_create(&sp, &o, &s), AT_OK);
    size_t order[50];
    assert_int_equal(run(s, order, 50, time_linear), 50);
    for (size_t i = 0; i < 50; i++) assert_int_equal(order[i], i);
    at_search_free(s);
}

static void test_random_is_deterministic_per_seed(void **state)
{
    (void)state;
    at_search_space sp = space_of(500);
    size_t a[500], b[500], c[500];
    for (int round = 0; round < 3; round++) {
        at_search_options o = {.strategy = "random", .seed = round == 2 ? 8 : 7};
        at_search *s = NULL;
        assert_int_equal(at_search_create(&sp, &o, &s), AT_OK);
        run(s, round == 0 ? a : round == 1 ? b : c, 500, time_linear);
        at_search_free(s);
    }
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
    /* Not the identity order. */
    size_t same = 0;
    for (size_t i = 0; i < 500; i++) same += a[i] == i;
    assert_true(same < 50);
}

static void test_first_configs_come_first(void **state)
{
    (void)state;
    at_search_space sp = space_of(100);
    size_t first[3] = {77, 3, 50};
    at_search_options o = {.strategy = "random", .seed = 1, .first = first, .nfirst = 3};
    at_search *s = NULL;
    assert_int_equal(at_search_create(&sp, &o, &s), AT_OK);
    size_t order[100];
    assert_int_equal(run(s, order, 100, time_linear), 100);
    assert_int_equal(order[0], 77);
    assert_int_equal(order[1], 3);
    assert_int_equal(order[2], 50);
    at_search_free(s);
}

static void test_eval_budget(void **state)
{
    (void)state;
    at_search_space sp = space_of(1000);
    for (const char *const *name = at_search_strategies(); *name; name++) {
        at_search_options o = {.strategy = *name, .seed = 3, .max_evals = 25};
        at_search *s = NULL;
        assert_int_equal(at_search_create(&sp, &o, &s), AT_OK);
        size_t order[1000];
        /* Proposals in batches of 7 must not overshoot the budget. */
        assert_int_equal(run(s, order, 1000, time_linear), 25);
        at_search_free(s);
    }
}

static void test_seconds_budget(void **state)
{
    (void)state;
    at_search_space sp = space_of(1000);
    at_search_options o = {.strategy = "random", .seed = 3, .max_seconds = 0.05};
    at_search *s = NULL;
    assert_int_equal(at_search_create(&sp, &o, &s), AT_OK);
    size_t c, n = 0;
    double t0 = at_now();
    while (at_search_propose(s, 1, &c) == 1) {
        n++;
        while (at_now() - t0 < 0.01 * (double)n) {
        }
        at_search_report(s, c, 1.0);
    }
    assert_true(n >= 4 && n <= 7);
    at_search_free(s);
}

static void test_no_improvement_budget(void **state)
{
    (void)state;
    at_search_space sp = space_of(1000);
    at_search_options o = {.strategy = "exhaustive", .no_improve = 10};
    at_search *s = NULL;
    assert_int_equal(at_search_create(&sp, &o, &s), AT_OK);
    size_t order[1000];
    /* The first is the best; ten more without improvement end the search. */
    assert_int_equal(run(s, order, 1000, time_flat), 11);
    at_search_free(s);
}

static void test_degenerate_spaces(void **state)
{
    (void)state;
    for (const char *const *name = at_search_strategies(); *name; name++) {
        at_search_space one = space_of(1);
        at_search_options o = {.strategy = *name};
        at_search *s = NULL;
        size_t order[10];
        assert_int_equal(at_search_create(&one, &o, &s), AT_OK);
        assert_int_equal(run(s, order, 10, time_linear), 1);
        at_search_free(s);

        at_search_space all_fail = space_of(20);
        assert_int_equal(at_search_create(&all_fail, &o, &s), AT_OK);
        size_t order20[20];
        assert_int_equal(run(s, order20, 20, time_failed), 20);
        assert_false(at_search_best(s, NULL, NULL));
        at_search_free(s);

        at_search_space empty = space_of(0);
        assert_int_equal(at_search_create(&empty, &o, &s), AT_OK);
        assert_int_equal(run(s, order, 10, time_linear), 0);
        at_search_free(s);
    }
}

static void test_unknown_strategy(void **state)
{
    (void)state;
    at_search_space sp = space_of(10);
    at_search_options o = {.strategy = "annealing-ish"};
    at_search *s = NULL;
    assert_int_equal(at_search_create(&sp, &o, &s), AT_ERR_INVALID_ARG);
    assert_null(s);
    assert_non_null(strstr(at_errmsg(), "annealing-ish"));
    assert_non_null(strstr(at_errmsg(), "exhaustive"));
}

static void test_reports_out_of_order_and_repeated(void **state)
{
    (void)state;
    at_search_space sp = space_of(10);
    at_search_options o = {.strategy = "random", .seed = 9};
    at_search *s = NULL;
    assert_int_equal(at_search_create(&sp, &o, &s), AT_OK);
    size_t c[10];
    assert_int_equal(at_search_propose(s, 10, c), 10);
    for (int i = 9; i >= 0; i--) at_search_report(s, c[i], (double)c[i]);
    at_search_report(s, c[0], -1.0); /* a second report of one config is ignored */
    at_search_report(s, 12345, 0.0); /* as is an unknown config */
    assert_int_equal(at_search_evaluated(s), 10);
    size_t best;
    assert_true(at_search_best(s, &best, NULL));
    assert_int_equal(best, 0);
    assert_int_equal(at_search_propose(s, 1, c), 0);
    at_search_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_strategy_covers_space_once),
        cmocka_unit_test(test_exhaustive_is_in_order),
        cmocka_unit_test(test_random_is_deterministic_per_seed),
        cmocka_unit_test(test_first_configs_come_first),
        cmocka_unit_test(test_eval_budget),
        cmocka_unit_test(test_seconds_budget),
        cmocka_unit_test(test_no_improvement_budget),
        cmocka_unit_test(test_degenerate_spaces),
        cmocka_unit_test(test_unknown_strategy),
        cmocka_unit_test(test_reports_out_of_order_and_repeated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
