/*
 * test_certstore.c - identity/certstore: client-go's layout (a timestamped
 * 0600 file, a relative link switched to it), saving over and over, pruning
 * that keeps the newest and never another prefix's files, and every broken
 * store read as "none" with its reason logged: no link, a dangling or
 * escaping link, garbage, a certificate without its key or with another's.
 * client-go's own shapes (absolute link, plain file) are read as pairs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "identity/certstore.h"
#include "testca.h"
#include "testutil.h"
#include "util/buf.h"
#include "util/log.h"

static struct test_ca *g_ca;
static char g_dir[256];
static char *g_pair1, *g_pair2, *g_other_key_pair;

static const char *const orgs[] = {"openyurt:yurthub", "system:nodes", NULL};

static char *make_pair(const char *cn)
{
	struct x509_template t;
	test_template(&t, cn, orgs, NULL, NULL);
	time_t now = time(NULL);
	char *p = test_ca_issue_pair(g_ca, &t, now - 60, now + 3600);
	x509_template_free(&t);
	assert_non_null(p);
	return p;
}

static char *path(const char *rel)
{
	char *p = str_printf("%s/%s", g_dir, rel);
	assert_non_null(p);
	return p;
}

static void do_symlink(const char *target, const char *rel)
{
	char *p = path(rel);
	unlink(p);
	assert_int_equal(symlink(target, p), 0);
	free(p);
}

static char *read_link(const char *rel)
{
	char *p = path(rel), buf[512];
	ssize_t n = readlink(p, buf, sizeof buf - 1);
	free(p);
	if (n < 0)
		return NULL;
	buf[n] = '\0';
	return strdup(buf);
}

/* What certstore_load says to stderr while it runs, and its result. */
static int load_logged(const char *dir, struct certstore_pair *out, struct buf *log)
{
	char name[] = "/tmp/yurthub-certstore-log-XXXXXX";
	int fd = mkstemp(name);
	assert_true(fd >= 0);
	fflush(stderr);
	int saved = dup(2);
	assert_true(saved >= 0);
	assert_int_equal(dup2(fd, 2), 2);
	int rc = certstore_load(dir, "yurthub", out);
	fflush(stderr);
	assert_int_equal(dup2(saved, 2), 2);
	close(saved);
	close(fd);
	char *text = test_read_file("/", name + 1);
	unlink(name);
	buf_reset(log);
	if (text)
		assert_int_equal(buf_append_str(log, text), 0);
	free(text);
	return rc;
}

static void expect_none(const char *why)
{
	struct certstore_pair p;
	struct buf log = BUF_INIT;
	int rc = load_logged(g_dir, &p, &log);
	if (rc != 0)
		fail_msg("a pair was loaded; expected none because %s", why);
	if (!strstr(buf_cstr(&log), why))
		fail_msg("the log \"%s\" does not say \"%s\"", buf_cstr(&log), why);
	assert_int_equal(p.pem.len, 0);
	assert_null(p.info.cn);
	certstore_pair_free(&p);
	buf_free(&log);
}

static void expect_pair(const char *pem)
{
	struct certstore_pair p;
	assert_int_equal(certstore_load(g_dir, "yurthub", &p), 1);
	assert_string_equal(p.pem.data, pem);
	assert_true(p.info.has_key && p.info.key_matches);
	certstore_pair_free(&p);
}

static int setup_each(void **state)
{
	(void)state;
	return test_mkdtemp(g_dir, sizeof g_dir, "certstore");
}

static int teardown_each(void **state)
{
	(void)state;
	test_rm_rf(g_dir);
	return 0;
}

static void test_missing(void **state)
{
	(void)state;
	expect_none("no file yet");
	char *sub = path("not/there");
	struct certstore_pair p;
	assert_int_equal(certstore_load(sub, "yurthub", &p), 0);
	certstore_pair_free(&p);
	free(sub);
}

static void test_save_layout(void **state)
{
	(void)state;
	char *pki = path("root/pki"); /* created by the save */
	char *err = NULL;
	assert_int_equal(certstore_save(pki, "yurthub", g_pair1, strlen(g_pair1), &err), 0);
	assert_null(err);
	char *target = read_link("root/pki/yurthub-current.pem");
	assert_non_null(target);
	/* relative, "yurthub-YYYY-MM-DD-HH-MM-SS.pem", UTC of now */
	assert_null(strchr(target, '/'));
	assert_int_equal(strlen(target), strlen("yurthub-2024-01-01-00-00-00.pem"));
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	char year[32];
	snprintf(year, sizeof year, "yurthub-%04d-", tm.tm_year + 1900);
	assert_int_equal(strncmp(target, year, strlen(year)), 0);
	char *file = str_printf("root/pki/%s", target);
	char *content = test_read_file(g_dir, file);
	assert_string_equal(content, g_pair1);
	struct stat st;
	char *full = path(file);
	assert_int_equal(stat(full, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	struct stat dst;
	assert_int_equal(stat(pki, &dst), 0);
	assert_int_equal(dst.st_mode & 0777, 0700);

	struct certstore_pair p;
	assert_int_equal(certstore_load(pki, "yurthub", &p), 1);
	assert_string_equal(p.pem.data, g_pair1);
	assert_string_equal(p.info.cn, "system:node:one");
	certstore_pair_free(&p);

	char *cp = certstore_current_path(pki, "yurthub");
	char *want = str_printf("%s/yurthub-current.pem", pki);
	assert_string_equal(cp, want);
	free(cp);
	cp = certstore_current_path("/var/lib/yurthub/pki/", "yurthub-server");
	assert_string_equal(cp, "/var/lib/yurthub/pki/yurthub-server-current.pem");
	free(cp);
	free(want);
	free(full);
	free(content);
	free(file);
	free(target);
	free(pki);
}

/* The second pair replaces the first as current, also within the same
 * second (same file name); no temporary is left behind. */
static void test_save_again(void **state)
{
	(void)state;
	char *err = NULL;
	assert_int_equal(certstore_save(g_dir, "yurthub", g_pair1, strlen(g_pair1), &err), 0);
	expect_pair(g_pair1);
	assert_int_equal(certstore_save(g_dir, "yurthub", g_pair2, strlen(g_pair2), &err), 0);
	expect_pair(g_pair2);
	assert_int_equal(certstore_save(g_dir, "yurthub", g_pair1, strlen(g_pair1), &err), 0);
	expect_pair(g_pair1);
	DIR *d = opendir(g_dir);
	assert_non_null(d);
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] == '.' && strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			fail_msg("left behind: %s", de->d_name);
	closedir(d);
}

static int count_prefixed(const char *prefix_dash_digit)
{
	DIR *d = opendir(g_dir);
	assert_non_null(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, prefix_dash_digit, strlen(prefix_dash_digit)))
			n++;
	closedir(d);
	return n;
}

static void test_prune(void **state)
{
	(void)state;
	static const char *const old[] = {
	    "yurthub-2020-01-01-00-00-01.pem", "yurthub-2020-01-01-00-00-02.pem",
	    "yurthub-2021-06-01-00-00-00.pem", "yurthub-2022-01-01-00-00-00.pem",
	    "yurthub-2019-12-31-23-59-59.pem",
	};
	for (size_t i = 0; i < sizeof old / sizeof old[0]; i++)
		assert_int_equal(test_write_file(g_dir, old[i], g_pair2), 0);
	/* not ours: another prefix, other names, a link temporary of ours */
	assert_int_equal(test_write_file(g_dir, "yurthub-server-2020-01-01-00-00-00.pem", "x"), 0);
	assert_int_equal(test_write_file(g_dir, "yurthub-2020-01-01.pem", "x"), 0);
	assert_int_equal(test_write_file(g_dir, "yurthub.conf", "x"), 0);
	do_symlink("nothing", ".yurthub-current.pem.999.0.tmp");
	do_symlink("nothing", ".yurthub-server-current.pem.999.0.tmp");

	char *err = NULL;
	assert_int_equal(certstore_save(g_dir, "yurthub", g_pair1, strlen(g_pair1), &err), 0);
	expect_pair(g_pair1);
	/* current + the two newest old ones, + the decoy yurthub-2020-01-01.pem */
	assert_int_equal(count_prefixed("yurthub-2"), CERTSTORE_KEEP + 1);
	assert_true(test_exists(g_dir, "yurthub-2022-01-01-00-00-00.pem"));
	assert_true(test_exists(g_dir, "yurthub-2021-06-01-00-00-00.pem"));
	assert_false(test_exists(g_dir, "yurthub-2020-01-01-00-00-02.pem"));
	assert_false(test_exists(g_dir, "yurthub-2019-12-31-23-59-59.pem"));
	assert_true(test_exists(g_dir, "yurthub-server-2020-01-01-00-00-00.pem"));
	assert_true(test_exists(g_dir, "yurthub-2020-01-01.pem"));
	assert_true(test_exists(g_dir, "yurthub.conf"));
	assert_false(test_exists(g_dir, ".yurthub-current.pem.999.0.tmp"));
	assert_true(test_exists(g_dir, ".yurthub-server-current.pem.999.0.tmp"));

	/* the current file is never pruned, even when it is the oldest */
	do_symlink("yurthub-2019-01-01-00-00-00.pem", "yurthub-current.pem");
	assert_int_equal(test_write_file(g_dir, "yurthub-2019-01-01-00-00-00.pem", g_pair2), 0);
	assert_int_equal(test_write_file(g_dir, "yurthub-2023-01-01-00-00-00.pem", g_pair2), 0);
	assert_int_equal(test_write_file(g_dir, "yurthub-2024-01-01-00-00-00.pem", g_pair2), 0);
	char *cur = read_link("yurthub-current.pem");
	assert_string_equal(cur, "yurthub-2019-01-01-00-00-00.pem");
	free(cur);
	expect_pair(g_pair2);
	assert_int_equal(certstore_save(g_dir, "yurthub", g_pair1, strlen(g_pair1), &err), 0);
	assert_int_equal(count_prefixed("yurthub-2"), CERTSTORE_KEEP + 1);
	assert_true(test_exists(g_dir, "yurthub-2024-01-01-00-00-00.pem"));
	assert_false(test_exists(g_dir, "yurthub-2019-01-01-00-00-00.pem"));
}

static void test_broken_stores(void **state)
{
	(void)state;
	char *err = NULL;
	assert_int_equal(certstore_save(g_dir, "yurthub", g_pair1, strlen(g_pair1), &err), 0);
	char *good = read_link("yurthub-current.pem");

	do_symlink("yurthub-1999-01-01-00-00-00.pem", "yurthub-current.pem");
	expect_none("gone");

	/* a good pair, but outside the store */
	char *outside = str_printf("%s-outside.pem", g_dir);
	FILE *f = fopen(outside, "w");
	assert_non_null(f);
	fputs(g_pair1, f);
	fclose(f);
	do_symlink(outside, "yurthub-current.pem");
	expect_none("outside the store");
	char *rel = str_printf("../%s", strrchr(outside, '/') + 1);
	do_symlink(rel, "yurthub-current.pem");
	expect_none("outside the store");
	unlink(outside);

	assert_int_equal(test_write_file(g_dir, "garbage.pem", "not a pem"), 0);
	do_symlink("garbage.pem", "yurthub-current.pem");
	expect_none("no certificate");

	char *cert_only = strndup(g_pair1, (size_t)(strstr(g_pair1, "-----BEGIN EC") - g_pair1));
	assert_int_equal(test_write_file(g_dir, "certonly.pem", cert_only), 0);
	do_symlink("certonly.pem", "yurthub-current.pem");
	expect_none("no private key");

	char *mixed = str_printf("%s%s", cert_only, strstr(g_other_key_pair, "-----BEGIN EC"));
	assert_int_equal(test_write_file(g_dir, "mixed.pem", mixed), 0);
	do_symlink("mixed.pem", "yurthub-current.pem");
	expect_none("not the certificate's");

	char *sub = path("adir");
	assert_int_equal(mkdir(sub, 0700), 0);
	do_symlink("adir", "yurthub-current.pem");
	expect_none("directory");
	do_symlink("yurthub-current.pem", "chain.pem");
	do_symlink("chain.pem", "yurthub-current.pem");
	expect_none("not a regular file");
	do_symlink(".", "yurthub-current.pem");
	expect_none("does not name a file");

	struct buf big = BUF_INIT;
	assert_int_equal(buf_append_str(&big, g_pair1), 0);
	while (big.len <= CERTSTORE_FILE_MAX)
		assert_int_equal(buf_append_str(&big, "# padding padding padding padding\n"), 0);
	assert_int_equal(test_write_file(g_dir, "big.pem", big.data), 0);
	do_symlink("big.pem", "yurthub-current.pem");
	expect_none("too large");
	buf_free(&big);

	/* client-go's own shapes: an absolute link into the store, a file */
	char *abs = path(good);
	do_symlink(abs, "yurthub-current.pem");
	expect_pair(g_pair1);
	char *cur = path("yurthub-current.pem");
	unlink(cur);
	assert_int_equal(test_write_file(g_dir, "yurthub-current.pem", g_pair2), 0);
	expect_pair(g_pair2);
	/* and a save over a plain file makes it a link again */
	assert_int_equal(certstore_save(g_dir, "yurthub", g_pair1, strlen(g_pair1), &err), 0);
	char *l = read_link("yurthub-current.pem");
	assert_non_null(l);
	expect_pair(g_pair1);

	free(l);
	free(cur);
	free(abs);
	free(sub);
	free(mixed);
	free(cert_only);
	free(rel);
	free(outside);
	free(good);
}

/* A save that cannot happen says so and leaves the current pair alone. */
static void test_save_fails(void **state)
{
	(void)state;
	char *err = NULL;
	assert_int_equal(test_write_file(g_dir, "file", "x"), 0);
	char *bad = path("file/pki");
	assert_int_equal(certstore_save(bad, "yurthub", g_pair1, strlen(g_pair1), &err), -1);
	assert_non_null(err);
	assert_non_null(strstr(err, "cannot create"));
	free(err);
	err = NULL;
	free(bad);

	assert_int_equal(certstore_save(g_dir, "yurthub", g_pair1, strlen(g_pair1), &err), 0);
	/* the current link's name taken by a directory: the switch fails */
	char *cur = path("yurthub-current.pem");
	unlink(cur);
	assert_int_equal(mkdir(cur, 0700), 0);
	assert_int_equal(test_write_file(g_dir, "yurthub-current.pem/x", "x"), 0);
	assert_int_equal(certstore_save(g_dir, "yurthub", g_pair2, strlen(g_pair2), &err), -1);
	assert_non_null(strstr(err, "cannot switch"));
	free(err);
	free(cur);
}

static int setup(void **state)
{
	(void)state;
	log_set_verbosity(1); /* "no file yet" is an info line */
	g_ca = test_ca_new("test-ca");
	if (!g_ca)
		return -1;
	g_pair1 = make_pair("system:node:one");
	g_pair2 = make_pair("system:node:two");
	g_other_key_pair = make_pair("system:node:one");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(g_pair1);
	free(g_pair2);
	free(g_other_key_pair);
	test_ca_free(g_ca);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_missing, setup_each, teardown_each),
	    cmocka_unit_test_setup_teardown(test_save_layout, setup_each, teardown_each),
	    cmocka_unit_test_setup_teardown(test_save_again, setup_each, teardown_each),
	    cmocka_unit_test_setup_teardown(test_prune, setup_each, teardown_each),
	    cmocka_unit_test_setup_teardown(test_broken_stores, setup_each, teardown_each),
	    cmocka_unit_test_setup_teardown(test_save_fails, setup_each, teardown_each),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
