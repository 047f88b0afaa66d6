/* test_bundle.c — the portable bundle (cache/bundle.c, tuner/store.c): export → import is
 * lossless, importing twice writes nothing, merge follows the conflict rule and is commutative,
 * bad bundles are refused whole with the destination untouched, the export filters, counts,
 * and bundle layers (imported once, reused, the bundle never written). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tmpdir.h"

#include "dbtest.h"

#include "cache/bundle.h"
#include "tuner/tuner.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <zlib.h>

#define PROBLEM "gemm/f32/nn/64x64x64"
#define D1      "opencl/Portable Computing Language/pthread-haswell-Intel(R) Core(TM)/4"
#define D2      "cuda/sm_90a/NVIDIA H100 80GB HBM3/132"
#define OLD     "63b7a31c876b7b70" /* a hash the gemm template supersedes: trusted */

static char g_hash[17]; /* the gemm template's hash on OpenCL: trusted */

/* ---- helpers ---------------------------------------------------------------------------- */

static char *slurp(const char *path, size_t *n)
{
    char *d = NULL;
    size_t m = 0;
    assert_int_equal(at_read_file(path, &d, &m), AT_OK);
    if (n) *n = m;
    return d;
}

static at_db *open_db(const char *path)
{
    at_db *db = NULL;
    at_status s = at_db_open(path, AT_DB_READWRITE, &db);
    if (s != AT_OK) fail_msg("at_db_open %s: %s", path, at_errmsg());
    return db;
}

static void put_result(at_db *db, const char *problem, const char *device, const char *hash,
                       const char *config, at_result_status st, double us, int64_t when,
                       const char *tname)
{
    at_result_rec r;
    memset(&r, 0, sizeof r);
    r.status = st;
    r.median_us = us;
    r.min_us = us * 0.9;
    r.max_us = us * 1.1;
    r.reps = 7;
    r.early_stop = st == AT_RS_OK ? 0 : 1;
    r.max_rel_error = 1.25e-7;
    r.compile_ms = 77.5;
    r.when = when;
    if (st != AT_RS_OK) snprintf(r.reason, sizeof r.reason, "line 1: error \"x\"\n\tline 2");
    snprintf(r.template_name, sizeof r.template_name, "%s", tname);
    char *key = at_db_result_key(problem, device, hash, config);
    assert_int_equal(at_db_put_results(db, 1, &key, &r), AT_OK);
    free(key);
}

static void put_best(at_db *db, const char *problem, const char *device, const char *hash,
                     const char *config, double us, int64_t when, const char *tname)
{
    at_best_rec b;
    memset(&b, 0, sizeof b);
    snprintf(b.config, sizeof b.config, "%s", config);
    snprintf(b.template_hash, sizeof b.template_hash, "%s", hash);
    snprintf(b.template_name, sizeof b.template_name, "%s", tname);
    b.time_us = us;
    b.gflops = 1e3 / us;
    b.max_rel_error = 3e-7;
    b.when = when;
    b.space = 128436;
    snprintf(b.compiler, sizeof b.compiler, "OpenCL C 1.2 \"pocl\"");
    snprintf(b.driver, sizeof b.driver, "3.1");
    char *key = at_db_best_key(problem, device);
    assert_int_equal(at_db_put_best(db, key, &b, 1), AT_OK);
    free(key);
}

static void put_device(at_db *db, const char *device, int64_t when, const char *driver)
{
    at_device_rec d;
    at_device_rec_from_key(device, &d);
    snprintf(d.driver, sizeof d.driver, "%s", driver);
    snprintf(d.compiler, sizeof d.compiler, "LLVM 15");
    d.when = when;
    assert_int_equal(at_db_put_device(db, device, &d), AT_OK);
}

/* A source database: results ok and failed, with and without a template name, on a device with
 * a record (D1) and one without (D2); best entries; an attention result. */
static void fill_source(const char *path)
{
    at_db *db = open_db(path);
    put_device(db, D1, 1000, "3.1+debian");
    put_result(db, PROBLEM, D1, g_hash, "BM=32,BN=32", AT_RS_OK, 12.5, 100, "gemm");
    put_result(db, PROBLEM, D1, g_hash, "BM=64,BN=32", AT_RS_COMPILE_ERROR, 0, 101, "gemm");
    put_result(db, PROBLEM, D1, g_hash, "BM=64,BN=64", AT_RS_OK, 0.1 + 0.2, 102, "");
    put_best(db, PROBLEM, D1, g_hash, "BM=64,BN=64", 0.1 + 0.2, 103, "gemm");
    put_result(db, PROBLEM, D2, "0123456789abcdef", "BM=16,BN=16", AT_RS_OK, 1.0 / 3, 104, "");
    put_best(db, PROBLEM, D2, "0123456789abcdef", "BM=16,BN=16", 1.0 / 3, 105, "gemm_wgmma");
    put_result(db, "attention/f16/b1h8s128d64", D1, g_hash, "BQ=64", AT_RS_OK, 40, 106,
               "attention");
    at_db_close(db);
}

typedef struct dump_ctx {
    at_sbuf b;
} dump_ctx;

static int dump_fn(void *user, const char *key, const char *value)
{
    at_sbuf *b = user;
    at_sb_printf(b, "%s\t%s\n", key, value);
    return 0;
}

/* Every record of the tables a bundle carries, as "key\tvalue" lines. */
static char *dump(const char *path)
{
    at_db *db = NULL;
    assert_int_equal(at_db_open(path, AT_DB_READONLY, &db), AT_OK);
    at_sbuf b = {0};
    const char *tables[] = {"results", "best", "devices"};
    for (int t = 0; t < 3; t++) {
        at_sb_printf(&b, "[%s]\n", tables[t]);
        assert_int_equal(at_db_scan(db, tables[t], NULL, dump_fn, &b), AT_OK);
    }
    at_db_close(db);
    return at_sb_take(&b);
}

/* A bundle's text (gunzipped), without its header line (which holds `created`). */
static char *bundle_body(const char *file)
{
    gzFile gz = gzopen(file, "rb");
    assert_non_null(gz);
    at_sbuf b = {0};
    char buf[4096];
    int n;
    while ((n = gzread(gz, buf, sizeof buf)) > 0) at_sb_put(&b, buf, (size_t)n);
    assert_int_equal(n, 0);
    gzclose(gz);
    char *all = at_sb_take(&b);
    char *nl = strchr(all, '\n');
    assert_non_null(nl);
    char *body = strdup(nl + 1);
    free(all);
    return body;
}

static void write_gz(const char *file, const char *text)
{
    gzFile gz = gzopen(file, "wb");
    assert_non_null(gz);
    assert_int_equal(gzwrite(gz, text, (unsigned)strlen(text)), (int)strlen(text));
    assert_int_equal(gzclose(gz), Z_OK);
}

static void export_ok(const char *db, const char *file, int64_t want)
{
    char why[1024];
    int64_t n = -1;
    at_status s = at_db_export_bundle(db, file, NULL, NULL, 0, &n, why, sizeof why);
    if (s != AT_OK) fail_msg("export: %s", why);
    if (want >= 0) assert_int_equal(n, want);
}

static at_import_report import_ok(const char *db, const char *const *in, size_t n, at_prefer p)
{
    char why[1024];
    at_import_report r;
    at_status s = at_db_import(db, in, n, p, &r, why, sizeof why);
    if (s != AT_OK) fail_msg("import: %s", why);
    return r;
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_roundtrip(void **state)
{
    char *src = sub(state, "src"), *dst = sub(state, "dst"), *a = sub(state, "a.jsonl.gz"),
         *b = sub(state, "b.jsonl.gz");
    fill_source(src);
    export_ok(src, a, 7);
    char *body = bundle_body(a);
    /* key order: results then best; the identity of D1 from its record, of D2 from its key */
    const char *first = "{\"table\":\"result\",\"op\":\"attention\",";
    assert_true(strncmp(body, first, strlen(first)) == 0);
    assert_non_null(strstr(body, "\"family\":\"haswell\",\"units\":4,\"driver\":\"3.1+debian\","
                                 "\"compiler\":\"LLVM 15\",\"when\":1000}"));
    assert_non_null(strstr(body, "\"vendor\":\"NVIDIA\",\"arch\":\"sm_90a\",\"family\":\"sm_90a\","
                                 "\"units\":132,\"driver\":\"\",\"compiler\":\"\"}"));
    /* a result without a template name gets the name of the best entry of its hash */
    assert_non_null(strstr(body, "\"template\":{\"name\":\"gemm\",\"hash\":\""));
    assert_non_null(strstr(body, "{\"name\":\"gemm_wgmma\",\"hash\":\"0123456789abcdef\"},"
                                 "\"config\":\"BM=16,BN=16\",\"status\":\"ok\""));

    const char *in[1] = {a};
    at_import_report r = import_ok(dst, in, 1, AT_PREFER_FASTER);
    assert_int_equal(r.records, 7);
    assert_int_equal(r.imported, 7);
    assert_int_equal(r.devices, 1);
    assert_int_equal(r.kept + r.unchanged, 0);

    /* Every field: the same tables, but for the two template names the bundle filled in. */
    char *before = dump(src), *after = dump(dst);
    at_db *db = open_db(src);
    put_result(db, PROBLEM, D1, g_hash, "BM=64,BN=64", AT_RS_OK, 0.1 + 0.2, 102, "gemm");
    put_result(db, PROBLEM, D2, "0123456789abcdef", "BM=16,BN=16", AT_RS_OK, 1.0 / 3, 104,
               "gemm_wgmma");
    at_db_close(db);
    free(before);
    before = dump(src);
    assert_string_equal(before, after);
    /* and the same bundle again, byte for byte past the header */
    export_ok(dst, b, 7);
    char *body2 = bundle_body(b);
    assert_string_equal(body, body2);

    /* Importing it twice writes nothing: data.mdb is unchanged. */
    char *file = sub(state, "dst/data.mdb");
    size_t n1 = 0, n2 = 0;
    char *f1 = slurp(file, &n1);
    r = import_ok(dst, in, 1, AT_PREFER_FASTER);
    assert_int_equal(r.imported, 0);
    assert_int_equal(r.devices, 0);
    assert_int_equal(r.unchanged, 7);
    char *f2 = slurp(file, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(f1, f2, n1);
    free(f1), free(f2), free(file);
    free(before), free(after), free(body), free(body2);
    free(src), free(dst), free(a), free(b);
}

/* Importing file into dst is refused with a message naming the file and holding want. */
static void assert_refused(const char *dst, const char *file, const char *want)
{
    const char *in[1] = {file};
    char why[2048];
    at_import_report r;
    assert_int_equal(at_db_import(dst, in, 1, AT_PREFER_FASTER, &r, why, sizeof why),
                     AT_ERR_INVALID_ARG);
    if (!strstr(why, want) || !strstr(why, file)) fail_msg("'%s' lacks '%s'", why, want);
}

/* Each bad bundle is refused naming the problem; the destination stays byte for byte. */
static void test_bad_bundles(void **state)
{
    char *src = sub(state, "src"), *dst = sub(state, "dst"), *good = sub(state, "good.jsonl.gz"),
         *bad = sub(state, "bad.jsonl.gz"), *fresh = sub(state, "fresh");
    fill_source(src);
    export_ok(src, good, 7);
    const char *in[1] = {good};
    import_ok(dst, in, 1, AT_PREFER_FASTER);
    char *file = sub(state, "dst/data.mdb");
    size_t n0 = 0;
    char *f0 = slurp(file, &n0);
    char *body = bundle_body(good);
    char *line = strdup(body);
    *strchr(line, '\n') = '\0';
    const char *hdr = "{\"format\":\"autotune-bundle\",\"version\":1,\"producer\":\"t\","
                      "\"created\":1,\"records\":%d}\n";

    struct {
        const char *text; /* NULL: the good bundle cut short */
        const char *want;
    } cases[] = {
        {"{\"format\":\"autotune-bundle\",\"version\":2,\"records\":0}\n", "version 2 is newer"},
        {"{\"format\":\"kerneltuner\",\"version\":1,\"records\":0}\n", "line 1: no \"format\""},
        {"{\"format\":\"autotune-bundle\",\"version\":1}\n", "line 1: required field 'records'"},
        {NULL, "truncated"},
        {"", "is empty"},
        {"\x01\x02garbage\xff\n\n", "line 1: not an autotune bundle"},
        {"%s{\"table\":\"result\",\"op\":\"conv\"}\n", "line 2: "},
        {"%snot json\n", "line 2: not a JSON object"},
        {"%s{\"table\":\"best\"} trailing\n", "line 2: not a JSON object"},
        {"%s[1,2]\n", "line 2: not a JSON object"},
        {"%s{\"table\":\"result\"}\n", "line 2: required field 'op' is missing"},
        {"%s%s\n%s\n", "holds 2 records, but its header says 3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[16384];
        if (!cases[i].text) {
            size_t n = 0;
            char *g = slurp(good, &n);
            write_file(bad, g, n / 2);
            free(g);
        } else {
            /* records: the header count first, then the good first line where asked */
            int nrec = strstr(cases[i].want, "says 3") ? 3 : 1;
            char h[256];
            snprintf(h, sizeof h, hdr, nrec);
            snprintf(text, sizeof text, cases[i].text, h, line, line);
            write_gz(bad, text);
        }
        assert_refused(dst, bad, cases[i].want);
        size_t n = 0;
        char *f = slurp(file, &n);
        assert_int_equal(n, n0);
        assert_memory_equal(f, f0, n0);
        free(f);
        /* a database that does not exist is not created */
        assert_refused(fresh, bad, cases[i].want);
        struct stat st;
        assert_int_not_equal(stat(fresh, &st), 0);
    }

    /* Garbage that is not even gzip. */
    write_file(bad,
               "\x7f"
               "ELF\x02\x01\x01\x00\x00\x00",
               10);
    assert_refused(dst, bad, "line 1: not an autotune bundle");

    /* A record of an operation this library does not know. */
    char *conv = strdup(line);
    char *p = strstr(conv, "\"op\":\"attention\",\"problem\":\"attention/");
    assert_non_null(p);
    const char *to = "\"op\":\"attenzion\",\"problem\":\"attenzion/";
    memcpy(p, to, strlen(to));
    char text[16384], h[256];
    snprintf(h, sizeof h, hdr, 1);
    snprintf(text, sizeof text, "%s%s\n", h, conv);
    write_gz(bad, text);
    assert_refused(dst, bad, "line 2: a record of operation 'attenzion'");
    /* ... and the same line with the known operation is fine */
    snprintf(text, sizeof text, "%s%s\n", h, line);
    write_gz(bad, text);
    const char *b[1] = {bad};
    at_import_report r = import_ok(dst, b, 1, AT_PREFER_FASTER);
    assert_int_equal(r.unchanged, 1);
    free(conv), free(line), free(body), free(f0), free(file);
    free(src), free(dst), free(good), free(bad), free(fresh);
}

/* Two databases with the same keys: a results record and a best entry each. */
static void fill_pair(const char *x, const char *y)
{
    at_db *a = open_db(x), *b = open_db(y);
    /* results: X is slower and newer; a failed candidate in Y that is "faster" loses */
    put_result(a, PROBLEM, D1, g_hash, "BM=32", AT_RS_OK, 10, 200, "gemm");
    put_result(b, PROBLEM, D1, g_hash, "BM=32", AT_RS_OK, 5, 100, "gemm");
    put_result(a, PROBLEM, D1, g_hash, "BM=64", AT_RS_OK, 10, 100, "gemm");
    put_result(b, PROBLEM, D1, g_hash, "BM=64", AT_RS_WRONG_RESULT, 1, 300, "gemm");
    /* best: Y's is faster but of a hash no template trusts; X's is trusted (superseded) */
    put_best(a, PROBLEM, D1, OLD, "BM=64", 10, 100, "gemm");
    put_best(b, PROBLEM, D1, "fedcba9876543210", "BM=32", 2, 50, "gemm");
    /* disjoint records */
    put_result(a, "gemm/f32/nn/16x16x16", D1, g_hash, "BM=16", AT_RS_OK, 1, 1, "gemm");
    put_result(b, "gemm/f32/nn/32x32x32", D2, g_hash, "BM=16", AT_RS_OK, 2, 2, "gemm");
    put_device(a, D1, 10, "old driver");
    put_device(b, D1, 20, "new driver");
    at_db_close(a);
    at_db_close(b);
}

static void get_r(const char *path, const char *config, at_result_rec *r)
{
    at_db *db = NULL;
    assert_int_equal(at_db_open(path, AT_DB_READONLY, &db), AT_OK);
    char *key = at_db_result_key(PROBLEM, D1, g_hash, config);
    assert_int_equal(at_db_get_result(db, key, r), AT_OK);
    free(key);
    at_db_close(db);
}

static void get_b(const char *path, at_best_rec *b)
{
    at_db *db = NULL;
    assert_int_equal(at_db_open(path, AT_DB_READONLY, &db), AT_OK);
    char *key = at_db_best_key(PROBLEM, D1);
    assert_int_equal(at_db_get_best(db, key, b), AT_OK);
    free(key);
    at_db_close(db);
}

static void test_merge_rule(void **state)
{
    char *x = sub(state, "x"), *y = sub(state, "y"), *yb = sub(state, "y.jsonl.gz");
    fill_pair(x, y);
    export_ok(y, yb, -1);
    const at_prefer prefs[] = {AT_PREFER_FASTER, AT_PREFER_NEWER, AT_PREFER_EXISTING};
    for (int p = 0; p < 3; p++) {
        /* commutative: X + Y and Y (as a bundle) + X give the same database */
        char name[64];
        snprintf(name, sizeof name, "xy%d", p);
        char *xy = sub(state, name);
        snprintf(name, sizeof name, "yx%d", p);
        char *yx = sub(state, name);
        const char *in1[2] = {x, y}, *in2[2] = {yb, x};
        at_import_report r = import_ok(xy, in1, 2, prefs[p]);
        assert_int_equal(r.records, 8);
        assert_int_equal(r.imported, 5);
        import_ok(yx, in2, 2, prefs[p]);
        char *d1 = dump(xy), *d2 = dump(yx);
        assert_string_equal(d1, d2);
        free(d1), free(d2);

        at_result_rec r32, r64;
        at_best_rec b;
        at_device_rec dev;
        get_r(xy, "BM=32", &r32);
        get_r(xy, "BM=64", &r64);
        get_b(xy, &b);
        at_db *db = NULL;
        assert_int_equal(at_db_open(xy, AT_DB_READONLY, &db), AT_OK);
        assert_int_equal(at_db_get_device(db, D1, &dev), AT_OK);
        at_db_close(db);
        assert_string_equal(dev.driver, "new driver"); /* devices: the newer */
        if (prefs[p] == AT_PREFER_NEWER) {
            assert_true(r32.median_us == 10); /* X's, newer */
            assert_int_equal(r64.status, AT_RS_WRONG_RESULT);
            assert_string_equal(b.template_hash, OLD);
        } else { /* faster; existing picks the faster among the inputs */
            assert_true(r32.median_us == 5);
            assert_int_equal(r64.status, AT_RS_OK);    /* an ok result before a failed one */
            assert_string_equal(b.template_hash, OLD); /* trusted before faster */
        }
        free(xy), free(yx);
    }

    /* Into an existing database: X imports Y's bundle. */
    const char *in[1] = {yb};
    char *x2 = sub(state, "x2"), *xb = sub(state, "x.jsonl.gz");
    export_ok(x, xb, -1);
    const char *inx[1] = {xb};
    import_ok(x2, inx, 1, AT_PREFER_FASTER);
    at_import_report r = import_ok(x2, in, 1, AT_PREFER_EXISTING);
    assert_int_equal(r.kept, 3); /* the three shared keys all stay X's */
    assert_int_equal(r.imported, 1);
    at_result_rec r32;
    get_r(x2, "BM=32", &r32);
    assert_true(r32.median_us == 10);
    r = import_ok(x2, in, 1, AT_PREFER_FASTER);
    assert_int_equal(r.imported, 1); /* Y's faster BM=32 */
    assert_int_equal(r.kept, 2);
    assert_int_equal(r.unchanged, 1);
    get_r(x2, "BM=32", &r32);
    assert_true(r32.median_us == 5);
    r = import_ok(x2, in, 1, AT_PREFER_NEWER);
    assert_int_equal(r.imported, 1); /* Y's newer failed BM=64 */
    free(x), free(y), free(yb), free(x2), free(xb);
}

static void test_filters_and_stats(void **state)
{
    char *src = sub(state, "src"), *f = sub(state, "f.jsonl.gz");
    fill_source(src);
    char why[1024];
    int64_t n = 0;
    assert_int_equal(at_db_export_bundle(src, f, "attention", NULL, 0, &n, why, sizeof why), AT_OK);
    assert_int_equal(n, 1);
    assert_int_equal(at_db_export_bundle(src, f, NULL, "cuda/*", 0, &n, why, sizeof why), AT_OK);
    assert_int_equal(n, 2);
    assert_int_equal(at_db_export_bundle(src, f, NULL, "*haswell*", 0, &n, why, sizeof why), AT_OK);
    assert_int_equal(n, 5);
    assert_int_equal(at_db_export_bundle(src, f, "gemm", "NVIDIA H100*", 0, &n, why, sizeof why),
                     AT_OK); /* the device name */
    assert_int_equal(n, 2);
    assert_int_equal(at_db_export_bundle(src, f, NULL, NULL, 1, &n, why, sizeof why), AT_OK);
    assert_int_equal(n, 2);
    char *body = bundle_body(f);
    assert_null(strstr(body, "\"table\":\"result\""));
    free(body);

    at_db_stats st;
    assert_int_equal(at_db_stats_read(src, &st, why, sizeof why), AT_OK);
    assert_int_equal(st.total.results_ok, 4);
    assert_int_equal(st.total.results_failed, 1);
    assert_int_equal(st.total.best, 2);
    assert_int_equal(st.nops, 2);
    assert_string_equal(st.ops[0].name, "attention");
    assert_int_equal(st.ops[1].results_ok, 3);
    assert_int_equal(st.ndevices, 2);
    assert_string_equal(st.devices[0].name, D2);
    assert_int_equal(st.devices[1].best, 1);
    assert_int_equal(st.ntemplates, 3); /* attention, gemm, gemm_wgmma */
    assert_string_equal(st.templates[2].name, "gemm_wgmma");
    assert_int_equal(st.templates[2].results_ok, 1);
    assert_int_equal(st.templates[2].best, 1);
    at_db_stats_clear(&st);
    free(src), free(f);
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_layer(void **state)
{
    char *src = sub(state, "src"), *f = sub(state, "l.jsonl.gz"), *cache = sub(state, "cache");
    fill_source(src);
    export_ok(src, f, 7);
    size_t n0 = 0;
    char *f0 = slurp(f, &n0);
    setenv("XDG_CACHE_HOME", cache, 1);
    char *layers = sub(state, "cache/autotune/layers");
    at_db *db = NULL;
    char why[1024];
    assert_int_equal(at_bundle_layer_open(f, &db, why, sizeof why), AT_OK);
    assert_non_null(strstr(at_db_path(db), layers));
    assert_non_null(at_db_readonly_reason(db));
    at_best_rec b;
    char *key = at_db_best_key(PROBLEM, D2);
    assert_int_equal(at_db_get_best(db, key, &b), AT_OK);
    assert_string_equal(b.template_name, "gemm_wgmma");
    char *copy = strdup(at_db_path(db));
    at_db_close(db);
    assert_int_equal(count_entries(layers), 1);
    char *data = at_asprintf("%s/data.mdb", copy);
    struct stat s1, s2;
    assert_int_equal(stat(data, &s1), 0);
    /* again: the same copy, not imported again */
    assert_int_equal(at_bundle_layer_open(f, &db, why, sizeof why), AT_OK);
    assert_string_equal(at_db_path(db), copy);
    at_db_close(db);
    assert_int_equal(stat(data, &s2), 0);
    assert_true(s1.st_mtim.tv_sec == s2.st_mtim.tv_sec && s1.st_mtim.tv_nsec == s2.st_mtim.tv_nsec);
    assert_int_equal(count_entries(layers), 1);
    /* a changed bundle (another mtime) is another copy */
    struct timespec ts[2] = {{0, UTIME_OMIT}, {12345, 0}};
    assert_int_equal(utimensat(AT_FDCWD, f, ts, 0), 0);
    assert_int_equal(at_bundle_layer_open(f, &db, why, sizeof why), AT_OK);
    assert_string_not_equal(at_db_path(db), copy);
    at_db_close(db);
    assert_int_equal(count_entries(layers), 2);
    /* the bundle itself is never written */
    size_t n1 = 0;
    char *f1 = slurp(f, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(f0, f1, n0);

    /* A cache that cannot be written: a copy of its own, removed at close. */
    char *blocker = sub(state, "blocker");
    write_file(blocker, "x", 1);
    setenv("XDG_CACHE_HOME", blocker, 1); /* a file: nothing can be made under it */
    assert_int_equal(at_bundle_layer_open(f, &db, why, sizeof why), AT_OK);
    char *own = strdup(at_db_path(db));
    assert_null(strstr(own, blocker));
    assert_int_equal(at_db_get_best(db, key, &b), AT_OK);
    struct stat st;
    assert_int_equal(stat(own, &st), 0);
    at_db_close(db);
    assert_int_not_equal(stat(own, &st), 0);

    /* a bad bundle: an error, no copy */
    setenv("XDG_CACHE_HOME", cache, 1);
    write_gz(f, "{\"format\":\"autotune-bundle\",\"version\":9,\"records\":0}\n");
    assert_int_equal(at_bundle_layer_open(f, &db, why, sizeof why), AT_ERR_INVALID_ARG);
    assert_null(db);
    assert_non_null(strstr(why, "newer"));
    assert_int_equal(count_entries(layers), 2);
    unsetenv("XDG_CACHE_HOME");
    free(own), free(blocker), free(f0), free(f1), free(data), free(copy), free(key);
    free(layers), free(src), free(f), free(cache);
}

/* Processes opening one layer at once all get it; one copy stands, no temporary is left. */
static void test_layer_race(void **state)
{
    char *src = sub(state, "src"), *f = sub(state, "r.jsonl.gz"), *cache = sub(state, "cache");
    fill_source(src);
    export_ok(src, f, 7);
    setenv("XDG_CACHE_HOME", cache, 1);
    enum { N = 4 };
    pid_t kids[N];
    fflush(NULL);
    for (int i = 0; i < N; i++) {
        kids[i] = fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0) {
            at_db *db = NULL;
            char why[1024];
            at_best_rec b;
            char *key = at_db_best_key(PROBLEM, D2);
            int ok = at_bundle_layer_open(f, &db, why, sizeof why) == AT_OK &&
                     at_db_get_best(db, key, &b) == AT_OK;
            at_db_close(db);
            _exit(ok ? 0 : 1);
        }
    }
    for (int i = 0; i < N; i++) {
        int st = 0;
        assert_int_equal(waitpid(kids[i], &st, 0), kids[i]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    char *layers = sub(state, "cache/autotune/layers");
    assert_int_equal(count_entries(layers), 1);
    unsetenv("XDG_CACHE_HOME");
    free(layers), free(src), free(f), free(cache);
}

/* A database written by autotune 0.1 (schema 1, v1 records) exports and imports. */
static void test_v1_fixture(void **state)
{
    char *dir = sub(state, "v1"), *file = sub(state, "v1/data.mdb"), *f = sub(state, "v1.gz"),
         *dst = sub(state, "dst");
    assert_int_equal(mkdir(dir, 0777), 0);
    size_t n = 0;
    char *data = slurp(AT_SOURCE_DIR "/tests/fixtures/db-v1/data.mdb", &n);
    write_file(file, data, n);
    char why[1024];
    int64_t records = 0;
    assert_int_equal(at_db_export_bundle(dir, f, NULL, NULL, 0, &records, why, sizeof why), AT_OK);
    assert_true(records > 1);
    size_t m = 0;
    char *after = slurp(file, &m);
    assert_int_equal(m, n); /* read-only: the old file is untouched */
    assert_memory_equal(after, data, n);
    const char *in[1] = {f};
    at_import_report r = import_ok(dst, in, 1, AT_PREFER_FASTER);
    assert_int_equal(r.imported, records);
    assert_int_equal(r.devices, 0); /* no devices table in schema 1: identities from the keys */
    const char *dbs[1] = {dir};
    r = import_ok(dst, dbs, 1, AT_PREFER_FASTER); /* the database itself, as merge reads it */
    assert_int_equal(r.unchanged, records);
    free(after), free(data), free(dir), free(file), free(f), free(dst);
}

static int setup(void **state)
{
    (void)state;
    at_template *t = NULL;
    if (at_template_load("gemm", "opencl", &t) != AT_OK) {
        fprintf(stderr, "cannot load the gemm template: %s\n", at_errmsg());
        return -1;
    }
    snprintf(g_hash, sizeof g_hash, "%s", t->hash);
    at_template_free(t);
    return 0;
}

int main(void)
{
    setenv("AUTOTUNE_SHIPPED_DB", "", 1);
    setenv("AUTOTUNE_DB_PATH", "", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_bad_bundles, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_merge_rule, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_filters_and_stats, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_layer, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_layer_race, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_v1_fixture, make_tmp, remove_tmp),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
