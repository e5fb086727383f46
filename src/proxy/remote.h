/*
 * remote.h - proxying one request to the cloud and streaming the answer back.
 *
 * The request goes to a healthy backend with the client's method, headers
 * (hop-by-hop ones dropped) and body; the answer comes back byte for byte:
 * status, headers, body, in the same framing where HTTP allows (a known
 * Content-Length is kept, otherwise chunked).  Nothing is held whole: bytes
 * flow from libcurl to libmicrohttpd through a small bounded buffer, with
 * libcurl paused when the client reads slower than the cloud sends.  The
 * same bytes are fed to a cache tee when the request is cached.
 *
 * A watch or other long-running request ends when its backend is declared
 * unhealthy, when the hub stops, or when the client goes away, so that a
 * client never sits on a silent, dead stream.  A watch that ends between two
 * events (kube/framing.h) - so ended, or closed by the cloud there - gets
 * its final chunk, as from kube-apiserver, and the client re-watches; any
 * other cut answer is broken off, so that no client takes it for whole.
 */
#ifndef YURTHUB_PROXY_REMOTE_H
#define YURTHUB_PROXY_REMOTE_H

#include "cache/cacheable.h"
#include "http/request.h"

struct proxy;

enum remote_outcome {
	REMOTE_ANSWERED,    /* the cloud's answer is on its way to the client */
	REMOTE_CLOSE,	    /* it could not be queued: close the connection */
	REMOTE_NO_BACKEND,  /* no healthy backend to try */
	REMOTE_UNREACHABLE, /* the backend could not be reached (health told) */
	REMOTE_BAD_ANSWER,  /* it answered what cannot be passed on (a 502) */
	REMOTE_ERROR,	    /* anything else (out of memory, bad request) */
};

/* Send req to the cloud and queue its answer; mode: how to cache it. */
enum remote_outcome remote_proxy(struct proxy *p, struct request *req, enum cache_mode mode);

#endif
