/*
 * outbox_internal.h - the outbox's record format (outbox.c), reachable for
 * the fuzz targets and the unit tests.  Not part of the outbox's API.
 */
#ifndef YURTHUB_PROXY_OUTBOX_INTERNAL_H
#define YURTHUB_PROXY_OUTBOX_INTERNAL_H

#include <stddef.h>

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

#endif
