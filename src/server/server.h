/*
 * server.h - the front end: libmicrohttpd daemons for the proxy (plain HTTP
 * on --proxy-port, HTTPS with client certificates on --proxy-secure-port)
 * and for the hub's own endpoints (--serve-port: /v1/healthz, /v1/readyz,
 * /metrics), and the routing of each request.
 *
 * Threading: one thread per client connection (MHD_USE_THREAD_PER_CONNECTION),
 * capped by a connection limit.  A connection's thread does all the work of
 * its requests: it may block waiting for the cloud or for a local watch
 * event, so no request ever waits on another.  Stacks are small (256 KiB).
 */
#ifndef YURTHUB_SERVER_SERVER_H
#define YURTHUB_SERVER_SERVER_H

#include <microhttpd.h>
#include <stdbool.h>
#include <time.h>

#include "cache/cacheable.h"
#include "kube/requestinfo.h"
#include "util/buf.h"

struct hub;

/* One request, from its first byte to its completion. */
struct request {
	struct hub *hub;
	char *raw_uri;
	struct request_info ri;
	bool ri_ok;
	char *ri_err;
	char *component;
	enum cache_mode cache_mode;
	struct buf body;
	bool started, body_too_large, is_watch;
	struct timespec t0;
	unsigned int status; /* what was answered, for metrics */
};

struct server;

/* Start the daemons; 0, or -1 with the reason logged. */
int server_start(struct hub *h, struct server **out);
/* Stop accepting, end long requests, join every connection thread. */
void server_stop(struct server *s);

/* The request's client socket, to notice a client that went away while its
 * request waits (-1 when unknown). */
int server_client_fd(struct MHD_Connection *c);
/* A request header, or NULL. */
const char *server_header(struct MHD_Connection *c, const char *name);

#endif
