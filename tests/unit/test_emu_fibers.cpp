/* test_emu_fibers.cpp — the emulators' threads (emu_fibers.h): the round-robin order each way,
 * a barrier that lets its threads on together, a deadlock reported and not waited for, and a
 * launch after an abandoned one. */
#include "emu_fibers.h"

#include <vector>

#include <setjmp.h> /* cmocka last: its fail() macro clashes with the C++ library */
#include <stdarg.h>
#include <stddef.h>
extern "C" {
#include <cmocka.h>
}

static const auto no_state = [](int, bool) {};

/* Each thread runs until it waits: from the last thread when reversed, the last to arrive at
 * the barrier goes on at once, the others on the next round. */
static void test_order_and_barrier(void **state)
{
    (void)state;
    for (int reverse = 0; reverse < 2; reverse++) {
        at_emu::barrier bar(3);
        std::vector<int> order;
        const bool ok = at_emu::run_fibers(
            3,
            [&](int t) {
                order.push_back(t);
                bar.arrive_and_wait();
                order.push_back(10 + t);
            },
            reverse, no_state);
        assert_true(ok);
        const std::vector<int> want =
            reverse ? std::vector<int>{2, 1, 0, 10, 12, 11} : std::vector<int>{0, 1, 2, 12, 10, 11};
        assert_true(order == want);
    }
}

/* Two threads at a barrier of three: a deadlock, reported after one round without progress;
 * the next launch reuses the abandoned fibers' stacks. */
static void test_deadlock_reported(void **state)
{
    (void)state;
    at_emu::barrier bar(3);
    int arrived = 0, switches = 0;
    const bool ok = at_emu::run_fibers(
        2,
        [&](int) {
            arrived++;
            bar.arrive_and_wait();
        },
        false, [&](int, bool in) { switches += in; });
    assert_false(ok);
    assert_int_equal(arrived, 2);
    assert_true(switches <= 6); /* a round to arrive, one with progress, one without */
    int ran = 0;
    assert_true(at_emu::run_fibers(
        4, [&](int) { ran++; }, false, no_state));
    assert_int_equal(ran, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_barrier),
        cmocka_unit_test(test_deadlock_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
