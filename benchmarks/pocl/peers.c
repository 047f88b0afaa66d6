/* Peer measurements for benchmarks/pocl/run.sh: one SGEMM problem C = op(A)*op(B) (f32,
 * row-major, alpha = 1, beta = 0; m = n = k = S, or --m/--n/--k, layout --layout), timed with
 *   - OpenBLAS cblas_sgemm on the host CPU, all threads (the CPU ceiling), and
 *   - CLBlast CLBlastSgemm with its shipped (built-in) parameters on an OpenCL device.
 * The CLBlast result is checked against OpenBLAS.
 *
 * Usage: peers S [--m M] [--n N] [--k K] [--layout nn|nt|tn|tt] [--platform P] [--device D]
 *                [--min-seconds T] [--max-runs N] [--no-clblast] [--no-openblas]
 * (S sets m, n and k; --m/--n/--k override one each. Layout: first letter A, second B; t: the
 * operand is stored transposed, A as K x M, B as N x K.) OpenBLAS picks its kernel by the CPU it
 * detects; OPENBLAS_CORETYPE forces one (run.sh does) and the JSON reports the one used.
 * Prints a human log on stderr and one JSON object on stdout.
 *
 * Timing: one untimed warm-up call (it also compiles CLBlast's kernels), then timed calls
 * until at least --min-seconds (default 1) of timed calls have run or --max-runs (default 10)
 * calls were made, whichever comes first; at least 3 timed calls always.  Each call is timed
 * with CLOCK_MONOTONIC around the call and, for CLBlast, clFinish (host wall time, the whole
 * routine including any helper kernels CLBlast launches).  For CLBlast the OpenCL profiling
 * time of the event CLBlast returns (its last kernel) is reported as well.
 *
 * Error: max over C of |c - c_ref| / (|A| |B|)_ij, the same component-wise bound autotune uses.
 *
 * Build: cc -O2 -std=c11 peers.c -o peers -lclblast -lOpenCL -lopenblas -lm
 */
#define _POSIX_C_SOURCE          200809L
#define CL_TARGET_OPENCL_VERSION 120
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <CL/cl.h>
#include <cblas.h>
#include <clblast_c.h>

/* From OpenBLAS (declared in its cblas.h; repeated in case another cblas.h is found first). */
char *openblas_get_config(void);
char *openblas_get_corename(void);
int openblas_get_num_threads(void);

#define MIN_RUNS 3

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* xorshift64*, uniform in [-1, 1) */
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float rnd(void)
{
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    uint64_t r = g_rng * 2685821657736338717ull;
    return (float)((double)(r >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n')) s[--n] = 0;
}

typedef struct {
    int runs;
    double median_ms, min_ms, total_s;
} timing;

static void summarize(double *ms, int runs, double total_s, timing *t)
{
    t->runs = runs;
    t->total_s = total_s;
    double mn = ms[0];
    for (int i = 1; i < runs; i++)
        if (ms[i] < mn) mn = ms[i];
    t->min_ms = mn;
    t->median_ms = median(ms, runs);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr,
                "usage: %s S [--m M] [--n N] [--k K] [--layout nn|nt|tn|tt] [--platform P] "
                "[--device D] [--min-seconds T] [--max-runs N] [--no-clblast] [--no-openblas]\n",
                argv[0]);
        return 2;
    }
    const size_t S = (size_t)strtoull(argv[1], NULL, 10);
    size_t M = S, N = S, K = S;
    int ta = 0, tb = 0;
    char layout[3] = "nn";
    cl_uint plat_i = 0, dev_i = 0;
    double min_seconds = 1.0;
    int max_runs = 10, do_clblast = 1, do_openblas = 1;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--m") && i + 1 < argc)
            M = (size_t)strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--n") && i + 1 < argc)
            N = (size_t)strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--k") && i + 1 < argc)
            K = (size_t)strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--layout") && i + 1 < argc && strlen(argv[i + 1]) == 2 &&
                 strchr("nt", argv[i + 1][0]) && strchr("nt", argv[i + 1][1])) {
            ++i;
            memcpy(layout, argv[i], 3);
            ta = layout[0] == 't';
            tb = layout[1] == 't';
        } else if (!strcmp(argv[i], "--platform") && i + 1 < argc)
            plat_i = (cl_uint)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            dev_i = (cl_uint)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--min-seconds") && i + 1 < argc)
            min_seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--max-runs") && i + 1 < argc)
            max_runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-clblast"))
            do_clblast = 0;
        else if (!strcmp(argv[i], "--no-openblas"))
            do_openblas = 0;
        else {
            fprintf(stderr, "peers: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (M == 0 || N == 0 || K == 0 || max_runs < MIN_RUNS) {
        fprintf(stderr, "peers: bad size or --max-runs (must be >= %d)\n", MIN_RUNS);
        return 2;
    }
    /* Element counts of A (m x k), B (k x n), C (m x n) and their leading dimensions. */
    const size_t na = M * K, nb = K * N, n2 = M * N;
    const size_t lda = ta ? M : K, ldb = tb ? K : N, ldc = N;
    const CBLAS_TRANSPOSE cta = ta ? CblasTrans : CblasNoTrans,
                          ctb = tb ? CblasTrans : CblasNoTrans;
    const double flop = 2.0 * (double)M * (double)N * (double)K;
    float *A = malloc(na * sizeof(float)), *B = malloc(nb * sizeof(float));
    float *Cref = malloc(n2 * sizeof(float)), *C = malloc(n2 * sizeof(float));
    float *bound = malloc(n2 * sizeof(float));
    double *ms = malloc((size_t)max_runs * sizeof(double));
    if (!A || !B || !Cref || !C || !bound || !ms) {
        fprintf(stderr, "peers: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < na; i++) A[i] = rnd();
    for (size_t i = 0; i < nb; i++) B[i] = rnd();

    /* ---- OpenBLAS: reference, error bound, and (optionally) the CPU ceiling ---- */
    char ob_config[512] = "", ob_core[128] = "";
    snprintf(ob_config, sizeof ob_config, "%s", openblas_get_config());
    snprintf(ob_core, sizeof ob_core, "%s", openblas_get_corename());
    trim(ob_config);
    trim(ob_core);
    const int ob_threads = openblas_get_num_threads();
    fprintf(stderr, "peers: m=%zu n=%zu k=%zu %s; OpenBLAS config '%s', core %s, %d thread(s)\n", M,
            N, K, layout, ob_config, ob_core, ob_threads);

    timing tob = {0};
    cblas_sgemm(CblasRowMajor, cta, ctb, (int)M, (int)N, (int)K, 1.0f, A, (int)lda, B, (int)ldb,
                0.0f, Cref, (int)ldc); /* warm-up and reference */
    if (do_openblas) {
        int r = 0;
        double t_all = 0.0;
        while (r < max_runs && (r < MIN_RUNS || t_all < min_seconds)) {
            double t0 = now_s();
            cblas_sgemm(CblasRowMajor, cta, ctb, (int)M, (int)N, (int)K, 1.0f, A, (int)lda, B,
                        (int)ldb, 0.0f, Cref, (int)ldc);
            double dt = now_s() - t0;
            ms[r++] = dt * 1e3;
            t_all += dt;
        }
        summarize(ms, r, t_all, &tob);
        fprintf(stderr,
                "peers: OpenBLAS sgemm: %d runs, median %.3f ms (%.2f GFLOP/s), min %.3f ms\n",
                tob.runs, tob.median_ms, flop / (tob.median_ms * 1e6), tob.min_ms);
    }
    { /* bound = |A| |B| for the component-wise relative error */
        float *Aa = malloc(na * sizeof(float)), *Ba = malloc(nb * sizeof(float));
        if (!Aa || !Ba) return 1;
        for (size_t i = 0; i < na; i++) Aa[i] = fabsf(A[i]);
        for (size_t i = 0; i < nb; i++) Ba[i] = fabsf(B[i]);
        cblas_sgemm(CblasRowMajor, cta, ctb, (int)M, (int)N, (int)K, 1.0f, Aa, (int)lda, Ba,
                    (int)ldb, 0.0f, bound, (int)ldc);
        free(Aa);
        free(Ba);
    }

    /* ---- CLBlast with its shipped parameters ---- */
    timing tcl = {0};
    double ev_median_ms = -1.0, max_rel = -1.0, warmup_s = -1.0;
    char plat_name[256] = "", dev_name[256] = "", dev_version[256] = "", cl_err[256] = "";
    int cl_ok = 0;
    if (do_clblast) {
        cl_int err;
        cl_uint np = 0, nd = 0;
        cl_platform_id plats[16];
        cl_device_id devs[16];
        cl_context ctx = NULL;
        cl_command_queue q = NULL;
        cl_mem dA = NULL, dB = NULL, dC = NULL;
        double *ev_ms = malloc((size_t)max_runs * sizeof(double));
#define CLCHK(what)                                                                                \
    do {                                                                                           \
        if (err != CL_SUCCESS) {                                                                   \
            snprintf(cl_err, sizeof cl_err, "%s failed: OpenCL error %d", what, (int)err);         \
            goto cl_done;                                                                          \
        }                                                                                          \
    } while (0)
        err = clGetPlatformIDs(16, plats, &np);
        CLCHK("clGetPlatformIDs");
        if (plat_i >= np) {
            err = CL_INVALID_PLATFORM;
            CLCHK("platform index");
        }
        clGetPlatformInfo(plats[plat_i], CL_PLATFORM_NAME, sizeof plat_name, plat_name, NULL);
        err = clGetDeviceIDs(plats[plat_i], CL_DEVICE_TYPE_ALL, 16, devs, &nd);
        CLCHK("clGetDeviceIDs");
        if (dev_i >= nd) {
            err = CL_INVALID_DEVICE;
            CLCHK("device index");
        }
        cl_device_id dev = devs[dev_i];
        clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof dev_name, dev_name, NULL);
        clGetDeviceInfo(dev, CL_DEVICE_VERSION, sizeof dev_version, dev_version, NULL);
        fprintf(stderr, "peers: OpenCL platform '%s', device '%s' (%s)\n", plat_name, dev_name,
                dev_version);
        ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
        CLCHK("clCreateContext");
        q = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
        CLCHK("clCreateCommandQueue");
        dA = clCreateBuffer(ctx, CL_MEM_READ_ONLY, na * sizeof(float), NULL, &err);
        CLCHK("clCreateBuffer A");
        dB = clCreateBuffer(ctx, CL_MEM_READ_ONLY, nb * sizeof(float), NULL, &err);
        CLCHK("clCreateBuffer B");
        dC = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n2 * sizeof(float), NULL, &err);
        CLCHK("clCreateBuffer C");
        err = clEnqueueWriteBuffer(q, dA, CL_TRUE, 0, na * sizeof(float), A, 0, NULL, NULL);
        CLCHK("write A");
        err = clEnqueueWriteBuffer(q, dB, CL_TRUE, 0, nb * sizeof(float), B, 0, NULL, NULL);
        CLCHK("write B");
        for (size_t i = 0; i < n2; i++) C[i] = NAN; /* beta = 0: C must not be read */
        err = clEnqueueWriteBuffer(q, dC, CL_TRUE, 0, n2 * sizeof(float), C, 0, NULL, NULL);
        CLCHK("write C");

        int r = 0;
        double t_all = 0.0;
        for (int call = -1; call < max_runs; call++) { /* call -1: warm-up (compiles) */
            if (call >= MIN_RUNS && t_all >= min_seconds) break;
            cl_event ev = NULL;
            double t0 = now_s();
            CLBlastStatusCode st =
                CLBlastSgemm(CLBlastLayoutRowMajor, ta ? CLBlastTransposeYes : CLBlastTransposeNo,
                             tb ? CLBlastTransposeYes : CLBlastTransposeNo, M, N, K, 1.0f, dA, 0,
                             lda, dB, 0, ldb, 0.0f, dC, 0, ldc, &q, &ev);
            if (st != CLBlastSuccess) {
                snprintf(cl_err, sizeof cl_err, "CLBlastSgemm returned status %d", (int)st);
                goto cl_done;
            }
            err = clFinish(q);
            double dt = now_s() - t0;
            CLCHK("clFinish");
            if (call == -1) {
                warmup_s = dt;
                fprintf(stderr,
                        "peers: CLBlast warm-up call (includes kernel compilation): %.3f s\n", dt);
            } else {
                cl_ulong s0 = 0, s1 = 0;
                ev_ms[r] = -1.0;
                if (ev &&
                    clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof s0, &s0, NULL) ==
                        CL_SUCCESS &&
                    clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof s1, &s1, NULL) ==
                        CL_SUCCESS)
                    ev_ms[r] = (double)(s1 - s0) * 1e-6;
                ms[r++] = dt * 1e3;
                t_all += dt;
            }
            if (ev) clReleaseEvent(ev);
        }
        ev_median_ms = median(ev_ms, r);
        summarize(ms, r, t_all, &tcl);
        err = clEnqueueReadBuffer(q, dC, CL_TRUE, 0, n2 * sizeof(float), C, 0, NULL, NULL);
        CLCHK("read C");
        max_rel = 0.0;
        for (size_t i = 0; i < n2; i++) {
            double e = fabs((double)C[i] - (double)Cref[i]) / fmax((double)bound[i], 1e-30);
            if (!(e <= max_rel)) max_rel = isnan(e) ? INFINITY : e;
        }
        cl_ok = 1;
        fprintf(stderr,
                "peers: CLBlast sgemm: %d runs, median %.3f ms (%.2f GFLOP/s), min %.3f ms, "
                "last-kernel event median %.3f ms, max rel error %.3g\n",
                tcl.runs, tcl.median_ms, flop / (tcl.median_ms * 1e6), tcl.min_ms, ev_median_ms,
                max_rel);
    cl_done:
        if (!cl_ok) fprintf(stderr, "peers: CLBlast: %s\n", cl_err);
        if (dA) clReleaseMemObject(dA);
        if (dB) clReleaseMemObject(dB);
        if (dC) clReleaseMemObject(dC);
        if (q) clReleaseCommandQueue(q);
        if (ctx) clReleaseContext(ctx);
        free(ev_ms);
    }

    /* ---- JSON on stdout ---- */
    printf("{\"size\":%zu,\"m\":%zu,\"n\":%zu,\"k\":%zu,\"layout\":\"%s\",\"flop\":%.0f,"
           "\"timing_rule\":{\"min_seconds\":%g,\"max_runs\":%d,\"min_runs\":%d}",
           S, M, N, K, layout, flop, min_seconds, max_runs, MIN_RUNS);
    printf(",\"openblas\":{\"config\":");
    json_str(stdout, ob_config);
    printf(",\"corename\":");
    json_str(stdout, ob_core);
    printf(",\"threads\":%d", ob_threads);
    if (do_openblas)
        printf(",\"status\":\"ok\",\"runs\":%d,\"median_ms\":%.4f,\"min_ms\":%.4f,"
               "\"gflops\":%.3f,\"gflops_best\":%.3f}",
               tob.runs, tob.median_ms, tob.min_ms, flop / (tob.median_ms * 1e6),
               flop / (tob.min_ms * 1e6));
    else
        printf(",\"status\":\"skipped\"}");
    printf(",\"clblast\":{");
    if (!do_clblast) {
        printf("\"status\":\"skipped\"}");
    } else {
        printf("\"platform\":");
        json_str(stdout, plat_name);
        printf(",\"device\":");
        json_str(stdout, dev_name);
        printf(",\"device_version\":");
        json_str(stdout, dev_version);
        if (cl_ok)
            printf(",\"status\":\"ok\",\"runs\":%d,\"median_ms\":%.4f,\"min_ms\":%.4f,"
                   "\"gflops\":%.3f,\"gflops_best\":%.3f,\"last_kernel_event_median_ms\":%.4f,"
                   "\"max_rel_error\":%.3g,\"warmup_s\":%.3f}",
                   tcl.runs, tcl.median_ms, tcl.min_ms, flop / (tcl.median_ms * 1e6),
                   flop / (tcl.min_ms * 1e6), ev_median_ms, max_rel, warmup_s);
        else {
            printf(",\"status\":\"error\",\"error\":");
            json_str(stdout, cl_err);
            printf("}");
        }
    }
    printf("}\n");
    free(A), free(B), free(C), free(Cref), free(bound), free(ms);
    return (do_clblast && !cl_ok) ? 1 : 0;
}
