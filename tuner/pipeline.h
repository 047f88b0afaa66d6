/* pipeline.h — the parts of the candidate pipeline (internal to tuner/): the builder (compile
 * pool, binary cache, resource checks), the runner (a checked run, then timed runs, on the
 * device), the tune loop that drives a search strategy through an evaluator, and the replay
 * device, an evaluator that answers from records.
 *
 *   search → propose → evaluator: [builder → runner] or [records] → result → search
 */
#ifndef AT_PIPELINE_H
#define AT_PIPELINE_H

#include "cache/recording.h"
#include "search/search.h"
#include "search/transfer.h"
#include "tuner/tuner.h"

/* ---- builder: compiles in a thread pool, caches binaries -------------------------------- */

/* One configuration to compile. */
typedef struct at_job {
    size_t cfg; /* index in the enumerated space */
    char config[512];
    char options[4096];
    at_bprog *prog;
    at_status status;
    char reason[512];
    double compile_ms;
    int done;
} at_job;

typedef struct at_pool at_pool;

/* Compile threads for ctx: its option, else one per core. */
int at_compile_threads(const at_context *ctx);
/* Starts nthreads threads compiling source (kernel function `kernel`) on ctx's device. */
at_status at_pool_start(at_context *ctx, const char *source, const char *kernel, int nthreads,
                        at_pool **out);
/* Fills j for configuration cfg (index i of the space) and queues it; a config whose options
 * cannot be made is done at once with AT_ERR_TEMPLATE. */
void at_pool_submit(at_pool *pl, const at_space *s, size_t i, const int64_t *cfg, at_job *j);
/* Waits for j to be compiled; 0, or 1 when *cancel became set first (j keeps compiling). */
int at_pool_wait(at_pool *pl, at_job *j, const volatile int *cancel);
void at_pool_stop(at_pool *pl); /* joins the threads; jobs stay the caller's */

/* Stores a compiled program's binary (a failure only costs a compile later). */
void at_binary_store(at_context *ctx, const char *source, const char *options, at_bprog *prog);
/* 1 if a compiled candidate's reported resources fit ctx's device (see at_resources_fit). */
int at_candidate_fits(at_context *ctx, at_bprog *prog, const size_t local[3], char *why,
                      size_t whylen);

/* ---- the device half: buffers, runs and timing in a worker process ------------------------ */

#define AT_GUARD_BYTES 4096 /* canaries before and after every buffer of a checked run */

/* One kernel argument as the device half builds it: a buffer by index, the workspace, a
 * scalar's bytes, or a tensor map of a buffer, encoded there for its own device address. */
typedef struct at_run_arg {
    uint8_t kind; /* at_arg_kind */
    uint8_t size; /* scalar bytes */
    uint16_t buffer;
    unsigned char value[8];
    at_tmap_desc tmap; /* AT_ARG_TENSORMAP */
} at_run_arg;

/* How to launch a compiled candidate. */
typedef struct at_run_spec {
    char kernel[128];
    size_t global[3], local[3], dims, shared_bytes;
    size_t ws_bytes;      /* the workspace: zeroed before the run, checked zero after it */
    size_t scratch_bytes; /* after it in the same buffer: poisoned (NaN) before, not checked */
    size_t cluster;       /* blocks per thread-block cluster along dimension 0 (1: none) */
    at_run_arg args[AT_MAX_ARGS];
    size_t nargs;
} at_run_spec;

/* The link to the device half: a worker process that owns its own device context (a watchdog on
 * every request, replaced when it dies or hangs), or this process when isolation is off
 * (AUTOTUNE_ISOLATION=off, or a backend a worker cannot open). cancel: stops a wait at once. */
typedef struct at_link at_link;
at_status at_link_open(at_context *ctx, const volatile int *cancel, at_link **out);
void at_link_close(at_link *l);
/* Sizes the buffers of a problem (bytes each, and a cache flush buffer) and returns the host
 * staging area; at_link_init(i) is where buffer i's contents go, then at_link_upload. */
unsigned char *at_link_buffers(at_link *l, size_t n, const size_t *bytes, size_t flush_bytes,
                               at_status *st);
unsigned char *at_link_init(at_link *l, size_t i);
at_status at_link_upload(at_link *l);
/* What a checked run resets and reads back of each buffer (at_link_readback): outputs whose
 * contents are all NaN before a run are filled with the guard byte (NaN too) on the device
 * instead of uploaded; a buffer with rows comes back only in those rows (and its guards). */
#define AT_READBACK_ROWS 256
typedef struct at_readback {
    uint32_t fill;                                        /* buffers reset by a fill */
    uint32_t nrows[AT_MAX_BUFFERS];                       /* 0: the whole buffer */
    uint64_t stride[AT_MAX_BUFFERS], len[AT_MAX_BUFFERS]; /* bytes: row r at r * stride */
    int64_t rows[AT_MAX_BUFFERS][AT_READBACK_ROWS];
} at_readback;
/* Sets what every later at_link_run resets and reads back (default: upload, whole). */
void at_link_readback(at_link *l, const at_readback *rb);
/* Runs a candidate once: loads its binary, re-uploads the buffers in reset (outputs; or fills
 * them, at_link_readback), zeroes the workspace, launches, and reads every buffer back
 * (at_link_out; only the rows at_link_readback names) with the guards. The
 * candidate's outcome is in rec (ok, launch_error, or crashed / timeout when the worker died or
 * did not answer within limit_ms); a failed call is the run's own failure (interrupted, no
 * device). */
at_status at_link_run(at_link *l, const void *bin, size_t len, const at_run_spec *spec,
                      uint32_t reset, double limit_ms, double *ms, int64_t *ws_dirty,
                      at_result_rec *rec);
/* Buffer i as the last run left it, and how many of its guard bytes it changed. */
unsigned char *at_link_out(at_link *l, size_t i);
size_t at_link_guard_errors(const at_link *l, size_t i);
/* Times the candidate of the last run (its run took first_ms): repetitions with the cache
 * flushed between them, stopping early when clearly slower than best_us. */
at_status at_link_time(at_link *l, double first_ms, double best_us, double limit_ms,
                       at_result_rec *rec);

/* ---- runner: checks and times candidates of one problem ----------------------------------- */

typedef struct at_runner {
    at_context *ctx;
    const at_problem *p;
    at_op_data data; /* the operation's inputs and reference */
    size_t nbufs;
    size_t bytes[AT_MAX_BUFFERS]; /* device bytes of each buffer */
    float *out[AT_MAX_BUFFERS];   /* buffers read back, as f32 */
    at_link *link;
    double run_limit_ms;  /* the absolute limit on one run (0: AT_RUN_LIMIT_MS) */
    double slowdown;      /* a run this many times the best is stopped (<= 0: off) */
    int64_t slow_stopped; /* candidates stopped so */
} at_runner;

#define AT_RUN_LIMIT_MS 20000.0 /* the default absolute limit on one run */
#define AT_SLOWDOWN     10.0    /* the default slowdown limit against the best so far */

/* Checks p's buffers against the device's memory, makes the operation's data and puts it on the
 * device half. cancel: the run's cancel flag (may be NULL). */
at_status at_runner_open(at_runner *r, at_context *ctx, const at_problem *p,
                         const volatile int *cancel);
void at_runner_close(at_runner *r);
/* Runs a compiled candidate (config cfg of t) once against the reference — guards intact,
 * inputs unchanged, workspace clean — then times it. Every outcome goes into rec (all of it:
 * its when and compile_ms are the caller's to set after); a failure of the run itself
 * (interrupted, the device gone) is returned. */
at_status at_runner_measure(at_runner *r, const at_template *t, const int64_t *cfg, at_bprog *prog,
                            double best_us, at_result_rec *rec);

/* Compiles config of t (bound to p and ctx's device; from the binaries table when it is there)
 * and runs it once on p against the reference, then, when timed, times it as a tuning run
 * does. The outcome goes into rec (a config that does not compile is a compile_error); a
 * failure of the run itself (no device, no memory) is returned. */
at_status at_config_run(at_context *ctx, at_template *t, const at_problem *p, const char *config,
                        int timed, at_result_rec *rec);

/* ---- the tune loop -------------------------------------------------------------------------- */

/* What answers for the configurations a search proposes: the device (build, run) or records. */
typedef struct at_evaluator at_evaluator;
struct at_evaluator {
    /* Starts evaluating config c (an index of the search space). Returns 1 and fills *rec when
     * the answer is known at once (a record), 0 when it is queued, or a failure of the run
     * itself (a negative at_status, at_errmsg says why). */
    int (*submit)(at_evaluator *e, size_t c, at_result_rec *rec);
    /* The oldest queued config's outcome; best_us is the best time so far (0: none). A failure
     * of the run itself (AT_ERR_INTERRUPTED, a failed write, no device) leaves rec unused. */
    at_status (*next)(at_evaluator *e, double best_us, size_t *c, at_result_rec *rec);
    size_t lookahead; /* configs queued at most at once */
    int batch;        /* 1: queue a new batch only when the last one is done (a CPU device) */
    /* Set by the loop before next: a candidate whose measurement, expected to take expect_s,
     * would end after deadline (at_now() seconds; 0: none) is not started: next then sets
     * not_started and leaves rec unused. next sets measure_s to the seconds the outcome took
     * to measure (0: a record). */
    double deadline, expect_s, measure_s;
    int not_started;
};

/* What the loop tells the progress hooks and uses for the budget (NULL: nothing). */
typedef struct at_loop_env {
    double t0;             /* at_now() when the run started: the budget's clock */
    double budget_s;       /* the seconds budget, checked per candidate (0: none) */
    double estimate_s;     /* one candidate's seconds before any was measured (0: unknown) */
    double flops;          /* of one run, for GFLOP/s */
    const char *problem;   /* the problem's key */
    const at_space *space; /* with configs: the config strings */
    const int64_t *configs;
} at_loop_env;

#define AT_LOOP_TOP 3 /* the best configs a run keeps: a proxy's, confirmed on the problem */

/* What a run found. */
typedef struct at_loop {
    int64_t evaluated, failed;
    int have_best;
    size_t best;
    at_result_rec best_rec;
    char first_failure[512];
    int cancelled;
    int budget_stopped;      /* the next candidate would not have fitted the seconds budget */
    size_t top[AT_LOOP_TOP]; /* the best configs, fastest first */
    double top_us[AT_LOOP_TOP];
    size_t ntop;
    double *measured_s; /* seconds each measured candidate took (malloc'd) */
    size_t nmeasured_s;
    size_t ntrajectory; /* evaluations and config at each improvement (malloc'd) */
    int64_t *traj_evals;
    size_t *traj_config;
} at_loop;

/* The search options a tuning run's options make (strategy, seed, budgets). */
at_search_options at_search_options_of(const at_tune_options *opts);
/* Proposes, evaluates and reports until the search is done (a budget, the space), a cancel or a
 * failure of the run. opts gives the progress callback and the cancel flag. */
at_status at_tune_loop(at_search *s, at_evaluator *e, const at_tune_options *opts,
                       const at_loop_env *env, at_loop *out);
/* The seconds one candidate is expected to take: the median of those measured, else the
 * environment's estimate (0: unknown). */
double at_loop_expect(const at_loop *l, const at_loop_env *env);
void at_loop_clear(at_loop *l);

/* ---- the replay device ---------------------------------------------------------------------- */

/* An evaluator answering config i of a search space from a recording: configs[i] is the index
 * of its entry in r (or (size_t)-1: not recorded, a failure naming `source`). */
typedef struct at_replay_eval {
    at_evaluator ev;
    const at_recording *r;
    const size_t *configs;
    const char *source;
    double seconds; /* recorded compile and benchmark seconds of what was answered */
} at_replay_eval;

void at_replay_eval_init(at_replay_eval *e, const at_recording *r, const size_t *configs,
                         const char *source);
/* A recording's parameters, names and values as text, for at_transfer_map. */
at_transfer_params at_recording_transfer_params(const at_recording *r);
/* The recorded seconds so far: the clock of a replayed seconds budget. */
double at_replay_clock(void *replay_eval);
/* Loads the recording of p on ctx's device with template t from the database at path, and maps
 * the configs of t's space (n, enumerated) onto it (*map malloc'd). AT_ERR_INVALID_ARG when the
 * database has no results for them, naming the template versions it has. */
at_status at_replay_open_db(at_context *ctx, const at_template *t, const char *problem_key,
                            const char *path, const int64_t *configs, size_t n, at_recording **rec,
                            size_t **map);

#endif
