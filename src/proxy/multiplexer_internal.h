/*
 * multiplexer_internal.h - what the multiplexer's three files share: the
 * manager (multiplexer.c, which picks the resource and makes sure its
 * upstream runs) and the two answers, lists (multiplexer_list.c) and
 * watches (multiplexer_watch.c).
 */
#ifndef YURTHUB_PROXY_MULTIPLEXER_INTERNAL_H
#define YURTHUB_PROXY_MULTIPLEXER_INTERNAL_H

#include <stdint.h>

#include "filter/filter.h"
#include "http/request.h"
#include "kube/selector.h"
#include "mux/filter.h"
#include "mux/sharedcache.h"
#include "proxy/local.h"
#include "util/buf.h"

struct proxy;

/* Before the first upstream list completes, a client waits this long, then
 * gets 429 with Retry-After: 1 (docs/sharing.md, "Proxy integration"). */
#define MUX_FIRST_LIST_WAIT_MS 5000
/* A list or watch at a resourceVersion newer than the cache waits this long
 * for it, as kube-apiserver does, then gets 504 "Too large resource
 * version". */
#define MUX_TOO_NEW_WAIT_MS 3000

/* What one local list or watch needs: its cache, its parsed selectors (the
 * mux_filter points into them), its kind, its response filters. */
struct mux_request {
	struct mux_cache *cache;
	struct selector *labels, *fields;
	struct mux_filter filter;
	struct local_kind kind; /* "Service", "v1" */
	filter_mask filters;
	struct filter_target target;
};

/* Parse req's selectors (and check its fields as the API server would):
 * 0, or -1 with *why (malloc'ed) for a 400. */
int mux_request_init(struct mux_request *r, struct proxy *p, struct request *req,
		     struct mux_cache *c, char **why);
void mux_request_free(struct mux_request *r);

/* Wait until the cache can answer at the request's resourceVersion (rv 0:
 * its first list).  0 when it can; otherwise req is answered (429 before the
 * first list, 504 for a resourceVersion the cache does not reach, 503 when
 * closed) and *rc is the handler's result. */
int mux_wait_ready(struct mux_cache *c, struct request *req, uint64_t rv, int *rc);

/* Copy what is left of b from *off on into out, at most max bytes, and
 * move *off on: the answers' read callbacks hand out what they produced. */
size_t mux_hand_out(const struct buf *b, size_t *off, char *out, size_t max);

/* The answers; r is taken over (freed when the answer is done). */
int mux_answer_list(struct proxy *p, struct request *req, struct mux_request *r);
int mux_answer_watch(struct proxy *p, struct request *req, struct mux_request *r);

#endif
