/*
 * strmap.h - a string-keyed hash map (open addressing, linear probing).
 *
 * Keys are copied into the map; values are opaque pointers that the map
 * does not own.  Used for sets of names during a list replace, and for what
 * the hub knows of the cluster's objects, so it is sized for tens of
 * thousands of entries; it never shrinks its table.
 */
#ifndef YURTHUB_UTIL_STRMAP_H
#define YURTHUB_UTIL_STRMAP_H

#include <stddef.h>
#include <stdint.h>

struct strmap_entry {
	char *key; /* NULL: empty slot */
	void *value;
	uint64_t num; /* a number the caller may keep beside value */
};

struct strmap {
	struct strmap_entry *slots;
	size_t cap, len;
};

#define STRMAP_INIT                                                                                \
	{                                                                                          \
		NULL, 0, 0                                                                         \
	}

/* Insert or overwrite.  Returns the entry, or NULL on ENOMEM. */
struct strmap_entry *strmap_put(struct strmap *m, const char *key, void *value);
struct strmap_entry *strmap_get(const struct strmap *m, const char *key);
/* Remove key; returns its value (NULL when absent).  Entries move: pointers
 * to entries and strmap_next iterations do not survive it. */
void *strmap_del(struct strmap *m, const char *key);
void strmap_free(struct strmap *m);
/* Iterate: for (size_t i = 0; (e = strmap_next(m, &i));) */
struct strmap_entry *strmap_next(const struct strmap *m, size_t *iter);

#endif
