/* strategy.h — what a strategy sees of the shared search loop (internal to search/): the
 * state of every config, seeded random numbers, config lookup by value indices, neighbours. */
#ifndef AT_STRATEGY_H
#define AT_STRATEGY_H

#include "search.h"

#define AT_NONE ((size_t)-1)

/* Per-config state in at_search.state. */
enum { CFG_NEW = 0, CFG_PROPOSED = 1, CFG_REPORTED = 2 };

/* The configs of a space by their value-index tuple: an open-addressing hash of config + 1
 * (0: empty); a duplicate tuple keeps its first config. */
typedef struct at_tuple_index {
    size_t *slot, mask;
    const at_search_space *space;
} at_tuple_index;
/* Indexes space's configs (the space must outlive the index); 0 without memory. */
int at_tuple_index_build(at_tuple_index *ix, const at_search_space *space);
/* The config with these value indices, or AT_NONE if it is not in the space. */
size_t at_tuple_index_find(const at_tuple_index *ix, const uint16_t *idx);
void at_tuple_index_free(at_tuple_index *ix);

/* A strategy's steps; its name is in search.c's one table of strategies (AT_STRATEGIES). */
typedef struct strategy_ops {
    at_status (*init)(at_search *s);                  /* may be NULL */
    size_t (*next)(at_search *s);                     /* a CFG_NEW config, or AT_NONE */
    void (*report)(at_search *s, size_t c, double y); /* y = log(time), INFINITY if failed */
    void (*free)(at_search *s);                       /* may be NULL */
} strategy_ops;

struct at_search {
    at_search_space space;
    at_search_options opts;
    const strategy_ops *ops;
    void *impl; /* the strategy's own state */
    uint64_t rng;
    unsigned char *state; /* CFG_* per config */
    double *y;            /* log(time) once reported; INFINITY for a failure */
    size_t *order;        /* fallback order: the identity (exhaustive) or a seeded permutation */
    size_t next_order;
    size_t *first, nfirst, next_first;
    at_tuple_index table; /* over space (this struct's copy) */
    int64_t proposed, evaluated, since_improve;
    int have_best;
    size_t best;
    double best_time;
    double t0;
    /* Warm-start sources (search/transfer.c; NULL: none); first[nfirst_own..nfirst) are their
     * best configs, from_sources counts those among the first AT_TRANSFER_FIRST_N proposals,
     * probe_picks the model's proposals of its warm-start probe (model.c). */
    struct at_transfer *xfer;
    size_t nfirst_own;
    int64_t from_sources, probe_picks;
};

uint64_t at_rng_next(uint64_t *state);
uint64_t at_rng_below(uint64_t *state, uint64_t n);
double at_rng_unit(uint64_t *state);                       /* [0, 1) */
void at_rng_shuffle(uint64_t *state, size_t *v, size_t n); /* Fisher-Yates */

/* The next CFG_NEW config of the fallback order, or AT_NONE when all were proposed. */
size_t at_search_fallback(at_search *s);
/* The config with these value indices, or AT_NONE if it is not in the space. */
size_t at_search_lookup(const at_search *s, const uint16_t *idx);
/* Configs one parameter away by one adjacent value (invalid ones skipped); returns the count,
 * at most 2 * nparams. */
size_t at_search_neighbours(const at_search *s, size_t c, size_t *out);

extern const strategy_ops at_strategy_model;

#endif
