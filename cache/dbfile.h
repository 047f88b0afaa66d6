/* dbfile.h — checks an LMDB data file with plain reads before LMDB maps it, so that no file on
 * disk can make LMDB fault (SIGBUS on a page past the end of the file, SIGSEGV or an assertion on
 * a damaged page). docs/database.md, "Damaged files", says what is checked. */
#ifndef AT_DBFILE_H
#define AT_DBFILE_H

#include "base/util.h"

/* Checks file (a data.mdb) as LMDB will read it: both meta pages (magic, data version, page
 * size), the newer one's last used page against the file's size, then every page of every tree
 * that meta reaches (the free list, the main table, each named table): page numbers within the
 * used pages, each page used once, page headers and node bounds within the page, overflow runs
 * within the file, tree depths, table records and free-list entries well formed. Overflow pages
 * (large values) are not read beyond their header: their bytes are the caller's to check.
 * *exists is 0 when there is no file or it is empty (a new database), else 1. A damaged file is
 * AT_ERR_DB_CORRUPT ("<file> is not an autotune database (<what is wrong>)"); one that cannot be
 * read AT_ERR_DB. Reads only; never changes the file. */
at_status at_dbfile_check(const char *file, int *exists);
/* 1 when the file open as fd starts as an LMDB data file does (its first meta page's magic, read
 * with pread at offset 0), else 0. Says nothing of the rest: at_dbfile_check does. */
int at_dbfile_is_lmdb(int fd);

#endif
