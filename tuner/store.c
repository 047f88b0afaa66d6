/* store.c — the public calls of the portable store (docs/shipping.md): bundle export, import and
 * merge, and counts, over cache/bundle.c, which gets what only the tuner knows through its hooks:
 * the operations this library has, and which template version trusts a best entry's hash. */
#include "cache/bundle.h"
#include "tuner/tuner.h"

#include <stdlib.h>
#include <string.h>

/* ---- the hooks ------------------------------------------------------------------------------ */

/* Templates loaded to judge best entries, one per name and backend (NULL: none such). */
typedef struct loaded {
    char name[64], backend[16];
    at_template *t;
} loaded;

typedef struct trust_cache {
    loaded *v;
    size_t n;
} trust_cache;

static int known_op(void *user, const char *op)
{
    (void)user;
    return at_op_find(op) != NULL;
}

static int trusted(void *user, const char *name, const char *backend, const char *hash)
{
    trust_cache *c = user;
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->v[i].name, name) == 0 && strcmp(c->v[i].backend, backend) == 0)
            return c->v[i].t && at_template_trusts(c->v[i].t, hash);
    loaded *v = realloc(c->v, (c->n + 1) * sizeof *v);
    if (!v) return 0;
    c->v = v;
    loaded *l = &c->v[c->n++];
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", name);
    snprintf(l->backend, sizeof l->backend, "%s", backend);
    if (at_template_load(name, backend, &l->t) != AT_OK) {
        l->t = NULL; /* a template this library does not have: nothing it trusts */
        at_errclear();
    }
    return l->t && at_template_trusts(l->t, hash);
}

static void trust_cache_free(trust_cache *c)
{
    for (size_t i = 0; i < c->n; i++) at_template_free(c->v[i].t);
    free(c->v);
}

/* ---- the calls ------------------------------------------------------------------------------ */

typedef struct export_args {
    const char *out_path;
    at_bundle_filter f;
    int64_t *records;
} export_args;

static at_status export_in(at_db *db, void *arg)
{
    const export_args *a = arg;
    return at_bundle_export(db, &a->f, a->out_path, a->records);
}

at_status at_db_export_bundle(const char *path, const char *out_path, const char *op,
                              const char *device, int best_only, int64_t *records, char *why,
                              size_t whylen)
{
    if (records) *records = 0;
    export_args a = {out_path ? out_path : "-", {op, device, best_only}, records};
    return at_db_read(path, export_in, &a, why, whylen);
}

at_status at_db_import(const char *path, const char *const *inputs, size_t n, at_prefer prefer,
                       at_import_report *report, char *why, size_t whylen)
{
    trust_cache cache = {0};
    at_bundle_hooks hooks = {known_op, trusted, &cache};
    at_bundle_set *set = NULL;
    at_db *db = NULL;
    char *def = path ? NULL : at_db_default_path();
    /* Every input is read and checked before the destination is opened. */
    at_status s = at_bundle_read(inputs, n, &hooks, &set);
    if (s == AT_OK)
        s = path || def ? at_db_open(path ? path : def, AT_DB_READWRITE, &db)
                        : at_fail(AT_ERR_DB, "no database path: HOME is not set");
    if (s == AT_OK) s = at_bundle_apply(db, set, prefer, &hooks, report);
    if (why && whylen) snprintf(why, whylen, "%s", s == AT_OK ? "" : at_errmsg());
    at_db_close(db);
    at_bundle_set_free(set);
    trust_cache_free(&cache);
    free(def);
    return s;
}

static at_status stats_in(at_db *db, void *arg) { return at_bundle_stats(db, arg); }

at_status at_db_stats_read(const char *path, at_db_stats *out, char *why, size_t whylen)
{
    if (!out) return at_fail(AT_ERR_INVALID_ARG, "at_db_stats_read: out is NULL");
    return at_db_read(path, stats_in, out, why, whylen);
}

void at_db_stats_clear(at_db_stats *s)
{
    if (!s) return;
    free(s->ops), free(s->devices), free(s->templates);
    memset(s, 0, sizeof *s);
}
