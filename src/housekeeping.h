/*
 * housekeeping.h - the hub's periodic chores, in a thread of their own: the
 * object count behind yurthub_cached_objects (soon after start, then every
 * minute), giving freed heap back to the system (every 5 s, when 2 MiB or
 * more are free) and, with the etcd store, its garbage collection.
 */
#ifndef YURTHUB_HOUSEKEEPING_H
#define YURTHUB_HOUSEKEEPING_H

#include <stdbool.h>

#include "metrics/metrics.h"
#include "storage/store.h"

struct housekeeping;

/* Start the thread; NULL when it cannot be. */
struct housekeeping *housekeeping_start(struct store *s, struct metrics *m, bool etcd_gc);
/* Stop it (waiting for a chore in progress) and free it; NULL is fine. */
void housekeeping_stop(struct housekeeping *k);

#endif
