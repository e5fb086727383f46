/*
 * test_filter.c - filter/: which filters a request gets (YurtHub's default
 * table, the flags, the configmap's additions), each of the seven filters
 * on the cases YurtHub's code decides (annotation grammars, address
 * families, missing services, empty results, ...), the order they run in,
 * and filter_wants' promise: for every object of every case, when
 * filter_apply changes or drops it, filter_wants - given what the real list
 * decoder picks from its bytes - said so.
 *
 * Objects are written with ' for " to stay readable.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filter/filter.h"
#include "kube/stream.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

#define DISCARD	  FILTER_BIT(FILTER_DISCARDCLOUDSERVICE)
#define NODEPORT  FILTER_BIT(FILTER_NODEPORTISOLATION)
#define MASTER	  FILTER_BIT(FILTER_MASTERSERVICE)
#define TOPO	  FILTER_BIT(FILTER_SERVICETOPOLOGY)
#define FORWARD	  FILTER_BIT(FILTER_FORWARDKUBESVCTRAFFIC)
#define INCLUSTER FILTER_BIT(FILTER_INCLUSTERCONFIG)
#define ENVUPD	  FILTER_BIT(FILTER_SERVICEENVUPDATER)

#define UNCHANGED  FILTER_UNCHANGED
#define CHANGED	   FILTER_CHANGED
#define DROP	   FILTER_DROP
#define UNPARSABLE FILTER_UNPARSABLE

static const struct filter_target SERVICES = {"", "v1", "services"};
static const struct filter_target ENDPOINTS = {"", "v1", "endpoints"};
static const struct filter_target CONFIGMAPS = {"", "v1", "configmaps"};
static const struct filter_target PODS = {"", "v1", "pods"};
static const struct filter_target SECRETS = {"", "v1", "secrets"};
static const struct filter_target SLICES = {"discovery.k8s.io", "v1", "endpointslices"};
static const struct filter_target SLICES_B1 = {"discovery.k8s.io", "v1beta1", "endpointslices"};

/* ---- the node the tests run on ---- */

static const char *const POOL_NODES[] = {"edge-1", "edge-2", "edge-3"}; /* strcmp order */

/* The Services the hub knows, and their openyurt.io/topologyKeys. */
static const struct {
	const char *ns, *name, *keys;
} KNOWN_SERVICES[] = {
    {"default", "svc-node", "kubernetes.io/hostname"},
    {"default", "svc-pool", "openyurt.io/nodepool"},
    {"default", "svc-zone", "kubernetes.io/zone"},
    {"default", "svc-other", "kubernetes.io/region"},
    {"default", "svc-list", "kubernetes.io/hostname,openyurt.io/nodepool"},
    {"default", "svc-plain", NULL},
    {"default", "kubernetes", "kubernetes.io/hostname"},
};

static const char *topology_keys(const struct filter_env *env, const char *ns, const char *name)
{
	(void)env;
	for (size_t i = 0; i < N_ELEMS(KNOWN_SERVICES); i++)
		if (strcmp(KNOWN_SERVICES[i].ns, ns) == 0 &&
		    strcmp(KNOWN_SERVICES[i].name, name) == 0)
			return KNOWN_SERVICES[i].keys;
	return NULL;
}

static struct filter_env node_env(void)
{
	struct filter_env env = {
	    .node_name = "edge-1",
	    .pool_name = "hangzhou",
	    .hub_host = "169.254.2.1",
	    .hub_port = "10268",
	    .hub_ipv6 = false,
	    .pool_topology = true,
	    .pool_nodes = POOL_NODES,
	    .npool_nodes = N_ELEMS(POOL_NODES),
	    .topology_keys = topology_keys,
	};
	return env;
}

/* ---- objects ---- */

/* malloc'ed: s with every ' turned into ". */
static char *js(const char *s)
{
	char *out = strdup(s);

	assert_non_null(out);
	for (char *p = out; *p; p++)
		if (*p == '\'')
			*p = '"';
	return out;
}

static json_t *parse(const char *text)
{
	char *t = js(text);
	json_error_t e;
	json_t *v = json_loads(t, 0, &e);

	if (!v)
		print_error("test JSON does not parse: %s: %s\n", e.text, t);
	free(t);
	assert_non_null(v);
	return v;
}

static void print_json(const char *what, const json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT);

	print_error("%s: %s\n", what, s ? s : "?");
	free(s);
}

/* ---- filter_wants as the proxy will call it: on what the list decoder
 * picks from the object's bytes ---- */

struct wants_call {
	filter_mask mask;
	const struct filter_env *env;
	const struct filter_target *t;
	int answer; /* -1 not called */
};

static int wants_on_item(void *ctx, const struct stream_object *item)
{
	struct wants_call *c = ctx;

	c->answer = filter_wants(c->mask, c->env, c->t, item);
	return 0;
}

static bool wants(filter_mask mask, const struct filter_env *env, const struct filter_target *t,
		  const char *object_text)
{
	static const char head[] = "{\"kind\":\"List\",\"items\":[", tail[] = "]}";
	struct wants_call c = {mask, env, t, -1};
	struct list_decoder *d = list_decoder_new(wants_on_item, &c);
	struct list_meta lm;

	assert_non_null(d);
	assert_int_equal(list_decoder_feed(d, head, strlen(head)), 0);
	assert_int_equal(list_decoder_feed(d, object_text, strlen(object_text)), 0);
	assert_int_equal(list_decoder_feed(d, tail, strlen(tail)), 0);
	assert_int_equal(list_decoder_finish(d, &lm), 0);
	list_decoder_free(d);
	assert_int_not_equal(c.answer, -1);
	return c.answer;
}

/* wants() on an object written with ' for ". */
static bool wants_js(filter_mask mask, const struct filter_env *env, const struct filter_target *t,
		     const char *quoted)
{
	char *text = js(quoted);
	bool w = wants(mask, env, t, text);

	free(text);
	return w;
}

/* ---- one case ---- */

static unsigned ncases;

/* filter_wants must say yes whenever filter_apply does something. */
static void check_wants_promise(filter_mask mask, const struct filter_env *env,
				const struct filter_target *t, const char *text,
				enum filter_result r)
{
	if (r != UNCHANGED && !wants(mask, env, t, text)) {
		print_error("filter_wants said no to an object filter_apply %s (mask %#x): %s\n",
			    r == DROP ? "drops" : "changes", mask, text);
		fail();
	}
}

/* Runs mask on in (' for ") for target t: the result must be want, the
 * object out when CHANGED (in itself when UNCHANGED).  Every case also
 * checks the filter_wants promise, for mask and for all filters. */
static void check_env(const struct filter_env *env, filter_mask mask, const struct filter_target *t,
		      const char *in, enum filter_result want, const char *out)
{
	char *text = js(in);
	json_t *obj = parse(in), *orig = json_deep_copy(obj), *all = json_deep_copy(obj);
	enum filter_result r = filter_apply(mask, env, t, obj);

	ncases++;
	if (r != want) {
		print_error("filter_apply(%#x) = %d, want %d, on %s\n", mask, r, want, text);
		fail();
	}
	if (want == CHANGED) {
		json_t *expect = parse(out);

		if (!json_equal(obj, expect)) {
			print_json("got", obj);
			print_json("want", expect);
			fail();
		}
		assert_false(json_equal(obj, orig));
		json_decref(expect);
	} else if (want == UNCHANGED && !json_equal(obj, orig)) {
		print_json("UNCHANGED but changed", obj);
		fail();
	}
	check_wants_promise(mask, env, t, text, r);
	check_wants_promise(FILTER_ALL, env, t, text, filter_apply(FILTER_ALL, env, t, all));
	json_decref(all);
	json_decref(orig);
	json_decref(obj);
	free(text);
}

static void check(filter_mask mask, const struct filter_target *t, const char *in,
		  enum filter_result want, const char *out)
{
	struct filter_env env = node_env();

	check_env(&env, mask, t, in, want, out);
}

/* ==== names and selection ==== */

static void test_names(void **state)
{
	static const char *const names[] = {
	    "discardcloudservice",   "nodeportisolation", "masterservice",     "servicetopology",
	    "forwardkubesvctraffic", "inclusterconfig",	  "serviceenvupdater",
	};

	(void)state;
	assert_int_equal(N_ELEMS(names), FILTER_COUNT);
	for (int id = 0; id < FILTER_COUNT; id++) {
		assert_string_equal(filter_name((enum filter_id)id), names[id]);
		assert_int_equal(filter_by_name(names[id]), id);
	}
	assert_null(filter_name(FILTER_COUNT));
	assert_int_equal(filter_by_name("filter_masterservice"), -1);
	assert_int_equal(filter_by_name("MasterService"), -1);
	assert_int_equal(filter_by_name("hostnetworkpropagation"), -1);
	assert_int_equal(filter_by_name("podenvupdater"), -1);
	assert_int_equal(filter_by_name(""), -1);
	assert_int_equal(filter_by_name(NULL), -1);
}

/* YurtHub's default table, expanded (component x resource -> verbs, filters). */
static const struct {
	const char *comp, *resource, *verbs;
	filter_mask mask;
} EXPANDED[] = {
    {"kubelet", "services", "list,watch", MASTER},
    {"kubelet", "configmaps", "get,list,watch", INCLUSTER},
    {"kubelet", "pods", "list,watch,get,patch", ENVUPD},
    {"kube-proxy", "services", "list,watch", DISCARD | NODEPORT},
    {"kube-proxy", "endpointslices", "list,watch", TOPO | FORWARD},
    {"kube-proxy", "endpoints", "list,watch", TOPO},
    {"coredns", "endpoints", "list,watch", TOPO},
    {"coredns", "endpointslices", "list,watch", TOPO},
    {"nginx-ingress-controller", "endpoints", "list,watch", TOPO},
    {"nginx-ingress-controller", "endpointslices", "list,watch", TOPO},
};

static bool verb_in(const char *verbs, const char *verb)
{
	size_t n = strlen(verb);

	for (const char *p = verbs; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (strncmp(p, verb, n) == 0 && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

static filter_mask expected_default(const char *comp, const char *resource, const char *verb)
{
	for (size_t i = 0; i < N_ELEMS(EXPANDED); i++)
		if (strcmp(EXPANDED[i].comp, comp) == 0 &&
		    strcmp(EXPANDED[i].resource, resource) == 0 && verb_in(EXPANDED[i].verbs, verb))
			return EXPANDED[i].mask;
	return 0;
}

static const char *const COMPS[] = {"kubelet",	"kube-proxy", "coredns", "nginx-ingress-controller",
				    "flanneld", "kubectl"};
static const char *const RESOURCES[] = {"services", "endpoints", "endpointslices", "configmaps",
					"pods",	    "nodes",	 "secrets"};
static const char *const VERBS[] = {"get",    "list",	"watch",  "patch",
				    "create", "update", "delete", "deletecollection"};

static void test_default_table(void **state)
{
	struct filter_config cfg;
	unsigned selected = 0;

	(void)state;
	assert_int_equal(filter_config_init(&cfg, true, NULL, 0, false), 0);
	assert_int_equal(cfg.enabled, FILTER_ALL);
	for (size_t c = 0; c < N_ELEMS(COMPS); c++)
		for (size_t r = 0; r < N_ELEMS(RESOURCES); r++)
			for (size_t v = 0; v < N_ELEMS(VERBS); v++) {
				filter_mask want =
				    expected_default(COMPS[c], RESOURCES[r], VERBS[v]);
				filter_mask got =
				    filter_select(&cfg, "edge-1", COMPS[c], VERBS[v], RESOURCES[r]);

				if (got != want) {
					print_error("%s %s %s: %#x, want %#x\n", COMPS[c], VERBS[v],
						    RESOURCES[r], got, want);
					fail();
				}
				selected += got != 0;
			}
	/* 2 + 3 + 4 + 2 + 2 + 2 + 2*2*2 rows of the expanded table */
	assert_int_equal(selected, 23);
	filter_config_free(&cfg);
}

static void test_select_inputs(void **state)
{
	struct filter_config cfg;

	(void)state;
	assert_int_equal(filter_config_init(&cfg, true, NULL, 0, false), 0);
	/* trimmed as YurtHub trims each part of its key */
	assert_int_equal(filter_select(&cfg, "edge-1", " kubelet ", " list", "services "), MASTER);
	/* the hub lower-cases components; a caller that did not is not punished */
	assert_int_equal(filter_select(&cfg, "edge-1", "Kube-Proxy", "watch", "services"),
			 DISCARD | NODEPORT);
	assert_int_equal(filter_select(&cfg, "edge-1", "", "list", "services"), 0);
	assert_int_equal(filter_select(&cfg, "edge-1", "  ", "list", "services"), 0);
	assert_int_equal(filter_select(&cfg, "edge-1", NULL, "list", "services"), 0);
	assert_int_equal(filter_select(&cfg, "edge-1", "kubelet", NULL, "services"), 0);
	assert_int_equal(filter_select(&cfg, "edge-1", "kubelet", "list", NULL), 0);
	assert_int_equal(filter_select(NULL, "edge-1", "kubelet", "list", "services"), 0);
	/* no prefix matches */
	assert_int_equal(filter_select(&cfg, "edge-1", "kubelet2", "list", "services"), 0);
	assert_int_equal(filter_select(&cfg, "edge-1", "kubele", "list", "services"), 0);
	assert_int_equal(filter_select(&cfg, "edge-1", "kubelet", "list", "service"), 0);
	filter_config_free(&cfg);
	/* a freed configuration selects nothing */
	assert_int_equal(filter_select(&cfg, "edge-1", "kubelet", "list", "services"), 0);
}

/* Before yurt-hub-cfg is known, what a component could get: every enabled
 * filter of the request's resource and verb, whoever asks - but the hub's
 * own components nothing (their answers feed the filters). */
static void test_select_possible(void **state)
{
	static const char *const off[] = {"discardcloudservice"};
	struct filter_config cfg;

	(void)state;
	assert_int_equal(filter_config_init(&cfg, true, off, 1, false), 0);
	assert_int_equal(filter_select_possible(&cfg, "edge-1", "mycomp", "list", "services"),
			 NODEPORT | MASTER);
	assert_int_equal(filter_select(&cfg, "edge-1", "mycomp", "list", "services"), 0);
	assert_int_equal(
	    filter_select_possible(&cfg, "edge-1", "mycomp", "watch", "endpointslices"),
	    TOPO | FORWARD);
	assert_int_equal(filter_select_possible(&cfg, "edge-1", "mycomp", "get", "pods"), ENVUPD);
	assert_int_equal(filter_select_possible(&cfg, "edge-1", "mycomp", "list", "nodes"), 0);
	assert_int_equal(filter_select_possible(&cfg, "edge-1", "mycomp", "create", "pods"), 0);
	assert_int_equal(filter_select_possible(&cfg, "edge-1", "yurthub", "list", "services"), 0);
	assert_int_equal(
	    filter_select_possible(&cfg, "edge-1", "multiplexer-proxy-edge-1", "list", "services"),
	    0);
	assert_int_equal(filter_select_possible(&cfg, "edge-1", "", "list", "services"), 0);
	filter_config_free(&cfg);
	assert_int_equal(filter_config_init(&cfg, false, NULL, 0, false), 0);
	assert_int_equal(filter_select_possible(&cfg, "edge-1", "kube-proxy", "list", "services"),
			 0);
	filter_config_free(&cfg);
}

static void test_hub_own_components(void **state)
{
	static const char *const keys[] = {"masterservice", "servicetopology"};
	static const char *const values[] = {
	    "yurthub, multiplexer-proxy-edge-1, multiplexer-proxy-edge-2",
	    "yurthub,multiplexer-proxy-edge-1"};
	struct filter_config cfg;

	(void)state;
	assert_int_equal(filter_config_init(&cfg, true, NULL, 0, false), 0);
	assert_int_equal(filter_config_set_extras(&cfg, keys, values, 2), 0);
	assert_int_equal(filter_select(&cfg, "edge-1", "yurthub", "list", "services"), 0);
	assert_int_equal(filter_select(&cfg, "edge-1", "yurthub", "watch", "endpoints"), 0);
	assert_int_equal(
	    filter_select(&cfg, "edge-1", "multiplexer-proxy-edge-1", "list", "services"), 0);
	assert_int_equal(
	    filter_select(&cfg, "edge-1", "multiplexer-proxy-edge-1", "list", "endpointslices"), 0);
	/* another node's multiplexer is a client like any other */
	assert_int_equal(
	    filter_select(&cfg, "edge-1", "multiplexer-proxy-edge-2", "list", "services"), MASTER);
	/* without a node name only yurthub is the hub's own */
	assert_int_equal(filter_select(&cfg, NULL, "multiplexer-proxy-edge-1", "list", "services"),
			 MASTER);
	filter_config_free(&cfg);
}

static void test_configmap_extras(void **state)
{
	static const char *const keys[] = {
	    "servicetopology",	 "masterservice",   "filter_inclusterconfig", "cache_agents",
	    "nodeportisolation", "ServiceTopology", "serviceenvupdater"};
	static const char *const values[] = {" Traefik , ,my-Ingress,,traefik,TRAEFIK ",
					     "kube-proxy",
					     "foo",
					     "bar",
					     "",
					     "baz",
					     NULL};
	struct filter_config cfg;

	(void)state;
	assert_int_equal(filter_config_init(&cfg, true, NULL, 0, false), 0);
	assert_int_equal(filter_config_set_extras(&cfg, keys, values, N_ELEMS(keys)), 0);
	/* trimmed, lower-cased, empty entries skipped, repeats kept once, sorted */
	assert_int_equal(cfg.nextra[FILTER_SERVICETOPOLOGY], 2);
	assert_string_equal(cfg.extra[FILTER_SERVICETOPOLOGY][0], "my-ingress");
	assert_string_equal(cfg.extra[FILTER_SERVICETOPOLOGY][1], "traefik");
	assert_int_equal(cfg.nextra[FILTER_NODEPORTISOLATION], 0);
	assert_int_equal(cfg.nextra[FILTER_INCLUSTERCONFIG], 0);
	/* every resource and verb of the filter's default rows, no other */
	for (size_t r = 0; r < N_ELEMS(RESOURCES); r++)
		for (size_t v = 0; v < N_ELEMS(VERBS); v++) {
			bool topo =
			    (strcmp(RESOURCES[r], "endpoints") == 0 ||
			     strcmp(RESOURCES[r], "endpointslices") == 0) &&
			    (strcmp(VERBS[v], "list") == 0 || strcmp(VERBS[v], "watch") == 0);
			filter_mask want = topo ? TOPO : 0;

			assert_int_equal(
			    filter_select(&cfg, "n", "traefik", VERBS[v], RESOURCES[r]), want);
			assert_int_equal(
			    filter_select(&cfg, "n", "my-ingress", VERBS[v], RESOURCES[r]), want);
		}
	assert_int_equal(filter_select(&cfg, "n", "kube-proxy", "list", "services"),
			 DISCARD | NODEPORT | MASTER);
	/* keys that are not exactly a filter's name add nothing */
	assert_int_equal(filter_select(&cfg, "n", "foo", "get", "configmaps"), 0);
	assert_int_equal(filter_select(&cfg, "n", "bar", "list", "services"), 0);
	assert_int_equal(filter_select(&cfg, "n", "baz", "list", "endpoints"), 0);
	/* the defaults stay */
	assert_int_equal(filter_select(&cfg, "n", "coredns", "list", "endpoints"), TOPO);

	/* the configmap deleted: back to the defaults */
	assert_int_equal(filter_config_set_extras(&cfg, NULL, NULL, 0), 0);
	assert_int_equal(filter_select(&cfg, "n", "traefik", "list", "endpoints"), 0);
	assert_int_equal(filter_select(&cfg, "n", "kube-proxy", "list", "services"),
			 DISCARD | NODEPORT);
	filter_config_free(&cfg);

	/* an addition for a disabled filter adds nothing */
	{
		static const char *const off[] = {"servicetopology"};

		assert_int_equal(filter_config_init(&cfg, true, off, 1, false), 0);
		assert_int_equal(filter_config_set_extras(&cfg, keys, values, 1), 0);
		assert_int_equal(filter_select(&cfg, "n", "traefik", "list", "endpoints"), 0);
		assert_int_equal(filter_select(&cfg, "n", "coredns", "list", "endpoints"), 0);
		filter_config_free(&cfg);
	}
}

static filter_mask enabled_with(bool enable, const char *const *names, size_t n, bool cloud)
{
	struct filter_config cfg;
	filter_mask m;

	assert_int_equal(filter_config_init(&cfg, enable, names, n, cloud), 0);
	m = cfg.enabled;
	filter_config_free(&cfg);
	return m;
}

static void test_disabled_filters(void **state)
{
	static const char *const two[] = {"masterservice", " servicetopology "};
	static const char *const star[] = {"*"};
	static const char *const star_and[] = {"masterservice", "*"};
	static const char *const empties[] = {"", " "};
	static const char *const cloud_too[] = {"nodeportisolation"};
	const filter_mask cloud_off = DISCARD | FORWARD | ENVUPD;
	struct filter_config cfg;

	(void)state;
	assert_int_equal(enabled_with(true, NULL, 0, false), FILTER_ALL);
	assert_int_equal(enabled_with(false, NULL, 0, false), 0);
	assert_int_equal(enabled_with(false, NULL, 0, true), 0);
	assert_int_equal(enabled_with(true, two, 2, false), FILTER_ALL & ~(MASTER | TOPO));
	assert_int_equal(enabled_with(true, star, 1, false), 0);
	assert_int_equal(enabled_with(true, star_and, 2, false), 0);
	assert_int_equal(enabled_with(true, empties, 2, false), FILTER_ALL);
	/* cloud mode: three off; "*" still means all */
	assert_int_equal(enabled_with(true, NULL, 0, true), FILTER_ALL & ~cloud_off);
	assert_int_equal(enabled_with(true, cloud_too, 1, true),
			 FILTER_ALL & ~cloud_off & ~NODEPORT);
	assert_int_equal(enabled_with(true, star, 1, true), 0);

	assert_int_equal(filter_config_init(&cfg, true, two, 2, false), 0);
	assert_int_equal(filter_select(&cfg, "n", "kubelet", "list", "services"), 0);
	assert_int_equal(filter_select(&cfg, "n", "kube-proxy", "list", "endpointslices"), FORWARD);
	assert_int_equal(filter_select(&cfg, "n", "kube-proxy", "list", "endpoints"), 0);
	filter_config_free(&cfg);
	assert_int_equal(filter_config_init(&cfg, true, NULL, 0, true), 0);
	assert_int_equal(filter_select(&cfg, "n", "kube-proxy", "list", "services"), NODEPORT);
	assert_int_equal(filter_select(&cfg, "n", "kube-proxy", "list", "endpointslices"), TOPO);
	assert_int_equal(filter_select(&cfg, "n", "kubelet", "get", "pods"), 0);
	assert_int_equal(filter_select(&cfg, "n", "kubelet", "list", "services"), MASTER);
	filter_config_free(&cfg);
}

static void test_unknown_filter_names(void **state)
{
	static const char *const good[] = {"*", " masterservice", "", "serviceenvupdater",
					   "hostnetworkpropagation"};
	static const char *const retired[] = {"hostnetworkpropagation"};
	static const char *const bad[] = {"masterservice", " filter_masterservice ", "nope"};
	char *err = NULL;
	struct filter_config cfg;

	(void)state;
	assert_int_equal(filter_config_check_names(good, N_ELEMS(good), &err), 0);
	assert_null(err);
	/* a filter YurtHub had until 2024: accepted, nothing to disable */
	assert_int_equal(enabled_with(true, retired, 1, false), FILTER_ALL);
	assert_int_equal(filter_config_check_names(bad, N_ELEMS(bad), &err), -1);
	assert_non_null(err);
	print_message("%s\n", err);
	/* the first unknown name, trimmed, and every valid one */
	assert_non_null(strstr(err, "\"filter_masterservice\""));
	assert_null(strstr(err, "nope"));
	for (int id = 0; id < FILTER_COUNT; id++)
		assert_non_null(strstr(err, filter_name((enum filter_id)id)));
	assert_non_null(strstr(err, "*"));
	free(err);
	errno = 0;
	assert_int_equal(filter_config_init(&cfg, true, bad, N_ELEMS(bad), false), -1);
	assert_int_equal(errno, EINVAL);
	filter_config_free(&cfg);
}

/* ==== masterservice ==== */

static void test_masterservice(void **state)
{
	(void)state;
	check(MASTER, &SERVICES,
	      "{'metadata':{'namespace':'default','name':'kubernetes'},"
	      "'spec':{'clusterIP':'10.96.0.1','clusterIPs':['10.96.0.1'],"
	      "'ports':[{'name':'https','port':443,'protocol':'TCP','targetPort':6443}]}}",
	      CHANGED,
	      "{'metadata':{'namespace':'default','name':'kubernetes'},"
	      "'spec':{'clusterIP':'169.254.2.1','clusterIPs':['169.254.2.1'],"
	      "'ports':[{'name':'https','port':10268,'protocol':'TCP','targetPort':6443}]}}");
	/* several ports: the first https one only; dual stack: one address */
	check(
	    MASTER, &SERVICES,
	    "{'kind':'Service','metadata':{'namespace':'default','name':'kubernetes'},"
	    "'spec':{'clusterIP':'10.96.0.1','clusterIPs':['10.96.0.1','fd00::1'],"
	    "'ports':[{'name':'metrics','port':8080},{'name':'https','port':443,'nodePort':30443},"
	    "{'name':'https','port':444}]}}",
	    CHANGED,
	    "{'kind':'Service','metadata':{'namespace':'default','name':'kubernetes'},"
	    "'spec':{'clusterIP':'169.254.2.1','clusterIPs':['169.254.2.1'],"
	    "'ports':[{'name':'metrics','port':8080},{'name':'https','port':10268,'nodePort':30443}"
	    ","
	    "{'name':'https','port':444}]}}");
	/* no https port: the address only */
	check(MASTER, &SERVICES,
	      "{'metadata':{'namespace':'default','name':'kubernetes'},"
	      "'spec':{'clusterIP':'10.96.0.1','ports':[{'name':'http','port':80}]}}",
	      CHANGED,
	      "{'metadata':{'namespace':'default','name':'kubernetes'},"
	      "'spec':{'clusterIP':'169.254.2.1','clusterIPs':['169.254.2.1'],"
	      "'ports':[{'name':'http','port':80}]}}");
	/* already the hub's: nothing to write */
	check(MASTER, &SERVICES,
	      "{'metadata':{'namespace':'default','name':'kubernetes'},"
	      "'spec':{'clusterIP':'169.254.2.1','clusterIPs':['169.254.2.1'],"
	      "'ports':[{'name':'https','port':10268}]}}",
	      UNCHANGED, NULL);
	/* other services */
	check(MASTER, &SERVICES,
	      "{'metadata':{'namespace':'default','name':'web'},"
	      "'spec':{'clusterIP':'10.96.0.9','ports':[{'name':'https','port':443}]}}",
	      UNCHANGED, NULL);
	check(MASTER, &SERVICES,
	      "{'metadata':{'namespace':'kube-system','name':'kubernetes'},"
	      "'spec':{'clusterIP':'10.96.0.9','ports':[{'name':'https','port':443}]}}",
	      UNCHANGED, NULL);
	/* not a Service, though of the services resource; another resource */
	check(MASTER, &SERVICES,
	      "{'kind':'PartialObjectMetadata','metadata':{'namespace':'default','name':'"
	      "kubernetes'}}",
	      UNCHANGED, NULL);
	check(MASTER, &SECRETS,
	      "{'metadata':{'namespace':'default','name':'kubernetes'},"
	      "'spec':{'clusterIP':'10.96.0.1'}}",
	      UNCHANGED, NULL);
	/* not in the mask */
	check(DISCARD | NODEPORT, &SERVICES,
	      "{'metadata':{'namespace':'default','name':'kubernetes'},"
	      "'spec':{'clusterIP':'10.96.0.1'}}",
	      UNCHANGED, NULL);
}

static void test_masterservice_hub_address(void **state)
{
	struct filter_env env = node_env();
	const char *svc = "{'metadata':{'namespace':'default','name':'kubernetes'},"
			  "'spec':{'clusterIP':'10.96.0.1','ports':[{'name':'https','port':443}]}}";

	(void)state;
	/* a port that is no port is not written */
	env.hub_port = "10268x";
	check_env(&env, MASTER, &SERVICES, svc, CHANGED,
		  "{'metadata':{'namespace':'default','name':'kubernetes'},"
		  "'spec':{'clusterIP':'169.254.2.1','clusterIPs':['169.254.2.1'],"
		  "'ports':[{'name':'https','port':443}]}}");
	env.hub_port = "70000";
	check_env(&env, MASTER, &SERVICES, svc, CHANGED,
		  "{'metadata':{'namespace':'default','name':'kubernetes'},"
		  "'spec':{'clusterIP':'169.254.2.1','clusterIPs':['169.254.2.1'],"
		  "'ports':[{'name':'https','port':443}]}}");
	env = node_env();
	env.hub_host = "fd00::2:1";
	env.hub_ipv6 = true;
	check_env(&env, MASTER, &SERVICES, svc, CHANGED,
		  "{'metadata':{'namespace':'default','name':'kubernetes'},"
		  "'spec':{'clusterIP':'fd00::2:1','clusterIPs':['fd00::2:1'],"
		  "'ports':[{'name':'https','port':10268}]}}");
	/* no hub address: nothing */
	env.hub_host = NULL;
	check_env(&env, MASTER, &SERVICES, svc, UNCHANGED, NULL);
	env.hub_host = "";
	check_env(&env, MASTER, &SERVICES, svc, UNCHANGED, NULL);
}

/* ==== discardcloudservice ==== */

static void test_discardcloudservice(void **state)
{
	(void)state;
	check(DISCARD, &SERVICES,
	      "{'metadata':{'namespace':'default','name':'lb',"
	      "'annotations':{'svc.openyurt.io/discard':'true'}},'spec':{'type':'LoadBalancer'}}",
	      DROP, NULL);
	/* the exact string "true" only */
	check(DISCARD, &SERVICES,
	      "{'metadata':{'namespace':'default','name':'lb',"
	      "'annotations':{'svc.openyurt.io/discard':'True'}},'spec':{'type':'LoadBalancer'}}",
	      UNCHANGED, NULL);
	check(DISCARD, &SERVICES,
	      "{'metadata':{'namespace':'default','name':'lb',"
	      "'annotations':{'svc.openyurt.io/discard':'false'}},'spec':{'type':'LoadBalancer'}}",
	      UNCHANGED, NULL);
	/* LoadBalancer services only */
	check(DISCARD, &SERVICES,
	      "{'metadata':{'namespace':'default','name':'lb',"
	      "'annotations':{'svc.openyurt.io/discard':'true'}},'spec':{'type':'ClusterIP'}}",
	      UNCHANGED, NULL);
	check(DISCARD, &SERVICES,
	      "{'metadata':{'namespace':'default','name':'lb'},'spec':{'type':'LoadBalancer'}}",
	      UNCHANGED, NULL);
	/* the tunnel server's in-cloud service, whatever its type */
	check(DISCARD, &SERVICES,
	      "{'metadata':{'namespace':'kube-system','name':'x-tunnel-server-internal-svc'},"
	      "'spec':{'type':'ClusterIP','clusterIP':'10.96.3.3'}}",
	      DROP, NULL);
	check(DISCARD, &SERVICES,
	      "{'metadata':{'namespace':'default','name':'x-tunnel-server-internal-svc'},"
	      "'spec':{'type':'ClusterIP'}}",
	      UNCHANGED, NULL);
	/* the label is not the annotation */
	check(DISCARD, &SERVICES,
	      "{'metadata':{'namespace':'default','name':'lb',"
	      "'labels':{'svc.openyurt.io/discard':'true'}},'spec':{'type':'LoadBalancer'}}",
	      UNCHANGED, NULL);
}

/* ==== nodeportisolation ==== */

/* A service of type type whose listen annotation is value (NULL: none). */
static char *nodeport_service(const char *type, const char *value)
{
	char buf[512];

	if (value)
		snprintf(buf, sizeof(buf),
			 "{'metadata':{'namespace':'default','name':'np',"
			 "'annotations':{'nodeport.openyurt.io/listen':'%s'}},"
			 "'spec':{'type':'%s','ports':[{'port':80,'nodePort':30080}]}}",
			 value, type);
	else
		snprintf(buf, sizeof(buf),
			 "{'metadata':{'namespace':'default','name':'np'},"
			 "'spec':{'type':'%s','ports':[{'port':80,'nodePort':30080}]}}",
			 type);
	return strdup(buf);
}

static void test_nodeportisolation(void **state)
{
	static const struct {
		const char *type, *value;
		enum filter_result want; /* in pool hangzhou */
	} cases[] = {
	    {"NodePort", "hangzhou", UNCHANGED},
	    {"NodePort", "-hangzhou", DROP},
	    {"NodePort", "*", UNCHANGED},
	    {"NodePort", "-hangzhou,*", DROP},
	    {"NodePort", "*,-hangzhou", DROP},
	    {"NodePort", "hangzhou,-hangzhou", UNCHANGED},
	    {"NodePort", "-hangzhou,hangzhou", DROP},
	    {"NodePort", ", ,", DROP},
	    {"NodePort", "", DROP},
	    {"NodePort", NULL, UNCHANGED},
	    {"NodePort", "shanghai", DROP},
	    {"NodePort", "-shanghai", DROP},
	    {"NodePort", "-shanghai,*", UNCHANGED},
	    {"NodePort", " shanghai , hangzhou ", UNCHANGED},
	    {"NodePort", "\\thangzhou\\n", UNCHANGED},
	    {"NodePort", "hangzhou2,hang", DROP},
	    {"NodePort", "-*", DROP},
	    {"NodePort", "-*,hangzhou", UNCHANGED},
	    {"NodePort", "-", DROP},
	    {"NodePort", "--hangzhou,*", UNCHANGED},
	    {"NodePort", "Hangzhou", DROP},
	    {"LoadBalancer", "shanghai", DROP},
	    {"LoadBalancer", "*", UNCHANGED},
	    {"ClusterIP", "-hangzhou", UNCHANGED},
	    {"ClusterIP", "", UNCHANGED},
	    {"ExternalName", "-hangzhou", UNCHANGED},
	};

	(void)state;
	for (size_t i = 0; i < N_ELEMS(cases); i++) {
		char *svc = nodeport_service(cases[i].type, cases[i].value);

		print_message("%s %s\n", cases[i].type, cases[i].value ? cases[i].value : "(none)");
		check(NODEPORT, &SERVICES, svc, cases[i].want, NULL);
		free(svc);
	}
}

static void test_nodeportisolation_no_pool(void **state)
{
	struct filter_env env = node_env();
	char *svc = nodeport_service("NodePort", "-hangzhou");
	char *empty = nodeport_service("NodePort", "");

	(void)state;
	/* a node in no pool keeps the service as Kubernetes made it */
	env.pool_name = "";
	check_env(&env, NODEPORT, &SERVICES, svc, UNCHANGED, NULL);
	check_env(&env, NODEPORT, &SERVICES, empty, UNCHANGED, NULL);
	env.pool_name = NULL;
	check_env(&env, NODEPORT, &SERVICES, svc, UNCHANGED, NULL);
	/* a node of pool shanghai: "-hangzhou" names neither it nor "*" */
	env.pool_name = "shanghai";
	check_env(&env, NODEPORT, &SERVICES, svc, DROP, NULL);
	check_env(&env, NODEPORT, &SERVICES, empty, DROP, NULL);
	/* an annotation that is JSON null is there, and empty */
	env = node_env();
	check_env(&env, NODEPORT, &SERVICES,
		  "{'metadata':{'namespace':'default','name':'np',"
		  "'annotations':{'nodeport.openyurt.io/listen':null}},'spec':{'type':'NodePort'}}",
		  DROP, NULL);
	free(svc);
	free(empty);
}

/* ==== servicetopology ==== */

/* A v1 slice of service svc in ns: endpoints on edge-1, edge-2 (same
 * pool), edge-9 (another pool) and one with no node. */
static char *v1_slice(const char *ns, const char *svc)
{
	char buf[1024];

	snprintf(buf, sizeof(buf),
		 "{'kind':'EndpointSlice','apiVersion':'discovery.k8s.io/v1',"
		 "'metadata':{'namespace':'%s','name':'%s-abcde',"
		 "'labels':{'kubernetes.io/service-name':'%s'}},"
		 "'addressType':'IPv4','ports':[{'name':'http','port':80}],"
		 "'endpoints':[{'addresses':['10.0.1.1'],'nodeName':'edge-1'},"
		 "{'addresses':['10.0.2.1'],'nodeName':'edge-2','zone':'z'},"
		 "{'addresses':['10.0.9.1'],'nodeName':'edge-9'},"
		 "{'addresses':['10.0.0.7'],'topology':{'kubernetes.io/hostname':'edge-1'}}]}",
		 ns, svc, svc);
	return strdup(buf);
}

static char *v1_slice_with(const char *ns, const char *svc, const char *endpoints)
{
	char buf[1024];

	snprintf(buf, sizeof(buf),
		 "{'kind':'EndpointSlice','apiVersion':'discovery.k8s.io/v1',"
		 "'metadata':{'namespace':'%s','name':'%s-abcde',"
		 "'labels':{'kubernetes.io/service-name':'%s'}},"
		 "'addressType':'IPv4','ports':[{'name':'http','port':80}],"
		 "'endpoints':%s}",
		 ns, svc, svc, endpoints);
	return strdup(buf);
}

#define EP1 "{'addresses':['10.0.1.1'],'nodeName':'edge-1'}"
#define EP2 "{'addresses':['10.0.2.1'],'nodeName':'edge-2','zone':'z'}"

static void check_slice(const struct filter_env *env, const char *svc, enum filter_result want,
			const char *endpoints)
{
	char *in = v1_slice("default", svc);
	char *out = endpoints ? v1_slice_with("default", svc, endpoints) : NULL;

	print_message("slice of %s\n", svc);
	check_env(env, TOPO, &SLICES, in, want, out);
	free(in);
	free(out);
}

static void test_servicetopology_v1(void **state)
{
	struct filter_env env = node_env();
	char *s;

	(void)state;
	check_slice(&env, "svc-node", CHANGED, "[" EP1 "]");
	check_slice(&env, "svc-pool", CHANGED, "[" EP1 "," EP2 "]");
	check_slice(&env, "svc-zone", CHANGED, "[" EP1 "," EP2 "]");
	/* an annotation it does not know, a list of keys, none, no service */
	check_slice(&env, "svc-other", UNCHANGED, NULL);
	check_slice(&env, "svc-list", UNCHANGED, NULL);
	check_slice(&env, "svc-plain", UNCHANGED, NULL);
	check_slice(&env, "svc-missing", UNCHANGED, NULL);
	/* the service is looked up in the slice's namespace */
	s = v1_slice("other", "svc-node");
	check(TOPO, &SLICES, s, UNCHANGED, NULL);
	free(s);
	/* no service-name label */
	check(TOPO, &SLICES,
	      "{'metadata':{'namespace':'default','name':'x'},'addressType':'IPv4',"
	      "'endpoints':[{'addresses':['10.0.9.1'],'nodeName':'edge-9'}]}",
	      UNCHANGED, NULL);
	/* every endpoint kept: nothing to write */
	s = v1_slice_with("default", "svc-node", "[" EP1 "]");
	check(TOPO, &SLICES, s, UNCHANGED, NULL);
	free(s);
	/* no endpoints, or an empty list */
	check(TOPO, &SLICES,
	      "{'metadata':{'namespace':'default','name':'x',"
	      "'labels':{'kubernetes.io/service-name':'svc-node'}},'addressType':'IPv4'}",
	      UNCHANGED, NULL);
	s = v1_slice_with("default", "svc-node", "[]");
	check(TOPO, &SLICES, s, UNCHANGED, NULL);
	free(s);
	/* v1beta1 is another target: topology only for it */
	s = v1_slice("default", "svc-node");
	check(FORWARD, &SLICES, s, UNCHANGED, NULL);
	free(s);
}

static void test_servicetopology_empty_result(void **state)
{
	struct filter_env env = node_env();

	(void)state;
	/* a node with none of the endpoints: the slice stays, empty */
	env.node_name = "edge-7";
	check_slice(&env, "svc-node", CHANGED, "[]");
	/* a pool whose node list is known and empty */
	env = node_env();
	env.npool_nodes = 0;
	check_slice(&env, "svc-pool", CHANGED, "[]");
	/* no node name: nothing is on this node */
	env = node_env();
	env.node_name = NULL;
	check_slice(&env, "svc-node", CHANGED, "[]");
}

static void test_servicetopology_pool_knowledge(void **state)
{
	struct filter_env env = node_env();

	(void)state;
	/* pool topology off: pool keys do nothing, hostname still works */
	env.pool_topology = false;
	check_slice(&env, "svc-pool", UNCHANGED, NULL);
	check_slice(&env, "svc-zone", UNCHANGED, NULL);
	check_slice(&env, "svc-node", CHANGED, "[" EP1 "]");
	/* no pool name: this node alone */
	env = node_env();
	env.pool_name = "";
	check_slice(&env, "svc-pool", CHANGED, "[" EP1 "]");
	env.pool_name = NULL;
	check_slice(&env, "svc-zone", CHANGED, "[" EP1 "]");
	/* ... unless pool topology is off */
	env.pool_topology = false;
	check_slice(&env, "svc-pool", UNCHANGED, NULL);
	/* the pool's nodes not known (yet) */
	env = node_env();
	env.pool_nodes = NULL;
	env.npool_nodes = 0;
	check_slice(&env, "svc-pool", UNCHANGED, NULL);
	/* no service annotated: nothing to do */
	env = node_env();
	env.no_topology = true;
	check_slice(&env, "svc-node", UNCHANGED, NULL);
	env = node_env();
	env.topology_keys = NULL;
	check_slice(&env, "svc-node", UNCHANGED, NULL);
}

static void test_servicetopology_v1beta1(void **state)
{
	const char *in =
	    "{'kind':'EndpointSlice','apiVersion':'discovery.k8s.io/v1beta1',"
	    "'metadata':{'namespace':'default','name':'s-1',"
	    "'labels':{'kubernetes.io/service-name':'%s'}},'addressType':'IPv4',"
	    "'endpoints':[{'addresses':['10.0.1.1'],"
	    "'topology':{'kubernetes.io/hostname':'edge-1','topology.kubernetes.io/"
	    "zone':'a'}},"
	    "{'addresses':['10.0.2.1'],'topology':{'kubernetes.io/hostname':'edge-2'}},"
	    "{'addresses':['10.0.9.1'],'topology':{'kubernetes.io/hostname':'edge-9'}},"
	    "{'addresses':['10.0.0.7'],'nodeName':'edge-1'}]}";
	const char *out = "{'kind':'EndpointSlice','apiVersion':'discovery.k8s.io/v1beta1',"
			  "'metadata':{'namespace':'default','name':'s-1',"
			  "'labels':{'kubernetes.io/service-name':'%s'}},'addressType':'IPv4',"
			  "'endpoints':[%s]}";
	const char *e1 = "{'addresses':['10.0.1.1'],'topology':{'kubernetes.io/hostname':'edge-1',"
			 "'topology.kubernetes.io/zone':'a'}}";
	const char *e2 =
	    "{'addresses':['10.0.2.1'],'topology':{'kubernetes.io/hostname':'edge-2'}}";
	char a[1024], b[1024], eps[512];

	(void)state;
	snprintf(a, sizeof(a), in, "svc-node");
	snprintf(b, sizeof(b), out, "svc-node", e1);
	check(TOPO, &SLICES_B1, a, CHANGED, b);
	snprintf(a, sizeof(a), in, "svc-pool");
	snprintf(eps, sizeof(eps), "%s,%s", e1, e2);
	snprintf(b, sizeof(b), out, "svc-pool", eps);
	check(TOPO, &SLICES_B1, a, CHANGED, b);
	snprintf(a, sizeof(a), in, "svc-other");
	check(TOPO, &SLICES_B1, a, UNCHANGED, NULL);
	/* forwardkubesvctraffic is not for v1beta1 */
	check(FORWARD, &SLICES_B1,
	      "{'metadata':{'namespace':'default','name':'kubernetes'},'addressType':'IPv4',"
	      "'ports':[{'name':'https','port':6443}],'endpoints':[{'addresses':['10.0.0.1']}]}",
	      UNCHANGED, NULL);
	/* nor is any other discovery version */
	{
		static const struct filter_target v2 = {"discovery.k8s.io", "v2", "endpointslices"};

		snprintf(a, sizeof(a), in, "svc-node");
		check(TOPO, &v2, a, UNCHANGED, NULL);
	}
}

static void test_servicetopology_endpoints(void **state)
{
	const char *in =
	    "{'kind':'Endpoints','metadata':{'namespace':'default','name':'%s'},'subsets':["
	    "{'addresses':[{'ip':'10.0.1.1','nodeName':'edge-1'},{'ip':'10.0.2.1','nodeName':'edge-"
	    "2'}],"
	    "'notReadyAddresses':[{'ip':'10.0.1.2','nodeName':'edge-1'}],'ports':[{'port':80}]},"
	    "{'addresses':[{'ip':'10.0.2.2','nodeName':'edge-2'}],"
	    "'notReadyAddresses':[{'ip':'10.0.0.9'}],'ports':[{'port':81}]},"
	    "{'addresses':[{'ip':'10.0.0.8'}],'ports':[{'port':82}]}]}";
	char a[1024], b[1024];

	(void)state;
	snprintf(a, sizeof(a), in, "svc-node");
	check(
	    TOPO, &ENDPOINTS, a, CHANGED,
	    "{'kind':'Endpoints','metadata':{'namespace':'default','name':'svc-node'},'subsets':["
	    "{'addresses':[{'ip':'10.0.1.1','nodeName':'edge-1'}],"
	    "'notReadyAddresses':[{'ip':'10.0.1.2','nodeName':'edge-1'}],'ports':[{'port':80}]}]}");
	snprintf(a, sizeof(a), in, "svc-pool");
	check(TOPO, &ENDPOINTS, a, CHANGED,
	      "{'kind':'Endpoints','metadata':{'namespace':'default','name':'svc-pool'},'subsets':["
	      "{'addresses':[{'ip':'10.0.1.1','nodeName':'edge-1'},"
	      "{'ip':'10.0.2.1','nodeName':'edge-2'}],"
	      "'notReadyAddresses':[{'ip':'10.0.1.2','nodeName':'edge-1'}],'ports':[{'port':80}]},"
	      "{'addresses':[{'ip':'10.0.2.2','nodeName':'edge-2'}],"
	      "'notReadyAddresses':[],'ports':[{'port':81}]}]}");
	snprintf(a, sizeof(a), in, "svc-other");
	check(TOPO, &ENDPOINTS, a, UNCHANGED, NULL);
	snprintf(a, sizeof(a), in, "svc-missing");
	check(TOPO, &ENDPOINTS, a, UNCHANGED, NULL);
	/* nothing here: every subset goes, the Endpoints stays */
	{
		struct filter_env env = node_env();

		env.node_name = "edge-7";
		snprintf(a, sizeof(a), in, "svc-node");
		snprintf(b, sizeof(b),
			 "{'kind':'Endpoints','metadata':{'namespace':'default','name':'svc-node'},"
			 "'subsets':[]}");
		check_env(&env, TOPO, &ENDPOINTS, a, CHANGED, b);
	}
	/* a subset with ports only, nothing filtered: left as it is */
	check(TOPO, &ENDPOINTS,
	      "{'metadata':{'namespace':'default','name':'svc-node'},'subsets':["
	      "{'ports':[{'port':80}]},{'addresses':[{'ip':'10.0.1.1','nodeName':'edge-1'}]}]}",
	      UNCHANGED, NULL);
	/* no subsets */
	check(TOPO, &ENDPOINTS, "{'metadata':{'namespace':'default','name':'svc-node'}}", UNCHANGED,
	      NULL);
}

/* ==== forwardkubesvctraffic ==== */

#define KUBE_SLICE(type, port, endpoints)                                                          \
	"{'kind':'EndpointSlice','metadata':{'namespace':'default','name':'kubernetes',"           \
	"'labels':{'kubernetes.io/service-name':'kubernetes'}},"                                   \
	"'addressType':'" type "','ports':[{'name':'https','port':" port ",'protocol':'TCP'}],"    \
	"'endpoints':" endpoints "}"

#define CLOUD_EPS                                                                                  \
	"[{'addresses':['10.0.0.1'],'conditions':{'ready':true},'nodeName':'master-1',"            \
	"'targetRef':{'kind':'Node','name':'master-1'}},{'addresses':['10.0.0.2']}]"

static void test_forwardkubesvctraffic(void **state)
{
	struct filter_env env = node_env();

	(void)state;
	check(FORWARD, &SLICES, KUBE_SLICE("IPv4", "6443", CLOUD_EPS), CHANGED,
	      KUBE_SLICE("IPv4", "10268",
			 "[{'addresses':['169.254.2.1'],'conditions':{'ready':true}}]"));
	/* address families: the slice's must be the hub's */
	check(FORWARD, &SLICES, KUBE_SLICE("IPv6", "6443", "[{'addresses':['fd00::1']}]"),
	      UNCHANGED, NULL);
	check(FORWARD, &SLICES, KUBE_SLICE("FQDN", "6443", "[{'addresses':['api.example']}]"),
	      UNCHANGED, NULL);
	env.hub_host = "fd00::2:1";
	env.hub_ipv6 = true;
	check_env(&env, FORWARD, &SLICES, KUBE_SLICE("IPv4", "6443", CLOUD_EPS), UNCHANGED, NULL);
	check_env(&env, FORWARD, &SLICES, KUBE_SLICE("IPv6", "6443", "[{'addresses':['fd00::1']}]"),
		  CHANGED,
		  KUBE_SLICE("IPv6", "10268",
			     "[{'addresses':['fd00::2:1'],'conditions':{'ready':true}}]"));
	/* already the hub's */
	check(FORWARD, &SLICES,
	      KUBE_SLICE("IPv4", "10268",
			 "[{'addresses':['169.254.2.1'],'conditions':{'ready':true}}]"),
	      UNCHANGED, NULL);
	/* no https port: the endpoints only; the first https port only */
	check(FORWARD, &SLICES,
	      "{'metadata':{'namespace':'default','name':'kubernetes'},'addressType':'IPv4',"
	      "'ports':[{'name':'http','port':80},{'port':443}],'endpoints':[]}",
	      CHANGED,
	      "{'metadata':{'namespace':'default','name':'kubernetes'},'addressType':'IPv4',"
	      "'ports':[{'name':'http','port':80},{'port':443}],"
	      "'endpoints':[{'addresses':['169.254.2.1'],'conditions':{'ready':true}}]}");
	check(FORWARD, &SLICES,
	      "{'metadata':{'namespace':'default','name':'kubernetes'},'addressType':'IPv4',"
	      "'ports':[{'name':'https','port':6443},{'name':'https','port':6444}]}",
	      CHANGED,
	      "{'metadata':{'namespace':'default','name':'kubernetes'},'addressType':'IPv4',"
	      "'ports':[{'name':'https','port':10268},{'name':'https','port':6444}],"
	      "'endpoints':[{'addresses':['169.254.2.1'],'conditions':{'ready':true}}]}");
	/* other slices, other names */
	check(FORWARD, &SLICES,
	      "{'metadata':{'namespace':'default','name':'kubernetes-x'},'addressType':'IPv4',"
	      "'ports':[{'name':'https','port':6443}],'endpoints':[{'addresses':['10.0.0.1']}]}",
	      UNCHANGED, NULL);
	check(FORWARD, &SLICES,
	      "{'metadata':{'namespace':'kube-system','name':'kubernetes'},'addressType':'IPv4',"
	      "'ports':[{'name':'https','port':6443}],'endpoints':[{'addresses':['10.0.0.1']}]}",
	      UNCHANGED, NULL);
	/* no address type: not the hub's family */
	check(FORWARD, &SLICES,
	      "{'metadata':{'namespace':'default','name':'kubernetes'},"
	      "'ports':[{'name':'https','port':6443}],'endpoints':[{'addresses':['10.0.0.1']}]}",
	      UNCHANGED, NULL);
	env = node_env();
	env.hub_host = NULL;
	check_env(&env, FORWARD, &SLICES, KUBE_SLICE("IPv4", "6443", CLOUD_EPS), UNCHANGED, NULL);
}

/* servicetopology runs before forwardkubesvctraffic: the hub's endpoint,
 * which names no node, is never filtered away by topology. */
static void test_order(void **state)
{
	const char *hub = KUBE_SLICE("IPv4", "10268",
				     "[{'addresses':['169.254.2.1'],'conditions':{'ready':true}}]");

	(void)state;
	/* default/kubernetes is annotated kubernetes.io/hostname in KNOWN_SERVICES */
	check(TOPO, &SLICES, KUBE_SLICE("IPv4", "6443", CLOUD_EPS), CHANGED,
	      KUBE_SLICE("IPv4", "6443", "[]"));
	check(TOPO | FORWARD, &SLICES, KUBE_SLICE("IPv4", "6443", CLOUD_EPS), CHANGED, hub);
	/* the chain stops at a drop: masterservice does not touch what
	 * discardcloudservice dropped */
	{
		json_t *svc = parse("{'metadata':{'namespace':'default','name':'kubernetes',"
				    "'annotations':{'svc.openyurt.io/discard':'true'}},"
				    "'spec':{'type':'LoadBalancer','clusterIP':'10.96.0.1'}}");
		struct filter_env env = node_env();

		assert_int_equal(filter_apply(DISCARD | MASTER, &env, &SERVICES, svc), DROP);
		assert_string_equal(
		    json_string_value(json_object_get(json_object_get(svc, "spec"), "clusterIP")),
		    "10.96.0.1");
		json_decref(svc);
	}
}

/* ==== inclusterconfig ==== */

static char *kube_proxy_cm(const char *ns, const char *name, const char *conf)
{
	char buf[2048];

	snprintf(buf, sizeof(buf),
		 "{'kind':'ConfigMap','metadata':{'namespace':'%s','name':'%s'},"
		 "'data':{'config.conf':'%s','kubeconfig.conf':'apiVersion: v1'}}",
		 ns, name, conf);
	return strdup(buf);
}

static void check_conf(const char *conf, const char *want)
{
	char *in = kube_proxy_cm("kube-system", "kube-proxy", conf);
	char *out = want ? kube_proxy_cm("kube-system", "kube-proxy", want) : NULL;

	print_message("config.conf: %s\n", conf);
	check(INCLUSTER, &CONFIGMAPS, in, want ? CHANGED : UNCHANGED, out);
	free(in);
	free(out);
}

static void test_inclusterconfig(void **state)
{
	char *cm;

	(void)state;
	check_conf(
	    "apiVersion: kubeproxy.config.k8s.io/v1alpha1\\nclientConnection:\\n"
	    "  acceptContentTypes: \\\"\\\"\\n  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf\\n"
	    "  qps: 5\\nmode: iptables\\n",
	    "apiVersion: kubeproxy.config.k8s.io/v1alpha1\\nclientConnection:\\n"
	    "  acceptContentTypes: \\\"\\\"\\n  #kubeconfig: /var/lib/kube-proxy/kubeconfig.conf\\n"
	    "  qps: 5\\nmode: iptables\\n");
	/* spaces are trimmed, tabs are not */
	check_conf("clientConnection:\\n\\tkubeconfig: /x\\n", NULL);
	check_conf("  kubeconfig: /x   \\nqps: 5", "  #kubeconfig: /x   \\nqps: 5");
	/* a path with a colon: three parts */
	check_conf("  kubeconfig: \\\"/x:y\\\"\\n", NULL);
	check_conf("kubeconfig: C:/k/kubeconfig.conf", NULL);
	/* two kubeconfig lines: both */
	check_conf("a:\\n  kubeconfig: /x\\nb:\\n  kubeconfig: /y",
		   "a:\\n  #kubeconfig: /x\\nb:\\n  #kubeconfig: /y");
	/* the name before the colon exactly */
	check_conf("  kubeconfig : /x\\n", NULL);
	check_conf("  kubeconfigs: /x\\n  mykubeconfig: /y\\n", NULL);
	check_conf("kubeconfig:/x", "#kubeconfig:/x");
	check_conf("kubeconfig:", "#kubeconfig:");
	check_conf("kubeconfig\\n", NULL);
	/* already commented: left (the filter is idempotent) */
	check_conf("  #kubeconfig: /x\\n", NULL);
	/* CRLF: the \r belongs to the value */
	check_conf("a: 1\\r\\n  kubeconfig: /x\\r\\n", "a: 1\\r\\n  #kubeconfig: /x\\r\\n");
	check_conf("", NULL);
	/* only kube-system/kube-proxy */
	cm = kube_proxy_cm("kube-system", "kube-proxy-x", "kubeconfig: /x");
	check(INCLUSTER, &CONFIGMAPS, cm, UNCHANGED, NULL);
	free(cm);
	cm = kube_proxy_cm("default", "kube-proxy", "kubeconfig: /x");
	check(INCLUSTER, &CONFIGMAPS, cm, UNCHANGED, NULL);
	free(cm);
	/* no config.conf, no data */
	check(INCLUSTER, &CONFIGMAPS,
	      "{'metadata':{'namespace':'kube-system','name':'kube-proxy'},"
	      "'data':{'kubeconfig.conf':'kubeconfig: /x'}}",
	      UNCHANGED, NULL);
	check(INCLUSTER, &CONFIGMAPS,
	      "{'metadata':{'namespace':'kube-system','name':'kube-proxy'}}", UNCHANGED, NULL);
}

/* ==== serviceenvupdater ==== */

static void test_serviceenvupdater(void **state)
{
	struct filter_env env = node_env();
	const char *pod =
	    "{'kind':'Pod','metadata':{'namespace':'default','name':'p'},'spec':{"
	    "'initContainers':[{'name':'i','env':[{'name':'KUBERNETES_SERVICE_HOST','value':'api'}]"
	    "}],"
	    "'containers':["
	    "{'name':'a','env':[{'name':'KUBERNETES_SERVICE_HOST','value':'api.example.com'},"
	    "{'name':'KUBERNETES_SERVICE_PORT','value':'6443'},{'name':'OTHER','value':'x'},"
	    "{'name':'KUBERNETES_SERVICE_PORT_HTTPS','value':'6443'},"
	    "{'name':'kubernetes_service_host','value':'api'}]},"
	    "{'name':'b'},"
	    "{'name':'c','env':[{'name':'KUBERNETES_SERVICE_HOST','value':'api'}]},"
	    "{'name':'d','env':[{'name':'KUBERNETES_SERVICE_HOST',"
	    "'valueFrom':{'configMapKeyRef':{'name':'api','key':'host'}}},"
	    "{'name':'KUBERNETES_SERVICE_PORT','value':'1'},"
	    "{'name':'KUBERNETES_SERVICE_PORT','value':'2'}]}],"
	    "'ephemeralContainers':[{'name':'e','env':[{'name':'KUBERNETES_SERVICE_PORT','value':'"
	    "1'}]}]"
	    "}}";
	const char *want =
	    "{'kind':'Pod','metadata':{'namespace':'default','name':'p'},'spec':{"
	    "'initContainers':[{'name':'i','env':[{'name':'KUBERNETES_SERVICE_HOST','value':'api'}]"
	    "}],"
	    "'containers':["
	    "{'name':'a','env':[{'name':'KUBERNETES_SERVICE_HOST','value':'169.254.2.1'},"
	    "{'name':'KUBERNETES_SERVICE_PORT','value':'10268'},{'name':'OTHER','value':'x'},"
	    "{'name':'KUBERNETES_SERVICE_PORT_HTTPS','value':'6443'},"
	    "{'name':'kubernetes_service_host','value':'api'}]},"
	    "{'name':'b'},"
	    "{'name':'c','env':[{'name':'KUBERNETES_SERVICE_HOST','value':'169.254.2.1'}]},"
	    "{'name':'d','env':[{'name':'KUBERNETES_SERVICE_HOST',"
	    "'valueFrom':{'configMapKeyRef':{'name':'api','key':'host'}},'value':'169.254.2.1'},"
	    "{'name':'KUBERNETES_SERVICE_PORT','value':'10268'},"
	    "{'name':'KUBERNETES_SERVICE_PORT','value':'10268'}]}],"
	    "'ephemeralContainers':[{'name':'e','env':[{'name':'KUBERNETES_SERVICE_PORT','value':'"
	    "1'}]}]"
	    "}}";

	(void)state;
	check(ENVUPD, &PODS, pod, CHANGED, want);
	/* what it writes is already there */
	check(ENVUPD, &PODS, want, UNCHANGED, NULL);
	/* init containers only; no env; no such variable */
	check(ENVUPD, &PODS,
	      "{'metadata':{'name':'p'},'spec':{'initContainers':[{'name':'i','env':"
	      "[{'name':'KUBERNETES_SERVICE_HOST','value':'api'}]}],'containers':[{'name':'a'}]}}",
	      UNCHANGED, NULL);
	check(ENVUPD, &PODS,
	      "{'metadata':{'name':'p'},'spec':{'containers':[{'name':'a','env':"
	      "[{'name':'HOME','value':'/'}]}]}}",
	      UNCHANGED, NULL);
	/* only the port there */
	check(ENVUPD, &PODS,
	      "{'metadata':{'name':'p'},'spec':{'containers':[{'name':'a','env':"
	      "[{'name':'KUBERNETES_SERVICE_PORT','value':'443'}]}]}}",
	      CHANGED,
	      "{'metadata':{'name':'p'},'spec':{'containers':[{'name':'a','env':"
	      "[{'name':'KUBERNETES_SERVICE_PORT','value':'10268'}]}]}}");
	/* not pods */
	check(ENVUPD, &CONFIGMAPS, pod, UNCHANGED, NULL);
	/* no hub address */
	env.hub_host = NULL;
	check_env(&env, ENVUPD, &PODS, pod, UNCHANGED, NULL);
}

/* ==== running them ==== */

static void test_apply_edges(void **state)
{
	struct filter_env env = node_env();
	json_t *arr = parse("[{'metadata':{'namespace':'default','name':'kubernetes'}}]");
	json_t *svc = parse("{'metadata':{'namespace':'default','name':'kubernetes'},"
			    "'spec':{'clusterIP':'10.96.0.1'}}");
	struct filter_target nogroup = {NULL, "v1", "services"};
	struct filter_target noresource = {"", "v1", NULL};
	struct stream_object meta = {
	    .data = "{}", .len = 2, .name = "kubernetes", .namespace = "default", .kind = ""};

	(void)state;
	assert_int_equal(filter_apply(FILTER_ALL, &env, &SERVICES, arr), UNCHANGED);
	assert_int_equal(filter_apply(FILTER_ALL, &env, NULL, svc), UNCHANGED);
	assert_int_equal(filter_apply(FILTER_ALL, NULL, &SERVICES, svc), UNCHANGED);
	assert_int_equal(filter_apply(FILTER_ALL, &env, &noresource, svc), UNCHANGED);
	assert_int_equal(filter_apply(FILTER_ALL, &env, &SERVICES, NULL), UNCHANGED);
	assert_int_equal(filter_apply(0, &env, &SERVICES, svc), UNCHANGED);
	assert_false(filter_wants(0, &env, &SERVICES, &meta));
	assert_false(filter_wants(MASTER, &env, &SECRETS, &meta));
	assert_false(filter_wants(MASTER, NULL, &SERVICES, &meta));
	assert_true(filter_wants(MASTER, &env, &SERVICES, &meta));
	assert_true(filter_wants(MASTER, &env, &SERVICES, NULL));
	/* a NULL group is the core group */
	assert_true(filter_wants(MASTER, &env, &nogroup, &meta));
	assert_int_equal(filter_apply(MASTER, &env, &nogroup, svc), CHANGED);
	json_decref(arr);
	json_decref(svc);
}

static void test_env_in_pool(void **state)
{
	static const char *const nodes[] = {"a", "b-1", "b-2", "c", "node-10", "node-9"};
	struct filter_env env = {.pool_nodes = nodes, .npool_nodes = N_ELEMS(nodes)};

	(void)state;
	for (size_t i = 0; i < N_ELEMS(nodes); i++)
		assert_true(filter_env_in_pool(&env, nodes[i]));
	assert_false(filter_env_in_pool(&env, ""));
	assert_false(filter_env_in_pool(&env, "b"));
	assert_false(filter_env_in_pool(&env, "b-11"));
	assert_false(filter_env_in_pool(&env, "node-1"));
	assert_false(filter_env_in_pool(&env, "zz"));
	assert_false(filter_env_in_pool(&env, NULL));
	assert_false(filter_env_in_pool(NULL, "a"));
	env.npool_nodes = 0;
	assert_false(filter_env_in_pool(&env, "a"));
	env.pool_nodes = NULL;
	env.npool_nodes = N_ELEMS(nodes);
	assert_false(filter_env_in_pool(&env, "a"));
}

/* The quick look says no to what most responses hold, so that the proxy
 * passes their bytes on without parsing them. */
static void test_wants_says_no(void **state)
{
	struct filter_env env = node_env();
	char *s;

	(void)state;
	assert_false(wants_js(MASTER | DISCARD | NODEPORT, &env, &SERVICES,
			      "{'metadata':{'namespace':'default','name':'web'},"
			      "'spec':{'type':'ClusterIP','clusterIP':'10.96.0.9'}}"));
	/* a LoadBalancer without the discard annotation */
	assert_false(wants_js(DISCARD, &env, &SERVICES,
			      "{'metadata':{'namespace':'default','name':'lb'},"
			      "'spec':{'type':'LoadBalancer'}}"));
	/* a listen annotation on a node in no pool */
	env.pool_name = "";
	s = js("{'metadata':{'namespace':'default','name':'np',"
	       "'annotations':{'nodeport.openyurt.io/listen':'-x'}},'spec':{'type':'NodePort'}}");
	assert_false(wants(NODEPORT, &env, &SERVICES, s));
	env = node_env();
	assert_true(wants(NODEPORT, &env, &SERVICES, s));
	free(s);
	/* an ordinary pod, configmap */
	assert_false(
	    wants_js(ENVUPD, &env, &PODS,
		     "{'kind':'Pod','metadata':{'namespace':'default','name':'p'},"
		     "'spec':{'containers':[{'name':'a','env':[{'name':'HOME','value':'/'}]}]}}"));
	assert_false(wants_js(INCLUSTER, &env, &CONFIGMAPS,
			      "{'metadata':{'namespace':'kube-system','name':'coredns'},"
			      "'data':{'kubeconfig':'kubeconfig: /x'}}"));
	/* slices when no service asks for topology */
	env.no_topology = true;
	s = v1_slice("default", "svc-node");
	assert_false(wants_js(TOPO, &env, &SLICES, s));
	env = node_env();
	assert_true(wants_js(TOPO, &env, &SLICES, s));
	free(s);
	/* another kind named in the object */
	assert_false(
	    wants_js(MASTER, &env, &SERVICES,
		     "{'kind':'Table','metadata':{'namespace':'default','name':'kubernetes'}}"));
	/* an escaped '<' is not a letter of a marker */
	assert_false(
	    wants_js(DISCARD, &env, &SERVICES,
		     "{'metadata':{'namespace':'default','name':'lb',"
		     "'annotations':{'note':'\\u003cb\\u003e'}},'spec':{'type':'LoadBalancer'}}"));
}

/* Markers written with escapes still make filter_wants say yes: the
 * promise holds for any JSON encoder, not only the API server's. */
static void test_wants_sees_escapes(void **state)
{
	(void)state;
	check(DISCARD, &SERVICES,
	      "{'metadata':{'namespace':'default','name':'lb',"
	      "'annotations':{'svc.openyurt.io\\/"
	      "discard':'true'}},'spec':{'type':'LoadBalanc\\u0065r'}}",
	      DROP, NULL);
	check(DISCARD, &SERVICES,
	      "{'metadata':{'namespace':'default','name':'lb',"
	      "'annotations':{'svc.openyurt.io\\/discard':'true'}},'spec':{'type':'LoadBalancer'}}",
	      DROP, NULL);
	check(NODEPORT, &SERVICES,
	      "{'metadata':{'namespace':'default','name':'np',"
	      "'annotations':{'nodeport.openyurt.io/liste\\u006e':''}},'spec':{'type':'NodePort'}}",
	      DROP, NULL);
	check(ENVUPD, &PODS,
	      "{'metadata':{'name':'p'},'spec':{'containers':[{'name':'a','env':"
	      "[{'name':'\\u004bUBERNETES_SERVICE_PORT','value':'443'}]}]}}",
	      CHANGED,
	      "{'metadata':{'name':'p'},'spec':{'containers':[{'name':'a','env':"
	      "[{'name':'KUBERNETES_SERVICE_PORT','value':'10268'}]}]}}");
	check(INCLUSTER, &CONFIGMAPS,
	      "{'metadata':{'namespace':'kube-system','name':'kube-proxy'},"
	      "'data':{'config.conf':'kubec\\u006fnfig: /x'}}",
	      CHANGED,
	      "{'metadata':{'namespace':'kube-system','name':'kube-proxy'},"
	      "'data':{'config.conf':'#kubeconfig: /x'}}");
}

static void test_count(void **state)
{
	(void)state;
	print_message("%u filter cases checked, each with the filter_wants promise\n", ncases);
	assert_true(ncases > 100);
}

/* ==== objects a filter cannot read ==== */

/* A field a filter reads, of a type Kubernetes never gives it: the filter
 * says so before it changes anything, and the caller passes the object on
 * as it came. */
static void test_unreadable_fields(void **state)
{
	static const struct {
		filter_mask mask;
		const struct filter_target *t;
		const char *obj;
	} cases[] = {
	    {MASTER, &SERVICES,
	     "{'metadata':{'namespace':'default','name':'kubernetes'},'spec':"
	     "{'clusterIP':'10.96.0.1','ports':{'name':'https','port':443}}}"},
	    {MASTER, &SERVICES,
	     "{'metadata':{'namespace':'default','name':'kubernetes'},'spec':"
	     "{'clusterIP':'10.96.0.1','ports':['https']}}"},
	    {MASTER, &SERVICES,
	     "{'metadata':{'namespace':'default','name':'kubernetes'},'spec':{'clusterIP':7}}"},
	    {MASTER, &SERVICES,
	     "{'metadata':{'namespace':'default','name':'kubernetes'},'spec':'ClusterIP'}"},
	    {DISCARD, &SERVICES,
	     "{'metadata':{'namespace':'default','name':'lb','annotations':"
	     "{'svc.openyurt.io/discard':true}},'spec':{'type':'LoadBalancer'}}"},
	    {NODEPORT, &SERVICES,
	     "{'metadata':{'namespace':'default','name':'np','annotations':"
	     "{'nodeport.openyurt.io/listen':['hangzhou']}},'spec':{'type':'NodePort'}}"},
	    {NODEPORT, &SERVICES,
	     "{'metadata':{'namespace':'default','name':'np','annotations':"
	     "{'nodeport.openyurt.io/listen':'x'}},'spec':{'type':{'NodePort':1}}}"},
	    {TOPO, &SLICES,
	     "{'metadata':{'namespace':'default','name':'s','labels':"
	     "{'kubernetes.io/service-name':'svc-node'}},'endpoints':"
	     "[{'addresses':['10.0.0.1'],'nodeName':7}]}"},
	    {TOPO, &SLICES,
	     "{'metadata':{'namespace':'default','name':'s','labels':"
	     "{'kubernetes.io/service-name':'svc-node'}},'endpoints':['10.0.0.1']}"},
	    {TOPO, &SLICES_B1,
	     "{'metadata':{'namespace':'default','name':'s','labels':"
	     "{'kubernetes.io/service-name':'svc-node'}},'endpoints':"
	     "[{'addresses':['10.0.0.1'],'topology':'edge-1'}]}"},
	    {TOPO, &ENDPOINTS,
	     "{'metadata':{'namespace':'default','name':'svc-node'},'subsets':"
	     "[{'addresses':[{'ip':'10.0.0.1','nodeName':['edge-1']}]}]}"},
	    {TOPO, &ENDPOINTS,
	     "{'metadata':{'namespace':'default','name':'svc-node'},'subsets':{'addresses':[]}}"},
	    {FORWARD, &SLICES,
	     "{'metadata':{'namespace':'default','name':'kubernetes'},'addressType':'IPv4',"
	     "'endpoints':{'addresses':['10.0.0.1']}}"},
	    {FORWARD, &SLICES,
	     "{'metadata':{'namespace':'default','name':'kubernetes'},'addressType':4,"
	     "'endpoints':[]}"},
	    {INCLUSTER, &CONFIGMAPS,
	     "{'metadata':{'namespace':'kube-system','name':'kube-proxy'},'data':"
	     "{'config.conf':['kubeconfig: /x']}}"},
	    {INCLUSTER, &CONFIGMAPS,
	     "{'metadata':{'namespace':'kube-system','name':'kube-proxy'},'data':'kubeconfig: "
	     "/x'}"},
	    {ENVUPD, &PODS,
	     "{'metadata':{'namespace':'default','name':'p'},'spec':{'containers':[{'env':"
	     "[{'name':'KUBERNETES_SERVICE_HOST','value':6443}]}]}}"},
	    /* the first container would change: nothing does, the second is odd */
	    {ENVUPD, &PODS,
	     "{'metadata':{'namespace':'default','name':'p'},'spec':{'containers':[{'env':"
	     "[{'name':'KUBERNETES_SERVICE_HOST','value':'a'}]},{'env':'KUBERNETES_SERVICE_"
	     "HOST'}]}}"},
	    {ENVUPD, &PODS,
	     "{'metadata':{'namespace':'default','name':'p'},'spec':{'containers':"
	     "'KUBERNETES_SERVICE_HOST'}}"},
	};

	(void)state;
	for (size_t i = 0; i < N_ELEMS(cases); i++) {
		json_t *obj = parse(cases[i].obj), *orig = json_deep_copy(obj);
		enum filter_id by = FILTER_COUNT;
		struct filter_env env = node_env();

		print_message("%s\n", cases[i].obj);
		assert_int_equal(filter_apply_by(cases[i].mask, &env, cases[i].t, obj, &by),
				 UNPARSABLE);
		assert_int_equal(FILTER_BIT(by), cases[i].mask);
		assert_true(json_equal(obj, orig));
		json_decref(orig);
		json_decref(obj);
		ncases++;
	}
	/* null where an object or a string is read is Go's zero value: fine */
	check(MASTER, &SERVICES,
	      "{'metadata':{'namespace':'default','name':'kubernetes'},'spec':"
	      "{'clusterIP':'10.96.0.1','ports':null}}",
	      CHANGED,
	      "{'metadata':{'namespace':'default','name':'kubernetes'},'spec':"
	      "{'clusterIP':'169.254.2.1','ports':null,'clusterIPs':['169.254.2.1']}}");
	/* the count and filter_first_wanting */
	unsigned long long before = filter_unparsable_total(FILTER_MASTERSERVICE);
	filter_unparsable_note(FILTER_MASTERSERVICE, "services", "default", "kubernetes", "{}", 2,
			       "test");
	filter_unparsable_note(FILTER_MASTERSERVICE, "services", "default", "kubernetes", "{}", 2,
			       "test");
	filter_unparsable_note(FILTER_COUNT, "services", "", "", "{}", 2, "out of range");
	assert_int_equal(filter_unparsable_total(FILTER_MASTERSERVICE) - before, 2);
	assert_int_equal(filter_unparsable_total(FILTER_COUNT), 0);
}

/* The secure port does not serve (no certificate yet): the three filters
 * that point pods at the hub leave objects as the cloud sent them. */
static bool port_closed(void *ctx)
{
	(void)ctx;
	return false;
}

static bool port_open(void *ctx)
{
	(void)ctx;
	return true;
}

static void test_hub_not_serving(void **state)
{
	static const char *const svc = "{'metadata':{'namespace':'default','name':'kubernetes'},"
				       "'spec':{'clusterIP':'10.96.0.1','clusterIPs':['10.96.0.1'],"
				       "'ports':[{'name':'https','port':443}]}}";
	static const char *const slice =
	    "{'metadata':{'namespace':'default','name':'kubernetes'},'addressType':'IPv4',"
	    "'endpoints':[{'addresses':['10.0.0.1']}],'ports':[{'name':'https','port':6443}]}";
	static const char *const pod =
	    "{'metadata':{'namespace':'default','name':'p'},'spec':{'containers':[{'env':"
	    "[{'name':'KUBERNETES_SERVICE_HOST','value':'api'}]}]}}";
	struct filter_env env = node_env();

	(void)state;
	env.hub_serving = port_closed;
	check_env(&env, MASTER, &SERVICES, svc, UNCHANGED, NULL);
	check_env(&env, FORWARD, &SLICES, slice, UNCHANGED, NULL);
	check_env(&env, ENVUPD, &PODS, pod, UNCHANGED, NULL);
	assert_false(wants_js(MASTER | FORWARD | ENVUPD, &env, &SERVICES, svc));
	env.hub_serving = port_open;
	check_env(&env, MASTER, &SERVICES, svc, CHANGED,
		  "{'metadata':{'namespace':'default','name':'kubernetes'},"
		  "'spec':{'clusterIP':'169.254.2.1','clusterIPs':['169.254.2.1'],"
		  "'ports':[{'name':'https','port':10268}]}}");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names),
	    cmocka_unit_test(test_default_table),
	    cmocka_unit_test(test_select_inputs),
	    cmocka_unit_test(test_select_possible),
	    cmocka_unit_test(test_hub_own_components),
	    cmocka_unit_test(test_configmap_extras),
	    cmocka_unit_test(test_disabled_filters),
	    cmocka_unit_test(test_unknown_filter_names),
	    cmocka_unit_test(test_masterservice),
	    cmocka_unit_test(test_masterservice_hub_address),
	    cmocka_unit_test(test_discardcloudservice),
	    cmocka_unit_test(test_nodeportisolation),
	    cmocka_unit_test(test_nodeportisolation_no_pool),
	    cmocka_unit_test(test_servicetopology_v1),
	    cmocka_unit_test(test_servicetopology_empty_result),
	    cmocka_unit_test(test_servicetopology_pool_knowledge),
	    cmocka_unit_test(test_servicetopology_v1beta1),
	    cmocka_unit_test(test_servicetopology_endpoints),
	    cmocka_unit_test(test_forwardkubesvctraffic),
	    cmocka_unit_test(test_order),
	    cmocka_unit_test(test_inclusterconfig),
	    cmocka_unit_test(test_serviceenvupdater),
	    cmocka_unit_test(test_apply_edges),
	    cmocka_unit_test(test_env_in_pool),
	    cmocka_unit_test(test_wants_says_no),
	    cmocka_unit_test(test_wants_sees_escapes),
	    cmocka_unit_test(test_count),
	    cmocka_unit_test(test_unreadable_fields),
	    cmocka_unit_test(test_hub_not_serving),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
