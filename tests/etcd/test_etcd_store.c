/*
 * test_etcd_store.c - the etcd store beyond the shared contract: one test
 * for each defect of the Go YurtHub's etcd cache that applies here
 * (marked "YurtHub defect"), the key layout as etcdctl sees it, sharing between
 * nodes and components, tombstones, a 10,000-object replace under etcd's
 * default limits, and etcd going away.  One real etcd serves the file;
 * each test has its own --etcd-prefix.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "etcd_check.h"
#include "etcd_proc.h"
#include "kube/meta.h"
#include "storage/etcd.h"
#include "storage/view.h"
#include "testutil.h"

static struct etcd_proc proc;
static struct etcd_client *raw;
static int seq;

struct fx {
	char prefix[64];
	struct store *a; /* node-a */
};

static struct store *open_node(const char *prefix, const char *node)
{
	const char *eps[] = {proc.endpoint};
	struct etcd_store_config cfg = {eps, 1, NULL, NULL, NULL, prefix, node, 3000};
	char *err = NULL;
	struct store *s = etcd_store_open(&cfg, &err);
	if (!s)
		fprintf(stderr, "open: %s\n", err ? err : "?");
	free(err);
	return s;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	snprintf(f->prefix, sizeof f->prefix, "/t%d/registry", ++seq);
	f->a = open_node(f->prefix, "node-a");
	*state = f;
	return f->a ? 0 : -1;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	store_close(f->a);
	free(f);
	return 0;
}

static void assert_records_ok(struct store *s)
{
	struct buf report = BUF_INIT;
	int n = check_records(s, &report);
	if (n)
		fprintf(stderr, "record problems:\n%s", buf_cstr(&report));
	buf_free(&report);
	assert_int_equal(n, 0);
}

/* ---- helpers: objects and views of any resource ---- */

static struct store_key key_res(struct store *s, const char *comp, const char *group,
				const char *res, const char *ns, const char *name)
{
	struct store_key_info info = {comp, group, "v1", res, ns, name};
	struct store_key k;
	assert_int_equal(store_key_build(s, &info, &k), STORE_OK);
	return k;
}

static char *obj(const char *kind, const char *ns, const char *name, uint64_t rv)
{
	char *j = NULL;
	assert_true(asprintf(&j,
			     "{\"kind\":\"%s\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"%s\","
			     "\"namespace\":\"%s\",\"resourceVersion\":\"%llu\"}}",
			     kind, name, ns, (unsigned long long)rv) > 0);
	return j;
}

static void create_res(struct store *s, const char *comp, const char *group, const char *res,
		       const char *ns, const char *name, uint64_t rv)
{
	struct store_key k = key_res(s, comp, group, res, ns, name);
	char *j = obj("X", ns, name, rv);
	assert_int_equal(store_create(s, &k, j, strlen(j)), STORE_OK);
	free(j);
	store_key_free(&k);
}

static uint64_t rv_of(struct store *s, const char *res, const char *ns, const char *name)
{
	struct store_key k = key_res(s, "kubelet", "", res, ns, name);
	struct buf b = BUF_INIT;
	uint64_t rv = 0;
	if (store_get(s, &k, &b) == STORE_OK)
		assert_int_equal(kube_meta_rv(b.data, b.len, &rv), 0);
	buf_free(&b);
	store_key_free(&k);
	return rv;
}

/* Replace a view of pods with "ns/name@rv ..." (rv optional: 1). */
static enum store_err replace_pods(struct store *s, const char *comp, const char *view_ns,
				   const char *label_sel, uint64_t list_rv, const char *items)
{
	struct store_view v = {comp, {"", "v1", "pods"}, view_ns, label_sel, ""};
	struct store_replace *r;
	enum store_err e = store_replace_begin(s, &v, &r);
	if (e != STORE_OK)
		return e;
	char *copy = strdup(items);
	char *save = NULL;
	for (char *t = strtok_r(copy, " ", &save); t && e == STORE_OK;
	     t = strtok_r(NULL, " ", &save)) {
		char ns[128] = "", name[128] = "";
		unsigned long long rv = 1;
		char *at = strchr(t, '@');
		if (at) {
			rv = strtoull(at + 1, NULL, 10);
			*at = '\0';
		}
		char *slash = strchr(t, '/');
		assert_non_null(slash);
		snprintf(ns, sizeof ns, "%.*s", (int)(slash - t), t);
		snprintf(name, sizeof name, "%s", slash + 1);
		char *j = test_pod_json(ns, name, rv, "n1", 400);
		struct store_item it = {ns, name, rv, j, strlen(j)};
		e = store_replace_add(r, &it);
		free(j);
	}
	free(copy);
	if (e != STORE_OK) {
		store_replace_abort(r);
		return e;
	}
	return store_replace_commit(r, list_rv);
}

static int add_name(void *ctx, const struct store_key *k, const char *data, size_t len)
{
	(void)data;
	(void)len;
	struct buf *b = ctx;
	buf_printf(b, "%s%s%s%s", b->len ? " " : "", k->namespace, *k->namespace ? "/" : "",
		   k->name);
	return 0;
}

/* "ns/name ..." that comp's list of a resource gives, in order */
static char *listed(struct store *s, const char *comp, const char *group, const char *res,
		    const char *ns)
{
	struct store_key root = key_res(s, comp, group, res, ns, "");
	struct buf b = BUF_INIT;
	buf_append_str(&b, "");
	enum store_err e = store_list(s, &root, add_name, &b);
	store_key_free(&root);
	if (e != STORE_OK) {
		buf_free(&b);
		return strdup(e == STORE_NOT_FOUND ? "<not found>" : "<error>");
	}
	return buf_steal(&b);
}

#define assert_listed(s, comp, res, ns, want)                                                      \
	do {                                                                                       \
		char *got_ = listed(s, comp, "", res, ns);                                         \
		assert_string_equal(got_, want);                                                   \
		free(got_);                                                                        \
	} while (0)

/* The pods objects in etcd, "ns/name ..." */
static char *pods_in_etcd(const char *prefix)
{
	char p[128];
	snprintf(p, sizeof p, "%s/pods/", prefix);
	return check_keys(raw, p, strlen(p));
}

#define assert_pods_in_etcd(prefix, want)                                                          \
	do {                                                                                       \
		char *got_ = pods_in_etcd(prefix);                                                 \
		assert_string_equal(got_, want);                                                   \
		free(got_);                                                                        \
	} while (0)

/* ---- YurtHub defect: relisting deletes exactly what vanished, every time ---- */

static void test_relist_second_and_third_time(void **state)
{
	struct fx *f = *state;
	assert_int_equal(replace_pods(f->a, "kubelet", "", "", 10, "a/p1 a/p2 b/p3"), STORE_OK);
	assert_pods_in_etcd(f->prefix, "a/p1 a/p2 b/p3");
	assert_int_equal(replace_pods(f->a, "kubelet", "", "", 20, "a/p2 b/p3 b/p4@15"), STORE_OK);
	assert_pods_in_etcd(f->prefix, "a/p2 b/p3 b/p4");
	assert_listed(f->a, "kubelet", "pods", "", "a/p2 b/p3 b/p4");
	assert_records_ok(f->a);
	/* across a restart of the store and of etcd itself */
	store_close(f->a);
	assert_int_equal(etcd_proc_restart(&proc), 0);
	f->a = open_node(f->prefix, "node-a");
	assert_non_null(f->a);
	assert_int_equal(replace_pods(f->a, "kubelet", "", "", 30, "a/p1@25 b/p4@15 c/p5@26"),
			 STORE_OK);
	assert_pods_in_etcd(f->prefix, "a/p1 b/p4 c/p5");
	assert_listed(f->a, "kubelet", "pods", "", "a/p1 b/p4 c/p5");
	assert_records_ok(f->a);
	/* the same list again writes nothing */
	struct etcd_store_stats before, after;
	etcd_store_stats(f->a, &before);
	assert_int_equal(replace_pods(f->a, "kubelet", "", "", 30, "a/p1@25 b/p4@15 c/p5@26"),
			 STORE_OK);
	etcd_store_stats(f->a, &after);
	assert_int_equal(after.txns, before.txns + 1); /* only the view set's rv */
}

static void test_namespaced_replace_leaves_other_namespaces(void **state)
{
	struct fx *f = *state;
	assert_int_equal(replace_pods(f->a, "kubelet", "a", "", 10, "a/x"), STORE_OK);
	create_res(f->a, "kubelet", "", "pods", "ab", "y", 3);
	create_res(f->a, "kubelet", "", "pods", "b", "z", 4);
	/* a view of namespace "a" relists empty: "ab" (same prefix) and "b" stay */
	assert_int_equal(replace_pods(f->a, "kubelet", "a", "", 11, ""), STORE_OK);
	assert_pods_in_etcd(f->prefix, "ab/y b/z");
	assert_listed(f->a, "kubelet", "pods", "a", "");
	assert_listed(f->a, "kubelet", "pods", "", "ab/y b/z");
	assert_records_ok(f->a);
}

/* ---- YurtHub defect: a failed Txn leaves no ownership behind ---- */

static void test_failed_txn_no_phantom_ownership(void **state)
{
	struct fx *f = *state;
	assert_int_equal(replace_pods(f->a, "kubelet", "", "", 10, "a/small"), STORE_OK);
	/* a list whose second object etcd refuses (over --max-request-bytes) */
	struct store_view v = {"kubelet", {"", "v1", "pods"}, "", "", ""};
	struct store_replace *r;
	assert_int_equal(store_replace_begin(f->a, &v, &r), STORE_OK);
	char *ok = test_pod_json("a", "fine", 12, "n1", 2000);
	char *huge = test_pod_json("a", "huge", 13, "n1", 2u << 20);
	struct store_item i1 = {"a", "fine", 12, ok, strlen(ok)};
	struct store_item i2 = {"a", "huge", 13, huge, strlen(huge)};
	assert_int_equal(store_replace_add(r, &i1), STORE_OK);
	enum store_err e = store_replace_add(r, &i2); /* flushes: over ER_TXN_BYTES */
	if (e == STORE_OK)
		e = store_replace_commit(r, 20);
	else
		store_replace_abort(r);
	assert_int_equal(e, STORE_IO);
	free(ok);
	free(huge);
	/* nothing claims the refused object; the view was not recorded as listed at 20 */
	struct store_gvr g = {"", "v1", "pods"};
	struct store_view_state st;
	assert_int_equal(store_get_view(f->a, &v, &st), STORE_OK);
	assert_int_equal(st.rv, 10);
	store_view_state_free(&st);
	assert_int_equal(rv_of(f->a, "pods", "a", "huge"), 0);
	assert_records_ok(f->a);
	char hk[256];
	snprintf(hk, sizeof hk, "/yurthub%s/h/node-a/kubelet%s/pods/a/huge", f->prefix, f->prefix);
	assert_int_equal(check_count(raw, hk), 0);
	(void)g;
}

static void test_etcd_down_fails_fast_and_recovers(void **state)
{
	struct fx *f = *state;
	assert_int_equal(replace_pods(f->a, "kubelet", "", "", 10, "a/p1 a/p2"), STORE_OK);
	etcd_proc_halt(&proc);
	/* every call says the store is unavailable; half-done work claims nothing */
	struct store_key k = key_res(f->a, "kubelet", "", "pods", "a", "p3");
	char *j = obj("Pod", "a", "p3", 11);
	assert_int_equal(store_create(f->a, &k, j, strlen(j)), STORE_UNAVAILABLE);
	struct buf b = BUF_INIT;
	assert_int_equal(store_get(f->a, &k, &b), STORE_UNAVAILABLE);
	assert_int_equal(replace_pods(f->a, "kubelet", "", "", 12, "a/p1 a/p3"), STORE_UNAVAILABLE);
	assert_int_equal(store_delete_component(f->a, "kubelet"), STORE_UNAVAILABLE);
	assert_int_equal(etcd_proc_restart(&proc), 0);
	/* the same store handle works again, without reopening */
	assert_int_equal(store_create(f->a, &k, j, strlen(j)), STORE_OK);
	assert_listed(f->a, "kubelet", "pods", "", "a/p1 a/p2 a/p3");
	assert_records_ok(f->a);
	free(j);
	buf_free(&b);
	store_key_free(&k);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void test_reconnects_leak_no_descriptors(void **state)
{
	struct fx *f = *state;
	struct store_key k = key_res(f->a, "kubelet", "", "pods", "a", "p");
	struct buf b = BUF_INIT;
	assert_int_equal(store_get(f->a, &k, &b), STORE_NOT_FOUND);
	int fds = count_fds();
	for (int i = 0; i < 4; i++) {
		etcd_proc_halt(&proc);
		for (int j = 0; j < 5; j++)
			assert_int_equal(store_get(f->a, &k, &b), STORE_UNAVAILABLE);
		assert_int_equal(etcd_proc_restart(&proc), 0);
		assert_int_equal(store_get(f->a, &k, &b), STORE_NOT_FOUND);
	}
	/* connections are reused, not piled up (leaks are ASan's to find) */
	assert_true(count_fds() <= fds + 2);
	buf_free(&b);
	store_key_free(&k);
}

/* ---- etcd killed under a writer ---- */

struct busy_writer {
	struct store *s;
	atomic_bool stop;
	int rounds, failures;
};

static void *busy_writer_main(void *arg)
{
	struct busy_writer *w = arg;
	unsigned seed = 7;
	uint64_t rv = 1000;
	while (!atomic_load(&w->stop)) {
		struct buf items = BUF_INIT;
		for (int i = 0; i < 150; i++)
			if (rand_r(&seed) % 3)
				buf_printf(&items, "%sk/p%03d@%llu", items.len ? " " : "", i,
					   (unsigned long long)rv);
		rv++;
		if (replace_pods(w->s, "kubelet", "", "", rv, buf_cstr(&items)) != STORE_OK)
			w->failures++;
		w->rounds++;
		buf_free(&items);
	}
	return NULL;
}

static void test_etcd_killed_during_writes(void **state)
{
	struct fx *f = *state;
	struct busy_writer w = {f->a, false, 0, 0};
	/* warm up: a list big enough for the writer threads (each takes a
	 * connection that the client then keeps for reuse) */
	struct buf warm = BUF_INIT;
	for (int i = 0; i < 120; i++)
		buf_printf(&warm, "%sk/p%03d@5", warm.len ? " " : "", i);
	assert_int_equal(replace_pods(f->a, "kubelet", "", "", 10, warm.data), STORE_OK);
	buf_free(&warm);
	int fds = count_fds();
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, busy_writer_main, &w), 0);
	unsigned seed = 11;
	for (int cycle = 0; cycle < 4; cycle++) {
		struct timespec ts = {0, (long)(100 + rand_r(&seed) % 400) * 1000000L};
		nanosleep(&ts, NULL);
		kill(proc.pid, SIGKILL); /* no warning for etcd: mid-Txn */
		etcd_proc_halt(&proc);
		assert_int_equal(etcd_proc_restart(&proc), 0);
	}
	atomic_store(&w.stop, true);
	pthread_join(th, NULL);
	printf("writer: %d replaces, %d failed while etcd was down\n", w.rounds, w.failures);
	assert_true(w.rounds > w.failures); /* it wrote between the kills */
	/* the next list converges, whatever the kills interrupted */
	assert_int_equal(
	    replace_pods(f->a, "kubelet", "", "", 1000000, "k/p001@999999 k/p149@999999"),
	    STORE_OK);
	assert_pods_in_etcd(f->prefix, "k/p001 k/p149");
	assert_records_ok(f->a);
	printf("descriptors: %d before, %d after\n", fds, count_fds());
	assert_true(count_fds() <= fds + 2);
}

/* ---- YurtHub defect: pods are not podtemplates; names with punctuation ---- */

static void test_pods_never_return_podtemplates(void **state)
{
	struct fx *f = *state;
	create_res(f->a, "kubelet", "", "pods", "a", "web", 1);
	create_res(f->a, "kubelet", "", "podtemplates", "a", "web", 2);
	create_res(f->a, "kubelet", "", "podtemplates", "a", "web-t", 3);
	assert_listed(f->a, "kubelet", "pods", "", "a/web");
	assert_listed(f->a, "kubelet", "pods", "a", "a/web");
	assert_listed(f->a, "kubelet", "podtemplates", "", "a/web a/web-t");
	/* a relist of pods never touches podtemplates */
	assert_int_equal(replace_pods(f->a, "kubelet", "", "", 10, ""), STORE_OK);
	assert_listed(f->a, "kubelet", "pods", "", "");
	assert_listed(f->a, "kubelet", "podtemplates", "", "a/web a/web-t");
	/* nor does deleting the pods collection */
	struct store_key root = key_res(f->a, "kubelet", "", "pods", "", "");
	assert_int_equal(store_delete(f->a, &root), STORE_OK);
	store_key_free(&root);
	assert_listed(f->a, "kubelet", "podtemplates", "", "a/web a/web-t");
	assert_records_ok(f->a);
}

static void test_names_with_punctuation(void **state)
{
	struct fx *f = *state;
	const char *names[] = {"a#b", "c,d", "e;f", "g:h", "i_j", "k%20l", "m+n"};
	struct buf want = BUF_INIT, items = BUF_INIT;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		buf_printf(&items, "%sns/%s@%zu", i ? " " : "", names[i], i + 1);
	assert_int_equal(replace_pods(f->a, "kubelet", "", "", 10, items.data), STORE_OK);
	/* key order, as etcd keeps them */
	const char *sorted[] = {"a#b", "c,d", "e;f", "g:h", "i_j", "k%20l", "m+n"};
	for (size_t i = 0; i < sizeof sorted / sizeof sorted[0]; i++)
		buf_printf(&want, "%sns/%s", i ? " " : "", sorted[i]);
	assert_pods_in_etcd(f->prefix, want.data);
	assert_listed(f->a, "kubelet", "pods", "", want.data);
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		assert_int_equal(rv_of(f->a, "pods", "ns", names[i]), i + 1);
	/* and each one goes when it vanishes */
	assert_int_equal(replace_pods(f->a, "kubelet", "", "", 20, "ns/g:h@4"), STORE_OK);
	assert_pods_in_etcd(f->prefix, "ns/g:h");
	/* component names may have : and @ too (the records separate on / and space) */
	assert_int_equal(replace_pods(f->a, "system:node@x", "", "", 30, "ns/g:h@4 ns/i_j@25"),
			 STORE_OK);
	assert_listed(f->a, "system:node@x", "pods", "", "ns/g:h ns/i_j");
	assert_int_equal(store_delete_component(f->a, "system:node@x"), STORE_OK);
	assert_pods_in_etcd(f->prefix, "ns/g:h");
	assert_records_ok(f->a);
	buf_free(&want);
	buf_free(&items);
}

/* An item a replace refuses (no key can name it, or not under the view's
 * namespace) leaves the session as it was: the cache skips it and the list
 * is stored with every other object (store.h, store_item_check). */
static void test_refused_item_leaves_the_session(void **state)
{
	struct fx *f = *state;
	struct store_view v = {"kubelet", {"", "v1", "pods"}, "a", "", ""};
	struct store_replace *r;
	assert_int_equal(store_replace_begin(f->a, &v, &r), STORE_OK);
	const struct {
		const char *ns, *name;
		enum store_err want;
	} items[] = {{"a", "p1", STORE_OK},	    {"a", "tmp_x", STORE_BAD_KEY},
		     {"a", "x/y", STORE_BAD_KEY},   {"a", "..", STORE_BAD_KEY},
		     {"a", "", STORE_BAD_KEY},	    {"b", "p9", STORE_INVALID_CONTENT},
		     {"a", "n\001", STORE_BAD_KEY}, {"a", "p2", STORE_OK}};
	for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
		char *j = test_pod_json(items[i].ns, items[i].name, 10 + i, "n1", 400);
		struct store_item it = {items[i].ns, items[i].name, 10 + i, j, strlen(j)};
		assert_int_equal(store_replace_add(r, &it), items[i].want);
		free(j);
	}
	assert_int_equal(store_replace_commit(r, 30), STORE_OK);
	assert_listed(f->a, "kubelet", "pods", "a", "a/p1 a/p2");
	assert_pods_in_etcd(f->prefix, "a/p1 a/p2");
	assert_int_equal(rv_of(f->a, "pods", "a", "p2"), 17);
	struct store_view_state st;
	assert_int_equal(store_get_view(f->a, &v, &st), STORE_OK);
	assert_int_equal(st.rv, 30);
	store_view_state_free(&st);
	assert_records_ok(f->a);
}

static void test_empty_list_is_empty(void **state)
{
	struct fx *f = *state;
	assert_listed(f->a, "kubelet", "pods", "", "<not found>");
	assert_int_equal(replace_pods(f->a, "kubelet", "", "", 10, ""), STORE_OK);
	assert_listed(f->a, "kubelet", "pods", "", "");
	assert_int_equal(replace_pods(f->a, "kubelet", "", "", 11, "a/p"), STORE_OK);
	assert_int_equal(replace_pods(f->a, "kubelet", "", "", 12, ""), STORE_OK);
	assert_listed(f->a, "kubelet", "pods", "", "");
	assert_pods_in_etcd(f->prefix, "");
	struct store_view v = {"kubelet", {"", "v1", "pods"}, "", "", ""};
	struct store_view_state st;
	assert_int_equal(store_get_view(f->a, &v, &st), STORE_OK);
	assert_int_equal(st.rv, 12);
	store_view_state_free(&st);
}

/* ---- kube-apiserver's layout, as etcdctl shows it ---- */

static char *etcdctl(const char *args)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "ETCDCTL_API=3 etcdctl --endpoints=%s %s 2>&1", proc.endpoint,
		 args);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	struct buf b = BUF_INIT;
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, p)) > 0)
		buf_append(&b, chunk, n);
	assert_int_equal(pclose(p), 0);
	buf_append_str(&b, "");
	return buf_steal(&b);
}

static void test_key_layout_with_etcdctl(void **state)
{
	struct fx *f = *state;
	create_res(f->a, "kubelet", "", "pods", "default", "web-0", 1);
	create_res(f->a, "kubelet", "", "nodes", "", "node-1", 2);
	create_res(f->a, "kube-proxy", "", "services", "default", "kubernetes", 3);
	create_res(f->a, "kube-proxy", "", "endpoints", "default", "kubernetes", 4);
	create_res(f->a, "kubelet", "apps.example.com", "widgets", "default", "w1", 5);
	create_res(f->a, "kubelet", "apps", "deployments", "default", "d1", 6);
	create_res(f->a, "kubelet", "", "namespaces", "", "default", 7);
	char args[256];
	snprintf(args, sizeof args, "get --prefix --keys-only %s/", f->prefix);
	char *out = etcdctl(args);
	char want[2048];
	snprintf(want, sizeof want,
		 "%1$s/apps.example.com/widgets/default/w1\n\n"
		 "%1$s/deployments/default/d1\n\n"
		 "%1$s/minions/node-1\n\n"
		 "%1$s/namespaces/default\n\n"
		 "%1$s/pods/default/web-0\n\n"
		 "%1$s/services/endpoints/default/kubernetes\n\n"
		 "%1$s/services/specs/default/kubernetes\n\n",
		 f->prefix);
	assert_string_equal(out, want);
	free(out);
	/* the value is the object's JSON, byte for byte */
	snprintf(args, sizeof args, "get --print-value-only %s/pods/default/web-0", f->prefix);
	out = etcdctl(args);
	char *j = obj("X", "default", "web-0", 1);
	assert_int_equal(strlen(out), strlen(j) + 1);
	assert_memory_equal(out, j, strlen(j));
	free(j);
	free(out);
}

/* ---- sharing: objects are the pool's, holdings are per component ---- */

static void test_shared_objects_survive_other_holders_cleanup(void **state)
{
	struct fx *f = *state;
	struct store *b = open_node(f->prefix, "node-b");
	assert_non_null(b);
	assert_int_equal(replace_pods(f->a, "kube-proxy", "", "", 10, "x/s1 x/s2"), STORE_OK);
	assert_int_equal(replace_pods(b, "kube-proxy", "", "", 10, "x/s1 x/s2"), STORE_OK);
	assert_int_equal(replace_pods(f->a, "coredns", "", "", 10, "x/s2"), STORE_OK);
	/* node-a's kube-proxy relists without s1: node-b still holds it */
	assert_int_equal(replace_pods(f->a, "kube-proxy", "", "", 20, "x/s2"), STORE_OK);
	assert_pods_in_etcd(f->prefix, "x/s1 x/s2");
	assert_listed(f->a, "kube-proxy", "pods", "", "x/s2");
	assert_listed(b, "kube-proxy", "pods", "", "x/s1 x/s2");
	/* node-b cleans up kube-proxy: s2 stays for node-a (two components) */
	assert_int_equal(store_delete_component(b, "kube-proxy"), STORE_OK);
	assert_pods_in_etcd(f->prefix, "x/s2");
	assert_int_equal(store_delete_component(f->a, "kube-proxy"), STORE_OK);
	assert_pods_in_etcd(f->prefix, "x/s2");
	assert_listed(f->a, "coredns", "pods", "", "x/s2");
	assert_int_equal(store_delete_component(f->a, "coredns"), STORE_OK);
	assert_pods_in_etcd(f->prefix, "");
	assert_records_ok(f->a);
	store_close(b);
}

static int collect_name(void *ctx, const char *name)
{
	struct buf *b = ctx;
	buf_printf(b, "%s%s", b->len ? " " : "", name);
	return 0;
}

static int key_count(void *ctx, const struct store_key *k)
{
	(void)k;
	(*(int *)ctx)++;
	return 0;
}

static void test_list_keys_and_components_are_per_node(void **state)
{
	struct fx *f = *state;
	struct store *b = open_node(f->prefix, "node-b");
	create_res(f->a, "kubelet", "", "pods", "a", "p1", 1);
	struct store_key k = key_res(b, "kubelet", "", "pods", "a", "p1");
	char *j = obj("Pod", "a", "p1", 1);
	assert_int_equal(store_create(b, &k, j, strlen(j)), STORE_EXISTS); /* shared object */
	assert_int_equal(store_update(b, &k, j, strlen(j), 1, NULL), STORE_OK);
	free(j);
	store_key_free(&k);
	create_res(b, "coredns", "", "pods", "a", "p2", 2);
	assert_listed(b, "kubelet", "pods", "", "a/p1");
	assert_listed(b, "coredns", "pods", "", "a/p2");
	assert_listed(f->a, "coredns", "pods", "", "<not found>");
	struct buf names = BUF_INIT;
	assert_int_equal(store_list_components(b, collect_name, &names), STORE_OK);
	assert_string_equal(names.data, "coredns kubelet");
	buf_reset(&names);
	assert_int_equal(store_list_components(f->a, collect_name, &names), STORE_OK);
	assert_string_equal(names.data, "kubelet");
	buf_free(&names);
	struct store_gvr g = {"", "v1", "pods"};
	assert_int_equal(store_list_keys(f->a, "coredns", &g, key_count, &(int){0}),
			 STORE_NOT_FOUND);
	assert_records_ok(f->a);
	store_close(b);
}

/* ---- tombstones: a copy older than a deletion does not come back ---- */

static void test_stale_list_does_not_resurrect(void **state)
{
	struct fx *f = *state;
	struct store *b = open_node(f->prefix, "node-b");
	assert_int_equal(replace_pods(f->a, "kubelet", "", "", 10, "a/p1@5 a/p2@6"), STORE_OK);
	/* deleted in the cloud at 15: node-a's list at 20 drops it */
	assert_int_equal(replace_pods(f->a, "kubelet", "", "", 20, "a/p2@6"), STORE_OK);
	/* node-b's list, taken at 12 but slow to arrive, still has it */
	assert_int_equal(replace_pods(b, "kubelet", "", "", 12, "a/p1@5 a/p2@6"), STORE_OK);
	assert_pods_in_etcd(f->prefix, "a/p2");
	assert_listed(b, "kubelet", "pods", "", "a/p2");
	/* a new object of the same name (newer rv) is taken */
	assert_int_equal(replace_pods(b, "kubelet", "", "", 30, "a/p1@25 a/p2@6"), STORE_OK);
	assert_int_equal(rv_of(f->a, "pods", "a", "p1"), 25);
	/* single writes too: a stale create after a delete is refused */
	struct store_key k = key_res(f->a, "kubelet", "", "pods", "a", "p2");
	assert_int_equal(store_delete(f->a, &k), STORE_OK);
	assert_int_equal(rv_of(f->a, "pods", "a", "p2"), 6); /* node-b holds it still */
	assert_int_equal(store_delete_component(b, "kubelet"), STORE_OK);
	assert_int_equal(rv_of(f->a, "pods", "a", "p2"), 0);
	char *j = obj("Pod", "a", "p2", 6);
	assert_int_equal(store_create(f->a, &k, j, strlen(j)), STORE_CONFLICT);
	free(j);
	assert_records_ok(f->a);
	/* housekeeping removes old tombstones */
	char mk[256];
	snprintf(mk, sizeof mk, "/yurthub%s/m/", f->prefix);
	long before = check_count(raw, mk);
	assert_true(etcd_store_gc(f->a, 3600) >= 0);
	assert_int_equal(check_count(raw, mk), before);
	assert_true(etcd_store_gc(f->a, -1) >= 1);
	assert_true(check_count(raw, mk) < before);
	j = obj("Pod", "a", "p2", 6);
	assert_int_equal(store_create(f->a, &k, j, strlen(j)), STORE_OK);
	free(j);
	store_key_free(&k);
	assert_records_ok(f->a);
	store_close(b);
}

/* One labelled pod as the only item of a replace. */
static enum store_err replace_one(struct store *s, const char *comp, const char *sel,
				  uint64_t list_rv, const char *name, const char *app, uint64_t rv)
{
	struct store_view v = {comp, {"", "v1", "pods"}, "", sel, ""};
	struct store_replace *r;
	enum store_err e = store_replace_begin(s, &v, &r);
	if (e != STORE_OK)
		return e;
	if (name) {
		char *j = NULL;
		assert_true(
		    asprintf(&j,
			     "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"namespace\":"
			     "\"a\",\"resourceVersion\":\"%llu\",\"labels\":{\"app\":\"%s\"}}}",
			     name, (unsigned long long)rv, app) > 0);
		struct store_item it = {"a", name, rv, j, strlen(j)};
		e = store_replace_add(r, &it);
		free(j);
	}
	if (e != STORE_OK) {
		store_replace_abort(r);
		return e;
	}
	return store_replace_commit(r, list_rv);
}

static void test_object_leaving_a_filtered_view_lives_on(void **state)
{
	struct fx *f = *state;
	assert_int_equal(replace_one(f->a, "kubelet", "app=a", 85, "x", "a", 80), STORE_OK);
	/* relabelled at 90: kubelet's view no longer has it at 100 */
	assert_int_equal(replace_one(f->a, "kubelet", "app=a", 100, NULL, NULL, 0), STORE_OK);
	assert_int_equal(rv_of(f->a, "pods", "a", "x"), 0);
	/* coredns, whose view has it now, lists it at its rv 90 */
	assert_int_equal(replace_one(f->a, "coredns", "app=b", 110, "x", "b", 90), STORE_OK);
	assert_int_equal(rv_of(f->a, "pods", "a", "x"), 90);
	assert_records_ok(f->a);
}

/* The value of a raw key ("" when absent). */
static char *raw_get(const char *key)
{
	struct etcd_range_result r;
	assert_int_equal(etcd_range(raw, key, strlen(key), NULL, &r), ETCD_OK);
	char *v = strndup(r.n ? r.kvs[0].value : "", r.n ? r.kvs[0].value_len : 0);
	etcd_range_result_free(&r);
	return v;
}

static void raw_put(const char *key, const char *value)
{
	struct etcd_op put = {ETCD_OP_PUT, key, strlen(key), value, strlen(value), NULL, 0};
	struct etcd_txn t = {NULL, 0, &put, NULL, 1, 0};
	struct etcd_txn_result r;
	assert_int_equal(etcd_txn(raw, &t, &r), ETCD_OK);
	etcd_txn_result_free(&r);
}

/* The leak a review found with a real etcd: kubelet and coredns list
 * app=web pods; in the cloud one is relabelled app=moved, and kube-proxy's
 * unfiltered list rewrites the shared object.  kubelet's and coredns's
 * relists lack it: it left their views, whatever their selectors say of
 * today's copy, so their holdings go.  Deleted in the cloud and relisted
 * everywhere, nothing of it is left. */
static void test_relabelled_object_leaves_the_views_that_lost_it(void **state)
{
	struct fx *f = *state;
	char mkey[400], okey[200];
	snprintf(okey, sizeof okey, "%s/pods/a/x", f->prefix);
	snprintf(mkey, sizeof mkey, "/yurthub%s/m%s", f->prefix, okey);
	assert_int_equal(replace_one(f->a, "kubelet", "app=web", 10, "x", "web", 5), STORE_OK);
	assert_int_equal(replace_one(f->a, "coredns", "app=web", 10, "x", "web", 5), STORE_OK);
	assert_int_equal(replace_one(f->a, "kube-proxy", "", 20, "x", "moved", 15), STORE_OK);
	assert_records_ok(f->a);
	assert_int_equal(replace_one(f->a, "kubelet", "app=web", 21, NULL, NULL, 0), STORE_OK);
	assert_int_equal(replace_one(f->a, "coredns", "app=web", 21, NULL, NULL, 0), STORE_OK);
	char *m = raw_get(mkey);
	/* kube-proxy's copy at 15 stays, and so does its summary */
	const char *want = "00000000000000000015 node-a/kube-proxy @s";
	assert_int_equal(strncmp(m, want, strlen(want)), 0);
	assert_int_equal(strlen(m), strlen(want) + 16);
	free(m);
	assert_records_ok(f->a);
	/* deleted in the cloud at 30; every component relists */
	assert_int_equal(replace_one(f->a, "kube-proxy", "", 31, NULL, NULL, 0), STORE_OK);
	assert_int_equal(replace_one(f->a, "kubelet", "app=web", 31, NULL, NULL, 0), STORE_OK);
	assert_int_equal(replace_one(f->a, "coredns", "app=web", 31, NULL, NULL, 0), STORE_OK);
	char *o = raw_get(okey);
	assert_string_equal(o, "");
	free(o);
	assert_records_ok(f->a);
}

/* verify reports a holding that no membership explains, and reads an older
 * version's holding (no reasons) by the selectors of the holder's views. */
static void test_verify_reports_unexplained_holdings(void **state)
{
	struct fx *f = *state;
	char hkey[256], vkey[256];
	snprintf(hkey, sizeof hkey, "/yurthub%s/h/node-a/kubelet%s/pods/a/x", f->prefix, f->prefix);
	snprintf(vkey, sizeof vkey, "/yurthub%s/v/node-a/kubelet/pods.v1.core", f->prefix);
	assert_int_equal(replace_one(f->a, "kubelet", "app=a", 10, "x", "a", 5), STORE_OK);
	assert_records_ok(f->a);
	char *reasons = raw_get(hkey);
	assert_int_equal(strlen(reasons), VIEW_ID_LEN); /* one view: app=a */
	free(reasons);
	raw_put(hkey, "0123456789abcdef"); /* a view the component never had */
	struct buf report = BUF_INIT;
	assert_int_equal(check_records(f->a, &report), 1);
	assert_non_null(strstr(buf_cstr(&report), "no view's membership"));
	buf_reset(&report);
	raw_put(hkey, ""); /* an older version's record: app=a still matches */
	assert_int_equal(check_records(f->a, &report), 0);
	raw_put(vkey, "{\"views\":[]}"); /* ... unless the view is gone */
	assert_int_equal(check_records(f->a, &report), 1);
	buf_free(&report);
	/* the next list settles it */
	assert_int_equal(replace_one(f->a, "kubelet", "app=a", 12, "x", "a", 5), STORE_OK);
	assert_records_ok(f->a);
}

/* endpointslices v1 and v1beta1 share one etcd collection: one object,
 * held for the views of both versions; a filtered view of one version that
 * loses it leaves it to the other's, an unfiltered list without it proves
 * it gone for both */
static void test_two_versions_share_a_collection(void **state)
{
	struct fx *f = *state;
	const char *g = "discovery.k8s.io";
	struct store_view v1 = {"kube-proxy", {g, "v1", "endpointslices"}, "", "app=a", ""};
	struct store_view v1b = {"kube-proxy", {g, "v1beta1", "endpointslices"}, "", "", ""};
	char *ja = NULL;
	assert_true(asprintf(&ja, "{\"kind\":\"EndpointSlice\",\"metadata\":{\"name\":\"s1\","
				  "\"namespace\":\"x\",\"resourceVersion\":\"5\",\"labels\":"
				  "{\"app\":\"a\"}}}") > 0);
	struct store_item ita = {"x", "s1", 5, ja, strlen(ja)};
	assert_int_equal(store_replace_view(f->a, &v1, 10, &ita, 1), STORE_OK);
	assert_int_equal(store_replace_view(f->a, &v1b, 10, &ita, 1), STORE_OK);
	/* relabelled at 15, as the v1beta1 watch tells */
	char *j = obj("EndpointSlice", "x", "s1", 15);
	struct store_key k = key_res(f->a, "kube-proxy", g, "endpointslices", "x", "s1");
	assert_int_equal(store_view_event(f->a, &v1b, &k, STORE_EVENT_PUT, j, strlen(j), 15),
			 STORE_OK);
	assert_int_equal(store_replace_view(f->a, &v1, 20, NULL, 0), STORE_OK);
	char *got = listed(f->a, "kube-proxy", g, "endpointslices", "");
	assert_string_equal(got, "x/s1"); /* the v1beta1 view still has it */
	free(got);
	assert_records_ok(f->a);
	assert_int_equal(store_replace_view(f->a, &v1b, 20, NULL, 0), STORE_OK);
	got = listed(f->a, "kube-proxy", g, "endpointslices", "");
	assert_string_equal(got, ""); /* gone for both */
	free(got);
	store_key_free(&k);
	free(ja);
	free(j);
	j = obj("EndpointSlice", "x", "s1", 5);
	struct store_item it = {"x", "s1", 5, j, strlen(j)};
	/* a view of another collection is no such cover */
	struct store_view pods = {"kube-proxy", {"", "v1", "pods"}, "", "", ""};
	assert_int_equal(store_replace_view(f->a, &pods, 10, NULL, 0), STORE_OK);
	struct store_view v1n = {"kube-proxy", {g, "v1", "endpointslices"}, "x", "", ""};
	assert_int_equal(store_delete_component(f->a, "kube-proxy"), STORE_OK);
	assert_int_equal(store_replace_view(f->a, &v1n, 30, &it, 1), STORE_OK);
	assert_int_equal(store_replace_view(f->a, &pods, 31, NULL, 0), STORE_OK);
	assert_int_equal(store_replace_view(f->a, &v1n, 32, NULL, 0), STORE_OK);
	got = listed(f->a, "kube-proxy", g, "endpointslices", "");
	assert_string_equal(got, "");
	free(got);
	free(j);
	assert_records_ok(f->a);
}

/* How many kubelet pods an iteration with the field selector gives, and
 * how many read Txns it took to give them. */
static size_t iterate_field(struct store *s, const char *fs, unsigned long *txns)
{
	struct etcd_store_stats before, after;
	size_t n = 0;

	etcd_store_stats(s, &before);
	assert_int_equal(
	    test_iterate_selected(s, "kubelet", "pods", "", "", fs, true, NULL, &n, NULL),
	    STORE_OK);
	etcd_store_stats(s, &after);
	*txns = after.read_txns - before.read_txns;
	return n;
}

/* An offline list of one node's pods reads the S/m records, and of the
 * objects only those whose summary may match: 10 of 400 pods here.  A
 * record without a summary (an older version's) costs a read, never the
 * object's place in the list (the contract suite checks that no matching
 * object is left out). */
static void test_selector_reads_only_what_may_match(void **state)
{
	struct fx *f = *state;
	struct store_view v = {"kubelet", {"", "v1", "pods"}, "", "", ""};
	struct store_item items[400];
	char *data[400];
	unsigned long txns;

	for (int i = 0; i < 400; i++) {
		char name[32];
		snprintf(name, sizeof name, "p%03d", i);
		data[i] =
		    test_pod_json("ns", name, 10 + (uint64_t)i, i % 40 ? "edge-2" : "edge-1", 400);
		items[i] =
		    (struct store_item){"ns", data[i] ? strdup(name) : NULL, 10 + (uint64_t)i,
					data[i], data[i] ? strlen(data[i]) : 0};
		assert_non_null(items[i].name);
	}
	assert_int_equal(store_replace_view(f->a, &v, 500, items, 400), STORE_OK);
	size_t n = iterate_field(f->a, "spec.nodeName=edge-1", &txns);
	print_message("  edge-1: %zu objects given, %lu read Txns\n", n, txns);
	assert_true(n >= 10 && n <= 40); /* the 10, and the summaries' false positives */
	assert_int_equal(iterate_field(f->a, "", &txns), 400);

	/* p000 (on edge-1) and p001 lose their summaries, as an older
	 * version rewrites S/m records */
	for (int i = 0; i < 2; i++) {
		char mkey[256];
		snprintf(mkey, sizeof mkey, "/yurthub%s/m%s/pods/ns/p%03d", f->prefix, f->prefix,
			 i);
		char *val = raw_get(mkey);
		char *at = strstr(val, " @s");
		assert_non_null(at);
		*at = '\0';
		raw_put(mkey, val);
		free(val);
	}
	n = iterate_field(f->a, "spec.nodeName=edge-1", &txns);
	assert_true(n >= 11 && n <= 41);
	assert_records_ok(f->a);
	for (int i = 0; i < 400; i++) {
		free(data[i]);
		free((char *)items[i].name);
	}
}

/* an object written by someone else (a kube-apiserver on the same etcd):
 * no records beside it; the store still reads, updates and holds it */
static void test_object_written_by_someone_else(void **state)
{
	struct fx *f = *state;
	char key[256];
	snprintf(key, sizeof key, "%s/pods/a/foreign", f->prefix);
	char *j = obj("Pod", "a", "foreign", 7);
	struct etcd_op put = {ETCD_OP_PUT, key, strlen(key), j, strlen(j), NULL, 0};
	struct etcd_txn t = {NULL, 0, &put, NULL, 1, 0};
	struct etcd_txn_result r;
	assert_int_equal(etcd_txn(raw, &t, &r), ETCD_OK);
	etcd_txn_result_free(&r);
	assert_int_equal(rv_of(f->a, "pods", "a", "foreign"), 7);
	struct store_key k = key_res(f->a, "kubelet", "", "pods", "a", "foreign");
	assert_int_equal(store_create(f->a, &k, j, strlen(j)), STORE_EXISTS);
	free(j);
	j = obj("Pod", "a", "foreign", 9);
	assert_int_equal(store_update(f->a, &k, j, strlen(j), 9, NULL), STORE_OK);
	assert_int_equal(rv_of(f->a, "pods", "a", "foreign"), 9);
	assert_listed(f->a, "kubelet", "pods", "", "a/foreign");
	assert_records_ok(f->a);
	free(j);
	store_key_free(&k);
}

static void test_gc_drops_holdings_of_objects_deleted_behind_our_back(void **state)
{
	struct fx *f = *state;
	assert_int_equal(replace_pods(f->a, "kubelet", "", "", 10, "a/p1 a/p2"), STORE_OK);
	char key[256];
	snprintf(key, sizeof key, "%s/pods/a/p1", f->prefix);
	assert_int_equal(etcd_delete_range(raw, key, strlen(key), NULL, 0, NULL), ETCD_OK);
	assert_true(check_records(f->a, NULL) > 0);
	assert_true(etcd_store_gc(f->a, 3600) >= 1);
	assert_records_ok(f->a);
	assert_listed(f->a, "kubelet", "pods", "", "a/p2");
}

/* ---- size: 10,000 objects under etcd's default limits ---- */

static void test_replace_10k_objects(void **state)
{
	struct fx *f = *state;
	struct store_view v = {"kubelet", {"", "v1", "pods"}, "", "", ""};
	for (int round = 0; round < 2; round++) {
		struct store_replace *r;
		assert_int_equal(store_replace_begin(f->a, &v, &r), STORE_OK);
		for (int i = 0; i < 10000; i++) {
			char name[32];
			snprintf(name, sizeof name, "pod-%05d", i);
			/* the second round: a tenth changed, a tenth gone */
			if (round == 1 && i % 10 == 0)
				continue;
			uint64_t rv = 100 + (uint64_t)i + (round == 1 && i % 10 == 1 ? 20000 : 0);
			char *j = test_pod_json("load", name, rv, "n1", 2000 + (size_t)(i % 1000));
			struct store_item it = {"load", name, rv, j, strlen(j)};
			assert_int_equal(store_replace_add(r, &it), STORE_OK);
			free(j);
		}
		assert_int_equal(store_replace_commit(r, round ? 40000 : 20000), STORE_OK);
	}
	char p[128];
	snprintf(p, sizeof p, "%s/pods/load/", f->prefix);
	assert_int_equal(check_count(raw, p), 9000);
	assert_int_equal(rv_of(f->a, "pods", "load", "pod-00001"), 20101);
	assert_int_equal(rv_of(f->a, "pods", "load", "pod-00000"), 0);
	assert_records_ok(f->a);
	/* and the component's cleanup, 9,000 objects, under the same limits */
	assert_int_equal(store_delete_component(f->a, "kubelet"), STORE_OK);
	assert_int_equal(check_count(raw, p), 0);
	assert_records_ok(f->a);
}

static int group_setup(void **state)
{
	(void)state;
	if (etcd_proc_start(&proc) < 0)
		return -1;
	raw = check_client(proc.endpoint);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	etcd_client_free(raw);
	etcd_proc_stop(&proc);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_relist_second_and_third_time, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_namespaced_replace_leaves_other_namespaces, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_failed_txn_no_phantom_ownership, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_etcd_down_fails_fast_and_recovers, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_reconnects_leak_no_descriptors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_etcd_killed_during_writes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pods_never_return_podtemplates, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_names_with_punctuation, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_empty_list_is_empty, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refused_item_leaves_the_session, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_key_layout_with_etcdctl, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_shared_objects_survive_other_holders_cleanup,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_list_keys_and_components_are_per_node, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_stale_list_does_not_resurrect, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_object_leaving_a_filtered_view_lives_on, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_two_versions_share_a_collection, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_selector_reads_only_what_may_match, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_relabelled_object_leaves_the_views_that_lost_it,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_verify_reports_unexplained_holdings, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_object_written_by_someone_else, setup, teardown),
	    cmocka_unit_test_setup_teardown(
		test_gc_drops_holdings_of_objects_deleted_behind_our_back, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_replace_10k_objects, setup, teardown),
	};
	return cmocka_run_group_tests_name("etcd store", tests, group_setup, group_teardown);
}
