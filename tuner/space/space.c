/* space.c — tuning spaces: loads a template's YAML description (libyaml document API), binds
 * its expressions to slots, enumerates the valid configurations and formats/parses configs. */
#include "space.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* Every slot of a space fits a stack array of this size (checked when loading). */
#define MAX_SLOTS 1024
/* at_space_enumerate refuses spaces with more raw configurations than this. */
#define MAX_ENUMERATE 2000000000ull

/* ---- slot lookup ------------------------------------------------------------------------- */

static size_t slot_problem(const at_space *s) { return s->nparams; }
static size_t slot_device(const at_space *s) { return s->nparams + s->nproblem; }
static size_t slot_derived(const at_space *s) { return s->nparams + s->nproblem + s->ndevice; }

static int find_param(const at_space *s, const char *name)
{
    for (size_t i = 0; i < s->nparams; i++)
        if (strcmp(s->params[i].name, name) == 0) return (int)i;
    return -1;
}

static int find_in(char **names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return (int)i;
    return -1;
}

static int find_derived(const at_space *s, size_t nvisible, const char *name)
{
    for (size_t i = 0; i < nvisible; i++)
        if (strcmp(s->derived[i].name, name) == 0) return (int)i;
    return -1;
}

/* Slot of a name as expressions see it: parameters, problem variables, device.NAME, and the
 * first nderived derived values. */
static int lookup(const at_space *s, size_t nderived, const char *name)
{
    int i;
    if ((i = find_param(s, name)) >= 0) return i;
    if ((i = find_in(s->problem_vars, s->nproblem, name)) >= 0) return (int)slot_problem(s) + i;
    if (strncmp(name, "device.", 7) == 0 &&
        (i = find_in(s->device_vars, s->ndevice, name + 7)) >= 0)
        return (int)slot_device(s) + i;
    if ((i = find_derived(s, nderived, name)) >= 0) return (int)slot_derived(s) + i;
    return -1;
}

typedef struct resolve_ctx {
    const at_space *s;
    size_t nderived;
} resolve_ctx;

static int resolve(void *user, const char *name)
{
    const resolve_ctx *c = user;
    return lookup(c->s, c->nderived, name);
}

/* ---- free -------------------------------------------------------------------------------- */

static void free_names(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

static void free_named(at_named_expr *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].name);
        at_expr_free(v[i].expr);
    }
    free(v);
}

void at_space_free(at_space *s)
{
    if (!s) return;
    free(s->name);
    free(s->operation);
    free(s->kernel);
    free(s->source);
    free_names(s->backends, s->nbackends);
    free_names(s->dtypes, s->ndtypes);
    free_names(s->archs, s->narchs);
    free_names(s->device_types, s->ndevice_types);
    free_names(s->supersedes, s->nsupersedes);
    for (size_t i = 0; i < s->nargs; i++) {
        free(s->args[i].name);
        for (int e = 0; s->args[i].tmap && e < AT_TMAP_NEXPR; e++) at_expr_free(s->args[i].tmap[e]);
        free(s->args[i].tmap);
    }
    for (size_t i = 0; i < s->nparams; i++) free(s->params[i].name);
    free_names(s->problem_vars, s->nproblem);
    free_names(s->device_vars, s->ndevice);
    free_named(s->derived, s->nderived);
    for (size_t i = 0; i < s->nconstraints; i++) at_expr_free(s->constraints[i]);
    free(s->constraints);
    free_named(s->defines, s->ndefines);
    for (int d = 0; d < 3; d++) {
        at_expr_free(s->global[d]);
        at_expr_free(s->local[d]);
    }
    at_expr_free(s->shared);
    at_expr_free(s->cluster);
    at_expr_free(s->workspace);
    at_expr_free(s->scratch);
    free(s->defaults);
    free(s->fixed);
    free(s);
}

/* ---- loading ----------------------------------------------------------------------------- */

enum {
    K_NAME,
    K_KERNEL,
    K_SOURCE,
    K_PROBLEM,
    K_DEVICE,
    K_PARAMETERS,
    K_DERIVED,
    K_CONSTRAINTS,
    K_DEFINES,
    K_LAUNCH,
    K_DEFAULTS,
    K_WORKSPACE,
    K_OPERATION,
    K_BACKENDS,
    K_DTYPES,
    K_ARCHS,
    K_PRIORITY,
    K_ARGUMENTS,
    K_SUPERSEDES,
    K_DEVICE_TYPES,
    K_SCRATCH,
    K_COUNT
};

static const char *const key_names[K_COUNT] = {
    "name",        "kernel",  "source",   "problem",   "device",     "parameters",   "derived",
    "constraints", "defines", "launch",   "defaults",  "workspace",  "operation",    "backends",
    "dtypes",      "archs",   "priority", "arguments", "supersedes", "device_types", "scratch"};
static const bool key_required[K_COUNT] = {[K_NAME] = true,
                                           [K_KERNEL] = true,
                                           [K_SOURCE] = true,
                                           [K_PARAMETERS] = true,
                                           [K_LAUNCH] = true};

typedef struct loader {
    yaml_document_t *doc;
    at_space *s;
} loader;

static size_t line_of(const yaml_node_t *n) { return n ? n->start_mark.line + 1 : 0; }

static yaml_node_t *get(loader *L, int index) { return yaml_document_get_node(L->doc, index); }

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* An empty value (`key:` with nothing, `~` or `null`). */
static bool is_null(const yaml_node_t *n)
{
    const char *v = scalar(n);
    if (!v || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return false;
    return !*v || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 || strcmp(v, "Null") == 0 ||
           strcmp(v, "NULL") == 0;
}

static size_t seq_len(const yaml_node_t *n)
{
    return (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
}
static size_t map_len(const yaml_node_t *n)
{
    return (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
}

static bool is_ident(const char *v)
{
    if (!v || !(isalpha((unsigned char)*v) || *v == '_')) return false;
    for (; *v; v++)
        if (!(isalnum((unsigned char)*v) || *v == '_')) return false;
    return true;
}

static at_status oom(void) { return at_fail(AT_ERR_NO_MEMORY, "out of memory loading a space"); }

/* A non-empty scalar string for key k. */
static at_status load_string(loader *L, yaml_node_t *n, const char *key, char **out)
{
    const char *v = scalar(n);
    if (!v || !*v || is_null(n))
        return at_fail(AT_ERR_TEMPLATE, "line %zu: '%s' must be a non-empty string", line_of(n),
                       key);
    (void)L;
    *out = at_strdup(v);
    return *out ? AT_OK : oom();
}

/* A name already used by a parameter, problem variable or derived value. */
static bool name_taken(const at_space *s, const char *name)
{
    return find_param(s, name) >= 0 || find_in(s->problem_vars, s->nproblem, name) >= 0 ||
           find_derived(s, s->nderived, name) >= 0;
}

/* `problem:` or `device:` — a list of identifiers. */
static at_status load_names(loader *L, yaml_node_t *n, const char *key, bool device, char ***out,
                            size_t *count)
{
    if (is_null(n)) return AT_OK;
    if (n->type != YAML_SEQUENCE_NODE)
        return at_fail(AT_ERR_TEMPLATE, "line %zu: '%s' must be a list of names", line_of(n), key);
    size_t len = seq_len(n);
    *out = calloc(len ? len : 1, sizeof **out);
    if (!*out) return oom();
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        yaml_node_t *item = get(L, *it);
        const char *v = scalar(item);
        if (v && device && strncmp(v, "device.", 7) == 0) v += 7;
        if (!is_ident(v))
            return at_fail(AT_ERR_TEMPLATE, "line %zu: '%s': '%s' is not a valid name",
                           line_of(item), key, v ? v : "(not a scalar)");
        if (device ? find_in(*out, *count, v) >= 0 : name_taken(L->s, v))
            return at_fail(AT_ERR_TEMPLATE, "line %zu: '%s': duplicate name '%s'", line_of(item),
                           key, v);
        if (!((*out)[*count] = at_strdup(v))) return oom();
        (*count)++;
    }
    return AT_OK;
}

/* `backends:`, `dtypes:`, `archs:` — a list of non-empty names without spaces. */
static at_status load_list(loader *L, yaml_node_t *n, const char *key, char ***out, size_t *count)
{
    if (n->type != YAML_SEQUENCE_NODE || seq_len(n) == 0)
        return at_fail(AT_ERR_TEMPLATE, "line %zu: '%s' must be a non-empty list of names",
                       line_of(n), key);
    if (!(*out = calloc(seq_len(n), sizeof **out))) return oom();
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        yaml_node_t *item = get(L, *it);
        const char *v = scalar(item);
        if (!v || !*v || strpbrk(v, " \t,|/"))
            return at_fail(AT_ERR_TEMPLATE, "line %zu: '%s': '%s' is not a valid name",
                           line_of(item), key, v ? v : "(not a scalar)");
        if (!((*out)[*count] = at_strdup(v))) return oom();
        (*count)++;
    }
    return AT_OK;
}

static at_status load_params(loader *L, yaml_node_t *n)
{
    at_space *s = L->s;
    if (n->type != YAML_MAPPING_NODE || map_len(n) == 0)
        return at_fail(AT_ERR_TEMPLATE,
                       "line %zu: 'parameters' must be a mapping of names to value lists",
                       line_of(n));
    if (map_len(n) > AT_MAX_PARAMS)
        return at_fail(AT_ERR_TEMPLATE, "line %zu: 'parameters': %zu parameters, at most %d",
                       line_of(n), map_len(n), AT_MAX_PARAMS);
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = get(L, p->key), *v = get(L, p->value);
        const char *name = scalar(k);
        if (!is_ident(name))
            return at_fail(AT_ERR_TEMPLATE, "line %zu: 'parameters': '%s' is not a valid name",
                           line_of(k), name ? name : "(not a scalar)");
        if (name_taken(s, name))
            return at_fail(AT_ERR_TEMPLATE, "line %zu: 'parameters': duplicate name '%s'",
                           line_of(k), name);
        if (v->type != YAML_SEQUENCE_NODE || seq_len(v) == 0)
            return at_fail(AT_ERR_TEMPLATE,
                           "line %zu: parameter '%s' must have a non-empty list of values",
                           line_of(v), name);
        if (seq_len(v) > AT_MAX_VALUES)
            return at_fail(AT_ERR_TEMPLATE, "line %zu: parameter '%s' has %zu values, at most %d",
                           line_of(v), name, seq_len(v), AT_MAX_VALUES);
        at_param *par = &s->params[s->nparams];
        if (!(par->name = at_strdup(name))) return oom();
        s->nparams++;
        for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
             it++) {
            yaml_node_t *item = get(L, *it);
            const char *txt = scalar(item);
            int64_t val;
            if (!txt || at_parse_i64(txt, INT64_MIN, INT64_MAX, &val) != 0)
                return at_fail(AT_ERR_TEMPLATE, "line %zu: parameter '%s': '%s' is not an integer",
                               line_of(item), name, txt ? txt : "(not a scalar)");
            for (size_t j = 0; j < par->nvalues; j++)
                if (par->values[j] == val)
                    return at_fail(AT_ERR_TEMPLATE,
                                   "line %zu: parameter '%s': duplicate value %lld", line_of(item),
                                   name, (long long)val);
            par->values[par->nvalues++] = val;
        }
    }
    return AT_OK;
}

/* Parses text (from line) as an expression seeing nderived derived values. */
static at_status parse_expr(loader *L, const char *text, size_t line, size_t nderived,
                            const char *what, at_expr **out)
{
    resolve_ctx c = {L->s, nderived};
    at_status st = at_expr_parse(text, resolve, &c, out);
    if (st != AT_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", at_errmsg());
        return at_fail(st, "line %zu: %s: %s", line, what, msg);
    }
    return AT_OK;
}

/* Parses the scalar n as an expression seeing nderived derived values. */
static at_status load_expr(loader *L, yaml_node_t *n, size_t nderived, const char *what,
                           at_expr **out)
{
    const char *v = scalar(n);
    if (!v || is_null(n))
        return at_fail(AT_ERR_TEMPLATE, "line %zu: %s: expected an expression", line_of(n), what);
    return parse_expr(L, v, line_of(n), nderived, what, out);
}

/* The expressions of a sequence. YAML splits a flow sequence at every comma, also one inside
 * parentheses (`global: [ceil_div(n, BN) * TN, m]`), so plain items are joined again with ", "
 * while their parentheses are open. *items is malloc'd (texts and lines), *count of them. */
typedef struct expr_item {
    char *text;
    size_t line;
} expr_item;

static void free_items(expr_item *items, size_t n)
{
    for (size_t i = 0; i < n; i++) free(items[i].text);
    free(items);
}

static int paren_balance(const char *t)
{
    int b = 0;
    for (; *t; t++) b += *t == '(' ? 1 : *t == ')' ? -1 : 0;
    return b;
}

static at_status seq_exprs(loader *L, yaml_node_t *n, const char *what, expr_item **items,
                           size_t *count)
{
    size_t len = seq_len(n), cnt = 0;
    *count = 0;
    *items = calloc(len ? len : 1, sizeof **items);
    if (!*items) return oom();
    expr_item *v = *items;
    int open = 0; /* parentheses still open in v[cnt - 1] */
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        yaml_node_t *item = get(L, *it);
        const char *t = scalar(item);
        if (!t || is_null(item)) {
            free_items(v, cnt);
            *items = NULL;
            return at_fail(AT_ERR_TEMPLATE, "line %zu: %s[%zu]: expected an expression",
                           line_of(item), what, cnt);
        }
        bool plain = item->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        if (open > 0 && plain) {
            char *joined = at_asprintf("%s, %s", v[cnt - 1].text, t);
            if (!joined) {
                free_items(v, cnt);
                *items = NULL;
                return oom();
            }
            free(v[cnt - 1].text);
            v[cnt - 1].text = joined;
            open += paren_balance(t);
            continue;
        }
        if (!(v[cnt].text = at_strdup(t))) {
            free_items(v, cnt);
            *items = NULL;
            return oom();
        }
        v[cnt].line = line_of(item);
        cnt++;
        open = plain && n->data.sequence.style == YAML_FLOW_SEQUENCE_STYLE ? paren_balance(t) : 0;
    }
    *count = cnt;
    return AT_OK;
}

/* `derived:` or `defines:` (key) into *out — a mapping of names to expressions over the
 * parameters, problem and device variables and the derived values loaded so far (a derived
 * value sees the ones before it; a define sees them all). No name is used twice in one mapping
 * or by a parameter; derived values also keep off the problem variables' names. */
static at_status load_named(loader *L, yaml_node_t *n, const char *key, at_named_expr **out,
                            size_t *count)
{
    at_space *s = L->s;
    if (is_null(n)) return AT_OK;
    if (n->type != YAML_MAPPING_NODE)
        return at_fail(AT_ERR_TEMPLATE, "line %zu: '%s' must be a mapping of names to expressions",
                       line_of(n), key);
    size_t len = map_len(n);
    if (!(*out = calloc(len ? len : 1, sizeof **out))) return oom();
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = get(L, p->key), *v = get(L, p->value);
        const char *name = scalar(k);
        if (!is_ident(name))
            return at_fail(AT_ERR_TEMPLATE, "line %zu: '%s': '%s' is not a valid name", line_of(k),
                           key, name ? name : "(not a scalar)");
        bool dup = find_param(s, name) >= 0 ||
                   (out == &s->derived && find_in(s->problem_vars, s->nproblem, name) >= 0);
        for (size_t i = 0; i < *count; i++) dup = dup || strcmp((*out)[i].name, name) == 0;
        if (dup)
            return at_fail(AT_ERR_TEMPLATE, "line %zu: '%s': duplicate name '%s'", line_of(k), key,
                           name);
        char what[300];
        snprintf(what, sizeof what, "%s '%s'", key, name);
        at_named_expr *d = &(*out)[*count];
        AT_TRY(load_expr(L, v, s->nderived, what, &d->expr));
        if (!(d->name = at_strdup(name))) {
            at_expr_free(d->expr);
            d->expr = NULL;
            return oom();
        }
        (*count)++;
    }
    return AT_OK;
}

/* The keys of a `tensormap:` argument, in at_arg.tmap order (box is two of them). */
static const char *const tmap_keys[AT_TMAP_NEXPR] = {"cols", "rows",    "ld",  "box",
                                                     NULL,   "swizzle", "when"};

/* `tensormap: {buffer: ROLE, cols: E, rows: E, ld: E, box: [E, E], swizzle: E, when: E}` of
 * argument i into a: every key but `when` required, each once, expressions over everything a
 * constraint sees. */
static at_status load_tmap(loader *L, yaml_node_t *n, size_t i, at_arg *a)
{
    size_t line = line_of(n);
    if (n->type != YAML_MAPPING_NODE)
        return at_fail(AT_ERR_TEMPLATE,
                       "line %zu: 'arguments'[%zu]: 'tensormap' must be a mapping (buffer, cols, "
                       "rows, ld, box, swizzle, when)",
                       line, i);
    if (!(a->tmap = calloc(AT_TMAP_NEXPR, sizeof *a->tmap))) return oom();
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = get(L, p->key), *v = get(L, p->value);
        const char *key = scalar(k);
        char what[96];
        snprintf(what, sizeof what, "'arguments'[%zu] tensormap '%s'", i, key ? key : "?");
        if (key && strcmp(key, "buffer") == 0) {
            if (a->name)
                return at_fail(AT_ERR_TEMPLATE, "line %zu: %s: given twice", line_of(k), what);
            if (!is_ident(scalar(v)))
                return at_fail(AT_ERR_TEMPLATE, "line %zu: %s: '%s' is not a buffer name",
                               line_of(v), what, scalar(v) ? scalar(v) : "(not a scalar)");
            if (!(a->name = at_strdup(scalar(v)))) return oom();
            continue;
        }
        int e = -1;
        for (int j = 0; key && j < AT_TMAP_NEXPR; j++)
            if (tmap_keys[j] && strcmp(key, tmap_keys[j]) == 0) e = j;
        if (e < 0)
            return at_fail(AT_ERR_TEMPLATE,
                           "line %zu: 'arguments'[%zu]: tensormap: unknown key '%s' (buffer, cols, "
                           "rows, ld, box, swizzle, when)",
                           line_of(k), i, key ? key : "(not a scalar)");
        if (a->tmap[e])
            return at_fail(AT_ERR_TEMPLATE, "line %zu: %s: given twice", line_of(k), what);
        if (e != AT_TMAP_BOX0) {
            AT_TRY(load_expr(L, v, L->s->nderived, what, &a->tmap[e]));
            continue;
        }
        expr_item *items = NULL;
        size_t cnt = 0;
        if (v->type == YAML_SEQUENCE_NODE) AT_TRY(seq_exprs(L, v, what, &items, &cnt));
        at_status st = cnt == 2 ? AT_OK
                                : at_fail(AT_ERR_TEMPLATE,
                                          "line %zu: %s: expected [COLS, ROWS], two expressions",
                                          line_of(v), what);
        for (size_t d = 0; st == AT_OK && d < 2; d++)
            st = parse_expr(L, items[d].text, items[d].line, L->s->nderived, what,
                            &a->tmap[AT_TMAP_BOX0 + d]);
        free_items(items, cnt);
        AT_TRY(st);
    }
    if (!a->name)
        return at_fail(AT_ERR_TEMPLATE, "line %zu: 'arguments'[%zu]: tensormap: missing 'buffer'",
                       line, i);
    for (int e = 0; e < AT_TMAP_WHEN; e++)
        if (tmap_keys[e] && !a->tmap[e])
            return at_fail(AT_ERR_TEMPLATE, "line %zu: 'arguments'[%zu]: tensormap: missing '%s'",
                           line, i, tmap_keys[e]);
    a->kind = AT_ARG_TENSORMAP;
    return AT_OK;
}

/* `arguments:` — the kernel's parameters in order: `- buffer: ROLE`, `- i32: NAME` (also i64,
 * f32, f64), `- workspace` and `- tensormap: {...}` (load_tmap). */
static at_status load_args(loader *L, yaml_node_t *n)
{
    static const char *const types[] = {"i32", "i64", "f32", "f64"};
    at_space *s = L->s;
    if (n->type != YAML_SEQUENCE_NODE || seq_len(n) == 0)
        return at_fail(AT_ERR_TEMPLATE, "line %zu: 'arguments' must be a list of arguments",
                       line_of(n));
    if (seq_len(n) > AT_MAX_ARGS)
        return at_fail(AT_ERR_TEMPLATE, "line %zu: 'arguments': %zu arguments, at most %d",
                       line_of(n), seq_len(n), AT_MAX_ARGS);
    bool workspace = false;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        yaml_node_t *item = get(L, *it);
        size_t i = s->nargs;
        at_arg *a = &s->args[i];
        const char *kind = scalar(item), *name = NULL;
        yaml_node_t *v = NULL;
        if (item->type == YAML_MAPPING_NODE && map_len(item) == 1) {
            kind = scalar(get(L, item->data.mapping.pairs.start->key));
            v = get(L, item->data.mapping.pairs.start->value);
            name = scalar(v);
        }
        if (kind && strcmp(kind, "workspace") == 0 && !v) {
            if (workspace)
                return at_fail(AT_ERR_TEMPLATE, "line %zu: 'arguments'[%zu]: a second workspace",
                               line_of(item), i);
            workspace = true;
            a->kind = AT_ARG_WORKSPACE;
            s->nargs++;
            continue;
        }
        if (!v)
            return at_fail(AT_ERR_TEMPLATE,
                           "line %zu: 'arguments'[%zu]: expected 'workspace' or one 'KIND: NAME' "
                           "(KIND: buffer, i32, i64, f32, f64, tensormap)",
                           line_of(item), i);
        if (kind && strcmp(kind, "tensormap") == 0) {
            at_status st = load_tmap(L, v, i, a);
            s->nargs++; /* owned by the space from here on, also when it failed */
            AT_TRY(st);
            continue;
        }
        int type = -1;
        for (int t = 0; kind && t < 4; t++)
            if (strcmp(kind, types[t]) == 0) type = t;
        if (type < 0 && !(kind && strcmp(kind, "buffer") == 0))
            return at_fail(AT_ERR_TEMPLATE,
                           "line %zu: 'arguments'[%zu]: unknown kind '%s' (buffer, i32, i64, f32, "
                           "f64, workspace, tensormap)",
                           line_of(item), i, kind ? kind : "(not a scalar)");
        if (!is_ident(name))
            return at_fail(AT_ERR_TEMPLATE, "line %zu: 'arguments'[%zu]: '%s' is not a valid name",
                           line_of(v), i, name ? name : "(not a scalar)");
        a->kind = type < 0 ? AT_ARG_BUFFER : AT_ARG_SCALAR;
        a->type = type < 0 ? AT_ARG_I32 : (at_arg_type)type;
        if (!(a->name = at_strdup(name))) return oom();
        s->nargs++;
    }
    return AT_OK;
}

static at_status load_constraints(loader *L, yaml_node_t *n)
{
    at_space *s = L->s;
    if (is_null(n)) return AT_OK;
    if (n->type != YAML_SEQUENCE_NODE)
        return at_fail(AT_ERR_TEMPLATE, "line %zu: 'constraints' must be a list of expressions",
                       line_of(n));
    expr_item *items;
    size_t cnt;
    AT_TRY(seq_exprs(L, n, "constraints", &items, &cnt));
    at_status st = AT_OK;
    if (!(s->constraints = calloc(cnt ? cnt : 1, sizeof *s->constraints))) st = oom();
    for (size_t i = 0; st == AT_OK && i < cnt; i++) {
        char what[64];
        snprintf(what, sizeof what, "constraints[%zu]", i);
        st = parse_expr(L, items[i].text, items[i].line, s->nderived, what, &s->constraints[i]);
        if (st == AT_OK) s->nconstraints++;
    }
    free_items(items, cnt);
    return st;
}

/* `global:` or `local:` — 1 to 3 expressions (a single scalar is one dimension). */
static at_status load_dims(loader *L, yaml_node_t *n, const char *key, at_expr *out[3],
                           size_t *count)
{
    char what[64];
    if (n->type == YAML_SCALAR_NODE && !is_null(n)) {
        snprintf(what, sizeof what, "launch %s[0]", key);
        AT_TRY(load_expr(L, n, L->s->nderived, what, &out[0]));
        *count = 1;
        return AT_OK;
    }
    expr_item *items = NULL;
    size_t cnt = 0;
    snprintf(what, sizeof what, "launch %s", key);
    if (n->type == YAML_SEQUENCE_NODE) AT_TRY(seq_exprs(L, n, what, &items, &cnt));
    if (cnt < 1 || cnt > 3) {
        free_items(items, cnt);
        return at_fail(AT_ERR_TEMPLATE,
                       "line %zu: 'launch': '%s' must be a list of 1 to 3 expressions", line_of(n),
                       key);
    }
    at_status st = AT_OK;
    for (size_t d = 0; st == AT_OK && d < cnt; d++) {
        snprintf(what, sizeof what, "launch %s[%zu]", key, d);
        st = parse_expr(L, items[d].text, items[d].line, L->s->nderived, what, &out[d]);
    }
    free_items(items, cnt);
    *count = cnt;
    return st;
}

static at_status load_launch(loader *L, yaml_node_t *n)
{
    at_space *s = L->s;
    if (n->type != YAML_MAPPING_NODE)
        return at_fail(AT_ERR_TEMPLATE,
                       "line %zu: 'launch' must be a mapping with 'global' and 'local'",
                       line_of(n));
    yaml_node_t *global = NULL, *local = NULL, *shared = NULL, *cluster = NULL;
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = get(L, p->key);
        const char *name = scalar(k);
        yaml_node_t **slot = NULL;
        if (name && strcmp(name, "global") == 0)
            slot = &global;
        else if (name && strcmp(name, "local") == 0)
            slot = &local;
        else if (name && strcmp(name, "shared") == 0)
            slot = &shared;
        else if (name && strcmp(name, "cluster") == 0)
            slot = &cluster;
        else
            return at_fail(AT_ERR_TEMPLATE, "line %zu: 'launch': unknown key '%s'", line_of(k),
                           name ? name : "(not a scalar)");
        if (*slot)
            return at_fail(AT_ERR_TEMPLATE, "line %zu: 'launch': duplicate key '%s'", line_of(k),
                           name);
        *slot = get(L, p->value);
    }
    if (!global)
        return at_fail(AT_ERR_TEMPLATE, "line %zu: 'launch': missing key 'global'", line_of(n));
    AT_TRY(load_dims(L, global, "global", s->global, &s->launch_dims));
    if (local) {
        size_t nlocal = 0;
        AT_TRY(load_dims(L, local, "local", s->local, &nlocal));
        if (nlocal > s->launch_dims)
            return at_fail(AT_ERR_TEMPLATE,
                           "line %zu: 'launch': 'local' has %zu dimensions, 'global' %zu",
                           line_of(local), nlocal, s->launch_dims);
    }
    if (shared) AT_TRY(load_expr(L, shared, s->nderived, "launch shared", &s->shared));
    if (cluster) AT_TRY(load_expr(L, cluster, s->nderived, "launch cluster", &s->cluster));
    return AT_OK;
}

static at_status load_defaults(loader *L, yaml_node_t *n)
{
    at_space *s = L->s;
    if (is_null(n)) return AT_OK;
    if (n->type != YAML_SEQUENCE_NODE)
        return at_fail(AT_ERR_TEMPLATE, "line %zu: 'defaults' must be a list of configurations",
                       line_of(n));
    size_t len = seq_len(n);
    if (!(s->defaults = calloc((len ? len : 1) * s->nparams, sizeof *s->defaults))) return oom();
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        yaml_node_t *m = get(L, *it);
        size_t di = s->ndefaults;
        if (m->type != YAML_MAPPING_NODE)
            return at_fail(AT_ERR_TEMPLATE,
                           "line %zu: 'defaults'[%zu] must be a mapping of parameter values",
                           line_of(m), di);
        int64_t *cfg = &s->defaults[di * s->nparams];
        bool seen[AT_MAX_PARAMS] = {false};
        for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top;
             p++) {
            yaml_node_t *k = get(L, p->key), *v = get(L, p->value);
            const char *name = scalar(k), *txt = scalar(v);
            int pi = name ? find_param(s, name) : -1;
            if (pi < 0)
                return at_fail(AT_ERR_TEMPLATE, "line %zu: 'defaults'[%zu]: unknown parameter '%s'",
                               line_of(k), di, name ? name : "(not a scalar)");
            if (seen[pi])
                return at_fail(AT_ERR_TEMPLATE,
                               "line %zu: 'defaults'[%zu]: duplicate parameter '%s'", line_of(k),
                               di, name);
            seen[pi] = true;
            int64_t val;
            bool allowed = false;
            if (txt && at_parse_i64(txt, INT64_MIN, INT64_MAX, &val) == 0)
                for (size_t j = 0; j < s->params[pi].nvalues; j++)
                    allowed = allowed || s->params[pi].values[j] == val;
            if (!allowed)
                return at_fail(AT_ERR_TEMPLATE,
                               "line %zu: 'defaults'[%zu]: '%s' is not an allowed value of '%s'",
                               line_of(v), di, txt ? txt : "(not a scalar)", name);
            cfg[pi] = val;
        }
        for (size_t i = 0; i < s->nparams; i++)
            if (!seen[i])
                return at_fail(AT_ERR_TEMPLATE, "line %zu: 'defaults'[%zu]: missing parameter '%s'",
                               line_of(m), di, s->params[i].name);
        s->ndefaults++;
    }
    return AT_OK;
}

static at_status load_doc(loader *L)
{
    at_space *s = L->s;
    yaml_node_t *root = yaml_document_get_root_node(L->doc);
    if (!root || is_null(root)) return at_fail(AT_ERR_TEMPLATE, "space: empty description");
    if (root->type != YAML_MAPPING_NODE)
        return at_fail(AT_ERR_TEMPLATE, "line %zu: the top level must be a mapping of keys",
                       line_of(root));
    yaml_node_t *val[K_COUNT] = {NULL};
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = get(L, p->key);
        const char *name = scalar(k);
        int ki = -1;
        for (int i = 0; name && i < K_COUNT; i++)
            if (strcmp(name, key_names[i]) == 0) ki = i;
        if (ki < 0)
            return at_fail(AT_ERR_TEMPLATE, "line %zu: unknown key '%s'", line_of(k),
                           name ? name : "(not a scalar)");
        if (val[ki])
            return at_fail(AT_ERR_TEMPLATE, "line %zu: duplicate key '%s'", line_of(k), name);
        val[ki] = get(L, p->value);
    }
    for (int i = 0; i < K_COUNT; i++)
        if (key_required[i] && !val[i])
            return at_fail(AT_ERR_TEMPLATE, "space: missing key '%s'", key_names[i]);

    AT_TRY(load_string(L, val[K_NAME], "name", &s->name));
    AT_TRY(load_string(L, val[K_KERNEL], "kernel", &s->kernel));
    AT_TRY(load_string(L, val[K_SOURCE], "source", &s->source));
    if (val[K_OPERATION]) AT_TRY(load_string(L, val[K_OPERATION], "operation", &s->operation));
    if (val[K_BACKENDS])
        AT_TRY(load_list(L, val[K_BACKENDS], "backends", &s->backends, &s->nbackends));
    if (val[K_DTYPES]) AT_TRY(load_list(L, val[K_DTYPES], "dtypes", &s->dtypes, &s->ndtypes));
    if (val[K_ARCHS]) AT_TRY(load_list(L, val[K_ARCHS], "archs", &s->archs, &s->narchs));
    if (val[K_DEVICE_TYPES]) {
        AT_TRY(
            load_list(L, val[K_DEVICE_TYPES], "device_types", &s->device_types, &s->ndevice_types));
        for (size_t i = 0; i < s->ndevice_types; i++)
            if (strcmp(s->device_types[i], "cpu") != 0 && strcmp(s->device_types[i], "gpu") != 0)
                return at_fail(AT_ERR_TEMPLATE, "line %zu: 'device_types': '%s' is not cpu or gpu",
                               line_of(val[K_DEVICE_TYPES]), s->device_types[i]);
    }
    if (val[K_PRIORITY]) {
        const char *v = scalar(val[K_PRIORITY]);
        if (!v || at_parse_i64(v, -1000000, 1000000, &s->priority) != 0)
            return at_fail(AT_ERR_TEMPLATE, "line %zu: 'priority' must be an integer",
                           line_of(val[K_PRIORITY]));
    }
    if (val[K_SUPERSEDES]) {
        AT_TRY(load_list(L, val[K_SUPERSEDES], "supersedes", &s->supersedes, &s->nsupersedes));
        for (size_t i = 0; i < s->nsupersedes; i++)
            if (strlen(s->supersedes[i]) != 16 ||
                strspn(s->supersedes[i], "0123456789abcdef") != 16)
                return at_fail(AT_ERR_TEMPLATE,
                               "line %zu: 'supersedes': '%s' is not a template hash (16 hex "
                               "digits)",
                               line_of(val[K_SUPERSEDES]), s->supersedes[i]);
    }
    AT_TRY(load_params(L, val[K_PARAMETERS]));
    if (val[K_PROBLEM])
        AT_TRY(load_names(L, val[K_PROBLEM], "problem", false, &s->problem_vars, &s->nproblem));
    if (val[K_DEVICE])
        AT_TRY(load_names(L, val[K_DEVICE], "device", true, &s->device_vars, &s->ndevice));
    size_t nfixed = s->nproblem + s->ndevice;
    if (!(s->fixed = calloc(nfixed ? nfixed : 1, sizeof *s->fixed))) return oom();

    size_t nder = 0;
    yaml_node_t *der = val[K_DERIVED];
    if (der && der->type == YAML_MAPPING_NODE) nder = map_len(der);
    if (slot_derived(s) + nder > MAX_SLOTS)
        return at_fail(AT_ERR_TEMPLATE, "space: %zu variables, at most %d", slot_derived(s) + nder,
                       MAX_SLOTS);
    if (der) AT_TRY(load_named(L, der, "derived", &s->derived, &s->nderived));
    s->nslots = slot_derived(s) + s->nderived;
    if (val[K_CONSTRAINTS]) AT_TRY(load_constraints(L, val[K_CONSTRAINTS]));
    if (val[K_DEFINES]) AT_TRY(load_named(L, val[K_DEFINES], "defines", &s->defines, &s->ndefines));
    /* after the derived values: a tensor map's expressions may use them */
    if (val[K_ARGUMENTS]) AT_TRY(load_args(L, val[K_ARGUMENTS]));
    AT_TRY(load_launch(L, val[K_LAUNCH]));
    if (val[K_WORKSPACE])
        AT_TRY(load_expr(L, val[K_WORKSPACE], s->nderived, "'workspace'", &s->workspace));
    if (val[K_SCRATCH]) AT_TRY(load_expr(L, val[K_SCRATCH], s->nderived, "'scratch'", &s->scratch));
    if (val[K_DEFAULTS]) AT_TRY(load_defaults(L, val[K_DEFAULTS]));
    return AT_OK;
}

at_status at_space_load(const char *yaml, size_t len, at_space **out)
{
    if (!out) return at_fail(AT_ERR_INVALID_ARG, "at_space_load: out is NULL");
    *out = NULL;
    if (!yaml) return at_fail(AT_ERR_INVALID_ARG, "at_space_load: yaml is NULL");
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) return oom();
    yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, len);
    if (!yaml_parser_load(&parser, &doc)) {
        at_status st = at_fail(AT_ERR_TEMPLATE, "line %zu: YAML error: %s%s%s",
                               (size_t)parser.problem_mark.line + 1,
                               parser.problem ? parser.problem : "malformed",
                               parser.context ? " " : "", parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return st;
    }
    at_space *s = calloc(1, sizeof *s);
    at_status st;
    if (!s) {
        st = oom();
    } else {
        loader L = {&doc, s};
        st = load_doc(&L);
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (st != AT_OK) {
        at_space_free(s);
        return st;
    }
    *out = s;
    return AT_OK;
}

/* ---- queries ----------------------------------------------------------------------------- */

at_status at_space_set(at_space *s, const char *name, int64_t value)
{
    if (!s || !name) return at_fail(AT_ERR_INVALID_ARG, "at_space_set: NULL argument");
    int i = find_in(s->problem_vars, s->nproblem, name);
    if (i >= 0) {
        s->fixed[i] = value;
        return AT_OK;
    }
    const char *dev = strncmp(name, "device.", 7) == 0 ? name + 7 : name;
    i = find_in(s->device_vars, s->ndevice, dev);
    if (i >= 0) {
        s->fixed[s->nproblem + (size_t)i] = value;
        return AT_OK;
    }
    return at_fail(AT_ERR_INVALID_ARG, "space '%s' has no variable '%s'", s->name, name);
}

int at_space_has_problem(const at_space *s, const char *name)
{
    return s && name && find_in(s->problem_vars, s->nproblem, name) >= 0;
}

uint64_t at_space_total(const at_space *s)
{
    if (!s || s->nparams == 0) return 0;
    uint64_t t = 1;
    for (size_t i = 0; i < s->nparams; i++) {
        if (__builtin_mul_overflow(t, (uint64_t)s->params[i].nvalues, &t)) return UINT64_MAX;
    }
    return t;
}

/* Evaluates the derived values into slots (parameters and fixed values already there). Returns
 * the index of the derived value that failed, or -1. */
static int eval_derived(const at_space *s, int64_t *slots)
{
    size_t base = slot_derived(s);
    for (size_t i = 0; i < s->nderived; i++) {
        bool ok;
        slots[base + i] = at_expr_eval(s->derived[i].expr, slots, &ok);
        if (!ok) return (int)i;
    }
    return -1;
}

/* Index of the first constraint that fails (false or not evaluable), or -1. */
static int eval_constraints(const at_space *s, const int64_t *slots)
{
    for (size_t i = 0; i < s->nconstraints; i++) {
        bool ok;
        int64_t v = at_expr_eval(s->constraints[i], slots, &ok);
        if (!ok || v == 0) return (int)i;
    }
    return -1;
}

static void fill_base(const at_space *s, const int64_t *cfg, int64_t *slots)
{
    memcpy(slots, cfg, s->nparams * sizeof *slots);
    memcpy(slots + s->nparams, s->fixed, (s->nproblem + s->ndevice) * sizeof *slots);
}

bool at_space_slots(const at_space *s, const int64_t *cfg, int64_t *slots)
{
    fill_base(s, cfg, slots);
    return eval_derived(s, slots) < 0;
}

bool at_space_valid(const at_space *s, const int64_t *cfg, char *why, size_t whylen)
{
    int64_t slots[MAX_SLOTS];
    fill_base(s, cfg, slots);
    int d = eval_derived(s, slots);
    if (d >= 0) {
        if (why && whylen)
            snprintf(why, whylen, "derived '%s' (%s) cannot be evaluated", s->derived[d].name,
                     at_expr_text(s->derived[d].expr));
        return false;
    }
    int c = eval_constraints(s, slots);
    if (c >= 0) {
        if (why && whylen) snprintf(why, whylen, "%s", at_expr_text(s->constraints[c]));
        return false;
    }
    if (why && whylen) why[0] = '\0';
    return true;
}

at_status at_space_enumerate(const at_space *s, int64_t **configs, uint16_t **idx, size_t *n)
{
    if (!s || !configs || !n) return at_fail(AT_ERR_INVALID_ARG, "at_space_enumerate: NULL");
    *configs = NULL;
    if (idx) *idx = NULL;
    *n = 0;
    uint64_t total = at_space_total(s);
    if (total > MAX_ENUMERATE)
        return at_fail(AT_ERR_TEMPLATE,
                       "space '%s' has too many configurations to enumerate (%llu)", s->name,
                       (unsigned long long)total);
    size_t np = s->nparams;
    size_t cap = 256, count = 0;
    int64_t *cv = malloc(cap * np * sizeof *cv);
    uint16_t *iv = idx ? malloc(cap * np * sizeof *iv) : NULL;
    if (!cv || (idx && !iv)) {
        free(cv);
        free(iv);
        return oom();
    }
    int64_t slots[MAX_SLOTS];
    uint16_t pos[AT_MAX_PARAMS] = {0};
    memcpy(slots + np, s->fixed, (s->nproblem + s->ndevice) * sizeof *slots);
    for (size_t i = 0; i < np; i++) slots[i] = s->params[i].values[0];
    for (;;) {
        if (eval_derived(s, slots) < 0 && eval_constraints(s, slots) < 0) {
            if (count == cap) {
                cap *= 2;
                int64_t *nc = realloc(cv, cap * np * sizeof *cv);
                if (nc) cv = nc;
                uint16_t *ni = iv;
                if (nc && idx && (ni = realloc(iv, cap * np * sizeof *iv))) iv = ni;
                if (!nc || (idx && !ni)) {
                    free(cv);
                    free(iv);
                    return oom();
                }
            }
            memcpy(cv + count * np, slots, np * sizeof *cv);
            if (iv) memcpy(iv + count * np, pos, np * sizeof *iv);
            count++;
        }
        /* odometer: the last parameter turns fastest */
        size_t j = np;
        while (j > 0) {
            j--;
            if (++pos[j] < s->params[j].nvalues) {
                slots[j] = s->params[j].values[pos[j]];
                break;
            }
            pos[j] = 0;
            slots[j] = s->params[j].values[0];
            if (j == 0) goto done;
        }
        if (np == 0) break;
    }
done:
    *configs = cv;
    if (idx) *idx = iv;
    *n = count;
    return AT_OK;
}

/* Fills every slot of a config; AT_ERR_TEMPLATE naming the derived value that fails. */
static at_status config_slots(const at_space *s, const int64_t *cfg, int64_t *slots)
{
    fill_base(s, cfg, slots);
    int d = eval_derived(s, slots);
    if (d >= 0)
        return at_fail(AT_ERR_TEMPLATE, "space '%s': derived '%s' (%s) cannot be evaluated",
                       s->name, s->derived[d].name, at_expr_text(s->derived[d].expr));
    return AT_OK;
}

at_status at_space_launch(const at_space *s, const int64_t *cfg, size_t global[3], size_t local[3])
{
    int64_t slots[MAX_SLOTS];
    AT_TRY(config_slots(s, cfg, slots));
    for (int i = 0; i < 3; i++) {
        for (int which = 0; which < 2; which++) {
            const at_expr *e = which ? s->local[i] : s->global[i];
            int64_t v = 1;
            bool ok = true;
            if (e) v = at_expr_eval(e, slots, &ok);
            if (!ok || v <= 0)
                return at_fail(AT_ERR_TEMPLATE, "space '%s': launch %s[%d] (%s) %s", s->name,
                               which ? "local" : "global", i, at_expr_text(e),
                               ok ? "is not positive" : "cannot be evaluated");
            (which ? local : global)[i] = (size_t)v;
        }
    }
    return AT_OK;
}

at_status at_space_memory(const at_space *s, const int64_t *cfg, size_t *shared, size_t *workspace,
                          size_t *scratch)
{
    if (!s || !cfg) return at_fail(AT_ERR_INVALID_ARG, "at_space_memory: NULL argument");
    const at_expr *e[3] = {s->shared, s->workspace, s->scratch};
    size_t *out[3] = {shared, workspace, scratch};
    static const char *const what[3] = {"launch shared", "workspace", "scratch"};
    int64_t slots[MAX_SLOTS];
    bool have_slots = false;
    for (int i = 0; i < 3; i++) {
        if (!out[i]) continue;
        *out[i] = 0;
        if (!e[i]) continue;
        if (!have_slots) AT_TRY(config_slots(s, cfg, slots));
        have_slots = true;
        bool ok;
        int64_t v = at_expr_eval(e[i], slots, &ok);
        if (!ok || v < 0)
            return at_fail(AT_ERR_TEMPLATE, "space '%s': %s (%s) %s", s->name, what[i],
                           at_expr_text(e[i]), ok ? "is negative" : "cannot be evaluated");
        *out[i] = (size_t)v;
    }
    return AT_OK;
}

at_status at_space_cluster(const at_space *s, const int64_t *cfg, size_t *cluster)
{
    if (!s || !cfg || !cluster)
        return at_fail(AT_ERR_INVALID_ARG, "at_space_cluster: NULL argument");
    *cluster = 1;
    if (!s->cluster) return AT_OK;
    int64_t slots[MAX_SLOTS];
    AT_TRY(config_slots(s, cfg, slots));
    bool ok;
    const int64_t v = at_expr_eval(s->cluster, slots, &ok);
    if (!ok || v <= 0)
        return at_fail(AT_ERR_TEMPLATE, "space '%s': launch cluster (%s) %s", s->name,
                       at_expr_text(s->cluster), ok ? "is not positive" : "cannot be evaluated");
    size_t global[3], local[3];
    AT_TRY(at_space_launch(s, cfg, global, local));
    if (global[0] % local[0] != 0 || (global[0] / local[0]) % (size_t)v != 0)
        return at_fail(AT_ERR_TEMPLATE,
                       "space '%s': launch cluster (%s = %lld) does not divide the grid's %zu "
                       "blocks along dimension 0",
                       s->name, at_expr_text(s->cluster), (long long)v,
                       (global[0] + local[0] - 1) / local[0]);
    *cluster = (size_t)v;
    return AT_OK;
}

at_status at_space_tmap(const at_space *s, const int64_t *cfg, size_t arg, int64_t *out)
{
    if (!s || !cfg || !out || arg >= s->nargs || s->args[arg].kind != AT_ARG_TENSORMAP)
        return at_fail(AT_ERR_INVALID_ARG, "at_space_tmap: argument %zu is not a tensor map", arg);
    int64_t slots[MAX_SLOTS];
    AT_TRY(config_slots(s, cfg, slots));
    for (int e = 0; e < AT_TMAP_NEXPR; e++) {
        const at_expr *x = s->args[arg].tmap[e];
        bool ok = true;
        out[e] = x ? at_expr_eval(x, slots, &ok) : 1;
        if (!ok)
            return at_fail(AT_ERR_TEMPLATE,
                           "space '%s': argument %zu (tensormap of %s): %s cannot be evaluated",
                           s->name, arg, s->args[arg].name, at_expr_text(x));
    }
    return AT_OK;
}

at_status at_space_value(const at_space *s, const int64_t *cfg, const char *name, int64_t *out)
{
    if (!s || !name || !out) return at_fail(AT_ERR_INVALID_ARG, "at_space_value: NULL argument");
    int slot = lookup(s, s->nderived, name);
    if (slot < 0) {
        int i = find_in(s->device_vars, s->ndevice, name); /* device var without its prefix */
        if (i >= 0) slot = (int)slot_device(s) + i;
    }
    if (slot < 0) return at_fail(AT_ERR_INVALID_ARG, "space '%s' has no value '%s'", s->name, name);
    int64_t slots[MAX_SLOTS];
    fill_base(s, cfg, slots);
    int d = eval_derived(s, slots);
    if (d >= 0 && (size_t)slot >= slot_derived(s) + (size_t)d)
        return at_fail(AT_ERR_TEMPLATE, "space '%s': derived '%s' (%s) cannot be evaluated",
                       s->name, s->derived[d].name, at_expr_text(s->derived[d].expr));
    *out = slots[slot];
    return AT_OK;
}

/* ---- configs as text --------------------------------------------------------------------- */

size_t at_config_format(const at_space *s, const int64_t *cfg, char *buf, size_t len)
{
    if (!buf || len == 0) return 0;
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < s->nparams; i++) {
        int w = snprintf(buf + n, len - n, "%s%s=%lld", i ? "," : "", s->params[i].name,
                         (long long)cfg[i]);
        if (w < 0) break;
        if ((size_t)w >= len - n) return len - 1; /* truncated */
        n += (size_t)w;
    }
    return n;
}

static bool space_char(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

at_status at_config_parse(const at_space *s, const char *text, int64_t *cfg)
{
    if (!s || !text || !cfg) return at_fail(AT_ERR_INVALID_ARG, "at_config_parse: NULL argument");
    int64_t vals[AT_MAX_PARAMS];
    bool seen[AT_MAX_PARAMS] = {false};
    const char *p = text;
    while (*p) {
        const char *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (!eq)
            return at_fail(AT_ERR_INVALID_ARG, "config \"%s\": '%.*s' is not NAME=VALUE", text,
                           (int)(end - p), p);
        const char *ns = p, *ne = eq, *vs = eq + 1, *ve = end;
        while (ns < ne && space_char(*ns)) ns++;
        while (ne > ns && space_char(ne[-1])) ne--;
        while (vs < ve && space_char(*vs)) vs++;
        while (ve > vs && space_char(ve[-1])) ve--;
        int pi = -1;
        for (size_t i = 0; i < s->nparams; i++)
            if (strlen(s->params[i].name) == (size_t)(ne - ns) &&
                memcmp(s->params[i].name, ns, (size_t)(ne - ns)) == 0)
                pi = (int)i;
        if (pi < 0)
            return at_fail(AT_ERR_INVALID_ARG, "config \"%s\": unknown parameter '%.*s'", text,
                           (int)(ne - ns), ns);
        if (seen[pi])
            return at_fail(AT_ERR_INVALID_ARG, "config \"%s\": duplicate parameter '%s'", text,
                           s->params[pi].name);
        char num[32];
        int64_t v;
        size_t vl = (size_t)(ve - vs);
        if (vl == 0 || vl >= sizeof num)
            return at_fail(AT_ERR_INVALID_ARG, "config \"%s\": bad value '%.*s' for '%s'", text,
                           (int)vl, vs, s->params[pi].name);
        memcpy(num, vs, vl);
        num[vl] = '\0';
        if (at_parse_i64(num, INT64_MIN, INT64_MAX, &v) != 0)
            return at_fail(AT_ERR_INVALID_ARG, "config \"%s\": bad value '%s' for '%s'", text, num,
                           s->params[pi].name);
        bool allowed = false;
        for (size_t j = 0; j < s->params[pi].nvalues; j++)
            allowed = allowed || s->params[pi].values[j] == v;
        if (!allowed)
            return at_fail(AT_ERR_INVALID_ARG,
                           "config \"%s\": %lld is not an allowed value of '%s'", text,
                           (long long)v, s->params[pi].name);
        seen[pi] = true;
        vals[pi] = v;
        if (!*end) break;
        p = end + 1;
        if (!*p) return at_fail(AT_ERR_INVALID_ARG, "config \"%s\": trailing ','", text);
    }
    for (size_t i = 0; i < s->nparams; i++)
        if (!seen[i])
            return at_fail(AT_ERR_INVALID_ARG, "config \"%s\": missing parameter '%s'", text,
                           s->params[i].name);
    memcpy(cfg, vals, s->nparams * sizeof *cfg);
    return AT_OK;
}

at_status at_config_defines(const at_space *s, const int64_t *cfg, char *buf, size_t len)
{
    if (!s || !cfg || !buf || len == 0)
        return at_fail(AT_ERR_INVALID_ARG, "at_config_defines: bad argument");
    int64_t slots[MAX_SLOTS];
    fill_base(s, cfg, slots);
    int d = eval_derived(s, slots);
    if (d >= 0 && s->ndefines > 0)
        return at_fail(AT_ERR_INVALID_ARG, "space '%s': derived '%s' (%s) cannot be evaluated",
                       s->name, s->derived[d].name, at_expr_text(s->derived[d].expr));
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < s->nparams + s->ndefines; i++) {
        const char *name;
        int64_t v;
        if (i < s->nparams) {
            name = s->params[i].name;
            v = cfg[i];
        } else {
            const at_named_expr *e = &s->defines[i - s->nparams];
            bool ok;
            name = e->name;
            v = at_expr_eval(e->expr, slots, &ok);
            if (!ok)
                return at_fail(AT_ERR_INVALID_ARG,
                               "space '%s': define '%s' (%s) cannot be evaluated", s->name, name,
                               at_expr_text(e->expr));
        }
        int w = snprintf(buf + n, len - n, "%s-D%s=%lld", n ? " " : "", name, (long long)v);
        if (w < 0 || (size_t)w >= len - n) {
            buf[n] = '\0';
            return at_fail(AT_ERR_INVALID_ARG, "at_config_defines: buffer of %zu bytes too small",
                           len);
        }
        n += (size_t)w;
    }
    return AT_OK;
}

/* ---- identity ---------------------------------------------------------------------------- */

static uint64_t hash_names(uint64_t h, const char *tag, char *const *names, size_t n)
{
    h = at_hash_str(h, tag);
    for (size_t i = 0; i < n; i++) h = at_hash_str(h, names[i]);
    return h;
}

static uint64_t hash_exprs(uint64_t h, const char *tag, const at_named_expr *e, size_t n)
{
    h = at_hash_str(h, tag);
    for (size_t i = 0; i < n; i++)
        h = at_hash_str(at_hash_str(h, e[i].name), at_expr_text(e[i].expr));
    return h;
}

static uint64_t hash_expr(uint64_t h, const at_expr *e)
{
    return at_hash_str(h, e ? at_expr_text(e) : "");
}

uint64_t at_space_fingerprint(const at_space *s, uint64_t seed)
{
    uint64_t h = at_hash_str(at_hash_str(seed, s->name), s->kernel);
    for (size_t i = 0; i < s->nparams; i++) {
        h = at_hash_str(h, s->params[i].name);
        h = at_hash(h, s->params[i].values, s->params[i].nvalues * sizeof s->params[i].values[0]);
    }
    h = hash_names(h, "problem", s->problem_vars, s->nproblem);
    h = hash_names(h, "device", s->device_vars, s->ndevice);
    h = hash_exprs(h, "derived", s->derived, s->nderived);
    h = at_hash_str(h, "constraints");
    for (size_t i = 0; i < s->nconstraints; i++) h = hash_expr(h, s->constraints[i]);
    h = hash_exprs(h, "defines", s->defines, s->ndefines);
    h = at_hash_str(h, "launch");
    for (int d = 0; d < 3; d++) h = hash_expr(hash_expr(h, s->global[d]), s->local[d]);
    h = hash_expr(hash_expr(h, s->shared), s->workspace);
    if (s->cluster) h = hash_expr(at_hash_str(h, "cluster"), s->cluster); /* old hashes stay */
    if (s->scratch) h = hash_expr(at_hash_str(h, "scratch"), s->scratch);
    h = at_hash_str(h, "arguments");
    for (size_t i = 0; i < s->nargs; i++) {
        const int64_t kt[2] = {s->args[i].kind, s->args[i].type};
        h = at_hash_str(at_hash(h, kt, sizeof kt), s->args[i].name ? s->args[i].name : "");
        for (int e = 0; s->args[i].tmap && e < AT_TMAP_NEXPR; e++)
            h = hash_expr(h, s->args[i].tmap[e]);
    }
    return h;
}

int at_space_lists(char *const *list, size_t n, const char *name, int arch)
{
    if (n == 0) return 1;
    for (size_t i = 0; i < n && name; i++) {
        size_t len = strlen(list[i]);
        if (strncmp(list[i], name, len) == 0 && (name[len] == '\0' || (arch && name[len] == ':')))
            return 1;
    }
    return 0;
}
