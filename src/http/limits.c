/* limits.c - what one client may make the hub hold, see limits.h. */
#include "http/limits.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/request.h"
#include "http/response.h"
#include "metrics/metrics.h"

bool request_is_long_running(const struct request_info *ri)
{
	static const char *const subs[] = {"attach", "exec", "proxy", "log", "portforward"};
	if (ri->verb == VERB_WATCH || ri->verb == VERB_PROXY)
		return true;
	for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
		if (ri->subresource && !strcmp(ri->subresource, subs[i]))
			return true;
	return false;
}

/* ---- the cross-connection limits ---- */

/* Content-Length as announced: its value, or -1 when there is none (or it
 * does not parse, which libmicrohttpd refuses by itself). */
long long request_announced_length(const struct request *req)
{
	const char *cl = request_header(req, "Content-Length");
	if (!cl || !*cl)
		return -1;
	char *end;
	errno = 0;
	long long v = strtoll(cl, &end, 10);
	return *end || errno || v < 0 ? -1 : v;
}

static int too_many(struct request *req, const char *message)
{
	struct reply *r =
	    reply_status_new(429, "TooManyRequests", message, "{\"retryAfterSeconds\":1}");
	if (r)
		reply_header(r, "Retry-After", "1"); /* not one libmicrohttpd refuses */
	return reply_send(req, 429, r);
}

static int no_room_for_body(struct request_gate *g, struct request *req)
{
	atomic_fetch_add(&g->m->rejected_body_memory, 1);
	return too_many(req, "the hub holds too many request bodies now, please try again later");
}

static int body_too_large(struct request *req)
{
	return reply_status(req, 413, NULL, "request body too large", NULL);
}

int gate_admit(struct request_gate *g, struct request *req)
{
	/* the hub's own informers (the filters' inputs, readiness) are not the
	 * clients this limit protects the node from */
	if (!req->hub_own && (!req->ri_ok || !request_is_long_running(&req->ri))) {
		long now = atomic_fetch_add(&g->m->limited_in_flight, 1) + 1;
		req->counted = true;
		if (now > g->m->max_in_flight) {
			gate_release(g, req);
			atomic_fetch_add(&g->m->rejected_in_flight, 1);
			return too_many(req, "Too many requests, please try again later.");
		}
	}
	long long announced = request_announced_length(req);
	if (announced > (long long)LIMIT_BODY)
		return body_too_large(req);
	if (announced > 0 &&
	    atomic_load(&g->m->body_bytes) + (uint64_t)announced > (uint64_t)LIMIT_BODIES)
		return no_room_for_body(g, req);
	return 1;
}

/* Let go of the body held so far (it will not be used). */
static void drop_body(struct request_gate *g, struct request *req)
{
	buf_free(&req->body);
	atomic_fetch_sub(&g->m->body_bytes, req->body_held);
	req->body_held = 0;
}

bool gate_take_body(struct request_gate *g, struct request *req, size_t n)
{
	if (req->body_too_large || req->body_no_room)
		return false;
	if (req->body_held + n > LIMIT_BODY) {
		req->body_too_large = true;
		drop_body(g, req);
		return false;
	}
	uint64_t now = atomic_fetch_add(&g->m->body_bytes, n) + n;
	if (now > LIMIT_BODIES) {
		atomic_fetch_sub(&g->m->body_bytes, n);
		req->body_no_room = true;
		drop_body(g, req);
		return false;
	}
	req->body_held += n;
	return true;
}

int gate_refuse_body(struct request_gate *g, struct request *req)
{
	return req->body_too_large ? body_too_large(req) : no_room_for_body(g, req);
}

void gate_release(struct request_gate *g, struct request *req)
{
	if (req->counted)
		atomic_fetch_sub(&g->m->limited_in_flight, 1);
	req->counted = false;
	atomic_fetch_sub(&g->m->body_bytes, req->body_held);
	req->body_held = 0;
}
