/*
 * test_disk_fixtures.c - cache directories as the Go YurtHub writes them,
 * built by hand, read back by the disk store: its current layout
 * (<comp>/<resource>.<version>.<group>/...), its legacy layout
 * (<comp>/<resource>/...), its cluster-info files, its tmp_ backups of an
 * interrupted update and an interrupted list replace, and its 5-segment
 * partial-object-metadata directories.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/meta.h"
#include "kube/selector.h"
#include "storage/disk.h"
#include "testutil.h"

struct fx {
	char dir[4096];
	struct store *s;
};

static const char *POD_WEB0 =
    "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"web-0\",\"namespace\":"
    "\"default\",\"resourceVersion\":\"1201\",\"labels\":{\"app\":\"web\"}},\"spec\":{"
    "\"nodeName\":\"node1\"},\"status\":{\"phase\":\"Running\"}}";
static const char *POD_WEB1_OLD =
    "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"web-1\",\"namespace\":"
    "\"default\",\"resourceVersion\":\"1202\"},\"spec\":{\"nodeName\":\"node1\"}}";
static const char *POD_WEB1_TORN = "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metad";
static const char *POD_DNS =
    "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"coredns-7f9c\","
    "\"namespace\":\"kube-system\",\"resourceVersion\":\"900\"},\"spec\":{\"nodeName\":"
    "\"node2\"}}";
static const char *NODE1 = "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":"
			   "\"node1\",\"resourceVersion\":\"1500\"}}";
static const char *LEASE = "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\","
			   "\"metadata\":{\"name\":\"node1\",\"namespace\":\"kube-node-lease\","
			   "\"resourceVersion\":\"1600\"}}";
static const char *SVC = "{\"kind\":\"Service\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":"
			 "\"kube-dns\",\"namespace\":\"kube-system\",\"resourceVersion\":\"50\"}}";
static const char *SVC_PARTIAL = "{\"kind\":\"Service\",\"apiVersion\":\"v1\",\"metadata\":{"
				 "\"name\":\"kube-dns\",\"namespace\":\"kube-system\","
				 "\"resourceVersion\":\"51\"}}";
static const char *EPS = "{\"kind\":\"EndpointSlice\",\"apiVersion\":\"discovery.k8s.io/v1\","
			 "\"metadata\":{\"name\":\"kube-dns-x7k2p\",\"namespace\":\"kube-system\","
			 "\"resourceVersion\":\"77\"}}";
static const char *NS = "{\"kind\":\"Namespace\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":"
			"\"default\",\"resourceVersion\":\"3\"}}";
static const char *VERSION = "{\"major\":\"1\",\"minor\":\"30\",\"gitVersion\":\"v1.30.4\"}";
static const char *DISCOVERY = "{\"kind\":\"APIResourceList\",\"apiVersion\":\"v1\","
			       "\"groupVersion\":\"discovery.k8s.io/v1\",\"resources\":[]}";

static void must_write(const char *dir, const char *rel, const char *data)
{
	assert_int_equal(test_write_file(dir, rel, data), 0);
}

/* What the Go YurtHub leaves: objects, cluster info, its restmapper file,
 * and two interrupted writes with their tmp_ backups. */
static void write_current_layout(const char *d)
{
	must_write(d, "kubelet/pods.v1.core/default/web-0", POD_WEB0);
	/* Update of web-1 cut between "rename to tmp_" and "delete tmp_":
	 * YurtHub restores the backup, even over a complete new file. */
	must_write(d, "kubelet/pods.v1.core/default/tmp_web-1", POD_WEB1_OLD);
	must_write(d, "kubelet/pods.v1.core/default/web-1", POD_WEB1_TORN);
	must_write(d, "kubelet/pods.v1.core/kube-system/coredns-7f9c", POD_DNS);
	must_write(d, "kubelet/nodes.v1.core/node1", NODE1);
	must_write(d, "kubelet/leases.v1.coordination.k8s.io/kube-node-lease/node1", LEASE);
	/* List replace of kube-proxy's services cut while rewriting. */
	must_write(d, "kube-proxy/services.v1.core/tmp_kube-system/kube-dns", SVC);
	must_write(d, "kube-proxy/services.v1.core/kube-system/kube-dns", SVC_PARTIAL);
	must_write(d, "coredns/endpointslices.v1.discovery.k8s.io/kube-system/kube-dns-x7k2p", EPS);
	must_write(d, "coredns/namespaces.v1.core/default", NS);
	must_write(d, "kubelet/partialobjectmetadatas.v1.meta.k8s.io/pods.v1.core/default/web-0",
		   POD_WEB0);
	must_write(d, "version", VERSION);
	must_write(d, "_apis_discovery.k8s.io_v1", DISCOVERY);
	must_write(d, "_internal/restmapper/cache-crd-restmapper.conf", "{}");
}

static int setup_current(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	if (test_mkdtemp(f->dir, sizeof f->dir, "fixture") < 0)
		return -1;
	write_current_layout(f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	if (f->s)
		store_close(f->s);
	test_rm_rf(f->dir);
	free(f);
	return 0;
}

static void expect_object(struct store *s, const char *comp, const char *group,
			  const char *resource, const char *ns, const char *name, const char *want)
{
	struct store_key_info info = {comp, group, "v1", resource, ns, name};
	struct store_key k;
	assert_int_equal(store_key_build(s, &info, &k), STORE_OK);
	struct buf b = BUF_INIT;
	assert_int_equal(store_get(s, &k, &b), STORE_OK);
	assert_string_equal(b.data, want);
	buf_free(&b);
	store_key_free(&k);
}

static int count_fn(void *ctx, const struct store_key *k, const char *data, size_t len)
{
	(void)k;
	struct kube_meta m;
	/* every object read back is a whole JSON object */
	assert_int_equal(kube_meta_parse(data, len, &m), 0);
	kube_meta_free(&m);
	(*(int *)ctx)++;
	return 0;
}

static void test_current_layout_read_back(void **state)
{
	struct fx *f = *state;
	struct disk_recovery_report rep;
	char *err = NULL;
	f->s = disk_store_open(f->dir, 0, &rep, &err);
	assert_non_null(f->s);
	assert_int_equal(rep.yurthub_backups_restored, 2);

	expect_object(f->s, "kubelet", "", "pods", "default", "web-0", POD_WEB0);
	expect_object(f->s, "kubelet", "", "pods", "default", "web-1", POD_WEB1_OLD);
	expect_object(f->s, "kubelet", "", "nodes", "", "node1", NODE1);
	expect_object(f->s, "kubelet", "coordination.k8s.io", "leases", "kube-node-lease", "node1",
		      LEASE);
	expect_object(f->s, "kube-proxy", "", "services", "kube-system", "kube-dns", SVC);
	expect_object(f->s, "coredns", "discovery.k8s.io", "endpointslices", "kube-system",
		      "kube-dns-x7k2p", EPS);
	/* YurtHub ignores the namespace of namespaces */
	expect_object(f->s, "coredns", "", "namespaces", "whatever", "default", NS);
	assert_false(test_exists(f->dir, "kubelet/pods.v1.core/default/tmp_web-1"));
	assert_false(test_exists(f->dir, "kube-proxy/services.v1.core/tmp_kube-system"));

	struct buf b = BUF_INIT;
	assert_int_equal(store_get_cluster_info(f->s, "/version", &b), STORE_OK);
	assert_string_equal(b.data, VERSION);
	buf_reset(&b);
	assert_int_equal(store_get_cluster_info(f->s, "/apis/discovery.k8s.io/v1", &b), STORE_OK);
	assert_string_equal(b.data, DISCOVERY);
	buf_free(&b);

	struct store_key_info ri = {"kubelet", "", "v1", "pods", "", ""};
	struct store_key root;
	assert_int_equal(store_key_build(f->s, &ri, &root), STORE_OK);
	int n = 0;
	assert_int_equal(store_list(f->s, &root, count_fn, &n), STORE_OK);
	assert_int_equal(n, 3);
	store_key_free(&root);
}

static void test_current_layout_lists_are_views(void **state)
{
	struct fx *f = *state;
	char *err = NULL;
	f->s = disk_store_open(f->dir, 0, NULL, &err);
	assert_non_null(f->s);
	/* A YurtHub directory means "this was listed": one view of everything,
	 * so that a node that boots offline right after the swap is served. */
	struct store_view all = {"kubelet", {"", "v1", "pods"}, "", "", ""};
	struct store_view_state st;
	assert_int_equal(store_get_view(f->s, &all, &st), STORE_OK);
	assert_int_equal(st.rv, 0);
	store_view_state_free(&st);
	/* Our first real list of the resource replaces that assumption: the
	 * node1 pods are relisted without web-1, which is then gone, while
	 * coredns (another node's pod, never this view's) stays. */
	struct store_view mine = {"kubelet", {"", "v1", "pods"}, "", "", "spec.nodeName=node1"};
	struct store_item it = {"default", "web-0", 1201, POD_WEB0, strlen(POD_WEB0)};
	assert_int_equal(store_replace_view(f->s, &mine, 2000, &it, 1), STORE_OK);
	assert_int_equal(store_get_view(f->s, &all, &st), STORE_NOT_FOUND);
	assert_false(test_exists(f->dir, "kubelet/pods.v1.core/default/web-1"));
	assert_true(test_exists(f->dir, "kubelet/pods.v1.core/default/web-0"));
	assert_true(test_exists(f->dir, "kubelet/pods.v1.core/kube-system/coredns-7f9c"));
}

static void test_current_layout_partial_metadata_harmless(void **state)
{
	struct fx *f = *state;
	char *err = NULL;
	f->s = disk_store_open(f->dir, 0, NULL, &err);
	assert_non_null(f->s);
	/* the 5-segment directory is neither mistaken for objects nor damaged */
	struct store_gvr gvr = {"meta.k8s.io", "v1", "partialobjectmetadatas"};
	(void)gvr;
	assert_true(test_exists(
	    f->dir, "kubelet/partialobjectmetadatas.v1.meta.k8s.io/pods.v1.core/default/web-0"));
	struct store_key_info ri = {"kubelet", "", "v1", "nodes", "", ""};
	struct store_key root;
	assert_int_equal(store_key_build(f->s, &ri, &root), STORE_OK);
	int n = 0;
	assert_int_equal(store_list(f->s, &root, count_fn, &n), STORE_OK);
	assert_int_equal(n, 1);
	store_key_free(&root);
}

static int setup_legacy(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	if (test_mkdtemp(f->dir, sizeof f->dir, "legacy") < 0)
		return -1;
	must_write(f->dir, "kubelet/pods/default/web-0", POD_WEB0);
	must_write(f->dir, "kubelet/nodes/node1", NODE1);
	must_write(f->dir, "kube-proxy/services/kube-system/kube-dns", SVC);
	must_write(f->dir, "version", VERSION);
	*state = f;
	return 0;
}

static void test_legacy_layout_read_back(void **state)
{
	struct fx *f = *state;
	char *err = NULL;
	f->s = disk_store_open(f->dir, 0, NULL, &err);
	assert_non_null(f->s);
	expect_object(f->s, "kubelet", "", "pods", "default", "web-0", POD_WEB0);
	expect_object(f->s, "kubelet", "", "nodes", "", "node1", NODE1);
	expect_object(f->s, "kube-proxy", "", "services", "kube-system", "kube-dns", SVC);
	struct store_gvr gvr = {"", "v1", "pods"};
	struct store_view all = {"kubelet", gvr, "", "", ""};
	struct store_view_state st;
	assert_int_equal(store_get_view(f->s, &all, &st), STORE_OK);
	store_view_state_free(&st);
	/* and it keeps writing the layout it found, as YurtHub does */
	struct store_key_info info = {"kubelet", "", "v1", "pods", "default", "web-9"};
	struct store_key k;
	assert_int_equal(store_key_build(f->s, &info, &k), STORE_OK);
	assert_string_equal(k.path, "kubelet/pods/default/web-9");
	const char *p = "{\"metadata\":{\"name\":\"web-9\",\"namespace\":\"default\"}}";
	assert_int_equal(store_create(f->s, &k, p, strlen(p)), STORE_OK);
	store_key_free(&k);
	assert_true(test_exists(f->dir, "kubelet/pods/default/web-9"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_current_layout_read_back, setup_current, teardown),
	    cmocka_unit_test_setup_teardown(test_current_layout_lists_are_views, setup_current,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_current_layout_partial_metadata_harmless,
					    setup_current, teardown),
	    cmocka_unit_test_setup_teardown(test_legacy_layout_read_back, setup_legacy, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
