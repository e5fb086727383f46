/*
 * multiplexer_watch.c - a local watch of a pool-scope resource answered from
 * the multiplexer's shared cache (multiplexer.h): a watcher of the cache
 * (mux/sharedcache.h) from the client's resourceVersion, each delivery
 * written as a JSON watch event, through the client's own response filters
 * when it has any.
 *
 *   rv ""/"0"        the current objects as ADDED, then what follows
 *   rv X in window   every event after X
 *   rv X too old     one ERROR event, 410 Expired: the client relists
 *   rv X too new     waits up to 3 s for the cache, else 504
 *   allowWatchBookmarks  a BOOKMARK at the watcher's progress after 30 s
 *                        without a delivery, even when it has not moved
 *
 * A client with response filters gets each delivery through a follow
 * (filter/follow.h), which remembers what it was shown; when what the
 * filters read changes (cluster_filter_gen), the watch, once it has
 * delivered every event, filters the cache's objects again and sends what
 * changed for this client, at the cache's resourceVersion (docs/filters.md,
 * "Watches follow topology changes").
 *
 * The watch ends at timeoutSeconds (else a random time in [min, 2 min) of
 * --min-request-timeout, as offline watches), when the client leaves, when
 * the watcher falls out of the window (ERROR 410), and when the hub stops.
 * Unlike an offline watch it does not end when the cloud comes back: the
 * cache follows the cloud.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster/cluster.h"
#include "filter/follow.h"
#include "http/response.h"
#include "kube/meta.h"
#include "proxy/local_internal.h"
#include "proxy/multiplexer_internal.h"
#include "proxy/proxy.h"
#include "util/buf.h"
#include "util/clock.h"

#define WATCH_CHUNK (16u << 10)
#define BOOKMARK_MS 30000
#define WAIT_MS	    500 /* how often the deadline and the client are looked at */

struct watch_answer {
	struct proxy *p;
	struct mux_request *req;
	struct mux_watcher *w;
	int64_t deadline_ms;
	int client_fd;
	bool counted; /* in the open-watches gauge */
	bool done;
	bool bookmarks;		 /* allowWatchBookmarks */
	int64_t last_written_ms; /* of the last event or bookmark */
	struct buf out;		 /* what the client gets */
	size_t off;
	struct follow *fl;	  /* NULL: no filters for this client */
	unsigned long filter_gen; /* cluster_filter_gen() fl last filtered with */
	bool unknown;		  /* the client's objects were not shown through fl */
};

static const char *type_name(enum mux_event_type t)
{
	static const char *const names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK"};
	return names[t];
}

/* One event with an object of the cache, or the filters' version of it;
 * an object from a list lacks kind and apiVersion, which a watch event's
 * object carries (local_append_object adds them to the client's copy). */
static int write_object_event(struct watch_answer *a, enum mux_event_type type, const char *data,
			      size_t len)
{
	int rc = buf_printf(&a->out, "{\"type\":\"%s\",\"object\":", type_name(type));
	rc = rc ? rc : local_append_object(&a->out, data, len, &a->req->kind);
	return rc ? rc : buf_append_str(&a->out, "}\n");
}

static int follow_emit(void *ctx, enum watch_type type, const char *data, size_t len)
{
	enum mux_event_type t = type == WATCH_ADDED	 ? MUX_ADDED
				: type == WATCH_MODIFIED ? MUX_MODIFIED
							 : MUX_DELETED;
	return write_object_event(ctx, t, data, len);
}

/* What the filters take from a cache object; it names its kind or not. */
static struct stream_object meta_of(const struct mux_obj *o)
{
	return (struct stream_object){.data = o->data,
				      .len = o->len,
				      .name = o->name,
				      .namespace = o->namespace,
				      .resource_version = "",
				      .rv = o->rv,
				      .kind = ""};
}

static int write_bookmark(struct watch_answer *a, uint64_t rv)
{
	const struct local_kind *k = &a->req->kind;
	struct buf *o = &a->out;
	int rc = buf_append_str(o, "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":");
	rc = rc ? rc : local_json_string(o, k->kind ? k->kind : "");
	rc = rc ? rc : buf_append_str(o, ",\"apiVersion\":");
	rc = rc ? rc : local_json_string(o, k->api_version);
	return rc ? rc
		  : buf_printf(o, ",\"metadata\":{\"resourceVersion\":\"%llu\"}}}\n",
			       (unsigned long long)rv);
}

static int write_event(struct watch_answer *a, const struct mux_delivery *d)
{
	if (d->type == MUX_BOOKMARK)
		return write_bookmark(a, d->rv);
	if (!a->fl)
		return write_object_event(a, d->type, d->obj->data, d->obj->len);
	struct stream_object o = meta_of(d->obj);
	enum watch_type t = d->type == MUX_ADDED      ? WATCH_ADDED
			    : d->type == MUX_MODIFIED ? WATCH_MODIFIED
						      : WATCH_DELETED;
	return follow_event(a->fl, t, &o);
}

static int write_expired(struct watch_answer *a)
{
	return buf_append_str(&a->out,
			      "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":"
			      "\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":"
			      "\"too old resource version: the watcher fell behind the "
			      "multiplexer's history\",\"reason\":\"Expired\",\"code\":410}}\n");
}

/* Is the watch over for a reason of its own (the hub stops, its time is up,
 * the client left)? */
static bool over(struct watch_answer *a)
{
	return atomic_load(&a->p->stopping) || clock_now_ms() >= a->deadline_ms ||
	       local_client_left(a->client_fd);
}

/* Wait for the next delivery and write it for the client; a->done once the watch
 * is over.  0, or -1 (out of memory). */
static int next_event(struct watch_answer *a)
{
	struct mux_delivery d;
	enum mux_status st = mux_watcher_next(a->w, WAIT_MS, &d);
	switch (st) {
	case MUX_OK: {
		int rc = write_event(a, &d);
		mux_obj_unref(d.obj);
		a->last_written_ms = clock_now_ms();
		return rc;
	}
	case MUX_TIMEOUT:
		a->done = over(a);
		/* a heartbeat while nothing moves (the cloud out of reach): the
		 * client's silence detector, like kube-apiserver's bookmarks */
		if (!a->done && a->bookmarks &&
		    clock_now_ms() - a->last_written_ms >= BOOKMARK_MS) {
			a->last_written_ms = clock_now_ms();
			return write_bookmark(a, mux_watcher_progress(a->w));
		}
		return 0;
	case MUX_EXPIRED:
		a->done = true;
		return write_expired(a);
	case MUX_CLOSED:
		a->done = true;
		return 0;
	default:
		return -1;
	}
}

/* What the filters read changed since the client's objects were filtered:
 * once every event is delivered, filter the cache's objects again and write
 * what changed for this client.  0 (also when events wait: the next call
 * tries again), or -1 (out of memory). */
static int refilter(struct watch_answer *a)
{
	unsigned long gen = cluster_filter_gen(a->p->cluster);
	if (gen == a->filter_gen && !a->unknown)
		return 0;
	mux_cache_outside_version(a->req->cache, gen);
	struct mux_list l;
	if (mux_watcher_snapshot(a->w, &l) != MUX_OK)
		return 0; /* events first; a closed or expired watcher says so next */
	struct stream_object *objs = calloc(l.n ? l.n : 1, sizeof *objs);
	int rc = objs ? 0 : -1;
	for (size_t i = 0; objs && i < l.n; i++)
		objs[i] = meta_of(l.objs[i]);
	size_t before = a->out.len;
	rc = rc ? rc : follow_refilter(a->fl, objs, l.n, l.rv, a->unknown);
	free(objs);
	mux_list_free(&l);
	if (rc == 0) {
		a->filter_gen = gen;
		a->unknown = false;
		if (a->out.len > before)
			a->last_written_ms = clock_now_ms();
	}
	return rc;
}

static int produce(struct watch_answer *a)
{
	if (a->fl && refilter(a) < 0)
		return -1;
	return a->out.len ? 0 : next_event(a);
}

static ssize_t watch_read(void *cls, char *out, size_t max)
{
	struct watch_answer *a = cls;
	while (a->off == a->out.len) {
		buf_reset(&a->out);
		a->off = 0;
		if (a->done)
			return REPLY_END; /* between events: clients re-watch */
		if (produce(a) < 0)
			return REPLY_ABORT;
	}
	return (ssize_t)mux_hand_out(&a->out, &a->off, out, max);
}

static void watch_free(void *cls)
{
	struct watch_answer *a = cls;
	if (a->counted)
		atomic_fetch_sub(&a->p->metrics->open_watches, 1);
	mux_watcher_free(a->w);
	follow_free(a->fl);
	buf_free(&a->out);
	mux_request_free(a->req);
	free(a->req);
	free(a);
}

/* The resourceVersion the watch starts from: 0 for ""/"0" (the current
 * objects first); -1 when it is not a resourceVersion. */
static int start_rv(const struct request_info *ri, uint64_t *rv)
{
	*rv = 0;
	const char *s = ri->resource_version;
	if (!*s || !strcmp(s, "0"))
		return 0;
	return kube_rv_parse(s, strlen(s), rv);
}

/* Register the watcher; 0, or -1 with req answered (*rc). */
static int start_watcher(struct watch_answer *a, struct request *req, uint64_t from, int *rc)
{
	struct mux_watch_options o = {
	    .from_rv = from,
	    .filter = &a->req->filter,
	    .bookmark_interval_ms = req->ri.allow_watch_bookmarks ? BOOKMARK_MS : 0,
	};
	enum mux_status st = mux_watch(a->req->cache, &o, &a->w);
	if (st == MUX_OK)
		return 0;
	if (st == MUX_EXPIRED)
		*rc = local_too_old(req, from, mux_cache_rv(a->req->cache));
	else if (st == MUX_NOMEM)
		*rc = -1;
	else /* too new after the wait, not ready, closed */
		*rc = reply_status(req, 503, NULL, mux_status_name(st), NULL);
	return -1;
}

int mux_answer_watch(struct proxy *p, struct request *req, struct mux_request *r)
{
	struct watch_answer *a = calloc(1, sizeof *a);
	if (!a) {
		mux_request_free(r);
		free(r);
		return -1;
	}
	a->p = p;
	a->req = r;
	a->client_fd = request_client_fd(req);
	a->bookmarks = req->ri.allow_watch_bookmarks;
	a->last_written_ms = clock_now_ms();
	a->deadline_ms =
	    clock_now_ms() + 1000 * (int64_t)local_watch_seconds(&req->ri, p->min_request_timeout);
	uint64_t from;
	int rc = 0;
	if (start_rv(&req->ri, &from) < 0) {
		watch_free(a);
		return local_status(req, 400, "resourceVersion: not a resource version");
	}
	/* before the watcher starts: a change from then on is followed.  A
	 * client resuming from an rv the inputs may have changed after (noted
	 * by the cache; the rv does not tell what it was shown there) gets
	 * every object again once it is caught up. */
	a->filter_gen = cluster_filter_gen(p->cluster);
	a->unknown =
	    r->filters && from && from <= mux_cache_outside_version(r->cache, a->filter_gen);
	if (mux_wait_ready(r->cache, req, from, &rc) < 0 || start_watcher(a, req, from, &rc) < 0) {
		watch_free(a);
		return rc;
	}
	if (r->filters && !(a->fl = follow_new(r->filters, &r->target, cluster_env_ref(p->cluster),
					       follow_emit, a))) {
		watch_free(a);
		return -1;
	}
	a->counted = !req->hub_own;
	if (a->counted)
		atomic_fetch_add(&p->metrics->open_watches, 1);
	struct reply *rep =
	    reply_stream(REPLY_SIZE_UNKNOWN, WATCH_CHUNK, watch_read, a, watch_free);
	if (rep)
		reply_header(rep, "Content-Type", "application/json");
	return reply_send(req, 200, rep);
}
