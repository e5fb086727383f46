/*
 * test_disk.c - what the disk store promises beyond the shared contract:
 * O(1) syncs per replace, group commit, no torn reads, a replace seen all at
 * once, recovery of every crash state, the directory lock, file modes, and
 * the meaning of directories without view records.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kube/meta.h"
#include "storage/disk.h"
#include "storage/disk_internal.h"
#include "testutil.h"
#include "util/fsutil.h"

struct fx {
	char dir[4096];
	struct store *s;
};

static struct store *open_dir(const char *dir)
{
	char *err = NULL;
	struct store *s = disk_store_open(dir, 0, NULL, &err);
	if (!s)
		fprintf(stderr, "open: %s\n", err);
	free(err);
	return s;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	if (test_mkdtemp(f->dir, sizeof f->dir, "disk") < 0)
		return -1;
	f->s = open_dir(f->dir);
	*state = f;
	return f->s ? 0 : -1;
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

static char *cm_json(const char *ns, const char *name, uint64_t rv, const char *val)
{
	char *s;
	assert_true(
	    asprintf(&s,
		     "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\","
		     "\"namespace\":\"%s\",\"resourceVersion\":\"%llu\"},\"data\":{\"v\":\"%s\"}}",
		     name, ns, (unsigned long long)rv, val) > 0);
	return s;
}

struct itemset {
	struct store_item *v;
	char **data, **names;
	size_t n;
};

static void itemset_make(struct itemset *is, size_t n, const char *ns, uint64_t rv, const char *val)
{
	is->v = calloc(n, sizeof *is->v);
	is->data = calloc(n, sizeof *is->data);
	is->names = calloc(n, sizeof *is->names);
	is->n = n;
	for (size_t i = 0; i < n; i++) {
		assert_true(asprintf(&is->names[i], "cm-%05zu", i) > 0);
		is->data[i] = cm_json(ns, is->names[i], rv, val);
		is->v[i] =
		    (struct store_item){ns, is->names[i], rv, is->data[i], strlen(is->data[i])};
	}
}

static void itemset_free(struct itemset *is)
{
	for (size_t i = 0; i < is->n; i++) {
		free(is->data[i]);
		free(is->names[i]);
	}
	free(is->v);
	free(is->data);
	free(is->names);
}

static struct store_view cm_view(const char *ns)
{
	struct store_view v = {"agent", {"", "v1", "configmaps"}, ns, "", ""};
	return v;
}

static unsigned long syncs_of(struct store *s)
{
	struct disk_stats st;
	disk_store_stats(s, &st);
	return st.syncs;
}

static ino_t ino_of(const char *dir, const char *rel)
{
	struct buf p = BUF_INIT;
	buf_printf(&p, "%s/%s", dir, rel);
	struct stat st;
	assert_int_equal(lstat(p.data, &st), 0);
	buf_free(&p);
	return st.st_ino;
}

/* ---- durability costs ---- */

static void test_replace_costs_constant_syncs(void **state)
{
	struct fx *f = *state;
	struct store_view v = cm_view("a");
	unsigned long cost[2];
	size_t sizes[2] = {10, 1500};
	/* the first replace also makes the directories: measure the ones after */
	assert_int_equal(store_replace_view(f->s, &v, 1, NULL, 0), STORE_OK);
	for (int k = 0; k < 2; k++) {
		struct itemset is;
		itemset_make(&is, sizes[k], "a", 10 + (uint64_t)k, "x");
		unsigned long before = syncs_of(f->s);
		assert_int_equal(store_replace_view(f->s, &v, 10 + (uint64_t)k, is.v, is.n),
				 STORE_OK);
		cost[k] = syncs_of(f->s) - before;
		itemset_free(&is);
	}
	assert_true(cost[0] <= 8);
	assert_int_equal(cost[0], cost[1]); /* 150 times the objects, the same syncs */
}

struct writer {
	struct store *s;
	int id;
	enum store_err result;
};

static void *write_one(void *p)
{
	struct writer *w = p;
	char name[32];
	snprintf(name, sizeof name, "w-%d", w->id);
	struct store_key_info info = {"agent", "", "v1", "configmaps", "g", name};
	struct store_key k;
	w->result = store_key_build(w->s, &info, &k);
	if (w->result != STORE_OK)
		return NULL;
	char *j = cm_json("g", name, 5, "v");
	w->result = store_create(w->s, &k, j, strlen(j));
	free(j);
	store_key_free(&k);
	return NULL;
}

static void test_group_commit_shares_syncs(void **state)
{
	struct fx *f = *state;
	struct disk_store *d = disk_of(f->s);
	/* the namespace directory exists first, so that no batch needs a
	 * whole-file-system sync for new directories */
	struct store_key_info info = {"agent", "", "v1", "configmaps", "g", "first"};
	struct store_key k;
	assert_int_equal(store_key_build(f->s, &info, &k), STORE_OK);
	char *j = cm_json("g", "first", 1, "v");
	assert_int_equal(store_create(f->s, &k, j, strlen(j)), STORE_OK);
	free(j);
	store_key_free(&k);

	enum { N = 16 };
	struct writer w[N];
	pthread_t t[N];
	struct disk_stats before, after;
	disk_store_stats(f->s, &before);
	commit_hold(d->commit, true);
	for (int i = 0; i < N; i++) {
		w[i] = (struct writer){f->s, i, STORE_IO};
		pthread_create(&t[i], NULL, write_one, &w[i]);
	}
	for (int tries = 0; commit_waiting(d->commit) < N && tries < 10000; tries++)
		usleep(1000);
	assert_int_equal(commit_waiting(d->commit), N);
	commit_hold(d->commit, false);
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].result, STORE_OK);
	}
	disk_store_stats(f->s, &after);
	assert_int_equal(after.commit_ops - before.commit_ops, N);
	assert_int_equal(after.commit_batches - before.commit_batches, 1);
	assert_true(after.syncs - before.syncs <= 2); /* one for data, one for the directory */
}

static void test_relist_of_unchanged_objects_links_them(void **state)
{
	struct fx *f = *state;
	struct store_view v = cm_view("a");
	struct itemset is;
	itemset_make(&is, 50, "a", 7, "same");
	assert_int_equal(store_replace_view(f->s, &v, 7, is.v, is.n), STORE_OK);
	ino_t before = ino_of(f->dir, "agent/configmaps.v1.core/a/cm-00010");
	/* the same list again, plus one changed object */
	free(is.data[3]);
	is.data[3] = cm_json("a", is.names[3], 8, "changed");
	is.v[3] = (struct store_item){"a", is.names[3], 8, is.data[3], strlen(is.data[3])};
	assert_int_equal(store_replace_view(f->s, &v, 8, is.v, is.n), STORE_OK);
	itemset_free(&is);
	assert_int_equal(ino_of(f->dir, "agent/configmaps.v1.core/a/cm-00010"), before);
	char *changed = test_read_file(f->dir, "agent/configmaps.v1.core/a/cm-00003");
	assert_non_null(strstr(changed, "changed"));
	free(changed);
}

/* ---- what readers see ---- */

struct reader {
	struct store *s;
	volatile int *stop;
	int bad, reads;
};

static void *read_loop(void *p)
{
	struct reader *r = p;
	struct store_key_info info = {"agent", "", "v1", "configmaps", "t", "hot"};
	struct store_key k;
	store_key_build(r->s, &info, &k);
	struct buf b = BUF_INIT;
	while (!*r->stop) {
		buf_reset(&b);
		if (store_get(r->s, &k, &b) != STORE_OK)
			continue;
		struct kube_meta m;
		if (kube_meta_parse(b.data, b.len, &m) < 0 || !m.name || strcmp(m.name, "hot"))
			r->bad++;
		kube_meta_free(&m);
		r->reads++;
	}
	buf_free(&b);
	store_key_free(&k);
	return NULL;
}

static void test_readers_never_see_torn_files(void **state)
{
	struct fx *f = *state;
	volatile int stop = 0;
	struct reader r = {f->s, &stop, 0, 0};
	struct store_key_info info = {"agent", "", "v1", "configmaps", "t", "hot"};
	struct store_key k;
	assert_int_equal(store_key_build(f->s, &info, &k), STORE_OK);
	char *j = cm_json("t", "hot", 1, "start");
	assert_int_equal(store_create(f->s, &k, j, strlen(j)), STORE_OK);
	free(j);
	pthread_t t;
	pthread_create(&t, NULL, read_loop, &r);
	for (uint64_t rv = 2; rv < 200; rv++) {
		/* sizes vary so that a torn read would not parse */
		char val[4096];
		memset(val, 'a' + (int)(rv % 26), sizeof val);
		val[(rv * 37) % (sizeof val - 1)] = '\0';
		j = cm_json("t", "hot", rv, val);
		assert_int_equal(store_update(f->s, &k, j, strlen(j), rv, NULL), STORE_OK);
		free(j);
	}
	stop = 1;
	pthread_join(t, NULL);
	store_key_free(&k);
	assert_true(r.reads > 0);
	assert_int_equal(r.bad, 0);
}

struct lister {
	struct store *s;
	volatile int *stop;
	int mixed, lists;
};

struct seen {
	int count;
	char first[64];
	int mixed;
};

static int see(void *ctx, const struct store_key *k, const char *data, size_t len)
{
	struct seen *s = ctx;
	(void)k;
	const char *v = strstr(data, "\"v\":\"");
	char val[64] = "";
	if (v)
		snprintf(val, sizeof val, "%.*s", (int)strcspn(v + 5, "\""), v + 5);
	if (s->count == 0)
		snprintf(s->first, sizeof s->first, "%s", val);
	else if (strcmp(s->first, val))
		s->mixed = 1;
	s->count++;
	(void)len;
	return 0;
}

static void *list_loop(void *p)
{
	struct lister *l = p;
	struct store_key_info info = {"agent", "", "v1", "configmaps", "snap", ""};
	struct store_key root;
	store_key_build(l->s, &info, &root);
	while (!*l->stop) {
		struct seen s = {0};
		if (store_list(l->s, &root, see, &s) != STORE_OK)
			continue;
		/* snapshot k has 300 + k objects, all with value "k" */
		if (s.mixed || (s.count && s.count != 300 + atoi(s.first)))
			l->mixed++;
		l->lists++;
	}
	store_key_free(&root);
	return NULL;
}

static void test_replace_seen_all_at_once(void **state)
{
	struct fx *f = *state;
	volatile int stop = 0;
	struct lister l = {f->s, &stop, 0, 0};
	struct store_view v = cm_view("snap");
	pthread_t t;
	pthread_create(&t, NULL, list_loop, &l);
	for (int k = 0; k < 12; k++) {
		char val[16];
		snprintf(val, sizeof val, "%d", k);
		struct itemset is;
		itemset_make(&is, 300 + (size_t)k, "snap", 100 + (uint64_t)k, val);
		assert_int_equal(store_replace_view(f->s, &v, 100 + (uint64_t)k, is.v, is.n),
				 STORE_OK);
		itemset_free(&is);
	}
	stop = 1;
	pthread_join(t, NULL);
	assert_true(l.lists > 0);
	assert_int_equal(l.mixed, 0);
}

/* ---- recovery of hand-made crash states ---- */

static void write_journal(const char *dir, const char *name, const char *target, ino_t ino,
			  const char *views)
{
	char *j;
	char rel[128];
	snprintf(rel, sizeof rel, "_internal/yurthub-c/journal/%s", name);
	/* the views field is itself a JSON text, escaped as a string */
	struct buf esc = BUF_INIT;
	buf_append_json_str(&esc, views, strlen(views));
	assert_true(
	    asprintf(&j,
		     "{\"op\":\"replace\",\"tree\":\"r77\",\"target\":\"%s\",\"ino\":\"%llu\","
		     "\"component\":\"agent\",\"resdir\":\"configmaps.v1.core\",\"views\":%s}",
		     target, (unsigned long long)ino, esc.data) > 0);
	assert_int_equal(test_write_file(dir, rel, j), 0);
	free(j);
	buf_free(&esc);
}

static const char *VIEWS_NEW = "{\"views\":[{\"namespace\":\"a\",\"labelSelector\":\"\","
			       "\"fieldSelector\":\"\",\"resourceVersion\":\"77\"}]}";

static void test_recover_rolls_forward(void **state)
{
	struct fx *f = *state;
	store_close(f->s);
	f->s = NULL;
	/* the crash came after the swap: T already is the new tree */
	char *obj = cm_json("a", "new", 77, "n");
	assert_int_equal(test_write_file(f->dir, "agent/configmaps.v1.core/a/new", obj), 0);
	free(obj);
	assert_int_equal(test_write_file(f->dir, "_internal/yurthub-c/staging/r77/old", "x"), 0);
	write_journal(f->dir, "j77", "agent/configmaps.v1.core/a",
		      ino_of(f->dir, "agent/configmaps.v1.core/a"), VIEWS_NEW);
	struct disk_recovery_report rep;
	char *err = NULL;
	f->s = disk_store_open(f->dir, 0, &rep, &err);
	assert_non_null(f->s);
	assert_int_equal(rep.journals_rolled_forward, 1);
	struct store_view v = cm_view("a");
	struct store_view_state st;
	assert_int_equal(store_get_view(f->s, &v, &st), STORE_OK);
	assert_int_equal(st.rv, 77);
	store_view_state_free(&st);
	assert_false(test_exists(f->dir, "_internal/yurthub-c/staging/r77"));
	assert_false(test_exists(f->dir, "_internal/yurthub-c/journal/j77"));
}

static void test_recover_rolls_back(void **state)
{
	struct fx *f = *state;
	store_close(f->s);
	f->s = NULL;
	/* the crash came before the swap: N still in staging, T the old tree */
	char *old = cm_json("a", "old", 5, "o");
	assert_int_equal(test_write_file(f->dir, "agent/configmaps.v1.core/a/old", old), 0);
	free(old);
	assert_int_equal(test_write_file(f->dir, "_internal/yurthub-c/staging/r77/new", "{}"), 0);
	write_journal(f->dir, "j77", "agent/configmaps.v1.core/a",
		      ino_of(f->dir, "_internal/yurthub-c/staging/r77"), VIEWS_NEW);
	/* and a record that never became durable */
	assert_int_equal(test_write_file(f->dir, "_internal/yurthub-c/journal/j78", "{\"op\":"), 0);
	assert_int_equal(test_write_file(f->dir, "_internal/yurthub-c/staging/w3", "partial"), 0);
	struct disk_recovery_report rep;
	char *err = NULL;
	f->s = disk_store_open(f->dir, 0, &rep, &err);
	assert_non_null(f->s);
	assert_int_equal(rep.journals_rolled_back, 2);
	assert_true(test_exists(f->dir, "agent/configmaps.v1.core/a/old"));
	assert_false(test_exists(f->dir, "agent/configmaps.v1.core/a/new"));
	struct store_view v = cm_view("a");
	struct store_view_state st;
	/* the record never took effect: no view of namespace "a" (the YurtHub-style
	 * directory reads as one view of all namespaces) */
	assert_int_equal(store_get_view(f->s, &v, &st), STORE_NOT_FOUND);
	assert_false(test_exists(f->dir, "_internal/yurthub-c/staging/r77"));
	assert_false(test_exists(f->dir, "_internal/yurthub-c/staging/w3"));
	assert_false(test_exists(f->dir, "_internal/yurthub-c/journal/j78"));
}

static void test_recover_fallback_half_way(void **state)
{
	struct fx *f = *state;
	store_close(f->s);
	f->s = NULL;
	/* two-rename fallback stopped between its renames: T missing, old aside */
	char *old = cm_json("a", "old", 5, "o");
	assert_int_equal(test_write_file(f->dir, "_internal/yurthub-c/staging/r77o/old", old), 0);
	free(old);
	assert_int_equal(test_write_file(f->dir, "_internal/yurthub-c/staging/r77/new", "{}"), 0);
	assert_int_equal(test_write_file(f->dir, "agent/configmaps.v1.core/keep", "{}"), 0);
	write_journal(f->dir, "j77", "agent/configmaps.v1.core/a",
		      ino_of(f->dir, "_internal/yurthub-c/staging/r77"), VIEWS_NEW);
	char *err = NULL;
	f->s = disk_store_open(f->dir, 0, NULL, &err);
	assert_non_null(f->s);
	assert_true(test_exists(f->dir, "agent/configmaps.v1.core/a/old"));
	assert_false(test_exists(f->dir, "_internal/yurthub-c/staging/r77o"));
}

/* Found while giving the journal decoder its own entry point (for
 * fuzz/fuzz_journal): a record's resdir named the view file to write without
 * being checked, so a damaged record with the swapped tree's inode wrote
 * outside the cache directory; and a record whose views did not decode made
 * every later open fail.  Both are now records that do not decode: dropped,
 * which is rolling back. */
static void test_recover_refuses_damaged_records(void **state)
{
	struct fx *f = *state;
	store_close(f->s);
	f->s = NULL;
	assert_int_equal(test_write_file(f->dir, "agent/configmaps.v1.core/a/new", "{}"), 0);
	ino_t ino = ino_of(f->dir, "agent/configmaps.v1.core/a");
	char *j;
	assert_true(asprintf(&j,
			     "{\"op\":\"replace\",\"tree\":\"r77\",\"target\":"
			     "\"agent/configmaps.v1.core/a\",\"ino\":\"%llu\",\"component\":"
			     "\"agent\",\"resdir\":\"../../../../escape\",\"views\":"
			     "\"{\\\"views\\\":[]}\"}",
			     (unsigned long long)ino) > 0);
	assert_int_equal(test_write_file(f->dir, "_internal/yurthub-c/journal/j77", j), 0);
	free(j);
	write_journal(f->dir, "j78", "agent/configmaps.v1.core/a", ino, "{\"views\":7}");
	write_journal(f->dir, "j79", "agent/secrets.v1.core/a", ino, VIEWS_NEW);
	struct disk_recovery_report rep;
	char *err = NULL;
	f->s = disk_store_open(f->dir, 0, &rep, &err);
	assert_non_null(f->s);
	assert_int_equal(rep.journals_rolled_back, 3);
	assert_false(test_exists(f->dir, "escape"));
	assert_false(test_exists(f->dir, "_internal/yurthub-c/journal/j77"));
	assert_false(test_exists(f->dir, "_internal/yurthub-c/journal/j78"));
	assert_true(test_exists(f->dir, "agent/configmaps.v1.core/a/new"));
}

static void test_recover_removes_atomic_temps(void **state)
{
	struct fx *f = *state;
	store_close(f->s);
	f->s = NULL;
	assert_int_equal(test_write_file(f->dir, ".tmp.123.4", "x"), 0);
	assert_int_equal(test_write_file(f->dir, "_internal/yurthub-c/views/agent/.tmp.9.9", "x"),
			 0);
	f->s = open_dir(f->dir);
	assert_non_null(f->s);
	assert_false(test_exists(f->dir, ".tmp.123.4"));
	assert_false(test_exists(f->dir, "_internal/yurthub-c/views/agent/.tmp.9.9"));
}

/* ---- the directory and its files ---- */

static void test_second_hub_is_refused(void **state)
{
	struct fx *f = *state;
	char *err = NULL;
	struct store *s2 = disk_store_open(f->dir, 0, NULL, &err);
	assert_null(s2);
	assert_non_null(strstr(err, "in use"));
	free(err);
	/* a read-only opener (the operator tool) is fine, and cannot write */
	struct store *ro = disk_store_open(f->dir, DISK_READ_ONLY, NULL, &err);
	assert_non_null(ro);
	struct store_key_info info = {"agent", "", "v1", "configmaps", "a", "x"};
	struct store_key k;
	assert_int_equal(store_key_build(ro, &info, &k), STORE_OK);
	char *j = cm_json("a", "x", 1, "v");
	assert_int_equal(store_create(ro, &k, j, strlen(j)), STORE_IO);
	assert_int_equal(store_errno(), EROFS);
	free(j);
	store_key_free(&k);
	store_close(ro);
}

static mode_t mode_of(const char *dir, const char *rel)
{
	struct buf p = BUF_INIT;
	buf_printf(&p, "%s/%s", dir, rel);
	struct stat st;
	assert_int_equal(lstat(p.data, &st), 0);
	buf_free(&p);
	return st.st_mode & 07777;
}

static void test_modes(void **state)
{
	struct fx *f = *state;
	struct store_key_info info = {"agent", "", "v1", "configmaps", "a", "x"};
	struct store_key k;
	assert_int_equal(store_key_build(f->s, &info, &k), STORE_OK);
	char *j = cm_json("a", "x", 1, "v");
	assert_int_equal(store_create(f->s, &k, j, strlen(j)), STORE_OK);
	free(j);
	store_key_free(&k);
	struct itemset is;
	itemset_make(&is, 3, "b", 4, "z");
	struct store_view v = cm_view("b");
	assert_int_equal(store_replace_view(f->s, &v, 4, is.v, is.n), STORE_OK);
	itemset_free(&is);
	assert_int_equal(mode_of(f->dir, "agent/configmaps.v1.core/a/x"), 0600);
	assert_int_equal(mode_of(f->dir, "agent/configmaps.v1.core/b/cm-00001"), 0600);
	assert_int_equal(mode_of(f->dir, "agent/configmaps.v1.core/a"), 0700);
	assert_int_equal(mode_of(f->dir, "agent/configmaps.v1.core/b"), 0700);
	assert_int_equal(mode_of(f->dir, "agent"), 0700);
}

static void test_own_objects_are_not_a_list(void **state)
{
	struct fx *f = *state;
	/* an object the hub wrote (from a GET) does not make its directory "listed" */
	struct store_key_info info = {"agent", "", "v1", "configmaps", "a", "x"};
	struct store_key k;
	assert_int_equal(store_key_build(f->s, &info, &k), STORE_OK);
	char *j = cm_json("a", "x", 1, "v");
	assert_int_equal(store_create(f->s, &k, j, strlen(j)), STORE_OK);
	free(j);
	store_key_free(&k);
	struct store_view v = cm_view("");
	struct store_view_state st;
	assert_int_equal(store_get_view(f->s, &v, &st), STORE_NOT_FOUND);
	/* ...also after a restart */
	store_close(f->s);
	f->s = open_dir(f->dir);
	assert_int_equal(store_get_view(f->s, &v, &st), STORE_NOT_FOUND);
}

static int open_fds(void)
{
	int n = 0;
	for (int fd = 0; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			n++;
	return n;
}

/* The count sees objects only: not the hub's state, cluster info, YurtHub's
 * backups, atomic-write temps, stray files beside resource directories,
 * or links; and it leaves no fd open. */
static void test_count_objects_skips_what_is_not_an_object(void **state)
{
	struct fx *f = *state;
	const char *objects[] = {"kubelet/pods.v1.core/a/p1", "kubelet/pods.v1.core/b/p2",
				 "kubelet/nodes.v1.core/n1", "coredns/pods.v1.core/a/p1",
				 "kube-proxy/services/default/kubernetes" /* legacy layout */};
	const char *not_objects[] = {"version",
				     "apis",
				     "_apis_apps_v1",
				     ".tmp.1.2",
				     "tmp_kubelet/pods.v1.core/a/p9",
				     "kubelet/stray-file",
				     "kubelet/tmp_pods.v1.core/a/p9",
				     "kubelet/pods.v1.core/tmp_a/p9",
				     "kubelet/pods.v1.core/a/tmp_p9",
				     "kubelet/pods.v1.core/a/.tmp.3",
				     "kubelet/pods.v1.core/.hidden/p9",
				     "kubelet/pods.v1.core/a/deep/p9",
				     "_internal/other/x/y/z"};
	for (size_t i = 0; i < sizeof objects / sizeof *objects; i++)
		assert_int_equal(test_write_file(f->dir, objects[i], "{}"), 0);
	for (size_t i = 0; i < sizeof not_objects / sizeof *not_objects; i++)
		assert_int_equal(test_write_file(f->dir, not_objects[i], "{}"), 0);
	char from[4200], to[4200];
	snprintf(from, sizeof from, "%s/kubelet/pods.v1.core/a/p1", f->dir);
	snprintf(to, sizeof to, "%s/kubelet/pods.v1.core/a/link", f->dir);
	assert_int_equal(symlink(from, to), 0);
	snprintf(from, sizeof from, "%s/kubelet", f->dir);
	snprintf(to, sizeof to, "%s/linked-component", f->dir);
	assert_int_equal(symlink(from, to), 0);
	int fds = open_fds();
	uint64_t n = 0;
	assert_int_equal(store_count_objects(f->s, &n), STORE_OK);
	assert_int_equal(n, sizeof objects / sizeof *objects);
	assert_int_equal(open_fds(), fds);
	/* an unreadable resource directory is an error, with its fds closed */
	if (geteuid() != 0) {
		snprintf(to, sizeof to, "%s/kubelet/pods.v1.core", f->dir);
		assert_int_equal(chmod(to, 0), 0);
		assert_int_equal(store_count_objects(f->s, &n), STORE_IO);
		assert_int_equal(store_errno(), EACCES);
		assert_int_equal(open_fds(), fds);
		assert_int_equal(chmod(to, 0700), 0);
	}
}

static void test_deleting_a_collection_drops_its_views(void **state)
{
	struct fx *f = *state;
	struct itemset is;
	itemset_make(&is, 4, "a", 9, "z");
	struct store_view va = cm_view("a"), vall = cm_view(""), vb = cm_view("b");
	assert_int_equal(store_replace_view(f->s, &va, 9, is.v, is.n), STORE_OK);
	assert_int_equal(store_replace_view(f->s, &vb, 9, NULL, 0), STORE_OK);
	itemset_free(&is);
	struct store_key_info info = {"agent", "", "v1", "configmaps", "a", ""};
	struct store_key root;
	assert_int_equal(store_key_build(f->s, &info, &root), STORE_OK);
	assert_int_equal(store_delete(f->s, &root), STORE_OK);
	store_key_free(&root);
	struct store_view_state st;
	assert_int_equal(store_get_view(f->s, &va, &st), STORE_NOT_FOUND);
	assert_int_equal(store_get_view(f->s, &vall, &st), STORE_NOT_FOUND);
	assert_int_equal(store_get_view(f->s, &vb, &st), STORE_OK); /* another namespace */
	store_view_state_free(&st);
	assert_false(test_exists(f->dir, "agent/configmaps.v1.core/a"));
}

static void test_get_collection_has_no_content(void **state)
{
	struct fx *f = *state;
	struct store_view v = cm_view("a");
	assert_int_equal(store_replace_view(f->s, &v, 1, NULL, 0), STORE_OK);
	struct store_key_info info = {"agent", "", "v1", "configmaps", "a", ""};
	struct store_key root;
	assert_int_equal(store_key_build(f->s, &info, &root), STORE_OK);
	struct buf b = BUF_INIT;
	assert_int_equal(store_get(f->s, &root, &b), STORE_EMPTY_CONTENT);
	buf_free(&b);
	store_key_free(&root);
}

/* An object named "a\u0000b" is not object "a": compared as C strings the
 * names matched, so a hostile upstream could overwrite "a" (found by the
 * hostile upstream e2e suite). */
static void test_nul_in_name_is_not_the_key(void **state)
{
	struct fx *f = *state;
	struct store_key_info info = {"agent", "", "v1", "configmaps", "a", "good"};
	struct store_key k;
	assert_int_equal(store_key_build(f->s, &info, &k), STORE_OK);
	char *good = cm_json("a", "good", 5, "good");
	char *evil = cm_json("a", "good\\u0000x", 9, "evil");
	char *evil_ns = cm_json("a\\u0000x", "good", 9, "evil");
	assert_int_equal(store_create(f->s, &k, evil, strlen(evil)), STORE_INVALID_CONTENT);
	assert_int_equal(store_create(f->s, &k, good, strlen(good)), STORE_OK);
	assert_int_equal(store_update(f->s, &k, evil, strlen(evil), 9, NULL),
			 STORE_INVALID_CONTENT);
	assert_int_equal(store_update(f->s, &k, evil_ns, strlen(evil_ns), 9, NULL),
			 STORE_INVALID_CONTENT);
	struct buf b = BUF_INIT;
	assert_int_equal(store_get(f->s, &k, &b), STORE_OK);
	assert_true(b.len == strlen(good) && !memcmp(b.data, good, b.len));
	buf_free(&b);
	free(good);
	free(evil);
	free(evil_ns);
	store_key_free(&k);
}

static int count_object(void *ctx, const struct store_key *k, const char *data, size_t len)
{
	(void)data;
	(void)len;
	struct buf *names = ctx;
	buf_printf(names, "%s%s", names->len ? " " : "", k->name);
	return 0;
}

/* An item a replace refuses (no key can name it, or not under the view's
 * namespace) leaves the session as it was: the cache skips it and the list
 * is stored with every other object (store.h, store_item_check). */
static void test_refused_item_leaves_the_session(void **state)
{
	struct fx *f = *state;
	struct store_view v = cm_view("a");
	struct store_replace *r;
	assert_int_equal(store_replace_begin(f->s, &v, &r), STORE_OK);
	const struct {
		const char *ns, *name;
		enum store_err want;
	} items[] = {{"a", "p1", STORE_OK},	    {"a", "tmp_x", STORE_BAD_KEY},
		     {"a", "x/y", STORE_BAD_KEY},   {"a", "..", STORE_BAD_KEY},
		     {"a", "", STORE_BAD_KEY},	    {"b", "p9", STORE_INVALID_CONTENT},
		     {"a", "n\001", STORE_BAD_KEY}, {"a", "p2", STORE_OK}};
	for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
		char *j = cm_json(items[i].ns, items[i].name, 10 + i, "x");
		struct store_item it = {items[i].ns, items[i].name, 10 + i, j, strlen(j)};
		assert_int_equal(store_replace_add(r, &it), items[i].want);
		free(j);
	}
	assert_int_equal(store_replace_commit(r, 30), STORE_OK);
	struct store_key_info info = {"agent", "", "v1", "configmaps", "a", ""};
	struct store_key root;
	assert_int_equal(store_key_build(f->s, &info, &root), STORE_OK);
	struct buf names = BUF_INIT;
	assert_int_equal(buf_append_str(&names, ""), 0);
	assert_int_equal(store_list(f->s, &root, count_object, &names), STORE_OK);
	assert_string_equal(names.data, "p1 p2");
	struct store_view_state st;
	assert_int_equal(store_get_view(f->s, &v, &st), STORE_OK);
	assert_int_equal(st.rv, 30);
	store_view_state_free(&st);
	buf_free(&names);
	store_key_free(&root);
}

/* The lock order of disk_internal.h is checked in debug builds: taking a
 * key stripe without the resource lock (or a resource stripe without the
 * global lock) aborts there, so every test run checks every path. */
static void test_lock_order_is_checked(void **state)
{
#ifndef YURTHUB_LOCK_CHECK
	(void)state;
	printf("SKIPPED: the lock order is checked in debug builds only\n");
	skip();
#else
	struct fx *f = *state;
	struct disk_store *d = disk_of(f->s);
	pthread_rwlock_t *rl = disk_lock_resource(d, "kubelet", "pods.v1.core", DISK_SHARED);
	pthread_mutex_t *kl = disk_lock_key(d, "kubelet/pods.v1.core/a/b"); /* in order */
	disk_unlock_key(kl);
	disk_unlock_resource(d, rl);
	fflush(NULL);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		disk_lock_key(d, "kubelet/pods.v1.core/a/b"); /* no resource lock */
		_exit(0);
	}
	int status = 0;
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_replace_costs_constant_syncs, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_group_commit_shares_syncs, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_relist_of_unchanged_objects_links_them, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_readers_never_see_torn_files, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_replace_seen_all_at_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_recover_rolls_forward, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_recover_rolls_back, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_recover_fallback_half_way, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_recover_refuses_damaged_records, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_recover_removes_atomic_temps, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_second_hub_is_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_modes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_own_objects_are_not_a_list, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_count_objects_skips_what_is_not_an_object, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_deleting_a_collection_drops_its_views, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_get_collection_has_no_content, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_nul_in_name_is_not_the_key, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refused_item_leaves_the_session, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lock_order_is_checked, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
