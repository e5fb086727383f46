/*
 * watch_follow.c - a proxied or offline watch following the filters'
 * inputs, see watch_follow.h.
 */
#include "proxy/watch_follow.h"

#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"
#include "filter/follow.h"
#include "kube/meta.h"
#include "proxy/local.h"
#include "util/buf.h"
#include "util/log.h"

/* The filters whose answer depends on more than the object: the topology
 * (servicetopology, nodeportisolation) and whether the secure port serves
 * (masterservice, forwardkubesvctraffic, serviceenvupdater). */
#define FOLLOWED_FILTERS                                                                           \
	(FILTER_BIT(FILTER_SERVICETOPOLOGY) | FILTER_BIT(FILTER_NODEPORTISOLATION) |               \
	 FILTER_BIT(FILTER_MASTERSERVICE) | FILTER_BIT(FILTER_FORWARDKUBESVCTRAFFIC) |             \
	 FILTER_BIT(FILTER_SERVICEENVUPDATER))

const char watch_follow_expired[] =
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
    "\"metadata\":{},\"status\":\"Failure\",\"message\":\"the hub's filters' view of "
    "the cluster changed: list again\",\"reason\":\"Expired\",\"code\":410}}\n";

struct watch_follow {
	struct proxy *p;
	struct rewrite *rw; /* the watch's: events are written through it */
	struct follow *fl;
	char *component;
	struct request_info ri; /* the collection and selectors, copied */
	struct local_kind kind; /* objects read from the store may lack it */
	uint64_t from_rv;
	unsigned long gen; /* cluster_filter_gen() last filtered with */
	/* the client holds objects that did not go through fl (its list):
	 * the first refilter sends every object as now filtered */
	bool unknown;
	bool refiltering; /* the emit is of an object read from the store */
	uint64_t rv;	  /* the refilter's resourceVersion */
	struct buf obj;
	bool gave_up; /* said once */
};

static int emit(void *ctx, enum watch_type type, const char *data, size_t len)
{
	struct watch_follow *wf = ctx;
	if (!wf->refiltering)
		return rewrite_emit_event(wf->rw, type, data, len);
	buf_reset(&wf->obj);
	if (local_append_object(&wf->obj, data, len, &wf->kind) < 0)
		return -1;
	return rewrite_emit_event(wf->rw, type, wf->obj.data, wf->obj.len);
}

static void count_and_free(struct watch_follow *wf)
{
	unsigned long changed, dropped;
	follow_counts(wf->fl, &changed, &dropped);
	atomic_fetch_add(&wf->p->metrics->filter_changed, changed);
	atomic_fetch_add(&wf->p->metrics->filter_dropped, dropped);
	follow_free(wf->fl);
	wf->fl = NULL;
}

/* The bound (WATCH_FOLLOW_HELD_MAX): what the follow holds goes now, the
 * rewriter filters on by itself, and the next change ends the watch with
 * 410. */
static void give_up_memory(struct watch_follow *wf)
{
	log_v(1,
	      "filters: a %s watch of %s holds over %d filtered objects: it will not follow "
	      "a change",
	      wf->ri.resource, wf->component, WATCH_FOLLOW_HELD_MAX);
	count_and_free(wf);
	rewrite_on_event(wf->rw, NULL, NULL);
}

static int on_event(void *ctx, enum watch_type type, const struct stream_object *o)
{
	struct watch_follow *wf = ctx;
	int rc = follow_event(wf->fl, type, o);
	if (!rc && follow_held(wf->fl) > WATCH_FOLLOW_HELD_MAX)
		give_up_memory(wf);
	return rc;
}

static int copy_ri(struct request_info *to, const struct request_info *ri)
{
	to->api_group = strdup(ri->api_group ? ri->api_group : "");
	to->api_version = strdup(ri->api_version ? ri->api_version : "");
	to->resource = strdup(ri->resource ? ri->resource : "");
	to->namespace = strdup(ri->namespace ? ri->namespace : "");
	to->label_selector = strdup(ri->label_selector ? ri->label_selector : "");
	to->field_selector = strdup(ri->field_selector ? ri->field_selector : "");
	return to->api_group && to->api_version && to->resource && to->namespace &&
		       to->label_selector && to->field_selector
		   ? 0
		   : -1;
}

void watch_follow_free(struct watch_follow *wf)
{
	if (!wf)
		return;
	if (wf->fl)
		count_and_free(wf);
	free(wf->component);
	free(wf->ri.api_group);
	free(wf->ri.api_version);
	free(wf->ri.resource);
	free(wf->ri.namespace);
	free(wf->ri.label_selector);
	free(wf->ri.field_selector);
	local_kind_free(&wf->kind);
	buf_free(&wf->obj);
	free(wf);
}

struct watch_follow *watch_follow_new(struct proxy *p, const struct request *req,
				      struct rewrite *rw, filter_mask mask, const char *component,
				      bool initial, int *err)
{
	*err = 0;
	if (!p->cluster || !(mask & FOLLOWED_FILTERS))
		return NULL;
	struct watch_follow *wf = calloc(1, sizeof *wf);
	if (!wf) {
		*err = -1;
		return NULL;
	}
	wf->p = p;
	wf->rw = rw;
	wf->unknown = !initial;
	/* before the first event: a change from then on is followed */
	wf->gen = cluster_filter_gen(p->cluster);
	const char *rv = req->ri.resource_version;
	if (rv && *rv && kube_rv_parse(rv, strlen(rv), &wf->from_rv) < 0)
		wf->from_rv = 0;
	struct filter_target t = {req->ri.api_group, req->ri.api_version, req->ri.resource};
	local_kind_of(p, req, &wf->kind);
	if (!(wf->component = strdup(component ? component : "")) ||
	    copy_ri(&wf->ri, &req->ri) < 0 ||
	    !(wf->fl = follow_new(mask, &t, cluster_env_ref(p->cluster), emit, wf))) {
		watch_follow_free(wf);
		*err = -1;
		return NULL;
	}
	rewrite_on_event(rw, on_event, wf);
	return wf;
}

static int refilter_one(void *ctx, const struct stream_object *o)
{
	struct watch_follow *wf = ctx;
	return follow_refilter_object(wf->fl, o, wf->rv, wf->unknown);
}

enum watch_follow_step watch_follow_step(struct watch_follow *wf, enum cache_tee_state store)
{
	unsigned long gen = cluster_filter_gen(wf->p->cluster);
	if (gen == wf->gen)
		return WATCH_FOLLOW_IDLE;
	if (store == CACHE_TEE_BEHIND && wf->fl)
		return WATCH_FOLLOW_WAIT;
	const char *why = !wf->fl ? "it held too many filtered objects"
			  : store == CACHE_TEE_LOST || !*wf->component
			      ? "its objects are not cached"
			      : NULL;
	if (why) {
		if (!wf->gave_up)
			log_v(1, "filters: a %s watch of %s cannot follow the change (%s): 410",
			      wf->ri.resource, wf->component, why);
		wf->gave_up = true;
		return WATCH_FOLLOW_CANNOT;
	}
	/* never before what the client has seen, so that a resumed watch
	 * starts after it */
	uint64_t last = rewrite_last_rv(wf->rw);
	wf->rv = last > wf->from_rv ? last : wf->from_rv;
	wf->refiltering = true;
	int rc = follow_refilter_begin(wf->fl);
	rc = rc ? rc : local_each_object(wf->p, wf->component, &wf->ri, refilter_one, wf);
	rc = rc ? rc : follow_refilter_end(wf->fl);
	wf->refiltering = false;
	if (rc < 0) {
		log_v(1,
		      "filters: a %s watch of %s cannot follow the change (the store "
		      "failed): 410",
		      wf->ri.resource, wf->component);
		return WATCH_FOLLOW_CANNOT;
	}
	wf->gen = gen;
	wf->unknown = false;
	if (follow_held(wf->fl) > WATCH_FOLLOW_HELD_MAX)
		give_up_memory(wf);
	return WATCH_FOLLOW_IDLE;
}
