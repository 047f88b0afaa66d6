/* fuzz_recording.c — libFuzzer target: the replay loader (cache/recording.c) on any file: each
 * input is written to a scratch file and loaded as `autotune replay FILE` loads it (Kernel Tuner
 * JSON, plain or gzip'd; an LMDB file is named so that it is refused, not opened). */
#define _POSIX_C_SOURCE 200809L
#include "cache/recording.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[4096], g_path[4200];

static void cleanup(void)
{
    unlink(g_path);
    rmdir(g_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/at-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) abort();
    snprintf(g_path, sizeof g_path, "%s/input", g_dir);
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fopen(g_path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    at_recording *r = NULL;
    if (at_recording_load(g_path, NULL, &r) == AT_OK) {
        char buf[1024];
        for (size_t i = 0; i < r->nconfigs && i < 64; i++)
            at_recording_config(r, i, buf, sizeof buf);
        if (r->have_optimum && r->optimum >= r->nconfigs) abort();
    } else if (r) {
        abort(); /* a failed load leaves no recording */
    }
    at_recording_free(r);
    return 0;
}
