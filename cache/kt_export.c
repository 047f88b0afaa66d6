/* kt_export.c — writes one problem's measurements from the results table as a Kernel Tuner
 * cache JSON file, so recorded spaces replay in Kernel Tuner's simulation mode and in
 * `autotune replay`. */
#define _GNU_SOURCE
#include "db.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- a growable text buffer ---------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} tbuf;

static void tb_printf(tbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tb_printf(tbuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap <= b->len + (size_t)n) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

static void tb_json_str(tbuf *b, const char *s)
{
    tb_printf(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            tb_printf(b, "\\%c", c);
        else if (c < 0x20)
            tb_printf(b, "\\u%04x", c);
        else
            tb_printf(b, "%c", c);
    }
    tb_printf(b, "\"");
}

/* A parameter value: a JSON number when the text is a whole integer, else a JSON string. */
static void tb_json_value(tbuf *b, const char *v)
{
    int64_t x;
    if (at_parse_i64(v, INT64_MIN, INT64_MAX, &x) == 0)
        tb_printf(b, "%" PRId64, x);
    else
        tb_json_str(b, v);
}

/* ---- the selected results ------------------------------------------------------------------ */

/* Splits "<problem>|<device>|<hash>|<config>" in place; 0 on success. */
static int split_key(char *key, char **device, char **hash, char **config)
{
    char *a = strchr(key, '|'), *b = a ? strchr(a + 1, '|') : NULL,
         *c = b ? strchr(b + 1, '|') : NULL;
    if (!c) return -1;
    *a = *b = *c = '\0';
    *device = a + 1;
    *hash = b + 1;
    *config = c + 1;
    return 0;
}

/* The distinct values of field (0 device, 1 template hash) among keys, comma-separated. */
static char *distinct(char **dev, char **hash, size_t n, int field)
{
    tbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        const char *v = field ? hash[i] : dev[i];
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++) seen = strcmp(field ? hash[j] : dev[j], v) == 0;
        if (!seen) tb_printf(&b, "%s'%s'", b.len ? ", " : "", v);
    }
    return b.oom ? NULL : b.p;
}

/* Kernel Tuner's names for a failed candidate: InvalidConfig for one rejected before launch,
 * CompilationFailedConfig, RuntimeFailedConfig for everything that failed on the device. */
static const char *kt_failure(at_result_status s)
{
    switch (s) {
    case AT_RS_COMPILE_ERROR:
        return "CompilationFailedConfig";
    case AT_RS_RESOURCE_LIMIT:
        return "InvalidConfig";
    default:
        return "RuntimeFailedConfig";
    }
}

/* ---- config text "A=1,B=2" ------------------------------------------------------------------ */

#define MAX_PARAMS 64

typedef struct {
    int n;
    char *name[MAX_PARAMS], *value[MAX_PARAMS];
} config;

/* Splits a config in place; -1 when malformed. */
static int parse_config(char *s, config *c)
{
    c->n = 0;
    for (char *tok = s; tok && *tok;) {
        char *next = strchr(tok, ',');
        if (next) *next++ = '\0';
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok || c->n == MAX_PARAMS) return -1;
        *eq = '\0';
        c->name[c->n] = tok;
        c->value[c->n] = eq + 1;
        c->n++;
        tok = next;
    }
    return c->n ? 0 : -1;
}

static int cmp_value(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    int64_t i, j;
    int xi = at_parse_i64(x, INT64_MIN, INT64_MAX, &i) == 0;
    int yi = at_parse_i64(y, INT64_MIN, INT64_MAX, &j) == 0;
    if (xi && yi) return (i > j) - (i < j);
    if (xi != yi) return yi - xi; /* numbers first */
    return strcmp(x, y);
}

/* ---- the export ------------------------------------------------------------------------------ */

static at_status write_cache(tbuf *b, const char *problem, const char *device, char **configs,
                             const at_result_rec *recs, size_t n)
{
    /* Parameters: the names of the first config; every config must have the same. */
    config *cs = calloc(n, sizeof *cs);
    const char **vals = calloc(n, sizeof *vals);
    at_status s = cs && vals ? AT_OK : at_fail(AT_ERR_NO_MEMORY, "out of memory");
    for (size_t i = 0; s == AT_OK && i < n; i++) {
        if (parse_config(configs[i], &cs[i]) != 0 || cs[i].n != cs[0].n)
            s = at_fail(AT_ERR_DB_CORRUPT, "result %zu has a malformed or different config", i);
        for (int p = 0; s == AT_OK && p < cs[i].n; p++)
            if (strcmp(cs[i].name[p], cs[0].name[p]) != 0)
                s = at_fail(AT_ERR_DB_CORRUPT,
                            "results name different parameters ('%s' and '%s' in position %d)",
                            cs[0].name[p], cs[i].name[p], p + 1);
    }
    if (s != AT_OK) {
        free(cs);
        free(vals);
        return s;
    }
    const config *c0 = &cs[0];
    char op[64] = "";
    snprintf(op, sizeof op, "%.*s", (int)strcspn(problem, "/"), problem);
    tb_printf(b, "{\n\"device_name\": ");
    tb_json_str(b, device);
    tb_printf(b, ",\n\"kernel_name\": ");
    tb_json_str(b, op);
    /* problem_size: the numbers of the shape segment ("256x256x256"), else the whole key. */
    const char *shape = strrchr(problem, '/');
    shape = shape ? shape + 1 : problem;
    tb_printf(b, ",\n\"problem_size\": [");
    int sized = shape[strspn(shape, "0123456789x")] == '\0' && *shape;
    if (sized) {
        const char *q = shape;
        for (int first = 1; *q; first = 0) {
            size_t len = strcspn(q, "x");
            tb_printf(b, "%s%.*s", first ? "" : ", ", (int)len, q);
            q += len + (q[len] == 'x');
        }
    } else {
        tb_json_str(b, problem);
    }
    tb_printf(b, "],\n\"problem\": ");
    tb_json_str(b, problem);
    tb_printf(b, ",\n\"tune_params_keys\": [");
    for (int p = 0; p < c0->n; p++) {
        tb_printf(b, "%s", p ? ", " : "");
        tb_json_str(b, c0->name[p]);
    }
    tb_printf(b, "],\n\"tune_params\": {");
    for (int p = 0; p < c0->n; p++) {
        for (size_t i = 0; i < n; i++) vals[i] = cs[i].value[p];
        qsort(vals, n, sizeof *vals, cmp_value);
        tb_printf(b, "%s\n", p ? "," : "");
        tb_json_str(b, c0->name[p]);
        tb_printf(b, ": [");
        for (size_t i = 0, k = 0; i < n; i++) {
            if (i && strcmp(vals[i], vals[i - 1]) == 0) continue;
            tb_printf(b, "%s", k++ ? ", " : "");
            tb_json_value(b, vals[i]);
        }
        tb_printf(b, "]");
    }
    tb_printf(b, "\n},\n\"objective\": \"time\",\n\"objective_higher_is_better\": false,\n"
                 "\"cache\": {");
    for (size_t i = 0; i < n; i++) {
        const config *c = &cs[i];
        const at_result_rec *r = &recs[i];
        tb_printf(b, "%s\n\"", i ? "," : "");
        for (int p = 0; p < c->n; p++) tb_printf(b, "%s%s", p ? "," : "", c->value[p]);
        tb_printf(b, "\": {");
        for (int p = 0; p < c->n; p++) {
            tb_json_str(b, c->name[p]);
            tb_printf(b, ": ");
            tb_json_value(b, c->value[p]);
            tb_printf(b, ", ");
        }
        /* Times in ms, as Kernel Tuner writes them. We keep the median, not every repetition. */
        int ok = r->status == AT_RS_OK && isfinite(r->median_us) && r->median_us > 0;
        if (ok)
            tb_printf(b, "\"time\": %.9g, \"times\": [%.9g]", r->median_us / 1e3,
                      r->median_us / 1e3);
        else
            tb_printf(b, "\"time\": \"%s\"", kt_failure(r->status));
        double bench_ms = ok ? r->median_us / 1e3 * (double)(r->reps > 0 ? r->reps : 1) : 0;
        char when[32] = "";
        time_t t = (time_t)r->when;
        struct tm tm;
        if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S+00:00", &tm);
        tb_printf(b,
                  ", \"compile_time\": %.6g, \"verification_time\": 0, \"benchmark_time\": "
                  "%.6g, \"strategy_time\": 0, \"framework_time\": 0, \"timestamp\": \"%s\", "
                  "\"status\": \"%s\"",
                  r->compile_ms, bench_ms, when, at_result_status_name(r->status));
        if (!ok && r->reason[0]) {
            tb_printf(b, ", \"reason\": ");
            tb_json_str(b, r->reason);
        }
        tb_printf(b, "}");
    }
    tb_printf(b, "\n}\n}\n");
    free(cs);
    free(vals);
    return b->oom ? at_fail(AT_ERR_NO_MEMORY, "out of memory") : AT_OK;
}

static at_status export_kt(at_db *db, const char *problem, const char *device, const char *thash,
                           const char *out_path)
{
    if (!problem || !*problem || strchr(problem, '|'))
        return at_fail(AT_ERR_INVALID_ARG, "a problem key is needed, e.g. gemm/f32/nn/256x256x256");
    char **keys = NULL;
    size_t n = 0;
    char *prefix = device ? at_asprintf("%s|%s|", problem, device) : at_asprintf("%s|", problem);
    at_status s = prefix ? at_db_keys(db, "results", prefix, &keys, &n)
                         : at_fail(AT_ERR_NO_MEMORY, "out of memory");
    free(prefix);
    char **dev = calloc(n + 1, sizeof *dev), **hash = calloc(n + 1, sizeof *hash);
    char **cfg = calloc(n + 1, sizeof *cfg);
    at_result_rec *recs = calloc(n + 1, sizeof *recs);
    char **full = calloc(n + 1, sizeof *full); /* the unsplit keys, for at_db_get_result */
    if (s == AT_OK && (!dev || !hash || !cfg || !recs || !full))
        s = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    if (s == AT_OK && n == 0)
        s = at_fail(AT_ERR_NOT_FOUND, "no results for problem '%s'%s%s%s in %s", problem,
                    device ? " on device '" : "", device ? device : "", device ? "'" : "",
                    at_db_path(db));
    /* Keep the results of the requested template (all when thash is NULL). */
    size_t m = 0;
    for (size_t i = 0; s == AT_OK && i < n; i++) {
        if (!(full[m] = at_strdup(keys[i]))) {
            s = at_fail(AT_ERR_NO_MEMORY, "out of memory");
            break;
        }
        if (split_key(keys[i], &dev[m], &hash[m], &cfg[m]) != 0) {
            s = at_fail(AT_ERR_DB_CORRUPT, "malformed results key '%s'", full[m]);
            free(full[m]);
            full[m] = NULL;
            break;
        }
        if (thash && strcmp(hash[m], thash) != 0) {
            free(full[m]);
            continue;
        }
        m++;
    }
    if (s == AT_OK && m == 0)
        s = at_fail(AT_ERR_NOT_FOUND, "no results for problem '%s' with template hash '%s' in %s",
                    problem, thash, at_db_path(db));
    /* One device and one template version per file: a space is one kernel on one device. */
    for (int field = 0; s == AT_OK && field < 2; field++) {
        int many = 0;
        for (size_t i = 1; i < m && !many; i++)
            many = strcmp(field ? hash[i] : dev[i], field ? hash[0] : dev[0]) != 0;
        if (!many) continue;
        char *list = distinct(dev, hash, m, field);
        s = at_fail(AT_ERR_INVALID_ARG,
                    "results of problem '%s' come from several %s (%s); pick one with %s", problem,
                    field ? "template versions" : "devices", list ? list : "?",
                    field ? "--template HASH" : "--device KEY");
        free(list);
    }
    for (size_t i = 0; s == AT_OK && i < m; i++) s = at_db_get_result(db, full[i], &recs[i]);

    tbuf b = {0};
    if (s == AT_OK) s = write_cache(&b, problem, dev[0], cfg, recs, m);
    if (s == AT_OK) {
        FILE *f = out_path ? fopen(out_path, "wb") : stdout;
        if (!f) {
            s = at_fail(AT_ERR_IO, "cannot write %s: %s", out_path, strerror(errno));
        } else {
            int bad = fwrite(b.p, 1, b.len, f) != b.len;
            bad |= out_path ? fclose(f) != 0 : fflush(f) != 0;
            if (bad) s = at_fail(AT_ERR_IO, "cannot write %s", out_path ? out_path : "stdout");
        }
    }
    free(b.p);
    at_db_keys_free(keys, n);
    for (size_t i = 0; i < m && full; i++) free(full[i]);
    free(dev);
    free(hash);
    free(cfg);
    free(recs);
    free(full);
    return s;
}

at_status at_db_export_kernel_tuner(const char *path, const char *problem, const char *device,
                                    const char *template_hash, const char *out_path, char *why,
                                    size_t whylen)
{
    at_db *db = NULL;
    char *def = path ? NULL : at_db_default_path();
    at_status s = at_db_open(path ? path : def, 1, &db);
    if (s == AT_OK) s = export_kt(db, problem, device, template_hash, out_path);
    if (s != AT_OK && why) snprintf(why, whylen, "%s", at_errmsg());
    at_db_close(db);
    free(def);
    return s;
}
