/* kt_export.c — writes one problem's measurements from the results table as a Kernel Tuner
 * cache JSON file, so recorded spaces replay in Kernel Tuner's simulation mode and in
 * `autotune replay`. */
#define _GNU_SOURCE
#include "db.h"

#include "base/sbuf.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- JSON text ------------------------------------------------------------------------------ */

static void json_str(at_sbuf *b, const char *s)
{
    at_sb_putc(b, '"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            at_sb_printf(b, "\\%c", c);
        else if (c < 0x20)
            at_sb_printf(b, "\\u%04x", c);
        else
            at_sb_putc(b, (char)c);
    }
    at_sb_putc(b, '"');
}

/* A parameter value: a JSON number when the text is a whole integer, else a JSON string. */
static void json_value(at_sbuf *b, const char *v)
{
    int64_t x;
    if (at_parse_i64(v, INT64_MIN, INT64_MAX, &x) == 0)
        at_sb_printf(b, "%" PRId64, x);
    else
        json_str(b, v);
}

/* ---- the selected results ------------------------------------------------------------------ */

#define MAX_PARAMS 64

/* A result selected for the export: its key's parts, its config split into names and values
 * (in cfg, owned), its record (in the array at_db_results gave). */
typedef struct selected {
    at_result_key k;
    char *cfg;
    int n;
    char *name[MAX_PARAMS], *value[MAX_PARAMS];
    const at_result_rec *rec;
} selected;

/* The device (field 0) or template hash (field 1) of a selected result's key. */
static at_key_part part_of(const selected *e, int field)
{
    return field ? e->k.thash : e->k.device;
}

/* The distinct values of field among the selected results, quoted and comma-separated. */
static char *distinct(const selected *v, size_t n, int field)
{
    at_sbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        at_key_part x = part_of(&v[i], field);
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++) seen = at_key_part_eq(part_of(&v[j], field), x);
        if (!seen) at_sb_printf(&b, "%s'%.*s'", b.n ? ", " : "", (int)x.n, x.s);
    }
    return at_sb_take(&b);
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

/* ---- config values ------------------------------------------------------------------------ */

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

static at_status write_cache(at_sbuf *b, const char *problem, const char *device, const selected *v,
                             size_t n)
{
    const char **vals = calloc(n, sizeof *vals);
    if (!vals) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    const selected *c0 = &v[0];
    char op[64] = "";
    snprintf(op, sizeof op, "%.*s", (int)strcspn(problem, "/"), problem);
    at_sb_printf(b, "{\n\"device_name\": ");
    json_str(b, device);
    at_sb_printf(b, ",\n\"kernel_name\": ");
    json_str(b, op);
    /* problem_size: the numbers of the shape segment ("256x256x256"), else the whole key. */
    const char *shape = strrchr(problem, '/');
    shape = shape ? shape + 1 : problem;
    at_sb_printf(b, ",\n\"problem_size\": [");
    int sized = shape[strspn(shape, "0123456789x")] == '\0' && *shape;
    if (sized) {
        const char *q = shape;
        for (int first = 1; *q; first = 0) {
            size_t len = strcspn(q, "x");
            at_sb_printf(b, "%s%.*s", first ? "" : ", ", (int)len, q);
            q += len + (q[len] == 'x');
        }
    } else {
        json_str(b, problem);
    }
    at_sb_printf(b, "],\n\"problem\": ");
    json_str(b, problem);
    at_sb_printf(b, ",\n\"tune_params_keys\": [");
    for (int p = 0; p < c0->n; p++) {
        at_sb_printf(b, "%s", p ? ", " : "");
        json_str(b, c0->name[p]);
    }
    at_sb_printf(b, "],\n\"tune_params\": {");
    for (int p = 0; p < c0->n; p++) {
        for (size_t i = 0; i < n; i++) vals[i] = v[i].value[p];
        qsort(vals, n, sizeof *vals, cmp_value);
        at_sb_printf(b, "%s\n", p ? "," : "");
        json_str(b, c0->name[p]);
        at_sb_printf(b, ": [");
        for (size_t i = 0, k = 0; i < n; i++) {
            if (i && strcmp(vals[i], vals[i - 1]) == 0) continue;
            at_sb_printf(b, "%s", k++ ? ", " : "");
            json_value(b, vals[i]);
        }
        at_sb_printf(b, "]");
    }
    at_sb_printf(b, "\n},\n\"objective\": \"time\",\n\"objective_higher_is_better\": false,\n"
                    "\"cache\": {");
    for (size_t i = 0; i < n; i++) {
        const selected *c = &v[i];
        const at_result_rec *r = c->rec;
        at_sb_printf(b, "%s\n\"", i ? "," : "");
        for (int p = 0; p < c->n; p++) at_sb_printf(b, "%s%s", p ? "," : "", c->value[p]);
        at_sb_printf(b, "\": {");
        for (int p = 0; p < c->n; p++) {
            json_str(b, c->name[p]);
            at_sb_printf(b, ": ");
            json_value(b, c->value[p]);
            at_sb_printf(b, ", ");
        }
        /* Times in ms, as Kernel Tuner writes them. We keep the median, not every repetition. */
        int ok = r->status == AT_RS_OK && isfinite(r->median_us) && r->median_us > 0;
        if (ok)
            at_sb_printf(b, "\"time\": %.9g, \"times\": [%.9g]", r->median_us / 1e3,
                         r->median_us / 1e3);
        else
            at_sb_printf(b, "\"time\": \"%s\"", kt_failure(r->status));
        double bench_ms = ok ? r->median_us / 1e3 * (double)(r->reps > 0 ? r->reps : 1) : 0;
        char when[32] = "";
        time_t t = (time_t)r->when;
        struct tm tm;
        if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S+00:00", &tm);
        at_sb_printf(b,
                     ", \"compile_time\": %.6g, \"verification_time\": 0, \"benchmark_time\": "
                     "%.6g, \"strategy_time\": 0, \"framework_time\": 0, \"timestamp\": \"%s\", "
                     "\"status\": \"%s\"",
                     r->compile_ms, bench_ms, when, at_result_status_name(r->status));
        if (!ok && r->reason[0]) {
            at_sb_printf(b, ", \"reason\": ");
            json_str(b, r->reason);
        }
        at_sb_printf(b, "}");
    }
    at_sb_printf(b, "\n}\n}\n");
    free(vals);
    return b->oom ? at_fail(AT_ERR_NO_MEMORY, "out of memory") : AT_OK;
}

typedef enum { SEL_KEEP, SEL_OTHER, SEL_SKIP } sel_result;

/* Splits the result at key into e: SEL_KEEP; SEL_OTHER when it is of another template version
 * than thash (NULL: any); SEL_SKIP with *why when it cannot be exported (damaged). A failure
 * that ends the export goes to *s. */
static sel_result select_one(const char *key, const char *thash, selected *e, const char **why,
                             at_status *s)
{
    *why = NULL;
    if (at_result_key_split(key, &e->k) != AT_OK)
        *why = at_errmsg();
    else if (thash && !at_key_part_is(e->k.thash, thash))
        return SEL_OTHER;
    else if (at_key_part_shortened(e->k.config))
        *why = "its config was shortened to fit the key";
    if (*why) return SEL_SKIP;
    if (!(e->cfg = at_key_part_dup(e->k.config))) {
        *s = at_fail(AT_ERR_NO_MEMORY, "out of memory");
        return SEL_OTHER;
    }
    e->n = at_config_split(e->cfg, e->name, e->value, MAX_PARAMS);
    if (e->n < 0) *why = "malformed config";
    return *why ? SEL_SKIP : SEL_KEEP;
}

/* 1 when e names the same parameters as first, in the same order. */
static int same_params(const selected *e, const selected *first)
{
    if (e->n != first->n) return 0;
    for (int p = 0; p < e->n; p++)
        if (strcmp(e->name[p], first->name[p]) != 0) return 0;
    return 1;
}

static at_status export_kt(at_db *db, const char *problem, const char *device, const char *thash,
                           const char *out_path)
{
    if (!problem || !*problem || strchr(problem, AT_KEY_SEP))
        return at_fail(AT_ERR_INVALID_ARG, "a problem key is needed, e.g. gemm/f32/nn/256x256x256");
    char **keys = NULL;
    at_result_rec *recs = NULL;
    size_t n = 0;
    char *prefix = at_db_results_prefix(problem, device, NULL);
    at_status s = prefix ? at_db_results(db, prefix, &keys, &recs, &n) : AT_ERR_INVALID_ARG;
    free(prefix);
    selected *v = calloc(n + 1, sizeof *v);
    if (s == AT_OK && !v) s = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    if (s == AT_OK && n == 0)
        s = at_fail(AT_ERR_NOT_FOUND, "no results for problem '%s'%s%s%s in %s", problem,
                    device ? " on device '" : "", device ? device : "", device ? "'" : "",
                    at_db_path(db));
    /* Keep the results of the requested template (all when thash is NULL) that can be read;
     * a damaged one is skipped and counted (at_db_skipped), not the end of the export (a record
     * that does not parse by at_db_results, a key or config that does not split here). */
    size_t m = 0, damaged = 0;
    for (size_t i = 0; s == AT_OK && i < n; i++) {
        selected *e = &v[m];
        const char *why;
        sel_result r = select_one(keys[i], thash, e, &why, &s);
        if (r == SEL_KEEP && s == AT_OK && m && !same_params(e, &v[0])) {
            r = SEL_SKIP;
            why = "its config names other parameters than the rest";
        }
        if (r == SEL_SKIP) {
            at_db_skip(db, "results", keys[i], why);
            damaged++;
        }
        if (r == SEL_KEEP && s == AT_OK) {
            e->rec = &recs[i];
            m++;
        } else {
            free(e->cfg);
            e->cfg = NULL;
        }
    }
    if (s == AT_OK && m == 0 && thash && !damaged)
        s = at_fail(AT_ERR_NOT_FOUND, "no results for problem '%s' with template hash '%s' in %s",
                    problem, thash, at_db_path(db));
    else if (s == AT_OK && m == 0)
        s = at_fail(AT_ERR_NOT_FOUND,
                    "no readable results for problem '%s' in %s (%zu skipped as damaged)", problem,
                    at_db_path(db), damaged);
    /* One device and one template version per file: a space is one kernel on one device. */
    for (int field = 0; s == AT_OK && field < 2; field++) {
        int many = 0;
        for (size_t i = 1; i < m && !many; i++)
            many = !at_key_part_eq(part_of(&v[i], field), part_of(&v[0], field));
        if (!many) continue;
        char *list = distinct(v, m, field);
        s = at_fail(AT_ERR_INVALID_ARG,
                    "results of problem '%s' come from several %s (%s); pick one with %s", problem,
                    field ? "template versions" : "devices", list ? list : "?",
                    field ? "--template HASH" : "--device KEY");
        free(list);
    }

    at_sbuf b = {0};
    char *dev = s == AT_OK ? at_key_part_dup(v[0].k.device) : NULL;
    if (s == AT_OK && !dev) s = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    if (s == AT_OK) s = write_cache(&b, problem, dev, v, m);
    if (s == AT_OK) {
        FILE *f = out_path ? fopen(out_path, "wb") : stdout;
        if (!f) {
            s = at_fail(AT_ERR_IO, "cannot write %s: %s", out_path, strerror(errno));
        } else {
            int bad = fwrite(b.p, 1, b.n, f) != b.n;
            bad |= out_path ? fclose(f) != 0 : fflush(f) != 0;
            if (bad) s = at_fail(AT_ERR_IO, "cannot write %s", out_path ? out_path : "stdout");
        }
    }
    at_sb_free(&b);
    free(dev);
    at_db_keys_free(keys, n);
    free(recs);
    for (size_t i = 0; i < m; i++) free(v ? v[i].cfg : NULL);
    free(v);
    return s;
}

typedef struct export_args {
    const char *problem, *device, *thash, *out_path;
} export_args;

static at_status export_in(at_db *db, void *arg)
{
    const export_args *a = arg;
    return export_kt(db, a->problem, a->device, a->thash, a->out_path);
}

at_status at_db_export_kernel_tuner(const char *path, const char *problem, const char *device,
                                    const char *template_hash, const char *out_path, char *why,
                                    size_t whylen)
{
    export_args a = {problem, device, template_hash, out_path};
    return at_db_read(path, export_in, &a, why, whylen);
}
