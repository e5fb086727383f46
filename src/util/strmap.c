/* strmap.c - string-keyed hash map, see strmap.h. */
#include "util/strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return h ^ (h >> 29);
}

static struct strmap_entry *find_slot(struct strmap_entry *slots, size_t cap, const char *key)
{
	size_t i = (size_t)hash_str(key) & (cap - 1);
	while (slots[i].key && strcmp(slots[i].key, key))
		i = (i + 1) & (cap - 1);
	return &slots[i];
}

static int grow(struct strmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	struct strmap_entry *slots = calloc(cap, sizeof *slots);
	if (!slots)
		return -1;
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].key)
			*find_slot(slots, cap, m->slots[i].key) = m->slots[i];
	free(m->slots);
	m->slots = slots;
	m->cap = cap;
	return 0;
}

struct strmap_entry *strmap_put(struct strmap *m, const char *key, void *value)
{
	if ((m->len + 1) * 4 > m->cap * 3 && grow(m) < 0)
		return NULL;
	struct strmap_entry *e = find_slot(m->slots, m->cap, key);
	if (!e->key) {
		e->key = strdup(key);
		if (!e->key)
			return NULL;
		e->num = 0;
		m->len++;
	}
	e->value = value;
	return e;
}

struct strmap_entry *strmap_get(const struct strmap *m, const char *key)
{
	if (!m->cap)
		return NULL;
	struct strmap_entry *e = find_slot(m->slots, m->cap, key);
	return e->key ? e : NULL;
}

/* Backward-shift deletion: the entries after the hole that would no longer
 * be found (their home slot lies at or before the hole, cyclically) move
 * into it, so lookups never need tombstones. */
void *strmap_del(struct strmap *m, const char *key)
{
	struct strmap_entry *e = strmap_get(m, key);
	if (!e)
		return NULL;
	void *value = e->value;
	size_t mask = m->cap - 1, hole = (size_t)(e - m->slots);
	free(e->key);
	e->key = NULL;
	m->len--;
	for (size_t i = (hole + 1) & mask; m->slots[i].key; i = (i + 1) & mask) {
		size_t home = (size_t)hash_str(m->slots[i].key) & mask;
		/* stays if its home lies cyclically in (hole, i] */
		if (((i - home) & mask) < ((i - hole) & mask))
			continue;
		m->slots[hole] = m->slots[i];
		m->slots[i].key = NULL;
		hole = i;
	}
	return value;
}

struct strmap_entry *strmap_next(const struct strmap *m, size_t *iter)
{
	for (; *iter < m->cap; (*iter)++)
		if (m->slots[*iter].key)
			return &m->slots[(*iter)++];
	return NULL;
}

void strmap_free(struct strmap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->slots[i].key);
	free(m->slots);
	m->slots = NULL;
	m->cap = m->len = 0;
}
