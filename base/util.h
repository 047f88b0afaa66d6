/* util.h — small internal helpers shared by every module: error text, hashing, time, strings. */
#ifndef AT_UTIL_H
#define AT_UTIL_H

#include "autotune.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* Records a detailed message for the calling thread and returns s, so a failure reads
 * `return at_fail(AT_ERR_DB, "cannot open %s: %s", path, why);`. */
at_status at_fail(at_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The calling thread's last detailed message ("" if none). */
const char *at_errmsg(void);
void at_errclear(void);

/* Propagates a failure unchanged (zstd's FORWARD_IF_ERROR). */
#define AT_TRY(expr)                                                                               \
    do {                                                                                           \
        at_status at_try_s_ = (expr);                                                              \
        if (at_try_s_ != AT_OK) return at_try_s_;                                                  \
    } while (0)

/* 64-bit FNV-1a; chain calls with the previous hash as seed (start with AT_HASH_SEED). */
#define AT_HASH_SEED 1469598103934665603ull
uint64_t at_hash(uint64_t seed, const void *data, size_t len);
uint64_t at_hash_str(uint64_t seed, const char *s);
/* 16 lowercase hex digits + NUL. */
void at_hash_hex(uint64_t h, char out[17]);

/* Monotonic seconds. */
double at_now(void);
/* Wall-clock seconds since the epoch. */
int64_t at_unix_time(void);

/* The scheduler's account of this process's threads (Linux: /proc/self/task/<tid>/schedstat),
 * nanoseconds so far: on a core and waiting for one (runnable while another process held it),
 * the calling thread's wait apart. 0 when the kernel keeps no such account. */
typedef struct {
    int64_t run, wait; /* every thread but the calling one */
    int64_t self_wait; /* the calling thread */
} at_sched_acct;
int at_sched_account(at_sched_acct *out);
/* A run on CPU threads timed while other processes load the machine: what it would have taken
 * on its own. event_ms: its measured time; host_ms: the host's wall time around it (>= event_ms,
 * the span `a` and `b` were read over); `threads`: the threads that ran it. The waits of those
 * threads for a core, spread over them, are taken out of the host time (and the calling thread's
 * own wait after the run), never below their time on a core spread over them (the work itself)
 * and never above event_ms: on a quiet machine the result is event_ms. In whole nanoseconds,
 * the resolution of event times (records print microseconds to 3 decimals). */
double at_unloaded_ms(double event_ms, double host_ms, const at_sched_acct *a,
                      const at_sched_acct *b, int threads);

/* malloc'd copy / printf; NULL when out of memory. */
char *at_strdup(const char *s);
char *at_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Reads a whole file; NUL-terminated; *len without the NUL. */
at_status at_read_file(const char *path, char **data, size_t *len);
/* names (NULL-terminated) joined by ", " into out (len >= 1), cut short at len - 1 bytes; out. */
char *at_join_names(char *out, size_t len, const char *const *names);

/* Parses a whole decimal integer in [lo, hi] (digits after at most one '-': no spaces, '+',
 * hex); 0 on success, -1 otherwise. */
int at_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
/* Parses a whole finite decimal number -?D+(.D+)?([eE][-+]?D+)? (no spaces, '+', hex, inf, nan);
 * 0 on success, -1 otherwise. */
int at_parse_real(const char *s, double *out);
/* A tuning budget as the CLI and AUTOTUNE_BUDGET write it: "N" evaluations (1 <= N <= 1e9,
 * decimal digits only) or "Ns" / "N.Ns" seconds (> 0). Sets one of *evals, *seconds and zeroes
 * the other; 0 on success, -1 otherwise. */
int at_parse_budget(const char *s, int64_t *evals, double *seconds);

/* qsort's comparison of two doubles, ascending. */
int at_cmp_double(const void *a, const void *b);

#endif
