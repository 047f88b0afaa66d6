/* bundle.c — the portable bundle (bundle.h, docs/shipping.md): a database's records with their
 * identities as JSON Lines in a gzip stream (zlib's gz* calls, cJSON), read back whole and
 * checked before one write transaction applies them by the conflict rule; counts per operation,
 * device and template; bundle layers imported once into a private copy under the cache. */
#define _GNU_SOURCE
#include "cache/bundle.h"

#include "base/sbuf.h"

#include <cJSON.h>

#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

enum { K_RESULT, K_BEST, K_DEVICE };
static const char *const k_kind_table[] = {"results", "best", "devices"};

/* ---- a database's records, with their identity ------------------------------------------ */

typedef struct kv {
    char *key, *value;
} kv;

typedef struct kv_list {
    kv *v;
    size_t n, cap;
    int oom;
} kv_list;

static int kv_add(void *user, const char *key, const char *value)
{
    kv_list *l = user;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        kv *v = realloc(l->v, cap * sizeof *v);
        if (!v) return l->oom = 1;
        l->v = v;
        l->cap = cap;
    }
    kv *e = &l->v[l->n];
    e->key = at_strdup(key);
    e->value = at_strdup(value);
    if (!e->key || !e->value) {
        free(e->key);
        free(e->value);
        return l->oom = 1;
    }
    l->n++;
    return 0;
}

static void kv_free(kv_list *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->v[i].key), free(l->v[i].value);
    free(l->v);
    *l = (kv_list){0};
}

static int kv_cmp(const void *key, const void *e) { return strcmp(key, ((const kv *)e)->key); }

/* The value at key in a list a scan filled (in key order: LMDB's byte order is strcmp's). */
static const char *kv_find(const kv_list *l, const char *key)
{
    const kv *e = l->n ? bsearch(key, l->v, l->n, sizeof *l->v, kv_cmp) : NULL;
    return e ? e->value : NULL;
}

/* One result or best entry of a database as a bundle line holds it. */
typedef struct item {
    int kind;
    const char *op; /* the problem's first part, NUL-terminated in opbuf */
    char opbuf[64];
    char *problem, *device, *thash, *config; /* the key's parts */
    at_device_rec dev;
    int dev_stored;  /* dev is the devices table's record (else what the key says) */
    char tname[64];  /* the template's name, "" unknown */
    at_result_rec r; /* K_RESULT */
    at_best_rec b;   /* K_BEST */
} item;

typedef struct walk_ctx {
    at_db *db;
    kv_list devices, best, results;
} walk_ctx;

static void item_clear(item *it)
{
    free(it->problem), free(it->device), free(it->thash), free(it->config);
    it->problem = it->device = it->thash = it->config = NULL;
}

/* The identity of device (a key's device part): its record, else what the key says. */
static void identity(const walk_ctx *w, item *it)
{
    const char *v = kv_find(&w->devices, it->device);
    it->dev_stored = v && at_device_rec_parse(v, strlen(v), &it->dev) == AT_OK;
    if (!it->dev_stored) at_device_rec_from_key(it->device, &it->dev);
}

/* Fills it from the entry key = value of kind; 0 when its key does not split (skipped). */
static int item_make(const walk_ctx *w, int kind, const char *key, const char *value, item *it)
{
    memset(it, 0, sizeof *it);
    it->kind = kind;
    at_key_part parts[4];
    int np = kind == K_RESULT ? 4 : 2;
    at_status s;
    if (kind == K_RESULT) {
        at_result_key k;
        s = at_result_key_split(key, &k);
        parts[0] = k.problem, parts[1] = k.device, parts[2] = k.thash, parts[3] = k.config;
        if (s == AT_OK) s = at_result_rec_parse(value, strlen(value), &it->r);
    } else {
        at_best_key k;
        s = at_best_key_split(key, &k);
        parts[0] = k.problem, parts[1] = k.device;
        if (s == AT_OK) s = at_best_rec_parse(value, strlen(value), &it->b);
    }
    if (s != AT_OK) {
        at_db_skip(w->db, k_kind_table[kind], key, at_errmsg());
        return 0;
    }
    char **dst[4] = {&it->problem, &it->device, &it->thash, &it->config};
    for (int i = 0; i < np; i++)
        if (!(*dst[i] = at_key_part_dup(parts[i]))) return -1;
    snprintf(it->opbuf, sizeof it->opbuf, "%.*s", (int)strcspn(it->problem, "/"), it->problem);
    it->op = it->opbuf;
    identity(w, it);
    if (kind == K_BEST) {
        snprintf(it->tname, sizeof it->tname, "%s", it->b.template_name);
        return 1;
    }
    snprintf(it->tname, sizeof it->tname, "%s", it->r.template_name);
    if (!it->tname[0]) { /* older results: the name of the best entry tuned with this hash */
        char *bkey = at_asprintf("%s|%s", it->problem, it->device);
        const char *bv = bkey ? kv_find(&w->best, bkey) : NULL;
        at_best_rec b;
        if (bv && at_best_rec_parse(bv, strlen(bv), &b) == AT_OK &&
            strcmp(b.template_hash, it->thash) == 0)
            snprintf(it->tname, sizeof it->tname, "%s", b.template_name);
        free(bkey);
    }
    return 1;
}

typedef at_status (*item_fn)(void *user, const item *it); /* a failure stops the walk */

/* Calls fn for db's results (unless best_only), then its best entries, each in key order. */
static at_status walk(at_db *db, int best_only, item_fn fn, void *user)
{
    walk_ctx w = {db, {0}, {0}, {0}};
    at_status s = at_db_scan(db, "devices", NULL, kv_add, &w.devices);
    if (s == AT_OK) s = at_db_scan(db, "best", NULL, kv_add, &w.best);
    if (s == AT_OK && !best_only) s = at_db_scan(db, "results", NULL, kv_add, &w.results);
    if (s == AT_OK && (w.devices.oom || w.best.oom || w.results.oom))
        s = at_fail(AT_ERR_NO_MEMORY, "out of memory reading %s", at_db_path(db));
    const kv_list *lists[2] = {&w.results, &w.best};
    for (int k = 0; k < 2 && s == AT_OK; k++)
        for (size_t i = 0; i < lists[k]->n && s == AT_OK; i++) {
            item it;
            int made = item_make(&w, k, lists[k]->v[i].key, lists[k]->v[i].value, &it);
            if (made < 0) s = at_fail(AT_ERR_NO_MEMORY, "out of memory");
            if (made > 0) s = fn(user, &it);
            item_clear(&it);
        }
    kv_free(&w.devices), kv_free(&w.best), kv_free(&w.results);
    return s;
}

/* ---- an item as JSON ---------------------------------------------------------------------- */

/* A number in the fewest digits that read back as the same double (cJSON's own printing may
 * lose the last bit); JSON has none for NaN and infinities, so those are strings ("nan",
 * "inf"). */
static void add_num(cJSON *o, const char *name, double v)
{
    if (!isfinite(v)) {
        cJSON_AddStringToObject(o, name, isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
        return;
    }
    char buf[40];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) break;
    }
    cJSON_AddRawToObject(o, name, buf);
}

static cJSON *item_json(const item *it)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "table", it->kind == K_RESULT ? "result" : "best");
    cJSON_AddStringToObject(o, "op", it->op);
    cJSON_AddStringToObject(o, "problem", it->problem);
    cJSON *d = cJSON_AddObjectToObject(o, "device");
    const at_device_rec *r = &it->dev;
    if (d) {
        cJSON_AddStringToObject(d, "key", it->device);
        cJSON_AddStringToObject(d, "backend", r->backend);
        cJSON_AddStringToObject(d, "name", r->name);
        cJSON_AddStringToObject(d, "vendor", r->vendor);
        cJSON_AddStringToObject(d, "arch", r->arch);
        cJSON_AddStringToObject(d, "family", r->family);
        add_num(d, "units", (double)r->units);
        cJSON_AddStringToObject(d, "driver", r->driver);
        cJSON_AddStringToObject(d, "compiler", r->compiler);
        if (it->dev_stored) add_num(d, "when", (double)r->when); /* a devices record */
    }
    cJSON *t = cJSON_AddObjectToObject(o, "template");
    if (t) {
        cJSON_AddStringToObject(t, "name", it->tname);
        cJSON_AddStringToObject(t, "hash", it->kind == K_RESULT ? it->thash : it->b.template_hash);
    }
    if (it->kind == K_RESULT) {
        const at_result_rec *x = &it->r;
        cJSON_AddStringToObject(o, "config", it->config);
        cJSON_AddStringToObject(o, "status", at_result_status_name(x->status));
        add_num(o, "median_us", x->median_us);
        add_num(o, "min_us", x->min_us);
        add_num(o, "max_us", x->max_us);
        add_num(o, "reps", (double)x->reps);
        add_num(o, "early_stop", x->early_stop);
        add_num(o, "err", x->max_rel_error);
        add_num(o, "compile_ms", x->compile_ms);
        add_num(o, "when", (double)x->when);
        cJSON_AddStringToObject(o, "reason", x->reason);
    } else {
        const at_best_rec *x = &it->b;
        cJSON_AddStringToObject(o, "config", x->config);
        add_num(o, "time_us", x->time_us);
        add_num(o, "gflops", x->gflops);
        add_num(o, "err", x->max_rel_error);
        add_num(o, "when", (double)x->when);
        add_num(o, "space", (double)x->space);
        cJSON_AddStringToObject(o, "compiler", x->compiler);
        cJSON_AddStringToObject(o, "driver", x->driver);
    }
    return o;
}

/* ---- export ------------------------------------------------------------------------------- */

typedef struct export_ctx {
    const at_bundle_filter *f;
    at_sbuf lines;
    int64_t n;
} export_ctx;

static int selected(const at_bundle_filter *f, const item *it)
{
    if (!f) return 1;
    if (f->op && strcmp(f->op, it->op) != 0) return 0;
    if (f->device && fnmatch(f->device, it->device, 0) != 0 &&
        fnmatch(f->device, it->dev.name, 0) != 0)
        return 0;
    return 1;
}

/* The bundle line of an item (no newline), malloc'd; NULL when out of memory. */
static char *item_line(const item *it)
{
    cJSON *o = item_json(it);
    char *line = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return line;
}

static at_status export_one(void *user, const item *it)
{
    export_ctx *c = user;
    if (!selected(c->f, it)) return AT_OK;
    char *line = item_line(it);
    if (line) at_sb_puts(&c->lines, line);
    at_sb_putc(&c->lines, '\n');
    free(line);
    c->n++;
    return line && !c->lines.oom ? AT_OK : at_fail(AT_ERR_NO_MEMORY, "out of memory");
}

/* Writes len bytes of text as a gzip stream to path ("-": stdout), through a temporary file
 * renamed into place, so a failed write leaves no half file. */
static at_status gz_write(const char *path, const char *text, size_t len)
{
    int out = strcmp(path, "-") == 0;
    char *tmp = out ? NULL : at_asprintf("%s.tmp-%ld", path, (long)getpid());
    if (!out && !tmp) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    int fd = out ? dup(STDOUT_FILENO) : -1;
    gzFile gz = out ? (fd >= 0 ? gzdopen(fd, "wb") : NULL) : gzopen(tmp, "wb");
    if (!gz) {
        at_status s = at_fail(AT_ERR_IO, "cannot write %s: %s", out ? "stdout" : path,
                              strerror(errno ? errno : ENOMEM));
        if (fd >= 0) close(fd);
        free(tmp);
        return s;
    }
    int bad = 0;
    for (size_t off = 0; off < len && !bad;) {
        unsigned chunk = len - off > (1u << 30) ? 1u << 30 : (unsigned)(len - off);
        int w = gzwrite(gz, text + off, chunk);
        bad = w <= 0;
        off += w > 0 ? (size_t)w : 0;
    }
    int err = 0;
    const char *msg = bad ? gzerror(gz, &err) : NULL;
    char why[256];
    snprintf(why, sizeof why, "%s", err == Z_ERRNO ? strerror(errno) : msg ? msg : "");
    if (gzclose(gz) != Z_OK && !bad) {
        bad = 1;
        snprintf(why, sizeof why, "%s", strerror(errno));
    }
    at_status s = AT_OK;
    if (!bad && !out && rename(tmp, path) != 0) {
        bad = 1;
        snprintf(why, sizeof why, "%s", strerror(errno));
    }
    if (bad) {
        s = at_fail(AT_ERR_IO, "cannot write %s: %s", out ? "stdout" : path, why);
        if (tmp) unlink(tmp);
    }
    free(tmp);
    return s;
}

at_status at_bundle_export(at_db *db, const at_bundle_filter *f, const char *out_path,
                           int64_t *records)
{
    if (!db || !out_path) return at_fail(AT_ERR_INVALID_ARG, "at_bundle_export: NULL argument");
    export_ctx c = {f, {0}, 0};
    at_status s = walk(db, f && f->best_only, export_one, &c);
    at_sbuf all = {0};
    if (s == AT_OK) {
        at_sb_printf(&all,
                     "{\"format\":\"%s\",\"version\":%d,\"producer\":\"autotune %s\","
                     "\"created\":%lld,\"records\":%lld}\n",
                     AT_BUNDLE_FORMAT, AT_BUNDLE_VERSION, AT_VERSION_STRING,
                     (long long)at_unix_time(), (long long)c.n);
        at_sb_put(&all, c.lines.p ? c.lines.p : "", c.lines.n);
        if (all.oom || c.lines.oom) s = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    if (s == AT_OK) s = gz_write(out_path, all.p, all.n);
    if (s == AT_OK && records) *records = c.n;
    at_sb_free(&all);
    at_sb_free(&c.lines);
    return s;
}

/* ---- reading: records to write ------------------------------------------------------------ */

typedef struct entry {
    int kind;
    char *key, *text; /* the table's key and the record's text */
} entry;

struct at_bundle_set {
    entry *e;
    size_t n, cap;
};

void at_bundle_set_free(at_bundle_set *set)
{
    if (!set) return;
    for (size_t i = 0; i < set->n; i++) free(set->e[i].key), free(set->e[i].text);
    free(set->e);
    free(set);
}

/* Adds an entry taking key and text (freed on failure). */
static at_status set_add(at_bundle_set *set, int kind, char *key, char *text)
{
    if (key && text && set->n == set->cap) {
        size_t cap = set->cap ? 2 * set->cap : 1024;
        entry *e = realloc(set->e, cap * sizeof *e);
        if (e) set->e = e, set->cap = cap;
    }
    if (!key || !text || set->n == set->cap) {
        free(key), free(text);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    set->e[set->n++] = (entry){kind, key, text};
    return AT_OK;
}

/* Field readers: the message names the field; the caller adds where. */
#define bad(...) at_fail(AT_ERR_INVALID_ARG, __VA_ARGS__)

static at_status get_str(const cJSON *o, const char *name, int required, const char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    *out = "";
    if (!v && required) return bad("required field '%s' is missing", name);
    if (!v) return AT_OK;
    if (!cJSON_IsString(v) || !v->valuestring) return bad("field '%s' is not a string", name);
    if (required && !*v->valuestring) return bad("field '%s' is empty", name);
    *out = v->valuestring;
    return AT_OK;
}

static at_status copy_str(const cJSON *o, const char *name, int required, char *out, size_t cap)
{
    const char *v;
    AT_TRY(get_str(o, name, required, &v));
    if (strlen(v) >= cap) return bad("field '%s' is longer than %zu bytes", name, cap - 1);
    memcpy(out, v, strlen(v) + 1);
    return AT_OK;
}

/* A number (or "nan", "inf", "-inf"); 0 when absent. */
static at_status get_num(const cJSON *o, const char *name, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    *out = 0;
    if (!v) return AT_OK;
    if (cJSON_IsNumber(v)) return *out = v->valuedouble, AT_OK;
    const char *s = cJSON_IsString(v) ? v->valuestring : NULL;
    if (s && strcmp(s, "nan") == 0) return *out = NAN, AT_OK;
    if (s && strcmp(s, "inf") == 0) return *out = INFINITY, AT_OK;
    if (s && strcmp(s, "-inf") == 0) return *out = -INFINITY, AT_OK;
    return bad("field '%s' is not a number", name);
}

/* An integer from lo to hi; 0 when absent. */
static at_status get_int(const cJSON *o, const char *name, int64_t lo, int64_t hi, int64_t *out)
{
    double d;
    AT_TRY(get_num(o, name, &d));
    if (!(d >= (double)lo && d <= (double)hi) || d != floor(d))
        return bad("field '%s' is not an integer from %lld to %lld", name, (long long)lo,
                   (long long)hi);
    *out = (int64_t)d;
    return AT_OK;
}

/* The text of a record of kind, checked to read back as the table's reader reads it. */
static at_status record_text(int kind, const void *rec, char **out)
{
    at_sbuf b = {0};
    if (kind == K_RESULT) at_result_rec_append(&b, rec);
    if (kind == K_BEST) at_best_rec_append(&b, rec);
    if (kind == K_DEVICE) at_device_rec_append(&b, rec);
    if (b.oom) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    union {
        at_result_rec r;
        at_best_rec b;
        at_device_rec d;
    } back;
    at_status s = kind == K_RESULT ? at_result_rec_parse(b.p, b.n, &back.r)
                  : kind == K_BEST ? at_best_rec_parse(b.p, b.n, &back.b)
                                   : at_device_rec_parse(b.p, b.n, &back.d);
    if (s != AT_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", at_errmsg());
        at_sb_free(&b);
        return bad("a value that cannot be stored (%s)", why);
    }
    *out = at_sb_take(&b);
    return *out ? AT_OK : at_fail(AT_ERR_NO_MEMORY, "out of memory");
}

/* The device object of a record line: its key in *key; a devices record into set when it
 * carries one (its "when"). */
static at_status parse_device(const cJSON *o, at_bundle_set *set, const char **key)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "device");
    if (!d) return bad("required field 'device' is missing");
    if (!cJSON_IsObject(d)) return bad("field 'device' is not an object");
    at_device_rec r = {0};
    AT_TRY(get_str(d, "key", 1, key));
    at_status s = copy_str(d, "backend", 1, r.backend, sizeof r.backend);
    if (s == AT_OK) s = copy_str(d, "name", 1, r.name, sizeof r.name);
    if (s == AT_OK) s = copy_str(d, "vendor", 0, r.vendor, sizeof r.vendor);
    if (s == AT_OK) s = copy_str(d, "arch", 0, r.arch, sizeof r.arch);
    if (s == AT_OK) s = copy_str(d, "family", 0, r.family, sizeof r.family);
    if (s == AT_OK) s = get_int(d, "units", 0, INT64_MAX, &r.units);
    if (s == AT_OK) s = copy_str(d, "driver", 0, r.driver, sizeof r.driver);
    if (s == AT_OK) s = copy_str(d, "compiler", 0, r.compiler, sizeof r.compiler);
    if (s == AT_OK) s = get_int(d, "when", INT64_MIN / 2, INT64_MAX / 2, &r.when);
    if (s != AT_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", at_errmsg());
        return bad("device: %s", why);
    }
    if (!cJSON_GetObjectItemCaseSensitive(d, "when")) return AT_OK; /* identity from the key */
    char *k = at_db_device_key(*key), *text = NULL;
    if (!k) return bad("device: %s", at_errmsg());
    s = record_text(K_DEVICE, &r, &text);
    if (s != AT_OK) {
        free(k);
        return s;
    }
    return set_add(set, K_DEVICE, k, text);
}

/* A record line (JSON object o) into set. */
static at_status parse_record(const cJSON *o, const at_bundle_hooks *h, at_bundle_set *set)
{
    if (!cJSON_IsObject(o)) return bad("not a JSON object");
    const char *table, *op, *problem, *dkey, *config, *hash;
    AT_TRY(get_str(o, "table", 1, &table));
    int kind = strcmp(table, "result") == 0 ? K_RESULT : strcmp(table, "best") == 0 ? K_BEST : -1;
    if (kind < 0) return bad("unknown table '%s' (result, best)", table);
    AT_TRY(get_str(o, "op", 1, &op));
    AT_TRY(get_str(o, "problem", 1, &problem));
    if (strncmp(problem, op, strlen(op)) != 0 || problem[strlen(op)] != '/')
        return bad("the problem '%s' is not of operation '%s'", problem, op);
    if (h && h->known_op && !h->known_op(h->user, op))
        return bad("a record of operation '%s', which this autotune does not know", op);
    AT_TRY(parse_device(o, set, &dkey));
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "template");
    if (!t) return bad("required field 'template' is missing");
    if (!cJSON_IsObject(t)) return bad("field 'template' is not an object");
    char tname[64];
    AT_TRY(copy_str(t, "name", 0, tname, sizeof tname));
    AT_TRY(get_str(t, "hash", 1, &hash));
    AT_TRY(get_str(o, "config", 1, &config));
    char *key = NULL, *text = NULL;
    at_status s = AT_OK;
    if (kind == K_RESULT) {
        at_result_rec r = {0};
        const char *status;
        AT_TRY(get_str(o, "status", 1, &status));
        int code = at_result_status_parse(status);
        if (code < 0) return bad("unknown status '%s'", status);
        r.status = (at_result_status)code;
        int64_t early = 0;
        s = get_num(o, "median_us", &r.median_us);
        if (s == AT_OK) s = get_num(o, "min_us", &r.min_us);
        if (s == AT_OK) s = get_num(o, "max_us", &r.max_us);
        if (s == AT_OK) s = get_int(o, "reps", 0, INT64_MAX / 2, &r.reps);
        if (s == AT_OK) s = get_int(o, "early_stop", 0, 1, &early);
        if (s == AT_OK) s = get_num(o, "err", &r.max_rel_error);
        if (s == AT_OK) s = get_num(o, "compile_ms", &r.compile_ms);
        if (s == AT_OK) s = get_int(o, "when", INT64_MIN / 2, INT64_MAX / 2, &r.when);
        if (s == AT_OK) s = copy_str(o, "reason", 0, r.reason, sizeof r.reason);
        AT_TRY(s);
        r.early_stop = (int)early;
        snprintf(r.template_name, sizeof r.template_name, "%s", tname);
        AT_TRY(record_text(K_RESULT, &r, &text));
        key = at_db_result_key(problem, dkey, hash, config);
    } else {
        at_best_rec b = {0};
        s = copy_str(o, "config", 1, b.config, sizeof b.config);
        if (s == AT_OK && strlen(hash) >= sizeof b.template_hash)
            s = bad("field 'hash' is longer than %zu bytes", sizeof b.template_hash - 1);
        if (s == AT_OK) snprintf(b.template_hash, sizeof b.template_hash, "%s", hash);
        if (s == AT_OK) s = get_num(o, "time_us", &b.time_us);
        if (s == AT_OK) s = get_num(o, "gflops", &b.gflops);
        if (s == AT_OK) s = get_num(o, "err", &b.max_rel_error);
        if (s == AT_OK) s = get_int(o, "when", INT64_MIN / 2, INT64_MAX / 2, &b.when);
        if (s == AT_OK) s = get_int(o, "space", 0, INT64_MAX / 2, &b.space);
        if (s == AT_OK) s = copy_str(o, "compiler", 0, b.compiler, sizeof b.compiler);
        if (s == AT_OK) s = copy_str(o, "driver", 0, b.driver, sizeof b.driver);
        AT_TRY(s);
        snprintf(b.template_name, sizeof b.template_name, "%s", tname);
        AT_TRY(record_text(K_BEST, &b, &text));
        key = at_db_best_key(problem, dkey);
    }
    if (!key) {
        char why[512];
        snprintf(why, sizeof why, "%s", at_errmsg());
        free(text);
        return bad("%s", why);
    }
    return set_add(set, kind, key, text);
}

/* A bundle's line number lineno (1: the header) of len bytes. */
typedef struct reader {
    const char *name; /* the file, for messages */
    const at_bundle_hooks *h;
    at_bundle_set *set;
    size_t line;
    int64_t declared; /* the header's record count */
} reader;

/* The JSON value that is the whole of text[0..len) (spaces around it aside); NULL if none. */
static cJSON *parse_whole(const char *text, size_t len)
{
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    while (o && end < text + len && (*end == ' ' || *end == '\t' || *end == '\r')) end++;
    if (o && end != text + len) {
        cJSON_Delete(o);
        o = NULL;
    }
    return o;
}

static at_status read_line(reader *r, const char *text, size_t len)
{
    r->line++;
    cJSON *o = parse_whole(text, len);
    at_status s = AT_OK;
    if (r->line == 1) {
        const char *format = "";
        int64_t version = 0;
        if (!cJSON_IsObject(o))
            s = bad("not a JSON object");
        else if (get_str(o, "format", 1, &format) != AT_OK || strcmp(format, AT_BUNDLE_FORMAT))
            s = bad("no \"format\":\"%s\" header", AT_BUNDLE_FORMAT);
        else if ((s = get_int(o, "version", 1, INT_MAX, &version)) == AT_OK &&
                 version > AT_BUNDLE_VERSION)
            s = bad("bundle version %lld is newer than this autotune reads (%d); upgrade autotune",
                    (long long)version, AT_BUNDLE_VERSION);
        if (s == AT_OK && !cJSON_GetObjectItemCaseSensitive(o, "records"))
            s = bad("required field 'records' is missing");
        if (s == AT_OK) s = get_int(o, "records", 0, INT64_MAX / 2, &r->declared);
        if (s != AT_OK && !o) s = bad("not an autotune bundle (not gzip-compressed JSON Lines)");
    } else if (!o) {
        s = bad("not a JSON object (malformed JSON)");
    } else {
        s = parse_record(o, r->h, r->set);
    }
    cJSON_Delete(o);
    if (s == AT_OK) return AT_OK;
    char why[1024];
    snprintf(why, sizeof why, "%s", at_errmsg());
    return at_fail(s, "%s line %zu: %s", r->name, r->line, why);
}

static at_status read_bundle(const char *path, const at_bundle_hooks *h, at_bundle_set *set)
{
    int in = strcmp(path, "-") == 0;
    reader r = {in ? "stdin" : path, h, set, 0, -1};
    int fd = in ? dup(STDIN_FILENO) : -1;
    errno = 0;
    gzFile gz = in ? (fd >= 0 ? gzdopen(fd, "rb") : NULL) : gzopen(path, "rb");
    if (!gz) {
        if (fd >= 0) close(fd);
        return bad("cannot read bundle %s: %s", r.name, strerror(errno ? errno : ENOMEM));
    }
    at_sbuf pend = {0};
    enum { CHUNK = 1 << 16 };
    char *buf = malloc(CHUNK);
    at_status s = buf ? AT_OK : at_fail(AT_ERR_NO_MEMORY, "out of memory");
    int got;
    while (s == AT_OK && (got = gzread(gz, buf, CHUNK)) > 0) {
        const char *p = buf, *end = buf + got;
        for (const char *nl; s == AT_OK && (nl = memchr(p, '\n', (size_t)(end - p))); p = nl + 1) {
            at_sb_put(&pend, p, (size_t)(nl - p));
            if (pend.oom) s = at_fail(AT_ERR_NO_MEMORY, "out of memory");
            if (s == AT_OK) s = read_line(&r, pend.p ? pend.p : "", pend.n);
            at_sb_clear(&pend);
        }
        at_sb_put(&pend, p, (size_t)(end - p));
    }
    int err = Z_OK;
    const char *msg = gzerror(gz, &err);
    if (s == AT_OK && err != Z_OK && err != Z_STREAM_END)
        s = bad("%s: %s after line %zu (a truncated or damaged gzip stream)", r.name,
                err == Z_ERRNO ? strerror(errno) : msg, r.line);
    if (s == AT_OK && pend.n) s = read_line(&r, pend.p, pend.n); /* no newline at the end */
    if (s == AT_OK && r.line == 0) s = bad("%s is empty: no bundle header", r.name);
    if (s == AT_OK) {
        int64_t n = (int64_t)r.line - 1;
        if (n != r.declared)
            s = bad("%s holds %lld records, but its header says %lld (a truncated file?)", r.name,
                    (long long)n, (long long)r.declared);
    }
    free(buf);
    at_sb_free(&pend);
    gzclose(gz);
    return s;
}

typedef struct db_read_ctx {
    const at_bundle_hooks *h;
    at_bundle_set *set;
    const char *name;
} db_read_ctx;

/* A database's item, through the bundle's own reader (its line printed and parsed again): a
 * merge reads a database exactly as it would read its export. */
static at_status read_item(void *user, const item *it)
{
    db_read_ctx *c = user;
    char *line = item_line(it);
    cJSON *o = line ? cJSON_Parse(line) : NULL;
    at_status s = o ? parse_record(o, c->h, c->set) : at_fail(AT_ERR_NO_MEMORY, "out of memory");
    cJSON_Delete(o);
    free(line);
    if (s == AT_OK) return AT_OK;
    char why[1024];
    snprintf(why, sizeof why, "%s", at_errmsg());
    return at_fail(s, "%s: %s '%s|%s': %s", c->name, it->kind == K_RESULT ? "result" : "best entry",
                   it->problem, it->device, why);
}

static at_status read_database(const char *path, const at_bundle_hooks *h, at_bundle_set *set)
{
    at_db *db = NULL;
    AT_TRY(at_db_open(path, AT_DB_READONLY, &db));
    db_read_ctx c = {h, set, path};
    at_status s = walk(db, 0, read_item, &c);
    at_db_close(db);
    return s;
}

at_status at_bundle_read(const char *const *inputs, size_t n, const at_bundle_hooks *hooks,
                         at_bundle_set **out)
{
    *out = NULL;
    at_bundle_set *set = calloc(1, sizeof *set);
    if (!set) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    at_status s = n ? AT_OK : bad("nothing to read: no bundle or database given");
    for (size_t i = 0; i < n && s == AT_OK; i++) {
        const char *p = inputs[i];
        struct stat st;
        if (strcmp(p, "-") == 0) {
            s = read_bundle(p, hooks, set);
        } else if (stat(p, &st) != 0) {
            s = bad("cannot read %s: %s", p, strerror(errno));
        } else if (S_ISDIR(st.st_mode)) {
            char *file = at_asprintf("%s/data.mdb", p);
            int db = file && stat(file, &st) == 0;
            free(file);
            s = db ? read_database(p, hooks, set)
                   : bad("%s is a directory but not a database (no data.mdb)", p);
        } else {
            s = read_bundle(p, hooks, set);
        }
    }
    if (s != AT_OK) {
        at_bundle_set_free(set);
        return s;
    }
    *out = set;
    return AT_OK;
}

/* ---- the conflict rule -------------------------------------------------------------------- */

/* What the rule compares of a record. */
typedef struct metric {
    int trusted;
    double time;
    int64_t when;
    const char *text; /* as this release writes it */
} metric;

/* The metric of the record text (len bytes) of kind at key; its normalised text into *norm
 * (malloc'd). AT_ERR_DB_CORRUPT for a text that does not parse. */
static at_status measure(int kind, const char *key, const char *text, size_t len,
                         const at_bundle_hooks *h, metric *m, char **norm)
{
    union {
        at_result_rec r;
        at_best_rec b;
        at_device_rec d;
    } u;
    *m = (metric){0};
    *norm = NULL;
    if (kind == K_RESULT) {
        AT_TRY(at_result_rec_parse(text, len, &u.r));
        m->trusted = u.r.status == AT_RS_OK;
        m->time = u.r.median_us;
        m->when = u.r.when;
    } else if (kind == K_BEST) {
        AT_TRY(at_best_rec_parse(text, len, &u.b));
        at_best_key k;
        at_device_rec dev;
        memset(&dev, 0, sizeof dev);
        if (at_best_key_split(key, &k) == AT_OK) {
            char *d = at_key_part_dup(k.device);
            if (d) at_device_rec_from_key(d, &dev);
            free(d);
        }
        m->trusted = h && h->trusted && u.b.template_name[0] &&
                     h->trusted(h->user, u.b.template_name, dev.backend, u.b.template_hash);
        m->time = u.b.time_us;
        m->when = u.b.when;
    } else {
        AT_TRY(at_device_rec_parse(text, len, &u.d));
        m->when = u.d.when;
    }
    at_status s = record_text(kind, &u, norm);
    m->text = *norm;
    return s;
}

/* 1 when a wins over b (texts differ) by the rule of prefer. Devices: the newer, then the
 * smaller text. Records: with AT_PREFER_NEWER the newer first; then trusted before untrusted,
 * the smaller time, the newer, the smaller text. A total order, so the winner of a set of
 * records does not depend on the order they come in. */
static int wins(int kind, const metric *a, const metric *b, at_prefer prefer)
{
    if ((kind == K_DEVICE || prefer == AT_PREFER_NEWER) && a->when != b->when)
        return a->when > b->when;
    if (kind != K_DEVICE) {
        if (a->trusted != b->trusted) return a->trusted;
        if (a->time < b->time) return 1;
        if (a->time > b->time) return 0;
        if (a->when != b->when) return a->when > b->when;
    }
    return strcmp(a->text, b->text) < 0;
}

typedef struct apply_ctx {
    int *kind;
    const char **key;
    metric *m;
    at_prefer prefer;
    const at_bundle_hooks *h;
    char *outcome; /* per winner: 'i' imported, 'k' kept, 'u' unchanged */
} apply_ctx;

static int decide(void *user, size_t i, const char *stored, size_t len)
{
    apply_ctx *c = user;
    c->outcome[i] = 'i';
    if (!stored) return 1;
    metric old;
    char *norm = NULL;
    /* A stored record that does not parse is damaged: the incoming one replaces it. */
    if (measure(c->kind[i], c->key[i], stored, len, c->h, &old, &norm) != AT_OK) {
        free(norm);
        at_errclear();
        return 1;
    }
    int put = 0;
    if (strcmp(old.text, c->m[i].text) == 0)
        c->outcome[i] = 'u';
    else if (c->prefer == AT_PREFER_EXISTING || !wins(c->kind[i], &c->m[i], &old, c->prefer))
        c->outcome[i] = 'k';
    else
        put = 1;
    free(norm);
    return put;
}

static int entry_cmp(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->kind != y->kind) return x->kind - y->kind;
    return strcmp(x->key, y->key);
}

at_status at_bundle_apply(at_db *db, const at_bundle_set *set, at_prefer prefer,
                          const at_bundle_hooks *hooks, at_import_report *rep)
{
    if (!db || !set) return at_fail(AT_ERR_INVALID_ARG, "at_bundle_apply: NULL argument");
    if ((unsigned)prefer > AT_PREFER_EXISTING)
        return at_fail(AT_ERR_INVALID_ARG, "unknown preference %d", (int)prefer);
    at_import_report r = {0};
    for (size_t i = 0; i < set->n; i++) r.records += set->e[i].kind != K_DEVICE;
    size_t n = set->n;
    entry *e = n ? malloc(n * sizeof *e) : NULL;
    metric *m = n ? calloc(n, sizeof *m) : NULL;
    char **norm = n ? calloc(n, sizeof *norm) : NULL;
    at_db_text *w = n ? malloc(n * sizeof *w) : NULL;
    apply_ctx c = {n ? malloc(n * sizeof(int)) : NULL,
                   n ? malloc(n * sizeof(char *)) : NULL,
                   m,
                   prefer,
                   hooks,
                   n ? malloc(n) : NULL};
    at_status s = AT_OK;
    if (n && (!e || !m || !norm || !w || !c.kind || !c.key || !c.outcome))
        s = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    if (s == AT_OK && n) {
        memcpy(e, set->e, n * sizeof *e);
        qsort(e, n, sizeof *e, entry_cmp);
    }
    /* One record per key: the winner among the inputs (AT_PREFER_EXISTING: the faster). */
    at_prefer among = prefer == AT_PREFER_NEWER ? AT_PREFER_NEWER : AT_PREFER_FASTER;
    size_t nw = 0;
    for (size_t i = 0; i < n && s == AT_OK; i++) {
        metric mi;
        char *ni = NULL;
        s = measure(e[i].kind, e[i].key, e[i].text, strlen(e[i].text), hooks, &mi, &ni);
        if (s != AT_OK) {
            free(ni);
            break;
        }
        int same = nw && e[i].kind == c.kind[nw - 1] && strcmp(e[i].key, c.key[nw - 1]) == 0;
        if (same && !wins(e[i].kind, &mi, &m[nw - 1], among)) {
            free(ni);
            continue;
        }
        size_t at = same ? nw - 1 : nw++;
        free(norm[at]);
        norm[at] = ni;
        m[at] = mi;
        c.kind[at] = e[i].kind;
        c.key[at] = e[i].key;
        w[at] = (at_db_text){k_kind_table[e[i].kind], e[i].key, ni};
    }
    if (s == AT_OK) s = at_db_put_texts(db, nw, w, decide, &c, NULL);
    for (size_t i = 0; s == AT_OK && i < nw; i++) {
        if (c.kind[i] == K_DEVICE) {
            r.devices += c.outcome[i] == 'i';
            continue;
        }
        r.imported += c.outcome[i] == 'i';
        r.kept += c.outcome[i] == 'k';
        r.unchanged += c.outcome[i] == 'u';
    }
    for (size_t i = 0; norm && i < n; i++) free(norm[i]);
    free(norm), free(e), free(m), free(w), free(c.kind), free(c.key), free(c.outcome);
    if (s == AT_OK && rep) *rep = r;
    return s;
}

/* ---- stats -------------------------------------------------------------------------------- */

typedef struct counts {
    at_db_count *v;
    size_t n;
} counts;

static at_db_count *count_of(counts *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->v[i].name, name) == 0) return &c->v[i];
    at_db_count *v = realloc(c->v, (c->n + 1) * sizeof *v);
    if (!v) return NULL;
    c->v = v;
    v = &c->v[c->n++];
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", name);
    return v;
}

typedef struct stats_ctx {
    counts ops, devices, templates;
    at_db_count total;
} stats_ctx;

static void tally(at_db_count *x, const item *it)
{
    if (it->kind == K_BEST)
        x->best++;
    else if (it->r.status == AT_RS_OK)
        x->results_ok++;
    else
        x->results_failed++;
}

static at_status stats_one(void *user, const item *it)
{
    stats_ctx *c = user;
    at_db_count *x[3] = {count_of(&c->ops, it->op), count_of(&c->devices, it->device),
                         count_of(&c->templates, it->tname)};
    for (int i = 0; i < 3; i++)
        if (!x[i]) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; i < 3; i++) tally(x[i], it);
    tally(&c->total, it);
    return AT_OK;
}

static int count_cmp(const void *a, const void *b)
{
    return strcmp(((const at_db_count *)a)->name, ((const at_db_count *)b)->name);
}

at_status at_bundle_stats(at_db *db, at_db_stats *out)
{
    stats_ctx c = {0};
    at_status s = walk(db, 0, stats_one, &c);
    memset(out, 0, sizeof *out);
    if (s != AT_OK) {
        free(c.ops.v), free(c.devices.v), free(c.templates.v);
        return s;
    }
    counts *all[3] = {&c.ops, &c.devices, &c.templates};
    for (int i = 0; i < 3; i++)
        if (all[i]->n) qsort(all[i]->v, all[i]->n, sizeof *all[i]->v, count_cmp);
    out->total = c.total;
    out->ops = c.ops.v, out->nops = c.ops.n;
    out->devices = c.devices.v, out->ndevices = c.devices.n;
    out->templates = c.templates.v, out->ntemplates = c.templates.n;
    return AT_OK;
}

/* ---- bundle layers ------------------------------------------------------------------------ */

/* Imports set into a new database at dir (made here). */
static at_status import_copy(const char *dir, const at_bundle_set *set)
{
    at_db *db = NULL;
    AT_TRY(at_db_open(dir, AT_DB_READWRITE, &db));
    at_status s = at_bundle_apply(db, set, AT_PREFER_FASTER, NULL, NULL);
    at_db_close(db);
    return s;
}

/* Removes a database directory of ours (data.mdb, lock.mdb). */
static void remove_db_dir(const char *dir)
{
    char *f = at_asprintf("%s/data.mdb", dir), *l = at_asprintf("%s/lock.mdb", dir);
    if (f) unlink(f);
    if (l) unlink(l);
    rmdir(dir);
    free(f), free(l);
}

/* The private copy's folder: <cache>/layers/<hash of real path, size, mtime, inode>. */
static char *layer_dir(const char *cache, const char *real, const struct stat *st)
{
    uint64_t h = at_hash(AT_HASH_SEED, real, strlen(real));
    int64_t v[3] = {(int64_t)st->st_size,
                    (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec,
                    (int64_t)st->st_ino};
    h = at_hash(h, v, sizeof v);
    char hex[17];
    at_hash_hex(h, hex);
    return at_asprintf("%s/layers/%s", cache, hex);
}

static at_status layer_open(const char *bundle_path, at_db **out)
{
    char real[PATH_MAX];
    struct stat st;
    if (!realpath(bundle_path, real) || stat(real, &st) != 0)
        return bad("cannot read bundle %s: %s", bundle_path, strerror(errno));
    if (S_ISDIR(st.st_mode)) return bad("%s is a directory, not a bundle", bundle_path);
    /* A FIFO or a device would block the read or never end: a bundle is a file. */
    if (!S_ISREG(st.st_mode)) return bad("%s is not a regular file, not a bundle", bundle_path);
    char *cache = at_cache_dir();
    char *dir = cache ? layer_dir(cache, real, &st) : NULL;
    free(cache);
    if (dir && at_db_open(dir, AT_DB_READONLY, out) == AT_OK) { /* imported before */
        free(dir);
        return AT_OK;
    }
    at_errclear();
    at_bundle_set *set = NULL;
    const char *in[1] = {real};
    at_status s = at_bundle_read(in, 1, NULL, &set);
    /* The copy under a temporary name, renamed into place: never opened half written. */
    char *tmp = s == AT_OK && dir ? at_asprintf("%s.tmp-%ld", dir, (long)getpid()) : NULL;
    if (tmp) {
        remove_db_dir(tmp); /* left by a killed process of the same id */
        at_status c = import_copy(tmp, set);
        if (c == AT_OK && rename(tmp, dir) != 0 && errno != EEXIST && errno != ENOTEMPTY)
            c = at_fail(AT_ERR_DB, "cannot rename %s: %s", tmp, strerror(errno));
        remove_db_dir(tmp); /* another process won the race: its copy stands */
        if (c == AT_OK) c = at_db_open(dir, AT_DB_READONLY, out);
        if (c == AT_OK) {
            at_bundle_set_free(set);
            free(tmp), free(dir);
            return AT_OK;
        }
        at_errclear(); /* the cache cannot be written: a copy of our own */
    }
    if (s == AT_OK) {
        const char *t = getenv("TMPDIR");
        char *base = at_asprintf("%s/autotune-layer-XXXXXX", t && *t ? t : "/tmp");
        char *own = base ? mkdtemp(base) : NULL;
        s = own ? import_copy(own, set)
                : at_fail(AT_ERR_DB, "cannot make a temporary folder for bundle %s: %s",
                          bundle_path, strerror(errno));
        if (s == AT_OK) s = at_db_open(own, AT_DB_READONLY, out);
        if (s == AT_OK)
            at_db_set_temporary(*out);
        else if (own)
            remove_db_dir(own);
        free(base);
    }
    at_bundle_set_free(set);
    free(tmp), free(dir);
    return s;
}

at_status at_bundle_layer_open(const char *bundle_path, at_db **out, char *why, size_t whylen)
{
    if (!bundle_path || !out) return at_fail(AT_ERR_INVALID_ARG, "at_bundle_layer_open: NULL");
    *out = NULL;
    at_status s = layer_open(bundle_path, out);
    if (why && whylen) snprintf(why, whylen, "%s", s == AT_OK ? "" : at_errmsg());
    return s;
}
