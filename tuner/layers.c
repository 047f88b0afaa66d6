/* layers.c — the search path of read-only databases after the user's (docs/shipping.md): its
 * entries found and opened once per context without writing anything to them. */
#define _GNU_SOURCE
#include "tuner/layers.h"

#include "cache/bundle.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef AT_SHIPPED_DB_DIR
#define AT_SHIPPED_DB_DIR "/usr/local/share/autotune/db"
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
    if (s == AT_OK) s = add_list(l, shipped ? shipped : AT_SHIPPED_DB_DIR);
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
