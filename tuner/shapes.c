/* shapes.c — shape lists: a YAML list of operations and their fields, expanded to the product of
 * the fields given as lists and de-duplicated by database key (shapes.h). */
#include "tuner/shapes.h"

#include "base/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MAX_ITEM_FIELDS 24

/* A failure at a node: "PATH:LINE:COLUMN: why". */
static at_status at_mark(const char *path, yaml_mark_t m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static at_status at_mark(const char *path, yaml_mark_t m, const char *fmt, ...)
{
    char why[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return at_fail(AT_ERR_INVALID_ARG, "%s:%zu:%zu: %s", path, m.line + 1, m.column + 1, why);
}

/* The scalar's text, or NULL for another kind of node. */
static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* ---- the list being built ----------------------------------------------------------------- */

typedef struct list {
    at_shapes s;
    size_t cap;
    size_t *slot; /* open addressing on the keys' hash: index + 1, 0 empty; nslot a power of 2 */
    size_t nslot;
} list;

/* 1 if key is in the list already. */
static int seen(const list *l, const char *key, size_t *at)
{
    size_t mask = l->nslot - 1, i = (size_t)at_hash_str(AT_HASH_SEED, key) & mask;
    for (; l->slot[i]; i = (i + 1) & mask)
        if (strcmp(l->s.keys[l->slot[i] - 1], key) == 0) return 1;
    *at = i;
    return 0;
}

/* Appends p (taking it) under key unless the key is there; p is destroyed then. */
static at_status add(list *l, at_problem *p, const char *key)
{
    if (2 * (l->s.n + 1) > l->nslot) { /* grow the table, then the arrays */
        size_t nslot = l->nslot ? 2 * l->nslot : 64;
        size_t *slot = calloc(nslot, sizeof *slot);
        if (!slot) {
            at_problem_destroy(p);
            return at_fail(AT_ERR_NO_MEMORY, "out of memory");
        }
        free(l->slot);
        l->slot = slot;
        l->nslot = nslot;
        for (size_t i = 0; i < l->s.n; i++) {
            size_t at = 0;
            seen(l, l->s.keys[i], &at);
            l->slot[at] = i + 1;
        }
    }
    size_t at = 0;
    if (seen(l, key, &at)) {
        at_problem_destroy(p);
        return AT_OK;
    }
    if (l->s.n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        at_problem **ps = realloc(l->s.problems, cap * sizeof *ps);
        if (ps) l->s.problems = ps;
        char **ks = ps ? realloc(l->s.keys, cap * sizeof *ks) : NULL;
        if (ks) l->s.keys = ks;
        if (!ks) {
            at_problem_destroy(p);
            return at_fail(AT_ERR_NO_MEMORY, "out of memory");
        }
        l->cap = cap;
    }
    char *k = at_strdup(key);
    if (!k) {
        at_problem_destroy(p);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    l->s.problems[l->s.n] = p;
    l->s.keys[l->s.n++] = k;
    l->slot[at] = l->s.n;
    return AT_OK;
}

/* ---- one item ------------------------------------------------------------------------------ */

/* A field of an item: its name as the operation spells it and its values (scalar nodes). */
typedef struct item_field {
    char name[64];
    yaml_node_item_t *values; /* node ids */
    size_t nvalues;
    yaml_node_item_t single;
} item_field;

/* The operation's problem field spelled name ('_' for '-' too) into out; 0 if there is none. */
static int find_field(const char *op, const char *name, char *out, size_t len)
{
    at_field_desc d;
    for (size_t i = 0; at_operation_field(op, i, &d) == AT_OK; i++) {
        if (!d.shape || strlen(d.name) != strlen(name)) continue;
        size_t j = 0;
        while (name[j] && (name[j] == d.name[j] || (name[j] == '_' && d.name[j] == '-'))) j++;
        if (!name[j]) {
            snprintf(out, len, "%s", d.name);
            return 1;
        }
    }
    return 0;
}

/* "m, n, k, dtype, layout": the problem fields of op. */
static void field_names(const char *op, char *out, size_t len)
{
    at_field_desc d;
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; at_operation_field(op, i, &d) == AT_OK && used < len; i++)
        if (d.shape)
            used += (size_t)snprintf(out + used, len - used, "%s%s", used ? ", " : "", d.name);
}

static at_status load_item(const char *path, yaml_document_t *doc, const yaml_node_t *item, list *l)
{
    if (item->type != YAML_MAPPING_NODE ||
        item->data.mapping.pairs.top - item->data.mapping.pairs.start != 1)
        return at_mark(path, item->start_mark,
                       "an item is a one-key map naming the operation, e.g. "
                       "'- gemm: {m: 16, n: 4096, k: 4096}'");
    const yaml_node_pair_t *pair = item->data.mapping.pairs.start;
    const yaml_node_t *opn = yaml_document_get_node(doc, pair->key);
    const yaml_node_t *body = yaml_document_get_node(doc, pair->value);
    const char *op = scalar(opn);
    const char *const *ops = at_operations();
    size_t o = 0;
    while (op && ops[o] && strcmp(ops[o], op) != 0) o++;
    if (!op || !ops[o]) {
        char names[256];
        return at_mark(path, opn->start_mark, "unknown operation '%s' (one of: %s)",
                       op ? op : "(not a name)", at_join_names(names, sizeof names, ops));
    }
    if (!body || body->type != YAML_MAPPING_NODE)
        return at_mark(path, body ? body->start_mark : opn->start_mark,
                       "%s needs a map of its fields, e.g. '{m: 16, n: 4096, k: 4096}'", op);

    item_field f[MAX_ITEM_FIELDS];
    size_t nf = 0;
    for (yaml_node_pair_t *p = body->data.mapping.pairs.start; p < body->data.mapping.pairs.top;
         p++) {
        const yaml_node_t *kn = yaml_document_get_node(doc, p->key);
        const yaml_node_t *vn = yaml_document_get_node(doc, p->value);
        const char *name = scalar(kn);
        char canon[64], names[512];
        if (!name || !find_field(op, name, canon, sizeof canon)) {
            field_names(op, names, sizeof names);
            return at_mark(path, kn->start_mark, "unknown field '%s' of %s (one of: %s)",
                           name ? name : "(not a name)", op, names);
        }
        for (size_t i = 0; i < nf; i++)
            if (strcmp(f[i].name, canon) == 0)
                return at_mark(path, kn->start_mark, "field '%s' of %s is given twice", canon, op);
        if (nf == MAX_ITEM_FIELDS) return at_mark(path, kn->start_mark, "too many fields");
        item_field *it = &f[nf++];
        snprintf(it->name, sizeof it->name, "%s", canon);
        if (vn->type == YAML_SEQUENCE_NODE) {
            it->values = vn->data.sequence.items.start;
            it->nvalues = (size_t)(vn->data.sequence.items.top - vn->data.sequence.items.start);
            if (!it->nvalues)
                return at_mark(path, vn->start_mark, "%s: an empty list of values", canon);
        } else {
            it->single = p->value;
            it->values = &it->single;
            it->nvalues = 1;
        }
        for (size_t v = 0; v < it->nvalues; v++) {
            const yaml_node_t *x = yaml_document_get_node(doc, it->values[v]);
            if (!scalar(x))
                return at_mark(path, x->start_mark, "%s: a value is a number or a name%s", canon,
                               vn->type == YAML_SEQUENCE_NODE ? "" : ", or a list of them");
        }
    }

    /* The product, the last field varying fastest: an odometer over the value lists. */
    size_t pos[MAX_ITEM_FIELDS] = {0};
    for (;;) {
        at_problem *p = NULL;
        if (at_problem_create(op, &p) != AT_OK) return AT_ERR_NO_MEMORY;
        for (size_t i = 0; i < nf; i++) {
            const yaml_node_t *x = yaml_document_get_node(doc, f[i].values[pos[i]]);
            if (at_problem_set(p, f[i].name, scalar(x)) != AT_OK) {
                at_problem_destroy(p);
                return at_mark(path, x->start_mark, "%s", at_errmsg());
            }
        }
        char key[256];
        if (at_problem_key(p, key, sizeof key) != AT_OK) {
            at_problem_destroy(p);
            return at_mark(path, body->start_mark, "%s", at_errmsg());
        }
        if (l->s.n >= AT_SHAPES_MAX) {
            at_problem_destroy(p);
            return at_mark(path, item->start_mark, "the list expands to more than %d problems",
                           AT_SHAPES_MAX);
        }
        AT_TRY(add(l, p, key));
        size_t i = nf;
        while (i > 0 && ++pos[i - 1] == f[i - 1].nvalues) pos[--i] = 0;
        if (i == 0) return AT_OK;
    }
}

/* ---- the file ------------------------------------------------------------------------------ */

at_status at_shapes_load(const char *path, at_shapes *out)
{
    memset(out, 0, sizeof *out);
    FILE *fp = fopen(path, "rb");
    if (!fp) return at_fail(AT_ERR_IO, "cannot read the shape list %s: %s", path, strerror(errno));
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_file(&parser, fp);
    at_status s = AT_OK;
    int loaded = yaml_parser_load(&parser, &doc);
    if (!loaded)
        s = at_mark(path, parser.problem_mark, "not valid YAML: %s",
                    parser.problem ? parser.problem : "unreadable");
    yaml_node_t *root = loaded ? yaml_document_get_root_node(&doc) : NULL;
    yaml_mark_t start = {0, 0, 0};
    list l = {0};
    if (s == AT_OK && (!root || (root->type == YAML_SCALAR_NODE && !root->data.scalar.length)))
        s = at_mark(path, start, "an empty list: no problem to tune");
    else if (s == AT_OK && root->type != YAML_SEQUENCE_NODE)
        s = at_mark(path, root->start_mark,
                    "not a list: a shape list is a YAML list of items like "
                    "'- gemm: {m: 16, n: 4096, k: 4096}'");
    else if (s == AT_OK && root->data.sequence.items.top == root->data.sequence.items.start)
        s = at_mark(path, root->start_mark, "an empty list: no problem to tune");
    for (yaml_node_item_t *it = s == AT_OK ? root->data.sequence.items.start : NULL;
         it && it < root->data.sequence.items.top && s == AT_OK; it++)
        s = load_item(path, &doc, yaml_document_get_node(&doc, *it), &l);
    if (loaded) yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    fclose(fp);
    free(l.slot);
    if (s != AT_OK) {
        at_shapes_free(&l.s);
        return s;
    }
    *out = l.s;
    return AT_OK;
}

void at_shapes_free(at_shapes *s)
{
    for (size_t i = 0; i < s->n; i++) {
        at_problem_destroy(s->problems[i]);
        free(s->keys[i]);
    }
    free(s->problems);
    free(s->keys);
    memset(s, 0, sizeof *s);
}
