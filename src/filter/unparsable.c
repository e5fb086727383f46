/*
 * unparsable.c - the objects a filter could not read and passed on as they
 * came (filter.h, filter_unparsable_note): one odd object in the cloud
 * must not cut a whole list, but the operator should hear of it - once, not
 * every time kubelet relists.
 *
 * What was logged is remembered as a 64-bit hash of the object's bytes in
 * a fixed table (a slot per hash, a newer hash takes the slot): memory is
 * bounded whatever the cloud sends, and an object forgotten that way is at
 * worst logged once more.  A changed object (new bytes) is a new object.
 */
#include "filter/filter.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "util/log.h"

#define SEEN_SLOTS 4096

static _Atomic unsigned long long unparsable[FILTER_COUNT];
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t seen[SEEN_SLOTS]; /* 0: empty */

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

/* Was it logged already?  Remembers it if not. */
static bool seen_before(uint64_t h)
{
	bool was;

	pthread_mutex_lock(&seen_lock);
	was = seen[h % SEEN_SLOTS] == h;
	seen[h % SEEN_SLOTS] = h;
	pthread_mutex_unlock(&seen_lock);
	return was;
}

void filter_unparsable_note(enum filter_id by, const char *resource, const char *ns,
			    const char *name, const char *data, size_t len, const char *why)
{
	if ((unsigned)by >= FILTER_COUNT)
		return;
	atomic_fetch_add(&unparsable[by], 1);
	if (seen_before(hash_bytes(data ? data : "", data ? len : 0)))
		return;
	/* name and namespace are what the decoder could read ("" when the odd
	 * thing is the name itself); the log escapes what is not printable */
	log_warn("filter %s: %s %s%s%s (%zu bytes) passed unfiltered, as the cloud sent it: %s "
		 "(yurthub_filter_unparsable_total; logged once per object)",
		 filter_name(by), resource ? resource : "", ns ? ns : "", ns && *ns ? "/" : "",
		 name && *name ? name : "<unreadable name>", len, why ? why : "");
}

unsigned long long filter_unparsable_total(enum filter_id id)
{
	return (unsigned)id < FILTER_COUNT ? atomic_load(&unparsable[id]) : 0;
}
