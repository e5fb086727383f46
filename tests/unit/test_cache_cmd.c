/*
 * test_cache_cmd.c - `yurthub cache`: ls, get, views, verify and recover run
 * on cache directories built by hand the way the Go YurtHub (and the C hub)
 * lay them out, asserting the exact output lines and exit statuses.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cache_cmd.h"
#include "storage/disk.h"
#include "storage/store.h"
#include "util/buf.h"

/* ---- objects as the cloud sends them ---- */

#define POD(ns, name)                                                                              \
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"" name                   \
	"\",\"namespace\":\"" ns                                                                   \
	"\",\"resourceVersion\":\"100\"},\"spec\":{\"nodeName\":\"node1\"}}"
#define NODE(name)                                                                                 \
	"{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"" name                  \
	"\",\"resourceVersion\":\"7\"}}"
#define NAMESPACE(name)                                                                            \
	"{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"" name "\"}}"
#define SERVICE(ns, name)                                                                          \
	"{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"" name               \
	"\",\"namespace\":\"" ns "\",\"resourceVersion\":\"55\"}}\n"
#define SLICE(ns, name)                                                                            \
	"{\"apiVersion\":\"discovery.k8s.io/v1\",\"kind\":\"EndpointSlice\",\"metadata\":{"        \
	"\"name\":\"" name "\",\"namespace\":\"" ns "\",\"resourceVersion\":\"56\"},"              \
	"\"addressType\":\"IPv4\",\"endpoints\":[]}"
#define PARTIAL(ns, name)                                                                          \
	"{\"apiVersion\":\"meta.k8s.io/v1\",\"kind\":\"PartialObjectMetadata\",\"metadata\":{"     \
	"\"name\":\"" name "\",\"namespace\":\"" ns "\"}}"
#define PARTIAL_CLUSTER(name)                                                                      \
	"{\"apiVersion\":\"meta.k8s.io/v1\",\"kind\":\"PartialObjectMetadata\",\"metadata\":{"     \
	"\"name\":\"" name "\"}}"

#define PODS_VIEWS                                                                                 \
	"{\"views\":[{\"namespace\":\"\",\"labelSelector\":\"\",\"fieldSelector\":"                \
	"\"spec.nodeName=node1\",\"resourceVersion\":\"120\"},{\"namespace\":\"default\","         \
	"\"labelSelector\":\"app=web\",\"fieldSelector\":\"\",\"resourceVersion\":\"130\"}]}"

#define CLEAN_OBJECTS 9 /* object files of the clean fixture */

/* ---- building fixtures ---- */

static void mkdir_p(const char *root, const char *rel)
{
	char *path = NULL;
	assert_true(asprintf(&path, "%s/%s", root, rel) > 0);
	for (char *p = path + strlen(root) + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char saved = *p;
		*p = '\0';
		if (mkdir(path, 0700) < 0)
			assert_int_equal(errno, EEXIST);
		*p = saved;
		if (!saved)
			break;
	}
	free(path);
}

static void mkdir_parent(const char *root, const char *rel)
{
	const char *slash = strrchr(rel, '/');
	if (!slash)
		return;
	char *parent = strndup(rel, (size_t)(slash - rel));
	assert_non_null(parent);
	mkdir_p(root, parent);
	free(parent);
}

static char *path_of(const char *root, const char *rel)
{
	char *path = NULL;
	assert_true(asprintf(&path, "%s/%s", root, rel) > 0);
	return path;
}

/* root/rel holds exactly content, with exactly mode. */
static void put_mode(const char *root, const char *rel, const char *content, mode_t mode)
{
	mkdir_parent(root, rel);
	char *path = path_of(root, rel);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	assert_true(fd >= 0);
	size_t len = strlen(content);
	assert_int_equal(write(fd, content, len), (ssize_t)len);
	assert_int_equal(fchmod(fd, mode), 0);
	assert_int_equal(close(fd), 0);
	free(path);
}

static void put(const char *root, const char *rel, const char *content)
{
	put_mode(root, rel, content, 0600);
}

static void put_symlink(const char *root, const char *rel, const char *target)
{
	mkdir_parent(root, rel);
	char *path = path_of(root, rel);
	assert_int_equal(symlink(target, path), 0);
	free(path);
}

static void put_fifo(const char *root, const char *rel)
{
	mkdir_parent(root, rel);
	char *path = path_of(root, rel);
	assert_int_equal(mkfifo(path, 0600), 0);
	free(path);
}

static void set_mode(const char *root, const char *rel, mode_t mode)
{
	char *path = path_of(root, rel);
	assert_int_equal(chmod(path, mode), 0);
	free(path);
}

static bool exists(const char *root, const char *rel)
{
	char *path = path_of(root, rel);
	struct stat st;
	bool found = lstat(path, &st) == 0;
	free(path);
	return found;
}

/* What the Go YurtHub writes, plus the C hub's private state. */
static void make_clean_tree(const char *root)
{
	put(root, "version", "{\"major\":\"1\",\"minor\":\"28\",\"gitVersion\":\"v1.28.2\"}");
	put(root, "apis", "{\"kind\":\"APIGroupList\",\"groups\":[]}");
	put(root, "_apis_discovery.k8s.io_v1",
	    "{\"kind\":\"APIResourceList\",\"groupVersion\":\"discovery.k8s.io/v1\"}");
	put(root, "kubelet/pods.v1.core/default/web-0", POD("default", "web-0"));
	put(root, "kubelet/pods.v1.core/default/web-1", POD("default", "web-1") "\n");
	put(root, "kubelet/pods.v1.core/kube-system/coredns-abc",
	    POD("kube-system", "coredns-abc"));
	put(root, "kubelet/nodes.v1.core/node1", NODE("node1"));
	put(root, "kubelet/namespaces.v1.core/default", NAMESPACE("default"));
	put(root, "kubelet/partialobjectmetadatas.v1.meta.k8s.io/pods.v1.core/default/web-0",
	    PARTIAL("default", "web-0"));
	put(root, "kubelet/partialobjectmetadatas.v1.meta.k8s.io/nodes.v1.core/node1",
	    PARTIAL_CLUSTER("node1"));
	put(root, "kube-proxy/services.v1.core/kube-system/kube-dns",
	    SERVICE("kube-system", "kube-dns"));
	put(root, "coredns/endpointslices.v1.discovery.k8s.io/kube-system/kube-dns-x7k2p",
	    SLICE("kube-system", "kube-dns-x7k2p"));
	/* YurtHub's own restmapper cache: not ours to judge. */
	put(root, "_internal/restmapper/cache-crd-restmapper.conf", "not json");
	put(root, "_internal/yurthub-c/lock", "");
	mkdir_p(root, "_internal/yurthub-c/staging");
	mkdir_p(root, "_internal/yurthub-c/journal");
	put(root, "_internal/yurthub-c/views/kubelet/pods.v1.core", PODS_VIEWS);
	put(root, "_internal/yurthub-c/views/kubelet/nodes.v1.core", "{\"views\":[]}");
}

static void make_legacy_tree(const char *root)
{
	put(root, "version", "{\"major\":\"1\",\"minor\":\"20\"}");
	put(root, "kubelet/pods/default/web-0", POD("default", "web-0"));
	put(root, "kubelet/nodes/node1", NODE("node1"));
}

/* ---- temp directories ---- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static int make_tmpdir(void **state)
{
	char tmpl[] = "/tmp/test_cache_cmd.XXXXXX";
	char *dir = mkdtemp(tmpl);
	if (!dir)
		return -1;
	*state = strdup(dir);
	return *state ? 0 : -1;
}

static int remove_tmpdir(void **state)
{
	int rc = nftw(*state, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(*state);
	return rc;
}

static int clean_tree_setup(void **state)
{
	if (make_tmpdir(state) < 0)
		return -1;
	make_clean_tree(*state);
	return 0;
}

static int legacy_tree_setup(void **state)
{
	if (make_tmpdir(state) < 0)
		return -1;
	make_legacy_tree(*state);
	return 0;
}

/* ---- running the command ---- */

struct run {
	int rc;
	char *out, *err;
	size_t out_len, err_len;
};

/* cache_cmd_main("cache", args..., NULL). */
static void run(struct run *r, ...)
{
	char *argv[16];
	int argc = 0;
	argv[argc++] = (char *)"cache";
	va_list ap;
	va_start(ap, r);
	for (const char *a; (a = va_arg(ap, const char *)) != NULL;) {
		assert_true(argc < 16);
		argv[argc++] = (char *)a;
	}
	va_end(ap);
	FILE *out = open_memstream(&r->out, &r->out_len);
	FILE *err = open_memstream(&r->err, &r->err_len);
	assert_non_null(out);
	assert_non_null(err);
	r->rc = cache_cmd_main(argc, argv, out, err);
	assert_int_equal(fclose(out), 0);
	assert_int_equal(fclose(err), 0);
}

static void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
	memset(r, 0, sizeof *r);
}

/* Ran with status rc, printing exactly out and err. */
static void expect(struct run *r, int rc, const char *out, const char *err)
{
	assert_string_equal(r->out, out);
	assert_string_equal(r->err, err);
	assert_int_equal(r->rc, rc);
	run_free(r);
}

static size_t count_lines(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* A usage error: status 2, nothing on out, one line on err that says why. */
static void expect_usage_error(struct run *r, const char *why)
{
	assert_int_equal(r->rc, 2);
	assert_string_equal(r->out, "");
	assert_int_equal(count_lines(r->err), 1);
	assert_non_null(strstr(r->err, why));
	run_free(r);
}

/* ---- ls ---- */

static void test_ls_components(void **state)
{
	const char *dir = *state;
	put(dir, "tmp_kubelet/pods.v1.core/default/web-0", POD("default", "web-0"));
	mkdir_p(dir, ".hidden");
	struct run r;
	run(&r, "ls", dir, NULL);
	expect(&r, 0, "coredns\nkube-proxy\nkubelet\n", "");
}

static void test_ls_resources(void **state)
{
	const char *dir = *state;
	struct run r;
	run(&r, "ls", dir, "kubelet", NULL);
	expect(&r, 0,
	       "namespaces.v1.core\nnodes.v1.core\npartialobjectmetadatas.v1.meta.k8s.io\n"
	       "pods.v1.core\n",
	       "");
	run(&r, "ls", dir, "coredns", NULL);
	expect(&r, 0, "endpointslices.v1.discovery.k8s.io\n", "");
	run(&r, "ls", dir, "nosuch", NULL);
	expect(&r, 1, "", "yurthub cache ls: nosuch: no such component\n");
}

static void test_ls_objects(void **state)
{
	const char *dir = *state;
	struct run r;
	run(&r, "ls", dir, "kubelet", "pods.v1.core", NULL);
	expect(&r, 0, "default/web-0\ndefault/web-1\nkube-system/coredns-abc\n", "");
	run(&r, "ls", dir, "kubelet", "nodes.v1.core", NULL);
	expect(&r, 0, "node1\n", "");
	run(&r, "ls", dir, "kubelet", "namespaces.v1.core", NULL);
	expect(&r, 0, "default\n", "");
	run(&r, "ls", dir, "kube-proxy", "services.v1.core", NULL);
	expect(&r, 0, "kube-system/kube-dns\n", "");
	run(&r, "ls", dir, "coredns", "endpointslices.v1.discovery.k8s.io", NULL);
	expect(&r, 0, "kube-system/kube-dns-x7k2p\n", "");
}

static void test_ls_namespace(void **state)
{
	const char *dir = *state;
	struct run r;
	run(&r, "ls", dir, "kubelet", "pods.v1.core", "default", NULL);
	expect(&r, 0, "web-0\nweb-1\n", "");
	run(&r, "ls", dir, "kubelet", "pods.v1.core", "kube-system", NULL);
	expect(&r, 0, "coredns-abc\n", "");
	run(&r, "ls", dir, "kubelet", "pods.v1.core", "empty-ns", NULL);
	expect(&r, 0, "", "");
}

static void test_ls_missing_resource(void **state)
{
	const char *dir = *state;
	struct run r;
	run(&r, "ls", dir, "kubelet", "secrets.v1.core", NULL);
	expect(&r, 1, "", "yurthub cache ls: kubelet/secrets.v1.core: not found\n");
	/* A bare resource name in a cache of the RESOURCE.VERSION.GROUP layout. */
	run(&r, "ls", dir, "kubelet", "pods", NULL);
	expect(&r, 1, "",
	       "yurthub cache ls: kubelet/pods: not found (this cache names resources "
	       "RESOURCE.VERSION.GROUP)\n");
}

/* ---- get ---- */

static void test_get_namespaced(void **state)
{
	const char *dir = *state;
	struct run r;
	/* Stored without a final newline: one is added. */
	run(&r, "get", dir, "kubelet", "pods.v1.core", "default", "web-0", NULL);
	expect(&r, 0, POD("default", "web-0") "\n", "");
	/* Stored with one: printed exactly. */
	run(&r, "get", dir, "kubelet", "pods.v1.core", "default", "web-1", NULL);
	expect(&r, 0, POD("default", "web-1") "\n", "");
	run(&r, "get", dir, "coredns", "endpointslices.v1.discovery.k8s.io", "kube-system",
	    "kube-dns-x7k2p", NULL);
	expect(&r, 0, SLICE("kube-system", "kube-dns-x7k2p") "\n", "");
}

static void test_get_cluster_scoped(void **state)
{
	const char *dir = *state;
	struct run r;
	run(&r, "get", dir, "kubelet", "nodes.v1.core", "node1", NULL);
	expect(&r, 0, NODE("node1") "\n", "");
	run(&r, "get", dir, "kubelet", "namespaces.v1.core", "default", NULL);
	expect(&r, 0, NAMESPACE("default") "\n", "");
}

static void test_get_missing(void **state)
{
	const char *dir = *state;
	struct run r;
	run(&r, "get", dir, "kubelet", "pods.v1.core", "default", "missing", NULL);
	expect(&r, 1, "", "yurthub cache get: kubelet/pods.v1.core/default/missing: not found\n");
	/* A namespaced object asked for without its namespace. */
	run(&r, "get", dir, "kubelet", "pods.v1.core", "web-0", NULL);
	expect(&r, 1, "", "yurthub cache get: kubelet/pods.v1.core/web-0: not found\n");
	run(&r, "get", dir, "nosuch", "pods.v1.core", "default", "web-0", NULL);
	expect(&r, 1, "", "yurthub cache get: nosuch/pods.v1.core/default/web-0: not found\n");
	/* The store reads no symbolic link. */
	put_symlink(dir, "kubelet/pods.v1.core/default/web-9", "web-0");
	run(&r, "get", dir, "kubelet", "pods.v1.core", "default", "web-9", NULL);
	expect(&r, 1, "",
	       "yurthub cache get: kubelet/pods.v1.core/default/web-9: not a regular file\n");
	/* A namespace directory is not an object. */
	run(&r, "get", dir, "kubelet", "pods.v1.core", "default", NULL);
	expect(&r, 1, "",
	       "yurthub cache get: kubelet/pods.v1.core/default: a collection, not an "
	       "object\n");
}

/* ---- views ---- */

static void test_views(void **state)
{
	const char *dir = *state;
	struct run r;
	run(&r, "views", dir, "kubelet", "pods.v1.core", NULL);
	expect(&r, 0,
	       "namespace=* labelSelector= fieldSelector=spec.nodeName=node1 resourceVersion=120\n"
	       "namespace=default labelSelector=app=web fieldSelector= resourceVersion=130\n",
	       "");
	/* A directory YurtHub wrote, with no view record: one list of everything. */
	run(&r, "views", dir, "kube-proxy", "services.v1.core", NULL);
	expect(&r, 0, "namespace=* labelSelector= fieldSelector= resourceVersion=0\n", "");
}

static void test_views_never_listed(void **state)
{
	const char *dir = *state;
	struct run r;
	/* The hub wrote objects but never listed the resource. */
	run(&r, "views", dir, "kubelet", "nodes.v1.core", NULL);
	expect(&r, 1, "", "yurthub cache views: kubelet/nodes.v1.core: never listed\n");
	run(&r, "views", dir, "kubelet", "secrets.v1.core", NULL);
	expect(&r, 1, "", "yurthub cache views: kubelet/secrets.v1.core: never listed\n");
}

/* ---- legacy layout ---- */

static void test_legacy_layout(void **state)
{
	const char *dir = *state;
	struct run r;
	run(&r, "ls", dir, NULL);
	expect(&r, 0, "kubelet\n", "");
	run(&r, "ls", dir, "kubelet", NULL);
	expect(&r, 0, "nodes\npods\n", "");
	run(&r, "ls", dir, "kubelet", "pods", NULL);
	expect(&r, 0, "default/web-0\n", "");
	run(&r, "ls", dir, "kubelet", "pods", "default", NULL);
	expect(&r, 0, "web-0\n", "");
	run(&r, "ls", dir, "kubelet", "nodes", NULL);
	expect(&r, 0, "node1\n", "");
	run(&r, "get", dir, "kubelet", "pods", "default", "web-0", NULL);
	expect(&r, 0, POD("default", "web-0") "\n", "");
	run(&r, "get", dir, "kubelet", "nodes", "node1", NULL);
	expect(&r, 0, NODE("node1") "\n", "");
	run(&r, "get", dir, "kubelet", "pods", "default", "web-9", NULL);
	expect(&r, 1, "", "yurthub cache get: kubelet/pods/default/web-9: not found\n");
	run(&r, "views", dir, "kubelet", "pods", NULL);
	expect(&r, 0, "namespace=* labelSelector= fieldSelector= resourceVersion=0\n", "");
	run(&r, "verify", dir, NULL);
	expect(&r, 0, "verify: 2 objects, 0 problems\n", "");
	/* Reading a Go YurtHub's cache leaves no trace of the C hub in it. */
	assert_false(exists(dir, "_internal"));
}

/* ---- reads never write ---- */

static struct buf snapshot_buf;

static int snapshot_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return buf_printf(&snapshot_buf, "%s %o %lld %lld.%09ld %lld.%09ld\n", path,
			  (unsigned)st->st_mode, (long long)st->st_size,
			  (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec,
			  (long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
}

/* Every entry of the tree with its mode, size and times. */
static char *snapshot(const char *dir)
{
	buf_free(&snapshot_buf);
	assert_int_equal(nftw(dir, snapshot_entry, 16, FTW_PHYS), 0);
	return buf_steal(&snapshot_buf);
}

static void test_reads_do_not_write(void **state)
{
	const char *dir = *state;
	put(dir, "kubelet/pods.v1.core/default/tmp_web-0", POD("default", "web-0"));
	put(dir, "_internal/yurthub-c/staging/w3", "x");
	char *before = snapshot(dir);
	struct run r;
	const char *const cmds[][7] = {
	    {"ls", dir, NULL},
	    {"ls", dir, "kubelet", NULL},
	    {"ls", dir, "kubelet", "pods.v1.core", NULL},
	    {"ls", dir, "kubelet", "pods.v1.core", "default", NULL},
	    {"get", dir, "kubelet", "pods.v1.core", "default", "web-0", NULL},
	    {"get", dir, "kubelet", "pods.v1.core", "default", "nope", NULL},
	    {"views", dir, "kubelet", "pods.v1.core", NULL},
	    {"views", dir, "kubelet", "secrets.v1.core", NULL},
	    {"verify", dir, NULL},
	};
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
		run(&r, cmds[i][0], cmds[i][1], cmds[i][2], cmds[i][3], cmds[i][4], cmds[i][5],
		    cmds[i][6]);
		run_free(&r);
	}
	char *after = snapshot(dir);
	assert_string_equal(before, after);
	free(before);
	free(after);
}

/* ---- verify ---- */

static void test_verify_clean(void **state)
{
	struct run r;
	run(&r, "verify", (const char *)*state, NULL);
	expect(&r, 0, "verify: 9 objects, 0 problems\n", "");
}

/* One kind of damage, and the line verify must print for it. */
struct damage {
	void (*apply)(const char *root);
	const char *line;
	int extra_objects; /* object files the damage adds */
};

static void bad_json(const char *root)
{
	put(root, "kubelet/nodes.v1.core/node2", "{\"metadata\":{\"name\":\"node2\"}");
}

static void two_documents(const char *root)
{
	put(root, "kubelet/nodes.v1.core/node3", NODE("node3") NODE("node3"));
}

static void not_an_object(const char *root)
{
	put(root, "kubelet/nodes.v1.core/node6", "[\"node6\"]");
}

static void name_mismatch(const char *root)
{
	put(root, "kubelet/pods.v1.core/default/web-2", POD("default", "web-3"));
}

static void name_missing(const char *root)
{
	put(root, "kubelet/nodes.v1.core/node5", "{\"kind\":\"Node\",\"metadata\":{}}");
}

static void namespace_mismatch(const char *root)
{
	put(root, "kubelet/pods.v1.core/kube-system/web-4", POD("default", "web-4"));
}

static void namespace_on_cluster_scoped(const char *root)
{
	put(root, "kubelet/nodes.v1.core/node4",
	    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"node4\",\"namespace\":\"default\"}}");
}

static void partial_namespace_mismatch(const char *root)
{
	put(root, "kubelet/partialobjectmetadatas.v1.meta.k8s.io/pods.v1.core/default/web-5",
	    PARTIAL("other", "web-5"));
}

static void yurthub_backup_file(const char *root)
{
	put(root, "kubelet/pods.v1.core/default/tmp_web-0", POD("default", "web-0"));
}

static void yurthub_backup_dir(const char *root)
{
	put(root, "kubelet/tmp_pods.v1.core/default/web-0", POD("default", "web-0"));
}

static void atomic_temp_in_views(const char *root)
{
	put(root, "_internal/yurthub-c/views/kubelet/.tmp.4242.0", "{\"views\":[]}");
}

static void atomic_temp_at_top(const char *root)
{
	put(root, ".tmp.4242.1", "{\"major\":\"1\"}");
}

static void staging_file(const char *root)
{
	put(root, "_internal/yurthub-c/staging/w17", POD("default", "web-0"));
}

static void staging_tree(const char *root)
{
	put(root, "_internal/yurthub-c/staging/r3/default/web-0", POD("default", "web-0"));
}

static void journal_record(const char *root)
{
	put(root, "_internal/yurthub-c/journal/j2", "{\"op\":\"replace\"}");
}

static void symlink_object(const char *root)
{
	put_symlink(root, "kubelet/pods.v1.core/default/web-9", "web-0");
}

static void symlink_component(const char *root)
{
	put_symlink(root, "evil", "/etc");
}

static void world_readable_object(const char *root)
{
	set_mode(root, "kubelet/pods.v1.core/default/web-0", 0644);
}

static void group_writable_object(const char *root)
{
	put_mode(root, "kubelet/nodes.v1.core/node7", NODE("node7"), 0620);
}

static void fifo_object(const char *root)
{
	put_fifo(root, "kubelet/pods.v1.core/default/pipe");
}

static void file_in_component(const char *root)
{
	put(root, "kubelet/stray", "x");
}

static void file_at_top(const char *root)
{
	put(root, "stray.txt", "x");
}

static void too_deep(const char *root)
{
	mkdir_p(root, "kubelet/pods.v1.core/default/sub");
}

static void too_deep_partial(const char *root)
{
	mkdir_p(root, "kubelet/partialobjectmetadatas.v1.meta.k8s.io/pods.v1.core/default/sub");
}

static void namespaces_subdir(const char *root)
{
	mkdir_p(root, "kubelet/namespaces.v1.core/kube-system");
}

static void bad_resource_dir(const char *root)
{
	mkdir_p(root, "kubelet/pods.v1");
}

static void bad_view_file(const char *root)
{
	put(root, "_internal/yurthub-c/views/kubelet/services.v1.core", "garbage");
}

static void bad_cluster_info(const char *root)
{
	put(root, "version", "{\"major\":");
}

static const struct damage DAMAGES[] = {
    {bad_json, "kubelet/nodes.v1.core/node2: not a single JSON object", 1},
    {two_documents, "kubelet/nodes.v1.core/node3: not a single JSON object", 1},
    {not_an_object, "kubelet/nodes.v1.core/node6: not a single JSON object", 1},
    {name_mismatch,
     "kubelet/pods.v1.core/default/web-2: metadata.name \"web-3\" differs from the file name", 1},
    {name_missing, "kubelet/nodes.v1.core/node5: metadata.name missing", 1},
    {namespace_mismatch,
     "kubelet/pods.v1.core/kube-system/web-4: metadata.namespace \"default\" differs from the "
     "namespace directory",
     1},
    {namespace_on_cluster_scoped,
     "kubelet/nodes.v1.core/node4: metadata.namespace \"default\" set on a cluster-scoped object",
     1},
    {partial_namespace_mismatch,
     "kubelet/partialobjectmetadatas.v1.meta.k8s.io/pods.v1.core/default/web-5: "
     "metadata.namespace \"other\" differs from the namespace directory",
     1},
    {yurthub_backup_file,
     "kubelet/pods.v1.core/default/tmp_web-0: leftover YurtHub backup of an interrupted write", 0},
    {yurthub_backup_dir,
     "kubelet/tmp_pods.v1.core: leftover YurtHub backup of an interrupted write", 0},
    {atomic_temp_in_views,
     "_internal/yurthub-c/views/kubelet/.tmp.4242.0: leftover temporary file of an interrupted "
     "write",
     0},
    {atomic_temp_at_top, ".tmp.4242.1: leftover temporary file of an interrupted write", 0},
    {symlink_object, "kubelet/pods.v1.core/default/web-9: symbolic link", 0},
    {symlink_component, "evil: symbolic link", 0},
    {world_readable_object, "kubelet/pods.v1.core/default/web-0: mode 0644, want 0600", 0},
    {group_writable_object, "kubelet/nodes.v1.core/node7: mode 0620, want 0600", 1},
    {fifo_object, "kubelet/pods.v1.core/default/pipe: neither a regular file nor a directory", 0},
    {file_in_component, "kubelet/stray: regular file where a directory is expected", 0},
    {file_at_top, "stray.txt: regular file where a directory is expected", 0},
    {too_deep, "kubelet/pods.v1.core/default/sub: directory nested deeper than the layout allows",
     0},
    {too_deep_partial,
     "kubelet/partialobjectmetadatas.v1.meta.k8s.io/pods.v1.core/default/sub: directory nested "
     "deeper than the layout allows",
     0},
    {namespaces_subdir,
     "kubelet/namespaces.v1.core/kube-system: directory nested deeper than the layout allows", 0},
    {bad_resource_dir, "kubelet/pods.v1: not a resource directory name", 0},
    {bad_view_file, "_internal/yurthub-c/views/kubelet/services.v1.core: view file does not decode",
     0},
    {bad_cluster_info, "version: cluster info is not valid JSON", 0},
};

#define N_DAMAGES (sizeof DAMAGES / sizeof DAMAGES[0])

/* Each damage alone, on a fresh clean tree: exactly its line, then the
 * summary, and status 1. */
static void test_verify_each_problem(void **state)
{
	for (size_t i = 0; i < N_DAMAGES; i++) {
		void *dir = NULL;
		assert_int_equal(make_tmpdir(&dir), 0);
		make_clean_tree(dir);
		DAMAGES[i].apply(dir);
		char *want = NULL;
		assert_true(asprintf(&want, "%s\nverify: %d objects, 1 problems\n", DAMAGES[i].line,
				     CLEAN_OBJECTS + DAMAGES[i].extra_objects) > 0);
		struct run r;
		run(&r, "verify", (const char *)dir, NULL);
		if (strcmp(r.out, want))
			print_error("damage %zu: got\n%s\nwant\n%s\n", i, r.out, want);
		expect(&r, 1, want, "");
		free(want);
		assert_int_equal(remove_tmpdir(&dir), 0);
	}
}

/* All damages at once: each reported on its own line. */
static void test_verify_all_problems(void **state)
{
	const char *dir = *state;
	int objects = CLEAN_OBJECTS;
	for (size_t i = 0; i < N_DAMAGES; i++) {
		DAMAGES[i].apply(dir);
		objects += DAMAGES[i].extra_objects;
	}
	struct run r;
	run(&r, "verify", dir, NULL);
	assert_int_equal(r.rc, 1);
	assert_string_equal(r.err, "");
	assert_int_equal(count_lines(r.out), N_DAMAGES + 1);
	for (size_t i = 0; i < N_DAMAGES; i++) {
		char *line = NULL;
		assert_true(asprintf(&line, "%s\n", DAMAGES[i].line) > 0);
		if (!strstr(r.out, line))
			print_error("missing: %s", line);
		assert_non_null(strstr(r.out, line));
		free(line);
	}
	char *summary = NULL;
	assert_true(asprintf(&summary, "verify: %d objects, %zu problems\n", objects, N_DAMAGES) >
		    0);
	size_t off = strlen(r.out) - strlen(summary);
	assert_string_equal(r.out + off, summary);
	free(summary);
	run_free(&r);
}

static void test_verify_missing_dir(void **state)
{
	char *missing = path_of(*state, "nope");
	struct run r;
	run(&r, "verify", missing, NULL);
	assert_int_equal(r.rc, 1);
	assert_string_equal(r.out, "");
	assert_int_equal(count_lines(r.err), 1);
	assert_non_null(strstr(r.err, "No such file or directory"));
	run_free(&r);
	free(missing);
}

/* ---- recover ---- */

#define WEB0_BACKUP                                                                                \
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web-0\","                \
	"\"namespace\":\"default\",\"resourceVersion\":\"90\"}}"

/* A write or replace in progress or cut short is not damage: recovery at
 * the hub's start settles it.  verify names each apart and counts it
 * apart; the status says there is no problem. */
static void test_verify_unsettled_apart(void **state)
{
	const char *dir = *state;
	staging_file(dir);
	staging_tree(dir);
	journal_record(dir);
	struct run r;
	run(&r, "verify", dir, NULL);
	expect(
	    &r, 0,
	    "_internal/yurthub-c/journal/j2: replace in progress, or cut short (finished or "
	    "rolled back at the hub's next start, or by `yurthub cache recover`)\n"
	    "_internal/yurthub-c/staging/r3: write or replace in progress, or cut short (settled "
	    "at the hub's next start, or by `yurthub cache recover`)\n"
	    "_internal/yurthub-c/staging/w17: write or replace in progress, or cut short (settled "
	    "at the hub's next start, or by `yurthub cache recover`)\n"
	    "verify: 9 objects, 0 problems, 3 writes or replaces in progress or cut short\n",
	    "");
}

/* A hub killed (-9) in the middle of a list: what it leaves is named as a
 * replace cut short, not as damage, and recovery leaves the committed
 * views whole. */
static void test_verify_replace_killed_midway(void **state)
{
	const char *dir = *state;
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		char *msg = NULL;
		struct store *s = disk_store_open(dir, 0, NULL, &msg);
		struct store_view v = {"coredns", {"", "v1", "pods"}, "", "", ""};
		struct store_replace *rep;
		if (!s || store_replace_begin(s, &v, &rep) != STORE_OK)
			_exit(2);
		for (int i = 0; i < 50; i++) {
			char name[16], *j = NULL;
			snprintf(name, sizeof name, "q%02d", i);
			if (asprintf(&j, POD("default", "%s"), name) < 0)
				_exit(2);
			struct store_item it = {"default", name, 100, j, strlen(j)};
			if (store_replace_add(rep, &it) != STORE_OK)
				_exit(2);
			free(j);
		}
		if (write(fds[1], "x", 1) != 1)
			_exit(3);
		for (;;)
			pause();
	}
	close(fds[1]);
	char c;
	ssize_t got = read(fds[0], &c, 1);
	close(fds[0]);
	assert_int_equal(kill(pid, SIGKILL), 0);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(got, 1);

	struct run r;
	run(&r, "verify", dir, NULL);
	assert_int_equal(r.rc, 0);
	assert_non_null(strstr(r.out, "_internal/yurthub-c/staging/"));
	assert_non_null(strstr(r.out, "write or replace in progress, or cut short"));
	assert_non_null(strstr(
	    r.out,
	    "verify: 9 objects, 0 problems, 1 writes or replaces in progress or cut short\n"));
	run_free(&r);
	run(&r, "recover", dir, NULL);
	assert_int_equal(r.rc, 0);
	run_free(&r);
	run(&r, "verify", dir, NULL);
	expect(&r, 0, "verify: 9 objects, 0 problems\n", "");
	run(&r, "ls", dir, "coredns", NULL);
	assert_int_equal(r.rc, 0);
	assert_null(strstr(r.out, "pods"));
	run_free(&r);
}

static void test_recover(void **state)
{
	const char *dir = *state;
	put(dir, "kubelet/pods.v1.core/default/tmp_web-0", WEB0_BACKUP);
	put(dir, "_internal/yurthub-c/staging/w5", "x");
	put(dir, "_internal/yurthub-c/staging/r2/default/web-0", POD("default", "web-0"));
	put(dir, "_internal/yurthub-c/journal/j1", "{}");
	put(dir, ".tmp.77.0", "{}");
	struct run r;
	run(&r, "verify", dir, NULL);
	assert_int_equal(r.rc, 1);
	run_free(&r);

	run(&r, "recover", dir, NULL);
	expect(&r, 0,
	       "recover: 1 YurtHub backups restored, 0 replaces finished, 1 replaces rolled back, "
	       "2 staging entries removed\n",
	       "");
	run(&r, "verify", dir, NULL);
	expect(&r, 0, "verify: 9 objects, 0 problems\n", "");
	/* YurtHub's backup is what it would have read. */
	run(&r, "get", dir, "kubelet", "pods.v1.core", "default", "web-0", NULL);
	expect(&r, 0, WEB0_BACKUP "\n", "");
	/* Nothing left to do the second time. */
	run(&r, "recover", dir, NULL);
	expect(&r, 0,
	       "recover: 0 YurtHub backups restored, 0 replaces finished, 0 replaces rolled back, "
	       "0 staging entries removed\n",
	       "");
}

static void test_recover_locked(void **state)
{
	const char *dir = *state;
	char *msg = NULL;
	struct store *hub = disk_store_open(dir, 0, NULL, &msg);
	assert_non_null(hub);
	assert_null(msg);
	struct run r;
	run(&r, "recover", dir, NULL);
	assert_int_equal(r.rc, 1);
	assert_string_equal(r.out, "");
	assert_int_equal(count_lines(r.err), 1);
	assert_non_null(strstr(r.err, "yurthub cache recover: "));
	assert_non_null(strstr(r.err, "in use by another yurthub"));
	run_free(&r);
	/* Reads work while the hub holds the lock. */
	run(&r, "ls", dir, "kubelet", "nodes.v1.core", NULL);
	expect(&r, 0, "node1\n", "");
	store_close(hub);
}

static void test_recover_missing_dir(void **state)
{
	char *missing = path_of(*state, "nope");
	struct run r;
	run(&r, "recover", missing, NULL);
	assert_int_equal(r.rc, 1);
	assert_int_equal(count_lines(r.err), 1);
	run_free(&r);
	assert_false(exists(*state, "nope")); /* not created */
	free(missing);
}

/* ---- usage ---- */

static void test_help(void **state)
{
	struct run r;
	run(&r, "--help", NULL);
	assert_int_equal(r.rc, 0);
	assert_non_null(strstr(r.out, "usage: yurthub cache"));
	assert_string_equal(r.err, "");
	run_free(&r);
	run(&r, "-h", NULL);
	assert_int_equal(r.rc, 0);
	assert_non_null(strstr(r.out, "verify DIR"));
	run_free(&r);
	run(&r, "ls", "-h", NULL);
	assert_int_equal(r.rc, 0);
	run_free(&r);
	run(&r, NULL);
	assert_int_equal(r.rc, 2);
	assert_non_null(strstr(r.out, "usage: yurthub cache"));
	run_free(&r);
}

static void test_usage_errors(void **state)
{
	const char *dir = *state;
	struct run r;
	run(&r, "frobnicate", dir, NULL);
	expect_usage_error(&r, "unknown command 'frobnicate'");
	run(&r, "ls", NULL);
	expect_usage_error(&r, "ls: wrong number of arguments");
	run(&r, "ls", dir, "kubelet", "pods.v1.core", "default", "extra", NULL);
	expect_usage_error(&r, "ls: wrong number of arguments");
	run(&r, "get", dir, "kubelet", "pods.v1.core", NULL);
	expect_usage_error(&r, "get: wrong number of arguments");
	run(&r, "views", dir, "kubelet", NULL);
	expect_usage_error(&r, "views: wrong number of arguments");
	run(&r, "verify", NULL);
	expect_usage_error(&r, "verify: wrong number of arguments");
	run(&r, "recover", dir, dir, NULL);
	expect_usage_error(&r, "recover: wrong number of arguments");
	run(&r, "ls", "", NULL);
	expect_usage_error(&r, "argument 1 is empty");
	run(&r, "ls", dir, "kubelet", "pods.v1", NULL);
	expect_usage_error(&r, "'pods.v1' is not RESOURCE.VERSION.GROUP");
	run(&r, "get", dir, "kubelet", "Pods..core", "default", "web-0", NULL);
	expect_usage_error(&r, "'Pods..core' is not RESOURCE.VERSION.GROUP");
	run(&r, "views", dir, "kubelet", "a.b", NULL);
	expect_usage_error(&r, "'a.b' is not RESOURCE.VERSION.GROUP");
	run(&r, "ls", dir, "../etc", NULL);
	expect_usage_error(&r, "'../etc' is not a valid component name");
	run(&r, "ls", dir, "kubelet", "pods.v1.core", "..", NULL);
	expect_usage_error(&r, "'..' is not a valid namespace");
	run(&r, "get", dir, "kubelet", "pods.v1.core", "default", "..", NULL);
	expect_usage_error(&r, "invalid name");
	run(&r, "get", dir, "kubelet", "pods.v1.core", "..", "web-0", NULL);
	expect_usage_error(&r, "invalid name");
	/* Nothing was created by any of it. */
	assert_false(exists(dir, "_internal/yurthub-c"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_ls_components, clean_tree_setup, remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_ls_resources, clean_tree_setup, remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_ls_objects, clean_tree_setup, remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_ls_namespace, clean_tree_setup, remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_ls_missing_resource, clean_tree_setup,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_get_namespaced, clean_tree_setup, remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_get_cluster_scoped, clean_tree_setup,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_get_missing, clean_tree_setup, remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_views, clean_tree_setup, remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_views_never_listed, clean_tree_setup,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_legacy_layout, legacy_tree_setup, remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_reads_do_not_write, clean_tree_setup,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_verify_clean, clean_tree_setup, remove_tmpdir),
	    cmocka_unit_test(test_verify_each_problem),
	    cmocka_unit_test_setup_teardown(test_verify_all_problems, clean_tree_setup,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_verify_missing_dir, make_tmpdir, remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_verify_unsettled_apart, clean_tree_setup,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_verify_replace_killed_midway, clean_tree_setup,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_recover, clean_tree_setup, remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_recover_locked, clean_tree_setup, remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_recover_missing_dir, make_tmpdir, remove_tmpdir),
	    cmocka_unit_test(test_help),
	    cmocka_unit_test_setup_teardown(test_usage_errors, make_tmpdir, remove_tmpdir),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
