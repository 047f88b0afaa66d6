/* record.h — the values of the results and best tables: self-describing, versioned one-line
 * text records ("v2 status=ok median_us=12.5 ... reason=\"\""), their formatter and their
 * tolerant parser (docs/database.md). */
#ifndef AT_RECORD_H
#define AT_RECORD_H

#include "base/sbuf.h"
#include "base/util.h"

#include <stddef.h>
#include <stdint.h>

/* The version tag records are written with ("v2"); it is the schema major version. The parser
 * reads every tag from v1 up to it. */
#define AT_RECORD_VERSION 2

/* Candidate outcome; the names are part of the JSON/CLI contract. */
typedef enum at_result_status {
    AT_RS_OK = 0,
    AT_RS_COMPILE_ERROR,
    AT_RS_RESOURCE_LIMIT,
    AT_RS_LAUNCH_ERROR,
    AT_RS_WRONG_RESULT,
    AT_RS_TIMEOUT,
    AT_RS_CRASHED,
    AT_RS_COUNT
} at_result_status;
const char *at_result_status_name(at_result_status s); /* "ok", "compile_error", ... */
int at_result_status_parse(const char *name);          /* -1 if unknown */

typedef struct at_result_rec {
    at_result_status status;
    double median_us, min_us, max_us; /* kernel time; 0 when not measured */
    int64_t reps;                     /* timed repetitions (0 when not timed) */
    int early_stop;                   /* 1: stopped timing early, clearly slower than the best */
    double max_rel_error;             /* against the reference; 0 when not checked */
    double compile_ms;
    int64_t when;     /* unix time */
    char reason[512]; /* "" for ok; the first line(s) of the error otherwise */
} at_result_rec;

typedef struct at_best_rec {
    char config[512];       /* "BM=64,BN=64,..." */
    char template_hash[17]; /* hex */
    double time_us, gflops, max_rel_error;
    int64_t when;
    char compiler[256];     /* compiler version */
    char driver[256];       /* driver version */
    char template_name[64]; /* the template's name ("gemm_mma"); "" in records older than v2 */
    int64_t space;          /* valid configurations of the space when tuned; 0: unknown */
} at_best_rec;

/* Appends the record's text (one line, no newline; "v2 name=value ..."). */
void at_result_rec_append(at_sbuf *b, const at_result_rec *r);
void at_best_rec_append(at_sbuf *b, const at_best_rec *r);
/* The same into buf (truncated, always NUL-terminated; "" for a NULL record). */
void at_result_rec_format(const at_result_rec *r, char *buf, size_t len);
void at_best_rec_format(const at_best_rec *r, char *buf, size_t len);

/* Parses a record of any version from v1 to AT_RECORD_VERSION (text need not be
 * NUL-terminated). Fields may come in any order; unknown fields (bare or quoted values) are
 * skipped; missing optional fields are 0 or "". AT_ERR_DB_CORRUPT: malformed, a field twice, a
 * known field's value out of range, or a required field missing (status for results; config
 * and hash for best). AT_ERR_DB_VERSION: a newer version tag. at_errmsg() says why, without
 * the key (the caller adds it). */
at_status at_result_rec_parse(const char *text, size_t len, at_result_rec *out);
at_status at_best_rec_parse(const char *text, size_t len, at_best_rec *out);

#endif
