/* fleet.h — `autotune tune --shapes` spread over the ranks of an MPI job (docs/shipping.md,
 * "Fleet tuning under MPI"): the transport, the queue's messages and the database forwarding.
 * What a problem's tuning and its progress line are stays in main.c, behind fleet_hooks. Only
 * autotune-mpi has the functions (fleet.c); main.c uses the types in every build. */
#ifndef AT_FLEET_H
#define AT_FLEET_H

#include "autotune.h"

#include <stddef.h>
#include <stdint.h>

/* What tuning one problem gave. */
typedef struct tune_outcome {
    at_status status;
    at_tune_report rep;
    char error[1024]; /* at_context_last_error when status is not AT_OK */
} tune_outcome;

/* The list's side, called by the fleet. take and done run on rank 0 from two threads (its own
 * tuning and the coordinator's), so they lock. */
typedef struct fleet_hooks {
    void *user;
    /* Rank 0: the next problem for rank (its index in the list) and its budget; 0 when none is
     * left (the list is done, or the run was interrupted). */
    int (*take)(void *user, int rank, size_t *index, int64_t *max_evals, double *max_seconds);
    /* Rank 0: problem index was tuned on rank with this outcome. */
    void (*done)(void *user, size_t index, int rank, const tune_outcome *out);
    /* The database key of problem index ("gemm/f32/nt/16x4096x4096"); NULL past the list. */
    const char *(*key)(void *user, size_t index);
    /* Any rank: tunes problem index on ctx with these budgets. */
    void (*tune)(void *user, at_context *ctx, size_t index, int64_t max_evals, double max_seconds,
                 tune_outcome *out);
} fleet_hooks;

typedef struct fleet fleet;

/* Starts MPI (MPI_Init_thread, MPI_THREAD_SERIALIZED: on rank 0 the main thread calls MPI only
 * before the coordinator thread starts and after it ends, and no other rank has threads that
 * call MPI), finds this rank's place and, for a rank other than 0, makes its private temporary
 * database (when it cannot, fleet_db is NULL and why says why). On failure (MPI did not
 * start) the message goes to why and *out is NULL. */
at_status fleet_init(int *argc, char ***argv, fleet **out, char *why, size_t len);
int fleet_rank(const fleet *f);
int fleet_size(const fleet *f);
/* The database a rank tunes into: NULL on rank 0 (the --db database), else its temporary one. */
const char *fleet_db(const fleet *f);
/* The backend (AT_BACKEND_*) and device this rank takes: backend as asked ("auto" or NULL: the
 * first one with a device, GPUs first, as at_context_create picks it), its device number local
 * rank % devices. AT_ERR_NO_BACKEND with why when no backend has a device. */
at_status fleet_device(const fleet *f, const char *backend, at_backend_kind *kind, int *device,
                       char *why, size_t len);
/* Runs the list over the job: on rank 0 the coordinator thread serves the other ranks while
 * this thread tunes what it takes; on another rank, asks rank 0 for problems until it says
 * stop, seeding ctx's database with each problem's stored records and forwarding every record it
 * stores to rank 0. ctx is this rank's context (rank 0's on the --db database). cancel is set
 * when rank 0 asks the ranks to stop (an interrupt there). Returns the first failure of rank 0
 * to store what it was sent (AT_ERR_DB...), AT_OK otherwise; a problem's failure is its outcome. */
at_status fleet_run(fleet *f, at_context *ctx, const fleet_hooks *h, volatile int *cancel);
/* A rank that cannot tune (its device or database did not open) tells rank 0 why and takes no
 * problem; on rank 0, where the other ranks wait for answers, it ends the job (MPI_Abort). Does
 * nothing in a job of one rank. */
void fleet_leave(fleet *f, const char *why);
/* Ends MPI and removes the temporary database; accepts NULL. */
void fleet_end(fleet *f);

#endif
