/* search.c — the propose/report loop shared by every strategy (budgets, first configs, the
 * best so far, config lookup and neighbours, live here once) and the simple strategies:
 * exhaustive (space order), random (a seeded permutation), simulated annealing and a genetic
 * algorithm over the value-index neighbourhood. The model-based strategy is in model.c. */
#include "strategy.h"
#include "transfer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- random numbers ---------------------------------------------------------------------- */

/* splitmix64: small, good enough for search decisions, and identical on every platform. */
uint64_t at_rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t at_rng_below(uint64_t *state, uint64_t n)
{
    /* Rejection sampling keeps choices unbiased. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t r;
    do r = at_rng_next(state);
    while (r >= limit);
    return r % n;
}

double at_rng_unit(uint64_t *state) { return (double)(at_rng_next(state) >> 11) * 0x1.0p-53; }

void at_rng_shuffle(uint64_t *state, size_t *v, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)at_rng_below(state, i);
        size_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

/* ---- config lookup and neighbours ---------------------------------------------------------- */

static uint64_t tuple_hash(const uint16_t *idx, size_t np)
{
    return at_hash(AT_HASH_SEED, idx, np * sizeof *idx);
}

int at_tuple_index_build(at_tuple_index *ix, const at_search_space *space)
{
    const size_t n = space->nconfigs, np = space->nparams;
    size_t size = 16;
    while (size < 2 * n) size *= 2;
    ix->space = space;
    ix->mask = size - 1;
    ix->slot = calloc(size, sizeof *ix->slot);
    if (!ix->slot) return 0;
    for (size_t i = 0; i < n; i++) {
        const uint16_t *t = space->idx + i * np;
        size_t h = (size_t)tuple_hash(t, np) & ix->mask;
        while (ix->slot[h]) {
            if (memcmp(space->idx + (ix->slot[h] - 1) * np, t, np * sizeof *t) == 0) break;
            h = (h + 1) & ix->mask;
        }
        if (!ix->slot[h]) ix->slot[h] = i + 1; /* a duplicate tuple keeps its first config */
    }
    return 1;
}

size_t at_tuple_index_find(const at_tuple_index *ix, const uint16_t *idx)
{
    const size_t np = ix->space->nparams;
    for (size_t h = (size_t)tuple_hash(idx, np) & ix->mask;; h = (h + 1) & ix->mask) {
        size_t e = ix->slot[h];
        if (e == 0) return AT_NONE;
        if (memcmp(ix->space->idx + (e - 1) * np, idx, np * sizeof *idx) == 0) return e - 1;
    }
}

void at_tuple_index_free(at_tuple_index *ix)
{
    free(ix->slot);
    ix->slot = NULL;
}

size_t at_search_lookup(const at_search *s, const uint16_t *idx)
{
    return at_tuple_index_find(&s->table, idx);
}

size_t at_search_neighbours(const at_search *s, size_t c, size_t *out)
{
    const size_t np = s->space.nparams;
    uint16_t t[256];
    if (np > 256) return 0;
    memcpy(t, s->space.idx + c * np, np * sizeof *t);
    size_t k = 0;
    for (size_t j = 0; j < np; j++) {
        uint16_t v = t[j];
        if (v > 0) {
            t[j] = (uint16_t)(v - 1);
            size_t n = at_search_lookup(s, t);
            if (n != AT_NONE) out[k++] = n;
        }
        if ((size_t)v + 1 < s->space.nvalues[j]) {
            t[j] = (uint16_t)(v + 1);
            size_t n = at_search_lookup(s, t);
            if (n != AT_NONE) out[k++] = n;
        }
        t[j] = v;
    }
    return k;
}

size_t at_search_fallback(at_search *s)
{
    while (s->next_order < s->space.nconfigs && s->state[s->order[s->next_order]] != CFG_NEW)
        s->next_order++;
    return s->next_order < s->space.nconfigs ? s->order[s->next_order++] : AT_NONE;
}

/* ---- exhaustive and random: the fallback order is the whole strategy --------------------- */

static size_t order_next(at_search *s) { return at_search_fallback(s); }

static const strategy_ops g_exhaustive = {NULL, order_next, NULL, NULL};
static const strategy_ops g_random = {NULL, order_next, NULL, NULL};

/* ---- simulated annealing ------------------------------------------------------------------- */

/* A walk over the neighbourhood (one parameter moved to an adjacent value) that accepts a worse
 * config with probability exp(-Δ/T), Δ in log time, so T is a relative slowdown: T = 0.1
 * accepts a 10 % slower neighbour about 37 % of the time. T cools geometrically over a run of
 * SA_RUN evaluations; a run that has not improved its own best for SA_PATIENCE evaluations
 * restarts, from the best config so far every other time and from a random one otherwise.
 * Moves onto already measured configs cost nothing, so the walk crosses known ground freely. */
#define SA_T0       0.15
#define SA_TMIN     0.005
#define SA_RUN      150
#define SA_PATIENCE 40

typedef struct sa_state {
    int have_cur;
    size_t cur;
    double cur_y, run_best;
    int64_t run_evals, since_run_best, restarts;
    size_t *nb;
} sa_state;

static at_status sa_init(at_search *s)
{
    sa_state *a = calloc(1, sizeof *a);
    if (!a) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    a->nb = malloc((2 * s->space.nparams + 1) * sizeof *a->nb);
    if (!a->nb) {
        free(a);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    s->impl = a;
    return AT_OK;
}

static void sa_free(at_search *s)
{
    sa_state *a = s->impl;
    if (a) free(a->nb);
    free(a);
}

static double sa_temperature(const sa_state *a)
{
    double f = (double)a->run_evals / SA_RUN;
    return SA_T0 * pow(SA_TMIN / SA_T0, f > 1 ? 1 : f);
}

static void sa_move(at_search *s, sa_state *a, size_t n, double y)
{
    if (!isfinite(y)) return;
    if (!a->have_cur) {
        a->have_cur = 1, a->cur = n, a->cur_y = y;
        return;
    }
    double d = y - a->cur_y;
    if (d <= 0 || at_rng_unit(&s->rng) < exp(-d / sa_temperature(a))) a->cur = n, a->cur_y = y;
}

static void sa_restart(at_search *s, sa_state *a)
{
    a->restarts++;
    a->have_cur = 0;
    a->run_evals = 0;
    a->since_run_best = 0;
    a->run_best = INFINITY;
    if (s->have_best && a->restarts % 2 == 0) {
        a->have_cur = 1;
        a->cur = s->best;
        a->cur_y = log(s->best_time);
    }
}

static size_t sa_next(at_search *s)
{
    sa_state *a = s->impl;
    for (int tries = 0; a->have_cur && tries < 64; tries++) {
        size_t k = at_search_neighbours(s, a->cur, a->nb);
        if (k == 0) break;
        size_t n = a->nb[at_rng_below(&s->rng, k)];
        if (s->state[n] == CFG_NEW) return n;
        if (s->state[n] == CFG_REPORTED) sa_move(s, a, n, s->y[n]);
    }
    /* Nowhere new to go from here: start again elsewhere. */
    if (a->have_cur) sa_restart(s, a);
    return at_search_fallback(s);
}

static void sa_report(at_search *s, size_t c, double y)
{
    sa_state *a = s->impl;
    sa_move(s, a, c, y);
    a->run_evals++;
    if (y < a->run_best) {
        a->run_best = y;
        a->since_run_best = 0;
    } else if (++a->since_run_best >= SA_PATIENCE) {
        sa_restart(s, a);
    }
}

static const strategy_ops g_annealing = {sa_init, sa_next, sa_report, sa_free};

/* ---- genetic algorithm --------------------------------------------------------------------- */

/* Steady state: the population is the GA_POP best configs measured so far. A child takes each
 * parameter from one of two parents picked by binary tournament (uniform crossover), then each
 * parameter moves to an adjacent value with probability 1/nparams (or to any value, one time in
 * five). A child that is not in the space or was measured already is bred again, up to
 * GA_TRIES times, before a random config is taken instead. */
#define GA_POP   20
#define GA_TRIES 64

typedef struct ga_state {
    size_t pop[GA_POP];
    double popy[GA_POP];
    size_t npop;
} ga_state;

static at_status ga_init(at_search *s)
{
    s->impl = calloc(1, sizeof(ga_state));
    return s->impl ? AT_OK : at_fail(AT_ERR_NO_MEMORY, "out of memory");
}

static void ga_free(at_search *s) { free(s->impl); }

static size_t ga_pick(at_search *s, const ga_state *g)
{
    size_t a = at_rng_below(&s->rng, g->npop), b = at_rng_below(&s->rng, g->npop);
    return g->popy[a] <= g->popy[b] ? g->pop[a] : g->pop[b];
}

static size_t ga_next(at_search *s)
{
    ga_state *g = s->impl;
    const size_t np = s->space.nparams;
    if (g->npop < 2 || np > 256) return at_search_fallback(s);
    uint16_t child[256];
    for (int tries = 0; tries < GA_TRIES; tries++) {
        const uint16_t *pa = s->space.idx + ga_pick(s, g) * np;
        const uint16_t *pb = s->space.idx + ga_pick(s, g) * np;
        for (size_t j = 0; j < np; j++) {
            child[j] = at_rng_next(&s->rng) & 1 ? pa[j] : pb[j];
            size_t nv = s->space.nvalues[j];
            if (nv < 2 || at_rng_below(&s->rng, np) != 0) continue;
            if (at_rng_below(&s->rng, 5) == 0) {
                child[j] = (uint16_t)at_rng_below(&s->rng, nv);
            } else if (child[j] == 0 || (at_rng_next(&s->rng) & 1 && child[j] + 1u < nv)) {
                child[j]++;
            } else {
                child[j]--;
            }
        }
        size_t c = at_search_lookup(s, child);
        if (c != AT_NONE && s->state[c] == CFG_NEW) return c;
    }
    return at_search_fallback(s);
}

static void ga_report(at_search *s, size_t c, double y)
{
    (void)s;
    ga_state *g = s->impl;
    if (!isfinite(y)) return;
    /* Insert into the sorted population, dropping the worst when full. */
    size_t i = g->npop < GA_POP ? g->npop++ : GA_POP;
    if (i == GA_POP) {
        if (y >= g->popy[GA_POP - 1]) return;
        i = GA_POP - 1;
    }
    while (i > 0 && g->popy[i - 1] > y) {
        g->pop[i] = g->pop[i - 1];
        g->popy[i] = g->popy[i - 1];
        i--;
    }
    g->pop[i] = c;
    g->popy[i] = y;
}

static const strategy_ops g_genetic = {ga_init, ga_next, ga_report, ga_free};

/* ---- the shared loop --------------------------------------------------------------------- */

/* Every strategy: X(name, steps, seconds), seconds being what a tuning run gets when no budget
 * is given (0: none, for the one that covers the space by definition). The first is the default
 * (a NULL strategy), the one the replay benchmark chose (docs/search.md); the order is the one
 * at_search_strategies() and the CLI list. */
#define AT_STRATEGIES(X)                                                                           \
    X("model", at_strategy_model, 60)                                                              \
    X("random", g_random, 60)                                                                      \
    X("exhaustive", g_exhaustive, 0)                                                               \
    X("annealing", g_annealing, 60)                                                                \
    X("genetic", g_genetic, 60)

#define AT_STRATEGY_NAME(name, ops, secs) name,
#define AT_STRATEGY_OPS(name, ops, secs)  &ops,
#define AT_STRATEGY_SECS(name, ops, secs) secs,
static const char *const g_names[] = {AT_STRATEGIES(AT_STRATEGY_NAME) NULL};
static const strategy_ops *const g_ops[] = {AT_STRATEGIES(AT_STRATEGY_OPS)};
static const double g_default_seconds[] = {AT_STRATEGIES(AT_STRATEGY_SECS)};
#define NSTRATEGIES (sizeof g_ops / sizeof g_ops[0])

const char *const *at_search_strategies(void) { return g_names; }

/* The table row of strategy name (NULL: the default); -1 if there is none. */
static int strategy_index(const char *name)
{
    for (size_t i = 0; i < NSTRATEGIES; i++)
        if (strcmp(name ? name : g_names[0], g_names[i]) == 0) return (int)i;
    return -1;
}

double at_search_default_seconds(const char *strategy)
{
    int i = strategy_index(strategy);
    return g_default_seconds[i >= 0 ? i : 0];
}

at_status at_search_create(const at_search_space *space, const at_search_options *opts,
                           at_search **out)
{
    *out = NULL;
    const char *name = opts && opts->strategy ? opts->strategy : g_names[0];
    int which = strategy_index(name);
    if (which < 0) {
        char known[256];
        return at_fail(AT_ERR_INVALID_ARG, "unknown strategy '%s' (known: %s)", name,
                       at_join_names(known, sizeof known, g_names));
    }
    const strategy_ops *ops = g_ops[which];
    at_search *s = calloc(1, sizeof *s);
    size_t n = space->nconfigs;
    if (!s) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    s->order = malloc((n ? n : 1) * sizeof *s->order);
    s->state = calloc(n ? n : 1, 1);
    s->y = malloc((n ? n : 1) * sizeof *s->y);
    size_t nxfer = opts && opts->nsources ? AT_TRANSFER_FIRST : 0;
    s->first = malloc(((opts ? opts->nfirst : 0) + nxfer + 1) * sizeof *s->first);
    s->space = *space;
    if (!s->order || !s->state || !s->y || !s->first ||
        !at_tuple_index_build(&s->table, &s->space)) {
        at_search_free(s);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory for a search over %zu configs", n);
    }
    if (opts) s->opts = *opts;
    s->opts.strategy = NULL; /* not owned */
    s->opts.first = NULL;
    s->opts.sources = NULL; /* copied into xfer */
    s->ops = ops;
    s->best_time = INFINITY;
    s->t0 = at_now();
    s->rng = s->opts.seed ^ 0x5eed5eed5eed5eedull;
    for (size_t i = 0; i < n; i++) {
        s->order[i] = i;
        s->y[i] = NAN;
    }
    if (ops != &g_exhaustive) at_rng_shuffle(&s->rng, s->order, n);
    for (size_t f = 0; opts && f < opts->nfirst; f++)
        if (opts->first[f] < n) s->first[s->nfirst++] = opts->first[f];
    s->opts.nfirst = 0;
    s->nfirst_own = s->nfirst;
    at_status st = AT_OK;
    if (nxfer) { /* the sources' best configs go after the caller's first ones */
        st = at_transfer_create(space, opts->sources, opts->nsources, &s->xfer);
        if (st == AT_OK) s->nfirst += at_transfer_first(s->xfer, s->first + s->nfirst, nxfer);
    }
    if (st == AT_OK && ops->init) st = ops->init(s);
    if (st != AT_OK) {
        at_search_free(s);
        return st;
    }
    *out = s;
    return AT_OK;
}

void at_search_free(at_search *s)
{
    if (!s) return;
    if (s->ops && s->ops->free && s->impl) s->ops->free(s);
    free(s->order);
    free(s->state);
    free(s->y);
    at_tuple_index_free(&s->table);
    free(s->first);
    at_transfer_free(s->xfer);
    free(s);
}

static int budget_left(const at_search *s)
{
    if (s->opts.max_evals > 0 && s->evaluated >= s->opts.max_evals) return 0;
    /* Seconds never stop a search before its first proposal: a run ends with a measured
     * config (a proxy's confirmation may start with almost nothing left). */
    if (s->opts.max_seconds > 0 && s->proposed > 0) {
        double spent = s->opts.clock ? s->opts.clock(s->opts.clock_user) : at_now() - s->t0;
        if (spent >= s->opts.max_seconds) return 0;
    }
    if (s->opts.no_improve > 0 && s->since_improve >= s->opts.no_improve) return 0;
    return 1;
}

size_t at_search_propose(at_search *s, size_t n, size_t *out)
{
    if (!budget_left(s)) return 0;
    /* Never propose past the evaluation budget, counting what is still outstanding. */
    int64_t outstanding = s->proposed - s->evaluated;
    if (s->opts.max_evals > 0) {
        int64_t room = s->opts.max_evals - s->evaluated - outstanding;
        if (room <= 0) return 0;
        if ((int64_t)n > room) n = (size_t)room;
    }
    /* Likewise for "no improvement for N", assuming the outstanding ones will not improve. */
    if (s->opts.no_improve > 0) {
        int64_t room = s->opts.no_improve - s->since_improve - outstanding + (s->have_best ? 0 : 1);
        if (room <= 0) return 0;
        if ((int64_t)n > room) n = (size_t)room;
    }
    size_t k = 0;
    while (k < n) {
        size_t c = AT_NONE;
        while (s->next_first < s->nfirst && c == AT_NONE) {
            size_t f = s->first[s->next_first++];
            if (s->state[f] == CFG_NEW) c = f;
            if (c != AT_NONE && s->next_first > s->nfirst_own && s->proposed < AT_TRANSFER_FIRST_N)
                s->from_sources++;
        }
        if (c == AT_NONE) c = s->ops->next(s);
        /* A strategy with nothing better to offer falls back to the seeded order, so every
         * strategy covers the whole space when no budget stops it. */
        if (c == AT_NONE || s->state[c] != CFG_NEW) c = at_search_fallback(s);
        if (c == AT_NONE) break;
        s->state[c] = CFG_PROPOSED;
        s->proposed++;
        out[k++] = c;
    }
    return k;
}

void at_search_report(at_search *s, size_t config, double time)
{
    if (config >= s->space.nconfigs || s->state[config] != CFG_PROPOSED) return;
    s->state[config] = CFG_REPORTED;
    s->evaluated++;
    int ok = time >= 0 && isfinite(time);
    s->y[config] = ok ? log(time > 1e-300 ? time : 1e-300) : INFINITY;
    if (ok && time < s->best_time) {
        s->best_time = time;
        s->best = config;
        s->have_best = 1;
        s->since_improve = 0;
    } else {
        s->since_improve++;
    }
    if (s->ops->report) s->ops->report(s, config, s->y[config]);
}

int64_t at_search_evaluated(const at_search *s) { return s->evaluated; }

int at_search_source_weight(at_search *s, size_t i, double *weight, size_t *configs, size_t *pairs)
{
    if (!s->xfer || i >= s->opts.nsources) return 0;
    double w = at_transfer_weight(s->xfer, s->y, i, configs, pairs);
    if (weight) *weight = w;
    return 1;
}

int64_t at_search_first_from_sources(const at_search *s) { return s->from_sources; }

int64_t at_search_probe_picks(const at_search *s) { return s->probe_picks; }

int at_search_best(const at_search *s, size_t *config, double *time)
{
    if (!s->have_best) return 0;
    if (config) *config = s->best;
    if (time) *time = s->best_time;
    return 1;
}
