/* sbuf.c — the growing string buffer (sbuf.h). */
#include "sbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(at_sbuf *b, size_t extra)
{
    if (b->oom) return -1;
    if (b->n + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra + 1) cap *= 2;
    char *np = realloc(b->p, cap);
    if (!np) {
        b->oom = 1;
        return -1;
    }
    b->p = np;
    b->cap = cap;
    return 0;
}

void at_sb_put(at_sbuf *b, const char *s, size_t len)
{
    if (reserve(b, len)) return;
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

void at_sb_puts(at_sbuf *b, const char *s) { at_sb_put(b, s, strlen(s)); }

void at_sb_putc(at_sbuf *b, char c) { at_sb_put(b, &c, 1); }

void at_sb_printf(at_sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0) {
        b->oom = 1;
        return;
    }
    if (reserve(b, (size_t)need)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)need;
}

void at_sb_clear(at_sbuf *b)
{
    b->n = 0;
    b->oom = 0;
    if (b->p) b->p[0] = '\0';
}

const char *at_sb_str(const at_sbuf *b) { return b->p && !b->oom ? b->p : ""; }

char *at_sb_take(at_sbuf *b)
{
    char *p = b->oom ? NULL : b->p ? b->p : calloc(1, 1);
    if (b->oom) free(b->p);
    memset(b, 0, sizeof *b);
    return p;
}

void at_sb_free(at_sbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}
