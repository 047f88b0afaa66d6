/* model.c — the model-based strategy: a random forest fitted online to log(time) over the
 * configs' features (parameter values, log2 where they are positive numbers, and the cost
 * model's prediction when there is one), proposing the unmeasured config of highest expected
 * improvement, with a share of random picks. Failed configs are data: they train the forest as
 * slower than anything measured, so it learns where configs fail. */
#include "strategy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Hyper-parameters, chosen for robustness rather than for any one space (docs/search.md):
 * a forest as in SMAC (bootstrap, most features per split, deep trees), refitted every time
 * the training set has grown by 1/MF_REFIT_DIV (every report while it is small), with one
 * proposal in MF_RANDOM_EVERY taken at random so a wrong model cannot trap the search. */
#define MF_TREES        24
#define MF_MAX_DEPTH    24
#define MF_MIN_SPLIT    3    /* a node with fewer samples is a leaf */
#define MF_MTRY         0.8  /* share of the features tried at each split */
#define MF_REFIT_DIV    16
#define MF_RANDOM_EVERY 10
#define MF_INIT_MIN     10   /* initial design: random (or prior-ranked) configs ... */
#define MF_INIT_MAX     30   /* ... 2 per feature within these bounds */
#define MF_FAIL_PENALTY 0.7  /* a failure trains as exp(0.7) ≈ 2x slower than the slowest */
#define MF_SD_FLOOR     1e-3 /* in log time: 0.1 % */

typedef struct mnode {
    int32_t feat; /* -1: a leaf */
    float thr;    /* x <= thr goes left */
    int32_t left, right;
    float value;
} mnode;

typedef struct xy {
    float x, y;
} xy;

typedef struct scored {
    double score;
    size_t c;
} scored;

typedef struct model_state {
    size_t nf;
    float *X; /* nconfigs * nf */
    mnode *nodes;
    size_t nnodes, cap;
    int32_t roots[MF_TREES];
    size_t *train; /* reported configs, in report order */
    float *ty;     /* their targets */
    size_t ntrain, nok;
    size_t fitted_at; /* ntrain at the last fit; 0: never */
    scored *cand;     /* unmeasured configs ranked by the last fit */
    size_t ncand, next_cand;
    size_t design; /* size of the initial design */
    xy *pairs;
    int32_t *tmp;
    size_t ninit;
    size_t *init; /* the initial design, in order */
    size_t next_init;
    int64_t proposals;
    int oom;
} model_state;

static void model_free(at_search *s)
{
    model_state *m = s->impl;
    if (!m) return;
    free(m->X);
    free(m->nodes);
    free(m->train);
    free(m->ty);
    free(m->cand);
    free(m->pairs);
    free(m->tmp);
    free(m->init);
    free(m);
}

static int cmp_prior(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? -1 : 1;
    return (x->c > y->c) - (x->c < y->c);
}

static at_status model_init(at_search *s)
{
    const size_t n = s->space.nconfigs, np = s->space.nparams;
    model_state *m = calloc(1, sizeof *m);
    if (!m) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    s->impl = m;
    /* Features: every parameter with more than one value, and the prior. */
    size_t feat_of[256], nf = 0;
    int logscale[256] = {0};
    for (size_t j = 0; j < np && nf < 256; j++) {
        if (s->space.nvalues[j] < 2) continue;
        int pos = s->space.values != NULL;
        for (size_t v = 0; pos && v < s->space.nvalues[j]; v++)
            if (!(s->space.values[j][v] > 0)) pos = 0;
        logscale[nf] = pos;
        feat_of[nf++] = j;
    }
    int use_prior = s->opts.prior != NULL;
    m->nf = nf + (size_t)use_prior;
    if (m->nf == 0) m->nf = 1; /* a space of one value per parameter: a constant feature */
    m->X = calloc((n ? n : 1) * m->nf, sizeof *m->X);
    m->train = malloc((n ? n : 1) * sizeof *m->train);
    m->ty = malloc((n ? n : 1) * sizeof *m->ty);
    m->cand = malloc((n ? n : 1) * sizeof *m->cand);
    m->pairs = malloc((n ? n : 1) * sizeof *m->pairs);
    m->tmp = malloc((n ? n : 1) * sizeof *m->tmp);
    size_t ninit = 2 * m->nf;
    ninit = ninit < MF_INIT_MIN ? MF_INIT_MIN : ninit > MF_INIT_MAX ? MF_INIT_MAX : ninit;
    m->init = malloc(ninit * sizeof *m->init);
    if (!m->X || !m->train || !m->ty || !m->cand || !m->pairs || !m->tmp || !m->init)
        return at_fail(AT_ERR_NO_MEMORY, "out of memory for the model of %zu configs", n);
    for (size_t i = 0; i < n; i++) {
        float *x = m->X + i * m->nf;
        for (size_t f = 0; f < nf; f++) {
            size_t j = feat_of[f];
            uint16_t v = s->space.idx[i * np + j];
            double val = s->space.values ? s->space.values[j][v] : NAN;
            x[f] = logscale[f] ? (float)log2(val) : isnan(val) ? (float)v : (float)val;
        }
        if (use_prior) {
            double p = s->opts.prior[i];
            x[nf] = p > 0 && isfinite(p) ? (float)log(p) : 1e30f;
        }
    }
    /* The initial design: with a prior, its best-ranked half and a random half; without, random
     * (the seeded fallback order). */
    if (use_prior && n) {
        for (size_t i = 0; i < n; i++) {
            m->cand[i].score = s->opts.prior[i] > 0 ? s->opts.prior[i] : INFINITY;
            m->cand[i].c = i;
        }
        qsort(m->cand, n, sizeof *m->cand, cmp_prior);
        for (size_t i = 0; i < ninit / 2 && i < n; i++) m->init[m->ninit++] = m->cand[i].c;
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

static int cmp_xy(const void *a, const void *b)
{
    const xy *p = a, *q = b;
    return (p->x > q->x) - (p->x < q->x);
}

/* Builds a tree over the training rows sample[0..n) (indices into train/ty); returns its node. */
static int32_t build(at_search *s, model_state *m, int32_t *sample, size_t n, int depth)
{
    int32_t id = new_node(m);
    if (id < 0) return -1;
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += m->ty[sample[i]];
    mnode leaf = {-1, 0, -1, -1, (float)(sum / (double)n)};
    m->nodes[id] = leaf;
    if (n < MF_MIN_SPLIT || depth >= MF_MAX_DEPTH) return id;
    double best_gain = 1e-12, base = sum * sum / (double)n;
    int best_f = -1;
    float best_thr = 0;
    /* A random subset of the features, more only while none of them splits the node. */
    size_t tries = (size_t)ceil(MF_MTRY * (double)m->nf), perm[257];
    for (size_t t = 0; t < m->nf; t++) perm[t] = t;
    for (size_t k = 0; k < m->nf && (k < tries || best_f < 0); k++) {
        size_t r = k + (size_t)at_rng_below(&s->rng, m->nf - k), t = perm[r];
        perm[r] = perm[k];
        perm[k] = t;
        for (size_t i = 0; i < n; i++) {
            m->pairs[i].x = m->X[m->train[sample[i]] * m->nf + t];
            m->pairs[i].y = m->ty[sample[i]];
        }
        qsort(m->pairs, n, sizeof *m->pairs, cmp_xy);
        if (m->pairs[0].x == m->pairs[n - 1].x) continue;
        double left = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            left += m->pairs[i].y;
            if (m->pairs[i].x == m->pairs[i + 1].x) continue;
            double nl = (double)(i + 1), nr = (double)(n - i - 1), right = sum - left;
            double gain = left * left / nl + right * right / nr - base;
            if (gain > best_gain) {
                best_gain = gain;
                best_f = (int)t;
                best_thr = 0.5f * (m->pairs[i].x + m->pairs[i + 1].x);
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
    int32_t l = build(s, m, sample, nl, depth + 1);
    int32_t r = build(s, m, sample + nl, n - nl, depth + 1);
    if (l < 0 || r < 0) return -1;
    m->nodes[id].feat = best_f;
    m->nodes[id].thr = best_thr;
    m->nodes[id].left = l;
    m->nodes[id].right = r;
    return id;
}

static float predict_tree(const model_state *m, int32_t node, const float *x)
{
    const mnode *nd = m->nodes;
    while (nd[node].feat >= 0) node = x[nd[node].feat] <= nd[node].thr ? nd[node].left : nd[node].right;
    return nd[node].value;
}

static int cmp_score_desc(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->c > y->c) - (x->c < y->c);
}

/* Refits the forest on everything reported and ranks the unmeasured configs by expected
 * improvement over the best log time. */
static void fit(at_search *s, model_state *m)
{
    size_t n = m->ntrain;
    double ymax = -INFINITY, ybest = INFINITY;
    for (size_t i = 0; i < n; i++) {
        double y = s->y[m->train[i]];
        if (isfinite(y) && y > ymax) ymax = y;
        if (y < ybest) ybest = y;
    }
    for (size_t i = 0; i < n; i++) {
        double y = s->y[m->train[i]];
        m->ty[i] = (float)(isfinite(y) ? y : ymax + MF_FAIL_PENALTY);
    }
    m->nnodes = 0;
    int32_t *sample = m->tmp;
    for (int t = 0; t < MF_TREES; t++) {
        for (size_t i = 0; i < n; i++) sample[i] = (int32_t)at_rng_below(&s->rng, n);
        m->roots[t] = build(s, m, sample, n, 0);
        if (m->roots[t] < 0) {
            m->oom = 1;
            return;
        }
    }
    m->ncand = 0;
    for (size_t c = 0; c < s->space.nconfigs; c++) {
        if (s->state[c] != CFG_NEW) continue;
        const float *x = m->X + c * m->nf;
        double sum = 0, sq = 0;
        for (int t = 0; t < MF_TREES; t++) {
            double p = predict_tree(m, m->roots[t], x);
            sum += p;
            sq += p * p;
        }
        double mu = sum / MF_TREES, var = sq / MF_TREES - mu * mu;
        double sd = sqrt(var > 0 ? var : 0) + MF_SD_FLOOR;
        double z = (ybest - mu) / sd;
        double ei = (ybest - mu) * 0.5 * erfc(-z / sqrt(2.0)) + sd * exp(-0.5 * z * z) / 2.5066282746310002;
        m->cand[m->ncand].score = ei;
        m->cand[m->ncand++].c = c;
    }
    qsort(m->cand, m->ncand, sizeof *m->cand, cmp_score_desc);
    m->next_cand = 0;
    m->fitted_at = n;
}

static size_t model_next(at_search *s)
{
    model_state *m = s->impl;
    m->proposals++;
    while (m->next_init < m->ninit) {
        size_t c = m->init[m->next_init++];
        if (s->state[c] == CFG_NEW) return c;
    }
    /* Until the initial design is measured (and while nothing succeeded), random. */
    if (m->oom || m->nok == 0 || (size_t)s->proposed < m->design ||
        m->proposals % MF_RANDOM_EVERY == 0)
        return at_search_fallback(s);
    size_t step = m->ntrain / MF_REFIT_DIV;
    if (!m->fitted_at || m->ntrain >= m->fitted_at + (step ? step : 1) ||
        m->next_cand >= m->ncand)
        fit(s, m);
    while (m->next_cand < m->ncand) {
        size_t c = m->cand[m->next_cand++].c;
        if (s->state[c] == CFG_NEW) return c;
    }
    return at_search_fallback(s);
}

static void model_report(at_search *s, size_t c, double y)
{
    model_state *m = s->impl;
    m->train[m->ntrain++] = c;
    if (isfinite(y)) m->nok++;
}

const strategy_ops at_strategy_model = {"model", model_init, model_next, model_report, model_free};
