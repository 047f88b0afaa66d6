/* templates.c — finds a template's YAML space and kernel source (a development folder or the
 * copies embedded at build time), joins the backend preamble, the kernel and the device helpers
 * they include into one source, and binds a device's properties into the space. */
#include "tuner/tuner.h"

#include "base/sbuf.h"

#include <stdlib.h>
#include <string.h>

struct at_embedded {
    const char *name;
    const char *data;
    size_t size;
};
extern const struct at_embedded at_embedded_templates[];

#define MAX_INCLUDE_DEPTH 8
#define MAX_INCLUDED      32

/* Reads one template file by its path under the templates folder ("gemm/gemm.cl"):
 * $AUTOTUNE_TEMPLATE_PATH/<path> when that variable is set, otherwise the embedded copy. */
static at_status read_template_file(const char *path, char **data, size_t *len)
{
    const char *dir = getenv("AUTOTUNE_TEMPLATE_PATH");
    if (dir && *dir) {
        char *full = at_asprintf("%s/%s", dir, path);
        if (!full) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
        at_status s = at_read_file(full, data, len);
        free(full);
        return s;
    }
    for (const struct at_embedded *e = at_embedded_templates; e->name; e++) {
        if (strcmp(e->name, path) != 0) continue;
        *data = malloc(e->size + 1);
        if (!*data) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
        memcpy(*data, e->data, e->size);
        (*data)[e->size] = '\0';
        *len = e->size;
        return AT_OK;
    }
    return at_fail(AT_ERR_TEMPLATE, "no template file '%s' in this build", path);
}

/* The path of rel (an include or a `source:`) seen from the file at `from`: relative to its
 * folder, with "." and ".." resolved; it must stay inside the templates folder. */
static at_status resolve_path(const char *from, const char *rel, char *out, size_t cap)
{
    char buf[512];
    const char *slash = strrchr(from, '/');
    int n = snprintf(buf, sizeof buf, "%.*s%s%s", slash ? (int)(slash - from) : 0, from,
                     slash ? "/" : "", rel);
    if (n < 0 || (size_t)n >= sizeof buf || (size_t)n >= cap)
        return at_fail(AT_ERR_TEMPLATE, "template path too long: %s", rel);
    size_t used = 0;
    out[0] = '\0';
    for (char *part = buf, *next; part; part = next) {
        if ((next = strchr(part, '/'))) *next++ = '\0';
        if (!*part) continue;
        if (strcmp(part, ".") == 0) continue;
        if (strcmp(part, "..") == 0) {
            if (!used)
                return at_fail(AT_ERR_TEMPLATE, "'%s' (from %s) leaves the templates folder", rel,
                               from);
            char *up = strrchr(out, '/');
            used = up ? (size_t)(up - out) : 0;
            out[used] = '\0';
            continue;
        }
        used += (size_t)snprintf(out + used, cap - used, "%s%s", used ? "/" : "", part);
    }
    return AT_OK;
}

/* Files already inlined into one source: each is included once (like #pragma once). */
typedef struct included {
    char paths[MAX_INCLUDED][256];
    size_t n;
} included;

/* Appends the file at path to out, replacing each line `#include "x"` by the text of template
 * file x (relative to the including file; each file once), since the runtime compilers get one
 * self-contained source and have no include path. After an inlined file, a #line directive puts
 * the including file's line numbers back. Other #include lines stay. */
static at_status append_expanded(const char *path, at_sbuf *out, included *inc, int depth)
{
    if (depth > MAX_INCLUDE_DEPTH)
        return at_fail(AT_ERR_TEMPLATE, "templates include each other too deeply (at %s)", path);
    for (size_t i = 0; i < inc->n; i++)
        if (strcmp(inc->paths[i], path) == 0) return AT_OK;
    if (inc->n == MAX_INCLUDED) return at_fail(AT_ERR_TEMPLATE, "too many included files");
    snprintf(inc->paths[inc->n++], sizeof inc->paths[0], "%s", path);
    char *text = NULL;
    size_t len = 0;
    AT_TRY(read_template_file(path, &text, &len));
    at_status s = AT_OK;
    static const char marker[] = "#include \"";
    const size_t mlen = sizeof marker - 1;
    const char *line = text;
    for (int lineno = 1; s == AT_OK && *line; lineno++) {
        const char *eol = strchr(line, '\n');
        size_t n = eol ? (size_t)(eol - line) + 1 : strlen(line);
        const char *end = NULL;
        if (n > mlen && strncmp(line, marker, mlen) == 0 &&
            (end = memchr(line + mlen, '"', n - mlen))) {
            char rel[256], dep[256];
            snprintf(rel, sizeof rel, "%.*s", (int)(end - line - mlen), line + mlen);
            s = resolve_path(path, rel, dep, sizeof dep);
            if (s == AT_OK) s = append_expanded(dep, out, inc, depth + 1);
            at_sb_printf(out, "\n#line %d\n", lineno + 1);
        } else {
            at_sb_put(out, line, n);
        }
        line += n;
    }
    free(text);
    return s;
}

at_status at_template_load(const char *name, const char *backend, at_template **out)
{
    *out = NULL;
    char *yaml = NULL;
    size_t ylen = 0;
    at_template *t = calloc(1, sizeof *t);
    char path[256], file[256];
    included inc = {0};
    at_sbuf source = {0}, body = {0};
    at_status s = t ? AT_OK : at_fail(AT_ERR_NO_MEMORY, "out of memory");
    if (s == AT_OK) {
        snprintf(path, sizeof path, "gemm/%s.yaml", name);
        s = read_template_file(path, &yaml, &ylen);
    }
    if (s == AT_OK) s = at_space_load(yaml, ylen, &t->space);
    if (s == AT_OK) {
        snprintf(file, sizeof file, "common/%s.h", backend);
        s = append_expanded(file, &source, &inc, 0);
    }
    if (s == AT_OK) s = resolve_path(path, t->space->source, file, sizeof file);
    if (s == AT_OK) s = append_expanded(file, &body, &inc, 0);
    if (s == AT_OK) {
        at_sb_puts(&source, "\n#line 1\n");
        at_sb_put(&source, at_sb_str(&body), body.n);
        if (body.oom || !(t->source = at_sb_take(&source)))
            s = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    if (s == AT_OK) {
        uint64_t h = at_hash(AT_HASH_SEED, t->source, strlen(t->source));
        at_hash_hex(at_hash(h, yaml, ylen), t->hash);
        *out = t;
    } else {
        at_template_free(t);
    }
    free(yaml);
    at_sb_free(&source);
    at_sb_free(&body);
    return s;
}

void at_template_free(at_template *t)
{
    if (!t) return;
    at_space_free(t->space);
    free(t->source);
    free(t);
}

/* An AMD target's processor as a number, 0 for other backends: gfx908 -> 908, gfx90a -> 910
 * (LLVM's major 9, minor 0, stepping a = 10), gfx942 -> 942, gfx1100 -> 1100. Spaces compare it
 * with architecture features (MFMA on gfx908 and later CDNA, bf16_1k from gfx90a). */
static int64_t gfx_number(const char *arch)
{
    if (strncmp(arch, "gfx", 3) != 0) return 0;
    size_t n = strcspn(arch + 3, ":");
    if (n < 3 || n > 4) return 0;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        char c = arch[3 + i];
        int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (digit < 0) return 0;
        if (i == n - 1) return v * 10 + digit; /* the stepping may be a hex letter */
        v = v * 10 + digit;
    }
    return v;
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
        {"gfx", gfx_number(d->arch)},
    };
    /* A space declares the device variables it uses; the others are not an error. */
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        for (size_t j = 0; j < t->space->ndevice; j++)
            if (strcmp(t->space->device_vars[j], vars[i].name) == 0)
                AT_TRY(at_space_set(t->space, vars[i].name, vars[i].value));
    }
    return AT_OK;
}
