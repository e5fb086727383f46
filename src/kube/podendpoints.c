/*
 * podendpoints.c - cached endpoints that follow a pod of this node, see
 * podendpoints.h.
 *
 * Everything is done on jansson trees: the object is parsed, the endpoints
 * that target the pod are changed in place (json_object_set on a member that
 * exists keeps its place, new members go last), and the tree is written
 * back compact only when something changed.  jansson keeps object key order
 * since 2.8; JSON_PRESERVE_ORDER is passed for older ones.  jansson bounds
 * the nesting depth of what it parses, so its recursion stays bounded; this
 * file only walks fixed paths.  Reals would be written back with 17
 * significant digits, but no field of these kinds is a real.
 *
 * What is "wrong type" and what happens to it:
 *   pod: members of the wrong type count as absent (only metadata.name is
 *        required).
 *   EndpointSlice: endpoints not an array, an endpoint not an object, a
 *        targetRef not an object: skipped.  The fields this module owns
 *        (addresses, conditions) are written whatever was there before.
 *   Endpoints: subsets not an array, a subset or an entry not an object:
 *        skipped; a subset whose addresses or notReadyAddresses is neither an
 *        array nor absent/null is left alone, as its entries could not be
 *        moved without losing what is there.
 *   metadata neither an object nor absent/null: -1, the object could not
 *        carry the new resourceVersion.
 */
#include "kube/podendpoints.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define DUMP_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER)

/* The string member key of obj, NULL when obj is not an object or the
 * member is absent, not a string, or holds a NUL (documents are parsed with
 * JSON_ALLOW_NUL, so that a "\u0000" elsewhere does not make them
 * unreadable, but a C string must not compare equal to a longer one). */
static const char *str_member(const json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	if (!json_is_string(v))
		return NULL;
	const char *s = json_string_value(v);
	return strlen(s) == json_string_length(v) ? s : NULL;
}

/* ---- the pod ---- */

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

/* ips from status.podIPs[].ip, or status.podIP when that gives none. */
static int read_ips(const json_t *status, struct pod_endpoint_state *s)
{
	json_t *list = json_object_get(status, "podIPs");
	size_t cap = json_array_size(list) + 1; /* + the podIP fallback */
	s->ips = calloc(cap, sizeof *s->ips);
	if (!s->ips)
		return -1;
	size_t i;
	json_t *e;
	json_array_foreach(list, i, e)
	{
		const char *ip = str_member(e, "ip");
		if (!ip || !*ip)
			continue;
		if (!(s->ips[s->n_ips] = strdup(ip)))
			return -1;
		s->n_ips++;
	}
	const char *ip = str_member(status, "podIP");
	if (s->n_ips == 0 && ip && *ip) {
		if (!(s->ips[0] = strdup(ip)))
			return -1;
		s->n_ips = 1;
	}
	return 0;
}

/* status.conditions[type=Ready].status == "True" (the first Ready one). */
static bool ready_condition(const json_t *status)
{
	json_t *list = json_object_get(status, "conditions"), *c;
	size_t i;
	json_array_foreach(list, i, c)
	{
		const char *type = str_member(c, "type");
		if (type && strcmp(type, "Ready") == 0) {
			const char *st = str_member(c, "status");
			return st && strcmp(st, "True") == 0;
		}
	}
	return false;
}

int pod_endpoint_state_parse(const char *pod, size_t len, struct pod_endpoint_state *out)
{
	memset(out, 0, sizeof *out);
	json_t *root = json_loadb(pod, len, JSON_ALLOW_NUL, NULL);
	json_t *meta = json_object_get(root, "metadata");
	const char *name = str_member(meta, "name");
	if (!name || !*name) {
		json_decref(root);
		return -1;
	}
	json_t *status = json_object_get(root, "status");
	json_t *del = json_object_get(meta, "deletionTimestamp");
	out->namespace = dup_or_empty(str_member(meta, "namespace"));
	out->name = dup_or_empty(name);
	out->uid = dup_or_empty(str_member(meta, "uid"));
	out->node_name = dup_or_empty(str_member(json_object_get(root, "spec"), "nodeName"));
	out->terminating = del && !json_is_null(del);
	out->ready = !out->terminating && ready_condition(status);
	int rc = out->namespace && out->name && out->uid && out->node_name ? 0 : -1;
	rc = rc ? rc : read_ips(status, out);
	json_decref(root);
	if (rc)
		pod_endpoint_state_free(out);
	return rc;
}

void pod_endpoint_state_free(struct pod_endpoint_state *s)
{
	free(s->namespace);
	free(s->name);
	free(s->uid);
	free(s->node_name);
	for (size_t i = 0; s->ips && i < s->n_ips; i++)
		free(s->ips[i]);
	free(s->ips);
	memset(s, 0, sizeof *s);
}

bool pod_endpoint_state_differs(const struct pod_endpoint_state *a,
				const struct pod_endpoint_state *b)
{
	if (a->ready != b->ready || a->terminating != b->terminating || a->n_ips != b->n_ips)
		return true;
	for (size_t i = 0; i < a->n_ips; i++)
		if (strcmp(a->ips[i], b->ips[i]) != 0)
			return true;
	return false;
}

/* ---- matching ---- */

static bool is_v6(const char *ip)
{
	return strchr(ip, ':') != NULL;
}

/* The pod's first IP of a family, NULL when it has none. */
static const char *first_ip(const struct pod_endpoint_state *pod, bool v6)
{
	for (size_t i = 0; i < pod->n_ips; i++)
		if (is_v6(pod->ips[i]) == v6)
			return pod->ips[i];
	return NULL;
}

/* Whether the endpoint (slice endpoint or Endpoints address entry) targets
 * the pod; owner_ns is the namespace of the object that holds it. */
static bool targets_pod(const json_t *entry, const char *owner_ns,
			const struct pod_endpoint_state *pod)
{
	json_t *ref = json_object_get(entry, "targetRef");
	const char *kind = str_member(ref, "kind");
	if (!kind || strcmp(kind, "Pod") != 0)
		return false;
	const char *uid = str_member(ref, "uid");
	if (uid && *uid && pod->uid && *pod->uid && strcmp(uid, pod->uid) == 0)
		return true;
	const char *name = str_member(ref, "name"), *ns = str_member(ref, "namespace");
	if (!ns || !*ns)
		ns = owner_ns;
	return name && *name && pod->name && strcmp(name, pod->name) == 0 && pod->namespace &&
	       strcmp(ns, pod->namespace) == 0;
}

/* ---- the objects ---- */

/* Parse an endpoints object; NULL when it is not an object or its metadata
 * is neither an object nor absent/null.  *owner_ns points into the tree. */
static json_t *load(const char *doc, size_t len, const char **owner_ns)
{
	json_t *root = json_loadb(doc, len, JSON_ALLOW_NUL, NULL);
	json_t *meta = json_object_get(root, "metadata");
	if (!json_is_object(root) || (meta && !json_is_object(meta) && !json_is_null(meta))) {
		json_decref(root);
		return NULL;
	}
	const char *ns = str_member(meta, "namespace");
	*owner_ns = ns ? ns : "";
	return root;
}

/* Set metadata.resourceVersion and append the compact tree to out: 1, or -1
 * (out of memory, out untouched). */
static int emit(json_t *root, uint64_t rv, struct buf *out)
{
	json_t *meta = json_object_get(root, "metadata");
	if (!json_is_object(meta)) {
		meta = json_object();
		if (json_object_set_new(root, "metadata", meta) < 0)
			return -1;
	}
	if (json_object_set_new(meta, "resourceVersion", json_sprintf("%" PRIu64, rv)) < 0)
		return -1;
	char *text = json_dumps(root, DUMP_FLAGS);
	int rc = text && buf_append(out, text, strlen(text)) == 0 ? 1 : -1;
	free(text);
	return rc;
}

/* obj.key = val unless it is that boolean already. */
static int set_bool(json_t *obj, const char *key, bool val, bool *changed)
{
	json_t *v = json_object_get(obj, key);
	if (json_is_boolean(v) && json_is_true(v) == val)
		return 0;
	if (json_object_set_new(obj, key, json_boolean(val)) < 0)
		return -1;
	*changed = true;
	return 0;
}

/* A slice endpoint: addresses = [ip] (when ip), and the conditions. */
static int follow_slice_endpoint(json_t *ep, const char *ip, const struct pod_endpoint_state *pod,
				 bool *changed)
{
	json_t *addrs = json_object_get(ep, "addresses");
	json_t *old = json_array_size(addrs) == 1 ? json_array_get(addrs, 0) : NULL;
	if (ip && !(json_is_string(old) && json_string_length(old) == strlen(ip) &&
		    memcmp(json_string_value(old), ip, strlen(ip)) == 0)) {
		json_t *list = json_array();
		if (json_array_append_new(list, json_string(ip)) < 0 ||
		    json_object_set_new(ep, "addresses", list) < 0) {
			json_decref(list);
			return -1;
		}
		*changed = true;
	}
	json_t *cond = json_object_get(ep, "conditions");
	if (!json_is_object(cond)) {
		cond = json_object();
		if (json_object_set_new(ep, "conditions", cond) < 0)
			return -1;
		*changed = true;
	}
	int rc = set_bool(cond, "ready", pod->ready && !pod->terminating, changed);
	rc = rc ? rc : set_bool(cond, "serving", pod->ready, changed);
	rc = rc ? rc : set_bool(cond, "terminating", pod->terminating, changed);
	return rc;
}

int endpointslice_follow_pod(const char *slice, size_t len, const struct pod_endpoint_state *pod,
			     uint64_t rv, struct buf *out)
{
	const char *owner_ns;
	json_t *root = load(slice, len, &owner_ns);
	if (!root)
		return -1;
	const char *type = str_member(root, "addressType");
	bool v6 = type && strcmp(type, "IPv6") == 0;
	if (!type || (!v6 && strcmp(type, "IPv4") != 0)) {
		json_decref(root);
		return 0;
	}
	const char *ip = first_ip(pod, v6);
	bool changed = false;
	int rc = 0;
	json_t *list = json_object_get(root, "endpoints"), *ep;
	size_t i;
	json_array_foreach(list, i, ep)
	{
		if (!json_is_object(ep) || !targets_pod(ep, owner_ns, pod))
			continue;
		if ((rc = follow_slice_endpoint(ep, ip, pod, &changed)) < 0)
			break;
	}
	if (rc == 0 && changed)
		rc = emit(root, rv, out);
	json_decref(root);
	return rc;
}

static const char *const LISTS[2] = {"addresses", "notReadyAddresses"};

/* One subset of an Endpoints: new ips in place, then entries moved between
 * the lists (to the end of the other one) when their readiness changes. */
static int follow_subset(json_t *sub, const char *owner_ns, const struct pod_endpoint_state *pod,
			 bool *changed)
{
	json_t *cur[2];
	for (int k = 0; k < 2; k++) {
		cur[k] = json_object_get(sub, LISTS[k]);
		if (json_is_null(cur[k]))
			cur[k] = NULL;
		else if (cur[k] && !json_is_array(cur[k]))
			return 0;
	}
	int dest_of_pod = pod->ready && !pod->terminating ? 0 : 1;
	/* stay[k]: entries of list k that stay; into[k]: entries moving to k */
	json_t *stay[2] = {json_array(), json_array()}, *into[2] = {json_array(), json_array()};
	int rc = stay[0] && stay[1] && into[0] && into[1] ? 0 : -1;
	bool moved = false;
	for (int k = 0; rc == 0 && k < 2; k++) {
		size_t i;
		json_t *e;
		json_array_foreach(cur[k], i, e)
		{
			int dest = k;
			if (json_is_object(e) && targets_pod(e, owner_ns, pod)) {
				const char *ip = str_member(e, "ip");
				const char *nip = ip ? first_ip(pod, is_v6(ip)) : NULL;
				if (nip && strcmp(ip, nip) != 0) {
					if (json_object_set_new(e, "ip", json_string(nip)) < 0) {
						rc = -1;
						break;
					}
					*changed = true;
				}
				dest = dest_of_pod;
			}
			moved = moved || dest != k;
			if (json_array_append(dest == k ? stay[k] : into[dest], e) < 0) {
				rc = -1;
				break;
			}
		}
	}
	for (int k = 0; rc == 0 && moved && k < 2; k++) {
		rc = json_array_extend(stay[k], into[k]);
		if (rc == 0 && json_array_size(stay[k]) == 0)
			json_object_del(sub, LISTS[k]); /* -1 when it was not there: fine */
		else if (rc == 0)
			rc = json_object_set(sub, LISTS[k], stay[k]);
	}
	if (rc == 0 && moved)
		*changed = true;
	for (int k = 0; k < 2; k++) {
		json_decref(stay[k]);
		json_decref(into[k]);
	}
	return rc;
}

int endpoints_follow_pod(const char *eps, size_t len, const struct pod_endpoint_state *pod,
			 uint64_t rv, struct buf *out)
{
	const char *owner_ns;
	json_t *root = load(eps, len, &owner_ns);
	if (!root)
		return -1;
	bool changed = false;
	int rc = 0;
	json_t *list = json_object_get(root, "subsets"), *sub;
	size_t i;
	json_array_foreach(list, i, sub)
	{
		if (!json_is_object(sub))
			continue;
		if ((rc = follow_subset(sub, owner_ns, pod, &changed)) < 0)
			break;
	}
	if (rc == 0 && changed)
		rc = emit(root, rv, out);
	json_decref(root);
	return rc;
}
