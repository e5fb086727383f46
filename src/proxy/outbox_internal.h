/*
 * outbox_internal.h - the outbox's record format (outbox.c), reachable for
 * the fuzz targets and the unit tests.  Not part of the outbox's API.
 */
#ifndef YURTHUB_PROXY_OUTBOX_INTERNAL_H
#define YURTHUB_PROXY_OUTBOX_INTERNAL_H

#include <stddef.h>

#include "metrics/metrics.h"

struct outbox;

/* One queued write: {"uri":...,"contentType":...,"body":...}. */
struct outbox_record {
	char *uri;	    /* a request target: starts with '/' */
	char *content_type; /* one header value */
	char *body;	    /* NUL-terminated copy; body_len bytes */
	size_t body_len;
};

/* 0, or -1 for bytes that are not a record that can be sent as it is (such
 * a record is dropped). */
int outbox_record_decode(const char *text, size_t len, struct outbox_record *out);
void outbox_record_free(struct outbox_record *r);

/* What the sender does with a record after an attempt (see outbox.c). */
enum outbox_verdict {
	OUTBOX_DELIVERED, /* the cloud has it: forget it */
	OUTBOX_RETRY,	  /* it can still succeed: keep it, try again after a pause */
	OUTBOX_DROP,	  /* it never can: forget it, count it under *reason */
};

/* The verdict on an HTTP status; 0 is "the cloud was not reached". */
enum outbox_verdict outbox_classify(long code, enum offline_drop *reason);

/* The pauses between attempts after a refusal that can pass: first_ms,
 * doubling up to max_ms (defaults 1 s and 60 s).  For tests. */
void outbox_set_backoff(struct outbox *o, unsigned first_ms, unsigned max_ms);

#endif
