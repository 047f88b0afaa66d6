/* registry.c — the backends compiled into this build (by name, in automatic-choice order) and
 * the small helpers they share. */
#include "tuner/backend.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GPU backends first, OpenCL last: the automatic choice takes the first one whose probe succeeds
 * and that has a device. */
static const at_backend_ops *const g_backends[] = {
    &at_cuda_backend,
    &at_hip_backend,
    &at_opencl_backend,
    NULL,
};

const at_backend_ops *at_backend_find(const char *name)
{
    if (!name) return NULL;
    for (const at_backend_ops *const *b = g_backends; *b; b++)
        if (strcmp((*b)->name, name) == 0) return *b;
    return NULL;
}

const at_backend_ops *const *at_backend_list(void) { return g_backends; }

/* ---- helpers shared by the backends ---- */

at_status at_native_device(const char *backend, int found, int ndevs, int *idx)
{
    if (found < 0)
        return at_fail(AT_ERR_INVALID_ARG,
                       "%s: the native handles' device is none of the %d devices found", backend,
                       ndevs);
    if (*idx >= 0 && *idx != found)
        return at_fail(AT_ERR_INVALID_ARG,
                       "%s: device %d was asked, but the native queue is on device %d", backend,
                       *idx, found);
    *idx = found;
    return AT_OK;
}

/* The first few lines of a compile log, for the one-line error message. */
void at_log_head(const char *log, char *dst, size_t cap)
{
    dst[0] = '\0';
    if (!log) return;
    while (*log == '\n' || *log == ' ') log++;
    size_t n = 0;
    int lines = 0;
    while (log[n] && lines < 8) {
        if (log[n] == '\n') lines++;
        n++;
    }
    while (n && (log[n - 1] == '\n' || log[n - 1] == ' ')) n--;
    if (n >= cap) n = cap - 1;
    memcpy(dst, log, n);
    dst[n] = '\0';
}

at_status at_bbuf_check(at_bbuf b, size_t off, size_t bytes, const char *what)
{
    if (!b.handle) return at_fail(AT_ERR_INVALID_ARG, "%s: NULL buffer", what);
    if (off > b.bytes || bytes > b.bytes - off)
        return at_fail(AT_ERR_INVALID_ARG, "%s: %zu bytes at offset %zu exceed the %zu-byte buffer",
                       what, bytes, off, b.bytes);
    return AT_OK;
}

at_status at_launch_shape(const size_t global[3], const size_t local[3], size_t dims,
                          unsigned int grid[3], unsigned int block[3])
{
    if (!global || !local)
        return at_fail(AT_ERR_INVALID_ARG, "launch: a GPU needs global and local");
    if (dims < 1 || dims > 3) return at_fail(AT_ERR_INVALID_ARG, "launch: %zu dimensions", dims);
    for (size_t i = 0; i < 3; i++) grid[i] = block[i] = 1;
    for (size_t i = 0; i < dims; i++) {
        if (local[i] == 0 || local[i] > UINT_MAX || global[i] == 0)
            return at_fail(AT_ERR_INVALID_ARG, "launch: global %zu, local %zu in dimension %zu",
                           global[i], local[i], i);
        size_t g = global[i] / local[i] + (global[i] % local[i] != 0);
        if (g > UINT_MAX)
            return at_fail(AT_ERR_INVALID_ARG, "launch: %zu blocks in dimension %zu", g, i);
        grid[i] = (unsigned int)g;
        block[i] = (unsigned int)local[i];
    }
    return AT_OK;
}

void **at_launch_params(const at_karg *args, size_t nargs, void **stack, size_t cap)
{
    void **params = nargs > cap ? malloc(nargs * sizeof *params) : stack;
    for (size_t i = 0; params && i < nargs; i++) params[i] = (void *)(uintptr_t)args[i].ptr;
    return params;
}

void *at_dl_open(const char *env_var, const char *const *names, size_t nnames, const char **used,
                 char *why, size_t whylen)
{
    const char *env = getenv(env_var);
    const char *only[1] = {env};
    if (env && *env) {
        names = only;
        nnames = 1;
    }
    for (size_t i = 0; i < nnames; i++) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib) {
            *used = names[i];
            return lib;
        }
        const char *e = dlerror();
        if (i == 0) snprintf(why, whylen, "cannot load %s: %s", names[i], e ? e : "unknown error");
    }
    return NULL;
}

int at_dl_symbol(void *lib, const char *used, const char *sym, void *slot, char *why, size_t whylen)
{
    dlerror();
    void *p = dlsym(lib, sym);
    if (!p) {
        const char *e = dlerror();
        snprintf(why, whylen, "%s lacks %s: %s", used, sym, e ? e : "not found");
        return -1;
    }
    memcpy(slot, &p, sizeof p); /* object → function pointer without a cast warning */
    return 0;
}
