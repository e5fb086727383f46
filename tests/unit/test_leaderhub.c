/*
 * test_leaderhub.c - the leader-hub-<pool> configmap's values parsed as
 * yurt-manager writes them, malformed entries skipped, and who follows.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "cluster/leaderhub.h"

static void test_parse_as_written(void **state)
{
	(void)state;
	struct leader_hub lh;
	assert_int_equal(leader_hub_parse(&lh, "node-a/10.0.0.5,node-b/10.0.0.6", "true",
					  "/v1/services,discovery.k8s.io/v1/endpointslices"),
			 0);
	assert_true(lh.election);
	assert_int_equal(lh.nleaders, 2);
	assert_string_equal(lh.leaders[0].node, "node-a");
	assert_string_equal(lh.leaders[0].address, "10.0.0.5");
	assert_string_equal(lh.leaders[1].address, "10.0.0.6");
	assert_int_equal(lh.npool_scope, 2);
	assert_string_equal(lh.pool_scope[1], "discovery.k8s.io/v1/endpointslices");
	assert_non_null(leader_hub_find(&lh, "node-b"));
	assert_null(leader_hub_find(&lh, "node-c"));
	assert_false(leader_hub_is_follower(&lh, "node-a")); /* a leader */
	assert_true(leader_hub_is_follower(&lh, "node-c"));
	leader_hub_free(&lh);
}

static void test_malformed_skipped(void **state)
{
	(void)state;
	struct leader_hub lh;
	assert_int_equal(leader_hub_parse(&lh, "noslash, a/b/c ,/10.0.0.1,n/, ok/fd00::5 ,,",
					  "True", "services,/v1/services,a/b/c/d, /v1/pods "),
			 0);
	assert_false(lh.election); /* only "true", as yurt-manager writes it */
	assert_int_equal(lh.nleaders, 1);
	assert_string_equal(lh.leaders[0].node, "ok");
	assert_string_equal(lh.leaders[0].address, "fd00::5");
	assert_int_equal(lh.npool_scope, 2);
	assert_string_equal(lh.pool_scope[0], "/v1/services");
	assert_string_equal(lh.pool_scope[1], "/v1/pods");
	assert_false(leader_hub_is_follower(&lh, "node-c")); /* election off */
	leader_hub_free(&lh);
}

static void test_absent_keys(void **state)
{
	(void)state;
	struct leader_hub lh;
	assert_int_equal(leader_hub_parse(&lh, NULL, NULL, NULL), 0);
	assert_false(lh.election);
	assert_int_equal(lh.nleaders, 0);
	assert_int_equal(lh.npool_scope, 0);
	assert_false(leader_hub_is_follower(&lh, "node-a"));
	leader_hub_free(&lh);
	/* election on, but nobody elected yet: everyone reads the cloud */
	assert_int_equal(leader_hub_parse(&lh, "", "true", ""), 0);
	assert_false(leader_hub_is_follower(&lh, "node-a"));
	leader_hub_free(&lh);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_as_written),
	    cmocka_unit_test(test_malformed_skipped),
	    cmocka_unit_test(test_absent_keys),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
