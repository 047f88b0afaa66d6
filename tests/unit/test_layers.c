/* test_layers.c — layered lookup on the OpenCL device (docs/shipping.md): crafted read-only
 * layers answer each level of the fallback chain (exact, nearest-shape, same-arch, vendor,
 * default) through at_lookup, at_get and the CLI's --no-tune; a layer's config that fails its
 * check here moves on to the next level; a stale template version is no answer but a seed of
 * the tuning run; layers are never written; db show prints the chain; db verify flags a record
 * faster than what it measures or made with another driver. Prints the hot lookup's time.
 *   test_layers   (AUTOTUNE_TEMPLATE_PATH: the real templates, then tests/faulty/templates) */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/unit/test_support.h"
#include "tests/unit/tmpdir.h"

#include "autotune.h"
#include "tuner/tuner.h" /* the templates' hashes, crafted best records */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef AT_CLI
#error "AT_CLI: the path of the autotune command"
#endif

static int cli(const char *layers, const char *args, char *out, size_t len);

/* ---- crafted databases ------------------------------------------------------------------- */

static char g_root[256]; /* the test's folder */
static char g_user[300]; /* the user's database */
static char g_l1[300], g_l2[300], g_path[700];
static char g_dev[640]; /* this device's key */
static char g_family_dev[700], g_vendor_dev[700];
static char g_gemm_hash[17], g_faulty_hash[17];
static char g_missing[256]; /* what the test needs and does not have */

static void put_best(const char *dir, const char *problem, const char *dev, const char *tname,
                     const char *hash, const char *config, double us, const char *driver)
{
    at_db *db = NULL;
    assert_int_equal(at_db_open(dir, AT_DB_READWRITE, &db), AT_OK);
    at_best_rec b = {0};
    snprintf(b.config, sizeof b.config, "%s", config);
    snprintf(b.template_hash, sizeof b.template_hash, "%s", hash);
    snprintf(b.template_name, sizeof b.template_name, "%s", tname);
    snprintf(b.driver, sizeof b.driver, "%s", driver ? driver : "");
    b.time_us = us;
    b.when = 1796000000;
    char *key = at_db_best_key(problem, dev);
    assert_non_null(key);
    assert_int_equal(at_db_put_best(db, key, &b, 1), AT_OK);
    free(key);
    at_db_close(db);
}

/* The problem of a key ("gemm/f32/nt/32x32x32"). */
static at_problem *problem_of(const char *key)
{
    at_problem *p = NULL;
    assert_int_equal(at_problem_from_key(key, &p), AT_OK);
    return p;
}

static int take_second(void *user, const char *config)
{
    int *n = user;
    if (++n[0] < 2) return 0;
    snprintf((char *)(n + 1), 512, "%s", config);
    return 1;
}

/* A valid config of the gemm space for key that is not its default (the second it lists). */
static void other_config(at_context *ctx, const char *key, char *out)
{
    struct {
        int n;
        char config[512];
    } v = {0, ""};
    at_problem *p = problem_of(key);
    at_space_info info;
    assert_int_equal(at_space_count(ctx, p, "gemm", &info, take_second, &v), AT_OK);
    assert_true(v.config[0]);
    snprintf(out, 512, "%s", v.config);
    at_problem_destroy(p);
}

static at_context *open_ctx(const char *search_path)
{
    at_context_options o = {
        .backend = AT_BACKEND_OPENCL, .db_path = g_user, .db_search_path = search_path};
    at_context *ctx = NULL;
    at_status s = at_context_create(&o, &ctx);
    if (s != AT_OK) fail_msg("context: %s", at_context_last_error(ctx));
    return ctx;
}

static void rm_lock(const char *dir)
{
    char lock[400];
    snprintf(lock, sizeof lock, "%s/lock.mdb", dir);
    unlink(lock);
}

/* The configs the layers hold, for the checks. */
static char g_cfg_nn[512], g_cfg_nt[512], g_cfg_tn[512], g_cfg_stale[512];

/* Two layers: L1 with this device's exact entry (nn 64^3), a same-family entry that fails its
 * check (tt, gemm_faulty FAULT=2) and a stale one (nn 24^3, a hash no template has); L2 with a
 * same-family entry (nt 32^3), same-vendor ones (tn 32^3, tt 32^3) and another vendor's (tt). */
static int setup(void **state)
{
    (void)state;
    void *dir = NULL;
    make_tmp(&dir);
    snprintf(g_root, sizeof g_root, "%s", (char *)dir);
    free(dir);
    snprintf(g_user, sizeof g_user, "%s/user", g_root);
    snprintf(g_l1, sizeof g_l1, "%s/l1", g_root);
    snprintf(g_l2, sizeof g_l2, "%s/l2", g_root);
    snprintf(g_path, sizeof g_path, "%s:%s", g_l1, g_l2);
    /* bundle layers are imported under the cache folder: the test's own */
    char cache[300];
    snprintf(cache, sizeof cache, "%s/cache", g_root);
    setenv("XDG_CACHE_HOME", cache, 1);
    at_context_options o = {.backend = AT_BACKEND_OPENCL, .db_path = g_user, .db_search_path = ""};
    at_context *ctx = NULL;
    at_status s = at_context_create(&o, &ctx);
    if (s == AT_ERR_NO_BACKEND || s == AT_ERR_NO_DEVICE) {
        snprintf(g_missing, sizeof g_missing, "no OpenCL device: %s", at_context_last_error(ctx));
        at_context_destroy(ctx);
        return 0;
    }
    if (s != AT_OK) return -1;
    snprintf(g_dev, sizeof g_dev, "%s", at_context_device_key(ctx));
    /* Another device of this family: this one with other units (its family and vendor come
     * from the rest of the key); one of this vendor only: another CPU name. */
    const char *units = strrchr(g_dev, '/');
    snprintf(g_family_dev, sizeof g_family_dev, "%.*s/1002", (int)(units - g_dev), g_dev);
    at_device_rec id;
    at_device_rec_from_key(g_dev, &id);
    snprintf(g_vendor_dev, sizeof g_vendor_dev, "%s/%s/pthread-zzcpu-Another CPU/4",
             at_context_backend(ctx), id.vendor);
    at_template *t = NULL;
    assert_int_equal(at_template_load("gemm", "opencl", &t), AT_OK);
    snprintf(g_gemm_hash, sizeof g_gemm_hash, "%s", t->hash);
    at_template_free(t);
    assert_int_equal(at_template_load("gemm_faulty", "opencl", &t), AT_OK);
    snprintf(g_faulty_hash, sizeof g_faulty_hash, "%s", t->hash);
    at_template_free(t);
    other_config(ctx, "gemm/f32/nn/64x64x64", g_cfg_nn);
    other_config(ctx, "gemm/f32/nt/32x32x32", g_cfg_nt);
    other_config(ctx, "gemm/f32/tn/32x32x32", g_cfg_tn);
    other_config(ctx, "gemm/f32/nn/24x24x24", g_cfg_stale);
    at_context_destroy(ctx);

    put_best(g_l1, "gemm/f32/nn/64x64x64", g_dev, "gemm", g_gemm_hash, g_cfg_nn, 5, NULL);
    put_best(g_l1, "gemm/f32/tt/32x32x32", g_family_dev, "gemm_faulty", g_faulty_hash, "FAULT=2", 1,
             NULL);
    put_best(g_l1, "gemm/f32/nn/24x24x24", g_dev, "gemm", "0123456789abcdef", g_cfg_stale, 1, NULL);
    put_best(g_l2, "gemm/f32/nt/32x32x32", g_family_dev, "gemm", g_gemm_hash, g_cfg_nt, 3, NULL);
    put_best(g_l2, "gemm/f32/tn/32x32x32", g_vendor_dev, "gemm", g_gemm_hash, g_cfg_tn, 4, NULL);
    put_best(g_l2, "gemm/f32/tt/32x32x32", g_vendor_dev, "gemm", g_gemm_hash, g_cfg_tn, 4, NULL);
    put_best(g_l2, "gemm/f32/tt/32x32x32", "cuda/sm_90a/NVIDIA H200/132", "gemm", g_gemm_hash,
             g_cfg_tn, 0.5, NULL);
    rm_lock(g_l1); /* as shipped: data.mdb alone */
    rm_lock(g_l2);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char *root = strdup(g_root);
    void *st = root;
    return remove_tmp(&st);
}

/* ---- the levels --------------------------------------------------------------------------- */

static void expect_level(at_context *ctx, const char *key, at_source want, const char *db,
                         const char *config)
{
    at_problem *p = problem_of(key);
    at_lookup_info in;
    at_status s = at_lookup(ctx, p, 0, &in);
    if (s != AT_OK) fail_msg("%s: %s", key, at_context_last_error(ctx));
    if (in.source != want)
        fail_msg("%s: source %d, want %d (%s)", key, in.source, want, in.database);
    if (db) assert_string_equal(in.database, db);
    if (config) assert_string_equal(in.config, config);
    /* at_get builds what at_lookup names, and says so. */
    at_kernel *k = NULL;
    at_source src;
    assert_int_equal(at_get(ctx, p, 0, &k, &src), AT_OK);
    assert_int_equal(src, want);
    at_lookup_info ki;
    assert_int_equal(at_kernel_info(k, &ki), AT_OK);
    assert_int_equal(ki.source, want);
    assert_string_equal(ki.config, in.config);
    at_kernel_destroy(k);
    at_problem_destroy(p);
}

static void test_levels(void **state)
{
    (void)state;
    AT_TEST_NEED(g_missing);
    at_context *ctx = open_ctx(g_path);
    assert_string_equal(at_context_database(ctx, 1), g_l1);
    assert_string_equal(at_context_database(ctx, 2), g_l2);
    assert_null(at_context_database(ctx, 3));
    expect_level(ctx, "gemm/f32/nn/64x64x64", AT_SOURCE_HIT, g_l1, g_cfg_nn);
    expect_level(ctx, "gemm/f32/nn/64x64x48", AT_SOURCE_NEAREST, g_l1, g_cfg_nn);
    expect_level(ctx, "gemm/f32/nt/32x32x32", AT_SOURCE_SAME_ARCH, g_l2, g_cfg_nt);
    expect_level(ctx, "gemm/f32/nt/32x32x16", AT_SOURCE_SAME_ARCH, g_l2, g_cfg_nt);
    expect_level(ctx, "gemm/f32/tn/32x32x32", AT_SOURCE_VENDOR, g_l2, g_cfg_tn);
    /* tt: L1's same-family entry (FAULT=2) gives wrong results here: the vendor level answers,
     * not the other vendor's (cuda) entry. */
    expect_level(ctx, "gemm/f32/tt/32x32x32", AT_SOURCE_VENDOR, g_l2, g_cfg_tn);
    /* a stale version of this very problem is no answer: L1's nearest trusted shape is */
    expect_level(ctx, "gemm/f32/nn/24x24x24", AT_SOURCE_NEAREST, g_l1, g_cfg_nn);
    at_problem *p = problem_of("gemm/f32/nn/64x64x64");
    at_lookup_info in;
    assert_int_equal(at_lookup(ctx, p, 0, &in), AT_OK);
    assert_int_equal(in.validated, 1); /* not measured here: checked on first use */
    assert_string_equal(in.device_key, g_dev);
    /* at_tune's cache hit takes the layer's exact entry too */
    at_tune_report rep;
    at_kernel *k = NULL;
    assert_int_equal(at_tune(ctx, p, NULL, &rep, &k), AT_OK);
    assert_int_equal(rep.cache_hit, 1);
    assert_string_equal(rep.best_config, g_cfg_nn);
    assert_int_equal(at_kernel_info(k, &in), AT_OK);
    assert_int_equal(in.source, AT_SOURCE_HIT);
    assert_string_equal(in.database, g_l1);
    at_kernel_destroy(k);
    at_problem_destroy(p);
    p = problem_of("gemm/f32/tt/32x32x32");
    assert_int_equal(at_lookup(ctx, p, AT_GET_NO_FALLBACK, &in), AT_ERR_NOT_FOUND);
    /* the chain level by level: same-arch has nothing that passes */
    at_lookup_info lv[5];
    int found[5];
    assert_int_equal(at_lookup_levels(ctx, p, lv, found), AT_OK);
    assert_int_equal(found[0] + found[1] + found[2], 0);
    assert_int_equal(found[3], 1);
    assert_int_equal(found[4], 1);
    assert_int_equal(lv[4].source, AT_SOURCE_DEFAULT);
    at_problem_destroy(p);
    /* the first-use checks are in the user's checks table: passed, and failed (FAULT=2) */
    at_db *db = NULL;
    at_result_rec r;
    assert_int_equal(at_db_open(g_user, AT_DB_READONLY, &db), AT_OK);
    char *rkey = at_db_result_key("gemm/f32/nn/64x64x64", g_dev, g_gemm_hash, g_cfg_nn);
    assert_int_equal(at_db_get_check(db, rkey, &r), AT_OK);
    assert_int_equal(r.status, AT_RS_OK);
    free(rkey);
    rkey = at_db_result_key("gemm/f32/tt/32x32x32", g_dev, g_faulty_hash, "FAULT=2");
    assert_int_equal(at_db_get_check(db, rkey, &r), AT_OK);
    assert_int_equal(r.status, AT_RS_WRONG_RESULT);
    free(rkey);
    at_db_close(db);
    at_context_destroy(ctx);

    /* no layers, nothing tuned: the default */
    ctx = open_ctx("");
    expect_level(ctx, "gemm/f32/nt/32x32x32", AT_SOURCE_DEFAULT, "", NULL);
    at_context_destroy(ctx);
}

/* ---- layers are never written --------------------------------------------------------------- */

static uint64_t file_sum(const char *dir, struct timespec *mtime)
{
    char path[400];
    snprintf(path, sizeof path, "%s/data.mdb", dir);
    char *data = NULL;
    size_t len = 0;
    assert_int_equal(at_read_file(path, &data, &len), AT_OK);
    uint64_t h = at_hash(AT_HASH_SEED, data, len);
    free(data);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    *mtime = st.st_mtim;
    return h;
}

static void test_untouched(void **state)
{
    (void)state;
    AT_TEST_NEED(g_missing);
    struct timespec m1, m2, n1, n2;
    uint64_t h1 = file_sum(g_l1, &m1), h2 = file_sum(g_l2, &m2);
    /* every level, a tuning run (its seeds) and a second context */
    at_context *ctx = open_ctx(g_path);
    expect_level(ctx, "gemm/f32/tt/32x32x16", AT_SOURCE_VENDOR, g_l2, g_cfg_tn);
    at_problem *p = problem_of("gemm/f32/nn/16x16x16");
    at_tune_options o = {.strategy = "random", .seed = 1, .max_evals = 1};
    at_tune_report rep;
    assert_int_equal(at_tune(ctx, p, &o, &rep, NULL), AT_OK);
    at_problem_destroy(p);
    at_context_destroy(ctx);
    assert_true(file_sum(g_l1, &n1) == h1);
    assert_true(file_sum(g_l2, &n2) == h2);
    assert_memory_equal(&m1, &n1, sizeof m1);
    assert_memory_equal(&m2, &n2, sizeof m2);
    char lock[400];
    snprintf(lock, sizeof lock, "%s/lock.mdb", g_l1);
    assert_int_not_equal(access(lock, F_OK), 0);
    snprintf(lock, sizeof lock, "%s/lock.mdb", g_l2);
    assert_int_not_equal(access(lock, F_OK), 0);
}

/* A damaged layer is skipped with a warning; a folder of layers is read in name order; the
 * user's database on the path is not a layer. */
static void test_path_entries(void **state)
{
    (void)state;
    AT_TEST_NEED(g_missing);
    char folder[400], bad[420], path[1400];
    snprintf(folder, sizeof folder, "%s/shipped", g_root);
    snprintf(bad, sizeof bad, "%s/a-bad", folder);
    mkdir(folder, 0777);
    mkdir(bad, 0777);
    char file[450];
    snprintf(file, sizeof file, "%s/data.mdb", bad);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("this is not an LMDB file, and it is long enough to be read as one...", f);
    fclose(f);
    snprintf(file, sizeof file, "%s/b-l1", folder);
    assert_int_equal(symlink(g_l1, file), 0);
    snprintf(path, sizeof path, "%s:%s:/nonexistent/autotune-layer:%s", g_user, folder, g_l1);
    at_context *ctx = open_ctx(path);
    assert_non_null(strstr(at_context_warnings(ctx), bad));
    assert_string_equal(at_context_database(ctx, 1), file); /* l1 through the folder, once */
    assert_null(at_context_database(ctx, 2));
    expect_level(ctx, "gemm/f32/nn/64x64x64", AT_SOURCE_HIT, file, g_cfg_nn);
    at_context_destroy(ctx);
}

/* A bundle on the path answers as the database it was exported from. */
static void test_bundle_layer(void **state)
{
    (void)state;
    AT_TEST_NEED(g_missing);
    char bundle[400], args[1024], out[4096], path[1000];
    snprintf(bundle, sizeof bundle, "%s/l2.jsonl.gz", g_root);
    snprintf(args, sizeof args, "db export '%s' --db '%s'", bundle, g_l2);
    if (cli("", args, out, sizeof out) != 0) fail_msg("export: %s", out);
    rm_lock(g_l2);
    snprintf(path, sizeof path, "%s:%s", g_l1, bundle);
    at_context *ctx = open_ctx(path);
    assert_string_equal(at_context_warnings(ctx), "");
    expect_level(ctx, "gemm/f32/nt/32x32x32", AT_SOURCE_SAME_ARCH, bundle, g_cfg_nt);
    expect_level(ctx, "gemm/f32/tt/32x32x32", AT_SOURCE_VENDOR, bundle, g_cfg_tn);
    at_context_destroy(ctx);
}

/* ---- seeds and the memo ------------------------------------------------------------------- */

static void test_stale_seed(void **state)
{
    (void)state;
    AT_TEST_NEED(g_missing);
    at_context *ctx = open_ctx(g_path);
    at_problem *p = problem_of("gemm/f32/nn/24x24x24");
    /* the entries are gemm.cl's (a CPU device's default is gemm_cpu): seeds of that template */
    at_tune_options o = {.strategy = "random", .seed = 1, .max_evals = 1, .template_name = "gemm"};
    at_tune_report rep;
    at_kernel *k = NULL;
    assert_int_equal(at_tune(ctx, p, &o, &rep, &k), AT_OK);
    assert_int_equal(rep.cache_hit, 0);
    assert_int_equal(rep.seeds, 1);
    assert_string_equal(rep.best_config, g_cfg_stale); /* the one evaluation was the seed */
    at_lookup_info ki;
    assert_int_equal(at_kernel_info(k, &ki), AT_OK);
    assert_int_equal(ki.source, AT_SOURCE_TUNED);
    assert_string_equal(ki.config, g_cfg_stale);
    assert_string_equal(ki.database, g_user);
    at_kernel_destroy(k);
    /* the run invalidated the memo: now this problem's exact entry is the user's */
    at_lookup_info in;
    assert_int_equal(at_lookup(ctx, p, 0, &in), AT_OK);
    assert_int_equal(in.source, AT_SOURCE_HIT);
    assert_string_equal(in.database, g_user);
    assert_int_equal(in.validated, 0);
    /* the hot path: a memo probe */
    const int n = 20000;
    double t0 = at_now();
    for (int i = 0; i < n; i++) assert_int_equal(at_lookup(ctx, p, 0, &in), AT_OK);
    print_message("hot at_lookup: %.2f us per call (%d calls)\n", (at_now() - t0) / n * 1e6, n);
    at_problem_destroy(p);
    at_context_destroy(ctx);
}

/* ---- the CLI ----------------------------------------------------------------------------------
 */

/* Runs `autotune ARGS` with the layers (or none) on the path; its output in out, its status. */
static int cli(const char *layers, const char *args, char *out, size_t len)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "AUTOTUNE_SHIPPED_DB= AUTOTUNE_DB_PATH='%s' '%s' %s 2>&1", layers,
             AT_CLI, args);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, len - 1, f);
    out[n] = '\0';
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void expect_cli_source(const char *layers, const char *problem_args, const char *source,
                              const char *db)
{
    char args[1024], out[8192], want[1200];
    snprintf(args, sizeof args, "gemm %s --db '%s' --no-tune --json", problem_args, g_user);
    int rc = cli(layers, args, out, sizeof out);
    snprintf(want, sizeof want, "\"source\":\"%s\",\"database\":\"%s\"", source, db);
    if (rc != 0 || !strstr(out, want)) fail_msg("%s: rc %d, want %s in %s", args, rc, want, out);
}

static void test_cli_levels(void **state)
{
    (void)state;
    AT_TEST_NEED(g_missing);
    expect_cli_source(g_path, "--m 64 --n 64 --k 64", "exact", g_l1);
    expect_cli_source(g_path, "--m 64 --n 64 --k 40", "nearest-shape", g_l1);
    expect_cli_source(g_path, "--m 32 --n 32 --k 32 --layout nt", "same-arch", g_l2);
    expect_cli_source(g_path, "--m 32 --n 32 --k 32 --layout tn", "vendor", g_l2);
    expect_cli_source(g_path, "--m 32 --n 32 --k 32 --layout tt", "vendor", g_l2);
    expect_cli_source("", "--m 32 --n 32 --k 32 --layout tn", "default", "");
    char out[16384], args[1024];
    snprintf(args, sizeof args, "db show gemm/f32/tt/32x32x32 --db '%s'", g_user);
    assert_int_equal(cli(g_path, args, out, sizeof out), 0);
    if (!strstr(out, "== ") || !strstr(out, "same-arch      none") ||
        !strstr(out, "vendor         gemm/f32/tt/32x32x32 from"))
        fail_msg("db show: %s", out);
    snprintf(args, sizeof args, "gemm --m 32 --n 32 --k 32 --db '%s' --no-tune --force", g_user);
    assert_int_equal(cli(g_path, args, out, sizeof out), 2);
}

static void test_cli_verify(void **state)
{
    (void)state;
    AT_TEST_NEED(g_missing);
    char db[400], args[1024], out[16384];
    snprintf(db, sizeof db, "%s/verify", g_root);
    snprintf(args, sizeof args,
             "gemm --m 32 --n 32 --k 16 --db '%s' --strategy random --seed 1 --budget 2", db);
    assert_int_equal(cli("", args, out, sizeof out), 0);
    /* fresh: as fast as recorded (1 us kernels on a loaded machine: within 50x) */
    snprintf(args, sizeof args, "db verify --db '%s' --max-slowdown 50 --json", db);
    int rc = cli("", args, out, sizeof out);
    if (rc != 0 || !strstr(out, "\"flagged\":0")) fail_msg("fresh verify: rc %d: %s", rc, out);
    /* the record says it ran 1000x faster than it does */
    at_db *d = NULL;
    at_best_rec b;
    char *key = at_db_best_key("gemm/f32/nn/32x32x16", g_dev);
    assert_int_equal(at_db_open(db, AT_DB_READWRITE, &d), AT_OK);
    assert_int_equal(at_db_get_best(d, key, &b), AT_OK);
    at_best_rec fast = b;
    fast.time_us = b.time_us / 1000;
    assert_int_equal(at_db_put_best(d, key, &fast, 1), AT_OK);
    at_db_close(d);
    snprintf(args, sizeof args, "db verify --db '%s' --max-slowdown 50", db);
    rc = cli("", args, out, sizeof out);
    if (rc != 1 || !strstr(out, "SLOWER")) fail_msg("slower: rc %d: %s", rc, out);
    /* another driver */
    at_best_rec other = b;
    snprintf(other.driver, sizeof other.driver, "some other driver 0.1");
    assert_int_equal(at_db_open(db, AT_DB_READWRITE, &d), AT_OK);
    assert_int_equal(at_db_put_best(d, key, &other, 1), AT_OK);
    at_db_close(d);
    snprintf(args, sizeof args, "db verify --db '%s' --max-slowdown 50 --json", db);
    rc = cli("", args, out, sizeof out);
    if (rc != 1 || !strstr(out, "\"driver_changed\":true")) fail_msg("driver: rc %d: %s", rc, out);
    /* --retune tunes it again into the user's database: then it verifies */
    snprintf(args, sizeof args,
             "db verify --db '%s' --max-slowdown 50 --retune --strategy random --seed 1 --budget 1",
             db);
    rc = cli("", args, out, sizeof out);
    if (rc != 1 || !strstr(out, "retuned  gemm/f32/nn/32x32x16"))
        fail_msg("retune: %d %s", rc, out);
    snprintf(args, sizeof args, "db verify --db '%s' --max-slowdown 50", db);
    rc = cli("", args, out, sizeof out);
    if (rc != 0) fail_msg("after --retune: rc %d: %s", rc, out);
    snprintf(args, sizeof args, "db verify --db '%s' --max-slowdown 0.5", db);
    assert_int_equal(cli("", args, out, sizeof out), 2);
    free(key);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels),       cmocka_unit_test(test_untouched),
        cmocka_unit_test(test_path_entries), cmocka_unit_test(test_bundle_layer),
        cmocka_unit_test(test_stale_seed),   cmocka_unit_test(test_cli_levels),
        cmocka_unit_test(test_cli_verify),
    };
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    return at_test_exit(failed, g_missing);
}
