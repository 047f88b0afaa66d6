/* test_support.h — what several unit tests share: whether a backend's runtime compiler is there,
 * the exit code that tells ctest a program was skipped (tests with SKIP_RETURN_CODE 77 in
 * tests/CMakeLists.txt), a compile that must succeed, and re-running the test program in a child
 * with a library variable set.
 * Include after cmocka.h, with _GNU_SOURCE defined first (fork, setenv). */
#ifndef AT_TEST_SUPPORT_H
#define AT_TEST_SUPPORT_H

#include "tuner/backend.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define AT_TEST_SKIPPED 77

/* Whether backend b's compiler loads here, asked by opening a compile-only target for arch.
 * False only when it is missing (AT_ERR_NO_BACKEND), with why saying so; any other failure is
 * left for the tests to meet, so a broken compile path fails instead of being skipped. */
static inline bool at_test_have_compiler(const at_backend_ops *b, const char *arch, char *why,
                                         size_t whylen)
{
    at_bdev *d = NULL;
    at_status s = b->open_target(arch, NULL, &d);
    b->close(d);
    snprintf(why, whylen, "%s", s == AT_ERR_NO_BACKEND ? at_errmsg() : "");
    return s != AT_ERR_NO_BACKEND;
}

/* In a test: skips it (cmocka's skip(), with the reason) when missing says that what it needs is
 * not there. */
#define AT_TEST_NEED(missing)                                                                      \
    do {                                                                                           \
        if ((missing)[0]) {                                                                        \
            print_message("skipped: %s\n", (missing));                                             \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* The exit code of a test program from cmocka's count of failed tests: 1 if any failed;
 * otherwise, when missing is set (what the program needs and does not have), AT_TEST_SKIPPED with
 * the reason on stderr, so ctest says skipped rather than passed; else 0. */
static inline int at_test_exit(int failed, const char *missing)
{
    if (failed) return 1;
    if (!missing || !*missing) return 0;
    fprintf(stderr, "SKIPPED: %s\n", missing);
    return AT_TEST_SKIPPED;
}

/* b's compile of kernel name from src with opts on d, which must succeed (the log is shown
 * when it does not). */
static inline at_bprog *at_test_compile_ok(const at_backend_ops *b, at_bdev *d, const char *src,
                                           const char *opts, const char *name)
{
    at_bprog *p = NULL;
    char *log = NULL;
    at_status s = b->compile(d, src, opts, name, &p, &log);
    if (s != AT_OK) fail_msg("compile failed (%d): %s\nlog:\n%s", s, at_errmsg(), log ? log : "");
    free(log);
    assert_non_null(p);
    return p;
}

/* Runs this program again with env_var=value and argv (argv[0] first, NULL-ended) and checks
 * that it exits 0. A backend loads its library once per process, so a missing or wrong library
 * is tried in a fresh one. */
static inline void at_test_run_child(const char *env_var, const char *value,
                                     const char *const *argv)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv(env_var, value, 1);
        execv("/proc/self/exe", (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

#endif
