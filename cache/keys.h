/* keys.h — the one place the composite keys of the store are built and parsed (docs/database.md).
 *
 *   results: "<problem>|<device>|<template hash>|<config>"
 *   best:    "<problem>|<device>"
 *   config:  "NAME=value,NAME=value,..."
 *
 * Problem, device and template hash are non-empty and hold no '|'; the config is the last part,
 * so it may. Keys are readable text in a fixed order, so a prefix ("<problem>|",
 * "<problem>|<device>|", ...) selects a range in a scan.
 *
 * Everything that reads a key's parts uses at_result_key_split / at_best_key_split; nothing
 * else looks for the '|'.
 *
 * Keys always fit LMDB's 511 bytes: a problem, device or template hash longer than
 * AT_KEY_PART_MAX bytes is stored shortened, as its first bytes (cut at a UTF-8 character
 * boundary), '~' and the 16 hex digits of the whole part's at_hash, AT_KEY_PART_MAX bytes in
 * all; a config longer than what is left of the 511 bytes is shortened the same way to fit. The
 * same text always gives the same key, so lookups find what was stored, and prefixes select
 * the same ranges.
 */
#ifndef AT_KEYS_H
#define AT_KEYS_H

#include "base/util.h"

#include <stddef.h>

#define AT_KEY_SEP      '|'
#define AT_KEY_MAX      511 /* LMDB's limit on a key, in bytes */
#define AT_KEY_PART_MAX 128 /* a longer problem, device or template hash is shortened */

/* A part of a key: s points into the key it was split from (not NUL-terminated). */
typedef struct at_key_part {
    const char *s;
    size_t n;
} at_key_part;

typedef struct at_result_key {
    at_key_part problem, device, thash, config;
} at_result_key;

typedef struct at_best_key {
    at_key_part problem, device;
} at_best_key;

/* The keys, malloc'd, at most AT_KEY_MAX bytes (long parts shortened, above). NULL when a part is
 * NULL or empty, when problem, device or thash holds a '|' (at_errmsg() says which part;
 * AT_ERR_INVALID_ARG) or when out of memory. */
char *at_db_result_key(const char *problem, const char *device, const char *thash,
                       const char *config);
char *at_db_best_key(const char *problem, const char *device);
/* The key of the devices table: the device as the other keys store it (shortened when long),
 * malloc'd; NULL as for at_db_result_key. */
char *at_db_device_key(const char *device);
/* A prefix of results keys, malloc'd: "<problem>|" when device is NULL, "<problem>|<device>|"
 * when thash is NULL, else "<problem>|<device>|<thash>|". NULL as for at_db_result_key. */
char *at_db_results_prefix(const char *problem, const char *device, const char *thash);

/* Splits a key into views of its parts (out points into key, which must outlive it). A key
 * with fewer parts or an empty part gives AT_ERR_DB_CORRUPT with a message naming the key;
 * NULL arguments AT_ERR_INVALID_ARG. Never reads past the key's NUL. */
at_status at_result_key_split(const char *key, at_result_key *out);
at_status at_best_key_split(const char *key, at_best_key *out);

/* 1 when the part holds s as a key stores it: exactly s, or s shortened (for a problem, device
 * or template hash longer than AT_KEY_PART_MAX). */
int at_key_part_is(at_key_part p, const char *s);
/* 1 when the part was shortened to fit (ends in '~' and 16 hex digits): its full text is not in
 * the key (a shortened config cannot be split into its values). */
int at_key_part_shortened(at_key_part p);
/* 1 when two parts hold the same text. */
int at_key_part_eq(at_key_part a, at_key_part b);
/* A malloc'd NUL-terminated copy; NULL when out of memory. */
char *at_key_part_dup(at_key_part p);

/* Splits a configuration in place (',' and '=' become NUL): names[i] and values[i] point into
 * config. Returns the number of parameters (1 to max), or -1 when config is empty, a part has
 * no '=' or an empty name, or there are more than max. */
int at_config_split(char *config, char **names, char **values, int max);

#endif
