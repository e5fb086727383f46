/*
 * test_config.c - flags: defaults, the accepted spellings, lists and
 * durations, the one-line errors, YurtHub flags that are accepted and
 * ignored, validation, and the generated help text.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "testutil.h"

/* ---- helpers ---- */

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Parse argv into a fresh config; returns config_parse's result, *err kept. */
static int parse(struct config *c, int argc, const char *const *argv, char **err)
{
	config_init(c);
	return config_parse(c, argc, (char **)argv, err);
}

/* Parse, which must succeed. */
static void parse_ok(struct config *c, int argc, const char *const *argv)
{
	char *err = NULL;
	int rc = parse(c, argc, argv, &err);
	if (rc != 0) {
		char msg[512];
		snprintf(msg, sizeof msg, "config_parse failed: %s", err ? err : "(no message)");
		free(err);
		config_free(c);
		fail_msg("%s", msg);
	}
	assert_null(err);
}

/* Parse must fail with a one-line message containing every `want` (NULL-ended). */
static void parse_fails(int argc, const char *const *argv, ...)
{
	struct config c;
	char *err = NULL;
	int rc = parse(&c, argc, argv, &err);
	config_free(&c);
	if (rc == 0) {
		free(err);
		fail_msg("config_parse accepted %s", argc ? argv[0] : "(nothing)");
	}
	assert_int_equal(rc, -1);
	assert_non_null(err);
	char copy[512];
	snprintf(copy, sizeof copy, "%s", err);
	int one_line = strchr(err, '\n') == NULL;
	va_list ap;
	va_start(ap, argv);
	const char *want;
	const char *missing = NULL;
	while ((want = va_arg(ap, const char *)))
		if (!strstr(err, want) && !missing)
			missing = want;
	va_end(ap);
	free(err);
	if (missing)
		fail_msg("error \"%s\" does not mention \"%s\"", copy, missing);
	if (!one_line)
		fail_msg("error \"%s\" spans lines", copy);
}

/* Parse must succeed and validate must fail mentioning want. */
static void validate_fails(int argc, const char *const *argv, const char *want)
{
	struct config c;
	parse_ok(&c, argc, argv);
	char *err = NULL;
	int rc = config_validate(&c, &err);
	config_free(&c);
	char copy[512] = "";
	if (err)
		snprintf(copy, sizeof copy, "%s", err);
	free(err);
	if (rc == 0)
		fail_msg("config_validate accepted the flags (want an error about %s)", want);
	assert_int_equal(rc, -1);
	if (!strstr(copy, want))
		fail_msg("validate error \"%s\" does not mention \"%s\"", copy, want);
	assert_null(strchr(copy, '\n'));
}

static void validate_ok(int argc, const char *const *argv, struct config *c)
{
	parse_ok(c, argc, argv);
	char *err = NULL;
	int rc = config_validate(c, &err);
	if (rc != 0) {
		char msg[512];
		snprintf(msg, sizeof msg, "config_validate: %s", err ? err : "(no message)");
		free(err);
		config_free(c);
		fail_msg("%s", msg);
	}
	assert_null(err);
}

#define REQ "--server-addr=https://10.0.0.1:6443", "--node-name=node1"

/* ---- defaults ---- */

static void test_defaults(void **state)
{
	struct config c;
	config_init(&c);
	assert_int_equal(c.proxy_port, 10261);
	assert_int_equal(c.serve_port, 10267);
	assert_int_equal(c.proxy_secure_port, 10268);
	assert_string_equal(c.disk_cache_path, "/etc/kubernetes/cache/");
	assert_int_equal(c.heartbeat_interval_seconds, 10);
	assert_int_equal(c.heartbeat_timeout_seconds, 2);
	assert_int_equal(c.heartbeat_failed_retry, 3);
	assert_int_equal(c.heartbeat_healthy_threshold, 2);
	assert_int_equal(c.min_request_timeout, 1800);
	assert_int_equal(c.max_requests_in_flight, 250);
	assert_int_equal(c.verbosity, 0);
	assert_string_equal(c.bind_address, "127.0.0.1");
	assert_string_equal(c.bind_proxy_address, "127.0.0.1");
	assert_string_equal(c.lb_mode_name, "rr");
	assert_string_equal(c.storage_name, "disk");
	assert_string_equal(c.etcd_prefix, "/registry");
	assert_string_equal(c.log_format, "text");
	assert_string_equal(c.node_name, "");
	assert_string_equal(c.kubeconfig, "");
	assert_int_equal(c.server_addr.n, 0);
	assert_int_equal(c.etcd_servers.n, 0);
	assert_int_equal(c.cache_agents.n, 0);
	assert_int_equal(c.ignored.n, 0);
	assert_false(c.help);
	assert_false(c.version);
	config_free(&c);
}

static void test_empty_argv(void **state)
{
	struct config c;
	const char *const argv[] = {NULL};
	parse_ok(&c, 0, argv);
	assert_int_equal(c.proxy_port, 10261);
	char *err = NULL;
	assert_int_equal(config_validate(&c, &err), -1);
	assert_non_null(strstr(err, "--server-addr"));
	free(err);
	config_free(&c);
}

/* ---- flag spellings ---- */

static void test_equals_and_separate_forms(void **state)
{
	struct config c;
	const char *const argv[] = {
	    "--node-name=n1",	     "--proxy-port",	   "12000",
	    "--disk-cache-path",     "/var/cache/hub",	   "--serve-port=12001",
	    "-bind-address=0.0.0.0", "-proxy-secure-port", "0",
	    "--token-file=/a=b"};
	parse_ok(&c, ARGC(argv), argv);
	assert_string_equal(c.node_name, "n1");
	assert_int_equal(c.proxy_port, 12000);
	assert_string_equal(c.disk_cache_path, "/var/cache/hub");
	assert_int_equal(c.serve_port, 12001);
	assert_string_equal(c.bind_address, "0.0.0.0");
	assert_int_equal(c.proxy_secure_port, 0);
	assert_string_equal(c.token_file, "/a=b"); /* only the first '=' splits */
	config_free(&c);
}

static void test_last_value_wins(void **state)
{
	struct config c;
	const char *const argv[] = {"--node-name=a", "--node-name=b", "--proxy-port=1",
				    "--proxy-port=2"};
	parse_ok(&c, ARGC(argv), argv);
	assert_string_equal(c.node_name, "b");
	assert_int_equal(c.proxy_port, 2);
	config_free(&c);
}

static void test_empty_value(void **state)
{
	struct config c;
	const char *const argv[] = {"--node-name=", "--kubeconfig", ""};
	parse_ok(&c, ARGC(argv), argv);
	assert_string_equal(c.node_name, "");
	assert_string_equal(c.kubeconfig, "");
	config_free(&c);
}

static void test_verbosity(void **state)
{
	struct config c;
	const char *const a1[] = {"-v", "3"};
	parse_ok(&c, ARGC(a1), a1);
	assert_int_equal(c.verbosity, 3);
	config_free(&c);
	const char *const a2[] = {"--v=3"};
	parse_ok(&c, ARGC(a2), a2);
	assert_int_equal(c.verbosity, 3);
	config_free(&c);
	const char *const a3[] = {"-v=4"};
	parse_ok(&c, ARGC(a3), a3);
	assert_int_equal(c.verbosity, 4);
	config_free(&c);
	const char *const a4[] = {"--v", "2"};
	parse_ok(&c, ARGC(a4), a4);
	assert_int_equal(c.verbosity, 2);
	config_free(&c);
}

static void test_booleans(void **state)
{
	struct config c;
	const char *const a1[] = {"--help"};
	parse_ok(&c, ARGC(a1), a1);
	assert_true(c.help);
	assert_false(c.version);
	config_free(&c);

	const char *const a2[] = {"--version=false"};
	parse_ok(&c, ARGC(a2), a2);
	assert_false(c.version);
	config_free(&c);

	const char *const a3[] = {"--version", "--help=true", "--help=0"};
	parse_ok(&c, ARGC(a3), a3);
	assert_true(c.version);
	assert_false(c.help);
	config_free(&c);

	static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
	static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};
	for (size_t i = 0; i < 6; i++) {
		char y[32], n[32];
		snprintf(y, sizeof y, "--help=%s", yes[i]);
		snprintf(n, sizeof n, "--version=%s", no[i]);
		const char *const a[] = {"--version", y, n};
		parse_ok(&c, ARGC(a), a);
		assert_true(c.help);
		assert_false(c.version);
		config_free(&c);
	}

	const char *const bad[] = {"--version=maybe"};
	parse_fails(ARGC(bad), bad, "maybe", "--version", NULL);
	const char *const bad2[] = {"--help=yes"};
	parse_fails(ARGC(bad2), bad2, "--help", NULL);
	/* A bool takes no separate value: the next word is an argument. */
	const char *const bad3[] = {"--help", "false"};
	parse_fails(ARGC(bad3), bad3, "false", NULL);
}

/* ---- lists ---- */

static void test_lists(void **state)
{
	struct config c;
	const char *const argv[] = {"--server-addr=https://a:6443, https://b:6443,",
				    "--cache-agents", " ,agent-1,,\tagent-2\t, "};
	parse_ok(&c, ARGC(argv), argv);
	assert_int_equal(c.server_addr.n, 2);
	assert_string_equal(c.server_addr.v[0], "https://a:6443");
	assert_string_equal(c.server_addr.v[1], "https://b:6443");
	assert_int_equal(c.cache_agents.n, 2);
	assert_string_equal(c.cache_agents.v[0], "agent-1");
	assert_string_equal(c.cache_agents.v[1], "agent-2");
	assert_true(strlist_has(&c.cache_agents, "agent-2"));
	assert_false(strlist_has(&c.cache_agents, "agent"));
	config_free(&c);

	/* Only empties: an empty list, so the required check fires. */
	const char *const empties[] = {"--server-addr=, ,,", "--node-name=n"};
	parse_ok(&c, ARGC(empties), empties);
	assert_int_equal(c.server_addr.n, 0);
	char *err = NULL;
	assert_int_equal(config_validate(&c, &err), -1);
	assert_non_null(strstr(err, "--server-addr"));
	free(err);
	config_free(&c);

	/* Given twice: the later list replaces the earlier. */
	const char *const twice[] = {"--server-addr=https://a:1,https://b:2",
				     "--server-addr=https://c:3"};
	parse_ok(&c, ARGC(twice), twice);
	assert_int_equal(c.server_addr.n, 1);
	assert_string_equal(c.server_addr.v[0], "https://c:3");
	config_free(&c);
}

static void test_strlist_split(void **state)
{
	struct strlist l = {0};
	assert_int_equal(strlist_split(&l, "a,b,c"), 0);
	assert_int_equal(l.n, 3);
	assert_string_equal(l.v[2], "c");
	assert_int_equal(strlist_split(&l, "  x  "), 0);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.v[0], "x");
	assert_int_equal(strlist_split(&l, ""), 0);
	assert_int_equal(l.n, 0);
	assert_int_equal(strlist_split(&l, NULL), 0);
	assert_int_equal(l.n, 0);
	assert_int_equal(strlist_split(&l, ",,,"), 0);
	assert_int_equal(l.n, 0);
	assert_int_equal(strlist_split(&l, "a b, c"), 0);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.v[0], "a b");
	assert_true(strlist_has(&l, "c"));
	assert_false(strlist_has(&l, "a"));
	strlist_free(&l);
	assert_int_equal(l.n, 0);
	assert_null(l.v);
	strlist_free(&l);
}

/* ---- durations ---- */

static void test_parse_duration(void **state)
{
	assert_int_equal(config_parse_duration("1800"), 1800);
	assert_int_equal(config_parse_duration("90"), 90);
	assert_int_equal(config_parse_duration("0"), 0);
	assert_int_equal(config_parse_duration("1800s"), 1800);
	assert_int_equal(config_parse_duration("30m"), 1800);
	assert_int_equal(config_parse_duration("1h30m"), 5400);
	assert_int_equal(config_parse_duration("30m0s"), 1800);
	assert_int_equal(config_parse_duration("1h1m1s"), 3661);
	assert_int_equal(config_parse_duration("2h"), 7200);
	assert_int_equal(config_parse_duration("0s"), 0);

	assert_int_equal(config_parse_duration(NULL), -1);
	assert_int_equal(config_parse_duration(""), -1);
	assert_int_equal(config_parse_duration("5x"), -1);
	assert_int_equal(config_parse_duration("m"), -1);
	assert_int_equal(config_parse_duration("h30m"), -1);
	assert_int_equal(config_parse_duration("-5"), -1);
	assert_int_equal(config_parse_duration("-5s"), -1);
	assert_int_equal(config_parse_duration("1h30"), -1);
	assert_int_equal(config_parse_duration("5s "), -1);
	assert_int_equal(config_parse_duration("1d"), -1);
	assert_int_equal(config_parse_duration("99999999999999999999h"), -1);
	assert_int_equal(config_parse_duration("9223372036854775807h"), -1);
}

static void test_duration_flag(void **state)
{
	static const struct {
		const char *arg;
		int want;
	} ok[] = {
	    {"--min-request-timeout=30m", 1800},
	    {"--min-request-timeout=1h30m", 5400},
	    {"--min-request-timeout=90", 90},
	    {"--min-request-timeout=45s", 45},
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		struct config c;
		const char *const argv[] = {ok[i].arg};
		parse_ok(&c, 1, argv);
		assert_int_equal(c.min_request_timeout, ok[i].want);
		config_free(&c);
	}
	const char *const bad[] = {"--min-request-timeout=5x"};
	parse_fails(1, bad, "--min-request-timeout", "5x", NULL);
	const char *const bad2[] = {"--min-request-timeout", ""};
	parse_fails(2, bad2, "--min-request-timeout", NULL);
	/* More seconds than an int holds. */
	const char *const bad3[] = {"--min-request-timeout=1000000h"};
	parse_fails(1, bad3, "--min-request-timeout", NULL);
}

/* ---- parse errors ---- */

static void test_unknown_flag(void **state)
{
	const char *const a1[] = {"--bogus"};
	parse_fails(1, a1, "--bogus", NULL);
	const char *const a2[] = {REQ, "--bogus=1"};
	parse_fails(ARGC(a2), a2, "--bogus", NULL);
	const char *const a3[] = {"-x"};
	parse_fails(1, a3, "-x", NULL);
	/* Prefixes of real flags are not flags. */
	const char *const a4[] = {"--node=n1"};
	parse_fails(1, a4, "--node", NULL);
	const char *const a5[] = {"--server-addr-x=1"};
	parse_fails(1, a5, "--server-addr-x", NULL);
}

static void test_positional_argument(void **state)
{
	const char *const a1[] = {"serve"};
	parse_fails(1, a1, "serve", NULL);
	const char *const a2[] = {"-"};
	parse_fails(1, a2, "\"-\"", NULL);
	const char *const a3[] = {"--node-name=n", "extra"};
	parse_fails(2, a3, "extra", NULL);
}

static void test_missing_argument(void **state)
{
	const char *const a1[] = {"--node-name"};
	parse_fails(1, a1, "--node-name", NULL);
	const char *const a2[] = {"--v"};
	parse_fails(1, a2, "--v", NULL);
	const char *const a3[] = {"--server-addr=https://a:1", "--proxy-port"};
	parse_fails(2, a3, "--proxy-port", NULL);
	const char *const a4[] = {"--working-mode"};
	parse_fails(1, a4, "--working-mode", NULL);
}

static void test_bad_int(void **state)
{
	const char *const a1[] = {"--proxy-port=abc"};
	parse_fails(1, a1, "--proxy-port", "abc", NULL);
	const char *const a2[] = {"--proxy-port="};
	parse_fails(1, a2, "--proxy-port", NULL);
	const char *const a3[] = {"--proxy-port=12ab"};
	parse_fails(1, a3, "--proxy-port", "12ab", NULL);
	const char *const a4[] = {"--serve-port=99999999999"};
	parse_fails(1, a4, "--serve-port", NULL);
	const char *const a5[] = {"-v", "x"};
	parse_fails(2, a5, "--v", NULL);
	const char *const a6[] = {"--heartbeat-failed-retry=1.5"};
	parse_fails(1, a6, "--heartbeat-failed-retry", NULL);
	const char *const a7[] = {"--max-requests-in-flight=0x10"};
	parse_fails(1, a7, "--max-requests-in-flight", NULL);
}

static void test_error_then_free_does_not_leak(void **state)
{
	/* Values set before the bad flag are released by config_free. */
	struct config c;
	char *err = NULL;
	const char *const argv[] = {"--node-name=n", "--server-addr=https://a:1",
				    "--working-mode=edge", "--proxy-port=x"};
	assert_int_equal(parse(&c, ARGC(argv), argv, &err), -1);
	free(err);
	config_free(&c);
	assert_null(c.node_name);
	assert_int_equal(c.server_addr.n, 0);
	assert_int_equal(c.ignored.n, 0);
}

/* ---- the filters' and working mode's flags ---- */

static void test_filter_flags(void **state)
{
	struct config c;
	const char *const none[] = {REQ};
	parse_ok(&c, ARGC(none), none);
	char *err = NULL;
	assert_int_equal(config_validate(&c, &err), 0);
	assert_true(c.enable_resource_filter);
	assert_true(c.enable_node_pool);
	assert_false(c.enable_pool_service_topology);
	assert_true(c.enable_dummy_if);
	assert_string_equal(c.dummy_if_ip, "169.254.2.1");
	assert_string_equal(c.namespace, "kube-system");
	assert_string_equal(c.nodepool_name, "");
	assert_int_equal(c.working_mode, MODE_EDGE);
	assert_int_equal(c.ignored.n, 0);
	config_free(&c);

	const char *const set[] = {REQ,
				   "--working-mode=cloud",
				   "--enable-resource-filter=false",
				   "--disabled-resource-filters= servicetopology ,*",
				   "--nodepool-name=pool-a",
				   "--enable-node-pool=false",
				   "--enable-pool-service-topology",
				   "--namespace=openyurt",
				   "--enable-dummy-if=false",
				   "--dummy-if-ip=169.254.9.9"};
	parse_ok(&c, ARGC(set), set);
	assert_int_equal(config_validate(&c, &err), 0);
	assert_int_equal(c.working_mode, MODE_CLOUD);
	assert_false(c.enable_resource_filter);
	assert_int_equal(c.disabled_resource_filters.n, 2);
	assert_string_equal(c.disabled_resource_filters.v[0], "servicetopology");
	assert_string_equal(c.nodepool_name, "pool-a");
	assert_false(c.enable_node_pool);
	assert_true(c.enable_pool_service_topology);
	assert_string_equal(c.namespace, "openyurt");
	assert_false(c.enable_dummy_if);
	assert_string_equal(c.dummy_if_ip, "169.254.9.9");
	assert_int_equal(c.ignored.n, 0);
	config_free(&c);

	/* IPv6 bind address: the IPv6 default */
	const char *const v6[] = {REQ, "--bind-address=::1"};
	parse_ok(&c, ARGC(v6), v6);
	assert_int_equal(config_validate(&c, &err), 0);
	assert_string_equal(c.dummy_if_ip, "fd00::2:1");
	config_free(&c);
}

static void refused(const char *flag, const char *want)
{
	const char *const argv[] = {REQ, flag};
	validate_fails(ARGC(argv), argv, want);
}

static void test_filter_flags_refused(void **state)
{
	refused("--working-mode=local", "local mode");
	refused("--working-mode=Edge", "want edge or cloud");
	refused("--disabled-resource-filters=masterservice,nosuch",
		"--disabled-resource-filters: unknown filter \"nosuch\"");
	refused("--dummy-if-ip=10.0.0.1", "--dummy-if-ip");
	refused("--dummy-if-ip=169.254.31.7", "--dummy-if-ip");
	refused("--dummy-if-ip=169.254.1.1", "--dummy-if-ip");
	refused("--dummy-if-ip=169.254.2", "--dummy-if-ip");
	refused("--namespace=", "--namespace");
	const char *const bad[] = {"--enable-resource-filter=maybe"};
	parse_fails(1, bad, "--enable-resource-filter", NULL);
}

/* ---- bootstrap (docs/install.md) ---- */

#define PIN                                                                                        \
	"sha256:"                                                                                  \
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void test_bootstrap_flags(void **state)
{
	(void)state;
	struct config c;
	const char *const none[] = {REQ};
	validate_ok(ARGC(none), none, &c);
	assert_int_equal(c.bootstrap_mode, BOOTSTRAP_NONE); /* no token: the flags as given */
	assert_string_equal(c.root_dir, "/var/lib/yurthub");
	config_free(&c);

	const char *const token[] = {REQ, "--join-token=abcdef.0123456789abcdef",
				     "--discovery-token-ca-cert-hash=" PIN, "--node-ip=10.0.0.9",
				     "--hub-cert-organizations=openyurt:tenant:t1"};
	validate_ok(ARGC(token), token, &c);
	assert_int_equal(c.bootstrap_mode, BOOTSTRAP_TOKEN);
	assert_int_equal(c.discovery_ca_hashes.n, 1);
	assert_false(c.client_cert_may_wait);
	config_free(&c);

	const char *const kubelet[] = {REQ, "--bootstrap-mode=kubeletcertificate",
				       "--ca-file=/etc/passwd"};
	parse_ok(&c, ARGC(kubelet), kubelet);
	char *err = NULL;
	/* kubelet's certificate need not exist yet: the hub waits for it */
	if (config_validate(&c, &err) != 0) {
		/* only the CA may be missing on this machine; it was given */
		fail_msg("%s", err);
	}
	assert_int_equal(c.bootstrap_mode, BOOTSTRAP_KUBELET);
	assert_string_equal(c.client_cert_file, KUBELET_CLIENT_PEM);
	assert_string_equal(c.client_key_file, KUBELET_CLIENT_PEM);
	assert_string_equal(c.ca_file, "/etc/passwd");
	assert_true(c.client_cert_may_wait);
	config_free(&c);
}

/* --pool-scope-resources replaces its default (YurtHub appends to it);
 * empty turns sharing off; --multiplexer-port is a port. */
static void test_sharing_flags(void **state)
{
	(void)state;
	struct config c;
	const char *const def[] = {REQ};
	validate_ok(ARGC(def), def, &c);
	assert_int_equal(c.pool_scope_resources.n, 2);
	assert_string_equal(c.pool_scope_resources.v[0], "/v1/services");
	assert_string_equal(c.pool_scope_resources.v[1], "discovery.k8s.io/v1/endpointslices");
	assert_int_equal(c.multiplexer_port, 10269);
	config_free(&c);

	const char *const crd[] = {REQ,
				   "--pool-scope-resources=/v1/services, "
				   "apps.openyurt.io/v1beta2/nodepools",
				   "--multiplexer-port=0"};
	validate_ok(ARGC(crd), crd, &c);
	assert_int_equal(c.pool_scope_resources.n, 2);
	assert_string_equal(c.pool_scope_resources.v[1], "apps.openyurt.io/v1beta2/nodepools");
	assert_int_equal(c.multiplexer_port, 0);
	config_free(&c);

	const char *const off[] = {REQ, "--pool-scope-resources="};
	validate_ok(ARGC(off), off, &c);
	assert_int_equal(c.pool_scope_resources.n, 0);
	config_free(&c);

	refused("--pool-scope-resources=services", "group/version/resource");
	refused("--pool-scope-resources=/v1/services/extra", "group/version/resource");
	refused("--pool-scope-resources=//services", "group/version/resource");
	refused("--pool-scope-resources=/v1/Services", "group/version/resource");
	refused("--multiplexer-port=70000", "--multiplexer-port");
	assert_true(config_gvr_ok("/v1/services"));
	assert_false(config_gvr_ok("/v1/"));
}

static void test_bootstrap_flags_refused(void **state)
{
	(void)state;
	refused("--bootstrap-mode=certificate", "want token or kubeletcertificate");
	refused("--join-token=abcdef.0123456789abcdef", "--discovery-token-ca-cert-hash");
	refused("--discovery-token-ca-cert-hash=sha256:abc", "sha256:<64 hex digits>");
	refused("--discovery-token-ca-cert-hash=md5:" PIN, "--discovery-token-ca-cert-hash");
	refused("--node-ip=node1", "--node-ip");
	const char *const both[] = {REQ, "--bootstrap-file=/dev/null", "--kubeconfig=/dev/null"};
	validate_fails(ARGC(both), both, "do not give --kubeconfig");
	const char *const kub[] = {REQ, "--bootstrap-mode=kubeletcertificate",
				   "--token-file=/dev/null"};
	validate_fails(ARGC(kub), kub, "kubelet's certificate");
}

/* ---- ignored YurtHub flags ---- */

static void test_ignored_flags(void **state)
{
	struct config c;
	const char *const argv[] = {"--profiling=true",	   "--kubelet-health-grace-period=40s",
				    "--bootstrap-file=/x", REQ,
				    "--gc-frequency",	   "120",
				    "--enable-iptables"};
	parse_ok(&c, ARGC(argv), argv);
	assert_int_equal(c.ignored.n, 4);
	assert_string_equal(c.ignored.v[0], "profiling");
	assert_string_equal(c.ignored.v[1], "kubelet-health-grace-period");
	assert_string_equal(c.ignored.v[2], "gc-frequency");
	assert_string_equal(c.ignored.v[3], "enable-iptables");
	/* Their values went nowhere; the real flags still landed. */
	assert_string_equal(c.node_name, "node1");
	assert_int_equal(c.server_addr.n, 1);
	assert_false(strlist_has(&c.ignored, "node-name"));
	char *err = NULL;
	assert_int_equal(config_validate(&c, &err), 0);
	assert_null(err);
	config_free(&c);

	/* The older YurtHub's coordinator and klog flags, as its manifests
	 * carry them: a node's manifest starts this hub unchanged. */
	const char *const old[] = {REQ,
				   "--enable-coordinator=false",
				   "--coordinator-storage-addr=https://yurt-coordinator-etcd:2379",
				   "--leader-elect=true",
				   "--leader-elect-lease-duration=15s",
				   "--logtostderr=true",
				   "--v=2",
				   "--log_dir=/var/log"};
	parse_ok(&c, ARGC(old), old);
	assert_int_equal(c.ignored.n, 6);
	assert_int_equal(c.verbosity, 2);
	assert_true(strlist_has(&c.ignored, "leader-elect-lease-duration"));
	config_free(&c);

	/* An ignored boolean still wants a boolean. */
	const char *const bad[] = {"--enable-iptables=maybe"};
	parse_fails(1, bad, "--enable-iptables", NULL);
}

/* ---- the dummy interface ---- */

static void test_dummy_if_name(void **state)
{
	struct config c;
	char *err = NULL;
	const char *const none[] = {REQ};
	validate_ok(ARGC(none), none, &c);
	assert_string_equal(c.dummy_if_name, "hub-dummy0");
	assert_false(strlist_has(&c.ignored, "dummy-if-name"));
	config_free(&c);

	/* the older YurtHub's default name, and the longest Linux takes */
	const char *const names[] = {"yurthub-dummy0", "a", "abcdefghijklmno", "hub.dummy_0-x"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		char arg[64];
		snprintf(arg, sizeof arg, "--dummy-if-name=%s", names[i]);
		const char *const argv[] = {REQ, arg};
		parse_ok(&c, ARGC(argv), argv);
		assert_int_equal(config_validate(&c, &err), 0);
		assert_string_equal(c.dummy_if_name, names[i]);
		assert_int_equal(c.ignored.n, 0);
		config_free(&c);
	}

	/* what Linux refuses (dev_valid_name) is refused at once, with the
	 * interface off too: the flag is wrong either way */
	refused("--dummy-if-name=abcdefghijklmnop", "--dummy-if-name");
	refused("--dummy-if-name=", "--dummy-if-name");
	refused("--dummy-if-name=a/b", "--dummy-if-name");
	refused("--dummy-if-name=hub:0", "--dummy-if-name");
	refused("--dummy-if-name=hub 0", "--dummy-if-name");
	refused("--dummy-if-name=hub\t0", "--dummy-if-name");
	refused("--dummy-if-name=.", "--dummy-if-name");
	refused("--dummy-if-name=..", "--dummy-if-name");
	const char *const off[] = {REQ, "--enable-dummy-if=false", "--dummy-if-name=a/b"};
	validate_fails(ARGC(off), off, "1 to 15 characters");
}

/* ---- validation ---- */

static void test_validate_ok(void **state)
{
	struct config c;
	const char *const argv[] = {REQ, "--lb-mode=priority", "--log-format=json"};
	validate_ok(ARGC(argv), argv, &c);
	assert_int_equal(c.lb_mode, LB_PRIORITY);
	assert_int_equal(c.storage, STORAGE_DISK);
	config_free(&c);

	const char *const rr[] = {REQ};
	validate_ok(ARGC(rr), rr, &c);
	assert_int_equal(c.lb_mode, LB_RR);
	config_free(&c);

	const char *const etcd[] = {REQ, "--storage=etcd",
				    "--etcd-servers=https://e1:2379,http://e2:2379"};
	validate_ok(ARGC(etcd), etcd, &c);
	assert_int_equal(c.storage, STORAGE_ETCD);
	assert_int_equal(c.etcd_servers.n, 2);
	config_free(&c);

	const char *const ports[] = {REQ, "--proxy-port=65535", "--serve-port=1",
				     "--proxy-secure-port=0"};
	validate_ok(ARGC(ports), ports, &c);
	config_free(&c);
}

static void test_validate_required(void **state)
{
	const char *const a1[] = {"--node-name=n"};
	validate_fails(ARGC(a1), a1, "--server-addr");
	const char *const a2[] = {"--server-addr=https://a:6443"};
	validate_fails(ARGC(a2), a2, "--node-name");
	const char *const a3[] = {"--server-addr=https://a:6443", "--node-name="};
	validate_fails(ARGC(a3), a3, "--node-name");
	/* a password in the URL would be logged: refused, and not echoed */
	const char *const a4[] = {"--server-addr=https://a:6443,https://u:s3cret@b:6443",
				  "--node-name=n"};
	validate_fails(ARGC(a4), a4, "credentials in a URL");
	struct config c;
	char *err = NULL;
	parse_ok(&c, ARGC(a4), a4);
	assert_int_equal(config_validate(&c, &err), -1);
	assert_null(strstr(err, "s3cret"));
	free(err);
	config_free(&c);
	/* no scheme: https, as YurtHub assumes */
	const char *const bare[] = {"--server-addr=10.0.0.1:6443,http://b,[fd00::1]:6443,api",
				    "--node-name=n"};
	parse_ok(&c, ARGC(bare), bare);
	assert_int_equal(config_validate(&c, &err), 0);
	assert_string_equal(c.server_addr.v[0], "https://10.0.0.1:6443");
	assert_string_equal(c.server_addr.v[1], "http://b");
	assert_string_equal(c.server_addr.v[2], "https://[fd00::1]:6443");
	assert_string_equal(c.server_addr.v[3], "https://api");
	config_free(&c);
	/* an @ after the host is a path, not credentials */
	const char *const ok[] = {"--server-addr=https://a:6443/x@y", "--node-name=n"};
	parse_ok(&c, ARGC(ok), ok);
	assert_int_equal(config_validate(&c, &err), 0);
	config_free(&c);
}

static void test_validate_bad_url(void **state)
{
	static const char *const bad[] = {
	    "--server-addr=ftp://a:21",	 "--server-addr=a:6443/x",
	    "--server-addr=https://",	 "--server-addr=https:///x",
	    "--server-addr=http//a:80",	 "--server-addr=https://a:6443,10.0.0.2:",
	    "--server-addr=HTTPS-ish:/", "--server-addr=//a:6443",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		const char *const argv[] = {bad[i], "--node-name=n"};
		validate_fails(2, argv, "--server-addr");
	}
	const char *const etcd[] = {REQ, "--storage=etcd", "--etcd-servers=e1:2379"};
	validate_fails(ARGC(etcd), etcd, "--etcd-servers");
}

static void test_validate_enums(void **state)
{
	const char *const a1[] = {REQ, "--lb-mode=random"};
	validate_fails(ARGC(a1), a1, "--lb-mode");
	const char *const a2[] = {REQ, "--storage=sqlite"};
	validate_fails(ARGC(a2), a2, "--storage");
	const char *const a3[] = {REQ, "--log-format=xml"};
	validate_fails(ARGC(a3), a3, "--log-format");
	const char *const a4[] = {REQ, "--lb-mode=RR"};
	validate_fails(ARGC(a4), a4, "--lb-mode");
	const char *const a5[] = {REQ, "--storage=etcd"};
	validate_fails(ARGC(a5), a5, "--etcd-servers");
	const char *const a6[] = {REQ, "--etcd-prefix=registry"};
	validate_fails(ARGC(a6), a6, "--etcd-prefix");
}

static void test_validate_ranges(void **state)
{
	const char *const p1[] = {REQ, "--proxy-port=65536"};
	validate_fails(ARGC(p1), p1, "--proxy-port");
	const char *const p2[] = {REQ, "--proxy-port=-1"};
	validate_fails(ARGC(p2), p2, "--proxy-port");
	const char *const p3[] = {REQ, "--serve-port=70000"};
	validate_fails(ARGC(p3), p3, "--serve-port");
	const char *const p4[] = {REQ, "--proxy-secure-port=100000"};
	validate_fails(ARGC(p4), p4, "--proxy-secure-port");
	const char *const h1[] = {REQ, "--heartbeat-interval-seconds=0"};
	validate_fails(ARGC(h1), h1, "--heartbeat-interval-seconds");
	const char *const h2[] = {REQ, "--heartbeat-timeout-seconds=-3"};
	validate_fails(ARGC(h2), h2, "--heartbeat-timeout-seconds");
	const char *const h3[] = {REQ, "--heartbeat-failed-retry=0"};
	validate_fails(ARGC(h3), h3, "--heartbeat-failed-retry");
	const char *const h4[] = {REQ, "--heartbeat-healthy-threshold=0"};
	validate_fails(ARGC(h4), h4, "--heartbeat-healthy-threshold");
	const char *const m1[] = {REQ, "--max-requests-in-flight=0"};
	validate_fails(ARGC(m1), m1, "--max-requests-in-flight");
	const char *const v1[] = {REQ, "--v=-1"};
	validate_fails(ARGC(v1), v1, "--v");
}

/* Issue 11: --min-request-timeout=0 parsed and validated, and then every
 * offline watch without timeoutSeconds ended at once.  Every spelling of
 * zero is refused now, naming the flag; the smallest positive value passes. */
static void test_validate_min_request_timeout(void **state)
{
	(void)state;
	static const char *const zeros[] = {"--min-request-timeout=0", "--min-request-timeout=0s",
					    "--min-request-timeout=0m0s",
					    "--min-request-timeout=0h"};
	for (size_t i = 0; i < sizeof zeros / sizeof zeros[0]; i++) {
		const char *const a[] = {REQ, zeros[i]};
		validate_fails(ARGC(a), a, "--min-request-timeout");
	}
	const char *const sep[] = {REQ, "--min-request-timeout", "0"};
	validate_fails(ARGC(sep), sep, "--min-request-timeout");
	struct config c;
	const char *const one[] = {REQ, "--min-request-timeout=1s"};
	validate_ok(ARGC(one), one, &c);
	assert_int_equal(c.min_request_timeout, 1);
	config_free(&c);
	const char *const def[] = {REQ};
	validate_ok(ARGC(def), def, &c);
	assert_int_equal(c.min_request_timeout, 1800);
	config_free(&c);
}

struct files {
	char dir[512];
	char cert[600], key[600];
};

static void make_files(struct files *f)
{
	assert_int_equal(test_mkdtemp(f->dir, sizeof f->dir, "config"), 0);
	assert_int_equal(test_write_file(f->dir, "c.pem", "CERT"), 0);
	assert_int_equal(test_write_file(f->dir, "k.pem", "KEY"), 0);
	snprintf(f->cert, sizeof f->cert, "%s/c.pem", f->dir);
	snprintf(f->key, sizeof f->key, "%s/k.pem", f->dir);
}

static void test_validate_files(void **state)
{
	struct files f;
	make_files(&f);
	char ca[700], cert[700], key[700], tls_cert[700], tls_key[700], missing[700];
	snprintf(ca, sizeof ca, "--ca-file=%s", f.cert);
	snprintf(cert, sizeof cert, "--client-cert-file=%s", f.cert);
	snprintf(key, sizeof key, "--client-key-file=%s", f.key);
	snprintf(tls_cert, sizeof tls_cert, "--tls-cert-file=%s", f.cert);
	snprintf(tls_key, sizeof tls_key, "--tls-private-key-file=%s", f.key);
	snprintf(missing, sizeof missing, "%s/missing.pem", f.dir);

	struct config c;
	const char *const ok[] = {REQ, ca, cert, key, tls_cert, tls_key};
	validate_ok(ARGC(ok), ok, &c);
	config_free(&c);

	/* A file that cannot be read: the error names the flag and the path. */
	char bad[800];
	snprintf(bad, sizeof bad, "--token-file=%s", missing);
	const char *const a1[] = {REQ, bad};
	validate_fails(ARGC(a1), a1, "--token-file");
	validate_fails(ARGC(a1), a1, missing);
	snprintf(bad, sizeof bad, "--kubeconfig=%s", missing);
	const char *const a2[] = {REQ, bad};
	validate_fails(ARGC(a2), a2, "--kubeconfig");
	snprintf(bad, sizeof bad, "--etcd-cafile=%s", missing);
	const char *const a3[] = {REQ, "--storage=etcd", "--etcd-servers=https://e:2379", bad};
	validate_fails(ARGC(a3), a3, "--etcd-cafile");

	/* A certificate without its key, and the other way round. */
	const char *const b1[] = {REQ, cert};
	validate_fails(ARGC(b1), b1, "--client-key-file");
	const char *const b2[] = {REQ, key};
	validate_fails(ARGC(b2), b2, "--client-cert-file");
	const char *const b3[] = {REQ, tls_cert};
	validate_fails(ARGC(b3), b3, "--tls-private-key-file");
	const char *const b4[] = {REQ, tls_key};
	validate_fails(ARGC(b4), b4, "--tls-cert-file");

	test_rm_rf(f.dir);
}

/* ---- help ---- */

static char *help_text(void)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	assert_non_null(out);
	config_print_help(out);
	assert_int_equal(fclose(out), 0);
	assert_non_null(text);
	return text;
}

/* Does the help document `name` as a flag entry ("  --name TYPE" followed by an
 * indented help line)? */
static int documented(const char *help, const char *name)
{
	char head[128];
	snprintf(head, sizeof head, "\n  --%s ", name);
	for (const char *p = strstr(help, head); p; p = strstr(p + 1, head)) {
		const char *eol = strchr(p + 1, '\n');
		if (eol && !strncmp(eol + 1, "      ", 6) && eol[7] != ' ')
			return 1;
	}
	return 0;
}

static void test_help_documents_flags(void **state)
{
	char *help = help_text();
	assert_non_null(strstr(help, "Usage:"));
	static const char *const flags[] = {
	    "server-addr",
	    "node-name",
	    "lb-mode",
	    "bind-address",
	    "serve-port",
	    "bind-proxy-address",
	    "proxy-port",
	    "proxy-secure-port",
	    "client-ca-file",
	    "tls-cert-file",
	    "tls-private-key-file",
	    "disk-cache-path",
	    "storage",
	    "etcd-servers",
	    "etcd-prefix",
	    "kubeconfig",
	    "cache-agents",
	    "heartbeat-interval-seconds",
	    "min-request-timeout",
	    "max-requests-in-flight",
	    "v",
	    "log-format",
	    "enable-dummy-if",
	    "dummy-if-name",
	    "dummy-if-ip",
	    "help",
	    "version",
	};
	for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
		if (!documented(help, flags[i])) {
			free(help);
			fail_msg("--help does not document --%s", flags[i]);
		}
	assert_non_null(strstr(help, "(default 10261)"));
	assert_non_null(strstr(help, "(default 10267)"));
	assert_non_null(strstr(help, "(default 10268)"));
	assert_non_null(strstr(help, "(default /etc/kubernetes/cache/)"));
	assert_non_null(strstr(help, "(default 1800s)"));
	assert_non_null(strstr(help, "(default hub-dummy0)"));
	assert_non_null(strstr(help, "CAP_NET_ADMIN"));
	free(help);
}

static void test_help_does_not_document_ignored_flags(void **state)
{
	char *help = help_text();
	static const char *const ignored[] = {
	    "enable-iptables",
	    "profiling",
	    "gc-frequency",
	    "kubelet-health-grace-period",
	};
	for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++) {
		char name[64];
		snprintf(name, sizeof name, "--%s", ignored[i]);
		int doc = documented(help, ignored[i]);
		int named = strstr(help, name) != NULL;
		/* Each is accepted by the parser. */
		char arg[80];
		snprintf(arg, sizeof arg, "--%s=1", ignored[i]);
		const char *const argv[] = {arg};
		struct config c;
		char *err = NULL;
		int rc = parse(&c, 1, argv, &err);
		config_free(&c);
		free(err);
		if (doc || !named || rc != 0) {
			free(help);
			fail_msg("--%s: documented=%d, named=%d, parse=%d", ignored[i], doc, named,
				 rc);
		}
	}
	free(help);
}

static void test_help_flags_all_parse(void **state)
{
	/* Every flag --help documents is one the parser accepts, with a value
	 * of the type it shows. */
	char *help = help_text();
	int seen = 0;
	for (const char *p = strstr(help, "\n  --"); p; p = strstr(p + 1, "\n  --")) {
		const char *eol = strchr(p + 1, '\n');
		if (!eol || strncmp(eol + 1, "      ", 6) != 0)
			continue;
		char name[128], type[32] = "";
		/* the type is on the flag's own line (a boolean has none) */
		if (sscanf(p + 5, "%127[a-z0-9-]%*[ ]%31[a-z]", name, type) < 1)
			continue;
		const char *value = "x";
		if (!strcmp(type, "int"))
			value = "5";
		else if (!strcmp(type, "duration"))
			value = "5m";
		else if (!strcmp(type, "strings"))
			value = "https://a:1,https://b:2";
		else if (!type[0])
			value = "false";
		char arg[256];
		snprintf(arg, sizeof arg, "--%s=%s", name, value);
		const char *const argv[] = {arg};
		struct config c;
		char *err = NULL;
		int rc = parse(&c, 1, argv, &err);
		int n_ignored = (int)c.ignored.n;
		config_free(&c);
		free(err);
		if (rc != 0 || n_ignored != 0) {
			free(help);
			fail_msg("documented flag %s: parse=%d ignored=%d", arg, rc, n_ignored);
		}
		seen++;
	}
	free(help);
	assert_true(seen >= 30);
}

static void test_man_options(void **state)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	assert_non_null(out);
	config_print_man_options(out);
	assert_int_equal(fclose(out), 0);
	int has_tp = strstr(text, ".TP\n") != NULL;
	int has_ignored = strstr(text, "gc\\-frequency") != NULL;
	/* roff: every '-' of an option name is written \- (man-pages(7)), as
	 * the help text already is, so that the page shows ASCII hyphens. */
	int server_addr = strstr(text, ".BR \\-\\-server\\-addr ") != NULL;
	int proxy_port = strstr(text, ".BR \\-\\-proxy\\-port ") != NULL;
	free(text);
	assert_true(has_tp);
	assert_false(has_ignored);
	assert_true(server_addr);
	assert_true(proxy_port);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_filter_flags),
	    cmocka_unit_test(test_filter_flags_refused),
	    cmocka_unit_test(test_empty_argv),
	    cmocka_unit_test(test_equals_and_separate_forms),
	    cmocka_unit_test(test_last_value_wins),
	    cmocka_unit_test(test_empty_value),
	    cmocka_unit_test(test_verbosity),
	    cmocka_unit_test(test_booleans),
	    cmocka_unit_test(test_lists),
	    cmocka_unit_test(test_strlist_split),
	    cmocka_unit_test(test_parse_duration),
	    cmocka_unit_test(test_duration_flag),
	    cmocka_unit_test(test_unknown_flag),
	    cmocka_unit_test(test_positional_argument),
	    cmocka_unit_test(test_missing_argument),
	    cmocka_unit_test(test_bad_int),
	    cmocka_unit_test(test_error_then_free_does_not_leak),
	    cmocka_unit_test(test_ignored_flags),
	    cmocka_unit_test(test_dummy_if_name),
	    cmocka_unit_test(test_validate_ok),
	    cmocka_unit_test(test_validate_required),
	    cmocka_unit_test(test_validate_bad_url),
	    cmocka_unit_test(test_validate_enums),
	    cmocka_unit_test(test_bootstrap_flags),
	    cmocka_unit_test(test_bootstrap_flags_refused),
	    cmocka_unit_test(test_validate_ranges),
	    cmocka_unit_test(test_validate_min_request_timeout),
	    cmocka_unit_test(test_validate_files),
	    cmocka_unit_test(test_sharing_flags),
	    cmocka_unit_test(test_help_documents_flags),
	    cmocka_unit_test(test_help_does_not_document_ignored_flags),
	    cmocka_unit_test(test_help_flags_all_parse),
	    cmocka_unit_test(test_man_options),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
