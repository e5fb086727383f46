/*
 * test_offline_authz.c - the rules of offline writes (kube/offline_authz.h):
 * which writes this node may make while the cloud is away, the API
 * server's words for the others, and what an allowed update or patch makes
 * of the cached object (a status write: the status, nothing else).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "kube/offline_authz.h"

#define NODE "node1"

struct req {
	struct request_info ri;
	struct offline_write w;
};

static void req_make(struct req *r, const char *method, const char *uri, const char *body,
		     bool creds, const char *ct)
{
	char *err = NULL;
	memset(r, 0, sizeof *r);
	if (request_info_parse(method, uri, &r->ri, &err) < 0)
		fail_msg("%s %s: %s", method, uri, err);
	r->w.ri = &r->ri;
	r->w.node = NODE;
	r->w.own_credentials = creds;
	r->w.content_type = ct;
	r->w.body = body ? body : "";
	r->w.body_len = body ? strlen(body) : 0;
}

static void req_free(struct req *r)
{
	request_info_free(&r->ri);
}

/* ---- step one: the rule table ---- */

struct rule_case {
	const char *method, *uri, *body;
	bool creds;
	enum offline_write_kind want;
	const char *message; /* exact, for a refusal ("" for any) */
	const char *name;    /* details.name of a refusal */
};

static const struct rule_case rules[] = {
    /* pods: the status of a pod, nothing else */
    {"PATCH", "/api/v1/namespaces/default/pods/web/status", NULL, false, OFFLINE_WRITE_POD_STATUS,
     NULL, NULL},
    {"PUT", "/api/v1/namespaces/default/pods/web/status", NULL, false, OFFLINE_WRITE_POD_STATUS,
     NULL, NULL},
    {"PATCH", "/api/v1/namespaces/default/pods/web", NULL, false, OFFLINE_WRITE_DENIED,
     "pods \"web\" is forbidden: User \"system:node:node1\" cannot patch resource \"pods\" in "
     "API group \"\" in the namespace \"default\"",
     "web"},
    {"PUT", "/api/v1/namespaces/default/pods/web", NULL, false, OFFLINE_WRITE_DENIED,
     "pods \"web\" is forbidden: User \"system:node:node1\" cannot update resource \"pods\" in "
     "API group \"\" in the namespace \"default\"",
     "web"},
    {"PATCH", "/api/v1/namespaces/default/pods/web/ephemeralcontainers", NULL, false,
     OFFLINE_WRITE_DENIED,
     "pods \"web\" is forbidden: User \"system:node:node1\" cannot patch resource "
     "\"pods/ephemeralcontainers\" in API group \"\" in the namespace \"default\"",
     "web"},
    {"POST", "/api/v1/namespaces/default/pods", "{}", false, OFFLINE_WRITE_DENIED,
     "pods is forbidden: User \"system:node:node1\" cannot create resource \"pods\" in API "
     "group \"\" in the namespace \"default\": the node may, but the hub does not while the "
     "cloud is unreachable",
     ""},
    /* whatever its own credentials, offline nobody judges them */
    {"PATCH", "/api/v1/namespaces/default/pods/web/status", NULL, true, OFFLINE_WRITE_DENIED,
     "pods \"web\" is forbidden: a request with credentials of its own cannot patch resource "
     "\"pods/status\" in API group \"\" in the namespace \"default\" while the cloud, which "
     "alone can judge them, is unreachable",
     "web"},
    {"POST", "/api/v1/namespaces/default/events", "{}", true, OFFLINE_WRITE_DENIED, "", ""},
    {"PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node1", NULL, true,
     OFFLINE_WRITE_DENIED, "", "node1"},
    /* secrets and configmaps: read only */
    {"PATCH", "/api/v1/namespaces/default/secrets/app-credentials", NULL, false,
     OFFLINE_WRITE_DENIED,
     "secrets \"app-credentials\" is forbidden: User \"system:node:node1\" cannot patch "
     "resource \"secrets\" in API group \"\" in the namespace \"default\": can only read "
     "resources of this type",
     "app-credentials"},
    {"POST", "/api/v1/namespaces/default/configmaps", "{}", false, OFFLINE_WRITE_DENIED,
     "configmaps is forbidden: User \"system:node:node1\" cannot create resource "
     "\"configmaps\" in API group \"\" in the namespace \"default\": can only read resources "
     "of this type",
     ""},
    {"PATCH", "/apis/apps/v1/namespaces/default/deployments/d", NULL, false, OFFLINE_WRITE_DENIED,
     "deployments.apps \"d\" is forbidden: User \"system:node:node1\" cannot patch resource "
     "\"deployments\" in API group \"apps\" in the namespace \"default\"",
     "d"},
    {"PATCH", "/apis/storage.k8s.io/v1/storageclasses/fast", NULL, false, OFFLINE_WRITE_DENIED,
     "storageclasses.storage.k8s.io \"fast\" is forbidden: User \"system:node:node1\" cannot "
     "patch resource \"storageclasses\" in API group \"storage.k8s.io\" at the cluster scope",
     "fast"},
    /* nodes: this one */
    {"PATCH", "/api/v1/nodes/node1/status", NULL, false, OFFLINE_WRITE_NODE_STATUS, NULL, NULL},
    {"PATCH", "/api/v1/nodes/node1", NULL, false, OFFLINE_WRITE_NODE, NULL, NULL},
    {"PATCH", "/api/v1/nodes/node2/status", NULL, false, OFFLINE_WRITE_DENIED,
     "nodes \"node2\" is forbidden: node \"node1\" is not allowed to modify node \"node2\"",
     "node2"},
    {"PUT", "/api/v1/nodes/node2", NULL, false, OFFLINE_WRITE_DENIED,
     "nodes \"node2\" is forbidden: node \"node1\" is not allowed to modify node \"node2\"",
     "node2"},
    {"PATCH", "/api/v1/nodes/node1/proxy", NULL, false, OFFLINE_WRITE_DENIED,
     "nodes \"node1\" is forbidden: User \"system:node:node1\" cannot patch resource "
     "\"nodes/proxy\" in API group \"\" at the cluster scope",
     "node1"},
    {"POST", "/api/v1/nodes", "{\"metadata\":{\"name\":\"node1\"}}", false,
     OFFLINE_WRITE_NODE_CREATE, NULL, NULL},
    {"POST", "/api/v1/nodes", "{\"metadata\":{\"name\":\"node2\"}}", false, OFFLINE_WRITE_DENIED,
     "nodes \"node2\" is forbidden: node \"node1\" is not allowed to modify node \"node2\"",
     "node2"},
    {"POST", "/api/v1/nodes",
     "{\"metadata\":{\"name\":\"node1\",\"labels\":{\"kubernetes.io/os\":\"linux\","
     "\"node-restriction.kubernetes.io/pci\":\"yes\",\"node-role.kubernetes.io/master\":\"\"}}}",
     false, OFFLINE_WRITE_DENIED,
     "nodes \"node1\" is forbidden: node \"node1\" is not allowed to set the following labels: "
     "node-restriction.kubernetes.io/pci, node-role.kubernetes.io/master",
     "node1"},
    /* leases: this node's, in kube-node-lease */
    {"PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node1", NULL, false,
     OFFLINE_WRITE_LEASE, NULL, NULL},
    {"PATCH", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node1", NULL, false,
     OFFLINE_WRITE_LEASE, NULL, NULL},
    {"PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node2", NULL, false,
     OFFLINE_WRITE_DENIED,
     "leases.coordination.k8s.io \"node2\" is forbidden: User \"system:node:node1\" cannot "
     "update resource \"leases\" in API group \"coordination.k8s.io\" in the namespace "
     "\"kube-node-lease\": can only access node lease with the same name as the requesting "
     "node",
     "node2"},
    {"PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/node1", NULL, false,
     OFFLINE_WRITE_DENIED,
     "leases.coordination.k8s.io \"node1\" is forbidden: User \"system:node:node1\" cannot "
     "update resource \"leases\" in API group \"coordination.k8s.io\" in the namespace "
     "\"kube-system\": can only access leases in the \"kube-node-lease\" system namespace",
     "node1"},
    {"POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
     "{\"metadata\":{\"name\":\"node1\"}}", false, OFFLINE_WRITE_LEASE_CREATE, NULL, NULL},
    {"POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
     "{\"metadata\":{\"name\":\"node2\"}}", false, OFFLINE_WRITE_DENIED,
     "leases.coordination.k8s.io \"node2\" is forbidden: can only access node lease with the "
     "same name as the requesting node",
     "node2"},
    /* events */
    {"POST", "/api/v1/namespaces/default/events", "{}", false, OFFLINE_WRITE_EVENT_CREATE, NULL,
     NULL},
    {"POST", "/apis/events.k8s.io/v1/namespaces/default/events", "{}", false,
     OFFLINE_WRITE_EVENT_CREATE, NULL, NULL},
    {"PATCH", "/api/v1/namespaces/default/events/e1", NULL, false, OFFLINE_WRITE_EVENT, NULL, NULL},
    /* tokens: bound to a pod */
    {"POST", "/api/v1/namespaces/default/serviceaccounts/default/token",
     "{\"spec\":{\"boundObjectRef\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"web\","
     "\"uid\":\"u1\"}}}",
     false, OFFLINE_WRITE_TOKEN, NULL, NULL},
    {"POST", "/api/v1/namespaces/default/serviceaccounts/default/token", "{\"spec\":{}}", false,
     OFFLINE_WRITE_DENIED,
     "serviceaccounts \"default\" is forbidden: node requested token not bound to a pod",
     "default"},
    {"POST", "/api/v1/namespaces/default/serviceaccounts/default/token",
     "{\"spec\":{\"boundObjectRef\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"web\"}}}",
     false, OFFLINE_WRITE_DENIED,
     "serviceaccounts \"default\" is forbidden: node requested token with a pod binding "
     "without a uid",
     "default"},
    {"PUT", "/api/v1/namespaces/default/serviceaccounts/default", NULL, false, OFFLINE_WRITE_DENIED,
     "serviceaccounts \"default\" is forbidden: User \"system:node:node1\" cannot update "
     "resource \"serviceaccounts\" in API group \"\" in the namespace \"default\": can only "
     "create tokens for individual service accounts",
     "default"},
    /* not a write */
    {"DELETE", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node1", NULL, false,
     OFFLINE_WRITE_DENIED, "", "node1"},
};

static void test_rule_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof rules / sizeof *rules; i++) {
		const struct rule_case *c = &rules[i];
		struct req r;
		req_make(&r, c->method, c->uri, c->body, c->creds, "application/json");
		struct offline_refusal why;
		enum offline_write_kind k = offline_authz_request(&r.w, &why);
		if (k != c->want)
			fail_msg("%s %s: kind %d, want %d (%s)", c->method, c->uri, k, c->want,
				 why.message ? why.message : "");
		if (c->want == OFFLINE_WRITE_DENIED) {
			assert_int_equal(why.code, 403);
			assert_string_equal(why.reason, "Forbidden");
			assert_non_null(why.message);
			if (*c->message && strcmp(why.message, c->message))
				fail_msg("%s %s:\n got  %s\n want %s", c->method, c->uri,
					 why.message, c->message);
			assert_non_null(why.name);
			assert_string_equal(why.name, c->name);
		}
		offline_refusal_free(&why);
		req_free(&r);
	}
}

static void test_node_labels(void **state)
{
	(void)state;
	const char *ok[] = {"kubernetes.io/hostname",
			    "kubernetes.io/os",
			    "beta.kubernetes.io/arch",
			    "node.kubernetes.io/instance-type",
			    "node.kubernetes.io/anything",
			    "x.kubelet.kubernetes.io/y",
			    "topology.kubernetes.io/zone",
			    "example.com/team",
			    "plain",
			    "apps.openyurt.io/nodepool"};
	const char *no[] = {"node-role.kubernetes.io/master",
			    "node-restriction.kubernetes.io/x",
			    "a.node-restriction.kubernetes.io/x",
			    "kubernetes.io/role",
			    "k8s.io/x",
			    "x.k8s.io/y",
			    "topology.kubernetes.io/rack"};
	for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
		if (!offline_authz_node_label_ok(ok[i]))
			fail_msg("%s refused", ok[i]);
	for (size_t i = 0; i < sizeof no / sizeof *no; i++)
		if (offline_authz_node_label_ok(no[i]))
			fail_msg("%s allowed", no[i]);
}

/* ---- TokenRequest ---- */

#define TR                                                                                         \
	"{\"kind\":\"TokenRequest\",\"spec\":{\"boundObjectRef\":{\"apiVersion\":\"v1\","          \
	"\"kind\":\"Pod\",\"name\":\"web\",\"uid\":\"u1\"}}}"

static void token_case(const char *sa, const char *pod, int want, const char *message)
{
	struct req r;
	struct buf uri = BUF_INIT;
	buf_printf(&uri, "/api/v1/namespaces/default/serviceaccounts/%s/token", sa);
	req_make(&r, "POST", uri.data, TR, false, "application/json");
	struct offline_refusal why;
	assert_int_equal(offline_authz_request(&r.w, &why), OFFLINE_WRITE_TOKEN);
	offline_refusal_free(&why);
	char *name = offline_authz_token_pod(&r.w);
	assert_string_equal(name, "web");
	free(name);
	int rc = offline_authz_token(&r.w, pod, pod ? strlen(pod) : 0, &why);
	assert_int_equal(rc, want);
	if (want < 0) {
		assert_int_equal(why.code, 403);
		assert_string_equal(why.message, message);
	}
	offline_refusal_free(&why);
	req_free(&r);
	buf_free(&uri);
}

static void test_token(void **state)
{
	(void)state;
	const char *here = "{\"metadata\":{\"name\":\"web\",\"uid\":\"u1\"},\"spec\":{\"nodeName\":"
			   "\"node1\",\"serviceAccountName\":\"web-sa\"}}";
	const char *there =
	    "{\"metadata\":{\"name\":\"web\",\"uid\":\"u1\"},\"spec\":{\"nodeName\":"
	    "\"node2\",\"serviceAccountName\":\"web-sa\"}}";
	const char *other_uid = "{\"metadata\":{\"name\":\"web\",\"uid\":\"u2\"},\"spec\":{"
				"\"nodeName\":\"node1\",\"serviceAccountName\":\"web-sa\"}}";
	token_case("web-sa", here, 0, NULL);
	token_case("admin", here, -1,
		   "serviceaccounts \"admin\" is forbidden: User \"system:node:node1\" cannot "
		   "create resource \"serviceaccounts/token\" in API group \"\" in the namespace "
		   "\"default\": no relationship found between node 'node1' and this object");
	token_case("web-sa", NULL, -1,
		   "serviceaccounts \"web-sa\" is forbidden: User \"system:node:node1\" cannot "
		   "create resource \"serviceaccounts/token\" in API group \"\" in the namespace "
		   "\"default\": no relationship found between node 'node1' and this object");
	token_case("web-sa", there, -1,
		   "serviceaccounts \"web-sa\" is forbidden: node requested token bound to a pod "
		   "scheduled on a different node");
	token_case("web-sa", other_uid, -1,
		   "serviceaccounts \"web-sa\" is forbidden: the UID in the bound object reference "
		   "(u1) does not match the UID in record. The object might have been deleted and "
		   "then recreated");
}

/* ---- updates and patches ---- */

#define POD                                                                                        \
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web\",\"namespace\":"    \
	"\"default\",\"resourceVersion\":\"10\",\"labels\":{\"app\":\"web\"}},\"spec\":{"          \
	"\"nodeName\":\"%s\",\"containers\":[{\"name\":\"web\",\"image\":\"web:1\"}]},"            \
	"\"status\":{\"phase\":\"Running\",\"podIP\":\"10.0.0.1\"}}"

/* Apply method/uri/body to old; 0 with *out parsed, or the refusal code
 * (and its message in *msg, malloc'ed). */
static int update(const char *method, const char *uri, const char *ct, const char *body,
		  enum offline_write_kind kind, const char *old, json_t **out, char **msg)
{
	struct req r;
	req_make(&r, method, uri, body, false, ct);
	struct offline_refusal why;
	assert_int_equal(offline_authz_request(&r.w, &why), kind);
	offline_refusal_free(&why);
	struct buf res = BUF_INIT;
	int code = 0;
	*out = NULL;
	if (msg)
		*msg = NULL;
	if (offline_authz_update(&r.w, kind, old, strlen(old), &res, &why) == 0) {
		assert_int_equal(why.code, 0);
		*out = json_loadb(res.data, res.len, 0, NULL);
		assert_non_null(*out);
	} else {
		assert_int_equal(res.len, 0);
		code = why.code;
		if (msg)
			*msg = why.message ? strdup(why.message) : NULL;
	}
	offline_refusal_free(&why);
	buf_free(&res);
	req_free(&r);
	return code;
}

static const char *str(json_t *o, const char *a, const char *b)
{
	json_t *v = json_object_get(o, a);
	return json_string_value(b ? json_object_get(v, b) : v);
}

static void test_pod_status_patch_changes_status_only(void **state)
{
	(void)state;
	char old[1024], *msg = NULL;
	snprintf(old, sizeof old, POD, NODE);
	const char *patch =
	    "{\"metadata\":{\"annotations\":{\"x\":\"y\"}},\"spec\":{\"containers\":"
	    "[{\"name\":\"web\",\"image\":\"attacker.example/evil:latest\"}]},"
	    "\"status\":{\"podIP\":\"10.0.0.9\"}}";
	json_t *n;
	assert_int_equal(update("PATCH", "/api/v1/namespaces/default/pods/web/status",
				"application/strategic-merge-patch+json", patch,
				OFFLINE_WRITE_POD_STATUS, old, &n, &msg),
			 0);
	json_t *o = json_loads(old, 0, NULL);
	assert_string_equal(str(json_object_get(n, "status"), "podIP", NULL), "10.0.0.9");
	assert_true(json_equal(json_object_get(n, "spec"), json_object_get(o, "spec")));
	assert_true(json_equal(json_object_get(n, "metadata"), json_object_get(o, "metadata")));
	json_decref(n);
	json_decref(o);

	/* a whole pod PUT to the status: the same */
	free(msg);
	const char *put = "{\"metadata\":{\"name\":\"web\",\"namespace\":\"default\","
			  "\"labels\":{\"app\":\"web\"}},\"spec\":{"
			  "\"nodeName\":\"node9\"},\"status\":{\"phase\":\"Failed\"}}";
	assert_int_equal(update("PUT", "/api/v1/namespaces/default/pods/web/status",
				"application/json", put, OFFLINE_WRITE_POD_STATUS, old, &n, NULL),
			 0);
	assert_string_equal(str(n, "spec", "nodeName"), NODE);
	assert_string_equal(str(json_object_get(n, "status"), "phase", NULL), "Failed");
	assert_null(json_object_get(json_object_get(n, "status"), "podIP"));
	json_decref(n);
}

static void test_pod_status_refused(void **state)
{
	(void)state;
	char other[1024], mine[1024];
	snprintf(other, sizeof other, POD, "node2");
	snprintf(mine, sizeof mine, POD, NODE);
	json_t *n;
	char *msg;
	assert_int_equal(update("PATCH", "/api/v1/namespaces/default/pods/web/status",
				"application/merge-patch+json",
				"{\"status\":{\"podIP\":\"1.2.3.4\"}}", OFFLINE_WRITE_POD_STATUS,
				other, &n, &msg),
			 403);
	assert_string_equal(msg, "pods \"web\" is forbidden: node \"node1\" can only update pod "
				 "status for pods with spec.nodeName set to itself");
	free(msg);
	assert_int_equal(update("PATCH", "/api/v1/namespaces/default/pods/web/status",
				"application/merge-patch+json",
				"{\"metadata\":{\"labels\":{\"app\":\"evil\"}}}",
				OFFLINE_WRITE_POD_STATUS, mine, &n, &msg),
			 403);
	assert_string_equal(msg, "pods \"web\" is forbidden: node \"node1\" cannot update labels "
				 "through pod status");
	free(msg);
	/* malformed, unsupported, a conflict, another name */
	assert_int_equal(update("PATCH", "/api/v1/namespaces/default/pods/web/status",
				"application/apply-patch+yaml", "status: {}",
				OFFLINE_WRITE_POD_STATUS, mine, &n, NULL),
			 415);
	assert_int_equal(update("PATCH", "/api/v1/namespaces/default/pods/web/status",
				"application/json-patch+json",
				"[{\"op\":\"remove\",\"path\":\"/x\"}]", OFFLINE_WRITE_POD_STATUS,
				mine, &n, NULL),
			 422);
	assert_int_equal(update("PUT", "/api/v1/namespaces/default/pods/web/status",
				"application/json", "[1]", OFFLINE_WRITE_POD_STATUS, mine, &n,
				NULL),
			 400);
	assert_int_equal(update("PUT", "/api/v1/namespaces/default/pods/web/status",
				"application/json",
				"{\"metadata\":{\"name\":\"web\",\"resourceVersion\":\"9\"}}",
				OFFLINE_WRITE_POD_STATUS, mine, &n, &msg),
			 409);
	assert_string_equal(msg, "Operation cannot be fulfilled on pods \"web\": the object has "
				 "been modified; please apply your changes to the latest version "
				 "and try again");
	free(msg);
	assert_int_equal(update("PUT", "/api/v1/namespaces/default/pods/web/status",
				"application/json", "{\"metadata\":{\"name\":\"other\"}}",
				OFFLINE_WRITE_POD_STATUS, mine, &n, NULL),
			 400);
}

#define NODE_OBJ                                                                                   \
	"{\"metadata\":{\"name\":\"node1\",\"resourceVersion\":\"5\",\"labels\":{"                 \
	"\"kubernetes.io/hostname\":\"node1\",\"node-role.kubernetes.io/edge\":\"\"}},"            \
	"\"spec\":{\"podCIDR\":\"10.244.0.0/24\",\"taints\":[{\"key\":\"k\",\"effect\":"           \
	"\"NoSchedule\"}]},\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}" \
	"}"

static void test_node_writes(void **state)
{
	(void)state;
	json_t *n;
	char *msg;
	/* status: the status, spec and labels of the patch dropped */
	assert_int_equal(update("PATCH", "/api/v1/nodes/node1/status",
				"application/merge-patch+json",
				"{\"spec\":{\"podCIDR\":\"1.0.0.0/8\"},\"metadata\":{\"labels\":{"
				"\"example.com/x\":\"y\"}},\"status\":{\"phase\":\"Up\"}}",
				OFFLINE_WRITE_NODE_STATUS, NODE_OBJ, &n, NULL),
			 0);
	assert_string_equal(str(n, "spec", "podCIDR"), "10.244.0.0/24");
	assert_null(json_object_get(json_object_get(json_object_get(n, "metadata"), "labels"),
				    "example.com/x"));
	assert_string_equal(str(n, "status", "phase"), "Up");
	json_decref(n);
	/* the Node: labels a kubelet may set, nothing else */
	assert_int_equal(update("PATCH", "/api/v1/nodes/node1", "application/merge-patch+json",
				"{\"metadata\":{\"labels\":{\"example.com/x\":\"y\","
				"\"node.kubernetes.io/exclude\":\"true\"}}}",
				OFFLINE_WRITE_NODE, NODE_OBJ, &n, NULL),
			 0);
	assert_string_equal(str(json_object_get(n, "metadata"), "labels", "example.com/x"), "y");
	json_decref(n);
	assert_int_equal(update("PATCH", "/api/v1/nodes/node1", "application/merge-patch+json",
				"{\"metadata\":{\"labels\":{\"node-role.kubernetes.io/edge\":null,"
				"\"node-role.kubernetes.io/master\":\"\"}}}",
				OFFLINE_WRITE_NODE, NODE_OBJ, &n, &msg),
			 403);
	assert_string_equal(msg, "nodes \"node1\" is forbidden: is not allowed to modify labels: "
				 "node-role.kubernetes.io/edge, node-role.kubernetes.io/master");
	free(msg);
	assert_int_equal(update("PATCH", "/api/v1/nodes/node1", "application/merge-patch+json",
				"{\"spec\":{\"taints\":null}}", OFFLINE_WRITE_NODE, NODE_OBJ, &n,
				&msg),
			 403);
	assert_string_equal(msg,
			    "nodes \"node1\" is forbidden: node \"node1\" is not allowed to modify "
			    "taints");
	free(msg);
	/* through the status too, as NodeRestriction sees the whole object */
	assert_int_equal(update("PATCH", "/api/v1/nodes/node1/status",
				"application/merge-patch+json", "{\"spec\":{\"taints\":[]}}",
				OFFLINE_WRITE_NODE_STATUS, NODE_OBJ, &n, NULL),
			 403);
	assert_int_equal(update("PATCH", "/api/v1/nodes/node1", "application/merge-patch+json",
				"{\"spec\":{\"configSource\":{\"configMap\":{}}}}",
				OFFLINE_WRITE_NODE, NODE_OBJ, &n, &msg),
			 403);
	assert_string_equal(msg, "nodes \"node1\" is forbidden: node \"node1\" is not allowed to "
				 "update configSource to a new non-nil configSource");
	free(msg);
}

static void test_lease_and_event(void **state)
{
	(void)state;
	const char *lease = "{\"metadata\":{\"name\":\"node1\",\"namespace\":\"kube-node-lease\","
			    "\"resourceVersion\":\"7\"},\"spec\":{\"renewTime\":\"a\"}}";
	json_t *n;
	assert_int_equal(
	    update("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node1",
		   "application/json",
		   "{\"metadata\":{\"name\":\"node1\",\"namespace\":\"kube-node-lease\","
		   "\"resourceVersion\":\"7\"},\"spec\":{\"renewTime\":\"b\"}}",
		   OFFLINE_WRITE_LEASE, lease, &n, NULL),
	    0);
	assert_string_equal(str(n, "spec", "renewTime"), "b");
	json_decref(n);
	assert_int_equal(
	    update("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node1",
		   "application/json",
		   "{\"metadata\":{\"name\":\"node1\",\"namespace\":\"default\"},\"spec\":{}}",
		   OFFLINE_WRITE_LEASE, lease, &n, NULL),
	    400);
	const char *ev = "{\"metadata\":{\"name\":\"e1\",\"namespace\":\"default\"},\"count\":1}";
	assert_int_equal(update("PATCH", "/api/v1/namespaces/default/events/e1",
				"application/strategic-merge-patch+json", "{\"count\":2}",
				OFFLINE_WRITE_EVENT, ev, &n, NULL),
			 0);
	assert_int_equal(json_integer_value(json_object_get(n, "count")), 2);
	json_decref(n);
}

/* Without a node name nothing is the node's: "" would match the pods no
 * scheduler has placed yet. */
static void test_no_node(void **state)
{
	(void)state;
	struct req r;
	req_make(&r, "PATCH", "/api/v1/namespaces/default/pods/web/status", "{}", false,
		 "application/merge-patch+json");
	r.w.node = "";
	struct offline_refusal why;
	assert_int_equal(offline_authz_request(&r.w, &why), OFFLINE_WRITE_DENIED);
	assert_int_equal(why.code, 403);
	offline_refusal_free(&why);
	req_free(&r);
}

/* offline_authz_update refuses a kind that is no update. */
static void test_update_of_other_kind(void **state)
{
	(void)state;
	struct req r;
	req_make(&r, "PATCH", "/api/v1/namespaces/default/secrets/s", "{}", false,
		 "application/merge-patch+json");
	struct buf out = BUF_INIT;
	struct offline_refusal why;
	assert_int_equal(offline_authz_update(&r.w, OFFLINE_WRITE_TOKEN, "{}", 2, &out, &why), -1);
	assert_int_equal(why.code, 403);
	assert_int_equal(out.len, 0);
	offline_refusal_free(&why);
	req_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rule_table),
	    cmocka_unit_test(test_node_labels),
	    cmocka_unit_test(test_token),
	    cmocka_unit_test(test_pod_status_patch_changes_status_only),
	    cmocka_unit_test(test_pod_status_refused),
	    cmocka_unit_test(test_node_writes),
	    cmocka_unit_test(test_lease_and_event),
	    cmocka_unit_test(test_update_of_other_kind),
	    cmocka_unit_test(test_no_node),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
