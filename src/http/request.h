/*
 * request.h - one client request as every part of the request path sees it:
 * the raw URI, what it asks for (kube/requestinfo), the client component,
 * the body, and what was answered.
 *
 * http/ sits below both the libmicrohttpd adapter (server/) and the handlers
 * (proxy/, the hub's endpoints): the adapter makes a request, fills it and
 * hands it to a handler; the handler reads it here and answers it with
 * response.h.  The connection handle is the adapter's and stays opaque: only
 * the files of http/ look inside it.
 */
#ifndef YURTHUB_HTTP_REQUEST_H
#define YURTHUB_HTTP_REQUEST_H

#include <stdbool.h>
#include <time.h>

#include "kube/requestinfo.h"
#include "util/buf.h"

struct MHD_Connection;
struct pending_upgrade;

/* How the client of a request proved who it is (set by server/ before a
 * handler sees the request).  Online the cloud judges every request; offline
 * the hub has only this to go by. */
enum request_auth {
	REQ_AUTH_NONE,	 /* the plain proxy port (and the hub's own port) */
	REQ_AUTH_CERT,	 /* secure port: a client certificate of the client CA */
	REQ_AUTH_BEARER, /* secure port: a bearer token, not checked by server/ */
	REQ_AUTH_NODE,	 /* leader port: another node's certificate */
};

struct request {
	struct MHD_Connection *conn; /* the adapter's handle */
	enum request_auth auth;
	char *raw_uri; /* byte for byte as received, query and all */
	struct request_info ri;
	bool ri_ok;
	char *ri_err;	  /* why ri_ok is false */
	char *header_err; /* a header no HTTP server may pass on (a CR in it...): why */
	char *component;  /* User-Agent's first word, lower-cased; "" for none */
	struct buf body;
	size_t body_held; /* of the hub's body budget (http/limits.h) */
	bool started, is_watch;
	/* the hub's own informers (component yurthub) and multiplexer upstreams
	 * (multiplexer-proxy-*): not in the gauges */
	bool hub_own;
	bool body_too_large, body_no_room; /* refused: over LIMIT_BODY, LIMIT_BODIES */
	bool counted;			   /* against --max-requests-in-flight */
	struct timespec t0;
	unsigned int status;		 /* what was answered, for metrics */
	struct pending_upgrade *upgrade; /* a 101 queued, not yet taken over */
};

/* A request for raw_uri on conn, received now; NULL on ENOMEM. */
struct request *request_new(struct MHD_Connection *conn, const char *raw_uri);
/* Read what the request asks for (method, URI, User-Agent): ri, ri_ok,
 * ri_err, component; and check every header's name and value (header_err).
 * 0, or -1 on ENOMEM. */
int request_begin(struct request *req, const char *method);
void request_free(struct request *req);

/* A request header, or NULL. */
const char *request_header(const struct request *req, const char *name);
/* Every request header in order; fn returns 0 to go on, -1 to stop (then
 * -1 is returned). */
int request_each_header(const struct request *req,
			int (*fn)(void *ctx, const char *name, const char *value), void *ctx);
/* Whether v may be an HTTP field value: no control character but tab
 * (RFC 9110), as Go's net/http checks it.  A CR, LF or NUL passed on would
 * end the line or the string somewhere else for the next parser on the way
 * to the API server. */
bool request_field_value_ok(const char *v);
/* The client socket, to notice a client that went away while its request
 * waits; -1 when unknown. */
int request_client_fd(const struct request *req);
/* Seconds since the request came in. */
/* The client connected from a loopback address (127/8, ::1, ::ffff:127/104). */
bool request_from_loopback(const struct request *req);
double request_seconds(const struct request *req);

#endif
