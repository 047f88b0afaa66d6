/* problem.c — the operation registry, problems as field values any tool can set from text, and
 * the one builder of kernel arguments from a template's `arguments:` list. */
#include "tuner/op.h"
#include "tuner/tuner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the registry -------------------------------------------------------------------------- */

#define MAX_OPS 16

/* Built-in operations, then those registered at run time (tests, tools). */
static const at_op *g_ops[MAX_OPS + 1] = {&at_op_gemm, &at_op_attention};
static const char *g_names[MAX_OPS + 1] = {"gemm", "attention"};

const at_op *at_op_find(const char *name)
{
    for (size_t i = 0; name && g_ops[i]; i++)
        if (strcmp(g_ops[i]->name, name) == 0) return g_ops[i];
    return NULL;
}

size_t at_op_nroles(const at_op *op)
{
    size_t n = 0;
    while (op->roles && op->roles[n]) n++;
    return n;
}

at_status at_op_register(const at_op *op)
{
    if (!op || !op->name) return at_fail(AT_ERR_INVALID_ARG, "at_op_register: no operation");
    if (at_op_find(op->name))
        return at_fail(AT_ERR_INVALID_ARG, "operation '%s' is already registered", op->name);
    size_t nroles = at_op_nroles(op);
    if (op->nfields > AT_MAX_FIELDS || nroles == 0 || nroles > AT_MAX_BUFFERS)
        return at_fail(AT_ERR_INVALID_ARG,
                       "operation '%s' needs at most %d fields and 1 to %d buffers", op->name,
                       AT_MAX_FIELDS, AT_MAX_BUFFERS);
    size_t n = 0;
    while (g_ops[n]) n++;
    if (n == MAX_OPS) return at_fail(AT_ERR_INVALID_ARG, "too many operations");
    g_ops[n] = op;
    g_names[n] = op->name;
    return AT_OK;
}

const char *const *at_operations(void) { return g_names; }

const char *at_operation_help(const char *op)
{
    const at_op *o = at_op_find(op);
    return o ? o->help : NULL;
}

at_status at_operation_field(const char *op, size_t i, at_field_desc *out)
{
    const at_op *o = at_op_find(op);
    if (!o) return at_fail(AT_ERR_INVALID_ARG, "unknown operation '%s'", op ? op : "(null)");
    if (i >= o->nfields) return AT_ERR_NOT_FOUND;
    *out = o->fields[i].d;
    return AT_OK;
}

const char *const *at_operation_buffers(const char *op)
{
    const at_op *o = at_op_find(op);
    return o ? o->roles : NULL;
}

/* ---- field values -------------------------------------------------------------------------- */

static const at_op_field *find_field(const at_op *op, const char *name, size_t *index)
{
    for (size_t i = 0; name && i < op->nfields; i++)
        if (strcmp(op->fields[i].d.name, name) == 0) {
            if (index) *index = i;
            return &op->fields[i];
        }
    return NULL;
}

/* Parses text into the field's slot of data; AT_ERR_INVALID_ARG names the field. */
static at_status parse_field(const at_op_field *f, const char *text, void *data)
{
    char *slot = (char *)data + f->offset;
    const at_field_desc *d = &f->d;
    switch (d->kind) {
    case AT_FIELD_INT: {
        int64_t x;
        if (at_parse_i64(text, d->lo, d->hi, &x) != 0)
            return at_fail(AT_ERR_INVALID_ARG, "%s '%s' is not an integer from %lld to %lld",
                           d->name, text ? text : "", (long long)d->lo, (long long)d->hi);
        memcpy(slot, &x, sizeof x);
        return AT_OK;
    }
    case AT_FIELD_CHOICE:
        for (int i = 0; text && d->choices[i]; i++)
            if (strcmp(text, d->choices[i]) == 0) {
                memcpy(slot, &i, sizeof i);
                return AT_OK;
            }
        {
            char list[256];
            return at_fail(AT_ERR_INVALID_ARG, "unknown %s '%s' (one of: %s)", d->name,
                           text ? text : "", at_join_names(list, sizeof list, d->choices));
        }
    case AT_FIELD_FLAG: {
        static const char *const names[] = {"0", "1", "false", "true", NULL};
        for (int i = 0; text && names[i]; i++)
            if (strcmp(text, names[i]) == 0) {
                int v = i % 2;
                memcpy(slot, &v, sizeof v);
                return AT_OK;
            }
        return at_fail(AT_ERR_INVALID_ARG, "%s '%s' is not 0, 1, false or true", d->name,
                       text ? text : "");
    }
    case AT_FIELD_REAL: {
        double v;
        if (at_parse_real(text, &v) != 0 || fabs(v) > 3.4e38)
            return at_fail(AT_ERR_INVALID_ARG, "%s '%s' is not a finite number", d->name,
                           text ? text : "");
        float x = (float)v;
        memcpy(slot, &x, sizeof x);
        return AT_OK;
    }
    }
    return at_fail(AT_ERR_INTERNAL, "field %s has no kind", d->name);
}

static void format_field(const at_op_field *f, const void *data, char *buf, size_t len)
{
    const char *slot = (const char *)data + f->offset;
    if (f->d.kind == AT_FIELD_INT) {
        int64_t v;
        memcpy(&v, slot, sizeof v);
        snprintf(buf, len, "%lld", (long long)v);
    } else if (f->d.kind == AT_FIELD_FLAG) {
        int v;
        memcpy(&v, slot, sizeof v);
        snprintf(buf, len, "%d", v != 0);
    } else if (f->d.kind == AT_FIELD_CHOICE) {
        int v, n = 0;
        memcpy(&v, slot, sizeof v);
        while (f->d.choices[n]) n++;
        snprintf(buf, len, "%s", v >= 0 && v < n ? f->d.choices[v] : "?");
    } else {
        float v;
        memcpy(&v, slot, sizeof v);
        snprintf(buf, len, "%.9g", (double)v);
    }
}

at_problem at_problem_view(const at_op *op, const void *typed)
{
    at_problem p = {op, (void *)typed, ~0ull};
    return p;
}

at_status at_problem_create(const char *op, at_problem **out)
{
    *out = NULL;
    at_errclear();
    const at_op *o = at_op_find(op);
    if (!o) return at_fail(AT_ERR_INVALID_ARG, "unknown operation '%s'", op ? op : "(null)");
    at_problem *p = calloc(1, sizeof *p);
    void *data = calloc(1, o->size);
    if (!p || !data) {
        free(p);
        free(data);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    *p = (at_problem){o, data, 0};
    for (size_t i = 0; i < o->nfields; i++) {
        const char *def = o->fields[i].d.def;
        if (def && def[0] != '=' && parse_field(&o->fields[i], def, data) != AT_OK) {
            at_problem_destroy(p);
            return at_fail(AT_ERR_INTERNAL, "operation %s: bad default of %s", o->name,
                           o->fields[i].d.name);
        }
    }
    *out = p;
    return AT_OK;
}

at_status at_problem_set(at_problem *p, const char *field, const char *value)
{
    at_errclear();
    if (!p) return at_fail(AT_ERR_INVALID_ARG, "no problem");
    size_t i;
    const at_op_field *f = find_field(p->op, field, &i);
    if (!f)
        return at_fail(AT_ERR_INVALID_ARG, "operation %s has no field '%s'", p->op->name,
                       field ? field : "(null)");
    AT_TRY(parse_field(f, value, p->data));
    p->set |= 1ull << i;
    return AT_OK;
}

at_problem *at_problem_resolve(const at_problem *p)
{
    at_problem *r = calloc(1, sizeof *r);
    void *data = malloc(p->op->size);
    if (!r || !data) {
        free(r);
        free(data);
        return NULL;
    }
    memcpy(data, p->data, p->op->size);
    *r = (at_problem){p->op, data, p->set};
    /* "=m": an unset field takes another field's value (its text, so kinds may differ). */
    for (size_t i = 0; i < p->op->nfields; i++) {
        const at_op_field *f = &p->op->fields[i];
        const at_op_field *from = NULL;
        size_t j;
        if ((r->set >> i) & 1 || !f->d.def || f->d.def[0] != '=') continue;
        if (!(from = find_field(p->op, f->d.def + 1, &j)) || !((r->set >> j) & 1)) continue;
        char text[64];
        format_field(from, data, text, sizeof text);
        if (parse_field(f, text, data) == AT_OK) r->set |= 1ull << i;
    }
    /* Fields with a literal default were set when the problem was made. */
    for (size_t i = 0; i < p->op->nfields; i++)
        if (p->op->fields[i].d.def && p->op->fields[i].d.def[0] != '=') r->set |= 1ull << i;
    return r;
}

at_status at_problem_validate(const at_problem *p)
{
    for (size_t i = 0; i < p->op->nfields; i++) {
        const at_field_desc *d = &p->op->fields[i].d;
        if ((p->set >> i) & 1) continue;
        if (d->kind == AT_FIELD_INT)
            return at_fail(AT_ERR_INVALID_ARG, "%s needs %s (%lld to %lld)", p->op->name, d->name,
                           (long long)d->lo, (long long)d->hi);
        return at_fail(AT_ERR_INVALID_ARG, "%s needs %s", p->op->name, d->name);
    }
    return p->op->validate(p->data);
}

at_status at_problem_get(const at_problem *p, const char *field, char *buf, size_t len)
{
    at_errclear();
    if (!p || !buf || !len) return at_fail(AT_ERR_INVALID_ARG, "at_problem_get: NULL argument");
    buf[0] = '\0';
    size_t i;
    const at_op_field *f = find_field(p->op, field, &i);
    if (!f)
        return at_fail(AT_ERR_INVALID_ARG, "operation %s has no field '%s'", p->op->name,
                       field ? field : "(null)");
    at_problem *r = at_problem_resolve(p);
    if (!r) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    if ((r->set >> i) & 1) format_field(f, r->data, buf, len);
    at_problem_destroy(r);
    return AT_OK;
}

const char *at_problem_operation(const at_problem *p) { return p ? p->op->name : ""; }

at_status at_problem_key(const at_problem *p, char *buf, size_t len)
{
    at_errclear();
    if (!p || !buf || !len) return at_fail(AT_ERR_INVALID_ARG, "at_problem_key: NULL argument");
    at_problem *r = at_problem_resolve(p);
    if (!r) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    at_status s = at_problem_validate(r);
    if (s == AT_OK) r->op->key(r->data, buf, len);
    at_problem_destroy(r);
    return s;
}

void at_problem_signature(const at_problem *p, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "%s", p->op->name);
    for (size_t i = 0; i < p->op->nfields && used < len; i++) {
        char text[64];
        format_field(&p->op->fields[i], p->data, text, sizeof text);
        used += (size_t)snprintf(buf + used, len - used, ",%s", text);
    }
}

at_status at_problem_from_key(const char *key, at_problem **out)
{
    *out = NULL;
    at_errclear();
    if (!key) return at_fail(AT_ERR_INVALID_ARG, "no problem key");
    const char *slash = strchr(key, '/');
    char name[64];
    snprintf(name, sizeof name, "%.*s", slash ? (int)(slash - key) : 0, key);
    const at_op *op = slash ? at_op_find(name) : NULL;
    if (!op)
        return at_fail(AT_ERR_INVALID_ARG, "'%s' is not a problem key of a known operation", key);
    if (!op->parse_key)
        return at_fail(AT_ERR_UNSUPPORTED, "operation %s cannot read its problem keys", op->name);
    AT_TRY(at_problem_create(op->name, out));
    char back[256] = "";
    at_status s = op->parse_key(key, *out);
    if (s == AT_OK) s = at_problem_key(*out, back, sizeof back);
    if (s == AT_OK && strcmp(back, key) != 0)
        s = at_fail(AT_ERR_INVALID_ARG, "'%s' is not a %s key as this release writes them (%s)",
                    key, op->name, back);
    if (s != AT_OK) {
        at_problem_destroy(*out);
        *out = NULL;
    }
    return s;
}

const char *at_problem_last_error(void) { return at_errmsg(); }

void at_problem_destroy(at_problem *p)
{
    if (!p) return;
    free(p->data);
    free(p);
}

/* ---- kernel arguments ---------------------------------------------------------------------- */

int at_args_index(const at_arg *args, size_t nargs, at_arg_kind kind, const char *name)
{
    for (size_t i = 0; i < nargs; i++)
        if (args[i].kind == kind &&
            (kind == AT_ARG_WORKSPACE || (name && strcmp(args[i].name, name) == 0)))
            return (int)i;
    return -1;
}

static int role_index(const at_op *op, const char *role)
{
    for (int i = 0; op->roles[i]; i++)
        if (strcmp(op->roles[i], role) == 0) return i;
    return -1;
}

unsigned char *at_arglist_map(at_arglist *l)
{
    if (l->nmaps == AT_MAX_TMAPS) return NULL;
    unsigned char *m = (unsigned char *)(((uintptr_t)l->mapbuf + 63) & ~(uintptr_t)63) +
                       l->nmaps++ * AT_TMAP_BYTES;
    memset(m, 0, AT_TMAP_BYTES);
    return m;
}

at_status at_tmap_encode(const at_backend_ops *ops, at_bdev *dev, const at_tmap_desc *desc,
                         const void *handle, void *out)
{
    if (!ops->encode_tensor_map)
        return at_fail(AT_ERR_UNSUPPORTED, "the %s backend has no tensor maps (TMA)", ops->name);
    return ops->encode_tensor_map(dev, desc, handle, out);
}

at_status at_args_maps(const at_space *s, const int64_t *cfg, const at_problem *p,
                       at_tmap_desc *out)
{
    at_op_buffer lay[AT_MAX_BUFFERS];
    int have_lay = 0;
    for (size_t i = 0; i < s->nargs; i++) {
        const at_arg *a = &s->args[i];
        memset(&out[i], 0, sizeof out[i]);
        if (a->kind != AT_ARG_TENSORMAP) continue;
        int64_t v[AT_TMAP_NEXPR];
        AT_TRY(at_space_tmap(s, cfg, i, v));
        if (!v[AT_TMAP_WHEN]) continue;
        int r = role_index(p->op, a->name);
        if (r < 0)
            return at_fail(AT_ERR_TEMPLATE, "argument %zu: operation %s has no buffer '%s'", i,
                           p->op->name, a->name);
        if (!have_lay) {
            memset(lay, 0, sizeof lay);
            AT_TRY(p->op->layout(p->data, lay));
            have_lay = 1;
        }
        const int64_t sw = v[AT_TMAP_SWIZZLE];
        const char *bad = v[AT_TMAP_COLS] < 1 || v[AT_TMAP_ROWS] < 1 ? "a size is below 1"
                          : v[AT_TMAP_LD] < v[AT_TMAP_COLS]          ? "ld is below cols"
                          : v[AT_TMAP_BOX0] < 1 || v[AT_TMAP_BOX1] < 1 ||
                                  v[AT_TMAP_BOX0] > UINT32_MAX || v[AT_TMAP_BOX1] > UINT32_MAX
                              ? "a box size is out of range"
                          : sw != 0 && sw != 32 && sw != 64 && sw != 128
                              ? "swizzle is not 0, 32, 64 or 128"
                              : NULL;
        if (bad)
            return at_fail(AT_ERR_TEMPLATE,
                           "argument %zu (tensormap of %s): %s (cols %lld, rows %lld, ld %lld, "
                           "box [%lld, %lld], swizzle %lld)",
                           i, a->name, bad, (long long)v[AT_TMAP_COLS], (long long)v[AT_TMAP_ROWS],
                           (long long)v[AT_TMAP_LD], (long long)v[AT_TMAP_BOX0],
                           (long long)v[AT_TMAP_BOX1], (long long)sw);
        out[i] = (at_tmap_desc){
            .cols = (uint64_t)v[AT_TMAP_COLS],
            .rows = (uint64_t)v[AT_TMAP_ROWS],
            .ld_bytes = (uint64_t)v[AT_TMAP_LD] * at_dtype_size(lay[r].dtype),
            .box = {(uint32_t)v[AT_TMAP_BOX0], (uint32_t)v[AT_TMAP_BOX1]},
            .swizzle = (uint32_t)sw,
            .buffer = (uint16_t)r,
            .dtype = (uint8_t)lay[r].dtype,
            .present = 1,
        };
    }
    return AT_OK;
}

at_status at_args_build(const at_arg *args, size_t nargs, const at_problem *p, void *const *handles,
                        const void *ws, const at_tmap_src *maps, at_arglist *out)
{
    static const size_t sizes[] = {
        [AT_ARG_I32] = 4, [AT_ARG_I64] = 8, [AT_ARG_F32] = 4, [AT_ARG_F64] = 8};
    out->n = 0;
    out->nmaps = 0;
    if (!nargs) return at_fail(AT_ERR_TEMPLATE, "the template lists no 'arguments'");
    for (size_t i = 0; i < nargs; i++) {
        const at_arg *a = &args[i];
        at_karg *k = &out->a[out->n];
        if (a->kind == AT_ARG_WORKSPACE) {
            if (!ws) continue; /* a config without scratch takes no workspace argument */
            out->v[out->n].ptr = (void *)ws;
            *k = (at_karg){sizeof(void *), &out->v[out->n].ptr};
        } else if (a->kind == AT_ARG_BUFFER || a->kind == AT_ARG_TENSORMAP) {
            int r = role_index(p->op, a->name);
            if (r < 0)
                return at_fail(AT_ERR_TEMPLATE, "argument %zu: operation %s has no buffer '%s'", i,
                               p->op->name, a->name);
            if (a->kind == AT_ARG_BUFFER) {
                out->v[out->n].ptr = handles ? handles[r] : NULL;
                *k = (at_karg){sizeof(void *), &out->v[out->n].ptr};
            } else {
                if (maps && !maps->desc[i].present) continue; /* its `when:` is false */
                unsigned char *m = at_arglist_map(out);
                if (!m)
                    return at_fail(AT_ERR_TEMPLATE, "argument %zu: more than %d tensor maps", i,
                                   AT_MAX_TMAPS);
                if (maps && maps->ops) {
                    at_status st = at_tmap_encode(maps->ops, maps->dev, &maps->desc[i],
                                                  handles ? handles[r] : NULL, m);
                    if (st != AT_OK) {
                        char msg[512];
                        snprintf(msg, sizeof msg, "%s", at_errmsg());
                        return at_fail(st, "tensor map of buffer %s (argument %zu): %s", a->name, i,
                                       msg);
                    }
                }
                *k = (at_karg){AT_TMAP_BYTES, m};
            }
        } else {
            int64_t iv = 0;
            double fv = 0;
            at_status st = p->op->scalar(p->data, a->name, &iv, &fv);
            if (st != AT_OK)
                return at_fail(AT_ERR_TEMPLATE, "argument %zu: operation %s has no value '%s'", i,
                               p->op->name, a->name);
            switch (a->type) {
            case AT_ARG_I32:
                out->v[out->n].i32 = (int32_t)iv;
                break;
            case AT_ARG_I64:
                out->v[out->n].i64 = iv;
                break;
            case AT_ARG_F32:
                out->v[out->n].f32 = (float)fv;
                break;
            case AT_ARG_F64:
                out->v[out->n].f64 = fv;
                break;
            }
            *k = (at_karg){sizes[a->type], &out->v[out->n]};
        }
        out->n++;
    }
    return AT_OK;
}
