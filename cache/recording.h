/* recording.h — recorded spaces (Kernel Tuner cache JSON, our results database) as a table
 * config → (status, time): what the replay device answers from. */
#ifndef AT_RECORDING_H
#define AT_RECORDING_H

#include "base/util.h"
#include "cache/db.h"

#include <stddef.h>
#include <stdint.h>

typedef struct at_recording {
    char format[16];    /* "kerneltuner" or "autotune" */
    char device[256];   /* the device that measured it ("" if the file does not say) */
    char kernel[256];   /* kernel name (Kernel Tuner) or "problem|device|template hash" */
    char note[512];     /* records skipped as damaged ("" if none), for a warning */
    char objective[64]; /* the recorded quantity: "time" (ms), "median_us", or a KT objective */
    int higher_better;  /* 1: objective is a rate (GFLOP/s ...): cost = 1 / value */
    size_t nparams;
    char **names;        /* [nparams] */
    size_t *nvalues;     /* [nparams] */
    char ***values;      /* values[j][v]: the text of each value */
    double **numeric;    /* numeric[j][v]: the number, NAN where a value is not numeric */
    size_t nconfigs;     /* configurations recorded (the space) */
    uint16_t *idx;       /* nconfigs * nparams value indices */
    double *value;       /* the objective as recorded; NAN for a failed configuration */
    double *cost;        /* what the search sees: lower is better, INFINITY for a failure */
    double *eval_s;      /* seconds one evaluation took when recorded (compile + benchmark) */
    char **status;       /* NULL for ok, else the recorded failure ("CompilationFailedConfig") */
    at_result_rec *recs; /* our database: each configuration's whole record; NULL otherwise */
    size_t nfailed;
    int have_optimum;
    size_t optimum; /* index of the best configuration */
} at_recording;

/* The most text a Kernel Tuner file may hold, decompressed (256 MiB): the largest recorded
 * spaces we know are tens of MB, and a few MB of gzip can expand to gigabytes. */
#define AT_RECORDING_MAX_BYTES ((size_t)256 << 20)
/* The most JSON values (numbers, strings, lists, objects) it may hold: 16 million, 13 times the
 * largest recording we know (CLBlast GEMM, 1.3 million in 16 MB); cJSON's tree takes some 80
 * bytes per value, so 256 MiB of "[0,0,0,..." would otherwise take 10 GB. */
#define AT_RECORDING_MAX_VALUES ((size_t)16000000)

/* Loads a recorded space; the format is chosen by content: gzip (Kernel Tuner JSON inside),
 * JSON, or an LMDB results database (a directory holding data.mdb, or the file itself). Path
 * must be a regular file or a directory: a FIFO, device or socket is refused before it is read
 * (AT_ERR_INVALID_ARG), as is a file holding more than AT_RECORDING_MAX_BYTES of text or
 * AT_RECORDING_MAX_VALUES JSON values. For a
 * database, select is a prefix of "problem|device|template hash" picking one recorded space
 * (NULL or "": the database must hold exactly one). AT_ERR_IO (unreadable), AT_ERR_INVALID_ARG
 * (malformed file, nothing or more than one space selected, with the choices named),
 * AT_ERR_DB*, AT_ERR_NO_MEMORY. */
at_status at_recording_load(const char *path, const char *select, at_recording **out);
void at_recording_free(at_recording *r); /* accepts NULL */
/* The recorded space of an open database selected by select (as for at_recording_load). */
at_status at_recording_from_db(at_db *db, const char *select, at_recording **out);
/* "NAME=value,NAME=value,..." of configuration i. */
void at_recording_config(const at_recording *r, size_t i, char *buf, size_t len);

#endif
