/*
 * offline_authz.c - the rules of offline writes, see offline_authz.h.  The
 * rules and the words of the refusals are those of kube-apiserver's Node
 * authorizer (a refusal there reads "User ... cannot <verb> resource ...")
 * and NodeRestriction admission plugin ("<resource> \"<name>\" is
 * forbidden: node ..."), so that a client sees offline what it would have
 * seen online.
 */
#include "kube/offline_authz.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "kube/patch.h"

#define NODE_LEASE_NAMESPACE "kube-node-lease"

/* Allowed to the node online, not made by the hub offline (mirror pods,
 * evictions, CSRs...): said so, rather than that the node may not. */
#define NOT_OFFLINE "the node may, but the hub does not while the cloud is unreachable"

void offline_refusal_free(struct offline_refusal *r)
{
	free(r->message);
	free(r->name);
	memset(r, 0, sizeof *r);
}

/* ---- refusals ---- */

static bool is(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

static bool is_write(enum req_verb v)
{
	return v == VERB_CREATE || v == VERB_UPDATE || v == VERB_PATCH;
}

/* "pods", "leases.coordination.k8s.io": how the API server names a
 * resource in its messages. */
static int qualified_resource(struct buf *out, const struct request_info *ri)
{
	return *ri->api_group ? buf_printf(out, "%s.%s", ri->resource, ri->api_group)
			      : buf_append_str(out, ri->resource);
}

/* `<resource> "<name>" is forbidden: ` */
static int forbidden_head(struct buf *out, const struct request_info *ri, const char *name)
{
	int rc = qualified_resource(out, ri);
	if (rc == 0 && name && *name)
		rc = buf_printf(out, " \"%s\"", name);
	return rc ? rc : buf_append_str(out, " is forbidden: ");
}

/* `cannot <verb> resource "<res>[/<sub>]" in API group "<g>" in the
 * namespace "<ns>"` or `... at the cluster scope`. */
static int cannot_clause(struct buf *out, const struct request_info *ri)
{
	int rc = buf_printf(out, "cannot %s resource \"%s%s%s\" in API group \"%s\" ",
			    request_info_verb(ri), ri->resource, *ri->subresource ? "/" : "",
			    ri->subresource, ri->api_group);
	if (rc == 0 && *ri->namespace)
		return buf_printf(out, "in the namespace \"%s\"", ri->namespace);
	return rc ? rc : buf_append_str(out, "at the cluster scope");
}

int offline_authz_forbidden_message(struct buf *out, const struct request_info *ri,
				    const char *user)
{
	int rc = forbidden_head(out, ri, ri->name);
	rc = rc ? rc : buf_printf(out, "User \"%s\" ", user);
	return rc ? rc : cannot_clause(out, ri);
}

static void refuse_with(struct offline_refusal *why, int code, const char *reason, const char *name,
			struct buf *msg, int rc)
{
	offline_refusal_free(why);
	why->code = code;
	why->reason = reason;
	why->message = rc == 0 ? buf_steal(msg) : NULL;
	why->name = name ? strdup(name) : NULL;
	buf_free(msg);
}

/* The Node authorizer's refusal (the authorization filter's words), with
 * its reason when it gives one. */
static void refuse_authz(const struct offline_write *w, struct offline_refusal *why,
			 const char *reason)
{
	struct buf msg = BUF_INIT, user = BUF_INIT;
	int rc = buf_printf(&user, "system:node:%s", w->node);
	rc = rc ? rc : offline_authz_forbidden_message(&msg, w->ri, buf_cstr(&user));
	buf_free(&user);
	if (rc == 0 && reason)
		rc = buf_printf(&msg, ": %s", reason);
	refuse_with(why, 403, "Forbidden", w->ri->name, &msg, rc);
}

/* NodeRestriction's refusal of the object name (admission.NewForbidden). */
static void refuse_admission(const struct offline_write *w, struct offline_refusal *why,
			     const char *name, const char *error)
{
	struct buf msg = BUF_INIT;
	int rc = forbidden_head(&msg, w->ri, name);
	rc = rc ? rc : buf_append_str(&msg, error);
	refuse_with(why, 403, "Forbidden", name ? name : "", &msg, rc);
}

/* A write that cannot be made at all (malformed, a conflict). */
static void refuse_plain(struct offline_refusal *why, int code, const char *reason,
			 const char *message)
{
	struct buf msg = BUF_INIT;
	refuse_with(why, code, reason, NULL, &msg, buf_append_str(&msg, message));
}

/* A credential of the client's own: online the cloud judged it (the hub
 * passes it on and adds nothing of its own); offline nobody can. */
static void refuse_credentials(const struct offline_write *w, struct offline_refusal *why)
{
	struct buf msg = BUF_INIT;
	int rc = forbidden_head(&msg, w->ri, w->ri->name);
	rc = rc ? rc : buf_append_str(&msg, "a request with credentials of its own ");
	rc = rc ? rc : cannot_clause(&msg, w->ri);
	rc = rc ? rc
		: buf_append_str(&msg, " while the cloud, which alone can judge them, is "
				       "unreachable");
	refuse_with(why, 403, "Forbidden", w->ri->name, &msg, rc);
}

/* ---- JSON ---- */

static json_t *member(json_t *o, const char *a, const char *b)
{
	json_t *v = json_object_get(o, a);
	return b ? json_object_get(v, b) : v;
}

/* A string member ("" when absent or not a string). */
static const char *str_at(json_t *o, const char *a, const char *b)
{
	const char *s = json_string_value(member(o, a, b));
	return s ? s : "";
}

static json_t *parse_object(const char *text, size_t len)
{
	json_t *o = json_loadb(text, len, 0, NULL);
	if (!json_is_object(o)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* Absent, null, [] and {} alike, as apimachinery's semantic equality
 * takes nil and empty lists and maps to be equal. */
static bool empty_value(json_t *v)
{
	return !v || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0) ||
	       (json_is_object(v) && json_object_size(v) == 0);
}

static bool same_value(json_t *a, json_t *b)
{
	return (empty_value(a) && empty_value(b)) || json_equal(a, b);
}

/* ---- Node labels (NodeRestriction's getForbiddenLabels) ---- */

static const char *label_namespace(const char *key, size_t *len)
{
	const char *slash = strchr(key, '/');
	*len = slash ? (size_t)(slash - key) : 0;
	return key;
}

/* The namespace ns[0..len) is dom or a subdomain of it. */
static bool in_domain(const char *ns, size_t len, const char *dom)
{
	size_t d = strlen(dom);
	if (len == d)
		return !memcmp(ns, dom, d);
	return len > d && ns[len - d - 1] == '.' && !memcmp(ns + len - d, dom, d);
}

bool offline_authz_node_label_ok(const char *key)
{
	static const char *const kubelet_labels[] = {
	    "kubernetes.io/hostname",
	    "topology.kubernetes.io/zone",
	    "topology.kubernetes.io/region",
	    "failure-domain.beta.kubernetes.io/zone",
	    "failure-domain.beta.kubernetes.io/region",
	    "beta.kubernetes.io/instance-type",
	    "node.kubernetes.io/instance-type",
	    "kubernetes.io/os",
	    "kubernetes.io/arch",
	    "beta.kubernetes.io/os",
	    "beta.kubernetes.io/arch",
	};
	size_t len;
	const char *ns = label_namespace(key, &len);
	if (in_domain(ns, len, "node-restriction.kubernetes.io"))
		return false;
	if (!in_domain(ns, len, "kubernetes.io") && !in_domain(ns, len, "k8s.io"))
		return true;
	for (size_t i = 0; i < sizeof kubelet_labels / sizeof *kubelet_labels; i++)
		if (!strcmp(key, kubelet_labels[i]))
			return true;
	return in_domain(ns, len, "kubelet.kubernetes.io") ||
	       in_domain(ns, len, "node.kubernetes.io");
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The labels added, changed or removed between old and now that a kubelet
 * may not touch, sorted and joined by ", " into out; their number. */
static size_t forbidden_labels(json_t *old, json_t *now, struct buf *out)
{
	size_t n = 0, cap = json_object_size(old) + json_object_size(now);
	const char **v = cap ? calloc(cap, sizeof *v) : NULL;
	json_t *sides[2] = {now, old}, *value;
	const char *key;
	for (int s = 0; s < 2 && (v || !cap); s++) {
		json_object_foreach(sides[s], key, value)
		{
			json_t *other = json_object_get(sides[1 - s], key);
			if (other && json_equal(other, value))
				continue;
			if (offline_authz_node_label_ok(key))
				continue;
			bool seen = false;
			for (size_t i = 0; i < n && !seen; i++)
				seen = !strcmp(v[i], key);
			if (!seen && n < cap)
				v[n++] = key;
		}
	}
	if (cap && !v) { /* out of memory: refuse without the list */
		buf_append_str(out, "(unknown)");
		return 1;
	}
	if (n)
		qsort(v, n, sizeof *v, cmp_str);
	for (size_t i = 0; i < n; i++)
		buf_printf(out, "%s%s", i ? ", " : "", v[i]);
	free(v);
	return n;
}

/* ---- step one: the request ---- */

static bool is_event(const struct request_info *ri)
{
	return is(ri->resource, "events") &&
	       (!*ri->api_group || is(ri->api_group, "events.k8s.io"));
}

/* The Node being created: this node's, with no configSource, no label a
 * kubelet may not set. */
static enum offline_write_kind node_create(const struct offline_write *w,
					   struct offline_refusal *why)
{
	json_t *n = parse_object(w->body, w->body_len);
	if (!n) {
		refuse_plain(why, 400, "BadRequest", "the object does not parse");
		return OFFLINE_WRITE_DENIED;
	}
	const char *name = str_at(n, "metadata", "name");
	struct buf err = BUF_INIT, labels = BUF_INIT;
	if (!is(name, w->node))
		buf_printf(&err, "node \"%s\" is not allowed to modify node \"%s\"", w->node, name);
	else if (!empty_value(member(member(n, "spec", NULL), "configSource", NULL)))
		buf_printf(&err,
			   "node \"%s\" is not allowed to create pods with a non-nil configSource",
			   w->node);
	else if (forbidden_labels(NULL, member(n, "metadata", "labels"), &labels))
		buf_printf(&err, "node \"%s\" is not allowed to set the following labels: %s",
			   w->node, buf_cstr(&labels));
	enum offline_write_kind k = OFFLINE_WRITE_NODE_CREATE;
	if (err.len) {
		refuse_admission(w, why, name, buf_cstr(&err));
		k = OFFLINE_WRITE_DENIED;
	}
	buf_free(&err);
	buf_free(&labels);
	json_decref(n);
	return k;
}

static enum offline_write_kind nodes(const struct offline_write *w, struct offline_refusal *why)
{
	const struct request_info *ri = w->ri;
	bool update = ri->verb == VERB_UPDATE || ri->verb == VERB_PATCH;
	if (!*ri->subresource && ri->verb == VERB_CREATE)
		return node_create(w, why);
	if ((*ri->subresource && !is(ri->subresource, "status")) || !update) {
		refuse_authz(w, why, NULL);
		return OFFLINE_WRITE_DENIED;
	}
	if (!is(ri->name, w->node)) {
		struct buf err = BUF_INIT;
		buf_printf(&err, "node \"%s\" is not allowed to modify node \"%s\"", w->node,
			   ri->name);
		refuse_admission(w, why, ri->name, buf_cstr(&err));
		buf_free(&err);
		return OFFLINE_WRITE_DENIED;
	}
	return *ri->subresource ? OFFLINE_WRITE_NODE_STATUS : OFFLINE_WRITE_NODE;
}

static enum offline_write_kind leases(const struct offline_write *w, struct offline_refusal *why)
{
	const struct request_info *ri = w->ri;
	static const char same_name[] =
	    "can only access node lease with the same name as the requesting node";
	if (*ri->subresource) {
		refuse_authz(w, why, NULL);
		return OFFLINE_WRITE_DENIED;
	}
	if (!is(ri->namespace, NODE_LEASE_NAMESPACE)) {
		refuse_authz(w, why,
			     "can only access leases in the \"" NODE_LEASE_NAMESPACE
			     "\" system namespace");
		return OFFLINE_WRITE_DENIED;
	}
	if (ri->verb != VERB_CREATE) {
		if (is(ri->name, w->node))
			return OFFLINE_WRITE_LEASE;
		refuse_authz(w, why, same_name);
		return OFFLINE_WRITE_DENIED;
	}
	json_t *l = parse_object(w->body, w->body_len);
	const char *name = str_at(l, "metadata", "name");
	enum offline_write_kind k = OFFLINE_WRITE_LEASE_CREATE;
	if (!l) {
		refuse_plain(why, 400, "BadRequest", "the object does not parse");
		k = OFFLINE_WRITE_DENIED;
	} else if (!is(name, w->node)) {
		refuse_admission(w, why, name, same_name);
		k = OFFLINE_WRITE_DENIED;
	}
	json_decref(l);
	return k;
}

/* A TokenRequest's spec.boundObjectRef, as NodeRestriction wants it: a v1
 * Pod, named, with a uid.  NULL (and *why) otherwise. */
static json_t *bound_pod_ref(const struct offline_write *w, json_t *tr, struct offline_refusal *why)
{
	json_t *ref = member(tr, "spec", "boundObjectRef");
	if (!json_is_object(ref) || !is(str_at(ref, "apiVersion", NULL), "v1") ||
	    !is(str_at(ref, "kind", NULL), "Pod") || !*str_at(ref, "name", NULL)) {
		refuse_admission(w, why, w->ri->name, "node requested token not bound to a pod");
		return NULL;
	}
	if (!*str_at(ref, "uid", NULL)) {
		refuse_admission(w, why, w->ri->name,
				 "node requested token with a pod binding without a uid");
		return NULL;
	}
	return ref;
}

static enum offline_write_kind service_accounts(const struct offline_write *w,
						struct offline_refusal *why)
{
	const struct request_info *ri = w->ri;
	if (ri->verb != VERB_CREATE || !*ri->name) {
		refuse_authz(w, why, "can only create tokens for individual service accounts");
		return OFFLINE_WRITE_DENIED;
	}
	if (!is(ri->subresource, "token")) {
		refuse_authz(w, why, "can only create token subresource of serviceaccount");
		return OFFLINE_WRITE_DENIED;
	}
	json_t *tr = parse_object(w->body, w->body_len);
	enum offline_write_kind k = OFFLINE_WRITE_TOKEN;
	if (!tr) {
		refuse_plain(why, 400, "BadRequest", "the TokenRequest does not parse");
		k = OFFLINE_WRITE_DENIED;
	} else if (!bound_pod_ref(w, tr, why)) {
		k = OFFLINE_WRITE_DENIED;
	}
	json_decref(tr);
	return k;
}

/* What the Node authorizer says of a write to a resource the node may not
 * write (NULL: it has no opinion, and RBAC gives no reason), or NOT_OFFLINE
 * for one the node may make online. */
static const char *other_resource(const struct request_info *ri)
{
	const char *g = ri->api_group, *r = ri->resource, *sub = ri->subresource;
	bool core = !*g;
	if (core && (is(r, "secrets") || is(r, "configmaps")))
		return "can only read resources of this type";
	if (core && is(r, "persistentvolumeclaims")) {
		if (!is(sub, "status"))
			return "can only get individual resources of this type";
		return ri->verb == VERB_CREATE ? "can only get/update/patch this type"
					       : NOT_OFFLINE;
	}
	if ((core && is(r, "persistentvolumes")) ||
	    (is(g, "resource.k8s.io") && is(r, "resourceclaims")) ||
	    (is(g, "storage.k8s.io") && is(r, "volumeattachments")))
		return "can only get individual resources of this type";
	if (core && is(r, "pods") && ri->verb == VERB_CREATE && (!*sub || is(sub, "eviction")))
		return NOT_OFFLINE; /* mirror pods, evictions */
	if (is(g, "storage.k8s.io") && is(r, "csinodes"))
		return *sub ? "cannot authorize CSINode subresources" : NOT_OFFLINE;
	if (ri->verb == VERB_CREATE && !*sub &&
	    ((is(g, "certificates.k8s.io") && is(r, "certificatesigningrequests")) ||
	     (is(g, "authentication.k8s.io") && is(r, "tokenreviews")) ||
	     (is(g, "authorization.k8s.io") &&
	      (is(r, "subjectaccessreviews") || is(r, "localsubjectaccessreviews")))))
		return NOT_OFFLINE;
	return NULL;
}

enum offline_write_kind offline_authz_request(const struct offline_write *w,
					      struct offline_refusal *why)
{
	const struct request_info *ri = w->ri;
	memset(why, 0, sizeof *why);
	if (!ri->is_resource || !is_write(ri->verb)) {
		refuse_authz(w, why, NULL);
		return OFFLINE_WRITE_DENIED;
	}
	if (w->own_credentials) {
		refuse_credentials(w, why);
		return OFFLINE_WRITE_DENIED;
	}
	if (!w->node || !*w->node) { /* no one's: "" would match the unscheduled pods */
		refuse_authz(w, why, NULL);
		return OFFLINE_WRITE_DENIED;
	}
	bool core = !*ri->api_group;
	if (core && is(ri->resource, "pods") && is(ri->subresource, "status") &&
	    ri->verb != VERB_CREATE)
		return OFFLINE_WRITE_POD_STATUS;
	if (core && is(ri->resource, "nodes"))
		return nodes(w, why);
	if (is(ri->api_group, "coordination.k8s.io") && is(ri->resource, "leases"))
		return leases(w, why);
	if (is_event(ri) && !*ri->subresource)
		return ri->verb == VERB_CREATE ? OFFLINE_WRITE_EVENT_CREATE : OFFLINE_WRITE_EVENT;
	if (core && is(ri->resource, "serviceaccounts"))
		return service_accounts(w, why);
	refuse_authz(w, why, other_resource(ri));
	return OFFLINE_WRITE_DENIED;
}

/* ---- TokenRequest ---- */

char *offline_authz_token_pod(const struct offline_write *w)
{
	json_t *tr = parse_object(w->body, w->body_len);
	const char *name = str_at(member(tr, "spec", "boundObjectRef"), "name", NULL);
	char *out = *name ? strdup(name) : NULL;
	json_decref(tr);
	return out;
}

int offline_authz_token(const struct offline_write *w, const char *pod, size_t pod_len,
			struct offline_refusal *why)
{
	memset(why, 0, sizeof *why);
	json_t *tr = parse_object(w->body, w->body_len);
	json_t *p = pod ? parse_object(pod, pod_len) : NULL;
	json_t *ref = tr ? bound_pod_ref(w, tr, why) : NULL;
	struct buf err = BUF_INIT;
	int rc = -1;
	if (!tr) {
		refuse_plain(why, 400, "BadRequest", "the TokenRequest does not parse");
	} else if (!ref) {
		/* refused by bound_pod_ref */
	} else if (!p) {
		buf_printf(&err, "no relationship found between node '%s' and this object",
			   w->node);
		refuse_authz(w, why, buf_cstr(&err));
	} else if (!is(str_at(p, "spec", "nodeName"), w->node)) {
		refuse_admission(
		    w, why, w->ri->name,
		    "node requested token bound to a pod scheduled on a different node");
	} else if (!is(str_at(p, "spec", "serviceAccountName"), w->ri->name)) {
		buf_printf(&err, "no relationship found between node '%s' and this object",
			   w->node);
		refuse_authz(w, why, buf_cstr(&err));
	} else if (!is(str_at(p, "metadata", "uid"), str_at(ref, "uid", NULL))) {
		buf_printf(&err,
			   "the UID in the bound object reference (%s) does not match the UID in "
			   "record. The object might have been deleted and then recreated",
			   str_at(ref, "uid", NULL));
		refuse_admission(w, why, w->ri->name, buf_cstr(&err));
	} else {
		rc = 0;
	}
	buf_free(&err);
	json_decref(tr);
	json_decref(p);
	return rc;
}

/* ---- step three: updates and patches ---- */

/* The object the update or patch makes of old, whole; NULL with *why. */
static json_t *apply_write(const struct offline_write *w, const char *old, size_t old_len,
			   struct offline_refusal *why)
{
	if (w->ri->verb != VERB_PATCH) {
		json_t *n = parse_object(w->body, w->body_len);
		if (!n)
			refuse_plain(why, 400, "BadRequest", "the object does not parse");
		return n;
	}
	enum patch_type t = patch_type_of(w->content_type);
	if (t == PATCH_UNSUPPORTED) {
		refuse_plain(why, 415, NULL,
			     "this patch type needs the cloud, which is unreachable");
		return NULL;
	}
	struct buf out = BUF_INIT;
	char *err = NULL;
	json_t *n = NULL;
	if (patch_apply(t, old, old_len, w->body, w->body_len, &out, &err) < 0)
		refuse_plain(why, 422, "Invalid", err ? err : "the patch cannot be applied");
	else if (!(n = parse_object(out.data, out.len)))
		refuse_plain(why, 422, "Invalid", "the result is not an object");
	free(err);
	buf_free(&out);
	return n;
}

/* The name and namespace stay those of the URL; an update made from an
 * older copy than the cached one is a conflict (optimistic concurrency). */
static int same_object(const struct offline_write *w, json_t *o, json_t *n,
		       struct offline_refusal *why)
{
	const struct request_info *ri = w->ri;
	json_t *name = member(n, "metadata", "name"), *ns = member(n, "metadata", "namespace");
	struct buf msg = BUF_INIT;
	if (name && !is(json_string_value(name), ri->name)) {
		int rc = buf_printf(
		    &msg, "the name of the object (%s) does not match the name on the URL (%s)",
		    json_is_string(name) ? json_string_value(name) : "?", ri->name);
		refuse_with(why, 400, "BadRequest", NULL, &msg, rc);
		return -1;
	}
	if (ns && !is(json_string_value(ns), ri->namespace)) {
		refuse_plain(why, 400, "BadRequest",
			     "the namespace of the provided object does not match the namespace "
			     "sent on the request");
		return -1;
	}
	const char *rv = str_at(n, "metadata", "resourceVersion");
	if (ri->verb == VERB_UPDATE && *rv && !is(rv, str_at(o, "metadata", "resourceVersion"))) {
		int rc = qualified_resource(&msg, ri);
		rc = rc ? rc
			: buf_printf(&msg,
				     " \"%s\": the object has been modified; please apply your "
				     "changes to the latest version and try again",
				     ri->name);
		struct buf head = BUF_INIT;
		rc = rc ? rc : buf_printf(&head, "Operation cannot be fulfilled on %s", msg.data);
		buf_free(&msg);
		refuse_with(why, 409, "Conflict", ri->name, &head, rc);
		return -1;
	}
	return 0;
}

/* NodeRestriction's rules for an update of this node's Node: 0, or -1
 * with *why. */
static int node_update_ok(const struct offline_write *w, json_t *o, json_t *n,
			  struct offline_refusal *why)
{
	json_t *cs = member(member(n, "spec", NULL), "configSource", NULL);
	struct buf err = BUF_INIT, labels = BUF_INIT;
	if (!empty_value(cs) &&
	    !json_equal(cs, member(member(o, "spec", NULL), "configSource", NULL)))
		buf_printf(&err,
			   "node \"%s\" is not allowed to update configSource to a new non-nil "
			   "configSource",
			   w->node);
	else if (!same_value(member(member(n, "spec", NULL), "taints", NULL),
			     member(member(o, "spec", NULL), "taints", NULL)))
		buf_printf(&err, "node \"%s\" is not allowed to modify taints", w->node);
	else if (forbidden_labels(member(o, "metadata", "labels"), member(n, "metadata", "labels"),
				  &labels))
		buf_printf(&err, "is not allowed to modify labels: %s", buf_cstr(&labels));
	int rc = 0;
	if (err.len) {
		refuse_admission(w, why, w->ri->name, buf_cstr(&err));
		rc = -1;
	}
	buf_free(&err);
	buf_free(&labels);
	return rc;
}

/* The names and claims of status.resourceClaimStatuses: what a node may not
 * change through a pod's status. */
static bool same_claims(json_t *a, json_t *b)
{
	if (json_array_size(a) != json_array_size(b))
		return false;
	for (size_t i = 0; i < json_array_size(a); i++) {
		json_t *x = json_array_get(a, i), *y = json_array_get(b, i);
		if (!json_equal(json_object_get(x, "name"), json_object_get(y, "name")) ||
		    !same_value(json_object_get(x, "resourceClaimName"),
				json_object_get(y, "resourceClaimName")))
			return false;
	}
	return true;
}

/* NodeRestriction's rules for a pod's status: 0, or -1 with *why. */
static int pod_status_ok(const struct offline_write *w, json_t *o, json_t *n,
			 struct offline_refusal *why)
{
	const char *rule = NULL;
	if (!is(str_at(o, "spec", "nodeName"), w->node))
		rule = "can only update pod status for pods with spec.nodeName set to itself";
	else if (!same_value(member(o, "metadata", "labels"), member(n, "metadata", "labels")))
		rule = "cannot update labels through pod status";
	else if (!same_claims(member(o, "status", "resourceClaimStatuses"),
			      member(n, "status", "resourceClaimStatuses")))
		rule = "cannot update resource claim statues"; /* sic, the API server's words */
	if (!rule)
		return 0;
	struct buf err = BUF_INIT;
	buf_printf(&err, "node \"%s\" %s", w->node, rule);
	refuse_admission(w, why, w->ri->name, buf_cstr(&err));
	buf_free(&err);
	return -1;
}

/* The cached object with the new one's status (none if it has none): what
 * a write of the status subresource makes. */
static json_t *status_only(json_t *o, json_t *n)
{
	json_t *r = json_deep_copy(o);
	json_t *st = json_object_get(n, "status");
	if (!r)
		return NULL;
	if (!st) {
		json_object_del(r, "status"); /* -1 only when there was none */
	} else if (json_object_set(r, "status", st) < 0) {
		json_decref(r);
		return NULL;
	}
	return r;
}

int offline_authz_update(const struct offline_write *w, enum offline_write_kind kind,
			 const char *old, size_t old_len, struct buf *out,
			 struct offline_refusal *why)
{
	memset(why, 0, sizeof *why);
	bool status = kind == OFFLINE_WRITE_POD_STATUS || kind == OFFLINE_WRITE_NODE_STATUS;
	if (!status && kind != OFFLINE_WRITE_NODE && kind != OFFLINE_WRITE_LEASE &&
	    kind != OFFLINE_WRITE_EVENT) {
		refuse_authz(w, why, NULL);
		return -1;
	}
	json_t *o = parse_object(old, old_len), *n = NULL, *result = NULL;
	if (!o) {
		refuse_plain(why, 500, NULL, "the cached object does not parse");
		return -1;
	}
	int rc = -1;
	if (!(n = apply_write(w, old, old_len, why)) || same_object(w, o, n, why) < 0)
		goto done;
	if (kind == OFFLINE_WRITE_POD_STATUS && pod_status_ok(w, o, n, why) < 0)
		goto done;
	if ((kind == OFFLINE_WRITE_NODE || kind == OFFLINE_WRITE_NODE_STATUS) &&
	    node_update_ok(w, o, n, why) < 0)
		goto done;
	result = status ? status_only(o, n) : json_incref(n);
	char *text = result ? json_dumps(result, JSON_COMPACT) : NULL;
	if (text && buf_append_str(out, text) == 0)
		rc = 0;
	else
		refuse_plain(why, 500, NULL, "out of memory");
	free(text);
done:
	json_decref(result);
	json_decref(n);
	json_decref(o);
	return rc;
}
