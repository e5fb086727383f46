/*
 * test_disk_faults.c - a full disk and hostile names.
 *
 * ENOSPC: the store lives on a tmpfs of 1 MiB (mounted here when running as
 * root; skipped with a message otherwise).  A replace that does not fit fails
 * with the error and leaves the old view exactly as it was; a single write
 * on a full disk fails and keeps the old object; writes resume once space
 * returns.
 * Traversal: every unsafe name is refused and nothing appears outside the
 * cache directory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/disk.h"
#include "testutil.h"
#include "util/fsutil.h"

struct fx {
	char top[4096];	  /* what the test owns */
	char cache[4200]; /* the cache directory inside it */
	bool mounted;
	struct store *s;
};

static int teardown(void **state)
{
	struct fx *f = *state;
	if (f->s)
		store_close(f->s);
	if (f->mounted)
		umount2(f->cache, MNT_DETACH);
	test_rm_rf(f->top);
	free(f);
	return 0;
}

static char *cm(const char *ns, const char *name, uint64_t rv, size_t pad)
{
	char *padding = malloc(pad + 1);
	memset(padding, 'p', pad);
	padding[pad] = '\0';
	char *s;
	assert_true(
	    asprintf(&s,
		     "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\","
		     "\"namespace\":\"%s\",\"resourceVersion\":\"%llu\"},\"data\":{\"p\":\"%s\"}}",
		     name, ns, (unsigned long long)rv, padding) > 0);
	free(padding);
	return s;
}

struct batch {
	struct store_item *v;
	char **data, **names;
	size_t n;
};

static void batch_make(struct batch *b, size_t n, uint64_t rv, size_t pad)
{
	b->n = n;
	b->v = calloc(n, sizeof *b->v);
	b->data = calloc(n, sizeof *b->data);
	b->names = calloc(n, sizeof *b->names);
	for (size_t i = 0; i < n; i++) {
		assert_true(asprintf(&b->names[i], "cm-%zu", i) > 0);
		b->data[i] = cm("a", b->names[i], rv, pad);
		b->v[i] = (struct store_item){"a", b->names[i], rv, b->data[i], strlen(b->data[i])};
	}
}

static void batch_free(struct batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		free(b->data[i]);
		free(b->names[i]);
	}
	free(b->v);
	free(b->data);
	free(b->names);
}

static int setup_tmpfs(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	*state = f;
	if (test_mkdtemp(f->top, sizeof f->top, "enospc") < 0)
		return -1;
	snprintf(f->cache, sizeof f->cache, "%s/cache", f->top);
	if (mkdir(f->cache, 0700) < 0)
		return -1;
	if (geteuid() != 0)
		return 0;
	if (mount("tmpfs", f->cache, "tmpfs", 0, "size=1m,mode=0700") == 0)
		f->mounted = true;
	return 0;
}

/* rv of every object in namespace a, which must all carry rv want */
static int check_view(struct store *s, uint64_t want, size_t n)
{
	struct store_view v = {"agent", {"", "v1", "configmaps"}, "a", "", ""};
	struct store_view_state st;
	assert_int_equal(store_get_view(s, &v, &st), STORE_OK);
	assert_int_equal(st.rv, want);
	store_view_state_free(&st);
	for (size_t i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof name, "cm-%zu", i);
		struct store_key_info info = {"agent", "", "v1", "configmaps", "a", name};
		struct store_key k;
		assert_int_equal(store_key_build(s, &info, &k), STORE_OK);
		struct buf b = BUF_INIT;
		assert_int_equal(store_get(s, &k, &b), STORE_OK);
		char *expect = cm("a", name, want, 500);
		assert_string_equal(b.data, expect);
		free(expect);
		buf_free(&b);
		store_key_free(&k);
	}
	return 0;
}

static void fill_disk(const char *dir, char *filler, size_t size)
{
	snprintf(filler, size, "%s/filler", dir);
	int fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	char block[4096];
	memset(block, 'f', sizeof block);
	while (write(fd, block, sizeof block) > 0)
		;
	close(fd);
}

static void test_enospc_keeps_old_view(void **state)
{
	struct fx *f = *state;
	if (!f->mounted) {
		printf("SKIPPED: ENOSPC test needs root to mount a small tmpfs\n");
		skip();
	}
	char *err = NULL;
	f->s = disk_store_open(f->cache, 0, NULL, &err);
	assert_non_null(f->s);
	struct store_view v = {"agent", {"", "v1", "configmaps"}, "a", "", ""};

	struct batch small;
	batch_make(&small, 50, 10, 500);
	assert_int_equal(store_replace_view(f->s, &v, 10, small.v, small.n), STORE_OK);
	batch_free(&small);
	check_view(f->s, 10, 50);

	/* 2,000 objects of 2 KB do not fit in 1 MiB */
	struct batch big;
	batch_make(&big, 2000, 20, 2000);
	assert_int_equal(store_replace_view(f->s, &v, 20, big.v, big.n), STORE_IO);
	assert_int_equal(store_errno(), ENOSPC);
	batch_free(&big);
	disk_store_drain(f->s);
	check_view(f->s, 10, 50);

	/* a single write on a full disk fails and keeps the old object */
	char filler[4400];
	fill_disk(f->cache, filler, sizeof filler);
	struct store_key_info info = {"agent", "", "v1", "configmaps", "a", "cm-3"};
	struct store_key k;
	assert_int_equal(store_key_build(f->s, &info, &k), STORE_OK);
	char *newer = cm("a", "cm-3", 30, 8000);
	assert_int_equal(store_update(f->s, &k, newer, strlen(newer), 30, NULL), STORE_IO);
	assert_int_equal(store_errno(), ENOSPC);
	check_view(f->s, 10, 50);

	/* space returns: writes resume */
	assert_int_equal(unlink(filler), 0);
	assert_int_equal(store_update(f->s, &k, newer, strlen(newer), 30, NULL), STORE_OK);
	free(newer);
	store_key_free(&k);
	struct batch again;
	batch_make(&again, 60, 40, 500);
	assert_int_equal(store_replace_view(f->s, &v, 40, again.v, again.n), STORE_OK);
	batch_free(&again);
	check_view(f->s, 40, 60);

	/* nothing of the failed attempts is left behind */
	store_close(f->s);
	f->s = disk_store_open(f->cache, 0, NULL, &err);
	assert_non_null(f->s);
	char staging[4400];
	snprintf(staging, sizeof staging, "%s/_internal/yurthub-c/staging", f->cache);
	assert_int_equal(test_count_files(staging), 0);
}

/* ---- traversal ---- */

static int setup_plain(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	*state = f;
	if (test_mkdtemp(f->top, sizeof f->top, "traversal") < 0)
		return -1;
	snprintf(f->cache, sizeof f->cache, "%s/cache", f->top);
	char *err = NULL;
	f->s = disk_store_open(f->cache, 0, NULL, &err);
	return f->s ? 0 : -1;
}

static void test_unsafe_names_refused(void **state)
{
	struct fx *f = *state;
	const char *bad[] = {"",    ".",    "..",	"../outside", "a/../../x",
			     "x/y", "/etc", "tmp_evil", "nl\nname",   "\x7f"};
	char long_name[300];
	memset(long_name, 'n', sizeof long_name - 1);
	long_name[sizeof long_name - 1] = '\0';
	const char *json = "{\"metadata\":{\"name\":\"x\"}}";
	for (size_t i = 0; i <= sizeof bad / sizeof bad[0]; i++) {
		const char *b = i < sizeof bad / sizeof bad[0] ? bad[i] : long_name;
		struct store_key k;
		/* as a name, a namespace, a component, a resource, a version, a group */
		struct store_key_info as_name = {"agent", "", "v1", "configmaps", "ns", b};
		struct store_key_info as_ns = {"agent", "", "v1", "configmaps", b, "x"};
		struct store_key_info as_comp = {b, "", "v1", "configmaps", "ns", "x"};
		struct store_key_info as_res = {"agent", "", "v1", b, "ns", "x"};
		struct store_key_info as_ver = {"agent", "", b, "configmaps", "ns", "x"};
		struct store_key_info as_grp = {"agent", b, "v1", "configmaps", "ns", "x"};
		const struct store_key_info *all[] = {&as_name, &as_ns,	 &as_comp,
						      &as_res,	&as_ver, &as_grp};
		for (size_t j = 0; j < 6; j++) {
			enum store_err e = store_key_build(f->s, all[j], &k);
			if (e == STORE_OK) {
				/* only an empty name/namespace/group may build (a root
				 * key, a cluster-scoped key, the core group) */
				assert_true(!*b && (j == 0 || j == 1 || j == 5));
				store_key_free(&k);
			} else {
				assert_true(e == STORE_BAD_KEY || e == STORE_EMPTY_KEY);
			}
		}
		/* as an item of a list, and as the view's namespace */
		struct store_view v = {"agent", {"", "v1", "configmaps"}, "", "", ""};
		struct store_item it = {"ns", b, 1, json, strlen(json)};
		assert_int_equal(store_replace_view(f->s, &v, 1, &it, 1), STORE_BAD_KEY);
		struct store_item it2 = {b, "x", 1, json, strlen(json)};
		if (*b)
			assert_int_equal(store_replace_view(f->s, &v, 1, &it2, 1), STORE_BAD_KEY);
		struct store_view vns = {"agent", {"", "v1", "configmaps"}, b, "", ""};
		if (*b)
			assert_int_equal(store_replace_view(f->s, &vns, 1, NULL, 0), STORE_BAD_KEY);
		/* as a component to delete */
		if (*b)
			assert_int_equal(store_delete_component(f->s, b), STORE_BAD_KEY);
	}
	const char *bad_paths[] = {"/../outside", "/api/../../x", "version", "/a//b",
				   "/a/./b",	  "/a b",	  "/x\ny"};
	for (size_t i = 0; i < sizeof bad_paths / sizeof bad_paths[0]; i++)
		assert_int_equal(store_save_cluster_info(f->s, bad_paths[i], json, strlen(json)),
				 STORE_BAD_KEY);
	/* the test's directory holds the cache and nothing else; the cache holds
	 * only the hub's private directory */
	assert_int_equal(test_count_files(f->top), 1); /* the lock file */
	assert_true(test_exists(f->top, "cache/_internal/yurthub-c/lock"));
	assert_false(test_exists(f->top, "outside"));
	assert_false(test_exists(f->top, "cache/agent"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_enospc_keeps_old_view, setup_tmpfs, teardown),
	    cmocka_unit_test_setup_teardown(test_unsafe_names_refused, setup_plain, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
