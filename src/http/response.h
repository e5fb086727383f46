/*
 * response.h - answering a request: whole bodies, Kubernetes Status objects
 * for errors, streamed bodies (a proxied answer, an offline list or watch),
 * and protocol upgrades (exec, attach, port-forward).
 *
 * Every function that answers takes the request and answers it once,
 * recording the status for metrics.  It returns 0 when the answer is
 * queued, -1 when it could not be (out of memory, or the connection cannot
 * take it); the adapter then closes the connection, which is all that can
 * be done.  Bodies given to these functions are taken over, also on
 * failure.
 */
#ifndef YURTHUB_HTTP_RESPONSE_H
#define YURTHUB_HTTP_RESPONSE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "http/request.h"
#include "util/buf.h"

/* A whole body of len bytes (data is taken: freed when sent). */
int reply_bytes(struct request *req, unsigned int code, char *data, size_t len,
		const char *content_type);
/* application/json; the bytes of body are taken (body is left empty). */
int reply_json(struct request *req, unsigned int code, struct buf *body);
/* A short text/plain answer (copied). */
int reply_text(struct request *req, unsigned int code, const char *text);
/* A Status object: {"kind":"Status",...,"status":"Failure","message":...,
 * "reason":...,"code":...}.  reason NULL: the usual one for code (see
 * reply_reason); details NULL or a JSON object text. */
int reply_status(struct request *req, int code, const char *reason, const char *message,
		 const char *details_json);
/* The reason Kubernetes gives an HTTP status (NotFound, Forbidden, ...). */
const char *reply_reason(int code);

/* ---- answers put together piece by piece ---- */

struct reply;

#define REPLY_SIZE_UNKNOWN UINT64_MAX /* chunked */
/* What a reader returns besides a byte count: the body is complete (a
 * chunked body gets its final chunk), or broken off (the connection is
 * closed without one, so the client cannot take it for complete). */
#define REPLY_END   ((ssize_t)-1)
#define REPLY_ABORT ((ssize_t)-2)

/* Called when the client can take more: up to max bytes into out, or
 * REPLY_END / REPLY_ABORT.  It may block (each connection has its thread). */
typedef ssize_t (*reply_reader)(void *cls, char *out, size_t max);

/* A body produced by rd (size bytes, or REPLY_SIZE_UNKNOWN), in blocks of
 * up to `block` bytes.  free_cls(cls) runs when the answer is done with,
 * whatever happened - also right here when NULL (ENOMEM) is returned. */
struct reply *reply_stream(uint64_t size, size_t block, reply_reader rd, void *cls,
			   void (*free_cls)(void *));
/* A whole body (data is taken, also on failure); content_type may be NULL. */
struct reply *reply_buffer(char *data, size_t len, const char *content_type);
/* A Status object as reply_status() sends it, to add headers to. */
struct reply *reply_status_new(int code, const char *reason, const char *message,
			       const char *details_json);
/* Add a header; 0, or -1 (refused: a header libmicrohttpd sets itself). */
int reply_header(struct reply *r, const char *name, const char *value);
/* Send r (NULL: -1) with code; r is released. */
int reply_send(struct request *req, unsigned int code, struct reply *r);

/* ---- protocol upgrades ---- */

struct MHD_UpgradeResponseHandle;

/* The client's side of an upgraded connection, once the 101 is sent: a
 * socket to recv() and send() on (for TLS clients a socketpair end, the
 * adapter doing TLS), and the bytes the client sent after its request
 * before the 101 went out.  Whoever gets it must end it with
 * upgraded_close(). */
struct upgraded {
	int fd;
	char *extra;
	size_t extra_len;
	struct MHD_UpgradeResponseHandle *urh;
};

/* Called in the connection's thread right after the 101 was sent.  It must
 * not block: for TLS clients the adapter relays between the socket and TLS
 * only once it returns.  It owns cls and u from now on. */
typedef void (*reply_upgraded_fn)(void *cls, struct upgraded *u);

/* A 101 answer that hands the connection to fn.  If the 101 never goes
 * out (the client left first), free_cls(cls) runs when the request ends;
 * when NULL (ENOMEM) is returned it has run already. */
struct reply *reply_upgrade(struct request *req, reply_upgraded_fn fn, void *cls,
			    void (*free_cls)(void *));
/* Close the client's side of an upgraded connection and free u. */
void upgraded_close(struct upgraded *u);
/* The request ends: an upgrade that never happened is dropped. */
void reply_upgrade_drop(struct request *req);

#endif
