/*
 * kubesvc.c - forwardkubesvctraffic (filter.h): the discovery.k8s.io/v1
 * EndpointSlice of default/kubernetes points at the hub, so that kube-proxy
 * sends what pods address to the kubernetes service's ClusterIP (by DNS
 * name or by address) to the hub, not to the cloud's API servers.  Called
 * by filter.c for v1 endpointslices only (YurtHub leaves v1beta1 alone).
 */
#include "filter/filter_internal.h"

/* [{"addresses":[host],"conditions":{"ready":true}}]: nothing else, no node
 * name or target, the hub is on every node. */
static json_t *hub_endpoints(const char *host)
{
	json_t *addresses = json_array(), *conditions = json_object();
	json_t *ep = json_object(), *eps = json_array();

	if (!addresses || !conditions || !ep || !eps ||
	    json_array_append_new(addresses, json_string(host)) < 0 ||
	    json_object_set_new(conditions, "ready", json_true()) < 0 ||
	    json_object_set(ep, "addresses", addresses) < 0 ||
	    json_object_set(ep, "conditions", conditions) < 0 || json_array_append(eps, ep) < 0) {
		json_decref(eps);
		eps = NULL;
	}
	json_decref(addresses);
	json_decref(conditions);
	json_decref(ep);
	return eps;
}

static int set_endpoints(json_t *slice, const char *host)
{
	json_t *eps = hub_endpoints(host);

	if (!eps)
		return -1;
	if (json_equal(eps, json_object_get(slice, "endpoints"))) {
		json_decref(eps);
		return 0;
	}
	return json_object_set_new(slice, "endpoints", eps) == 0 ? 1 : -1;
}

/* The first port named https gets the hub's port. */
static int set_https_port(json_t *slice, long port)
{
	json_t *ports = fj_array(slice, "ports"), *p;
	size_t i;

	if (port < 0)
		return 0;
	json_array_foreach(ports, i, p)
	{
		if (fj_is(fj_string(p, "name"), "https"))
			return fj_set_integer(p, "port", port);
	}
	return 0;
}

enum filter_result filter_forwardkubesvctraffic(const struct filter_env *env, enum filter_res res,
						json_t *slice)
{
	const char *host = filter_hub_host(env);
	bool changed;

	(void)res;
	if (!host || !fj_named(slice, "default", "kubernetes"))
		return FILTER_UNCHANGED;
	if (fj_bad(slice, "addressType", JSON_STRING) || fj_bad(slice, "endpoints", JSON_ARRAY) ||
	    fj_bad(slice, "ports", JSON_ARRAY) ||
	    fj_bad_items(fj_array(slice, "ports"), JSON_OBJECT))
		return FILTER_UNPARSABLE;
	/* A slice of the other family cannot hold the hub's address. */
	if (!fj_is(fj_string(slice, "addressType"), env->hub_ipv6 ? "IPv6" : "IPv4"))
		return FILTER_UNCHANGED;
	changed = set_https_port(slice, filter_hub_port(env)) > 0;
	changed = (set_endpoints(slice, host) > 0) || changed;
	return changed ? FILTER_CHANGED : FILTER_UNCHANGED;
}

bool filter_forwardkubesvctraffic_wants(const struct filter_env *env, enum filter_res res,
					const struct stream_object *meta)
{
	(void)res;
	return filter_hub_host(env) && filter_meta_named(meta, "default", "kubernetes");
}
