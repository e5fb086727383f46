/*
 * test_key.c - name validation and key layouts: what may become a path
 * segment, resource directory names in both layouts and back, disk keys, and
 * cluster-info file names.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/key.h"
#include "storage/store.h"

/* A string of n copies of c (malloc'ed), optionally with a prefix. */
static char *repeat(const char *prefix, char c, size_t n)
{
	size_t p = strlen(prefix);
	char *s = malloc(p + n + 1);
	assert_non_null(s);
	memcpy(s, prefix, p);
	memset(s + p, c, n);
	s[p + n] = '\0';
	return s;
}

/* ---- key_segment_ok ---- */

static void test_segment_basic(void **state)
{
	assert_true(key_segment_ok("web-0", KEY_NAME_MAX));
	assert_true(key_segment_ok("a", KEY_NAME_MAX));
	assert_true(key_segment_ok("...", KEY_NAME_MAX));
	assert_true(key_segment_ok(".hidden", KEY_NAME_MAX));
	assert_true(key_segment_ok("a.b", KEY_NAME_MAX));
	assert_true(key_segment_ok("tmp", KEY_NAME_MAX));
	assert_true(key_segment_ok("x-tmp_", KEY_NAME_MAX));
	assert_true(key_segment_ok("a b", KEY_NAME_MAX));
	assert_true(key_segment_ok("h\xc3\xa9", KEY_NAME_MAX)); /* UTF-8 is not a control byte */

	assert_false(key_segment_ok(NULL, KEY_NAME_MAX));
	assert_false(key_segment_ok("", KEY_NAME_MAX));
	assert_false(key_segment_ok(".", KEY_NAME_MAX));
	assert_false(key_segment_ok("..", KEY_NAME_MAX));
	assert_false(key_segment_ok("a/b", KEY_NAME_MAX));
	assert_false(key_segment_ok("/", KEY_NAME_MAX));
	assert_false(key_segment_ok("a/", KEY_NAME_MAX));
	assert_false(key_segment_ok("/a", KEY_NAME_MAX));
	assert_false(key_segment_ok("../x", KEY_NAME_MAX));
}

static void test_segment_control_bytes(void **state)
{
	assert_false(key_segment_ok("a\x01", KEY_NAME_MAX));
	assert_false(key_segment_ok("\x01", KEY_NAME_MAX));
	assert_false(key_segment_ok("a\x7f", KEY_NAME_MAX));
	assert_false(key_segment_ok("\x7f", KEY_NAME_MAX));
	assert_false(key_segment_ok("a\nb", KEY_NAME_MAX));
	assert_false(key_segment_ok("a\tb", KEY_NAME_MAX));
	assert_false(key_segment_ok("\x1f", KEY_NAME_MAX));
	for (int c = 1; c < 0x20; c++) {
		char s[4] = {'x', (char)c, 'y', '\0'};
		assert_false(key_segment_ok(s, KEY_NAME_MAX));
	}
	/* A NUL ends a C string: "a\0/b" is just "a". */
	assert_true(key_segment_ok("a\0/b", KEY_NAME_MAX));
}

static void test_segment_length(void **state)
{
	char *s253 = repeat("", 'a', 253);
	char *s254 = repeat("", 'a', 254);
	assert_true(key_segment_ok(s253, KEY_NAME_MAX));
	assert_false(key_segment_ok(s254, KEY_NAME_MAX));
	assert_true(key_segment_ok(s254, 254));
	assert_false(key_segment_ok("ab", 1));
	assert_true(key_segment_ok("a", 1));
	free(s253);
	free(s254);
}

static void test_segment_yurthub_backup_prefix(void **state)
{
	assert_false(key_segment_ok("tmp_x", KEY_NAME_MAX));
	assert_false(key_segment_ok("tmp_", KEY_NAME_MAX));
	assert_false(key_segment_ok("tmp_web-0", KEY_NAME_MAX));
	assert_true(key_segment_ok("tmpx", KEY_NAME_MAX));
	assert_true(key_segment_ok("a_tmp_x", KEY_NAME_MAX));
}

/* ---- key_component_ok ---- */

static void test_component(void **state)
{
	assert_true(key_component_ok("kubelet"));
	assert_true(key_component_ok("kube-proxy"));
	assert_true(key_component_ok("Go-http-client"));
	assert_true(key_component_ok("coredns"));
	assert_true(key_component_ok("flanneld"));
	assert_true(key_component_ok("kubectl"));
	assert_true(key_component_ok("a+b:c@d.e_f-g"));
	assert_true(key_component_ok("a.b"));
	assert_true(key_component_ok("Versions"));

	assert_false(key_component_ok(NULL));
	assert_false(key_component_ok(""));
	assert_false(key_component_ok("version"));
	assert_false(key_component_ok("apis"));
	assert_false(key_component_ok("_internal"));
	assert_false(key_component_ok("_x"));
	assert_false(key_component_ok(".x"));
	assert_false(key_component_ok("."));
	assert_false(key_component_ok(".."));
	assert_false(key_component_ok("a b"));
	assert_false(key_component_ok("a/b"));
	assert_false(key_component_ok("Go-http-client/1.1"));
	assert_false(key_component_ok("tmp_agent"));
	assert_false(key_component_ok("a\x01"));
	assert_false(key_component_ok("a%2f"));
	assert_false(key_component_ok("*"));
	assert_false(key_component_ok("h\xc3\xa9"));
	assert_false(key_component_ok("a\\b"));
}

static void test_component_length(void **state)
{
	char *c128 = repeat("", 'k', KEY_COMPONENT_MAX);
	char *c129 = repeat("", 'k', KEY_COMPONENT_MAX + 1);
	assert_true(key_component_ok(c128));
	assert_false(key_component_ok(c129));
	free(c128);
	free(c129);
}

/* ---- resource, version, group ---- */

static void test_resource_version_group(void **state)
{
	assert_true(key_resource_ok("pods"));
	assert_true(key_resource_ok("endpointslices"));
	assert_true(key_resource_ok("custom-things"));
	assert_false(key_resource_ok(""));
	assert_false(key_resource_ok(NULL));
	assert_false(key_resource_ok("pods.v1"));
	assert_false(key_resource_ok("pods/status"));
	assert_false(key_resource_ok(".."));

	assert_true(key_version_ok("v1"));
	assert_true(key_version_ok("v1beta1"));
	assert_false(key_version_ok(""));
	assert_false(key_version_ok("v1.2"));
	assert_false(key_version_ok("v/1"));

	assert_true(key_group_ok(""));
	assert_true(key_group_ok(NULL));
	assert_true(key_group_ok("apps"));
	assert_true(key_group_ok("discovery.k8s.io"));
	assert_false(key_group_ok("core")); /* would read back as the core group */
	assert_false(key_group_ok(".apps"));
	assert_false(key_group_ok("a..b"));
	assert_false(key_group_ok("a/b"));
	assert_false(key_group_ok("a_b"));
}

/* ---- key_resource_dir ---- */

static void assert_resdir(enum key_layout l, const char *r, const char *v, const char *g,
			  const char *want)
{
	char *got = key_resource_dir(l, r, v, g);
	if (!want) {
		assert_null(got);
		return;
	}
	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void test_resource_dir_enhanced(void **state)
{
	assert_resdir(KEY_LAYOUT_ENHANCED, "pods", "v1", "", "pods.v1.core");
	assert_resdir(KEY_LAYOUT_ENHANCED, "pods", "v1", NULL, "pods.v1.core");
	assert_resdir(KEY_LAYOUT_ENHANCED, "endpointslices", "v1", "discovery.k8s.io",
		      "endpointslices.v1.discovery.k8s.io");
	assert_resdir(KEY_LAYOUT_ENHANCED, "deployments", "v1", "apps", "deployments.v1.apps");
	assert_resdir(KEY_LAYOUT_ENHANCED, "leases", "v1", "coordination.k8s.io",
		      "leases.v1.coordination.k8s.io");

	assert_resdir(KEY_LAYOUT_ENHANCED, "", "v1", "", NULL);
	assert_resdir(KEY_LAYOUT_ENHANCED, NULL, "v1", "", NULL);
	assert_resdir(KEY_LAYOUT_ENHANCED, "pods", "", "", NULL);
	assert_resdir(KEY_LAYOUT_ENHANCED, "pods", NULL, "", NULL);
	assert_resdir(KEY_LAYOUT_ENHANCED, "pods.x", "v1", "", NULL);
	assert_resdir(KEY_LAYOUT_ENHANCED, "pods", "v1", "core", NULL);
	assert_resdir(KEY_LAYOUT_ENHANCED, "pods", "v1", "../x", NULL);
	assert_resdir(KEY_LAYOUT_ENHANCED, "pods", "v1/..", "", NULL);
}

static void test_resource_dir_legacy(void **state)
{
	assert_resdir(KEY_LAYOUT_LEGACY, "pods", "v1", "", "pods");
	assert_resdir(KEY_LAYOUT_LEGACY, "pods", "", NULL, "pods");
	assert_resdir(KEY_LAYOUT_LEGACY, "endpointslices", "v1", "discovery.k8s.io",
		      "endpointslices");
	assert_resdir(KEY_LAYOUT_LEGACY, "", "v1", "", NULL);
	assert_resdir(KEY_LAYOUT_LEGACY, "..", "v1", "", NULL);
	assert_resdir(KEY_LAYOUT_LEGACY, "a/b", "v1", "", NULL);
}

/* ---- key_parse_resource_dir ---- */

static void assert_parse(const char *dir, const char *r, const char *v, const char *g)
{
	char *pr = (char *)1, *pv = (char *)1, *pg = (char *)1;
	int rc = key_parse_resource_dir(dir, &pr, &pv, &pg);
	if (!r) {
		if (rc == 0) {
			char msg[512];
			snprintf(msg, sizeof msg, "parsed \"%s\" as (\"%s\", \"%s\", \"%s\")", dir,
				 pr, pv, pg);
			free(pr);
			free(pv);
			free(pg);
			fail_msg("%s, want an error", msg);
		}
		assert_int_equal(rc, -1);
		assert_null(pr);
		assert_null(pv);
		assert_null(pg);
		return;
	}
	assert_int_equal(rc, 0);
	assert_string_equal(pr, r);
	assert_string_equal(pv, v);
	assert_string_equal(pg, g);
	free(pr);
	free(pv);
	free(pg);
}

static void test_parse_resource_dir(void **state)
{
	assert_parse("pods.v1.core", "pods", "v1", "");
	assert_parse("endpointslices.v1.discovery.k8s.io", "endpointslices", "v1",
		     "discovery.k8s.io");
	assert_parse("deployments.v1.apps", "deployments", "v1", "apps");
	assert_parse("pods", "pods", "", ""); /* legacy */
	assert_parse("endpointslices", "endpointslices", "", "");

	assert_parse("pods.v1", NULL, NULL, NULL);
	assert_parse("", NULL, NULL, NULL);
	assert_parse(".v1.core", NULL, NULL, NULL);
	assert_parse("pods..core", NULL, NULL, NULL);
	assert_parse("pods.v1..x", NULL, NULL, NULL);
	assert_parse("pods.v1.a..b", NULL, NULL, NULL);
	assert_parse("po_ds", NULL, NULL, NULL);
	assert_parse("_internal", NULL, NULL, NULL);
	assert_parse("pods.v1.a/b", NULL, NULL, NULL);
}

static void test_parse_resource_dir_empty_group_is_not_core(void **state)
{
	/* key_resource_dir never writes "pods.v1." - the core group is spelled
	 * "core" - so reading it back as core pods would give a resource whose
	 * directory is another one ("pods.v1.core"). */
	assert_parse("pods.v1.", NULL, NULL, NULL);
}

static void test_resource_dir_round_trip(void **state)
{
	static const char *const gvr[][3] = {
	    {"", "v1", "pods"},
	    {"", "v1", "nodes"},
	    {"discovery.k8s.io", "v1", "endpointslices"},
	    {"apps", "v1", "deployments"},
	    {"coordination.k8s.io", "v1", "leases"},
	    {"networking.k8s.io", "v1beta1", "ingresses"},
	    {"raven.openyurt.io", "v1alpha1", "gateways"},
	};
	for (size_t i = 0; i < sizeof gvr / sizeof gvr[0]; i++) {
		char *dir = key_resource_dir(KEY_LAYOUT_ENHANCED, gvr[i][2], gvr[i][1], gvr[i][0]);
		assert_non_null(dir);
		char *r, *v, *g;
		assert_int_equal(key_parse_resource_dir(dir, &r, &v, &g), 0);
		assert_string_equal(r, gvr[i][2]);
		assert_string_equal(v, gvr[i][1]);
		assert_string_equal(g, gvr[i][0]);
		char *again = key_resource_dir(KEY_LAYOUT_ENHANCED, r, v, g);
		assert_non_null(again);
		assert_string_equal(again, dir);
		free(again);
		free(r);
		free(v);
		free(g);
		free(dir);

		dir = key_resource_dir(KEY_LAYOUT_LEGACY, gvr[i][2], gvr[i][1], gvr[i][0]);
		assert_non_null(dir);
		assert_int_equal(key_parse_resource_dir(dir, &r, &v, &g), 0);
		assert_string_equal(r, gvr[i][2]);
		assert_string_equal(v, "");
		assert_string_equal(g, "");
		free(r);
		free(v);
		free(g);
		free(dir);
	}
}

/* ---- key_build_disk ---- */

struct key_case {
	enum key_layout layout;
	struct store_key_info info;
	enum store_err want;
	const char *path;
	const char *ns; /* out->namespace */
	int is_root;
};

static void check_key(const struct key_case *c)
{
	struct store_key k;
	memset(&k, 0xa5, sizeof k);
	enum store_err e = key_build_disk(c->layout, &c->info, &k);
	assert_int_equal(e, c->want);
	if (e != STORE_OK) {
		/* Nothing to free, and freeing is harmless. */
		assert_null(k.path);
		assert_null(k.component);
		store_key_free(&k);
		return;
	}
	assert_non_null(k.path);
	assert_string_equal(k.path, c->path);
	assert_string_equal(k.component, c->info.component);
	assert_string_equal(k.group, c->info.group ? c->info.group : "");
	assert_string_equal(k.version, c->info.version ? c->info.version : "");
	assert_string_equal(k.resource, c->info.resource);
	assert_string_equal(k.namespace, c->ns);
	assert_string_equal(k.name, c->info.name ? c->info.name : "");
	assert_int_equal(k.is_root, c->is_root);
	store_key_free(&k);
	assert_null(k.path);
	store_key_free(&k); /* twice is fine */
	store_key_free(NULL);
}

#define E KEY_LAYOUT_ENHANCED
#define L KEY_LAYOUT_LEGACY

static void test_build_disk_ok(void **state)
{
	static const struct key_case cases[] = {
	    {E,
	     {"kubelet", "", "v1", "pods", "default", "web-0"},
	     STORE_OK,
	     "kubelet/pods.v1.core/default/web-0",
	     "default",
	     0},
	    {E,
	     {"kubelet", NULL, "v1", "pods", "kube-system", "coredns-1"},
	     STORE_OK,
	     "kubelet/pods.v1.core/kube-system/coredns-1",
	     "kube-system",
	     0},
	    {E,
	     {"kubelet", "", "v1", "nodes", "", "node1"},
	     STORE_OK,
	     "kubelet/nodes.v1.core/node1",
	     "",
	     0},
	    {E,
	     {"kubelet", "", "v1", "nodes", NULL, "node1"},
	     STORE_OK,
	     "kubelet/nodes.v1.core/node1",
	     "",
	     0},
	    {E,
	     {"coredns", "discovery.k8s.io", "v1", "endpointslices", "kube-system", "dns-abc"},
	     STORE_OK,
	     "coredns/endpointslices.v1.discovery.k8s.io/kube-system/dns-abc",
	     "kube-system",
	     0},
	    /* Root keys: the collection, optionally of one namespace. */
	    {E, {"kubelet", "", "v1", "pods", "", ""}, STORE_OK, "kubelet/pods.v1.core", "", 1},
	    {E, {"kubelet", "", "v1", "pods", NULL, NULL}, STORE_OK, "kubelet/pods.v1.core", "", 1},
	    {E,
	     {"kubelet", "", "v1", "pods", "default", ""},
	     STORE_OK,
	     "kubelet/pods.v1.core/default",
	     "default",
	     1},
	    /* The namespace given with the namespaces resource is ignored. */
	    {E,
	     {"kubelet", "", "v1", "namespaces", "kube-system", "kube-system"},
	     STORE_OK,
	     "kubelet/namespaces.v1.core/kube-system",
	     "",
	     0},
	    {E,
	     {"kubelet", "", "v1", "namespaces", "default", ""},
	     STORE_OK,
	     "kubelet/namespaces.v1.core",
	     "",
	     1},
	    /* Legacy layout: the bare resource. */
	    {L,
	     {"kubelet", "", "v1", "pods", "default", "web-0"},
	     STORE_OK,
	     "kubelet/pods/default/web-0",
	     "default",
	     0},
	    {L, {"kubelet", "", "", "nodes", "", "node1"}, STORE_OK, "kubelet/nodes/node1", "", 0},
	    {L,
	     {"kube-proxy", "discovery.k8s.io", "v1", "endpointslices", "", ""},
	     STORE_OK,
	     "kube-proxy/endpointslices",
	     "",
	     1},
	    {E,
	     {"Go-http-client", "", "v1", "pods", "default", "p"},
	     STORE_OK,
	     "Go-http-client/pods.v1.core/default/p",
	     "default",
	     0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		check_key(&cases[i]);
}

static void test_build_disk_errors(void **state)
{
	static const struct key_case cases[] = {
	    {E, {NULL, "", "v1", "pods", "default", "x"}, STORE_EMPTY_KEY, NULL, NULL, 0},
	    {E, {"", "", "v1", "pods", "default", "x"}, STORE_EMPTY_KEY, NULL, NULL, 0},
	    {E, {"kubelet", "", "v1", NULL, "default", "x"}, STORE_EMPTY_KEY, NULL, NULL, 0},
	    {E, {"kubelet", "", "v1", "", "default", "x"}, STORE_EMPTY_KEY, NULL, NULL, 0},
	    {E, {"kubelet", "", "", "pods", "default", "x"}, STORE_EMPTY_KEY, NULL, NULL, 0},
	    {E, {"kubelet", "", NULL, "pods", "default", "x"}, STORE_EMPTY_KEY, NULL, NULL, 0},
	    {E, {"_internal", "", "v1", "pods", "default", "x"}, STORE_BAD_KEY, NULL, NULL, 0},
	    {E, {"..", "", "v1", "pods", "default", "x"}, STORE_BAD_KEY, NULL, NULL, 0},
	    {E, {"a/b", "", "v1", "pods", "default", "x"}, STORE_BAD_KEY, NULL, NULL, 0},
	    {E, {"version", "", "v1", "pods", "default", "x"}, STORE_BAD_KEY, NULL, NULL, 0},
	    {E, {"kubelet", "", "v1", "pods", "..", "x"}, STORE_BAD_KEY, NULL, NULL, 0},
	    {E, {"kubelet", "", "v1", "pods", "a/b", "x"}, STORE_BAD_KEY, NULL, NULL, 0},
	    {E, {"kubelet", "", "v1", "pods", "default", ".."}, STORE_BAD_KEY, NULL, NULL, 0},
	    {E, {"kubelet", "", "v1", "pods", "default", "."}, STORE_BAD_KEY, NULL, NULL, 0},
	    {E,
	     {"kubelet", "", "v1", "pods", "default", "../../etc"},
	     STORE_BAD_KEY,
	     NULL,
	     NULL,
	     0},
	    {E, {"kubelet", "", "v1", "pods", "default", "tmp_x"}, STORE_BAD_KEY, NULL, NULL, 0},
	    {E, {"kubelet", "", "v1", "pods", "default", "a\x01"}, STORE_BAD_KEY, NULL, NULL, 0},
	    {E, {"kubelet", "", "v1", "pods", "de\x7f", "x"}, STORE_BAD_KEY, NULL, NULL, 0},
	    {E, {"kubelet", "", "v1", "po.ds", "default", "x"}, STORE_BAD_KEY, NULL, NULL, 0},
	    {E, {"kubelet", "core", "v1", "pods", "default", "x"}, STORE_BAD_KEY, NULL, NULL, 0},
	    {E, {"kubelet", "../x", "v1", "pods", "default", "x"}, STORE_BAD_KEY, NULL, NULL, 0},
	    {L, {"kubelet", "", "v1", "../pods", "", "x"}, STORE_BAD_KEY, NULL, NULL, 0},
	    {L, {"kubelet", "", "v1", "pods", "default", "a/b"}, STORE_BAD_KEY, NULL, NULL, 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		check_key(&cases[i]);
}

static void test_build_disk_name_length(void **state)
{
	char *n253 = repeat("", 'n', 253);
	char *n254 = repeat("", 'n', 254);
	struct key_case ok = {
	    E, {"kubelet", "", "v1", "pods", "default", n253}, STORE_OK, NULL, "default", 0};
	char *want = NULL;
	assert_true(asprintf(&want, "kubelet/pods.v1.core/default/%s", n253) > 0);
	ok.path = want;
	check_key(&ok);
	struct key_case bad = {
	    E, {"kubelet", "", "v1", "pods", "default", n254}, STORE_BAD_KEY, NULL, NULL, 0};
	check_key(&bad);
	struct key_case bad_ns = {
	    E, {"kubelet", "", "v1", "pods", n254, "x"}, STORE_BAD_KEY, NULL, NULL, 0};
	check_key(&bad_ns);
	free(want);
	free(n253);
	free(n254);
}

/* ---- key_cluster_info_name ---- */

static void assert_info_name(const char *path, const char *want)
{
	char *got = key_cluster_info_name(path);
	if (!want) {
		if (got) {
			char msg[1200];
			snprintf(msg, sizeof msg, "key_cluster_info_name(\"%.500s\") = \"%.500s\"",
				 path, got);
			free(got);
			fail_msg("%s, want NULL", msg);
		}
		return;
	}
	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void test_cluster_info_name(void **state)
{
	assert_info_name("/version", "version");
	assert_info_name("/apis", "apis");
	assert_info_name("/api", "_api");
	assert_info_name("/api/v1", "_api_v1");
	assert_info_name("/apis/discovery.k8s.io/v1", "_apis_discovery.k8s.io_v1");
	assert_info_name("/apis/apps", "_apis_apps");
	assert_info_name("/apis/raven.openyurt.io/v1beta1", "_apis_raven.openyurt.io_v1beta1");
}

static void test_cluster_info_name_rejects(void **state)
{
	assert_info_name(NULL, NULL);
	assert_info_name("", NULL);
	assert_info_name("/", NULL);
	assert_info_name("//", NULL);
	assert_info_name("/../x", NULL);
	assert_info_name("/..", NULL);
	assert_info_name("/.", NULL);
	assert_info_name("/a/./b", NULL);
	assert_info_name("/a/../b", NULL);
	assert_info_name("/a//b", NULL);
	assert_info_name("/version/", NULL);
	assert_info_name("/apis/", NULL);
	assert_info_name("version", NULL);
	assert_info_name("apis", NULL);
	assert_info_name("/a b", NULL);
	assert_info_name("/api/v1?watch=1", NULL);
	assert_info_name("/api_v1", NULL); /* '_' would collide with the '/' mapping */
	assert_info_name("/a\\b", NULL);
	assert_info_name("/a\x01", NULL);
	assert_info_name("/a%2fb", NULL);
}

static void test_cluster_info_name_length(void **state)
{
	/* Far too long. */
	char *p1000 = repeat("/", 'a', 999);
	assert_info_name(p1000, NULL);
	free(p1000);
	/* A realistic long discovery path still works. */
	char *group = repeat("", 'g', 60);
	char *p = NULL;
	assert_true(asprintf(&p, "/apis/%s.example.com/v1", group) > 0);
	char *want = NULL;
	assert_true(asprintf(&want, "_apis_%s.example.com_v1", group) > 0);
	assert_info_name(p, want);
	free(p);
	free(want);
	free(group);
}

static void test_cluster_info_name_fits_a_file_name(void **state)
{
	/* The result is one file name in the cache directory: a name the file
	 * system cannot hold (> NAME_MAX bytes) must be refused here rather
	 * than fail later as an I/O error. */
	char *p = repeat("/apis/", 'g', 300);
	char *got = key_cluster_info_name(p);
	size_t len = got ? strlen(got) : 0;
	free(got);
	free(p);
	if (len > NAME_MAX)
		fail_msg("key_cluster_info_name accepted a path giving a %zu-byte file name", len);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_segment_basic),
	    cmocka_unit_test(test_segment_control_bytes),
	    cmocka_unit_test(test_segment_length),
	    cmocka_unit_test(test_segment_yurthub_backup_prefix),
	    cmocka_unit_test(test_component),
	    cmocka_unit_test(test_component_length),
	    cmocka_unit_test(test_resource_version_group),
	    cmocka_unit_test(test_resource_dir_enhanced),
	    cmocka_unit_test(test_resource_dir_legacy),
	    cmocka_unit_test(test_parse_resource_dir),
	    cmocka_unit_test(test_parse_resource_dir_empty_group_is_not_core),
	    cmocka_unit_test(test_resource_dir_round_trip),
	    cmocka_unit_test(test_build_disk_ok),
	    cmocka_unit_test(test_build_disk_errors),
	    cmocka_unit_test(test_build_disk_name_length),
	    cmocka_unit_test(test_cluster_info_name),
	    cmocka_unit_test(test_cluster_info_name_rejects),
	    cmocka_unit_test(test_cluster_info_name_length),
	    cmocka_unit_test(test_cluster_info_name_fits_a_file_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
