/* templates.c — the template registry: every template's YAML (in the folders of
 * $AUTOTUNE_TEMPLATE_PATH or the copies embedded at build time) says which operation it
 * implements and where it applies; a problem on a device gets the highest-priority one that
 * applies, or the one named. Loading joins the backend preamble, the kernel and the device
 * helpers they include into one source, and binds a device's properties into the space. */
#define _DEFAULT_SOURCE /* DT_DIR */
#include "tuner/tuner.h"

#include "base/sbuf.h"

#include <dirent.h>
#include <pthread.h>
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
#define MAX_TEMPLATES     64

/* Reads one template file by its path under a templates folder ("gemm/gemm.cl"): from the
 * first folder of $AUTOTUNE_TEMPLATE_PATH (':'-separated) that has it when that variable is
 * set, otherwise the embedded copy. */
static at_status read_template_file(const char *path, char **data, size_t *len)
{
    const char *dirs = getenv("AUTOTUNE_TEMPLATE_PATH");
    if (dirs && *dirs) {
        for (const char *d = dirs; *d;) {
            size_t n = strcspn(d, ":");
            char *full = at_asprintf("%.*s/%s", (int)n, d, path);
            if (!full) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
            FILE *f = fopen(full, "rb");
            if (f) fclose(f);
            at_status s = f ? at_read_file(full, data, len) : AT_ERR_NOT_FOUND;
            free(full);
            if (s != AT_ERR_NOT_FOUND) return s;
            d += n + (d[n] == ':');
        }
        return at_fail(AT_ERR_TEMPLATE, "no template file '%s' in AUTOTUNE_TEMPLATE_PATH (%s)",
                       path, dirs);
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

/* ---- the index of templates ----------------------------------------------------------------- */

/* Every template's YAML path and its parsed space (for the keys that say where it applies). */
typedef struct tpl_index {
    size_t n;
    char path[MAX_TEMPLATES][256];
    at_space *space[MAX_TEMPLATES];
    at_status status; /* a YAML that does not load makes every lookup fail, naming it */
    char error[1024];
} tpl_index;

static void index_free(tpl_index *x)
{
    for (size_t i = 0; i < x->n; i++) at_space_free(x->space[i]);
    free(x);
}

static void index_add(tpl_index *x, const char *path)
{
    if (x->status != AT_OK) return;
    for (size_t i = 0; i < x->n; i++)
        if (strcmp(x->path[i], path) == 0) return; /* an earlier folder has it */
    if (x->n == MAX_TEMPLATES) {
        x->status = at_fail(AT_ERR_TEMPLATE, "more than %d templates", MAX_TEMPLATES);
        snprintf(x->error, sizeof x->error, "%s", at_errmsg());
        return;
    }
    char *yaml = NULL;
    size_t len = 0;
    at_space *sp = NULL;
    at_status s = read_template_file(path, &yaml, &len);
    if (s == AT_OK) s = at_space_load(yaml, len, &sp);
    free(yaml);
    if (s != AT_OK) {
        x->status = s;
        snprintf(x->error, sizeof x->error, "template %s: %s", path, at_errmsg());
        return;
    }
    snprintf(x->path[x->n], sizeof x->path[0], "%s", path);
    x->space[x->n++] = sp;
}

static int is_yaml(const char *name)
{
    size_t n = strlen(name);
    return n > 5 && strcmp(name + n - 5, ".yaml") == 0;
}

/* Templates are <folder>/<operation>/<name>.yaml; common/ holds preambles and helpers. */
static tpl_index *index_build(void)
{
    tpl_index *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    const char *dirs = getenv("AUTOTUNE_TEMPLATE_PATH");
    if (!dirs || !*dirs) {
        for (const struct at_embedded *e = at_embedded_templates; e->name; e++)
            if (is_yaml(e->name) && strchr(e->name, '/')) index_add(x, e->name);
        return x;
    }
    for (const char *d = dirs; *d;) {
        size_t n = strcspn(d, ":");
        char root[1024];
        snprintf(root, sizeof root, "%.*s", (int)n, d);
        DIR *top = opendir(root);
        struct dirent *op;
        while (top && (op = readdir(top))) {
            if (op->d_name[0] == '.' || strcmp(op->d_name, "common") == 0) continue;
            char sub[1536];
            snprintf(sub, sizeof sub, "%s/%s", root, op->d_name);
            DIR *dir = opendir(sub);
            struct dirent *f;
            /* Sorted by name within a folder, so the choice between equals is stable. */
            char names[MAX_TEMPLATES][256];
            size_t nn = 0;
            while (dir && (f = readdir(dir)) && nn < MAX_TEMPLATES)
                if (is_yaml(f->d_name))
                    snprintf(names[nn++], sizeof names[0], "%s/%s", op->d_name, f->d_name);
            if (dir) closedir(dir);
            qsort(names, nn, sizeof names[0], (int (*)(const void *, const void *))strcmp);
            for (size_t i = 0; i < nn; i++) index_add(x, names[i]);
        }
        if (top) closedir(top);
        d += n + (d[n] == ':');
    }
    return x;
}

/* The embedded index is built once per process; a development folder is read every time. */
static tpl_index *g_embedded;
static pthread_once_t g_embedded_once = PTHREAD_ONCE_INIT;
static void embedded_init(void) { g_embedded = index_build(); }

static tpl_index *index_get(int *owned)
{
    const char *dirs = getenv("AUTOTUNE_TEMPLATE_PATH");
    *owned = dirs && *dirs;
    if (*owned) return index_build();
    pthread_once(&g_embedded_once, embedded_init);
    return g_embedded;
}

static void index_put(tpl_index *x, int owned)
{
    if (owned && x) index_free(x);
}

static at_status index_check(const tpl_index *x)
{
    if (!x) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    if (x->status != AT_OK) return at_fail(x->status, "%s", x->error);
    return AT_OK;
}

/* The entry of the template named name; -1 (with the failure) if none or several. */
static int index_find(const tpl_index *x, const char *name)
{
    int found = -1;
    for (size_t i = 0; i < x->n; i++) {
        if (strcmp(x->space[i]->name, name) != 0) continue;
        if (found >= 0)
            return at_fail(AT_ERR_TEMPLATE, "two templates are named '%s': %s and %s", name,
                           x->path[found], x->path[i]),
                   -2;
        found = (int)i;
    }
    return found;
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
 * self-contained source and have no include path. #line directives name each file and line, so
 * a compiler error points into the file it is in. Other #include lines stay. */
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
    if (depth > 0) at_sb_printf(out, "#line 1 \"%s\"\n", path);
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
            at_sb_printf(out, "\n#line %d \"%s\"\n", lineno + 1, path);
        } else {
            at_sb_put(out, line, n);
        }
        line += n;
    }
    free(text);
    return s;
}

/* The YAML path of the template named name in index x (checked by index_check). */
static at_status find_path(const tpl_index *x, const char *name, char *path, size_t len)
{
    int i = name ? index_find(x, name) : -1;
    if (i == -1)
        return at_fail(AT_ERR_TEMPLATE, "no template named '%s' in this build", name ? name : "");
    if (i == -2) return AT_ERR_TEMPLATE;
    snprintf(path, len, "%s", x->path[i]);
    return AT_OK;
}

/* Loads the template whose YAML is at path (under a templates folder) with the preamble of a
 * backend. */
static at_status load_path(const char *path, const char *backend, at_template **out)
{
    char *yaml = NULL;
    size_t ylen = 0;
    at_template *t = calloc(1, sizeof *t);
    char file[256];
    included inc = {0};
    at_sbuf source = {0}, body = {0};
    at_status s =
        t ? read_template_file(path, &yaml, &ylen) : at_fail(AT_ERR_NO_MEMORY, "out of memory");
    if (s == AT_OK) s = at_space_load(yaml, ylen, &t->space);
    if (s == AT_OK) {
        snprintf(file, sizeof file, "common/%s.h", backend);
        s = append_expanded(file, &source, &inc, 0);
    }
    if (s == AT_OK) s = resolve_path(path, t->space->source, file, sizeof file);
    if (s == AT_OK) s = append_expanded(file, &body, &inc, 0);
    if (s == AT_OK) {
        at_sb_printf(&source, "\n#line 1 \"%s\"\n", file);
        at_sb_put(&source, at_sb_str(&body), body.n);
        if (body.oom || !(t->source = at_sb_take(&source)))
            s = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    if (s == AT_OK) {
        /* Results are trusted for the code and what the space means, not for its comments,
         * defaults or layout (docs/database.md). */
        uint64_t h = at_hash(AT_HASH_SEED, t->source, strlen(t->source));
        at_hash_hex(at_space_fingerprint(t->space, h), t->hash);
        snprintf(t->name, sizeof t->name, "%s", t->space->name);
        *out = t;
    } else {
        at_template_free(t);
    }
    free(yaml);
    at_sb_free(&source);
    at_sb_free(&body);
    return s;
}

at_status at_template_load(const char *name, const char *backend, at_template **out)
{
    *out = NULL;
    int owned;
    tpl_index *x = index_get(&owned);
    at_status s = index_check(x);
    char path[256] = "";
    if (s == AT_OK) s = find_path(x, name, path, sizeof path);
    index_put(x, owned);
    AT_TRY(s);
    return load_path(path, backend, out);
}

int at_template_trusts(const at_template *t, const char *hash)
{
    return strcmp(t->hash, hash) == 0 ||
           (t->space->nsupersedes &&
            at_space_lists(t->space->supersedes, t->space->nsupersedes, hash, 0));
}

/* Appends word to the ", "-separated list in out unless it is there already. */
static void add_unique(char *out, size_t len, const char *word)
{
    size_t n = strlen(word), used = strlen(out);
    for (const char *p = out; (p = strstr(p, word)); p += n)
        if ((p == out || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0')) return;
    snprintf(out + used, len - used, "%s%s", used ? ", " : "", word);
}

/* Appends every name of a `backends:`-style list, or "any" for an empty one. */
static void add_list(char *out, size_t len, char *const *list, size_t n)
{
    if (n == 0) add_unique(out, len, "any");
    for (size_t i = 0; i < n; i++) add_unique(out, len, list[i]);
}

/* Whether template entry sp implements op for dtype on backend/arch, and if not, why. */
static int applies(const at_space *sp, const char *op, const char *dtype, const at_device_info *d,
                   char *why, size_t whylen)
{
    if (!sp->operation || strcmp(sp->operation, op) != 0)
        return snprintf(why, whylen, "it implements %s, not %s",
                        sp->operation ? sp->operation : "no operation", op),
               0;
    if (!at_space_lists(sp->backends, sp->nbackends, d->backend, 0))
        return snprintf(why, whylen, "it does not run on the %s backend", d->backend), 0;
    if (!at_space_lists(sp->dtypes, sp->ndtypes, dtype, 0))
        return snprintf(why, whylen, "it does not take dtype %s", dtype ? dtype : "(none)"), 0;
    if (!at_space_lists(sp->archs, sp->narchs, d->arch[0] ? d->arch : NULL, 1))
        return snprintf(why, whylen, "it does not compile for %s",
                        d->arch[0] ? d->arch : "this device"),
               0;
    if (!at_space_lists(sp->device_types, sp->ndevice_types, d->is_cpu ? "cpu" : "gpu", 0))
        return snprintf(why, whylen, "it does not run on a %s device", d->is_cpu ? "CPU" : "GPU"),
               0;
    return 1;
}

/* at_template_select in index x (checked by index_check). */
static at_status select_in(const tpl_index *x, const at_problem *p, const at_device_info *info,
                           const char *name, char *out, size_t len)
{
    const char *op = p->op->name, *dtype = p->op->dtype ? p->op->dtype(p->data) : NULL;
    at_status s = AT_OK;
    char why[256];
    if (name) {
        int i = index_find(x, name);
        if (i == -1) {
            char known[512] = "";
            for (size_t j = 0; j < x->n; j++)
                if (x->space[j]->operation && strcmp(x->space[j]->operation, op) == 0)
                    add_unique(known, sizeof known, x->space[j]->name);
            s = at_fail(AT_ERR_INVALID_ARG, "unknown template '%s' (%s templates: %s)", name, op,
                        known);
        } else if (i == -2) {
            s = AT_ERR_INVALID_ARG;
        } else if (!applies(x->space[i], op, dtype, info, why, sizeof why)) {
            s = at_fail(AT_ERR_INVALID_ARG, "template '%s' cannot serve this %s problem: %s", name,
                        op, why);
        } else {
            snprintf(out, len, "%s", name);
        }
    } else {
        int best = -1;
        for (size_t i = 0; i < x->n; i++)
            if (applies(x->space[i], op, dtype, info, why, sizeof why) &&
                (best < 0 || x->space[i]->priority > x->space[best]->priority))
                best = (int)i;
        if (best >= 0) {
            snprintf(out, len, "%s", x->space[best]->name);
        } else {
            /* Say what there is: the dtypes this backend has, the backends this dtype has. */
            char have[256] = "", where[256] = "";
            for (size_t i = 0; i < x->n; i++) {
                const at_space *sp = x->space[i];
                if (!sp->operation || strcmp(sp->operation, op) != 0) continue;
                if (at_space_lists(sp->backends, sp->nbackends, info->backend, 0))
                    add_list(have, sizeof have, sp->dtypes, sp->ndtypes);
                if (at_space_lists(sp->dtypes, sp->ndtypes, dtype, 0))
                    add_list(where, sizeof where, sp->backends, sp->nbackends);
            }
            if (dtype)
                s = at_fail(AT_ERR_UNSUPPORTED,
                            "dtype %s is not supported on the %s backend%s%s (%s dtypes here: "
                            "%s; %s runs on: %s)",
                            dtype, info->backend, info->arch[0] ? " for " : "", info->arch, op,
                            have[0] ? have : "none", dtype, where[0] ? where : "no backend");
            else
                s = at_fail(AT_ERR_UNSUPPORTED, "no %s template runs on the %s backend%s%s", op,
                            info->backend, info->arch[0] ? " for " : "", info->arch);
        }
    }
    return s;
}

at_status at_template_select(const at_problem *p, const at_device_info *info, const char *name,
                             char *out, size_t len)
{
    int owned;
    tpl_index *x = index_get(&owned);
    at_status s = index_check(x);
    if (s == AT_OK) s = select_in(x, p, info, name, out, len);
    index_put(x, owned);
    return s;
}

at_status at_template_for(const at_problem *p, const at_device_info *info, const char *name,
                          at_template **out)
{
    *out = NULL;
    /* One index for both steps (with AUTOTUNE_TEMPLATE_PATH set, each index_get reads every
     * YAML); the chosen name is looked up as at_template_load would, which is what catches two
     * templates of that name when none was named. */
    char chosen[64], path[256] = "";
    int owned;
    tpl_index *x = index_get(&owned);
    at_status s = index_check(x);
    if (s == AT_OK) s = select_in(x, p, info, name, chosen, sizeof chosen);
    if (s == AT_OK) s = find_path(x, chosen, path, sizeof path);
    index_put(x, owned);
    AT_TRY(s);
    at_template *t = NULL;
    AT_TRY(load_path(path, info->backend, &t));
    s = at_template_bind_device(t, info);
    if (s == AT_OK) s = p->op->bind(p->data, t->space);
    at_arglist args;
    int ws = 1; /* any non-NULL workspace: the check covers the optional argument too */
    if (s == AT_OK &&
        (s = at_args_build(t->space->args, t->space->nargs, p, NULL, &ws, NULL, &args)) != AT_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", at_errmsg());
        s = at_fail(AT_ERR_TEMPLATE, "template %s: %s", t->name, msg);
    }
    if (s != AT_OK) {
        at_template_free(t);
        return s;
    }
    *out = t;
    return AT_OK;
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
        {"l1_bytes", d->l1_bytes},
        {"core_l2_bytes", d->core_l2_bytes},
        {"vector_width", d->vector_width},
        {"gfx", gfx_number(d->arch)},
        {"tma", d->tma},
        {"cluster", d->cluster},
    };
    /* A space declares the device variables it uses; the others are not an error. */
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        for (size_t j = 0; j < t->space->ndevice; j++)
            if (strcmp(t->space->device_vars[j], vars[i].name) == 0)
                AT_TRY(at_space_set(t->space, vars[i].name, vars[i].value));
    }
    return AT_OK;
}
