/*
 * proxy.c - the proxy ports' handler, see proxy.h: the cloud when it can be
 * reached, the store when it cannot.
 */
#include "proxy/proxy.h"

#include "http/response.h"
#include "proxy/local.h"
#include "proxy/multiplexer.h"
#include "proxy/remote.h"
#include "proxy/upgrade.h"

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

int proxy_handle(void *ctx, struct request *req)
{
	struct proxy *p = ctx;
	if (!req->ri_ok)
		return reply_status(req, 400, NULL, req->ri_err ? req->ri_err : "bad request",
				    NULL);
	health_wait_first(p->health);
	int rc;
	if (multiplexer_answer(p, req, &rc))
		return rc;
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

void proxy_stop(struct proxy *p)
{
	atomic_store(&p->stopping, true);
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
