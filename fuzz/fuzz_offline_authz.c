/*
 * fuzz_offline_authz.c - offline writes (src/kube/offline_authz.c): any
 * verb, path, body and User-Agent, with or without credentials of its own,
 * against fixed cached objects of node1 (a pod bound to it, one bound to
 * node2, its Node, its Lease, an Event).  Whatever comes in is either a
 * write the rule lets the node make or changes nothing:
 *
 *  - an allowed kind is one of the allowed kinds for that verb, resource,
 *    subresource and name, as an oracle written apart from the rule reads
 *    them; with credentials of its own, nothing is allowed; and the writes
 *    the node makes every day (its pods' status, its Lease, its Node's
 *    status, Events) are never refused at this step;
 *  - a refusal is a 403 Forbidden with a message and the Status details'
 *    name (or a 400 for a create whose body does not parse);
 *  - a TokenRequest passes only for the service account of the cached pod
 *    bound to node1 that it names, with that pod's uid;
 *  - an update or patch that passes differs from the cached object only
 *    where the rule permits: a status write in status only, of a pod bound
 *    to node1 or of node1's Node; a Node write keeps taints and changes no
 *    label a kubelet may not touch; nothing renames the object; a refused
 *    one yields no new object.
 *
 * The User-Agent is read and given nowhere: the rule must not depend on
 * it (the authorizer takes none).
 *
 * Input: one byte of flags (bit 0: an Authorization header; bits 1-2: the
 * Content-Type), then method, URI, User-Agent and body, NUL-separated.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "kube/offline_authz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NODE "node1"

static const char pod_mine[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"mine\",\"namespace\":"
    "\"default\",\"uid\":\"u-mine\",\"resourceVersion\":\"10\",\"labels\":{\"app\":\"web\"}},"
    "\"spec\":{\"nodeName\":\"node1\",\"serviceAccountName\":\"web-sa\",\"containers\":[{"
    "\"name\":\"web\",\"image\":\"web:1\"}]},\"status\":{\"phase\":\"Running\",\"podIP\":"
    "\"10.0.0.1\",\"podIPs\":[{\"ip\":\"10.0.0.1\"}]}}";
static const char pod_theirs[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"theirs\",\"namespace\":"
    "\"default\",\"uid\":\"u-theirs\",\"resourceVersion\":\"11\"},\"spec\":{\"nodeName\":"
    "\"node2\",\"serviceAccountName\":\"web-sa\",\"containers\":[{\"name\":\"web\",\"image\":"
    "\"web:1\"}]},\"status\":{\"phase\":\"Running\"}}";
static const char node_obj[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"node1\","
    "\"resourceVersion\":\"5\",\"labels\":{\"kubernetes.io/hostname\":\"node1\","
    "\"node-role.kubernetes.io/edge\":\"\",\"example.com/team\":\"a\"}},\"spec\":{\"podCIDR\":"
    "\"10.244.0.0/24\",\"taints\":[{\"key\":\"k\",\"effect\":\"NoSchedule\"}]},\"status\":{"
    "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}";
static const char lease_obj[] =
    "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":"
    "\"node1\",\"namespace\":\"kube-node-lease\",\"resourceVersion\":\"7\"},\"spec\":{"
    "\"holderIdentity\":\"node1\",\"renewTime\":\"2026-01-01T00:00:00.000000Z\"}}";
static const char event_obj[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Event\",\"metadata\":{\"name\":\"e1\",\"namespace\":"
    "\"default\",\"resourceVersion\":\"3\"},\"reason\":\"R\",\"count\":1}";

static const char *const content_types[4] = {"application/strategic-merge-patch+json",
					     "application/merge-patch+json",
					     "application/json-patch+json", "application/json"};

static bool is(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

/* ---- the oracle: what the node may write online, read apart ---- */

static bool core(const struct request_info *ri, const char *res)
{
	return !*ri->api_group && is(ri->resource, res);
}

static bool updates(const struct request_info *ri)
{
	return ri->verb == VERB_UPDATE || ri->verb == VERB_PATCH;
}

static bool own_lease(const struct request_info *ri)
{
	return is(ri->api_group, "coordination.k8s.io") && is(ri->resource, "leases") &&
	       !*ri->subresource && is(ri->namespace, "kube-node-lease");
}

static bool event(const struct request_info *ri)
{
	return is(ri->resource, "events") && !*ri->subresource &&
	       (!*ri->api_group || is(ri->api_group, "events.k8s.io"));
}

/* Whether kind may be what the rule makes of ri. */
static bool kind_fits(enum offline_write_kind kind, const struct request_info *ri)
{
	switch (kind) {
	case OFFLINE_WRITE_POD_STATUS:
		return core(ri, "pods") && is(ri->subresource, "status") && updates(ri);
	case OFFLINE_WRITE_NODE_STATUS:
		return core(ri, "nodes") && is(ri->subresource, "status") && updates(ri) &&
		       is(ri->name, NODE);
	case OFFLINE_WRITE_NODE:
		return core(ri, "nodes") && !*ri->subresource && updates(ri) && is(ri->name, NODE);
	case OFFLINE_WRITE_NODE_CREATE:
		return core(ri, "nodes") && !*ri->subresource && ri->verb == VERB_CREATE;
	case OFFLINE_WRITE_LEASE:
		return own_lease(ri) && updates(ri) && is(ri->name, NODE);
	case OFFLINE_WRITE_LEASE_CREATE:
		return own_lease(ri) && ri->verb == VERB_CREATE;
	case OFFLINE_WRITE_EVENT_CREATE:
		return event(ri) && ri->verb == VERB_CREATE;
	case OFFLINE_WRITE_EVENT:
		return event(ri) && updates(ri);
	case OFFLINE_WRITE_TOKEN:
		return core(ri, "serviceaccounts") && is(ri->subresource, "token") &&
		       ri->verb == VERB_CREATE && *ri->name;
	case OFFLINE_WRITE_DENIED:
		return true;
	}
	return false;
}

/* Writes the node makes all the time: never refused by their attributes. */
static bool always_allowed(const struct request_info *ri)
{
	return (core(ri, "pods") && is(ri->subresource, "status") && updates(ri)) ||
	       (core(ri, "nodes") && is(ri->subresource, "status") && updates(ri) &&
		is(ri->name, NODE)) ||
	       (own_lease(ri) && updates(ri) && is(ri->name, NODE)) || (event(ri) && updates(ri));
}

/* A Node label key a kubelet may touch: not node-restriction's, and in the
 * kubernetes.io and k8s.io domains only the kubelet's own. */
static bool label_ok(const char *key)
{
	const char *slash = strchr(key, '/');
	if (!slash)
		return true;
	char dom[256];
	size_t n = (size_t)(slash - key);
	if (n >= sizeof dom)
		return true; /* no suffix we look for is this long... */
	memcpy(dom, key, n);
	dom[n] = 0;
	size_t d = strlen(dom);
#define ENDS(s)                                                                                    \
	(d >= sizeof(s) - 1 && !strcmp(dom + d - (sizeof(s) - 1), s) &&                            \
	 (d == sizeof(s) - 1 || dom[d - sizeof(s)] == '.'))
	if (ENDS("node-restriction.kubernetes.io"))
		return false;
	if (!ENDS("kubernetes.io") && !ENDS("k8s.io"))
		return true;
	if (ENDS("kubelet.kubernetes.io") || ENDS("node.kubernetes.io"))
		return true;
#undef ENDS
	static const char *const own[] = {"kubernetes.io/hostname",
					  "kubernetes.io/os",
					  "kubernetes.io/arch",
					  "beta.kubernetes.io/os",
					  "beta.kubernetes.io/arch",
					  "beta.kubernetes.io/instance-type",
					  "topology.kubernetes.io/zone",
					  "topology.kubernetes.io/region",
					  "failure-domain.beta.kubernetes.io/zone",
					  "failure-domain.beta.kubernetes.io/region"};
	for (size_t i = 0; i < sizeof own / sizeof *own; i++)
		if (!strcmp(key, own[i]))
			return true;
	return false;
}

/* o without its status (a copy). */
static json_t *without_status(json_t *o)
{
	json_t *c = json_deep_copy(o);
	json_object_del(c, "status");
	return c;
}

static json_t *at(json_t *o, const char *a, const char *b)
{
	json_t *v = json_object_get(o, a);
	return b ? json_object_get(v, b) : v;
}

static bool empty(json_t *v)
{
	return !v || json_is_null(v) || (json_is_array(v) && !json_array_size(v)) ||
	       (json_is_object(v) && !json_object_size(v));
}

static void check_update(const struct request_info *ri, enum offline_write_kind kind,
			 const char *old_text, const struct buf *out)
{
	json_t *old = json_loads(old_text, 0, NULL),
	       *now = json_loadb(out->data, out->len, 0, NULL);
	FZ_CHECK(json_is_object(now));
	json_t *name = at(now, "metadata", "name");
	FZ_CHECK(!name || is(json_string_value(name), ri->name));
	if (kind == OFFLINE_WRITE_POD_STATUS || kind == OFFLINE_WRITE_NODE_STATUS) {
		json_t *a = without_status(old), *b = without_status(now);
		FZ_CHECK(json_equal(a, b)); /* spec and metadata as cached */
		json_decref(a);
		json_decref(b);
		if (kind == OFFLINE_WRITE_POD_STATUS)
			FZ_CHECK(is(json_string_value(at(at(old, "spec", NULL), "nodeName", NULL)),
				    NODE));
	}
	if (kind == OFFLINE_WRITE_NODE) {
		json_t *t0 = at(at(old, "spec", NULL), "taints", NULL),
		       *t1 = at(at(now, "spec", NULL), "taints", NULL);
		FZ_CHECK((empty(t0) && empty(t1)) || json_equal(t0, t1));
		json_t *l0 = at(old, "metadata", "labels"), *l1 = at(now, "metadata", "labels");
		json_t *sides[2] = {l0, l1}, *v;
		const char *key;
		for (int s = 0; s < 2; s++)
			json_object_foreach(sides[s], key, v)
			{
				json_t *other = json_object_get(sides[1 - s], key);
				if (!other || !json_equal(other, v))
					FZ_CHECK(label_ok(key));
			}
	}
	json_decref(old);
	json_decref(now);
}

/* The cached object a write of ri finds, as the offline answers would. */
static const char *cached_for(const struct request_info *ri)
{
	if (core(ri, "pods"))
		return is(ri->name, "mine") ? pod_mine : is(ri->name, "theirs") ? pod_theirs : NULL;
	if (core(ri, "nodes"))
		return is(ri->name, NODE) ? node_obj : NULL;
	if (own_lease(ri))
		return is(ri->name, NODE) ? lease_obj : NULL;
	if (event(ri))
		return is(ri->name, "e1") ? event_obj : NULL;
	return NULL;
}

static void check_refusal(const struct offline_refusal *why, bool create)
{
	FZ_CHECK(why->message != NULL);
	if (why->code == 400)
		FZ_CHECK(create);
	else
		FZ_CHECK(why->code == 403 && is(why->reason, "Forbidden") && why->name != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t flags = data[0];
	data++, size--;
	const uint8_t *f[4] = {NULL, NULL, NULL, NULL};
	size_t len[4] = {0, 0, 0, 0};
	for (int i = 0; i < 4; i++)
		fz_field(&data, &size, &f[i], &len[i]);
	char *method = f[0] ? fz_strndup(f[0], len[0]) : fz_strndup((const uint8_t *)"", 0);
	char *uri = f[1] ? fz_strndup(f[1], len[1]) : fz_strndup((const uint8_t *)"/", 1);
	char *ua = f[2] ? fz_strndup(f[2], len[2]) : NULL; /* given to nothing */
	char *body = f[3] ? fz_strndup(f[3], len[3]) : fz_strndup((const uint8_t *)"", 0);
	size_t body_len = f[3] ? len[3] : 0;
	free(ua);

	struct request_info ri;
	char *err = NULL;
	if (request_info_parse(method, uri, &ri, &err) < 0) {
		free(err);
		goto out;
	}
	struct offline_write w = {.ri = &ri,
				  .node = NODE,
				  .own_credentials = flags & 1,
				  .content_type = content_types[(flags >> 1) & 3],
				  .body = body,
				  .body_len = body_len};
	struct offline_refusal why;
	enum offline_write_kind kind = offline_authz_request(&w, &why);
	bool write = ri.is_resource &&
		     (ri.verb == VERB_CREATE || ri.verb == VERB_UPDATE || ri.verb == VERB_PATCH);
	FZ_CHECK(kind_fits(kind, &ri));
	if (w.own_credentials || !write)
		FZ_CHECK(kind == OFFLINE_WRITE_DENIED);
	else if (always_allowed(&ri))
		FZ_CHECK(kind != OFFLINE_WRITE_DENIED);
	if (kind == OFFLINE_WRITE_DENIED)
		check_refusal(&why, ri.verb == VERB_CREATE);
	else
		FZ_CHECK(why.message == NULL && why.code == 0);
	offline_refusal_free(&why);

	if (kind == OFFLINE_WRITE_TOKEN) {
		char *pod_name = offline_authz_token_pod(&w);
		const char *pod = NULL; /* the pods are cached in default only */
		if (is(ri.namespace, "default"))
			pod = is(pod_name, "mine")     ? pod_mine
			      : is(pod_name, "theirs") ? pod_theirs
						       : NULL;
		if (offline_authz_token(&w, pod, pod ? strlen(pod) : 0, &why) == 0) {
			json_t *tr = json_loadb(body, body_len, 0, NULL);
			FZ_CHECK(pod == pod_mine && is(ri.name, "web-sa"));
			FZ_CHECK(
			    is(json_string_value(at(
				   at(at(tr, "spec", NULL), "boundObjectRef", NULL), "uid", NULL)),
			       "u-mine"));
			json_decref(tr);
		} else {
			check_refusal(&why, true);
		}
		offline_refusal_free(&why);
		free(pod_name);
	} else if (kind != OFFLINE_WRITE_DENIED && ri.verb != VERB_CREATE) {
		const char *old = cached_for(&ri);
		if (old) {
			struct buf res = BUF_INIT;
			if (offline_authz_update(&w, kind, old, strlen(old), &res, &why) == 0)
				check_update(&ri, kind, old, &res);
			else
				FZ_CHECK(res.len == 0 && why.code >= 400 && why.message);
			offline_refusal_free(&why);
			buf_free(&res);
		}
	}
	request_info_free(&ri);
out:
	free(method);
	free(uri);
	free(body);
	return 0;
}
