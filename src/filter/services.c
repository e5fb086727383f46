/*
 * services.c - the three filters on core Services (filter.h): which
 * services kube-proxy programs on this node (discardcloudservice,
 * nodeportisolation) and where kubelet tells pods the API server is
 * (masterservice).  Called by filter.c for services responses only.
 */
#include "filter/filter_internal.h"

#include <ctype.h>
#include <string.h>

#define DISCARD_ANNOTATION "svc.openyurt.io/discard"
#define LISTEN_ANNOTATION  "nodeport.openyurt.io/listen"

static json_t *service_type(const json_t *svc)
{
	return fj_string(fj_object(svc, "spec"), "type");
}

/* Are the fields the Service filters read of their types (metadata and
 * spec objects, annotations an object of strings (or null, which Go
 * reads as ""), spec.type a string)? */
static bool service_readable(const json_t *svc)
{
	json_t *meta = fj_object(svc, "metadata"), *spec = fj_object(svc, "spec"), *v;
	json_t *annotations = fj_object(meta, "annotations");
	const char *k;

	if (fj_bad(svc, "metadata", JSON_OBJECT) || fj_bad(svc, "spec", JSON_OBJECT) ||
	    fj_bad(meta, "annotations", JSON_OBJECT) || fj_bad(spec, "type", JSON_STRING))
		return false;
	json_object_foreach(annotations, k, v)
	{
		if (!json_is_string(v) && !json_is_null(v)) /* null: Go reads "" */
			return false;
	}
	return true;
}

/* ---- discardcloudservice ---- */

/* A cloud load balancer the node cannot reach, and the tunnel server's
 * in-cloud service: kube-proxy on an edge node must not program them. */
enum filter_result filter_discardcloudservice(const struct filter_env *env, enum filter_res res,
					      json_t *svc)
{
	(void)env;
	(void)res;
	if (!service_readable(svc))
		return FILTER_UNPARSABLE;
	if (fj_is(service_type(svc), "LoadBalancer") &&
	    fj_is(fj_annotation(svc, DISCARD_ANNOTATION), "true"))
		return FILTER_DROP;
	if (fj_named(svc, "kube-system", "x-tunnel-server-internal-svc"))
		return FILTER_DROP;
	return FILTER_UNCHANGED;
}

bool filter_discardcloudservice_wants(const struct filter_env *env, enum filter_res res,
				      const struct stream_object *meta)
{
	(void)env;
	(void)res;
	return filter_meta_named(meta, "kube-system", "x-tunnel-server-internal-svc") ||
	       (filter_bytes_may_hold(meta, "LoadBalancer") &&
		filter_bytes_may_hold(meta, DISCARD_ANNOTATION));
}

/* ---- nodeportisolation ---- */

struct entry {
	const char *s;
	size_t n;
};

static bool entry_is(struct entry e, const char *s, size_t n)
{
	return e.n == n && memcmp(e.s, s, n) == 0;
}

/* The first entry of the comma list v[0..len) whose name (the entry
 * without one leading '-') is name[0..n): found, and *negated says whether
 * it was "-name".  Entries are trimmed, empty names skipped: the first
 * mention of a pool wins, later ones are ignored. */
static bool first_mention(const char *v, size_t len, const char *name, size_t n, bool *negated)
{
	const char *end = v + len;

	for (;;) {
		const char *comma = memchr(v, ',', (size_t)(end - v));
		const char *stop = comma ? comma : end;
		struct entry e = {v, (size_t)(stop - v)};

		while (e.n && isspace((unsigned char)*e.s))
			e.s++, e.n--;
		while (e.n && isspace((unsigned char)e.s[e.n - 1]))
			e.n--;
		*negated = e.n && e.s[0] == '-';
		if (*negated)
			e.s++, e.n--;
		if (e.n && entry_is(e, name, n))
			return true;
		if (!comma)
			return false;
		v = comma + 1;
	}
}

/* Does the service listen in pool?  "P" yes, "-P" no, else "*" yes, else
 * no (an empty list too). */
static bool listens_in(const json_t *annotation, const char *pool)
{
	const char *v = json_is_string(annotation) ? json_string_value(annotation) : "";
	size_t len = json_is_string(annotation) ? json_string_length(annotation) : 0;
	bool negated;

	if (first_mention(v, len, pool, strlen(pool), &negated))
		return !negated;
	if (first_mention(v, len, "*", 1, &negated))
		return !negated;
	return false;
}

/* A NodePort (or LoadBalancer) service that says in which pools its node
 * port is opened: dropped for kube-proxy elsewhere. */
enum filter_result filter_nodeportisolation(const struct filter_env *env, enum filter_res res,
					    json_t *svc)
{
	json_t *type = service_type(svc);
	json_t *annotations = fj_object(fj_object(svc, "metadata"), "annotations");
	json_t *listen = annotations ? json_object_get(annotations, LISTEN_ANNOTATION) : NULL;

	(void)res;
	if (!service_readable(svc))
		return FILTER_UNPARSABLE;
	if (!fj_is(type, "NodePort") && !fj_is(type, "LoadBalancer"))
		return FILTER_UNCHANGED;
	/* Not in a pool: the service stays as Kubernetes made it. */
	if (!listen || !env->pool_name || !*env->pool_name)
		return FILTER_UNCHANGED;
	return listens_in(listen, env->pool_name) ? FILTER_UNCHANGED : FILTER_DROP;
}

bool filter_nodeportisolation_wants(const struct filter_env *env, enum filter_res res,
				    const struct stream_object *meta)
{
	(void)res;
	return env->pool_name && *env->pool_name &&
	       filter_bytes_may_hold(meta, LISTEN_ANNOTATION) &&
	       (filter_bytes_may_hold(meta, "NodePort") ||
		filter_bytes_may_hold(meta, "LoadBalancer"));
}

/* ---- masterservice ---- */

/* clusterIPs is exactly [host]. */
static bool only_ip(const json_t *ips, const char *host)
{
	return json_is_array(ips) && json_array_size(ips) == 1 &&
	       fj_is(json_array_get(ips, 0), host);
}

static int set_cluster_ips(json_t *spec, const char *host)
{
	json_t *ips;

	if (only_ip(json_object_get(spec, "clusterIPs"), host))
		return 0;
	ips = json_array();
	if (!ips || json_array_append_new(ips, json_string(host)) < 0) {
		json_decref(ips);
		return -1;
	}
	return json_object_set_new(spec, "clusterIPs", ips) == 0 ? 1 : -1;
}

/* The first port named https: the one in-cluster clients use. */
static int set_https_port(json_t *spec, long port)
{
	json_t *ports = fj_array(spec, "ports");
	size_t i;
	json_t *p;

	if (port < 0)
		return 0;
	json_array_foreach(ports, i, p)
	{
		if (fj_is(fj_string(p, "name"), "https"))
			return fj_set_integer(p, "port", port);
	}
	return 0;
}

/* default/kubernetes as the hub: kubelet writes the service's address into
 * every pod's KUBERNETES_SERVICE_HOST/PORT, so pods talk to the hub. */
enum filter_result filter_masterservice(const struct filter_env *env, enum filter_res res,
					json_t *svc)
{
	const char *host = filter_hub_host(env);
	json_t *spec = fj_object(svc, "spec");
	bool changed;

	(void)res;
	if (!host || !fj_named(svc, "default", "kubernetes"))
		return FILTER_UNCHANGED;
	/* checked whole before anything is changed */
	if (!spec || fj_bad(spec, "clusterIP", JSON_STRING) ||
	    fj_bad(spec, "clusterIPs", JSON_ARRAY) || fj_bad(spec, "ports", JSON_ARRAY) ||
	    fj_bad_items(fj_array(spec, "ports"), JSON_OBJECT))
		return FILTER_UNPARSABLE;
	changed = fj_set_string(spec, "clusterIP", host) > 0;
	changed = (set_cluster_ips(spec, host) > 0) || changed;
	changed = (set_https_port(spec, filter_hub_port(env)) > 0) || changed;
	return changed ? FILTER_CHANGED : FILTER_UNCHANGED;
}

bool filter_masterservice_wants(const struct filter_env *env, enum filter_res res,
				const struct stream_object *meta)
{
	(void)res;
	return filter_hub_host(env) && filter_meta_named(meta, "default", "kubernetes");
}
