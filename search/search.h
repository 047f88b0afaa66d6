/* search.h — search strategies behind one propose/report interface. A strategy sees only the
 * enumerated valid configurations (as per-parameter value indices) and the times reported. */
#ifndef AT_SEARCH_H
#define AT_SEARCH_H

#include "base/util.h"

#include <stddef.h>
#include <stdint.h>

/* The valid configurations of a space, as value indices: config i, parameter j is
 * idx[i * nparams + j], in [0, nvalues[j]). Owned by the caller, alive while the search is. */
typedef struct at_search_space {
    size_t nconfigs;
    size_t nparams;
    const uint16_t *idx;
    const size_t *nvalues;
    /* Optional: the numeric value of each parameter value, values[j][v] (NAN where a value is
     * not a number), so a model can use magnitudes; NULL when unknown. */
    const double *const *values;
} at_search_space;

/* A related task's results as prior observations (a warm start, docs/search.md "Transfer"):
 * n configs of this space (their results on the other task mapped onto its indices, e.g. by
 * at_transfer_map in search/transfer.h) and their times there (any unit; INFINITY: failed). */
typedef struct at_search_source {
    size_t n;
    const size_t *config;
    const double *time;
} at_search_source;

typedef struct at_search_options {
    const char *strategy; /* one of at_search_strategies(); NULL: the first, the default */
    uint64_t seed;        /* same seed, same proposals */
    int64_t max_evals;    /* 0 = no limit */
    double max_seconds;   /* 0 = no limit; wall clock from create, or `clock` when given */
    int64_t no_improve;   /* stop after this many reports without a better time; 0 = off */
    /* Configurations to propose first, in order (e.g. the template's defaults); may be NULL. */
    const size_t *first;
    size_t nfirst;
    /* Optional: a predicted cost per config (lower is better; any scale, > 0), e.g. from a
     * problem-specific cost model. The model-based strategy orders its first proposals by it
     * and uses it as a feature; NULL when there is none. Alive while the search is. */
    const double *prior;
    /* Optional: the seconds spent so far by another clock than the wall (a replay counts the
     * recorded seconds of what it answered). NULL: wall time since create. */
    double (*clock)(void *user);
    void *clock_user;
    /* Optional warm-start sources, alive while the search is: their best configs are proposed
     * after `first`, and the model-based strategy learns from them while their times rank the
     * configs measured here alike (their weight). NULL: none. */
    const at_search_source *sources;
    size_t nsources;
} at_search_options;

typedef struct at_search at_search;

/* AT_ERR_INVALID_ARG for an unknown strategy (the message lists the known ones). */
at_status at_search_create(const at_search_space *space, const at_search_options *opts,
                           at_search **out);
void at_search_free(at_search *s); /* accepts NULL */
/* Up to n config indices never proposed before; 0 when the search is done (space exhausted,
 * a budget reached). */
size_t at_search_propose(at_search *s, size_t n, size_t *out);
/* The outcome of a proposed config: its time (any unit, lower is better) or a negative
 * number / INFINITY for a failed candidate. */
void at_search_report(at_search *s, size_t config, double time);
int64_t at_search_evaluated(const at_search *s);
/* Best config and time so far; returns 0 if none succeeded. */
int at_search_best(const at_search *s, size_t *config, double *time);
/* Source i's weight (the rank correlation, Kendall's tau, of its times with the times measured
 * here on the configs both have; 1 until AT_TRANSFER_MIN_PAIRS are shared; <= 0: not used), its
 * configs in the space and the configs measured here that it has. Returns 0 if there is no
 * source i. */
int at_search_source_weight(at_search *s, size_t i, double *weight, size_t *configs, size_t *pairs);
/* How many of the first 10 proposals were the sources' best configs. */
int64_t at_search_first_from_sources(const at_search *s);
/* How many proposals were the warm-start probe's: one-parameter moves of the sources' best
 * configs (the model strategy; docs/search.md, "Transfer"). */
int64_t at_search_probe_picks(const at_search *s);
/* NULL-terminated names of the strategies; the first ("model", chosen by the replay benchmark,
 * docs/search.md) is the default, used when at_search_options.strategy is NULL. Budgets have no
 * default here (0: no limit); the tuning calls add theirs (60 s; docs/search.md). */
const char *const *at_search_strategies(void);
/* The seconds budget a tuning run with this strategy (NULL: the default) gets when it is given
 * no budget: 60, or 0 (none) for exhaustive, which covers the space by definition. */
double at_search_default_seconds(const char *strategy);

#endif
