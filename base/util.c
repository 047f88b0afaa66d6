/* util.c — error text, hashing, clocks and string helpers shared by every module. */
#define _GNU_SOURCE
#include "util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Thread_local char g_errmsg[4096];

at_status at_fail(at_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_errmsg, sizeof g_errmsg, fmt, ap);
    va_end(ap);
    return s;
}

const char *at_errmsg(void) { return g_errmsg; }
void at_errclear(void) { g_errmsg[0] = '\0'; }

uint64_t at_hash(uint64_t seed, const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = seed;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

uint64_t at_hash_str(uint64_t seed, const char *s) { return at_hash(seed, s, strlen(s) + 1); }

void at_hash_hex(uint64_t h, char out[17]) { snprintf(out, 17, "%016llx", (unsigned long long)h); }

double at_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t at_unix_time(void) { return (int64_t)time(NULL); }

int at_sched_account(at_sched_acct *out)
{
    *out = (at_sched_acct){0, 0, 0};
    DIR *dir = opendir("/proc/self/task");
    if (!dir) return 0;
    const long self = (long)gettid();
    int ok = 1;
    char path[64];
    for (struct dirent *e; ok && (e = readdir(dir));) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "/proc/self/task/%.16s/schedstat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue; /* a thread that ended since the listing */
        unsigned long long run = 0, wait = 0;
        ok = fscanf(f, "%llu %llu", &run, &wait) == 2;
        fclose(f);
        if (strtol(e->d_name, NULL, 10) == self) {
            out->self_wait = (int64_t)wait;
        } else {
            out->run += (int64_t)run;
            out->wait += (int64_t)wait;
        }
    }
    closedir(dir);
    return ok;
}

double at_unloaded_ms(double event_ms, double host_ms, const at_sched_acct *a,
                      const at_sched_acct *b, int threads)
{
    if (threads < 1) return event_ms;
    const double run = (double)(b->run - a->run) * 1e-6 / threads;
    const double wait = (double)(b->wait - a->wait) * 1e-6 / threads;
    const double self = (double)(b->self_wait - a->self_wait) * 1e-6;
    const double t = host_ms - self - wait;
    const double ms = t > event_ms ? event_ms : t < run ? run : t; /* in [run, event_ms] */
    return (double)(int64_t)(ms * 1e6 + 0.5) * 1e-6; /* whole nanoseconds, as event times */
}

char *at_strdup(const char *s) { return s ? strdup(s) : NULL; }

char *at_asprintf(const char *fmt, ...)
{
    va_list ap;
    char *out = NULL;
    va_start(ap, fmt);
    int r = vasprintf(&out, fmt, ap);
    va_end(ap);
    return r < 0 ? NULL : out;
}

at_status at_read_file(const char *path, char **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return at_fail(AT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return at_fail(AT_ERR_NO_MEMORY, "out of memory reading %s", path);
            }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return at_fail(AT_ERR_IO, "cannot read %s", path);
    }
    buf[n] = '\0';
    *data = buf;
    if (len) *len = n;
    return AT_OK;
}

char *at_join_names(char *out, size_t len, const char *const *names)
{
    out[0] = '\0';
    for (size_t i = 0, used = 0; names[i] && used < len; i++)
        used += (size_t)snprintf(out + used, len - used, "%s%s", i ? ", " : "", names[i]);
    return out;
}

int at_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    /* Decimal digits after at most one '-': strtoll alone takes spaces, '+' and more. */
    if (!s || !isdigit((unsigned char)s[*s == '-'])) return -1;
    for (const char *p = s + (*s == '-'); *p; p++)
        if (!isdigit((unsigned char)*p)) return -1;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || *end != '\0' || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int at_parse_budget(const char *s, int64_t *evals, double *seconds)
{
    size_t n = s ? strspn(s, "0123456789") : 0, f;
    if (n && s[n] == '.' && (f = strspn(s + n + 1, "0123456789"))) n += 1 + f;
    const int secs = n && s[n] == 's' && !s[n + 1];
    const double x = n && (secs || (!s[n] && !strchr(s, '.'))) ? strtod(s, NULL) : 0;
    if (!(x > 0) || x > 1e9 || (!secs && x < 1)) return -1;
    *evals = secs ? 0 : (int64_t)x;
    *seconds = secs ? x : 0;
    return 0;
}

int at_parse_real(const char *s, double *out)
{
    /* -?D+(.D+)?([eE][-+]?D+)?: strtod alone takes spaces, '+', hex, inf and nan. */
    const char *p = s ? s + (*s == '-') : NULL;
    size_t n = p ? strspn(p, "0123456789") : 0;
    if (!n) return -1;
    p += n;
    if (*p == '.') {
        if (!(n = strspn(p + 1, "0123456789"))) return -1;
        p += 1 + n;
    }
    if (*p == 'e' || *p == 'E') {
        p += 1 + (p[1] == '-' || p[1] == '+');
        if (!(n = strspn(p, "0123456789"))) return -1;
        p += n;
    }
    if (*p) return -1;
    double v = strtod(s, NULL);
    if (!isfinite(v)) return -1;
    *out = v;
    return 0;
}

int at_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
