/* gpu.c — the layer the CUDA and HIP backends share (see gpu.h): libraries loaded once, the
 * device (stream, timing events, buffers, modules, the event-timed launch), runtime compiles and
 * the device limits, over each vendor's table of calls. */
#define _GNU_SOURCE
#include "tuner/backends/gpu.h"

#include "base/sbuf.h"

#include <dlfcn.h>
#include <glob.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The device part of a GPU backend's at_bdev: its first member. */
static at_gpu_dev *gpu_of(at_bdev *d) { return (at_gpu_dev *)(void *)d; }

/* ---- libraries loaded once ---------------------------------------------------------------- */

/* AUTOTUNE_LIBRARY_SEARCH, a list of "loader", "folders" and "python", limits where a library
 * is looked for (tests, and to see which place a run would use); unset: everywhere. */
static bool search_on(const char *what)
{
    const char *e = getenv("AUTOTUNE_LIBRARY_SEARCH");
    if (!e || !*e) return true;
    size_t n = strlen(what);
    for (const char *p = e; (p = strstr(p, what)) != NULL; p += n)
        if ((p == e || strchr(", :", p[-1])) && strchr(", :", p[n])) return true;
    return false;
}

static void looked_add(at_gpu_lib *l, const char *place)
{
    size_t len = strlen(l->looked);
    if (len + 1 < sizeof l->looked)
        snprintf(l->looked + len, sizeof l->looked - len, "%s%s", len ? "; " : "", place);
}

/* The first of l->names in dir that loads; l->path names it. A file that is there but does not
 * load says why in l->why. */
static void *try_dir(at_gpu_lib *l, const char *dir)
{
    for (size_t i = 0; l->names[i]; i++) {
        char path[sizeof l->path];
        if (snprintf(path, sizeof path, "%s/%s", dir, l->names[i]) >= (int)sizeof path) continue;
        if (access(path, F_OK) != 0) continue;
        void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (lib) {
            snprintf(l->path, sizeof l->path, "%s", path);
            return lib;
        }
        const char *e = dlerror();
        snprintf(l->why, sizeof l->why, "cannot load %s: %s", path, e ? e : "unknown error");
    }
    return NULL;
}

/* Every folder pattern matches, newest (last in glob's order) first. */
static void *try_pattern(at_gpu_lib *l, const char *pattern)
{
    looked_add(l, pattern);
    glob_t g;
    if (glob(pattern, GLOB_ONLYDIR, NULL, &g) != 0) return NULL;
    void *lib = NULL;
    for (size_t i = g.gl_pathc; !lib && i-- > 0;) lib = try_dir(l, g.gl_pathv[i]);
    globfree(&g);
    return lib;
}

/* "@python/rest" for each python3 on PATH: <folder above its bin>/rest. */
static void *try_python(at_gpu_lib *l, const char *rest)
{
    const char *path = getenv("PATH");
    char seen[8][512];
    int nseen = 0;
    for (const char *p = path; p && *p;) {
        size_t n = strcspn(p, ":");
        char dir[512], exe[600], prefix[512], pattern[1024];
        if (n > 0 && n < sizeof dir) {
            memcpy(dir, p, n);
            dir[n] = '\0';
            snprintf(exe, sizeof exe, "%s/python3", dir);
            char *slash = strrchr(dir, '/');
            if (access(exe, X_OK) == 0 && slash) {
                snprintf(prefix, sizeof prefix, "%.*s", (int)(slash - dir), dir);
                bool dup = false;
                for (int i = 0; i < nseen; i++) dup = dup || strcmp(seen[i], prefix) == 0;
                if (!dup && nseen < 8) {
                    snprintf(seen[nseen++], sizeof seen[0], "%s", prefix);
                    snprintf(pattern, sizeof pattern, "%s%s", prefix, rest);
                    void *lib = try_pattern(l, pattern);
                    if (lib) return lib;
                }
            }
        }
        p += n + (p[n] == ':');
    }
    return NULL;
}

/* l->places in order (gpu.h says how they are written). */
static void *search_places(at_gpu_lib *l)
{
    for (size_t i = 0; l->places && l->places[i]; i++) {
        const char *place = l->places[i];
        void *lib = NULL;
        if (strncmp(place, "@python/", 8) == 0) {
            if (search_on("python")) lib = try_python(l, place + 7);
        } else if (search_on("folders") && place[0] == '$') {
            char var[64], pattern[1024];
            size_t n = strcspn(place + 1, "/");
            if (n >= sizeof var) continue;
            memcpy(var, place + 1, n);
            var[n] = '\0';
            const char *v = getenv(var);
            if (!v || !*v) continue;
            snprintf(pattern, sizeof pattern, "%s%s", v, place + 1 + n);
            lib = try_pattern(l, pattern);
        } else if (search_on("folders")) {
            lib = try_pattern(l, place);
        }
        if (lib) return lib;
    }
    return NULL;
}

/* The variable's path, else the bare names (the loader's path and ld.so.cache), else the
 * places. */
static void *lib_find(at_gpu_lib *l, const char **used)
{
    const char *env = getenv(l->env);
    size_t nnames = 0;
    while (l->names[nnames]) nnames++;
    if (env && *env) return at_dl_open(l->env, l->names, nnames, used, l->why, sizeof l->why);
    void *lib = NULL;
    if (search_on("loader")) {
        lib = at_dl_open(l->env, l->names, nnames, used, l->why, sizeof l->why);
        if (lib) return lib;
        looked_add(l, "the loader's path and cache (ldconfig)");
    } else {
        snprintf(l->why, sizeof l->why, "%s not found", l->names[0]);
    }
    lib = search_places(l);
    if (lib) {
        *used = l->path;
        return lib;
    }
    /* why: the bare name's failure (or a found file's, when one did not load), then where */
    char w[sizeof l->why];
    snprintf(w, sizeof w, "%.500s (looked in: %s)", l->why,
             l->looked[0] ? l->looked : "nowhere, by AUTOTUNE_LIBRARY_SEARCH");
    snprintf(l->why, sizeof l->why, "%s", w);
    return NULL;
}

static void lib_open(at_gpu_lib *l)
{
    const char *used = NULL;
    void *lib = lib_find(l, &used);
    if (!lib) return;
    void (*none)(void) = NULL;
    for (size_t i = 0; i < l->nsyms; i++) {
        if (at_dl_symbol(lib, used, l->syms[i].name, l->syms[i].slot, l->why, sizeof l->why) == 0)
            continue;
        for (size_t j = 0; j < l->nsyms; j++) memcpy(l->syms[j].slot, &none, sizeof none);
        dlclose(lib);
        return;
    }
    for (size_t i = 0; i < l->nopt; i++) /* absent from this version: the slot says so */
        if (at_dl_symbol(lib, used, l->opt[i].name, l->opt[i].slot, l->why, sizeof l->why) != 0)
            memcpy(l->opt[i].slot, &none, sizeof none);
    l->why[0] = '\0';
    /* the file the loader took, for messages and `autotune devices` (found in a place: that) */
    Dl_info info;
    void *sym = NULL;
    if (l->nsyms) memcpy(&sym, l->syms[0].slot, sizeof sym);
    if (!l->path[0] && sym && dladdr(sym, &info) && info.dli_fname && info.dli_fname[0] == '/')
        snprintf(l->path, sizeof l->path, "%s", info.dli_fname);
    else if (!l->path[0])
        snprintf(l->path, sizeof l->path, "%s", used);
    if (l->start && l->start(l, used) != 0) return;
    l->status = AT_OK;
    l->why[0] = '\0';
}

at_status at_gpu_lib_load(at_gpu_lib *l)
{
    pthread_mutex_lock(&l->mu);
    if (!l->tried) {
        l->tried = true;
        l->status = AT_ERR_NO_BACKEND;
        lib_open(l);
    }
    at_status s = l->status;
    pthread_mutex_unlock(&l->mu);
    /* why is final once tried: it is read without the lock. */
    return s == AT_OK ? AT_OK : at_fail(s, "%s unavailable: %s", l->name, l->why);
}

at_status at_gpu_probe(at_gpu_api *rt, at_gpu_rtc *cc, char *why, size_t whylen)
{
    at_status s = at_gpu_lib_load(&rt->lib);
    const char *reason = rt->lib.why;
    if (s == AT_OK) {
        s = at_gpu_lib_load(&cc->lib);
        reason = cc->lib.why;
    }
    /* loaded: which files (the first thing to know when a build does not run somewhere) */
    if (why && whylen && s == AT_OK)
        snprintf(why, whylen, "%s: %.200s; %s: %.200s", rt->lib.name, rt->lib.path, cc->version,
                 cc->lib.path);
    else if (why && whylen)
        snprintf(why, whylen, "%s", reason);
    return s;
}

/* ---- errors ------------------------------------------------------------------------------- */

const char *at_gpu_errname(const char *(*name_of)(int), const char *api, int r, char buf[32])
{
    const char *s = name_of ? name_of(r) : NULL;
    if (s) return s;
    snprintf(buf, 32, "%s error %d", api, r);
    return buf;
}

static const char *api_err(const at_gpu_api *api, int r, char buf[32])
{
    return at_gpu_errname(api->error_name, api->lib.name, r, buf);
}

at_status at_gpu_api_fail(const at_gpu_api *api, at_status s, const char *call, const char *note,
                          int r)
{
    char buf[32];
    return at_fail(s, "%s %s%s failed: %s", api->lib.name, call, note, api_err(api, r, buf));
}

at_status at_gpu_rtc_fail(const at_gpu_rtc *cc, const char *call, int r)
{
    char buf[32];
    return at_fail(AT_ERR_COMPILE, "%s %s failed: %s", cc->lib.name, call,
                   at_gpu_errname(cc->error_name, cc->lib.name, r, buf));
}

/* ---- the runtime -------------------------------------------------------------------------- */

int at_gpu_runtime_start(at_gpu_lib *l, const char *used)
{
    at_gpu_api *api = (at_gpu_api *)(void *)l; /* lib is its first member */
    char buf[32];
    int r = api->fn.init(0);
    if (r != 0) { /* no device, no kernel driver, no access to it... */
        snprintf(l->why, sizeof l->why, "%s failed: %s (%s)", api->call.init, api_err(api, r, buf),
                 used);
        return -1;
    }
    if (api->fn.version(&api->version) != 0) api->version = 0;
    int n = 0;
    r = api->fn.device_count(&n);
    if (r != 0) {
        snprintf(l->why, sizeof l->why, "%s failed: %s", api->call.device_count,
                 api_err(api, r, buf));
        return -1;
    }
    if (n <= 0) {
        snprintf(l->why, sizeof l->why, "%s reports no device", api->provider);
        return -1;
    }
    api->ndevs = n;
    return 0;
}

int at_gpu_rtc_start(at_gpu_lib *l, const char *used)
{
    at_gpu_rtc *cc = (at_gpu_rtc *)(void *)l; /* lib is its first member */
    int major = 0, minor = 0;
    int r = cc->fn.version(&major, &minor);
    if (r != 0) {
        char buf[32];
        snprintf(l->why, sizeof l->why, "%s failed: %s (%s)", cc->call.version,
                 at_gpu_errname(cc->error_name, l->name, r, buf), used);
        return -1;
    }
    snprintf(cc->version, sizeof cc->version, "%s %d.%d", cc->version_name, major, minor);
    return 0;
}

void at_gpu_device_limits(at_device_info *out, const at_gpu_attrs *a,
                          int64_t (*attr)(int dev, int number), int dev, int64_t total_mem)
{
    out->compute_units = attr(dev, a->compute_units);
    out->max_work_group_size = attr(dev, a->max_threads);
    out->max_work_item_sizes[0] = attr(dev, a->block_x);
    out->max_work_item_sizes[1] = attr(dev, a->block_y);
    out->max_work_item_sizes[2] = attr(dev, a->block_z);
    out->local_mem_bytes = attr(dev, a->shared);
    out->max_registers_per_block = attr(dev, a->registers);
    out->l2_bytes = attr(dev, a->l2);
    out->global_mem_bytes = total_mem;
    out->max_alloc_bytes = total_mem;
    out->clock_mhz = attr(dev, a->clock_khz) / 1000;
    out->warp_size = attr(dev, a->warp);
    out->is_cpu = false;
}

void at_gpu_target_info(at_device_info *out, const char *backend, const char *vendor,
                        const char *arch)
{
    memset(out, 0, sizeof *out);
    snprintf(out->backend, sizeof out->backend, "%s", backend);
    snprintf(out->name, sizeof out->name, "%s (compile only)", arch);
    snprintf(out->vendor, sizeof out->vendor, "%s", vendor);
    snprintf(out->arch, sizeof out->arch, "%s", arch);
    snprintf(out->key, sizeof out->key, "%s/%s/compile-only/0", backend, arch);
    out->max_work_group_size = 1024;
    out->max_work_item_sizes[0] = out->max_work_item_sizes[1] = 1024;
}

/* ---- devices ------------------------------------------------------------------------------ */

at_status at_gpu_dev_new(size_t size, const at_gpu_api *api, at_gpu_rtc *rtc, const char *arch,
                         bool compile_only, at_bdev **out)
{
    *out = NULL;
    at_gpu_dev *g = calloc(1, size);
    if (!g) return at_fail(AT_ERR_NO_MEMORY, "out of memory opening %s %s", api->lib.name, arch);
    g->api = api;
    g->rtc = rtc;
    g->compile_only = compile_only;
    snprintf(g->arch, sizeof g->arch, "%s", arch);
    if (!compile_only) {
        if (pthread_mutex_init(&g->timing_mu, NULL) != 0) {
            free(g);
            return at_fail(AT_ERR_NO_MEMORY, "cannot create a mutex for %s device %s",
                           api->lib.name, arch);
        }
        g->mu_ok = true;
    }
    *out = (at_bdev *)(void *)g;
    return AT_OK;
}

at_status at_gpu_dev_start(at_bdev *d)
{
    at_gpu_dev *g = gpu_of(d);
    const at_gpu_api *api = g->api;
    const char *call = NULL;
    int r = 0;
    if ((r = api->fn.activate(d)) != 0)
        call = api->call.activate;
    else if (!g->stream && (r = api->fn.stream_create(&g->stream)) != 0) {
        g->stream = NULL;
        call = api->call.stream_create;
    } else if ((r = api->fn.event_create(&g->ev_start)) != 0) {
        g->ev_start = NULL;
        call = api->call.event_create;
    } else if ((r = api->fn.event_create(&g->ev_end)) != 0) {
        g->ev_end = NULL;
        call = api->call.event_create;
    }
    return call ? at_gpu_api_fail(api, AT_ERR_NO_DEVICE, call, "", r) : AT_OK;
}

void at_gpu_dev_stop(at_bdev *d)
{
    at_gpu_dev *g = gpu_of(d);
    const at_gpu_api *api = g->api;
    int own = g->stream && !g->borrowed_stream;
    if (own) api->fn.stream_sync(g->stream);
    if (g->ev_start) api->fn.event_destroy(g->ev_start);
    if (g->ev_end) api->fn.event_destroy(g->ev_end);
    if (own) api->fn.stream_destroy(g->stream);
}

void at_gpu_dev_free(at_bdev *d)
{
    if (!d) return;
    at_gpu_dev *g = gpu_of(d);
    if (g->mu_ok) pthread_mutex_destroy(&g->timing_mu);
    free(g);
}

at_status at_gpu_need_device(at_bdev *d, const char *what)
{
    if (!d) return at_fail(AT_ERR_INVALID_ARG, "%s: NULL device", what);
    at_gpu_dev *g = gpu_of(d);
    const at_gpu_api *api = g->api;
    if (g->compile_only)
        return at_fail(AT_ERR_UNSUPPORTED, "%s: the %s target %s is compile-only (open_target)",
                       what, api->lib.name, g->arch);
    int r = api->fn.activate(d); /* the calling thread may be new */
    return r == 0 ? AT_OK : at_gpu_api_fail(api, AT_ERR_LAUNCH, api->call.activate, "", r);
}

/* ---- programs ----------------------------------------------------------------------------- */

static at_bprog *prog_new(at_bdev *d, const char *kernel_name)
{
    size_t n = strlen(kernel_name) + 1;
    at_bprog *p = calloc(1, sizeof *p + n);
    if (!p) return NULL;
    p->dev = d;
    memcpy(p->name, kernel_name, n);
    return p;
}

void at_gpu_program_free(at_bprog *p)
{
    if (!p) return;
    if (p->module && gpu_of(p->dev)->api->fn.activate(p->dev) == 0)
        gpu_of(p->dev)->api->fn.module_unload(p->module);
    free(p->code);
    free(p->log);
    free(p->meta);
    free(p);
}

/* Loads p's code on p's device and finds its kernel. */
static at_status load_module(at_bprog *p)
{
    at_gpu_dev *g = gpu_of(p->dev);
    const at_gpu_api *api = g->api;
    AT_TRY(at_gpu_need_device(p->dev, "load"));
    char buf[32];
    int r = api->fn.module_load(&p->module, p->code);
    if (r != 0) {
        p->module = NULL;
        return at_fail(AT_ERR_COMPILE, "%s %s (%zu-byte %s, device %s) failed: %s", api->lib.name,
                       api->call.module_load, p->code_len, g->rtc->code_name, g->arch,
                       api_err(api, r, buf));
    }
    r = api->fn.module_function(&p->fn, p->module, p->name);
    if (r != 0)
        return at_fail(AT_ERR_COMPILE, "%s %s(\"%s\") failed: %s", api->lib.name,
                       api->call.module_function, p->name, api_err(api, r, buf));
    return api->loaded ? api->loaded(p) : AT_OK;
}

/* The compiler's log (malloc'd; NULL if it has none). */
static char *rtc_log(const at_gpu_rtc *cc, void *prog)
{
    size_t n = 0;
    if (cc->fn.log_size(prog, &n) != 0 || n == 0) return NULL;
    char *log = malloc(n + 1);
    if (!log) return NULL;
    if (cc->fn.log(prog, log) != 0) n = 0;
    log[n] = '\0';
    return log;
}

/* The compiled code of prog into p. */
static at_status rtc_code(const at_gpu_rtc *cc, void *prog, at_bprog *p, const char *arch)
{
    size_t len = 0;
    int r = cc->fn.code_size(prog, &len);
    if (r != 0) return at_gpu_rtc_fail(cc, cc->call.code_size, r);
    if (len == 0)
        return at_fail(AT_ERR_COMPILE, "%s gave no %s for %s (target %s)", cc->lib.name,
                       cc->code_name, p->name, arch);
    if (!(p->code = malloc(len)))
        return at_fail(AT_ERR_NO_MEMORY, "out of memory for a %zu-byte %s", len, cc->code_name);
    if ((r = cc->fn.code(prog, p->code)) != 0) return at_gpu_rtc_fail(cc, cc->call.code, r);
    p->code_len = len;
    return AT_OK;
}

const char **at_gpu_options(const char *arch_opt, const char *const *fixed, char *user, int *argc,
                            char **defines)
{
    size_t nfixed = 0;
    while (fixed && fixed[nfixed]) nfixed++;
    size_t cap = 1 + nfixed + strlen(user) / 2 + 1;
    const char **argv = calloc(cap, sizeof *argv);
    if (!argv) return NULL;
    int n = 0;
    argv[n++] = arch_opt;
    for (size_t i = 0; i < nfixed; i++) argv[n++] = fixed[i];
    at_sbuf defs = {0};
    char *save = NULL;
    for (char *tok = strtok_r(user, " \t\r\n", &save); tok;
         tok = strtok_r(NULL, " \t\r\n", &save)) {
        if (!defines || strncmp(tok, "-D", 2) != 0 || !tok[2]) {
            argv[n++] = tok;
            continue;
        }
        const char *eq = strchr(tok + 2, '=');
        int name_len = eq ? (int)(eq - tok - 2) : (int)strlen(tok + 2);
        at_sb_printf(&defs, "#define %.*s %s\n", name_len, tok + 2, eq ? eq + 1 : "1");
    }
    /* "" when there is no -D option: the caller still puts its #line before the source. */
    char *text = defines ? at_sb_take(&defs) : NULL;
    if (defines && !text) {
        free(argv);
        return NULL;
    }
    *argc = n;
    if (defines) *defines = text;
    return argv;
}

at_status at_gpu_compile(at_bdev *d, const char *src, const char *options, const char *kernel_name,
                         at_bprog **out, char **log)
{
    *out = NULL;
    if (log) *log = NULL;
    if (!d || !src || !kernel_name)
        return at_fail(AT_ERR_INVALID_ARG, "compile: NULL device, source or kernel name");
    at_gpu_dev *g = gpu_of(d);
    at_gpu_rtc *cc = g->rtc;
    AT_TRY(at_gpu_lib_load(&cc->lib));

    char arch_opt[96], file[128];
    snprintf(arch_opt, sizeof arch_opt, "%s%s", cc->arch_flag, g->arch);
    snprintf(file, sizeof file, "%s%s", kernel_name, cc->file_ext);
    char *user = at_strdup(options ? options : ""), *defines = NULL, *full = NULL;
    int argc = 0;
    const char **argv = user ? at_gpu_options(arch_opt, cc->fixed, user, &argc,
                                              cc->defines_in_source ? &defines : NULL)
                             : NULL;
    if (defines) full = at_asprintf("%s#line 1\n%s", defines, src);
    at_bprog *p = prog_new(d, kernel_name);
    if (!argv || (defines && !full) || !p) {
        free(user);
        free(argv);
        free(defines);
        free(full);
        free(p);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory compiling %s", kernel_name);
    }

    if (cc->serial) pthread_mutex_lock(cc->serial);
    void *prog = NULL;
    at_status s = AT_OK;
    int r = cc->fn.create(&prog, full ? full : src, file, 0, NULL, NULL);
    if (r != 0) {
        prog = NULL;
        s = at_gpu_rtc_fail(cc, cc->call.create, r);
        goto done;
    }
    if (cc->before && (s = cc->before(prog, kernel_name)) != AT_OK) goto done;
    r = cc->fn.compile(prog, argc, argv);
    p->log = rtc_log(cc, prog);
    if (r != 0) {
        char head[2048], buf[32];
        at_log_head(p->log, head, sizeof head);
        s = at_fail(AT_ERR_COMPILE, "%s compile of %s for %s failed (%s)%s%s", cc->lib.name,
                    kernel_name, g->arch, at_gpu_errname(cc->error_name, cc->lib.name, r, buf),
                    head[0] ? ":\n" : "", head);
        if (log) {
            *log = p->log;
            p->log = NULL;
        }
        goto done;
    }
    if (cc->after && (s = cc->after(prog, kernel_name)) != AT_OK) goto done;
    s = rtc_code(cc, prog, p, g->arch);
    if (s == AT_OK && g->api->verify) s = g->api->verify(p);
    if (s == AT_OK && !g->compile_only) s = load_module(p);

done:
    if (prog) cc->fn.destroy(&prog);
    if (cc->serial) pthread_mutex_unlock(cc->serial);
    free(argv);
    free(user);
    free(defines);
    free(full);
    if (s != AT_OK) {
        at_gpu_program_free(p);
        return s;
    }
    *out = p;
    return AT_OK;
}

at_status at_gpu_program_binary(at_bprog *p, void **bin, size_t *len)
{
    *bin = NULL;
    *len = 0;
    if (!p || !p->code) return at_fail(AT_ERR_INVALID_ARG, "program_binary: no program");
    void *copy = malloc(p->code_len);
    if (!copy) return at_fail(AT_ERR_NO_MEMORY, "out of memory for a %zu-byte binary", p->code_len);
    memcpy(copy, p->code, p->code_len);
    *bin = copy;
    *len = p->code_len;
    return AT_OK;
}

at_status at_gpu_load_binary(at_bdev *d, const void *bin, size_t len, const char *kernel_name,
                             at_bprog **out, char **log)
{
    *out = NULL;
    if (log) *log = NULL;
    if (!d || !kernel_name) return at_fail(AT_ERR_INVALID_ARG, "load_binary: NULL argument");
    AT_TRY(at_gpu_need_device(d, "load_binary"));
    if (!bin || len == 0) return at_fail(AT_ERR_COMPILE, "load_binary: empty binary");
    at_bprog *p = prog_new(d, kernel_name);
    if (!p || !(p->code = malloc(len))) {
        free(p);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory loading a %zu-byte binary", len);
    }
    memcpy(p->code, bin, len);
    p->code_len = len;
    const at_gpu_api *api = gpu_of(d)->api;
    at_status s = api->verify ? api->verify(p) : AT_OK; /* refused before the runtime sees it */
    if (s == AT_OK) s = load_module(p);
    if (s != AT_OK) {
        at_gpu_program_free(p);
        return s;
    }
    *out = p;
    return AT_OK;
}

/* ---- buffers ------------------------------------------------------------------------------ */

at_status at_gpu_buffer_alloc(at_bdev *d, size_t bytes, at_bbuf *out)
{
    out->handle = NULL;
    out->bytes = 0;
    AT_TRY(at_gpu_need_device(d, "buffer_alloc"));
    if (bytes == 0) return at_fail(AT_ERR_INVALID_ARG, "buffer_alloc: zero bytes");
    const at_gpu_api *api = gpu_of(d)->api;
    void *ptr = NULL;
    int r = api->fn.mem_alloc(&ptr, bytes);
    if (r != 0) {
        char buf[32];
        return at_fail(AT_ERR_LAUNCH, "%s %s(%zu bytes) failed: %s", api->lib.name,
                       api->call.mem_alloc, bytes, api_err(api, r, buf));
    }
    out->handle = ptr;
    out->bytes = bytes;
    return AT_OK;
}

at_status at_gpu_buffer_write(at_bdev *d, at_bbuf b, size_t off, const void *src, size_t bytes)
{
    AT_TRY(at_gpu_need_device(d, "buffer_write"));
    AT_TRY(at_bbuf_check(b, off, bytes, "buffer_write"));
    if (bytes == 0) return AT_OK;
    at_gpu_dev *g = gpu_of(d);
    int r = g->api->fn.copy_in(g->stream, b.handle, off, src, bytes);
    return r == 0 ? AT_OK : at_gpu_api_fail(g->api, AT_ERR_LAUNCH, g->api->call.copy_in, "", r);
}

at_status at_gpu_buffer_read(at_bdev *d, at_bbuf b, size_t off, void *dst, size_t bytes)
{
    AT_TRY(at_gpu_need_device(d, "buffer_read"));
    AT_TRY(at_bbuf_check(b, off, bytes, "buffer_read"));
    if (bytes == 0) return AT_OK;
    at_gpu_dev *g = gpu_of(d);
    int r = g->api->fn.copy_out(g->stream, dst, b.handle, off, bytes);
    return r == 0 ? AT_OK : at_gpu_api_fail(g->api, AT_ERR_LAUNCH, g->api->call.copy_out, "", r);
}

at_status at_gpu_buffer_view(at_bdev *d, at_bbuf b, size_t off, size_t bytes, at_bbuf *out)
{
    (void)d;
    out->handle = NULL;
    out->bytes = 0;
    AT_TRY(at_bbuf_check(b, off, bytes, "buffer_view"));
    out->handle = (char *)b.handle + off;
    out->bytes = bytes;
    return AT_OK;
}

void at_gpu_buffer_free(at_bdev *d, at_bbuf b)
{
    if (!b.handle || at_gpu_need_device(d, "buffer_free") != AT_OK) return;
    gpu_of(d)->api->fn.mem_free(b.handle);
}

at_status at_gpu_buffer_fill(at_bdev *d, at_bbuf b, unsigned char value)
{
    AT_TRY(at_gpu_need_device(d, "buffer_fill"));
    at_gpu_dev *g = gpu_of(d);
    int r = g->api->fn.fill(b.handle, value, b.bytes, g->stream);
    return r == 0 ? AT_OK : at_gpu_api_fail(g->api, AT_ERR_LAUNCH, g->api->call.fill, "", r);
}

/* ---- launch ------------------------------------------------------------------------------- */

#define AT_MAX_STACK_ARGS 32

at_status at_gpu_launch(at_bdev *d, at_bprog *p, const at_karg *args, size_t nargs,
                        const size_t global[3], const size_t local[3], size_t dims, size_t cluster,
                        size_t shared_bytes, void *stream, double *ms)
{
    if (!d || !p || !global || (nargs && !args))
        return at_fail(AT_ERR_INVALID_ARG, "launch: NULL argument");
    AT_TRY(at_gpu_need_device(d, "launch"));
    if (!p->fn) return at_fail(AT_ERR_INVALID_ARG, "launch: program %s is not loaded", p->name);
    if (shared_bytes > UINT_MAX)
        return at_fail(AT_ERR_INVALID_ARG, "launch: %zu bytes of dynamic shared memory",
                       shared_bytes);

    unsigned int grid[3], block[3];
    AT_TRY(at_launch_shape(global, local, dims, grid, block));
    at_gpu_dev *g = gpu_of(d);
    const at_gpu_api *api = g->api;
    if (cluster > 1 && !api->launch_cluster)
        return at_fail(AT_ERR_UNSUPPORTED,
                       "launch: %s has no thread-block clusters (%s asked for clusters of %zu)",
                       api->lib.name, p->name, cluster);
    if (cluster > 1 && (cluster > UINT_MAX || grid[0] % cluster != 0))
        return at_fail(AT_ERR_INVALID_ARG,
                       "launch: clusters of %zu blocks do not divide %s's grid of %u blocks "
                       "along dimension 0",
                       cluster, p->name, grid[0]);
    /* The launch call reads each argument's bytes through these pointers and copies them. */
    void *stack_params[AT_MAX_STACK_ARGS];
    void **params = at_launch_params(args, nargs, stack_params, AT_MAX_STACK_ARGS);
    if (!params) return at_fail(AT_ERR_NO_MEMORY, "launch: out of memory for %zu arguments", nargs);

    void *s = stream ? stream : g->stream;
    at_status st = AT_OK;
    int r = 0;
    if (ms) pthread_mutex_lock(&g->timing_mu);
    if (ms && (r = api->fn.event_record(g->ev_start, s)) != 0)
        st = at_gpu_api_fail(api, AT_ERR_LAUNCH, api->call.event_record, " (start)", r);
    if (st == AT_OK &&
        (r = cluster > 1 ? api->launch_cluster(p->fn, grid, block, (unsigned int)cluster,
                                               (unsigned int)shared_bytes, s, nargs ? params : NULL)
                         : api->fn.launch(p->fn, grid[0], grid[1], grid[2], block[0], block[1],
                                          block[2], (unsigned int)shared_bytes, s,
                                          nargs ? params : NULL, NULL)) != 0) {
        char buf[32];
        char cl[32] = "";
        if (cluster > 1) snprintf(cl, sizeof cl, ", cluster %zux1x1", cluster);
        st = at_fail(AT_ERR_LAUNCH,
                     "%s %s(%s, grid %ux%ux%u, block %ux%ux%u%s, %zu bytes dynamic shared) "
                     "failed: %s",
                     api->lib.name, cluster > 1 ? api->launch_cluster_call : api->call.launch,
                     p->name, grid[0], grid[1], grid[2], block[0], block[1], block[2], cl,
                     shared_bytes, api_err(api, r, buf));
    }
    if (ms && st == AT_OK) {
        float f = 0.0f;
        if ((r = api->fn.event_record(g->ev_end, s)) != 0)
            st = at_gpu_api_fail(api, AT_ERR_LAUNCH, api->call.event_record, " (end)", r);
        else if ((r = api->fn.event_sync(g->ev_end)) != 0)
            st =
                at_gpu_api_fail(api, AT_ERR_LAUNCH, api->call.event_sync, " (kernel execution)", r);
        else if ((r = api->fn.event_elapsed(&f, g->ev_start, g->ev_end)) != 0)
            st = at_gpu_api_fail(api, AT_ERR_LAUNCH, api->call.event_elapsed, "", r);
        else
            *ms = (double)f;
    }
    if (ms) pthread_mutex_unlock(&g->timing_mu);
    if (params != stack_params) free(params);
    return st;
}

at_status at_gpu_check(at_bdev *d)
{
    AT_TRY(at_gpu_need_device(d, "check"));
    const at_gpu_api *api = gpu_of(d)->api;
    int r = api->fn.device_sync();
    return r == 0 ? AT_OK : at_gpu_api_fail(api, AT_ERR_DEVICE_LOST, api->call.device_sync, "", r);
}

at_status at_gpu_finish(at_bdev *d)
{
    AT_TRY(at_gpu_need_device(d, "finish"));
    at_gpu_dev *g = gpu_of(d);
    int r = g->api->fn.stream_sync(g->stream);
    return r == 0 ? AT_OK : at_gpu_api_fail(g->api, AT_ERR_LAUNCH, g->api->call.stream_sync, "", r);
}

void *at_gpu_native_queue(at_bdev *d) { return d ? gpu_of(d)->stream : NULL; }

const char *at_gpu_compiler_version(at_bdev *d) { return d ? gpu_of(d)->rtc->version : ""; }
