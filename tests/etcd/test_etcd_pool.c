/*
 * test_etcd_pool.c - two nodes sharing one etcd, relisting overlapping
 * views and applying watch events concurrently.
 *
 * A deterministic "cloud" gives, for any time t, which of N pods exist and
 * at which resourceVersion (the time of their last change).  Node A views
 * the pods labelled grp in (a,b), node B those in (b,c): the b pods are in
 * both.  Each node lists at a time taken from a shared clock when its list
 * starts, so a slow list can arrive after a newer one from the other node;
 * every third list is older still, as from a lagging cache.
 * A third thread reads every pod all along and checks that no pod's
 * resourceVersion ever goes back.  At the end both nodes list at the same
 * time T, and etcd must hold exactly the union of the two lists, at the
 * cloud's resourceVersions, with consistent records.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_check.h"
#include "etcd_proc.h"
#include "kube/meta.h"
#include "storage/etcd.h"
#include "testutil.h"

#define N_PODS 150
#define ROUNDS 40 /* relists per node */
#define EVENTS 6  /* watch events after each relist */
#define PREFIX "/pool/registry"

static struct etcd_proc proc;
static atomic_ulong clock_now = 50;
static atomic_bool running = true;

/* ---- the cloud ---- */

static bool toggles_at(int i, uint64_t t)
{
	return (t * 7 + (uint64_t)i * 13) % 23 == 0;
}

static bool modified_at(int i, uint64_t t)
{
	return (t * 5 + (uint64_t)i * 11) % 17 == 0;
}

/* Does pod i exist at t, and at which rv (its last change at or before t)? */
static bool cloud_state(int i, uint64_t t, uint64_t *rv)
{
	bool exists = true;
	*rv = 1;
	for (uint64_t u = 2; u <= t; u++) {
		if (toggles_at(i, u)) {
			exists = !exists;
			*rv = u;
		} else if (exists && modified_at(i, u)) {
			*rv = u;
		}
	}
	return exists;
}

static const char *group_of(int i)
{
	return (const char *[]){"a", "b", "c"}[i % 3];
}

static bool in_view(int i, const char *node)
{
	const char *g = group_of(i);
	return !strcmp(node, "node-a") ? strcmp(g, "c") != 0 : strcmp(g, "a") != 0;
}

static char *pod_json(int i, uint64_t rv)
{
	char *j = NULL;
	if (asprintf(
		&j,
		"{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"p%03d\","
		"\"namespace\":\"x\",\"resourceVersion\":\"%llu\",\"labels\":{\"grp\":\"%s\"}},"
		"\"spec\":{\"nodeName\":\"n\"}}",
		i, (unsigned long long)rv, group_of(i)) < 0)
		abort();
	return j;
}

/* ---- a node ---- */

struct node {
	const char *name;
	struct store *s;
	const char *selector;
	int errors;
	unsigned seed;
};

static struct store *open_node(const char *name)
{
	const char *eps[] = {proc.endpoint};
	struct etcd_store_config cfg = {eps, 1, NULL, NULL, NULL, PREFIX, name, 5000};
	char *err = NULL;
	struct store *s = etcd_store_open(&cfg, &err);
	free(err);
	return s;
}

static enum store_err relist(struct node *n, uint64_t t)
{
	struct store_view v = {"kubelet", {"", "v1", "pods"}, "", n->selector, ""};
	struct store_replace *r;
	enum store_err e = store_replace_begin(n->s, &v, &r);
	for (int i = 0; i < N_PODS && e == STORE_OK; i++) {
		uint64_t rv;
		if (!in_view(i, n->name) || !cloud_state(i, t, &rv))
			continue;
		char name[16];
		snprintf(name, sizeof name, "p%03d", i);
		char *j = pod_json(i, rv);
		struct store_item it = {"x", name, rv, j, strlen(j)};
		e = store_replace_add(r, &it);
		free(j);
	}
	if (e != STORE_OK) {
		if (r)
			store_replace_abort(r);
		return e;
	}
	return store_replace_commit(r, t);
}

/* A watch event for pod i at time t, as the cache layer applies it. */
static enum store_err event(struct node *n, int i, uint64_t t)
{
	char name[16];
	snprintf(name, sizeof name, "p%03d", i);
	struct store_key_info info = {"kubelet", "", "v1", "pods", "x", name};
	struct store_key k;
	enum store_err e = store_key_build(n->s, &info, &k);
	if (e != STORE_OK)
		return e;
	uint64_t rv;
	if (!cloud_state(i, t, &rv)) {
		e = store_delete(n->s, &k);
	} else {
		char *j = pod_json(i, rv);
		e = store_update(n->s, &k, j, strlen(j), rv, NULL);
		if (e == STORE_NOT_FOUND)
			e = store_create(n->s, &k, j, strlen(j));
		if (e == STORE_EXISTS || e == STORE_CONFLICT)
			e = STORE_OK; /* someone was faster, or it is newer already */
		free(j);
	}
	store_key_free(&k);
	return e;
}

static void *node_main(void *p)
{
	struct node *n = p;
	for (int round = 0; round < ROUNDS; round++) {
		/* every third list comes from a lagging cache: taken a while ago */
		uint64_t t = atomic_fetch_add(&clock_now, 1);
		if (round % 3 == 2)
			t -= (uint64_t)(rand_r(&n->seed) % 40);
		if (relist(n, t) != STORE_OK)
			n->errors++;
		for (int e = 0; e < EVENTS; e++) {
			int i = rand_r(&n->seed) % N_PODS;
			if (in_view(i, n->name) &&
			    event(n, i, atomic_fetch_add(&clock_now, 1)) != STORE_OK)
				n->errors++;
		}
	}
	return NULL;
}

/* ---- the reader that watches for regressions ---- */

struct reader {
	struct etcd_client *c;
	uint64_t seen[N_PODS];
	int regressions, reads;
};

static void *reader_main(void *p)
{
	struct reader *rd = p;
	const char *from = PREFIX "/pods/x/";
	struct buf end = BUF_INIT;
	etcd_prefix_end(from, strlen(from), &end);
	while (atomic_load(&running)) {
		struct etcd_range_opts o = {end.data, end.len, 0, 0, false, false};
		struct etcd_range_result r;
		if (etcd_range(rd->c, from, strlen(from), &o, &r) != ETCD_OK)
			continue;
		for (size_t k = 0; k < r.n; k++) {
			int i = atoi(r.kvs[k].key + strlen(from) + 1);
			uint64_t rv = 0;
			if (i < 0 || i >= N_PODS ||
			    kube_meta_rv(r.kvs[k].value, r.kvs[k].value_len, &rv))
				continue;
			if (rv < rd->seen[i]) {
				fprintf(stderr, "p%03d went back from rv %llu to %llu\n", i,
					(unsigned long long)rd->seen[i], (unsigned long long)rv);
				rd->regressions++;
			}
			rd->seen[i] = rv;
		}
		rd->reads++;
		etcd_range_result_free(&r);
	}
	buf_free(&end);
	return NULL;
}

static void test_two_nodes_overlapping_views(void **state)
{
	(void)state;
	struct node a = {"node-a", open_node("node-a"), "grp in (a,b)", 0, 1};
	struct node b = {"node-b", open_node("node-b"), "grp in (b,c)", 0, 2};
	assert_non_null(a.s);
	assert_non_null(b.s);
	struct reader rd = {check_client(proc.endpoint), {0}, 0, 0};
	pthread_t ta, tb, tr;
	assert_int_equal(pthread_create(&tr, NULL, reader_main, &rd), 0);
	assert_int_equal(pthread_create(&ta, NULL, node_main, &a), 0);
	assert_int_equal(pthread_create(&tb, NULL, node_main, &b), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);

	/* both list at the same time T */
	uint64_t t = atomic_fetch_add(&clock_now, 1);
	assert_int_equal(relist(&a, t), STORE_OK);
	assert_int_equal(relist(&b, t), STORE_OK);
	atomic_store(&running, false);
	pthread_join(tr, NULL);
	assert_int_equal(a.errors, 0);
	assert_int_equal(b.errors, 0);
	assert_int_equal(rd.regressions, 0);
	assert_true(rd.reads > 0);

	/* etcd holds the union of the final lists, at the cloud's rvs */
	struct buf want = BUF_INIT;
	buf_append_str(&want, "");
	for (int i = 0; i < N_PODS; i++) {
		uint64_t rv;
		if (cloud_state(i, t, &rv))
			buf_printf(&want, "%sx/p%03d", want.len ? " " : "", i);
	}
	char *got = check_keys(rd.c, PREFIX "/pods/", strlen(PREFIX "/pods/"));
	assert_string_equal(got, want.data);
	free(got);
	for (int i = 0; i < N_PODS; i++) {
		uint64_t rv, stored = 0;
		if (!cloud_state(i, t, &rv))
			continue;
		char key[64];
		snprintf(key, sizeof key, PREFIX "/pods/x/p%03d", i);
		struct etcd_range_result r;
		assert_int_equal(etcd_range(rd.c, key, strlen(key), NULL, &r), ETCD_OK);
		assert_int_equal(r.n, 1);
		assert_int_equal(kube_meta_rv(r.kvs[0].value, r.kvs[0].value_len, &stored), 0);
		assert_int_equal(stored, rv);
		etcd_range_result_free(&r);
	}
	struct buf report = BUF_INIT;
	int problems = check_records(a.s, &report);
	if (problems)
		fprintf(stderr, "%s", report.data);
	assert_int_equal(problems, 0);
	struct etcd_store_stats sa, sb;
	etcd_store_stats(a.s, &sa);
	etcd_store_stats(b.s, &sb);
	printf("clock %llu, reader passes %d, write txns %lu+%lu, retries %lu+%lu\n",
	       (unsigned long long)t, rd.reads, sa.txns, sb.txns, sa.retries, sb.retries);
	buf_free(&report);
	buf_free(&want);
	etcd_client_free(rd.c);
	store_close(a.s);
	store_close(b.s);
}

int main(void)
{
	if (etcd_proc_start(&proc) < 0)
		return 1;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_two_nodes_overlapping_views),
	};
	int rc = cmocka_run_group_tests_name("etcd pool", tests, NULL, NULL);
	etcd_proc_stop(&proc);
	return rc;
}
