/* test_expr.c — the integer expression parser and evaluator (tuner/space/expr.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tuner/space/space.h"

#include <stdlib.h>
#include <string.h>

/* Slots: a=0 b=1 c=2 BM=3 device.max_work_group_size=4 zero=5 neg=6 big=7 */
static const char *const names[] = {"a",    "b",   "c",  "BM", "device.max_work_group_size",
                                    "zero", "neg", "big"};
static int64_t slots[] = {7, 3, -2, 64, 256, 0, -7, INT64_MAX};

static int resolve(void *user, const char *name)
{
    int *calls = user;
    if (calls) (*calls)++;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(names[i], name) == 0) return (int)i;
    return -1;
}

/* Parses and evaluates; fails the test if parsing fails. */
static int64_t eval_ok(const char *text, bool *ok)
{
    at_expr *e = NULL;
    at_status st = at_expr_parse(text, resolve, NULL, &e);
    if (st != AT_OK) print_error("parse of \"%s\" failed: %s\n", text, at_errmsg());
    assert_int_equal(st, AT_OK);
    assert_non_null(e);
    assert_string_equal(at_expr_text(e), text);
    *ok = false;
    int64_t v = at_expr_eval(e, slots, ok);
    at_expr_free(e);
    return v;
}

#define EXPECT(text, want)                                                                         \
    do {                                                                                           \
        bool ok_;                                                                                  \
        int64_t v_ = eval_ok(text, &ok_);                                                          \
        if (!ok_) print_error("\"%s\" not ok\n", text);                                            \
        assert_true(ok_);                                                                          \
        if (v_ != (int64_t)(want))                                                                 \
            print_error("\"%s\" = %lld, want %lld\n", text, (long long)v_, (long long)(want));     \
        assert_true(v_ == (int64_t)(want));                                                        \
    } while (0)

#define EXPECT_FAIL(text)                                                                          \
    do {                                                                                           \
        bool ok_ = true;                                                                           \
        int64_t v_ = eval_ok(text, &ok_);                                                          \
        if (ok_) print_error("\"%s\" should not evaluate\n", text);                                \
        assert_false(ok_);                                                                         \
        assert_true(v_ == 0);                                                                      \
    } while (0)

/* Parse must fail with AT_ERR_TEMPLATE and a message containing each of the given parts. */
static void expect_syntax(const char *text, const char *part1, const char *part2)
{
    at_expr *e = (at_expr *)&e; /* must be reset to NULL */
    at_status st = at_expr_parse(text, resolve, NULL, &e);
    if (st == AT_OK) print_error("\"%s\" parsed\n", text);
    assert_int_equal(st, AT_ERR_TEMPLATE);
    assert_null(e);
    const char *msg = at_errmsg();
    if ((part1 && !strstr(msg, part1)) || (part2 && !strstr(msg, part2)))
        print_error("\"%s\": message \"%s\" lacks \"%s\" / \"%s\"\n", text, msg, part1,
                    part2 ? part2 : "");
    if (part1) assert_non_null(strstr(msg, part1));
    if (part2) assert_non_null(strstr(msg, part2));
}

static void test_literals(void **state)
{
    (void)state;
    EXPECT("0", 0);
    EXPECT("42", 42);
    EXPECT("  42  ", 42);
    EXPECT("0x10", 16);
    EXPECT("0XfF", 255);
    EXPECT("9223372036854775807", INT64_MAX);
    EXPECT("-9223372036854775807 - 1", INT64_MIN);
    EXPECT("a", 7);
    EXPECT("BM", 64);
    EXPECT("device.max_work_group_size", 256);
    EXPECT("(((a)))", 7);
}

static void test_precedence(void **state)
{
    (void)state;
    EXPECT("1 + 2 * 3", 7);
    EXPECT("(1 + 2) * 3", 9);
    EXPECT("10 - 4 - 3", 3);   /* left associative */
    EXPECT("100 / 10 / 5", 2); /* left associative */
    EXPECT("2 * 3 % 4", 2);    /* (2*3)%4 */
    EXPECT("1 << 2 + 1", 8);   /* + binds tighter than << */
    EXPECT("1 < 2 == 1", 1);   /* < binds tighter than == */
    EXPECT("3 == 3 & 2", 0);   /* == binds tighter than & */
    EXPECT("6 & 3 ^ 1", 3);    /* (6&3)^1 */
    EXPECT("4 ^ 1 | 2", 7);
    EXPECT("1 | 0 && 0", 0);
    EXPECT("1 || 0 && 0", 1); /* && binds tighter than || */
    EXPECT("0 ? 1 : 0 ? 2 : 3", 3);
    EXPECT("1 ? 2 : 3 + 10", 2);
    EXPECT("1 + 1 ? 5 : 6", 5);
    EXPECT("-a * 2", -14);
    EXPECT("- -a", 7);
    EXPECT("!0 + 1", 2);
    EXPECT("~0 & 0xff", 255);
    EXPECT("-2 * -3", 6);
    EXPECT("+a", 7);
    EXPECT("BM % 16 == 0 && BM / 16 <= device.max_work_group_size", 1);
}

static void test_operators(void **state)
{
    (void)state;
    EXPECT("a * b", 21);
    EXPECT("a / b", 2);
    EXPECT("neg / b", -2); /* truncation toward zero, as C */
    EXPECT("a % b", 1);
    EXPECT("neg % b", -1);
    EXPECT("a + c", 5);
    EXPECT("a - b", 4);
    EXPECT("a << b", 56);
    EXPECT("a >> 1", 3);
    EXPECT("neg >> 1", -4);
    EXPECT("a < b", 0);
    EXPECT("a <= 7", 1);
    EXPECT("a > b", 1);
    EXPECT("a >= 8", 0);
    EXPECT("a == 7", 1);
    EXPECT("a != 7", 0);
    EXPECT("a & b", 3);
    EXPECT("a ^ b", 4);
    EXPECT("a | 8", 15);
    EXPECT("a && b", 1);
    EXPECT("a && zero", 0);
    EXPECT("zero || b", 1);
    EXPECT("zero || zero", 0);
    EXPECT("-a", -7);
    EXPECT("!a", 0);
    EXPECT("!zero", 1);
    EXPECT("~a", -8);
    EXPECT("a ? b : c", 3);
    EXPECT("zero ? b : c", -2);
    EXPECT("big - 1", INT64_MAX - 1);
}

static void test_functions(void **state)
{
    (void)state;
    EXPECT("min(a, b)", 3);
    EXPECT("max(a, b)", 7);
    EXPECT("min(neg, c)", -7);
    EXPECT("max(min(1,2), min(3,4))", 3);
    EXPECT("ceil_div(a, b)", 3);
    EXPECT("ceil_div(6, 3)", 2);
    EXPECT("ceil_div(0, 3)", 0);
    EXPECT("ceil_div(neg, b)", -2); /* ceil(-7/3) = -2 */
    EXPECT("ceil_div(7, -2)", -3);  /* ceil(-3.5) = -3 */
    EXPECT("ceil_div(-7, -2)", 4);  /* ceil(3.5) = 4 */
    EXPECT("pow2(64)", 1);
    EXPECT("pow2(1)", 1);
    EXPECT("pow2(48)", 0);
    EXPECT("pow2(0)", 0);
    EXPECT("pow2(neg)", 0);
    EXPECT("log2(1)", 0);
    EXPECT("log2(64)", 6);
    EXPECT("log2(65)", 6);
    EXPECT("log2(big)", 62);
    EXPECT("min (a , b) + 1", 4);
    EXPECT("ceil_div(BM * 2, 3) * 3", 129);
}

static void test_errors_at_eval(void **state)
{
    (void)state;
    EXPECT_FAIL("a / zero");
    EXPECT_FAIL("a % zero");
    EXPECT_FAIL("1 / 0");
    EXPECT_FAIL("1 % 0");
    EXPECT_FAIL("ceil_div(a, zero)");
    EXPECT_FAIL("(-big - 1) / -1");
    EXPECT_FAIL("ceil_div(-big - 1, -1)");
    EXPECT("(-big - 1) % -1", 0);
    EXPECT_FAIL("a << 64");
    EXPECT_FAIL("a << -1");
    EXPECT_FAIL("a >> 64");
    EXPECT_FAIL("a >> neg");
    EXPECT_FAIL("1 << 63");  /* overflows into the sign */
    EXPECT_FAIL("big << 1"); /* bits shifted out */
    EXPECT("1 << 62", (int64_t)1 << 62);
    EXPECT("neg << 2", -28);
    EXPECT_FAIL("big + 1");
    EXPECT_FAIL("-big - 2");
    EXPECT_FAIL("big * 2");
    EXPECT_FAIL("-(-big - 1)");
    EXPECT_FAIL("log2(0)");
    EXPECT_FAIL("log2(neg)");
    EXPECT_FAIL("1 + 1 / zero * 2"); /* a failure propagates */
    EXPECT_FAIL("zero ? 1 : 1 / zero");
    EXPECT_FAIL("min(1, 1 / 0)");
    EXPECT_FAIL("pow2(1 / 0)");
}

static void test_short_circuit(void **state)
{
    (void)state;
    EXPECT("0 && 1/0", 0);
    EXPECT("zero && a / zero", 0);
    EXPECT("1 || 1/0", 1);
    EXPECT("a || a % zero", 1);
    EXPECT("1 ? 5 : 1/0", 5);
    EXPECT("zero ? 1/zero : 9", 9);
    EXPECT("zero != 0 && a / zero > 1", 0);
    EXPECT_FAIL("1 && 1/0");
    EXPECT_FAIL("0 || 1/0");
    EXPECT("5 && 7", 1); /* logical operators give 0 or 1 */
    EXPECT("0 || -3", 1);
}

static void test_unknown_identifier(void **state)
{
    (void)state;
    at_expr *e = NULL;
    assert_int_equal(at_expr_parse("BM % foo == 0", resolve, NULL, &e), AT_ERR_TEMPLATE);
    assert_null(e);
    assert_non_null(strstr(at_errmsg(), "unknown name 'foo' in \"BM % foo == 0\""));
    assert_non_null(strstr(at_errmsg(), "column 6"));
    /* device variables need their prefix; a prefix alone is not a name */
    expect_syntax("max_work_group_size > 0", "unknown name 'max_work_group_size'", NULL);
    expect_syntax("device.foo", "unknown name 'device.foo'", NULL);
    expect_syntax("a + device.", "unknown name 'device.'", NULL);
    /* no resolver: every identifier is unknown */
    assert_int_equal(at_expr_parse("a", NULL, NULL, &e), AT_ERR_TEMPLATE);
    assert_non_null(strstr(at_errmsg(), "unknown name 'a'"));
}

static void test_resolve_at_parse_time(void **state)
{
    (void)state;
    int calls = 0;
    at_expr *e = NULL;
    assert_int_equal(at_expr_parse("a + b * a", resolve, &calls, &e), AT_OK);
    assert_int_equal(calls, 3);
    bool ok = false;
    for (int i = 0; i < 10; i++) assert_int_equal(at_expr_eval(e, slots, &ok), 28);
    assert_true(ok);
    assert_int_equal(calls, 3); /* evaluation does not resolve again */
    int64_t other[8] = {1, 2};
    assert_int_equal(at_expr_eval(e, other, &ok), 3);
    at_expr_free(e);
    at_expr_free(NULL);
}

static void test_syntax_errors(void **state)
{
    (void)state;
    expect_syntax("", "column 1", "end of expression");
    expect_syntax("   ", "column 4", "end of expression");
    expect_syntax("1 +", "column 4", "end of expression");
    expect_syntax("1 + * 2", "column 5", "'*'");
    expect_syntax("(1 + 2", "column 7", "')'");
    expect_syntax("1 + 2)", "column 6", "')'");
    expect_syntax("a b", "column 3", "'b'");
    expect_syntax("1 ? 2", "column 6", "':'");
    expect_syntax("1 $ 2", "column 3", "'$'");
    expect_syntax("12abc", "column 1", "malformed number");
    expect_syntax("0x", "column 1", "hexadecimal");
    expect_syntax("99999999999999999999", "column 1", "out of range");
    expect_syntax("min(1)", "column 6", "min() takes 2 arguments");
    expect_syntax("min(1, 2, 3)", "column 9", "min() takes 2 arguments");
    expect_syntax("log2()", "column 6", "')'");
    expect_syntax("pow2(1, 2)", "column 7", "pow2() takes 1 argument");
    expect_syntax("sqrt(4)", "column 1", "unknown function 'sqrt'");
    expect_syntax("min(1, 2", "column 9", "expected ')' before the end");
    expect_syntax("max(1 2)", "column 7", "expected ')', found '2'");
    expect_syntax("a = 1", "column 3", "'='");
    expect_syntax("BM %% 2", "column 5", "'%'");
    expect_syntax("1 + 2 * (3", "in \"1 + 2 * (3\"", "')'");

    char deep[1200];
    memset(deep, '(', 600);
    strcpy(deep + 600, "1");
    memset(deep + 601, ')', 598);
    deep[1199] = '\0';
    expect_syntax(deep, "too deep", NULL);

    at_expr *e = NULL;
    assert_int_equal(at_expr_parse(NULL, resolve, NULL, &e), AT_ERR_INVALID_ARG);
    assert_int_equal(at_expr_parse("1", resolve, NULL, NULL), AT_ERR_INVALID_ARG);
}

static void test_dotted_identifiers(void **state)
{
    (void)state;
    EXPECT("device.max_work_group_size / BM", 4);
    EXPECT("min(device.max_work_group_size,1000)", 256);
    EXPECT("device.max_work_group_size>=BM*4", 1);
    int64_t v;
    bool ok;
    at_expr *e = NULL;
    assert_int_equal(at_expr_parse("device.max_work_group_size", resolve, NULL, &e), AT_OK);
    v = at_expr_eval(e, slots, &ok);
    assert_true(ok);
    assert_int_equal(v, 256);
    at_expr_free(e);
}

static void test_nested_parens_ok(void **state)
{
    (void)state;
    char deep[210];
    memset(deep, '(', 50);
    strcpy(deep + 50, "a");
    memset(deep + 51, ')', 50);
    deep[101] = '\0';
    EXPECT(deep, 7);
}

/* text made of n copies of unit (with first in front of them), malloc'd. */
static char *repeat(const char *first, const char *unit, size_t n)
{
    size_t lf = strlen(first), lu = strlen(unit);
    char *t = malloc(lf + lu * n + 1);
    assert_non_null(t);
    memcpy(t, first, lf);
    for (size_t i = 0; i < n; i++) memcpy(t + lf + i * lu, unit, lu);
    t[lf + lu * n] = '\0';
    return t;
}

/* A flat chain of 300k terms parses and evaluates in a loop, without a stack frame per term. */
static void test_long_chains(void **state)
{
    (void)state;
    static const struct {
        const char *first, *unit;
        int64_t want;
    } chains[] = {
        {"a", " + a", 7 * 300001LL},
        {"a", " - b", 7 - 3 * 300000LL},
        {"1", " * 1", 1},
        {"a", " && a", 1},
        {"zero", " || zero", 0},
        {"a", " | b & a ^ c", -1},
        {"0", " + a * b - c / 1", 23 * 300000LL},
    };
    for (size_t i = 0; i < sizeof chains / sizeof chains[0]; i++) {
        char *t = repeat(chains[i].first, chains[i].unit, 300000);
        bool ok = false;
        at_expr *e = NULL;
        assert_int_equal(at_expr_parse(t, resolve, NULL, &e), AT_OK);
        int64_t v = at_expr_eval(e, slots, &ok);
        assert_true(ok);
        if (v != chains[i].want)
            print_error("%s%s...: %lld, want %lld\n", chains[i].first, chains[i].unit, (long long)v,
                        (long long)chains[i].want);
        assert_true(v == chains[i].want);
        at_expr_free(e);
        free(t);
    }
}

/* Nesting is limited, with a message naming the limit: parentheses, unary operators,
 * conditionals, and operands left pending by rising precedence. */
static void test_nesting_limits(void **state)
{
    (void)state;
    char *t = repeat("", "-", 300000);
    t[299999] = 'a';
    expect_syntax(t, "too deep", "more than 200 nested");
    free(t);
    t = repeat("a", " ? a : a", 300000);
    expect_syntax(t, "too deep", NULL);
    free(t);
    /* each level leaves 8 operands pending (|| and && leave none): a || a && a | a ^ ... a * (...)
     */
    t = repeat("", "a || a && a | a ^ a & a == a < a << a + a * (", 40);
    size_t n = strlen(t);
    t = realloc(t, n + 64);
    strcpy(t + n, "a");
    for (int i = 0; i < 40; i++) strcat(t + n, ")");
    expect_syntax(t, "too deep", "256 pending operands");
    free(t);
    EXPECT("a || a && a | a ^ a & a == a < a << a + a * (a || a && a | a ^ a & a == a < a << a + "
           "a * b)",
           1);
}

/* The branches of a folded condition keep working jumps. */
static void test_folded_conditions(void **state)
{
    (void)state;
    EXPECT("1 ? (a && zero) || b : c", 1);
    EXPECT("0 ? a : zero || (b ? zero && a : c)", 0);
    EXPECT("0 ? a : zero || (zero ? zero && a : c)", 1);
    EXPECT("(1 ? zero : a) ? 1 : (0 ? a : b > 2 ? a || zero : zero)", 1);
    EXPECT("2 > 1 ? 0 || zero ? a : b : c", 3);
    EXPECT("1 && 2 ? 3 : 1/0", 3);
    EXPECT("0 || 0 ? 1/0 : 4", 4);
    EXPECT_FAIL("1 ? 1/0 : 4");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_literals),           cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_operators),          cmocka_unit_test(test_functions),
        cmocka_unit_test(test_errors_at_eval),     cmocka_unit_test(test_short_circuit),
        cmocka_unit_test(test_unknown_identifier), cmocka_unit_test(test_resolve_at_parse_time),
        cmocka_unit_test(test_syntax_errors),      cmocka_unit_test(test_dotted_identifiers),
        cmocka_unit_test(test_nested_parens_ok),   cmocka_unit_test(test_long_chains),
        cmocka_unit_test(test_nesting_limits),     cmocka_unit_test(test_folded_conditions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
