/* model.c — the model-based strategy: a random forest fitted online to log(time) over the
 * configs' parameter values (ranked, so log2 or linear scales split alike), its first configs
 * ordered by the cost model's prediction when there is one (else the first is the middle of the
 * space, the next ones far apart), proposing the unmeasured config of highest expected improvement,
 * with a share of random and of local picks. Failed configs are data: a second forest learns where
 * configs fail, and a config's expected improvement is weighed by its chance to run. With
 * warm-start sources, the expected improvement is that of a mixture: the sources' prediction
 * corrected by a forest (with the source's weight) and a forest of this task's own measurements
 * (with the rest), after a probe of the one-parameter moves of the sources' best configs. */
#include "strategy.h"
#include "transfer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Hyper-parameters, chosen for robustness rather than for any one space (docs/search.md):
 * a forest as in SMAC (bootstrap, most features per split, deep trees), refitted every time
 * the training set has grown by 1/MF_REFIT_DIV (every report while it is small); one proposal
 * in MF_RANDOM_EVERY is random so a wrong model cannot trap the search, and one in
 * MF_LOCAL_EVERY is the most promising neighbour of the best configs, where a narrow optimum
 * hides from a forest that has not split there yet. */
#define MF_TREES        24 /* regression trees on log(time) of the configs that ran */
#define MF_CTREES       8  /* classification trees on failed / ran, once something failed */
#define MF_MAX_DEPTH    24
#define MF_MIN_SPLIT    3   /* a node with fewer samples is a leaf */
#define MF_MTRY         0.8 /* share of the features tried at each split */
#define MF_REFIT_DIV    16
#define MF_RANDOM_EVERY 10
#define MF_LOCAL_EVERY  3
#define MF_LOCAL_TOP    5    /* local picks look around the five best configs */
#define MF_STUCK        20   /* reports without a better best: local picks go coordinate-first */
#define MF_PROBE_STALL  16   /* ... and the warm-start probe ends */
#define MF_PROBE_JUMP   1.2  /* a probe move this many times faster than the best: it ends */
#define MF_INIT         5    /* initial design: random (or prior-ranked) configs */
#define MF_SPREAD       64   /* a random config of a cold design: the farthest of this many */
#define MF_SD_FLOOR     1e-3 /* in log time: 0.1 % */
#define MF_SCORED       4096 /* configs ranked per fit (a window of a larger space) */
#define MF_KEEP         64   /* best-ranked kept per fit */
#define MF_PENDING      256  /* pending proposals remembered */
#define MF_BINS         64   /* a feature with more distinct values is cut at its quantiles */

typedef struct mnode {
    int32_t feat; /* -1: a leaf */
    uint8_t thr;  /* a bin <= thr goes left */
    int32_t left, right;
    float value;
} mnode;

typedef struct scored {
    double score;
    size_t c;
} scored;

typedef struct model_state {
    size_t nf;
    uint8_t *X; /* nconfigs * nf: each feature as the rank of its value (its bin) */
    uint8_t nbins[257];
    mnode *nodes;
    size_t nnodes, cap;
    int32_t roots[MF_TREES];
    size_t nfb;    /* features a tree may split on: all, or all but the sources' column */
    size_t *train; /* reported configs, in report order */
    float *ty;     /* their targets */
    float *fail;   /* 1 where they failed */
    int32_t *okrows;
    int32_t croots[MF_CTREES];
    size_t ntrain, nok;
    size_t fitted_at; /* ntrain at the last fit; 0: never */
    scored *cand;     /* unmeasured configs ranked by the last fit */
    int nct;          /* classification trees in the last fit */
    double ybest;     /* best log time at the last fit */
    size_t window;    /* where the next fit's ranking starts in the seeded order */
    size_t ncand, next_cand;
    size_t design; /* size of the initial design */
    double hsum[MF_BINS];
    size_t hcnt[MF_BINS];
    int32_t *tmp;
    size_t ninit;
    size_t *init; /* the initial design, in order */
    size_t next_init;
    int64_t proposals;
    size_t pending[MF_PENDING]; /* proposed by the model, not reported yet */
    size_t npending;
    unsigned char *islocal; /* 1: proposed by a local pick */
    double yseen;           /* best time reported so far */
    int hot;                /* the last local pick reported improved the best */
    size_t since;           /* reports since the best last improved */
    int oom;
    /* Warm start (transfer.c): the last feature is the sources' prediction; NULL: none. */
    double *xraw;
    scored *xtmp;
    double *xprior;           /* the sources' prediction of each config's log time here */
    int xhave;                /* 1: the last fit learned the residual from xprior */
    int32_t oroots[MF_TREES]; /* the forest of this task's own log times (no source in it) */
    float *oy;                /* its targets */
    double xw;                /* the sources' weight at the last fit, in [0, 1] */
    size_t *probe;            /* the warm-start probe (build_probe), in order */
    size_t nprobe, next_probe;
    int probe_built;
    int probe_over; /* a move of the probe gained more than MF_PROBE_JUMP */
} model_state;

/* The sources' prediction of config c's log time, that the forest corrects (0: none). */
#define XPRIOR(m, c) ((m)->xhave ? (m)->xprior[c] : 0.0)

static void model_free(at_search *s)
{
    model_state *m = s->impl;
    if (!m) return;
    free(m->X);
    free(m->nodes);
    free(m->train);
    free(m->ty);
    free(m->fail);
    free(m->okrows);
    free(m->cand);
    free(m->tmp);
    free(m->init);
    free(m->islocal);
    free(m->xraw);
    free(m->xtmp);
    free(m->xprior);
    free(m->oy);
    free(m->probe);
    free(m);
}

static int cmp_prior(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? -1 : 1;
    return (x->c > y->c) - (x->c < y->c);
}

/* Feature f of every config as its value's rank among the distinct values, at most MF_BINS
 * ranks (quantiles beyond that). */
static void rank_feature(model_state *m, size_t f, const double *raw, scored *tmp, size_t n)
{
    for (size_t i = 0; i < n; i++) tmp[i].score = raw[i], tmp[i].c = i;
    qsort(tmp, n, sizeof *tmp, cmp_prior);
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++) distinct += i == 0 || tmp[i].score != tmp[i - 1].score;
    size_t rank = 0, bin = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && tmp[i].score != tmp[i - 1].score) rank++;
        bin = distinct <= MF_BINS ? rank : rank * MF_BINS / distinct;
        m->X[tmp[i].c * m->nf + f] = (uint8_t)bin;
    }
    m->nbins[f] = (uint8_t)(n ? bin + 1 : 1);
}

/* ---- warm start: the sources' prediction as one more feature (search/transfer.c) ----------- */

/* Refreshes the last feature from the sources' current weights (a source whose ranking
 * disagrees with the measurements here drops out; with none left it is constant, so no tree
 * splits on it). */
static void transfer_column(at_search *s, model_state *m)
{
    if (at_transfer_feature(s->xfer, s->y, m->xraw))
        rank_feature(m, m->nf - 1, m->xraw, m->xtmp, s->space.nconfigs);
    m->xhave = at_transfer_prior(s->xfer, s->y, m->xprior);
    /* The chance that the sources are right here: the largest weight (Kendall's tau on what
     * was measured here), 0 when none ranks it better than chance. */
    m->xw = 0;
    for (size_t i = 0; i < s->opts.nsources; i++) {
        double w = at_transfer_weight(s->xfer, s->y, i, NULL, NULL);
        if (w > m->xw) m->xw = w > 1 ? 1 : w;
    }
}

/* 1 if v is a power of two, 0 if it is another positive integer, -1 if it is neither. */
static int pow2_value(double v)
{
    if (!(v >= 1 && v < 9007199254740992.0) || v != floor(v)) return -1;
    return frexp(v, &(int){0}) == 0.5;
}

/* ---- set-up --------------------------------------------------------------------------------- */

/* The config nearest the middle of the space: the least sum over the parameters of the
 * distance of its value's index from the middle index, as a share of the range; ties go to the
 * first in the seeded order, so a space of two-value parameters (all tied) starts as before. A
 * data-free first config: on the recorded dedispersion-A100 space 12 of its 16 tied configs are
 * within 5 % of the optimum (Kernel Tuner's best strategy finds one on its first draw);
 * elsewhere it is one more design point (docs/search.md, "model v5"). */
static size_t central_config(const at_search *s)
{
    const size_t np = s->space.nparams, n = s->space.nconfigs;
    size_t best = s->order[0];
    double best_d = INFINITY;
    for (size_t i = 0; i < n; i++) {
        size_t c = s->order[i];
        double d = 0;
        for (size_t j = 0; j < np; j++) {
            size_t nv = s->space.nvalues[j];
            if (nv >= 2)
                d += fabs(2.0 * s->space.idx[c * np + j] - (double)(nv - 1)) / (double)(nv - 1);
        }
        if (d < best_d - 1e-9) best_d = d, best = c;
    }
    return best;
}

/* How far apart configs a and b are: the sum over parameters of the distance of their values'
 * indices, each parameter's range scaled to 1. */
static double rank_distance(const at_search *s, size_t a, size_t b)
{
    const size_t np = s->space.nparams;
    double d = 0;
    for (size_t j = 0; j < np; j++) {
        size_t nv = s->space.nvalues[j];
        if (nv >= 2)
            d += fabs((double)s->space.idx[a * np + j] - s->space.idx[b * np + j]) / (nv - 1);
    }
    return d;
}

/* A random config of a cold initial design, spread out: of the next MF_SPREAD configs of the
 * seeded random order, the one farthest from every config proposed so far, measured or not (the
 * template's first configs too: in a live batch they are still out when the design is picked;
 * Mitchell's best-candidate sampling). Uniform picks leave whole regions unseen by the forest's
 * first fit, which then never looks there (pnpoly: 84 of 100 uniform designs miss the corner
 * where two parameters at the ends of their ranges together are fastest, 54 of 100 spread ones);
 * far picks reach the ends of every parameter's range. It is swapped to the front of what is left
 * of the order, which stays a permutation of the space. Without memory, the next of the order. */
static size_t spread_pick(at_search *s)
{
    const size_t n = s->space.nconfigs;
    size_t *before = malloc(((size_t)s->proposed + 1) * sizeof *before), nbefore = 0;
    for (size_t c = 0; before && c < n && nbefore < (size_t)s->proposed; c++)
        if (s->state[c] != CFG_NEW) before[nbefore++] = c;
    size_t best = AT_NONE, seen = 0;
    double best_d = -1;
    for (size_t i = s->next_order; before && i < n && seen < MF_SPREAD; i++) {
        size_t c = s->order[i];
        if (s->state[c] != CFG_NEW) continue;
        seen++;
        double d = INFINITY;
        for (size_t t = 0; t < nbefore && d > best_d; t++)
            d = fmin(d, rank_distance(s, c, before[t]));
        if (d > best_d) best_d = d, best = i;
    }
    free(before);
    if (best != AT_NONE) {
        size_t c = s->order[best];
        s->order[best] = s->order[s->next_order];
        s->order[s->next_order] = c;
    }
    return at_search_fallback(s);
}

static at_status model_init(at_search *s)
{
    const size_t n = s->space.nconfigs, np = s->space.nparams;
    model_state *m = calloc(1, sizeof *m);
    if (!m) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    s->impl = m;
    /* Features: every parameter with more than one value. */
    size_t feat_of[256], nf = 0;
    for (size_t j = 0; j < np && nf < 256; j++) {
        if (s->space.nvalues[j] >= 2) feat_of[nf++] = j;
    }
    /* The prior orders the initial design but is not a feature: as one it made the forest
     * lean on the cost model's mistakes (docs/search.md has the figures). */
    int use_prior = s->opts.prior != NULL;
    /* One more feature per integer parameter whose values mix powers of two and others: is the
     * value a power of two. A block of 64 or 128 threads can run several times faster than one
     * of 48 or 80 beside it (the recorded convolutions: 4-100x), a cliff that value ranks
     * alone isolate only with two splits per power of two. Only where the rarer kind holds at
     * least a fifth of the values: a flag true for 5 values of 31 (pnpoly's block sizes, no
     * cliff there) mostly gives the trees chance splits on the few configs measured early. */
    size_t pow2_of[256], npow2 = 0;
    for (size_t f = 0; f < nf && s->space.values; f++) {
        size_t j = feat_of[f];
        size_t seen[2] = {0, 0}, nv = s->space.nvalues[j];
        int ints = 1;
        for (size_t v = 0; v < nv && ints; v++) {
            int p = pow2_value(s->space.values[j][v]);
            if (p < 0)
                ints = 0;
            else
                seen[p]++;
        }
        size_t rare = seen[0] < seen[1] ? seen[0] : seen[1];
        if (ints && rare && 5 * rare >= nv && nf + npow2 < 256) pow2_of[npow2++] = j;
    }
    m->nf = nf + npow2;
    if (m->nf == 0) m->nf = 1; /* a space of one value per parameter: a constant feature */
    /* Warm start: one more feature, the sources' prediction. */
    if (s->xfer) {
        m->nf++;
        m->xraw = malloc((n ? n : 1) * sizeof *m->xraw);
        m->xtmp = malloc((n ? n : 1) * sizeof *m->xtmp);
        m->xprior = malloc((n ? n : 1) * sizeof *m->xprior);
        m->oy = malloc((n ? n : 1) * sizeof *m->oy);
        if (!m->xraw || !m->xtmp || !m->xprior || !m->oy)
            return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    m->X = calloc((n ? n : 1) * m->nf, sizeof *m->X);
    m->train = malloc((n ? n : 1) * sizeof *m->train);
    m->ty = malloc((n ? n : 1) * sizeof *m->ty);
    m->fail = malloc((n ? n : 1) * sizeof *m->fail);
    m->okrows = malloc((n ? n : 1) * sizeof *m->okrows);
    m->cand = malloc((n > MF_KEEP ? n : MF_KEEP) * sizeof *m->cand);
    m->tmp = malloc((n ? n : 1) * sizeof *m->tmp);
    size_t ninit = MF_INIT;
    m->init = malloc(ninit * sizeof *m->init);
    m->islocal = calloc(n ? n : 1, 1);
    m->yseen = INFINITY;
    if (!m->X || !m->train || !m->ty || !m->fail || !m->okrows || !m->cand || !m->tmp ||
        !m->islocal || !m->init)
        return at_fail(AT_ERR_NO_MEMORY, "out of memory for the model of %zu configs", n);
    /* Trees only compare, so a feature is its value's rank: by number where the values are
     * numbers (log2 or not ranks alike), else by index. */
    double *raw = malloc((n ? n : 1) * sizeof *raw);
    scored *tmp = malloc((n ? n : 1) * sizeof *tmp);
    if (!raw || !tmp) {
        free(raw), free(tmp);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory for the model of %zu configs", n);
    }
    for (size_t f = 0; f < m->nf; f++) {
        for (size_t i = 0; i < n; i++) {
            double x = 0;
            if (f < nf) {
                size_t j = feat_of[f];
                uint16_t v = s->space.idx[i * np + j];
                double val = s->space.values ? s->space.values[j][v] : NAN;
                x = isnan(val) ? (double)v : val;
            } else if (f < nf + npow2) {
                size_t j = pow2_of[f - nf];
                x = pow2_value(s->space.values[j][s->space.idx[i * np + j]]);
            }
            raw[i] = x;
        }
        rank_feature(m, f, raw, tmp, n);
    }
    free(raw);
    free(tmp);
    if (s->xfer) transfer_column(s, m);
    /* The initial design: with a prior, its best-ranked half and a random half; without, the
     * config nearest the middle of every parameter's range, then random (spread_pick). */
    if (use_prior && n) {
        for (size_t i = 0; i < n; i++) {
            m->cand[i].score = s->opts.prior[i] > 0 ? s->opts.prior[i] : INFINITY;
            m->cand[i].c = i;
        }
        qsort(m->cand, n, sizeof *m->cand, cmp_prior);
        for (size_t i = 0; i < ninit / 2 && i < n; i++) m->init[m->ninit++] = m->cand[i].c;
    } else if (!s->xfer && n) {
        m->init[m->ninit++] = central_config(s);
    }
    m->design = ninit;
    return AT_OK;
}

/* ---- the forest ----------------------------------------------------------------------------- */

static int32_t new_node(model_state *m)
{
    if (m->nnodes == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1024;
        mnode *nn = realloc(m->nodes, cap * sizeof *nn);
        if (!nn) {
            m->oom = 1;
            return -1;
        }
        m->nodes = nn;
        m->cap = cap;
    }
    return (int32_t)m->nnodes++;
}

/* Builds a tree over the training rows sample[0..n) (indices into train/ty); returns its node. */
static int32_t build(at_search *s, model_state *m, const float *ty, int32_t *sample, size_t n,
                     int depth)
{
    int32_t id = new_node(m);
    if (id < 0) return -1;
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += ty[sample[i]];
    mnode leaf = {-1, 0, -1, -1, (float)(sum / (double)n)};
    m->nodes[id] = leaf;
    if (n < MF_MIN_SPLIT || depth >= MF_MAX_DEPTH) return id;
    double best_gain = 1e-12, base = sum * sum / (double)n;
    int best_f = -1;
    uint8_t best_thr = 0;
    /* A random subset of the features, more only while none of them splits the node. */
    size_t nfb = m->nfb, tries = (size_t)ceil(MF_MTRY * (double)nfb), perm[257];
    for (size_t t = 0; t < nfb; t++) perm[t] = t;
    for (size_t k = 0; k < nfb && (k < tries || best_f < 0); k++) {
        size_t r = k + (size_t)at_rng_below(&s->rng, nfb - k), t = perm[r];
        perm[r] = perm[k];
        perm[k] = t;
        size_t nb = m->nbins[t];
        memset(m->hsum, 0, nb * sizeof *m->hsum);
        memset(m->hcnt, 0, nb * sizeof *m->hcnt);
        for (size_t i = 0; i < n; i++) {
            uint8_t b = m->X[m->train[sample[i]] * m->nf + t];
            m->hsum[b] += ty[sample[i]];
            m->hcnt[b]++;
        }
        double left = 0;
        size_t nleft = 0;
        for (size_t b = 0; b + 1 < nb; b++) {
            left += m->hsum[b];
            nleft += m->hcnt[b];
            if (!m->hcnt[b] || nleft == n) continue;
            double nl = (double)nleft, nr = (double)(n - nleft), right = sum - left;
            double gain = left * left / nl + right * right / nr - base;
            if (gain > best_gain) {
                best_gain = gain;
                best_f = (int)t;
                best_thr = (uint8_t)b;
            }
        }
    }
    if (best_f < 0) return id;
    /* Partition in place: left rows first. */
    size_t nl = 0;
    for (size_t i = 0; i < n; i++) {
        if (m->X[m->train[sample[i]] * m->nf + (size_t)best_f] <= best_thr) {
            int32_t t = sample[nl];
            sample[nl++] = sample[i];
            sample[i] = t;
        }
    }
    int32_t l = build(s, m, ty, sample, nl, depth + 1);
    int32_t r = build(s, m, ty, sample + nl, n - nl, depth + 1);
    if (l < 0 || r < 0) return -1;
    m->nodes[id].feat = best_f;
    m->nodes[id].thr = best_thr;
    m->nodes[id].left = l;
    m->nodes[id].right = r;
    return id;
}

static float predict_tree(const model_state *m, int32_t node, const uint8_t *x)
{
    const mnode *nd = m->nodes;
    while (nd[node].feat >= 0)
        node = x[nd[node].feat] <= nd[node].thr ? nd[node].left : nd[node].right;
    return nd[node].value;
}

/* Refits the forest on everything reported and ranks the unmeasured configs by expected
 * improvement over the best log time. */
/* The chance that config c fails, by the classification forest of the last fit (0 while
 * nothing failed). */
static double fail_prob(const model_state *m, size_t c)
{
    double pf = 0;
    for (int t = 0; t < m->nct; t++) pf += predict_tree(m, m->croots[t], m->X + c * m->nf);
    return m->nct ? pf / m->nct : 0;
}

/* Expected improvement of config c over the best log time under one forest of the last fit
 * (its mean and spread as a normal belief): roots, plus the sources' prior when warm. */
static double forest_ei(const model_state *m, const int32_t *roots, size_t c, int warm)
{
    const uint8_t *x = m->X + c * m->nf;
    double sum = 0, sq = 0;
    for (int t = 0; t < MF_TREES; t++) {
        double p = predict_tree(m, roots[t], x);
        sum += p;
        sq += p * p;
    }
    double mu = sum / MF_TREES, var = sq / MF_TREES - mu * mu;
    if (warm) mu += XPRIOR(m, c); /* the forest learned the sources' error */
    double sd = sqrt(var > 0 ? var : 0) + MF_SD_FLOOR;
    double z = (m->ybest - mu) / sd;
    return (m->ybest - mu) * 0.5 * erfc(-z / sqrt(2.0)) +
           sd * exp(-0.5 * z * z) / 2.5066282746310002;
}

/* Expected improvement of config c, times the chance it does not fail. With sources, that
 * of the mixture "the sources are right here (weight xw) or not": expected improvement is
 * linear in the belief, so it is the weighted sum of the warm forest's and this task's own
 * forest's. A source that ranks well on the whole but not near this task's optimum (another
 * GPU) no longer decides alone where the search looks (docs/search.md, "Transfer"). */
static double score(const model_state *m, size_t c)
{
    double ei = m->oy && m->xw < 1 ? (1 - m->xw) * forest_ei(m, m->oroots, c, 0) : 0;
    if (!m->oy || m->xw > 0) ei += (m->oy ? m->xw : 1) * forest_ei(m, m->roots, c, 1);
    return ei * (1 - fail_prob(m, c));
}

/* A regression forest of MF_TREES trees on targets ty of the configs that ran (okrows[0..nok)),
 * each on a bootstrap sample; 0 (and oom set) without memory. */
static int grow_forest(at_search *s, model_state *m, int32_t *roots, const float *ty, size_t nok)
{
    int32_t *sample = m->tmp;
    for (int t = 0; t < MF_TREES; t++) {
        for (size_t i = 0; i < nok; i++) sample[i] = m->okrows[at_rng_below(&s->rng, nok)];
        roots[t] = build(s, m, ty, sample, nok, 0);
        if (roots[t] < 0) {
            m->oom = 1;
            return 0;
        }
    }
    return 1;
}

static void fit(at_search *s, model_state *m)
{
    size_t n = m->ntrain;
    if (s->xfer) transfer_column(s, m);
    /* Times train the regression forest; failures train only the classifier, since a slow
     * stand-in value for them would also condemn the good configs beside them. */
    double ybest = INFINITY;
    size_t nok = 0;
    for (size_t i = 0; i < n; i++) {
        double y = s->y[m->train[i]];
        m->ty[i] = (float)(isfinite(y) ? y - XPRIOR(m, m->train[i]) : 0);
        m->fail[i] = isfinite(y) ? 0.0f : 1.0f;
        if (isfinite(y)) m->okrows[nok++] = (int32_t)i;
        if (y < ybest) ybest = y;
    }
    int classify = nok < n;
    m->nnodes = 0;
    m->nfb = m->nf;
    if (!grow_forest(s, m, m->roots, m->ty, nok)) return;
    /* Warm start: this task's own forest, on its log times and parameters (not the sources'
     * column, the last feature). */
    if (s->xfer) {
        for (size_t i = 0; i < n; i++) {
            double y = s->y[m->train[i]];
            m->oy[i] = (float)(isfinite(y) ? y : 0);
        }
        m->nfb = m->nf - 1;
        int ok = grow_forest(s, m, m->oroots, m->oy, nok);
        m->nfb = m->nf;
        if (!ok) return;
    }
    /* Where configs fail: a smaller forest on failed = 1, ok = 0. */
    int32_t *sample = m->tmp;
    int nct = classify ? MF_CTREES : 0;
    for (int t = 0; t < nct; t++) {
        for (size_t i = 0; i < n; i++) sample[i] = (int32_t)at_rng_below(&s->rng, n);
        m->croots[t] = build(s, m, m->fail, sample, n, 0);
        if (m->croots[t] < 0) {
            m->oom = 1;
            return;
        }
    }
    m->nct = nct;
    m->ybest = ybest;
    m->fitted_at = n;
    /* Rank a window of the unmeasured configs (all of them in a space up to MF_SCORED; else
     * the next MF_SCORED of a seeded order, so successive fits sweep the whole space) and keep
     * the MF_KEEP best by expected improvement. */
    m->ncand = 0;
    size_t nconf = s->space.nconfigs, scored_n = 0;
    for (size_t k = 0; k < nconf && scored_n < MF_SCORED; k++) {
        size_t c = s->order[m->window];
        m->window = (m->window + 1) % nconf;
        if (s->state[c] != CFG_NEW) continue;
        scored_n++;
        double ei = score(m, c);
        if (m->ncand == MF_KEEP && ei <= m->cand[MF_KEEP - 1].score) continue;
        size_t i = m->ncand < MF_KEEP ? m->ncand++ : MF_KEEP - 1;
        while (i > 0 && m->cand[i - 1].score < ei) {
            m->cand[i] = m->cand[i - 1];
            i--;
        }
        m->cand[i].score = ei;
        m->cand[i].c = c;
    }
    m->next_cand = 0;
}

/* The best unmeasured neighbour (by expected improvement) of the MF_LOCAL_TOP best configs; with
 * coord, an incumbent's one-parameter moves first, its wider neighbourhood only when those are
 * all measured (a coordinate search). */
static size_t local_pick(at_search *s, model_state *m, int coord)
{
    size_t top[MF_LOCAL_TOP], ntop = 0;
    double topy[MF_LOCAL_TOP];
    for (size_t i = 0; i < m->ntrain; i++) {
        size_t c = m->train[i];
        double y = s->y[c];
        if (!isfinite(y)) continue;
        size_t k = ntop < MF_LOCAL_TOP ? ntop++ : MF_LOCAL_TOP;
        if (k == MF_LOCAL_TOP) {
            if (y >= topy[MF_LOCAL_TOP - 1]) continue;
            k = MF_LOCAL_TOP - 1;
        }
        while (k > 0 && topy[k - 1] > y) {
            top[k] = top[k - 1];
            topy[k] = topy[k - 1];
            k--;
        }
        top[k] = c;
        topy[k] = y;
    }
    /* The neighbourhood of an incumbent: every config whose parameters each lie within one
     * value of it (Kernel Tuner's "adjacent"), and every config that differs from it in one
     * parameter only, by any amount ("Hamming"). Moving one parameter by one step alone
     * reaches few valid configs in a constrained space (a tile size must divide by the
     * threads times the vector width...), where moving two together does. */
    const size_t np = s->space.nparams, n = s->space.nconfigs;
    size_t best = AT_NONE;
    double best_ei = 0;
    for (size_t k = 0; k < 2 * ntop; k++) {
        size_t t = k / 2;
        int only_one = k % 2 == 0; /* the first pass over an incumbent: one-parameter moves */
        if (only_one && !coord) continue;
        const uint16_t *a = s->space.idx + top[t] * np;
        for (size_t c = 0; c < n; c++) {
            if (s->state[c] != CFG_NEW) continue;
            const uint16_t *b = s->space.idx + c * np;
            size_t far = 0, diff = 0;
            for (size_t j = 0; j < np && far < 2; j++) {
                int d = (int)a[j] - (int)b[j];
                diff += d != 0;
                far += d > 1 || d < -1;
                if (far && diff > 1) far = 2;
            }
            /* A local step does not walk into a region that is likely to fail. */
            if (far >= 2 || (only_one && diff > 1) || fail_prob(m, c) > 0.5) continue;
            double ei = score(m, c);
            if (best == AT_NONE || ei > best_ei) best = c, best_ei = ei;
        }
        if (best != AT_NONE) break;
    }
    return best;
}

/* In how many parameters configs c and d differ: 0, 1, or 2 for two or more. */
static size_t params_apart(const at_search *s, size_t c, size_t d)
{
    const size_t np = s->space.nparams;
    const uint16_t *a = s->space.idx + c * np, *b = s->space.idx + d * np;
    size_t diff = 0;
    for (size_t j = 0; j < np && diff < 2; j++) diff += a[j] != b[j];
    return diff;
}

/* 1 if c differs in at most one parameter from a config proposed but not yet reported. */
static int near_pending(const at_search *s, const model_state *m, size_t c)
{
    for (size_t p = 0; p < m->npending; p++)
        if (params_apart(s, c, m->pending[p]) < 2) return 1;
    return 0;
}

static size_t model_pick(at_search *s);

/* The warm-start probe: one move of each parameter (to another of its values, at random) around
 * each of the sources' first picks, in their order (the sources' best first), in a seeded
 * random order of its own. A related task's best config is often one parameter away from the
 * source's best (another GPU prefers the other value of a flag, another shape another block size),
 * which the forest, led by the sources' prior towards their own optimum, is slow to try
 * (docs/search.md, "Transfer"). Proposed before anything else, until measured, or until
 * MF_PROBE_STALL reports in a row have not improved the best, or a move gained more than
 * MF_PROBE_JUMP: then the sources' best was not near an optimum here (a misleading source, or
 * one whose optimum is elsewhere), and descending from it is the model's job. Without memory,
 * no probe. */
static void build_probe(at_search *s, model_state *m)
{
    const size_t np = s->space.nparams, n = s->space.nconfigs;
    const size_t *pick = s->first + s->nfirst_own, npick = s->nfirst - s->nfirst_own;
    m->probe_built = 1;
    m->probe = malloc((n ? n : 1) * sizeof *m->probe);
    unsigned char *in = calloc(n ? n : 1, 1);
    unsigned char *seen = malloc(np ? np : 1);
    uint64_t rng = s->opts.seed ^ 0x9e3779b97f4a7c15ull; /* its own: the model's is untouched */
    for (size_t t = 0; t < npick && m->probe && in && seen; t++) {
        const uint16_t *a = s->space.idx + pick[t] * np;
        size_t start = m->nprobe;
        for (size_t c = 0; c < n; c++)
            if (!in[c] && s->state[c] == CFG_NEW && params_apart(s, pick[t], c) == 1)
                m->probe[m->nprobe++] = c;
        size_t k = m->nprobe - start;
        at_rng_shuffle(&rng, m->probe + start, k);
        /* One move of each parameter: the first of its moves in that order. */
        memset(seen, 0, np);
        m->nprobe = start;
        for (size_t i = 0; i < k; i++) {
            size_t c = m->probe[start + i], j = 0;
            while (s->space.idx[c * np + j] == a[j]) j++;
            if (!seen[j]) seen[j] = 1, in[c] = 1, m->probe[m->nprobe++] = c;
        }
    }
    free(seen);
    free(in);
}

/* Every proposal is remembered as pending until its report. */
static size_t model_next(at_search *s)
{
    model_state *m = s->impl;
    size_t c = model_pick(s);
    if (c != AT_NONE && m->npending < MF_PENDING) m->pending[m->npending++] = c;
    return c;
}

static size_t model_pick(at_search *s)
{
    model_state *m = s->impl;
    m->proposals++;
    while (m->next_init < m->ninit) {
        size_t c = m->init[m->next_init++];
        if (s->state[c] == CFG_NEW) return c;
    }
    if (s->xfer && (size_t)s->proposed >= s->nfirst) {
        if (!m->probe_built) build_probe(s, m);
        if (m->since >= MF_PROBE_STALL || m->probe_over) m->next_probe = m->nprobe;
        while (m->next_probe < m->nprobe) {
            size_t c = m->probe[m->next_probe++];
            if (s->state[c] == CFG_NEW) {
                s->probe_picks++;
                return c;
            }
        }
    }
    /* Until the initial design is measured (and while nothing succeeded), random: spread out
     * in a cold design, uniform after it (and with warm-start sources, whose first picks and
     * probe are the design). */
    int design = (size_t)s->proposed < m->design;
    if (design && !s->xfer && !m->oom) return spread_pick(s);
    if (m->oom || m->nok == 0 || design || m->proposals % MF_RANDOM_EVERY == 0)
        return at_search_fallback(s);
    size_t step = m->ntrain / MF_REFIT_DIV;
    if (!m->fitted_at || m->ntrain >= m->fitted_at + (step ? step : 1) || m->next_cand >= m->ncand)
        fit(s, m);
    if (m->oom) return at_search_fallback(s); /* no memory for the forest: random from here */
    /* Every MF_LOCAL_EVERY-th pick is local: the unmeasured neighbour of highest expected
     * improvement around the best configs so far, where the forest is least sure of a narrow
     * optimum and neighbourhood search is strongest; and every pick is, for as long as the
     * last local pick reported improved the best (a trust region that pays stays open). */
    if (m->hot || m->proposals % MF_LOCAL_EVERY == 1) {
        size_t c = local_pick(s, m, m->since >= MF_STUCK);
        if (c != AT_NONE) {
            m->islocal[c] = 1;
            return c;
        }
    }
    /* With proposals still out (the pipeline's lookahead), the ranking is the last fit's;
     * skip the ones next to a pending config, whose outcome the next fit will know, so a
     * batch spreads instead of piling into one spot. */
    size_t first = AT_NONE;
    while (m->next_cand < m->ncand) {
        size_t c = m->cand[m->next_cand++].c;
        if (s->state[c] != CFG_NEW) continue;
        if (!near_pending(s, m, c)) return c;
        if (first == AT_NONE) first = c;
    }
    return first != AT_NONE ? first : at_search_fallback(s);
}

static void model_report(at_search *s, size_t c, double y)
{
    model_state *m = s->impl;
    for (size_t p = 0; p < m->npending; p++)
        if (m->pending[p] == c) {
            m->pending[p] = m->pending[--m->npending];
            break;
        }
    m->train[m->ntrain++] = c;
    if (isfinite(y)) m->nok++;
    if (m->islocal[c]) m->hot = y < m->yseen;
    m->since = y < m->yseen ? 0 : m->since + 1;
    if (m->probe_built && y * MF_PROBE_JUMP < m->yseen) m->probe_over = 1;
    if (y < m->yseen) m->yseen = y;
}

const strategy_ops at_strategy_model = {model_init, model_next, model_report, model_free};
