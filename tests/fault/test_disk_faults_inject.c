/*
 * test_disk_faults_inject.c - every failing file-system call of a store
 * write, one at a time, with the injector (inject.c) in the process.
 *
 * For each operation the cache makes - a list replace over a view, the
 * first replace of a view, watch events (update, create in a new
 * namespace, create in a new component, delete), a bookmark - and for each
 * kind of call it makes (write, open, mkdir, link, rename, fsync,
 * fdatasync, syncfs, unlink, close): fail the 1st such call, then the 2nd,
 * ... until the operation makes no more of them.  Three passes: one call
 * fails with EIO; the disk is full (ENOSPC) from the Nth call on; the
 * device fails (EIO) from the Nth call on.  Each time:
 *
 *   - the call returns STORE_IO with the injected errno, or STORE_OK when
 *     the failed call was one whose failure does not matter (cleanup), and
 *     then the new state is complete;
 *   - after a failure the store holds exactly its last good state (the old
 *     view, its objects, nothing else), readable while the fault lasts.
 *     The one exception: a single-object write whose data is in place but
 *     whose directory sync failed (only fsync/syncfs can do that) may show
 *     the new object - never a torn or a missing one;
 *   - the store reopened (recovery) shows the same, and leaves no staging
 *     entry, journal record or temporary file behind;
 *   - with the fault lifted, the same operation succeeds.
 *
 * The tmpfs tests (a real full disk, 4 MiB; need root to mount, skipped
 * otherwise): a list too big for the space fails cleanly and the old view
 * stays, watch events on a full disk fail and keep the old objects, and
 * once space is freed the next replace and writes succeed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fault_fx.h"
#include "fault_util.h"
#include "storage/disk.h"
#include "testutil.h"

#define PAD	 200
#define ITER_MAX 400 /* calls of one kind in one operation, at most */
#define PRIV	 "_internal/yurthub-c"
#define N(a)	 (sizeof(a) / sizeof((a)[0]))

/* The last good state: view "a" listed at rv 10, and an object of
 * namespace "b" that no operation touches. */
static const struct fx_obj SEED[] = {{"cm-0", 10}, {"cm-1", 10}, {"cm-2", 10},
				     {"cm-3", 10}, {"cm-4", 10}, {"cm-5", 10}};
static const struct fx_obj SOLO[] = {{"solo", 10}};

/* ---- the operations ---- */

/* The relist: three unchanged (linked), one changed, two gone, two new. */
static const struct fx_obj RELIST[] = {{"cm-0", 10}, {"cm-1", 10}, {"cm-2", 10}, {"cm-3", 20},
				       {"cm-6", 20}, {"cm-7", 20}, {"cm-4", 0},	 {"cm-5", 0}};
static const struct fx_obj FIRST[] = {{"d-0", 5}, {"d-1", 5}};

struct op {
	const char *name;
	bool single; /* one object: its directory sync may fail after the rename */
	enum store_err (*run)(struct store *s);
	const char *(*differs_old)(struct store *s);
	const char *(*differs_new)(struct store *s);
};

/* View "a" listed at rv holding exactly objs, and "b"'s object untouched. */
static const char *view_a_is(struct store *s, uint64_t rv, const struct fx_obj *objs, size_t n)
{
	const char *why = fx_differs(s, "a", rv, objs, n, PAD, 1);
	return why ? why : fx_differs(s, "b", 0, SOLO, 1, PAD, 1);
}

static const char *seed_differs(struct store *s)
{
	return view_a_is(s, 10, SEED, N(SEED));
}

static enum store_err run_relist(struct store *s)
{
	return fx_replace(s, "a", 20, RELIST, N(RELIST), PAD);
}

static const char *relist_new(struct store *s)
{
	return view_a_is(s, 20, RELIST, N(RELIST));
}

/* Relists that change one object of six: deltas, moved into the tree
 * with T's copies kept aside until they are durable. */
static const struct fx_obj CHANGE_ONE[] = {{"cm-0", 10}, {"cm-1", 10}, {"cm-2", 10},
					   {"cm-3", 20}, {"cm-4", 10}, {"cm-5", 10}};
static const struct fx_obj DROP_ONE[] = {{"cm-0", 10}, {"cm-1", 10}, {"cm-2", 10},
					 {"cm-3", 10}, {"cm-4", 10}, {"cm-5", 0}};

static enum store_err run_change_one(struct store *s)
{
	return fx_replace(s, "a", 20, CHANGE_ONE, N(CHANGE_ONE), PAD);
}

static const char *change_one_new(struct store *s)
{
	return view_a_is(s, 20, CHANGE_ONE, N(CHANGE_ONE));
}

static enum store_err run_drop_one(struct store *s)
{
	return fx_replace(s, "a", 20, DROP_ONE, N(DROP_ONE), PAD);
}

static const char *drop_one_new(struct store *s)
{
	return view_a_is(s, 20, DROP_ONE, N(DROP_ONE));
}

static enum store_err run_first(struct store *s)
{
	return fx_replace(s, "d", 5, FIRST, N(FIRST), PAD);
}

static const char *first_old(struct store *s)
{
	const char *why = seed_differs(s);
	return why ? why : fx_differs(s, "d", 0, NULL, 0, PAD, 1);
}

static const char *first_new(struct store *s)
{
	const char *why = seed_differs(s);
	return why ? why : fx_differs(s, "d", 5, FIRST, N(FIRST), PAD, 1);
}

static enum store_err run_update(struct store *s)
{
	return fx_put(s, "a", "cm-1", 30, PAD);
}

static const char *update_new(struct store *s)
{
	struct fx_obj objs[N(SEED)];
	memcpy(objs, SEED, sizeof objs);
	objs[1].rv = 30;
	const char *why = fx_differs(s, "a", 10, objs, N(objs), PAD, 1);
	return why ? why : fx_differs(s, "b", 0, SOLO, 1, PAD, 1);
}

static const struct fx_obj NEWNS[] = {{"new-0", 30}};

static enum store_err run_create_ns(struct store *s)
{
	return fx_put(s, "c", "new-0", 30, PAD);
}

static const char *create_ns_old(struct store *s)
{
	const char *why = seed_differs(s);
	return why ? why : fx_differs(s, "c", 0, NULL, 0, PAD, 1);
}

static const char *create_ns_new(struct store *s)
{
	const char *why = seed_differs(s);
	return why ? why : fx_differs(s, "c", 0, NEWNS, 1, PAD, 1);
}

/* An object of a component never seen: resource directory, view marker. */
static enum store_err other_key(struct store *s, struct store_key *k)
{
	struct store_key_info info = {"other", "", "v1", "configmaps", "x", "o-0"};
	return store_key_build(s, &info, k);
}

/* As a watch ADDED: create, or update when a failed try left it there. */
static enum store_err run_create_comp(struct store *s)
{
	struct store_key k;
	enum store_err e = other_key(s, &k);
	char *data = fx_cm("x", "o-0", 40, PAD);
	if (e == STORE_OK)
		e = store_create(s, &k, data, strlen(data));
	if (e == STORE_EXISTS)
		e = store_update(s, &k, data, strlen(data), 40, NULL);
	free(data);
	store_key_free(&k);
	return e;
}

/* The first list of a resource the store never saw: the resource
 * directory is made for it.  A failed one must leave "never listed", never
 * a bare resource directory (which reads as the Go YurtHub's "everything
 * here was listed": an empty list instead of "not cached"). */
static const struct store_view FRESH = {"fresh", {"", "v1", "configmaps"}, "d", "", ""};

static enum store_err run_fresh(struct store *s)
{
	struct store_replace *r;
	enum store_err e = store_replace_begin(s, &FRESH, &r);
	char *data = fx_cm("d", "f-0", 7, PAD);
	struct store_item it = {"d", "f-0", 7, data, strlen(data)};
	if (e == STORE_OK && (e = store_replace_add(r, &it)) != STORE_OK)
		store_replace_abort(r);
	free(data);
	return e == STORE_OK ? store_replace_commit(r, 7) : e;
}

static int count_view(void *ctx, const struct store_view_state *v)
{
	(*(int *)ctx)++;
	return 0;
}

static const char *fresh_views(struct store *s, int want)
{
	int n = 0;
	enum store_err e = store_list_views(s, "fresh", &FRESH.gvr, count_view, &n);
	if (e != STORE_OK)
		return "the views of fresh/configmaps cannot be read";
	if (n != want)
		return want ? "fresh/configmaps: not exactly one view"
			    : "fresh/configmaps reads as listed, but was never listed";
	return NULL;
}

static const char *fresh_old(struct store *s)
{
	const char *why = seed_differs(s);
	return why ? why : fresh_views(s, 0);
}

static const char *fresh_new(struct store *s)
{
	struct store_view_state st;
	const char *why = seed_differs(s);
	if (!why)
		why = fresh_views(s, 1);
	if (!why && store_get_view(s, &FRESH, &st) == STORE_OK) {
		why = st.rv == 7 ? NULL : "fresh/configmaps/d: wrong resourceVersion";
		store_view_state_free(&st);
	} else if (!why) {
		why = "fresh/configmaps/d is not listed";
	}
	return why;
}

static const char *other_object(struct store *s, bool present)
{
	struct store_key k;
	struct buf b = BUF_INIT;
	enum store_err e = other_key(s, &k);
	if (e == STORE_OK)
		e = store_get(s, &k, &b);
	char *want = fx_cm("x", "o-0", 40, PAD);
	bool same = e == STORE_OK && !strcmp(b.data, want);
	free(want);
	buf_free(&b);
	store_key_free(&k);
	if (present)
		return same ? NULL : "other/x/o-0 missing or wrong";
	return e == STORE_NOT_FOUND ? NULL : "other/x/o-0 should not be there";
}

static const char *create_comp_old(struct store *s)
{
	const char *why = seed_differs(s);
	return why ? why : other_object(s, false);
}

static const char *create_comp_new(struct store *s)
{
	const char *why = seed_differs(s);
	return why ? why : other_object(s, true);
}

static enum store_err run_delete(struct store *s)
{
	return fx_del(s, "a", "cm-2");
}

static const char *delete_new(struct store *s)
{
	struct fx_obj objs[N(SEED)];
	memcpy(objs, SEED, sizeof objs);
	objs[2].rv = 0;
	const char *why = fx_differs(s, "a", 10, objs, N(objs), PAD, 1);
	return why ? why : fx_differs(s, "b", 0, SOLO, 1, PAD, 1);
}

static enum store_err run_bookmark(struct store *s)
{
	struct store_view v = {"agent", {"", "v1", "configmaps"}, "a", "", ""};
	return store_set_view_rv(s, &v, 25);
}

static const char *bookmark_new(struct store *s)
{
	const char *why = fx_differs(s, "a", 25, SEED, N(SEED), PAD, 1);
	return why ? why : fx_differs(s, "b", 0, SOLO, 1, PAD, 1);
}

static const struct op OPS[] = {
    {"relist", false, run_relist, seed_differs, relist_new},
    {"relist changing one", false, run_change_one, seed_differs, change_one_new},
    {"relist dropping one", false, run_drop_one, seed_differs, drop_one_new},
    {"first list", false, run_first, first_old, first_new},
    {"first list of a new component", false, run_fresh, fresh_old, fresh_new},
    {"update", true, run_update, seed_differs, update_new},
    {"create in a new namespace", true, run_create_ns, create_ns_old, create_ns_new},
    {"create in a new component", true, run_create_comp, create_comp_old, create_comp_new},
    {"delete", true, run_delete, seed_differs, delete_new},
    {"bookmark", true, run_bookmark, seed_differs, bookmark_new},
};

/* ---- a cache directory in the last good state ---- */

struct fixture {
	char top[4096];
	char cache[4200];
	struct store *s;
	bool mounted;
};

static void fixture_seed(struct fixture *f)
{
	assert_int_equal(fx_replace(f->s, "a", 10, SEED, N(SEED), PAD), STORE_OK);
	assert_int_equal(fx_put(f->s, "b", "solo", 10, PAD), STORE_OK);
	disk_store_drain(f->s);
	assert_null(seed_differs(f->s));
}

static void fixture_new(struct fixture *f, const char *tag)
{
	memset(f, 0, sizeof *f);
	assert_int_equal(test_mkdtemp(f->top, sizeof f->top, tag), 0);
	snprintf(f->cache, sizeof f->cache, "%s/cache", f->top);
	assert_int_equal(mkdir(f->cache, 0700), 0);
}

static void fixture_free(struct fixture *f)
{
	if (f->s)
		store_close(f->s);
	f->s = NULL;
	if (f->mounted)
		umount2(f->cache, MNT_DETACH);
	test_rm_rf(f->top);
}

/* Entries of a directory (not . and ..); -1 when it cannot be read. */
static int entries(const char *dir, const char *rel)
{
	char path[4400];
	snprintf(path, sizeof path, "%s/%s", dir, rel);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

/* Any ".tmp." file of an atomic write left below dir? */
static bool temp_files_below(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return false;
	bool found = false;
	struct dirent *de;
	while (!found && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char sub[4400];
		snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name);
		found = !strncmp(de->d_name, ".tmp.", 5) ||
			(de->d_type == DT_DIR && temp_files_below(sub));
	}
	closedir(d);
	return found;
}

static void reopen(struct fixture *f)
{
	store_close(f->s);
	f->s = fx_open(f->cache);
	assert_non_null(f->s);
}

static void assert_no_garbage(const struct fixture *f, const char *what)
{
	int staged = entries(f->cache, PRIV "/staging");
	int records = entries(f->cache, PRIV "/journal");
	if (staged != 0 || records != 0 || temp_files_below(f->cache))
		fail_msg("%s: after recovery %d staging entries, %d journal records%s", what,
			 staged, records, temp_files_below(f->cache) ? ", temporary files" : "");
}

/* ---- one fault ---- */

struct pass {
	const char *name;
	const char *const *calls;
	size_t ncalls;
	const char *err_name;
	int err;
	bool from; /* the Nth call and every one after it */
};

static const char *const ALL_CALLS[] = {"write", "open",      "mkdir",	"link",	  "rename",
					"fsync", "fdatasync", "syncfs", "unlink", "close"};
static const char *const SPACE_CALLS[] = {"write", "open", "mkdir", "link"};
static const char *const DEVICE_CALLS[] = {"fsync", "fdatasync", "syncfs", "rename", "write"};

static const struct pass PASSES[] = {
    {"one call fails with EIO", ALL_CALLS, N(ALL_CALLS), "EIO", EIO, false},
    {"the disk is full from the Nth call on", SPACE_CALLS, N(SPACE_CALLS), "ENOSPC", ENOSPC, true},
    {"the device fails from the Nth call on", DEVICE_CALLS, N(DEVICE_CALLS), "EIO", EIO, true},
};

static bool is_sync(const char *call)
{
	return !strcmp(call, "fsync") || !strcmp(call, "syncfs");
}

/* What a failed operation may leave: the old state, the new one (a single
 * object whose directory sync failed), or - when every rename fails from
 * some point after a replace's swap, so that the swap cannot be undone -
 * whatever recovery settles at the next start: the store keeps the record
 * of the replace (that is how it says so), and recovery rolls it forward.
 * Until then the tree is the new one, the view file the old one: objects
 * never older than listed, a view never claimed that was not listed. */
enum outcome { OLD, NEW, RECOVERY };

static enum outcome judge(const struct op *op, const struct pass *p, const char *call,
			  const char *spec, const struct fixture *f)
{
	if (!op->single && p->from && !strcmp(call, "rename") &&
	    entries(f->cache, PRIV "/journal") > 0)
		return RECOVERY;
	const char *old = op->differs_old(f->s);
	if (!old)
		return OLD;
	const char *now = op->differs_new(f->s);
	if (op->single && is_sync(call) && !now)
		return NEW; /* data in place, its directory sync failed */
	fail_msg("%s with %s failed but the last good state is gone: %s", op->name, spec, old);
	return OLD;
}

static const char *differs_after_recovery(const struct op *op, enum outcome state, struct store *s)
{
	if (state == OLD)
		return op->differs_old(s);
	if (state == NEW)
		return op->differs_new(s);
	const char *why = op->differs_old(s);
	return why && op->differs_new(s) ? why : NULL;
}

/* YH_FAULT_TEST_TRACES=<dir>: the calls of each faulted operation, one
 * trace file per fault, for finding out what a failure did. */
static void trace_start(const struct op *op, const char *spec)
{
	const char *dir = getenv("YH_FAULT_TEST_TRACES");
	if (!dir || !*dir)
		return;
	char path[4096];
	snprintf(path, sizeof path, "%s/%s %s.trace", dir, op->name, spec);
	fault_trace(path);
}

/* Fail the nth call of this kind; false when the operation made fewer. */
static bool one_fault(const struct op *op, const struct pass *p, const char *call, int nth)
{
	char spec[128];
	snprintf(spec, sizeof spec, "%s:%d%s:%s", call, nth, p->from ? "+" : "", p->err_name);
	struct fixture f;
	fixture_new(&f, "finj");
	assert_non_null(f.s = fx_open(f.cache));
	fixture_seed(&f);

	assert_int_equal(fault_set(spec, f.cache), 0);
	trace_start(op, spec);
	enum store_err e = op->run(f.s);
	int err = store_errno();
	disk_store_drain(f.s);
	unsigned long hits = fault_hits();
	fault_trace(NULL);
	enum outcome state = NEW;
	if (hits && e != STORE_OK) {
		if (e != STORE_IO || err != p->err)
			fail_msg("%s with %s: %s (errno %d), want STORE_IO with %s", op->name, spec,
				 store_strerror(e), err, p->err_name);
		state = judge(op, p, call, spec, &f); /* read while the fault lasts */
	} else {
		/* no fault, or one whose failure does not matter: all done */
		if (e != STORE_OK)
			fail_msg("%s with %s: %s", op->name, spec, store_strerror(e));
		const char *why = op->differs_new(f.s);
		if (why)
			fail_msg("%s with %s succeeded, but: %s", op->name, spec, why);
	}
	fault_clear();

	reopen(&f);
	const char *why = differs_after_recovery(op, state, f.s);
	if (why)
		fail_msg("%s with %s, after recovery: %s", op->name, spec, why);
	assert_no_garbage(&f, spec);
	if (hits) {
		e = op->run(f.s);
		if (e != STORE_OK || (why = op->differs_new(f.s)))
			fail_msg("%s after %s was lifted: %s %s", op->name, spec, store_strerror(e),
				 why ? why : "");
	}
	fixture_free(&f);
	return hits > 0;
}

struct job {
	const struct op *op;
	const struct pass *pass;
};

static void test_every_call_fails(void **state)
{
	const struct job *j = *state;
	if (!fault_loaded()) {
		printf("SKIPPED: the fault injector could not be preloaded\n");
		skip();
	}
	unsigned faults = 0;
	for (size_t c = 0; c < j->pass->ncalls; c++) {
		int nth = 1;
		while (nth <= ITER_MAX && one_fault(j->op, j->pass, j->pass->calls[c], nth))
			nth++;
		assert_true(nth <= ITER_MAX);
		faults += (unsigned)nth - 1;
	}
	printf("%s, %s: %u calls failed in turn\n", j->op->name, j->pass->name, faults);
	/* The injector really reached the store (a delete writes nothing, so
	 * "disk full" has nothing to fail in it). */
	if (j->pass == &PASSES[0])
		assert_true(faults > 0);
}

/* ---- the two-rename fallback ---- */

/* Without RENAME_EXCHANGE a relist moves the old tree aside, then the new
 * one in.  When the second rename fails and so does putting the old tree
 * back, the old tree is all there is: its journal record must stay, so that
 * the next start puts it back, and no object of the view is lost. */
static void test_fallback_put_back_fails(void **state)
{
	(void)state;
	if (!fault_loaded()) {
		printf("SKIPPED: the fault injector could not be preloaded\n");
		skip();
	}
	struct fixture f;
	fixture_new(&f, "fput");
	assert_non_null(f.s = fx_open(f.cache));
	fixture_seed(&f);
	/* renames: 1 the exchange (refused), 2 T aside, 3 N in, 4 T back */
	assert_int_equal(fault_set("exchange:*:EINVAL,rename:3+:EIO", f.cache), 0);
	assert_int_equal(run_relist(f.s), STORE_IO);
	disk_store_drain(f.s);
	assert_true(fault_hits() >= 3);
	fault_clear();
	assert_int_equal(entries(f.cache, PRIV "/journal"), 1);
	reopen(&f);
	const char *why = seed_differs(f.s);
	if (why)
		fail_msg("after recovery: %s", why);
	assert_no_garbage(&f, "fallback put-back");
	assert_int_equal(run_relist(f.s), STORE_OK);
	assert_null(relist_new(f.s));
	fixture_free(&f);
}

/* ---- a real full disk ---- */

static bool mount_small(struct fixture *f, const char *size)
{
	char opts[64];
	snprintf(opts, sizeof opts, "size=%s,mode=0700", size);
	if (mount("tmpfs", f->cache, "tmpfs", 0, opts) < 0) {
		printf("SKIPPED: cannot mount a %s tmpfs (%s); a real full disk needs root\n", size,
		       strerror(errno));
		return false;
	}
	f->mounted = true;
	return true;
}

/* Fill the file system up; the filler is removed to give the space back. */
static void fill(const struct fixture *f, char *filler, size_t size)
{
	snprintf(filler, size, "%s/filler", f->cache);
	int fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	static char block[16384];
	memset(block, 'f', sizeof block);
	size_t n = sizeof block;
	while (n >= 16) {
		if (write(fd, block, n) < 0)
			n /= 2;
	}
	close(fd);
}

static void test_tmpfs_list_too_big(void **state)
{
	struct fixture f;
	fixture_new(&f, "ftmpfs");
	if (!mount_small(&f, "4m")) {
		fixture_free(&f);
		skip();
	}
	assert_non_null(f.s = fx_open(f.cache));
	fixture_seed(&f);
	/* 2,500 objects of 2 KB: 5 MB, more than the file system holds */
	enum { BIG = 2500 };
	struct fx_obj *big = calloc(BIG, sizeof *big);
	char(*names)[16] = calloc(BIG, sizeof *names);
	for (size_t i = 0; i < BIG; i++) {
		snprintf(names[i], sizeof names[i], "cm-%zu", i);
		big[i] = (struct fx_obj){names[i], 20};
	}
	assert_int_equal(fx_replace(f.s, "a", 20, big, BIG, 2000), STORE_IO);
	assert_int_equal(store_errno(), ENOSPC);
	disk_store_drain(f.s);
	assert_null(seed_differs(f.s));
	reopen(&f);
	assert_null(seed_differs(f.s));
	assert_no_garbage(&f, "list too big");
	/* what fits goes in: the space of the failed attempt was given back */
	assert_int_equal(fx_replace(f.s, "a", 20, big, 600, 2000), STORE_OK);
	assert_null(fx_differs(f.s, "a", 20, big, 600, 2000, 1));
	disk_store_drain(f.s);
	reopen(&f);
	assert_null(fx_differs(f.s, "a", 20, big, 600, 2000, 1));
	free(big);
	free(names);
	fixture_free(&f);
}

static void test_tmpfs_full_then_freed(void **state)
{
	struct fixture f;
	fixture_new(&f, "ftmpfs");
	if (!mount_small(&f, "4m")) {
		fixture_free(&f);
		skip();
	}
	assert_non_null(f.s = fx_open(f.cache));
	fixture_seed(&f);
	char filler[4400];
	fill(&f, filler, sizeof filler);
	/* watch events and a relist on a full disk: errors, the old state stays */
	assert_int_equal(fx_put(f.s, "a", "cm-1", 30, 8000), STORE_IO);
	assert_int_equal(store_errno(), ENOSPC);
	assert_int_equal(fx_put(f.s, "e", "new", 30, 8000), STORE_IO);
	assert_int_equal(run_relist(f.s), STORE_IO);
	assert_int_equal(store_errno(), ENOSPC);
	disk_store_drain(f.s);
	assert_null(seed_differs(f.s));
	reopen(&f);
	assert_null(seed_differs(f.s));
	/* space returns: the next replace and events are stored */
	assert_int_equal(unlink(filler), 0);
	assert_int_equal(run_relist(f.s), STORE_OK);
	assert_null(relist_new(f.s));
	assert_int_equal(fx_put(f.s, "a", "cm-6", 40, PAD), STORE_OK);
	disk_store_drain(f.s);
	reopen(&f);
	struct fx_obj after[N(RELIST)];
	memcpy(after, RELIST, sizeof after);
	after[4].rv = 40;
	assert_null(fx_differs(f.s, "a", 20, after, N(after), PAD, 1));
	assert_no_garbage(&f, "full then freed");
	fixture_free(&f);
}

/* Hundreds of cache directories are made and synced: on a tmpfs, where a
 * sync costs nothing (the faults are the point here, not the disk) -
 * /dev/shm, or one mounted for the test when running as root; else TMPDIR
 * as it is (slower).  YH_FAULT_TMPDIR overrides. */
static char private_tmpfs[4096];

static void unmount_private(void)
{
	if (private_tmpfs[0] && umount2(private_tmpfs, MNT_DETACH) == 0)
		rmdir(private_tmpfs);
}

static void fast_tmpdir(void)
{
	struct statfs sfs;
	const char *want = getenv("YH_FAULT_TMPDIR");
	if (want && *want) {
		setenv("TMPDIR", want, 1);
	} else if (statfs("/dev/shm", &sfs) == 0 && sfs.f_type == TMPFS_MAGIC &&
		   access("/dev/shm", W_OK) == 0) {
		setenv("TMPDIR", "/dev/shm", 1);
	} else if (test_mkdtemp(private_tmpfs, sizeof private_tmpfs, "fault-tmpfs") == 0) {
		if (mount("tmpfs", private_tmpfs, "tmpfs", 0, "size=256m,mode=0700") == 0) {
			setenv("TMPDIR", private_tmpfs, 1);
			atexit(unmount_private);
		} else {
			rmdir(private_tmpfs);
			private_tmpfs[0] = '\0';
		}
	}
}

int main(int argc, char **argv)
{
	(void)argc;
	if (!fault_preload(argv))
		printf("the fault injector is not loaded: its tests are skipped\n");
	fast_tmpdir();
	struct job jobs[N(OPS) * N(PASSES)];
	struct CMUnitTest tests[N(OPS) * N(PASSES) + 3];
	char names[N(OPS) * N(PASSES)][128];
	size_t n = 0;
	for (size_t p = 0; p < N(PASSES); p++)
		for (size_t o = 0; o < N(OPS); o++, n++) {
			jobs[n] = (struct job){&OPS[o], &PASSES[p]};
			snprintf(names[n], sizeof names[n], "%s: %s", OPS[o].name, PASSES[p].name);
			tests[n] = (struct CMUnitTest){names[n], test_every_call_fails, NULL, NULL,
						       &jobs[n]};
		}
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_fallback_put_back_fails);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_tmpfs_list_too_big);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_tmpfs_full_then_freed);
	return _cmocka_run_group_tests("disk faults (injected)", tests, n, NULL, NULL);
}
