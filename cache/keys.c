/* keys.c — building and splitting the store's composite keys (keys.h). */
#include "keys.h"

#include "base/sbuf.h"

#include <string.h>

static const char *const k_part_names[] = {"problem", "device", "template hash", "config"};

#define HASH_TAIL 17 /* '~' and 16 hex digits */

/* Part s of n bytes (more than max) shortened to max bytes into out: its first bytes, cut where
 * no UTF-8 character is split, '~' and the hash of all of it. Returns the length. */
static size_t shorten(const char *s, size_t n, size_t max, char out[AT_KEY_MAX + 1])
{
    size_t keep = max - HASH_TAIL;
    while (keep > 0 && ((unsigned char)s[keep] & 0xc0) == 0x80) keep--;
    memcpy(out, s, keep);
    out[keep] = '~';
    at_hash_hex(at_hash(AT_HASH_SEED, s, n), out + keep + 1);
    return keep + HASH_TAIL;
}

/* Appends part s to b as a key stores it: shortened when longer than max. */
static void put_part(at_sbuf *b, const char *s, size_t max)
{
    char buf[AT_KEY_MAX + 1];
    size_t n = strlen(s);
    if (n <= max)
        at_sb_put(b, s, n);
    else
        at_sb_put(b, buf, shorten(s, n, max, buf));
}

/* Joins parts[0..n) with '|', plus a trailing '|' for a prefix. Every part is non-empty; a part
 * other than the last of a full results key (free_last) must hold no '|'. */
static char *join(const char *const *parts, int n, int free_last, int trailing)
{
    at_sbuf b = {0};
    for (int i = 0; i < n; i++) {
        if (!parts[i] || !*parts[i]) {
            at_fail(AT_ERR_INVALID_ARG, "database key: the %s is %s", k_part_names[i],
                    parts[i] ? "empty" : "missing");
            at_sb_free(&b);
            return NULL;
        }
        if (!(free_last && i == n - 1) && strchr(parts[i], AT_KEY_SEP)) {
            at_fail(AT_ERR_INVALID_ARG, "database key: the %s '%s' holds a '%c'", k_part_names[i],
                    parts[i], AT_KEY_SEP);
            at_sb_free(&b);
            return NULL;
        }
        if (i) at_sb_putc(&b, AT_KEY_SEP);
        /* The config, last, gets what the other parts leave (at least 124 bytes). */
        put_part(&b, parts[i], free_last && i == n - 1 ? AT_KEY_MAX - b.n : AT_KEY_PART_MAX);
    }
    if (trailing) at_sb_putc(&b, AT_KEY_SEP);
    char *key = at_sb_take(&b);
    if (!key) at_fail(AT_ERR_NO_MEMORY, "out of memory");
    return key;
}

char *at_db_result_key(const char *problem, const char *device, const char *thash,
                       const char *config)
{
    const char *parts[] = {problem, device, thash, config};
    return join(parts, 4, 1, 0);
}

char *at_db_best_key(const char *problem, const char *device)
{
    const char *parts[] = {problem, device};
    return join(parts, 2, 0, 0);
}

char *at_db_device_key(const char *device)
{
    /* The device part of a best key, without the problem before it. */
    const char *parts[] = {"-", device};
    char *key = join(parts, 2, 0, 0);
    if (key) memmove(key, key + 2, strlen(key + 2) + 1);
    return key;
}

char *at_db_results_prefix(const char *problem, const char *device, const char *thash)
{
    const char *parts[] = {problem, device, thash};
    return join(parts, !device ? 1 : !thash ? 2 : 3, 0, 1);
}

/* Splits key into n parts: the first n - 1 end at a '|'; the last is the rest, which may hold
 * '|' only when free_last. */
static at_status split(const char *key, at_key_part *parts, int n, int free_last, const char *what)
{
    if (!key || !parts)
        return at_fail(AT_ERR_INVALID_ARG, "splitting a %s key: NULL argument", what);
    const char *p = key;
    for (int i = 0; i < n; i++) {
        const char *end = i < n - 1 || !free_last ? strchr(p, AT_KEY_SEP) : NULL;
        if (i == n - 1 && end)
            return at_fail(AT_ERR_DB_CORRUPT, "malformed %s key '%s': more than %d parts", what,
                           key, n);
        if (i < n - 1 && !end)
            return at_fail(AT_ERR_DB_CORRUPT, "malformed %s key '%s': %d parts, %d expected", what,
                           key, i + 1, n);
        if (!end) end = p + strlen(p);
        if (end == p)
            return at_fail(AT_ERR_DB_CORRUPT, "malformed %s key '%s': the %s is empty", what, key,
                           k_part_names[i]);
        parts[i] = (at_key_part){p, (size_t)(end - p)};
        p = end + 1;
    }
    return AT_OK;
}

at_status at_result_key_split(const char *key, at_result_key *out)
{
    at_key_part parts[4];
    AT_TRY(split(key, out ? parts : NULL, 4, 1, "results"));
    *out = (at_result_key){parts[0], parts[1], parts[2], parts[3]};
    return AT_OK;
}

at_status at_best_key_split(const char *key, at_best_key *out)
{
    at_key_part parts[2];
    AT_TRY(split(key, out ? parts : NULL, 2, 0, "best"));
    *out = (at_best_key){parts[0], parts[1]};
    return AT_OK;
}

int at_key_part_is(at_key_part p, const char *s)
{
    if (!s) return 0;
    char buf[AT_KEY_MAX + 1];
    size_t n = strlen(s);
    if (n > AT_KEY_PART_MAX) {
        n = shorten(s, n, AT_KEY_PART_MAX, buf);
        s = buf;
    }
    return n == p.n && memcmp(p.s, s, p.n) == 0;
}

int at_key_part_shortened(at_key_part p)
{
    if (p.n < HASH_TAIL || p.s[p.n - HASH_TAIL] != '~') return 0;
    for (size_t i = p.n - HASH_TAIL + 1; i < p.n; i++)
        if (!p.s[i] || !strchr("0123456789abcdef", p.s[i])) return 0;
    return 1;
}

int at_key_part_eq(at_key_part a, at_key_part b)
{
    return a.n == b.n && memcmp(a.s, b.s, a.n) == 0;
}

char *at_key_part_dup(at_key_part p)
{
    at_sbuf b = {0};
    at_sb_put(&b, p.s, p.n);
    return at_sb_take(&b);
}

int at_config_split(char *config, char **names, char **values, int max)
{
    if (!config || !*config) return -1;
    int n = 0;
    for (char *tok = config; tok;) {
        char *next = strchr(tok, ',');
        if (next) *next++ = '\0';
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok || n == max) return -1;
        *eq = '\0';
        names[n] = tok;
        values[n] = eq + 1;
        n++;
        tok = next;
    }
    return n;
}
