/* fleet.c — `autotune tune --shapes` over the ranks of an MPI job (autotune-mpi only; fleet.h).
 *
 * Rank 0 keeps the queue and is the only writer of the database: a coordinator thread makes all
 * of its MPI calls (answering requests, storing forwarded records) while its main thread tunes
 * what it takes from the same queue. Another rank asks for a problem, gets it with the problem's
 * stored records (written into its private temporary database, so a resumed problem does not
 * measure again and a tuned one is a cache hit), tunes it there and sends every record it stores
 * to rank 0 at once, then asks again. Messages are JSON text (cJSON); binaries are not sent (a
 * rank compiles what it needs again). */
#define _XOPEN_SOURCE 700
#include "tuner/cli/fleet.h"

#include "tuner/tuner.h"

#include <cJSON.h>
#include <errno.h>
#include <ftw.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    TAG_REQUEST = 1, /* rank -> 0: the next problem, please: first {list: its hash}, then the
                      * outcome of the last one */
    TAG_RECORD,      /* rank -> 0: ["results"|"best"|"devices", key, record text] stored */
    TAG_TASK,        /* 0 -> rank: {index, max_evals, max_seconds, records: [[table, key, text]]} */
    TAG_STOP,        /* 0 -> rank: no problem left */
    TAG_CANCEL,      /* 0 -> rank: stop after the candidate in hand (rank 0 was interrupted) */
    TAG_BYE          /* rank -> 0: this rank cannot tune (why); it takes no problem */
};

struct fleet {
    int rank, size, local_rank, local_size; /* local: the ranks on this node */
    char *tmpdir;                           /* a rank's private database; NULL on rank 0 */
    int finalize;                           /* MPI was started here */
};

int fleet_rank(const fleet *f) { return f->rank; }
int fleet_size(const fleet *f) { return f->size; }
const char *fleet_db(const fleet *f) { return f->tmpdir; }

at_status fleet_init(int *argc, char ***argv, fleet **out, char *why, size_t len)
{
    *out = NULL;
    fleet *f = calloc(1, sizeof *f);
    if (!f) return AT_ERR_NO_MEMORY;
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
        snprintf(why, len, "MPI_Init_thread failed");
        free(f);
        return AT_ERR_INTERNAL;
    }
    f->finalize = 1;
    if (provided < MPI_THREAD_SERIALIZED) {
        snprintf(why, len,
                 "this MPI offers no MPI_THREAD_SERIALIZED (rank 0's coordinator thread "
                 "makes its MPI calls)");
        fleet_end(f);
        return AT_ERR_UNSUPPORTED;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &f->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &f->size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, f->rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &f->local_rank);
    MPI_Comm_size(node, &f->local_size);
    MPI_Comm_free(&node);
    if (f->rank > 0) {
        const char *tmp = getenv("TMPDIR");
        f->tmpdir = at_asprintf("%s/autotune-rank%d-XXXXXX", tmp && *tmp ? tmp : "/tmp", f->rank);
        if (!f->tmpdir || !mkdtemp(f->tmpdir)) { /* fleet_db says so: the rank leaves */
            snprintf(why, len, "rank %d cannot make its temporary database %s: %s", f->rank,
                     f->tmpdir ? f->tmpdir : "", strerror(errno));
            free(f->tmpdir);
            f->tmpdir = NULL;
        }
    }
    *out = f;
    return AT_OK;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void fleet_end(fleet *f)
{
    if (!f) return;
    if (f->tmpdir) nftw(f->tmpdir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
    free(f->tmpdir);
    if (f->finalize) MPI_Finalize();
    free(f);
}

at_status fleet_device(const fleet *f, const char *backend, at_backend_kind *kind, int *device,
                       char *why, size_t len)
{
    static const char *const kinds[] = {"auto", "cuda", "hip", "opencl"};
    const char *want = backend ? backend : getenv("AUTOTUNE_BACKEND");
    if (want && (!*want || strcmp(want, "auto") == 0)) want = NULL;
    at_backend_desc b[8];
    int nb = 0;
    at_backends_query(b, 8, &nb);
    for (int i = 0; i < nb && i < (int)(sizeof b / sizeof b[0]); i++) {
        if (want ? strcmp(b[i].name, want) != 0 : !b[i].available || b[i].ndevices < 1) continue;
        *kind = AT_BACKEND_AUTO;
        for (int k = 1; k < 4; k++)
            if (strcmp(kinds[k], b[i].name) == 0) *kind = (at_backend_kind)k;
        /* A backend asked for but absent: at_context_create says why. */
        *device = b[i].ndevices > 0 ? f->local_rank % b[i].ndevices : 0;
        /* Kernels timed at once on one device slow each other down: said once per node. */
        if (b[i].ndevices > 0 && f->local_size > b[i].ndevices && f->local_rank == 0)
            fprintf(stderr,
                    "autotune tune: warning: %d ranks on this node share %d %s device%s: their "
                    "kernels are timed at the same time and slow each other down (one rank per "
                    "device gives times to trust)\n",
                    f->local_size, b[i].ndevices, b[i].name, b[i].ndevices == 1 ? "" : "s");
        return AT_OK;
    }
    if (want) { /* unknown: at_context_create names it */
        *kind = AT_BACKEND_AUTO;
        *device = 0;
        return AT_OK;
    }
    snprintf(why, len, "no backend with a device is available (autotune devices says why)");
    return AT_ERR_NO_BACKEND;
}

/* ---- messages ------------------------------------------------------------------------------- */

static void send_text(int to, int tag, const char *text)
{
    MPI_Send(text ? text : "", text ? (int)strlen(text) : 0, MPI_CHAR, to, tag, MPI_COMM_WORLD);
}

static void send_json(int to, int tag, cJSON *j)
{
    char *text = cJSON_PrintUnformatted(j);
    send_text(to, tag, text ? text : "null");
    free(text);
    cJSON_Delete(j);
}

/* Receives the message st announced (a probe found it), NUL-terminated; malloc'd. */
static char *recv_text(MPI_Status *st)
{
    int n = 0;
    MPI_Get_count(st, MPI_CHAR, &n);
    char *buf = malloc((size_t)n + 1);
    MPI_Recv(buf ? buf : (char[1]){0}, buf ? n : 0, MPI_CHAR, st->MPI_SOURCE, st->MPI_TAG,
             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (buf) buf[n] = '\0';
    return buf;
}

/* Waits for a message from src (MPI_ANY_SOURCE) without spinning: a blocking probe would keep a
 * core busy that the ranks tuning on this machine need. */
static void wait_message(int src, MPI_Status *st)
{
    for (;;) {
        int flag = 0;
        MPI_Iprobe(src, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, st);
        if (flag) return;
        nanosleep(&(struct timespec){0, 500000}, NULL);
    }
}

static cJSON *record_json(const char *table, const char *key, const char *text)
{
    cJSON *r = cJSON_CreateArray();
    cJSON_AddItemToArray(r, cJSON_CreateString(table));
    cJSON_AddItemToArray(r, cJSON_CreateString(key));
    cJSON_AddItemToArray(r, cJSON_CreateString(text));
    return r;
}

/* The parts of a record [table, key, text]; 0 when r is not one. */
static int record_parts(const cJSON *r, const char **table, const char **key, const char **text)
{
    if (!cJSON_IsArray(r) || cJSON_GetArraySize(r) != 3) return 0;
    *table = cJSON_GetStringValue(cJSON_GetArrayItem(r, 0));
    *key = cJSON_GetStringValue(cJSON_GetArrayItem(r, 1));
    *text = cJSON_GetStringValue(cJSON_GetArrayItem(r, 2));
    return *table && *key && *text;
}

/* Stores records [table, key, text] in db: results in one transaction, best entries by the rule
 * of at_db_put_best (a faster stored entry stays) or replacing what is there (force). */
static at_status store_records(at_db *db, const cJSON *records, int force)
{
    int n = cJSON_GetArraySize(records), nres = 0;
    char **keys = calloc((size_t)n + 1, sizeof *keys);
    at_result_rec *recs = calloc((size_t)n + 1, sizeof *recs);
    at_status s = keys && recs ? AT_OK : at_fail(AT_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; i < n && s == AT_OK; i++) {
        const char *table, *key, *text;
        if (!record_parts(cJSON_GetArrayItem(records, i), &table, &key, &text)) {
            s = at_fail(AT_ERR_INTERNAL, "a forwarded record is not [table, key, text]");
        } else if (strcmp(table, "results") == 0) {
            s = at_result_rec_parse(text, strlen(text), &recs[nres]);
            keys[nres++] = (char *)key;
        } else if (strcmp(table, "best") == 0) {
            at_best_rec b;
            s = at_best_rec_parse(text, strlen(text), &b);
            if (s == AT_OK) s = at_db_put_best(db, key, &b, force);
        } else if (strcmp(table, "devices") == 0) {
            at_device_rec d;
            s = at_device_rec_parse(text, strlen(text), &d);
            if (s == AT_OK) s = at_db_put_device(db, key, &d);
        } else {
            s = at_fail(AT_ERR_INTERNAL, "a forwarded record of table '%s'", table);
        }
    }
    if (s == AT_OK && nres) s = at_db_put_results(db, (size_t)nres, keys, recs);
    free(keys);
    free(recs);
    return s;
}

static cJSON *outcome_json(size_t index, const tune_outcome *o)
{
    const at_tune_report *r = &o->rep;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "index", (double)index);
    cJSON_AddNumberToObject(j, "status", o->status);
    cJSON_AddStringToObject(j, "error", o->error);
    cJSON_AddNumberToObject(j, "space", (double)r->space);
    cJSON_AddNumberToObject(j, "space_total", (double)r->space_total);
    cJSON_AddNumberToObject(j, "evaluated", (double)r->evaluated);
    cJSON_AddNumberToObject(j, "measured", (double)r->measured);
    cJSON_AddNumberToObject(j, "failed", (double)r->failed);
    cJSON_AddNumberToObject(j, "cache_hit", r->cache_hit);
    cJSON_AddNumberToObject(j, "best_time_us", r->best_time_us);
    cJSON_AddNumberToObject(j, "best_gflops", r->best_gflops);
    cJSON_AddNumberToObject(j, "best_max_rel_error", r->best_max_rel_error);
    cJSON_AddNumberToObject(j, "best_gbytes_per_s", r->best_gbytes_per_s);
    cJSON_AddStringToObject(j, "best_config", r->best_config);
    cJSON_AddStringToObject(j, "template_name", r->template_name);
    cJSON_AddNumberToObject(j, "seconds", r->seconds);
    return j;
}

static double num(const cJSON *j, const char *name)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, name);
    return cJSON_IsNumber(x) ? x->valuedouble : 0;
}

static void str(const cJSON *j, const char *name, char *out, size_t len)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, name));
    snprintf(out, len, "%s", s ? s : "");
}

static void outcome_read(const cJSON *j, tune_outcome *o)
{
    at_tune_report *r = &o->rep;
    memset(o, 0, sizeof *o);
    o->status = (at_status)num(j, "status");
    str(j, "error", o->error, sizeof o->error);
    r->space = (int64_t)num(j, "space");
    r->space_total = (int64_t)num(j, "space_total");
    r->evaluated = (int64_t)num(j, "evaluated");
    r->measured = (int64_t)num(j, "measured");
    r->failed = (int64_t)num(j, "failed");
    r->cache_hit = (int)num(j, "cache_hit");
    r->best_time_us = num(j, "best_time_us");
    r->best_gflops = num(j, "best_gflops");
    r->best_max_rel_error = num(j, "best_max_rel_error");
    r->best_gbytes_per_s = num(j, "best_gbytes_per_s");
    str(j, "best_config", r->best_config, sizeof r->best_config);
    str(j, "template_name", r->template_name, sizeof r->template_name);
    r->seconds = num(j, "seconds");
}

/* The hash of the list's keys in order, as text: every rank reads the list itself, and a rank
 * whose list is not rank 0's (another file at that path on its node) must take no problem. */
static void list_hash(const fleet_hooks *h, char out[17])
{
    uint64_t x = AT_HASH_SEED;
    const char *key;
    for (size_t i = 0; (key = h->key(h->user, i)); i++) x = at_hash(x, key, strlen(key) + 1);
    at_hash_hex(x, out);
}

/* ---- rank 0 ---------------------------------------------------------------------------------- */

typedef struct coord {
    fleet *f;
    at_context *ctx;
    const fleet_hooks *h;
    volatile int *cancel;
    size_t *task; /* per rank: the problem in its hands + 1; 0: none */
    int active;   /* ranks not yet told to stop */
    at_status store;
} coord;

typedef struct seed {
    cJSON *records;
} seed;

static int seed_best(void *user, const char *key, const char *value)
{
    cJSON_AddItemToArray(((seed *)user)->records, record_json("best", key, value));
    return 0;
}

/* The task message of problem index: its budget and every record stored for it. */
static cJSON *task_json(coord *c, size_t index, int64_t max_evals, double max_seconds)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "index", (double)index);
    cJSON_AddNumberToObject(j, "max_evals", (double)max_evals);
    cJSON_AddNumberToObject(j, "max_seconds", max_seconds);
    seed sd = {cJSON_AddArrayToObject(j, "records")};
    char *prefix = at_asprintf("%s|", c->h->key(c->h->user, index));
    char **keys = NULL;
    at_result_rec *recs = NULL;
    size_t n = 0;
    if (prefix && at_db_results(c->ctx->db, prefix, &keys, &recs, &n) == AT_OK) {
        at_sbuf text = {0};
        for (size_t i = 0; i < n; i++) {
            at_sb_clear(&text);
            at_result_rec_append(&text, &recs[i]);
            cJSON_AddItemToArray(sd.records, record_json("results", keys[i], at_sb_str(&text)));
        }
        at_sb_free(&text);
    }
    at_db_keys_free(keys, n);
    free(recs);
    /* A best entry is read as the scan shows it: one line of record text. */
    if (prefix) at_db_scan(c->ctx->db, "best", prefix, seed_best, &sd);
    at_db_skipped(c->ctx->db, NULL, 0);
    at_errclear();
    free(prefix);
    return j;
}

/* Answers a rank's request: the outcome of its last problem, then its next one or stop (none for
 * a rank that leaves, interrupted). */
static void serve_request(coord *c, int rank, const char *text)
{
    cJSON *j = text[0] ? cJSON_Parse(text) : NULL;
    if (j && c->task[rank]) {
        tune_outcome o;
        outcome_read(j, &o);
        c->h->done(c->h->user, c->task[rank] - 1, rank, &o);
    }
    int leaving = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "leaving"));
    const char *list = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "list"));
    char mine[17];
    list_hash(c->h, mine);
    if (list && strcmp(list, mine) != 0) {
        fprintf(stderr,
                "autotune tune: rank %d read another list than rank 0 (another file at "
                "that path on its node?): it takes no problem\n",
                rank);
        send_text(rank, TAG_STOP, NULL);
        leaving = 1;
    }
    cJSON_Delete(j);
    c->task[rank] = 0;
    if (leaving) {
        c->active--;
        return;
    }
    size_t index;
    int64_t max_evals;
    double max_seconds;
    if (c->h->take(c->h->user, rank, &index, &max_evals, &max_seconds)) {
        c->task[rank] = index + 1;
        send_json(rank, TAG_TASK, task_json(c, index, max_evals, max_seconds));
    } else {
        send_text(rank, TAG_STOP, NULL);
        c->active--;
    }
}

static void store_forwarded(coord *c, int rank, const char *text)
{
    cJSON *j = cJSON_Parse(text), *list = cJSON_CreateArray();
    cJSON_AddItemReferenceToArray(list, j);
    at_status s = j ? store_records(c->ctx->db, list, 0) : AT_ERR_INTERNAL;
    if (s != AT_OK) {
        fprintf(stderr, "autotune tune: rank 0 cannot store a record from rank %d: %s\n", rank,
                j ? at_errmsg() : "not JSON");
        if (c->store == AT_OK) c->store = s;
    }
    cJSON_Delete(list);
    cJSON_Delete(j);
}

static void *coordinate(void *arg)
{
    coord *c = arg;
    int cancel_sent = 0;
    while (c->active > 0) {
        if (*c->cancel && !cancel_sent) {
            for (int r = 1; r < c->f->size; r++)
                if (c->task[r]) send_text(r, TAG_CANCEL, NULL);
            cancel_sent = 1;
        }
        MPI_Status st;
        int flag = 0;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
        if (!flag) {
            nanosleep(&(struct timespec){0, 500000}, NULL);
            continue;
        }
        char *text = recv_text(&st);
        if (!text) continue;
        if (st.MPI_TAG == TAG_RECORD) {
            store_forwarded(c, st.MPI_SOURCE, text);
        } else if (st.MPI_TAG == TAG_REQUEST) {
            serve_request(c, st.MPI_SOURCE, text);
        } else if (st.MPI_TAG == TAG_BYE) {
            fprintf(stderr, "autotune tune: rank %d takes no problem: %s\n", st.MPI_SOURCE, text);
            c->active--;
        }
        free(text);
    }
    return NULL;
}

static at_status run_rank0(fleet *f, at_context *ctx, const fleet_hooks *h, volatile int *cancel)
{
    coord c = {f, ctx, h, cancel, calloc((size_t)f->size, sizeof(size_t)), f->size - 1, AT_OK};
    if (!c.task) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    pthread_t thread;
    int threaded = f->size > 1 && pthread_create(&thread, NULL, coordinate, &c) == 0;
    if (f->size > 1 && !threaded) {
        free(c.task);
        return at_fail(AT_ERR_INTERNAL, "cannot start rank 0's coordinator thread");
    }
    size_t index;
    int64_t max_evals;
    double max_seconds;
    while (h->take(h->user, 0, &index, &max_evals, &max_seconds)) {
        tune_outcome o;
        h->tune(h->user, ctx, index, max_evals, max_seconds, &o);
        h->done(h->user, index, 0, &o);
    }
    if (threaded) pthread_join(thread, NULL);
    free(c.task);
    return c.store;
}

/* ---- the other ranks ------------------------------------------------------------------------- */

typedef struct worker {
    volatile int *cancel;
} worker;

/* The store hook of a rank's context: the record goes to rank 0 now; and a cancel from rank 0
 * is taken here, between candidates. */
static void forward(void *user, const char *table, const char *key, const char *text)
{
    worker *w = user;
    cJSON *r = record_json(table, key, text);
    send_json(0, TAG_RECORD, r);
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(0, TAG_CANCEL, MPI_COMM_WORLD, &flag, &st);
    if (flag) {
        free(recv_text(&st));
        *w->cancel = 1;
    }
}

static at_status run_worker(fleet *f, at_context *ctx, const fleet_hooks *h, volatile int *cancel)
{
    (void)f;
    worker w = {cancel};
    ctx->on_store = forward;
    ctx->on_store_user = &w;
    cJSON *hello = cJSON_CreateObject();
    char hash[17];
    list_hash(h, hash);
    cJSON_AddStringToObject(hello, "list", hash);
    send_json(0, TAG_REQUEST, hello);
    for (;;) {
        MPI_Status st;
        wait_message(0, &st);
        char *text = recv_text(&st);
        if (st.MPI_TAG == TAG_CANCEL) *cancel = 1;
        if (st.MPI_TAG != TAG_TASK) {
            free(text);
            if (st.MPI_TAG == TAG_STOP) break;
            continue;
        }
        cJSON *task = text ? cJSON_Parse(text) : NULL;
        free(text);
        size_t index = (size_t)num(task, "index");
        tune_outcome o = {0};
        o.status = store_records(ctx->db, cJSON_GetObjectItemCaseSensitive(task, "records"), 1);
        if (o.status != AT_OK)
            snprintf(o.error, sizeof o.error, "cannot seed rank %d's database %s: %s", f->rank,
                     f->tmpdir, at_errmsg());
        else
            h->tune(h->user, ctx, index, (int64_t)num(task, "max_evals"), num(task, "max_seconds"),
                    &o);
        cJSON_Delete(task);
        /* Interrupted: the outcome goes to rank 0, and this rank takes nothing more. */
        cJSON *out = outcome_json(index, &o);
        if (*cancel) cJSON_AddTrueToObject(out, "leaving");
        send_json(0, TAG_REQUEST, out);
        if (*cancel) break;
    }
    ctx->on_store = NULL;
    return AT_OK;
}

void fleet_leave(fleet *f, const char *why)
{
    if (f->size < 2) return;
    if (f->rank == 0) MPI_Abort(MPI_COMM_WORLD, 1); /* the other ranks wait for rank 0 */
    send_text(0, TAG_BYE, why);
}

at_status fleet_run(fleet *f, at_context *ctx, const fleet_hooks *h, volatile int *cancel)
{
    return f->rank == 0 ? run_rank0(f, ctx, h, cancel) : run_worker(f, ctx, h, cancel);
}
