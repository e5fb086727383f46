/*
 * housekeeping.h - the hub's periodic chores, in a thread of their own: the
 * object count behind yurthub_cached_objects (soon after start, then every
 * minute), giving freed heap back to the system (every 5 s, when 2 MiB or
 * more are free), the store's scrub (store_scrub: a second after start,
 * then every 30 minutes, a minute after one that failed), with the etcd
 * store its garbage collection, and one chore
 * the hub adds (housekeeping_every).
 */
#ifndef YURTHUB_HOUSEKEEPING_H
#define YURTHUB_HOUSEKEEPING_H

#include <stdbool.h>

#include "metrics/metrics.h"
#include "storage/store.h"

struct housekeeping;

/* Start the thread; NULL when it cannot be. */
struct housekeeping *housekeeping_start(struct store *s, struct metrics *m, bool etcd_gc);
/* One more chore, fn(ctx) every 10 s from a second after start (the hub's
 * autonomy report); it replaces the previous one. */
void housekeeping_every(struct housekeeping *k, void (*fn)(void *ctx), void *ctx);
/* Stop it (waiting for a chore in progress) and free it; NULL is fine. */
void housekeeping_stop(struct housekeeping *k);

#endif
