/*
 * test_hubfiles.c - identity/hubfiles: the kubeconfigs the hub writes read
 * back with the hub's own kubeconfig reader (and a token that needs
 * quoting survives), files written 0600 whole, the CA rewritten only when
 * it changed, and a --server-addr that names another host setting the old
 * identity aside - while the same host, in any of several URLs, keeps it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>

#include "identity/hubfiles.h"
#include "kube/kubeconfig.h"
#include "testutil.h"
#include "util/buf.h"

static const char CA[] = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

static char *path_in(const char *dir, const char *name)
{
	char *p = hubfiles_path(dir, name);
	assert_non_null(p);
	return p;
}

static void test_kubeconfigs_read_back(void **state)
{
	(void)state;
	char dir[256];
	assert_int_equal(test_mkdtemp(dir, sizeof dir, "hubfiles"), 0);
	struct buf ca = BUF_INIT;
	assert_int_equal(buf_append_str(&ca, CA), 0);
	char *err = NULL;
	char *boot = path_in(dir, HUBFILES_BOOTSTRAP_CONF);
	assert_int_equal(hubfiles_write_kubeconfig(boot, "https://10.0.0.1:6443", &ca,
						   "abcdef.0123456789abcdef", NULL, &err),
			 0);
	struct kubeconfig kc = {0};
	if (kubeconfig_load(boot, &kc, &err) < 0)
		fail_msg("%s", err);
	assert_string_equal(kc.server, "https://10.0.0.1:6443");
	assert_string_equal(kc.token, "abcdef.0123456789abcdef");
	assert_int_equal(kc.ca_data.len, strlen(CA));
	assert_memory_equal(kc.ca_data.data, CA, strlen(CA));
	assert_null(kc.client_cert_file);
	kubeconfig_free(&kc);
	struct stat st;
	assert_int_equal(stat(boot, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	/* a server with characters YAML cares about, a path with a space */
	char *hub = path_in(dir, HUBFILES_HUB_CONF);
	assert_int_equal(test_write_file(dir, "yurt hub/pki/yurthub-current.pem", "PAIR"), 0);
	char *pair = path_in(dir, "yurt hub/pki/yurthub-current.pem");
	assert_int_equal(hubfiles_write_kubeconfig(hub, "https://[fd00::1]:6443/#x: \"y\"", &ca,
						   NULL, pair, &err),
			 0);
	if (kubeconfig_load(hub, &kc, &err) < 0)
		fail_msg("%s", err);
	assert_string_equal(kc.server, "https://[fd00::1]:6443/#x: \"y\"");
	assert_null(kc.token);
	assert_string_equal(kc.client_cert_file, pair);
	assert_string_equal(kc.client_key_file, pair);
	kubeconfig_free(&kc);
	free(pair);
	free(boot);
	free(hub);
	buf_free(&ca);
	test_rm_rf(dir);
}

static void test_ca_written_when_changed(void **state)
{
	(void)state;
	char dir[256];
	assert_int_equal(test_mkdtemp(dir, sizeof dir, "hubfiles"), 0);
	char *err = NULL;
	assert_int_equal(hubfiles_prepare(dir, &err), 0);
	struct buf ca = BUF_INIT;
	assert_int_equal(buf_append_str(&ca, CA), 0);
	assert_int_equal(hubfiles_write_ca(dir, &ca, &err), 0);
	char *path = path_in(dir, HUBFILES_CA);
	struct stat a, b;
	assert_int_equal(stat(path, &a), 0);
	assert_int_equal(hubfiles_write_ca(dir, &ca, &err), 0);
	assert_int_equal(stat(path, &b), 0);
	assert_int_equal(a.st_ino, b.st_ino); /* the same bytes: not rewritten */
	assert_int_equal(buf_append_str(&ca, CA), 0);
	assert_int_equal(hubfiles_write_ca(dir, &ca, &err), 0);
	assert_int_equal(stat(path, &b), 0);
	assert_int_not_equal(a.st_ino, b.st_ino);
	assert_int_equal((size_t)b.st_size, ca.len);
	free(path);
	buf_free(&ca);
	test_rm_rf(dir);
}

static int count_replaced(const char *dir)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	int n = 0;
	for (struct dirent *de; (de = readdir(d));)
		n += !strncmp(de->d_name, "replaced-", 9);
	closedir(d);
	return n;
}

static void test_set_aside_when_moved(void **state)
{
	(void)state;
	char dir[256];
	assert_int_equal(test_mkdtemp(dir, sizeof dir, "hubfiles"), 0);
	char *err = NULL;
	assert_int_equal(hubfiles_prepare(dir, &err), 0);
	struct buf ca = BUF_INIT;
	assert_int_equal(buf_append_str(&ca, CA), 0);
	char *hub = path_in(dir, HUBFILES_HUB_CONF);
	assert_int_equal(
	    hubfiles_write_kubeconfig(hub, "https://10.0.0.1:6443", &ca, NULL, "/x.pem", &err), 0);
	assert_int_equal(test_write_file(dir, "pki/yurthub-current.pem", "PAIR"), 0);

	/* the same host, another port or several servers: kept */
	const char *same[] = {"https://10.0.0.2:6443", "https://10.0.0.1:443"};
	assert_int_equal(hubfiles_set_aside_if_moved(dir, same, 2, &err), 0);
	assert_int_equal(count_replaced(dir), 0);
	assert_true(test_exists(dir, HUBFILES_HUB_CONF));

	/* another host: set aside, whole, nothing deleted */
	const char *moved[] = {"https://edge-api.example:6443"};
	assert_int_equal(hubfiles_set_aside_if_moved(dir, moved, 1, &err), 0);
	assert_int_equal(count_replaced(dir), 1);
	assert_false(test_exists(dir, HUBFILES_HUB_CONF));
	assert_false(test_exists(dir, "pki"));
	/* and a start from nothing finds nothing to set aside */
	assert_int_equal(hubfiles_set_aside_if_moved(dir, moved, 1, &err), 0);
	assert_int_equal(count_replaced(dir), 1);
	free(hub);
	buf_free(&ca);
	test_rm_rf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kubeconfigs_read_back),
	    cmocka_unit_test(test_ca_written_when_changed),
	    cmocka_unit_test(test_set_aside_when_moved),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
