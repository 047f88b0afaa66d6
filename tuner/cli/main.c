/* main.c — the `autotune` command: a thin layer over the public API (include/autotune.h), which
 * reads numbers with the library's own parsers (base/util.h). Every operation the library knows is
 * a command (`autotune gemm ...`), its problem fields (those that identify a problem) its options.
 * JSON goes out through cJSON. Exit codes: 0 success, 2 bad usage or input, 1 a runtime failure. */
#define _POSIX_C_SOURCE 200809L
#include "autotune.h"
#include "base/util.h"
#include "tuner/cli/fleet.h"
#include "tuner/shapes.h"

#include <cJSON.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXIT_USAGE   2
#define EXIT_RUNTIME 1

static const char *g_cmd = "autotune";

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", g_cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see '%s --help')\n", g_cmd);
    return EXIT_USAGE;
}

/* Bad input (a value the library rejects) is a usage error; everything else is a runtime one. */
static int fail(at_status s, const char *detail)
{
    fprintf(stderr, "%s: %s%s%s\n", g_cmd, at_strerror(s), detail && *detail ? ": " : "",
            detail ? detail : "");
    return s == AT_ERR_INVALID_ARG || s == AT_ERR_UNSUPPORTED ? EXIT_USAGE : EXIT_RUNTIME;
}

/* ---- options ------------------------------------------------------------------------------
 * One parser for every command: each option's value is checked as its kind says when it is
 * read, with one message per kind naming the option and the value. Numbers are strict: decimal
 * digits only (a '-' first for a negative), no spaces, '+', hex, fraction or exponent where an
 * integer is wanted. */

#define MAX_FIELDS   24
#define MAX_TRANSFER 16 /* replay --transfer sources */

/* An evaluation count or seconds (--budget, --total-budget); 0: not given. */
typedef struct budget {
    int64_t evals;
    double seconds;
} budget;

typedef struct opts {
    const char *field[MAX_FIELDS]; /* the operation's problem fields given, by field index */
    const char *backend, *strategy, *db, *table, *prefix, *arch, *select, *replay, *tmpl;
    int64_t limit, no_improve;
    int compile;
    int64_t device;
    budget budget;
    uint64_t seed;
    int force, json, list, help;
    const char *problem, *device_key, *template_hash, *output; /* db export */
    int kernel_tuner;
    int no_tune;                  /* OP --no-tune */
    const char *max_slowdown;     /* db verify */
    int retune;                   /* db verify */
    const char *op_name, *prefer; /* db export, import, merge, verify */
    int best_only;
    const char *shapes, *shard; /* tune --shapes */
    budget total_budget;
    int dry_run;
    double run_limit, slowdown_limit; /* --run-limit, --slowdown-limit; -1: not given */
    const char *progress;             /* auto | always | never */
    int quiet, no_proxy, no_transfer;
    const char *transfer[MAX_TRANSFER]; /* replay --transfer FILE, repeatable */
    size_t ntransfer;
} opts;

typedef enum {
    OPT_FLAG,   /* no value; sets an int to 1 */
    OPT_STR,    /* any text but empty */
    OPT_INT,    /* a decimal integer from lo to hi, into an int64_t */
    OPT_SEED,   /* a decimal integer from 0 to UINT64_MAX, into a uint64_t */
    OPT_BUDGET, /* N evaluations (N >= 1) or Ns / N.Ns seconds, into a budget */
    OPT_REAL,   /* a finite number from lo to hi, into a double; with a trailing 's' when secs */
    OPT_CHOICE, /* one of names(), kept as text */
    OPT_FIELD,  /* a problem field of the operation, kept as text: offset is its index */
    OPT_LIST    /* repeatable text: offset is opts.transfer's (the one list there is) */
} opt_kind;

typedef struct opt_spec {
    const char *name;
    opt_kind kind;
    size_t offset;                     /* of the value in opts */
    int64_t lo, hi;                    /* OPT_INT, OPT_REAL */
    int secs;                          /* OPT_REAL: seconds, "N" or "Ns" */
    const char *const *(*names)(void); /* OPT_CHOICE */
    const at_field_desc *field;        /* OPT_FIELD */
} opt_spec;

#define O(f) offsetof(opts, f)
/* The fields of an opt_spec: {OPT(...)}. */
#define OPT(n, k, f)          .name = n, .kind = k, .offset = O(f)
#define OPT_RANGE(n, f, l, h) OPT(n, OPT_INT, f), .lo = l, .hi = h
#define OPT_NAMES(n, f, list) OPT(n, OPT_CHOICE, f), .names = list

static const char *const g_backends[] = {"auto", "cuda", "hip", "opencl", NULL};
static const char *const *backend_names(void) { return g_backends; }
static const char *const g_tables[] = {"best",    "results", "binaries", "meta",
                                       "devices", "checks",  NULL};
static const char *const *table_names(void) { return g_tables; }
static const char *const g_progress[] = {"auto", "always", "never", NULL};
static const char *const *progress_names(void) { return g_progress; }
static const char *const g_prefer[] = {"faster", "newer", "existing", NULL}; /* at_prefer */
static const char *const *prefer_names(void) { return g_prefer; }

/* The options that name a device and a template, shared by the operations and `space`. */
#define DEVICE_OPTS                                                                                \
    {OPT_NAMES("backend", backend, backend_names)}, {OPT_RANGE("device", device, 0, 1023)},        \
    {                                                                                              \
        OPT("template", OPT_STR, tmpl)                                                             \
    }

/* The search options, shared by `gemm` and `replay`. */
#define SEARCH_OPTS                                                                                \
    {OPT_NAMES("strategy", strategy, at_tune_strategies)}, {OPT("budget", OPT_BUDGET, budget)},    \
        {OPT("seed", OPT_SEED, seed)},                                                             \
    {                                                                                              \
        OPT_RANGE("no-improve", no_improve, 1, INT64_MAX)                                          \
    }

/* The options of a tuning run on the device: its limits and its progress lines, shared by the
 * operations and `tune`. */
#define RUN_OPTS                                                                                   \
    {OPT("run-limit", OPT_REAL, run_limit), .lo = 0, .hi = 1000000000, .secs = 1},                 \
        {OPT("slowdown-limit", OPT_REAL, slowdown_limit), .lo = 0, .hi = 1000000},                 \
        {OPT_NAMES("progress", progress, progress_names)}, {OPT("no-proxy", OPT_FLAG, no_proxy)},  \
        {OPT("no-transfer", OPT_FLAG, no_transfer)},                                               \
    {                                                                                              \
        OPT("quiet", OPT_FLAG, quiet)                                                              \
    }

/* The help of RUN_OPTS, for the operations and `tune`. */
#define RUN_HELP                                                                                   \
    "  --run-limit SECONDS   stop a candidate whose run takes longer (default 20, or three "       \
    "times\n"                                                                                      \
    "                        the estimated run when more); recorded as a timeout\n"                \
    "  --slowdown-limit R    stop a candidate whose run takes more than R times the best so far\n" \
    "                        (default 10; 0: off); recorded as a timeout, not retried on resume\n" \
    "                        unless --force\n"                                                     \
    "  --progress auto|always|never   on a terminal a live line; elsewhere a plain line every\n"   \
    "                        5 s (always: after every candidate) (default auto)\n"                 \
    "  --quiet               print nothing on stderr but errors (no progress, no warning)\n"       \
    "  --no-proxy            time every candidate on the problem itself, also when the budget\n"   \
    "                        covers fewer than 8 (by default they are timed on a smaller proxy,\n" \
    "                        for GEMM a slice of K, and the best 3 confirmed here)\n"              \
    "  --no-transfer         no warm start (by default the results of the same template on the\n"  \
    "                        3 nearest shapes tuned on this device, and on this shape on other\n"  \
    "                        devices of its family, are measured first and guide the search)\n"

/* The descriptions of an operation's fields (n of them, at most MAX_FIELDS). */
typedef struct op_fields {
    const char *op;
    at_field_desc d[MAX_FIELDS];
    size_t n;
} op_fields;

static void load_fields(const char *op, op_fields *f)
{
    f->op = op;
    f->n = 0;
    while (f->n < MAX_FIELDS && at_operation_field(op, f->n, &f->d[f->n]) == AT_OK) f->n++;
}

/* The option specs of a command: its fixed ones, then the operation's problem fields. */
static const opt_spec *with_fields(const opt_spec *fixed, const op_fields *f, opt_spec *out,
                                   size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; f && i < f->n && n + 1 < cap; i++)
        if (f->d[i].shape)
            out[n++] =
                (opt_spec){.name = f->d[i].name, .kind = OPT_FIELD, .offset = i, .field = &f->d[i]};
    for (const opt_spec *s = fixed; s->name && n + 1 < cap; s++) out[n++] = *s;
    out[n] = (opt_spec){0};
    return out;
}

/* The index of val among names (NULL-terminated); -1 if absent. */
static int name_index(const char *const *names, const char *val)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(val, names[i]) == 0) return i;
    return -1;
}

/* val must be one of names: its index in *out, else a usage error listing them. */
static int pick(const char *what, const char *val, const char *const *names, int *out)
{
    if ((*out = name_index(names, val)) >= 0) return 0;
    char list[512];
    return usage_error("unknown %s '%s' (one of: %s)", what, val,
                       at_join_names(list, sizeof list, names));
}

/* Decimal digits only: the value in *out. 0 when s is not such a number or it does not fit in
 * 64 bits. */
static int scan_decimal(const char *s, uint64_t *out)
{
    if (!isdigit((unsigned char)*s)) return 0;
    uint64_t v = 0;
    for (; *s; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (!isdigit((unsigned char)*s) || v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    *out = v;
    return 1;
}

/* Reads the value of one option into o; a usage error naming it when the value is bad. */
static int set_opt(const opt_spec *sp, const char *val, opts *o)
{
    char *field = (char *)o + sp->offset;
    int64_t v;
    double x;
    switch (sp->kind) {
    case OPT_LIST:
        if (!*val) return usage_error("option '--%s' needs a value", sp->name);
        if (o->ntransfer == MAX_TRANSFER)
            return usage_error("option '--%s' is given more than %d times", sp->name, MAX_TRANSFER);
        o->transfer[o->ntransfer++] = val;
        return 0;
    case OPT_FIELD:
        if (sp->field->kind == AT_FIELD_CHOICE) {
            int i;
            if (pick(sp->name, val, sp->field->choices, &i)) return EXIT_USAGE;
        } else if (sp->field->kind == AT_FIELD_INT) {
            if (at_parse_i64(val, sp->field->lo, sp->field->hi, &v) != 0)
                return usage_error("--%s '%s' is not an integer from %lld to %lld", sp->name, val,
                                   (long long)sp->field->lo, (long long)sp->field->hi);
        } else if (at_parse_real(val, &x) != 0) {
            return usage_error("--%s '%s' is not a finite number", sp->name, val);
        }
        o->field[sp->offset] = val;
        return 0;
    case OPT_INT:
        if (at_parse_i64(val, sp->lo, sp->hi, (int64_t *)field) != 0)
            return usage_error("--%s '%s' is not an integer from %lld to %lld", sp->name, val,
                               (long long)sp->lo, (long long)sp->hi);
        return 0;
    case OPT_SEED:
        if (!scan_decimal(val, (uint64_t *)field))
            return usage_error("--%s '%s' is not an integer from 0 to %llu", sp->name, val,
                               (unsigned long long)UINT64_MAX);
        return 0;
    case OPT_BUDGET: {
        budget *b = (budget *)field;
        if (at_parse_budget(val, &b->evals, &b->seconds))
            return usage_error("--%s '%s' is not a count of evaluations (N >= 1) or of "
                               "seconds (Ns, e.g. 90s)",
                               sp->name, val);
        return 0;
    }
    case OPT_REAL: {
        char num[64];
        size_t n = strlen(val);
        if (sp->secs && n && val[n - 1] == 's') n--; /* "30s" as --budget takes it */
        snprintf(num, sizeof num, "%.*s", (int)(n < 63 ? n : 63), val);
        if (at_parse_real(num, &x) != 0 || x < (double)sp->lo || x > (double)sp->hi ||
            (sp->secs && !(x > 0)))
            return usage_error("--%s '%s' is not %s from %lld to %lld", sp->name, val,
                               sp->secs ? "a number of seconds (N or Ns) greater than 0"
                                        : "a number",
                               (long long)sp->lo, (long long)sp->hi);
        *(double *)field = x;
        return 0;
    }
    case OPT_CHOICE: {
        int i;
        if (pick(sp->name, val, sp->names(), &i)) return EXIT_USAGE;
        *(const char **)field = val;
        return 0;
    }
    case OPT_STR:
        if (!*val) return usage_error("option '--%s' needs a value", sp->name);
        *(const char **)field = val;
        return 0;
    case OPT_FLAG:
        break;
    }
    return 0;
}

/* Reads argv: options (--name value, --name=value, flags), each at most once, and up to maxpos
 * positional arguments. --help (-h) stops reading: the command prints its help. */
static int parse_opts(int argc, char **argv, const opt_spec *specs, opts *o, char **positional,
                      int maxpos, int *npos)
{
    uint64_t seen = 0; /* bit i: specs[i] was given (a command has fewer than 64 options) */
    *npos = 0;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            o->help = 1;
            return 0;
        }
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            if (*npos >= maxpos) return usage_error("unexpected argument '%s'", arg);
            positional[(*npos)++] = argv[i];
            continue;
        }
        char name[64];
        const char *eq = strchr(arg, '=');
        size_t nlen = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
        snprintf(name, sizeof name, "%.*s", (int)(nlen < 63 ? nlen : 63), arg + 2);
        const opt_spec *sp = NULL;
        for (const opt_spec *s = specs; s->name && !sp; s++)
            if (strlen(s->name) == nlen && strncmp(s->name, arg + 2, nlen) == 0) sp = s;
        if (!sp) return usage_error("unknown option '--%s'", name);
        uint64_t bit = 1ull << (sp - specs);
        if (seen & bit && sp->kind != OPT_LIST)
            return usage_error("option '--%s' is given twice", name);
        seen |= bit;
        if (sp->kind == OPT_FLAG || (sp->kind == OPT_FIELD && sp->field->kind == AT_FIELD_FLAG)) {
            if (eq) return usage_error("option '--%s' takes no value", name);
            if (sp->kind == OPT_FIELD)
                o->field[sp->offset] = "1";
            else
                *(int *)((char *)o + sp->offset) = 1;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val || (!eq && strncmp(val, "--", 2) == 0 && val[2]))
            return usage_error("option '--%s' needs a value", name);
        int rc = set_opt(sp, val, o);
        if (rc) return rc;
    }
    return 0;
}

/* "model | random | ... (default model": the strategies, the first being the default. */
static void strategy_list(char *buf, size_t len)
{
    const char *const *names = at_tune_strategies();
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; names[i] && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? " | " : "", names[i]);
    if (used < len) snprintf(buf + used, len - used, " (default %s", names[0]);
}

/* The search options of `gemm` and `replay`. */
static void search_from_opts(const opts *o, at_tune_options *to)
{
    to->strategy = o->strategy;
    to->max_evals = o->budget.evals;
    to->max_seconds = o->budget.seconds;
    to->seed = o->seed;
    to->no_improve = o->no_improve;
}

/* Makes the problem of the fields given (a missing one takes its example value when
 * use_examples, for counting a space) and the context options; on a bad one, *p is NULL. */
static int problem_from_opts(const opts *o, const op_fields *f, int use_examples, at_problem **p,
                             at_context_options *co)
{
    int rc = 0;
    if (at_problem_create(f->op, p) != AT_OK)
        return fail(AT_ERR_INVALID_ARG, at_problem_last_error());
    for (size_t i = 0; i < f->n && !rc; i++) {
        const char *val = o->field[i];
        if (!val && !f->d[i].def && use_examples) val = f->d[i].example;
        if (!val && !f->d[i].def)
            rc = usage_error("%s needs --%s (%lld to %lld)", f->op, f->d[i].name,
                             (long long)f->d[i].lo, (long long)f->d[i].hi);
        else if (val && at_problem_set(*p, f->d[i].name, val) != AT_OK)
            rc = usage_error("%s", at_problem_last_error());
    }
    if (rc) {
        at_problem_destroy(*p);
        *p = NULL;
        return rc;
    }
    memset(co, 0, sizeof *co);
    co->backend = o->backend ? (at_backend_kind)name_index(g_backends, o->backend) : 0;
    co->device = (int)o->device;
    co->db_path = o->db;
    return 0;
}

/* The problem as JSON: {"op": ..., then each field that identifies it}. */
static cJSON *problem_json(const at_problem *p, const op_fields *f)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "op", f->op);
    for (size_t i = 0; i < f->n; i++) {
        if (!f->d[i].shape) continue;
        char buf[64];
        at_problem_get(p, f->d[i].name, buf, sizeof buf);
        if (f->d[i].kind == AT_FIELD_CHOICE)
            cJSON_AddStringToObject(j, f->d[i].name, buf);
        else if (f->d[i].kind == AT_FIELD_FLAG)
            cJSON_AddBoolToObject(j, f->d[i].name, strcmp(buf, "1") == 0);
        else
            cJSON_AddNumberToObject(j, f->d[i].name, strtod(buf, NULL));
    }
    return j;
}

/* Adds a number printed with a fixed format (cJSON would print the shortest exact form, and
 * these fields have kept their precision since the first release). */
static void add_number(cJSON *j, const char *name, const char *fmt, double v)
{
    char buf[64];
    snprintf(buf, sizeof buf, fmt, v);
    if (isfinite(v))
        cJSON_AddRawToObject(j, name, buf);
    else
        cJSON_AddNullToObject(j, name);
}

/* Prints a JSON object on stdout, one line, and frees it. */
static void print_json(cJSON *j)
{
    char *text = cJSON_PrintUnformatted(j);
    if (text) puts(text);
    free(text);
    cJSON_Delete(j);
}

/* "gemm f32 nn 37x29x53": the problem's database key, readable. */
static void problem_title(const at_problem *p, char *buf, size_t len)
{
    if (at_problem_key(p, buf, len) != AT_OK) snprintf(buf, len, "%s", at_problem_operation(p));
    for (char *c = buf; *c; c++)
        if (*c == '/') *c = ' ';
}

static int open_context(const at_context_options *co, at_context **ctx)
{
    at_status s = at_context_create(co, ctx);
    /* Layers of the search path that could not be opened were skipped: say so. */
    const char *w = s == AT_OK ? at_context_warnings(*ctx) : "";
    for (const char *nl; *w; w = nl + 1) {
        if (!(nl = strchr(w, '\n'))) nl = w + strlen(w) - 1;
        fprintf(stderr, "%s: warning: %.*s\n", g_cmd, (int)(nl - w), w);
    }
    if (s == AT_OK) return 0;
    int rc = fail(s, at_context_last_error(*ctx));
    at_context_destroy(*ctx);
    *ctx = NULL;
    return rc;
}

/* One answer of the chain as JSON (source, database, from_device, problem_key, config, ...). */
static void lookup_json(cJSON *j, const at_lookup_info *in)
{
    cJSON_AddStringToObject(j, "source", at_source_name(in->source));
    cJSON_AddStringToObject(j, "database", in->database);
    cJSON_AddStringToObject(j, "from_device", in->device_key);
    cJSON_AddStringToObject(j, "from_problem", in->problem_key);
    cJSON_AddStringToObject(j, "template", in->template_name);
    cJSON_AddStringToObject(j, "config", in->config);
    add_number(j, "time_us", "%.3f", in->time_us);
    cJSON_AddBoolToObject(j, "validated", in->validated);
}

/* `autotune OP ... --no-tune`: the fallback chain's answer, nothing tuned. */
static int print_lookup(at_context *ctx, const at_problem *p, const op_fields *f, int json)
{
    at_lookup_info in;
    at_status s = at_lookup(ctx, p, 0, &in);
    if (s != AT_OK) return fail(s, at_context_last_error(ctx));
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "backend", at_context_backend(ctx));
        cJSON_AddStringToObject(j, "device", at_context_device_name(ctx));
        cJSON_AddStringToObject(j, "device_key", at_context_device_key(ctx));
        cJSON_AddItemToObject(j, "problem", problem_json(p, f));
        lookup_json(j, &in);
        print_json(j);
        return 0;
    }
    char title[256];
    problem_title(p, title, sizeof title);
    printf("%s on %s (%s)  [not tuned: --no-tune]\n", title, at_context_device_name(ctx),
           at_context_backend(ctx));
    printf("  source      %s%s\n", at_source_name(in.source),
           in.validated ? " (checked on this device)" : "");
    if (in.source != AT_SOURCE_DEFAULT) {
        printf("  database    %s\n", in.database);
        printf("  tuned for   %s on %s (%.1f us there)\n", in.problem_key, in.device_key,
               in.time_us);
    }
    printf("  template    %s\n", in.template_name);
    printf("  config      %s\n", in.config);
    return 0;
}

/* ---- autotune gemm ------------------------------------------------------------------------ */

/* `autotune OP --help`: the operation's fields, then the options every operation has. */
static void print_op_help(const op_fields *f)
{
    printf("usage: autotune %s", f->op);
    for (size_t i = 0; i < f->n; i++)
        if (f->d[i].shape && !f->d[i].def)
            printf(" --%s %c", f->d[i].name, toupper(f->d[i].name[0]));
    printf(" [options]\n\n%s\nRecords every measurement and the best configuration in the "
           "database, and prints\n"
           "the best kernel. A second run on the same problem and device answers from the\n"
           "database at once.\n\n",
           at_operation_help(f->op));
    for (size_t i = 0; i < f->n; i++) {
        const at_field_desc *d = &f->d[i];
        if (!d->shape) continue;
        char arg[128] = "";
        if (d->kind == AT_FIELD_CHOICE)
            for (size_t c = 0; d->choices[c]; c++)
                snprintf(arg + strlen(arg), sizeof arg - strlen(arg), "%s%s", c ? "|" : "",
                         d->choices[c]);
        else if (d->kind != AT_FIELD_FLAG)
            snprintf(arg, sizeof arg, "%c", toupper(d->name[0]));
        char left[160];
        snprintf(left, sizeof left, "--%s%s%s", d->name, *arg ? " " : "", arg);
        printf("  %-21s %s", left, d->help);
        if (d->kind == AT_FIELD_INT) printf(", %lld to %lld", (long long)d->lo, (long long)d->hi);
        if (d->def && d->def[0] != '=' && d->kind != AT_FIELD_FLAG) printf(" (default %s)", d->def);
        printf("\n");
    }
    char strategies[256];
    strategy_list(strategies, sizeof strategies);
    printf(
        "  --backend auto|cuda|hip|opencl   (default auto: GPU first, OpenCL last;\n"
        "                        AUTOTUNE_BACKEND sets the default)\n"
        "  --device I            device index within the backend (default 0)\n"
        "  --template NAME       tune this template instead of the one picked for the element\n"
        "                        type and device (e.g. gemm_mma where gemm_wgmma is the default)\n"
        "  --strategy NAME       %s:\n"
        "                        a cost model refined online by a random forest; docs/search.md)\n"
        "  --budget N|Ns         stop after N evaluations or N seconds (default: 60s, exhaustive\n"
        "                        the whole space); with seconds, a candidate is not started\n"
        "                        when what is left cannot cover it (the first always is)\n"
        "  --seed S              seed of the search strategy (default 1)\n"
        "  --no-improve N        stop after N evaluations without a better time\n"
        "  --replay DB           answer every candidate from DB's recorded results for this\n"
        "                        problem, device and template instead of running it (a candidate\n"
        "                        without a record counts as failed; a seconds budget counts the\n"
        "                        recorded seconds); nothing is stored\n"
        "  --db PATH             database directory (default $AUTOTUNE_DB, "
        "$XDG_CACHE_HOME/autotune,\n"
        "                        ~/.cache/autotune)\n"
        "  --force               measure again even if the database has results\n"
        "  --no-tune             answer from the databases without tuning: the fallback chain\n"
        "                        (exact, nearest-shape, same-arch, vendor, default) over --db and\n"
        "                        the read-only layers ($AUTOTUNE_DB_PATH, then the shipped folder\n"
        "                        $AUTOTUNE_SHIPPED_DB; docs/shipping.md); prints the source, the\n"
        "                        database and the device the entry came from\n"
        "  --json                print one JSON object on stdout (also after an interrupt, with\n"
        "                        \"complete\":false and exit status 1, and \"best\":null when\n"
        "                        nothing was measured yet); a cache hit reports the space size\n"
        "                        recorded when it was tuned, none for older records; a tuning run\n"
        "                        adds \"budget\" {seconds, used, overrun, next_would_not_fit} and\n"
        "                        \"estimate\" {candidate_seconds, covers}, and \"transfer\"\n"
        "                        {sources [{source, configs, pairs, weight}],\n"
        "                        first_picks_from_sources, probe_picks}\n" RUN_HELP "\n"
        "Exit status: 0 success, 2 bad usage or input, 1 runtime failure (no device, database).\n",
        strategies);
}

static volatile int g_cancel;
static void on_sigint(int sig)
{
    (void)sig;
    g_cancel = 1;
}

/* How a tuning run shows its progress on stderr: a live line rewritten in place (a terminal),
 * a plain line every PLAIN_EVERY_S seconds (elsewhere), one after every candidate (--progress
 * always off a terminal), or none. */
typedef enum { PROGRESS_NONE, PROGRESS_LIVE, PROGRESS_PLAIN, PROGRESS_EACH } progress_mode;
#define PLAIN_EVERY_S 5.0

typedef struct progress_state {
    progress_mode mode;
    int quiet;   /* no warning either */
    double last; /* at_now() of the last plain line */
} progress_state;

/* The progress of the options: --quiet and --progress against whether stderr is a terminal
 * (tty: the caller's verdict, false when lines of several processes would mix). */
static progress_state progress_of(const opts *o, int tty)
{
    progress_state ps = {PROGRESS_NONE, o->quiet, 0};
    const char *m = o->progress ? o->progress : "auto";
    if (o->quiet || strcmp(m, "never") == 0) return ps;
    ps.mode = tty ? PROGRESS_LIVE : strcmp(m, "always") == 0 ? PROGRESS_EACH : PROGRESS_PLAIN;
    return ps;
}

static void on_candidate(void *user, const at_tune_progress *p)
{
    progress_state *ps = user;
    if (p->done == 0) { /* the up-front estimate */
        if (!ps->quiet && p->budget_s > 0 && p->estimate_s > 0 && p->budget_s < 8 * p->estimate_s)
            fprintf(stderr,
                    "%s: warning: one candidate of %s takes ~%.3g s here (estimated); the %.0f s "
                    "budget covers about %.0f%s%s%s\n",
                    g_cmd, p->problem, p->estimate_s, p->budget_s,
                    floor(p->budget_s / p->estimate_s),
                    p->proxy[0] ? ": candidates are timed on " : "", p->proxy,
                    p->proxy[0]                   ? ", the best few confirmed here"
                    : p->budget_s < p->estimate_s ? " (the first is measured whatever it takes)"
                                                  : "");
        return;
    }
    char of[64] = "", best[96] = "no best yet";
    if (p->budget > 0) snprintf(of, sizeof of, "/%" PRId64, p->budget);
    if (p->best_us > 0)
        snprintf(best, sizeof best, "best %.1f us (%.1f GFLOP/s)", p->best_us, p->best_gflops);
    double now = at_now();
    if (ps->mode == PROGRESS_LIVE) {
        fprintf(stderr, "\r  %" PRId64 "%s candidates  %s  %.0fs", p->done, of, best, p->elapsed_s);
        if (p->budget_s > 0) fprintf(stderr, " of %.0fs", p->budget_s);
        fprintf(stderr, "  last %s %s\033[K", p->config, p->status);
        fflush(stderr);
    } else if (ps->mode == PROGRESS_EACH ||
               (ps->mode == PROGRESS_PLAIN && now - ps->last >= PLAIN_EVERY_S)) {
        ps->last = now;
        fprintf(stderr, "%s: %s: %" PRId64 "%s candidates, %s, %.0f s", g_cmd, p->problem, p->done,
                of, best, p->elapsed_s);
        if (p->budget_s > 0) fprintf(stderr, " of %.0f s", p->budget_s);
        fprintf(stderr, "; last %s %s\n", p->config, p->status);
    }
}

/* The limits of a tuning run and its progress hook. */
static void run_from_opts(const opts *o, progress_state *ps, at_tune_options *to)
{
    to->run_limit_s = o->run_limit;
    /* --slowdown-limit 0 turns it off; the library's 0 is its default */
    to->slowdown_limit = o->slowdown_limit < 0    ? 0
                         : o->slowdown_limit == 0 ? -1
                                                  : o->slowdown_limit;
    to->on_candidate = on_candidate;
    to->progress_user = ps;
    to->no_proxy = o->no_proxy;
    to->no_transfer = o->no_transfer;
}

/* The JSON of a run's warm start: its sources (their details in src) and the first picks they
 * gave. */
static void transfer_json(cJSON *j, const at_tune_report *r, const at_transfer_source *src)
{
    cJSON *x = cJSON_AddObjectToObject(j, "transfer"), *a;
    cJSON_AddItemToObject(x, "sources", a = cJSON_CreateArray());
    for (int32_t i = 0; i < r->transfer_sources && i < AT_TRANSFER_MAX; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "source", src[i].name);
        cJSON_AddNumberToObject(e, "configs", (double)src[i].configs);
        cJSON_AddNumberToObject(e, "pairs", (double)src[i].pairs);
        add_number(e, "weight", "%.4f", src[i].weight);
        cJSON_AddItemToArray(a, e);
    }
    cJSON_AddNumberToObject(x, "first_picks_from_sources", (double)r->first_picks_from_sources);
    cJSON_AddNumberToObject(x, "probe_picks", (double)r->probe_picks);
}

/* The JSON of a run's budget and estimate (cJSON object j), when it had them. */
static void budget_json(cJSON *j, const at_tune_report *r)
{
    if (r->budget_s > 0) {
        cJSON *b = cJSON_AddObjectToObject(j, "budget");
        add_number(b, "seconds", "%.3f", r->budget_s);
        add_number(b, "used", "%.3f", r->seconds);
        add_number(b, "overrun", "%.3f", r->overrun_s);
        cJSON_AddBoolToObject(b, "next_would_not_fit", r->budget_stopped != 0);
    }
    if (r->proxy_problem[0]) {
        cJSON *x = cJSON_AddObjectToObject(j, "proxy");
        cJSON_AddStringToObject(x, "problem", r->proxy_problem);
        cJSON_AddNumberToObject(x, "evaluated", (double)r->proxy_evaluated);
        cJSON_AddNumberToObject(x, "confirmed", (double)r->proxy_confirmed);
    }
    if (r->estimate_s > 0) {
        cJSON *e = cJSON_AddObjectToObject(j, "estimate");
        add_number(e, "candidate_seconds", "%.3g", r->estimate_s);
        if (r->budget_s > 0) add_number(e, "covers", "%.1f", r->budget_s / r->estimate_s);
    }
}

static int cmd_op(const char *op, int argc, char **argv)
{
    static const opt_spec fixed[] = {DEVICE_OPTS,
                                     SEARCH_OPTS,
                                     {OPT("replay", OPT_STR, replay)},
                                     {OPT("db", OPT_STR, db)},
                                     {OPT("force", OPT_FLAG, force)},
                                     {OPT("no-tune", OPT_FLAG, no_tune)},
                                     {OPT("json", OPT_FLAG, json)},
                                     RUN_OPTS,
                                     {0}};
    op_fields f;
    load_fields(op, &f);
    opt_spec specs[64];
    opts o = {.slowdown_limit = -1};
    char *pos[1];
    int npos, rc = parse_opts(argc, argv, with_fields(fixed, &f, specs, 64), &o, pos, 0, &npos);
    if (rc) return rc;
    if (o.help) {
        print_op_help(&f);
        return 0;
    }
    at_tune_options to = {0};
    at_problem *p = NULL;
    at_context *ctx = NULL;
    at_context_options co;
    search_from_opts(&o, &to);
    if (o.no_tune &&
        (o.force || o.replay || o.strategy || o.budget.evals || o.budget.seconds || o.no_improve ||
         o.tmpl || o.run_limit > 0 || o.slowdown_limit >= 0 || o.no_proxy || o.no_transfer))
        return usage_error("--no-tune answers from the databases: it takes no tuning option");
    if ((rc = problem_from_opts(&o, &f, 0, &p, &co)) || (rc = open_context(&co, &ctx))) goto done;
    if (o.no_tune) {
        rc = print_lookup(ctx, p, &f, o.json);
        goto done;
    }

    progress_state ps = progress_of(&o, isatty(2));
    run_from_opts(&o, &ps, &to);
    to.replay_db = o.replay;
    to.force = o.force;
    to.template_name = o.tmpl;
    to.cancel = &g_cancel;
    at_transfer_source transfer[AT_TRANSFER_MAX];
    to.transfer_out = transfer;
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    at_tune_report rep;
    at_status s = at_tune(ctx, p, &to, &rep, NULL);
    if (ps.mode == PROGRESS_LIVE) fprintf(stderr, "\r\033[K");
    /* An interrupted run still reports what it measured (its best is not stored as tuned); its
     * JSON object, also when nothing was (best: null). */
    int partial = s == AT_ERR_INTERRUPTED || s == AT_ERR_DEVICE_LOST;
    if (s != AT_OK) {
        rc = fail(s, at_context_last_error(ctx));
        if (!partial || !(o.json || rep.best_config[0])) goto done;
    }
    if (o.json) {
        cJSON *j = cJSON_CreateObject(), *best, *cand;
        cJSON_AddStringToObject(j, "backend", at_context_backend(ctx));
        cJSON_AddStringToObject(j, "device", at_context_device_name(ctx));
        cJSON_AddStringToObject(j, "device_key", at_context_device_key(ctx));
        cJSON_AddItemToObject(j, "problem", problem_json(p, &f));
        cJSON_AddStringToObject(j, "template", rep.template_name);
        if (rep.best_config[0]) {
            cJSON_AddItemToObject(j, "best", best = cJSON_CreateObject());
            cJSON_AddStringToObject(best, "config", rep.best_config);
            add_number(best, "time_us", "%.3f", rep.best_time_us);
            add_number(best, "gflops", "%.3f", rep.best_gflops);
            add_number(best, "max_rel_error", "%.3g", rep.best_max_rel_error);
        } else {
            cJSON_AddNullToObject(j, "best");
        }
        cJSON_AddItemToObject(j, "candidates", cand = cJSON_CreateObject());
        cJSON_AddNumberToObject(cand, "evaluated", (double)rep.evaluated);
        cJSON_AddNumberToObject(cand, "measured", (double)rep.measured);
        cJSON_AddNumberToObject(cand, "failed", (double)rep.failed);
        if (rep.space > 0) cJSON_AddNumberToObject(cand, "space", (double)rep.space);
        cJSON_AddNumberToObject(cand, "space_total", (double)rep.space_total);
        cJSON_AddNumberToObject(cand, "seeds", (double)rep.seeds);
        cJSON_AddNumberToObject(cand, "slow_stopped", (double)rep.slow_stopped);
        if (!rep.cache_hit) transfer_json(j, &rep, transfer);
        cJSON_AddStringToObject(j, "cache", rep.cache_hit ? "hit" : "miss");
        add_number(j, "seconds", "%.3f", rep.seconds);
        if (!rep.cache_hit) budget_json(j, &rep);
        cJSON_AddBoolToObject(j, "complete", s == AT_OK);
        print_json(j);
    } else {
        char title[256];
        problem_title(p, title, sizeof title);
        printf("%s on %s (%s)%s\n", title, at_context_device_name(ctx), at_context_backend(ctx),
               rep.cache_hit ? "  [from the database]" : "");
        printf("  template    %s\n", rep.template_name);
        printf("  best        %s\n", rep.best_config);
        printf("  time        %.1f us  (%.2f GFLOP/s, max rel error %.2g)\n", rep.best_time_us,
               rep.best_gflops, rep.best_max_rel_error);
        if (!rep.cache_hit)
            printf("  candidates  %" PRId64 " evaluated (%" PRId64 " measured, %" PRId64
                   " failed) of %" PRId64 " valid, %" PRId64 " in all\n",
                   rep.evaluated, rep.measured, rep.failed, rep.space, rep.space_total);
        if (rep.seeds)
            printf("  seeds       %" PRId64
                   " tried first (from the databases on the search path)\n",
                   rep.seeds);
        for (int32_t i = 0; !rep.cache_hit && i < rep.transfer_sources; i++)
            printf("  transfer    %s: %" PRId64 " configs, weight %.2f\n", transfer[i].name,
                   transfer[i].configs, transfer[i].weight);
        if (!rep.cache_hit && rep.transfer_sources)
            printf("  first picks %d of the first 10 from the warm start, %" PRId64
                   " probe moves around them\n",
                   (int)rep.first_picks_from_sources, rep.probe_picks);
        if (rep.slow_stopped)
            printf("  stopped     %" PRId64 " candidate%s at the slowdown limit (recorded as "
                   "timeouts)\n",
                   rep.slow_stopped, rep.slow_stopped == 1 ? "" : "s");
        if (rep.proxy_problem[0])
            printf("  proxy       %" PRId64 " candidates timed on %s, %" PRId64
                   " of its best confirmed here\n",
                   rep.proxy_evaluated, rep.proxy_problem, rep.proxy_confirmed);
        if (!rep.cache_hit && rep.estimate_s > 0)
            printf("  estimate    ~%.3g s per candidate before any was measured\n", rep.estimate_s);
        printf("  wall time   %.2f s", rep.seconds);
        if (!rep.cache_hit && rep.budget_s > 0) printf(" of a %.0f s budget", rep.budget_s);
        if (!rep.cache_hit && rep.overrun_s > 0) printf(" (over by %.2f s)", rep.overrun_s);
        printf("\n");
    }
done:
    at_context_destroy(ctx);
    at_problem_destroy(p);
    return rc;
}

/* ---- autotune tune --shapes ------------------------------------------------------------------ */

static const char TUNE_HELP[] =
    "usage: autotune tune --shapes FILE [--budget N|Ns] [--total-budget N|Ns] [--shard I/N]\n"
    "                     [--dry-run] [--json] [--db PATH] [--backend B] [--device I]\n"
    "                     [--template NAME] [--strategy NAME] [--seed S] [--no-improve N]\n"
    "                     [--run-limit S] [--slowdown-limit R] [--progress M] [--quiet]\n"
    "                     [--no-proxy] [--no-transfer]\n"
    "\n"
    "Tunes every problem of a shape list into the database, in list order. A problem already\n"
    "tuned is a cache hit (nothing measured), so a list run again after an interrupt resumes\n"
    "where it stopped, and the problem that was in flight resumes from its stored measurements.\n"
    "Each problem prints a line on stderr: its place in the list, its key, its best time, whether\n"
    "it was tuned or found in the database (cache), and the list's ETA.\n"
    "\n"
    "  --shapes FILE        a YAML list of problems, one operation an item, e.g.\n"
    "                         - gemm: {m: [16, 128], n: 4096, k: 4096, layout: nt}\n"
    "                         - attention: {heads: 32, kv-heads: 8, seq: 2048, head-dim: 128}\n"
    "                       (fields as the operation's options; a list of values expands to the\n"
    "                       product; a problem listed twice is tuned once; docs/shipping.md)\n"
    "  --budget N|Ns        per problem: N evaluations or N seconds (default: the search's, 60s)\n"
    "  --total-budget N|Ns  for the whole list: each problem gets the smaller of its own budget\n"
    "                       and an even share of what is left (evaluations measured, or wall\n"
    "                       seconds) for the problems not yet done; without --budget, its share.\n"
    "                       Problems left when it is spent are skipped\n"
    "  --shard I/N          only the problems whose index in the expanded list is I modulo N\n"
    "                       (0 <= I < N): N jobs without MPI each tune a slice into a database\n"
    "  --dry-run            print the problems' keys (after --shard), one a line, and exit\n"
    "  --json               one JSON object on stdout: device, problems [{index, key, problem,\n"
    "                       status (ok|failed|interrupted|skipped|pending), cache (hit|miss),\n"
    "                       best {config, time_us, gflops} (null when none), evaluated,\n"
    "                       measured, seconds, budget, estimate, error}], complete; printed\n"
    "                       also after an interrupt\n"
    "  --db, --backend, --device, --template, --strategy, --seed, --no-improve, --run-limit,\n"
    "  --slowdown-limit, --progress, --no-proxy, --no-transfer\n"
    "                       as for `autotune gemm --help`\n"
    "  --quiet              print nothing on stderr but errors (not the problems' lines either)\n"
    "\n"
    "Under MPI, `mpirun -n R autotune tune --shapes FILE` spreads the problems over R ranks:\n"
    "rank 0 hands them out as ranks ask, tunes too, and is the only one writing the database;\n"
    "each rank takes device (local rank %% devices) of the backend. This runs autotune-mpi from\n"
    "autotune's folder (built when CMake finds MPI).\n"
    "\n"
    "Exit status: 0 every problem tuned or found, 1 a problem failed or was skipped, or the run\n"
    "was interrupted (SIGINT, SIGTERM: after the candidate in hand; what was measured is saved),\n"
    "2 bad usage or a bad list.\n";

/* Where a problem of the list is. */
typedef enum { P_PENDING = 0, P_RUNNING, P_DONE } list_state;

typedef struct list_entry {
    list_state state;
    int rank;     /* the rank that tuned it (MPI) */
    int skipped;  /* not tuned: the total budget was spent */
    int64_t held; /* evaluations of the total budget held for it while it runs */
    tune_outcome out;
} list_entry;

/* A list run: the problems of this shard, their outcomes, the total budget, the progress lines.
 * Shared by rank 0's two threads under MPI, hence the lock. */
typedef struct tune_list {
    const opts *o;
    at_shapes all;
    size_t n, *index; /* this shard's problems: indices into all */
    list_entry *e;
    size_t next, done;
    int64_t spent; /* evaluations measured, for the total budget */
    int64_t held;  /* evaluations held by problems in flight */
    int workers;   /* ranks tuning at once */
    int tty;       /* the in-problem progress on stderr (one process on a terminal) */
    double t0;
    at_tune_options base; /* the search options every problem shares */
    pthread_mutex_t lock;
} tune_list;

/* "1h02m", "3m20s", "45s". */
static void format_duration(double s, char *buf, size_t len)
{
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, len, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60)
        snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, len, "%lds", t);
}

/* The next problem to tune and its budget; 0 when none is left. */
static int list_take(void *user, int rank, size_t *i, int64_t *max_evals, double *max_seconds)
{
    tune_list *l = user;
    int got = 0;
    pthread_mutex_lock(&l->lock);
    while (!got && !g_cancel && l->next < l->n) {
        list_entry *e = &l->e[l->next];
        const budget *total = &l->o->total_budget;
        size_t left = l->n - l->next; /* not yet handed out, this one included */
        *max_evals = l->o->budget.evals;
        *max_seconds = l->o->budget.seconds;
        int spent = 0;
        if (total->evals > 0) {
            int64_t avail = total->evals - l->spent - l->held;
            int64_t share = avail / (int64_t)left > 1 ? avail / (int64_t)left : 1;
            spent = avail < 1;
            if (!*max_evals || share < *max_evals) *max_evals = share;
        }
        if (total->seconds > 0) {
            double avail = total->seconds - (at_now() - l->t0);
            double share = avail * l->workers / (double)left;
            spent |= avail <= 0;
            if (share > avail) share = avail;
            if (!*max_seconds || share < *max_seconds) *max_seconds = share;
        }
        *i = l->next++;
        if (spent) {
            e->state = P_DONE;
            e->skipped = 1;
            l->done++;
            if (!l->o->quiet)
                fprintf(stderr, "[%zu/%zu] %s  skipped: the total budget is spent\n", *i + 1, l->n,
                        l->all.keys[l->index[*i]]);
            continue;
        }
        e->state = P_RUNNING;
        e->rank = rank;
        e->held = total->evals > 0 ? *max_evals : 0;
        l->held += e->held;
        got = 1;
    }
    pthread_mutex_unlock(&l->lock);
    return got;
}

/* Problem i is done: its outcome, and its progress line. */
static void list_done(void *user, size_t i, int rank, const tune_outcome *out)
{
    tune_list *l = user;
    pthread_mutex_lock(&l->lock);
    list_entry *e = &l->e[i];
    e->state = P_DONE;
    e->rank = rank;
    e->out = *out;
    l->held -= e->held;
    l->spent += out->rep.measured;
    l->done++;
    if (l->o->quiet) { /* nothing but errors */
        pthread_mutex_unlock(&l->lock);
        return;
    }
    /* The line in pieces: the lock keeps other lines out of it. */
    const at_tune_report *r = &out->rep;
    fprintf(stderr, "[%zu/%zu] %s", i + 1, l->n, l->all.keys[l->index[i]]);
    if (out->status == AT_OK || (out->status == AT_ERR_INTERRUPTED && r->best_config[0]))
        fprintf(stderr, "  best %.1f us (%.2f GFLOP/s)", r->best_time_us, r->best_gflops);
    if (out->status == AT_OK)
        fprintf(stderr, "  %s", r->cache_hit ? "cache" : "tuned");
    else if (out->status == AT_ERR_INTERRUPTED)
        fprintf(stderr, "  interrupted after %" PRId64 " candidate%s", r->evaluated,
                r->evaluated == 1 ? "" : "s");
    else
        fprintf(stderr, "  failed: %s%s%s", at_strerror(out->status), out->error[0] ? ": " : "",
                out->error);
    if (l->workers > 1) fprintf(stderr, "  rank %d", rank);
    if (l->done < l->n && !g_cancel) {
        char eta[32];
        double elapsed = at_now() - l->t0;
        format_duration(elapsed / (double)l->done * (double)(l->n - l->done), eta, sizeof eta);
        fprintf(stderr, "  list ETA %s", eta);
    }
    fputc('\n', stderr);
    pthread_mutex_unlock(&l->lock);
}

static const char *list_key(void *user, size_t i)
{
    tune_list *l = user;
    return i < l->n ? l->all.keys[l->index[i]] : NULL;
}

/* Tunes problem i on ctx: the per-problem progress on a terminal, as `autotune gemm` shows it. */
static void list_tune(void *user, at_context *ctx, size_t i, int64_t max_evals, double max_seconds,
                      tune_outcome *out)
{
    tune_list *l = user;
    progress_state ps = progress_of(l->o, l->tty);
    ps.last = at_now(); /* each problem has its line: a plain one only for a problem past 5 s */
    at_tune_options to = l->base;
    run_from_opts(l->o, &ps, &to);
    to.max_evals = max_evals;
    to.max_seconds = max_seconds;
    memset(out, 0, sizeof *out);
    out->status = at_tune(ctx, l->all.problems[l->index[i]], &to, &out->rep, NULL);
    if (ps.mode == PROGRESS_LIVE) fprintf(stderr, "\r\033[K");
    if (out->status != AT_OK)
        snprintf(out->error, sizeof out->error, "%s", at_context_last_error(ctx));
}

static const char *entry_status(const list_entry *e)
{
    if (e->state != P_DONE) return "pending";
    if (e->skipped) return "skipped";
    if (e->out.status == AT_OK) return "ok";
    return e->out.status == AT_ERR_INTERRUPTED ? "interrupted" : "failed";
}

static void list_json(const tune_list *l, at_context *ctx, int ranks, int complete)
{
    cJSON *j = cJSON_CreateObject(), *arr;
    cJSON_AddStringToObject(j, "backend", at_context_backend(ctx));
    cJSON_AddStringToObject(j, "device", at_context_device_name(ctx));
    cJSON_AddStringToObject(j, "device_key", at_context_device_key(ctx));
    cJSON_AddStringToObject(j, "shapes", l->o->shapes);
    if (ranks > 1) cJSON_AddNumberToObject(j, "ranks", ranks);
    cJSON_AddItemToObject(j, "problems", arr = cJSON_CreateArray());
    int64_t evaluated = 0, measured = 0;
    for (size_t i = 0; i < l->n; i++) {
        const list_entry *e = &l->e[i];
        const at_tune_report *r = &e->out.rep;
        const at_problem *p = l->all.problems[l->index[i]];
        op_fields f;
        load_fields(at_problem_operation(p), &f);
        cJSON *pj = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, pj);
        cJSON_AddNumberToObject(pj, "index", (double)l->index[i]);
        cJSON_AddStringToObject(pj, "key", l->all.keys[l->index[i]]);
        cJSON_AddItemToObject(pj, "problem", problem_json(p, &f));
        cJSON_AddStringToObject(pj, "status", entry_status(e));
        if (ranks > 1 && e->state == P_DONE && !e->skipped)
            cJSON_AddNumberToObject(pj, "rank", e->rank);
        if (e->state != P_DONE || e->skipped) {
            cJSON_AddNullToObject(pj, "best");
            continue;
        }
        cJSON_AddStringToObject(pj, "cache", r->cache_hit ? "hit" : "miss");
        if (r->best_config[0]) {
            cJSON *best = cJSON_AddObjectToObject(pj, "best");
            cJSON_AddStringToObject(best, "config", r->best_config);
            add_number(best, "time_us", "%.3f", r->best_time_us);
            add_number(best, "gflops", "%.3f", r->best_gflops);
        } else {
            cJSON_AddNullToObject(pj, "best");
        }
        cJSON_AddStringToObject(pj, "template", r->template_name);
        cJSON_AddNumberToObject(pj, "evaluated", (double)r->evaluated);
        cJSON_AddNumberToObject(pj, "measured", (double)r->measured);
        add_number(pj, "seconds", "%.3f", r->seconds);
        if (!r->cache_hit) budget_json(pj, r);
        if (e->out.status != AT_OK) cJSON_AddStringToObject(pj, "error", e->out.error);
        evaluated += r->evaluated;
        measured += r->measured;
    }
    cJSON_AddNumberToObject(j, "evaluated", (double)evaluated);
    cJSON_AddNumberToObject(j, "measured", (double)measured);
    add_number(j, "seconds", "%.3f", at_now() - l->t0);
    cJSON_AddBoolToObject(j, "complete", complete);
    print_json(j);
}

/* "I/N" with 0 <= I < N: *i and *n; a usage error otherwise. */
static int parse_shard(const char *text, int64_t *i, int64_t *n)
{
    const char *slash = strchr(text, '/');
    char first[32];
    if (slash && (size_t)(slash - text) < sizeof first) {
        snprintf(first, sizeof first, "%.*s", (int)(slash - text), text);
        if (at_parse_i64(first, 0, INT32_MAX, i) == 0 &&
            at_parse_i64(slash + 1, 1, INT32_MAX, n) == 0 && *i < *n)
            return 0;
    }
    return usage_error("--shard '%s' is not I/N with 0 <= I < N (e.g. 0/4)", text);
}

static int cmd_tune(int argc, char **argv)
{
    static const opt_spec specs[] = {DEVICE_OPTS,
                                     SEARCH_OPTS,
                                     {OPT("shapes", OPT_STR, shapes)},
                                     {OPT("total-budget", OPT_BUDGET, total_budget)},
                                     {OPT("shard", OPT_STR, shard)},
                                     {OPT("dry-run", OPT_FLAG, dry_run)},
                                     {OPT("db", OPT_STR, db)},
                                     {OPT("json", OPT_FLAG, json)},
                                     RUN_OPTS,
                                     {0}};
    /* -1: --device, --slowdown-limit not given (under MPI each rank picks its own device) */
    opts o = {.device = -1, .slowdown_limit = -1};
    char *pos[1];
    int npos, rc = parse_opts(argc, argv, specs, &o, pos, 0, &npos);
    if (rc) return rc;
    if (o.help) {
        printf("%s", TUNE_HELP);
        return 0;
    }
    if (!o.shapes) return usage_error("tune needs --shapes FILE (a YAML list of problems)");
    int64_t shard = 0, nshards = 1;
    if (o.shard && (rc = parse_shard(o.shard, &shard, &nshards))) return rc;

    tune_list l = {.o = &o, .workers = 1};
    at_status s = at_shapes_load(o.shapes, &l.all);
    if (s != AT_OK) {
        fail(s, at_errmsg());
        return EXIT_USAGE; /* a list that cannot be read is bad input */
    }
    l.index = calloc(l.all.n, sizeof *l.index);
    l.e = calloc(l.all.n, sizeof *l.e);
    if (!l.index || !l.e) {
        rc = fail(AT_ERR_NO_MEMORY, NULL);
        goto out;
    }
    for (size_t i = (size_t)shard; i < l.all.n; i += (size_t)nshards) l.index[l.n++] = i;
    pthread_mutex_init(&l.lock, NULL);

    int rank = 0, ranks = 1;
    at_context_options co;
    memset(&co, 0, sizeof co);
    co.backend = o.backend ? (at_backend_kind)name_index(g_backends, o.backend) : 0;
    co.device = o.device < 0 ? 0 : (int)o.device;
    co.db_path = o.db;
#ifdef AT_WITH_MPI
    fleet *fl = NULL;
    char why[1024] = "";
    if ((s = fleet_init(&argc, &argv, &fl, why, sizeof why)) != AT_OK) {
        rc = fail(s, why);
        goto out;
    }
    rank = fleet_rank(fl);
    ranks = fleet_size(fl);
    if (o.device >= 0 && ranks > 1) {
        rc = rank ? EXIT_USAGE
                  : usage_error("--device is not for MPI: each rank takes device local rank %% "
                                "devices");
        goto out_fleet;
    }
    /* From here a rank that cannot tune leaves the list to the others (exit 0: mpirun would end
     * the whole job on a non-zero one); rank 0 cannot, and ends the job. */
    if (!o.dry_run && ranks > 1) {
        s = fleet_device(fl, o.backend, &co.backend, &co.device, why, sizeof why);
        if (s == AT_OK && rank > 0 && !(co.db_path = fleet_db(fl))) s = AT_ERR_IO;
        if (s != AT_OK) {
            if (rank == 0) fail(s, why); /* another rank's message comes from rank 0 */
            fleet_leave(fl, why);
            goto out_fleet;
        }
    }
#endif
    if (o.dry_run) {
        for (size_t i = 0; i < l.n && rank == 0; i++) puts(l.all.keys[l.index[i]]);
        if (rank == 0)
            fprintf(stderr, "%zu problems%s (%zu in %s)\n", l.n, o.shard ? " in this shard" : "",
                    l.all.n, o.shapes);
        goto out_fleet;
    }

    at_context *ctx = NULL;
    if ((rc = open_context(&co, &ctx))) {
#ifdef AT_WITH_MPI
        if (ranks > 1) {
            fleet_leave(fl, "its device or database did not open (its message is above)");
            rc = 0;
        }
#endif
        goto out_fleet;
    }
    search_from_opts(&o, &l.base);
    l.base.template_name = o.tmpl;
    l.base.cancel = &g_cancel;
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    l.workers = ranks;
    l.tty = ranks == 1 && isatty(2); /* ranks' lines would break into one another's */
    l.t0 = at_now();
    fleet_hooks h = {&l, list_take, list_done, list_key, list_tune};
#ifdef AT_WITH_MPI
    s = fleet_run(fl, ctx, &h, &g_cancel);
    if (s != AT_OK) rc = fail(s, at_errmsg());
#else
    size_t i;
    int64_t max_evals;
    double max_seconds;
    while (h.take(h.user, 0, &i, &max_evals, &max_seconds)) {
        tune_outcome out;
        h.tune(h.user, ctx, i, max_evals, max_seconds, &out);
        h.done(h.user, i, 0, &out);
    }
#endif
    if (rank == 0) {
        int complete = 1;
        for (size_t k = 0; k < l.n; k++)
            complete &= l.e[k].state == P_DONE && !l.e[k].skipped && l.e[k].out.status == AT_OK;
        if (o.json) list_json(&l, ctx, ranks, complete);
        if (!complete && !rc) rc = EXIT_RUNTIME;
    }
    at_context_destroy(ctx);
out_fleet:
#ifdef AT_WITH_MPI
    fleet_end(fl);
#endif
    pthread_mutex_destroy(&l.lock);
out:
    free(l.index);
    free(l.e);
    at_shapes_free(&l.all);
    return rc;
}

/* ---- autotune space ----------------------------------------------------------------------- */

static const char SPACE_HELP[] =
    "usage: autotune space OP [--m M --n N --k K ...] [--template NAME] [--backend B] [--device "
    "I]\n"
    "                         [--list] [--json]\n"
    "       autotune space OP --backend cuda|hip --arch A --compile [--limit N] [--seed S]\n"
    "\n"
    "Counts the tuning space of the template an operation (gemm) gets on a device, before and\n"
    "after its constraints, for a problem (fields not given take example values: GEMM\n"
    "1024x1024x1024), and with --list prints every valid configuration. --template picks\n"
    "another template of the operation (e.g. gemm_mma).\n"
    "With --arch and --compile it compiles the space for that target without any device\n"
    "(cuda: sm_80 sm_86 sm_89 sm_90 sm_90a; hip: gfx908 gfx90a gfx940 gfx941 gfx942 gfx1030\n"
    "gfx1100, with feature suffixes like gfx90a:sramecc+:xnack-; a target the installed hipRTC\n"
    "cannot compile for is refused: ROCm 5.2 supports gfx908, gfx90a and gfx1030; the backend\n"
    "defaults to hip for a gfx target), checks each kernel's registers and spills, and\n"
    "prints how many compiled, how many were rejected and why, and compiles per second;\n"
    "--limit N compiles N configurations spread evenly through the space.\n";

/* `space OP --arch A --compile`: compile without a device and count the outcomes. */
static int space_compile(const opts *o, const at_problem *p)
{
    if (!o->arch) return usage_error("--compile needs --arch (e.g. --arch sm_90a)");
    if (!o->compile) return usage_error("--arch is for --compile (a device's space: --device)");
    const char *backend = o->backend && strcmp(o->backend, "auto") ? o->backend
                          : strncmp(o->arch, "gfx", 3) == 0        ? "hip"
                                                                   : "cuda";
    at_compile_report r;
    char why[4096] = "";
    at_status s =
        at_compile_space(backend, o->arch, p, o->tmpl, o->limit, o->seed, 0, &r, why, sizeof why);
    if (s != AT_OK) return fail(s, why);
    double rate = r.seconds > 0 ? (double)r.attempted / r.seconds : 0;
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "template", r.template_name);
        cJSON_AddStringToObject(j, "backend", backend);
        cJSON_AddStringToObject(j, "arch", o->arch);
        cJSON_AddNumberToObject(j, "space", (double)r.space);
        cJSON_AddNumberToObject(j, "attempted", (double)r.attempted);
        cJSON_AddNumberToObject(j, "compiled", (double)r.compiled);
        cJSON_AddNumberToObject(j, "compile_errors", (double)r.compile_errors);
        cJSON_AddNumberToObject(j, "resource_rejected", (double)r.resource_rejected);
        add_number(j, "seconds", "%.3f", r.seconds);
        add_number(j, "per_second", "%.3f", rate);
        cJSON_AddStringToObject(j, "first_error", r.first_error);
        cJSON_AddStringToObject(j, "first_rejection", r.first_rejection);
        print_json(j);
    } else {
        char title[256];
        problem_title(p, title, sizeof title);
        printf("%s space (%s) for %s %s: %" PRId64 " valid configurations, %" PRId64 " compiled\n",
               title, r.template_name, backend, o->arch, r.space, r.attempted);
        printf("  %" PRId64 " ok, %" PRId64 " compile errors, %" PRId64
               " rejected for resources; %.2f compiles/s (%.1f s)\n",
               r.compiled, r.compile_errors, r.resource_rejected, rate, r.seconds);
        if (r.first_error[0]) printf("  first compile error: %s\n", r.first_error);
        if (r.first_rejection[0]) printf("  first rejection: %s\n", r.first_rejection);
    }
    return r.compile_errors ? EXIT_RUNTIME : 0;
}

static int print_config(void *user, const char *config)
{
    (void)user;
    puts(config);
    return 0;
}

/* The operation named by a command's positional argument; NULL (after the message) if none. */
static const char *find_op(const char *name, const char *what)
{
    int i;
    return pick(what, name, at_operations(), &i) ? NULL : at_operations()[i];
}

static int cmd_space(int argc, char **argv)
{
    static const opt_spec fixed[] = {DEVICE_OPTS,
                                     {OPT("db", OPT_STR, db)},
                                     {OPT("arch", OPT_STR, arch)},
                                     {OPT("compile", OPT_FLAG, compile)},
                                     {OPT_RANGE("limit", limit, 1, INT64_MAX)},
                                     {OPT("seed", OPT_SEED, seed)},
                                     {OPT("list", OPT_FLAG, list)},
                                     {OPT("json", OPT_FLAG, json)},
                                     {0}};
    /* The operation comes first, so that its fields are options. */
    const char *op =
        argc > 0 && strncmp(argv[0], "--", 2) != 0 && strcmp(argv[0], "-h") != 0 ? argv[0] : NULL;
    op_fields f = {0};
    if (op) {
        if (!(op = find_op(op, "template"))) return EXIT_USAGE;
        load_fields(op, &f);
        argc--, argv++;
    }
    opt_spec specs[64];
    opts o = {0};
    char *pos[1];
    int npos, rc = parse_opts(argc, argv, with_fields(fixed, op ? &f : NULL, specs, 64), &o, pos, 0,
                              &npos);
    if (rc) return rc;
    if (o.help) {
        fputs(SPACE_HELP, stdout);
        return 0;
    }
    if (!op) return usage_error("space needs an operation: %s", at_operations()[0]);
    at_problem *p = NULL;
    at_context *ctx = NULL;
    at_context_options co;
    if ((rc = problem_from_opts(&o, &f, 1, &p, &co))) return rc;
    if (o.compile || o.arch) {
        rc = space_compile(&o, p);
        goto done;
    }
    if ((rc = open_context(&co, &ctx))) goto done;
    at_space_info info;
    at_status s =
        at_space_count(ctx, p, o.tmpl, &info, o.list && !o.json ? print_config : NULL, NULL);
    if (s != AT_OK) {
        rc = fail(s, at_context_last_error(ctx));
    } else if (o.json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "template", info.template_name);
        cJSON_AddStringToObject(j, "device", at_context_device_name(ctx));
        cJSON_AddItemToObject(j, "problem", problem_json(p, &f));
        cJSON_AddNumberToObject(j, "total", (double)info.total);
        cJSON_AddNumberToObject(j, "valid", (double)info.valid);
        cJSON_AddStringToObject(j, "parameters", info.params);
        print_json(j);
    } else if (!o.list) {
        char title[256];
        problem_title(p, title, sizeof title);
        printf("%s space (%s) on %s:\n", title, info.template_name, at_context_device_name(ctx));
        printf("  %" PRId64 " configurations, %" PRId64 " valid after constraints\n", info.total,
               info.valid);
        printf("  %s\n", info.params);
    }
done:
    at_context_destroy(ctx);
    at_problem_destroy(p);
    return rc;
}

/* ---- autotune replay ------------------------------------------------------------------------ */

static const char REPLAY_HELP[] =
    "usage: autotune replay FILE [--strategy NAME] [--budget N|Ns] [--seed S] [--no-improve N]\n"
    "                            [--select PREFIX] [--transfer SOURCE ...] [--no-transfer]\n"
    "                            [--json]\n"
    "\n"
    "Replays a tuning run against a recorded space instead of a device: every configuration the\n"
    "strategy proposes is answered with its recorded time or failure. FILE is a Kernel Tuner\n"
    "cache file (JSON, plain or .gz) or an autotune database directory; the format is read\n"
    "from the content. Prints the recording's optimum, the best found, and the number of\n"
    "evaluations at each improvement (the trajectory).\n"
    "\n"
    "  --strategy NAME   %s;\n"
    "                    docs/search.md says how each works)\n"
    "  --budget N|Ns     stop after N evaluations, or after N recorded seconds (the compile and\n"
    "                    benchmark time the recording says those evaluations took); default:\n"
    "                    until the whole space is evaluated\n"
    "  --seed S          seed of the strategy (default 1)\n"
    "  --no-improve N    stop after N evaluations without a better time\n"
    "  --select PREFIX   for a database holding several spaces: a prefix of\n"
    "                    'problem|device|template hash' choosing one\n"
    "  --transfer SOURCE warm-start from another recording of the same kernel (another device\n"
    "                    or shape; repeatable): its best configs are evaluated first and the\n"
    "                    model learns from it while it ranks what is measured here alike; a\n"
    "                    source of another kernel or with no config in FILE's space is\n"
    "                    refused with a warning (docs/search.md, \"Transfer\")\n"
    "  --no-transfer     ignore the --transfer sources (a run to compare with)\n"
    "  --json            one JSON object: space, optimum_time, evaluated, best {config, time},\n"
    "                    trajectory [[evaluations, best_time_so_far], ...], transfer\n"
    "                    {sources [{file, used, reason, configs, pairs, weight}],\n"
    "                    first_picks_from_sources, probe_picks}\n"
    "\n"
    "Exit status: 0 success, 2 bad usage or input (unreadable or malformed file), 1 runtime\n"
    "failure.\n";

static int cmd_replay(int argc, char **argv)
{
    static const opt_spec specs[] = {SEARCH_OPTS,
                                     {OPT("select", OPT_STR, select)},
                                     {OPT("transfer", OPT_LIST, transfer)},
                                     {OPT("no-transfer", OPT_FLAG, no_transfer)},
                                     {OPT("json", OPT_FLAG, json)},
                                     {0}};
    opts o = {0};
    char *pos[1];
    int npos, rc = parse_opts(argc, argv, specs, &o, pos, 1, &npos);
    if (rc) return rc;
    if (o.help) {
        char strategies[256];
        strategy_list(strategies, sizeof strategies);
        printf(REPLAY_HELP, strategies);
        return 0;
    }
    if (npos != 1)
        return usage_error("replay needs a recorded space: a Kernel Tuner cache file "
                           "or an autotune database");
    at_tune_options to = {0};
    search_from_opts(&o, &to);
    to.transfer = o.transfer;
    to.ntransfer = o.ntransfer;
    to.no_transfer = o.no_transfer;
    at_replay_report r;
    char why[4096] = "";
    at_status s = at_replay_file(pos[0], o.select, &to, &r, why, sizeof why);
    if (s == AT_ERR_IO || s == AT_ERR_DB || s == AT_ERR_DB_CORRUPT || s == AT_ERR_DB_VERSION) {
        /* An unreadable recording is bad input to this command. */
        fail(s, why);
        return EXIT_USAGE;
    }
    if (s != AT_OK) return fail(s, why);
    if (why[0]) fprintf(stderr, "%s: warning: %s\n", g_cmd, why);
    for (size_t i = 0; i < r.ntransfer; i++)
        if (!r.transfer[i].used && !o.no_transfer)
            fprintf(stderr, "%s: warning: --transfer %s is not used: %s\n", g_cmd,
                    r.transfer[i].name, r.transfer[i].reason);
    const char *strategy = o.strategy ? o.strategy : at_tune_strategies()[0];
    if (o.json) {
        cJSON *j = cJSON_CreateObject(), *traj;
        cJSON_AddStringToObject(j, "file", pos[0]);
        cJSON_AddStringToObject(j, "format", r.format);
        cJSON_AddStringToObject(j, "device", r.device);
        cJSON_AddStringToObject(j, "kernel", r.kernel);
        cJSON_AddStringToObject(j, "objective", r.objective);
        cJSON_AddStringToObject(j, "strategy", strategy);
        cJSON_AddNumberToObject(j, "seed", (double)(o.seed ? o.seed : 1));
        cJSON_AddNumberToObject(j, "space", (double)r.space);
        cJSON_AddNumberToObject(j, "space_failed", (double)r.space_failed);
        add_number(j, "optimum_time", "%.17g", r.optimum);
        cJSON_AddStringToObject(j, "optimum_config", r.optimum_config);
        cJSON_AddNumberToObject(j, "evaluated", (double)r.evaluated);
        cJSON_AddNumberToObject(j, "failed", (double)r.failed);
        if (r.found) {
            cJSON *best = cJSON_AddObjectToObject(j, "best");
            cJSON_AddStringToObject(best, "config", r.best_config);
            add_number(best, "time", "%.17g", r.best);
        } else {
            cJSON_AddNullToObject(j, "best");
        }
        add_number(j, "simulated_seconds", "%.3f", r.simulated_seconds);
        add_number(j, "seconds", "%.4f", r.seconds);
        cJSON_AddItemToObject(j, "trajectory", traj = cJSON_CreateArray());
        for (size_t i = 0; i < r.ntrajectory; i++) {
            cJSON *pt = cJSON_CreateArray();
            cJSON_AddItemToArray(pt, cJSON_CreateNumber((double)r.trajectory_evals[i]));
            char buf[32];
            snprintf(buf, sizeof buf, "%.17g", r.trajectory_best[i]);
            cJSON_AddItemToArray(pt, cJSON_CreateRaw(buf));
            cJSON_AddItemToArray(traj, pt);
        }
        if (r.ntransfer) {
            cJSON *x = cJSON_AddObjectToObject(j, "transfer"), *srcs;
            cJSON_AddItemToObject(x, "sources", srcs = cJSON_CreateArray());
            for (size_t i = 0; i < r.ntransfer; i++) {
                const at_transfer_source *t = &r.transfer[i];
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "file", t->name);
                cJSON_AddBoolToObject(e, "used", t->used);
                if (!t->used) cJSON_AddStringToObject(e, "reason", t->reason);
                cJSON_AddNumberToObject(e, "configs", (double)t->configs);
                cJSON_AddNumberToObject(e, "pairs", (double)t->pairs);
                if (t->used) add_number(e, "weight", "%.4f", t->weight);
                cJSON_AddItemToArray(srcs, e);
            }
            cJSON_AddNumberToObject(x, "first_picks_from_sources",
                                    (double)r.first_picks_from_sources);
            cJSON_AddNumberToObject(x, "probe_picks", (double)r.probe_picks);
        }
        print_json(j);
    } else {
        printf("replay of %s (%s%s%s, %s) with %s, seed %" PRIu64 "\n", pos[0], r.format,
               r.device[0] ? ", " : "", r.device, r.kernel, strategy, o.seed ? o.seed : 1);
        printf("  space       %" PRId64 " configurations (%" PRId64 " failed when recorded)\n",
               r.space, r.space_failed);
        if (r.space_failed < r.space)
            printf("  optimum     %.6g %s  %s\n", r.optimum, r.objective, r.optimum_config);
        else
            printf("  optimum     none (every recorded configuration failed)\n");
        if (r.found)
            printf("  best found  %.6g %s  %s  (%.2f%% of the optimum's %s)\n", r.best, r.objective,
                   r.best_config, 100.0 * r.best / r.optimum, r.objective);
        else
            printf("  best found  none (every evaluated configuration failed)\n");
        printf("  evaluated   %" PRId64 " (%" PRId64 " failed), %.1f recorded seconds\n",
               r.evaluated, r.failed, r.simulated_seconds);
        printf("  improvements at evaluations:");
        for (size_t i = 0; i < r.ntrajectory; i++) printf(" %" PRId64, r.trajectory_evals[i]);
        printf("\n");
        for (size_t i = 0; i < r.ntransfer; i++) {
            const at_transfer_source *t = &r.transfer[i];
            if (t->used)
                printf("  transfer    %s: %" PRId64 " configs, weight %.3f on %" PRId64
                       " shared measurements\n",
                       t->name, t->configs, t->weight, t->pairs);
            else
                printf("  transfer    %s: not used (%s)\n", t->name, t->reason);
        }
        if (r.ntransfer)
            printf("  first picks from the sources: %" PRId64 " of the first 10; probe: %" PRId64
                   " moves around them\n",
                   r.first_picks_from_sources, r.probe_picks);
    }
    at_replay_report_clear(&r);
    return 0;
}

/* ---- autotune devices ---------------------------------------------------------------------- */

static int cmd_devices(int argc, char **argv)
{
    static const opt_spec specs[] = {{OPT("json", OPT_FLAG, json)}, {0}};
    opts o = {0};
    char *pos[1];
    int npos, rc = parse_opts(argc, argv, specs, &o, pos, 0, &npos);
    if (rc) return rc;
    if (o.help) {
        puts("usage: autotune devices [--json]\n\nLists every backend, whether its runtime is "
             "there (and why not), and its devices.");
        return 0;
    }
    at_backend_desc b[8];
    int nb = 0;
    at_backends_query(b, 8, &nb);
    cJSON *j = cJSON_CreateObject(), *backends = cJSON_AddArrayToObject(j, "backends");
    for (int i = 0; i < nb; i++) {
        cJSON *bj = cJSON_CreateObject(), *devs = NULL;
        cJSON_AddItemToArray(backends, bj);
        cJSON_AddStringToObject(bj, "name", b[i].name);
        cJSON_AddBoolToObject(bj, "available", b[i].available);
        cJSON_AddStringToObject(bj, "why", b[i].why);
        devs = cJSON_AddArrayToObject(bj, "devices");
        if (!o.json && !b[i].available)
            printf("%-7s unavailable: %s\n", b[i].name, b[i].why);
        else if (!o.json) /* with what it loaded, when the backend says */
            printf("%-7s available%s%s%s\n", b[i].name, b[i].ndevices && b[i].why[0] ? " (" : "",
                   b[i].ndevices ? b[i].why : "", b[i].ndevices && b[i].why[0] ? ")" : "");
        for (int d = 0; b[i].available && d < b[i].ndevices; d++) {
            at_device_desc dd;
            if (at_device_query(b[i].name, d, &dd) != AT_OK) continue;
            cJSON *dj = cJSON_CreateObject();
            cJSON_AddItemToArray(devs, dj);
            cJSON_AddNumberToObject(dj, "index", d);
            cJSON_AddStringToObject(dj, "name", dd.name);
            cJSON_AddStringToObject(dj, "key", dd.key);
            cJSON_AddStringToObject(dj, "arch", dd.arch);
            cJSON_AddStringToObject(dj, "driver", dd.driver);
            cJSON_AddNumberToObject(dj, "compute_units", (double)dd.compute_units);
            cJSON_AddBoolToObject(dj, "cpu", dd.is_cpu);
            cJSON_AddBoolToObject(dj, "tma", dd.tma != 0);
            cJSON_AddBoolToObject(dj, "cluster", dd.cluster != 0);
            if (!o.json)
                printf("  [%d] %s  (%" PRId64 " compute units, %" PRId64
                       " MiB, %s)\n      key: %s\n",
                       d, dd.name, dd.compute_units, dd.global_mem_bytes >> 20, dd.driver, dd.key);
        }
        if (b[i].available && !b[i].ndevices && !o.json) printf("  %s\n", b[i].why);
    }
    if (o.json)
        print_json(j);
    else
        cJSON_Delete(j);
    return 0;
}

/* ---- autotune db ----------------------------------------------------------------------------- */

static const char DB_HELP[] =
    "usage: autotune db list [--table best|results|binaries|meta|devices|checks] [--prefix P]\n"
    "                       [--db PATH]\n"
    "       autotune db show PREFIX [--db PATH] [--backend B] [--device I]\n"
    "       autotune db verify [--op OP] [--max-slowdown F] [--retune] [--json] [--db PATH]\n"
    "                          [--backend B] [--device I] [--budget N|Ns] [--strategy S]\n"
    "       autotune db export FILE [--op OP] [--device PATTERN] [--best-only] [--db PATH]\n"
    "       autotune db import FILE [--prefer faster|newer|existing] [--json] [--db PATH]\n"
    "       autotune db merge A B... --output C [--prefer faster|newer|existing] [--json]\n"
    "       autotune db stats [--shapes FILE] [--json] [--db PATH]\n"
    "       autotune db export --kernel-tuner --problem KEY [--device KEY] [--template HASH]\n"
    "                          [--output FILE] [--db PATH]\n"
    "\n"
    "list prints the keys of a table (default: best, one line per tuned problem and device).\n"
    "show prints the best entries and every measurement whose key starts with PREFIX, e.g.\n"
    "'gemm/f32/nn/1024x1024x1024', in every database on the search path (--db, then the\n"
    "read-only layers of $AUTOTUNE_DB_PATH and the shipped folder $AUTOTUNE_SHIPPED_DB), each\n"
    "under its path; for a whole problem key, then the fallback chain for that problem on the\n"
    "device (--backend, --device): what each level (exact, nearest-shape, same-arch, vendor,\n"
    "default) would answer (docs/shipping.md).\n"
    "verify re-measures every best entry of the device in the databases on the search path\n"
    "(--op: of one operation) with the tuning's compile, check and timing, stores nothing, and\n"
    "reports the entries now slower than recorded by more than --max-slowdown (default 1.10),\n"
    "failing their check or no longer compiling, or recorded with another driver or compiler\n"
    "version; exit status 1 when there is one, 0 otherwise. --retune tunes those problems again\n"
    "into --db (--budget, --strategy, --seed as for a tuning run).\n"
    "export FILE writes a bundle (docs/shipping.md): gzip-compressed JSON Lines, one record per\n"
    "line with its device and template, readable with `zcat FILE | jq`; FILE '-' is stdout.\n"
    "--op keeps one operation, --device an fnmatch pattern of the device key or name,\n"
    "--best-only the best entries only. import FILE ('-': stdin) checks the whole bundle, then\n"
    "writes it in one transaction; merge joins databases and bundles (told apart by content)\n"
    "into the database C. Of two records with the same key, --prefer faster (the default) keeps\n"
    "the trusted one, then the faster, then the newer; newer the newer; existing what the\n"
    "destination holds. Importing the same records twice writes nothing.\n"
    "stats counts results (ok, failed) and best entries per operation, device and template;\n"
    "--shapes FILE adds the coverage of a shape list: its problems with a best entry, per\n"
    "device, and those without one.\n"
    "export --kernel-tuner writes every measurement of one problem (its key as `db list` shows\n"
    "it, before the '|') as a Kernel Tuner cache JSON file (stdout without --output): the\n"
    "recorded space, for Kernel Tuner's simulation mode and `autotune replay`. --device (a\n"
    "device key) and --template (a template hash) pick one when the problem was tuned on\n"
    "several; times are medians in ms, failed configs are named as Kernel Tuner names them.\n";

static int print_key(void *user, const char *key, const char *value)
{
    (void)value;
    (void)user;
    puts(key);
    return 0;
}

static int print_entry(void *user, const char *key, const char *value)
{
    printf("%s%s\n    %s\n", (const char *)user, key, value);
    return 0;
}

/* The context of `db show` and `db verify`: --db, --backend, and --device as an index (for
 * export it is a device key). */
static int db_context(const opts *o, at_context **ctx)
{
    at_context_options co = {0};
    int64_t dev = 0;
    if (o->device_key && at_parse_i64(o->device_key, 0, 1023, &dev) != 0)
        return usage_error("--device '%s' is not a device index from 0 to 1023", o->device_key);
    co.backend = o->backend ? (at_backend_kind)name_index(g_backends, o->backend) : 0;
    co.device = (int)dev;
    co.db_path = o->db;
    return open_context(&co, ctx);
}

/* `db show`: the entries of every database on the path, then the chain for the problem. */
static int db_show(const opts *o, const char *prefix)
{
    char why[4096] = "";
    /* The user's database first, as before: it must exist (show creates nothing). */
    at_status s = at_db_visit(o->db, "best", prefix, print_entry, "best    ", why, sizeof why);
    if (s == AT_OK && why[0]) fprintf(stderr, "%s: warning: %s\n", g_cmd, why);
    if (s == AT_OK)
        s = at_db_visit(o->db, "results", prefix, print_entry, "result  ", why, sizeof why);
    if (s != AT_OK) return fail(s, why);
    if (why[0]) fprintf(stderr, "%s: warning: %s\n", g_cmd, why);
    at_context *ctx = NULL;
    int rc = db_context(o, &ctx);
    if (rc) {
        fprintf(stderr, "%s: the read-only layers and the chain need a device\n", g_cmd);
        return rc == EXIT_USAGE ? rc : 0;
    }
    for (size_t i = 1; at_context_database(ctx, i) && s == AT_OK; i++) {
        const char *path = at_context_database(ctx, i);
        printf("== %s (read-only layer)\n", path);
        s = at_db_visit(path, "best", prefix, print_entry, "best    ", why, sizeof why);
        if (s == AT_OK)
            s = at_db_visit(path, "results", prefix, print_entry, "result  ", why, sizeof why);
        if (s != AT_OK || why[0]) fprintf(stderr, "%s: warning: %s\n", g_cmd, why);
        s = AT_OK; /* a layer that cannot be read is passed over, as lookups do */
    }
    at_problem *p = NULL;
    if (at_problem_from_key(prefix, &p) != AT_OK) { /* a prefix, not a problem: no chain */
        at_context_destroy(ctx);
        return 0;
    }
    at_lookup_info in[5];
    int found[5];
    s = at_lookup_levels(ctx, p, in, found);
    if (s == AT_OK) {
        printf("chain for %s on %s:\n", prefix, at_context_device_key(ctx));
        static const at_source levels[5] = {AT_SOURCE_HIT, AT_SOURCE_NEAREST, AT_SOURCE_SAME_ARCH,
                                            AT_SOURCE_VENDOR, AT_SOURCE_DEFAULT};
        for (int i = 0; i < 5; i++) {
            printf("  %-14s ", at_source_name(levels[i]));
            if (!found[i])
                printf("none\n");
            else if (levels[i] == AT_SOURCE_DEFAULT)
                printf("%s (%s)\n", in[i].template_name, in[i].config);
            else
                printf("%s from %s on %s (%s: %s)%s\n", in[i].problem_key, in[i].database,
                       in[i].device_key, in[i].template_name, in[i].config,
                       in[i].validated ? ", checked here" : "");
        }
    }
    rc = s == AT_OK ? 0 : fail(s, at_context_last_error(ctx));
    at_problem_destroy(p);
    at_context_destroy(ctx);
    return rc;
}

/* What `db verify` collects: the entries as JSON, and the problems to tune again. */
typedef struct verify_state {
    int json;
    cJSON *entries;
    char (*retune)[2][256]; /* problem key, template name */
    size_t nretune;
} verify_state;

static int on_verified(void *user, const at_verify_entry *e)
{
    verify_state *v = user;
    int flagged = e->slower || e->failed || e->driver_changed || e->compiler_changed;
    if (v->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "database", e->database);
        cJSON_AddStringToObject(j, "problem", e->problem_key);
        cJSON_AddStringToObject(j, "template", e->template_name);
        cJSON_AddStringToObject(j, "config", e->config);
        add_number(j, "recorded_us", "%.3f", e->recorded_us);
        add_number(j, "measured_us", "%.3f", e->measured_us);
        cJSON_AddBoolToObject(j, "slower", e->slower);
        cJSON_AddBoolToObject(j, "failed", e->failed);
        cJSON_AddBoolToObject(j, "driver_changed", e->driver_changed);
        cJSON_AddBoolToObject(j, "compiler_changed", e->compiler_changed);
        cJSON_AddStringToObject(j, "reason", e->reason);
        cJSON_AddItemToArray(v->entries, j);
    } else {
        printf("%-8s %s  %s\n",
               !flagged    ? "ok"
               : e->failed ? "FAILED"
               : e->slower ? "SLOWER"
                           : "CHANGED",
               e->problem_key, e->database);
        if (e->failed)
            printf("         %s\n", e->reason);
        else
            printf("         %.2f us recorded, %.2f us now (%.2fx)\n", e->recorded_us,
                   e->measured_us, e->recorded_us > 0 ? e->measured_us / e->recorded_us : 0);
        if (e->driver_changed) printf("         recorded with driver %s\n", e->recorded_driver);
        if (e->compiler_changed)
            printf("         recorded with compiler %s\n", e->recorded_compiler);
    }
    if (flagged) {
        void *r = realloc(v->retune, (v->nretune + 1) * sizeof *v->retune);
        if (!r) return 1;
        v->retune = r;
        snprintf(v->retune[v->nretune][0], 256, "%s", e->problem_key);
        snprintf(v->retune[v->nretune][1], 256, "%s", e->template_name);
        v->nretune++;
    }
    return 0;
}

static int db_verify(const opts *o)
{
    double factor = 1.10;
    if (o->max_slowdown && (at_parse_real(o->max_slowdown, &factor) != 0 || !(factor > 1)))
        return usage_error("--max-slowdown '%s' is not a number above 1 (e.g. 1.10)",
                           o->max_slowdown);
    if (o->op_name && !find_op(o->op_name, "operation")) return EXIT_USAGE;
    at_context *ctx = NULL;
    int rc = db_context(o, &ctx);
    if (rc) return rc;
    verify_state v = {.json = o->json, .entries = cJSON_CreateArray()};
    int64_t flagged = 0;
    at_status s = at_verify(ctx, o->op_name, factor, on_verified, &v, &flagged);
    if (s != AT_OK) {
        rc = fail(s, at_context_last_error(ctx));
        goto done;
    }
    cJSON *retuned = cJSON_CreateArray();
    for (size_t i = 0; o->retune && i < v.nretune; i++) {
        at_problem *p = NULL;
        at_tune_options to = {0};
        search_from_opts(o, &to);
        to.force = 1;
        to.template_name = v.retune[i][1][0] ? v.retune[i][1] : NULL;
        at_tune_report rep;
        s = at_problem_from_key(v.retune[i][0], &p);
        if (s == AT_OK) s = at_tune(ctx, p, &to, &rep, NULL);
        at_problem_destroy(p);
        if (s != AT_OK) {
            cJSON_Delete(retuned);
            rc = fail(s, at_context_last_error(ctx));
            goto done;
        }
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "problem", v.retune[i][0]);
        cJSON_AddStringToObject(j, "config", rep.best_config);
        add_number(j, "time_us", "%.3f", rep.best_time_us);
        cJSON_AddItemToArray(retuned, j);
        if (!o->json)
            printf("retuned  %s: %s, %.2f us\n", v.retune[i][0], rep.best_config, rep.best_time_us);
    }
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "device_key", at_context_device_key(ctx));
        add_number(j, "max_slowdown", "%.3f", factor);
        cJSON_AddItemToObject(j, "entries", v.entries);
        v.entries = NULL;
        cJSON_AddNumberToObject(j, "flagged", (double)flagged);
        cJSON_AddItemToObject(j, "retuned", retuned);
        print_json(j);
    } else {
        cJSON_Delete(retuned);
        printf("%" PRId64 " flagged\n", flagged);
    }
    rc = flagged ? EXIT_RUNTIME : 0;
done:
    cJSON_Delete(v.entries);
    free(v.retune);
    at_context_destroy(ctx);
    return rc;
}

/* Prints what an import or merge did; a bad input is a usage error (exit 2). */
static int import_done(at_status s, const at_import_report *r, int json, const char *why)
{
    if (s != AT_OK) return fail(s, why);
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "records", (double)r->records);
        cJSON_AddNumberToObject(j, "imported", (double)r->imported);
        cJSON_AddNumberToObject(j, "kept", (double)r->kept);
        cJSON_AddNumberToObject(j, "unchanged", (double)r->unchanged);
        cJSON_AddNumberToObject(j, "devices", (double)r->devices);
        print_json(j);
    } else {
        printf("imported %" PRId64 ", kept %" PRId64 " existing, unchanged %" PRId64 " (%" PRId64
               " records read; %" PRId64 " device records written)\n",
               r->imported, r->kept, r->unchanged, r->records, r->devices);
    }
    return 0;
}

static cJSON *count_json(const at_db_count *c)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", c->name);
    cJSON_AddNumberToObject(o, "results_ok", (double)c->results_ok);
    cJSON_AddNumberToObject(o, "results_failed", (double)c->results_failed);
    cJSON_AddNumberToObject(o, "best", (double)c->best);
    return o;
}

static void print_counts(const char *title, const at_db_count *c, size_t n)
{
    printf("%s\n", title);
    for (size_t i = 0; i < n; i++)
        printf("  %8" PRId64 " ok %8" PRId64 " failed %6" PRId64 " best  %s\n", c[i].results_ok,
               c[i].results_failed, c[i].best, c[i].name[0] ? c[i].name : "(unnamed)");
}

/* The coverage of a shape list: which of its problems have a best entry, on which devices. */
/* The coverage of a shape list: which of its problems have a best entry, on which devices. */
typedef struct keyed {
    const char *key; /* a problem of the list */
    size_t index;    /* its place in the list */
} keyed;

typedef struct coverage {
    keyed *sorted; /* the list's keys in order, for bsearch */
    size_t n;
    char *hit;      /* per problem of the list: it has a best entry */
    char **devices; /* every device key seen, with the problems covered on each */
    int64_t *covered;
    size_t ndevices;
} coverage;

static int cmp_keyed(const void *a, const void *b)
{
    return strcmp(((const keyed *)a)->key, ((const keyed *)b)->key);
}

static int cmp_key_keyed(const void *key, const void *b)
{
    return strcmp(key, ((const keyed *)b)->key);
}

/* One best entry "problem|device": counted when the problem is in the list. */
static int cover_entry(void *user, const char *key, const char *value)
{
    (void)value;
    coverage *c = user;
    const char *bar = strchr(key, '|');
    char problem[300];
    if (!bar || (size_t)(bar - key) >= sizeof problem) return 0;
    snprintf(problem, sizeof problem, "%.*s", (int)(bar - key), key);
    const keyed *at = bsearch(problem, c->sorted, c->n, sizeof *c->sorted, cmp_key_keyed);
    if (!at) return 0;
    c->hit[at->index] = 1;
    const char *device = bar + 1;
    size_t i = 0;
    while (i < c->ndevices && strcmp(c->devices[i], device) != 0) i++;
    if (i == c->ndevices) {
        char **d = realloc(c->devices, (i + 1) * sizeof *d);
        int64_t *n = realloc(c->covered, (i + 1) * sizeof *n);
        if (d) c->devices = d;
        if (n) c->covered = n;
        if (!d || !n || !(d[i] = at_strdup(device))) return 1;
        n[i] = 0;
        c->ndevices++;
    }
    c->covered[i]++;
    return 0;
}

/* Adds the coverage of the shape list in the database to j (JSON) or prints it: one scan of the
 * best entries. */
static int shapes_coverage(const opts *o, const at_shapes *l, cJSON *j)
{
    coverage c = {.n = l->n};
    char why[4096] = "";
    c.sorted = malloc((l->n + 1) * sizeof *c.sorted);
    c.hit = calloc(l->n + 1, 1);
    if (!c.sorted || !c.hit) {
        free(c.sorted);
        free(c.hit);
        return fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    for (size_t i = 0; i < l->n; i++) c.sorted[i] = (keyed){l->keys[i], i};
    qsort(c.sorted, l->n, sizeof *c.sorted, cmp_keyed);
    at_status s = at_db_visit(o->db, "best", NULL, cover_entry, &c, why, sizeof why);
    cJSON *missing = cJSON_CreateArray();
    size_t covered = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (c.hit[i])
            covered++;
        else
            cJSON_AddItemToArray(missing, cJSON_CreateString(l->keys[i]));
    }
    int rc = s == AT_OK ? 0 : fail(s, why);
    if (!rc && j) {
        cJSON *cov = cJSON_AddObjectToObject(j, "coverage");
        cJSON_AddStringToObject(cov, "shapes", o->shapes);
        cJSON_AddNumberToObject(cov, "problems", (double)l->n);
        cJSON_AddNumberToObject(cov, "covered", (double)covered);
        cJSON *devs = cJSON_AddArrayToObject(cov, "devices");
        for (size_t i = 0; i < c.ndevices; i++) {
            cJSON *d = cJSON_CreateObject();
            cJSON_AddStringToObject(d, "key", c.devices[i]);
            cJSON_AddNumberToObject(d, "covered", (double)c.covered[i]);
            cJSON_AddItemToArray(devs, d);
        }
        cJSON_AddItemToObject(cov, "missing", missing);
        missing = NULL;
    } else if (!rc) {
        printf("coverage of %s: %zu of %zu problems have a best entry\n", o->shapes, covered, l->n);
        for (size_t i = 0; i < c.ndevices; i++)
            printf("  %6" PRId64 " of %zu  %s\n", c.covered[i], l->n, c.devices[i]);
        for (int i = 0; i < cJSON_GetArraySize(missing); i++)
            printf("  missing  %s\n", cJSON_GetStringValue(cJSON_GetArrayItem(missing, i)));
    }
    cJSON_Delete(missing);
    for (size_t i = 0; i < c.ndevices; i++) free(c.devices[i]);
    free(c.devices);
    free(c.covered);
    free(c.sorted);
    free(c.hit);
    return rc;
}

static int db_stats(const opts *o)
{
    at_shapes list = {0};
    at_status ls = o->shapes ? at_shapes_load(o->shapes, &list) : AT_OK;
    if (ls != AT_OK)
        return ls == AT_ERR_INVALID_ARG ? usage_error("%s", at_errmsg()) : fail(ls, at_errmsg());
    at_db_stats st;
    char why[4096] = "";
    at_status s = at_db_stats_read(o->db, &st, why, sizeof why);
    if (s != AT_OK) {
        at_shapes_free(&list);
        return fail(s, why);
    }
    if (why[0]) fprintf(stderr, "%s: warning: %s\n", g_cmd, why);
    const struct {
        const char *name;
        const at_db_count *v;
        size_t n;
    } parts[] = {{"operations", st.ops, st.nops},
                 {"devices", st.devices, st.ndevices},
                 {"templates", st.templates, st.ntemplates}};
    int rc = 0;
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddItemToObject(j, "total", count_json(&st.total));
        for (size_t p = 0; p < 3; p++) {
            cJSON *a = cJSON_AddArrayToObject(j, parts[p].name);
            for (size_t i = 0; a && i < parts[p].n; i++)
                cJSON_AddItemToArray(a, count_json(&parts[p].v[i]));
        }
        if (o->shapes) rc = shapes_coverage(o, &list, j);
        if (!rc)
            print_json(j);
        else
            cJSON_Delete(j);
    } else {
        printf("%" PRId64 " results (%" PRId64 " ok, %" PRId64 " failed), %" PRId64
               " best entries\n",
               st.total.results_ok + st.total.results_failed, st.total.results_ok,
               st.total.results_failed, st.total.best);
        for (size_t p = 0; p < 3; p++) print_counts(parts[p].name, parts[p].v, parts[p].n);
        if (o->shapes) rc = shapes_coverage(o, &list, NULL);
    }
    at_db_stats_clear(&st);
    at_shapes_free(&list);
    return rc;
}

/* The db options given that command cmd does not take (allowed: its options, space-separated):
 * the first is a usage error. */
static int db_takes(const char *cmd, const opts *o, const char *allowed)
{
    const struct {
        const char *name;
        int given;
    } all[] = {{"db", o->db != NULL},
               {"table", o->table != NULL},
               {"prefix", o->prefix != NULL},
               {"kernel-tuner", o->kernel_tuner},
               {"problem", o->problem != NULL},
               {"device", o->device_key != NULL},
               {"template", o->template_hash != NULL},
               {"output", o->output != NULL},
               {"op", o->op_name != NULL},
               {"best-only", o->best_only},
               {"prefer", o->prefer != NULL},
               {"json", o->json},
               {"backend", o->backend != NULL},
               {"max-slowdown", o->max_slowdown != NULL},
               {"retune", o->retune},
               {"strategy", o->strategy != NULL},
               {"budget", o->budget.evals || o->budget.seconds},
               {"seed", o->seed != 0},
               {"no-improve", o->no_improve != 0},
               {"shapes", o->shapes != NULL}};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        size_t n = strlen(all[i].name);
        const char *p = allowed;
        while ((p = strstr(p, all[i].name)) &&
               ((p > allowed && p[-1] != ' ') || (p[n] != ' ' && p[n] != '\0')))
            p += n;
        if (all[i].given && !p)
            return usage_error("unknown option '--%s' for db %s", all[i].name, cmd);
    }
    return 0;
}

/* db export, import, merge of bundles (pos: the positional arguments after the command). */
static int db_bundle(const char *cmd, const opts *o, char **pos, int npos)
{
    char why[4096] = "";
    at_prefer prefer = (at_prefer)(o->prefer ? name_index(g_prefer, o->prefer) : 0);
    at_import_report rep = {0};
    if (strcmp(cmd, "export") == 0) {
        if (o->problem || o->template_hash)
            return usage_error("db export --problem needs a format: --kernel-tuner (Kernel Tuner "
                               "cache JSON); a bundle is db export FILE");
        int rc = db_takes(cmd, o, "db op device best-only");
        if (rc) return rc;
        if (npos != 1) return usage_error("db export needs one FILE (a bundle; '-': stdout)");
        if (strcmp(pos[0], "-") == 0 && isatty(STDOUT_FILENO))
            return usage_error("db export -: stdout is a terminal (a bundle is gzip data; "
                               "redirect it or give a FILE)");
        int64_t n = 0;
        at_status s = at_db_export_bundle(o->db, pos[0], o->op_name, o->device_key, o->best_only,
                                          &n, why, sizeof why);
        if (s != AT_OK) return fail(s, why);
        if (why[0]) fprintf(stderr, "%s: warning: %s\n", g_cmd, why);
        if (strcmp(pos[0], "-") != 0) printf("exported %" PRId64 " records to %s\n", n, pos[0]);
        return 0;
    }
    int rc = db_takes(cmd, o, strcmp(cmd, "import") == 0 ? "db prefer json" : "output prefer json");
    if (rc) return rc;
    if (strcmp(cmd, "import") == 0) {
        if (npos != 1) return usage_error("db import needs one FILE (a bundle; '-': stdin)");
        const char *ro = getenv("AUTOTUNE_DB_READONLY");
        if (!o->db && ro && strcmp(ro, "1") == 0)
            return usage_error("db import: AUTOTUNE_DB_READONLY=1 keeps your database as it is "
                               "(--db DIR imports into another)");
        const char *in[1] = {pos[0]};
        at_status s = at_db_import(o->db, in, 1, prefer, &rep, why, sizeof why);
        return import_done(s, &rep, o->json, why);
    }
    if (npos < 1) return usage_error("db merge needs databases or bundles to merge");
    if (!o->output) return usage_error("db merge needs --output C (a database directory)");
    at_status s = at_db_import(o->output, (const char *const *)pos, (size_t)npos, prefer, &rep, why,
                               sizeof why);
    return import_done(s, &rep, o->json, why);
}

static int cmd_db(int argc, char **argv)
{
    static const opt_spec specs[] = {{OPT("db", OPT_STR, db)},
                                     {OPT_NAMES("table", table, table_names)},
                                     {OPT("prefix", OPT_STR, prefix)},
                                     {OPT("kernel-tuner", OPT_FLAG, kernel_tuner)},
                                     {OPT("problem", OPT_STR, problem)},
                                     {OPT("device", OPT_STR, device_key)},
                                     {OPT("template", OPT_STR, template_hash)},
                                     {OPT("output", OPT_STR, output)},
                                     {OPT("op", OPT_STR, op_name)},
                                     {OPT("best-only", OPT_FLAG, best_only)},
                                     {OPT_NAMES("prefer", prefer, prefer_names)},
                                     {OPT("json", OPT_FLAG, json)},
                                     {OPT("shapes", OPT_STR, shapes)},
                                     {OPT_NAMES("backend", backend, backend_names)},
                                     {OPT("max-slowdown", OPT_STR, max_slowdown)},
                                     {OPT("retune", OPT_FLAG, retune)},
                                     SEARCH_OPTS,
                                     {0}};
    opts o = {0};
    char *pos[256];
    int npos, rc = parse_opts(argc, argv, specs, &o, pos, 256, &npos);
    if (rc) return rc;
    if (o.help || npos == 0) {
        fputs(DB_HELP, o.help ? stdout : stderr);
        return o.help ? 0 : EXIT_USAGE;
    }
    int verify = strcmp(pos[0], "verify") == 0;
    /* Only merge takes more than one argument after its command. */
    if (npos > 2 && strcmp(pos[0], "merge") != 0)
        return usage_error("unexpected argument '%s'", pos[2]);
    if (verify && !o.retune &&
        (o.strategy || o.budget.evals || o.budget.seconds || o.seed || o.no_improve))
        return usage_error("the search options of db verify are for --retune");
    char why[4096] = "";
    at_status s = AT_OK;
    /* The options of each command (export, import and merge of bundles: db_bundle's). */
    const char *takes = strcmp(pos[0], "list") == 0   ? "db table prefix"
                        : strcmp(pos[0], "show") == 0 ? "db backend device"
                        : verify ? "db op backend device max-slowdown retune json strategy budget "
                                   "seed no-improve"
                        : strcmp(pos[0], "stats") == 0 ? "db json shapes"
                        : strcmp(pos[0], "export") == 0 && o.kernel_tuner
                            ? "db kernel-tuner problem device template output"
                            : NULL;
    if (takes && (rc = db_takes(pos[0], &o, takes))) return rc;
    if (strcmp(pos[0], "list") == 0) {
        if (npos != 1) return usage_error("db list takes no argument");
        s = at_db_visit(o.db, o.table ? o.table : g_tables[0], o.prefix, print_key, NULL, why,
                        sizeof why);
    } else if (strcmp(pos[0], "show") == 0) {
        if (npos != 2)
            return usage_error("db show needs a key prefix, e.g. gemm/f32/nn/1024x1024x1024");
        return db_show(&o, pos[1]);
    } else if (verify) {
        if (npos != 1) return usage_error("db verify takes no argument");
        return db_verify(&o);
    } else if (strcmp(pos[0], "stats") == 0) {
        if (npos != 1) return usage_error("db stats takes no argument");
        return db_stats(&o);
    } else if ((strcmp(pos[0], "export") == 0 && !o.kernel_tuner) ||
               strcmp(pos[0], "import") == 0 || strcmp(pos[0], "merge") == 0) {
        return db_bundle(pos[0], &o, pos + 1, npos - 1);
    } else if (strcmp(pos[0], "export") == 0) {
        if (npos != 1) return usage_error("db export takes no argument");
        if (!o.problem)
            return usage_error("db export needs --problem KEY, e.g. gemm/f32/nn/256x256x256");
        s = at_db_export_kernel_tuner(o.db, o.problem, o.device_key, o.template_hash, o.output, why,
                                      sizeof why);
        if (s == AT_ERR_NOT_FOUND) return usage_error("%s", why); /* names nothing recorded */
    } else {
        return usage_error(
            "unknown db command '%s' (one of: list, show, verify, export, import, merge, stats)",
            pos[0]);
    }
    /* Records skipped as damaged: what was readable was listed or exported. */
    if (s == AT_OK && why[0]) fprintf(stderr, "%s: warning: %s\n", g_cmd, why);
    return s == AT_OK ? 0 : fail(s, why);
}

/* ---- main -------------------------------------------------------------------------------------
 */

static void print_main_help(FILE *f)
{
    fputs("usage: autotune COMMAND [options]   (autotune COMMAND --help for each)\n"
          "\n"
          "Tunes kernels on this machine's devices and keeps the results in a database.\n"
          "\n",
          f);
    for (const char *const *op = at_operations(); *op; op++) {
        /* An example command: the operation's required fields at their example values. */
        char args[200] = "";
        at_field_desc d;
        for (size_t i = 0; at_operation_field(*op, i, &d) == AT_OK; i++)
            if (!d.def && d.example)
                snprintf(args + strlen(args), sizeof args - strlen(args), " --%s %s", d.name,
                         d.example);
        fprintf(f, "  %-9s tune one %s problem%s%s%s\n", *op, *op, *args ? ": autotune " : "",
                *args ? *op : "", args);
    }
    fputs("  tune      tune every problem of a shape list: autotune tune --shapes list.yaml\n"
          "  space     count and list a template's tuning space: autotune space gemm\n"
          "  devices   list backends and devices, and why a backend is unavailable\n"
          "  db        list, show, verify, export, import, merge or count the databases'\n"
          "            entries\n"
          "  replay    replay a search on a recorded space: autotune replay space.json.gz\n"
          "  version   print the version (also --version)\n",
          f);
}

#ifndef AT_WITH_MPI
/* The variable by which an MPI launcher says it started this process (Open MPI, PMI, PMIx);
 * NULL when none did. */
static const char *mpi_launcher(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", NULL};
    for (size_t i = 0; vars[i]; i++)
        if (getenv(vars[i])) return vars[i];
    return NULL;
}

/* `tune` started by an MPI launcher: this build has no MPI, autotune-mpi (from this program's
 * folder) runs instead with the same arguments. Returns only when it cannot. */
static int exec_mpi(const char *var, char **argv)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 16);
    char *slash = n > 0 ? memchr(self, '/', (size_t)n) : NULL;
    if (slash) {
        self[n] = '\0';
        slash = strrchr(self, '/');
        snprintf(slash + 1, sizeof self - (size_t)(slash + 1 - self), "autotune-mpi");
        argv[0] = self;
        execv(self, argv);
    }
    g_cmd = "autotune tune";
    return usage_error("started by an MPI launcher (%s is set), but this build has no MPI support: "
                       "%s is not there (CMake builds it when it finds MPI); one autotune per "
                       "rank would tune every problem on every rank",
                       var, slash ? self : "autotune-mpi");
}
#endif

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_main_help(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        print_main_help(stdout);
        return 0;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("autotune %s (library %s, database schema %s)\n", AT_VERSION_STRING, at_version(),
               at_db_schema_version());
        return 0;
    }
#ifndef AT_WITH_MPI
    const char *launcher = strcmp(cmd, "tune") == 0 ? mpi_launcher() : NULL;
    if (launcher) return exec_mpi(launcher, argv);
#endif
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {{"space", cmd_space},
                {"devices", cmd_devices},
                {"db", cmd_db},
                {"replay", cmd_replay},
                {"tune", cmd_tune}};
    int (*fn)(int, char **) = NULL;
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0] && !fn; i++)
        if (strcmp(cmd, cmds[i].name) == 0) fn = cmds[i].fn;
    /* Every operation is a command: autotune gemm --m 1024 --n 1024. */
    const char *const *op = at_operations();
    while (!fn && *op && strcmp(cmd, *op) != 0) op++;
    if (!fn && !*op) return usage_error("unknown command '%s'", cmd);
    static char name[64];
    snprintf(name, sizeof name, "autotune %s", cmd);
    g_cmd = name;
    return fn ? fn(argc - 2, argv + 2) : cmd_op(cmd, argc - 2, argv + 2);
}
