/* search.c — the propose/report loop shared by every strategy, and the strategies themselves:
 * exhaustive (space order) and random (a seeded permutation). Budgets live here, once. */
#include "search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum { STRAT_EXHAUSTIVE, STRAT_RANDOM } strategy_kind;

static const char *const g_strategies[] = {"exhaustive", "random", NULL};

struct at_search {
    at_search_space space;
    at_search_options opts;
    strategy_kind kind;
    size_t *order; /* the proposal order: a permutation of [0, nconfigs) */
    size_t next;   /* position in order */
    unsigned char *proposed;
    int64_t evaluated;
    int64_t since_improve;
    int have_best;
    size_t best;
    double best_time;
    double t0;
};

const char *const *at_search_strategies(void) { return g_strategies; }

/* splitmix64: small, good enough for shuffling, and identical on every platform. */
static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t *state, uint64_t n)
{
    /* Rejection sampling keeps the permutation unbiased. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t r;
    do r = rng_next(state);
    while (r >= limit);
    return r % n;
}

at_status at_search_create(const at_search_space *space, const at_search_options *opts,
                           at_search **out)
{
    *out = NULL;
    const char *name = opts && opts->strategy ? opts->strategy : "random";
    strategy_kind kind;
    if (strcmp(name, "exhaustive") == 0)
        kind = STRAT_EXHAUSTIVE;
    else if (strcmp(name, "random") == 0)
        kind = STRAT_RANDOM;
    else
        return at_fail(AT_ERR_INVALID_ARG, "unknown strategy '%s' (known: exhaustive, random)",
                       name);
    at_search *s = calloc(1, sizeof *s);
    size_t n = space->nconfigs;
    if (!s) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    s->order = malloc((n ? n : 1) * sizeof *s->order);
    s->proposed = calloc(n ? n : 1, 1);
    if (!s->order || !s->proposed) {
        at_search_free(s);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory for a search over %zu configs", n);
    }
    s->space = *space;
    if (opts) s->opts = *opts;
    s->opts.strategy = NULL; /* not owned */
    s->kind = kind;
    s->best_time = INFINITY;
    s->t0 = at_now();

    for (size_t i = 0; i < n; i++) s->order[i] = i;
    if (kind == STRAT_RANDOM) {
        uint64_t st = s->opts.seed ^ 0x5eed5eed5eed5eedull;
        for (size_t i = n; i > 1; i--) {
            size_t j = (size_t)rng_below(&st, i);
            size_t t = s->order[i - 1];
            s->order[i - 1] = s->order[j];
            s->order[j] = t;
        }
    }
    /* Move the requested first configurations to the front, in their order. */
    size_t front = 0;
    for (size_t f = 0; f < s->opts.nfirst && front < n; f++) {
        size_t want = s->opts.first[f];
        for (size_t i = front; i < n; i++) {
            if (s->order[i] != want) continue;
            memmove(s->order + front + 1, s->order + front, (i - front) * sizeof *s->order);
            s->order[front++] = want;
            break;
        }
    }
    s->opts.first = NULL;
    s->opts.nfirst = 0;
    *out = s;
    return AT_OK;
}

void at_search_free(at_search *s)
{
    if (!s) return;
    free(s->order);
    free(s->proposed);
    free(s);
}

static int budget_left(const at_search *s)
{
    if (s->opts.max_evals > 0 && s->evaluated >= s->opts.max_evals) return 0;
    if (s->opts.max_seconds > 0 && at_now() - s->t0 >= s->opts.max_seconds) return 0;
    if (s->opts.no_improve > 0 && s->since_improve >= s->opts.no_improve) return 0;
    return 1;
}

size_t at_search_propose(at_search *s, size_t n, size_t *out)
{
    if (!budget_left(s)) return 0;
    /* Never propose past the evaluation budget, counting what is still outstanding. */
    int64_t outstanding = (int64_t)s->next - s->evaluated;
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
    while (k < n && s->next < s->space.nconfigs) {
        size_t c = s->order[s->next++];
        s->proposed[c] = 1; /* 1: proposed, 2: reported */
        out[k++] = c;
    }
    return k;
}

void at_search_report(at_search *s, size_t config, double time)
{
    if (config >= s->space.nconfigs || s->proposed[config] == 2) return;
    s->proposed[config] = 2;
    s->evaluated++;
    if (time >= 0 && isfinite(time) && time < s->best_time) {
        s->best_time = time;
        s->best = config;
        s->have_best = 1;
        s->since_improve = 0;
    } else {
        s->since_improve++;
    }
}

int64_t at_search_evaluated(const at_search *s) { return s->evaluated; }

int at_search_best(const at_search *s, size_t *config, double *time)
{
    if (!s->have_best) return 0;
    if (config) *config = s->best;
    if (time) *time = s->best_time;
    return 1;
}
