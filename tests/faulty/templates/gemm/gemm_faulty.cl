/* gemm_faulty.cl — one C element per work-item, correct when FAULT is 0 and wrong in a
 * different way for every other value (gemm_faulty.yaml lists them). */

#define FAR ((long)1 << 44) /* 64 TiB past a buffer: outside the address space */

KERNEL void gemm_faulty(const int M, const int N, const int K, const float alpha,
                        const float beta, GLOBAL float *A, const int lda, GLOBAL float *B,
                        const int ldb, GLOBAL float *C, const int ldc)
{
#if FAULT == 1
#error a candidate that does not compile
#endif
    const int j = GLOBAL_ID(0), i = GLOBAL_ID(1);
    if (i >= M || j >= N) return;
    float acc = 0.0f;
    for (int p = 0; p < K; p++) {
        const float a = TA ? A[p * lda + i] : A[i * lda + p];
        const float b = TB ? B[j * ldb + p] : B[p * ldb + j];
        acc += a * b;
    }
#if FAULT == 7 /* the element just past A: a guard zone's NaN */
    if (i == 0 && j == 0) acc += A[(long)(TA ? K : M) * lda + 1];
#endif
#if FAULT == 6
    if (i == 0 && j == 0) acc += A[FAR];
#endif
#if FAULT == 8 /* the same result, after a long detour */
    float detour = 0.0f;
    for (int r = 0; r < 20000; r++) detour += A[r % K] * 1e-30f;
    if (detour == 12345.0f) acc += 1.0f;
#endif
    float c = alpha * acc + (beta != 0.0f ? beta * C[i * ldc + j] : 0.0f);
#if FAULT == 2
    if (i == 0 && j == 0) c += 1.0f;
#endif
#if FAULT == 3
    if (i == 0 && j == 0) {
        volatile int spin = 1;
        while (spin) {}
    }
#endif
    C[i * ldc + j] = c;
#if FAULT == 4
    if (i == 0 && j == 0) C[FAR] = c;
#endif
#if FAULT == 5
    if (i == M - 1 && j == N - 1) C[(long)M * ldc + 3] = c;
#endif
#if FAULT == 9
    if (i == 0 && j == 0) A[0] = 42.0f;
#endif
}
