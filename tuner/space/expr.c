/* expr.c — integer expressions of the tuning spaces: a precedence-climbing parser that compiles
 * to postfix code (identifiers bound to slots at parse time, constants folded) and an
 * allocation-free evaluator with checked arithmetic. Neither recurses per term: a flat chain
 * (a + b + c ..., a && b && ...) is a loop in both; nesting is limited (MAX_DEPTH, MAX_STACK). */
#include "space.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    /* operands: push a value */
    OP_LIT,
    OP_SLOT,
    /* unary: replace the top */
    OP_NEG,
    OP_NOT,
    OP_BNOT,
    OP_POW2,
    OP_LOG2,
    OP_BOOL, /* the top as 0 or 1: ends a && or || */
    /* binary: pop b, replace a with a OP b */
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
    OP_MIN,
    OP_MAX,
    OP_CEILDIV,
    /* jumps to v (an instruction index) */
    OP_AND,  /* top 0: jump (leaving 0); else pop */
    OP_OR,   /* top not 0: make it 1 and jump; else pop */
    OP_JZ,   /* pop; jump if it was 0 (the `?` of c ? a : b) */
    OP_JUMP, /* jump (the `:`) */
};

#define IS_UNARY(op)  ((op) >= OP_NEG && (op) <= OP_BOOL)
#define IS_BINARY(op) ((op) >= OP_MUL && (op) <= OP_CEILDIV)

typedef struct insn {
    int32_t op;
    int64_t v; /* OP_LIT: the value; OP_SLOT: the slot index; jumps: the target */
} insn;

/* Operands pending at once during an evaluation: the evaluator's stack, on the C stack. A flat
 * chain needs two; each level of nesting (parentheses, precedence) one more. */
#define MAX_STACK 256

struct at_expr {
    insn *code;
    int32_t ncode;
    char *text;
};

/* ---- evaluation -------------------------------------------------------------------------- */

/* A unary (b unused) or binary operator on its operands; *ok = false when it cannot be
 * evaluated (division by zero, overflow, a shift out of range, log2 of a non-positive). */
static int64_t apply(int32_t op, int64_t a, int64_t b, bool *ok)
{
    int64_t r;
    switch (op) {
    case OP_NEG:
        if (a == INT64_MIN) break;
        return -a;
    case OP_NOT:
        return !a;
    case OP_BNOT:
        return ~a;
    case OP_POW2:
        return a > 0 && (a & (a - 1)) == 0;
    case OP_LOG2:
        if (a <= 0) break;
        return 63 - __builtin_clzll((unsigned long long)a);
    case OP_BOOL:
        return a != 0;
    case OP_MUL:
        if (__builtin_mul_overflow(a, b, &r)) break;
        return r;
    case OP_DIV:
        if (b == 0 || (a == INT64_MIN && b == -1)) break;
        return a / b;
    case OP_MOD:
        if (b == 0) break;
        if (b == -1) return 0;
        return a % b;
    case OP_ADD:
        if (__builtin_add_overflow(a, b, &r)) break;
        return r;
    case OP_SUB:
        if (__builtin_sub_overflow(a, b, &r)) break;
        return r;
    case OP_SHL:
        if (b < 0 || b > 63) break;
        r = (int64_t)((uint64_t)a << b);
        if ((r >> b) != a) break; /* bits (or the sign) shifted out */
        return r;
    case OP_SHR:
        if (b < 0 || b > 63) break;
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
        if (b == 0 || (a == INT64_MIN && b == -1)) break;
        int64_t q = a / b, m = a % b;
        if (m != 0 && ((m > 0) == (b > 0))) q++;
        return q;
    }
    default:
        break;
    }
    *ok = false;
    return 0;
}

int64_t at_expr_eval(const at_expr *e, const int64_t *slots, bool *ok)
{
    int64_t st[MAX_STACK];
    int sp = 0; /* values on st */
    bool good = e != NULL;
    for (int32_t pc = 0; good && pc < e->ncode; pc++) {
        const insn *x = &e->code[pc];
        switch (x->op) {
        case OP_LIT:
            st[sp++] = x->v;
            break;
        case OP_SLOT:
            st[sp++] = slots[x->v];
            break;
        case OP_AND:
        case OP_OR:
            if ((st[sp - 1] != 0) == (x->op == OP_OR)) {
                st[sp - 1] = x->op == OP_OR;
                pc = (int32_t)x->v - 1;
            } else {
                sp--;
            }
            break;
        case OP_JZ:
            if (st[--sp] == 0) pc = (int32_t)x->v - 1;
            break;
        case OP_JUMP:
            pc = (int32_t)x->v - 1;
            break;
        default:
            if (IS_BINARY(x->op)) {
                sp--;
                st[sp - 1] = apply(x->op, st[sp - 1], st[sp], &good);
            } else {
                st[sp - 1] = apply(x->op, st[sp - 1], 0, &good);
            }
            break;
        }
    }
    if (ok) *ok = good;
    return good ? st[0] : 0;
}

const char *at_expr_text(const at_expr *e) { return e ? e->text : ""; }

void at_expr_free(at_expr *e)
{
    if (!e) return;
    free(e->code);
    free(e->text);
    free(e);
}

/* ---- parsing ----------------------------------------------------------------------------- */

/* Nested parentheses, unary operators and conditionals: the parser recurses once per level. */
#define MAX_DEPTH 200
#define MAX_NAME  255

typedef struct parser {
    const char *s;
    size_t pos;
    insn *code;
    int32_t n, cap;
    int sp, maxsp; /* operands the code emitted so far leaves pending, and their maximum */
    at_expr_resolve_fn resolve;
    void *user;
    at_status st; /* first error */
    int depth;
} parser;

/* Messages quote the expression, up to SHOWN characters of it ("..." after). */
#define SHOWN    120
#define QUOTE(s) (int)(strlen(s) > SHOWN ? SHOWN : strlen(s)), (s), strlen(s) > SHOWN ? "..." : ""

static int32_t perr(parser *p, at_status s, size_t pos, const char *what)
{
    if (p->st == AT_OK)
        p->st =
            at_fail(s, "syntax error at column %zu in \"%.*s%s\": %s", pos + 1, QUOTE(p->s), what);
    return -1;
}

static int32_t too_deep(parser *p, size_t pos)
{
    char what[128];
    snprintf(what, sizeof what,
             "expression too deep (more than %d nested parentheses, unary operators or "
             "conditionals, or %d pending operands)",
             MAX_DEPTH, MAX_STACK);
    return perr(p, AT_ERR_TEMPLATE, pos, what);
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

/* Appends an instruction, keeping count of the operands pending; returns its index. */
static int32_t emit(parser *p, int32_t op, int64_t v)
{
    if (p->st != AT_OK) return -1;
    if (p->n == p->cap) {
        if (p->cap > INT32_MAX / 2) return perr(p, AT_ERR_TEMPLATE, p->pos, "expression too long");
        int32_t cap = p->cap ? p->cap * 2 : 16;
        insn *nc = realloc(p->code, (size_t)cap * sizeof *nc);
        if (!nc) {
            p->st = at_fail(AT_ERR_NO_MEMORY, "out of memory parsing \"%.*s%s\"", QUOTE(p->s));
            return -1;
        }
        p->code = nc;
        p->cap = cap;
    }
    if (op == OP_LIT || op == OP_SLOT) {
        if (++p->sp > MAX_STACK) return too_deep(p, p->pos);
        if (p->sp > p->maxsp) p->maxsp = p->sp;
    } else if (IS_BINARY(op) || op == OP_AND || op == OP_OR || op == OP_JZ) {
        p->sp--; /* AND, OR: the right operand's value replaces the left one's */
    }
    p->code[p->n] = (insn){op, v};
    return p->n++;
}

/* The code from start on is one literal: its value. */
static bool literal(const parser *p, int32_t start, int64_t *v)
{
    if (p->n != start + 1 || p->code[start].op != OP_LIT) return false;
    *v = p->code[start].v;
    return true;
}

/* Ends an operator whose operands' code starts at a (and b, for a binary one): the operator's
 * instruction, or when every operand is a literal that it can be applied to, one literal. */
static int32_t finish_op(parser *p, int32_t op, int32_t a, int32_t b)
{
    if (p->st != AT_OK) return -1;
    int32_t nops = b >= 0 ? 2 : 1;
    bool lits = p->n == a + nops;
    for (int32_t i = a; lits && i < p->n; i++) lits = p->code[i].op == OP_LIT;
    if (lits) {
        bool ok = true;
        int64_t r = apply(op, p->code[a].v, nops == 2 ? p->code[a + 1].v : 0, &ok);
        if (ok) {
            p->n = a;
            p->sp -= nops;
            emit(p, OP_LIT, r);
            return a;
        }
    }
    emit(p, op, 0);
    return a;
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
    int32_t at = p->n;
    return emit(p, OP_LIT, (int64_t)v) < 0 ? -1 : at;
}

static bool is_ident_start(unsigned char c) { return isalpha(c) || c == '_'; }
static bool is_ident_char(unsigned char c) { return isalnum(c) || c == '_' || c == '.'; }

static int32_t parse_ident(parser *p)
{
    size_t start = p->pos;
    int32_t at = p->n;
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
            return finish_op(p, fns[i].op, args[0], args[1]);
        }
        char what[MAX_NAME + 32];
        snprintf(what, sizeof what, "unknown function '%s'", name);
        return perr(p, AT_ERR_TEMPLATE, start, what);
    }
    p->pos = after;

    int slot = p->resolve ? p->resolve(p->user, name) : -1;
    if (slot < 0) {
        if (p->st == AT_OK)
            p->st = at_fail(AT_ERR_TEMPLATE, "unknown name '%s' in \"%.*s%s\" (column %zu)", name,
                            QUOTE(p->s), start + 1);
        return -1;
    }
    return emit(p, OP_SLOT, slot) < 0 ? -1 : at;
}

/* Each parse_* function emits the code of what it parses and returns where that code starts
 * (-1 on an error). */
static int32_t parse_unary(parser *p)
{
    skip_ws(p);
    size_t start = p->pos;
    if (++p->depth > MAX_DEPTH) return too_deep(p, start);
    unsigned char c = (unsigned char)p->s[p->pos];
    int32_t r;
    if (c == '-' || c == '!' || c == '~' || c == '+') {
        p->pos++;
        r = parse_unary(p);
        if (r >= 0 && c != '+')
            r = finish_op(p, c == '-' ? OP_NEG : c == '!' ? OP_NOT : OP_BNOT, r, -1);
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
    } ops[] = {{"||", OP_OR, 1},  {"&&", OP_AND, 2}, {"==", OP_EQ, 6},  {"!=", OP_NE, 6},
               {"<=", OP_LE, 7},  {">=", OP_GE, 7},  {"<<", OP_SHL, 8}, {">>", OP_SHR, 8},
               {"|", OP_BOR, 3},  {"^", OP_XOR, 4},  {"&", OP_BAND, 5}, {"<", OP_LT, 7},
               {">", OP_GT, 7},   {"+", OP_ADD, 9},  {"-", OP_SUB, 9},  {"*", OP_MUL, 10},
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

/* Operands of equal precedence are a loop, not a recursion: a + b + c ... */
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
        if (op == OP_AND || op == OP_OR) {
            /* lhs, AND/OR end, rhs, BOOL; end: (a literal lhs and rhs fold to one) */
            int64_t a, b;
            bool lit = literal(p, lhs, &a);
            int32_t jump = emit(p, op, 0);
            int32_t rhs = parse_binary(p, prec + 1);
            if (rhs < 0 || jump < 0) return -1;
            if (lit && literal(p, rhs, &b)) {
                p->n = lhs;
                p->sp--;
                emit(p, OP_LIT, op == OP_AND ? a && b : a || b);
            } else {
                emit(p, OP_BOOL, 0);
                p->code[jump].v = p->n;
            }
            continue;
        }
        int32_t rhs = parse_binary(p, prec + 1);
        if (rhs < 0) return -1;
        finish_op(p, op, lhs, rhs);
    }
    return p->st == AT_OK ? lhs : -1;
}

/* c ? a : b compiles to c, JZ else, a, JUMP end, else: b, end: (a literal c folds to a or b). */
static int32_t parse_cond(parser *p)
{
    if (++p->depth > MAX_DEPTH) return too_deep(p, p->pos);
    int32_t c = parse_binary(p, 1);
    if (c >= 0) {
        skip_ws(p);
        if (p->s[p->pos] == '?') {
            p->pos++;
            int64_t cv;
            bool lit = literal(p, c, &cv);
            int32_t jz = emit(p, OP_JZ, 0);
            int32_t a = parse_cond(p), jump = -1, b = -1;
            if (a >= 0 && expect(p, ':') >= 0) {
                jump = emit(p, OP_JUMP, 0);
                p->sp--; /* b's value takes the place of a's */
                b = parse_cond(p);
            }
            if (jz < 0 || jump < 0 || b < 0) {
                c = -1;
            } else if (lit) {
                /* keep the branch taken: a's code or b's, moved to where c's was */
                int32_t from = cv ? a : b, to = cv ? jump : p->n;
                memmove(&p->code[c], &p->code[from], (size_t)(to - from) * sizeof *p->code);
                int32_t shift = from - c;
                p->n = c + (to - from);
                for (int32_t i = c; i < p->n; i++)
                    if (p->code[i].op >= OP_AND) p->code[i].v -= shift;
            } else {
                p->code[jz].v = b;
                p->code[jump].v = p->n;
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
        free(p.code);
        return p.st != AT_OK ? p.st : at_fail(AT_ERR_INTERNAL, "expression parser failed");
    }
    at_expr *e = calloc(1, sizeof *e);
    char *t = at_strdup(text);
    if (!e || !t) {
        free(e);
        free(t);
        free(p.code);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory parsing \"%.*s%s\"", QUOTE(text));
    }
    e->code = p.code;
    e->ncode = p.n;
    e->text = t;
    *out = e;
    return AT_OK;
}
