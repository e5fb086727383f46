/*
 * once.c - see once.h.
 */
#include "util/once.h"

/* FNV-1a, with 0 kept for "empty". */
static uint64_t hash_bytes(const char *data, size_t len)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)data[i];
		h *= 1099511628211ull;
	}
	return h ? h : 1;
}

bool once_first(struct once_table *t, const char *data, size_t len)
{
	uint64_t h = hash_bytes(data ? data : "", data ? len : 0);
	bool first;

	pthread_mutex_lock(&t->lock);
	first = t->seen[h % ONCE_SLOTS] != h;
	t->seen[h % ONCE_SLOTS] = h;
	pthread_mutex_unlock(&t->lock);
	return first;
}
