/* registry.c — the backends compiled into this build, by name and in automatic-choice order. */
#include "../backend.h"

#include <string.h>

/* GPU backends first, OpenCL last: the automatic choice takes the first one whose probe succeeds
 * and that has a device. */
static const at_backend_ops *const g_backends[] = {
    /* &at_cuda_backend, — slots in here once tuner/backends/cuda.c exists */
    /* &at_hip_backend,  — and then HIP */
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
