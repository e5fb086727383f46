/*
 * filter.h - OpenYurt's response filters: what the cloud answers to a node
 * component is rewritten for the node (docs/filters.md).
 *
 * Seven filters, each a pure function over one Kubernetes object (a jansson
 * value it may change or ask to drop), given what the node knows
 * (struct filter_env).  Which of them run for a request is decided by the
 * component, the verb and the resource (filter_select, the default table of
 * YurtHub plus the yurt-hub-cfg configmap's additions, minus what is
 * disabled).  They always run in the order of enum filter_id, so the result
 * never depends on a set's order.
 *
 * This layer parses nothing from the network and does no I/O: the proxy
 * streams a response through them object by object (filter/rewrite.h), and
 * the hub's informers keep struct filter_env current.
 */
#ifndef YURTHUB_FILTER_FILTER_H
#define YURTHUB_FILTER_FILTER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "kube/stream.h"

/* In the order they run. */
enum filter_id {
	FILTER_DISCARDCLOUDSERVICE,   /* drops: cloud LoadBalancer services, the tunnel's */
	FILTER_NODEPORTISOLATION,     /* drops: NodePort services not for this pool */
	FILTER_MASTERSERVICE,	      /* default/kubernetes Service -> the hub */
	FILTER_SERVICETOPOLOGY,	      /* EndpointSlices/Endpoints -> this node's or pool's */
	FILTER_FORWARDKUBESVCTRAFFIC, /* default/kubernetes EndpointSlice -> the hub */
	FILTER_INCLUSTERCONFIG,	      /* kube-system/kube-proxy ConfigMap: no kubeconfig */
	FILTER_SERVICEENVUPDATER,     /* Pods' KUBERNETES_SERVICE_HOST/PORT -> the hub */
	FILTER_COUNT,
};

/* A set of filters, bit i for enum filter_id i. */
typedef unsigned filter_mask;
#define FILTER_BIT(id) (1u << (id))
#define FILTER_ALL     ((1u << FILTER_COUNT) - 1)

/* "masterservice", ... (YurtHub's names); NULL past FILTER_COUNT. */
const char *filter_name(enum filter_id id);
/* The id of a name, or -1. */
int filter_by_name(const char *name);

/* ---- which filters run for a request ---- */

/* What decides it: the defaults of YurtHub's table, the components the
 * yurt-hub-cfg configmap adds per filter, and what is off.  An immutable
 * value: the hub builds a new one when the configmap changes and swaps it
 * in (filter_config_* below). */
struct filter_config {
	filter_mask enabled; /* --enable-resource-filter, --disabled-resource-filters, cloud mode */
	/* per filter: extra components, from the configmap key named after it */
	char **extra[FILTER_COUNT];
	size_t nextra[FILTER_COUNT];
};

/* The filters for (component, verb, resource): component as the hub names
 * it (User-Agent up to '/', lower-cased), verb as request_info_verb() says
 * it ("list", "watch", "get", "patch", ...), resource plural ("services").
 * Each is trimmed of white space, as YurtHub does; the group is not looked
 * at (endpointslices of discovery.k8s.io v1 and v1beta1 are one resource
 * here).  No component, or the hub's own (yurthub, multiplexer-proxy-<node>),
 * gets none.  node_name: for multiplexer-proxy-<node>. */
filter_mask filter_select(const struct filter_config *cfg, const char *node_name,
			  const char *component, const char *verb, const char *resource);

/* The filters (component, verb, resource) may get whatever the configmap
 * says: filter_select() as if the configmap named the component for every
 * filter.  Before the configmap is known, this is what a request may need
 * (the hub's own components still get none). */
filter_mask filter_select_possible(const struct filter_config *cfg, const char *node_name,
				   const char *component, const char *verb, const char *resource);

/* For the flag parser: 0 when every name of --disabled-resource-filters is a
 * filter's name or "*" (names trimmed, empty ones skipped; the retired
 * hostnetworkpropagation is accepted and disables nothing), else -1 and
 * *err = a malloc'ed message naming the first unknown one and listing the
 * valid names. */
int filter_config_check_names(const char *const *names, size_t n, char **err);

/* A configuration: enabled set from the flags; no extras.  enable false:
 * none.  disabled: names as filter_config_check_names() takes them; one "*"
 * among them disables all, in cloud mode too.  cloud_mode also disables
 * discardcloudservice, forwardkubesvctraffic and serviceenvupdater.  0, or
 * -1 (EINVAL) for a name filter_config_check_names() refuses. */
int filter_config_init(struct filter_config *cfg, bool enable, const char *const *disabled,
		       size_t ndisabled, bool cloud_mode);
/* Set the extras from a configmap's data (key -> comma-separated
 * components), replacing any set before; keys that are not filter names are
 * ignored (the legacy filter_<name> too).  Components are trimmed and
 * lower-cased (the request's component is), empty ones skipped; each gets
 * every resource and verb of its filter in the default table.  0, or -1
 * (ENOMEM) with cfg unchanged. */
int filter_config_set_extras(struct filter_config *cfg, const char *const *keys,
			     const char *const *values, size_t n);
void filter_config_free(struct filter_config *cfg);

/* ---- what the filters know of the node and the cluster ---- */

struct filter_env {
	const char *node_name;
	const char *pool_name; /* --nodepool-name, else the node's label; "" unknown */
	/* Where pods reach the hub.  With no host, masterservice,
	 * forwardkubesvctraffic and serviceenvupdater change nothing; a port
	 * that is not a number in 1..65535 is written into no Service or slice. */
	const char *hub_host; /* the dummy IP, or --bind-proxy-address */
	const char *hub_port; /* --proxy-secure-port, as text */
	/* Does hub_port accept pods' connections now (NULL: yes)?  While it
	 * does not (no serving certificate yet), the three filters that point
	 * pods at the hub leave objects as the cloud sent them: an address
	 * that refuses them is worse than the cloud's. */
	bool (*hub_serving)(void *ctx);
	void *hub_serving_ctx;
	bool hub_ipv6;		       /* hub_host is an IPv6 address */
	bool pool_topology;	       /* pool topology on (NodePool or NodeBuckets) */
	const char *const *pool_nodes; /* the nodes of the pool, strcmp order; NULL unknown */
	size_t npool_nodes;
	/* The openyurt.io/topologyKeys annotation of Service ns/name, NULL when
	 * the service or its annotation is not known.  The caller of
	 * filter_apply() holds whatever lock keeps the answer valid for the call. */
	const char *(*topology_keys)(const struct filter_env *env, const char *ns,
				     const char *name);
	void *topology_ctx;
	/* No Service known has the annotation: servicetopology has nothing to do
	 * and need not parse a slice to find out. */
	bool no_topology;
};

/* Is node one of env->pool_nodes (binary search)?  false when they are not
 * known. */
bool filter_env_in_pool(const struct filter_env *env, const char *node);

/* ---- running them ---- */

/* What the objects of a response are: the request's resource (list items
 * carry no kind; every object of one response is of this resource). */
struct filter_target {
	const char *group; /* "" for core */
	const char *version;
	const char *resource; /* plural */
};

enum filter_result {
	FILTER_UNCHANGED,
	FILTER_CHANGED,	   /* obj was changed: encode it again (not said when a
			    * filter found its values there already) */
	FILTER_DROP,	   /* the object is not for this node */
	FILTER_UNPARSABLE, /* a field the filter reads is not of its type: the
			    * object goes on as it came (filter_unparsable_note) */
};

/* Might a filter of mask change or drop this object?  Decided from what the
 * stream decoder picked (namespace, name, kind) and a scan of its bytes
 * (meta->data, meta->len) for the markers the filters act on, without
 * parsing it: most objects of most responses pass on as their bytes.  false
 * means surely not (filter_apply would return FILTER_UNCHANGED); true means
 * parse it and call filter_apply(). */
bool filter_wants(filter_mask mask, const struct filter_env *env, const struct filter_target *t,
		  const struct stream_object *meta);

/* Run the filters of mask on obj (parsed from the object's bytes, the
 * caller's own copy), in order; stops at the first drop.  The filters change
 * obj in place: it must be a private copy, never an object shared with a
 * cache or another client (the proxy parses each object it filters into one
 * of its own, so this holds by construction).  Each filter acts only on the
 * resource it is for (t: core services, endpoints, configmaps, pods;
 * discovery.k8s.io endpointslices, v1, and v1beta1 for servicetopology)
 * and, when obj names its kind, only on that kind (a Table or
 * PartialObjectMetadata passes unchanged).  Out of memory half-way through
 * a change leaves obj valid JSON, partly changed. */
enum filter_result filter_apply(filter_mask mask, const struct filter_env *env,
				const struct filter_target *t, json_t *obj);
/* The same; *by (when not NULL) is the filter that said FILTER_UNPARSABLE
 * or FILTER_DROP.  After FILTER_UNPARSABLE obj may be partly changed: the
 * caller passes on the object's original bytes. */
enum filter_result filter_apply_by(filter_mask mask, const struct filter_env *env,
				   const struct filter_target *t, json_t *obj, enum filter_id *by);
/* The first filter of mask that filter_wants() would run on meta (the
 * one an object no filter can read is counted against), FILTER_COUNT for
 * none. */
enum filter_id filter_first_wanting(filter_mask mask, const struct filter_env *env,
				    const struct filter_target *t,
				    const struct stream_object *meta);

/* ---- objects no filter can read (unparsable.c) ---- */

/* An object filter `by` could not read (why: a NUL in its name, JSON
 * jansson refuses, a field of an unexpected type) went to the client as it
 * came: counted, and logged once per object - by a hash of its bytes, in a
 * bounded memory of the last few thousand, so that kubelet relisting the
 * same odd pod every few seconds logs it once, not once per list.
 * Thread-safe; process-wide. */
void filter_unparsable_note(enum filter_id by, const char *resource, const char *ns,
			    const char *name, const char *data, size_t len, const char *why);
/* Objects passed unfiltered by filter id since the start. */
unsigned long long filter_unparsable_total(enum filter_id id);

#endif
