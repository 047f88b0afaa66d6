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
void at_pool_wait(at_pool *pl, at_job *j);
void at_pool_stop(at_pool *pl); /* joins the threads; jobs stay the caller's */

/* Stores a compiled program's binary (a failure only costs a compile later). */
void at_binary_store(at_context *ctx, const char *source, const char *options, at_bprog *prog);
/* 1 if a compiled candidate's reported resources fit ctx's device (see at_resources_fit). */
int at_candidate_fits(at_context *ctx, at_bprog *prog, const size_t local[3], char *why,
                      size_t whylen);

/* ---- runner: checks and times candidates of one problem on the device -------------------- */

typedef struct at_runner {
    at_context *ctx;
    const at_problem *p;
    at_op_data data;              /* the operation's inputs and reference */
    at_bbuf bufs[AT_MAX_BUFFERS]; /* the device copies, in role order */
    float *out[AT_MAX_BUFFERS];   /* outputs read back, as f32 */
    void *stage;                  /* element-type staging for uploads and reads */
    size_t nbufs;
    at_bbuf flush; /* rewritten before each timed run on a GPU */
    at_bbuf ws;    /* the largest workspace a candidate needed so far */
} at_runner;

/* Makes the operation's data for p and puts it on ctx's device. */
at_status at_runner_open(at_runner *r, at_context *ctx, const at_problem *p);
void at_runner_close(at_runner *r);
/* Runs a compiled candidate (config cfg of t) once against the reference, then times it
 * (warm-up, repetitions, early stop against best_us). Every outcome goes into rec; nothing here
 * fails the run, but *lost says a fault left the device context unusable. */
void at_runner_measure(at_runner *r, const at_template *t, const int64_t *cfg, at_bprog *prog,
                       double best_us, at_result_rec *rec, int *lost);

/* ---- the tune loop -------------------------------------------------------------------------- */

/* What answers for the configurations a search proposes: the device (build, run) or records. */
typedef struct at_evaluator at_evaluator;
struct at_evaluator {
    /* Starts evaluating config c (an index of the search space). Returns 1 and fills *rec when
     * the answer is known at once (a record), 0 when it is queued, or a failure of the run
     * itself (a negative at_status, at_errmsg says why). */
    int (*submit)(at_evaluator *e, size_t c, at_result_rec *rec);
    /* The oldest queued config's outcome; best_us is the best time so far (0: none).
     * AT_ERR_DEVICE_LOST after a fault that left the device unusable (rec is still valid). */
    at_status (*next)(at_evaluator *e, double best_us, size_t *c, at_result_rec *rec);
    size_t lookahead; /* configs queued at most at once */
    int batch;        /* 1: queue a new batch only when the last one is done (a CPU device) */
};

/* What a run found. */
typedef struct at_loop {
    int64_t evaluated, failed;
    int have_best;
    size_t best;
    at_result_rec best_rec;
    char first_failure[512];
    int cancelled, lost;
    size_t ntrajectory; /* evaluations and config at each improvement (malloc'd) */
    int64_t *traj_evals;
    size_t *traj_config;
} at_loop;

/* The search options a tuning run's options make (strategy, seed, budgets). */
at_search_options at_search_options_of(const at_tune_options *opts);
/* Proposes, evaluates and reports until the search is done (a budget, the space), a cancel or a
 * lost device. opts gives the progress callback and the cancel flag. */
at_status at_tune_loop(at_search *s, at_evaluator *e, const at_tune_options *opts, at_loop *out);
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
/* The recorded seconds so far: the clock of a replayed seconds budget. */
double at_replay_clock(void *replay_eval);
/* Loads the recording of p on ctx's device with template t from the database at path, and maps
 * the configs of t's space (n, enumerated) onto it (*map malloc'd). AT_ERR_INVALID_ARG when the
 * database has no results for them, naming the template versions it has. */
at_status at_replay_open_db(at_context *ctx, const at_template *t, const char *problem_key,
                            const char *path, const int64_t *configs, size_t n, at_recording **rec,
                            size_t **map);

#endif
