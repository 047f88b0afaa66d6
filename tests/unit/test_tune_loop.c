/* test_tune_loop.c — the tune loop's budget rule, its fastest-few list and its progress hook, on
 * a fake evaluator whose candidates "take" a stated number of seconds (nothing sleeps: the
 * budget's clock is moved by starting it in the past), so the counts are exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tuner/pipeline.h"

#include <math.h>
#include <string.h>

enum { N = 20 };
static uint16_t g_idx[N];
static const size_t g_nvalues[1] = {N};

/* Config c takes times[c] us; measuring any takes `seconds` (0: from a record). */
typedef struct fake_eval {
    at_evaluator ev;
    size_t queue[8], head, count;
    double seconds;
    double times[N];
    int deadline_seen; /* a candidate was offered with a deadline */
} fake_eval;

static int fake_submit(at_evaluator *e, size_t c, at_result_rec *rec)
{
    (void)rec;
    fake_eval *f = (fake_eval *)e;
    f->queue[(f->head + f->count++) % 8] = c;
    return 0;
}

static at_status fake_next(at_evaluator *e, double best_us, size_t *c, at_result_rec *rec)
{
    (void)best_us;
    fake_eval *f = (fake_eval *)e;
    f->deadline_seen |= e->deadline > 0;
    if (e->deadline > 0 && at_now() + e->expect_s > e->deadline) {
        e->not_started = 1;
        return AT_OK;
    }
    *c = f->queue[f->head];
    f->head = (f->head + 1) % 8;
    f->count--;
    rec->status = f->times[*c] > 0 ? AT_RS_OK : AT_RS_WRONG_RESULT;
    rec->median_us = f->times[*c];
    e->measure_s = f->seconds;
    return AT_OK;
}

static void fake_init(fake_eval *f, double seconds)
{
    memset(f, 0, sizeof *f);
    f->ev = (at_evaluator){.submit = fake_submit, .next = fake_next, .lookahead = 2};
    f->seconds = seconds;
    for (size_t i = 0; i < N; i++) f->times[i] = 100.0 + (double)((i * 7) % N);
}

static at_search *exhaustive(void)
{
    for (size_t i = 0; i < N; i++) g_idx[i] = (uint16_t)i;
    at_search_space sp = {N, 1, g_idx, g_nvalues, NULL};
    at_search_options so = {.strategy = "exhaustive", .seed = 1};
    at_search *s = NULL;
    assert_int_equal(at_search_create(&sp, &so, &s), AT_OK);
    return s;
}

static int g_calls;
static void count_calls(void *user, const at_tune_progress *p)
{
    (void)user;
    assert_true(p->done == ++g_calls);
    assert_non_null(p->config);
    assert_string_equal(p->problem, "fake/1");
    assert_string_equal(p->proxy, "");
}

/* 9.5 s of a 10 s budget spent before the loop; a candidate takes 1 s: the first is measured
 * (a run ends with a best), the second would end past the budget and is not started. */
static void test_budget_stops_before_a_candidate_that_cannot_fit(void **state)
{
    (void)state;
    fake_eval f;
    fake_init(&f, 1.0);
    at_search *s = exhaustive();
    at_tune_options o = {.max_seconds = 10, .on_candidate = count_calls};
    at_loop_env env = {.t0 = at_now() - 9.5, .budget_s = 10, .estimate_s = 1, .problem = "fake/1"};
    at_loop l;
    g_calls = 0;
    assert_int_equal(at_tune_loop(s, &f.ev, &o, &env, &l), AT_OK);
    assert_int_equal(l.evaluated, 1);
    assert_true(l.have_best);
    assert_true(l.budget_stopped);
    assert_int_equal(g_calls, 1);
    at_loop_clear(&l);
    at_search_free(s);
}

/* The same with nothing spent: all 20 fit in 10 s at 1 ms each; the fastest three are kept in
 * order; the evaluator was told the deadline once there was a best. */
static void test_budget_that_covers_all_and_the_fastest_few(void **state)
{
    (void)state;
    fake_eval f;
    fake_init(&f, 1e-3);
    f.times[5] = 0; /* a failure, never among the fastest */
    at_search *s = exhaustive();
    at_tune_options o = {.max_seconds = 10};
    at_loop_env env = {.t0 = at_now(), .budget_s = 10, .estimate_s = 30};
    at_loop l;
    assert_int_equal(at_tune_loop(s, &f.ev, &o, &env, &l), AT_OK);
    assert_int_equal(l.evaluated, N);
    assert_int_equal(l.failed, 1);
    assert_false(l.budget_stopped);
    assert_true(f.deadline_seen);
    assert_int_equal(l.ntop, AT_LOOP_TOP);
    /* times are 100 + (7i mod 20): 100 at i=0, 101 at i=3, 102 at i=6 */
    assert_int_equal(l.top[0], 0);
    assert_int_equal(l.top[1], 3);
    assert_int_equal(l.top[2], 6);
    assert_true(l.top_us[0] < l.top_us[1] && l.top_us[1] < l.top_us[2]);
    /* the expectation is the median of what was measured, no longer the estimate */
    assert_true(fabs(at_loop_expect(&l, &env) - 1e-3) < 1e-9);
    at_loop_clear(&l);
    at_search_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget_stops_before_a_candidate_that_cannot_fit),
        cmocka_unit_test(test_budget_that_covers_all_and_the_fastest_few)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
