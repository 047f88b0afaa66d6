/* expr.c — integer expressions of the tuning spaces: a precedence-climbing parser that builds a
 * flat AST (identifiers bound to slots at parse time, constants folded) and an allocation-free
 * evaluator with checked arithmetic. */
#include "space.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OP_LIT,
    OP_SLOT,
    OP_NEG,
    OP_NOT,
    OP_BNOT,
    OP_MUL,
    OP_DIV,
    OP_MOD,
    OP_ADD,
    OP_SUB,
    OP_SHL,
    OP_SHR,
    OP_LT,
    OP_LE,
    OP_GT,
    OP_GE,
    OP_EQ,
    OP_NE,
    OP_BAND,
    OP_XOR,
    OP_BOR,
    OP_LAND,
    OP_LOR,
    OP_COND,
    OP_MIN,
    OP_MAX,
    OP_CEILDIV,
    OP_POW2,
    OP_LOG2
};

typedef struct node {
    int32_t op;
    int32_t a, b, c; /* children (node indices), -1 when unused */
    int64_t v;       /* OP_LIT: the value; OP_SLOT: the slot index */
} node;

struct at_expr {
    node *nodes;
    int32_t nnodes;
    int32_t root;
    char *text;
};

/* ---- evaluation -------------------------------------------------------------------------- */

static int64_t ev(const node *n, int32_t i, const int64_t *slots, bool *ok)
{
    const node *x = &n[i];
    int64_t a, b, r;
    switch (x->op) {
    case OP_LIT:
        return x->v;
    case OP_SLOT:
        return slots[x->v];
    case OP_LAND:
        a = ev(n, x->a, slots, ok);
        if (!*ok || !a) return 0;
        return ev(n, x->b, slots, ok) != 0;
    case OP_LOR:
        a = ev(n, x->a, slots, ok);
        if (!*ok) return 0;
        if (a) return 1;
        return ev(n, x->b, slots, ok) != 0;
    case OP_COND:
        a = ev(n, x->a, slots, ok);
        if (!*ok) return 0;
        return ev(n, a ? x->b : x->c, slots, ok);
    default:
        break;
    }
    a = ev(n, x->a, slots, ok);
    if (!*ok) return 0;
    switch (x->op) {
    case OP_NEG:
        if (a == INT64_MIN) goto fail;
        return -a;
    case OP_NOT:
        return !a;
    case OP_BNOT:
        return ~a;
    case OP_POW2:
        return a > 0 && (a & (a - 1)) == 0;
    case OP_LOG2:
        if (a <= 0) goto fail;
        return 63 - __builtin_clzll((unsigned long long)a);
    default:
        break;
    }
    b = ev(n, x->b, slots, ok);
    if (!*ok) return 0;
    switch (x->op) {
    case OP_MUL:
        if (__builtin_mul_overflow(a, b, &r)) goto fail;
        return r;
    case OP_DIV:
        if (b == 0 || (a == INT64_MIN && b == -1)) goto fail;
        return a / b;
    case OP_MOD:
        if (b == 0) goto fail;
        if (b == -1) return 0;
        return a % b;
    case OP_ADD:
        if (__builtin_add_overflow(a, b, &r)) goto fail;
        return r;
    case OP_SUB:
        if (__builtin_sub_overflow(a, b, &r)) goto fail;
        return r;
    case OP_SHL:
        if (b < 0 || b > 63) goto fail;
        r = (int64_t)((uint64_t)a << b);
        if ((r >> b) != a) goto fail; /* bits (or the sign) shifted out */
        return r;
    case OP_SHR:
        if (b < 0 || b > 63) goto fail;
        return a >> b;
    case OP_LT:
        return a < b;
    case OP_LE:
        return a <= b;
    case OP_GT:
        return a > b;
    case OP_GE:
        return a >= b;
    case OP_EQ:
        return a == b;
    case OP_NE:
        return a != b;
    case OP_BAND:
        return a & b;
    case OP_XOR:
        return a ^ b;
    case OP_BOR:
        return a | b;
    case OP_MIN:
        return a < b ? a : b;
    case OP_MAX:
        return a > b ? a : b;
    case OP_CEILDIV: {
        if (b == 0 || (a == INT64_MIN && b == -1)) goto fail;
        int64_t q = a / b, m = a % b;
        if (m != 0 && ((m > 0) == (b > 0))) q++;
        return q;
    }
    default:
        break;
    }
fail:
    *ok = false;
    return 0;
}

int64_t at_expr_eval(const at_expr *e, const int64_t *slots, bool *ok)
{
    bool good = true;
    int64_t v = 0;
    if (e)
        v = ev(e->nodes, e->root, slots, &good);
    else
        good = false;
    if (ok) *ok = good;
    return good ? v : 0;
}

const char *at_expr_text(const at_expr *e) { return e ? e->text : ""; }

void at_expr_free(at_expr *e)
{
    if (!e) return;
    free(e->nodes);
    free(e->text);
    free(e);
}

/* ---- parsing ----------------------------------------------------------------------------- */

#define MAX_DEPTH 200
#define MAX_NAME  255

typedef struct parser {
    const char *s;
    size_t pos;
    node *nodes;
    int32_t n, cap;
    at_expr_resolve_fn resolve;
    void *user;
    at_status st; /* first error */
    int depth;
} parser;

static int32_t perr(parser *p, at_status s, size_t pos, const char *what)
{
    if (p->st == AT_OK) {
        p->st = at_fail(s, "syntax error at column %zu in \"%s\": %s", pos + 1, p->s, what);
    }
    return -1;
}

static int32_t unexpected(parser *p, size_t pos)
{
    char what[64];
    unsigned char c = (unsigned char)p->s[pos];
    if (c == '\0') return perr(p, AT_ERR_TEMPLATE, pos, "unexpected end of expression");
    if (isprint(c))
        snprintf(what, sizeof what, "unexpected '%c'", c);
    else
        snprintf(what, sizeof what, "unexpected byte 0x%02x", c);
    return perr(p, AT_ERR_TEMPLATE, pos, what);
}

static void skip_ws(parser *p)
{
    while (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' ||
           p->s[p->pos] == '\r')
        p->pos++;
}

static int32_t mk(parser *p, int32_t op, int32_t a, int32_t b, int32_t c, int64_t v)
{
    if (p->st != AT_OK) return -1;
    if (p->n == p->cap) {
        int32_t cap = p->cap ? p->cap * 2 : 16;
        node *nn = realloc(p->nodes, (size_t)cap * sizeof *nn);
        if (!nn) {
            p->st = at_fail(AT_ERR_NO_MEMORY, "out of memory parsing \"%s\"", p->s);
            return -1;
        }
        p->nodes = nn;
        p->cap = cap;
    }
    node *x = &p->nodes[p->n];
    x->op = op;
    x->a = a;
    x->b = b;
    x->c = c;
    x->v = v;
    /* Constant folding: an operator whose operands are all literals becomes a literal (unless
     * its evaluation fails, e.g. 1/0, which then fails at run time as written). */
    if (op != OP_LIT && op != OP_SLOT) {
        bool konst = (a < 0 || p->nodes[a].op == OP_LIT) && (b < 0 || p->nodes[b].op == OP_LIT) &&
                     (c < 0 || p->nodes[c].op == OP_LIT);
        if (konst) {
            bool ok = true;
            int64_t r = ev(p->nodes, p->n, NULL, &ok);
            if (ok) {
                x->op = OP_LIT;
                x->a = x->b = x->c = -1;
                x->v = r;
            }
        }
    }
    return p->n++;
}

static int32_t parse_cond(parser *p);

static int32_t expect(parser *p, char ch)
{
    skip_ws(p);
    if (p->s[p->pos] != ch) {
        char what[48];
        if (p->s[p->pos] == '\0')
            snprintf(what, sizeof what, "expected '%c' before the end", ch);
        else
            snprintf(what, sizeof what, "expected '%c', found '%c'", ch, p->s[p->pos]);
        return perr(p, AT_ERR_TEMPLATE, p->pos, what);
    }
    p->pos++;
    return 0;
}

static int32_t parse_number(parser *p)
{
    size_t start = p->pos;
    const char *s = p->s;
    uint64_t v = 0;
    int base = 10;
    if (s[p->pos] == '0' && (s[p->pos + 1] == 'x' || s[p->pos + 1] == 'X')) {
        base = 16;
        p->pos += 2;
        if (!isxdigit((unsigned char)s[p->pos]))
            return perr(p, AT_ERR_TEMPLATE, start, "bad hexadecimal literal");
    }
    bool overflow = false;
    for (;;) {
        unsigned char c = (unsigned char)s[p->pos];
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (base == 16 && isxdigit(c))
            d = tolower(c) - 'a' + 10;
        else
            break;
        if (v > ((uint64_t)INT64_MAX - (uint64_t)d) / (uint64_t)base)
            overflow = true;
        else
            v = v * (uint64_t)base + (uint64_t)d;
        p->pos++;
    }
    unsigned char c = (unsigned char)s[p->pos];
    if (isalpha(c) || c == '_' || c == '.')
        return perr(p, AT_ERR_TEMPLATE, start, "malformed number");
    if (overflow) return perr(p, AT_ERR_TEMPLATE, start, "integer literal out of range");
    return mk(p, OP_LIT, -1, -1, -1, (int64_t)v);
}

static bool is_ident_start(unsigned char c) { return isalpha(c) || c == '_'; }
static bool is_ident_char(unsigned char c) { return isalnum(c) || c == '_' || c == '.'; }

static int32_t parse_ident(parser *p)
{
    size_t start = p->pos;
    while (is_ident_char((unsigned char)p->s[p->pos])) p->pos++;
    size_t len = p->pos - start;
    char name[MAX_NAME + 1];
    if (len > MAX_NAME) return perr(p, AT_ERR_TEMPLATE, start, "name too long");
    memcpy(name, p->s + start, len);
    name[len] = '\0';

    size_t after = p->pos;
    skip_ws(p);
    if (p->s[p->pos] == '(') {
        static const struct {
            const char *name;
            int32_t op;
            int nargs;
        } fns[] = {{"min", OP_MIN, 2},
                   {"max", OP_MAX, 2},
                   {"ceil_div", OP_CEILDIV, 2},
                   {"pow2", OP_POW2, 1},
                   {"log2", OP_LOG2, 1}};
        for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
            if (strcmp(fns[i].name, name) != 0) continue;
            p->pos++; /* '(' */
            int32_t args[2] = {-1, -1};
            for (int k = 0; k < fns[i].nargs; k++) {
                if (k > 0) {
                    skip_ws(p);
                    if (p->s[p->pos] != ',') break;
                    p->pos++;
                }
                args[k] = parse_cond(p);
                if (args[k] < 0) return -1;
            }
            skip_ws(p);
            char next = p->s[p->pos];
            if (next != ')' && next != ',') return expect(p, ')');
            if (next == ',' || args[fns[i].nargs - 1] < 0) {
                char what[MAX_NAME + 48];
                snprintf(what, sizeof what, "%s() takes %d argument%s", name, fns[i].nargs,
                         fns[i].nargs == 1 ? "" : "s");
                return perr(p, AT_ERR_TEMPLATE, p->pos, what);
            }
            p->pos++;
            return mk(p, fns[i].op, args[0], args[1], -1, 0);
        }
        char what[MAX_NAME + 32];
        snprintf(what, sizeof what, "unknown function '%s'", name);
        return perr(p, AT_ERR_TEMPLATE, start, what);
    }
    p->pos = after;

    int slot = p->resolve ? p->resolve(p->user, name) : -1;
    if (slot < 0) {
        if (p->st == AT_OK)
            p->st = at_fail(AT_ERR_TEMPLATE, "unknown name '%s' in \"%s\" (column %zu)", name, p->s,
                            start + 1);
        return -1;
    }
    return mk(p, OP_SLOT, -1, -1, -1, slot);
}

static int32_t parse_unary(parser *p)
{
    skip_ws(p);
    size_t start = p->pos;
    if (++p->depth > MAX_DEPTH) return perr(p, AT_ERR_TEMPLATE, start, "expression too deep");
    unsigned char c = (unsigned char)p->s[p->pos];
    int32_t r;
    if (c == '-' || c == '!' || c == '~' || c == '+') {
        p->pos++;
        int32_t a = parse_unary(p);
        if (a < 0)
            r = -1;
        else if (c == '+')
            r = a;
        else
            r = mk(p, c == '-' ? OP_NEG : c == '!' ? OP_NOT : OP_BNOT, a, -1, -1, 0);
    } else if (c == '(') {
        p->pos++;
        r = parse_cond(p);
        if (r >= 0 && expect(p, ')') < 0) r = -1;
    } else if (isdigit(c)) {
        r = parse_number(p);
    } else if (is_ident_start(c)) {
        r = parse_ident(p);
    } else {
        r = unexpected(p, start);
    }
    p->depth--;
    return r;
}

/* Binary operator at the current position: its op, precedence (C's, 10 binds tightest) and
 * length; 0 when there is none. */
static int binop(const char *s, int32_t *op, int *len)
{
    static const struct {
        const char *t;
        int32_t op;
        int prec;
    } ops[] = {{"||", OP_LOR, 1}, {"&&", OP_LAND, 2}, {"==", OP_EQ, 6},  {"!=", OP_NE, 6},
               {"<=", OP_LE, 7},  {">=", OP_GE, 7},   {"<<", OP_SHL, 8}, {">>", OP_SHR, 8},
               {"|", OP_BOR, 3},  {"^", OP_XOR, 4},   {"&", OP_BAND, 5}, {"<", OP_LT, 7},
               {">", OP_GT, 7},   {"+", OP_ADD, 9},   {"-", OP_SUB, 9},  {"*", OP_MUL, 10},
               {"/", OP_DIV, 10}, {"%", OP_MOD, 10}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        size_t l = strlen(ops[i].t);
        if (strncmp(s, ops[i].t, l) == 0) {
            *op = ops[i].op;
            *len = (int)l;
            return ops[i].prec;
        }
    }
    return 0;
}

static int32_t parse_binary(parser *p, int minprec)
{
    int32_t lhs = parse_unary(p);
    while (lhs >= 0) {
        skip_ws(p);
        int32_t op;
        int len;
        int prec = binop(p->s + p->pos, &op, &len);
        if (prec == 0 || prec < minprec) break;
        p->pos += (size_t)len;
        int32_t rhs = parse_binary(p, prec + 1);
        if (rhs < 0) return -1;
        lhs = mk(p, op, lhs, rhs, -1, 0);
    }
    return lhs;
}

static int32_t parse_cond(parser *p)
{
    if (++p->depth > MAX_DEPTH) return perr(p, AT_ERR_TEMPLATE, p->pos, "expression too deep");
    int32_t c = parse_binary(p, 1);
    if (c >= 0) {
        skip_ws(p);
        if (p->s[p->pos] == '?') {
            p->pos++;
            int32_t a = parse_cond(p);
            if (a >= 0 && expect(p, ':') >= 0) {
                int32_t b = parse_cond(p);
                c = b < 0 ? -1 : mk(p, OP_COND, c, a, b, 0);
            } else {
                c = -1;
            }
        }
    }
    p->depth--;
    return c;
}

at_status at_expr_parse(const char *text, at_expr_resolve_fn resolve, void *user, at_expr **out)
{
    if (!out) return at_fail(AT_ERR_INVALID_ARG, "at_expr_parse: out is NULL");
    *out = NULL;
    if (!text) return at_fail(AT_ERR_INVALID_ARG, "at_expr_parse: text is NULL");
    parser p = {.s = text, .resolve = resolve, .user = user, .st = AT_OK};
    int32_t root = parse_cond(&p);
    if (root >= 0) {
        skip_ws(&p);
        if (p.s[p.pos] != '\0') root = unexpected(&p, p.pos);
    }
    if (root < 0 || p.st != AT_OK) {
        free(p.nodes);
        return p.st != AT_OK ? p.st : at_fail(AT_ERR_INTERNAL, "expression parser failed");
    }
    at_expr *e = calloc(1, sizeof *e);
    char *t = at_strdup(text);
    if (!e || !t) {
        free(e);
        free(t);
        free(p.nodes);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory parsing \"%s\"", text);
    }
    e->nodes = p.nodes;
    e->nnodes = p.n;
    e->root = root;
    e->text = t;
    *out = e;
    return AT_OK;
}
