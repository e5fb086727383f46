/*
 * multiplexer_list.c - a local list of a pool-scope resource answered from
 * the multiplexer's shared cache (multiplexer.h): a snapshot at the cache's
 * resourceVersion, written item by item from the shared objects' bytes,
 * through the client's own response filters when it has any.
 *
 * The snapshot holds references, not copies; each is dropped once written,
 * so a slow client keeps only what it has not been sent.  limit is not
 * honoured: the whole list comes without a continue token, which the API
 * allows (a server may return more than asked) and client-go accepts.
 */
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"
#include "filter/rewrite.h"
#include "http/response.h"
#include "kube/meta.h"
#include "proxy/local_internal.h"
#include "proxy/multiplexer_internal.h"
#include "proxy/proxy.h"
#include "util/buf.h"

#define LIST_CHUNK (64u << 10)

enum list_part { PART_HEAD, PART_ITEMS, PART_TAIL, PART_DONE };

struct list_answer {
	struct mux_request *req;
	struct mux_list list;
	size_t next; /* the next item to write */
	enum list_part part;
	struct buf raw;	    /* what the cache says, before the filters */
	struct buf out;	    /* what the client gets */
	size_t off;	    /* of out, sent */
	struct rewrite *rw; /* NULL: no filters for this client */
};

static int to_client(void *ctx, const char *data, size_t len)
{
	struct list_answer *a = ctx;
	return buf_append(&a->out, data, len);
}

static int write_head(struct list_answer *a)
{
	const struct local_kind *k = &a->req->kind;
	struct buf *o = &a->raw;
	int rc = buf_append_str(o, "{\"kind\":");
	rc = rc ? rc : buf_printf(o, "\"%sList\"", k->kind ? k->kind : "");
	rc = rc ? rc : buf_append_str(o, ",\"apiVersion\":");
	rc = rc ? rc : local_json_string(o, k->api_version);
	return rc ? rc
		  : buf_printf(o, ",\"metadata\":{\"resourceVersion\":\"%llu\"},\"items\":[",
			       (unsigned long long)a->list.rv);
}

/* Write the next items into raw, up to about LIST_CHUNK; each object's
 * reference is dropped once its bytes are copied. */
static int write_items(struct list_answer *a)
{
	while (a->raw.len < LIST_CHUNK && a->next < a->list.n) {
		struct mux_obj *o = a->list.objs[a->next];
		if ((a->next && buf_append_str(&a->raw, ",") < 0) ||
		    buf_append(&a->raw, o->data, o->len) < 0)
			return -1;
		mux_obj_unref(o);
		a->list.objs[a->next++] = NULL;
	}
	if (a->next == a->list.n)
		a->part = PART_TAIL;
	return 0;
}

/* Produce the next piece of the answer into out. */
static int produce(struct list_answer *a)
{
	buf_reset(&a->raw);
	int rc = 0;
	switch (a->part) {
	case PART_HEAD:
		rc = write_head(a);
		a->part = PART_ITEMS;
		break;
	case PART_ITEMS:
		rc = write_items(a);
		break;
	case PART_TAIL:
		rc = buf_append_str(&a->raw, "]}");
		a->part = PART_DONE;
		break;
	case PART_DONE:
		return 0;
	}
	if (rc < 0)
		return -1;
	if (!a->rw)
		return buf_append(&a->out, a->raw.data, a->raw.len);
	if (a->raw.len && rewrite_feed(a->rw, a->raw.data, a->raw.len) < 0)
		return -1;
	return a->part == PART_DONE ? rewrite_finish(a->rw) : 0;
}

static ssize_t list_read(void *cls, char *out, size_t max)
{
	struct list_answer *a = cls;
	while (a->off == a->out.len) {
		buf_reset(&a->out);
		a->off = 0;
		if (a->part == PART_DONE)
			return REPLY_END;
		if (produce(a) < 0)
			return REPLY_ABORT; /* cut: the client does not take it for complete */
	}
	return (ssize_t)mux_hand_out(&a->out, &a->off, out, max);
}

static void list_free(void *cls)
{
	struct list_answer *a = cls;
	mux_list_free(&a->list);
	rewrite_free(a->rw);
	buf_free(&a->raw);
	buf_free(&a->out);
	mux_request_free(a->req);
	free(a->req);
	free(a);
}

/* The resourceVersion a list asks for: 0 for "", "0" or unparsable (any
 * state will do). */
static uint64_t asked_rv(const struct request_info *ri)
{
	uint64_t rv = 0;
	const char *s = ri->resource_version;
	if (*s && kube_rv_parse(s, strlen(s), &rv) < 0)
		rv = 0;
	return rv;
}

int mux_answer_list(struct proxy *p, struct request *req, struct mux_request *r)
{
	struct list_answer *a = calloc(1, sizeof *a);
	if (!a) {
		mux_request_free(r);
		free(r);
		return -1;
	}
	a->req = r;
	a->raw = (struct buf)BUF_INIT;
	a->out = (struct buf)BUF_INIT;
	int rc = 0;
	if (mux_wait_ready(r->cache, req, asked_rv(&req->ri), &rc) < 0) {
		list_free(a);
		return rc;
	}
	/* the filters' inputs the answer is made with, noted before its
	 * snapshot: a watch from its rv then knows whether they changed since
	 * (multiplexer_watch.c) */
	if (r->filters)
		mux_cache_outside_version(r->cache, cluster_filter_gen(p->cluster));
	enum mux_status st = mux_cache_list(r->cache, &r->filter, &a->list);
	if (st != MUX_OK) {
		list_free(a);
		return st == MUX_NOMEM ? -1
				       : reply_status(req, 503, NULL, "the hub is stopping", NULL);
	}
	if (r->filters && !(a->rw = rewrite_new(REWRITE_LIST, false, r->filters, &r->target,
						cluster_env_ref(p->cluster), to_client, a))) {
		list_free(a);
		return -1;
	}
	struct reply *rep = reply_stream(REPLY_SIZE_UNKNOWN, LIST_CHUNK, list_read, a, list_free);
	if (rep)
		reply_header(rep, "Content-Type", "application/json");
	return reply_send(req, 200, rep);
}
