/*
 * test_filter.c - filter/: which filters a request gets (YurtHub's default
 * table, the flags, the configmap's additions).
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

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

#define DISCARD	  FILTER_BIT(FILTER_DISCARDCLOUDSERVICE)
#define NODEPORT  FILTER_BIT(FILTER_NODEPORTISOLATION)
#define MASTER	  FILTER_BIT(FILTER_MASTERSERVICE)
#define TOPO	  FILTER_BIT(FILTER_SERVICETOPOLOGY)
#define FORWARD	  FILTER_BIT(FILTER_FORWARDKUBESVCTRAFFIC)
#define INCLUSTER FILTER_BIT(FILTER_INCLUSTERCONFIG)
#define ENVUPD	  FILTER_BIT(FILTER_SERVICEENVUPDATER)

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
	static const char *const good[] = {"*", " masterservice", "", "serviceenvupdater"};
	static const char *const bad[] = {"masterservice", " filter_masterservice ", "nope"};
	char *err = NULL;
	struct filter_config cfg;

	(void)state;
	assert_int_equal(filter_config_check_names(good, N_ELEMS(good), &err), 0);
	assert_null(err);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names),
	    cmocka_unit_test(test_default_table),
	    cmocka_unit_test(test_select_inputs),
	    cmocka_unit_test(test_hub_own_components),
	    cmocka_unit_test(test_configmap_extras),
	    cmocka_unit_test(test_disabled_filters),
	    cmocka_unit_test(test_unknown_filter_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
