/*
 * window.c - the ring of a shared cache's recent events, see window.h.
 */
#include "mux/window.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void window_init(struct mux_window *w, uint64_t start_rv, uint64_t first_seq)
{
	*w = (struct mux_window){.start_rv = start_rv, .first_seq = first_seq};
}

static struct mux_event *slot(const struct mux_window *w, size_t i)
{
	return &w->ring[(w->head + i) % w->cap];
}

void window_free(struct mux_window *w)
{
	for (size_t i = 0; i < w->count; i++) {
		mux_obj_unref(slot(w, i)->obj);
		mux_obj_unref(slot(w, i)->prev);
	}
	free(w->ring);
	w->ring = NULL;
	w->cap = w->head = w->count = 0;
}

/* A ring of cap slots, the events unwrapped to its start. */
static int resize(struct mux_window *w, size_t cap)
{
	struct mux_event *ring;

	if (cap > SIZE_MAX / sizeof(*ring))
		return -1;
	ring = malloc(cap * sizeof(*ring));
	if (!ring)
		return -1;
	for (size_t i = 0; i < w->count; i++)
		ring[i] = *slot(w, i);
	free(w->ring);
	w->ring = ring;
	w->cap = cap;
	w->head = 0;
	return 0;
}

int window_reserve(struct mux_window *w, size_t n, size_t max)
{
	size_t want = w->count + n < max ? w->count + n : max;
	size_t cap = w->cap ? w->cap : 16;

	if (want <= w->cap)
		return 0;
	while (cap < want && cap <= SIZE_MAX / 2)
		cap *= 2;
	return resize(w, cap < max ? cap : max);
}

void window_push(struct mux_window *w, const struct mux_event *ev)
{
	if (w->count == w->cap)
		window_evict_oldest(w);
	*slot(w, w->count) = *ev;
	w->count++;
}

void window_evict_before(struct mux_window *w, int64_t cutoff_ms)
{
	while (w->count && slot(w, 0)->at_ms < cutoff_ms)
		window_evict_oldest(w);
}

void window_evict_oldest(struct mux_window *w)
{
	struct mux_event *ev;

	if (!w->count)
		return;
	ev = slot(w, 0);
	w->start_rv = ev->rv;
	mux_obj_unref(ev->obj);
	mux_obj_unref(ev->prev);
	w->head = (w->head + 1) % w->cap;
	w->count--;
	w->first_seq++;
}

const struct mux_event *window_oldest(const struct mux_window *w)
{
	return w->count ? slot(w, 0) : NULL;
}

uint64_t window_end_seq(const struct mux_window *w)
{
	return w->first_seq + w->count;
}

const struct mux_event *window_get(const struct mux_window *w, uint64_t seq)
{
	if (seq < w->first_seq || seq >= window_end_seq(w))
		return NULL;
	return slot(w, (size_t)(seq - w->first_seq));
}

uint64_t window_seq_after(const struct mux_window *w, uint64_t rv)
{
	size_t lo = 0, hi = w->count; /* the answer is in [lo, hi] */

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (slot(w, mid)->rv > rv)
			hi = mid;
		else
			lo = mid + 1;
	}
	return w->first_seq + lo;
}
