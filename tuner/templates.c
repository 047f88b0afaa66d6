/* templates.c — finds a template's YAML space and kernel source (a development folder or the
 * copies embedded at build time) and binds a device's properties into its space. */
#include "tuner.h"

#include <stdlib.h>
#include <string.h>

struct at_embedded {
    const char *name;
    const char *data;
    size_t size;
};
extern const struct at_embedded at_embedded_templates[];

/* Reads one template file: $AUTOTUNE_TEMPLATE_PATH/<file> when that variable is set,
 * otherwise the embedded copy. */
static at_status read_template_file(const char *file, char **data, size_t *len)
{
    const char *dir = getenv("AUTOTUNE_TEMPLATE_PATH");
    if (dir && *dir) {
        char *path = at_asprintf("%s/%s", dir, file);
        if (!path) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
        at_status s = at_read_file(path, data, len);
        free(path);
        return s;
    }
    for (const struct at_embedded *e = at_embedded_templates; e->name; e++) {
        if (strcmp(e->name, file) != 0) continue;
        *data = malloc(e->size + 1);
        if (!*data) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
        memcpy(*data, e->data, e->size);
        (*data)[e->size] = '\0';
        *len = e->size;
        return AT_OK;
    }
    return at_fail(AT_ERR_TEMPLATE, "no template file '%s' in this build", file);
}

at_status at_template_load(const char *name, const char *backend, at_template **out)
{
    *out = NULL;
    char *yaml = NULL, *pre = NULL, *body = NULL;
    size_t ylen = 0, plen = 0, blen = 0;
    at_template *t = calloc(1, sizeof *t);
    char file[256];
    at_status s = t ? AT_OK : at_fail(AT_ERR_NO_MEMORY, "out of memory");
    if (s == AT_OK) {
        snprintf(file, sizeof file, "%s.yaml", name);
        s = read_template_file(file, &yaml, &ylen);
    }
    if (s == AT_OK) s = at_space_load(yaml, ylen, &t->space);
    if (s == AT_OK) {
        snprintf(file, sizeof file, "%s.h", backend);
        s = read_template_file(file, &pre, &plen);
    }
    if (s == AT_OK) s = read_template_file(t->space->source, &body, &blen);
    if (s == AT_OK) {
        t->source = at_asprintf("%s\n#line 1\n%s", pre, body);
        if (!t->source) s = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    if (s == AT_OK) {
        uint64_t h = at_hash(AT_HASH_SEED, t->source, strlen(t->source));
        at_hash_hex(at_hash(h, yaml, ylen), t->hash);
        *out = t;
    } else {
        at_template_free(t);
    }
    free(yaml);
    free(pre);
    free(body);
    return s;
}

void at_template_free(at_template *t)
{
    if (!t) return;
    at_space_free(t->space);
    free(t->source);
    free(t);
}

at_status at_template_bind_device(at_template *t, const at_device_info *d)
{
    const struct {
        const char *name;
        int64_t value;
    } vars[] = {
        {"max_work_group_size", d->max_work_group_size},
        {"max_work_item_size0", d->max_work_item_sizes[0]},
        {"max_work_item_size1", d->max_work_item_sizes[1]},
        {"max_work_item_size2", d->max_work_item_sizes[2]},
        {"local_mem_bytes", d->local_mem_bytes},
        {"max_shared_optin", d->max_shared_optin ? d->max_shared_optin : d->local_mem_bytes},
        {"compute_units", d->compute_units},
        {"warp_size", d->warp_size},
        {"is_cpu", d->is_cpu},
        {"max_registers_per_block", d->max_registers_per_block},
        {"l2_bytes", d->l2_bytes},
    };
    /* A space declares the device variables it uses; the others are not an error. */
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        for (size_t j = 0; j < t->space->ndevice; j++)
            if (strcmp(t->space->device_vars[j], vars[i].name) == 0)
                AT_TRY(at_space_set(t->space, vars[i].name, vars[i].value));
    }
    return AT_OK;
}
