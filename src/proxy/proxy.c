/*
 * proxy.c - the proxy ports' handler, see proxy.h: the cloud when it can be
 * reached, the store when it cannot.
 */
#include "proxy/proxy.h"

#include <string.h>

#include "cache/local_changes.h"
#include "cluster/cluster.h"
#include "http/response.h"
#include "kube/meta.h"
#include "proxy/local.h"
#include "proxy/local_token.h"
#include "proxy/multiplexer.h"
#include "proxy/remote.h"
#include "proxy/upgrade.h"
#include "util/log.h"

/* The start-up rule (docs/filters.md): how long a request a filter may
 * change waits for the filters' view of the cluster.  Online the view is a
 * handful of lists through this hub, well under a second on a healthy
 * cloud; offline it is read from the cache in milliseconds.  10 s is far
 * past both, and short of what clients wait for an answer (client-go's
 * list has no timeout of its own, but kubectl gives up after 30 s and
 * kube-proxy's first sync is retried on error anyway).  Past it the client
 * gets 503 with Retry-After, which client-go honours by asking again after
 * that many seconds, transparently: it never gets an unfiltered answer. */
#define FILTER_SYNC_WAIT_MS 10000
#define FILTER_SYNC_RETRY_S "1"

int proxy_init(struct proxy *p)
{
	if (pthread_mutex_init(&p->relay_lock, NULL) != 0)
		return -1;
	if (pthread_cond_init(&p->relay_cv, NULL) != 0) {
		pthread_mutex_destroy(&p->relay_lock);
		return -1;
	}
	p->relay_sync_ready = true;
	return 0;
}

/* What the cloud could not do for req, answered. */
static int failed(struct request *req, enum remote_outcome out)
{
	if (out == REMOTE_ERROR)
		return reply_status(req, 500, NULL, "the hub could not forward the request", NULL);
	return reply_status(req, 502, NULL,
			    "the API server's answer could not be passed on (malformed, or "
			    "headers over 32 KiB)",
			    NULL);
}

/* A list or watch, while the cloud answers, from a resourceVersion the hub
 * made up offline (cache/local_changes.h): the cloud never had that state.
 * Answered as the API server answers a too old rv, so that client-go lists
 * again, from the cloud.  True when answered (*rc). */
static bool at_local_rv(struct proxy *p, struct request *req, int *rc)
{
	const struct request_info *ri = &req->ri;
	uint64_t rv = 0;
	if ((ri->verb != VERB_LIST && ri->verb != VERB_WATCH) || !*ri->resource_version ||
	    kube_rv_parse(ri->resource_version, strlen(ri->resource_version), &rv) < 0 ||
	    !upstream_any_healthy(p->up) || !local_changes_rv_issued(p->changes, rv))
		return false;
	if (ri->verb == VERB_WATCH)
		*rc = local_too_old(req, rv, rv + 1);
	else
		*rc = reply_status(req, 410, "Expired",
				   "the resourceVersion was the hub's own while the cloud was "
				   "unreachable; list again",
				   NULL);
	return true;
}

/* Hold a request whose answer a filter may change until what the filter
 * reads is synced; past the bound, 503.  True when answered (*rc). */
static bool filters_not_synced(struct proxy *p, struct request *req, int *rc)
{
	if (!p->cluster)
		return false;
	const struct request_info *ri = &req->ri;
	struct buf missing = BUF_INIT;
	if (cluster_wait_filters(p->cluster, req->component, request_info_verb(ri), ri->resource,
				 FILTER_SYNC_WAIT_MS, &missing) == 0) {
		buf_free(&missing);
		return false;
	}
	struct buf msg = BUF_INIT;
	int r = buf_printf(&msg,
			   "the hub's response filters cannot answer yet: their view of the "
			   "cluster is not synced (missing: %s); retry shortly",
			   missing.len ? buf_cstr(&missing) : "unknown");
	log_warn("request: %s %s of %s by \"%s\" answered 503: the filters' view is missing %s "
		 "after %d s",
		 request_info_verb(ri), ri->resource, req->raw_uri, req->component,
		 missing.len ? buf_cstr(&missing) : "(unknown)", FILTER_SYNC_WAIT_MS / 1000);
	struct reply *rep =
	    r < 0 ? NULL : reply_status_new(503, "ServiceUnavailable", buf_cstr(&msg), NULL);
	if (rep)
		reply_header(rep, "Retry-After", FILTER_SYNC_RETRY_S);
	*rc = reply_send(req, 503, rep);
	buf_free(&msg);
	buf_free(&missing);
	return true;
}

int proxy_handle(void *ctx, struct request *req)
{
	struct proxy *p = ctx;
	if (!req->ri_ok)
		return reply_status(req, 400, NULL, req->ri_err ? req->ri_err : "bad request",
				    NULL);
	health_wait_first(p->health);
	int rc;
	/* before any path that answers (multiplexer, cloud, cache), so that
	 * none answers unfiltered and a watch's first events are filtered */
	if (filters_not_synced(p, req, &rc))
		return rc;
	if (at_local_rv(p, req, &rc) || multiplexer_answer(p, req, &rc))
		return rc;
	if (upstream_any_healthy(p->up))
		local_token_note(p, req);
	bool upgrade = request_header(req, "Upgrade") != NULL;
	enum cache_mode mode =
	    p->cloud_mode ? CACHE_NONE : cache_mode_for(p->agents, req->component, &req->ri);
	enum remote_outcome out = upgrade ? upgrade_proxy(p, req) : remote_proxy(p, req, mode);
	if (out == REMOTE_ANSWERED)
		return 0;
	if (out == REMOTE_CLOSE)
		return -1;
	if (out == REMOTE_ERROR || out == REMOTE_BAD_ANSWER)
		return failed(req, out);
	/* The cloud cannot be reached: answer from the store; an upgrade (exec,
	 * port-forward) has no offline answer. */
	if (upgrade)
		return reply_status(req, 503, NULL,
				    "this request needs the cloud, which is unreachable", NULL);
	if (p->cloud_mode) /* nothing is cached in cloud mode */
		return reply_status(req, 503, NULL,
				    "the API server is unreachable (working mode cloud: no cache)",
				    NULL);
	return local_answer(p, req);
}

int proxy_handle_peer(void *ctx, struct request *req)
{
	struct proxy *p = ctx;
	if (!req->ri_ok)
		return reply_status(req, 400, NULL, req->ri_err ? req->ri_err : "bad request",
				    NULL);
	return multiplexer_answer_peer(p, req);
}

int proxy_admit_peer(void *ctx, struct request *req, const char *node)
{
	return multiplexer_admit_peer(ctx, req, node);
}

void proxy_stop(struct proxy *p)
{
	atomic_store(&p->stopping, true);
	if (p->cluster) /* requests held for it end now */
		cluster_stop_waits(p->cluster);
}

void proxy_end_upgrades(struct proxy *p)
{
	if (!p->relay_sync_ready)
		return;
	pthread_mutex_lock(&p->relay_lock);
	p->relays_closed = true;
	while (p->relays > 0) /* each ends within a poll interval of the stop */
		pthread_cond_wait(&p->relay_cv, &p->relay_lock);
	pthread_mutex_unlock(&p->relay_lock);
}

void proxy_free(struct proxy *p)
{
	if (!p->relay_sync_ready)
		return;
	pthread_cond_destroy(&p->relay_cv);
	pthread_mutex_destroy(&p->relay_lock);
	p->relay_sync_ready = false;
}
