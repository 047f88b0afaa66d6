/* transfer.c — warm starts: a related task's results (the same template on a neighbouring shape,
 * or on another device of the family) mapped onto this space, their best configs proposed
 * first, and their times as a prediction the model-based strategy may use, weighted by how
 * well they rank what is measured here (Kendall's tau; a source whose ranking disagrees gets a
 * weight <= 0 and is ignored). docs/search.md, "Transfer". */
#include "transfer.h"
#include "strategy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- matching a source's parameters to the target's ---------------------------------------- */

/* 1 when two values' texts name the same value: equal numbers, or equal texts. */
static int same_value(const char *a, const char *b)
{
    char *ea, *eb;
    double x = strtod(a, &ea), y = strtod(b, &eb);
    if (ea != a && !*ea && eb != b && !*eb) return x == y;
    return strcmp(a, b) == 0;
}

static int find_name(const at_transfer_params *p, const char *name)
{
    for (size_t j = 0; j < p->nparams; j++)
        if (strcmp(p->names[j], name) == 0) return (int)j;
    return -1;
}

at_status at_transfer_map(const at_transfer_params *target, const at_search_space *space,
                          const at_transfer_params *source, const uint16_t *src_idx,
                          const double *time, size_t nsrc, size_t **config, double **mapped_time,
                          size_t *n, char *why, size_t whylen)
{
    *config = NULL;
    *mapped_time = NULL;
    *n = 0;
    const size_t np = target->nparams;
    /* The same parameter names, in any order: another kernel or template has other ones. */
    int pos[256];
    int same = np == source->nparams && np <= 256;
    for (size_t j = 0; same && j < np; j++)
        same = (pos[j] = find_name(source, target->names[j])) >= 0;
    if (!same) {
        size_t j = 0;
        while (j < np && find_name(source, target->names[j]) >= 0) j++;
        size_t k = 0;
        while (k < source->nparams && find_name(target, source->names[k]) >= 0) k++;
        snprintf(why, whylen, "its parameters are not this space's (%s%s%s%s%s)",
                 j < np ? "no " : "", j < np ? target->names[j] : "",
                 j < np && k < source->nparams ? ", " : "",
                 k < source->nparams ? source->names[k] : "",
                 k < source->nparams ? " is not a parameter here" : "");
        if (j == np && k == source->nparams)
            snprintf(why, whylen, "it has %zu parameters, this space %zu", source->nparams, np);
        return AT_ERR_INVALID_ARG;
    }
    /* Each source value's index among the target's values (-1: not a value here). */
    int32_t *vmap[256] = {0};
    at_status st = AT_OK;
    for (size_t j = 0; j < np && st == AT_OK; j++) {
        size_t sj = (size_t)pos[j];
        vmap[j] = malloc((source->nvalues[sj] ? source->nvalues[sj] : 1) * sizeof *vmap[j]);
        if (!vmap[j]) {
            st = at_fail(AT_ERR_NO_MEMORY, "out of memory");
            break;
        }
        for (size_t v = 0; v < source->nvalues[sj]; v++) {
            vmap[j][v] = -1;
            for (size_t w = 0; w < target->nvalues[j] && vmap[j][v] < 0; w++)
                if (same_value(source->values[sj][v], target->values[j][w]))
                    vmap[j][v] = (int32_t)w;
        }
    }
    at_tuple_index tt = {0};
    size_t *cfg = st == AT_OK ? malloc((nsrc ? nsrc : 1) * sizeof *cfg) : NULL;
    double *tm = st == AT_OK ? malloc((nsrc ? nsrc : 1) * sizeof *tm) : NULL;
    if (st == AT_OK && (!cfg || !tm || !at_tuple_index_build(&tt, space)))
        st = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    size_t k = 0;
    uint16_t t[256];
    for (size_t i = 0; st == AT_OK && i < nsrc; i++) {
        if (!(time[i] > 0) || !isfinite(time[i])) continue; /* a failure predicts nothing here */
        size_t j = 0;
        for (; j < np; j++) {
            int32_t v = vmap[j][src_idx[i * source->nparams + (size_t)pos[j]]];
            if (v < 0) break;
            t[j] = (uint16_t)v;
        }
        size_t c = j == np ? at_tuple_index_find(&tt, t) : AT_NONE;
        if (c == AT_NONE) continue; /* not a config of this space */
        cfg[k] = c;
        tm[k++] = time[i];
    }
    at_tuple_index_free(&tt);
    for (size_t j = 0; j < np; j++) free(vmap[j]);
    if (st == AT_OK && k == 0) {
        snprintf(why, whylen, "none of its %zu configs that ran is in this space", nsrc);
        st = AT_ERR_INVALID_ARG;
    }
    if (st != AT_OK) {
        free(cfg);
        free(tm);
        return st;
    }
    *config = cfg;
    *mapped_time = tm;
    *n = k;
    return AT_OK;
}

/* ---- the sources in a search ----------------------------------------------------------------- */

typedef struct source {
    size_t n;
    size_t *config; /* sorted by time, fastest first */
    double *ltime;  /* log time */
    double *rank;   /* per space config: 0 (its best) .. 1 (its worst); NAN where it has none */
    double weight;
    size_t pairs;    /* target measurements it was judged on */
    double mean, sd; /* of its log times */
    double *z;       /* per space config: its standardised log time; NAN where it has none */
} source;

struct at_transfer {
    size_t nconfigs, nsrc;
    source *src;
    size_t judged; /* measured configs at the last judgement (+1; 0: never) */
    double *feat_last;
    int have_feat;
};

typedef struct by_time {
    double t;
    size_t c;
} by_time;

static int cmp_by_time(const void *a, const void *b)
{
    const by_time *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return (x->c > y->c) - (x->c < y->c);
}

void at_transfer_free(at_transfer *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->nsrc; i++) {
        free(t->src[i].config);
        free(t->src[i].ltime);
        free(t->src[i].rank);
        free(t->src[i].z);
    }
    free(t->src);
    free(t->feat_last);
    free(t);
}

at_status at_transfer_create(const at_search_space *space, const at_search_source *src, size_t nsrc,
                             at_transfer **out)
{
    *out = NULL;
    const size_t n = space->nconfigs;
    at_transfer *t = calloc(1, sizeof *t);
    if (!t) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    t->nconfigs = n;
    t->nsrc = nsrc;
    t->src = calloc(nsrc ? nsrc : 1, sizeof *t->src);
    t->feat_last = malloc((n ? n : 1) * sizeof *t->feat_last);
    if (!t->src || !t->feat_last) {
        at_transfer_free(t);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    for (size_t i = 0; i < nsrc; i++) {
        source *s = &t->src[i];
        size_t m = src[i].n;
        by_time *bt = malloc((m ? m : 1) * sizeof *bt);
        s->config = malloc((m ? m : 1) * sizeof *s->config);
        s->ltime = malloc((m ? m : 1) * sizeof *s->ltime);
        s->rank = malloc((n ? n : 1) * sizeof *s->rank);
        s->z = malloc((n ? n : 1) * sizeof *s->z);
        if (!bt || !s->config || !s->ltime || !s->rank || !s->z) {
            free(bt);
            at_transfer_free(t);
            return at_fail(AT_ERR_NO_MEMORY, "out of memory");
        }
        for (size_t c = 0; c < n; c++) s->rank[c] = NAN;
        size_t k = 0;
        for (size_t j = 0; j < m; j++) {
            size_t c = src[i].config[j];
            double tm = src[i].time[j];
            if (c >= n || !(tm > 0) || !isfinite(tm) || !isnan(s->rank[c])) continue;
            s->rank[c] = 0; /* taken: a config given twice keeps its first time */
            bt[k].t = tm;
            bt[k++].c = c;
        }
        qsort(bt, k, sizeof *bt, cmp_by_time);
        for (size_t j = 0; j < k; j++) {
            s->config[j] = bt[j].c;
            s->ltime[j] = log(bt[j].t);
            s->rank[bt[j].c] = k > 1 ? (double)j / (double)(k - 1) : 0.5;
        }
        s->n = k;
        s->weight = 1;
        double sum = 0, sq = 0;
        for (size_t j = 0; j < k; j++) sum += s->ltime[j], sq += s->ltime[j] * s->ltime[j];
        s->mean = k ? sum / (double)k : 0;
        s->sd = k > 1 ? sqrt(fmax(sq / (double)k - s->mean * s->mean, 0)) : 0;
        if (!(s->sd > 0)) s->sd = 1;
        for (size_t c = 0; c < n; c++) s->z[c] = NAN;
        for (size_t j = 0; j < k; j++) s->z[s->config[j]] = (s->ltime[j] - s->mean) / s->sd;
        free(bt);
    }
    *out = t;
    return AT_OK;
}

size_t at_transfer_first(const at_transfer *t, size_t *out, size_t cap)
{
    size_t k = 0;
    for (size_t r = 0; k < cap; r++) {
        int any = 0;
        for (size_t i = 0; i < t->nsrc && k < cap; i++) {
            if (r >= t->src[i].n) continue;
            any = 1;
            size_t c = t->src[i].config[r], dup = 0;
            for (size_t j = 0; j < k && !dup; j++) dup = out[j] == c;
            if (!dup) out[k++] = c;
        }
        if (!any) break;
    }
    return k;
}

/* Kendall's tau-b of the pairs (x[i], y[i]): 1 when they rank alike, -1 reversed. */
static double kendall(const double *x, const double *y, size_t n)
{
    double conc = 0, disc = 0, tx = 0, ty = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            double dx = x[i] - x[j], dy = y[i] - y[j];
            if (dx == 0 && dy == 0) continue;
            if (dx == 0)
                tx++;
            else if (dy == 0)
                ty++;
            else if ((dx > 0) == (dy > 0))
                conc++;
            else
                disc++;
        }
    double den = sqrt((conc + disc + tx) * (conc + disc + ty));
    return den > 0 ? (conc - disc) / den : 0;
}

/* Rejudges every source's weight on the configs measured here that it has. */
static void judge(at_transfer *t, const double *y)
{
    size_t measured = 0;
    for (size_t c = 0; c < t->nconfigs; c++) measured += !isnan(y[c]);
    if (t->judged == measured + 1) return;
    t->judged = measured + 1;
    double *xs = malloc((measured ? measured : 1) * sizeof *xs);
    double *ys = malloc((measured ? measured : 1) * sizeof *ys);
    for (size_t i = 0; xs && ys && i < t->nsrc; i++) {
        source *s = &t->src[i];
        size_t k = 0;
        /* At most AT_TRANSFER_MAX_PAIRS (tau is quadratic): the source's fastest measured here. */
        for (size_t j = 0; j < s->n && k < measured && k < AT_TRANSFER_MAX_PAIRS; j++) {
            double v = y[s->config[j]];
            if (isnan(v) || !isfinite(v)) continue; /* not measured here, or failed */
            xs[k] = s->ltime[j];
            ys[k++] = v;
        }
        s->pairs = k;
        s->weight = k >= AT_TRANSFER_MIN_PAIRS ? kendall(xs, ys, k) : 1;
    }
    free(xs);
    free(ys);
}

double at_transfer_weight(at_transfer *t, const double *y, size_t i, size_t *configs, size_t *pairs)
{
    judge(t, y);
    if (configs) *configs = t->src[i].n;
    if (pairs) *pairs = t->src[i].pairs;
    return t->src[i].weight;
}

int at_transfer_feature(at_transfer *t, const double *y, double *feat)
{
    judge(t, y);
    for (size_t c = 0; c < t->nconfigs; c++) {
        double sum = 0, wsum = 0;
        for (size_t i = 0; i < t->nsrc; i++) {
            const source *s = &t->src[i];
            if (s->weight <= 0) continue;
            /* A config a source does not have is its typical one. */
            sum += s->weight * (isnan(s->rank[c]) ? 0.5 : s->rank[c]);
            wsum += s->weight;
        }
        feat[c] = wsum > 0 ? sum / wsum : 0;
    }
    int changed = !t->have_feat || memcmp(feat, t->feat_last, t->nconfigs * sizeof *feat) != 0;
    memcpy(t->feat_last, feat, t->nconfigs * sizeof *feat);
    t->have_feat = 1;
    return changed;
}

int at_transfer_prior(at_transfer *t, const double *y, double *prior)
{
    judge(t, y);
    /* The sources' standardised log times, weighted... */
    size_t n = t->nconfigs;
    double wsum = 0;
    for (size_t i = 0; i < t->nsrc; i++) wsum += t->src[i].weight > 0 ? t->src[i].weight : 0;
    if (!(wsum > 0)) return 0;
    for (size_t c = 0; c < n; c++) {
        double z = 0;
        for (size_t i = 0; i < t->nsrc; i++) {
            const source *s = &t->src[i];
            if (s->weight > 0 && !isnan(s->z[c])) z += s->weight * s->z[c];
        }
        prior[c] = z / wsum;
    }
    /* ... mapped onto the log times measured here by least squares. */
    double sx = 0, sy = 0, sxx = 0, sxy = 0, k = 0;
    for (size_t c = 0; c < n; c++) {
        if (isnan(y[c]) || !isfinite(y[c])) continue;
        sx += prior[c], sy += y[c], sxx += prior[c] * prior[c], sxy += prior[c] * y[c], k++;
    }
    if (k < AT_TRANSFER_MIN_PAIRS) return 0;
    double var = sxx / k - (sx / k) * (sx / k);
    double a = var > 1e-12 ? (sxy / k - sx / k * sy / k) / var : 0;
    if (!(a > 0)) return 0;
    double b = sy / k - a * sx / k;
    for (size_t c = 0; c < n; c++) prior[c] = a * prior[c] + b;
    return 1;
}
