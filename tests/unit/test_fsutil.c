/*
 * test_fsutil.c - the file-system helpers (read limits, refusal of symbolic
 * links and non-regular files, mkdir -p, rm -rf, atomic writes) and the
 * string map.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "util/buf.h"
#include "util/fsutil.h"
#include "util/strmap.h"

/* ---- fixture: a fresh directory per test, open as dirfd ---- */

struct fx {
	char dir[512];	 /* the test's directory */
	char outer[512]; /* a directory outside it, for symlink targets */
	int fd;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	if (!f)
		return -1;
	if (test_mkdtemp(f->dir, sizeof f->dir, "fsutil") < 0 ||
	    test_mkdtemp(f->outer, sizeof f->outer, "fsutil-outer") < 0) {
		free(f);
		return -1;
	}
	f->fd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (f->fd < 0) {
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	close(f->fd);
	test_rm_rf(f->dir);
	test_rm_rf(f->outer);
	free(f);
	return 0;
}

static char *path_in(const char *dir, const char *rel)
{
	char *p = NULL;
	assert_true(asprintf(&p, "%s/%s", dir, rel) > 0);
	return p;
}

static void make_symlink(const char *target, const char *dir, const char *rel)
{
	char *p = path_in(dir, rel);
	assert_int_equal(symlink(target, p), 0);
	free(p);
}

static void make_dir(const char *dir, const char *rel)
{
	char *p = path_in(dir, rel);
	assert_int_equal(mkdir(p, 0700), 0);
	free(p);
}

/* Names in dir (without . and ..), sorted, joined with ','. */
static char *list_dir(const char *dir)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	char *names[256];
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		assert_true(n < 256);
		names[n++] = strdup(de->d_name);
	}
	closedir(d);
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (strcmp(names[j], names[i]) < 0) {
				char *t = names[i];
				names[i] = names[j];
				names[j] = t;
			}
	struct buf b = BUF_INIT;
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(buf_printf(&b, "%s%s", i ? "," : "", names[i]), 0);
		free(names[i]);
	}
	return buf_steal(&b);
}

static void assert_dir_listing(const char *dir, const char *want)
{
	char *got = list_dir(dir);
	assert_string_equal(got, want);
	free(got);
}

static void assert_file_content(const char *dir, const char *rel, const char *want)
{
	char *got = test_read_file(dir, rel);
	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static mode_t mode_of(const char *dir, const char *rel)
{
	char *p = path_in(dir, rel);
	struct stat st;
	assert_int_equal(lstat(p, &st), 0);
	free(p);
	return st.st_mode;
}

/* ---- fs_write_all ---- */

static void test_write_all(void **state)
{
	struct fx *f = *state;
	int fd = openat(f->fd, "w", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	size_t n = 3 << 20;
	char *data = malloc(n);
	assert_non_null(data);
	for (size_t i = 0; i < n; i++)
		data[i] = (char)(i % 251);
	assert_int_equal(fs_write_all(fd, data, n), 0);
	assert_int_equal(fs_write_all(fd, data, 0), 0);
	close(fd);
	struct buf b = BUF_INIT;
	assert_int_equal(fs_read_file_at(f->fd, "w", &b, n), 0);
	assert_int_equal(b.len, n);
	assert_memory_equal(b.data, data, n);
	buf_free(&b);
	free(data);
	/* A read-only descriptor: the errno comes back negated. */
	fd = openat(f->fd, "w", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fs_write_all(fd, "x", 1), -EBADF);
	close(fd);
}

/* ---- fs_read_file_at ---- */

static void test_read_small_file(void **state)
{
	struct fx *f = *state;
	assert_int_equal(test_write_file(f->dir, "a", "hello"), 0);
	struct buf b = BUF_INIT;
	assert_int_equal(fs_read_file_at(f->fd, "a", &b, 1024), 0);
	assert_int_equal(b.len, 5);
	assert_string_equal(b.data, "hello");
	/* Reading again into the same buffer replaces, never appends. */
	assert_int_equal(test_write_file(f->dir, "b", "xy"), 0);
	assert_int_equal(fs_read_file_at(f->fd, "b", &b, 1024), 0);
	assert_int_equal(b.len, 2);
	assert_string_equal(b.data, "xy");
	buf_free(&b);
}

static void test_read_empty_file(void **state)
{
	struct fx *f = *state;
	assert_int_equal(test_write_file(f->dir, "empty", ""), 0);
	struct buf b = BUF_INIT;
	assert_int_equal(buf_append_str(&b, "stale"), 0);
	assert_int_equal(fs_read_file_at(f->fd, "empty", &b, 0), 0);
	assert_int_equal(b.len, 0);
	assert_string_equal(buf_cstr(&b), "");
	buf_free(&b);
}

static void test_read_limits(void **state)
{
	struct fx *f = *state;
	char data[10001];
	memset(data, 'q', 10000);
	data[10000] = '\0';
	assert_int_equal(test_write_file(f->dir, "big", data), 0);
	struct buf b = BUF_INIT;
	/* Exactly max bytes is fine. */
	assert_int_equal(fs_read_file_at(f->fd, "big", &b, 10000), 0);
	assert_int_equal(b.len, 10000);
	assert_memory_equal(b.data, data, 10000);
	/* One byte over is -EFBIG. */
	assert_int_equal(fs_read_file_at(f->fd, "big", &b, 9999), -EFBIG);
	assert_int_equal(fs_read_file_at(f->fd, "big", &b, 0), -EFBIG);
	assert_int_equal(fs_read_file_at(f->fd, "big", &b, 1), -EFBIG);
	buf_free(&b);
}

static void test_read_nested_path(void **state)
{
	struct fx *f = *state;
	assert_int_equal(test_write_file(f->dir, "x/y/z", "deep"), 0);
	struct buf b = BUF_INIT;
	assert_int_equal(fs_read_file_at(f->fd, "x/y/z", &b, 100), 0);
	assert_string_equal(b.data, "deep");
	/* AT_FDCWD with an absolute path works too. */
	char *abs = path_in(f->dir, "x/y/z");
	assert_int_equal(fs_read_file_at(AT_FDCWD, abs, &b, 100), 0);
	assert_string_equal(b.data, "deep");
	free(abs);
	buf_free(&b);
}

static void test_read_missing(void **state)
{
	struct fx *f = *state;
	struct buf b = BUF_INIT;
	assert_int_equal(fs_read_file_at(f->fd, "nope", &b, 100), -ENOENT);
	assert_int_equal(fs_read_file_at(f->fd, "nope/deeper", &b, 100), -ENOENT);
	buf_free(&b);
}

static void test_read_directory_is_eisdir(void **state)
{
	struct fx *f = *state;
	make_dir(f->dir, "d");
	struct buf b = BUF_INIT;
	assert_int_equal(fs_read_file_at(f->fd, "d", &b, 100), -EISDIR);
	assert_int_equal(fs_read_file_at(f->fd, ".", &b, 100), -EISDIR);
	buf_free(&b);
}

static void test_read_symlink_refused(void **state)
{
	struct fx *f = *state;
	assert_int_equal(test_write_file(f->dir, "real", "secret"), 0);
	assert_int_equal(test_write_file(f->outer, "outside", "outside-secret"), 0);
	make_dir(f->dir, "realdir");
	make_symlink("real", f->dir, "link");
	char *outside = path_in(f->outer, "outside");
	make_symlink(outside, f->dir, "abs-link");
	free(outside);
	make_symlink("realdir", f->dir, "dirlink");
	make_symlink("does-not-exist", f->dir, "dangling");

	struct buf b = BUF_INIT;
	assert_int_equal(fs_read_file_at(f->fd, "link", &b, 100), -EINVAL);
	assert_int_equal(fs_read_file_at(f->fd, "abs-link", &b, 100), -EINVAL);
	assert_int_equal(fs_read_file_at(f->fd, "dirlink", &b, 100), -EINVAL);
	assert_int_equal(fs_read_file_at(f->fd, "dangling", &b, 100), -EINVAL);
	assert_string_equal(buf_cstr(&b), "");
	buf_free(&b);
}

static void test_read_through_symlinked_directory_refused(void **state)
{
	/* fsutil.h: "never follows symbolic links for the paths it is given".
	 * A link in the middle of the path is part of that path. */
	struct fx *f = *state;
	assert_int_equal(test_write_file(f->outer, "secret", "outside-secret"), 0);
	make_symlink(f->outer, f->dir, "linkdir");
	struct buf b = BUF_INIT;
	int rc = fs_read_file_at(f->fd, "linkdir/secret", &b, 100);
	int leaked = strstr(buf_cstr(&b), "outside-secret") != NULL;
	buf_free(&b);
	assert_int_equal(leaked, 0);
	assert_true(rc < 0);
}

static void test_read_fifo_refused(void **state)
{
	struct fx *f = *state;
	char *p = path_in(f->dir, "fifo");
	assert_int_equal(mkfifo(p, 0600), 0);
	free(p);
	struct buf b = BUF_INIT;
	/* Must neither block on the FIFO nor read it. */
	assert_int_equal(fs_read_file_at(f->fd, "fifo", &b, 100), -EINVAL);
	buf_free(&b);
}

/* ---- fs_mkdir_p_at ---- */

static void test_mkdir_p_creates_and_flags(void **state)
{
	struct fx *f = *state;
	int created = 0;
	assert_int_equal(fs_mkdir_p_at(f->fd, "a/b/c", FS_DIR_MODE, &created), 0);
	assert_int_equal(created, 1);
	assert_int_equal(fs_is_dir_at(f->fd, "a"), 1);
	assert_int_equal(fs_is_dir_at(f->fd, "a/b"), 1);
	assert_int_equal(fs_is_dir_at(f->fd, "a/b/c"), 1);
	assert_int_equal(mode_of(f->dir, "a/b/c") & 07777, 0700);
	assert_int_equal(mode_of(f->dir, "a") & 07777, 0700);

	/* All present: success, and nothing made. */
	created = 0;
	assert_int_equal(fs_mkdir_p_at(f->fd, "a/b/c", FS_DIR_MODE, &created), 0);
	assert_int_equal(created, 0);
	created = 0;
	assert_int_equal(fs_mkdir_p_at(f->fd, "a/b", FS_DIR_MODE, &created), 0);
	assert_int_equal(created, 0);

	/* Only the last one missing. */
	created = 0;
	assert_int_equal(fs_mkdir_p_at(f->fd, "a/b/c/d", FS_DIR_MODE, &created), 0);
	assert_int_equal(created, 1);
	assert_int_equal(fs_is_dir_at(f->fd, "a/b/c/d"), 1);

	/* created may be NULL. */
	assert_int_equal(fs_mkdir_p_at(f->fd, "n1/n2", FS_DIR_MODE, NULL), 0);
	assert_int_equal(fs_is_dir_at(f->fd, "n1/n2"), 1);
}

static void test_mkdir_p_single_and_trailing_slash(void **state)
{
	struct fx *f = *state;
	int created = 0;
	assert_int_equal(fs_mkdir_p_at(f->fd, "one", FS_DIR_MODE, &created), 0);
	assert_int_equal(created, 1);
	created = 0;
	assert_int_equal(fs_mkdir_p_at(f->fd, "two/three/", FS_DIR_MODE, &created), 0);
	assert_int_equal(created, 1);
	assert_int_equal(fs_is_dir_at(f->fd, "two/three"), 1);
	created = 0;
	assert_int_equal(fs_mkdir_p_at(f->fd, "two//three", FS_DIR_MODE, &created), 0);
	assert_int_equal(created, 0);
}

static void test_mkdir_p_file_in_the_way(void **state)
{
	struct fx *f = *state;
	assert_int_equal(test_write_file(f->dir, "file", "x"), 0);
	int created = 0;
	assert_int_equal(fs_mkdir_p_at(f->fd, "file", FS_DIR_MODE, &created), -ENOTDIR);
	assert_int_equal(fs_mkdir_p_at(f->fd, "file/sub", FS_DIR_MODE, &created), -ENOTDIR);
	assert_int_equal(created, 0);
	assert_file_content(f->dir, "file", "x");
}

static void test_mkdir_p_does_not_follow_symlink(void **state)
{
	struct fx *f = *state;
	make_symlink(f->outer, f->dir, "link");
	int created = 0;
	int rc = fs_mkdir_p_at(f->fd, "link/inside", FS_DIR_MODE, &created);
	assert_int_equal(rc, -ENOTDIR);
	assert_int_equal(created, 0);
	/* Nothing was made in the link's target. */
	assert_dir_listing(f->outer, "");
	assert_int_equal(fs_mkdir_p_at(f->fd, "link", FS_DIR_MODE, &created), -ENOTDIR);
}

/* ---- fs_rm_rf_at ---- */

static void test_rm_rf_tree(void **state)
{
	struct fx *f = *state;
	assert_int_equal(test_write_file(f->dir, "t/a", "1"), 0);
	assert_int_equal(test_write_file(f->dir, "t/b/c", "2"), 0);
	assert_int_equal(test_write_file(f->dir, "t/b/d/e/f", "3"), 0);
	assert_int_equal(test_write_file(f->dir, "t/b/d/g", "4"), 0);
	assert_int_equal(test_write_file(f->dir, "t/.hidden", "5"), 0);
	make_dir(f->dir, "t/empty");
	make_dir(f->dir, "t/b/d/empty2");
	assert_int_equal(test_write_file(f->dir, "keep", "k"), 0);
	assert_int_equal(fs_rm_rf_at(f->fd, "t"), 0);
	assert_int_equal(fs_exists_at(f->fd, "t"), 0);
	assert_dir_listing(f->dir, "keep");
	assert_file_content(f->dir, "keep", "k");
}

static void test_rm_rf_many_files(void **state)
{
	/* Removing while reading the directory must not skip entries. */
	struct fx *f = *state;
	make_dir(f->dir, "many");
	for (int i = 0; i < 3000; i++) {
		char rel[64];
		snprintf(rel, sizeof rel, "many/file-with-a-longish-name-%05d", i);
		assert_int_equal(test_write_file(f->dir, rel, "x"), 0);
	}
	assert_int_equal(fs_rm_rf_at(f->fd, "many"), 0);
	assert_int_equal(fs_exists_at(f->fd, "many"), 0);
}

static void test_rm_rf_single_file_and_missing(void **state)
{
	struct fx *f = *state;
	assert_int_equal(test_write_file(f->dir, "file", "x"), 0);
	assert_int_equal(fs_rm_rf_at(f->fd, "file"), 0);
	assert_int_equal(fs_exists_at(f->fd, "file"), 0);
	assert_int_equal(fs_rm_rf_at(f->fd, "file"), 0);
	assert_int_equal(fs_rm_rf_at(f->fd, "never-was"), 0);
	assert_int_equal(fs_rm_rf_at(f->fd, "never/was/here"), 0);
	assert_dir_listing(f->dir, "");
}

static void test_rm_rf_symlink_to_outside_dir(void **state)
{
	struct fx *f = *state;
	assert_int_equal(test_write_file(f->outer, "precious", "keep me"), 0);
	assert_int_equal(test_write_file(f->outer, "sub/also", "keep me too"), 0);
	make_symlink(f->outer, f->dir, "link");
	assert_int_equal(fs_rm_rf_at(f->fd, "link"), 0);
	assert_int_equal(fs_exists_at(f->fd, "link"), 0);
	assert_file_content(f->outer, "precious", "keep me");
	assert_file_content(f->outer, "sub/also", "keep me too");
}

static void test_rm_rf_tree_containing_symlinks(void **state)
{
	struct fx *f = *state;
	assert_int_equal(test_write_file(f->outer, "precious", "keep me"), 0);
	assert_int_equal(test_write_file(f->outer, "sub/also", "keep me too"), 0);
	assert_int_equal(test_write_file(f->dir, "t/x/file", "1"), 0);
	make_symlink(f->outer, f->dir, "t/x/to-dir");
	char *p = path_in(f->outer, "precious");
	make_symlink(p, f->dir, "t/to-file");
	free(p);
	make_symlink("/nonexistent/target", f->dir, "t/dangling");
	assert_int_equal(fs_rm_rf_at(f->fd, "t"), 0);
	assert_int_equal(fs_exists_at(f->fd, "t"), 0);
	assert_file_content(f->outer, "precious", "keep me");
	assert_file_content(f->outer, "sub/also", "keep me too");
	assert_dir_listing(f->outer, "precious,sub");
}

static void test_rm_rf_through_symlinked_directory(void **state)
{
	/* fsutil.h: never follows symbolic links for the paths it is given;
	 * "link/precious" names a file behind a link and must not be removed. */
	struct fx *f = *state;
	assert_int_equal(test_write_file(f->outer, "precious", "keep me"), 0);
	make_symlink(f->outer, f->dir, "link");
	fs_rm_rf_at(f->fd, "link/precious");
	assert_int_equal(test_exists(f->outer, "precious"), 1);
}

/* ---- fs_write_file_atomic ---- */

static void test_atomic_write_new_file(void **state)
{
	struct fx *f = *state;
	assert_int_equal(fs_write_file_atomic(f->fd, "obj", "{\"a\":1}", 7, FS_FILE_MODE), 0);
	assert_file_content(f->dir, "obj", "{\"a\":1}");
	assert_int_equal(mode_of(f->dir, "obj") & 07777, 0600);
	assert_true(S_ISREG(mode_of(f->dir, "obj")));
	assert_dir_listing(f->dir, "obj");
}

static void test_atomic_write_replaces(void **state)
{
	struct fx *f = *state;
	char longer[4096];
	memset(longer, 'L', sizeof longer - 1);
	longer[sizeof longer - 1] = '\0';
	assert_int_equal(fs_write_file_atomic(f->fd, "obj", longer, strlen(longer), FS_FILE_MODE),
			 0);
	assert_int_equal(fs_write_file_atomic(f->fd, "obj", "short", 5, FS_FILE_MODE), 0);
	assert_file_content(f->dir, "obj", "short");
	/* Many replaces leave exactly one file, no temporaries. */
	for (int i = 0; i < 50; i++) {
		char data[32];
		int n = snprintf(data, sizeof data, "version %d", i);
		assert_int_equal(fs_write_file_atomic(f->fd, "obj", data, (size_t)n, FS_FILE_MODE),
				 0);
	}
	assert_file_content(f->dir, "obj", "version 49");
	assert_dir_listing(f->dir, "obj");
	/* Empty content is a valid file. */
	assert_int_equal(fs_write_file_atomic(f->fd, "obj", "", 0, FS_FILE_MODE), 0);
	assert_file_content(f->dir, "obj", "");
	assert_dir_listing(f->dir, "obj");
}

static void test_atomic_write_mode_of_replaced_file(void **state)
{
	struct fx *f = *state;
	char *p = path_in(f->dir, "obj");
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, 0644), 0);
	close(fd);
	free(p);
	assert_int_equal(fs_write_file_atomic(f->fd, "obj", "new", 3, FS_FILE_MODE), 0);
	assert_int_equal(mode_of(f->dir, "obj") & 07777, 0600);
	assert_file_content(f->dir, "obj", "new");
}

static void test_atomic_write_failure_leaves_no_temp(void **state)
{
	struct fx *f = *state;
	/* A non-empty directory where the file should go: rename fails. */
	assert_int_equal(test_write_file(f->dir, "obj/inner", "inner"), 0);
	int rc = fs_write_file_atomic(f->fd, "obj", "data", 4, FS_FILE_MODE);
	assert_true(rc < 0);
	assert_dir_listing(f->dir, "obj");
	assert_file_content(f->dir, "obj/inner", "inner");
}

static void test_atomic_write_replaces_symlink_not_target(void **state)
{
	struct fx *f = *state;
	assert_int_equal(test_write_file(f->outer, "target", "outside"), 0);
	char *p = path_in(f->outer, "target");
	make_symlink(p, f->dir, "obj");
	free(p);
	assert_int_equal(fs_write_file_atomic(f->fd, "obj", "inside", 6, FS_FILE_MODE), 0);
	assert_true(S_ISREG(mode_of(f->dir, "obj")));
	assert_file_content(f->dir, "obj", "inside");
	assert_file_content(f->outer, "target", "outside");
	assert_dir_listing(f->dir, "obj");
}

/* ---- fs_exists_at, fs_is_dir_at, fs_fsync_dir_at ---- */

static void test_exists_and_is_dir(void **state)
{
	struct fx *f = *state;
	assert_int_equal(test_write_file(f->dir, "file", "x"), 0);
	make_dir(f->dir, "dir");
	make_symlink("dir", f->dir, "dirlink");
	make_symlink("nowhere", f->dir, "dangling");

	assert_int_equal(fs_exists_at(f->fd, "file"), 1);
	assert_int_equal(fs_exists_at(f->fd, "dir"), 1);
	assert_int_equal(fs_exists_at(f->fd, "dangling"), 1);
	assert_int_equal(fs_exists_at(f->fd, "missing"), 0);

	assert_int_equal(fs_is_dir_at(f->fd, "dir"), 1);
	assert_int_equal(fs_is_dir_at(f->fd, "file"), 0);
	assert_int_equal(fs_is_dir_at(f->fd, "dirlink"), 0);
	assert_int_equal(fs_is_dir_at(f->fd, "missing"), -ENOENT);
	assert_int_equal(fs_is_dir_at(f->fd, "file/x"), -ENOTDIR);
}

/* Entry types from readdir, and from lstat where the file system leaves
 * d_type unknown (XFS without ftype, some network file systems): one
 * helper for every directory walk of the store. */
static void test_directory_entries(void **state)
{
	struct fx *f = *state;
	assert_int_equal(test_write_file(f->dir, "file", "x"), 0);
	make_dir(f->dir, "dir");
	make_symlink("dir", f->dir, "dirlink");
	DIR *dp;
	assert_int_equal(fs_opendir_at(f->fd, "dirlink", &dp), -ELOOP);
	assert_null(dp);
	assert_int_equal(fs_opendir_at(f->fd, "missing", &dp), -ENOENT);
	assert_int_equal(fs_opendir_at(f->fd, ".", &dp), 0);
	int seen = 0;
	for (struct dirent *de; (de = readdir(dp));) {
		struct dirent unknown = *de;
		unknown.d_type = DT_UNKNOWN; /* as such a file system gives it */
		unsigned char want = !strcmp(de->d_name, "file")      ? DT_REG
				     : !strcmp(de->d_name, "dirlink") ? DT_LNK
								      : DT_DIR;
		assert_int_equal(fs_entry_type(dp, de), want);
		assert_int_equal(fs_entry_type(dp, &unknown), want);
		seen++;
	}
	assert_int_equal(seen, 5); /* . .. file dir dirlink */
	struct dirent gone = {.d_type = DT_UNKNOWN};
	strcpy(gone.d_name, "vanished");
	assert_int_equal(fs_entry_type(dp, &gone), 0);
	closedir(dp);
}

static void test_fsync_dir(void **state)
{
	struct fx *f = *state;
	make_dir(f->dir, "dir");
	assert_int_equal(test_write_file(f->dir, "file", "x"), 0);
	make_symlink("dir", f->dir, "dirlink");
	assert_int_equal(fs_fsync_dir_at(f->fd, "."), 0);
	assert_int_equal(fs_fsync_dir_at(f->fd, "dir"), 0);
	assert_int_equal(fs_fsync_dir_at(f->fd, "file"), -ENOTDIR);
	assert_int_equal(fs_fsync_dir_at(f->fd, "missing"), -ENOENT);
	assert_true(fs_fsync_dir_at(f->fd, "dirlink") < 0);
}

/* ---- strmap ---- */

#define NKEYS 10000

static void key_of(char *out, size_t size, int i)
{
	snprintf(out, size, "default/pod-%d-%x", i, (unsigned)i * 2654435761u);
}

static void test_strmap_empty(void **state)
{
	struct strmap m = STRMAP_INIT;
	assert_null(strmap_get(&m, "x"));
	assert_null(strmap_get(&m, ""));
	size_t it = 0;
	assert_null(strmap_next(&m, &it));
	strmap_free(&m);
	strmap_free(&m);
	assert_int_equal(m.len, 0);
}

static void test_strmap_put_get_overwrite(void **state)
{
	struct strmap m = STRMAP_INIT;
	int a = 1, b = 2;
	struct strmap_entry *e = strmap_put(&m, "alpha", &a);
	assert_non_null(e);
	assert_string_equal(e->key, "alpha");
	assert_ptr_equal(e->value, &a);
	assert_int_equal(m.len, 1);
	assert_ptr_equal(strmap_get(&m, "alpha")->value, &a);
	assert_null(strmap_get(&m, "alph"));
	assert_null(strmap_get(&m, "alphaa"));

	assert_non_null(strmap_put(&m, "alpha", &b));
	assert_int_equal(m.len, 1);
	assert_ptr_equal(strmap_get(&m, "alpha")->value, &b);

	/* The empty key and NULL values are ordinary. */
	assert_non_null(strmap_put(&m, "", NULL));
	assert_int_equal(m.len, 2);
	e = strmap_get(&m, "");
	assert_non_null(e);
	assert_null(e->value);
	strmap_free(&m);
}

static void test_strmap_copies_keys(void **state)
{
	struct strmap m = STRMAP_INIT;
	char key[16] = "mutable";
	int v = 7;
	assert_non_null(strmap_put(&m, key, &v));
	strcpy(key, "changed");
	assert_non_null(strmap_get(&m, "mutable"));
	assert_null(strmap_get(&m, "changed"));
	strmap_free(&m);
}

/* Deleting in any order leaves exactly the others findable: checked
 * against a plain array, with keys chosen to collide in a small table. */
static void test_strmap_delete(void **state)
{
	struct strmap m = STRMAP_INIT;
	enum { N = 3000 };
	static int present[N];
	char key[64];
	for (int i = 0; i < N; i++) {
		key_of(key, sizeof key, i);
		present[i] = 1;
		assert_non_null(strmap_put(&m, key, &present[i]));
	}
	assert_null(strmap_del(&m, "no-such-key"));
	unsigned x = 12345;
	for (int round = 0; round < 2 * N; round++) {
		x = x * 1103515245u + 12345u;
		int i = (int)((x >> 8) % N);
		key_of(key, sizeof key, i);
		void *v = strmap_del(&m, key);
		assert_ptr_equal(v, present[i] ? &present[i] : NULL);
		present[i] = 0;
		if (round % 3 == 0) { /* and put some back */
			int j = (int)((x >> 16) % N);
			key_of(key, sizeof key, j);
			present[j] = 1;
			assert_non_null(strmap_put(&m, key, &present[j]));
		}
	}
	size_t want = 0;
	for (int i = 0; i < N; i++) {
		key_of(key, sizeof key, i);
		struct strmap_entry *e = strmap_get(&m, key);
		if (present[i]) {
			want++;
			assert_non_null(e);
			assert_ptr_equal(e->value, &present[i]);
		} else {
			assert_null(e);
		}
	}
	assert_int_equal(m.len, want);
	size_t it = 0, count = 0;
	while (strmap_next(&m, &it))
		count++;
	assert_int_equal(count, want);
	strmap_free(&m);
}

static void test_strmap_10000_keys(void **state)
{
	struct strmap m = STRMAP_INIT;
	static int values[NKEYS];
	char key[64];
	for (int i = 0; i < NKEYS; i++) {
		values[i] = i;
		key_of(key, sizeof key, i);
		assert_non_null(strmap_put(&m, key, &values[i]));
		assert_int_equal(m.len, (size_t)i + 1);
	}
	assert_true(m.len * 4 <= m.cap * 3);
	for (int i = 0; i < NKEYS; i++) {
		key_of(key, sizeof key, i);
		struct strmap_entry *e = strmap_get(&m, key);
		assert_non_null(e);
		assert_string_equal(e->key, key);
		assert_ptr_equal(e->value, &values[i]);
	}
	assert_null(strmap_get(&m, "default/pod-10000"));

	/* Overwrite every other key: the count stays, the values change. */
	static int other[NKEYS];
	for (int i = 0; i < NKEYS; i += 2) {
		key_of(key, sizeof key, i);
		other[i] = -i;
		assert_non_null(strmap_put(&m, key, &other[i]));
	}
	assert_int_equal(m.len, NKEYS);
	for (int i = 0; i < NKEYS; i++) {
		key_of(key, sizeof key, i);
		struct strmap_entry *e = strmap_get(&m, key);
		assert_non_null(e);
		assert_ptr_equal(e->value, i % 2 ? (void *)&values[i] : (void *)&other[i]);
	}

	/* Iteration visits every key exactly once. */
	static unsigned char seen[NKEYS];
	memset(seen, 0, sizeof seen);
	size_t count = 0, it = 0;
	struct strmap_entry *e;
	while ((e = strmap_next(&m, &it))) {
		int *v = e->value;
		ptrdiff_t i = v >= values && v < values + NKEYS ? v - values : v - other;
		assert_true(i >= 0 && i < NKEYS);
		key_of(key, sizeof key, (int)i);
		assert_string_equal(e->key, key);
		assert_int_equal(seen[i], 0);
		seen[i] = 1;
		count++;
	}
	assert_int_equal(count, NKEYS);
	/* Iteration has ended for good. */
	assert_null(strmap_next(&m, &it));
	strmap_free(&m);
	assert_null(m.slots);
	assert_int_equal(m.len, 0);
	assert_int_equal(m.cap, 0);
	/* Reusable after free. */
	assert_non_null(strmap_put(&m, "again", NULL));
	assert_int_equal(m.len, 1);
	strmap_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_write_all, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_small_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_empty_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_limits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_nested_path, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_missing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_directory_is_eisdir, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_symlink_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_through_symlinked_directory_refused, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_read_fifo_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_mkdir_p_creates_and_flags, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_mkdir_p_single_and_trailing_slash, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_mkdir_p_file_in_the_way, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_mkdir_p_does_not_follow_symlink, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_rm_rf_tree, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_rm_rf_many_files, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_rm_rf_single_file_and_missing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_rm_rf_symlink_to_outside_dir, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_rm_rf_tree_containing_symlinks, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_rm_rf_through_symlinked_directory, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_atomic_write_new_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_atomic_write_replaces, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_atomic_write_mode_of_replaced_file, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_atomic_write_failure_leaves_no_temp, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_atomic_write_replaces_symlink_not_target, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_exists_and_is_dir, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fsync_dir, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_directory_entries, setup, teardown),
	    cmocka_unit_test(test_strmap_empty),
	    cmocka_unit_test(test_strmap_put_get_overwrite),
	    cmocka_unit_test(test_strmap_copies_keys),
	    cmocka_unit_test(test_strmap_10000_keys),
	    cmocka_unit_test(test_strmap_delete),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
