/* attention_example.c — tune causal grouped-query attention with the autotune library, run the
 * tuned kernel on host data in PyTorch's (batch, seq, heads, dim) layout, and check O and the
 * log-sum-exp against a plain C loop.
 *
 *   cc attention_example.c $(pkg-config --cflags --libs autotune) -lm -o attention_example
 *   ./attention_example [DB_PATH]        (default: a fresh temporary database)
 *
 * Built and run by the test suite (ctest -R attention_example). */
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

    /* 4 query heads sharing 2 key/value heads, 37 queries over 53 keys, causal (aligned to the
     * last key), head dimension 64: sizes that are multiples of nothing. */
    at_attention_problem p = {.batch = 2,
                              .heads = 4,
                              .kv_heads = 2,
                              .seq = 37,
                              .seq_kv = 53,
                              .head_dim = 64,
                              .causal = 1,
                              .dtype = AT_DTYPE_F32,
                              .layout = AT_ATTENTION_BSHD};

    at_tune_options tune = {.strategy = "random", .max_evals = 6, .seed = 7};
    at_tune_report report;
    CHECK(at_attention_tune(ctx, &p, &tune, &report, NULL));
    printf("tuned: %s  %.1f us  %.2f GFLOP/s  (%lld candidates)\n", report.best_config,
           report.best_time_us, report.best_gflops, (long long)report.evaluated);

    at_kernel *kernel = NULL;
    at_source source;
    CHECK(at_attention_get(ctx, &p, 0, &kernel, &source));
    printf("kernel: %s (%s)\n", at_kernel_config(kernel),
           source == AT_SOURCE_HIT ? "database hit" : "not a hit");

    const int64_t B = p.batch, S = p.seq, S2 = p.seq_kv, H = p.heads, G = p.kv_heads,
                  D = p.head_dim;
    size_t nq = (size_t)(B * S * H * D), nkv = (size_t)(B * S2 * G * D), nl = (size_t)(B * H * S);
    float *q = malloc(nq * 4), *k = malloc(nkv * 4), *v = malloc(nkv * 4), *o = malloc(nq * 4),
          *lse = malloc(nl * 4);
    for (size_t i = 0; i < nq; i++) q[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    for (size_t i = 0; i < nkv; i++) k[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
    for (size_t i = 0; i < nkv; i++) v[i] = (float)((i * 3) % 17) / 17.0f - 0.5f;

    at_buffer *dq, *dk, *dv, *dout, *dl;
    CHECK(at_buffer_create(ctx, nq * 4, &dq));
    CHECK(at_buffer_create(ctx, nkv * 4, &dk));
    CHECK(at_buffer_create(ctx, nkv * 4, &dv));
    CHECK(at_buffer_create(ctx, nq * 4, &dout));
    CHECK(at_buffer_create(ctx, nl * 4, &dl));
    CHECK(at_buffer_write(dq, 0, q, nq * 4));
    CHECK(at_buffer_write(dk, 0, k, nkv * 4));
    CHECK(at_buffer_write(dv, 0, v, nkv * 4));
    CHECK(at_attention_launch(kernel, at_buffer_devptr(dq), at_buffer_devptr(dk),
                              at_buffer_devptr(dv), at_buffer_devptr(dout), at_buffer_devptr(dl),
                              NULL));
    CHECK(at_buffer_read(dout, 0, o, nq * 4));
    CHECK(at_buffer_read(dl, 0, lse, nl * 4));

    /* The C loop: element (b, s, h, d) of a (B, S, H, D) array is at ((b*S + s)*H + h)*D + d. */
    double worst = 0, scale = 1 / sqrt((double)D), *sc = malloc((size_t)S2 * sizeof *sc);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < S; i++) {
                const int64_t g = h / (H / G), n = i + S2 - S + 1; /* causal: keys [0, n) */
                const float *qr = q + ((b * S + i) * H + h) * D;
                double m = -INFINITY, l = 0;
                for (int64_t j = 0; j < n; j++) {
                    const float *kr = k + ((b * S2 + j) * G + g) * D;
                    double s = 0;
                    for (int64_t x = 0; x < D; x++) s += (double)qr[x] * kr[x];
                    sc[j] = s * scale;
                    m = fmax(m, sc[j]);
                }
                for (int64_t j = 0; j < n; j++) l += (sc[j] = exp(sc[j] - m));
                for (int64_t x = 0; x < D; x++) {
                    double acc = 0;
                    for (int64_t j = 0; j < n; j++)
                        acc += sc[j] * v[((b * S2 + j) * G + g) * D + x];
                    worst = fmax(worst, fabs(acc / l - o[((b * S + i) * H + h) * D + x]));
                }
                worst = fmax(worst, fabs(m + log(l) - lse[(b * H + h) * S + i]));
            }
    printf("max abs error vs C loop (O and LSE): %.3g\n", worst);

    at_buffer_destroy(dq);
    at_buffer_destroy(dk);
    at_buffer_destroy(dv);
    at_buffer_destroy(dout);
    at_buffer_destroy(dl);
    at_kernel_destroy(kernel);
    at_context_destroy(ctx);
    free(q), free(k), free(v), free(o), free(lse), free(sc);
    if (argc <= 1) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
        if (system(cmd) != 0) return 1;
    }
    int ok = worst < 1e-4 && source == AT_SOURCE_HIT;
    puts(ok ? "OK" : "FAILED");
    return ok ? 0 : 1;
}
