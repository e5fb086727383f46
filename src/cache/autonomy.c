/*
 * autonomy.c - the autonomy verdict (autonomy.h), from what the store holds.
 */
#include "cache/autonomy.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "util/buf.h"

struct need {
	const char *component;
	struct store_gvr gvr;
	bool always; /* else only when the node runs the component */
};

static const struct need needs[] = {
    {"kubelet", {"", "v1", "pods"}, true},
    {"kubelet", {"", "v1", "nodes"}, true},
    {"kube-proxy", {"", "v1", "services"}, false},
    {"kube-proxy", {"discovery.k8s.io", "v1", "endpointslices"}, false},
    {"coredns", {"", "v1", "services"}, false},
    {"coredns", {"discovery.k8s.io", "v1", "endpointslices"}, false},
    {"coredns", {"", "v1", "namespaces"}, false},
};

static int view_found(void *ctx, const struct store_view_state *v)
{
	(void)v;
	*(bool *)ctx = true;
	return 1; /* one is enough */
}

static bool has_view(struct store *s, const char *component, const struct store_gvr *gvr)
{
	bool found = false;
	return store_list_views(s, component, gvr, view_found, &found) == STORE_OK && found;
}

/* Whether the node runs component: the hub holds something of it. */
struct runs {
	const char *component;
	bool yes;
};

static int component_seen(void *ctx, const char *name)
{
	struct runs *r = ctx;
	if (!strcasecmp(name, r->component)) {
		r->yes = true;
		return 1;
	}
	return 0;
}

static bool node_runs(struct store *s, const char *component)
{
	struct runs r = {component, false};
	return store_list_components(s, component_seen, &r) == STORE_OK && r.yes;
}

/* kubelet's own Node, cached as an object (its get) even without a list. */
static bool has_own_node(struct store *s, const char *node)
{
	struct store_key_info info = {"kubelet", "", "v1", "nodes", "", node};
	struct store_key k;
	if (store_key_build(s, &info, &k) != STORE_OK)
		return false;
	struct buf b = BUF_INIT;
	bool ok = store_get(s, &k, &b) == STORE_OK;
	buf_free(&b);
	store_key_free(&k);
	return ok;
}

static bool need_met(const struct autonomy_inputs *in, const struct need *n)
{
	const struct store_gvr *g = &n->gvr;
	if (in->mux_component && in->is_shared &&
	    in->is_shared(in->ctx, g->group, g->version, g->resource))
		return has_view(in->store, in->mux_component, g);
	if (has_view(in->store, n->component, g))
		return true;
	return !strcmp(g->resource, "nodes") && has_own_node(in->store, in->node_name);
}

bool autonomy_check(const struct autonomy_inputs *in, char *why, size_t whylen)
{
	if (!in->store) {
		snprintf(why, whylen, "no cache (working mode cloud)");
		return false;
	}
	if (in->cache && cache_manager_store_failing(in->cache)) {
		snprintf(why, whylen, "the store refuses writes");
		return false;
	}
	for (size_t i = 0; i < sizeof needs / sizeof needs[0]; i++) {
		const struct need *n = &needs[i];
		if (!n->always && !node_runs(in->store, n->component))
			continue;
		if (!need_met(in, n)) {
			snprintf(why, whylen, "%s's %s%s%s are not cached", n->component,
				 n->gvr.resource, *n->gvr.group ? "." : "", n->gvr.group);
			return false;
		}
	}
	if (whylen)
		*why = '\0';
	return true;
}
