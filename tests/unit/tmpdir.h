/* tmpdir.h — a fresh temporary directory per test (cmocka setup/teardown), for the tests that
 * write databases. Include after <cmocka.h>, in a file that defines _GNU_SOURCE. */
#ifndef AT_TEST_TMPDIR_H
#define AT_TEST_TMPDIR_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

/* *state: the malloc'd path of a new empty directory under /tmp. */
static int make_tmp(void **state)
{
    char tmpl[] = "/tmp/at_test_XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    *state = strdup(d);
    return 0;
}

/* Removes the directory of make_tmp with everything in it. */
static int remove_tmp(void **state)
{
    if (*state) nftw(*state, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(*state);
    return 0;
}

#endif
