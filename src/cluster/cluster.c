/*
 * cluster.c - the filters' view of the cluster, see cluster.h.
 *
 * One informer per kind of object, each feeding a small index: Services
 * with a topologyKeys annotation (the others are not kept), this node's
 * pool label, the NodePools' and NodeBuckets' node lists, the configmap.
 * Each index is rebuilt by a full list in place: entries are stamped with
 * the list's generation, and what a complete list did not stamp is gone.
 * The pool's node list the filters read is computed again whenever one of
 * its inputs changes, so that a filter never walks the indexes.
 *
 * The start-up rule: a source counts as synced once its first list is in
 * (from the cloud, or from the cache offline; a 404 is an empty list).  A
 * request whose answer a filter may change waits for the sources of its
 * filters (cluster_wait_filters): the connection threads sleep on sync_cv,
 * which each source's first list wakes.  Once all are in, the check is one
 * atomic load.
 */
#include "cluster/cluster.h"

#include <jansson.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/leaderhub.h"
#include "informer/informer.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/strmap.h"

#define CONFIGMAP_NAME	    "yurt-hub-cfg"
#define LEADER_HUB_PREFIX   "leader-hub-"
#define NODEPOOL_LABEL	    "apps.openyurt.io/nodepool"
#define BUCKET_POOL_LABEL   "openyurt.io/pool-name"
#define TOPOLOGY_ANNOTATION "openyurt.io/topologyKeys"

enum source { SRC_CONFIGMAP, SRC_SERVICES, SRC_NODE, SRC_NODEPOOLS, SRC_NODEBUCKETS, SRC_COUNT };
#define SRC_BIT(s) (1u << (s))

/* Sorted, distinct node names. */
struct names {
	char **v;
	size_t n;
};

/* A NodeBucket: the pool it is of, its nodes. */
struct bucket {
	char *pool;
	struct names nodes;
};

struct cluster {
	/* settings, copied */
	char *proxy_url, *user_agent, *node_name, *pool_flag, *namespace, *hub_host, *hub_port;
	bool (*hub_serving)(void *ctx);
	bool enable_node_pool, pool_service_topology, filters_on, cloud_mode, pool_members;
	char **disabled;
	size_t ndisabled;
	void (*on_cache_agents)(void *ctx, const char *const *names, size_t n);
	void (*on_leader_hub)(void *ctx, const struct leader_hub *lh, bool known);
	void (*on_synced)(void *ctx);
	void *ctx;
	unsigned long (*epoch)(void *epoch_ctx);
	void *epoch_ctx;

	/* the leader-hub-<pool> configmaps seen (name -> json_t * of data),
	 * and the data last reported for this node's pool; reported under
	 * leader_lock, which the configmap's and the node's threads share */
	pthread_mutex_t leader_lock;
	struct strmap leader_maps;
	json_t *leader_reported;
	bool leader_reported_once;
	bool leader_known, leader_known_reported; /* a configmaps list was served */

	pthread_rwlock_t lock; /* everything below */
	struct filter_config cfg;
	struct filter_env env;
	struct filter_env_ref ref;
	char *pool_label;	 /* the node's apps.openyurt.io/nodepool */
	uint64_t node_gen;	 /* generation the node was last seen in */
	struct strmap topology;	 /* "ns/name" -> topologyKeys (malloc'ed) */
	struct strmap pools;	 /* NodePool -> struct names * */
	struct strmap buckets;	 /* NodeBucket -> struct bucket * */
	struct names pool_nodes; /* what env.pool_nodes shows */
	uint64_t gen[SRC_COUNT]; /* the list each source is in */
	char *cache_agents;	 /* the configmap's value last reported */
	uint64_t configmap_gen;	 /* the list yurt-hub-cfg was last seen in */
	char *filter_pool;	 /* env.pool_name when filter_gen last moved */

	/* moves whenever what the filters read changes: cluster_filter_gen() */
	atomic_ulong filter_gen;
	/* hub_serving() when cluster_filter_gen() last looked: -1 never */
	atomic_int serving_seen;

	struct informer *inf[SRC_COUNT];

	/* the start-up rule: the sources the settings need (fixed at
	 * cluster_new), those whose first list is in (written under
	 * sync_lock, read anywhere), all of them in */
	unsigned wanted;
	atomic_uint listed;
	atomic_bool all_synced, stopping;
	pthread_mutex_t sync_lock;
	pthread_cond_t sync_cv; /* CLOCK_MONOTONIC */
	int64_t born_ms;	/* cluster_new: for the log of how long it took */
};

static void recompute_leader(struct cluster *c);

/* ---- small helpers ---- */

static void names_free(struct names *n)
{
	for (size_t i = 0; i < n->n; i++)
		free(n->v[i]);
	free(n->v);
	n->v = NULL;
	n->n = 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts and removes duplicates. */
static void names_settle(struct names *n)
{
	if (!n->n)
		return;
	qsort(n->v, n->n, sizeof *n->v, cmp_str);
	size_t out = 1;
	for (size_t i = 1; i < n->n; i++) {
		if (strcmp(n->v[i], n->v[out - 1]))
			n->v[out++] = n->v[i];
		else
			free(n->v[i]);
	}
	n->n = out;
}

static int names_add(struct names *n, const char *s)
{
	char **v = realloc(n->v, (n->n + 1) * sizeof *v);
	if (!v)
		return -1;
	n->v = v;
	if (!(v[n->n] = strdup(s)))
		return -1;
	n->n++;
	return 0;
}

/* The strings of a JSON array, or of one field of each object in it. */
static int names_from_array(struct names *n, json_t *arr, const char *field)
{
	size_t i;
	json_t *el;
	json_array_foreach(arr, i, el)
	{
		const char *s = json_string_value(field ? json_object_get(el, field) : el);
		if (s && names_add(n, s) < 0)
			return -1;
	}
	names_settle(n);
	return 0;
}

static const char *label_of(json_t *obj, const char *key)
{
	json_t *meta = json_object_get(obj, "metadata");
	return json_string_value(json_object_get(json_object_get(meta, "labels"), key));
}

static json_t *parse(const struct stream_object *o)
{
	json_error_t err;
	json_t *obj = json_loadb(o->data, o->len, 0, &err);
	if (!obj || !json_is_object(obj)) {
		log_v(1, "cluster: %s/%s does not parse: %s", o->namespace, o->name,
		      obj ? "not an object" : err.text);
		json_decref(obj);
		return NULL;
	}
	return obj;
}

/* Entries of m that the list of generation gen did not stamp. */
static void sweep(struct strmap *m, uint64_t gen, void (*free_value)(void *))
{
	struct names stale = {NULL, 0};
	struct strmap_entry *e;
	for (size_t it = 0; (e = strmap_next(m, &it));)
		if (e->num < gen && names_add(&stale, e->key) < 0)
			break; /* out of memory: the rest goes with the next list */
	for (size_t i = 0; i < stale.n; i++)
		free_value(strmap_del(m, stale.v[i]));
	names_free(&stale);
}

static void put_stamped(struct strmap *m, const char *key, void *value, uint64_t gen,
			void (*free_value)(void *))
{
	struct strmap_entry *e = strmap_get(m, key);
	if (e) {
		free_value(e->value);
		e->value = value;
	} else if (!(e = strmap_put(m, key, value))) {
		free_value(value);
		return;
	}
	e->num = gen;
}

static void free_names_value(void *v)
{
	if (v)
		names_free(v);
	free(v);
}

static void free_bucket(void *v)
{
	struct bucket *b = v;
	if (!b)
		return;
	free(b->pool);
	names_free(&b->nodes);
	free(b);
}

/* ---- the environment the filters read ---- */

static const char *topology_keys(const struct filter_env *env, const char *ns, const char *name)
{
	struct cluster *c = env->topology_ctx;
	char key[512];
	int n = snprintf(key, sizeof key, "%s/%s", ns, name);
	if (n < 0 || (size_t)n >= sizeof key)
		return NULL; /* no Kubernetes name is that long */
	struct strmap_entry *e = strmap_get(&c->topology, key);
	return e ? e->value : NULL;
}

static const char *current_pool(const struct cluster *c)
{
	if (*c->pool_flag)
		return c->pool_flag;
	return c->pool_label ? c->pool_label : "";
}

/* What the filters read changed: open watches filter again. */
static void inputs_changed(struct cluster *c)
{
	atomic_fetch_add(&c->filter_gen, 1);
}

/* The pool's nodes from the NodePool found by name, or from the pool's
 * NodeBuckets; unknown (NULL) until they are found. */
static void compute_pool(struct cluster *c)
{
	names_free(&c->pool_nodes);
	const char *pool = current_pool(c);
	c->env.pool_name = pool;
	c->env.pool_nodes = NULL;
	c->env.npool_nodes = 0;
	if (!*pool || !c->env.pool_topology)
		return;
	bool found = false;
	if (c->pool_service_topology) {
		struct strmap_entry *e;
		for (size_t it = 0; (e = strmap_next(&c->buckets, &it));) {
			struct bucket *b = e->value;
			if (strcmp(b->pool, pool))
				continue;
			found = true;
			for (size_t i = 0; i < b->nodes.n; i++)
				if (names_add(&c->pool_nodes, b->nodes.v[i]) < 0)
					found = false;
		}
		names_settle(&c->pool_nodes);
	} else {
		struct strmap_entry *e = strmap_get(&c->pools, pool);
		struct names *n = e ? e->value : NULL;
		found = n != NULL;
		for (size_t i = 0; found && i < n->n; i++)
			if (names_add(&c->pool_nodes, n->v[i]) < 0)
				found = false;
	}
	if (!found) {
		names_free(&c->pool_nodes);
		return;
	}
	c->env.pool_nodes = (const char *const *)c->pool_nodes.v;
	c->env.npool_nodes = c->pool_nodes.n;
	/* a pool without nodes has an empty, known list */
	static const char *const no_nodes[1] = {NULL};
	if (!c->env.pool_nodes)
		c->env.pool_nodes = no_nodes;
}

static bool names_equal(const struct names *a, const struct names *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->v[i], b->v[i]))
			return false;
	return true;
}

/* compute_pool(), and inputs_changed() when the pool's name or nodes (or
 * whether they are known) are not what they were: a NodePool's members
 * changed, or the node moved to another pool. */
static void recompute_pool(struct cluster *c)
{
	struct names old = c->pool_nodes;
	bool was_known = c->env.pool_nodes != NULL;
	c->pool_nodes = (struct names){NULL, 0};
	compute_pool(c);
	bool same = was_known == (c->env.pool_nodes != NULL) && names_equal(&old, &c->pool_nodes) &&
		    c->filter_pool && !strcmp(c->filter_pool, c->env.pool_name);
	names_free(&old);
	if (same)
		return;
	free(c->filter_pool);
	c->filter_pool = strdup(c->env.pool_name); /* NULL: differs next time */
	inputs_changed(c);
}

static const struct filter_env *env_hold(void *ctx)
{
	struct cluster *c = ctx;
	pthread_rwlock_rdlock(&c->lock);
	return &c->env;
}

static void env_release(void *ctx)
{
	struct cluster *c = ctx;
	pthread_rwlock_unlock(&c->lock);
}

/* ---- the start-up rule ---- */

static const char *const SOURCE_NAMES[SRC_COUNT] = {
    [SRC_CONFIGMAP] = ("the hub's configmap " CONFIGMAP_NAME),
    [SRC_SERVICES] = "Services (their topology annotations)",
    [SRC_NODE] = "this node's Node (its pool label)",
    [SRC_NODEPOOLS] = "NodePools (the pool's nodes)",
    [SRC_NODEBUCKETS] = "NodeBuckets (the pool's nodes)",
};

/* The first list of s is in: wake the requests waiting for it.  Called by
 * each source's on_list_end, after its index is updated and without the
 * rwlock held. */
static void mark_listed(struct cluster *c, enum source s)
{
	unsigned bit = SRC_BIT(s);
	if (atomic_load(&c->listed) & bit)
		return;
	pthread_mutex_lock(&c->sync_lock);
	unsigned now = atomic_fetch_or(&c->listed, bit) | bit;
	bool all = (now & c->wanted) == c->wanted && !atomic_load(&c->all_synced);
	if (all)
		atomic_store(&c->all_synced, true);
	pthread_cond_broadcast(&c->sync_cv);
	pthread_mutex_unlock(&c->sync_lock);
	if (!all)
		return;
	pthread_rwlock_rdlock(&c->lock);
	char *pool = strdup(current_pool(c));
	pthread_rwlock_unlock(&c->lock);
	if (pool && *pool)
		log_info("cluster: the filters' view is synced, %lld ms after the start: node %s "
			 "is in pool \"%s\"",
			 (long long)(clock_now_ms() - c->born_ms), c->node_name, pool);
	else
		log_info("cluster: the filters' view is synced, %lld ms after the start: node %s "
			 "is in no pool",
			 (long long)(clock_now_ms() - c->born_ms), c->node_name);
	free(pool);
	if (c->on_synced)
		c->on_synced(c->ctx);
}

/* ---- Services: their topologyKeys ---- */

static void services_begin(void *ctx)
{
	struct cluster *c = ctx;
	pthread_rwlock_wrlock(&c->lock);
	c->gen[SRC_SERVICES]++;
	pthread_rwlock_unlock(&c->lock);
}

static void services_object(void *ctx, enum informer_event ev, const struct stream_object *o)
{
	struct cluster *c = ctx;
	char key[512];
	int n = snprintf(key, sizeof key, "%s/%s", o->namespace, o->name);
	if (n < 0 || (size_t)n >= sizeof key)
		return;
	char *keys = NULL;
	if (ev == INFORMER_UPSERT) {
		json_t *obj = parse(o);
		json_t *ann = json_object_get(json_object_get(obj, "metadata"), "annotations");
		const char *v = json_string_value(json_object_get(ann, TOPOLOGY_ANNOTATION));
		keys = v ? strdup(v) : NULL;
		json_decref(obj);
	}
	pthread_rwlock_wrlock(&c->lock);
	struct strmap_entry *e = strmap_get(&c->topology, key);
	const char *was = e ? e->value : NULL;
	if (was ? !keys || strcmp(was, keys) : keys != NULL)
		inputs_changed(c);
	if (keys)
		put_stamped(&c->topology, key, keys, c->gen[SRC_SERVICES], free);
	else
		free(strmap_del(&c->topology, key));
	c->env.no_topology = c->topology.len == 0;
	pthread_rwlock_unlock(&c->lock);
}

static void services_end(void *ctx)
{
	struct cluster *c = ctx;
	pthread_rwlock_wrlock(&c->lock);
	size_t had = c->topology.len;
	sweep(&c->topology, c->gen[SRC_SERVICES], free);
	if (c->topology.len != had)
		inputs_changed(c);
	c->env.no_topology = c->topology.len == 0;
	pthread_rwlock_unlock(&c->lock);
	mark_listed(c, SRC_SERVICES);
}

/* ---- this node: its pool label ---- */

static void node_begin(void *ctx)
{
	struct cluster *c = ctx;
	pthread_rwlock_wrlock(&c->lock);
	c->gen[SRC_NODE]++;
	pthread_rwlock_unlock(&c->lock);
}

static void set_pool_label(struct cluster *c, const char *label)
{
	if (!label && !c->pool_label)
		return;
	if (label && c->pool_label && !strcmp(label, c->pool_label))
		return;
	free(c->pool_label);
	c->pool_label = label ? strdup(label) : NULL;
	if (*current_pool(c))
		log_info("cluster: node %s is in pool \"%s\"", c->node_name, current_pool(c));
	else
		log_info("cluster: node %s is in no pool", c->node_name);
	recompute_pool(c);
}

static void node_object(void *ctx, enum informer_event ev, const struct stream_object *o)
{
	struct cluster *c = ctx;
	if (strcmp(o->name, c->node_name))
		return;
	json_t *obj = ev == INFORMER_UPSERT ? parse(o) : NULL;
	pthread_rwlock_wrlock(&c->lock);
	if (ev == INFORMER_UPSERT) {
		c->node_gen = c->gen[SRC_NODE];
		if (obj)
			set_pool_label(c, label_of(obj, NODEPOOL_LABEL));
	} else {
		set_pool_label(c, NULL);
	}
	pthread_rwlock_unlock(&c->lock);
	json_decref(obj);
	recompute_leader(c); /* the pool may have changed */
}

static void node_end(void *ctx)
{
	struct cluster *c = ctx;
	pthread_rwlock_wrlock(&c->lock);
	if (c->node_gen < c->gen[SRC_NODE])
		set_pool_label(c, NULL);
	pthread_rwlock_unlock(&c->lock);
	mark_listed(c, SRC_NODE); /* before: the leader's log says the pool is known */
	recompute_leader(c);
}

/* ---- NodePools: status.nodes ---- */

static void pools_begin(void *ctx)
{
	struct cluster *c = ctx;
	pthread_rwlock_wrlock(&c->lock);
	c->gen[SRC_NODEPOOLS]++;
	pthread_rwlock_unlock(&c->lock);
}

static void pools_object(void *ctx, enum informer_event ev, const struct stream_object *o)
{
	struct cluster *c = ctx;
	struct names *n = NULL;
	if (ev == INFORMER_UPSERT) {
		json_t *obj = parse(o);
		if (!obj)
			return;
		n = calloc(1, sizeof *n);
		json_t *nodes = json_object_get(json_object_get(obj, "status"), "nodes");
		if (n && names_from_array(n, nodes, NULL) < 0) {
			free_names_value(n);
			n = NULL;
		}
		json_decref(obj);
		if (!n)
			return;
	}
	pthread_rwlock_wrlock(&c->lock);
	if (n)
		put_stamped(&c->pools, o->name, n, c->gen[SRC_NODEPOOLS], free_names_value);
	else
		free_names_value(strmap_del(&c->pools, o->name));
	recompute_pool(c);
	pthread_rwlock_unlock(&c->lock);
}

static void pools_end(void *ctx)
{
	struct cluster *c = ctx;
	pthread_rwlock_wrlock(&c->lock);
	sweep(&c->pools, c->gen[SRC_NODEPOOLS], free_names_value);
	recompute_pool(c);
	pthread_rwlock_unlock(&c->lock);
	mark_listed(c, SRC_NODEPOOLS);
}

/* ---- NodeBuckets: nodes[].name, by their pool label ---- */

static void buckets_begin(void *ctx)
{
	struct cluster *c = ctx;
	pthread_rwlock_wrlock(&c->lock);
	c->gen[SRC_NODEBUCKETS]++;
	pthread_rwlock_unlock(&c->lock);
}

static void buckets_object(void *ctx, enum informer_event ev, const struct stream_object *o)
{
	struct cluster *c = ctx;
	struct bucket *b = NULL;
	if (ev == INFORMER_UPSERT) {
		json_t *obj = parse(o);
		const char *pool = obj ? label_of(obj, BUCKET_POOL_LABEL) : NULL;
		if (pool && (b = calloc(1, sizeof *b)) &&
		    (!(b->pool = strdup(pool)) ||
		     names_from_array(&b->nodes, json_object_get(obj, "nodes"), "name") < 0)) {
			free_bucket(b);
			b = NULL;
		}
		json_decref(obj);
	}
	pthread_rwlock_wrlock(&c->lock);
	if (b)
		put_stamped(&c->buckets, o->name, b, c->gen[SRC_NODEBUCKETS], free_bucket);
	else
		free_bucket(strmap_del(&c->buckets, o->name));
	recompute_pool(c);
	pthread_rwlock_unlock(&c->lock);
}

static void buckets_end(void *ctx)
{
	struct cluster *c = ctx;
	pthread_rwlock_wrlock(&c->lock);
	sweep(&c->buckets, c->gen[SRC_NODEBUCKETS], free_bucket);
	recompute_pool(c);
	pthread_rwlock_unlock(&c->lock);
	mark_listed(c, SRC_NODEBUCKETS);
}

/* ---- the configmap: filter components, cache agents ---- */

/* Reports cache_agents when it changed; value NULL: none. */
static void report_cache_agents(struct cluster *c, const char *value)
{
	if (!value && !c->cache_agents)
		return;
	if (value && c->cache_agents && !strcmp(value, c->cache_agents))
		return;
	free(c->cache_agents);
	c->cache_agents = value ? strdup(value) : NULL;
	struct names n = {NULL, 0};
	if (value) {
		char *copy = strdup(value), *save = NULL;
		for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok;
		     tok = strtok_r(NULL, ",", &save)) {
			while (*tok == ' ' || *tok == '\t')
				tok++;
			size_t len = strlen(tok);
			while (len && (tok[len - 1] == ' ' || tok[len - 1] == '\t'))
				tok[--len] = '\0';
			if (len)
				names_add(&n, tok);
		}
		free(copy);
	}
	log_info("cluster: cache agents from %s: %s", CONFIGMAP_NAME, value ? value : "(none)");
	if (c->on_cache_agents)
		c->on_cache_agents(c->ctx, (const char *const *)n.v, n.n);
	names_free(&n);
}

/* The configuration with data's filter keys (data NULL: the defaults). */
static int apply_configmap(struct cluster *c, json_t *data)
{
	struct filter_config cfg;
	if (filter_config_init(&cfg, c->filters_on, (const char *const *)c->disabled, c->ndisabled,
			       c->cloud_mode) < 0)
		return -1;
	size_t n = json_object_size(data), i = 0;
	const char **keys = calloc(n + 1, sizeof *keys), **values = calloc(n + 1, sizeof *values);
	const char *k;
	json_t *v;
	json_object_foreach(data, k, v)
	{
		if (keys && values && json_is_string(v)) {
			keys[i] = k;
			values[i++] = json_string_value(v);
		}
	}
	int rc = keys && values ? filter_config_set_extras(&cfg, keys, values, i) : -1;
	free(keys);
	free(values);
	if (rc < 0) {
		filter_config_free(&cfg);
		return -1;
	}
	pthread_rwlock_wrlock(&c->lock);
	filter_config_free(&c->cfg);
	c->cfg = cfg;
	pthread_rwlock_unlock(&c->lock);
	return 0;
}

static void configmap_begin(void *ctx)
{
	struct cluster *c = ctx;
	c->gen[SRC_CONFIGMAP]++; /* this and configmap_gen: its informer's thread only */
}

static void configmap_apply(struct cluster *c, json_t *obj)
{
	json_t *data = json_object_get(obj, "data");
	/* cache agents first: a component filtered anew is cached from its
	 * first filtered answer on */
	report_cache_agents(c, json_string_value(json_object_get(data, "cache_agents")));
	if (apply_configmap(c, data) < 0)
		log_error("cluster: out of memory applying %s", CONFIGMAP_NAME);
	else
		log_v(1, "cluster: %s %s", CONFIGMAP_NAME, obj ? "applied" : "gone: defaults");
}

/* ---- the pool's leader-hub configmap ---- */

static void free_json_value(void *v)
{
	json_decref(v);
}

/* The node's pool is known: given, or its Node listed. */
static bool pool_known(const struct cluster *c)
{
	return *c->pool_flag || (atomic_load(&c->listed) & SRC_BIT(SRC_NODE));
}

/* What the leader-hub configmap reported means, said plainly: no
 * "leader-hub-" with an empty name. */
static void log_leader(struct cluster *c, const char *name, bool present)
{
	if (name[strlen(LEADER_HUB_PREFIX)])
		log_info("cluster: %s %s", name, present ? "applied" : "absent");
	else if (pool_known(c))
		log_info("cluster: node %s is in no pool: no leader-hub configmap applies",
			 c->node_name);
	else
		log_info("cluster: the pool of node %s is not known yet: no leader-hub "
			 "configmap applies until its Node is listed",
			 c->node_name);
}

/* Report the leader-hub configmap of this node's pool when its data
 * changed (appeared, changed, or went away).  Any informer thread. */
static void recompute_leader(struct cluster *c)
{
	if (!c->on_leader_hub)
		return;
	pthread_rwlock_rdlock(&c->lock);
	char *name = str_printf(LEADER_HUB_PREFIX "%s", current_pool(c));
	pthread_rwlock_unlock(&c->lock);
	if (!name)
		return;
	pthread_mutex_lock(&c->leader_lock);
	struct strmap_entry *e = strmap_get(&c->leader_maps, name);
	json_t *data = e ? e->value : NULL;
	bool same = c->leader_reported_once && c->leader_known == c->leader_known_reported &&
		    (data ? c->leader_reported && json_equal(data, c->leader_reported)
			  : !c->leader_reported);
	if (!same) {
		struct leader_hub lh;
		const char *get[3] = {NULL, NULL, NULL};
		if (data) {
			get[0] = json_string_value(json_object_get(data, "leaders"));
			get[1] = json_string_value(json_object_get(data, "enable-leader-election"));
			get[2] = json_string_value(json_object_get(data, "pool-scoped-metadata"));
		}
		if (leader_hub_parse(&lh, get[0], get[1], get[2]) == 0) {
			log_leader(c, name, data != NULL);
			c->on_leader_hub(c->ctx, data ? &lh : NULL, c->leader_known);
			leader_hub_free(&lh);
			json_decref(c->leader_reported);
			c->leader_reported = json_incref(data);
			c->leader_reported_once = true;
			c->leader_known_reported = c->leader_known;
		}
	}
	pthread_mutex_unlock(&c->leader_lock);
	free(name);
}

static void leader_map_seen(struct cluster *c, enum informer_event ev,
			    const struct stream_object *o)
{
	json_t *obj = ev == INFORMER_UPSERT ? parse(o) : NULL;
	json_t *data = json_object_get(obj, "data");
	pthread_mutex_lock(&c->leader_lock);
	if (ev == INFORMER_UPSERT)
		put_stamped(&c->leader_maps, o->name, json_incref(data ? data : json_object()),
			    c->gen[SRC_CONFIGMAP], free_json_value);
	else
		free_json_value(strmap_del(&c->leader_maps, o->name));
	pthread_mutex_unlock(&c->leader_lock);
	json_decref(obj);
	recompute_leader(c);
}

static void configmap_object(void *ctx, enum informer_event ev, const struct stream_object *o)
{
	struct cluster *c = ctx;
	if (strcmp(o->namespace, c->namespace))
		return;
	if (c->on_leader_hub && !strncmp(o->name, LEADER_HUB_PREFIX, strlen(LEADER_HUB_PREFIX))) {
		leader_map_seen(c, ev, o);
		return;
	}
	if (strcmp(o->name, CONFIGMAP_NAME))
		return;
	json_t *obj = ev == INFORMER_UPSERT ? parse(o) : NULL;
	if (obj)
		c->configmap_gen = c->gen[SRC_CONFIGMAP];
	configmap_apply(c, obj);
	json_decref(obj);
}

static void configmap_end(void *ctx)
{
	struct cluster *c = ctx;
	if (c->configmap_gen < c->gen[SRC_CONFIGMAP])
		configmap_apply(c, NULL); /* deleted while the hub did not watch */
	mark_listed(c, SRC_CONFIGMAP);
	if (!c->on_leader_hub)
		return;
	pthread_mutex_lock(&c->leader_lock);
	sweep(&c->leader_maps, c->gen[SRC_CONFIGMAP], free_json_value);
	pthread_mutex_unlock(&c->leader_lock);
}

/* Right after configmap_end: rv "" when the list was not served (never
 * cached, and the cloud out of reach): the leader-hub configmap is then
 * unknown, not absent. */
static void configmap_list_rv(void *ctx, const char *rv)
{
	struct cluster *c = ctx;
	if (!c->on_leader_hub)
		return;
	pthread_mutex_lock(&c->leader_lock);
	if (*rv)
		c->leader_known = true;
	pthread_mutex_unlock(&c->leader_lock);
	recompute_leader(c);
}

/* ---- starting and stopping ---- */

static void nothing(void *ctx)
{
	(void)ctx;
}

struct source_def {
	const char *path;
	void (*begin)(void *);
	void (*object)(void *, enum informer_event, const struct stream_object *);
	void (*end)(void *);
};

static const struct source_def sources[SRC_COUNT] = {
    [SRC_CONFIGMAP] = {NULL, configmap_begin, configmap_object, configmap_end},
    [SRC_SERVICES] = {"/api/v1/services", services_begin, services_object, services_end},
    [SRC_NODE] = {"/api/v1/nodes", node_begin, node_object, node_end},
    [SRC_NODEPOOLS] = {"/apis/apps.openyurt.io/v1beta2/nodepools", pools_begin, pools_object,
		       pools_end},
    [SRC_NODEBUCKETS] = {"/apis/apps.openyurt.io/v1alpha1/nodebuckets", buckets_begin,
			 buckets_object, buckets_end},
};

/* Which informers the settings need. */
static bool needs(const struct cluster *c, enum source s)
{
	bool topology = c->cfg.enabled & FILTER_BIT(FILTER_SERVICETOPOLOGY);
	bool isolation = c->cfg.enabled & FILTER_BIT(FILTER_NODEPORTISOLATION);
	switch (s) {
	case SRC_CONFIGMAP:
		return true;
	case SRC_SERVICES:
		return topology;
	case SRC_NODE: /* for the pool's name */
		return !*c->pool_flag &&
		       (topology || isolation || c->on_leader_hub || c->pool_members);
	case SRC_NODEPOOLS:
		return (topology && c->enable_node_pool && !c->pool_service_topology) ||
		       c->pool_members;
	case SRC_NODEBUCKETS:
		return topology && c->pool_service_topology;
	default:
		return false;
	}
}

static int start_source(struct cluster *c, enum source s)
{
	const struct source_def *d = &sources[s];
	struct buf path = BUF_INIT, query = BUF_INIT;
	int rc = 0;
	if (s == SRC_CONFIGMAP) {
		rc = buf_printf(&path, "/api/v1/namespaces/%s/configmaps", c->namespace);
		/* yurt-hub-cfg, and the pools' leader-hub-<pool> (all of them:
		 * the node's pool may change) */
		rc = rc ? rc
			: buf_append_str(
			      &query,
			      c->on_leader_hub
				  ? "labelSelector=openyurt.io%2Fconfigmap-name"
				  : "labelSelector=openyurt.io%2Fconfigmap-name%3D" CONFIGMAP_NAME);
	} else {
		rc = buf_append_str(&path, d->path);
		if (!rc && s == SRC_NODE)
			rc = buf_printf(&query, "fieldSelector=metadata.name%%3D%s", c->node_name);
	}
	struct informer_spec spec = {.path = path.data,
				     .query = query.len ? query.data : NULL,
				     .on_list_begin = d->begin,
				     .on_object = d->object,
				     .on_list_end = d->end,
				     .on_list_abort = nothing,
				     .ctx = c,
				     .on_list_rv = s == SRC_CONFIGMAP ? configmap_list_rv : NULL,
				     .epoch = c->epoch,
				     .epoch_ctx = c->epoch_ctx};
	if (!rc && !(c->inf[s] = informer_start(c->proxy_url, c->user_agent, &spec)))
		rc = -1;
	buf_free(&path);
	buf_free(&query);
	return rc;
}

static char *dup0(const char *s)
{
	return strdup(s ? s : "");
}

static int copy_settings(struct cluster *c, const struct cluster_settings *s)
{
	c->proxy_url = s->proxy_url ? strdup(s->proxy_url) : NULL;
	c->user_agent = dup0(s->user_agent);
	c->node_name = dup0(s->node_name);
	c->pool_flag = dup0(s->pool_name);
	c->namespace = dup0(s->namespace);
	c->hub_host = dup0(s->hub_host);
	c->hub_port = dup0(s->hub_port);
	c->hub_serving = s->hub_serving;
	c->enable_node_pool = s->enable_node_pool;
	c->pool_service_topology = s->pool_service_topology;
	c->filters_on = s->filters_on;
	c->cloud_mode = s->cloud_mode;
	c->on_cache_agents = s->on_cache_agents;
	c->on_leader_hub = s->on_leader_hub;
	c->on_synced = s->on_synced;
	c->pool_members = s->pool_members;
	c->epoch = s->epoch;
	c->epoch_ctx = s->epoch_ctx;
	c->ctx = s->ctx;
	if ((s->proxy_url && !c->proxy_url) || !c->user_agent || !c->node_name || !c->pool_flag ||
	    !c->namespace || !c->hub_host || !c->hub_port)
		return -1;
	if (s->ndisabled && !(c->disabled = calloc(s->ndisabled, sizeof *c->disabled)))
		return -1;
	for (; c->ndisabled < s->ndisabled; c->ndisabled++)
		if (!(c->disabled[c->ndisabled] = strdup(s->disabled[c->ndisabled])))
			return -1;
	return 0;
}

static void init_env(struct cluster *c)
{
	struct filter_env *e = &c->env;
	e->node_name = c->node_name;
	e->hub_host = c->hub_host;
	e->hub_port = c->hub_port;
	e->hub_ipv6 = strchr(c->hub_host, ':') != NULL;
	e->hub_serving = c->hub_serving;
	e->hub_serving_ctx = c->ctx;
	e->pool_topology = c->enable_node_pool || c->pool_service_topology;
	e->topology_keys = topology_keys;
	e->topology_ctx = c;
	e->no_topology = true;
	c->ref = (struct filter_env_ref){env_hold, env_release, c};
	recompute_pool(c);
}

struct cluster *cluster_new(const struct cluster_settings *s)
{
	struct cluster *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	atomic_init(&c->serving_seen, -1);
	if (pthread_rwlock_init(&c->lock, NULL) != 0) {
		free(c);
		return NULL;
	}
	if (pthread_mutex_init(&c->leader_lock, NULL) != 0) {
		pthread_rwlock_destroy(&c->lock);
		free(c);
		return NULL;
	}
	pthread_condattr_t ca;
	bool cv = false;
	if (pthread_condattr_init(&ca) == 0) {
		cv = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
		     pthread_cond_init(&c->sync_cv, &ca) == 0;
		pthread_condattr_destroy(&ca);
	}
	if (!cv || pthread_mutex_init(&c->sync_lock, NULL) != 0) {
		if (cv)
			pthread_cond_destroy(&c->sync_cv);
		pthread_mutex_destroy(&c->leader_lock);
		pthread_rwlock_destroy(&c->lock);
		free(c);
		return NULL;
	}
	c->born_ms = clock_now_ms();
	if (copy_settings(c, s) < 0 ||
	    filter_config_init(&c->cfg, c->filters_on, (const char *const *)c->disabled,
			       c->ndisabled, c->cloud_mode) < 0) {
		cluster_free(c);
		return NULL;
	}
	init_env(c);
	for (enum source src = 0; c->proxy_url && src < SRC_COUNT; src++)
		if (needs(c, src))
			c->wanted |= SRC_BIT(src);
	atomic_store(&c->all_synced, c->wanted == 0);
	return c;
}

int cluster_run(struct cluster *c)
{
	if (!c->proxy_url)
		log_warn("cluster: the proxy port is off: the filters know nothing of the cluster");
	if (!c->wanted) { /* nothing to wait for */
		if (c->on_synced)
			c->on_synced(c->ctx);
		return 0;
	}
	/* last to first: the threads of the node and the configmap, which may
	 * make this hub its pool's leader (and a connection thread then read
	 * inf[SRC_NODEPOOLS]), start after inf[] is written */
	for (int src = SRC_COUNT - 1; src >= 0; src--)
		if ((c->wanted & SRC_BIT(src)) && start_source(c, (enum source)src) < 0)
			return -1;
	return 0;
}

void cluster_free(struct cluster *c)
{
	if (!c)
		return;
	for (enum source s = 0; s < SRC_COUNT; s++)
		informer_stop(c->inf[s]);
	pthread_rwlock_destroy(&c->lock);
	pthread_mutex_destroy(&c->leader_lock);
	pthread_cond_destroy(&c->sync_cv);
	pthread_mutex_destroy(&c->sync_lock);
	filter_config_free(&c->cfg);
	struct strmap_entry *e;
	for (size_t it = 0; (e = strmap_next(&c->leader_maps, &it));)
		json_decref(e->value);
	strmap_free(&c->leader_maps);
	json_decref(c->leader_reported);
	for (size_t it = 0; (e = strmap_next(&c->topology, &it));)
		free(e->value);
	for (size_t it = 0; (e = strmap_next(&c->pools, &it));)
		free_names_value(e->value);
	for (size_t it = 0; (e = strmap_next(&c->buckets, &it));)
		free_bucket(e->value);
	strmap_free(&c->topology);
	strmap_free(&c->pools);
	strmap_free(&c->buckets);
	names_free(&c->pool_nodes);
	for (size_t i = 0; i < c->ndisabled; i++)
		free(c->disabled[i]);
	free(c->disabled);
	free(c->pool_label);
	free(c->filter_pool);
	free(c->cache_agents);
	free(c->proxy_url);
	free(c->user_agent);
	free(c->node_name);
	free(c->pool_flag);
	free(c->namespace);
	free(c->hub_host);
	free(c->hub_port);
	free(c);
}

bool cluster_synced(struct cluster *c)
{
	return atomic_load(&c->all_synced);
}

static int describe(unsigned missing, struct buf *out)
{
	const char *sep = "";
	for (enum source s = 0; s < SRC_COUNT; s++) {
		if (!(missing & SRC_BIT(s)))
			continue;
		if (buf_printf(out, "%s%s", sep, SOURCE_NAMES[s]) < 0)
			return -1;
		sep = ", ";
	}
	return 0;
}

int cluster_describe_missing(struct cluster *c, struct buf *out)
{
	return describe(c->wanted & ~atomic_load(&c->listed), out);
}

/* The sources the filters of mask read (of those the settings need). */
static unsigned inputs_of(const struct cluster *c, filter_mask mask)
{
	unsigned need = mask ? SRC_BIT(SRC_CONFIGMAP) : 0; /* which filters run */
	if (mask & (FILTER_BIT(FILTER_NODEPORTISOLATION) | FILTER_BIT(FILTER_SERVICETOPOLOGY)))
		need |= SRC_BIT(SRC_NODE); /* the pool's name */
	if (mask & FILTER_BIT(FILTER_SERVICETOPOLOGY))
		need |=
		    SRC_BIT(SRC_SERVICES) | SRC_BIT(SRC_NODEBUCKETS) |
		    (c->enable_node_pool && !c->pool_service_topology ? SRC_BIT(SRC_NODEPOOLS) : 0);
	return need & c->wanted;
}

/* What the request needs now: while yurt-hub-cfg is not in, whatever it
 * could add for the component. */
static unsigned request_inputs(struct cluster *c, const char *component, const char *verb,
			       const char *resource)
{
	bool cfg_known = atomic_load(&c->listed) & SRC_BIT(SRC_CONFIGMAP);
	pthread_rwlock_rdlock(&c->lock);
	filter_mask m =
	    cfg_known ? filter_select(&c->cfg, c->node_name, component, verb, resource)
		      : filter_select_possible(&c->cfg, c->node_name, component, verb, resource);
	pthread_rwlock_unlock(&c->lock);
	return inputs_of(c, m);
}

int cluster_wait_filters(struct cluster *c, const char *component, const char *verb,
			 const char *resource, unsigned timeout_ms, struct buf *missing)
{
	if (atomic_load(&c->all_synced))
		return 0;
	unsigned need = request_inputs(c, component, verb, resource);
	if (!need)
		return 0;
	struct timespec deadline;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += timeout_ms / 1000;
	deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	bool timed_out = false;
	pthread_mutex_lock(&c->sync_lock);
	while ((atomic_load(&c->listed) & need) != need && !timed_out &&
	       !atomic_load(&c->stopping)) {
		timed_out =
		    pthread_cond_timedwait(&c->sync_cv, &c->sync_lock, &deadline) == ETIMEDOUT;
		/* the configmap may be in now, and name fewer filters */
		pthread_mutex_unlock(&c->sync_lock);
		need = request_inputs(c, component, verb, resource);
		pthread_mutex_lock(&c->sync_lock);
	}
	unsigned left = need & ~atomic_load(&c->listed);
	pthread_mutex_unlock(&c->sync_lock);
	if (!left)
		return 0;
	if (describe(left, missing) < 0)
		buf_reset(missing);
	return -1;
}

void cluster_stop_waits(struct cluster *c)
{
	pthread_mutex_lock(&c->sync_lock);
	atomic_store(&c->stopping, true);
	pthread_cond_broadcast(&c->sync_cv);
	pthread_mutex_unlock(&c->sync_lock);
}

enum pool_membership cluster_pool_member(struct cluster *c, const char *node, char **pool)
{
	*pool = NULL;
	/* the pool's name comes from the node's label unless given: both
	 * lists must be in */
	struct informer *pools = c->inf[SRC_NODEPOOLS], *self = c->inf[SRC_NODE];
	if (!pools || !informer_synced(pools) || (self && !informer_synced(self)))
		return POOL_MEMBERS_UNKNOWN;
	pthread_rwlock_rdlock(&c->lock);
	const char *name = current_pool(c);
	*pool = strdup(name);
	struct strmap_entry *e = *name ? strmap_get(&c->pools, name) : NULL;
	const struct names *n = e ? e->value : NULL;
	bool member = n && n->n && bsearch(&node, n->v, n->n, sizeof *n->v, cmp_str);
	pthread_rwlock_unlock(&c->lock);
	return member ? POOL_MEMBER : POOL_NOT_MEMBER;
}

filter_mask cluster_filters_for(struct cluster *c, const char *component, const char *verb,
				const char *resource)
{
	pthread_rwlock_rdlock(&c->lock);
	filter_mask m = filter_select(&c->cfg, c->node_name, component, verb, resource);
	pthread_rwlock_unlock(&c->lock);
	return m;
}

/* Whether the secure port serves is an input of masterservice,
 * forwardkubesvctraffic and serviceenvupdater: when it starts serving (a
 * certificate came after the start), the generation moves, and open
 * watches send the rewritten objects.  Looked at here, where every open
 * watch looks at least every half second: the port has no hook into the
 * filters' view.  The first look only notes the state. */
static void note_serving(struct cluster *c)
{
	if (!c->hub_serving)
		return;
	int now = c->hub_serving(c->ctx) ? 1 : 0;
	int was = atomic_load(&c->serving_seen);
	if (was == now) /* the common case: no write to a shared line */
		return;
	was = atomic_exchange(&c->serving_seen, now);
	if (was != -1 && was != now)
		inputs_changed(c);
}

unsigned long cluster_filter_gen(struct cluster *c)
{
	note_serving(c);
	return atomic_load(&c->filter_gen);
}

const struct filter_env_ref *cluster_env_ref(struct cluster *c)
{
	return &c->ref;
}
