/* recording.c — recorded spaces: a Kernel Tuner cache file (JSON, plain or gzip'd) or our LMDB
 * results database loaded into one table config → (status, time), for the replay device. */
#define _POSIX_C_SOURCE 200809L
#include "recording.h"

#include "db.h"
#include "dbfile.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define MAX_VALUES 65535 /* value indices are uint16_t */
#define MAX_PARAMS 256   /* parameters of one configuration */

/* ---- the table ----------------------------------------------------------------------------- */

void at_recording_free(at_recording *r)
{
    if (!r) return;
    for (size_t j = 0; j < r->nparams; j++) {
        for (size_t v = 0; r->values && r->values[j] && v < r->nvalues[j]; v++)
            free(r->values[j][v]);
        if (r->values) free(r->values[j]);
        if (r->numeric) free(r->numeric[j]);
        if (r->names) free(r->names[j]);
    }
    for (size_t i = 0; r->status && i < r->nconfigs; i++) free(r->status[i]);
    free(r->names);
    free(r->nvalues);
    free(r->values);
    free(r->numeric);
    free(r->idx);
    free(r->value);
    free(r->cost);
    free(r->eval_s);
    free(r->status);
    free(r->recs);
    free(r);
}

void at_recording_config(const at_recording *r, size_t i, char *buf, size_t len)
{
    size_t used = 0;
    if (len) buf[0] = '\0';
    for (size_t j = 0; j < r->nparams && used < len; j++) {
        int n = snprintf(buf + used, len - used, "%s%s=%s", j ? "," : "", r->names[j],
                         r->values[j][r->idx[i * r->nparams + j]]);
        if (n < 0) break;
        used += (size_t)n;
    }
}

static at_status oom(void) { return at_fail(AT_ERR_NO_MEMORY, "out of memory"); }

/* Allocates the per-parameter arrays for nparams parameters and the per-config arrays for up to
 * cap configurations. */
static at_status table_alloc(at_recording *r, size_t nparams, size_t cap)
{
    r->nparams = nparams;
    r->names = calloc(nparams ? nparams : 1, sizeof *r->names);
    r->nvalues = calloc(nparams ? nparams : 1, sizeof *r->nvalues);
    r->values = calloc(nparams ? nparams : 1, sizeof *r->values);
    r->numeric = calloc(nparams ? nparams : 1, sizeof *r->numeric);
    cap = cap ? cap : 1;
    r->idx = calloc(cap * (nparams ? nparams : 1), sizeof *r->idx);
    r->value = calloc(cap, sizeof *r->value);
    r->cost = calloc(cap, sizeof *r->cost);
    r->eval_s = calloc(cap, sizeof *r->eval_s);
    r->status = calloc(cap, sizeof *r->status);
    if (!r->names || !r->nvalues || !r->values || !r->numeric || !r->idx || !r->value || !r->cost ||
        !r->eval_s || !r->status)
        return oom();
    return AT_OK;
}

/* A number written back as text the way Python prints it for integers ("64"), else %.17g
 * trimmed to the shortest form that reads back the same. */
static void number_text(double x, char *buf, size_t len)
{
    if (x == floor(x) && fabs(x) < 1e15) {
        snprintf(buf, len, "%.0f", x);
        return;
    }
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) return;
    }
}

static double parse_number(const char *s)
{
    char *end = NULL;
    double x = strtod(s, &end);
    return end != s && *end == '\0' ? x : NAN;
}

/* Records the outcome of configuration i. */
static void set_outcome(at_recording *r, size_t i, double value, double eval_s, char *status)
{
    r->status[i] = status;
    r->eval_s[i] = eval_s > 0 && isfinite(eval_s) ? eval_s : 0;
    if (status || !(value > 0) || !isfinite(value)) {
        r->value[i] = NAN;
        r->cost[i] = INFINITY;
        r->nfailed++;
        return;
    }
    r->value[i] = value;
    r->cost[i] = r->higher_better ? 1.0 / value : value;
    if (!r->have_optimum || r->cost[i] < r->cost[r->optimum]) {
        r->have_optimum = 1;
        r->optimum = i;
    }
}

/* ---- Kernel Tuner cache JSON --------------------------------------------------------------- */

/* Reads a whole open file (fd, which it closes), gunzipping it when it is gzip'd (zlib reads
 * plain files unchanged), up to AT_RECORDING_MAX_BYTES of text: a small gzip file can expand to
 * gigabytes. */
static at_status read_maybe_gz(const char *path, int fd, char **out, size_t *outlen)
{
    *out = NULL;
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        close(fd);
        return oom();
    }
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    at_status st = AT_OK;
    for (;;) {
        if (!buf) {
            st = oom();
            break;
        }
        /* Room for one byte past the cap, to see that there is more. */
        if (cap - len < (1 << 16) && cap < AT_RECORDING_MAX_BYTES + 2) {
            size_t nc = cap * 2 < AT_RECORDING_MAX_BYTES + 2 ? cap * 2 : AT_RECORDING_MAX_BYTES + 2;
            char *nb = realloc(buf, nc);
            if (!nb) {
                st = oom();
                break;
            }
            buf = nb;
            cap = nc;
        }
        int n = gzread(f, buf + len, (unsigned)(cap - len - 1));
        if (n < 0) {
            int errnum = 0;
            st = at_fail(AT_ERR_IO, "cannot read %s: %s", path, gzerror(f, &errnum));
            break;
        }
        if (n == 0) break;
        len += (size_t)n;
        if (len > AT_RECORDING_MAX_BYTES) {
            st = at_fail(AT_ERR_INVALID_ARG,
                         "%s holds more than %d MiB of text (decompressed): larger than a "
                         "recorded space may be",
                         path, (int)(AT_RECORDING_MAX_BYTES >> 20));
            break;
        }
    }
    gzclose(f);
    if (st != AT_OK) {
        free(buf);
        return st;
    }
    buf[len] = '\0';
    *out = buf;
    *outlen = len;
    return AT_OK;
}

/* An upper bound of the JSON values in text: commas and openings outside strings. cJSON
 * allocates an item for each however short its text ("[0,0,..." is 2 bytes of text and some 80
 * of tree per value), so the text's size alone does not bound the tree's. */
static size_t json_values(const char *t)
{
    size_t n = 1;
    for (int in_str = 0; *t; t++) {
        if (in_str && *t == '\\' && t[1])
            t++;
        else if (*t == '"')
            in_str = !in_str;
        else if (!in_str)
            n += *t == ',' || *t == '[' || *t == '{';
    }
    return n;
}

static int json_number_of(const cJSON *v, double *out)
{
    if (cJSON_IsNumber(v)) {
        *out = v->valuedouble;
        return 1;
    }
    if (cJSON_IsBool(v)) {
        *out = cJSON_IsTrue(v) ? 1 : 0;
        return 1;
    }
    return 0;
}

/* The index of a record's value among parameter j's values; -1 if it is not one of them. */
static int value_index(const at_recording *r, size_t j, const cJSON *v, const char *text)
{
    double x;
    int isnum = v ? json_number_of(v, &x) : 0;
    if (!v && text) {
        x = parse_number(text);
        isnum = !isnan(x);
    }
    const char *s = v && cJSON_IsString(v) ? v->valuestring : text;
    for (size_t k = 0; k < r->nvalues[j]; k++) {
        if (isnum && r->numeric[j][k] == x) return (int)k;
        if (!isnum && s && strcmp(r->values[j][k], s) == 0) return (int)k;
    }
    return -1;
}

/* Python's repr-ish objective names that mean "higher is better". */
static int rate_objective(const char *name)
{
    return strstr(name, "/s") != NULL || strstr(name, "FLOP") != NULL ||
           strstr(name, "flops") != NULL;
}

static at_status kt_fail(const char *path, const char *what)
{
    return at_fail(AT_ERR_INVALID_ARG, "%s is not a Kernel Tuner cache file: %s", path, what);
}

static at_status load_kt(const char *path, const char *text, at_recording *r)
{
    cJSON *root = cJSON_Parse(text);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= text ? (size_t)(at - text) : 0;
        return at_fail(AT_ERR_INVALID_ARG, "%s: malformed JSON near byte %zu", path, off);
    }
    at_status st = AT_OK;
    const cJSON *keys = cJSON_GetObjectItemCaseSensitive(root, "tune_params_keys");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "tune_params");
    const cJSON *cache = cJSON_GetObjectItemCaseSensitive(root, "cache");
    const cJSON *obj = cJSON_GetObjectItemCaseSensitive(root, "objective");
    const cJSON *dev = cJSON_GetObjectItemCaseSensitive(root, "device_name");
    const cJSON *kern = cJSON_GetObjectItemCaseSensitive(root, "kernel_name");
    if (!cJSON_IsArray(keys) || cJSON_GetArraySize(keys) == 0)
        st = kt_fail(path, "no \"tune_params_keys\" list");
    else if (!cJSON_IsObject(params))
        st = kt_fail(path, "no \"tune_params\" object");
    else if (!cJSON_IsObject(cache))
        st = kt_fail(path, "no \"cache\" object");
    if (st != AT_OK) {
        cJSON_Delete(root);
        return st;
    }
    snprintf(r->format, sizeof r->format, "kerneltuner");
    snprintf(r->device, sizeof r->device, "%s", cJSON_IsString(dev) ? dev->valuestring : "");
    snprintf(r->kernel, sizeof r->kernel, "%s", cJSON_IsString(kern) ? kern->valuestring : "");
    snprintf(r->objective, sizeof r->objective, "%s",
             cJSON_IsString(obj) ? obj->valuestring : "time");
    r->higher_better = rate_objective(r->objective);

    size_t np = (size_t)cJSON_GetArraySize(keys), ncache = (size_t)cJSON_GetArraySize(cache);
    st = table_alloc(r, np, ncache);
    for (size_t j = 0; st == AT_OK && j < np; j++) {
        const cJSON *name = cJSON_GetArrayItem(keys, (int)j);
        if (!cJSON_IsString(name)) {
            st = kt_fail(path, "a \"tune_params_keys\" entry is not a string");
            break;
        }
        const cJSON *vals = cJSON_GetObjectItemCaseSensitive(params, name->valuestring);
        size_t nv = cJSON_IsArray(vals) ? (size_t)cJSON_GetArraySize(vals) : 0;
        if (nv == 0 || nv > MAX_VALUES) {
            st = at_fail(AT_ERR_INVALID_ARG,
                         "%s: parameter %s has %zu values in \"tune_params\" (1 to %d expected)",
                         path, name->valuestring, nv, MAX_VALUES);
            break;
        }
        r->names[j] = at_strdup(name->valuestring);
        r->values[j] = calloc(nv, sizeof *r->values[j]);
        r->numeric[j] = calloc(nv, sizeof *r->numeric[j]);
        if (!r->names[j] || !r->values[j] || !r->numeric[j]) {
            st = oom();
            break;
        }
        r->nvalues[j] = nv;
        for (size_t k = 0; k < nv; k++) {
            const cJSON *v = cJSON_GetArrayItem(vals, (int)k);
            char buf[64];
            double x;
            if (json_number_of(v, &x)) {
                number_text(x, buf, sizeof buf);
                r->numeric[j][k] = x;
            } else if (cJSON_IsString(v)) {
                snprintf(buf, sizeof buf, "%s", v->valuestring);
                r->numeric[j][k] = parse_number(v->valuestring);
            } else {
                st = at_fail(AT_ERR_INVALID_ARG,
                             "%s: a value of parameter %s is not a number "
                             "or a string",
                             path, name->valuestring);
                break;
            }
            r->values[j][k] = at_strdup(cJSON_IsString(v) ? v->valuestring : buf);
            if (!r->values[j][k]) {
                st = oom();
                break;
            }
        }
    }

    size_t n = 0;
    const cJSON *rec;
    cJSON_ArrayForEach(rec, cache)
    {
        if (st != AT_OK) break;
        if (!cJSON_IsObject(rec)) {
            st = at_fail(AT_ERR_INVALID_ARG, "%s: cache entry \"%s\" is not an object", path,
                         rec->string ? rec->string : "?");
            break;
        }
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(rec, r->objective);
        /* InvalidConfig: the configuration breaks the kernel's restrictions; it is not part of
         * the space a tuner would search. */
        if (cJSON_IsString(t) && strcmp(t->valuestring, "InvalidConfig") == 0) continue;
        /* The configuration: each parameter's field, else the comma-joined key. */
        char *keycopy = at_strdup(rec->string ? rec->string : "");
        char *parts[MAX_PARAMS];
        size_t nparts = 0;
        for (char *p = keycopy, *save = NULL, *tok; keycopy && nparts < MAX_PARAMS;) {
            tok = strtok_r(p, ",", &save);
            p = NULL;
            if (!tok) break;
            parts[nparts++] = tok;
        }
        for (size_t j = 0; j < np; j++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(rec, r->names[j]);
            const char *text = !v && nparts == np ? parts[j] : NULL;
            int k = v || text ? value_index(r, j, v, text) : -1;
            if (k < 0) {
                st = at_fail(AT_ERR_INVALID_ARG,
                             "%s: cache entry \"%s\": parameter %s is missing or not one of "
                             "its \"tune_params\" values",
                             path, rec->string ? rec->string : "?", r->names[j]);
                break;
            }
            r->idx[n * np + j] = (uint16_t)k;
        }
        free(keycopy);
        if (st != AT_OK) break;
        double value = NAN, secs = 0, x;
        char *status = NULL;
        if (cJSON_IsNumber(t)) {
            value = t->valuedouble;
            if (!(value > 0)) status = at_strdup("NonPositiveValue");
        } else {
            status = at_strdup(cJSON_IsString(t) ? t->valuestring : "NoObjective");
        }
        /* Kernel Tuner records these in milliseconds. */
        static const char *const cost_fields[] = {"compile_time", "verification_time",
                                                  "benchmark_time"};
        for (size_t f = 0; f < 3; f++)
            if (json_number_of(cJSON_GetObjectItemCaseSensitive(rec, cost_fields[f]), &x) && x > 0)
                secs += x / 1e3;
        set_outcome(r, n, value, secs, status);
        n++;
    }
    r->nconfigs = n;
    cJSON_Delete(root);
    if (st == AT_OK && n == 0) st = kt_fail(path, "its cache holds no configuration");
    return st;
}

/* ---- our results database -------------------------------------------------------------- */

/* Adds a value to parameter j (keeping first-seen order for now); returns its index. */
static int add_value(at_recording *r, size_t j, const char *text, size_t *cap)
{
    for (size_t k = 0; k < r->nvalues[j]; k++)
        if (strcmp(r->values[j][k], text) == 0) return (int)k;
    if (r->nvalues[j] >= MAX_VALUES) return -1;
    if (r->nvalues[j] == cap[j]) {
        size_t nc = cap[j] ? cap[j] * 2 : 8;
        char **nv = realloc(r->values[j], nc * sizeof *nv);
        if (!nv) return -1;
        r->values[j] = nv;
        cap[j] = nc;
    }
    r->values[j][r->nvalues[j]] = at_strdup(text);
    if (!r->values[j][r->nvalues[j]]) return -1;
    return (int)r->nvalues[j]++;
}

/* Sorts parameter j's values (numerically where all are numbers) and remaps the indices, so
 * "adjacent value" means what it should to the neighbourhood strategies. */
static at_status sort_values(at_recording *r, size_t j)
{
    size_t nv = r->nvalues[j];
    double *num = malloc(nv * sizeof *num);
    size_t *order = malloc(nv * sizeof *order), *rank = malloc(nv * sizeof *rank);
    char **vals = malloc(nv * sizeof *vals);
    if (!num || !order || !rank || !vals) {
        free(num), free(order), free(rank), free(vals);
        return oom();
    }
    int allnum = 1;
    for (size_t k = 0; k < nv; k++) {
        num[k] = parse_number(r->values[j][k]);
        if (isnan(num[k])) allnum = 0;
        order[k] = k;
    }
    /* Insertion sort: value lists are short. */
    for (size_t a = 1; a < nv; a++) {
        size_t x = order[a], b = a;
        while (b > 0 && (allnum ? num[order[b - 1]] > num[x]
                                : strcmp(r->values[j][order[b - 1]], r->values[j][x]) > 0)) {
            order[b] = order[b - 1];
            b--;
        }
        order[b] = x;
    }
    for (size_t k = 0; k < nv; k++) {
        rank[order[k]] = k;
        vals[k] = r->values[j][order[k]];
        r->numeric[j][k] = num[order[k]];
    }
    memcpy(r->values[j], vals, nv * sizeof *vals);
    for (size_t i = 0; i < r->nconfigs; i++)
        r->idx[i * r->nparams + j] = (uint16_t)rank[r->idx[i * r->nparams + j]];
    free(num), free(order), free(rank), free(vals);
    return AT_OK;
}

/* One recorded space of an open database (dir names it in messages). */
static at_status load_from_db(at_db *db, const char *dir, const char *select, at_recording *r)
{
    char **keys = NULL;
    size_t n = 0;
    /* The records come with the keys (one scan) and are the table's recs, compacted below to the
     * configurations kept. */
    at_status st = at_db_results(db, select && *select ? select : NULL, &keys, &r->recs, &n);
    if (st == AT_OK && n == 0)
        st = at_fail(AT_ERR_INVALID_ARG, "the database %s has no results%s%s%s", dir,
                     select && *select ? " starting with '" : "", select ? select : "",
                     select && *select ? "'" : "");
    /* One recorded space: every key shares "problem|device|hash|" with the first. */
    at_result_key k0;
    if (st == AT_OK) st = at_result_key_split(keys[0], &k0);
    int plen = st == AT_OK ? (int)(k0.config.s - keys[0]) : 0;
    size_t np = 1;
    if (st == AT_OK) {
        snprintf(r->format, sizeof r->format, "autotune");
        snprintf(r->kernel, sizeof r->kernel, "%.*s", plen - 1, keys[0]);
        snprintf(r->device, sizeof r->device, "%.*s", (int)k0.device.n, k0.device.s);
        snprintf(r->objective, sizeof r->objective, "median_us");
        for (size_t c = 0; c < k0.config.n; c++) np += k0.config.s[c] == ',';
        st = table_alloc(r, np, n);
    }
    size_t *cap = calloc(np, sizeof *cap);
    if (st == AT_OK && !cap) st = oom();
    char *names[MAX_PARAMS], *values[MAX_PARAMS];
    /* A damaged key is skipped (at_db_skip: the caller hears of it), the rest kept; records that
     * do not parse were skipped by at_db_results. */
    for (size_t i = 0, w = 0; st == AT_OK && i < n; i++) {
        at_result_key k;
        st = at_result_key_split(keys[i], &k);
        if (st == AT_OK &&
            !(at_key_part_eq(k.problem, k0.problem) && at_key_part_eq(k.device, k0.device) &&
              at_key_part_eq(k.thash, k0.thash)))
            st = at_fail(AT_ERR_INVALID_ARG,
                         "the database %s holds more than one recorded space (%.*s and %.*s); "
                         "select one by a prefix of problem|device|template hash",
                         dir, plen - 1, keys[0], (int)(k.config.s - keys[i]) - 1, keys[i]);
        char *cfg = st == AT_OK ? at_key_part_dup(k.config) : NULL;
        if (st == AT_OK && !cfg) st = oom();
        if (st == AT_OK && at_config_split(cfg, names, values, MAX_PARAMS) != (int)np)
            st = at_fail(AT_ERR_DB_CORRUPT, "a configuration unlike the others");
        for (size_t j = 0; st == AT_OK && j < np; j++)
            if (r->names[j] && strcmp(r->names[j], names[j]) != 0)
                st = at_fail(AT_ERR_DB_CORRUPT, "a configuration unlike the others");
        if (st == AT_ERR_DB_CORRUPT) {
            at_db_skip(db, "results", keys[i], at_errmsg());
            free(cfg);
            st = AT_OK;
            continue;
        }
        for (size_t j = 0; st == AT_OK && j < np; j++) {
            if (!r->names[j] && !(r->names[j] = at_strdup(names[j]))) st = oom();
            int v = st == AT_OK ? add_value(r, j, values[j], cap) : 0;
            if (v < 0) st = oom();
            if (st == AT_OK) r->idx[w * np + j] = (uint16_t)v;
        }
        free(cfg);
        if (st != AT_OK) break;
        r->nconfigs = w + 1;
        const at_result_rec *rec = &r->recs[i];
        char *status =
            rec->status == AT_RS_OK ? NULL : at_strdup(at_result_status_name(rec->status));
        double secs =
            rec->compile_ms / 1e3 + rec->median_us * (double)(rec->reps ? rec->reps : 1) / 1e6;
        set_outcome(r, w, rec->median_us, secs, status);
        if (w != i) r->recs[w] = *rec;
        w++;
    }
    if (st == AT_OK && r->nconfigs == 0)
        st = at_fail(AT_ERR_DB_CORRUPT, "every result of %.*s in %s is damaged", plen - 1, keys[0],
                     dir);
    for (size_t j = 0; st == AT_OK && j < np; j++) {
        r->numeric[j] = calloc(r->nvalues[j], sizeof *r->numeric[j]);
        st = r->numeric[j] ? sort_values(r, j) : oom();
    }
    free(cap);
    at_db_keys_free(keys, n);
    return st;
}

static at_status load_db(const char *dir, const char *select, at_recording *r)
{
    at_db *db = NULL;
    AT_TRY(at_db_open(dir, 1, &db));
    at_status st = load_from_db(db, dir, select, r);
    at_db_skipped(db, r->note, sizeof r->note);
    at_db_close(db);
    return st;
}

at_status at_recording_from_db(at_db *db, const char *select, at_recording **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return oom();
    at_status st = load_from_db(db, at_db_path(db), select, *out);
    if (st != AT_OK) {
        at_recording_free(*out);
        *out = NULL;
    }
    return st;
}

/* ---- loading by content ---------------------------------------------------------------- */

/* Opens path for reading without blocking (a FIFO has no writer), refusing anything but a
 * regular file or a directory before reading a byte. */
static at_status open_input(const char *path, int *fd, int *is_dir)
{
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (*fd < 0)
        return at_fail(AT_ERR_IO, "cannot open %s: %s", path,
                       errno == ENOENT ? "no such file" : strerror(errno));
    struct stat sb;
    const char *kind = NULL;
    if (fstat(*fd, &sb) != 0)
        kind = "a file that cannot be examined";
    else if (S_ISFIFO(sb.st_mode))
        kind = "a FIFO";
    else if (S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode))
        kind = "a device";
    else if (S_ISSOCK(sb.st_mode))
        kind = "a socket";
    else if (!S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode))
        kind = "not a regular file";
    if (kind) {
        close(*fd);
        *fd = -1;
        return at_fail(AT_ERR_INVALID_ARG,
                       "%s is %s: a recorded space is a regular file or a database directory", path,
                       kind);
    }
    *is_dir = S_ISDIR(sb.st_mode);
    /* Reads block again: a regular file never waits anyway. */
    fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) & ~O_NONBLOCK);
    return AT_OK;
}

at_status at_recording_load(const char *path, const char *select, at_recording **out)
{
    *out = NULL;
    int fd = -1, is_dir = 0;
    AT_TRY(open_input(path, &fd, &is_dir));
    at_recording *r = calloc(1, sizeof *r);
    if (!r) {
        close(fd);
        return oom();
    }
    at_status st;
    char dir[4096];
    size_t plen = strlen(path);
    if (is_dir) {
        close(fd);
        st = load_db(path, select, r);
    } else if (at_dbfile_is_lmdb(fd)) {
        close(fd);
        /* Our database is a directory; its data file names it too. */
        int named = plen >= 8 && strcmp(path + plen - 8, "data.mdb") == 0 &&
                    (plen == 8 || path[plen - 9] == '/');
        snprintf(dir, sizeof dir, "%.*s", (int)(plen > 9 ? plen - 9 : 1), plen > 9 ? path : ".");
        st = named ? load_db(dir, select, r)
                   : at_fail(AT_ERR_INVALID_ARG,
                             "%s is an LMDB file but not an autotune database's data.mdb; give "
                             "the database directory",
                             path);
    } else {
        char *text = NULL;
        size_t len = 0;
        st = read_maybe_gz(path, fd, &text, &len);
        const char *p = text;
        while (st == AT_OK && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
        if (st == AT_OK && *p == '{' && json_values(p) > AT_RECORDING_MAX_VALUES)
            st = at_fail(AT_ERR_INVALID_ARG,
                         "%s holds more than %d million JSON values: larger than a recorded "
                         "space may be",
                         path, (int)(AT_RECORDING_MAX_VALUES / 1000000));
        if (st == AT_OK && *p != '{')
            st = at_fail(AT_ERR_INVALID_ARG,
                         "%s is neither Kernel Tuner cache JSON (plain or gzip'd) nor an autotune "
                         "results database (a directory)",
                         path);
        if (st == AT_OK) st = load_kt(path, text, r);
        free(text);
    }
    if (st != AT_OK) {
        at_recording_free(r);
        return st;
    }
    *out = r;
    return AT_OK;
}
