/*
 * proxy.c - the proxy ports' handler, see proxy.h: the cloud when it can be
 * reached, the store when it cannot.
 */
#include "proxy/proxy.h"

#include "http/response.h"
#include "proxy/local.h"
#include "proxy/remote.h"

int proxy_handle(void *ctx, struct request *req)
{
	struct proxy *p = ctx;
	if (!req->ri_ok)
		return reply_status(req, 400, NULL, req->ri_err ? req->ri_err : "bad request",
				    NULL);
	if (request_header(req, "Upgrade"))
		return reply_status(req, 501, NULL,
				    "protocol upgrades (exec, attach, port-forward) are not "
				    "proxied by this hub",
				    NULL);
	enum cache_mode mode = cache_mode_for(p->agents, req->component, &req->ri);
	health_wait_first(p->health);
	enum remote_outcome out = remote_proxy(p, req, mode);
	if (out == REMOTE_ANSWERED)
		return 0;
	if (out == REMOTE_CLOSE)
		return -1;
	if (out == REMOTE_ERROR)
		return reply_status(req, 500, NULL, "the hub could not forward the request", NULL);
	if (out == REMOTE_BAD_ANSWER)
		return reply_status(req, 502, NULL,
				    "the API server's answer could not be passed on (malformed, "
				    "or headers over 32 KiB)",
				    NULL);
	/* The cloud cannot be reached: answer from the store. */
	return local_answer(p, req);
}

void proxy_stop(struct proxy *p)
{
	atomic_store(&p->stopping, true);
}
