/* sbuf.h — the one growing string buffer: append text, printf, bytes; an allocation failure is
 * remembered (oom) and later appends do nothing, so callers check once at the end. */
#ifndef AT_SBUF_H
#define AT_SBUF_H

#include <stddef.h>

typedef struct at_sbuf {
    char *p;  /* NUL-terminated once anything was appended; NULL before */
    size_t n; /* length without the NUL */
    size_t cap;
    int oom; /* an allocation failed: the contents are incomplete */
} at_sbuf;

void at_sb_put(at_sbuf *b, const char *s, size_t len);
void at_sb_puts(at_sbuf *b, const char *s);
void at_sb_putc(at_sbuf *b, char c);
void at_sb_printf(at_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Starts over: empty and oom cleared, the allocation kept for reuse. */
void at_sb_clear(at_sbuf *b);
/* The text so far ("" when empty). */
const char *at_sb_str(const at_sbuf *b);
/* Hands the malloc'd text to the caller (NULL after an allocation failure) and resets b. */
char *at_sb_take(at_sbuf *b);
void at_sb_free(at_sbuf *b);

#endif
