/* layers.c — the search path of read-only databases after the user's (docs/shipping.md): its
 * entries found and opened once per context without writing anything to them. */
#define _GNU_SOURCE
#include "tuner/layers.h"

#include "cache/bundle.h"

#include "base/util.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The shipped folder as configured; and, for an install moved elsewhere, the install's library
 * and command folders (relative to the prefix) with the shipped folder relative to each
 * (CMakeLists.txt). */
#ifndef AT_SHIPPED_DB_DIR
#define AT_SHIPPED_DB_DIR "/usr/local/share/autotune/db"
#endif
#ifndef AT_INSTALL_LIBDIR
#define AT_INSTALL_LIBDIR      "lib"
#define AT_INSTALL_BINDIR      "bin"
#define AT_SHIPPED_DB_FROM_LIB "../share/autotune/db"
#define AT_SHIPPED_DB_FROM_BIN "../share/autotune/db"
#endif

/* 1 when a and b are the same file or directory. */
static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A bundle file as a layer: imported once into a private read-only copy (cache/bundle.h). */
static at_status open_bundle(const char *path, at_db **db)
{
    char why[1024] = "";
    at_status s = at_bundle_layer_open(path, db, why, sizeof why);
    return s == AT_OK ? s : at_fail(s, "%s", why);
}

static at_status push(at_layers *l, at_db *db, const char *path)
{
    at_db **d = realloc(l->db, (l->n + 1) * sizeof *d);
    if (d) l->db = d;
    char **p = realloc(l->path, (l->n + 1) * sizeof *p);
    if (p) l->path = p;
    char *copy = at_strdup(path);
    if (!d || !p || !copy) {
        free(copy);
        at_db_close(db);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    l->db[l->n] = db;
    l->path[l->n++] = copy;
    return AT_OK;
}

/* One database directory or bundle file; anything else is not a layer (skipped silently). */
static at_status add_one(at_layers *l, const char *path)
{
    char *mdb = at_asprintf("%s/data.mdb", path);
    if (!mdb) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    int dir = is_file(mdb), bundle = !dir && is_file(path);
    free(mdb);
    if (!dir && !bundle) return AT_OK;
    for (size_t i = 0; i < l->n; i++)
        if (same_file(l->path[i], path)) return AT_OK; /* the user's, or listed twice */
    at_db *db = NULL;
    at_status s = dir ? at_db_open(path, AT_DB_LAYER, &db) : open_bundle(path, &db);
    if (s == AT_ERR_NO_MEMORY) return s;
    if (s != AT_OK) {
        at_sb_printf(&l->warn, "skipped the database %s on the search path: %s\n", path,
                     at_errmsg());
        at_errclear();
        return AT_OK;
    }
    return push(l, db, path);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* An entry of the path: a layer, or a folder of layers (its database directories and
 * .jsonl.gz bundles, sorted by name). */
static at_status add_entry(at_layers *l, const char *path)
{
    if (!*path) return AT_OK;
    char *mdb = at_asprintf("%s/data.mdb", path);
    if (!mdb) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    int folder = is_dir(path) && !is_file(mdb);
    free(mdb);
    if (!folder) return add_one(l, path);
    struct dirent **names = NULL;
    int n = scandir(path, &names, NULL, by_name);
    at_status s = AT_OK;
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        size_t len = strlen(name);
        char *child = name[0] == '.' ? NULL : at_asprintf("%s/%s", path, name);
        if (child && s == AT_OK &&
            (is_dir(child) || (len > 9 && strcmp(name + len - 9, ".jsonl.gz") == 0)))
            s = add_one(l, child);
        free(child);
        free(names[i]);
    }
    free(names);
    return s;
}

static at_status add_list(at_layers *l, const char *list)
{
    char *copy = at_strdup(list);
    if (!copy) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    at_status s = AT_OK;
    char *save = NULL;
    for (char *e = strtok_r(copy, ":", &save); e && s == AT_OK; e = strtok_r(NULL, ":", &save))
        s = add_entry(l, e);
    free(copy);
    return s;
}

/* The file's folder/rel without its "..", when the folder is an install's (it ends in sub, e.g.
 * PREFIX/bin: not a build tree) and that is a folder; else NULL. */
static char *folder_at(const char *file, const char *sub, const char *rel)
{
    const char *slash = file ? strrchr(file, '/') : NULL;
    size_t n = slash ? (size_t)(slash - file) : 0, len = strlen(sub);
    if (n <= len || file[n - len - 1] != '/' || memcmp(file + n - len, sub, len) != 0) return NULL;
    char *p = at_asprintf("%.*s/%s", (int)n, file, rel);
    char *real = p ? realpath(p, NULL) : NULL;
    free(p);
    if (real && is_dir(real)) return real;
    free(real);
    return NULL;
}

/* The shipped databases' folder: the configured one, else the same place relative to the file
 * this code was loaded from (PREFIX/lib/libautotune.so) or to the executable it is linked into
 * (PREFIX/bin/autotune), so that an install moved elsewhere still finds its own. */
static char *shipped_dir(void)
{
    if (is_dir(AT_SHIPPED_DB_DIR)) return at_strdup(AT_SHIPPED_DB_DIR);
    Dl_info info;
    char *found = dladdr((void *)shipped_dir, &info)
                      ? folder_at(info.dli_fname, AT_INSTALL_LIBDIR, AT_SHIPPED_DB_FROM_LIB)
                      : NULL;
    char exe[4096];
    ssize_t n = found ? -1 : readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        found = folder_at(exe, AT_INSTALL_BINDIR, AT_SHIPPED_DB_FROM_BIN);
    }
    return found ? found : at_strdup(AT_SHIPPED_DB_DIR);
}

at_status at_layers_open(at_layers *l, at_db *user, const char *user_path, const char *search_path)
{
    memset(l, 0, sizeof *l);
    at_status s = push(l, NULL, user_path);
    if (s != AT_OK) return s;
    l->db[0] = user;
    if (search_path) return add_list(l, search_path);
    const char *env = getenv("AUTOTUNE_DB_PATH");
    if (env) s = add_list(l, env);
    const char *shipped = getenv("AUTOTUNE_SHIPPED_DB");
    if (s != AT_OK) return s;
    if (shipped) return add_list(l, shipped);
    char *dir = shipped_dir();
    s = dir ? add_list(l, dir) : at_fail(AT_ERR_NO_MEMORY, "out of memory");
    free(dir);
    return s;
}

void at_layers_close(at_layers *l)
{
    for (size_t i = 0; i < l->n; i++) {
        if (i > 0) at_db_close(l->db[i]);
        free(l->path[i]);
    }
    free(l->db);
    free(l->path);
    at_sb_free(&l->warn);
    memset(l, 0, sizeof *l);
}
