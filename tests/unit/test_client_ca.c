/*
 * test_client_ca.c - server/client_ca: the client CA a TLS session is
 * given as it starts.  No file yet is "not yet"; a CA file trusted; a
 * replaced file trusted by the next session while an earlier session keeps
 * the CA it started with; a file that does not parse (or is removed) keeps
 * the CA there was; every generation freed with its last session (ASan's
 * leak check in the sanitizer build).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/client_ca.h"
#include "testca.h"
#include "testutil.h"
#include "util/buf.h"

static struct test_ca *g_ca1, *g_ca2;
static char *g_leaf1, *g_leaf2; /* cert+key PEM of a client of each CA */
static char g_dir[256];
static char g_path[320];

static char *issue(struct test_ca *ca)
{
	static const char *const orgs[] = {"system:nodes", NULL};
	struct x509_template t;
	test_template(&t, "system:node:node1", orgs, NULL, NULL);
	time_t now = time(NULL);
	char *pem = test_ca_issue_pair(ca, &t, now - 60, now + 3600);
	x509_template_free(&t);
	return pem;
}

static int setup(void **state)
{
	(void)state;
	g_ca1 = test_ca_new("ca-1");
	g_ca2 = test_ca_new("ca-2");
	if (!g_ca1 || !g_ca2 || !(g_leaf1 = issue(g_ca1)) || !(g_leaf2 = issue(g_ca2)))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(g_leaf1);
	free(g_leaf2);
	test_ca_free(g_ca1);
	test_ca_free(g_ca2);
	return 0;
}

static int setup_each(void **state)
{
	(void)state;
	if (test_mkdtemp(g_dir, sizeof g_dir, "client_ca") < 0)
		return -1;
	snprintf(g_path, sizeof g_path, "%s/ca.crt", g_dir);
	return 0;
}

static int teardown_each(void **state)
{
	(void)state;
	test_rm_rf(g_dir);
	return 0;
}

/* Write the file anew (another inode, as an operator's tool would). */
static void put(const char *text)
{
	char tmp[340];
	snprintf(tmp, sizeof tmp, "%s.tmp", g_path);
	FILE *f = fopen(tmp, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(rename(tmp, g_path), 0);
}

static gnutls_session_t session(void)
{
	gnutls_session_t s;
	assert_int_equal(gnutls_init(&s, GNUTLS_SERVER), 0);
	return s;
}

/* Whether the session's credentials trust the leaf of pem. */
static bool trusts(gnutls_session_t s, const char *pem)
{
	void *cred = NULL;
	assert_int_equal(gnutls_credentials_get(s, GNUTLS_CRD_CERTIFICATE, &cred), 0);
	gnutls_x509_trust_list_t tl;
	gnutls_certificate_get_trust_list(cred, &tl);
	gnutls_x509_crt_t crt;
	assert_int_equal(gnutls_x509_crt_init(&crt), 0);
	gnutls_datum_t d = {(unsigned char *)pem, (unsigned int)strlen(pem)};
	assert_int_equal(gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM), 0);
	unsigned int status = 1;
	int rc = gnutls_x509_trust_list_verify_crt(tl, &crt, 1, 0, &status, NULL);
	gnutls_x509_crt_deinit(crt);
	return rc == 0 && status == 0;
}

static void not_there_yet(void **state)
{
	(void)state;
	struct client_ca *ca = client_ca_new(g_path);
	assert_non_null(ca);
	assert_int_equal(client_ca_check(ca), -ENOENT);
	gnutls_session_t s = session();
	assert_null(client_ca_attach(ca, s));
	gnutls_deinit(s);
	put(test_ca_pem(g_ca1)); /* bootstrap writes it */
	assert_int_equal(client_ca_check(ca), 0);
	client_ca_free(ca);
}

static void reload_on_change(void **state)
{
	(void)state;
	put(test_ca_pem(g_ca1));
	struct client_ca *ca = client_ca_new(g_path);
	assert_int_equal(client_ca_check(ca), 0);
	gnutls_session_t s1 = session();
	struct client_ca_gen *g1 = client_ca_attach(ca, s1);
	assert_non_null(g1);
	assert_true(trusts(s1, g_leaf1));
	assert_false(trusts(s1, g_leaf2));

	put(test_ca_pem(g_ca2));
	gnutls_session_t s2 = session();
	struct client_ca_gen *g2 = client_ca_attach(ca, s2);
	assert_non_null(g2);
	assert_true(g2 != g1);
	assert_true(trusts(s2, g_leaf2));
	assert_false(trusts(s2, g_leaf1));
	/* the session that started before keeps its CA */
	assert_true(trusts(s1, g_leaf1));

	/* a file that does not parse, then none at all: CA 2 stays */
	put("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n");
	assert_int_equal(client_ca_check(ca), 0);
	gnutls_session_t s3 = session();
	struct client_ca_gen *g3 = client_ca_attach(ca, s3);
	assert_true(g3 == g2);
	assert_true(trusts(s3, g_leaf2));
	assert_int_equal(unlink(g_path), 0);
	gnutls_session_t s4 = session();
	struct client_ca_gen *g4 = client_ca_attach(ca, s4);
	assert_true(g4 == g2);

	/* sessions close in any order, the CA object last or not */
	gnutls_deinit(s2);
	client_ca_release(g2);
	client_ca_free(ca);
	gnutls_deinit(s1);
	client_ca_release(g1);
	gnutls_deinit(s3);
	client_ca_release(g3);
	gnutls_deinit(s4);
	client_ca_release(g4);
}

static void empty_file_is_no_ca(void **state)
{
	(void)state;
	put("");
	struct client_ca *ca = client_ca_new(g_path);
	assert_int_equal(client_ca_check(ca), -EINVAL);
	assert_int_equal(client_ca_check(ca), -EINVAL); /* unchanged: not read again */
	put(test_ca_pem(g_ca1));
	assert_int_equal(client_ca_check(ca), 0);
	client_ca_free(ca);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(not_there_yet, setup_each, teardown_each),
	    cmocka_unit_test_setup_teardown(reload_on_change, setup_each, teardown_each),
	    cmocka_unit_test_setup_teardown(empty_file_is_no_ca, setup_each, teardown_each),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
