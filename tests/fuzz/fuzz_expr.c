/* fuzz_expr.c — libFuzzer target: the expression parser and evaluator (tuner/space/expr.c) on
 * any text, with names bound to slots holding edge values (0, -1, INT64_MIN, INT64_MAX ...).
 * Built and run by tests/fuzz (ctest -L fuzz; tests/fuzz/run.sh says how to run one longer). */
#include "tuner/space/space.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const g_names[] = {"a",
                                      "b",
                                      "c",
                                      "BM",
                                      "BN",
                                      "m",
                                      "n",
                                      "k",
                                      "zero",
                                      "neg",
                                      "big",
                                      "small",
                                      "device.max_work_group_size"};
static const int64_t g_slots[] = {7,  3, -2, 64,        32,        1000, 999,
                                  77, 0, -1, INT64_MAX, INT64_MIN, 256};

static int resolve(void *user, const char *name)
{
    (void)user;
    for (size_t i = 0; i < sizeof g_names / sizeof g_names[0]; i++)
        if (strcmp(g_names[i], name) == 0) return (int)i;
    return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    at_expr *e = NULL;
    if (at_expr_parse(text, resolve, NULL, &e) == AT_OK) {
        bool ok = true;
        int64_t v = at_expr_eval(e, g_slots, &ok);
        if (!ok && v != 0) abort(); /* a failed evaluation gives 0 */
        bool ok2 = true;
        if (at_expr_eval(e, g_slots, &ok2) != v || ok2 != ok) abort(); /* and is deterministic */
        if (strcmp(at_expr_text(e), text) != 0) abort();
    } else if (e) {
        abort(); /* a failed parse leaves no expression */
    }
    at_expr_free(e);
    free(text);
    return 0;
}
