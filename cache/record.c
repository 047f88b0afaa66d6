/* record.c — the text records of the results, best, checks and devices tables (record.h): one field
 * table per record drives both the formatter and the tolerant parser, so the two cannot drift
 * apart. */
#define _POSIX_C_SOURCE 200809L
#include "record.h"

#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the fields ------------------------------------------------------------------------- */

typedef enum ftype {
    F_STATUS, /* at_result_status, by name */
    F_F64,    /* double, %.17g */
    F_I64,    /* int64_t */
    F_COUNT,  /* int64_t, >= 0 */
    F_FLAG,   /* int, 0 or 1 */
    F_TOKEN,  /* char[cap], a bare token (hex hash) */
    F_STR,    /* char[cap], a quoted string */
} ftype;

typedef struct field {
    const char *name;
    ftype type;
    size_t off, cap; /* where in the record; cap: the size of a char array */
    int required;
} field;

#define FIELD(rec, member, name, type, required)                                                   \
    {                                                                                              \
        name, type, offsetof(rec, member), sizeof(((rec *)0)->member), required                    \
    }

/* Written in this order; new fields are appended (docs/database.md lists them). */
static const field k_result_fields[] = {
    FIELD(at_result_rec, status, "status", F_STATUS, 1),
    FIELD(at_result_rec, median_us, "median_us", F_F64, 0),
    FIELD(at_result_rec, min_us, "min_us", F_F64, 0),
    FIELD(at_result_rec, max_us, "max_us", F_F64, 0),
    FIELD(at_result_rec, reps, "reps", F_COUNT, 0),
    FIELD(at_result_rec, early_stop, "early_stop", F_FLAG, 0),
    FIELD(at_result_rec, max_rel_error, "err", F_F64, 0),
    FIELD(at_result_rec, compile_ms, "compile_ms", F_F64, 0),
    FIELD(at_result_rec, when, "when", F_I64, 0),
    FIELD(at_result_rec, reason, "reason", F_STR, 0),
    FIELD(at_result_rec, template_name, "template", F_STR, 0), /* since 2.1 */
};

static const field k_best_fields[] = {
    FIELD(at_best_rec, config, "config", F_STR, 1),
    FIELD(at_best_rec, template_hash, "hash", F_TOKEN, 1),
    FIELD(at_best_rec, time_us, "time_us", F_F64, 0),
    FIELD(at_best_rec, gflops, "gflops", F_F64, 0),
    FIELD(at_best_rec, max_rel_error, "err", F_F64, 0),
    FIELD(at_best_rec, when, "when", F_I64, 0),
    FIELD(at_best_rec, compiler, "compiler", F_STR, 0),
    FIELD(at_best_rec, driver, "driver", F_STR, 0),
    FIELD(at_best_rec, template_name, "template", F_STR, 0), /* since v2 */
    FIELD(at_best_rec, space, "space", F_COUNT, 0),          /* since v2 */
};

static const field k_device_fields[] = {
    FIELD(at_device_rec, backend, "backend", F_TOKEN, 1),
    FIELD(at_device_rec, name, "name", F_STR, 1),
    FIELD(at_device_rec, vendor, "vendor", F_STR, 0),
    FIELD(at_device_rec, arch, "arch", F_STR, 0),
    FIELD(at_device_rec, family, "family", F_STR, 0),
    FIELD(at_device_rec, units, "units", F_COUNT, 0),
    FIELD(at_device_rec, driver, "driver", F_STR, 0),
    FIELD(at_device_rec, compiler, "compiler", F_STR, 0),
    FIELD(at_device_rec, when, "when", F_I64, 0),
};

#define NFIELDS(t) (sizeof t / sizeof t[0])

static const char *const k_status_names[AT_RS_COUNT] = {
    "ok", "compile_error", "resource_limit", "launch_error", "wrong_result", "timeout", "crashed"};

const char *at_result_status_name(at_result_status s)
{
    if ((int)s < 0 || s >= AT_RS_COUNT) return "unknown";
    return k_status_names[s];
}

int at_result_status_parse(const char *name)
{
    if (!name) return -1;
    for (int i = 0; i < AT_RS_COUNT; i++)
        if (strcmp(name, k_status_names[i]) == 0) return i;
    return -1;
}

/* ---- formatting ------------------------------------------------------------------------- */

/* Appends s[0..n) quoted, escaping \ " and control characters. */
static void put_quoted(at_sbuf *b, const char *s, size_t n)
{
    at_sb_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = c == '"'    ? "\\\""
                          : c == '\\' ? "\\\\"
                          : c == '\n' ? "\\n"
                          : c == '\r' ? "\\r"
                          : c == '\t' ? "\\t"
                                      : NULL;
        if (esc)
            at_sb_puts(b, esc);
        else if (c < 0x20 || c == 0x7f)
            at_sb_printf(b, "\\x%02x", c);
        else
            at_sb_putc(b, (char)c);
    }
    at_sb_putc(b, '"');
}

static void append(at_sbuf *b, const field *fields, size_t nf, const void *rec)
{
    const char *base = rec;
    at_sb_printf(b, "v%d", AT_RECORD_VERSION);
    for (size_t i = 0; i < nf; i++) {
        const field *f = &fields[i];
        const void *v = base + f->off;
        at_sb_printf(b, " %s=", f->name);
        switch (f->type) {
        case F_STATUS:
            at_sb_puts(b, at_result_status_name(*(const at_result_status *)v));
            break;
        case F_F64:
            at_sb_printf(b, "%.17g", *(const double *)v);
            break;
        case F_I64:
        case F_COUNT:
            at_sb_printf(b, "%" PRId64, *(const int64_t *)v);
            break;
        case F_FLAG:
            at_sb_printf(b, "%d", *(const int *)v);
            break;
        case F_TOKEN: /* the writer checks it is a bare token */
            at_sb_put(b, v, strnlen(v, f->cap));
            break;
        case F_STR:
            put_quoted(b, v, strnlen(v, f->cap));
            break;
        }
    }
}

void at_result_rec_append(at_sbuf *b, const at_result_rec *r)
{
    append(b, k_result_fields, NFIELDS(k_result_fields), r);
}

void at_best_rec_append(at_sbuf *b, const at_best_rec *r)
{
    append(b, k_best_fields, NFIELDS(k_best_fields), r);
}

void at_device_rec_append(at_sbuf *b, const at_device_rec *r)
{
    append(b, k_device_fields, NFIELDS(k_device_fields), r);
}

static void format_into(const at_sbuf *b, char *buf, size_t len)
{
    if (!buf || len == 0) return;
    size_t n = b->oom ? 0 : b->n < len - 1 ? b->n : len - 1;
    if (n) memcpy(buf, b->p, n);
    buf[n] = '\0';
}

void at_result_rec_format(const at_result_rec *r, char *buf, size_t len)
{
    at_sbuf b = {0};
    if (r) at_result_rec_append(&b, r);
    format_into(&b, buf, len);
    at_sb_free(&b);
}

void at_best_rec_format(const at_best_rec *r, char *buf, size_t len)
{
    at_sbuf b = {0};
    if (r) at_best_rec_append(&b, r);
    format_into(&b, buf, len);
    at_sb_free(&b);
}

/* ---- parsing ---------------------------------------------------------------------------- */

typedef struct parser {
    const char *p, *end;
} parser;

/* Every parse failure but a newer version is a damaged record. */
#define bad(...) at_fail(AT_ERR_DB_CORRUPT, __VA_ARGS__)

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A quoted string at ps->p (after its opening quote), decoded into out[cap] (NULL: skipped). */
static at_status quoted(parser *ps, const char *name, char *out, size_t cap)
{
    size_t n = 0;
    for (;;) {
        if (ps->p >= ps->end) return bad("field %s: unterminated string", name);
        char c = *ps->p++;
        if (c == '"') break;
        if ((unsigned char)c < 0x20) return bad("field %s: control byte in a string", name);
        if (c == '\\') {
            char e = ps->p < ps->end ? *ps->p++ : '\0';
            int h = -1, l = -1;
            switch (e) {
            case '"':
            case '\\':
                c = e;
                break;
            case 'n':
                c = '\n';
                break;
            case 'r':
                c = '\r';
                break;
            case 't':
                c = '\t';
                break;
            case 'x':
                if (ps->end - ps->p >= 2) h = hexval(ps->p[0]), l = hexval(ps->p[1]);
                if (h < 0 || l < 0 || (h == 0 && l == 0))
                    return bad("field %s: bad \\x escape", name);
                c = (char)(h * 16 + l);
                ps->p += 2;
                break;
            default:
                return bad("field %s: bad escape", name);
            }
        }
        if (out) {
            if (n + 1 >= cap) return bad("field %s: longer than %zu bytes", name, cap - 1);
            out[n++] = c;
        }
    }
    if (out) out[n] = '\0';
    return AT_OK;
}

/* Converts the bare value tok of a known field into the record. */
static at_status bare(const field *f, const char *tok, void *v)
{
    int64_t x = 0;
    switch (f->type) {
    case F_STATUS: {
        int code = at_result_status_parse(tok);
        if (code < 0) return bad("field %s: unknown status '%s'", f->name, tok);
        *(at_result_status *)v = (at_result_status)code;
        return AT_OK;
    }
    case F_F64: {
        char *e = NULL;
        double d = strtod(tok, &e);
        if (e == tok || *e != '\0') return bad("field %s: '%s' is not a number", f->name, tok);
        *(double *)v = d;
        return AT_OK;
    }
    case F_I64:
    case F_COUNT:
    case F_FLAG:
        if (at_parse_i64(tok, f->type == F_I64 ? INT64_MIN : 0, f->type == F_FLAG ? 1 : INT64_MAX,
                         &x) != 0)
            return bad("field %s: '%s' is not a%s integer", f->name, tok,
                       f->type == F_FLAG    ? " 0/1"
                       : f->type == F_COUNT ? " non-negative"
                                            : "n");
        if (f->type == F_FLAG)
            *(int *)v = (int)x;
        else
            *(int64_t *)v = x;
        return AT_OK;
    case F_TOKEN:
        if (strlen(tok) >= f->cap)
            return bad("field %s: longer than %zu bytes", f->name, f->cap - 1);
        memcpy(v, tok, strlen(tok) + 1);
        return AT_OK;
    case F_STR:
        break;
    }
    return bad("field %s: a string must be quoted", f->name);
}

static int name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static at_status parse(const char *text, size_t len, const field *fields, size_t nf, void *rec,
                       size_t size)
{
    memset(rec, 0, size);
    parser ps = {text, text + len};
    /* The version tag: "v<N>". */
    const char *t = ps.p;
    while (ps.p < ps.end && *ps.p != ' ') ps.p++;
    size_t tlen = (size_t)(ps.p - t);
    char tok[128];
    int64_t version = 0;
    if (tlen >= 2 && tlen < 8 && t[0] == 'v') {
        memcpy(tok, t + 1, tlen - 1);
        tok[tlen - 1] = '\0';
        if (at_parse_i64(tok, 1, 999999, &version) != 0) version = 0;
    }
    if (version == 0) return bad("no version tag (v1, v2, ...) at its start");
    if (version > AT_RECORD_VERSION)
        return at_fail(AT_ERR_DB_VERSION,
                       "record version v%" PRId64 " is newer than this autotune reads (v%d)",
                       version, AT_RECORD_VERSION);

    uint64_t seen = 0; /* one bit per field (at most 64) */
    while (ps.p < ps.end) {
        while (ps.p < ps.end && *ps.p == ' ') ps.p++;
        if (ps.p == ps.end) break;
        const char *name = ps.p;
        while (ps.p < ps.end && name_char(*ps.p)) ps.p++;
        size_t nlen = (size_t)(ps.p - name);
        if (nlen == 0 || ps.p == ps.end || *ps.p != '=')
            return bad("expected name=value at '%.*s'",
                       (int)(ps.end - name < 40 ? ps.end - name : 40), name);
        ps.p++;
        const field *f = NULL;
        for (size_t i = 0; i < nf && !f; i++)
            if (strlen(fields[i].name) == nlen && memcmp(fields[i].name, name, nlen) == 0)
                f = &fields[i];
        char fname[64];
        snprintf(fname, sizeof fname, "%.*s", (int)nlen, name);
        if (f) {
            uint64_t bit = 1ull << (f - fields);
            if (seen & bit) return bad("field %s given twice", f->name);
            seen |= bit;
        }
        void *v = f ? (char *)rec + f->off : NULL;
        if (ps.p < ps.end && *ps.p == '"') {
            ps.p++;
            if (f && f->type != F_STR) return bad("field %s: a quoted value", f->name);
            AT_TRY(quoted(&ps, fname, f ? v : NULL, f ? f->cap : 0));
            if (ps.p < ps.end && *ps.p != ' ')
                return bad("field %s: no space after its string", fname);
            continue;
        }
        t = ps.p;
        while (ps.p < ps.end && *ps.p != ' ') {
            if ((unsigned char)*ps.p < 0x20 || *ps.p == '"')
                return bad("field %s: a control byte or quote in a bare value", fname);
            ps.p++;
        }
        if (!f) continue; /* unknown: a newer minor version wrote it */
        tlen = (size_t)(ps.p - t);
        if (tlen >= sizeof tok)
            return bad("field %s: value longer than %zu bytes", fname, sizeof tok - 1);
        memcpy(tok, t, tlen);
        tok[tlen] = '\0';
        AT_TRY(bare(f, tok, v));
    }
    for (size_t i = 0; i < nf; i++)
        if (fields[i].required && !(seen & (1ull << i)))
            return bad("required field %s is missing", fields[i].name);
    return AT_OK;
}

at_status at_result_rec_parse(const char *text, size_t len, at_result_rec *out)
{
    if (!text || !out) return at_fail(AT_ERR_INVALID_ARG, "at_result_rec_parse: NULL argument");
    return parse(text, len, k_result_fields, NFIELDS(k_result_fields), out, sizeof *out);
}

at_status at_best_rec_parse(const char *text, size_t len, at_best_rec *out)
{
    if (!text || !out) return at_fail(AT_ERR_INVALID_ARG, "at_best_rec_parse: NULL argument");
    return parse(text, len, k_best_fields, NFIELDS(k_best_fields), out, sizeof *out);
}

at_status at_device_rec_parse(const char *text, size_t len, at_device_rec *out)
{
    if (!text || !out) return at_fail(AT_ERR_INVALID_ARG, "at_device_rec_parse: NULL argument");
    AT_TRY(parse(text, len, k_device_fields, NFIELDS(k_device_fields), out, sizeof *out));
    if (!out->backend[0]) return bad("field backend is empty");
    return AT_OK;
}

/* ---- device identity ---------------------------------------------------------------------- */

/* The LLVM CPU name in a PoCL CPU device's name: its '-'-separated tokens after the first, while
 * they hold no uppercase letter or space ("" when there is none). */
static void pocl_cpu_name(const char *name, char *out, size_t len)
{
    out[0] = '\0';
    const char *p = strchr(name, '-');
    size_t n = 0;
    while (p && p[1]) {
        const char *tok = p + 1, *end = tok;
        while (*end && *end != '-' && *end != ' ' && !(*end >= 'A' && *end <= 'Z')) end++;
        if (end == tok || (*end && *end != '-')) break; /* empty, or an uppercase letter or space */
        if (n + (size_t)(end - tok) + 2 > len) break;
        if (n) out[n++] = '-';
        memcpy(out + n, tok, (size_t)(end - tok));
        n += (size_t)(end - tok);
        out[n] = '\0';
        p = *end ? end : NULL;
    }
}

void at_device_rec_fill(at_device_rec *out, const char *backend, const char *platform,
                        const char *name, const char *arch, int64_t units)
{
    snprintf(out->backend, sizeof out->backend, "%s", backend ? backend : "");
    snprintf(out->name, sizeof out->name, "%s", name ? name : "");
    snprintf(out->arch, sizeof out->arch, "%s", arch ? arch : "");
    out->units = units > 0 ? units : 0;
    const char *vendor = strcmp(out->backend, "cuda") == 0  ? "NVIDIA"
                         : strcmp(out->backend, "hip") == 0 ? "AMD"
                         : platform                         ? platform
                                                            : "";
    snprintf(out->vendor, sizeof out->vendor, "%s", vendor);
    out->family[0] = '\0';
    if (out->arch[0])
        snprintf(out->family, sizeof out->family, "%s", out->arch);
    else if (platform && strcmp(platform, "Portable Computing Language") == 0)
        pocl_cpu_name(out->name, out->family, sizeof out->family);
    if (!out->family[0]) snprintf(out->family, sizeof out->family, "%s", out->name);
}

void at_device_rec_from_key(const char *device_key, at_device_rec *out)
{
    memset(out, 0, sizeof *out);
    const char *key = device_key ? device_key : "";
    /* The parts: backend / second / middle... / last parts (units and, for hip, lds and w). */
    const char *s1 = strchr(key, '/');
    char backend[16] = "", second[256] = "", name[256] = "";
    snprintf(backend, sizeof backend, "%.*s", (int)(s1 ? s1 - key : (ptrdiff_t)strlen(key)), key);
    const char *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
    /* Where the name ends: before the units (and, for hip, lds and w). */
    const char *end = key + strlen(key);
    int tail = strcmp(backend, "hip") == 0 ? 3 : 1;
    for (int i = 0; i < tail && s2; i++) {
        const char *q = end;
        while (q > s2 && q[-1] != '/') q--;
        if (q <= s2 + 1) {
            end = NULL;
            break;
        }
        end = q - 1;
    }
    int64_t units = 0;
    if (s2 && end) {
        const char *u = end + 1;
        size_t ul = strcspn(u, "/");
        char ubuf[24] = "";
        if (ul < sizeof ubuf) memcpy(ubuf, u, ul), ubuf[ul] = '\0';
        if (at_parse_i64(ubuf, 0, INT64_MAX, &units) != 0) units = 0;
        snprintf(second, sizeof second, "%.*s", (int)(s2 - s1 - 1), s1 + 1);
        snprintf(name, sizeof name, "%.*s", (int)(end - s2 - 1), s2 + 1);
    } else if (s1) {
        snprintf(name, sizeof name, "%s", s1 + 1);
    }
    int opencl = strcmp(backend, "opencl") == 0;
    int gpu = strcmp(backend, "cuda") == 0 || strcmp(backend, "hip") == 0;
    at_device_rec_fill(out, backend, opencl ? second : NULL, name, gpu ? second : "", units);
}
