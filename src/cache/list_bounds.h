/*
 * list_bounds.h - what one cached list may hold.
 *
 * A list the cache stores goes to the store item by item (manager.c); the
 * store keeps a record of every item until the commit and writes each one.
 * Without a bound, a broken or hostile upstream makes that cost what it
 * likes: a few MB of gzip inflate to millions of items, or to millions of
 * copies of one object, each rewriting the same file.  So a list (all the
 * pages of a paginated one together) that goes past one of these bounds is
 * not cached: its session is aborted and the view keeps what it had.  The
 * client's answer is not touched by this: it is the cloud's.
 *
 * The defaults are far above any list a node's agents make of a cluster
 * Kubernetes supports (150,000 pods, 10,000 services): see
 * docs/contracts.md, "What a cached list may hold".
 */
#ifndef YURTHUB_CACHE_LIST_BOUNDS_H
#define YURTHUB_CACHE_LIST_BOUNDS_H

#include <stddef.h>
#include <stdint.h>

#define LIST_ITEMS_MAX	300000u	       /* items: twice the pods of the largest cluster */
#define LIST_BYTES_MAX	(512ull << 20) /* of items' JSON: as much as a gzip list inflates to */
#define LIST_COPIES_MAX 4u /* of one object (namespace, name): the API server sends one */

struct list_limits {
	size_t items;
	uint64_t bytes;
	unsigned copies;
};

/* LIST_ITEMS_MAX, LIST_BYTES_MAX, LIST_COPIES_MAX */
extern const struct list_limits LIST_LIMITS_DEFAULT;

struct list_bounds;

/* The count of one list, from its first item on; lim is copied.  NULL when
 * out of memory. */
struct list_bounds *list_bounds_new(const struct list_limits *lim);
/* Count one item of len bytes: NULL while the list stays within the bounds,
 * else a one-line reason (valid until the next call or the free), and the
 * same reason for every item after.  Out of memory counts as over ("out of
 * memory"): the list is not cached then either. */
const char *list_bounds_add(struct list_bounds *b, const char *ns, const char *name, size_t len);
void list_bounds_free(struct list_bounds *b);

#endif
