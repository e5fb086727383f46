/*
 * test_local_changes.c - cache/local_changes: the journal of the hub's own
 * offline changes and the local resourceVersions they get, on a real disk
 * store in a temporary directory.
 *
 * Covered: a claim issues one above the newest rv seen (a cloud list's, or
 * issued before); an offline start reads the stored rvs of the resource
 * (objects and view list rvs) once; a claim of several copies of one object
 * journals each, and local_changes_since gives one entry per object and rv,
 * in rv order, by namespace and after an rv; is_local, settled and
 * local_changes_of; the journal, the last rv and the issued range surviving
 * a reopen (of the journal and of the store); a corrupt or odd journal read
 * as empty or in part; rv_issued over the range and with the cloud's rvs
 * inside it, and retired when the cloud used more of it than is kept; a
 * claim whose journal cannot be saved issuing nothing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/local_changes.h"
#include "storage/disk.h"
#include "testutil.h"
#include "util/buf.h"

#define JOURNAL "/yurthub/local-changes"

static const struct store_gvr PODS = {"", "v1", "pods"};
static const struct store_gvr SLICES = {"discovery.k8s.io", "v1", "endpointslices"};

struct fx {
	char dir[4096];
	struct store *s;
	struct local_changes *lc;
};

static struct store *open_store(const char *dir, int flags)
{
	char *err = NULL;
	struct store *s = disk_store_open(dir, flags, NULL, &err);
	if (!s) {
		fprintf(stderr, "open %s: %s\n", dir, err ? err : "?");
		free(err);
	}
	return s;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	if (!f || test_mkdtemp(f->dir, sizeof f->dir, "local-changes") < 0)
		return -1;
	f->s = open_store(f->dir, 0);
	if (!f->s)
		return -1;
	f->lc = local_changes_open(f->s);
	*state = f;
	return f->lc ? 0 : -1;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	local_changes_free(f->lc);
	store_close(f->s);
	test_rm_rf(f->dir);
	free(f);
	return 0;
}

/* ---- helpers ---- */

static struct store_key key_in(struct store *s, const struct store_gvr *g, const char *comp,
			       const char *ns, const char *name)
{
	struct store_key_info info = {comp, g->group, g->version, g->resource, ns, name};
	struct store_key k;
	assert_int_equal(store_key_build(s, &info, &k), STORE_OK);
	return k;
}

static struct store_key pod_key(struct store *s, const char *comp, const char *ns, const char *name)
{
	return key_in(s, &PODS, comp, ns, name);
}

/* Claim the pod ns/name held by the components named (NULL-terminated). */
static uint64_t claim_pod(struct fx *f, const char *ns, const char *name, ...)
{
	struct store_key keys[8];
	size_t n = 0;
	va_list ap;
	va_start(ap, name);
	for (const char *c; (c = va_arg(ap, const char *));) {
		assert_true(n < 8);
		keys[n++] = pod_key(f->s, c, ns, name);
	}
	va_end(ap);
	uint64_t rv = local_changes_claim(f->lc, keys, n);
	for (size_t i = 0; i < n; i++)
		store_key_free(&keys[i]);
	return rv;
}

static bool is_local_pod(struct local_changes *lc, struct store *s, const char *comp,
			 const char *ns, const char *name)
{
	struct store_key k = pod_key(s, comp, ns, name);
	bool local = local_changes_is_local(lc, &k);
	store_key_free(&k);
	return local;
}

static void settle_pod(struct local_changes *lc, struct store *s, const char *comp, const char *ns,
		       const char *name)
{
	struct store_key k = pod_key(s, comp, ns, name);
	local_changes_settled(lc, &k);
	store_key_free(&k);
}

static void store_pod(struct store *s, const char *comp, const char *ns, const char *name,
		      uint64_t rv)
{
	struct store_key k = pod_key(s, comp, ns, name);
	char *j = test_pod_json(ns, name, rv, "node-a", 600);
	assert_int_equal(store_create(s, &k, j, strlen(j)), STORE_OK);
	free(j);
	store_key_free(&k);
}

static void expect_change(const struct local_change *c, const char *ns, const char *name,
			  uint64_t rv)
{
	assert_string_equal(c->namespace, ns);
	assert_string_equal(c->name, name);
	assert_int_equal(c->rv, rv);
}

/* ---- issuing ---- */

static void test_claim_after_cloud_list(void **state)
{
	struct fx *f = *state;
	struct store_key k = pod_key(f->s, "kubelet", "default", "a");

	/* nothing journaled: every reader says so */
	assert_false(local_changes_is_local(f->lc, &k));
	assert_int_equal(local_changes_last_rv(f->lc, &PODS), 0);
	assert_false(local_changes_rv_issued(f->lc, 1));
	assert_int_equal(local_changes_claim(f->lc, &k, 0), 0); /* no keys: nothing */
	store_key_free(&k);

	local_changes_saw_cloud_rv(f->lc, 100, true);
	assert_int_equal(claim_pod(f, "default", "a", "kubelet", NULL), 101);
	assert_int_equal(claim_pod(f, "default", "b", "kubelet", NULL), 102);
	assert_int_equal(local_changes_last_rv(f->lc, &PODS), 102);
	assert_int_equal(local_changes_last_rv(f->lc, &SLICES), 0);

	/* an older cloud rv changes nothing; a newer one moves the next claim */
	local_changes_saw_cloud_rv(f->lc, 50, false);
	assert_int_equal(claim_pod(f, "default", "c", "kubelet", NULL), 103);
	local_changes_saw_cloud_rv(f->lc, 200, false);
	assert_int_equal(claim_pod(f, "default", "c", "kubelet", NULL), 201);
	assert_int_equal(local_changes_last_rv(f->lc, &PODS), 201);
}

/* Started offline: the first claim of a resource reads its stored rvs. */
static void test_offline_start_scans_store(void **state)
{
	struct fx *f = *state;
	store_pod(f->s, "kube-proxy", "default", "web", 500);
	store_pod(f->s, "kube-proxy", "default", "old", 30);

	assert_int_equal(claim_pod(f, "default", "web", "kube-proxy", NULL), 501);
	/* read once per resource and run: a later store write is the caller's */
	store_pod(f->s, "coredns", "default", "late", 900);
	assert_int_equal(claim_pod(f, "default", "web", "kube-proxy", NULL), 502);

	/* another resource, nothing stored: on from the newest rv known */
	struct store_key k = key_in(f->s, &SLICES, "kube-proxy", "default", "web-x1");
	assert_int_equal(local_changes_claim(f->lc, &k, 1), 503);
	assert_int_equal(local_changes_last_rv(f->lc, &SLICES), 503);
	assert_int_equal(local_changes_last_rv(f->lc, &PODS), 502);
	store_key_free(&k);
}

/* The scan takes in the rvs of the views' lists too, of every component. */
static void test_offline_start_scans_view_rvs(void **state)
{
	struct fx *f = *state;
	store_pod(f->s, "kubelet", "default", "web", 40);
	struct store_view v = {"kube-proxy", PODS, "", "", ""};
	assert_int_equal(store_replace_view(f->s, &v, 700, NULL, 0), STORE_OK);

	assert_int_equal(claim_pod(f, "default", "web", "kubelet", NULL), 701);
}

/* A cloud list this run says how far the rvs went: no scan. */
static void test_cloud_list_skips_scan(void **state)
{
	struct fx *f = *state;
	store_pod(f->s, "kubelet", "default", "web", 500);
	local_changes_saw_cloud_rv(f->lc, 300, true);
	assert_int_equal(claim_pod(f, "default", "web", "kubelet", NULL), 301);
}

/* ---- the journal ---- */

static void test_since_one_per_object(void **state)
{
	struct fx *f = *state;
	struct local_change *v = NULL;

	local_changes_saw_cloud_rv(f->lc, 100, true);
	assert_int_equal(claim_pod(f, "default", "a", "kubelet", "kube-proxy", NULL), 101);
	assert_int_equal(claim_pod(f, "kube-system", "b", "kubelet", NULL), 102);
	assert_int_equal(claim_pod(f, "default", "c", "kubelet", "kube-proxy", NULL), 103);

	/* both copies journaled */
	assert_true(is_local_pod(f->lc, f->s, "kubelet", "default", "a"));
	assert_true(is_local_pod(f->lc, f->s, "kube-proxy", "default", "a"));

	/* one entry per object and rv, in rv order */
	assert_int_equal(local_changes_since(f->lc, &PODS, "", 0, &v), 3);
	expect_change(&v[0], "default", "a", 101);
	expect_change(&v[1], "kube-system", "b", 102);
	expect_change(&v[2], "default", "c", 103);
	assert_string_equal(v[0].group, "");
	assert_string_equal(v[0].version, "v1");
	assert_string_equal(v[0].resource, "pods");
	assert_true(!strcmp(v[0].component, "kubelet") || !strcmp(v[0].component, "kube-proxy"));
	assert_string_equal(v[1].component, "kubelet");
	local_changes_list_free(v, 3);

	/* a namespace */
	assert_int_equal(local_changes_since(f->lc, &PODS, "default", 0, &v), 2);
	expect_change(&v[0], "default", "a", 101);
	expect_change(&v[1], "default", "c", 103);
	local_changes_list_free(v, 2);
	assert_int_equal(local_changes_since(f->lc, &PODS, "kube-system", 0, &v), 1);
	expect_change(&v[0], "kube-system", "b", 102);
	local_changes_list_free(v, 1);
	assert_int_equal(local_changes_since(f->lc, &PODS, "nowhere", 0, &v), 0);
	local_changes_list_free(v, 0);
	/* NULL namespace: all */
	assert_int_equal(local_changes_since(f->lc, &PODS, NULL, 0, &v), 3);
	local_changes_list_free(v, 3);

	/* only newer than after */
	assert_int_equal(local_changes_since(f->lc, &PODS, "", 101, &v), 2);
	expect_change(&v[0], "kube-system", "b", 102);
	expect_change(&v[1], "default", "c", 103);
	local_changes_list_free(v, 2);
	assert_int_equal(local_changes_since(f->lc, &PODS, "", 103, &v), 0);
	local_changes_list_free(v, 0);

	/* another resource has none */
	assert_int_equal(local_changes_since(f->lc, &SLICES, "", 0, &v), 0);
	local_changes_list_free(v, 0);
}

/* Two objects in one claim share the rv but stay two entries; one copy
 * changed again gives the object twice, at each rv. */
static void test_since_dedup_is_per_object(void **state)
{
	struct fx *f = *state;
	struct local_change *v = NULL;
	struct store_key keys[2] = {pod_key(f->s, "kubelet", "default", "x"),
				    pod_key(f->s, "kubelet", "default", "y")};

	local_changes_saw_cloud_rv(f->lc, 10, true);
	assert_int_equal(local_changes_claim(f->lc, keys, 2), 11);
	store_key_free(&keys[0]);
	store_key_free(&keys[1]);
	assert_int_equal(local_changes_since(f->lc, &PODS, "", 0, &v), 2);
	expect_change(&v[0], "default", "x", 11);
	expect_change(&v[1], "default", "y", 11);
	local_changes_list_free(v, 2);

	assert_int_equal(claim_pod(f, "default", "a", "kubelet", "kube-proxy", NULL), 12);
	assert_int_equal(claim_pod(f, "default", "a", "kubelet", NULL), 13);
	assert_int_equal(local_changes_since(f->lc, &PODS, "default", 11, &v), 2);
	expect_change(&v[0], "default", "a", 12);
	assert_string_equal(v[0].component, "kube-proxy");
	expect_change(&v[1], "default", "a", 13);
	assert_string_equal(v[1].component, "kubelet");
	local_changes_list_free(v, 2);
	assert_int_equal(local_changes_last_rv(f->lc, &PODS), 13);
}

static void test_is_local_and_settled(void **state)
{
	struct fx *f = *state;
	struct local_change *v = NULL;

	local_changes_saw_cloud_rv(f->lc, 100, true);
	assert_int_equal(claim_pod(f, "default", "a", "kubelet", "kube-proxy", NULL), 101);
	assert_int_equal(claim_pod(f, "default", "b", "kubelet", NULL), 102);

	assert_true(is_local_pod(f->lc, f->s, "kubelet", "default", "a"));
	assert_true(is_local_pod(f->lc, f->s, "kube-proxy", "default", "a"));
	assert_true(is_local_pod(f->lc, f->s, "kubelet", "default", "b"));
	assert_false(is_local_pod(f->lc, f->s, "kube-proxy", "default", "b"));
	assert_false(is_local_pod(f->lc, f->s, "kubelet", "default", "zz"));
	assert_false(is_local_pod(f->lc, f->s, "kubelet", "other", "a"));
	struct store_key k = key_in(f->s, &SLICES, "kubelet", "default", "a");
	assert_false(local_changes_is_local(f->lc, &k)); /* another resource */
	store_key_free(&k);

	settle_pod(f->lc, f->s, "kubelet", "default", "a");
	assert_false(is_local_pod(f->lc, f->s, "kubelet", "default", "a"));
	assert_true(is_local_pod(f->lc, f->s, "kube-proxy", "default", "a"));
	assert_true(is_local_pod(f->lc, f->s, "kubelet", "default", "b"));
	/* the object is still a change, through kube-proxy's copy */
	assert_int_equal(local_changes_since(f->lc, &PODS, "", 0, &v), 2);
	expect_change(&v[0], "default", "a", 101);
	assert_string_equal(v[0].component, "kube-proxy");
	expect_change(&v[1], "default", "b", 102);
	local_changes_list_free(v, 2);

	/* settling what is not journaled: nothing */
	settle_pod(f->lc, f->s, "kubelet", "default", "zz");
	settle_pod(f->lc, f->s, "kubelet", "default", "b");
	settle_pod(f->lc, f->s, "kubelet", "default", "b");
	assert_false(is_local_pod(f->lc, f->s, "kubelet", "default", "b"));
	assert_int_equal(local_changes_last_rv(f->lc, &PODS), 101);
	settle_pod(f->lc, f->s, "kube-proxy", "default", "a");
	assert_false(is_local_pod(f->lc, f->s, "kube-proxy", "default", "a"));
	assert_int_equal(local_changes_since(f->lc, &PODS, "", 0, &v), 0);
	local_changes_list_free(v, 0);
	assert_int_equal(local_changes_last_rv(f->lc, &PODS), 0);
}

static void test_changes_of_component(void **state)
{
	struct fx *f = *state;
	struct local_change *v = NULL;

	local_changes_saw_cloud_rv(f->lc, 100, true);
	assert_int_equal(claim_pod(f, "default", "a", "kubelet", "kube-proxy", NULL), 101);
	assert_int_equal(claim_pod(f, "kube-system", "b", "kubelet", NULL), 102);
	struct store_key k = key_in(f->s, &SLICES, "kubelet", "default", "a-x1");
	assert_int_equal(local_changes_claim(f->lc, &k, 1), 103);
	store_key_free(&k);

	assert_int_equal(local_changes_of(f->lc, "kubelet", &PODS, "", &v), 2);
	expect_change(&v[0], "default", "a", 101);
	expect_change(&v[1], "kube-system", "b", 102);
	assert_string_equal(v[0].component, "kubelet");
	assert_string_equal(v[1].component, "kubelet");
	local_changes_list_free(v, 2);

	assert_int_equal(local_changes_of(f->lc, "kube-proxy", &PODS, "", &v), 1);
	expect_change(&v[0], "default", "a", 101);
	assert_string_equal(v[0].component, "kube-proxy");
	local_changes_list_free(v, 1);

	assert_int_equal(local_changes_of(f->lc, "kubelet", &PODS, "kube-system", &v), 1);
	expect_change(&v[0], "kube-system", "b", 102);
	local_changes_list_free(v, 1);

	assert_int_equal(local_changes_of(f->lc, "kubelet", &SLICES, "", &v), 1);
	expect_change(&v[0], "default", "a-x1", 103);
	assert_string_equal(v[0].group, "discovery.k8s.io");
	assert_string_equal(v[0].resource, "endpointslices");
	local_changes_list_free(v, 1);

	assert_int_equal(local_changes_of(f->lc, "coredns", &PODS, "", &v), 0);
	local_changes_list_free(v, 0);
	assert_int_equal(local_changes_of(f->lc, "kube-proxy", &SLICES, "", &v), 0);
	local_changes_list_free(v, 0);
}

/* ---- persistence ---- */

static void test_survives_reopen(void **state)
{
	struct fx *f = *state;
	struct local_change *v = NULL;

	local_changes_saw_cloud_rv(f->lc, 100, true);
	assert_int_equal(claim_pod(f, "default", "a", "kubelet", "kube-proxy", NULL), 101);
	assert_int_equal(claim_pod(f, "default", "b", "kubelet", NULL), 102);
	settle_pod(f->lc, f->s, "kube-proxy", "default", "a");

	/* the journal again, then the store too */
	for (int round = 0; round < 2; round++) {
		local_changes_free(f->lc);
		if (round == 1) {
			store_close(f->s);
			assert_non_null(f->s = open_store(f->dir, 0));
		}
		assert_non_null(f->lc = local_changes_open(f->s));

		assert_int_equal(local_changes_since(f->lc, &PODS, "", 0, &v), 2);
		expect_change(&v[0], "default", "a", 101);
		assert_string_equal(v[0].component, "kubelet");
		expect_change(&v[1], "default", "b", 102);
		local_changes_list_free(v, 2);
		assert_int_equal(local_changes_last_rv(f->lc, &PODS), 102);
		assert_true(is_local_pod(f->lc, f->s, "kubelet", "default", "a"));
		assert_false(is_local_pod(f->lc, f->s, "kube-proxy", "default", "a"));
		assert_false(local_changes_rv_issued(f->lc, 100));
		assert_true(local_changes_rv_issued(f->lc, 101));
		assert_true(local_changes_rv_issued(f->lc, 102));
		assert_false(local_changes_rv_issued(f->lc, 103));
	}

	/* and issuing goes on above what was issued */
	assert_int_equal(claim_pod(f, "default", "c", "kubelet", NULL), 103);
	assert_true(local_changes_rv_issued(f->lc, 101));
	assert_true(local_changes_rv_issued(f->lc, 103));
}

static void test_corrupt_journal(void **state)
{
	struct fx *f = *state;
	struct local_change *v = NULL;

	local_changes_saw_cloud_rv(f->lc, 100, true);
	assert_int_equal(claim_pod(f, "default", "a", "kubelet", NULL), 101);
	local_changes_free(f->lc);
	assert_int_equal(store_save_cluster_info(f->s, JOURNAL, "not json", 8), STORE_OK);

	assert_non_null(f->lc = local_changes_open(f->s));
	assert_int_equal(local_changes_since(f->lc, &PODS, "", 0, &v), 0);
	local_changes_list_free(v, 0);
	assert_int_equal(local_changes_last_rv(f->lc, &PODS), 0);
	assert_false(is_local_pod(f->lc, f->s, "kubelet", "default", "a"));
	assert_false(local_changes_rv_issued(f->lc, 101));
	/* and it works from there: a claim writes a good journal */
	local_changes_saw_cloud_rv(f->lc, 200, true);
	assert_int_equal(claim_pod(f, "default", "a", "kubelet", NULL), 201);
	local_changes_free(f->lc);
	assert_non_null(f->lc = local_changes_open(f->s));
	assert_int_equal(local_changes_last_rv(f->lc, &PODS), 201);
}

/* JSON of the wrong shape: the range and entries that do not make sense
 * are left out, the rest is kept. */
static void test_odd_journal(void **state)
{
	struct fx *f = *state;
	struct local_change *v = NULL;
	const char *shapes[] = {"[]", "{\"changes\":5}", "{\"first\":3}", "\"x\""};

	for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
		local_changes_free(f->lc);
		assert_int_equal(
		    store_save_cluster_info(f->s, JOURNAL, shapes[i], strlen(shapes[i])), STORE_OK);
		assert_non_null(f->lc = local_changes_open(f->s));
		assert_int_equal(local_changes_last_rv(f->lc, &PODS), 0);
		assert_false(local_changes_rv_issued(f->lc, 3));
	}

	const char *doc =
	    "{\"first\":90,\"last\":80,\"maxSeen\":95,\"changes\":["
	    "{\"component\":\"kubelet\",\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\","
	    "\"namespace\":\"default\",\"name\":\"good\",\"rv\":85},"
	    "{\"component\":\"\",\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\","
	    "\"namespace\":\"default\",\"name\":\"nocomp\",\"rv\":86},"
	    "{\"component\":\"kubelet\",\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\","
	    "\"namespace\":\"default\",\"name\":\"norv\",\"rv\":0},"
	    "{\"component\":\"kubelet\",\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\","
	    "\"namespace\":\"default\",\"rv\":87},"
	    "7]}";
	local_changes_free(f->lc);
	assert_int_equal(store_save_cluster_info(f->s, JOURNAL, doc, strlen(doc)), STORE_OK);
	assert_non_null(f->lc = local_changes_open(f->s));
	assert_int_equal(local_changes_since(f->lc, &PODS, "", 0, &v), 1);
	expect_change(&v[0], "default", "good", 85);
	local_changes_list_free(v, 1);
	/* first > last: no range */
	assert_false(local_changes_rv_issued(f->lc, 85));
	assert_false(local_changes_rv_issued(f->lc, 90));
	/* maxSeen is kept: the next claim is above it */
	local_changes_saw_cloud_rv(f->lc, 1, true);
	assert_int_equal(claim_pod(f, "default", "good", "kubelet", NULL), 96);
	/* and the range starts there, not at the dropped first */
	assert_false(local_changes_rv_issued(f->lc, 90));
	assert_true(local_changes_rv_issued(f->lc, 96));
}

/* ---- the issued range ---- */

static void test_rv_issued_range(void **state)
{
	struct fx *f = *state;

	local_changes_saw_cloud_rv(f->lc, 100, true);
	assert_int_equal(claim_pod(f, "default", "a", "kubelet", NULL), 101);
	assert_int_equal(claim_pod(f, "default", "b", "kubelet", NULL), 102);
	assert_int_equal(claim_pod(f, "default", "c", "kubelet", NULL), 103);

	assert_false(local_changes_rv_issued(f->lc, 0));
	assert_false(local_changes_rv_issued(f->lc, 100));
	assert_true(local_changes_rv_issued(f->lc, 101));
	assert_true(local_changes_rv_issued(f->lc, 102));
	assert_true(local_changes_rv_issued(f->lc, 103));
	assert_false(local_changes_rv_issued(f->lc, 104));

	/* the cloud uses 102 too: that one is the cloud's */
	local_changes_saw_cloud_rv(f->lc, 102, false);
	assert_false(local_changes_rv_issued(f->lc, 102));
	assert_true(local_changes_rv_issued(f->lc, 101));
	assert_true(local_changes_rv_issued(f->lc, 103));
	/* seen twice: the same */
	local_changes_saw_cloud_rv(f->lc, 102, true);
	assert_false(local_changes_rv_issued(f->lc, 102));
	assert_true(local_changes_rv_issued(f->lc, 103));

	/* a settled entry does not take its rv out of the range */
	settle_pod(f->lc, f->s, "kubelet", "default", "a");
	assert_true(local_changes_rv_issued(f->lc, 101));

	/* the cloud past the range: a claim starts a new range, so that the
	 * cloud's rvs in between are never taken for local ones */
	local_changes_saw_cloud_rv(f->lc, 150, false);
	assert_int_equal(claim_pod(f, "default", "a", "kubelet", NULL), 151);
	assert_false(local_changes_rv_issued(f->lc, 101));
	assert_false(local_changes_rv_issued(f->lc, 120));
	assert_true(local_changes_rv_issued(f->lc, 151));
	assert_false(local_changes_rv_issued(f->lc, 152));
	/* without the cloud in between, the range grows */
	assert_int_equal(claim_pod(f, "default", "b", "kubelet", NULL), 152);
	assert_true(local_changes_rv_issued(f->lc, 151));
	assert_true(local_changes_rv_issued(f->lc, 152));
}

/* The cloud using more rvs of the range than are kept retires the range. */
static void test_range_retired_by_cloud(void **state)
{
	struct fx *f = *state;

	local_changes_saw_cloud_rv(f->lc, 100, true);
	uint64_t rv = 0;
	for (int i = 0; i < 400; i++) /* 101..500, one range */
		rv = claim_pod(f, "default", "a", "kubelet", NULL);
	assert_int_equal(rv, 500);
	for (uint64_t c = 102; c < 102 + 256; c++)
		local_changes_saw_cloud_rv(f->lc, c, false);
	assert_true(local_changes_rv_issued(f->lc, 101));
	assert_false(local_changes_rv_issued(f->lc, 357));
	assert_true(local_changes_rv_issued(f->lc, 500));
	local_changes_saw_cloud_rv(f->lc, 102, false); /* known: nothing new */
	assert_true(local_changes_rv_issued(f->lc, 500));
	local_changes_saw_cloud_rv(f->lc, 358, false); /* one more than kept */
	assert_false(local_changes_rv_issued(f->lc, 101));
	assert_false(local_changes_rv_issued(f->lc, 500));
	/* the journal stays: only the range went */
	assert_int_equal(local_changes_last_rv(f->lc, &PODS), 500);
	assert_true(is_local_pod(f->lc, f->s, "kubelet", "default", "a"));
	/* the next range starts afresh: the kept cloud rvs were reset */
	local_changes_saw_cloud_rv(f->lc, 600, true);
	assert_int_equal(claim_pod(f, "default", "b", "kubelet", NULL), 601);
	assert_int_equal(claim_pod(f, "default", "c", "kubelet", NULL), 602);
	local_changes_saw_cloud_rv(f->lc, 601, false);
	assert_false(local_changes_rv_issued(f->lc, 601));
	assert_true(local_changes_rv_issued(f->lc, 602));
}

/* The cloud's rvs kept in the range survive a reopen. */
static void test_cloud_rvs_kept(void **state)
{
	struct fx *f = *state;
	local_changes_saw_cloud_rv(f->lc, 100, true);
	assert_int_equal(claim_pod(f, "default", "a", "kubelet", NULL), 101);
	assert_int_equal(claim_pod(f, "default", "b", "kubelet", NULL), 102);
	local_changes_saw_cloud_rv(f->lc, 101, false);
	local_changes_free(f->lc);
	f->lc = local_changes_open(f->s);
	assert_non_null(f->lc);
	assert_false(local_changes_rv_issued(f->lc, 101));
	assert_true(local_changes_rv_issued(f->lc, 102));
}

/* A write that fails after its claim: the entry follows what is stored. */
static void test_write_failed(void **state)
{
	struct fx *f = *state;
	local_changes_saw_cloud_rv(f->lc, 100, true);
	struct store_key k = pod_key(f->s, "kubelet", "default", "a");
	assert_int_equal(local_changes_claim(f->lc, &k, 1), 101);
	assert_int_equal(local_changes_claim(f->lc, &k, 1), 102);
	/* the rv-102 write failed; the store holds the local copy at 101 */
	local_changes_write_failed(f->lc, &k, 101);
	assert_true(local_changes_is_local(f->lc, &k));
	struct local_change *v = NULL;
	struct store_gvr gvr = PODS;
	long n = local_changes_since(f->lc, &gvr, "", 0, &v);
	assert_int_equal(n, 1);
	assert_int_equal(v[0].rv, 101);
	local_changes_list_free(v, n);
	/* the store holds the cloud's copy (or nothing): the entry goes */
	local_changes_write_failed(f->lc, &k, 90);
	assert_false(local_changes_is_local(f->lc, &k));
	store_key_free(&k);
}

/* ---- a journal that cannot be saved ---- */

static void test_claim_unsaved(void **state)
{
	struct fx *f = *state;
	/* a second, read-only handle on the same directory refuses writes */
	struct store *ro = open_store(f->dir, DISK_READ_ONLY);
	assert_non_null(ro);
	struct local_changes *lc = local_changes_open(ro);
	assert_non_null(lc);
	struct store_key k = pod_key(ro, "kubelet", "default", "a");

	local_changes_saw_cloud_rv(lc, 100, true);
	assert_int_equal(local_changes_claim(lc, &k, 1), 0);
	assert_false(local_changes_rv_issued(lc, 101));
	assert_false(local_changes_rv_issued(lc, 100));
	/* nothing reached the store */
	struct buf b = BUF_INIT;
	assert_int_equal(store_get_cluster_info(f->s, JOURNAL, &b), STORE_NOT_FOUND);
	buf_free(&b);
	/* an rv that was not issued is not used up either */
	assert_int_equal(local_changes_claim(lc, &k, 1), 0);
	assert_false(local_changes_rv_issued(lc, 101));

	/* an issued range stays as it was when a later save fails */
	local_changes_free(lc);
	local_changes_saw_cloud_rv(f->lc, 100, true);
	assert_int_equal(claim_pod(f, "default", "a", "kubelet", NULL), 101);
	assert_non_null(lc = local_changes_open(ro));
	local_changes_saw_cloud_rv(lc, 100, true);
	assert_int_equal(local_changes_claim(lc, &k, 1), 0);
	assert_true(local_changes_rv_issued(lc, 101));
	assert_false(local_changes_rv_issued(lc, 102));

	store_key_free(&k);
	local_changes_free(lc);
	store_close(ro);
}

/* The same instance, its store refusing and then taking the journal: the
 * failed claim leaves no trace in the range.  The disk store keeps cluster
 * info "/yurthub/local-changes" as the file _yurthub_local-changes; a
 * directory in its place makes the write's rename fail (also for root). */
static void test_claim_unsaved_then_saved(void **state)
{
	struct fx *f = *state;
	char obstacle[4200];
	snprintf(obstacle, sizeof obstacle, "%s/_yurthub_local-changes", f->dir);
	assert_int_equal(mkdir(obstacle, 0755), 0);

	local_changes_saw_cloud_rv(f->lc, 100, true);
	assert_int_equal(claim_pod(f, "default", "a", "kubelet", NULL), 0);
	assert_false(local_changes_rv_issued(f->lc, 101));

	assert_int_equal(rmdir(obstacle), 0);
	local_changes_saw_cloud_rv(f->lc, 200, false);
	assert_int_equal(claim_pod(f, "default", "a", "kubelet", NULL), 201);
	assert_false(local_changes_rv_issued(f->lc, 101));
	assert_false(local_changes_rv_issued(f->lc, 150));
	assert_true(local_changes_rv_issued(f->lc, 201));
	assert_int_equal(local_changes_last_rv(f->lc, &PODS), 201);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_claim_after_cloud_list, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_offline_start_scans_store, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_offline_start_scans_view_rvs, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cloud_list_skips_scan, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_since_one_per_object, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_since_dedup_is_per_object, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_is_local_and_settled, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_changes_of_component, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_survives_reopen, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_corrupt_journal, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_odd_journal, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_rv_issued_range, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_range_retired_by_cloud, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cloud_rvs_kept, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_write_failed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_claim_unsaved, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_claim_unsaved_then_saved, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
