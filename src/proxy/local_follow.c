/*
 * local_follow.c - while the cloud is unreachable, the cached EndpointSlices
 * and Endpoints follow this node's pods.
 *
 * After an offline reboot the node's pods restart with new IPs; kubelet
 * reports them (local.c applies its status patches), but without this the
 * endpoints that kube-proxy and coredns read would keep the dead IPs until
 * the cloud is back.  When a pod of this node (spec.nodeName = --node-name)
 * changes its IPs or readiness, every component's cached copy of every
 * EndpointSlice and Endpoints of the pod's namespace that targets it is
 * rewritten (kube/podendpoints.h) at a local resourceVersion, journaled
 * like any local change: watchers get MODIFIED events, a restart keeps the
 * edits, and the cloud's copies replace them once it is back.  Pods of
 * other nodes are not known here, and their endpoints stay as cached.
 */
#include <stdlib.h>
#include <string.h>

#include "cache/local_changes.h"
#include "kube/podendpoints.h"
#include "proxy/local.h"
#include "proxy/proxy.h"
#include "util/log.h"

/* The two kinds of endpoints, and their rewrites. */
static const struct followed {
	struct store_gvr gvr;
	int (*follow)(const char *obj, size_t len, const struct pod_endpoint_state *pod,
		      uint64_t rv, struct buf *out);
} followed[] = {
    {{"discovery.k8s.io", "v1", "endpointslices"}, endpointslice_follow_pod},
    {{"", "v1", "endpoints"}, endpoints_follow_pod},
};

/* One cached copy that targets the pod: a component's, by name. */
struct copy {
	char *component, *name;
};

struct copies {
	const struct followed *f;
	const struct pod_endpoint_state *pod;
	const char *component;
	struct copy *v;
	size_t n;
};

static int collect(void *ctx, const struct store_key *key, const char *data, size_t len)
{
	struct copies *c = ctx;
	struct buf probe = BUF_INIT;
	int r = c->f->follow(data, len, c->pod, 0, &probe);
	buf_free(&probe);
	if (r != 1)
		return 0;
	struct copy *v = realloc(c->v, (c->n + 1) * sizeof *v);
	if (!v)
		return 1;
	c->v = v;
	v[c->n].component = strdup(c->component);
	v[c->n].name = strdup(key->name);
	if (!v[c->n].component || !v[c->n].name) {
		free(v[c->n].component);
		free(v[c->n].name);
		return 1;
	}
	c->n++;
	return 0;
}

static void copies_free(struct copies *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->v[i].component);
		free(c->v[i].name);
	}
	free(c->v);
}

static enum store_err key_of(struct proxy *p, const struct followed *f, const char *component,
			     const char *ns, const char *name, struct store_key *out)
{
	struct store_key_info info = {component,       f->gvr.group, f->gvr.version,
				      f->gvr.resource, ns,	     name};
	return store_key_build(p->store, &info, out);
}

/* Rewrite the copies of one object (every component's, from i to the last
 * of that name) at one new local rv. */
static void rewrite_object(struct proxy *p, struct copies *c, size_t from, size_t to)
{
	const char *ns = c->pod->namespace;
	size_t n = to - from;
	struct store_key *keys = calloc(n, sizeof *keys);
	size_t built = 0;
	while (keys && built < n &&
	       key_of(p, c->f, c->v[from + built].component, ns, c->v[from + built].name,
		      &keys[built]) == STORE_OK)
		built++;
	uint64_t rv = built == n ? local_changes_claim(p->changes, keys, n) : 0;
	struct buf obj = BUF_INIT, out = BUF_INIT;
	for (size_t i = 0; rv && i < n; i++) {
		buf_reset(&obj);
		buf_reset(&out);
		enum store_err e = store_get(p->store, &keys[i], &obj);
		if (e == STORE_OK && c->f->follow(obj.data, obj.len, c->pod, rv, &out) == 1)
			e = store_update(p->store, &keys[i], out.data, out.len, rv, NULL);
		if (e != STORE_OK)
			local_write_failed(p, &keys[i]);
		if (e != STORE_OK)
			log_warn("offline: %s %s/%s of %s does not follow pod %s: %s",
				 c->f->gvr.resource, ns, c->v[from + i].name,
				 c->v[from + i].component, c->pod->name, store_strerror(e));
	}
	if (!rv)
		log_warn("offline: the %s of pod %s/%s do not follow it (journal not saved)",
			 c->f->gvr.resource, ns, c->pod->name);
	else
		log_v(1, "offline: %s %s/%s follows pod %s (rv %llu, %zu copies)",
		      c->f->gvr.resource, ns, c->v[from].name, c->pod->name, (unsigned long long)rv,
		      n);
	for (size_t i = 0; i < built; i++)
		store_key_free(&keys[i]);
	free(keys);
	buf_free(&obj);
	buf_free(&out);
}

static int by_name(const void *a, const void *b)
{
	const struct copy *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : strcmp(x->component, y->component);
}

static void follow_kind(struct proxy *p, const struct followed *f,
			const struct pod_endpoint_state *pod, const struct component_list *comps)
{
	struct copies c = {f, pod, NULL, NULL, 0};
	for (size_t i = 0; i < comps->n; i++) {
		struct store_key root;
		c.component = comps->v[i];
		if (key_of(p, f, comps->v[i], pod->namespace, "", &root) != STORE_OK)
			continue;
		store_list(p->store, &root, collect, &c);
		store_key_free(&root);
	}
	if (c.n)
		qsort(c.v, c.n, sizeof *c.v, by_name);
	for (size_t i = 0; i < c.n;) {
		size_t j = i + 1;
		while (j < c.n && !strcmp(c.v[j].name, c.v[i].name))
			j++;
		rewrite_object(p, &c, i, j);
		i = j;
	}
	copies_free(&c);
}

void local_follow_pod(struct proxy *p, const char *old, size_t old_len, const char *upd,
		      size_t upd_len)
{
	struct pod_endpoint_state was, now;
	if (!p->node_name || !*p->node_name || pod_endpoint_state_parse(upd, upd_len, &now) < 0)
		return;
	bool differs = true;
	if (pod_endpoint_state_parse(old, old_len, &was) == 0) {
		differs = pod_endpoint_state_differs(&was, &now);
		pod_endpoint_state_free(&was);
	}
	struct component_list comps;
	if (differs && !strcmp(now.node_name, p->node_name) &&
	    local_components(p, NULL, &comps) == 0) {
		for (size_t i = 0; i < sizeof followed / sizeof followed[0]; i++)
			follow_kind(p, &followed[i], &now, &comps);
		local_components_free(&comps);
	}
	pod_endpoint_state_free(&now);
}
