/*
 * manager_internal.h - the cache manager's parts that the unit tests reach
 * (tests/unit/test_cache.c): the time a paginated list's session waits for
 * its next page, and the lock of the table where it waits.  Not for the
 * rest of the hub.
 */
#ifndef YURTHUB_CACHE_MANAGER_INTERNAL_H
#define YURTHUB_CACHE_MANAGER_INTERNAL_H

#include <pthread.h>

#include "cache/manager.h"

void cache_manager_set_park_seconds(struct cache_manager *cm, int seconds);
pthread_mutex_t *cache_manager_park_lock(struct cache_manager *cm);

#endif
