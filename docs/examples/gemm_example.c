/* gemm_example.c — tune a GEMM with the autotune library, run the tuned kernel on host data,
 * and check it against a plain C loop.
 *
 *   cc gemm_example.c $(pkg-config --cflags --libs autotune) -lm -o gemm_example
 *   ./gemm_example [DB_PATH]        (default: a fresh temporary database)
 *
 * (an install outside the linker's path also needs LD_LIBRARY_PATH=PREFIX/lib; README.md's
 * "Install and use the library" has CMake, static and plain cc builds). Built and run by the
 * test suite in the build tree (ctest -R example) and against an install (ctest -R install). */
#define _DEFAULT_SOURCE
#include <autotune.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        at_status s_ = (call);                                                                     \
        if (s_ != AT_OK) {                                                                         \
            fprintf(stderr, "%s failed: %s: %s\n", #call, at_strerror(s_),                         \
                    at_context_last_error(ctx));                                                   \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    char tmp[] = "/tmp/autotune-example-XXXXXX";
    at_context *ctx = NULL;
    at_context_options opts = {0};
    opts.db_path = argc > 1 ? argv[1] : mkdtemp(tmp);
    CHECK(at_context_create(&opts, &ctx));
    printf("device: %s (%s)\n", at_context_device_name(ctx), at_context_backend(ctx));

    /* C (m x n) = A (m x k) * B (k x n), row-major, sizes that are multiples of nothing. */
    at_gemm_problem p = {.m = 250, .n = 130, .k = 77, .alpha = 1.0f, .beta = 0.0f};

    /* Tune with a small budget: every candidate is checked against a reference and timed; the
     * measurements and the best configuration land in the database. */
    at_tune_options tune = {.strategy = "random", .max_evals = 6, .seed = 7};
    at_tune_report report;
    CHECK(at_gemm_tune(ctx, &p, &tune, &report, NULL));
    printf("tuned: %s  %.1f us  %.2f GFLOP/s  (%lld candidates)\n", report.best_config,
           report.best_time_us, report.best_gflops, (long long)report.evaluated);

    /* Later (or in another process): the tuned kernel comes straight from the database. */
    at_kernel *kernel = NULL;
    at_source source;
    CHECK(at_gemm_get(ctx, &p, 0, &kernel, &source));
    printf("kernel: %s (%s)\n", at_kernel_config(kernel),
           source == AT_SOURCE_HIT ? "database hit" : "not a hit");

    size_t na = (size_t)(p.m * p.k), nb = (size_t)(p.k * p.n), nc = (size_t)(p.m * p.n);
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c = malloc(nc * sizeof *c);
    for (size_t i = 0; i < na; i++) a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    for (size_t i = 0; i < nb; i++) b[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;

    at_buffer *da, *db, *dc;
    CHECK(at_buffer_create(ctx, na * sizeof *a, &da));
    CHECK(at_buffer_create(ctx, nb * sizeof *b, &db));
    CHECK(at_buffer_create(ctx, nc * sizeof *c, &dc));
    CHECK(at_buffer_write(da, 0, a, na * sizeof *a));
    CHECK(at_buffer_write(db, 0, b, nb * sizeof *b));
    CHECK(at_gemm_launch(kernel, at_buffer_devptr(da), at_buffer_devptr(db), at_buffer_devptr(dc),
                         NULL));
    CHECK(at_buffer_read(dc, 0, c, nc * sizeof *c));

    double worst = 0;
    for (int64_t i = 0; i < p.m; i++)
        for (int64_t j = 0; j < p.n; j++) {
            double ref = 0;
            for (int64_t q = 0; q < p.k; q++) ref += (double)a[i * p.k + q] * b[q * p.n + j];
            worst = fmax(worst, fabs(ref - c[i * p.n + j]));
        }
    printf("max abs error vs C loop: %.3g\n", worst);

    at_buffer_destroy(da);
    at_buffer_destroy(db);
    at_buffer_destroy(dc);
    at_kernel_destroy(kernel);
    at_context_destroy(ctx);
    free(a);
    free(b);
    free(c);
    if (argc <= 1) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
        if (system(cmd) != 0) return 1;
    }
    int ok = worst < 1e-3 && source == AT_SOURCE_HIT;
    puts(ok ? "OK" : "FAILED");
    return ok ? 0 : 1;
}
