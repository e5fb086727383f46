/*
 * limits.h - what one client may make the hub hold, in one place: the
 * adapter (server/) enforces the request side, the proxy the response side.
 *
 * Per connection the hub holds at most: the request's headers
 * (LIMIT_CONN_MEMORY), its body (LIMIT_BODY), and of a proxied answer the
 * bytes the client has not taken yet (LIMIT_PENDING, plus one read block)
 * and the cloud's response headers (LIMIT_UPSTREAM_HEADERS).
 */
#ifndef YURTHUB_HTTP_LIMITS_H
#define YURTHUB_HTTP_LIMITS_H

#include <stdbool.h>

#include "kube/requestinfo.h"

#define LIMIT_BODY	  (16u << 20) /* larger request bodies get 413 */
#define LIMIT_CONNECTIONS 4096	      /* client connections, each with its thread */
#define LIMIT_CONN_MEMORY (64u << 10) /* headers of one request */
/* Response headers from the cloud, all lines together: kube-apiserver sends
 * well under 2 KiB.  More would not fit LIMIT_CONN_MEMORY, which
 * libmicrohttpd answers by closing the connection without a word: a 502
 * says what happened. */
#define LIMIT_UPSTREAM_HEADERS (32u << 10)
/* Bytes from the cloud not yet taken by the client, per response. */
#define LIMIT_PENDING (1u << 20)

/* Is this a long-running request, as kube-apiserver counts them (watch,
 * proxy, and the exec, attach, log and portforward subresources)? */
bool request_is_long_running(const struct request_info *ri);

#endif
