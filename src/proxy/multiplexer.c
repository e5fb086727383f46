/*
 * multiplexer.c - the multiplexer's manager, see multiplexer.h: which
 * requests it answers, the table of pool-scope resources, and each
 * resource's upstream (an informer feeding its shared cache).
 */
#include "proxy/multiplexer.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cluster/cluster.h"
#include "http/response.h"
#include "informer/informer.h"
#include "kube/fieldlabels.h"
#include "kube/meta.h"
#include "proxy/multiplexer_internal.h"
#include "proxy/proxy.h"
#include "util/buf.h"
#include "util/log.h"

const char *const multiplexer_default_resources[] = {
    "/v1/services",
    "discovery.k8s.io/v1/endpointslices",
};
const size_t multiplexer_default_count =
    sizeof multiplexer_default_resources / sizeof multiplexer_default_resources[0];

/* One pool-scope resource: its cache and its upstream, made by the first
 * request; the list being received belongs to the informer's thread. */
struct mux_resource {
	struct multiplexer *m;
	char *group, *version, *resource;
	char *path; /* "/api/v1/services" */
	struct mux_cache *cache;
	struct informer *inf;
	/* the informer's thread only: the upstream list so far */
	struct mux_obj **listed;
	size_t nlisted, cap;
	bool listing;	  /* between on_list_begin and the list's end */
	bool list_broken; /* an item could not be kept: this list is not used */
};

struct multiplexer {
	pthread_mutex_t lock; /* making a resource's cache and informer */
	char *proxy_url, *user_agent, *component;
	struct mux_resource *res;
	size_t n;
	bool closed;
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
	if (m->closed || !m->proxy_url)
		return -1;
	if (!r->cache && !(r->cache = mux_cache_new(NULL)))
		return -1;
	struct informer_spec spec = {.path = r->path,
				     .on_list_begin = on_list_begin,
				     .on_object = on_object,
				     .on_list_abort = on_list_abort,
				     .ctx = r,
				     .on_list_rv = on_list_rv,
				     .on_bookmark = on_bookmark};
	if (!(r->inf = informer_start(m->proxy_url, m->user_agent, &spec)))
		return -1;
	log_info("multiplexer: started the upstream list+watch of %s as %s", r->path,
		 m->user_agent);
	return 0;
}

/* ---- the table ---- */

static int parse_resource(struct mux_resource *r, const char *gvr)
{
	const char *s1 = strchr(gvr, '/');
	const char *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
	if (!s1 || !s2 || s2 == s1 + 1 || !s2[1] || strchr(s2 + 1, '/'))
		return -1;
	r->group = strndup(gvr, (size_t)(s1 - gvr));
	r->version = strndup(s1 + 1, (size_t)(s2 - s1 - 1));
	r->resource = strdup(s2 + 1);
	if (!r->group || !r->version || !r->resource)
		return -1;
	r->path = *r->group ? str_printf("/apis/%s/%s/%s", r->group, r->version, r->resource)
			    : str_printf("/api/%s/%s", r->version, r->resource);
	return r->path ? 0 : -1;
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
	m->component = m->user_agent ? strdup(m->user_agent) : NULL;
	m->res = calloc(n ? n : 1, sizeof *m->res);
	bool ok = (!proxy_url || m->proxy_url) && m->user_agent && m->component && m->res;
	for (char *c = m->component; c && *c; c++)
		*c = (char)tolower((unsigned char)*c); /* as components are */
	for (size_t i = 0; ok && i < n; i++, m->n++) {
		m->res[i].m = m;
		if (parse_resource(&m->res[i], resources[i]) < 0) {
			log_error("multiplexer: \"%s\" is not group/version/resource",
				  resources[i]);
			ok = false;
		}
	}
	if (!ok) { /* m->n counts the half-made one: it is freed too */
		multiplexer_free(m);
		return NULL;
	}
	return m;
}

void multiplexer_close(struct multiplexer *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->closed = true;
	pthread_mutex_unlock(&m->lock);
	for (size_t i = 0; i < m->n; i++) {
		informer_stop(m->res[i].inf); /* joins: no writer from here on */
		m->res[i].inf = NULL;
		if (m->res[i].cache)
			mux_cache_close(m->res[i].cache);
	}
}

void multiplexer_free(struct multiplexer *m)
{
	if (!m)
		return;
	multiplexer_close(m);
	for (size_t i = 0; i < m->n; i++) {
		struct mux_resource *r = &m->res[i];
		drop_listed(r);
		free(r->listed);
		mux_cache_free(r->cache);
		free(r->group);
		free(r->version);
		free(r->resource);
		free(r->path);
	}
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

static struct mux_resource *resource_of(struct multiplexer *m, const struct request *req)
{
	const struct request_info *ri = &req->ri;
	if (!ri->is_resource || (ri->verb != VERB_LIST && ri->verb != VERB_WATCH) ||
	    *ri->subresource || !strcasecmp(req->component, m->component))
		return NULL;
	/* an exact resourceVersion is a snapshot the cache does not keep */
	if (!strcmp(ri->resource_version_match, "Exact") || *ri->continue_token ||
	    !wants_objects(req))
		return NULL;
	for (size_t i = 0; i < m->n; i++) {
		struct mux_resource *r = &m->res[i];
		if (!strcmp(ri->api_group, r->group) && !strcmp(ri->api_version, r->version) &&
		    !strcmp(ri->resource, r->resource))
			return r;
	}
	return NULL;
}

/* The cache of r with its upstream running, or NULL (the ordinary path
 * answers). */
static struct mux_cache *cache_of(struct multiplexer *m, struct mux_resource *r)
{
	pthread_mutex_lock(&m->lock);
	int rc = start_resource(m, r);
	struct mux_cache *c = rc == 0 ? r->cache : NULL;
	pthread_mutex_unlock(&m->lock);
	if (rc < 0 && !m->closed)
		log_warn("multiplexer %s: cannot start the upstream; served by the ordinary path",
			 r->path);
	return c;
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

int multiplexer_answer(struct proxy *p, struct request *req, int *rc)
{
	struct multiplexer *m = p->mux;
	struct mux_resource *res = m ? resource_of(m, req) : NULL;
	struct mux_cache *c = res ? cache_of(m, res) : NULL;
	if (!c)
		return 0;
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
	*rc = req->ri.verb == VERB_LIST ? mux_answer_list(p, req, r) : mux_answer_watch(p, req, r);
	return 1;
}
