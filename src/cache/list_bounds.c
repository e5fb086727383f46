/*
 * list_bounds.c - what one cached list may hold, see list_bounds.h.
 *
 * Copies of one object are counted in a table of 64-bit hashes of
 * (namespace, name), not of the names themselves: 16 bytes a slot, while
 * the store already keeps the names.  The hash is seeded per list, so that
 * an upstream cannot choose names that collide; were two names to collide
 * all the same, they would count as copies of one, which takes
 * LIST_COPIES_MAX of them to matter.
 */
#include "cache/list_bounds.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

const struct list_limits LIST_LIMITS_DEFAULT = {LIST_ITEMS_MAX, LIST_BYTES_MAX, LIST_COPIES_MAX};

struct slot {
	uint64_t hash; /* 0: empty */
	uint32_t copies;
};

struct list_bounds {
	struct list_limits lim;
	uint64_t seed;
	size_t items;
	uint64_t bytes;
	struct slot *slots;
	size_t cap, used; /* cap: a power of two, or 0 */
	char why[256];	  /* "": within the bounds */
};

static uint64_t new_seed(const void *salt)
{
	uint64_t seed;
	if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) == (ssize_t)sizeof seed)
		return seed;
	/* no entropy yet (early boot): a seed nobody upstream can see will do */
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_nsec ^ ((uint64_t)t.tv_sec << 32) ^ (uint64_t)(uintptr_t)salt;
}

struct list_bounds *list_bounds_new(const struct list_limits *lim)
{
	struct list_bounds *b = calloc(1, sizeof *b);
	if (!b)
		return NULL;
	b->lim = *lim;
	b->seed = new_seed(b);
	return b;
}

void list_bounds_free(struct list_bounds *b)
{
	if (!b)
		return;
	free(b->slots);
	free(b);
}

static uint64_t mix(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

/* FNV-1a over the seed, namespace, NUL, name; then splitmix64's finalizer,
 * so that the low bits (the slot) depend on every byte. */
static uint64_t key_hash(const struct list_bounds *b, const char *ns, const char *name)
{
	uint64_t h = mix(14695981039346656037ULL ^ b->seed, ns);
	h = mix(h * 1099511628211ULL, name);
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebULL;
	h ^= h >> 31;
	return h ? h : 1;
}

static struct slot *find(struct slot *slots, size_t cap, uint64_t h)
{
	size_t i = (size_t)h & (cap - 1);
	while (slots[i].hash && slots[i].hash != h)
		i = (i + 1) & (cap - 1);
	return &slots[i];
}

static int grow(struct list_bounds *b)
{
	size_t cap = b->cap ? b->cap * 2 : 1024;
	struct slot *slots = calloc(cap, sizeof *slots);
	if (!slots)
		return -1;
	for (size_t i = 0; i < b->cap; i++)
		if (b->slots[i].hash)
			*find(slots, cap, b->slots[i].hash) = b->slots[i];
	free(b->slots);
	b->slots = slots;
	b->cap = cap;
	return 0;
}

/* How many times this list named the object so far, this one included;
 * 0 when out of memory. */
static uint32_t count_copy(struct list_bounds *b, const char *ns, const char *name)
{
	if ((b->used + 1) * 2 > b->cap && grow(b) < 0)
		return 0;
	uint64_t h = key_hash(b, ns, name);
	struct slot *s = find(b->slots, b->cap, h);
	if (!s->hash) {
		s->hash = h;
		b->used++;
	}
	return ++s->copies;
}

const char *list_bounds_add(struct list_bounds *b, const char *ns, const char *name, size_t len)
{
	if (b->why[0])
		return b->why;
	if (++b->items > b->lim.items) {
		snprintf(b->why, sizeof b->why, "more than %zu items", b->lim.items);
	} else if ((b->bytes += len) > b->lim.bytes) {
		bool mib = b->lim.bytes && !(b->lim.bytes & ((1u << 20) - 1));
		snprintf(b->why, sizeof b->why, "more than %llu %s of items",
			 (unsigned long long)(mib ? b->lim.bytes >> 20 : b->lim.bytes),
			 mib ? "MiB" : "bytes");
	} else {
		uint32_t copies = count_copy(b, ns, name);
		if (!copies)
			snprintf(b->why, sizeof b->why, "out of memory");
		else if (copies > b->lim.copies)
			snprintf(b->why, sizeof b->why, "%.60s%s%.100s listed more than %u times",
				 ns, *ns ? "/" : "", name, b->lim.copies);
	}
	return b->why[0] ? b->why : NULL;
}
