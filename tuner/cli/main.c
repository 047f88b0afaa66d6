/* main.c — the `autotune` command: a thin layer over the public API (include/autotune.h).
 * Exit codes: 0 success, 2 bad usage or input, 1 a runtime failure. */
#define _POSIX_C_SOURCE 200809L
#include "autotune.h"

#include <errno.h>
#include <inttypes.h>
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

/* ---- options ------------------------------------------------------------------------------ */

typedef struct opts {
    int64_t m, n, k;
    int have_m, have_n, have_k;
    const char *dtype, *layout, *backend, *strategy, *db, *table, *prefix, *arch, *select, *replay;
    int64_t limit, no_improve;
    int compile;
    int device;
    int64_t budget_evals;
    double budget_seconds;
    uint64_t seed;
    int force, json, list, help;
    const char *problem, *device_key, *template_hash, *output; /* db export */
    int kernel_tuner;
} opts;

typedef enum { OPT_INT, OPT_STR, OPT_FLAG, OPT_BUDGET, OPT_SEED, OPT_DEVICE } opt_kind;

typedef struct opt_spec {
    const char *name;
    opt_kind kind;
    size_t offset;
    int64_t lo, hi;
} opt_spec;

#define O(f)    offsetof(opts, f)
#define DIM_MAX INT64_C(2147483647) /* kernels take 32-bit sizes */
/* The options that name a problem and a device, shared by `gemm` and `space`. */
#define PROBLEM_OPTS                                                                               \
    {"m", OPT_INT, O(m), 1, DIM_MAX}, {"n", OPT_INT, O(n), 1, DIM_MAX},                            \
        {"k", OPT_INT, O(k), 1, DIM_MAX}, {"dtype", OPT_STR, O(dtype), 0, 0},                      \
        {"layout", OPT_STR, O(layout), 0, 0}, {"backend", OPT_STR, O(backend), 0, 0},              \
    {                                                                                              \
        "device", OPT_DEVICE, O(device), 0, 1023                                                   \
    }

/* The search options, shared by `gemm` and `replay`. */
#define SEARCH_OPTS                                                                                \
    {"strategy", OPT_STR, O(strategy), 0, 0}, {"budget", OPT_BUDGET, 0, 0, 0},                     \
        {"seed", OPT_SEED, O(seed), 0, 0},                                                         \
    {                                                                                              \
        "no-improve", OPT_INT, O(no_improve), 1, INT64_MAX                                         \
    }

static int parse_opts(int argc, char **argv, const opt_spec *specs, opts *o, char **positional,
                      int maxpos, int *npos)
{
    *npos = 0;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            o->help = 1;
            continue;
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
        for (const opt_spec *s = specs; s->name; s++)
            if (strcmp(s->name, name) == 0) sp = s;
        if (!sp) return usage_error("unknown option '--%s'", name);
        char *field = (char *)o + sp->offset;
        if (sp->kind == OPT_FLAG) {
            if (eq) return usage_error("option '--%s' takes no value", name);
            *(int *)field = 1;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val || (!eq && strncmp(val, "--", 2) == 0 && val[2]))
            return usage_error("option '--%s' needs a value", name);
        char *end = NULL;
        switch (sp->kind) {
        case OPT_INT:
        case OPT_DEVICE: {
            errno = 0;
            long long v = strtoll(val, &end, 10);
            if (errno == ERANGE || end == val || *end || v < sp->lo || v > sp->hi)
                return usage_error("--%s '%s' is not an integer from %lld to %lld", name, val,
                                   (long long)sp->lo, (long long)sp->hi);
            if (sp->kind == OPT_DEVICE)
                *(int *)field = (int)v;
            else
                *(int64_t *)field = v;
            if (field == (char *)&o->m) o->have_m = 1;
            if (field == (char *)&o->n) o->have_n = 1;
            if (field == (char *)&o->k) o->have_k = 1;
            break;
        }
        case OPT_SEED: {
            errno = 0;
            unsigned long long v = strtoull(val, &end, 10);
            if (errno == ERANGE || end == val || *end || val[0] == '-')
                return usage_error("--seed '%s' is not an integer from 0 to %llu", val,
                                   (unsigned long long)UINT64_MAX);
            o->seed = v;
            break;
        }
        case OPT_BUDGET: {
            /* N evaluations, or Ns seconds. */
            errno = 0;
            double v = strtod(val, &end);
            int secs = end && *end == 's' && end[1] == '\0';
            if (errno == ERANGE || end == val || (*end && !secs) || !(v > 0) || v > 1e9 ||
                (!secs && v != (double)(int64_t)v))
                return usage_error("--budget '%s' is not a count of evaluations (N >= 1) or of "
                                   "seconds (Ns, e.g. 90s)",
                                   val);
            if (secs)
                o->budget_seconds = v;
            else
                o->budget_evals = (int64_t)v;
            break;
        }
        case OPT_STR:
            *(const char **)field = val;
            break;
        case OPT_FLAG:
            break;
        }
    }
    return 0;
}

static int pick(const char *what, const char *val, const char *const *names, int *out)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(val, names[i]) == 0) {
            *out = i;
            return 0;
        }
    char list[256] = "";
    for (int i = 0; names[i]; i++) {
        strcat(list, i ? ", " : "");
        strcat(list, names[i]);
    }
    return usage_error("unknown %s '%s' (one of: %s)", what, val, list);
}

static const char *const g_dtypes[] = {"f32", "f16", "bf16", NULL};
static const char *const g_layouts[] = {"nn", "nt", "tn", "tt", NULL};
static const char *const g_backends[] = {"auto", "cuda", "hip", "opencl", NULL};

/* Checks the strategy's name and fills the search options of `gemm` and `replay`. */
static int search_from_opts(const opts *o, at_tune_options *to)
{
    int v;
    if (o->strategy && pick("strategy", o->strategy, at_tune_strategies(), &v)) return EXIT_USAGE;
    to->strategy = o->strategy;
    to->max_evals = o->budget_evals;
    to->max_seconds = o->budget_seconds;
    to->seed = o->seed;
    to->no_improve = o->no_improve;
    return 0;
}

/* Fills the problem and context options shared by `gemm` and `space gemm`. */
static int problem_from_opts(const opts *o, at_gemm_problem *p, at_context_options *co)
{
    int v;
    memset(p, 0, sizeof *p);
    p->m = o->m;
    p->n = o->n;
    p->k = o->have_k ? o->k : o->m; /* --k defaults to --m */
    p->alpha = 1.0f;
    p->beta = 0.0f;
    if (o->dtype) {
        if (pick("dtype", o->dtype, g_dtypes, &v)) return EXIT_USAGE;
        p->dtype = (at_dtype)v;
    }
    if (o->layout) {
        if (pick("layout", o->layout, g_layouts, &v)) return EXIT_USAGE;
        p->layout = (at_layout)v;
    }
    memset(co, 0, sizeof *co);
    if (o->backend) {
        if (pick("backend", o->backend, g_backends, &v)) return EXIT_USAGE;
        co->backend = (at_backend_kind)v;
    }
    co->device = o->device;
    co->db_path = o->db;
    return 0;
}

static int open_context(const at_context_options *co, at_context **ctx)
{
    at_status s = at_context_create(co, ctx);
    if (s == AT_OK) return 0;
    int rc = fail(s, at_context_last_error(*ctx));
    at_context_destroy(*ctx);
    *ctx = NULL;
    return rc;
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* ---- autotune gemm ------------------------------------------------------------------------ */

static const char GEMM_HELP[] =
    "usage: autotune gemm --m M --n N [--k K] [options]\n"
    "\n"
    "Tunes C = A*B (row-major; f32 on every backend, f16/bf16 on CUDA and HIP) for one\n"
    "problem on one device, records every measurement and the best configuration in the\n"
    "database, and prints the best kernel.\n"
    "A second run on the same problem and device answers from the database at once.\n"
    "\n"
    "  --m M, --n N, --k K   problem size, 1 to 2147483647; --k defaults to --m\n"
    "  --dtype f32|f16|bf16  element type (default f32)\n"
    "  --layout nn|nt|tn|tt  n: operand as stored, t: transposed (default nn)\n"
    "  --backend auto|cuda|hip|opencl   (default auto: GPU first, OpenCL last;\n"
    "                        AUTOTUNE_BACKEND sets the default)\n"
    "  --device I            device index within the backend (default 0)\n"
    "  --strategy NAME       model | random | exhaustive | annealing | genetic (default model:\n"
    "                        a cost model refined online by a random forest; docs/search.md)\n"
    "  --budget N|Ns         stop after N evaluations or N seconds (default: 60s, exhaustive\n"
    "                        the whole space)\n"
    "  --seed S              seed of the search strategy (default 1)\n"
    "  --no-improve N        stop after N evaluations without a better time\n"
    "  --replay DB           answer every candidate from DB's recorded results for this\n"
    "                        problem, device and template instead of running it (a candidate\n"
    "                        without a record counts as failed); nothing is stored\n"
    "  --db PATH             database directory (default $AUTOTUNE_DB, $XDG_CACHE_HOME/autotune,\n"
    "                        ~/.cache/autotune)\n"
    "  --force               measure again even if the database has results\n"
    "  --json                print one JSON object on stdout (also after an interrupt, with\n"
    "                        \"complete\":false and exit status 1)\n"
    "\n"
    "Exit status: 0 success, 2 bad usage or input, 1 runtime failure (no device, database).\n";

static volatile int g_cancel;
static void on_sigint(int sig)
{
    (void)sig;
    g_cancel = 1;
}

typedef struct progress_state {
    int tty;
} progress_state;

static void on_progress(void *user, int64_t done, int64_t budget, double best_us, double elapsed,
                        double eta)
{
    progress_state *ps = user;
    if (!ps->tty) return;
    fprintf(stderr, "\r  %" PRId64, done);
    if (budget > 0) fprintf(stderr, "/%" PRId64, budget);
    fprintf(stderr, " candidates  best %.1f us  %.0fs elapsed", best_us, elapsed);
    if (eta > 0) fprintf(stderr, "  ETA %.0fs", eta);
    fprintf(stderr, "\033[K");
    fflush(stderr);
}

static int cmd_gemm(int argc, char **argv)
{
    static const opt_spec specs[] = {PROBLEM_OPTS,
                                     SEARCH_OPTS,
                                     {"replay", OPT_STR, O(replay), 0, 0},
                                     {"db", OPT_STR, O(db), 0, 0},
                                     {"force", OPT_FLAG, O(force), 0, 0},
                                     {"json", OPT_FLAG, O(json), 0, 0},
                                     {NULL, 0, 0, 0, 0}};
    opts o = {0};
    char *pos[1];
    int npos, rc = parse_opts(argc, argv, specs, &o, pos, 0, &npos);
    if (rc) return rc;
    if (o.help) {
        fputs(GEMM_HELP, stdout);
        return 0;
    }
    if (!o.have_m) return usage_error("gemm needs --m (1 to %lld)", (long long)DIM_MAX);
    if (!o.have_n) return usage_error("gemm needs --n (1 to %lld)", (long long)DIM_MAX);
    at_tune_options to = {0};
    if ((rc = search_from_opts(&o, &to))) return rc;
    at_gemm_problem p;
    at_context_options co;
    if ((rc = problem_from_opts(&o, &p, &co))) return rc;
    at_context *ctx = NULL;
    if ((rc = open_context(&co, &ctx))) return rc;

    progress_state ps = {isatty(2)};
    to.replay_db = o.replay;
    to.force = o.force;
    to.progress = on_progress;
    to.progress_user = &ps;
    to.cancel = &g_cancel;
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    at_tune_report rep;
    at_status s = at_gemm_tune(ctx, &p, &to, &rep, NULL);
    if (ps.tty) fprintf(stderr, "\r\033[K");
    /* An interrupted run still reports what it measured (its best is not stored as tuned). */
    int partial = (s == AT_ERR_INTERRUPTED || s == AT_ERR_DEVICE_LOST) && rep.best_config[0];
    if (s != AT_OK) {
        rc = fail(s, at_context_last_error(ctx));
        if (!partial || !o.json) {
            at_context_destroy(ctx);
            return rc;
        }
    }
    const char *dt = g_dtypes[p.dtype], *lay = g_layouts[p.layout];
    if (o.json) {
        printf("{\"backend\":");
        json_str(stdout, at_context_backend(ctx));
        printf(",\"device\":");
        json_str(stdout, at_context_device_name(ctx));
        printf(",\"device_key\":");
        json_str(stdout, at_context_device_key(ctx));
        printf(",\"problem\":{\"op\":\"gemm\",\"m\":%" PRId64 ",\"n\":%" PRId64 ",\"k\":%" PRId64
               ",\"dtype\":\"%s\",\"layout\":\"%s\"}",
               p.m, p.n, p.k, dt, lay);
        printf(",\"best\":{\"config\":");
        json_str(stdout, rep.best_config);
        printf(",\"time_us\":%.3f,\"gflops\":%.3f,\"max_rel_error\":%.3g}", rep.best_time_us,
               rep.best_gflops, rep.best_max_rel_error);
        printf(",\"candidates\":{\"evaluated\":%" PRId64 ",\"measured\":%" PRId64
               ",\"failed\":%" PRId64 ",\"space\":%" PRId64 ",\"space_total\":%" PRId64 "}",
               rep.evaluated, rep.measured, rep.failed, rep.space, rep.space_total);
        printf(",\"cache\":\"%s\",\"seconds\":%.3f", rep.cache_hit ? "hit" : "miss", rep.seconds);
        printf(",\"complete\":%s}\n", s == AT_OK ? "true" : "false");
    } else {
        printf("gemm %s %s %" PRId64 "x%" PRId64 "x%" PRId64 " on %s (%s)%s\n", dt, lay, p.m, p.n,
               p.k, at_context_device_name(ctx), at_context_backend(ctx),
               rep.cache_hit ? "  [from the database]" : "");
        printf("  best        %s\n", rep.best_config);
        printf("  time        %.1f us  (%.2f GFLOP/s, max rel error %.2g)\n", rep.best_time_us,
               rep.best_gflops, rep.best_max_rel_error);
        if (!rep.cache_hit)
            printf("  candidates  %" PRId64 " evaluated (%" PRId64 " measured, %" PRId64
                   " failed) of %" PRId64 " valid, %" PRId64 " in all\n",
                   rep.evaluated, rep.measured, rep.failed, rep.space, rep.space_total);
        printf("  wall time   %.2f s\n", rep.seconds);
    }
    at_context_destroy(ctx);
    return rc;
}

/* ---- autotune space ----------------------------------------------------------------------- */

static const char SPACE_HELP[] =
    "usage: autotune space gemm [--m M --n N --k K] [--backend B] [--device I] [--list] [--json]\n"
    "       autotune space gemm --backend cuda|hip --arch A --compile [--limit N] [--seed S]\n"
    "\n"
    "Counts the GEMM tuning space before and after its constraints for a problem (default\n"
    "1024x1024x1024) on a device, and with --list prints every valid configuration.\n"
    "With --arch and --compile it compiles the space for that target without any device\n"
    "(cuda: sm_80 sm_86 sm_89 sm_90 sm_90a; hip: gfx908 gfx90a gfx940 gfx941 gfx942 gfx1030\n"
    "gfx1100, with feature suffixes like gfx90a:sramecc+:xnack-; a target the installed hipRTC\n"
    "cannot compile for is refused: ROCm 5.2 supports gfx908, gfx90a and gfx1030; the backend\n"
    "defaults to hip for a gfx target), checks each kernel's registers and spills, and\n"
    "prints how many compiled, how many were rejected and why, and compiles per second;\n"
    "--limit N compiles N configurations spread evenly through the space.\n";

/* `space gemm --arch A --compile`: compile without a device and count the outcomes. */
static int space_compile(const opts *o, const at_gemm_problem *p)
{
    if (!o->arch) return usage_error("--compile needs --arch (e.g. --arch sm_90a)");
    if (!o->compile) return usage_error("--arch is for --compile (a device's space: --device)");
    const char *backend = o->backend && strcmp(o->backend, "auto") ? o->backend
                          : strncmp(o->arch, "gfx", 3) == 0        ? "hip"
                                                                   : "cuda";
    at_compile_report r;
    char why[4096] = "";
    at_status s =
        at_gemm_compile_space(backend, o->arch, p, o->limit, o->seed, 0, &r, why, sizeof why);
    if (s != AT_OK) return fail(s, why);
    double rate = r.seconds > 0 ? (double)r.attempted / r.seconds : 0;
    if (o->json) {
        printf("{\"template\":\"gemm\",\"backend\":\"%s\",\"arch\":", backend);
        json_str(stdout, o->arch);
        printf(",\"space\":%" PRId64 ",\"attempted\":%" PRId64 ",\"compiled\":%" PRId64
               ",\"compile_errors\":%" PRId64 ",\"resource_rejected\":%" PRId64
               ",\"seconds\":%.3f,\"per_second\":%.3f,\"first_error\":",
               r.space, r.attempted, r.compiled, r.compile_errors, r.resource_rejected, r.seconds,
               rate);
        json_str(stdout, r.first_error);
        printf(",\"first_rejection\":");
        json_str(stdout, r.first_rejection);
        printf("}\n");
    } else {
        printf("gemm space for %s %s, %" PRId64 "x%" PRId64 "x%" PRId64 ": %" PRId64
               " valid configurations, %" PRId64 " compiled\n",
               backend, o->arch, p->m, p->n, p->k, r.space, r.attempted);
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

static int cmd_space(int argc, char **argv)
{
    static const opt_spec specs[] = {PROBLEM_OPTS,
                                     {"db", OPT_STR, O(db), 0, 0},
                                     {"arch", OPT_STR, O(arch), 0, 0},
                                     {"compile", OPT_FLAG, O(compile), 0, 0},
                                     {"limit", OPT_INT, O(limit), 1, INT64_MAX},
                                     {"seed", OPT_SEED, O(seed), 0, 0},
                                     {"list", OPT_FLAG, O(list), 0, 0},
                                     {"json", OPT_FLAG, O(json), 0, 0},
                                     {NULL, 0, 0, 0, 0}};
    opts o = {0};
    char *pos[1];
    int npos, rc = parse_opts(argc, argv, specs, &o, pos, 1, &npos);
    if (rc) return rc;
    if (o.help) {
        fputs(SPACE_HELP, stdout);
        return 0;
    }
    if (npos != 1) return usage_error("space needs a template name: gemm");
    if (strcmp(pos[0], "gemm") != 0)
        return usage_error("unknown template '%s' (one of: gemm)", pos[0]);
    if (!o.have_m) o.m = 1024;
    if (!o.have_n) o.n = 1024;
    if (!o.have_k) {
        o.k = o.m;
        o.have_k = 1;
    }
    at_gemm_problem p;
    at_context_options co;
    if ((rc = problem_from_opts(&o, &p, &co))) return rc;
    if (o.compile || o.arch) return space_compile(&o, &p);
    at_context *ctx = NULL;
    if ((rc = open_context(&co, &ctx))) return rc;
    at_space_info info;
    at_status s = at_gemm_space(ctx, &p, &info, o.list && !o.json ? print_config : NULL, NULL);
    if (s != AT_OK) {
        rc = fail(s, at_context_last_error(ctx));
    } else if (o.json) {
        printf("{\"template\":\"gemm\",\"device\":");
        json_str(stdout, at_context_device_name(ctx));
        printf(",\"total\":%" PRId64 ",\"valid\":%" PRId64 ",\"parameters\":", info.total,
               info.valid);
        json_str(stdout, info.params);
        printf("}\n");
    } else if (!o.list) {
        printf("gemm space on %s for %" PRId64 "x%" PRId64 "x%" PRId64 ":\n",
               at_context_device_name(ctx), p.m, p.n, p.k);
        printf("  %" PRId64 " configurations, %" PRId64 " valid after constraints\n", info.total,
               info.valid);
        printf("  %s\n", info.params);
    }
    at_context_destroy(ctx);
    return rc;
}

/* ---- autotune replay ------------------------------------------------------------------------ */

static const char REPLAY_HELP[] =
    "usage: autotune replay FILE [--strategy NAME] [--budget N|Ns] [--seed S] [--no-improve N]\n"
    "                            [--select PREFIX] [--json]\n"
    "\n"
    "Replays a tuning run against a recorded space instead of a device: every configuration the\n"
    "strategy proposes is answered with its recorded time or failure. FILE is a Kernel Tuner\n"
    "cache file (JSON, plain or .gz) or an autotune database directory; the format is read\n"
    "from the content. Prints the recording's optimum, the best found, and the number of\n"
    "evaluations at each improvement (the trajectory).\n"
    "\n"
    "  --strategy NAME   model | random | exhaustive | annealing | genetic (default model;\n"
    "                    docs/search.md says how each works)\n"
    "  --budget N|Ns     stop after N evaluations, or after N recorded seconds (the compile and\n"
    "                    benchmark time the recording says those evaluations took); default:\n"
    "                    until the whole space is evaluated\n"
    "  --seed S          seed of the strategy (default 1)\n"
    "  --no-improve N    stop after N evaluations without a better time\n"
    "  --select PREFIX   for a database holding several spaces: a prefix of\n"
    "                    'problem|device|template hash' choosing one\n"
    "  --json            one JSON object: space, optimum_time, evaluated, best {config, time},\n"
    "                    trajectory [[evaluations, best_time_so_far], ...]\n"
    "\n"
    "Exit status: 0 success, 2 bad usage or input (unreadable or malformed file), 1 runtime\n"
    "failure.\n";

static int cmd_replay(int argc, char **argv)
{
    static const opt_spec specs[] = {SEARCH_OPTS,
                                     {"select", OPT_STR, O(select), 0, 0},
                                     {"json", OPT_FLAG, O(json), 0, 0},
                                     {NULL, 0, 0, 0, 0}};
    opts o = {0};
    char *pos[1];
    int npos, rc = parse_opts(argc, argv, specs, &o, pos, 1, &npos);
    if (rc) return rc;
    if (o.help) {
        fputs(REPLAY_HELP, stdout);
        return 0;
    }
    if (npos != 1)
        return usage_error("replay needs a recorded space: a Kernel Tuner cache file "
                           "or an autotune database");
    at_tune_options to = {0};
    if ((rc = search_from_opts(&o, &to))) return rc;
    at_replay_report r;
    char why[4096] = "";
    at_status s = at_replay_file(pos[0], o.select, &to, &r, why, sizeof why);
    if (s == AT_ERR_IO || s == AT_ERR_DB || s == AT_ERR_DB_CORRUPT || s == AT_ERR_DB_VERSION) {
        /* An unreadable recording is bad input to this command. */
        fail(s, why);
        return EXIT_USAGE;
    }
    if (s != AT_OK) return fail(s, why);
    const char *strategy = o.strategy ? o.strategy : at_tune_strategies()[0];
    if (o.json) {
        printf("{\"file\":");
        json_str(stdout, pos[0]);
        printf(",\"format\":\"%s\",\"device\":", r.format);
        json_str(stdout, r.device);
        printf(",\"kernel\":");
        json_str(stdout, r.kernel);
        printf(",\"objective\":");
        json_str(stdout, r.objective);
        printf(",\"strategy\":\"%s\",\"seed\":%" PRIu64 ",\"space\":%" PRId64
               ",\"space_failed\":%" PRId64 ",\"optimum_time\":%.17g,\"optimum_config\":",
               strategy, o.seed ? o.seed : 1, r.space, r.space_failed, r.optimum);
        json_str(stdout, r.optimum_config);
        printf(",\"evaluated\":%" PRId64 ",\"failed\":%" PRId64 ",\"best\":", r.evaluated,
               r.failed);
        if (r.found) {
            printf("{\"config\":");
            json_str(stdout, r.best_config);
            printf(",\"time\":%.17g}", r.best);
        } else {
            printf("null");
        }
        printf(",\"simulated_seconds\":%.3f,\"seconds\":%.4f,\"trajectory\":[", r.simulated_seconds,
               r.seconds);
        for (size_t i = 0; i < r.ntrajectory; i++)
            printf("%s[%" PRId64 ",%.17g]", i ? "," : "", r.trajectory_evals[i],
                   r.trajectory_best[i]);
        printf("]}\n");
    } else {
        printf("replay of %s (%s%s%s, %s) with %s, seed %" PRIu64 "\n", pos[0], r.format,
               r.device[0] ? ", " : "", r.device, r.kernel, strategy, o.seed ? o.seed : 1);
        printf("  space       %" PRId64 " configurations (%" PRId64 " failed when recorded)\n",
               r.space, r.space_failed);
        printf("  optimum     %.6g %s  %s\n", r.optimum, r.objective, r.optimum_config);
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
    }
    at_replay_report_clear(&r);
    return 0;
}

/* ---- autotune devices ---------------------------------------------------------------------- */

static int cmd_devices(int argc, char **argv)
{
    static const opt_spec specs[] = {{"json", OPT_FLAG, O(json), 0, 0}, {NULL, 0, 0, 0, 0}};
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
    if (o.json) printf("{\"backends\":[");
    for (int i = 0; i < nb; i++) {
        if (o.json) {
            printf("%s{\"name\":\"%s\",\"available\":%s,\"why\":", i ? "," : "", b[i].name,
                   b[i].available ? "true" : "false");
            json_str(stdout, b[i].why);
            printf(",\"devices\":[");
        } else {
            printf("%-7s %s%s\n", b[i].name,
                   b[i].available ? "available" : "unavailable: ", b[i].available ? "" : b[i].why);
        }
        for (int d = 0; b[i].available && d < b[i].ndevices; d++) {
            at_device_desc dd;
            if (at_device_query(b[i].name, d, &dd) != AT_OK) continue;
            if (o.json) {
                printf("%s{\"index\":%d,\"name\":", d ? "," : "", d);
                json_str(stdout, dd.name);
                printf(",\"key\":");
                json_str(stdout, dd.key);
                printf(",\"driver\":");
                json_str(stdout, dd.driver);
                printf(",\"compute_units\":%" PRId64 ",\"cpu\":%s}", dd.compute_units,
                       dd.is_cpu ? "true" : "false");
            } else {
                printf("  [%d] %s  (%" PRId64 " compute units, %" PRId64
                       " MiB, %s)\n      key: %s\n",
                       d, dd.name, dd.compute_units, dd.global_mem_bytes >> 20, dd.driver, dd.key);
            }
        }
        if (b[i].available && !b[i].ndevices && !o.json) printf("  %s\n", b[i].why);
        if (o.json) printf("]}");
    }
    if (o.json) printf("]}\n");
    return 0;
}

/* ---- autotune db ----------------------------------------------------------------------------- */

static const char DB_HELP[] =
    "usage: autotune db list [--table best|results|binaries|meta] [--prefix P] [--db PATH]\n"
    "       autotune db show PREFIX [--db PATH]\n"
    "       autotune db export --kernel-tuner --problem KEY [--device KEY] [--template HASH]\n"
    "                          [--output FILE] [--db PATH]\n"
    "\n"
    "list prints the keys of a table (default: best, one line per tuned problem and device).\n"
    "show prints the best entries and every measurement whose key starts with PREFIX, e.g.\n"
    "'gemm/f32/nn/1024x1024x1024'.\n"
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

static int cmd_db(int argc, char **argv)
{
    static const opt_spec specs[] = {{"db", OPT_STR, O(db), 0, 0},
                                     {"table", OPT_STR, O(table), 0, 0},
                                     {"prefix", OPT_STR, O(prefix), 0, 0},
                                     {"kernel-tuner", OPT_FLAG, O(kernel_tuner), 0, 0},
                                     {"problem", OPT_STR, O(problem), 0, 0},
                                     {"device", OPT_STR, O(device_key), 0, 0},
                                     {"template", OPT_STR, O(template_hash), 0, 0},
                                     {"output", OPT_STR, O(output), 0, 0},
                                     {NULL, 0, 0, 0, 0}};
    opts o = {0};
    char *pos[2];
    int npos, rc = parse_opts(argc, argv, specs, &o, pos, 2, &npos);
    if (rc) return rc;
    if (o.help || npos == 0) {
        fputs(DB_HELP, o.help ? stdout : stderr);
        return o.help ? 0 : EXIT_USAGE;
    }
    char why[4096] = "";
    at_status s = AT_OK;
    if (strcmp(pos[0], "list") == 0) {
        if (npos != 1) return usage_error("db list takes no argument");
        static const char *const tables[] = {"best", "results", "binaries", "meta", NULL};
        int v = 0;
        if (o.table && pick("table", o.table, tables, &v)) return EXIT_USAGE;
        s = at_db_visit(o.db, tables[v], o.prefix, print_key, NULL, why, sizeof why);
    } else if (strcmp(pos[0], "show") == 0) {
        if (npos != 2)
            return usage_error("db show needs a key prefix, e.g. gemm/f32/nn/1024x1024x1024");
        s = at_db_visit(o.db, "best", pos[1], print_entry, "best    ", why, sizeof why);
        if (s == AT_OK)
            s = at_db_visit(o.db, "results", pos[1], print_entry, "result  ", why, sizeof why);
    } else if (strcmp(pos[0], "export") == 0) {
        if (npos != 1) return usage_error("db export takes no argument");
        if (!o.kernel_tuner)
            return usage_error(
                "db export needs a format: --kernel-tuner (Kernel Tuner cache JSON)");
        if (!o.problem)
            return usage_error("db export needs --problem KEY, e.g. gemm/f32/nn/256x256x256");
        s = at_db_export_kernel_tuner(o.db, o.problem, o.device_key, o.template_hash, o.output, why,
                                      sizeof why);
        if (s == AT_ERR_NOT_FOUND) return usage_error("%s", why); /* names nothing recorded */
    } else {
        return usage_error("unknown db command '%s' (one of: list, show, export)", pos[0]);
    }
    return s == AT_OK ? 0 : fail(s, why);
}

/* ---- main -------------------------------------------------------------------------------------
 */

static const char MAIN_HELP[] =
    "usage: autotune COMMAND [options]   (autotune COMMAND --help for each)\n"
    "\n"
    "Tunes GEMM kernels on this machine's devices and keeps the results in a database.\n"
    "\n"
    "  gemm      tune one GEMM problem: autotune gemm --m 1024 --n 1024\n"
    "  space     count and list a template's tuning space: autotune space gemm\n"
    "  devices   list backends and devices, and why a backend is unavailable\n"
    "  db        list, show or export the database's entries\n"
    "  replay    replay a search on a recorded space: autotune replay space.json.gz\n"
    "  version   print the version\n";

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(MAIN_HELP, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(MAIN_HELP, stdout);
        return 0;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("autotune %s\n", at_version());
        return 0;
    }
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {{"gemm", cmd_gemm},
                {"space", cmd_space},
                {"devices", cmd_devices},
                {"db", cmd_db},
                {"replay", cmd_replay}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        if (strcmp(cmd, cmds[i].name) != 0) continue;
        static char name[64];
        snprintf(name, sizeof name, "autotune %s", cmd);
        g_cmd = name;
        return cmds[i].fn(argc - 2, argv + 2);
    }
    return usage_error("unknown command '%s'", cmd);
}
