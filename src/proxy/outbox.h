/*
 * outbox.h - writes accepted while offline that the cloud must still get:
 * the Events the node's components create while the link is down.
 *
 * Each is kept durably (one file per write under the hub's private
 * directory, written crash-safe) and sent to the cloud in the order it came
 * once a backend is healthy again.  A write the cloud accepted (2xx), or
 * already has (409 AlreadyExists, after a crash between sending and
 * forgetting), is removed.  One refused for now (no answer, 401, 403, 408,
 * 429, 5xx) is kept and tried again after a growing pause; only one that can
 * never pass (400, 404, 413, 415, 422 and other answers no retry changes) is
 * dropped, logged and counted by reason - the table is in outbox.c.  The
 * queue is bounded: when full, the oldest write is dropped and counted.
 */
#ifndef YURTHUB_PROXY_OUTBOX_H
#define YURTHUB_PROXY_OUTBOX_H

#include <stddef.h>

#include "metrics/metrics.h"
#include "cloud/upstream.h"

#define OUTBOX_MAX_DEFAULT 1000

struct outbox;

/* The queue lives in dir (created 0700).  NULL on failure (logged). */
struct outbox *outbox_open(const char *dir, struct upstream *u, struct metrics *m,
			   size_t max_items);
/* Start the sender thread.  0 or -1. */
int outbox_start(struct outbox *o);
/* Keep a write (raw URI, content type, body) for later; 0 or -errno. */
int outbox_add(struct outbox *o, const char *uri, const char *content_type, const char *body,
	       size_t len);
/* Writes waiting. */
size_t outbox_pending(struct outbox *o);
void outbox_close(struct outbox *o);

#endif
