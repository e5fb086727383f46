/*
 * test_write_order.c - the power-loss order of the disk store's writes.
 *
 * The injector traces every call that changes the cache directory while
 * the store makes each kind of write: the first list of a view (a plain
 * rename), a relist (RENAME_EXCHANGE), a relist that changes one object
 * of eight (a delta: the new copy renamed into the tree), the same without exchange (the
 * two-rename fallback, forced by failing the exchange with EINVAL),
 * watch events (update, create in a new namespace and in a new component),
 * a burst of concurrent writes in one group commit (syncfs), a delete, a
 * bookmark, cluster info, deleting a collection and a component.  Each
 * store call is marked begin/end in the trace, and order_check.c replays
 * it: nothing is renamed into place before it is durable, the journal is
 * durable before a tree moves, and every call that returns success has
 * synced the directories its renames changed.
 *
 * The checker is then shown the same trace with syncs taken out or moved
 * after the renames: it must find problems each time, or it proves nothing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fault_fx.h"
#include "fault_util.h"
#include "order_check.h"
#include "storage/disk.h"
#include "storage/disk_internal.h"
#include "testutil.h"

#define PAD   100
#define N(a)  (sizeof(a) / sizeof((a)[0]))
#define PRIV  "_internal/yurthub-c"
#define BURST 12 /* above the group commit's fdatasync-each limit: one syncfs */

struct run {
	bool traced;
	char top[4096], cache[4200], trace[4200];
	char staging[4400], spare[4400], journal[4400];
};

static struct run RUN;

static const struct fx_obj SEED[] = {{"cm-0", 10}, {"cm-1", 10}, {"cm-2", 10}, {"cm-3", 10}};
static const struct fx_obj RELIST[] = {{"cm-0", 10}, {"cm-1", 20}, {"cm-4", 20}, {"cm-2", 0}};
static const struct fx_obj RELIST2[] = {{"cm-0", 30}, {"cm-4", 20}, {"cm-5", 30}};
/* a relist that changes one object of eight: a delta moved into the tree */
static const struct fx_obj MANY[] = {{"m-0", 40}, {"m-1", 40}, {"m-2", 40}, {"m-3", 40},
				     {"m-4", 40}, {"m-5", 40}, {"m-6", 40}, {"m-7", 40}};
static const struct fx_obj MANY2[] = {{"m-0", 40}, {"m-1", 41}, {"m-2", 40}, {"m-3", 40},
				      {"m-4", 40}, {"m-5", 40}, {"m-6", 40}, {"m-7", 40}};

#define MARKED(what, expr)                                                                         \
	do {                                                                                       \
		fault_mark("begin %s", what);                                                      \
		enum store_err e_ = (expr);                                                        \
		fault_mark("end %s rc=%d", what, (int)e_);                                         \
		if (e_ != STORE_OK)                                                                \
			fail_msg("%s: %s", what, store_strerror(e_));                              \
	} while (0)

/* ---- the calls ---- */

static enum store_err create_other(struct store *s)
{
	struct store_key_info info = {"other", "", "v1", "configmaps", "x", "o-0"};
	struct store_key k;
	enum store_err e = store_key_build(s, &info, &k);
	char *data = fx_cm("x", "o-0", 1, PAD);
	if (e == STORE_OK)
		e = store_create(s, &k, data, strlen(data));
	free(data);
	store_key_free(&k);
	return e;
}

struct writer {
	struct store *s;
	int id;
	enum store_err e;
};

static void *burst_one(void *p)
{
	struct writer *w = p;
	char name[32];
	snprintf(name, sizeof name, "b-%d", w->id);
	w->e = fx_put(w->s, "g", name, 2, PAD);
	return NULL;
}

/* BURST writers queue up while the commit is held, then go as one batch. */
static enum store_err burst(struct store *s)
{
	struct disk_store *d = disk_of(s);
	struct writer w[BURST];
	pthread_t t[BURST];
	commit_hold(d->commit, true);
	for (int i = 0; i < BURST; i++) {
		w[i] = (struct writer){s, i, STORE_IO};
		pthread_create(&t[i], NULL, burst_one, &w[i]);
	}
	time_t deadline = time(NULL) + 30;
	while (commit_waiting(d->commit) < BURST && time(NULL) < deadline)
		usleep(1000);
	size_t queued = commit_waiting(d->commit);
	commit_hold(d->commit, false);
	enum store_err e = STORE_OK;
	for (int i = 0; i < BURST; i++) {
		pthread_join(t[i], NULL);
		if (w[i].e != STORE_OK)
			e = w[i].e;
	}
	assert_int_equal(queued, BURST);
	return e;
}

static enum store_err relist_without_exchange(struct store *s)
{
	/* a file system without RENAME_EXCHANGE answers EINVAL */
	assert_int_equal(fault_set("exchange:*:EINVAL", RUN.cache), 0);
	enum store_err e = fx_replace(s, "a", 30, RELIST2, N(RELIST2), PAD);
	unsigned long hits = fault_hits();
	fault_clear();
	assert_true(hits > 0);
	return e;
}

static enum store_err delete_collection(struct store *s)
{
	struct store_key_info info = {"agent", "", "v1", "configmaps", "g", ""};
	struct store_key root;
	enum store_err e = store_key_build(s, &info, &root);
	if (e == STORE_OK)
		e = store_delete(s, &root);
	store_key_free(&root);
	return e;
}

static void drive(struct store *s)
{
	struct store_view va = {"agent", {"", "v1", "configmaps"}, "a", "", ""};
	const char *version = "{\"major\":\"1\",\"minor\":\"30\"}";
	MARKED("first list", fx_replace(s, "a", 10, SEED, N(SEED), PAD));
	MARKED("update", fx_put(s, "a", "cm-1", 11, PAD));
	MARKED("create in a new namespace", fx_put(s, "g", "first", 1, PAD));
	MARKED("create in a new component", create_other(s));
	MARKED("burst", burst(s));
	MARKED("relist", fx_replace(s, "a", 20, RELIST, N(RELIST), PAD));
	MARKED("list of many", fx_replace(s, "d", 40, MANY, N(MANY), PAD));
	MARKED("relist changing one", fx_replace(s, "d", 41, MANY2, N(MANY2), PAD));
	MARKED("delete", fx_del(s, "a", "cm-0"));
	MARKED("bookmark", store_set_view_rv(s, &va, 25));
	MARKED("cluster info", store_save_cluster_info(s, "/version", version, strlen(version)));
	MARKED("relist without exchange", relist_without_exchange(s));
	MARKED("delete a collection", delete_collection(s));
	MARKED("delete a component", store_delete_component(s, "other"));
	disk_store_drain(s);
}

/* ---- recording the trace once, for all the tests ---- */

static int record(void **state)
{
	struct run *r = &RUN;
	if (!fault_loaded())
		return 0;
	if (test_mkdtemp(r->top, sizeof r->top, "order") < 0)
		return -1;
	if (snprintf(r->cache, sizeof r->cache, "%s/cache", r->top) >= (int)sizeof r->cache ||
	    snprintf(r->trace, sizeof r->trace, "%s/trace", r->top) >= (int)sizeof r->trace ||
	    snprintf(r->staging, sizeof r->staging, "%s/" PRIV "/staging", r->cache) >=
		(int)sizeof r->staging ||
	    snprintf(r->spare, sizeof r->spare, "%s/" PRIV "/spare", r->cache) >=
		(int)sizeof r->spare ||
	    snprintf(r->journal, sizeof r->journal, "%s/" PRIV "/journal", r->cache) >=
		(int)sizeof r->journal)
		return -1;
	/* traced from before the store exists, so that the checker sees every
	 * directory being made */
	if (fault_set("", r->cache) < 0 || fault_trace(r->trace) < 0)
		return -1;
	fault_mark("begin open");
	struct store *s = fx_open(r->cache);
	fault_mark("end open rc=%d", s ? 0 : 1);
	if (!s)
		return -1;
	drive(s);
	store_close(s);
	fault_trace(NULL);
	fault_clear();
	r->traced = true;
	return 0;
}

static int cleanup(void **state)
{
	if (RUN.traced && getenv("YH_KEEP_TRACE"))
		printf("trace kept in %s\n", RUN.trace);
	else if (RUN.top[0])
		test_rm_rf(RUN.top);
	return 0;
}

static struct order_check *checker(void)
{
	struct order_check *oc = order_check_new();
	assert_non_null(oc);
	assert_int_equal(order_check_scratch(oc, RUN.staging), 0);
	/* spare inodes belong to no tree (storage/disk_spare.c): nobody reads them */
	assert_int_equal(order_check_scratch(oc, RUN.spare), 0);
	assert_int_equal(order_check_guard(oc, RUN.journal), 0);
	return oc;
}

static void need_trace(void)
{
	if (!RUN.traced) {
		printf("SKIPPED: the fault injector could not be preloaded, no trace\n");
		skip();
	}
}

/* Print the trace between "begin what" and "end what", paths shortened. */
static void show(const char *what)
{
	FILE *f = fopen(RUN.trace, "r");
	assert_non_null(f);
	char line[8192], begin[256];
	snprintf(begin, sizeof begin, "text=begin %s\n", what);
	bool in = false;
	printf("--- %s ---\n", what);
	while (fgets(line, sizeof line, f)) {
		if (strstr(line, begin)) {
			in = true;
			continue;
		}
		if (in && strstr(line, "kind=mark"))
			break;
		if (!in)
			continue;
		char out[8192] = "";
		size_t o = 0, n = strlen(RUN.cache);
		for (char *p = line; *p && o + 2 < sizeof out;) {
			if (!strncmp(p, RUN.cache, n)) {
				out[o++] = '~';
				p += n;
			} else {
				out[o++] = *p == '\t' ? ' ' : *p;
				p++;
			}
		}
		out[o] = '\0';
		char *seq = strstr(out, "kind=");
		printf("  %s", seq ? seq : out);
	}
	fclose(f);
}

static void test_store_writes_in_order(void **state)
{
	need_trace();
	struct order_check *oc = checker();
	assert_int_equal(order_check_file(oc, RUN.trace), 0);
	struct order_stats st;
	order_check_stats(oc, &st);
	printf("%lu lines, %lu renames (%lu exchanges, %lu of directories), %lu syncs, "
	       "%lu calls ended, %lu renames checked for durability\n",
	       st.lines, st.renames, st.exchanges, st.dir_renames, st.syncs, st.ends_checked,
	       st.renames_in_calls);
	if (order_check_problems(oc))
		fail_msg("%zu problems:\n%s", order_check_problems(oc), order_check_report(oc));
	assert_int_equal(st.ends_checked, 15);
	assert_true(st.exchanges >= 1);
	assert_true(st.dir_renames >= 6);
	assert_true(st.renames_in_calls >= BURST + 10);
	order_check_free(oc);
	show("update");
	show("relist");
}

/* The recorded trace, each line kept or not by keep(), through the checker. */
static struct order_check *check_edited(bool (*keep)(const char *line), bool swap_syncs)
{
	char edited[4400];
	snprintf(edited, sizeof edited, "%s.edited", RUN.trace);
	FILE *in = fopen(RUN.trace, "r"), *out = fopen(edited, "w");
	assert_non_null(in);
	assert_non_null(out);
	char line[8192], held[8192] = "";
	while (fgets(line, sizeof line, in)) {
		if (keep && !keep(line))
			continue;
		if (swap_syncs && strstr(line, "kind=fdatasync")) {
			snprintf(held, sizeof held, "%s", line); /* written after the next line */
			continue;
		}
		fputs(line, out);
		if (held[0]) {
			fputs(held, out);
			held[0] = '\0';
		}
	}
	fclose(in);
	fclose(out);
	struct order_check *oc = checker();
	assert_int_equal(order_check_file(oc, edited), 0);
	unlink(edited);
	return oc;
}

static void expect_found(struct order_check *oc, const char *rule)
{
	if (!order_check_problems(oc) || !strstr(order_check_report(oc), rule))
		fail_msg("the checker did not report \"%s\": %s", rule, order_check_report(oc));
	order_check_free(oc);
}

static bool no_fdatasync(const char *line)
{
	return !strstr(line, "kind=fdatasync");
}

static bool no_syncfs(const char *line)
{
	return !strstr(line, "kind=syncfs");
}

static bool no_directory_fsync(const char *line)
{
	return !(strstr(line, "kind=fsync") && strstr(line, ":d\t"));
}

static void test_checker_sees_missing_file_syncs(void **state)
{
	need_trace();
	expect_found(check_edited(no_fdatasync, false), "publish:");
}

static void test_checker_sees_missing_syncfs(void **state)
{
	need_trace();
	struct order_check *oc = check_edited(no_syncfs, false);
	assert_non_null(strstr(order_check_report(oc), "guard:"));
	expect_found(oc, "publish:");
}

static void test_checker_sees_missing_directory_syncs(void **state)
{
	need_trace();
	expect_found(check_edited(no_directory_fsync, false), "durable:");
}

static void test_checker_sees_sync_after_rename(void **state)
{
	need_trace();
	/* each fdatasync moved one line later: after the rename it protects */
	expect_found(check_edited(NULL, true), "publish:");
}

int main(int argc, char **argv)
{
	(void)argc;
	if (!fault_preload(argv))
		printf("the fault injector is not loaded: the order tests are skipped\n");
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_store_writes_in_order),
	    cmocka_unit_test(test_checker_sees_missing_file_syncs),
	    cmocka_unit_test(test_checker_sees_missing_syncfs),
	    cmocka_unit_test(test_checker_sees_missing_directory_syncs),
	    cmocka_unit_test(test_checker_sees_sync_after_rename),
	};
	return cmocka_run_group_tests(tests, record, cleanup);
}
