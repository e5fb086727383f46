/*
 * test_requestinfo.c - kube/requestinfo against kube-apiserver's
 * RequestInfoFactory: resource and non-resource paths, verbs, the legacy
 * watch and proxy forms, namespaces, list options, and malformed URIs.  Each
 * table row is its own cmocka test, named after its request.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/requestinfo.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* ---- path, verb and scope ---- */

struct path_case {
	const char *method, *uri;
	bool ok, is_resource;
	enum req_verb verb;
	const char *verb_name;
	/* NULL means "" */
	const char *prefix, *group, *version, *ns, *resource, *name, *sub;
	const char *path;     /* decoded path; NULL: not checked */
	const char *err_part; /* for failures: part of the message */
};

#define RES(m, u, v, vn, pfx, grp, ver, ns_, res, nm, sb)                                          \
	{                                                                                          \
		.method = m, .uri = u, .ok = true, .is_resource = true, .verb = v,                 \
		.verb_name = vn, .prefix = pfx, .group = grp, .version = ver, .ns = ns_,           \
		.resource = res, .name = nm, .sub = sb                                             \
	}
#define CORE(m, u, v, vn, ns_, res, nm, sb) RES(m, u, v, vn, "api", "", "v1", ns_, res, nm, sb)
#define NONRES(m, u, vn, pfx)                                                                      \
	{                                                                                          \
		.method = m, .uri = u, .ok = true, .verb = VERB_OTHER, .verb_name = vn,            \
		.prefix = pfx                                                                      \
	}
#define BAD(m, u, part)                                                                            \
	{                                                                                          \
		.method = m, .uri = u, .err_part = part                                            \
	}

static const struct path_case path_cases[] = {
    /* the core group, namespaced and cluster-scoped */
    CORE("GET", "/api/v1/pods", VERB_LIST, "list", "", "pods", "", ""),
    CORE("GET", "/api/v1/namespaces/default/pods", VERB_LIST, "list", "default", "pods", "", ""),
    CORE("GET", "/api/v1/namespaces/default/pods/web-0", VERB_GET, "get", "default", "pods",
	 "web-0", ""),
    CORE("GET", "/api/v1/namespaces/default/pods/web-0/status", VERB_GET, "get", "default", "pods",
	 "web-0", "status"),
    CORE("GET", "/api/v1/namespaces/default/pods/web-0/log?follow=true", VERB_GET, "get", "default",
	 "pods", "web-0", "log"),
    CORE("PUT", "/api/v1/namespaces/default/pods/web-0/status", VERB_UPDATE, "update", "default",
	 "pods", "web-0", "status"),
    CORE("GET", "/api/v1/nodes/node-1", VERB_GET, "get", "", "nodes", "node-1", ""),
    CORE("PATCH", "/api/v1/nodes/node-1/status", VERB_PATCH, "patch", "", "nodes", "node-1",
	 "status"),
    CORE("GET", "/api/v1/namespaces/default/configmaps", VERB_LIST, "list", "default", "configmaps",
	 "", ""),
    /* named groups */
    RES("GET", "/apis/apps/v1/deployments", VERB_LIST, "list", "apis", "apps", "v1", "",
	"deployments", "", ""),
    RES("GET", "/apis/apps/v1/namespaces/kube-system/deployments/coredns", VERB_GET, "get", "apis",
	"apps", "v1", "kube-system", "deployments", "coredns", ""),
    RES("PATCH", "/apis/apps/v1/namespaces/kube-system/deployments/coredns/scale", VERB_PATCH,
	"patch", "apis", "apps", "v1", "kube-system", "deployments", "coredns", "scale"),
    RES("GET", "/apis/apps/v1/deployments?watch=true", VERB_WATCH, "watch", "apis", "apps", "v1",
	"", "deployments", "", ""),
    RES("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1", VERB_GET,
	"get", "apis", "coordination.k8s.io", "v1", "kube-node-lease", "leases", "node-1", ""),
    RES("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1", VERB_UPDATE,
	"update", "apis", "coordination.k8s.io", "v1", "kube-node-lease", "leases", "node-1", ""),
    RES("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", VERB_CREATE, "create", "apis",
	"authorization.k8s.io", "v1", "", "subjectaccessreviews", "", ""),
    RES("GET", "/apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices/a/b/c/d", VERB_GET,
	"get", "apis", "discovery.k8s.io", "v1beta1", "default", "endpointslices", "a", "b"),
    /* verbs from each method */
    CORE("POST", "/api/v1/namespaces/default/pods", VERB_CREATE, "create", "default", "pods", "",
	 ""),
    CORE("POST", "/api/v1/namespaces/default/pods/web-0/eviction", VERB_CREATE, "create", "default",
	 "pods", "web-0", "eviction"),
    CORE("DELETE", "/api/v1/namespaces/default/pods/web-0", VERB_DELETE, "delete", "default",
	 "pods", "web-0", ""),
    CORE("DELETE", "/api/v1/namespaces/default/pods", VERB_DELETECOLLECTION, "deletecollection",
	 "default", "pods", "", ""),
    RES("DELETE", "/apis/apps/v1/deployments", VERB_DELETECOLLECTION, "deletecollection", "apis",
	"apps", "v1", "", "deployments", "", ""),
    CORE("HEAD", "/api/v1/namespaces/default/pods/web-0", VERB_GET, "get", "default", "pods",
	 "web-0", ""),
    CORE("HEAD", "/api/v1/pods", VERB_LIST, "list", "", "pods", "", ""),
    CORE("POST", "/api/v1/pods?watch=1", VERB_CREATE, "create", "", "pods", "", ""),
    CORE("OPTIONS", "/api/v1/pods", VERB_OTHER, "options", "", "pods", "", ""),
    /* methods are matched case-sensitively, as Go's switch does */
    CORE("get", "/api/v1/pods", VERB_OTHER, "get", "", "pods", "", ""),
    CORE("Patch", "/api/v1/nodes/n", VERB_OTHER, "patch", "", "nodes", "n", ""),
    /* watch=... turns a list into a watch, never a get */
    CORE("GET", "/api/v1/pods?watch=1", VERB_WATCH, "watch", "", "pods", "", ""),
    CORE("GET", "/api/v1/pods?watch=true", VERB_WATCH, "watch", "", "pods", "", ""),
    CORE("GET", "/api/v1/pods?watch=True", VERB_WATCH, "watch", "", "pods", "", ""),
    CORE("GET", "/api/v1/pods?watch=TRUE", VERB_WATCH, "watch", "", "pods", "", ""),
    CORE("GET", "/api/v1/pods?watch=t", VERB_WATCH, "watch", "", "pods", "", ""),
    CORE("GET", "/api/v1/pods?watch=0", VERB_LIST, "list", "", "pods", "", ""),
    CORE("GET", "/api/v1/pods?watch=false", VERB_LIST, "list", "", "pods", "", ""),
    CORE("GET", "/api/v1/pods?watch=False", VERB_LIST, "list", "", "pods", "", ""),
    CORE("GET", "/api/v1/pods?watch=F", VERB_LIST, "list", "", "pods", "", ""),
    CORE("GET", "/api/v1/namespaces/default/pods/web-0?watch=1", VERB_GET, "get", "default", "pods",
	 "web-0", ""),
    /* the first value of a parameter wins; later ones are not even checked */
    CORE("GET", "/api/v1/pods?watch=0&watch=1", VERB_LIST, "list", "", "pods", "", ""),
    CORE("GET", "/api/v1/pods?watch=1&watch=bogus", VERB_WATCH, "watch", "", "pods", "", ""),
    CORE("GET", "/api/v1/pods?limit=5;watch=1", VERB_WATCH, "watch", "", "pods", "", ""),
    CORE("GET", "/api/v1/pods?w%61tch=1", VERB_WATCH, "watch", "", "pods", "", ""),
    /* the legacy watch form */
    CORE("GET", "/api/v1/watch/pods", VERB_WATCH, "watch", "", "pods", "", ""),
    CORE("GET", "/api/v1/watch/namespaces/default/pods", VERB_WATCH, "watch", "default", "pods", "",
	 ""),
    CORE("GET", "/api/v1/watch/namespaces/default/pods/web-0", VERB_WATCH, "watch", "default",
	 "pods", "web-0", ""),
    CORE("GET", "/api/v1/watch/namespaces", VERB_WATCH, "watch", "", "namespaces", "", ""),
    CORE("GET", "/api/v1/watch/namespaces/foo", VERB_WATCH, "watch", "foo", "namespaces", "foo",
	 ""),
    CORE("POST", "/api/v1/watch/pods", VERB_WATCH, "watch", "", "pods", "", ""),
    RES("GET", "/apis/apps/v1/watch/namespaces/ns1/deployments", VERB_WATCH, "watch", "apis",
	"apps", "v1", "ns1", "deployments", "", ""),
    /* the name comes from the field selector only when get became list/watch */
    CORE("GET", "/api/v1/watch/pods?fieldSelector=metadata.name%3Dx", VERB_WATCH, "watch", "",
	 "pods", "", ""),
    /* the legacy proxy form takes no subresource; "/proxy" under a name is one */
    CORE("GET", "/api/v1/proxy/namespaces/default/pods/web-0/healthz", VERB_PROXY, "proxy",
	 "default", "pods", "web-0", ""),
    CORE("GET", "/api/v1/proxy/nodes/node-1/stats/summary", VERB_PROXY, "proxy", "", "nodes",
	 "node-1", ""),
    CORE("GET", "/api/v1/namespaces/default/pods/web-0/proxy/metrics", VERB_GET, "get", "default",
	 "pods", "web-0", "proxy"),
    CORE("POST", "/api/v1/namespaces/default/services/web:80/proxy/", VERB_CREATE, "create",
	 "default", "services", "web:80", "proxy"),
    /* namespaces are special */
    CORE("GET", "/api/v1/namespaces", VERB_LIST, "list", "", "namespaces", "", ""),
    CORE("GET", "/api/v1/namespaces/kube-system", VERB_GET, "get", "kube-system", "namespaces",
	 "kube-system", ""),
    CORE("PUT", "/api/v1/namespaces/kube-system/finalize", VERB_UPDATE, "update", "kube-system",
	 "namespaces", "kube-system", "finalize"),
    CORE("GET", "/api/v1/namespaces/kube-system/status", VERB_GET, "get", "kube-system",
	 "namespaces", "kube-system", "status"),
    CORE("DELETE", "/api/v1/namespaces/foo", VERB_DELETE, "delete", "foo", "namespaces", "foo", ""),
    RES("GET", "/apis/apps/v1/namespaces/default", VERB_GET, "get", "apis", "apps", "v1", "default",
	"namespaces", "default", ""),
    /* non-resource requests */
    NONRES("GET", "/version", "get", ""),
    NONRES("GET", "/healthz", "get", ""),
    NONRES("GET", "/livez?verbose", "get", ""),
    NONRES("GET", "/readyz/etcd", "get", ""),
    NONRES("GET", "/openapi/v3", "get", ""),
    NONRES("GET", "/openapi/v3/apis/apps/v1?hash=abc", "get", ""),
    NONRES("GET", "/metrics", "get", ""),
    NONRES("GET", "/apis", "get", ""),
    NONRES("GET", "/apis/apps", "get", ""),
    NONRES("GET", "/apis/apps/v1", "get", "apis"), /* Go sets the prefix first */
    NONRES("GET", "/api", "get", ""),
    NONRES("GET", "/api/v1", "get", ""),
    NONRES("GET", "/", "get", ""),
    NONRES("HEAD", "/healthz", "head", ""),
    NONRES("POST", "/logs/x", "post", ""),
    NONRES("PROPFIND", "/api", "propfind", ""),
    NONRES("GET", "/apix/v1/pods/x", "get", ""),
    /* slashes: trimmed at the ends, empty inner segments kept (strings.Split) */
    CORE("GET", "/api/v1/pods/", VERB_LIST, "list", "", "pods", "", ""),
    CORE("GET", "//api/v1/pods//", VERB_LIST, "list", "", "pods", "", ""),
    RES("GET", "//api//v1///pods", VERB_LIST, "list", "api", "", "", "", "v1", "", ""),
    /* percent-decoding of the path, with '+' kept */
    CORE("GET", "/api/v1/namespaces/my%2Dns/pods", VERB_LIST, "list", "my-ns", "pods", "", ""),
    CORE("GET", "/api/v1/namespaces/default/configmaps/a+b", VERB_GET, "get", "default",
	 "configmaps", "a+b", ""),
    CORE("GET", "/api/v1/namespaces/default/pods/a%2Fb", VERB_GET, "get", "default", "pods", "a",
	 "b"),
    CORE("GET", "/api/v1/namespaces/default/pods/caf%C3%A9", VERB_GET, "get", "default", "pods",
	 "caf\xc3\xa9", ""),
    /* malformed */
    BAD("GET", "/api/v1/watch", "kind and namespace"),
    BAD("GET", "/apis/apps/v1/watch", "kind and namespace"),
    BAD("GET", "/api/v1/proxy", "kind and namespace"),
    BAD("GET", "/api/v1/pods%zz", "invalid URL escape \"%zz\""),
    BAD("GET", "/api/v1/pods%", "invalid URL escape \"%\""),
    BAD("GET", "/api/v1/pods%4", "invalid URL escape \"%4\""),
    BAD("GET", "/api/v1/namespaces/%00/pods", "NUL"),
    BAD("GET", "/api/v1/pods?labelSelector=%G1", "labelSelector"),
    BAD("GET", "/api/v1/pods?pretty=%zz", "invalid URL escape"),
    BAD("GET", "/api/v1/pods?%zz=1", "query parameter name"),
    BAD("GET", "/api/v1/pods?continue=abc%00", "NUL"),
    BAD("GET", "/api/v1/pods?x%00=1", "NUL"),
    BAD("GET", "/api/v1/pods?watch=bogus", "watch"),
    BAD("GET", "/api/v1/pods?watch=", "watch"),
    BAD("GET", "/api/v1/pods?watch", "watch"),
    BAD("GET", "/api/v1/pods?watch=yes", "query parameter \"watch\": \"yes\" is not a boolean"),
    BAD("GET", "/api/v1/pods?watch=%0Atrue", "\"?true\""),
    BAD("GET", "/api/v1/pods?limit=-1", "\"limit\": \"-1\" is not a non-negative integer"),
    BAD("GET", "/api/v1/pods?limit=abc", "limit"),
    BAD("GET", "/api/v1/pods?limit=", "limit"),
    BAD("GET", "/api/v1/pods?limit=1.5", "limit"),
    BAD("GET", "/api/v1/pods?limit=%2010", "limit"),
    BAD("GET", "/api/v1/pods?limit=9223372036854775808", "limit"),
    BAD("GET", "/api/v1/pods?timeoutSeconds=-5", "timeoutSeconds"),
    BAD("GET", "/api/v1/pods?timeoutSeconds=30s", "timeoutSeconds"),
    BAD("GET", "/api/v1/pods?allowWatchBookmarks=yes", "allowWatchBookmarks"),
    BAD("GET", "/api/v1/pods?sendInitialEvents=maybe", "sendInitialEvents"),
    BAD("GET", "/healthz?watch=2", "watch"),
    BAD("GET", "api/v1/pods", "'/'"),
    BAD("GET", "http://host/api/v1/pods", "'/'"),
    BAD("GET", "", "'/'"),
    BAD("GET", "*", "'/'"),
    BAD("", "/api/v1/pods", "method"),
    BAD("GET", "/api/v1/pods\x01", "control character"),
    BAD("GET", "/api/v1/pods?x=\x7f", "control character"),
};

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

/* A failed parse leaves a one-line message and a zeroed result. */
static void check_failure(const struct path_case *c, int rc, struct request_info *ri, char *err)
{
	if (rc == 0)
		fail_msg("%s %s: parsed, expected an error with \"%s\"", c->method, c->uri,
			 c->err_part);
	assert_non_null(err);
	assert_null(strchr(err, '\n'));
	if (!strstr(err, c->err_part))
		fail_msg("%s %s: error \"%s\" lacks \"%s\"", c->method, c->uri, err, c->err_part);
	assert_null(ri->method);
	assert_null(ri->path);
	assert_null(ri->resource);
	assert_null(ri->label_selector);
	request_info_free(ri);
	free(err);
}

static void check_str(const struct path_case *c, const char *field, const char *got,
		      const char *want)
{
	assert_non_null(got);
	if (strcmp(got, or_empty(want)))
		fail_msg("%s %s: %s is \"%s\", want \"%s\"", c->method, c->uri, field, got,
			 or_empty(want));
}

static void run_path_case(void **state)
{
	const struct path_case *c = *state;
	struct request_info ri;
	char *err = NULL;
	int rc = request_info_parse(c->method, c->uri, &ri, &err);
	if (!c->ok) {
		check_failure(c, rc, &ri, err);
		return;
	}
	if (rc != 0)
		fail_msg("%s %s: %s", c->method, c->uri, err ? err : "(no message)");
	assert_null(err);
	assert_int_equal(ri.is_resource, c->is_resource);
	assert_int_equal(ri.verb, c->verb);
	check_str(c, "verb", request_info_verb(&ri), c->verb_name);
	check_str(c, "method", ri.method, c->method);
	check_str(c, "api_prefix", ri.api_prefix, c->prefix);
	check_str(c, "api_group", ri.api_group, c->group);
	check_str(c, "api_version", ri.api_version, c->version);
	check_str(c, "namespace", ri.namespace, c->ns);
	check_str(c, "resource", ri.resource, c->resource);
	check_str(c, "name", ri.name, c->name);
	check_str(c, "subresource", ri.subresource, c->sub);
	if (c->path)
		check_str(c, "path", ri.path, c->path);
	request_info_free(&ri);
}

/* ---- list and watch options ---- */

struct opt_case {
	const char *method, *uri;
	const char *verb, *name; /* NULL: "" */
	const char *label, *field, *rv, *rv_match, *cont;
	long limit, timeout; /* timeout: only when timeout_set, else -1 */
	bool timeout_set, bookmarks, sie_set, sie;
};

#define OPT_DEFAULTS .method = "GET"

static const struct opt_case opt_cases[] = {
    {OPT_DEFAULTS, .uri = "/api/v1/pods", .verb = "list"},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?", .verb = "list"},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?labelSelector=app%3Dweb%2Ctier%20in%20(a%2Cb)",
     .verb = "list", .label = "app=web,tier in (a,b)"},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?labelSelector=tier+notin+(a,b)", .verb = "list",
     .label = "tier notin (a,b)"},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?labelSelector=a%3D1&labelSelector=b%3D2", .verb = "list",
     .label = "a=1"},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1", .verb = "list",
     .field = "spec.nodeName=node-1"},
    {OPT_DEFAULTS, .uri = "/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3Dweb-0",
     .verb = "list", .name = "web-0", .field = "metadata.name=web-0"},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?fieldSelector=metadata.name%3D%3Dweb-0", .verb = "list",
     .name = "web-0", .field = "metadata.name==web-0"},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?fieldSelector=metadata.name!%3Dweb-0", .verb = "list",
     .field = "metadata.name!=web-0"},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?fieldSelector=metadata.name%3Dw,spec.nodeName%3Dn1",
     .verb = "list", .name = "w", .field = "metadata.name=w,spec.nodeName=n1"},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1,metadata.name%3Dw",
     .verb = "list", .name = "w", .field = "spec.nodeName=n1,metadata.name=w"},
    /* Go sorts the terms first: the smallest metadata.name term wins */
    {OPT_DEFAULTS, .uri = "/api/v1/pods?fieldSelector=metadata.name%3Db,metadata.name%3Da",
     .verb = "list", .name = "a", .field = "metadata.name=b,metadata.name=a"},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?fieldSelector=metadata.name%3Da,metadata.name%3Db",
     .verb = "list", .name = "a", .field = "metadata.name=a,metadata.name=b"},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?fieldSelector=metadata.name%3Dab,metadata.name%3Da",
     .verb = "list", .name = "a", .field = "metadata.name=ab,metadata.name=a"},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?fieldSelector=metadata.name%3D..", .verb = "list",
     .field = "metadata.name=.."},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?fieldSelector=metadata.name%3Da%25b", .verb = "list",
     .field = "metadata.name=a%b"},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?fieldSelector=metadata.name%3D", .verb = "list",
     .field = "metadata.name="},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?fieldSelector=metadata.name%3Da%5C,b", .verb = "list",
     .name = "a,b", .field = "metadata.name=a\\,b"},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?fieldSelector=metadata.name%3Da%5Cxb", .verb = "list",
     .field = "metadata.name=a\\xb"},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?fieldSelector=metadata.name%3Da,garbage", .verb = "list",
     .field = "metadata.name=a,garbage"},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?fieldSelector=metadata.name+%3D+a", .verb = "list",
     .field = "metadata.name = a"},
    /* an invalid label selector makes the API server ignore the options */
    {OPT_DEFAULTS,
     .uri = "/api/v1/pods?fieldSelector=metadata.name%3Dweb-0&labelSelector=a%20in%20(",
     .verb = "list", .field = "metadata.name=web-0", .label = "a in ("},
    {OPT_DEFAULTS, .uri = "/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dnode-1",
     .verb = "watch", .name = "node-1", .field = "metadata.name=node-1"},
    {OPT_DEFAULTS, .uri = "/api/v1/nodes/n2?fieldSelector=metadata.name%3Dnode-1", .verb = "get",
     .name = "n2", .field = "metadata.name=node-1"},
    {.method = "DELETE",
     .uri = "/api/v1/namespaces/d/pods?fieldSelector=metadata.name%3Dx",
     .verb = "deletecollection",
     .field = "metadata.name=x"},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?resourceVersion=12345&resourceVersionMatch=NotOlderThan",
     .verb = "list", .rv = "12345", .rv_match = "NotOlderThan"},
    {OPT_DEFAULTS,
     .uri = "/api/v1/pods?limit=500&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzfQ%3D%3D",
     .verb = "list", .limit = 500, .cont = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzfQ=="},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?limit=0", .verb = "list"},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?limit=%2B7", .verb = "list", .limit = 7},
    /* clamped when read, so that no later arithmetic overflows */
    {OPT_DEFAULTS, .uri = "/api/v1/pods?limit=9223372036854775807", .verb = "list",
     .limit = REQUEST_LIMIT_MAX},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?limit=2147483648", .verb = "list",
     .limit = REQUEST_LIMIT_MAX},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?limit=2147483647", .verb = "list", .limit = 2147483647L},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?&&limit=5&", .verb = "list", .limit = 5},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?%6Cimit=5", .verb = "list", .limit = 5},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?watch=1&timeoutSeconds=300&allowWatchBookmarks=true",
     .verb = "watch", .timeout_set = true, .timeout = 300, .bookmarks = true},
    /* 0 is "not set", as kube-apiserver reads it (not "end at once") */
    {OPT_DEFAULTS, .uri = "/api/v1/pods?watch=1&timeoutSeconds=0", .verb = "watch"},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?watch=1&timeoutSeconds=9223372036854775807",
     .verb = "watch", .timeout_set = true, .timeout = REQUEST_TIMEOUT_MAX},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?watch=1&timeoutSeconds=86401", .verb = "watch",
     .timeout_set = true, .timeout = 86400},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?watch=1&timeoutSeconds=86400", .verb = "watch",
     .timeout_set = true, .timeout = 86400},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?watch=1&sendInitialEvents=true", .verb = "watch",
     .sie_set = true, .sie = true},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?watch=1&sendInitialEvents=false", .verb = "watch",
     .sie_set = true},
    {OPT_DEFAULTS, .uri = "/api/v1/pods?pretty=true&unknown=%41", .verb = "list"},
};

static void check_opt_str(const struct opt_case *c, const char *field, const char *got,
			  const char *want)
{
	assert_non_null(got);
	if (strcmp(got, or_empty(want)))
		fail_msg("%s: %s is \"%s\", want \"%s\"", c->uri, field, got, or_empty(want));
}

static void run_opt_case(void **state)
{
	const struct opt_case *c = *state;
	struct request_info ri;
	char *err = NULL;
	if (request_info_parse(c->method, c->uri, &ri, &err) != 0)
		fail_msg("%s: %s", c->uri, err ? err : "(no message)");
	check_opt_str(c, "verb", request_info_verb(&ri), c->verb);
	check_opt_str(c, "name", ri.name, c->name);
	check_opt_str(c, "labelSelector", ri.label_selector, c->label);
	check_opt_str(c, "fieldSelector", ri.field_selector, c->field);
	check_opt_str(c, "resourceVersion", ri.resource_version, c->rv);
	check_opt_str(c, "resourceVersionMatch", ri.resource_version_match, c->rv_match);
	check_opt_str(c, "continue", ri.continue_token, c->cont);
	check_opt_str(c, "as_table_hint", ri.as_table_hint, "");
	assert_int_equal(ri.limit, c->limit);
	assert_int_equal(ri.timeout_seconds, c->timeout_set ? c->timeout : -1);
	assert_int_equal(ri.allow_watch_bookmarks, c->bookmarks);
	assert_int_equal(ri.send_initial_events_set, c->sie_set);
	assert_int_equal(ri.send_initial_events, c->sie);
	request_info_free(&ri);
}

/* ---- single tests ---- */

static void test_parse_bool(void **state)
{
	static const struct {
		const char *s;
		int rc;
		bool v;
	} cases[] = {
	    {"1", 0, true},	  {"t", 0, true},      {"T", 0, true},	    {"TRUE", 0, true},
	    {"true", 0, true},	  {"True", 0, true},   {"0", 0, false},	    {"f", 0, false},
	    {"F", 0, false},	  {"FALSE", 0, false}, {"false", 0, false}, {"False", 0, false},
	    {"", -1, false},	  {"yes", -1, false},  {"tRUE", -1, false}, {"2", -1, false},
	    {"true ", -1, false}, {" 1", -1, false},   {"01", -1, false},   {"on", -1, false},
	};
	(void)state;
	for (size_t i = 0; i < N_ELEMS(cases); i++) {
		bool v = !cases[i].v;
		int rc = request_parse_bool(cases[i].s, &v);
		if (rc != cases[i].rc)
			fail_msg("request_parse_bool(\"%s\") = %d", cases[i].s, rc);
		if (rc == 0 && v != cases[i].v)
			fail_msg("request_parse_bool(\"%s\") gave %d", cases[i].s, v);
	}
	bool v;
	assert_int_equal(request_parse_bool(NULL, &v), -1);
}

static void test_decoded_path(void **state)
{
	struct request_info ri;
	char *err = NULL;
	(void)state;
	assert_int_equal(
	    request_info_parse("GET", "/api/v1/namespaces/a%20b/pods/x+y?watch=1", &ri, &err), 0);
	assert_string_equal(ri.path, "/api/v1/namespaces/a b/pods/x+y");
	assert_string_equal(ri.namespace, "a b");
	assert_string_equal(ri.name, "x+y");
	assert_int_equal(ri.verb, VERB_GET);
	request_info_free(&ri);

	assert_int_equal(request_info_parse("GET", "//api//v1///pods", &ri, &err), 0);
	assert_string_equal(ri.path, "//api//v1///pods");
	request_info_free(&ri);
}

static void test_free_is_safe(void **state)
{
	struct request_info ri;
	char *err = NULL;
	(void)state;
	memset(&ri, 0, sizeof ri);
	request_info_free(&ri);
	request_info_free(&ri);
	ri.verb = VERB_OTHER;
	assert_string_equal(request_info_verb(&ri), "");

	assert_int_equal(request_info_parse("GET", "/api/v1/pods?limit=x", &ri, &err), -1);
	free(err);
	request_info_free(&ri);
	request_info_free(&ri);

	assert_int_equal(request_info_parse("GET", "/api/v1/pods", &ri, &err), 0);
	request_info_free(&ri);
	request_info_free(&ri);
	/* a NULL err is allowed */
	assert_int_equal(request_info_parse("GET", "/api/v1/pods%", &ri, NULL), -1);
	request_info_free(&ri);
}

/* Every string field is set after a parse, also for non-resource requests. */
static void test_fields_never_null(void **state)
{
	static const char *const uris[] = {"/", "/healthz", "/api/v1/pods", "/apis/apps/v1"};
	(void)state;
	for (size_t i = 0; i < N_ELEMS(uris); i++) {
		struct request_info ri;
		char *err = NULL;
		assert_int_equal(request_info_parse("GET", uris[i], &ri, &err), 0);
		const char *fields[] = {
		    ri.method,
		    ri.path,
		    ri.api_prefix,
		    ri.api_group,
		    ri.api_version,
		    ri.namespace,
		    ri.resource,
		    ri.subresource,
		    ri.name,
		    ri.label_selector,
		    ri.field_selector,
		    ri.resource_version,
		    ri.resource_version_match,
		    ri.continue_token,
		    ri.as_table_hint,
		};
		for (size_t f = 0; f < N_ELEMS(fields); f++)
			if (!fields[f])
				fail_msg("%s: field %zu is NULL", uris[i], f);
		assert_int_equal(ri.timeout_seconds, -1);
		assert_int_equal(ri.limit, 0);
		assert_false(ri.send_initial_events_set);
		request_info_free(&ri);
	}
}

/* A long selector and a long path: no fixed-size buffers anywhere. */
static void test_long_values(void **state)
{
	size_t n = 200000;
	char *uri = malloc(n * 2 + 64);
	assert_non_null(uri);
	(void)state;
	strcpy(uri, "/api/v1/namespaces/");
	size_t at = strlen(uri);
	memset(uri + at, 'n', n);
	at += n;
	strcpy(uri + at, "/pods?labelSelector=");
	at += strlen(uri + at);
	for (size_t i = 0; i < n / 3; i++, at += 3)
		memcpy(uri + at, "%41", 3);
	uri[at] = '\0';
	struct request_info ri;
	char *err = NULL;
	assert_int_equal(request_info_parse("GET", uri, &ri, &err), 0);
	assert_int_equal(strlen(ri.namespace), n);
	assert_int_equal(strlen(ri.label_selector), n / 3);
	request_info_free(&ri);
	free(uri);
}

/* ---- running ---- */

static int add_case(struct CMUnitTest *t, size_t *n, const char *prefix, const char *method,
		    const char *uri, CMUnitTestFunction fn, const void *state)
{
	char *name = NULL;
	if (asprintf(&name, "%s %s %s", prefix, method, uri) < 0)
		return -1;
	for (char *p = name; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	t[*n] = (struct CMUnitTest){name, fn, NULL, NULL, (void *)state};
	++*n;
	return 0;
}

int main(void)
{
	const struct CMUnitTest singles[] = {
	    cmocka_unit_test(test_parse_bool),	 cmocka_unit_test(test_decoded_path),
	    cmocka_unit_test(test_free_is_safe), cmocka_unit_test(test_fields_never_null),
	    cmocka_unit_test(test_long_values),
	};
	size_t total = N_ELEMS(path_cases) + N_ELEMS(opt_cases) + N_ELEMS(singles), n = 0;
	struct CMUnitTest *tests = calloc(total, sizeof *tests);
	if (!tests)
		return 1;
	for (size_t i = 0; i < N_ELEMS(path_cases); i++)
		if (add_case(tests, &n, "path", path_cases[i].method, path_cases[i].uri,
			     run_path_case, &path_cases[i]) < 0)
			return 1;
	for (size_t i = 0; i < N_ELEMS(opt_cases); i++)
		if (add_case(tests, &n, "options", opt_cases[i].method, opt_cases[i].uri,
			     run_opt_case, &opt_cases[i]) < 0)
			return 1;
	for (size_t i = 0; i < N_ELEMS(singles); i++)
		if (add_case(tests, &n, "single", "", singles[i].name, singles[i].test_func, NULL) <
		    0)
			return 1;
	int rc = _cmocka_run_group_tests("requestinfo", tests, n, NULL, NULL);
	for (size_t i = 0; i < n; i++)
		free((char *)tests[i].name);
	free(tests);
	return rc;
}
