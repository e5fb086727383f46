/*
 * limits.h - what one client may make the hub hold, in one place: the
 * adapter (server/) enforces the request side, the proxy the response side.
 *
 * Per connection the hub holds at most: the request's headers
 * (LIMIT_CONN_MEMORY), its body (LIMIT_BODY), and of a proxied answer the
 * bytes the client has not taken yet (LIMIT_PENDING, plus one read block;
 * a gzip answer the filters inflate is inflated only into that room, the
 * rest waits as gzip) and the cloud's response headers
 * (LIMIT_UPSTREAM_HEADERS).
 *
 * Across connections: at most --max-requests-in-flight requests that are not
 * long-running are served at once, as kube-apiserver counts them (watches,
 * exec, attach, log, port-forward and proxy are not counted: they last, and
 * they carry no body); request bodies together take at most LIMIT_BODIES.
 * What is over either limit is answered 429 TooManyRequests with
 * Retry-After: 1, which clients retry, as the API server does.
 */
#ifndef YURTHUB_HTTP_LIMITS_H
#define YURTHUB_HTTP_LIMITS_H

#include <stdbool.h>
#include <stddef.h>

#include "kube/requestinfo.h"

#define LIMIT_BODY	  (16u << 20) /* larger request bodies get 413 */
#define LIMIT_CONNECTIONS 4096	      /* client connections, each with its thread */
#define LIMIT_CONN_MEMORY (64u << 10) /* headers of one request */
/* Response headers from the cloud, all lines together: kube-apiserver sends
 * well under 2 KiB.  More would not fit LIMIT_CONN_MEMORY, which
 * libmicrohttpd answers by closing the connection without a word: a 502
 * says what happened. */
#define LIMIT_UPSTREAM_HEADERS (32u << 10)
/* Bytes from the cloud not yet taken by the client, per response.  Proxying
 * is as fast with 64 KiB as with 1 MiB (BENCHMARKS.md, "Pending bytes"):
 * the sockets' buffers, not this one, keep the bytes flowing.  Overridable
 * at build time for bench/pending_bench.py. */
#ifndef LIMIT_PENDING
#define LIMIT_PENDING (64u << 10)
#endif
/* Request bodies held at once, all connections together: four bodies of
 * the largest size; node agents send a few KiB. */
#define LIMIT_BODIES (4u * LIMIT_BODY)

/* Is this a long-running request, as kube-apiserver counts them (watch,
 * proxy, and the exec, attach, log and portforward subresources)? */
bool request_is_long_running(const struct request_info *ri);

struct metrics;
struct request;

/* Content-Length as the client announced it; -1 when there is none. */
long long request_announced_length(const struct request *req);

/* The cross-connection limits; the counts live in the metrics. */
struct request_gate {
	struct metrics *m; /* max_in_flight there is the limit */
};

/* As soon as req's headers are in: count it against --max-requests-in-flight
 * unless it is long-running, and check that a body it announces
 * (Content-Length) fits LIMIT_BODY and what is left of LIMIT_BODIES.
 * 1: admitted; otherwise req was answered (413 or 429) and this is the
 * answer's result. */
int gate_admit(struct request_gate *g, struct request *req);
/* n more body bytes for req: true when they fit LIMIT_BODY and LIMIT_BODIES
 * (then they are accounted to req), false when they do not. */
bool gate_take_body(struct request_gate *g, struct request *req, size_t n);
/* Answer a request whose body did not fit (see gate_take_body): 413 when it
 * is over LIMIT_BODY, else 429. */
int gate_refuse_body(struct request_gate *g, struct request *req);
/* The request is over: give back what it held.  Safe to call twice. */
void gate_release(struct request_gate *g, struct request *req);

#endif
