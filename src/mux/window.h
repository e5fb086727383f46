/*
 * window.h - the recent history of a shared cache: its last events, oldest
 * first, each numbered by a sequence number that never repeats.
 *
 * A watch from resourceVersion X starts at the first event after X, which a
 * binary search finds, since events are kept in the order of their
 * resourceVersions (equal ones only from a relist, see sharedcache.h).  A
 * watcher's place in the history is a sequence number: when the event it
 * names has left the window, the watcher fell too far behind.
 *
 * A ring that grows by doubling up to the cache's bound, so a quiet resource
 * costs little.  No lock of its own: sharedcache.c holds its lock around
 * every call.  Each event holds one reference to each of its objects.
 */
#ifndef YURTHUB_MUX_WINDOW_H
#define YURTHUB_MUX_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "mux/obj.h"

enum mux_event_type { MUX_ADDED, MUX_MODIFIED, MUX_DELETED, MUX_BOOKMARK };

struct mux_event {
	enum mux_event_type type; /* MUX_ADDED, MUX_MODIFIED or MUX_DELETED */
	uint64_t rv;		  /* its place in the history */
	int64_t at_ms;		  /* when it was recorded (the cache's clock) */
	/* the state after it; for MUX_DELETED the object as deleted, with
	 * resourceVersion rv */
	struct mux_obj *obj;
	struct mux_obj *prev; /* the state before it; NULL when there was none */
};

struct mux_window {
	struct mux_event *ring;
	size_t cap, head, count;
	uint64_t first_seq; /* sequence number of ring[head] */
	/* Everything after this resourceVersion is in the window: the
	 * resourceVersion of the last event evicted, or of the list the
	 * history starts at.  A watch from an older one cannot be served. */
	uint64_t start_rv;
};

/* An empty window whose history starts after start_rv; first_seq goes on
 * from where a previous window's ended, so that no sequence number is
 * reused.  Nothing to allocate. */
void window_init(struct mux_window *w, uint64_t start_rv, uint64_t first_seq);
/* Drop every event (their references) and the ring. */
void window_free(struct mux_window *w);
/* Grow the ring, never past max slots, so that n more events can be pushed
 * without allocating: 0, or -1 when out of memory (nothing changed).  Done
 * before a write changes anything, so that a write never fails half way. */
int window_reserve(struct mux_window *w, size_t n, size_t max);
/* Append ev (its references move into the window); when the ring is full,
 * the oldest event goes first.  window_reserve must have made a slot. */
void window_push(struct mux_window *w, const struct mux_event *ev);
/* Drop the events recorded before cutoff_ms. */
void window_evict_before(struct mux_window *w, int64_t cutoff_ms);
/* Drop the oldest event; start_rv becomes its resourceVersion. */
void window_evict_oldest(struct mux_window *w);
const struct mux_event *window_oldest(const struct mux_window *w);
/* One past the newest event's sequence number. */
uint64_t window_end_seq(const struct mux_window *w);
/* The event numbered seq, or NULL when it is not in the window. */
const struct mux_event *window_get(const struct mux_window *w, uint64_t seq);
/* The sequence number of the first event with a resourceVersion above rv
 * (window_end_seq when there is none). */
uint64_t window_seq_after(const struct mux_window *w, uint64_t rv);

#endif
