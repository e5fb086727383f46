/*
 * once.h - "have these bytes been seen before?" in bounded memory, for
 * saying something about an object once rather than every time a client
 * lists it again (filter/unparsable.c, the cache's skipped objects).
 *
 * Each table remembers 64-bit hashes of what it saw in ONCE_SLOTS slots (a
 * slot per hash, a newer hash takes the slot): whatever the cloud sends,
 * the memory is fixed, and something forgotten that way is at worst said
 * once more.  Changed bytes are new bytes.  Thread-safe.
 */
#ifndef YURTHUB_UTIL_ONCE_H
#define YURTHUB_UTIL_ONCE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ONCE_SLOTS 4096

struct once_table {
	pthread_mutex_t lock;
	uint64_t seen[ONCE_SLOTS]; /* 0: empty */
};

#define ONCE_TABLE_INIT                                                                            \
	{                                                                                          \
		PTHREAD_MUTEX_INITIALIZER,                                                         \
		{                                                                                  \
			0                                                                          \
		}                                                                                  \
	}

/* True the first time t sees these bytes (NULL: none), false after. */
bool once_first(struct once_table *t, const char *data, size_t len);

#endif
