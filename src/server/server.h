/*
 * server.h - the libmicrohttpd adapter: the daemons of the proxy ports
 * (plain HTTP on --proxy-port, HTTPS on --proxy-secure-port for clients
 * with a certificate of the client CA or a bearer token) and of the hub's own port (--serve-port),
 * turning each connection's requests into struct request (http/) and handing them to the handlers
 * the hub registered.  It knows nothing of what the handlers do.
 *
 * Before a handler runs, the adapter has read the request line and headers,
 * checked the secure port's client certificate (as soon as the headers are
 * in: a client without one never gets a byte of its body read), applied
 * the limits of http/limits.h (--max-requests-in-flight, the body sizes),
 * and collected the body.  It counts every finished proxy request in the metrics.
 *
 * A client certificate counts on the secure port and the multiplexer port
 * when it verifies against the client CA (server/client_ca.h: reloaded
 * when its file changes) and may be used as a TLS client (its extended key
 * usage, as kube-apiserver checks it).  On the multiplexer port it must
 * also name a node, which routes->peer_admit checks is of this pool.
 *
 * Each port listens on one address, the proxy ports on a second one too
 * when the hub has its dummy interface: one libmicrohttpd daemon per
 * address and port, each with its own listener thread.
 *
 * Threading: one thread per client connection (MHD_USE_THREAD_PER_CONNECTION),
 * capped by a connection limit.  A connection's thread does all the work of
 * its requests: it may block waiting for the cloud or for a local watch
 * event, so no request ever waits on another.  Stacks are small (256 KiB).
 */
#ifndef YURTHUB_SERVER_SERVER_H
#define YURTHUB_SERVER_SERVER_H

#include <stdbool.h>

#include "config.h"
#include "http/limits.h"
#include "http/request.h"
#include "metrics/metrics.h"

/* Answers req (with http/response.h); 0, or -1 to close the connection. */
typedef int (*server_handler)(void *ctx, struct request *req);

struct server_routes {
	server_handler proxy; /* both proxy ports */
	void *proxy_ctx;
	server_handler peer; /* a leader's multiplexer port, with proxy_ctx */
	/* whether the node whose certificate the multiplexer port verified
	 * may be served there (with proxy_ctx): 1 yes, else req was answered
	 * (that answer's 0 or -1) */
	int (*peer_admit)(void *ctx, struct request *req, const char *node);
	server_handler hub; /* the serve port */
	void *hub_ctx;
	struct metrics *metrics;
	struct request_gate *gate; /* --max-requests-in-flight, the body budget */
};

struct server;

/* Start the daemons; 0, or -1 with the reason logged (*out is set either
 * way, for server_stop).  dummy_addr: NULL, or a second address both proxy
 * ports listen on besides --bind-proxy-address, with the same handler (the
 * dummy interface's, for the node's pods). */
int server_start(const struct config *cfg, const struct server_routes *routes,
		 const char *dummy_addr, const char *client_ca_file, struct server **out);
/* Start the secure port (--proxy-secure-port) if it is not serving yet and
 * can: client_ca_file of server_start() was given and is there, and
 * server/tls.h has a certificate.  Any thread, any number of times; the
 * hub calls it when bootstrap brings either, and when the cluster CA may
 * have changed: the client CA is then read again if its file changed
 * (server/client_ca.h; each connection also looks as it starts).  0, or -1 when it failed to
 * listen (logged). */
int server_enable_secure(struct server *s);
/* Does the secure port accept connections (started, listening)?  It never
 * stops once it does.  false for a NULL s.  Any thread. */
bool server_secure_serving(struct server *s);
/* Start the multiplexer port on addr:port, once (later calls change
 * nothing): TLS with the serving certificate, for clients whose certificate
 * of the cluster CA names a node (routes->peer answers them).  Without a
 * certificate or the CA yet, it starts when server_enable_secure() finds
 * them.  0, or -1 out of memory; a failure to listen is logged. */
int server_enable_peer(struct server *s, const char *addr, int port);
/* Stop accepting connections; the ones open go on. */
void server_quiesce(struct server *s);
/* Stop accepting, end long requests, join every connection thread. */
void server_stop(struct server *s);

#endif
