/* rowsum.cl — the test operation's kernel in the portable dialect: Y[i] = alpha * sum_j X[i, j]
 * for a row-major X of `rows` rows, `cols` columns and leading dimension `ld`. A work-group of
 * WG x RPG work-items sums RPG rows: each work-item a strided share of its row in VW-wide
 * loads, then a tree over the WG partial sums in local memory. */

#if VW == 1
#define LANES(v) (v)
#elif VW == 2
#define LANES(v) ((v).s0 + (v).s1)
#else
#define LANES(v) ((v).s0 + (v).s1 + (v).s2 + (v).s3)
#endif

KERNEL void rowsum(const int rows, const int cols, const int ld, const float alpha,
                   const GLOBAL float *RESTRICT X, GLOBAL float *RESTRICT Y)
{
    LOCAL float part[RPG][WG];
    const int t = LOCAL_ID(0), r = LOCAL_ID(1);
    const int row = GROUP_ID(1) * RPG + r;
    float acc = 0.0f;
    if (row < rows) {
        const GLOBAL float *x = X + (long)row * ld;
        const int nvec = cols / VW;
        VTYPE(VW) v = VBCAST(VW, 0.0f);
        AT_UNROLL(UNROLL)
        for (int q = t; q < nvec; q += WG) v = v + VLOAD(VW, q, x);
        acc = LANES(v);
        for (int j = nvec * VW + t; j < cols; j += WG) acc += x[j];
    }
    part[r][t] = acc;
    BARRIER();
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (t < s) part[r][t] += part[r][t + s];
        BARRIER();
    }
    if (t == 0 && row < rows) Y[row] = alpha * part[r][0];
}
