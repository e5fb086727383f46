/*
 * manager_internal.h - the cache manager's parts that the unit tests reach
 * (tests/unit/test_cache.c): the time a paginated list's session waits for
 * its next page, the lock of the table where it waits, and what a cached
 * list may hold.  Not for the
 * rest of the hub.
 */
#ifndef YURTHUB_CACHE_MANAGER_INTERNAL_H
#define YURTHUB_CACHE_MANAGER_INTERNAL_H

#include <pthread.h>

#include "cache/list_bounds.h"
#include "cache/manager.h"

void cache_manager_set_park_seconds(struct cache_manager *cm, int seconds);
/* Bounds other than LIST_LIMITS_DEFAULT, for lists begun after the call. */
void cache_manager_set_list_limits(struct cache_manager *cm, const struct list_limits *lim);
pthread_mutex_t *cache_manager_park_lock(struct cache_manager *cm);

#endif
