/* fuzz_bundle.c — libFuzzer target: the bundle reader (cache/bundle.c: gzip or plain JSON Lines,
 * the header, every record line) on any bytes, handed to it as a file; what it accepts is
 * written into a scratch database and must be taken there. */
#define _GNU_SOURCE
#include "cache/bundle.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static char g_dir[] = "/tmp/fuzz_bundle_XXXXXX"; /* the scratch database, made on first use */
static int g_made;

static void cleanup(void)
{
    char f[64];
    snprintf(f, sizeof f, "%s/data.mdb", g_dir);
    unlink(f);
    snprintf(f, sizeof f, "%s/lock.mdb", g_dir);
    unlink(f);
    rmdir(g_dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("bundle", 0);
    if (fd < 0 || write(fd, data, size) != (ssize_t)size) abort();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    const char *in[1] = {path};
    at_bundle_set *set = NULL;
    if (at_bundle_read(in, 1, NULL, &set) == AT_OK) {
        if (!g_made && !mkdtemp(g_dir)) abort();
        if (!g_made) atexit(cleanup);
        g_made = 1;
        at_db *db = NULL;
        if (at_db_open(g_dir, AT_DB_READWRITE, &db) != AT_OK) abort();
        /* A record the reader accepted is one the database takes. */
        if (at_bundle_apply(db, set, AT_PREFER_FASTER, NULL, NULL) != AT_OK) abort();
        at_db_close(db);
    }
    at_bundle_set_free(set);
    close(fd);
    return 0;
}
