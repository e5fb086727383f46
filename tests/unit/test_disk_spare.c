/*
 * test_disk_spare.c - the disk store keeps a replaced tree's inodes for the
 * next trees (src/storage/disk_spare.c): a relist that changed everything
 * creates and frees no inode, a file a live tree shares is never emptied, a
 * reader that began before a swap keeps the old files as they were, and the
 * pool outlives a restart.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/disk.h"
#include "testutil.h"
#include "util/buf.h"

#define N	 300
#define TREE	 "agent/configmaps.v1.core/a"
#define POOL_DIR "_internal/yurthub-c/spare"

struct fx {
	char dir[4096];
	struct store *s;
	char *names[N], *data[N];
	struct store_item items[N];
};

static struct store *open_dir(const char *dir)
{
	char *err = NULL;
	/* kept whatever the file system (the store decides by itself, by
	 * whether a journal makes spares useless there) */
	struct store *s = disk_store_open(dir, DISK_SPARES, NULL, &err);
	if (!s)
		fprintf(stderr, "open: %s\n", err);
	free(err);
	return s;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	if (test_mkdtemp(f->dir, sizeof f->dir, "spare") < 0)
		return -1;
	f->s = open_dir(f->dir);
	for (int i = 0; i < N; i++)
		if (asprintf(&f->names[i], "cm-%05d", i) < 0)
			return -1;
	*state = f;
	return f->s ? 0 : -1;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	if (f->s)
		store_close(f->s);
	test_rm_rf(f->dir);
	for (int i = 0; i < N; i++) {
		free(f->names[i]);
		free(f->data[i]);
	}
	free(f);
	return 0;
}

/* Objects from..N-1 at rv (the others as they were), as a list at rv. */
static void relist(struct fx *f, int from, uint64_t rv)
{
	for (int i = from; i < N; i++) {
		free(f->data[i]);
		assert_true(
		    asprintf(&f->data[i],
			     "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{"
			     "\"name\":\"%s\",\"namespace\":\"a\",\"resourceVersion\":\"%llu\"},"
			     "\"data\":{\"v\":\"%s\"}}",
			     f->names[i], (unsigned long long)rv,
			     rv % 2 ? "odd" : "even, and a little longer") > 0);
		f->items[i] =
		    (struct store_item){"a", f->names[i], rv, f->data[i], strlen(f->data[i])};
	}
	struct store_view v = {"agent", {"", "v1", "configmaps"}, "a", "", ""};
	assert_int_equal(store_replace_view(f->s, &v, rv, f->items, N), STORE_OK);
	disk_store_drain(f->s); /* the old tree handled */
}

/* The inode of every object file, in name order. */
static void inodes(struct fx *f, ino_t *out)
{
	for (int i = 0; i < N; i++) {
		struct buf p = BUF_INIT;
		buf_printf(&p, "%s/%s/%s", f->dir, TREE, f->names[i]);
		struct stat st;
		assert_int_equal(lstat(p.data, &st), 0);
		out[i] = st.st_ino;
		buf_free(&p);
	}
}

static int cmp_ino(const void *a, const void *b)
{
	ino_t x = *(const ino_t *)a, y = *(const ino_t *)b;
	return x < y ? -1 : x > y;
}

/* Are a and b the same inodes, in any order? */
static bool same_set(const ino_t *a, const ino_t *b)
{
	ino_t x[N], y[N];
	memcpy(x, a, sizeof x);
	memcpy(y, b, sizeof y);
	qsort(x, N, sizeof x[0], cmp_ino);
	qsort(y, N, sizeof y[0], cmp_ino);
	return !memcmp(x, y, sizeof x);
}

static int overlap(const ino_t *a, const ino_t *b)
{
	int n = 0;
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++)
			n += a[i] == b[j];
	return n;
}

/* Files in the pool; every one must be empty. */
static int pool_files(struct fx *f)
{
	struct buf p = BUF_INIT;
	buf_printf(&p, "%s/%s", f->dir, POOL_DIR);
	DIR *dp = opendir(p.data);
	int n = 0;
	struct dirent *de;
	while (dp && (de = readdir(dp)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		struct stat st;
		assert_int_equal(fstatat(dirfd(dp), de->d_name, &st, 0), 0);
		assert_true(S_ISREG(st.st_mode));
		assert_int_equal(st.st_size, 0); /* a spare holds no data */
		n++;
	}
	if (dp)
		closedir(dp);
	buf_free(&p);
	return n;
}

/* Every object file holds exactly what the last list said. */
static void check_contents(struct fx *f)
{
	for (int i = 0; i < N; i++) {
		char rel[256];
		snprintf(rel, sizeof rel, "%s/%s", TREE, f->names[i]);
		char *got = test_read_file(f->dir, rel);
		assert_non_null(got);
		assert_string_equal(got, f->data[i]);
		free(got);
	}
}

static void test_churned_relist_reuses_the_old_inodes(void **state)
{
	struct fx *f = *state;
	ino_t gen1[N], gen2[N], gen3[N];
	relist(f, 0, 1);
	inodes(f, gen1);
	relist(f, 0, 2); /* every object newer: a new tree, the old one retired */
	inodes(f, gen2);
	assert_int_equal(overlap(gen1, gen2), 0);
	assert_int_equal(pool_files(f), N); /* generation 1, emptied */
	relist(f, 0, 3);
	inodes(f, gen3);
	assert_true(same_set(gen3, gen1)); /* made of generation 1's inodes */
	check_contents(f);
	assert_int_equal(pool_files(f), N); /* now generation 2's */
}

static void test_a_file_a_live_tree_shares_is_never_emptied(void **state)
{
	struct fx *f = *state;
	relist(f, 0, 1);
	/* a third changed: a new tree where the other two thirds are hard
	 * links to the old files, which the retired tree shares */
	relist(f, 2 * N / 3, 2);
	assert_int_equal(pool_files(f), N / 3);
	check_contents(f);
	relist(f, 0, 3);
	check_contents(f);
}

static void test_a_reader_keeps_the_retired_tree_as_it_was(void **state)
{
	struct fx *f = *state;
	relist(f, 0, 1);
	/* an offline list under way, begun before the relist: its files stay
	 * as they were (the old tree is removed, not emptied) */
	struct store_key root;
	struct store_key_info info = {"agent", "", "v1", "configmaps", "a", ""};
	assert_int_equal(store_key_build(f->s, &info, &root), STORE_OK);
	struct store_iter *it = NULL;
	assert_int_equal(store_iter_begin(f->s, &root, NULL, &it), STORE_OK);
	const struct store_key *k;
	struct buf b = BUF_INIT;
	assert_int_equal(store_iter_next(it, &k, &b), STORE_OK);
	relist(f, 0, 2);
	assert_int_equal(pool_files(f), 0);
	/* whatever it still reads is a whole object under its own name */
	for (enum store_err e; (e = store_iter_next(it, &k, &b)) == STORE_OK;) {
		char want[64];
		snprintf(want, sizeof want, "\"name\":\"%s\"", k->name);
		assert_non_null(strstr(buf_cstr(&b), want));
	}
	store_iter_free(it);
	buf_free(&b);
	store_key_free(&root);
	relist(f, 0, 3); /* no reader left: the next retired tree is kept */
	assert_int_equal(pool_files(f), N);
	check_contents(f);
}

static void test_the_pool_outlives_a_restart(void **state)
{
	struct fx *f = *state;
	ino_t gen1[N], gen3[N];
	relist(f, 0, 1);
	inodes(f, gen1);
	relist(f, 0, 2);
	store_close(f->s);
	/* what is not a spare of ours goes at the next start */
	char junk[4200];
	snprintf(junk, sizeof junk, "%s/%s/not-a-number", f->dir, POOL_DIR);
	FILE *fp = fopen(junk, "w");
	assert_non_null(fp);
	fputs("junk", fp);
	fclose(fp);
	snprintf(junk, sizeof junk, "%s/%s/777", f->dir, POOL_DIR);
	assert_int_equal(mkdir(junk, 0700), 0);
	f->s = open_dir(f->dir);
	assert_non_null(f->s);
	assert_int_equal(pool_files(f), N);
	relist(f, 0, 3);
	inodes(f, gen3);
	assert_true(same_set(gen3, gen1));
	check_contents(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_churned_relist_reuses_the_old_inodes, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_a_file_a_live_tree_shares_is_never_emptied, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_a_reader_keeps_the_retired_tree_as_it_was, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_the_pool_outlives_a_restart, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
