/*
 * local_list.c - offline lists and watches, streamed from the store a page
 * at a time (never the whole collection in memory), see local.h.
 *
 * A list is answered from a view that covers it: the request's own
 * component first, then any other; a view of the same or a wider namespace,
 * with the same selectors, or none.  The request's selectors are evaluated
 * on each cached object.  The list's metadata (resourceVersion, continue)
 * is written after the items, once known: JSON has no order.  The store
 * holds the cloud's objects: what is produced goes through the requesting
 * component's response filters (gen_filter) on its way to the client.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "cache/local_changes.h"
#include "cache/manager.h"
#include "http/response.h"
#include "kube/fieldlabels.h"
#include "kube/meta.h"
#include "kube/selectable.h"
#include "kube/selector.h"
#include "proxy/local.h"
#include "proxy/local_internal.h"
#include "proxy/proxy.h"
#include "util/base64.h"
#include "util/log.h"

#define CHUNK (64u << 10)
/* A watch's pieces are smaller: a hundred watches that stay open for an
 * hour should not each keep a list's buffers (see release_initial). */
#define WATCH_CHUNK	 (16u << 10)
#define BOOKMARK_SECONDS 30
#define POLL_MS		 500

/* ---- finding the view ---- */

struct view_pick {
	const char *ns, *ls, *fs; /* the request, canonical */
	int best;
	char *component;
	uint64_t rv;
	const char *current_component;
};

static int consider_view(void *ctx, const struct store_view_state *v)
{
	struct view_pick *p = ctx;
	bool ns_ok = !*v->namespace || !strcmp(v->namespace, p->ns);
	bool same_sel = !strcmp(v->label_selector, p->ls) && !strcmp(v->field_selector, p->fs);
	bool unfiltered = !*v->label_selector && !*v->field_selector;
	if (!ns_ok || (!same_sel && !unfiltered))
		return 0;
	/* the closest view is the freshest answer's source: exact namespace,
	 * same selectors */
	int score = 1 + (same_sel ? 2 : 0) + (!strcmp(v->namespace, p->ns) ? 1 : 0);
	if (score > p->best) {
		char *c = strdup(p->current_component);
		if (c) {
			free(p->component);
			p->component = c;
			p->best = score;
			p->rv = v->rv;
		}
	}
	return 0;
}

/* The component whose view covers req (malloc'ed) and the view's rv, or
 * NULL when nobody's does - or when the store could not be read and no
 * view was found: *down then says why (else STORE_OK). */
static char *covering_view(struct proxy *p, struct request *req, const char *ls, const char *fs,
			   uint64_t *rv, enum store_err *down)
{
	struct component_list comps;
	*rv = 0;
	*down = local_components_read(p, req->component, &comps);
	if (*down != STORE_OK) {
		if (!local_store_down(*down))
			*down = STORE_OK;
		return NULL;
	}
	struct view_pick pick = {req->ri.namespace, ls, fs, 0, NULL, 0, NULL};
	struct store_gvr gvr = {req->ri.api_group, req->ri.api_version, req->ri.resource};
	/* an unreachable etcd would make each component wait its timeout */
	for (size_t i = 0; i < comps.n && !pick.component && *down != STORE_UNAVAILABLE; i++) {
		pick.current_component = comps.v[i];
		enum store_err e =
		    store_list_views(p->store, comps.v[i], &gvr, consider_view, &pick);
		if (local_store_down(e))
			*down = e;
	}
	local_components_free(&comps);
	if (pick.component)
		*down = STORE_OK;
	*rv = pick.rv;
	return pick.component;
}

/* ---- what lists and watches share ---- */

struct gen {
	struct proxy *p;
	struct store_iter *it;
	struct selector *ls, *fs;
	struct local_kind kind;
	uint64_t view_rv, max_rv;
	struct buf out, data;
	size_t off;
	bool filtered;
	/* the selectors can be checked on an object's selectable document
	 * (kube/selectable.h), much cheaper than parsing all of it */
	bool doc_answers;
	char *group, *resource;
	struct buf doc;
	/* the component's response filters: out is then what the store
	 * says, fed through rw into to_client, which the client gets */
	struct rewrite *rw;
	struct buf to_client;
};

static void gen_free(struct gen *g)
{
	store_iter_free(g->it);
	selector_free(g->ls);
	selector_free(g->fs);
	local_kind_free(&g->kind);
	buf_free(&g->out);
	buf_free(&g->data);
	buf_free(&g->doc);
	free(g->group);
	free(g->resource);
	if (g->p)
		local_rewrite_free(g->p, g->rw);
	buf_free(&g->to_client);
}

static int append_to_client(void *ctx, const char *data, size_t len)
{
	struct gen *g = ctx;
	return buf_append(&g->to_client, data, len);
}

/* The filters for req's component, when it has any. */
static int gen_filters(struct gen *g, const struct request *req, enum rewrite_shape shape)
{
	return local_rewrite_new(g->p, req, shape, append_to_client, g, &g->rw);
}

/* What was produced goes through the filters (end: the answer is over). */
static int gen_filter(struct gen *g, bool end)
{
	if (!g->rw)
		return 0;
	int rc = g->out.len ? rewrite_feed(g->rw, g->out.data, g->out.len) : 0;
	buf_reset(&g->out);
	if (rc == 0 && end)
		rc = rewrite_finish(g->rw);
	if (rc < 0)
		log_warn("offline: %s: the answer cannot be filtered: %s", g->resource,
			 rewrite_error(g->rw));
	return rc;
}

/* Parse the request's selectors; 0, or -1 with *why set. */
static int gen_selectors(struct gen *g, const struct request_info *ri, char **why)
{
	if (selector_parse(SELECTOR_LABEL, ri->label_selector, &g->ls, why) < 0 ||
	    selector_parse(SELECTOR_FIELD, ri->field_selector, &g->fs, why) < 0)
		return -1;
	g->filtered = !selector_is_empty(g->ls) || !selector_is_empty(g->fs);
	g->group = strdup(ri->api_group);
	g->resource = strdup(ri->resource);
	if (!g->group || !g->resource) {
		*why = NULL;
		return -1;
	}
	g->doc_answers = selectable_answers(g->group, g->resource, g->fs);
	return 0;
}

/* Start iterating the component's objects of the request's collection. */
static enum store_err gen_iter(struct gen *g, const char *component, const struct request_info *ri,
			       const char *start_after)
{
	struct store_key_info info = {component,    ri->api_group, ri->api_version,
				      ri->resource, ri->namespace, ""};
	struct store_key root;
	enum store_err e = store_key_build(g->p->store, &info, &root);
	if (e != STORE_OK)
		return e;
	/* Only objects that may match are read - unless the list's rv is
	 * its newest object's (a view the Go YurtHub wrote), which takes
	 * every object. */
	struct store_match m = {g->ls, g->fs};
	e = store_iter_begin_matching(g->p->store, &root, start_after, g->view_rv ? &m : NULL,
				      &g->it);
	store_key_free(&root);
	return e;
}

/* The next cached object that matches the request: 1 (in g->data, key in
 * *key), 0 at the end, -1 on error. */
static int gen_next(struct gen *g, const struct store_key **key)
{
	if (!g->it)
		return 0;
	for (;;) {
		enum store_err e = store_iter_next(g->it, key, &g->data);
		if (e == STORE_NOT_FOUND)
			return 0;
		if (e != STORE_OK)
			return -1;
		if (!g->view_rv) {
			/* a view with no rv (written by the Go YurtHub): the
			 * list's rv is its newest object's, as YurtHub answers */
			uint64_t rv = 0;
			kube_meta_rv(g->data.data, g->data.len, &rv);
			if (rv > g->max_rv)
				g->max_rv = rv;
		}
		if (!g->filtered)
			return 1;
		if (!selector_may_match(g->ls, g->data.data, g->data.len) ||
		    !selector_may_match(g->fs, g->data.data, g->data.len))
			continue;
		if (g->doc_answers) {
			buf_reset(&g->doc);
			if (selectable_pick(g->group, g->resource, g->data.data, g->data.len,
					    &g->doc) == 0) {
				if (selector_match_json(g->ls, g->fs, g->doc.data, g->doc.len) == 1)
					return 1;
				continue;
			}
		}
		if (selector_match_json(g->ls, g->fs, g->data.data, g->data.len) == 1)
			return 1;
	}
}

static uint64_t gen_rv(const struct gen *g)
{
	return g->view_rv ? g->view_rv : g->max_rv;
}

/* Hand over produced bytes (filtered, when the component has filters); 0
 * when there are none. */
static ssize_t gen_take(struct gen *g, char *out, size_t max)
{
	struct buf *from = g->rw ? &g->to_client : &g->out;
	size_t n = from->len - g->off;
	if (!n)
		return 0;
	if (n > max)
		n = max;
	memcpy(out, from->data + g->off, n);
	g->off += n;
	if (g->off == from->len) {
		buf_reset(from);
		g->off = 0;
	}
	return (ssize_t)n;
}

int local_each_object(struct proxy *p, const char *component, const struct request_info *ri,
		      local_object_fn fn, void *ctx)
{
	struct gen g = {.p = p, .view_rv = 1}; /* an rv: only what may match is read */
	char *why = NULL;
	int rc = gen_selectors(&g, ri, &why) < 0 ? -1 : 0;
	free(why);
	enum store_err e = rc ? STORE_OK : gen_iter(&g, component, ri, NULL);
	if (e != STORE_OK && e != STORE_NOT_FOUND)
		rc = -1;
	const struct store_key *k;
	int r;
	while (!rc && (r = gen_next(&g, &k)) != 0) {
		if (r < 0) {
			rc = -1;
			break;
		}
		struct stream_object o = {.data = g.data.data,
					  .len = g.data.len,
					  .name = k->name ? k->name : "",
					  .namespace = k->namespace ? k->namespace : "",
					  .resource_version = "",
					  .kind = ""};
		kube_meta_rv(g.data.data, g.data.len, &o.rv);
		rc = fn(ctx, &o) ? -1 : 0;
	}
	gen_free(&g);
	return rc;
}

/* ---- lists ---- */

enum list_state { LIST_HEAD, LIST_ITEMS, LIST_TAIL, LIST_DONE };

struct list_gen {
	struct gen g;
	enum list_state state;
	long limit, count;
	bool more;
	char *last; /* "ns/name" of the last item sent */
};

int local_list_head(struct buf *out, const char *kind, const char *api_version)
{
	struct buf list_kind = BUF_INIT;
	int rc = buf_printf(&list_kind, "%sList", kind);
	rc = rc ? rc : buf_append_str(out, "{\"kind\":");
	rc = rc ? rc : local_json_string(out, buf_cstr(&list_kind));
	rc = rc ? rc : buf_append_str(out, ",\"apiVersion\":");
	rc = rc ? rc : local_json_string(out, api_version);
	rc = rc ? rc : buf_append_str(out, ",\"items\":[");
	buf_free(&list_kind);
	return rc;
}

int local_continue_token(struct buf *out, uint64_t rv, const char *start)
{
	struct buf raw = BUF_INIT;
	int rc = buf_printf(&raw, "%llu\n%s", (unsigned long long)rv, start);
	rc = rc ? rc : base64_encode(raw.data, raw.len, out);
	buf_free(&raw);
	return rc;
}

/* "rv\nns/name" in base64; 0 with *start malloc'ed, or -1. */
int local_parse_continue(const char *token, uint64_t *rv, char **start)
{
	struct buf raw = BUF_INIT;
	*start = NULL;
	if (base64_decode(token, strlen(token), &raw) < 0 || !raw.data) {
		buf_free(&raw);
		return -1;
	}
	char *nl = memchr(raw.data, '\n', raw.len);
	int rc = -1;
	if (nl && !memchr(raw.data, '\0', raw.len) &&
	    kube_rv_parse(raw.data, (size_t)(nl - raw.data), rv) == 0) {
		*start = strdup(nl + 1);
		rc = *start ? 0 : -1;
	}
	buf_free(&raw);
	return rc;
}

static int list_items(struct list_gen *l)
{
	const struct store_key *k;
	while (l->g.out.len < CHUNK) {
		int r = gen_next(&l->g, &k);
		if (r < 0)
			return -1;
		if (r == 0) {
			l->state = LIST_TAIL;
			return 0;
		}
		if (l->limit > 0 && l->count == l->limit) {
			l->more = true; /* k8s may give a continue whose next page is empty */
			l->state = LIST_TAIL;
			return 0;
		}
		if (buf_append_str(&l->g.out, l->count ? "," : "") < 0 ||
		    buf_append(&l->g.out, l->g.data.data, l->g.data.len) < 0)
			return -1;
		l->count++;
		free(l->last);
		struct buf last = BUF_INIT;
		if (*k->namespace)
			buf_printf(&last, "%s/%s", k->namespace, k->name);
		else
			buf_append_str(&last, k->name);
		l->last = buf_steal(&last);
	}
	return 0;
}

static int list_produce(struct list_gen *l)
{
	struct buf *o = &l->g.out;
	switch (l->state) {
	case LIST_HEAD:
		l->state = LIST_ITEMS;
		return local_list_head(o, l->g.kind.kind ? l->g.kind.kind : "",
				       l->g.kind.api_version);
	case LIST_ITEMS:
		return list_items(l);
	case LIST_TAIL: {
		l->state = LIST_DONE;
		int rc = buf_printf(o, "],\"metadata\":{\"resourceVersion\":\"%llu\"",
				    (unsigned long long)gen_rv(&l->g));
		if (rc == 0 && l->more && l->last) {
			rc = buf_append_str(o, ",\"continue\":\"");
			rc = rc ? rc : local_continue_token(o, gen_rv(&l->g), l->last);
			rc = rc ? rc : buf_append_str(o, "\"");
		}
		return rc ? rc : buf_append_str(o, "}}\n");
	}
	default:
		return 0;
	}
}

static ssize_t list_read(void *cls, char *out, size_t max)
{
	struct list_gen *l = cls;
	for (;;) {
		ssize_t n = gen_take(&l->g, out, max);
		if (n > 0)
			return n;
		if (l->state == LIST_DONE)
			return REPLY_END;
		if (list_produce(l) < 0 || gen_filter(&l->g, l->state == LIST_DONE) < 0)
			return REPLY_ABORT;
	}
}

static void list_free(void *cls)
{
	struct list_gen *l = cls;
	gen_free(&l->g);
	free(l->last);
	free(l);
}

static int bad_selector(struct request *req, char *why)
{
	int r = local_status(req, 400, why ? why : "invalid selector");
	free(why);
	return r;
}

static int never_listed(struct request *req)
{
	/* Not an empty list: "empty" would tell a kubelet that its pods are
	 * gone.  NotFound makes the client retry until the cloud is back. */
	struct buf msg = BUF_INIT;
	buf_printf(&msg, "%s: this list was never cached, and the cloud is unreachable",
		   req->ri.resource);
	int r = local_status(req, 404, buf_cstr(&msg));
	buf_free(&msg);
	return r;
}

/* The fields of the request's field selector are ones the API server lets
 * clients select on for this resource (online it refuses the others). */
static int check_field_labels(const struct request_info *ri, char **why)
{
	struct selector *fields;
	if (selector_parse(SELECTOR_FIELD, ri->field_selector, &fields, why) < 0)
		return -1;
	int rc = field_labels_check(ri->api_group, ri->resource, fields, why);
	selector_free(fields);
	return rc;
}

/* Canonical selectors of the request; 0 or -1 with *why: the API server's
 * answer to a selector that does not parse, or to a field it does not
 * select on (label selector first, then the field selector, then its
 * fields, in the API server's order). */
static int canonical_selectors(const struct request_info *ri, char **ls, char **fs, char **why)
{
	*ls = *fs = NULL;
	if (selector_canonicalize(SELECTOR_LABEL, ri->label_selector, ls, why) < 0 ||
	    selector_canonicalize(SELECTOR_FIELD, ri->field_selector, fs, why) < 0 ||
	    check_field_labels(ri, why) < 0) {
		free(*ls);
		free(*fs);
		*ls = *fs = NULL;
		return -1;
	}
	return 0;
}

int local_list(struct proxy *p, struct request *req)
{
	const struct request_info *ri = &req->ri;
	char *ls = NULL, *fs = NULL, *why = NULL, *start = NULL;
	if (canonical_selectors(ri, &ls, &fs, &why) < 0)
		return bad_selector(req, why);
	uint64_t view_rv = 0, token_rv = 0;
	enum store_err down;
	char *component = covering_view(p, req, ls, fs, &view_rv, &down);
	free(ls);
	free(fs);
	if (!component)
		return down != STORE_OK ? local_store_unavailable(req, down) : never_listed(req);
	if (*ri->continue_token &&
	    local_parse_continue(ri->continue_token, &token_rv, &start) < 0) {
		free(component);
		return local_status(req, 400, "invalid continue token");
	}
	struct list_gen *l = calloc(1, sizeof *l);
	if (!l) {
		free(component);
		free(start);
		return -1;
	}
	l->g.p = p;
	l->g.view_rv = token_rv ? token_rv : view_rv;
	/* items changed offline carry local rvs: the list's is not older */
	struct store_gvr gvr = {ri->api_group, ri->api_version, ri->resource};
	uint64_t local_rv = local_changes_last_rv(p->changes, &gvr);
	if (!token_rv && local_rv > l->g.view_rv)
		l->g.view_rv = local_rv;
	l->limit = ri->limit;
	local_kind_of(p, req, &l->g.kind);
	enum store_err e = STORE_OK;
	if (gen_selectors(&l->g, ri, &why) < 0) {
		free(component);
		free(start);
		list_free(l);
		return bad_selector(req, why);
	}
	if (gen_filters(&l->g, req, REWRITE_LIST) < 0) {
		free(component);
		free(start);
		list_free(l);
		return -1;
	}
	e = gen_iter(&l->g, component, ri, start);
	free(component);
	free(start);
	if (e != STORE_OK && e != STORE_NOT_FOUND) {
		list_free(l);
		return local_store_down(e) ? local_store_unavailable(req, e)
					   : local_status(req, 500, store_strerror(e));
	}
	/* a view whose objects are all gone (listed empty): an empty list */
	struct reply *r = reply_stream(REPLY_SIZE_UNKNOWN, CHUNK, list_read, l, list_free);
	if (r)
		reply_header(r, "Content-Type", "application/json");
	local_stale_warning(p, req, r);
	return reply_send(req, 200, r);
}

/* ---- watches ---- */

enum watch_state { WATCH_INITIAL, WATCH_INITIAL_END, WATCH_IDLE, WATCH_DONE };

struct watch_gen {
	struct gen g;
	enum watch_state state;
	bool initial_end, bookmarks;
	bool counted; /* in the open-watches gauge (not the hub's own) */
	struct timespec deadline, next_bookmark;
	int client_fd;
	/* the local changes sent so far (cache/local_changes.h) */
	char *group, *version, *resource, *namespace;
	uint64_t local_after;
	int waited_polls; /* for a journaled change whose write has not landed */
};

static void in_seconds(struct timespec *t, long s)
{
	clock_gettime(CLOCK_MONOTONIC, t);
	t->tv_sec += s;
}

static bool reached(const struct timespec *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

static int bookmark(struct watch_gen *w, bool initial_end)
{
	struct buf *o = &w->g.out;
	int rc = buf_append_str(o, "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":");
	const char *kind = w->g.kind.kind ? w->g.kind.kind : "";
	rc = rc ? rc : local_json_string(o, kind);
	rc = rc ? rc : buf_append_str(o, ",\"apiVersion\":");
	rc = rc ? rc : local_json_string(o, w->g.kind.api_version);
	rc = rc ? rc
		: buf_printf(o, ",\"metadata\":{\"resourceVersion\":\"%llu\"%s}}}\n",
			     (unsigned long long)gen_rv(&w->g),
			     initial_end
				 ? ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}"
				 : "");
	in_seconds(&w->next_bookmark, BOOKMARK_SECONDS);
	return rc;
}

/* The initial events are sent: what they needed (the store's iterator, the
 * object buffer) goes now, not when the watch ends an hour later. */
static void release_initial(struct watch_gen *w)
{
	store_iter_free(w->g.it);
	w->g.it = NULL;
	buf_free(&w->g.data);
}

static int initial_events(struct watch_gen *w)
{
	const struct store_key *k;
	while (w->g.out.len < WATCH_CHUNK) {
		int r = gen_next(&w->g, &k);
		if (r < 0)
			return -1;
		if (r == 0) {
			release_initial(w);
			w->state = WATCH_INITIAL_END;
			return 0;
		}
		if (buf_append_str(&w->g.out, "{\"type\":\"ADDED\",\"object\":") < 0 ||
		    local_append_object(&w->g.out, w->g.data.data, w->g.data.len, &w->g.kind) < 0 ||
		    buf_append_str(&w->g.out, "}\n") < 0)
			return -1;
	}
	return 0;
}

bool local_client_left(int fd)
{
	if (fd < 0)
		return false;
	struct pollfd p = {fd, POLLIN | POLLRDHUP, 0};
	if (poll(&p, 1, 0) <= 0)
		return false;
	char ch;
	ssize_t n = recv(fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* How many polls (of POLL_MS) a watch waits for a journaled change to be
 * in the store: the journal is written first.  A change that never lands
 * (a crash in between) is passed over after that. */
#define LANDING_POLLS 10

/* One local change as a MODIFIED event, when the watch's selectors match
 * the object as it is now.  0, 1 when the change is not in the store yet
 * (ask again at the next poll), or -1. */
static int local_event(struct watch_gen *w, const struct local_change *c)
{
	struct store_key_info info = {c->component, c->group,	  c->version,
				      c->resource,  c->namespace, c->name};
	struct store_key k;
	if (store_key_build(w->g.p->store, &info, &k) != STORE_OK)
		return 0;
	buf_reset(&w->g.data);
	enum store_err e = store_get(w->g.p->store, &k, &w->g.data);
	store_key_free(&k);
	uint64_t rv = 0;
	if (e == STORE_OK && kube_meta_rv(w->g.data.data, w->g.data.len, &rv) == 0 && rv < c->rv &&
	    ++w->waited_polls < LANDING_POLLS)
		return 1;
	w->waited_polls = 0;
	/* replaced since (by the cloud's copy, or a later change): not this */
	if (e != STORE_OK || rv != c->rv)
		return 0;
	if (w->g.filtered &&
	    selector_match_json(w->g.ls, w->g.fs, w->g.data.data, w->g.data.len) != 1)
		return 0;
	if (rv > w->g.view_rv)
		w->g.view_rv = rv; /* bookmarks go on from here */
	int rc = buf_append_str(&w->g.out, "{\"type\":\"MODIFIED\",\"object\":");
	rc = rc ? rc : local_append_object(&w->g.out, w->g.data.data, w->g.data.len, &w->g.kind);
	return rc ? rc : buf_append_str(&w->g.out, "}\n");
}

/* The local changes newer than the last sent, as events: 1 when some were
 * written, 0 when none, -1 on error. */
static int local_events(struct watch_gen *w)
{
	struct store_gvr gvr = {w->group, w->version, w->resource};
	struct local_change *v;
	if (local_changes_last_rv(w->g.p->changes, &gvr) <= w->local_after)
		return 0;
	long n = local_changes_since(w->g.p->changes, &gvr, w->namespace, w->local_after, &v);
	if (n < 0)
		return -1;
	int rc = 0;
	for (long i = 0; i < n && rc == 0; i++) {
		rc = local_event(w, &v[i]);
		if (rc == 0)
			w->local_after = v[i].rv;
	}
	local_changes_list_free(v, n);
	buf_free(&w->g.data);
	return rc < 0 ? -1 : w->g.out.len > 0; /* rc 1: the rest at the next poll */
}

/* Wait for the next thing to say; WATCH_DONE when the watch is over. */
static int idle(struct watch_gen *w)
{
	struct proxy *px = w->g.p;
	for (;;) {
		if (atomic_load(&px->stopping) || upstream_any_healthy(px->up) ||
		    reached(&w->deadline)) {
			/* the cloud is back: clients must re-list from it */
			w->state = WATCH_DONE;
			return 0;
		}
		int changed = local_events(w);
		if (changed)
			return changed < 0 ? -1 : 0;
		if (w->bookmarks && reached(&w->next_bookmark))
			return bookmark(w, false);
		struct pollfd p = {w->client_fd, POLLIN | POLLRDHUP, 0};
		int n = poll(&p, w->client_fd >= 0 ? 1 : 0, POLL_MS);
		if (n > 0 && local_client_left(w->client_fd)) {
			w->state = WATCH_DONE;
			return 0;
		}
		if (n > 0)
			w->client_fd = -1; /* bytes to read (TLS, pipelining): stop looking */
	}
}

static int watch_produce(struct watch_gen *w)
{
	switch (w->state) {
	case WATCH_INITIAL:
		return initial_events(w);
	case WATCH_INITIAL_END:
		w->state = WATCH_IDLE;
		if (w->initial_end || w->bookmarks)
			return bookmark(w, w->initial_end);
		return 0;
	case WATCH_IDLE:
		if (!w->g.out.len && w->g.out.cap > WATCH_CHUNK / 4)
			buf_free(&w->g.out); /* the initial events' buffer, drained */
		if (!w->g.to_client.len && w->g.to_client.cap > WATCH_CHUNK / 4)
			buf_free(&w->g.to_client);
		return idle(w);
	default:
		return 0;
	}
}

static ssize_t watch_read(void *cls, char *out, size_t max)
{
	struct watch_gen *w = cls;
	for (;;) {
		ssize_t n = gen_take(&w->g, out, max);
		if (n > 0)
			return n;
		if (w->state == WATCH_DONE)
			return REPLY_END;
		if (watch_produce(w) < 0 || gen_filter(&w->g, false) < 0)
			return REPLY_ABORT;
	}
}

static void watch_free(void *cls)
{
	struct watch_gen *w = cls;
	if (w->counted)
		atomic_fetch_sub(&w->g.p->metrics->open_watches, 1);
	gen_free(&w->g);
	free(w->group);
	free(w->version);
	free(w->resource);
	free(w->namespace);
	free(w);
}

bool local_wants_initial_events(const struct request_info *ri)
{
	if (ri->send_initial_events_set)
		return ri->send_initial_events;
	return !*ri->resource_version || !strcmp(ri->resource_version, "0");
}

long local_watch_seconds(const struct request_info *ri, int min_timeout)
{
	if (ri->timeout_seconds > 0)
		return ri->timeout_seconds;
	/* as kube-apiserver: a random time in [min, 2 min), so that clients do
	 * not all come back at once */
	static _Thread_local unsigned int seed;
	if (!seed)
		seed = (unsigned int)time(NULL) ^ (unsigned int)(uintptr_t)&seed;
	long span = min_timeout > 0 ? min_timeout : 1;
	return min_timeout + (long)(rand_r(&seed) % span);
}

/* A stream of what g->out holds, then its end. */
static ssize_t one_read(void *cls, char *out, size_t max)
{
	ssize_t n = gen_take(cls, out, max);
	return n > 0 ? n : REPLY_END;
}

static void one_free(void *cls)
{
	gen_free(cls);
	free(cls);
}

/* A watch from a resourceVersion older than the view's asks for changes the
 * hub never kept: as kube-apiserver when its history does not reach that
 * far, one ERROR event with a 410 Expired Status, and the watch ends; the
 * client lists again (from the cache) and watches from there. */
int local_too_old(struct request *req, uint64_t from, uint64_t view_rv)
{
	struct buf msg = BUF_INIT, ev = BUF_INIT;
	int rc = buf_printf(&msg, "too old resource version: %llu (%llu)", (unsigned long long)from,
			    (unsigned long long)view_rv);
	rc = rc ? rc
		: buf_append_str(&ev, "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\","
				      "\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
				      "\"Failure\",\"message\":");
	rc = rc ? rc : buf_append_json_str(&ev, msg.data, msg.len);
	rc = rc ? rc : buf_append_str(&ev, ",\"reason\":\"Expired\",\"code\":410}}\n");
	buf_free(&msg);
	struct gen *g = rc < 0 ? NULL : calloc(1, sizeof *g);
	if (!g) {
		buf_free(&ev);
		return -1;
	}
	g->out = ev; /* chunked, as the API server streams a watch */
	struct reply *r = reply_stream(REPLY_SIZE_UNKNOWN, CHUNK, one_read, g, one_free);
	if (r)
		reply_header(r, "Content-Type", "application/json");
	return reply_send(req, 200, r);
}

/* The watch's resourceVersion when it is older than the view's, or 0. */
static uint64_t older_than_view(const struct request_info *ri, uint64_t view_rv)
{
	uint64_t from = 0;
	const char *rv = ri->resource_version;
	if (!view_rv || !rv || !*rv || kube_rv_parse(rv, strlen(rv), &from) < 0)
		return 0;
	return from < view_rv ? from : 0;
}

int local_watch(struct proxy *p, struct request *req)
{
	const struct request_info *ri = &req->ri;
	char *ls = NULL, *fs = NULL, *why = NULL;
	if (canonical_selectors(ri, &ls, &fs, &why) < 0)
		return bad_selector(req, why);
	uint64_t view_rv = 0;
	enum store_err down;
	char *component = covering_view(p, req, ls, fs, &view_rv, &down);
	free(ls);
	free(fs);
	bool initial = local_wants_initial_events(ri);
	/* A store that cannot be read cannot follow the view either. */
	if (!component && down != STORE_OK)
		return local_store_unavailable(req, down);
	/* Initial events from a view never listed would say "there is nothing":
	 * refuse instead.  A watch from a known rv needs no cached view. */
	if (initial && !component)
		return never_listed(req);
	uint64_t from = initial || !component ? 0 : older_than_view(ri, view_rv);
	if (from) {
		free(component);
		return local_too_old(req, from, view_rv);
	}
	struct watch_gen *w = calloc(1, sizeof *w);
	if (!w) {
		free(component);
		return -1;
	}
	w->counted = !req->hub_own; /* the gauge is the clients' */
	if (w->counted)
		atomic_fetch_add(&p->metrics->open_watches, 1);
	w->g.p = p;
	/* no view to say where it is: the client's own resourceVersion, so that
	 * a bookmark never sends it back */
	if (!view_rv && *ri->resource_version &&
	    kube_rv_parse(ri->resource_version, strlen(ri->resource_version), &view_rv) < 0)
		view_rv = 0;
	w->g.view_rv = view_rv;
	/* the local changes it has not seen: those after its rv, or after what
	 * the initial events (read from the store from now on) show */
	struct store_gvr gvr = {ri->api_group, ri->api_version, ri->resource};
	uint64_t from_rv = 0;
	if (initial)
		w->local_after = local_changes_last_rv(p->changes, &gvr);
	else if (kube_rv_parse(ri->resource_version, strlen(ri->resource_version), &from_rv) == 0)
		w->local_after = from_rv;
	if (w->local_after > w->g.view_rv)
		w->g.view_rv = w->local_after;
	w->group = strdup(ri->api_group);
	w->version = strdup(ri->api_version);
	w->resource = strdup(ri->resource);
	w->namespace = strdup(ri->namespace);
	if (!w->group || !w->version || !w->resource || !w->namespace) {
		free(component);
		watch_free(w);
		return -1;
	}
	w->initial_end = ri->send_initial_events_set && ri->send_initial_events;
	w->bookmarks = ri->allow_watch_bookmarks;
	w->state = initial ? WATCH_INITIAL : WATCH_INITIAL_END;
	w->client_fd = request_client_fd(req);
	in_seconds(&w->deadline, local_watch_seconds(ri, p->min_request_timeout));
	local_kind_of(p, req, &w->g.kind);
	enum store_err e = STORE_OK;
	if (gen_selectors(&w->g, ri, &why) < 0) {
		free(component);
		watch_free(w);
		return bad_selector(req, why);
	}
	if (gen_filters(&w->g, req, REWRITE_WATCH) < 0) {
		free(component);
		watch_free(w);
		return -1;
	}
	if (initial)
		e = gen_iter(&w->g, component, ri, NULL);
	free(component);
	if (e != STORE_OK && e != STORE_NOT_FOUND) {
		watch_free(w);
		return local_store_down(e) ? local_store_unavailable(req, e)
					   : local_status(req, 500, store_strerror(e));
	}
	struct reply *r = reply_stream(REPLY_SIZE_UNKNOWN, WATCH_CHUNK, watch_read, w, watch_free);
	if (r)
		reply_header(r, "Content-Type", "application/json");
	local_stale_warning(p, req, r);
	return reply_send(req, 200, r);
}
