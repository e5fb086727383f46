/*
 * test_podendpoints.c - kube/podendpoints: reading a pod's endpoint state,
 * and EndpointSlices and Endpoints that follow a pod (matching by uid, by
 * name and namespace, address families, readiness and termination, moves
 * between addresses and notReadyAddresses) and malformed input.
 *
 * Test documents are written with single quotes, turned into JSON by dq().
 * Results are parsed back with jansson and checked member by member.  Each
 * test keeps what it allocates in its fixture, freed by the teardown, so
 * that a failed assertion leaks nothing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/podendpoints.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

struct fx {
	struct pod_endpoint_state pod, pod2;
	struct buf out;
	json_t *res; /* the last output, parsed */
	json_t *in;  /* an input, parsed, to compare untouched parts with */
	char *prev;  /* a previous output, fed back in */
	char *doc;   /* the last document dq() made */
};

static int setup(void **state)
{
	*state = calloc(1, sizeof(struct fx));
	return *state ? 0 : -1;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	pod_endpoint_state_free(&f->pod);
	pod_endpoint_state_free(&f->pod2);
	buf_free(&f->out);
	json_decref(f->res);
	json_decref(f->in);
	free(f->prev);
	free(f->doc);
	free(f);
	return 0;
}

/* ---- helpers ---- */

/* text with ' turned into " (kept in f->doc until the next call). */
static const char *dq(struct fx *f, const char *text)
{
	free(f->doc);
	f->doc = strdup(text);
	assert_non_null(f->doc);
	for (char *p = f->doc; *p; p++)
		if (*p == '\'')
			*p = '"';
	return f->doc;
}

/* Parse a pod; status holds the members of its status (podIP(s),
 * conditions); deleting adds a deletionTimestamp. */
static void set_pod(struct fx *f, struct pod_endpoint_state *p, const char *ns, const char *name,
		    const char *uid, const char *status, bool deleting)
{
	char *t = str_printf("{'apiVersion':'v1','kind':'Pod','metadata':{'name':'%s','namespace':"
			     "'%s','uid':'%s'%s},'spec':{'nodeName':'node1'},'status':{%s}}",
			     name, ns, uid,
			     deleting ? ",'deletionTimestamp':'2024-05-01T10:00:00Z'" : "", status);
	assert_non_null(t);
	dq(f, t);
	free(t);
	pod_endpoint_state_free(p);
	assert_int_equal(pod_endpoint_state_parse(f->doc, strlen(f->doc), p), 0);
}

#define READY_TRUE                                                                                 \
	"'conditions':[{'type':'PodScheduled','status':'True'},{'type':'Ready','status':'True'}]"
#define READY_FALSE "'conditions':[{'type':'Ready','status':'False'}]"

/* The pod web-1 (uid u1) in default: ready, not ready, or terminating,
 * with the IPv4 address ip. */
static void web1(struct fx *f, const char *ip, bool ready, bool deleting)
{
	char *st = str_printf("'podIP':'%s','podIPs':[{'ip':'%s'}],%s", ip, ip,
			      ready ? READY_TRUE : READY_FALSE);
	assert_non_null(st);
	set_pod(f, &f->pod, "default", "web-1", "u1", st, deleting);
	free(st);
}

enum which { SLICE, EPS };

/* Run one transform on doc[0..len); when it returns 1, f->res is its
 * output parsed; otherwise out must be untouched. */
static int run_raw(struct fx *f, enum which w, const char *doc, size_t len,
		   const struct pod_endpoint_state *pod, uint64_t rv)
{
	json_decref(f->res);
	f->res = NULL;
	buf_free(&f->out);
	int rc = w == SLICE ? endpointslice_follow_pod(doc, len, pod, rv, &f->out)
			    : endpoints_follow_pod(doc, len, pod, rv, &f->out);
	if (rc != 1) {
		assert_int_equal(f->out.len, 0);
		assert_null(f->out.data);
		return rc;
	}
	/* compact: no whitespace between tokens (no test string holds any) */
	assert_null(strpbrk(buf_cstr(&f->out), " \n\t"));
	f->res = json_loadb(f->out.data, f->out.len, JSON_ALLOW_NUL, NULL);
	assert_true(json_is_object(f->res));
	return rc;
}

/* The same with a single-quoted document. */
static int run(struct fx *f, enum which w, const char *text, const struct pod_endpoint_state *pod,
	       uint64_t rv)
{
	dq(f, text);
	return run_raw(f, w, f->doc, strlen(f->doc), pod, rv);
}

/* Run again on the previous output. */
static int run_again(struct fx *f, enum which w, const struct pod_endpoint_state *pod, uint64_t rv)
{
	free(f->prev);
	f->prev = buf_steal(&f->out);
	assert_non_null(f->prev);
	return run_raw(f, w, f->prev, strlen(f->prev), pod, rv);
}

/* Keep a parsed copy of the input. */
static void keep_input(struct fx *f, const char *text)
{
	json_decref(f->in);
	f->in = json_loads(dq(f, text), 0, NULL);
	assert_non_null(f->in);
}

/* The value at a path like "endpoints/0/conditions/ready", NULL if none. */
static json_t *at(json_t *j, const char *path)
{
	char *copy = strdup(path), *save = NULL;
	assert_non_null(copy);
	for (char *seg = strtok_r(copy, "/", &save); seg && j; seg = strtok_r(NULL, "/", &save))
		j = json_is_array(j) ? json_array_get(j, strtoul(seg, NULL, 10))
				     : json_object_get(j, seg);
	free(copy);
	return j;
}

static void check_str(json_t *j, const char *path, const char *want)
{
	const char *got = json_string_value(at(j, path));
	if (!got)
		fail_msg("%s: absent or not a string (want \"%s\")", path, want);
	if (strcmp(got, want) != 0)
		fail_msg("%s: \"%s\", want \"%s\"", path, got, want);
}

static void check_bool(json_t *j, const char *path, bool want)
{
	json_t *v = at(j, path);
	if (!json_is_boolean(v))
		fail_msg("%s: absent or not a boolean", path);
	if (json_is_true(v) != want)
		fail_msg("%s: %d, want %d", path, json_is_true(v), want);
}

static void check_absent(json_t *j, const char *path)
{
	if (at(j, path))
		fail_msg("%s: present", path);
}

static void check_size(json_t *j, const char *path, size_t want)
{
	json_t *v = at(j, path);
	if (!json_is_array(v))
		fail_msg("%s: absent or not an array", path);
	if (json_array_size(v) != want)
		fail_msg("%s: %zu elements, want %zu", path, json_array_size(v), want);
}

/* The output at path equals the input at path. */
static void check_same(struct fx *f, const char *path)
{
	json_t *a = at(f->res, path), *b = at(f->in, path);
	if (!a || !b || !json_equal(a, b))
		fail_msg("%s: changed", path);
}

/* The keys of the object at path, in order, are want[0..n). */
static void check_keys(json_t *j, const char *path, const char *const *want, size_t n)
{
	json_t *o = at(j, path);
	assert_true(json_is_object(o));
	size_t i = 0;
	for (void *it = json_object_iter(o); it; it = json_object_iter_next(o, it), i++) {
		if (i >= n)
			fail_msg("%s: extra key %s", path, json_object_iter_key(it));
		if (strcmp(json_object_iter_key(it), want[i]) != 0)
			fail_msg("%s: key %zu is %s, want %s", path, i, json_object_iter_key(it),
				 want[i]);
	}
	assert_int_equal(i, n);
}

/* ---- documents ---- */

#define SLICE_HEAD(type, ns)                                                                       \
	"{'apiVersion':'discovery.k8s.io/v1','kind':'EndpointSlice','metadata':{'name':'web-x7',"  \
	"'namespace':'" ns "','resourceVersion':'10','labels':{'kubernetes.io/service-name':"      \
	"'web'}},'addressType':'" type "','endpoints':["
#define SLICE_TAIL "],'ports':[{'name':'http','port':8080,'protocol':'TCP'}]}"
/* An endpoint: ready/serving/terminating are JSON literals, ref the targetRef. */
#define EP(addr, ready, serving, term, ref)                                                        \
	"{'addresses':['" addr "'],'conditions':{'terminating':" term ",'ready':" ready            \
	",'serving':" serving "},'nodeName':'node1','targetRef':" ref "}"
#define REF(ns, name, uid)  "{'kind':'Pod','namespace':'" ns "','name':'" name "','uid':'" uid "'}"
#define EP_READY(addr, ref) EP(addr, "true", "true", "false", ref)

/* web-0, web-1 (ready at 10.0.0.5) and web-2 in an IPv4 slice. */
static const char SLICE3[] =
    SLICE_HEAD("IPv4", "default") EP_READY("10.0.0.4", REF("default", "web-0", "u0")) "," EP_READY(
	"10.0.0.5", REF("default", "web-1", "u1")) "," EP_READY("10.0.0.6", REF("default", "web-2",
										"u2")) SLICE_TAIL;

#define EPS_HEAD                                                                                   \
	"{'apiVersion':'v1','kind':'Endpoints','metadata':{'name':'web','namespace':'default',"    \
	"'resourceVersion':'10'},'subsets':["
#define EPS_TAIL      "]}"
#define ADDR(ip, ref) "{'ip':'" ip "','nodeName':'node1','targetRef':" ref "}"
#define PORTS	      "'ports':[{'name':'http','port':8080,'protocol':'TCP'}]"

/* web-0, web-1 (10.0.0.5), web-2 ready; web-9 not ready. */
static const char EPS4[] =
    EPS_HEAD "{'addresses':[" ADDR("10.0.0.4", REF("default", "web-0", "u0")) "," ADDR(
	"10.0.0.5", REF("default", "web-1", "u1")) "," ADDR("10.0.0.6",
							    REF("default", "web-2",
								"u2")) "],"
								       "'notReadyAddresses':[" ADDR(
									   "10.0.0.9",
									   REF("default", "web-9",
									       "u9")) "]," PORTS
										      "}" EPS_TAIL;

/* ---- the pod ---- */

static void test_parse_pod_ips(void **state)
{
	struct fx *f = *state;
	set_pod(f, &f->pod, "shop", "web-1", "u1",
		"'podIP':'10.0.0.7','podIPs':[{'ip':'10.0.0.7'},{'ip':'fd00::7'}]," READY_TRUE,
		false);
	assert_string_equal(f->pod.namespace, "shop");
	assert_string_equal(f->pod.name, "web-1");
	assert_string_equal(f->pod.uid, "u1");
	assert_string_equal(f->pod.node_name, "node1");
	assert_int_equal(f->pod.n_ips, 2);
	assert_string_equal(f->pod.ips[0], "10.0.0.7");
	assert_string_equal(f->pod.ips[1], "fd00::7");
	assert_true(f->pod.ready);
	assert_false(f->pod.terminating);

	/* podIPs wins over podIP; wrong-typed entries are skipped */
	set_pod(f, &f->pod, "shop", "web-1", "u1",
		"'podIP':'10.9.9.9','podIPs':[7,{'ip':3},{'ip':''},{},{'ip':'fd00::8'},"
		"{'ip':'10.0.0.8'}]," READY_FALSE,
		false);
	assert_int_equal(f->pod.n_ips, 2);
	assert_string_equal(f->pod.ips[0], "fd00::8");
	assert_string_equal(f->pod.ips[1], "10.0.0.8");
	assert_false(f->pod.ready);
}

static void test_parse_pod_ip_fallback(void **state)
{
	struct fx *f = *state;
	set_pod(f, &f->pod, "shop", "web-1", "u1", "'podIP':'10.0.0.7'," READY_TRUE, false);
	assert_int_equal(f->pod.n_ips, 1);
	assert_string_equal(f->pod.ips[0], "10.0.0.7");

	/* podIPs that gives nothing: podIP too */
	set_pod(f, &f->pod, "shop", "web-1", "u1", "'podIPs':[],'podIP':'10.0.0.8'", false);
	assert_int_equal(f->pod.n_ips, 1);
	assert_string_equal(f->pod.ips[0], "10.0.0.8");
	assert_false(f->pod.ready); /* no conditions */

	/* no IP at all (pending) */
	set_pod(f, &f->pod, "shop", "web-1", "u1", "'podIP':5,'podIPs':'x'", false);
	assert_int_equal(f->pod.n_ips, 0);

	/* absent members are "" */
	const char *min = dq(f, "{'metadata':{'name':'p'}}");
	pod_endpoint_state_free(&f->pod);
	assert_int_equal(pod_endpoint_state_parse(min, strlen(min), &f->pod), 0);
	assert_string_equal(f->pod.name, "p");
	assert_string_equal(f->pod.namespace, "");
	assert_string_equal(f->pod.uid, "");
	assert_string_equal(f->pod.node_name, "");
	assert_int_equal(f->pod.n_ips, 0);
	assert_false(f->pod.ready);
	assert_false(f->pod.terminating);
}

static void test_parse_ready_and_terminating(void **state)
{
	struct fx *f = *state;
	web1(f, "10.0.0.5", true, true);
	assert_true(f->pod.terminating);
	assert_false(f->pod.ready); /* Ready, but being deleted */

	/* the first Ready condition counts; "true" is not "True" */
	set_pod(f, &f->pod, "default", "web-1", "u1",
		"'conditions':[{'type':'Ready','status':'true'},{'type':'Ready','status':'True'}]",
		false);
	assert_false(f->pod.ready);
	set_pod(f, &f->pod, "default", "web-1", "u1",
		"'conditions':[3,{'type':5},{'type':'Ready','status':'True'}]", false);
	assert_true(f->pod.ready);

	/* a null deletionTimestamp is none */
	const char *doc =
	    dq(f, "{'metadata':{'name':'p','deletionTimestamp':null},'status':{" READY_TRUE "}}");
	pod_endpoint_state_free(&f->pod);
	assert_int_equal(pod_endpoint_state_parse(doc, strlen(doc), &f->pod), 0);
	assert_false(f->pod.terminating);
	assert_true(f->pod.ready);
}

static void test_parse_malformed(void **state)
{
	struct fx *f = *state;
	static const char *const bad[] = {
	    "",
	    "{",
	    "[]",
	    "null",
	    "'x'",
	    "{}",
	    "{'metadata':'x'}",
	    "{'metadata':{}}",
	    "{'metadata':{'name':''}}",
	    "{'metadata':{'name':7}}",
	    "{'metadata':{'name':'a\\u0000b'}}",
	    "{'metadata':{'name':'p'}} trailing",
	};
	for (size_t i = 0; i < N_ELEMS(bad); i++) {
		const char *doc = dq(f, bad[i]);
		memset(&f->pod, 0x5a, sizeof f->pod); /* overwritten, not freed */
		if (pod_endpoint_state_parse(doc, strlen(doc), &f->pod) != -1)
			fail_msg("accepted: %s", bad[i]);
		assert_null(f->pod.name);
		assert_null(f->pod.ips);
		assert_int_equal(f->pod.n_ips, 0);
	}
	/* wrong types under a good name: parsed, with what is there */
	const char *doc = dq(f, "{'metadata':{'name':'p','namespace':[],'uid':{}},'spec':3,"
				"'status':{'conditions':{'type':'Ready'},'podIPs':[null]}}");
	assert_int_equal(pod_endpoint_state_parse(doc, strlen(doc), &f->pod), 0);
	assert_string_equal(f->pod.namespace, "");
	assert_string_equal(f->pod.uid, "");
	assert_string_equal(f->pod.node_name, "");
	assert_int_equal(f->pod.n_ips, 0);
	assert_false(f->pod.ready);
	/* a length that cuts the document */
	pod_endpoint_state_free(&f->pod);
	assert_int_equal(pod_endpoint_state_parse(doc, 10, &f->pod), -1);
	/* freeing twice, and an empty state, are fine */
	pod_endpoint_state_free(&f->pod);
	pod_endpoint_state_free(&f->pod);
}

static void test_differs(void **state)
{
	struct fx *f = *state;
	web1(f, "10.0.0.5", true, false);
	/* another uid, node and namespace, same IPs and readiness: no difference */
	set_pod(f, &f->pod2, "other", "web-1", "u9", "'podIPs':[{'ip':'10.0.0.5'}]," READY_TRUE,
		false);
	assert_false(pod_endpoint_state_differs(&f->pod, &f->pod2));
	assert_false(pod_endpoint_state_differs(&f->pod, &f->pod));

	set_pod(f, &f->pod2, "default", "web-1", "u1", "'podIPs':[{'ip':'10.0.0.6'}]," READY_TRUE,
		false);
	assert_true(pod_endpoint_state_differs(&f->pod, &f->pod2));
	set_pod(f, &f->pod2, "default", "web-1", "u1",
		"'podIPs':[{'ip':'10.0.0.5'},{'ip':'fd00::5'}]," READY_TRUE, false);
	assert_true(pod_endpoint_state_differs(&f->pod, &f->pod2));
	assert_true(pod_endpoint_state_differs(&f->pod2, &f->pod));
	set_pod(f, &f->pod2, "default", "web-1", "u1", READY_TRUE, false);
	assert_true(pod_endpoint_state_differs(&f->pod, &f->pod2));
	set_pod(f, &f->pod2, "default", "web-1", "u1", "'podIPs':[{'ip':'10.0.0.5'}]," READY_FALSE,
		false);
	assert_true(pod_endpoint_state_differs(&f->pod, &f->pod2));

	/* terminating alone (readiness the same: both not ready) */
	web1(f, "10.0.0.5", false, false);
	set_pod(f, &f->pod2, "default", "web-1", "u1", "'podIPs':[{'ip':'10.0.0.5'}]," READY_FALSE,
		true);
	assert_true(pod_endpoint_state_differs(&f->pod, &f->pod2));
	/* the order of the IPs counts */
	set_pod(f, &f->pod, "default", "web-1", "u1",
		"'podIPs':[{'ip':'10.0.0.5'},{'ip':'fd00::5'}]", false);
	set_pod(f, &f->pod2, "default", "web-1", "u1",
		"'podIPs':[{'ip':'fd00::5'},{'ip':'10.0.0.5'}]", false);
	assert_true(pod_endpoint_state_differs(&f->pod, &f->pod2));
}

/* ---- EndpointSlice ---- */

static void test_slice_uid_match(void **state)
{
	struct fx *f = *state;
	keep_input(f, SLICE3);
	/* the targetRef's name is another's: the uid alone matches */
	set_pod(f, &f->pod, "elsewhere", "renamed", "u1",
		"'podIPs':[{'ip':'10.0.0.77'}]," READY_TRUE, false);
	assert_int_equal(run(f, SLICE, SLICE3, &f->pod, 1234), 1);
	check_str(f->res, "metadata/resourceVersion", "1234");
	check_size(f->res, "endpoints/1/addresses", 1);
	check_str(f->res, "endpoints/1/addresses/0", "10.0.0.77");
	check_bool(f->res, "endpoints/1/conditions/ready", true);
	check_bool(f->res, "endpoints/1/conditions/serving", true);
	check_bool(f->res, "endpoints/1/conditions/terminating", false);
	check_same(f, "endpoints/1/targetRef");
	check_same(f, "endpoints/1/nodeName");
	check_same(f, "endpoints/0");
	check_same(f, "endpoints/2");
	check_same(f, "ports");
	check_same(f, "metadata/labels");
	check_str(f->res, "addressType", "IPv4");
	check_size(f->res, "endpoints", 3);
	/* key order kept */
	static const char *const top[] = {"apiVersion",	 "kind",      "metadata",
					  "addressType", "endpoints", "ports"};
	static const char *const meta[] = {"name", "namespace", "resourceVersion", "labels"};
	static const char *const ep[] = {"addresses", "conditions", "nodeName", "targetRef"};
	static const char *const cond[] = {"terminating", "ready", "serving"};
	check_keys(f->res, "", top, N_ELEMS(top));
	check_keys(f->res, "metadata", meta, N_ELEMS(meta));
	check_keys(f->res, "endpoints/1", ep, N_ELEMS(ep));
	check_keys(f->res, "endpoints/1/conditions", cond, N_ELEMS(cond));

	/* a uid that differs does not match by itself */
	set_pod(f, &f->pod, "elsewhere", "renamed", "u7",
		"'podIPs':[{'ip':'10.0.0.77'}]," READY_TRUE, false);
	assert_int_equal(run(f, SLICE, SLICE3, &f->pod, 1234), 0);
}

static void test_slice_name_namespace_match(void **state)
{
	struct fx *f = *state;
	static const char doc[] = SLICE_HEAD("IPv4", "default")
	    EP_READY("10.0.0.5", "{'kind':'Pod','namespace':'default','name':'web-1'}") SLICE_TAIL;
	/* no uid in the targetRef; the pod's uid is not looked at */
	set_pod(f, &f->pod, "default", "web-1", "new-uid", "'podIP':'10.0.0.8'," READY_TRUE, false);
	assert_int_equal(run(f, SLICE, doc, &f->pod, 11), 1);
	check_str(f->res, "endpoints/0/addresses/0", "10.0.0.8");
	check_str(f->res, "metadata/resourceVersion", "11");

	/* same name, another namespace: no */
	set_pod(f, &f->pod, "prod", "web-1", "new-uid", "'podIP':'10.0.0.8'," READY_TRUE, false);
	assert_int_equal(run(f, SLICE, doc, &f->pod, 11), 0);
	/* a pod without uid matches by name too */
	set_pod(f, &f->pod, "default", "web-1", "", "'podIP':'10.0.0.8'," READY_TRUE, false);
	assert_int_equal(run(f, SLICE, doc, &f->pod, 11), 1);
	check_str(f->res, "endpoints/0/addresses/0", "10.0.0.8");
}

static void test_slice_ref_without_namespace(void **state)
{
	struct fx *f = *state;
	static const char in_default[] = SLICE_HEAD("IPv4", "default")
	    EP_READY("10.0.0.5", "{'kind':'Pod','name':'web-1'}") SLICE_TAIL;
	static const char in_prod[] = SLICE_HEAD("IPv4", "prod")
	    EP_READY("10.0.0.5", "{'kind':'Pod','name':'web-1'}") SLICE_TAIL;
	static const char empty_ns[] = SLICE_HEAD("IPv4", "default")
	    EP_READY("10.0.0.5", "{'kind':'Pod','name':'web-1','namespace':''}") SLICE_TAIL;
	web1(f, "10.0.0.8", true, false);
	assert_int_equal(run(f, SLICE, in_default, &f->pod, 5), 1);
	check_str(f->res, "endpoints/0/addresses/0", "10.0.0.8");
	check_absent(f->res, "endpoints/0/targetRef/namespace");
	assert_int_equal(run(f, SLICE, empty_ns, &f->pod, 5), 1);
	check_str(f->res, "endpoints/0/addresses/0", "10.0.0.8");
	assert_int_equal(run(f, SLICE, in_prod, &f->pod, 5), 0);
}

static void test_slice_other_pods_untouched(void **state)
{
	struct fx *f = *state;
	static const char doc[] = SLICE_HEAD("IPv4", "default")
	    EP_READY("10.0.0.4", REF("default", "web-0", "u0")) "," EP_READY(
		"10.0.0.5",
		REF("prod", "web-1",
		    "u9")) "," EP_READY("10.0.0.6",
					"{'kind':'Node','namespace':'default','name':'web-1','uid':"
					"'u1'"
					"}") "," EP_READY("10.0.0.7",
							  "{'namespace':'default','name':'web-1','"
							  "uid':"
							  "'u1'}") "," EP_READY("10.0.0.8",
										"{'kind':'pod','"
										"namespace':'"
										"default','"
										"name':'web-1','"
										"uid':'"
										"u1'}") "," EP_READY("1"
												     "0"
												     "."
												     "0"
												     "."
												     "0"
												     "."
												     "9",
												     REF("default",
													 "web-10",
													 "u10"))
		SLICE_TAIL;
	web1(f, "10.0.0.50", false, true);
	assert_int_equal(run(f, SLICE, doc, &f->pod, 5), 0);
	/* and the one that is, among them */
	static const char mixed[] = SLICE_HEAD("IPv4", "default")
	    EP_READY("10.0.0.6", "{'kind':'Node','name':'web-1'}") "," EP_READY(
		"10.0.0.5", REF("default", "web-1",
				"u1")) "," EP_READY("10.0.0.9", REF("default", "web-10", "u10"))
		SLICE_TAIL;
	keep_input(f, mixed);
	assert_int_equal(run(f, SLICE, mixed, &f->pod, 5), 1);
	check_same(f, "endpoints/0");
	check_same(f, "endpoints/2");
	check_str(f->res, "endpoints/1/addresses/0", "10.0.0.50");
	check_bool(f->res, "endpoints/1/conditions/terminating", true);
}

static void test_slice_ipv6(void **state)
{
	struct fx *f = *state;
	static const char v6[] = SLICE_HEAD("IPv6", "default")
	    EP_READY("fd00::5", REF("default", "web-1", "u1")) SLICE_TAIL;
	static const char v4[] = SLICE_HEAD("IPv4", "default")
	    EP_READY("10.0.0.5", REF("default", "web-1", "u1")) SLICE_TAIL;
	/* dual stack, IPv4 first: each slice takes its own family */
	set_pod(f, &f->pod, "default", "web-1", "u1",
		"'podIPs':[{'ip':'10.0.0.8'},{'ip':'fd00::8'},{'ip':'fd00::9'}]," READY_TRUE,
		false);
	assert_int_equal(run(f, SLICE, v6, &f->pod, 5), 1);
	check_size(f->res, "endpoints/0/addresses", 1);
	check_str(f->res, "endpoints/0/addresses/0", "fd00::8");
	check_str(f->res, "addressType", "IPv6");
	assert_int_equal(run(f, SLICE, v4, &f->pod, 5), 1);
	check_str(f->res, "endpoints/0/addresses/0", "10.0.0.8");

	/* IPv4 only, not ready: the IPv6 address stays, the conditions follow */
	web1(f, "10.0.0.8", false, false);
	assert_int_equal(run(f, SLICE, v6, &f->pod, 5), 1);
	check_str(f->res, "endpoints/0/addresses/0", "fd00::5");
	check_bool(f->res, "endpoints/0/conditions/ready", false);
	/* ready, IPv4 only: nothing to change in the IPv6 slice */
	web1(f, "10.0.0.8", true, false);
	assert_int_equal(run(f, SLICE, v6, &f->pod, 5), 0);
}

static void test_slice_fqdn_untouched(void **state)
{
	struct fx *f = *state;
	static const char fqdn[] = SLICE_HEAD("FQDN", "default")
	    EP_READY("web-1.example.com", REF("default", "web-1", "u1")) SLICE_TAIL;
	static const char no_type[] = "{'metadata':{'namespace':'default'},'endpoints':[" EP_READY(
	    "10.0.0.5", REF("default", "web-1", "u1")) "]}";
	static const char num_type[] =
	    "{'metadata':{'namespace':'default'},'addressType':4,'endpoints':[" EP_READY(
		"10.0.0.5", REF("default", "web-1", "u1")) "]}";
	web1(f, "10.0.0.8", false, true);
	assert_int_equal(run(f, SLICE, fqdn, &f->pod, 5), 0);
	assert_int_equal(run(f, SLICE, no_type, &f->pod, 5), 0);
	assert_int_equal(run(f, SLICE, num_type, &f->pod, 5), 0);
}

static void test_slice_ready_and_back(void **state)
{
	struct fx *f = *state;
	keep_input(f, SLICE3);
	web1(f, "10.0.0.5", false, false);
	assert_int_equal(run(f, SLICE, SLICE3, &f->pod, 20), 1);
	check_bool(f->res, "endpoints/1/conditions/ready", false);
	check_bool(f->res, "endpoints/1/conditions/serving", false);
	check_bool(f->res, "endpoints/1/conditions/terminating", false);
	check_str(f->res, "endpoints/1/addresses/0", "10.0.0.5");
	check_str(f->res, "metadata/resourceVersion", "20");
	check_same(f, "endpoints/0");

	/* the same again: nothing to do */
	assert_int_equal(run_again(f, SLICE, &f->pod, 21), 1 - 1);
	/* run_again took the output; make it again and go back to ready */
	assert_int_equal(run(f, SLICE, SLICE3, &f->pod, 20), 1);
	web1(f, "10.0.0.5", true, false);
	assert_int_equal(run_again(f, SLICE, &f->pod, 21), 1);
	check_bool(f->res, "endpoints/1/conditions/ready", true);
	check_bool(f->res, "endpoints/1/conditions/serving", true);
	check_bool(f->res, "endpoints/1/conditions/terminating", false);
	check_str(f->res, "metadata/resourceVersion", "21");
	/* back where it started, but for the resourceVersion */
	json_object_set_new(json_object_get(f->res, "metadata"), "resourceVersion",
			    json_string("10"));
	assert_true(json_equal(f->res, f->in));
}

static void test_slice_terminating(void **state)
{
	struct fx *f = *state;
	web1(f, "10.0.0.5", true, true);
	assert_int_equal(run(f, SLICE, SLICE3, &f->pod, 30), 1);
	check_bool(f->res, "endpoints/1/conditions/ready", false);
	check_bool(f->res, "endpoints/1/conditions/serving", false);
	check_bool(f->res, "endpoints/1/conditions/terminating", true);

	/* a state made by hand, ready and terminating: serving follows ready alone */
	f->pod.ready = true;
	assert_int_equal(run(f, SLICE, SLICE3, &f->pod, 30), 1);
	check_bool(f->res, "endpoints/1/conditions/ready", false);
	check_bool(f->res, "endpoints/1/conditions/serving", true);
	check_bool(f->res, "endpoints/1/conditions/terminating", true);
}

static void test_slice_no_change(void **state)
{
	struct fx *f = *state;
	web1(f, "10.0.0.5", true, false);
	assert_int_equal(run(f, SLICE, SLICE3, &f->pod, 40), 0);
	/* out keeps what it had, and a change is appended to it */
	dq(f, SLICE3);
	assert_int_equal(buf_append_str(&f->out, "prefix"), 0);
	assert_int_equal(endpointslice_follow_pod(f->doc, strlen(f->doc), &f->pod, 40, &f->out), 0);
	assert_string_equal(buf_cstr(&f->out), "prefix");
	web1(f, "10.0.0.6", true, false); /* f->doc is the pod now */
	dq(f, SLICE3);
	assert_int_equal(endpointslice_follow_pod(f->doc, strlen(f->doc), &f->pod, 40, &f->out), 1);
	assert_int_equal(strncmp(buf_cstr(&f->out), "prefix{", 7), 0);
	json_t *j = json_loads(buf_cstr(&f->out) + 6, 0, NULL);
	assert_non_null(j);
	check_str(j, "endpoints/1/addresses/0", "10.0.0.6");
	json_decref(j);
}

static void test_slice_conditions_created(void **state)
{
	struct fx *f = *state;
	static const char doc[] = SLICE_HEAD(
	    "IPv4",
	    "default") "{'addresses':['10.0.0.5'],"
		       "'targetRef':" REF(
			   "default", "web-1",
			   "u1") "},"
				 "{'addresses':['10.0.0.5'],'conditions':'ready','targetRef':" REF(
				     "default", "web-1",
				     "u1") "},{'addresses':'10.0.0.5','conditions':{'"
					   "ready':'true','serving':1,'terminating':null},"
					   "'targetRef':" REF("default", "web-1",
							      "u1") "}" SLICE_TAIL;
	web1(f, "10.0.0.5", true, false);
	assert_int_equal(run(f, SLICE, doc, &f->pod, 50), 1);
	for (int i = 0; i < 3; i++) {
		char *p = str_printf("endpoints/%d/conditions/ready", i);
		assert_non_null(p);
		json_t *v = at(f->res, p);
		free(p);
		assert_true(json_is_true(v));
	}
	check_bool(f->res, "endpoints/0/conditions/serving", true);
	check_bool(f->res, "endpoints/0/conditions/terminating", false);
	check_bool(f->res, "endpoints/1/conditions/terminating", false);
	check_bool(f->res, "endpoints/2/conditions/serving", true);
	check_bool(f->res, "endpoints/2/conditions/terminating", false);
	check_str(f->res, "endpoints/2/addresses/0", "10.0.0.5");
	check_size(f->res, "endpoints/2/addresses", 1);
	/* two addresses for a pod become one */
	static const char two[] = SLICE_HEAD("IPv4", "default")
	    EP_READY("10.0.0.5','10.0.0.6", REF("default", "web-1", "u1")) SLICE_TAIL;
	assert_int_equal(run(f, SLICE, two, &f->pod, 50), 1);
	check_size(f->res, "endpoints/0/addresses", 1);
	check_str(f->res, "endpoints/0/addresses/0", "10.0.0.5");
}

static void test_slice_malformed(void **state)
{
	struct fx *f = *state;
	web1(f, "10.0.0.8", true, false);
	static const char *const errors[] = {
	    "",
	    "{",
	    "[]",
	    "[{'addressType':'IPv4'}]",
	    "'x'",
	    "{'metadata':'x','addressType':'IPv4'}",
	    "{'metadata':[],'addressType':'IPv4'}",
	    "{'addressType':'IPv4'} {}",
	    "{'a':1e999999}",
	};
	for (size_t i = 0; i < N_ELEMS(errors); i++)
		if (run(f, SLICE, errors[i], &f->pod, 1) != -1)
			fail_msg("not an error: %s", errors[i]);
	static const char *const nothing[] = {
	    "{}",
	    "{'addressType':'IPv4'}",
	    "{'addressType':'IPv4','endpoints':null}",
	    "{'addressType':'IPv4','endpoints':{'targetRef':" REF("default", "web-1", "u1") "}}",
	    "{'addressType':'IPv4','endpoints':[1,'x',null,[],{}]}",
	    "{'addressType':'IPv4','endpoints':[{'targetRef':'web-1'},{'targetRef':[]},"
	    "{'targetRef':{'kind':1,'name':'web-1'}},{'targetRef':{'kind':'Pod','name':1,"
	    "'uid':2,'namespace':3}}]}",
	    "{'metadata':{'namespace':7},'addressType':'IPv4','endpoints':["
	    "{'targetRef':{'kind':'Pod','name':'web-1'}}]}",
	    "{'addressType':'IPv4','endpoints':[{'targetRef':{'kind':'Pod','uid':'u1\\u0000x'}}]}",
	};
	for (size_t i = 0; i < N_ELEMS(nothing); i++)
		if (run(f, SLICE, nothing[i], &f->pod, 1) != 0)
			fail_msg("not 0: %s", nothing[i]);

	/* skipped entries around one that matches; metadata null or absent */
	assert_int_equal(run(f, SLICE,
			     "{'metadata':null,'addressType':'IPv4','endpoints':[1,{'targetRef':5},"
			     "{'targetRef':{'kind':'Pod','uid':'u1'}}]}",
			     &f->pod, UINT64_MAX),
			 1);
	check_str(f->res, "metadata/resourceVersion", "18446744073709551615");
	check_str(f->res, "endpoints/2/addresses/0", "10.0.0.8");
	assert_int_equal(json_integer_value(at(f->res, "endpoints/0")), 1);
	assert_int_equal(run(f, SLICE,
			     "{'addressType':'IPv4','endpoints':[{'targetRef':{'kind':'Pod',"
			     "'uid':'u1'}}]}",
			     &f->pod, 0),
			 1);
	check_str(f->res, "metadata/resourceVersion", "0");
	check_str(f->res, "endpoints/0/addresses/0", "10.0.0.8");
	/* a NUL elsewhere in the document does not stop it */
	assert_int_equal(run(f, SLICE,
			     "{'metadata':{'annotations':{'a':'x\\u0000y'}},'addressType':'IPv4',"
			     "'endpoints':[{'targetRef':{'kind':'Pod','uid':'u1'}}]}",
			     &f->pod, 3),
			 1);
	assert_int_equal(json_string_length(at(f->res, "metadata/annotations/a")), 3);
	/* a length that cuts the document, and bytes after it */
	dq(f, SLICE3);
	assert_int_equal(run_raw(f, SLICE, f->doc, strlen(f->doc) - 1, &f->pod, 1), -1);
	free(f->prev);
	f->prev = str_printf("%sjunk", f->doc); /* only len bytes are read */
	assert_non_null(f->prev);
	assert_int_equal(run_raw(f, SLICE, f->prev, strlen(f->doc), &f->pod, 1), 1);
	check_str(f->res, "endpoints/1/addresses/0", "10.0.0.8");
	/* a pod state made by hand with nothing in it */
	struct pod_endpoint_state empty = {0};
	assert_int_equal(run(f, SLICE, SLICE3, &empty, 1), 0);
}

/* ---- Endpoints ---- */

static void test_eps_ip_change(void **state)
{
	struct fx *f = *state;
	keep_input(f, EPS4);
	web1(f, "10.0.0.55", true, false);
	assert_int_equal(run(f, EPS, EPS4, &f->pod, 60), 1);
	check_str(f->res, "metadata/resourceVersion", "60");
	check_size(f->res, "subsets/0/addresses", 3);
	check_str(f->res, "subsets/0/addresses/1/ip", "10.0.0.55");
	check_same(f, "subsets/0/addresses/1/targetRef");
	check_same(f, "subsets/0/addresses/1/nodeName");
	check_same(f, "subsets/0/addresses/0");
	check_same(f, "subsets/0/addresses/2");
	check_same(f, "subsets/0/notReadyAddresses");
	check_same(f, "subsets/0/ports");
	static const char *const keys[] = {"addresses", "notReadyAddresses", "ports"};
	check_keys(f->res, "subsets/0", keys, N_ELEMS(keys));
	static const char *const entry[] = {"ip", "nodeName", "targetRef"};
	check_keys(f->res, "subsets/0/addresses/1", entry, N_ELEMS(entry));

	/* no change */
	web1(f, "10.0.0.5", true, false);
	assert_int_equal(run(f, EPS, EPS4, &f->pod, 61), 0);
}

static void test_eps_to_not_ready_and_back(void **state)
{
	struct fx *f = *state;
	keep_input(f, EPS4);
	web1(f, "10.0.0.5", false, false);
	assert_int_equal(run(f, EPS, EPS4, &f->pod, 70), 1);
	check_size(f->res, "subsets/0/addresses", 2);
	check_str(f->res, "subsets/0/addresses/0/targetRef/name", "web-0");
	check_str(f->res, "subsets/0/addresses/1/targetRef/name", "web-2");
	check_size(f->res, "subsets/0/notReadyAddresses", 2);
	check_str(f->res, "subsets/0/notReadyAddresses/0/targetRef/name", "web-9");
	check_str(f->res, "subsets/0/notReadyAddresses/1/targetRef/name", "web-1");
	check_str(f->res, "subsets/0/notReadyAddresses/1/ip", "10.0.0.5");
	check_same(f, "subsets/0/ports");

	web1(f, "10.0.0.5", true, false);
	assert_int_equal(run_again(f, EPS, &f->pod, 71), 1);
	check_size(f->res, "subsets/0/addresses", 3);
	check_str(f->res, "subsets/0/addresses/2/targetRef/name", "web-1");
	check_size(f->res, "subsets/0/notReadyAddresses", 1);
	check_str(f->res, "subsets/0/notReadyAddresses/0/targetRef/name", "web-9");
	check_str(f->res, "metadata/resourceVersion", "71");
}

static void test_eps_drop_empty_array(void **state)
{
	struct fx *f = *state;
	static const char one[] =
	    EPS_HEAD "{'addresses':[" ADDR("10.0.0.5", REF("default", "web-1", "u1")) "]," PORTS
										      "}" EPS_TAIL;
	web1(f, "10.0.0.5", false, true); /* terminating */
	assert_int_equal(run(f, EPS, one, &f->pod, 80), 1);
	check_absent(f->res, "subsets/0/addresses");
	check_size(f->res, "subsets/0/notReadyAddresses", 1);
	check_str(f->res, "subsets/0/notReadyAddresses/0/targetRef/uid", "u1");
	check_size(f->res, "subsets/0/ports", 1);
	assert_int_equal(run_again(f, EPS, &f->pod, 81), 0);

	web1(f, "10.0.0.6", true, false);
	assert_int_equal(run(f, EPS, one, &f->pod, 80), 1);
	web1(f, "10.0.0.5", false, false);
	assert_int_equal(run_again(f, EPS, &f->pod, 82), 1);
	check_absent(f->res, "subsets/0/addresses");
	check_str(f->res, "subsets/0/notReadyAddresses/0/ip", "10.0.0.5");
	web1(f, "10.0.0.5", true, false);
	assert_int_equal(run_again(f, EPS, &f->pod, 83), 1);
	check_absent(f->res, "subsets/0/notReadyAddresses");
	check_size(f->res, "subsets/0/addresses", 1);
	check_str(f->res, "subsets/0/addresses/0/ip", "10.0.0.5");

	/* an empty array that no move touched stays */
	static const char with_empty[] = EPS_HEAD "{'addresses':[" ADDR(
	    "10.0.0.5", REF("default", "web-1", "u1")) "],'notReadyAddresses':[]}" EPS_TAIL;
	web1(f, "10.0.0.6", true, false);
	assert_int_equal(run(f, EPS, with_empty, &f->pod, 84), 1);
	check_size(f->res, "subsets/0/notReadyAddresses", 0);
	check_str(f->res, "subsets/0/addresses/0/ip", "10.0.0.6");
	/* null arrays are absent ones */
	static const char with_null[] = EPS_HEAD "{'addresses':null,'notReadyAddresses':[" ADDR(
	    "10.0.0.5", REF("default", "web-1", "u1")) "]}" EPS_TAIL;
	assert_int_equal(run(f, EPS, with_null, &f->pod, 85), 1);
	check_absent(f->res, "subsets/0/notReadyAddresses");
	check_str(f->res, "subsets/0/addresses/0/ip", "10.0.0.6");
}

static void test_eps_terminating(void **state)
{
	struct fx *f = *state;
	keep_input(f, EPS4);
	web1(f, "10.0.0.5", true, true); /* Ready, being deleted */
	assert_int_equal(run(f, EPS, EPS4, &f->pod, 95), 1);
	check_size(f->res, "subsets/0/addresses", 2);
	check_str(f->res, "subsets/0/notReadyAddresses/1/targetRef/name", "web-1");
	/* a state made by hand, ready and terminating: not ready all the same */
	assert_true(f->pod.terminating);
	f->pod.ready = true;
	assert_int_equal(run(f, EPS, EPS4, &f->pod, 96), 1);
	check_size(f->res, "subsets/0/addresses", 2);
	check_str(f->res, "subsets/0/addresses/1/targetRef/name", "web-2");
	check_size(f->res, "subsets/0/notReadyAddresses", 2);
	check_str(f->res, "subsets/0/notReadyAddresses/1/targetRef/name", "web-1");
	check_same(f, "subsets/0/notReadyAddresses/0");
}

static void test_eps_families_and_subsets(void **state)
{
	struct fx *f = *state;
	static const char doc[] = EPS_HEAD "{'addresses':[" ADDR(
	    "fd00::5",
	    REF("default", "web-1",
		"u1")) "]," PORTS
		       "},{'notReadyAddresses':[" ADDR(
			   "10.0.0.5",
			   "{'kind':'Pod','name':'web-1'}") "],'ports':[{'port':9090}]}" EPS_TAIL;
	/* IPv4 only: the IPv6 entry keeps its ip, the IPv4 one moves */
	web1(f, "10.0.0.8", true, false);
	assert_int_equal(run(f, EPS, doc, &f->pod, 90), 1);
	check_str(f->res, "subsets/0/addresses/0/ip", "fd00::5");
	check_str(f->res, "subsets/1/addresses/0/ip", "10.0.0.8");
	check_absent(f->res, "subsets/1/notReadyAddresses");
	static const char *const keys[] = {"ports", "addresses"};
	check_keys(f->res, "subsets/1", keys, N_ELEMS(keys));
	/* dual stack, IPv6 first */
	set_pod(f, &f->pod, "default", "web-1", "u1",
		"'podIPs':[{'ip':'fd00::8'},{'ip':'10.0.0.8'}]," READY_FALSE, false);
	assert_int_equal(run(f, EPS, doc, &f->pod, 91), 1);
	check_absent(f->res, "subsets/0/addresses");
	check_str(f->res, "subsets/0/notReadyAddresses/0/ip", "fd00::8");
	check_str(f->res, "subsets/1/notReadyAddresses/0/ip", "10.0.0.8");
}

static void test_eps_other_pods_untouched(void **state)
{
	struct fx *f = *state;
	web1(f, "10.0.0.50", false, true);
	static const char doc[] =
	    EPS_HEAD "{'addresses':[" ADDR("10.0.0.4", REF("default", "web-0", "u0")) "," ADDR(
		"10.0.0.5",
		REF("prod", "web-1", "u9")) "," ADDR("10.0.0.6",
						     "{'kind':'Node','name':'web-1','uid':'u1'"
						     "}") "," ADDR("10.0.0.7", "{'name':'web-1'"
									       "}") "]"
										    "}" EPS_TAIL;
	assert_int_equal(run(f, EPS, doc, &f->pod, 1), 0);
	/* not a v1 Endpoints namespace: no */
	static const char prod[] =
	    "{'metadata':{'namespace':'prod'},'subsets':[{'addresses':[" ADDR(
		"10.0.0.5", "{'kind':'Pod','name':'web-1'}") "]}]}";
	assert_int_equal(run(f, EPS, prod, &f->pod, 1), 0);
}

static void test_eps_malformed(void **state)
{
	struct fx *f = *state;
	web1(f, "10.0.0.8", false, false);
	static const char *const errors[] = {
	    "", "{", "[]", "7", "{'metadata':5,'subsets':[]}", "{'subsets':[]}]",
	};
	for (size_t i = 0; i < N_ELEMS(errors); i++)
		if (run(f, EPS, errors[i], &f->pod, 1) != -1)
			fail_msg("not an error: %s", errors[i]);
	static const char *const nothing[] = {
	    "{}",
	    "{'subsets':{}}",
	    "{'subsets':[1,null,'x',[],{}]}",
	    /* wrong-typed lists: the subset is left alone */
	    "{'subsets':[{'addresses':'x','notReadyAddresses':[{'ip':'10.0.0.5','targetRef':{"
	    "'kind':'Pod','uid':'u1'}}]}]}",
	    "{'subsets':[{'notReadyAddresses':{},'addresses':[{'ip':'10.0.0.5','targetRef':{"
	    "'kind':'Pod','uid':'u1'}}]}]}",
	    "{'subsets':[{'addresses':[1,'x',null,{'targetRef':3},{'targetRef':{'kind':'Pod'}}]}]}",
	};
	for (size_t i = 0; i < N_ELEMS(nothing); i++)
		if (run(f, EPS, nothing[i], &f->pod, 1) != 0)
			fail_msg("not 0: %s", nothing[i]);

	/* an entry without an ip moves all the same; the others keep their place */
	assert_int_equal(run(f, EPS,
			     "{'subsets':[{'addresses':[1,{'targetRef':{'kind':'Pod','uid':'u1'}},"
			     "'x',{'ip':7,'targetRef':{'kind':'Pod','uid':'u1'}}]}]}",
			     &f->pod, 2),
			 1);
	check_size(f->res, "subsets/0/addresses", 2);
	assert_int_equal(json_integer_value(at(f->res, "subsets/0/addresses/0")), 1);
	check_str(f->res, "subsets/0/addresses/1", "x");
	check_size(f->res, "subsets/0/notReadyAddresses", 2);
	check_absent(f->res, "subsets/0/notReadyAddresses/0/ip");
	assert_int_equal(json_integer_value(at(f->res, "subsets/0/notReadyAddresses/1/ip")), 7);
	/* a subset that is not an object next to one that is */
	assert_int_equal(
	    run(f, EPS,
		"{'subsets':[5,{'addresses':[{'ip':'10.0.0.5','targetRef':{'kind':'Pod',"
		"'uid':'u1'}}]}]}",
		&f->pod, 3),
	    1);
	assert_int_equal(json_integer_value(at(f->res, "subsets/0")), 5);
	check_str(f->res, "subsets/1/notReadyAddresses/0/ip", "10.0.0.8");
	check_absent(f->res, "subsets/1/addresses");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_parse_pod_ips, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_parse_pod_ip_fallback, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_parse_ready_and_terminating, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_parse_malformed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_differs, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_slice_uid_match, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_slice_name_namespace_match, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_slice_ref_without_namespace, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_slice_other_pods_untouched, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_slice_ipv6, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_slice_fqdn_untouched, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_slice_ready_and_back, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_slice_terminating, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_slice_no_change, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_slice_conditions_created, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_slice_malformed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_eps_ip_change, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_eps_to_not_ready_and_back, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_eps_drop_empty_array, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_eps_terminating, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_eps_families_and_subsets, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_eps_other_pods_untouched, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_eps_malformed, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
