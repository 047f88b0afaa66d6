/* worker.c — the device half of measuring candidates. It runs in a worker process that owns its
 * own device context, so that nothing a candidate does — a hang, a fault far out of bounds, a
 * poisoned context — can take the tuner down: the host half (run.c) talks to it over a socket,
 * shares the buffers' host copies through shared memory, keeps a watchdog on every request, and
 * replaces the worker when it dies or is killed. The worker is this very program executed again
 * (/proc/self/exe, or the library preloaded into it), entered by a constructor before main.
 * With isolation off (AUTOTUNE_ISOLATION=off, or a backend only this process knows, like the
 * tests' fake), the same device half runs in this process on the context's own device. */
#define _GNU_SOURCE
#include "tuner/pipeline.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define GUARD       AT_GUARD_BYTES
#define GUARD_BYTE  0xff   /* NaN in f32, f16 and bf16: a kernel reading it goes wrong */
#define MIN_TIME_S  0.1    /* time each candidate at least this long ... */
#define MIN_REPS    3      /* ... and at least this many times ... */
#define MAX_REPS    50     /* ... but no more than this */
#define EARLY_STOP  2.0    /* stop timing a candidate this much slower than the best */
#define LONG_RUN_MS 1000.0 /* a run this long varies little: timed once after its checked run */
#define BIN_SPACE   (1u << 20)
#define WORKER_FDS  3 /* the worker's socket; its shared memory is fd 4 */
#define ENV_WORKER  "AUTOTUNE_WORKER"
#define START_LIMIT 60000.0 /* ms a worker may take to open its device */

/* ---- the host staging area both halves see ------------------------------------------------ */

/* Per buffer: the contents to upload (guard, data, guard), then what a run read back (the same
 * shape); then the candidate's binary. */
static size_t region(size_t bytes) { return bytes + 2 * GUARD; }

static size_t init_offset(const size_t *bytes, size_t i)
{
    size_t off = 0;
    for (size_t j = 0; j < i; j++) off += region(bytes[j]);
    return off;
}

static size_t out_offset(const size_t *bytes, size_t n, size_t i)
{
    return init_offset(bytes, n) + init_offset(bytes, i);
}

static size_t bin_offset(const size_t *bytes, size_t n) { return 2 * init_offset(bytes, n); }

/* ---- requests and replies ------------------------------------------------------------------ */

enum { OP_OPEN = 1, OP_BUFFERS, OP_UPLOAD, OP_RUN, OP_TIME, OP_CLOSE };

typedef struct request {
    uint32_t op;
    /* OPEN */
    char backend[16];
    int32_t device;
    /* BUFFERS */
    uint32_t nbufs;
    uint64_t bytes[AT_MAX_BUFFERS];
    uint64_t flush_bytes, host_size;
    /* UPLOAD, RUN */
    uint32_t mask;
    /* RUN */
    at_run_spec spec;
    uint64_t bin_len, bin_id;
    at_readback rb;
    /* TIME */
    double first_ms, best_us;
} request;

typedef struct reply {
    int32_t status; /* at_status of the request itself */
    at_result_rec rec;
    double ms;
    int64_t ws_dirty;
    int32_t lost; /* the device context is unusable: replace the worker */
    char error[512];
} reply;

/* ---- the device half ----------------------------------------------------------------------- */

typedef struct devside {
    const at_backend_ops *ops;
    at_bdev *dev;
    size_t n;
    size_t bytes[AT_MAX_BUFFERS];
    at_bbuf whole[AT_MAX_BUFFERS]; /* guard + data + guard */
    at_bbuf view[AT_MAX_BUFFERS];  /* the data, what the kernel gets */
    at_bbuf flush, ws;
    unsigned char *host;
    size_t host_size;
    at_bprog *prog;
    uint64_t bin_id;
    at_arglist args;
    size_t g[3], l[3], dims, shared, cluster;
    int have_run;
} devside;

static void dev_free_buffers(devside *d)
{
    for (size_t i = 0; i < d->n; i++) {
        if (d->view[i].handle && d->ops->view_free) d->ops->view_free(d->dev, d->view[i]);
        if (d->whole[i].handle) d->ops->buffer_free(d->dev, d->whole[i]);
    }
    if (d->flush.handle) d->ops->buffer_free(d->dev, d->flush);
    if (d->ws.handle) d->ops->buffer_free(d->dev, d->ws);
    memset(d->whole, 0, sizeof d->whole);
    memset(d->view, 0, sizeof d->view);
    memset(&d->flush, 0, sizeof d->flush);
    memset(&d->ws, 0, sizeof d->ws);
    d->n = 0;
}

static void dev_release(devside *d)
{
    if (!d->ops) return;
    d->ops->program_free(d->prog);
    d->prog = NULL;
    d->bin_id = 0;
    dev_free_buffers(d);
}

static at_status dev_buffers(devside *d, size_t n, const uint64_t *bytes, size_t flush_bytes)
{
    dev_free_buffers(d);
    for (size_t i = 0; i < n; i++) {
        d->bytes[i] = (size_t)bytes[i];
        /* A backend without views (a test fake) gets no guard zones. */
        int guarded = d->ops->buffer_view != NULL;
        AT_TRY(d->ops->buffer_alloc(d->dev, guarded ? region(d->bytes[i]) : d->bytes[i],
                                    &d->whole[i]));
        d->n = i + 1;
        if (guarded)
            AT_TRY(d->ops->buffer_view(d->dev, d->whole[i], GUARD, d->bytes[i], &d->view[i]));
        else
            d->view[i] = d->whole[i];
    }
    if (flush_bytes && d->ops->buffer_alloc(d->dev, flush_bytes, &d->flush) != AT_OK) {
        d->flush.handle = NULL; /* no room: time without flushing */
        at_errclear();
    }
    return AT_OK;
}

/* Uploads the buffers in mask; of those, the ones in fill are filled with the guard byte on
 * the device instead (outputs that start all NaN: nothing crosses the bus). */
static at_status dev_upload(devside *d, uint32_t mask, uint32_t fill)
{
    for (size_t i = 0; i < d->n; i++) {
        if (!((mask >> i) & 1)) continue;
        if (((fill >> i) & 1) && d->ops->buffer_fill) {
            AT_TRY(d->ops->buffer_fill(d->dev, d->whole[i], GUARD_BYTE));
            continue;
        }
        const unsigned char *src = d->host + init_offset(d->bytes, i);
        if (d->view[i].handle == d->whole[i].handle) src += GUARD;
        AT_TRY(d->ops->buffer_write(d->dev, d->whole[i], 0, src, d->whole[i].bytes));
    }
    return AT_OK;
}

/* A launch or a read failed: a fault that poisoned the context (CUDA's sticky errors) makes the
 * candidate `crashed` and the device lost; anything else is the candidate's launch_error. */
static void failed(devside *d, reply *rp)
{
    snprintf(rp->rec.reason, sizeof rp->rec.reason, "%s", at_errmsg());
    if (d->ops->check && d->ops->check(d->dev) == AT_ERR_DEVICE_LOST) {
        rp->rec.status = AT_RS_CRASHED;
        rp->lost = 1;
    } else {
        rp->rec.status = AT_RS_LAUNCH_ERROR;
    }
}

static at_status make_args(devside *d, const at_run_spec *s)
{
    d->args.n = s->nargs;
    d->args.nmaps = 0;
    for (size_t i = 0; i < s->nargs; i++) {
        const at_run_arg *a = &s->args[i];
        if (a->kind == AT_ARG_TENSORMAP) {
            /* encoded here: the buffer's address is only valid in this context */
            unsigned char *m = at_arglist_map(&d->args);
            if (a->buffer >= d->n || !m)
                return at_fail(AT_ERR_INTERNAL, "argument %zu: no buffer or too many maps", i);
            at_status st = at_tmap_encode(d->ops, d->dev, &a->tmap, d->view[a->buffer].handle, m);
            if (st != AT_OK) {
                char msg[512];
                snprintf(msg, sizeof msg, "%s", at_errmsg());
                return at_fail(st, "tensor map of argument %zu: %s", i, msg);
            }
            d->args.a[i] = (at_karg){AT_TMAP_BYTES, m};
        } else if (a->kind == AT_ARG_BUFFER) {
            if (a->buffer >= d->n) return at_fail(AT_ERR_INTERNAL, "argument %zu: no buffer", i);
            d->args.v[i].ptr = d->view[a->buffer].handle;
            d->args.a[i] = (at_karg){sizeof(void *), &d->args.v[i].ptr};
        } else if (a->kind == AT_ARG_WORKSPACE) {
            d->args.v[i].ptr = d->ws.handle;
            d->args.a[i] = (at_karg){sizeof(void *), &d->args.v[i].ptr};
        } else {
            memcpy(&d->args.v[i], a->value, sizeof a->value);
            d->args.a[i] = (at_karg){a->size, &d->args.v[i]};
        }
    }
    return AT_OK;
}

/* Reads buffer i back into its out region: whole, or its guards and the rows rb names. */
static at_status dev_read_back(devside *d, size_t i, const at_readback *rb)
{
    unsigned char *dst = d->host + out_offset(d->bytes, d->n, i), *data = dst + GUARD;
    size_t guard = GUARD; /* on the device: 0 for a backend without views (no guard zones) */
    if (d->view[i].handle == d->whole[i].handle) {
        memset(dst, GUARD_BYTE, GUARD);
        memset(data + d->bytes[i], GUARD_BYTE, GUARD);
        dst = data;
        guard = 0;
    }
    size_t nrows = rb->nrows[i] <= AT_READBACK_ROWS ? rb->nrows[i] : 0;
    if (!nrows) return d->ops->buffer_read(d->dev, d->whole[i], 0, dst, d->whole[i].bytes);
    if (guard) {
        AT_TRY(d->ops->buffer_read(d->dev, d->whole[i], 0, dst, guard));
        AT_TRY(d->ops->buffer_read(d->dev, d->whole[i], guard + d->bytes[i], data + d->bytes[i],
                                   guard));
    }
    for (size_t r = 0; r < nrows; r++) {
        uint64_t off = (uint64_t)rb->rows[i][r] * rb->stride[i];
        if (rb->rows[i][r] < 0 || off + rb->len[i] > d->bytes[i])
            return at_fail(AT_ERR_INTERNAL, "read-back row %lld outside buffer %zu",
                           (long long)rb->rows[i][r], i);
        AT_TRY(d->ops->buffer_read(d->dev, d->whole[i], guard + off, data + off, rb->len[i]));
    }
    return AT_OK;
}

/* Zeroes the workspace and poisons the scratch after it (a kernel that reads its scratch before
 * writing it goes wrong). */
static at_status dev_reset_ws(devside *d, const at_run_spec *s)
{
    if (!s->scratch_bytes) return d->ops->buffer_fill(d->dev, d->ws, 0);
    AT_TRY(d->ops->buffer_fill(d->dev, d->ws, GUARD_BYTE));
    if (!s->ws_bytes) return AT_OK;
    unsigned char *zero = calloc(1, s->ws_bytes);
    at_status st = zero ? d->ops->buffer_write(d->dev, d->ws, 0, zero, s->ws_bytes)
                        : at_fail(AT_ERR_NO_MEMORY, "out of memory zeroing a workspace");
    free(zero);
    return st;
}

/* Loads the binary, resets the outputs (mask), resets the workspace, launches once and reads
 * every buffer back (guards included) for the host half to check. */
static void dev_run(devside *d, const request *rq, reply *rp)
{
    const at_run_spec *s = &rq->spec;
    char *log = NULL;
    d->have_run = 0;
    if (d->bin_id != rq->bin_id || !d->prog) {
        d->ops->program_free(d->prog);
        d->prog = NULL;
        d->bin_id = 0;
        size_t off = bin_offset(d->bytes, d->n);
        if (off + rq->bin_len > d->host_size ||
            d->ops->load_binary(d->dev, d->host + off, (size_t)rq->bin_len, s->kernel, &d->prog,
                                &log) != AT_OK) {
            rp->rec.status = AT_RS_LAUNCH_ERROR;
            snprintf(rp->rec.reason, sizeof rp->rec.reason, "the device rejected the binary: %s",
                     at_errmsg());
            free(log);
            return;
        }
        free(log);
        d->bin_id = rq->bin_id;
    }
    const size_t ws_total = s->ws_bytes + s->scratch_bytes;
    if (ws_total > d->ws.bytes && d->ws.handle) {
        d->ops->buffer_free(d->dev, d->ws);
        memset(&d->ws, 0, sizeof d->ws);
    }
    at_status st = AT_OK;
    if (ws_total && !d->ws.handle) st = d->ops->buffer_alloc(d->dev, ws_total, &d->ws);
    if (st == AT_OK) st = make_args(d, s);
    memcpy(d->g, s->global, sizeof d->g);
    memcpy(d->l, s->local, sizeof d->l);
    d->dims = s->dims;
    d->shared = s->shared_bytes;
    d->cluster = s->cluster;
    if (st == AT_OK) st = dev_upload(d, rq->mask, rq->rb.fill);
    if (st == AT_OK && ws_total) st = dev_reset_ws(d, s);
    if (st == AT_OK)
        st = d->ops->launch(d->dev, d->prog, d->args.a, d->args.n, d->g, d->l, d->dims, d->cluster,
                            d->shared, NULL, &rp->ms);
    /* Everything back, guards included (of a sampled buffer its rows and guards); an
     * asynchronous fault shows up here. */
    for (size_t i = 0; st == AT_OK && i < d->n; i++) st = dev_read_back(d, i, &rq->rb);
    if (st == AT_OK && s->ws_bytes) {
        unsigned char *h = malloc(s->ws_bytes);
        st = h ? d->ops->buffer_read(d->dev, d->ws, 0, h, s->ws_bytes)
               : at_fail(AT_ERR_NO_MEMORY, "out of memory reading a workspace");
        for (size_t i = 0; st == AT_OK && i < s->ws_bytes; i++) rp->ws_dirty += h[i] != 0;
        free(h);
    }
    if (st != AT_OK) {
        failed(d, rp);
        return;
    }
    rp->rec.status = AT_RS_OK;
    d->have_run = 1;
}

/* Times the candidate of the last run: its checked run was the warm-up. */
static void dev_time(devside *d, double first_ms, double best_us, reply *rp)
{
    at_result_rec *rec = &rp->rec;
    double times[MAX_REPS], total = 0, min = first_ms, ms = first_ms;
    int n = 0;
    rec->status = AT_RS_OK;
    if (!d->have_run) {
        rec->status = AT_RS_LAUNCH_ERROR;
        snprintf(rec->reason, sizeof rec->reason, "nothing to time");
        return;
    }
    if (best_us > 0 && first_ms * 1e3 > EARLY_STOP * best_us) {
        times[n++] = first_ms;
        rec->early_stop = 1;
    }
    const int min_reps = first_ms >= LONG_RUN_MS ? 1 : MIN_REPS;
    while (!rec->early_stop && n < MAX_REPS && (n < min_reps || total < MIN_TIME_S * 1e3)) {
        /* Operands larger than the cache would otherwise be timed warm after the first run. */
        at_status st =
            d->flush.handle ? d->ops->buffer_fill(d->dev, d->flush, (unsigned char)n) : AT_OK;
        if (st == AT_OK)
            st = d->ops->launch(d->dev, d->prog, d->args.a, d->args.n, d->g, d->l, d->dims,
                                d->cluster, d->shared, NULL, &ms);
        if (st != AT_OK) {
            failed(d, rp);
            return;
        }
        times[n++] = ms;
        total += ms;
        if (ms < min) min = ms;
        if (best_us > 0 && n >= 2 && min * 1e3 > EARLY_STOP * best_us) rec->early_stop = 1;
    }
    qsort(times, (size_t)n, sizeof times[0], at_cmp_double);
    rec->reps = n;
    rec->median_us = times[n / 2] * 1e3;
    rec->min_us = times[0] * 1e3;
    rec->max_us = times[n - 1] * 1e3;
}

/* One request on the device half; the reply's status says whether the request itself worked. */
static void dev_serve(devside *d, const request *rq, reply *rp)
{
    at_errclear();
    memset(rp, 0, sizeof *rp);
    at_status st = AT_OK;
    switch (rq->op) {
    case OP_BUFFERS:
        st = dev_buffers(d, rq->nbufs, rq->bytes, (size_t)rq->flush_bytes);
        break;
    case OP_UPLOAD:
        st = dev_upload(d, rq->mask, 0);
        break;
    case OP_RUN:
        dev_run(d, rq, rp);
        break;
    case OP_TIME:
        dev_time(d, rq->first_ms, rq->best_us, rp);
        break;
    default:
        st = at_fail(AT_ERR_INTERNAL, "unknown request %u", rq->op);
    }
    rp->status = st;
    if (st != AT_OK) snprintf(rp->error, sizeof rp->error, "%s", at_errmsg());
}

/* ---- the worker process -------------------------------------------------------------------- */

static int send_all(int fd, const void *p, size_t n)
{
    return send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

/* Maps the shared staging area at its current size. */
static int worker_map(devside *d, int shm, size_t size)
{
    if (size <= d->host_size && d->host) return 0;
    if (d->host) munmap(d->host, d->host_size);
    d->host = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, shm, 0);
    if (d->host == MAP_FAILED) {
        d->host = NULL;
        d->host_size = 0;
        return -1;
    }
    d->host_size = size;
    return 0;
}

static int worker_serve(int sock, int shm)
{
    /* Never outlive the tuner (it may be killed while a kernel of ours hangs). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) return 0;
    devside d = {0};
    request rq;
    reply rp;
    for (;;) {
        ssize_t got = recv(sock, &rq, sizeof rq, 0);
        if (got != (ssize_t)sizeof rq || rq.op == OP_CLOSE) break;
        memset(&rp, 0, sizeof rp);
        if (rq.op == OP_OPEN) {
            at_errclear();
            char why[512] = "";
            d.ops = at_backend_find(rq.backend);
            rp.status = !d.ops ? at_fail(AT_ERR_NO_BACKEND, "no backend %s", rq.backend)
                        : d.ops->probe(why, sizeof why) != AT_OK
                            ? at_fail(AT_ERR_NO_BACKEND, "%s", why)
                            : d.ops->open(rq.device, &d.dev);
            if (rp.status != AT_OK) snprintf(rp.error, sizeof rp.error, "%s", at_errmsg());
        } else {
            if (rq.host_size && worker_map(&d, shm, (size_t)rq.host_size) != 0) {
                rp.status = at_fail(AT_ERR_NO_MEMORY, "cannot map the staging area");
                snprintf(rp.error, sizeof rp.error, "%s", at_errmsg());
            } else {
                dev_serve(&d, &rq, &rp);
            }
        }
        if (send_all(sock, &rp, sizeof rp) != 0) break;
        if (rp.lost) break; /* the context is gone: the host half starts a new worker */
    }
    dev_release(&d);
    if (d.dev) d.ops->close(d.dev);
    return 0;
}

/* A process started as a worker serves its host half and exits before main runs. */
__attribute__((constructor)) static void worker_entry(void)
{
    const char *w = getenv(ENV_WORKER);
    if (!w || strcmp(w, "3,4") != 0) return;
    unsetenv(ENV_WORKER);
    _exit(worker_serve(WORKER_FDS, WORKER_FDS + 1));
}

/* ---- the host half's link to the device half ----------------------------------------------- */

struct at_link {
    at_context *ctx;
    int isolated;
    const volatile int *cancel;
    /* the worker */
    pid_t pid;
    int sock, shm;
    /* in this process */
    devside local;
    /* the staging area, and what a new worker must be given again */
    unsigned char *host;
    size_t host_size;
    size_t n, flush_bytes;
    size_t bytes[AT_MAX_BUFFERS];
    int ready; /* the device half has the buffers and their contents */
    uint64_t next_bin_id;
    at_readback rb; /* sent with every run */
};

static int isolation_wanted(const at_context *ctx)
{
    const char *e = getenv("AUTOTUNE_ISOLATION");
    if (e && (strcmp(e, "off") == 0 || strcmp(e, "0") == 0)) return 0;
    /* A worker can open only the backends every process knows. */
    return at_backend_find(ctx->ops->name) == ctx->ops;
}

static void worker_kill(at_link *l)
{
    if (l->pid > 0) {
        kill(l->pid, SIGKILL);
        waitpid(l->pid, NULL, 0);
    }
    if (l->sock >= 0) close(l->sock);
    l->pid = -1;
    l->sock = -1;
    l->ready = 0;
}

/* What ended a worker that is gone: "killed by SIGSEGV", "exited with 3". */
static void worker_reaped(at_link *l, char *why, size_t len)
{
    int st = 0;
    pid_t r = l->pid > 0 ? waitpid(l->pid, &st, 0) : -1;
    if (r > 0 && WIFSIGNALED(st))
        snprintf(why, len, "the candidate took its worker down (killed by SIG%s)",
                 sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?");
    else if (r > 0 && WIFEXITED(st))
        snprintf(why, len, "the candidate took its worker down (it exited with %d)",
                 WEXITSTATUS(st));
    else
        snprintf(why, len, "the worker is gone");
    l->pid = -1;
    worker_kill(l);
}

/* The program to run as a worker, and the environment that makes it one. */
static at_status worker_spawn(at_link *l)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return at_fail(AT_ERR_INTERNAL, "cannot find this program to start a worker");
    exe[n] = '\0';
    /* Shared: when this library is not part of the program itself, the worker preloads it. */
    Dl_info info;
    const char *preload = NULL;
    if (dladdr((void *)worker_serve, &info) && info.dli_fname && strcmp(info.dli_fname, exe) != 0 &&
        strstr(info.dli_fname, ".so"))
        preload = info.dli_fname;
    size_t nenv = 0;
    while (environ[nenv]) nenv++;
    char **envp = calloc(nenv + 3, sizeof *envp);
    char *pre = preload ? at_asprintf("LD_PRELOAD=%s", preload) : NULL;
    if (!envp || (preload && !pre)) {
        free(envp);
        free(pre);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < nenv; i++)
        if (strncmp(environ[i], ENV_WORKER "=", sizeof ENV_WORKER) != 0 &&
            !(pre && strncmp(environ[i], "LD_PRELOAD=", 11) == 0))
            envp[k++] = environ[i];
    envp[k++] = ENV_WORKER "=3,4";
    if (pre) envp[k++] = pre;

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        free(envp);
        free(pre);
        return at_fail(AT_ERR_INTERNAL, "socketpair: %s", strerror(errno));
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], WORKER_FDS);
    posix_spawn_file_actions_adddup2(&fa, l->shm, WORKER_FDS + 1);
    posix_spawnattr_init(&at);
    /* Its own process group: a terminal's Ctrl-C is the tuner's to handle, not the worker's. */
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    char *argv[] = {"autotune-worker", NULL};
    int rc = posix_spawn(&l->pid, exe, &fa, &at, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(sv[1]);
    free(envp);
    free(pre);
    if (rc != 0) {
        close(sv[0]);
        l->pid = -1;
        return at_fail(AT_ERR_INTERNAL, "cannot start a worker (%s): %s", exe, strerror(rc));
    }
    l->sock = sv[0];
    return AT_OK;
}

/* The link's limit on one request, on top of the work it asks for. */
typedef enum { WAIT_OK, WAIT_TIMEOUT, WAIT_DEAD, WAIT_CANCELLED } wait_end;

/* Sends rq and waits for its reply, at most limit_ms; watches the cancel flag. */
static wait_end worker_call(at_link *l, const request *rq, reply *rp, double limit_ms)
{
    if (send_all(l->sock, rq, sizeof *rq) != 0) return WAIT_DEAD;
    double deadline = at_now() + limit_ms / 1e3;
    for (;;) {
        if (l->cancel && *l->cancel) return WAIT_CANCELLED;
        double left = deadline - at_now();
        if (left <= 0) return WAIT_TIMEOUT;
        struct pollfd p = {l->sock, POLLIN, 0};
        int r = poll(&p, 1, left > 0.1 ? 100 : (int)(left * 1e3) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return WAIT_DEAD;
        if (r == 0) continue;
        ssize_t got = recv(l->sock, rp, sizeof *rp, 0);
        return got == (ssize_t)sizeof *rp ? WAIT_OK : WAIT_DEAD;
    }
}

static at_status map_host(at_link *l, size_t size)
{
    if (size <= l->host_size) return AT_OK;
    if (l->host) {
        if (l->isolated)
            munmap(l->host, l->host_size);
        else
            free(l->host);
    }
    l->host = NULL;
    l->host_size = 0;
    if (!l->isolated) {
        l->host = malloc(size);
    } else if (ftruncate(l->shm, (off_t)size) == 0) {
        l->host = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, l->shm, 0);
        if (l->host == MAP_FAILED) l->host = NULL;
    }
    if (!l->host) return at_fail(AT_ERR_NO_MEMORY, "out of host memory for %zu bytes", size);
    l->host_size = size;
    l->local.host = l->host;
    l->local.host_size = size;
    return AT_OK;
}

/* One request to the device half as it is now: in this process, or to the worker. */
static wait_end one(at_link *l, request *rq, reply *rp, double limit_ms)
{
    memset(rp, 0, sizeof *rp);
    rq->host_size = l->host_size;
    if (l->isolated) return worker_call(l, rq, rp, limit_ms);
    dev_serve(&l->local, rq, rp);
    return WAIT_OK;
}

/* After a fault that left the device unusable: in this process the context's own device is
 * recycled (everything on it is gone), a worker is replaced by the next call. */
static at_status device_lost(at_link *l)
{
    l->ready = 0;
    if (l->isolated) {
        worker_kill(l);
        return AT_OK;
    }
    at_context *ctx = l->ctx;
    if (ctx->native) /* the caller's context: theirs to recreate, never ours */
        return at_fail(AT_ERR_DEVICE_LOST,
                       "a kernel fault left the %s context the caller gave (native_context) "
                       "unusable; autotune does not reset or recreate it",
                       ctx->ops->name);
    dev_release(&l->local); /* what it can still free */
    ctx->recycles++;        /* kernels built on the old device are stale from now on */
    ctx->ops->close(ctx->dev);
    ctx->dev = NULL;
    memset(&l->local, 0, sizeof l->local);
    l->local.ops = ctx->ops;
    l->local.host = l->host;
    l->local.host_size = l->host_size;
    AT_TRY(ctx->ops->open(ctx->device_index, &ctx->dev));
    l->local.dev = ctx->dev;
    return AT_OK;
}

/* The device half with the buffers and their contents: a new worker opens its device first. */
static at_status ensure_ready(at_link *l)
{
    reply r = {0};
    wait_end e = WAIT_OK;
    if (l->isolated && l->pid <= 0) {
        AT_TRY(worker_spawn(l));
        request o = {.op = OP_OPEN, .device = l->ctx->device_index};
        snprintf(o.backend, sizeof o.backend, "%s", l->ctx->ops->name);
        e = one(l, &o, &r, START_LIMIT);
    }
    request b = {.op = OP_BUFFERS, .nbufs = (uint32_t)l->n, .flush_bytes = l->flush_bytes};
    for (size_t i = 0; i < l->n; i++) b.bytes[i] = l->bytes[i];
    request u = {.op = OP_UPLOAD, .mask = (1u << l->n) - 1};
    if (e == WAIT_OK && r.status == AT_OK && !l->ready && l->n) {
        e = one(l, &b, &r, START_LIMIT);
        if (e == WAIT_OK && r.status == AT_OK) e = one(l, &u, &r, START_LIMIT);
        if (e == WAIT_OK && r.status == AT_OK) l->ready = 1;
    }
    if (e == WAIT_OK && r.status == AT_OK) return AT_OK;
    char why[512];
    snprintf(why, sizeof why, "%s", e == WAIT_OK ? r.error : "it did not answer");
    if (e == WAIT_DEAD) worker_reaped(l, why, sizeof why);
    worker_kill(l);
    if (e == WAIT_CANCELLED) return at_fail(AT_ERR_INTERRUPTED, "interrupted");
    return at_fail(e == WAIT_OK ? (at_status)r.status : AT_ERR_DEVICE_LOST,
                   "the device could not be set up for the run: %s", why);
}

/* One request on a ready device half. A worker that dies, hangs past limit_ms or is cancelled is
 * killed: the reply then says why (rec.status crashed or timeout; AT_ERR_INTERRUPTED for a
 * cancel), and the next call starts another. */
static at_status call(at_link *l, request *rq, reply *rp, double limit_ms)
{
    AT_TRY(ensure_ready(l));
    wait_end e = one(l, rq, rp, limit_ms);
    if (e == WAIT_OK) {
        if (rp->lost) AT_TRY(device_lost(l));
        return rp->status == AT_OK ? AT_OK : at_fail(rp->status, "%s", rp->error);
    }
    memset(rp, 0, sizeof *rp);
    if (e == WAIT_CANCELLED) {
        worker_kill(l);
        return at_fail(AT_ERR_INTERRUPTED, "interrupted");
    }
    if (e == WAIT_TIMEOUT) {
        worker_kill(l);
        rp->rec.status = AT_RS_TIMEOUT;
        snprintf(rp->rec.reason, sizeof rp->rec.reason,
                 "no answer within %.0f ms: its worker was stopped", limit_ms);
    } else {
        rp->rec.status = AT_RS_CRASHED;
        worker_reaped(l, rp->rec.reason, sizeof rp->rec.reason);
    }
    return AT_OK;
}

at_status at_link_open(at_context *ctx, const volatile int *cancel, at_link **out)
{
    at_link *l = calloc(1, sizeof *l);
    *out = l;
    if (!l) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    l->ctx = ctx;
    l->cancel = cancel;
    l->pid = -1;
    l->sock = -1;
    l->shm = -1;
    l->isolated = isolation_wanted(ctx);
    l->local.ops = ctx->ops;
    l->local.dev = ctx->dev;
    if (l->isolated && (l->shm = memfd_create("autotune-staging", MFD_CLOEXEC)) < 0)
        return at_fail(AT_ERR_INTERNAL, "memfd_create: %s", strerror(errno));
    return AT_OK;
}

void at_link_close(at_link *l)
{
    if (!l) return;
    if (l->isolated) {
        if (l->sock >= 0) {
            request rq = {.op = OP_CLOSE};
            send_all(l->sock, &rq, sizeof rq);
        }
        if (l->pid > 0) {
            /* It closes its device and exits; one that does not is not waited for. */
            for (int i = 0; i < 100 && waitpid(l->pid, NULL, WNOHANG) == 0; i++) usleep(10000);
        }
        worker_kill(l);
        if (l->host) munmap(l->host, l->host_size);
        if (l->shm >= 0) close(l->shm);
    } else {
        if (l->ctx->dev) dev_release(&l->local);
        free(l->host);
    }
    free(l);
}

unsigned char *at_link_buffers(at_link *l, size_t n, const size_t *bytes, size_t flush_bytes,
                               at_status *st)
{
    l->n = n;
    memcpy(l->bytes, bytes, n * sizeof *bytes);
    l->flush_bytes = flush_bytes;
    l->ready = 0;
    *st = map_host(l, bin_offset(bytes, n) + BIN_SPACE);
    if (*st != AT_OK) return NULL;
    /* The guards' pattern, around every buffer's contents. */
    for (size_t i = 0; i < n; i++) {
        unsigned char *p = l->host + init_offset(bytes, i);
        memset(p, GUARD_BYTE, GUARD);
        memset(p + GUARD + bytes[i], GUARD_BYTE, GUARD);
    }
    return l->host;
}

unsigned char *at_link_init(at_link *l, size_t i)
{
    return l->host + init_offset(l->bytes, i) + GUARD;
}

unsigned char *at_link_out(at_link *l, size_t i)
{
    return l->host + out_offset(l->bytes, l->n, i) + GUARD;
}

at_status at_link_upload(at_link *l)
{
    l->ready = 0;
    return ensure_ready(l);
}

size_t at_link_guard_errors(const at_link *l, size_t i)
{
    const unsigned char *p = l->host + out_offset(l->bytes, l->n, i);
    size_t bad = 0;
    for (size_t k = 0; k < GUARD; k++) bad += p[k] != GUARD_BYTE;
    for (size_t k = 0; k < GUARD; k++) bad += p[GUARD + l->bytes[i] + k] != GUARD_BYTE;
    return bad;
}

void at_link_readback(at_link *l, const at_readback *rb) { l->rb = *rb; }

at_status at_link_run(at_link *l, const void *bin, size_t len, const at_run_spec *spec,
                      uint32_t reset, double limit_ms, double *ms, int64_t *ws_dirty,
                      at_result_rec *rec)
{
    size_t off = bin_offset(l->bytes, l->n);
    if (off + len > l->host_size) {
        /* Grow the staging area (contents kept: init regions are what the worker uploads). */
        size_t size = off + len + BIN_SPACE;
        unsigned char *old = l->host;
        size_t old_size = l->host_size;
        if (!l->isolated) {
            unsigned char *p = realloc(l->host, size);
            if (!p) return at_fail(AT_ERR_NO_MEMORY, "out of memory for a binary");
            l->host = l->local.host = p;
            l->host_size = l->local.host_size = size;
        } else {
            if (ftruncate(l->shm, (off_t)size) != 0)
                return at_fail(AT_ERR_NO_MEMORY, "cannot grow the staging area: %s",
                               strerror(errno));
            unsigned char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, l->shm, 0);
            if (p == MAP_FAILED) return at_fail(AT_ERR_NO_MEMORY, "cannot map the staging area");
            munmap(old, old_size);
            l->host = p;
            l->host_size = size;
        }
    }
    memcpy(l->host + off, bin, len);
    request rq = {.op = OP_RUN,
                  .spec = *spec,
                  .bin_len = len,
                  .bin_id = ++l->next_bin_id,
                  .mask = reset,
                  .rb = l->rb};
    reply rp;
    AT_TRY(call(l, &rq, &rp, limit_ms));
    *rec = rp.rec;
    *ms = rp.ms;
    *ws_dirty = rp.ws_dirty;
    return AT_OK;
}

at_status at_link_time(at_link *l, double first_ms, double best_us, double limit_ms,
                       at_result_rec *rec)
{
    request rq = {.op = OP_TIME, .first_ms = first_ms, .best_us = best_us};
    reply rp;
    AT_TRY(call(l, &rq, &rp, limit_ms));
    *rec = rp.rec;
    return AT_OK;
}
