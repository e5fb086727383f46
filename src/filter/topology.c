/*
 * topology.c - servicetopology (filter.h): a Service annotated
 * openyurt.io/topologyKeys keeps its traffic on this node or in this node's
 * pool, by leaving out of its EndpointSlices (discovery.k8s.io v1 and
 * v1beta1) and of its core Endpoints the endpoints that run elsewhere.
 * YurtHub lists Endpoints in its table but passes them unchanged; here they
 * get the same topology as slices, so that a client of either sees the
 * same endpoints.  Called by filter.c for those three resources only.
 */
#include "filter/filter_internal.h"

#include <string.h>

#define SERVICE_NAME_LABEL "kubernetes.io/service-name"
#define HOSTNAME_KEY	   "kubernetes.io/hostname"

enum topology {
	TOPO_NONE, /* leave the object as it is */
	TOPO_NODE, /* endpoints on this node only */
	TOPO_POOL, /* endpoints on the nodes of this node's pool only */
};

/* What the Service's annotation asks for, given what the hub knows. */
static enum topology topology_of(const struct filter_env *env, const char *keys)
{
	if (!keys)
		return TOPO_NONE;
	if (strcmp(keys, HOSTNAME_KEY) == 0)
		return TOPO_NODE;
	if (strcmp(keys, "openyurt.io/nodepool") != 0 && strcmp(keys, "kubernetes.io/zone") != 0)
		return TOPO_NONE; /* a value it does not know, a list of them too */
	if (!env->pool_topology)
		return TOPO_NONE;
	/* A node in no pool is a pool of one. */
	if (!env->pool_name || !*env->pool_name)
		return TOPO_NODE;
	/* The pool's nodes are not known (yet): better all endpoints than none. */
	return env->pool_nodes ? TOPO_POOL : TOPO_NONE;
}

/* Is an endpoint whose node is the JSON string node kept?  One whose node
 * is not known is not: it cannot be shown to be near. */
static bool keeps(const struct filter_env *env, enum topology topo, const json_t *node)
{
	const char *name = fj_cstr(node);

	if (!name)
		return false;
	if (topo == TOPO_NODE)
		return env->node_name && *env->node_name && strcmp(name, env->node_name) == 0;
	return filter_env_in_pool(env, name);
}

typedef json_t *(*node_of_fn)(const json_t *item);

static json_t *v1_endpoint_node(const json_t *ep)
{
	return fj_string(ep, "nodeName");
}

static json_t *v1beta1_endpoint_node(const json_t *ep)
{
	return fj_string(fj_object(ep, "topology"), HOSTNAME_KEY);
}

/* parent[key], an array, without the items that are not kept: 1 when some
 * were left out, 0 when all stay (or there is no array), -1 out of memory
 * (then nothing is changed). */
static int prune(json_t *parent, const char *key, const struct filter_env *env, enum topology topo,
		 node_of_fn node_of)
{
	json_t *items = fj_array(parent, key), *kept, *item;
	size_t i, nkept = 0;

	json_array_foreach(items, i, item)
	{
		if (keeps(env, topo, node_of(item)))
			nkept++;
	}
	if (!items || nkept == json_array_size(items))
		return 0;
	kept = json_array();
	if (!kept)
		return -1;
	json_array_foreach(items, i, item)
	{
		if (keeps(env, topo, node_of(item)) && json_array_append(kept, item) < 0) {
			json_decref(kept);
			return -1;
		}
	}
	return json_object_set_new(parent, key, kept) == 0 ? 1 : -1;
}

/* ---- core Endpoints ---- */

static json_t *address_node(const json_t *addr)
{
	return fj_string(addr, "nodeName");
}

static bool is_empty(const json_t *subset, const char *key)
{
	json_t *a = fj_array(subset, key);

	return !a || json_array_size(a) == 0;
}

/* A subset that filtering left with no address, ready or not, goes: its
 * ports alone mean nothing. */
static int prune_subset(json_t *subset, const struct filter_env *env, enum topology topo,
			bool *now_empty)
{
	int a = prune(subset, "addresses", env, topo, address_node);
	int b = prune(subset, "notReadyAddresses", env, topo, address_node);

	*now_empty = (a > 0 || b > 0) && is_empty(subset, "addresses") &&
		     is_empty(subset, "notReadyAddresses");
	return a < 0 || b < 0 ? -1 : (a > 0 || b > 0);
}

static enum filter_result prune_endpoints(json_t *eps, const struct filter_env *env,
					  enum topology topo)
{
	json_t *subsets = fj_array(eps, "subsets"), *subset, *left = json_array();
	bool changed = false, gone = false, whole = true;
	size_t i;

	if (!subsets || !left) {
		json_decref(left);
		return FILTER_UNCHANGED;
	}
	json_array_foreach(subsets, i, subset)
	{
		bool now_empty = false;

		changed = prune_subset(subset, env, topo, &now_empty) > 0 || changed;
		if (now_empty)
			gone = true;
		else if (json_array_append(left, subset) < 0)
			whole = false;
	}
	/* Out of memory: the emptied subsets stay, which is still valid. */
	if (gone && whole)
		json_object_set_new(eps, "subsets", left);
	else
		json_decref(left);
	return changed ? FILTER_CHANGED : FILTER_UNCHANGED;
}

/* Are the fields servicetopology reads of their types?  An endpoint, an
 * Endpoints subset or address that is not an object, a node name that is
 * not a string, would otherwise be taken for "not on this node". */
static bool endpoints_readable(const json_t *items, const char *obj_key, const char *node_key)
{
	json_t *item;
	size_t i;

	if (fj_bad_items(items, JSON_OBJECT))
		return false;
	json_array_foreach(items, i, item)
	{
		json_t *holder = obj_key ? fj_object(item, obj_key) : (json_t *)item;

		if ((obj_key && fj_bad(item, obj_key, JSON_OBJECT)) ||
		    fj_bad(holder, node_key, JSON_STRING))
			return false;
	}
	return true;
}

static bool topology_readable(const json_t *obj, enum filter_res res)
{
	json_t *subsets = fj_array(obj, "subsets"), *subset;
	size_t i;

	if (res == RES_SLICES_V1)
		return !fj_bad(obj, "endpoints", JSON_ARRAY) &&
		       endpoints_readable(fj_array(obj, "endpoints"), NULL, "nodeName");
	if (res == RES_SLICES_V1BETA1)
		return !fj_bad(obj, "endpoints", JSON_ARRAY) &&
		       endpoints_readable(fj_array(obj, "endpoints"), "topology", HOSTNAME_KEY);
	if (fj_bad(obj, "subsets", JSON_ARRAY) || fj_bad_items(subsets, JSON_OBJECT))
		return false;
	json_array_foreach(subsets, i, subset)
	{
		if (fj_bad(subset, "addresses", JSON_ARRAY) ||
		    fj_bad(subset, "notReadyAddresses", JSON_ARRAY) ||
		    !endpoints_readable(fj_array(subset, "addresses"), NULL, "nodeName") ||
		    !endpoints_readable(fj_array(subset, "notReadyAddresses"), NULL, "nodeName"))
			return false;
	}
	return true;
}

/* ---- the filter ---- */

enum filter_result filter_servicetopology(const struct filter_env *env, enum filter_res res,
					  json_t *obj)
{
	json_t *meta = fj_object(obj, "metadata");
	json_t *ns = fj_string(meta, "namespace");
	json_t *svc =
	    res == RES_ENDPOINTS ? fj_string(meta, "name") : fj_label(obj, SERVICE_NAME_LABEL);
	enum topology topo;
	int r;

	if (env->no_topology || !env->topology_keys || !fj_cstr(svc) || (ns && !fj_cstr(ns)))
		return FILTER_UNCHANGED;
	topo = topology_of(env, env->topology_keys(env, ns ? fj_cstr(ns) : "", fj_cstr(svc)));
	if (topo == TOPO_NONE)
		return FILTER_UNCHANGED;
	if (!topology_readable(obj, res))
		return FILTER_UNPARSABLE;
	if (res == RES_ENDPOINTS)
		return prune_endpoints(obj, env, topo);
	r = prune(obj, "endpoints", env, topo,
		  res == RES_SLICES_V1 ? v1_endpoint_node : v1beta1_endpoint_node);
	return r > 0 ? FILTER_CHANGED : FILTER_UNCHANGED;
}

bool filter_servicetopology_wants(const struct filter_env *env, enum filter_res res,
				  const struct stream_object *meta)
{
	if (env->no_topology || !env->topology_keys)
		return false;
	return res == RES_ENDPOINTS || filter_bytes_may_hold(meta, SERVICE_NAME_LABEL);
}
