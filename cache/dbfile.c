/* dbfile.c — an LMDB data file checked with plain reads before LMDB maps it (dbfile.h). The
 * layout is LMDB 0.9's (mdb.c: data version 1, 64-bit page numbers, native byte order). */
#define _GNU_SOURCE
#include "dbfile.h"

#include "cache/keys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- LMDB's on-disk layout ------------------------------------------------------------------ */

#define LMDB_MAGIC        0xBEEFC0DEu
#define LMDB_DATA_VERSION 1u
/* MDB_page: pgno u64 @0, flags u16 @10, lower u16 @12, upper u16 @14 (an overflow page: its
 * page count u32 @12), node offsets u16[] @16. */
#define PAGEHDRSZ 16u
#define PG_FLAGS  10
#define PG_LOWER  12
#define PG_UPPER  14
#define PG_PAGES  12
enum { P_BRANCH = 0x01, P_LEAF = 0x02, P_OVERFLOW = 0x04, P_META = 0x08, P_KINDS = 0x6f };
/* MDB_meta after the page header: magic u32 @16, version u32 @20, map size u64 @32, the free
 * list's and the main table's MDB_db @40 and @88, last used page u64 @136, transaction id u64
 * @144. */
#define MT_MAGIC   16
#define MT_VERSION 20
#define MT_MAPSIZE 32
#define MT_FREE    40
#define MT_MAIN    88
#define MT_LAST_PG 136
#define MT_TXNID   144
#define META_BYTES 152
/* MDB_db, 48 bytes: pad u32 @0 (the page size, in the free list's), flags u16 @4, depth u16 @6,
 * root page u64 @40. */
#define DB_BYTES 48
#define DB_FLAGS 4
#define DB_DEPTH 6
#define DB_ROOT  40
/* MDB_node: lo u16 @0, hi u16 @2 (a leaf's data size; on a branch, with flags as the high bits,
 * the child page), flags u16 @4, key size u16 @6, key then data @8. */
#define NODESIZE 8u
enum { F_BIGDATA = 0x01, F_SUBDATA = 0x02 };
#define MDB_INTEGERKEY 0x08
#define P_INVALID      UINT64_MAX
#define CURSOR_STACK   32 /* LMDB's deepest tree */
/* The largest map autotune grows a database to is under 2 TiB (db.c doubles it up to 1 TiB): a
 * larger one in a meta page is damage, and mapping it would fail. */
#define MAX_MAP ((uint64_t)2 << 40)

static uint16_t rd16(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint32_t rd32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t rd64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* ---- the walk ------------------------------------------------------------------------------- */

typedef enum { TREE_FREE, TREE_MAIN, TREE_TABLE } tree_kind;

/* A named table found in the main table, walked after it. */
typedef struct table_ref {
    char name[64];
    unsigned char db[DB_BYTES];
} table_ref;

typedef struct checker {
    int fd;
    uint32_t psize;
    uint64_t npages;      /* pages in use: the newer meta's last page + 1 */
    unsigned char *seen;  /* one bit per page: reached already */
    unsigned char *pages; /* a page buffer per tree level */
    table_ref *tables;
    size_t ntables, cap;
    const char *tree; /* the tree walked, for messages */
    int io_errno;     /* a read failed: not damage */
    int oom;
    char why[256];
} checker;

static int bad(checker *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(checker *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    return -1;
}

static int oom(checker *c)
{
    c->oom = 1;
    return bad(c, "out of memory");
}

static int read_at(checker *c, uint64_t off, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(c->fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            c->io_errno = errno;
            return bad(c, "%s", strerror(errno));
        }
        if (r == 0) return bad(c, "truncated at byte %llu", (unsigned long long)(off + got));
        got += (size_t)r;
    }
    return 0;
}

/* Marks n pages from pgno as used: within the used pages, past the meta pages, not used yet. */
static int mark(checker *c, uint64_t pgno, uint64_t n)
{
    if (pgno < 2 || pgno >= c->npages || n > c->npages - pgno)
        return bad(c, "%s: page %llu%s is outside the %llu used pages", c->tree,
                   (unsigned long long)pgno, n > 1 ? " and what follows" : "",
                   (unsigned long long)c->npages);
    for (uint64_t p = pgno; p < pgno + n; p++) {
        if (c->seen[p / 8] & (1u << (p % 8)))
            return bad(c, "%s: page %llu is used twice", c->tree, (unsigned long long)p);
        c->seen[p / 8] |= (unsigned char)(1u << (p % 8));
    }
    return 0;
}

/* A free-list entry: a count, then as many page numbers, descending. */
static int check_idl(checker *c, const unsigned char *d, uint64_t n)
{
    if (n < 8 || n % 8 || rd64(d) != n / 8 - 1)
        return bad(c, "free list: an entry of %llu bytes is malformed", (unsigned long long)n);
    uint64_t prev = P_INVALID;
    for (uint64_t i = 1; i < n / 8; i++) {
        uint64_t pg = rd64(d + i * 8);
        if (pg >= prev) return bad(c, "free list: page numbers out of order");
        if (mark(c, pg, 1)) return -1;
        prev = pg;
    }
    return 0;
}

/* The overflow run of a large value (dsz bytes at page ov): its header, and its pages marked.
 * For the free list, its entry is read and checked too. */
static int check_overflow(checker *c, uint64_t ov, uint64_t dsz, tree_kind kind)
{
    unsigned char h[PAGEHDRSZ];
    uint64_t need = (PAGEHDRSZ - 1 + dsz) / c->psize + 1;
    if (ov < 2 || ov >= c->npages)
        return bad(c, "%s: a value's page %llu is outside the %llu used pages", c->tree,
                   (unsigned long long)ov, (unsigned long long)c->npages);
    if (read_at(c, ov * c->psize, h, sizeof h)) return -1;
    uint32_t pages = rd32(h + PG_PAGES);
    if (rd64(h) != ov || !(rd16(h + PG_FLAGS) & P_OVERFLOW) || pages < need)
        return bad(c, "%s: page %llu is not the %llu-page run of a %llu-byte value", c->tree,
                   (unsigned long long)ov, (unsigned long long)need, (unsigned long long)dsz);
    if (mark(c, ov, pages)) return -1;
    if (kind != TREE_FREE) return 0;
    unsigned char *d = malloc(dsz ? dsz : 1);
    if (!d) return oom(c);
    int r = read_at(c, ov * c->psize + PAGEHDRSZ, d, dsz);
    if (r == 0) r = check_idl(c, d, dsz);
    free(d);
    return r;
}

static int check_leaf_node(checker *c, const unsigned char *node, size_t room, tree_kind kind)
{
    uint16_t flags = rd16(node + 4), ksize = rd16(node + 6);
    uint64_t dsz = rd16(node) | (uint64_t)rd16(node + 2) << 16;
    const unsigned char *data = node + NODESIZE + ksize;
    room -= NODESIZE + ksize;
    if (ksize == 0) return bad(c, "%s: an empty key", c->tree);
    if (flags & ~(kind == TREE_MAIN ? F_BIGDATA | F_SUBDATA : F_BIGDATA) ||
        flags == (F_BIGDATA | F_SUBDATA))
        return bad(c, "%s: a record with flags 0x%x", c->tree, flags);
    if (flags & F_BIGDATA) {
        if (room < 8) return bad(c, "%s: a record runs past its page", c->tree);
        return check_overflow(c, rd64(data), dsz, kind);
    }
    if (dsz > room) return bad(c, "%s: a record runs past its page", c->tree);
    if (kind == TREE_FREE) return check_idl(c, data, dsz);
    if (!(flags & F_SUBDATA)) return 0;
    if (dsz != DB_BYTES) return bad(c, "main table: a table record of %llu bytes", dsz + 0ull);
    if (c->ntables == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        table_ref *t = realloc(c->tables, cap * sizeof *t);
        if (!t) return oom(c);
        c->tables = t;
        c->cap = cap;
    }
    table_ref *t = &c->tables[c->ntables++];
    snprintf(t->name, sizeof t->name, "table %.*s", (int)(ksize < 40 ? ksize : 40),
             (const char *)node + NODESIZE);
    memcpy(t->db, data, DB_BYTES);
    return 0;
}

/* A key in a page buffer; p NULL: no bound. */
typedef struct key_ref {
    const unsigned char *p;
    size_t n;
} key_ref;

/* LMDB's order: the free list's keys are integers (transaction ids), the tables' are bytes
 * (memcmp, then the shorter first). */
static int key_cmp(tree_kind kind, key_ref a, key_ref b)
{
    if (kind == TREE_FREE) return (rd64(a.p) > rd64(b.p)) - (rd64(a.p) < rd64(b.p));
    int r = memcmp(a.p, b.p, a.n < b.n ? a.n : b.n);
    return r ? r : (a.n > b.n) - (a.n < b.n);
}

/* The key of node i of page p (its bounds checked). */
static key_ref node_key(const unsigned char *p, unsigned i)
{
    const unsigned char *node = p + rd16(p + PAGEHDRSZ + 2 * i);
    return (key_ref){node + NODESIZE, rd16(node + 6)};
}

/* Page pgno at level (1: the root) of a tree of the given depth, and everything below it, whose
 * keys must lie in [lo, hi): a key out of order is one a lookup would not find. */
static int walk_page(checker *c, uint64_t pgno, int level, int depth, tree_kind kind, key_ref lo,
                     key_ref hi)
{
    unsigned char *p = c->pages + (size_t)level * c->psize;
    if (mark(c, pgno, 1) || read_at(c, pgno * c->psize, p, c->psize)) return -1;
    int leaf = level == depth;
    uint16_t flags = rd16(p + PG_FLAGS) & P_KINDS, lower = rd16(p + PG_LOWER),
             upper = rd16(p + PG_UPPER);
    if (rd64(p) != pgno)
        return bad(c, "%s: page %llu says it is page %llu", c->tree, (unsigned long long)pgno,
                   (unsigned long long)rd64(p));
    if (flags != (leaf ? P_LEAF : P_BRANCH))
        return bad(c, "%s: page %llu is not a %s page (flags 0x%x)", c->tree,
                   (unsigned long long)pgno, leaf ? "leaf" : "branch", flags);
    if (lower < PAGEHDRSZ || lower > upper || upper > c->psize || (lower - PAGEHDRSZ) % 2)
        return bad(c, "%s: page %llu has a bad header", c->tree, (unsigned long long)pgno);
    unsigned n = (lower - PAGEHDRSZ) / 2;
    /* LMDB asserts that branch pages other than the free list's have two children. */
    if (n < (leaf || kind == TREE_FREE ? 1u : 2u))
        return bad(c, "%s: page %llu has %u entries", c->tree, (unsigned long long)pgno, n);
    key_ref prev = {NULL, 0};
    for (unsigned i = 0; i < n; i++) {
        size_t off = rd16(p + PAGEHDRSZ + 2 * i);
        if (off < upper || off % 2 || off + NODESIZE > c->psize ||
            off + NODESIZE + rd16(p + off + 6) > c->psize)
            return bad(c, "%s: page %llu has an entry out of bounds", c->tree,
                       (unsigned long long)pgno);
        key_ref k = node_key(p, i);
        if (!leaf && i == 0) continue; /* a branch's first key is not used */
        if (k.n > AT_KEY_MAX || (kind == TREE_FREE && k.n != 8))
            return bad(c, "%s: a key of %zu bytes", c->tree, k.n);
        if ((lo.p && key_cmp(kind, k, lo) < 0) || (hi.p && key_cmp(kind, k, hi) >= 0) ||
            (prev.p && key_cmp(kind, k, prev) <= 0))
            return bad(c, "%s: page %llu has keys out of order", c->tree, (unsigned long long)pgno);
        prev = k;
        if (leaf && check_leaf_node(c, p + off, c->psize - off, kind)) return -1;
    }
    for (unsigned i = 0; !leaf && i < n; i++) {
        const unsigned char *node = p + rd16(p + PAGEHDRSZ + 2 * i);
        uint64_t child =
            rd16(node) | (uint64_t)rd16(node + 2) << 16 | (uint64_t)rd16(node + 4) << 32;
        if (walk_page(c, child, level + 1, depth, kind, i ? node_key(p, i) : lo,
                      i + 1 < n ? node_key(p, i + 1) : hi))
            return -1;
    }
    return 0;
}

static int walk_tree(checker *c, const unsigned char *db, tree_kind kind, const char *name)
{
    c->tree = name;
    uint16_t flags = rd16(db + DB_FLAGS), depth = rd16(db + DB_DEPTH);
    uint64_t root = rd64(db + DB_ROOT);
    if (flags & ~(kind == TREE_FREE ? MDB_INTEGERKEY : 0))
        return bad(c, "%s has flags 0x%x, not an autotune table's", name, flags);
    if (root == P_INVALID) return 0; /* empty */
    if (depth < 1 || depth > CURSOR_STACK) return bad(c, "%s: depth %u", name, (unsigned)depth);
    key_ref none = {NULL, 0};
    return walk_page(c, root, 1, depth, kind, none, none);
}

/* ---- the meta pages ------------------------------------------------------------------------- */

/* 1 when m, the start of a meta page (MT_MAGIC + 4 bytes at least), carries LMDB's magic. */
static int has_magic(const unsigned char *m) { return rd32(m + MT_MAGIC) == LMDB_MAGIC; }

int at_dbfile_is_lmdb(int fd)
{
    unsigned char head[MT_MAGIC + 4];
    return pread(fd, head, sizeof head, 0) == (ssize_t)sizeof head && has_magic(head);
}

/* Why a meta page is not LMDB's, or NULL. */
static const char *meta_bad(const unsigned char *m, char *buf, size_t len)
{
    if (!(rd16(m + PG_FLAGS) & P_META) || !has_magic(m)) return "no LMDB magic";
    if (rd32(m + MT_VERSION) != LMDB_DATA_VERSION) {
        snprintf(buf, len, "unsupported LMDB data version %u", rd32(m + MT_VERSION));
        return buf;
    }
    return NULL;
}

/* The newest meta page's transaction id as the file has it now; 0 when unreadable. */
static uint64_t newest_txnid(checker *c)
{
    unsigned char m[2][META_BYTES];
    if (read_at(c, 0, m[0], META_BYTES) || read_at(c, c->psize, m[1], META_BYTES)) return 0;
    uint64_t a = rd64(m[0] + MT_TXNID), b = rd64(m[1] + MT_TXNID);
    return a > b ? a : b;
}

/* Checks the file as its newest meta page has it; *txnid: that page's transaction id, once it
 * is known. */
static int check(checker *c, uint64_t *txnid)
{
    unsigned char m[2][META_BYTES];
    char buf[96];
    const char *why;
    struct stat st;
    if (fstat(c->fd, &st) != 0) {
        c->io_errno = errno;
        return bad(c, "%s", strerror(errno));
    }
    if (st.st_size < META_BYTES) return bad(c, "truncated: shorter than an LMDB meta page");
    if (read_at(c, 0, m[0], META_BYTES)) return -1;
    if ((why = meta_bad(m[0], buf, sizeof buf))) return bad(c, "%s", why);
    c->psize = rd32(m[0] + MT_FREE);
    if (c->psize < 512 || c->psize > 65536 || (c->psize & (c->psize - 1)) != 0)
        return bad(c, "bad page size %u", c->psize);
    if ((uint64_t)st.st_size < 2ull * c->psize)
        return bad(c, "truncated: %lld bytes, less than two %u-byte pages", (long long)st.st_size,
                   c->psize);
    if (read_at(c, c->psize, m[1], META_BYTES)) return -1;
    if (meta_bad(m[1], buf, sizeof buf) || rd32(m[1] + MT_FREE) != c->psize)
        return bad(c, "second meta page damaged");
    /* LMDB reads the meta page with the higher transaction id (the first on a tie). */
    const unsigned char *cur = m[rd64(m[1] + MT_TXNID) > rd64(m[0] + MT_TXNID)];
    *txnid = rd64(cur + MT_TXNID);
    /* The size after the meta pages were read: a writer extends the file before it writes the
     * meta page that uses the new pages. */
    off_t size = fstat(c->fd, &st) == 0 ? st.st_size : 0;
    uint64_t last = rd64(cur + MT_LAST_PG);
    if (last < 1 || last >= (uint64_t)size / c->psize)
        return bad(c,
                   "truncated: %lld bytes, but its newest meta page (transaction %llu) uses %llu "
                   "pages of %u bytes",
                   (long long)size, (unsigned long long)*txnid, (unsigned long long)last + 1,
                   c->psize);
    if (rd64(cur + MT_MAPSIZE) > MAX_MAP)
        return bad(c, "a map of %llu bytes", (unsigned long long)rd64(cur + MT_MAPSIZE));
    c->npages = last + 1;
    c->seen = calloc(c->npages / 8 + 1, 1);
    c->pages = malloc((size_t)(CURSOR_STACK + 1) * c->psize);
    if (!c->seen || !c->pages) return oom(c);
    if (walk_tree(c, cur + MT_FREE, TREE_FREE, "free list") ||
        walk_tree(c, cur + MT_MAIN, TREE_MAIN, "main table"))
        return -1;
    for (size_t i = 0; i < c->ntables; i++)
        if (walk_tree(c, c->tables[i].db, TREE_TABLE, c->tables[i].name)) return -1;
    return 0;
}

/* A check during which another process committed is done again: a writer never overwrites a
 * page of the newest tree, but once it has committed twice it may reuse them, so a walk is sound
 * only if the transaction it walked is still the newest when it ends. A file that other
 * processes commit to during every one of TRIES walks is in use by LMDB writers that opened it:
 * it is taken as it is rather than refused on pages that changed while they were read. */
#define TRIES 20

at_status at_dbfile_check(const char *file, int *exists)
{
    *exists = 0;
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    if (fd < 0) {
        if (errno == ENOENT) return AT_OK;
        return at_fail(AT_ERR_DB, "cannot read %s: %s", file, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return at_fail(AT_ERR_DB, "cannot stat %s: %s", file, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return at_fail(AT_ERR_DB_CORRUPT, "%s is not an autotune database (not a regular file)",
                       file);
    }
    if (st.st_size == 0) {
        close(fd);
        return AT_OK;
    }
    *exists = 1;
    checker c;
    int r, moved = 0;
    for (int tries = 0; tries < TRIES && (tries == 0 || moved); tries++) {
        c = (checker){.fd = fd};
        uint64_t walked = 0;
        r = check(&c, &walked);
        moved = walked && newest_txnid(&c) != walked;
        free(c.seen);
        free(c.pages);
        free(c.tables);
    }
    close(fd);
    if (r == 0 || moved) return AT_OK;
    if (c.oom) return at_fail(AT_ERR_NO_MEMORY, "out of memory checking %s", file);
    if (c.io_errno) return at_fail(AT_ERR_DB, "cannot read %s: %s", file, c.why);
    return at_fail(AT_ERR_DB_CORRUPT, "%s is not an autotune database (%s)", file, c.why);
}
