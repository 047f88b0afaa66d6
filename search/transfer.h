/* transfer.h — warm starts (internal to search/, plus the matching helper its callers use):
 * the results of the same template on a related task (a neighbouring shape, another device of
 * the family) as prior observations of a search. docs/search.md, "Transfer". */
#ifndef AT_TRANSFER_H
#define AT_TRANSFER_H

#include "search.h"

/* The source picks proposed first: the best configs of the sources, taken in turn. */
#define AT_TRANSFER_FIRST 3
/* Target measurements shared with a source before its weight is judged (until then it counts
 * as 1: the first picks come from it anyway). */
#define AT_TRANSFER_MIN_PAIRS 5
/* The most pairs a weight is judged on (Kendall's tau is quadratic in them). */
#define AT_TRANSFER_MAX_PAIRS 1024
/* The proposals first_picks_from_sources counts over. */
#define AT_TRANSFER_FIRST_N 10

/* A space's parameters by name, each value as text (a number is compared as a number, so "32"
 * and "32.0" match). */
typedef struct at_transfer_params {
    size_t nparams;
    const char *const *names;
    const size_t *nvalues;
    const char *const *const *values; /* values[j][v] */
} at_transfer_params;

/* Maps a source's results (n configs: src_idx[i * source->nparams + j] value indices, time[i])
 * onto the target space (its parameters and enumerated configs): the configs of the source that
 * are in the space, as space config indices (*config) with their times (*time), malloc'd, *n of
 * them. AT_ERR_INVALID_ARG, with the reason in why, when the parameter names differ (another
 * kernel or template) or no config of the source that ran is in the space. */
at_status at_transfer_map(const at_transfer_params *target, const at_search_space *space,
                          const at_transfer_params *source, const uint16_t *src_idx,
                          const double *time, size_t nsrc, size_t **config, double **mapped_time,
                          size_t *n, char *why, size_t whylen);

typedef struct at_transfer at_transfer;

at_status at_transfer_create(const at_search_space *space, const at_search_source *src, size_t nsrc,
                             at_transfer **out);
void at_transfer_free(at_transfer *t); /* accepts NULL */
/* The sources' best configs, in turn (the first of each, then the second...), at most cap. */
size_t at_transfer_first(const at_transfer *t, size_t *out, size_t cap);
/* Rejudges the weights from the target's log times y (NAN: not measured, INFINITY: failed) and
 * writes the sources' combined prediction of every config to feat (lower is better; the same
 * for all when no source has a positive weight). Returns 1 when feat changed since the last
 * call (always on the first). */
int at_transfer_feature(at_transfer *t, const double *y, double *feat);
/* The sources' prediction of every config's log time here: their standardised log times,
 * weighted, mapped onto the log times measured here (y) by least squares. Returns 0 (prior
 * untouched) while fewer than AT_TRANSFER_MIN_PAIRS configs ran here or no source has a
 * positive weight. */
int at_transfer_prior(at_transfer *t, const double *y, double *prior);
/* Source i's weight as judged from y (as for at_transfer_feature), its configs, and the pairs
 * (configs measured here that it has) it was judged on. */
double at_transfer_weight(at_transfer *t, const double *y, size_t i, size_t *configs,
                          size_t *pairs);

#endif
