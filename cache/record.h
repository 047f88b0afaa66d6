/* record.h — the values of the results, best, checks and devices tables: self-describing,
 * versioned one-line text records ("v2 status=ok median_us=12.5 ... reason=\"\""), their
 * formatter and their tolerant parser (docs/database.md). */
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
    int64_t when;           /* unix time */
    char reason[512];       /* "" for ok; the first line(s) of the error otherwise */
    char template_name[64]; /* the template's name ("gemm"); "" in records older than 2.1 */
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

/* A device's identity (the devices table, schema 2.1): what the fallback chain compares
 * (family, vendor) and what a bundle ships with each record. */
typedef struct at_device_rec {
    char backend[16]; /* "opencl", "cuda", "hip" */
    char name[256];   /* the device name */
    char vendor[256]; /* "NVIDIA" (cuda), "AMD" (hip), the OpenCL platform name (opencl) */
    char arch[64];    /* compile target ("sm_90a", "gfx90a"), "" for OpenCL */
    char family[64];  /* what "same architecture" compares (at_device_rec_fill) */
    int64_t units;    /* compute units */
    char driver[256]; /* driver version */
    char compiler[256];
    int64_t when; /* unix time it was written */
} at_device_rec;

/* Fills the identity of a device of backend ("cuda", "hip", "opencl") from what its key holds:
 * platform (OpenCL's platform name, "" elsewhere), name, arch and units; vendor and family
 * follow from them, the same for a record made from a key and one made from a live device:
 * - vendor: "NVIDIA" for cuda, "AMD" for hip, the platform name for opencl;
 * - family: the arch when there is one; for a PoCL CPU device the LLVM CPU name in its name
 *   ("pthread-skylake-avx512-Intel(R) Xeon(R) ..." -> "skylake-avx512": the '-'-separated
 *   tokens after the first, while they hold no uppercase letter or space); else the name.
 * driver, compiler and when are left as they are. */
void at_device_rec_fill(at_device_rec *out, const char *backend, const char *platform,
                        const char *name, const char *arch, int64_t units);
/* What a device key alone says: "cuda/<arch>/<name>/<units>",
 * "hip/<arch>/<name>/<units>/lds<n>/w<n>", "opencl/<platform>/<name>/<units>" (a name may hold
 * '/'); driver and compiler "", when 0. A key of another backend reads as
 * "<backend>/<x>/<name>/<units>" with no vendor or arch. */
void at_device_rec_from_key(const char *device_key, at_device_rec *out);

/* Appends the record's text (one line, no newline; "v2 name=value ..."). */
void at_result_rec_append(at_sbuf *b, const at_result_rec *r);
void at_best_rec_append(at_sbuf *b, const at_best_rec *r);
void at_device_rec_append(at_sbuf *b, const at_device_rec *r);
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
/* Required: backend and name. */
at_status at_device_rec_parse(const char *text, size_t len, at_device_rec *out);

#endif
