/*
 * multiplexer.c - the multiplexer's manager, see multiplexer.h: which
 * requests it answers, the table of pool-scope resources, and each
 * resource's upstream (an informer feeding its shared cache).
 */
#include "proxy/multiplexer.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cache/cacheable.h"
#include "cloud/upstream.h"
#include "cluster/cluster.h"
#include "config.h"
#include "http/response.h"
#include "informer/informer.h"
#include "kube/fieldlabels.h"
#include "kube/meta.h"
#include "proxy/multiplexer_internal.h"
#include "proxy/proxy.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"

/* One pool-scope resource: its cache and its upstream, made by the first
 * request; the list being received belongs to the informer's thread.  A
 * resource is never freed before the multiplexer: a connection thread may
 * hold it.  One taken out of the set (multiplexer_set_resources) stops its
 * upstream and closes its cache, whose watchers end; taken back, it gets a
 * new cache, and the closed one waits in `retired` for multiplexer_free. */
struct mux_resource {
	struct multiplexer *m;
	char *gvr; /* as configured: "discovery.k8s.io/v1/endpointslices" */
	char *group, *version, *resource;
	char *path;  /* "/api/v1/services" */
	bool active; /* in the set; under m->lock */
	/* under m->lock; the informer's thread reads it without: it is set
	 * before the informer starts and changed after it is joined */
	struct mux_cache *cache;
	struct mux_cache **retired; /* closed caches, under m->lock */
	size_t nretired;
	struct informer *inf; /* under m->lock */
	/* the upstream does not serve the resource (404: a CRD not installed):
	 * requests take the ordinary path until a list succeeds */
	atomic_bool absent;
	/* offline, the upstream's list was answered 404: never cached.  Its
	 * clients take the ordinary path while the cloud is unreachable and
	 * nothing is listed, and get the 404 any list never cached gets */
	atomic_bool never_cached;
	/* a kind learned from the upstream's objects, for resources the hub
	 * has no kind for (CRDs): set once by the informer's thread */
	_Atomic(char *) kind;
	/* the informer's thread only: the upstream list so far */
	struct mux_obj **listed;
	size_t nlisted, cap;
	bool listing;	  /* between on_list_begin and the list's end */
	bool list_broken; /* an item could not be kept: this list is not used */
};

struct multiplexer {
	pthread_mutex_t lock; /* the table, and making a resource's cache and informer */
	char *proxy_url, *user_agent, *component;
	struct mux_resource **res;
	size_t n, cap;
	bool closed;
	unsigned long (*epoch)(void *);
	void *epoch_ctx;
	struct upstream *up;   /* whether the cloud is reachable; NULL: assume so */
	int64_t hold_until_ms; /* no upstream starts before (0: none) */
};

/* ---- the upstream: an informer feeding a shared cache ---- */

static void drop_listed(struct mux_resource *r)
{
	for (size_t i = 0; i < r->nlisted; i++)
		mux_obj_unref(r->listed[i]);
	r->nlisted = 0;
	r->list_broken = false;
}

static void on_list_begin(void *ctx)
{
	struct mux_resource *r = ctx;
	drop_listed(r);
	r->listing = true;
}

/* The first kind the upstream names, for the answers' "<kind>List" when
 * the hub knows no kind for the resource (a CRD's objects carry theirs). */
static void learn_kind(struct mux_resource *r, const struct stream_object *o)
{
	if (atomic_load(&r->kind) || !o->kind || !*o->kind)
		return;
	char *k = strdup(o->kind);
	char *expected = NULL;
	if (k && !atomic_compare_exchange_strong(&r->kind, &expected, k))
		free(k);
}

static void keep_listed(struct mux_resource *r, const struct stream_object *o)
{
	if (r->list_broken)
		return;
	if (r->nlisted == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 256;
		struct mux_obj **v = realloc(r->listed, cap * sizeof *v);
		if (!v) {
			r->list_broken = true;
			return;
		}
		r->listed = v;
		r->cap = cap;
	}
	struct mux_obj *obj = mux_obj_new(o->data, o->len);
	if (!obj) {
		log_warn("multiplexer %s: a listed object cannot be kept; the list is dropped",
			 r->path);
		r->list_broken = true;
		return;
	}
	r->listed[r->nlisted++] = obj;
}

static void on_object(void *ctx, enum informer_event ev, const struct stream_object *o)
{
	struct mux_resource *r = ctx;
	learn_kind(r, o);
	if (r->listing) {
		keep_listed(r, o);
		return;
	}
	struct mux_obj *obj = mux_obj_new(o->data, o->len);
	if (!obj) {
		log_warn("multiplexer %s: an event's object cannot be kept", r->path);
		return;
	}
	enum mux_status st =
	    mux_cache_apply(r->cache, ev == INFORMER_DELETE ? MUX_DELETED : MUX_MODIFIED, obj);
	if (st != MUX_OK && st != MUX_STALE)
		log_warn("multiplexer %s: event not applied: %s", r->path, mux_status_name(st));
}

static void on_list_rv(void *ctx, const char *rv_text)
{
	struct mux_resource *r = ctx;
	uint64_t rv = 0;
	r->listing = false;
	if (!*rv_text) { /* 404: the upstream does not serve it (yet) */
		drop_listed(r);
		/* offline, a 404 only says it was never cached: not "absent",
		 * which would outlast the outage */
		if (r->m->up && !upstream_any_healthy(r->m->up)) {
			if (!atomic_exchange(&r->never_cached, true))
				log_v(1,
				      "multiplexer %s: never cached and the cloud is unreachable; "
				      "its clients take the ordinary path until it is listed",
				      r->path);
			return;
		}
		if (!atomic_exchange(&r->absent, true))
			log_info("multiplexer %s: the upstream does not serve it; its clients take "
				 "the ordinary path until it does",
				 r->path);
		return;
	}
	if (r->list_broken || kube_rv_parse(rv_text, strlen(rv_text), &rv) < 0 || !rv) {
		log_warn("multiplexer %s: a list without a usable resourceVersion (\"%s\") is "
			 "not used",
			 r->path, rv_text);
		drop_listed(r);
		return;
	}
	size_t n = r->nlisted;
	r->nlisted = 0; /* the cache takes every reference, also on failure */
	enum mux_status st = mux_cache_replace(r->cache, r->listed, n, rv);
	atomic_store(&r->absent, false);
	atomic_store(&r->never_cached, false);
	log_v(1, "multiplexer %s: listed %zu objects at %llu: %s", r->path, n,
	      (unsigned long long)rv, mux_status_name(st));
}

static void on_list_abort(void *ctx)
{
	struct mux_resource *r = ctx;
	drop_listed(r);
	r->listing = false;
}

static void on_bookmark(void *ctx, const struct stream_object *o)
{
	struct mux_resource *r = ctx;
	if (o->rv)
		mux_cache_bookmark(r->cache, o->rv);
}

/* Make r's cache and start its upstream, once; under m->lock.  0 or -1. */
static int start_resource(struct multiplexer *m, struct mux_resource *r)
{
	if (r->inf)
		return 0;
	if (m->closed || !m->proxy_url || !r->active)
		return -1;
	if (!r->cache && !(r->cache = mux_cache_new(NULL)))
		return -1;
	if (m->hold_until_ms && clock_now_ms() < m->hold_until_ms)
		return 0; /* its clients wait (wait_first_list starts it) */
	m->hold_until_ms = 0;
	struct informer_spec spec = {.path = r->path,
				     .on_list_begin = on_list_begin,
				     .on_object = on_object,
				     .on_list_abort = on_list_abort,
				     .ctx = r,
				     .on_list_rv = on_list_rv,
				     .on_bookmark = on_bookmark,
				     .epoch = m->epoch,
				     .epoch_ctx = m->epoch_ctx};
	if (!(r->inf = informer_start(m->proxy_url, m->user_agent, &spec)))
		return -1;
	log_info("multiplexer: started the upstream list+watch of %s as %s", r->path,
		 m->user_agent);
	return 0;
}

/* Stop r's upstream and close its cache (its watchers end: their clients
 * list again, by the ordinary path); under m->lock. */
static void stop_resource(struct mux_resource *r)
{
	informer_stop(r->inf); /* joins: no writer from here on */
	r->inf = NULL;
	drop_listed(r);
	r->listing = false;
	if (!r->cache)
		return;
	mux_cache_close(r->cache);
	struct mux_cache **v = realloc(r->retired, (r->nretired + 1) * sizeof *v);
	if (v) {
		r->retired = v;
		r->retired[r->nretired++] = r->cache;
		r->cache = NULL;
	} /* else it stays, closed, as r's cache: requests take the ordinary path */
}

/* ---- the table ---- */

static void resource_free(struct mux_resource *r)
{
	if (!r)
		return;
	drop_listed(r);
	free(r->listed);
	mux_cache_free(r->cache);
	for (size_t i = 0; i < r->nretired; i++)
		mux_cache_free(r->retired[i]);
	free(r->retired);
	free(atomic_load(&r->kind));
	free(r->gvr);
	free(r->group);
	free(r->version);
	free(r->resource);
	free(r->path);
	free(r);
}

static struct mux_resource *resource_new(struct multiplexer *m, const char *gvr)
{
	const char *s1 = strchr(gvr, '/');
	const char *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
	if (!config_gvr_ok(gvr) || !s2) {
		log_error("multiplexer: \"%s\" is not group/version/resource", gvr);
		return NULL;
	}
	struct mux_resource *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->m = m;
	r->gvr = strdup(gvr);
	r->group = strndup(gvr, (size_t)(s1 - gvr));
	r->version = strndup(s1 + 1, (size_t)(s2 - s1 - 1));
	r->resource = strdup(s2 + 1);
	if (r->group && r->version)
		r->path = *r->group
			      ? str_printf("/apis/%s/%s/%s", r->group, r->version, r->resource)
			      : str_printf("/api/%s/%s", r->version, r->resource);
	if (!r->gvr || !r->group || !r->version || !r->resource || !r->path) {
		resource_free(r);
		return NULL;
	}
	return r;
}

/* Why a resource (of the core group or not) is never pool-scope, or
 * NULL.  A pool-scope list is read with one node's identity and served to
 * every hub of the pool, through the leader port too; a node may read a
 * Secret only when one of its own pods uses it (kube-apiserver's Node
 * authorizer). */
static const char *never_pool_scope(bool core, const char *resource)
{
	if (core && !strcmp(resource, "secrets"))
		return "a node may read only the Secrets its own pods use";
	return NULL;
}

/* The same for a configured "group/version/resource". */
static const char *gvr_never_pool_scope(const char *gvr)
{
	const char *first = strchr(gvr, '/'), *last = strrchr(gvr, '/');
	return first ? never_pool_scope(first == gvr, last + 1) : NULL;
}

static struct mux_resource *find_gvr(struct multiplexer *m, const char *gvr)
{
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->res[i]->gvr, gvr))
			return m->res[i];
	return NULL;
}

static bool listed_in(const char *gvr, const char *const *gvrs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(gvrs[i], gvr))
			return true;
	return false;
}

/* Under m->lock.  0, or -1 (out of memory, or a malformed name: logged). */
static int set_resources_locked(struct multiplexer *m, const char *const *gvrs, size_t n)
{
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		const char *why = gvr_never_pool_scope(gvrs[i]);
		if (why) {
			log_error(
			    "multiplexer: \"%s\" is refused as a pool-scope resource: %s; it is "
			    "never shared, nor served on the leader port (the rest of the "
			    "list applies)",
			    gvrs[i], why);
			continue;
		}
		struct mux_resource *r = find_gvr(m, gvrs[i]);
		if (!r) {
			if (m->n == m->cap) {
				size_t cap = m->cap ? m->cap * 2 : 4;
				struct mux_resource **v = realloc(m->res, cap * sizeof *v);
				if (!v)
					return -1;
				m->res = v;
				m->cap = cap;
			}
			if (!(r = resource_new(m, gvrs[i]))) {
				rc = -1;
				continue;
			}
			m->res[m->n++] = r;
		}
		if (!r->active)
			log_v(1, "multiplexer: %s is pool-scope", r->gvr);
		r->active = true;
	}
	for (size_t i = 0; i < m->n; i++) {
		struct mux_resource *r = m->res[i];
		if (r->active && !listed_in(r->gvr, gvrs, n)) {
			log_info("multiplexer: %s is no longer pool-scope: its upstream stops and "
				 "its watchers end",
				 r->gvr);
			r->active = false;
			stop_resource(r);
		}
	}
	return rc;
}

int multiplexer_set_resources(struct multiplexer *m, const char *const *gvrs, size_t n)
{
	pthread_mutex_lock(&m->lock);
	int rc = set_resources_locked(m, gvrs, n);
	pthread_mutex_unlock(&m->lock);
	return rc;
}

struct multiplexer *multiplexer_new(const char *proxy_url, const char *node_name,
				    const char *const *resources, size_t n)
{
	struct multiplexer *m = calloc(1, sizeof *m);
	if (!m)
		return NULL;
	if (pthread_mutex_init(&m->lock, NULL) != 0) {
		free(m);
		return NULL;
	}
	m->proxy_url = proxy_url ? strdup(proxy_url) : NULL;
	m->user_agent = str_printf("multiplexer-proxy-%s", node_name);
	m->component = cache_mux_component(node_name);
	bool ok = (!proxy_url || m->proxy_url) && m->user_agent && m->component;
	if (!ok || set_resources_locked(m, resources, n) < 0) {
		multiplexer_free(m);
		return NULL;
	}
	return m;
}

void multiplexer_set_cloud(struct multiplexer *m, struct upstream *up,
			   unsigned long (*epoch)(void *), void *ctx)
{
	pthread_mutex_lock(&m->lock);
	m->up = up;
	m->epoch = epoch;
	m->epoch_ctx = ctx;
	pthread_mutex_unlock(&m->lock);
}

void multiplexer_hold(struct multiplexer *m, long ms)
{
	pthread_mutex_lock(&m->lock);
	m->hold_until_ms = clock_now_ms() + ms;
	pthread_mutex_unlock(&m->lock);
}

void multiplexer_release(struct multiplexer *m)
{
	pthread_mutex_lock(&m->lock);
	m->hold_until_ms = 0;
	pthread_mutex_unlock(&m->lock);
}

void multiplexer_close(struct multiplexer *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->closed = true;
	for (size_t i = 0; i < m->n; i++) {
		struct mux_resource *r = m->res[i];
		informer_stop(r->inf); /* joins: no writer from here on */
		r->inf = NULL;
		if (r->cache)
			mux_cache_close(r->cache);
	}
	pthread_mutex_unlock(&m->lock);
}

void multiplexer_free(struct multiplexer *m)
{
	if (!m)
		return;
	multiplexer_close(m);
	for (size_t i = 0; i < m->n; i++)
		resource_free(m->res[i]);
	free(m->res);
	free(m->proxy_url);
	free(m->user_agent);
	free(m->component);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

/* ---- which requests ---- */

/* The answer is the objects themselves, as JSON: not a Table nor partial
 * metadata ("as=" in Accept), which the ordinary path negotiates. */
static bool wants_objects(const struct request *req)
{
	const char *accept = request_header(req, "Accept");
	return !accept || !strstr(accept, "as=");
}

static bool is_list_or_watch(const struct request_info *ri)
{
	return ri->is_resource && (ri->verb == VERB_LIST || ri->verb == VERB_WATCH) &&
	       !*ri->subresource;
}

/* The active resource req names, or NULL; under m->lock. */
static struct mux_resource *named_resource(struct multiplexer *m, const struct request_info *ri)
{
	for (size_t i = 0; i < m->n; i++) {
		struct mux_resource *r = m->res[i];
		if (r->active && !strcmp(ri->api_group, r->group) &&
		    !strcmp(ri->api_version, r->version) && !strcmp(ri->resource, r->resource))
			return r;
	}
	return NULL;
}

/* Whether the cache can answer req (an exact resourceVersion or a continue
 * token asks for a snapshot it does not keep; a Table is the ordinary
 * path's). */
static bool cache_can_answer(const struct request *req)
{
	const struct request_info *ri = &req->ri;
	return strcmp(ri->resource_version_match, "Exact") && !*ri->continue_token &&
	       wants_objects(req);
}

bool multiplexer_shares(struct multiplexer *m, const char *group, const char *version,
			const char *resource)
{
	if (!m)
		return false;
	struct request_info ri = {0}; /* named_resource reads these three only */
	ri.api_group = (char *)group;
	ri.api_version = (char *)version;
	ri.resource = (char *)resource;
	pthread_mutex_lock(&m->lock);
	bool yes = named_resource(m, &ri) != NULL;
	pthread_mutex_unlock(&m->lock);
	return yes;
}

bool multiplexer_is_upstream(struct multiplexer *m, const struct request *req)
{
	if (!m || !is_list_or_watch(&req->ri) || strcasecmp(req->component, m->component))
		return false;
	pthread_mutex_lock(&m->lock);
	bool yes = named_resource(m, &req->ri) != NULL;
	pthread_mutex_unlock(&m->lock);
	return yes;
}

/* req's resource with its cache and upstream running, or NULL (the
 * ordinary path answers); *cache is the cache to answer from. */
static struct mux_resource *resource_for(struct multiplexer *m, const struct request *req,
					 struct mux_cache **cache)
{
	pthread_mutex_lock(&m->lock);
	struct mux_resource *r = named_resource(m, &req->ri);
	int rc = r ? start_resource(m, r) : -1;
	*cache = rc == 0 ? r->cache : NULL;
	bool closed = m->closed;
	pthread_mutex_unlock(&m->lock);
	if (r && rc < 0 && !closed)
		log_warn("multiplexer %s: cannot start the upstream; served by the ordinary path",
			 r->path);
	return *cache ? r : NULL;
}

int mux_request_init(struct mux_request *r, struct proxy *p, struct request *req,
		     struct mux_cache *c, char **why)
{
	const struct request_info *ri = &req->ri;
	memset(r, 0, sizeof *r);
	r->cache = c;
	if (selector_parse(SELECTOR_LABEL, ri->label_selector, &r->labels, why) < 0 ||
	    selector_parse(SELECTOR_FIELD, ri->field_selector, &r->fields, why) < 0 ||
	    field_labels_check(ri->api_group, ri->resource, r->fields, why) < 0)
		return -1;
	r->filter.namespace = ri->namespace;
	r->filter.labels = selector_is_empty(r->labels) ? NULL : r->labels;
	r->filter.fields = selector_is_empty(r->fields) ? NULL : r->fields;
	local_kind_of(p, req, &r->kind);
	r->filters = p->cluster ? cluster_filters_for(p->cluster, req->component,
						      request_info_verb(ri), ri->resource)
				: 0;
	r->target = (struct filter_target){ri->api_group, ri->api_version, ri->resource};
	return 0;
}

void mux_request_free(struct mux_request *r)
{
	selector_free(r->labels);
	selector_free(r->fields);
	local_kind_free(&r->kind);
	memset(r, 0, sizeof *r);
}

void multiplexer_store_failed(struct multiplexer *m, const char *component, const char *path)
{
	if (!m || strcasecmp(component, m->component))
		return;
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->n; i++) {
		struct mux_resource *r = m->res[i];
		size_t n = strlen(r->path);
		if (r->inf && !strncmp(path, r->path, n) && (path[n] == '?' || !path[n])) {
			log_v(1,
			      "multiplexer %s: the store refused a write of its upstream: "
			      "it lists again",
			      r->path);
			informer_relist(r->inf);
		}
	}
	pthread_mutex_unlock(&m->lock);
}

size_t mux_hand_out(const struct buf *b, size_t *off, char *out, size_t max)
{
	size_t n = b->len - *off;
	if (n > max)
		n = max;
	memcpy(out, b->data + *off, n);
	*off += n;
	return n;
}

static int too_many(struct request *req)
{
	struct reply *r = reply_status_new(
	    429, NULL, "the multiplexer's cache is not ready yet (its first list is in flight)",
	    NULL);
	if (r)
		reply_header(r, "Retry-After", "1");
	return reply_send(req, 429, r);
}

int mux_wait_ready(struct mux_cache *c, struct request *req, uint64_t rv, int *rc)
{
	enum mux_status st = mux_cache_wait_rv(c, 0, MUX_FIRST_LIST_WAIT_MS);
	if (st == MUX_OK && rv)
		st = mux_cache_wait_rv(c, rv, MUX_TOO_NEW_WAIT_MS) == MUX_OK ? MUX_OK : MUX_TOO_NEW;
	if (st == MUX_OK)
		return 0;
	if (st == MUX_TIMEOUT)
		*rc = too_many(req);
	else if (st == MUX_TOO_NEW)
		*rc = reply_status(req, 504, "Timeout", "Too large resource version", NULL);
	else
		*rc = reply_status(req, 503, NULL, "the hub is stopping", NULL);
	return -1;
}

/* Offline with nothing listed, and the upstream's offline list found it
 * never cached: nothing will come until the cloud does, and a client is
 * better told at once what any list never cached is told (the ordinary
 * path's 404) than held 5 s for a 429. */
static bool offline_never_cached(struct mux_resource *res, struct mux_cache *c)
{
	return atomic_load(&res->never_cached) && res->m->up && !upstream_any_healthy(res->m->up) &&
	       mux_cache_wait_rv(c, 0, 0) != MUX_OK;
}

/* Wait for c's first list: 0 ready, 1 the ordinary path answers (the
 * upstream does not serve the resource, or offline it was never cached),
 * -1 answered here (429 after MUX_FIRST_LIST_WAIT_MS, 503 stopping). */
static int wait_first_list(struct mux_resource *res, struct mux_cache *c, struct request *req,
			   int *rc)
{
	struct multiplexer *m = res->m;
	for (int waited = 0;; waited += 100) {
		pthread_mutex_lock(&m->lock);
		if (!res->inf && start_resource(m, res) < 0 && !m->closed)
			log_warn("multiplexer %s: cannot start the upstream", res->path);
		pthread_mutex_unlock(&m->lock);
		enum mux_status st = mux_cache_wait_rv(c, 0, 100);
		if (st == MUX_OK)
			return 0;
		if (atomic_load(&res->absent) || offline_never_cached(res, c))
			return 1;
		if (st != MUX_TIMEOUT) {
			*rc = reply_status(req, 503, NULL, "the hub is stopping", NULL);
			return -1;
		}
		if (waited >= MUX_FIRST_LIST_WAIT_MS) {
			*rc = too_many(req);
			return -1;
		}
	}
}

/* Answer a list or watch of res from c; filters for a local client, none
 * for another hub.  1 answered (*rc), 0 the ordinary path's. */
static int answer(struct proxy *p, struct request *req, struct mux_resource *res,
		  struct mux_cache *c, bool peer, int *rc)
{
	if (atomic_load(&res->absent) || offline_never_cached(res, c))
		return 0;
	/* The hub's own informers (the filters' view) while the cloud is
	 * unreachable and nothing is listed here: they read the cache by the
	 * ordinary path - another component's copy, or 404, an empty list -
	 * rather than wait for the cloud: the filters' view must load offline
	 * (docs/filters.md, the start-up rule). */
	if (!peer && !strcasecmp(req->component, "yurthub") && res->m->up &&
	    !upstream_any_healthy(res->m->up) && mux_cache_wait_rv(c, 0, 0) != MUX_OK)
		return 0;
	int w = wait_first_list(res, c, req, rc);
	if (w != 0)
		return w < 0;
	struct mux_request *r = malloc(sizeof *r);
	char *why = NULL;
	if (!r) {
		*rc = -1;
		return 1;
	}
	if (mux_request_init(r, p, req, c, &why) < 0) {
		*rc = local_status(req, 400, why ? why : "invalid selector");
		free(why);
		mux_request_free(r);
		free(r);
		return 1;
	}
	const char *learned = atomic_load(&res->kind);
	if (!r->kind.kind && learned) {
		/* "FooList" from a CRD's "Foo" */
		r->kind.kind = strdup(learned);
	}
	if (peer)
		r->filters = 0; /* the other hub filters for its own clients */
	*rc = req->ri.verb == VERB_LIST ? mux_answer_list(p, req, r) : mux_answer_watch(p, req, r);
	return 1;
}

int multiplexer_answer(struct proxy *p, struct request *req, int *rc)
{
	struct multiplexer *m = p->mux;
	/* A client with its own credentials (a pod's token) is proxied as
	 * itself, for the API server to authorize: the multiplexer's objects
	 * were read with the node's identity, so they are the node's clients'
	 * only. */
	if (!m || !is_list_or_watch(&req->ri) || !cache_can_answer(req) ||
	    !strcasecmp(req->component, m->component) || request_header(req, "Authorization"))
		return 0;
	struct mux_cache *c;
	struct mux_resource *res = resource_for(m, req, &c);
	return res ? answer(p, req, res, c, false, rc) : 0;
}

static int members_unknown(struct request *req)
{
	struct reply *r = reply_status_new(
	    503, NULL,
	    "the pool's members are not known yet (its NodePool has not been listed): try again",
	    NULL);
	if (r)
		reply_header(r, "Retry-After", "5");
	return reply_send(req, 503, r);
}

int multiplexer_admit_peer(struct proxy *p, struct request *req, const char *node)
{
	char *pool = NULL;
	enum pool_membership pm =
	    p->cluster ? cluster_pool_member(p->cluster, node, &pool) : POOL_MEMBERS_UNKNOWN;
	int rc = 1;
	if (pm == POOL_MEMBERS_UNKNOWN) {
		rc = members_unknown(req);
	} else if (pm == POOL_NOT_MEMBER) {
		struct buf msg = BUF_INIT;
		if (buf_printf(&msg,
			       "node \"%s\" is not a member of NodePool \"%s\": this port serves "
			       "the hubs of its pool's nodes only",
			       node, pool ? pool : "") < 0)
			rc = -1;
		else
			rc = reply_status(req, 403, "Forbidden", buf_cstr(&msg), NULL);
		log_v(2, "leader port: node %s refused: not in NodePool %s", node,
		      pool ? pool : "");
		buf_free(&msg);
	}
	free(pool);
	return rc;
}

int multiplexer_answer_peer(struct proxy *p, struct request *req)
{
	struct multiplexer *m = p->mux;
	struct mux_cache *c = NULL;
	struct mux_resource *res = NULL;
	int rc = 0;
	bool core = !req->ri.api_group || !*req->ri.api_group;
	if (req->ri.resource && never_pool_scope(core, req->ri.resource))
		return reply_status(req, 403, "Forbidden",
				    "this port never serves Secrets: each node reads its own pods' "
				    "Secrets from the cloud",
				    NULL);
	if (m && is_list_or_watch(&req->ri) && cache_can_answer(req) &&
	    (res = resource_for(m, req, &c)) && answer(p, req, res, c, true, &rc))
		return rc;
	return reply_status(req, 403, "Forbidden",
			    "this port serves the pool-scope resources' lists and watches to the "
			    "pool's hubs, and nothing else",
			    NULL);
}
