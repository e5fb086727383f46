/*
 * test_x509.c - identity/x509: requests made for a template come back from
 * a signer (the test CA) as certificates that carry the template; a PEM of
 * certificate(s) and key in any order is read, and a key that is not the
 * certificate's is told apart; malformed PEM is refused with a message that
 * names the fault; the template check; kubeadm's CA pins against vectors
 * computed by openssl (the commands are beside each fixture).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "identity/x509.h"
#include "testca.h"
#include "util/buf.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=kubernetes -days 36500 */
static const char rsa_ca_pem[] =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIDDTCCAfWgAwIBAgIUaP2dB/CFPW75I0uHHDuupb2uUVEwDQYJKoZIhvcNAQEL\n"
    "BQAwFTETMBEGA1UEAwwKa3ViZXJuZXRlczAgFw0yNjEyMDIwMDMxMDNaGA8yMTI2\n"
    "MTEwODAwMzEwM1owFTETMBEGA1UEAwwKa3ViZXJuZXRlczCCASIwDQYJKoZIhvcN\n"
    "AQEBBQADggEPADCCAQoCggEBANgGaiTBdWYGPcgfzhlMxwGnXpSq1fxq19iYZEFl\n"
    "cpJIaHFJN0Z2agephl+Ao57zwFoVL27YIPxY8LBix3Py6J9XB4NmCYMrjnaMF25A\n"
    "/w21IGbd2WrVOpQihFdl/5Usbi2DwxF8I8hRfcsEbotNy1cnd5dkwAUph8583BU/\n"
    "grw6zfInE6F0jDapNsYe6HKvT75iLGVZgs4cptnXX2NdmnqXmS7z2U8YD8dFkMR1\n"
    "W1RuFNrLXUnKFPRGBkT0pXs04QGrvZ05GPVRiY5zgcgbkfAQTVcFG7P3CHM8fVoi\n"
    "DoDjgBKzdz5cWUz2Wy20sE0oOlnxtm5r/imW7yEfMZwHZisCAwEAAaNTMFEwHQYD\n"
    "VR0OBBYEFAMwB/+EsWuGjx8kibhgXgWSa0mHMB8GA1UdIwQYMBaAFAMwB/+EsWuG\n"
    "jx8kibhgXgWSa0mHMA8GA1UdEwEB/wQFMAMBAf8wDQYJKoZIhvcNAQELBQADggEB\n"
    "AIua+sOiIeD6P8nIsGt24zvqAyrJBwTKO1rm3qfsUXIZPVrvXYq2xnSaoeKw5C9o\n"
    "SY4ZtCcbKu4UvDynFpKG/VMbyAqgNvEiAazocEmqKEbMx3okvo6lVyprQj4aZ4hX\n"
    "4kI3PJ/KpJo4EoUp4CrKXB1CXOpemBHLcEeRJ6AABWEfgFIahDVExuedB6NDM36N\n"
    "R62zxp4phk/1bCK/Zq5lji1zlUmRzu2fLuNnEDQZGjlRCoIkFIC/360l7aogztOV\n"
    "MMlG3dVcmz3rgU3J7jEKthFvvlAhfHK/igcDwMhcg6gowdysQHnJeVTcMfRoglPN\n"
    "YRHMSTr/P8JEphORGMi+S0w=\n"
    "-----END CERTIFICATE-----\n";
/* its key: openssl rsa -in rsa.key -traditional */
static const char rsa_ca_key_pkcs1[] =
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEpAIBAAKCAQEA2AZqJMF1ZgY9yB/OGUzHAadelKrV/GrX2JhkQWVykkhocUk3\n"
    "RnZqB6mGX4CjnvPAWhUvbtgg/FjwsGLHc/Lon1cHg2YJgyuOdowXbkD/DbUgZt3Z\n"
    "atU6lCKEV2X/lSxuLYPDEXwjyFF9ywRui03LVyd3l2TABSmHznzcFT+CvDrN8icT\n"
    "oXSMNqk2xh7ocq9PvmIsZVmCzhym2ddfY12aepeZLvPZTxgPx0WQxHVbVG4U2std\n"
    "ScoU9EYGRPSlezThAau9nTkY9VGJjnOByBuR8BBNVwUbs/cIczx9WiIOgOOAErN3\n"
    "PlxZTPZbLbSwTSg6WfG2bmv+KZbvIR8xnAdmKwIDAQABAoIBACw+YBXoE3HSXGv0\n"
    "66Kt4WJa05myRYJdpZiEWaA1NVp1fwKYwrvpO70XAODleV1wQdiRVzYmCNd2JdGS\n"
    "YZRDT1Z3HiBQ0Sjuzk5EUfYwVKyLiLfYvxNM2aMGUMGPr+FvCJ/EyTp3COMZoaBn\n"
    "Z3abd8aBXFKC/XrxLxHg67hkWhPPvPA3qljjGuGKvt0SgRYb109p1uSqZFjg8FnQ\n"
    "vC63UqtOQ5Dbm6H4B0iaYTSuCWmA5Fj8WVp70hz6hdnb9MlgZAID5LdVSXfwBYdf\n"
    "wnRh2B//4YZcywDSRUJ+s8kw8sHLzTdwjPYRARODTH7nuBCcuGHEWIjiViIC4Q+3\n"
    "pW5HVPkCgYEA+Aeu1ERFESNoL7Dh5ayOjhqqJAjk06Oyo6PczgUWYwmxb05/rsZv\n"
    "i1oE6VZ46Q6Qz1ZBAavFEZbp5ch2s/sJ/lmiw72O7jGEzbyeqkRIXMfzcyMbbDl0\n"
    "i06pAXmvS/ipcEbsu0k8kQVqcyc5nBATkctSShhp2jzR8LO2OccwTdkCgYEA3vd0\n"
    "wYrCj/nPFzPheDXdhJzDnQMClUKXr8rp9x7o7K8fzZBTu86mrngv/3UYc9h6X8rY\n"
    "6S0beoh/yT3aJ+hzysKpfrWBR4zozxgn1FFOUff21Llu2hWQRGNCKcModtHCcGS0\n"
    "I/UWL6lQdRTPQ/OZQA80cxe/sQt8R1vNXNcuXaMCgYEA45vBTx+bNgAFAwbSNj8k\n"
    "zrkfe1QCEUl+jHa6EQFQKvBhOKCTwWJuSDYCndJxwIVSVEJ2Az+K5/pSiEBu1flA\n"
    "kX3WRMQ2XtVoZph6Dgv9T89Z1EXaS3VqQtCbfTQarp/xdYxQgAnUH80Vg7jyQAns\n"
    "u3UW/dHriY8YpUd1qQ3mgPkCgYBljdw2ExePMD7s2IqHkDE3J5fJOgfBKDWisg9i\n"
    "qUd6FkGsBWK+Fd/Bc6iY+CKNETqbyu6FNjBf3TAm3u8wYiXrYkKFHfKmPj4DpYLu\n"
    "p6G+n+xi85rT5iJxo6wNDYCurdecDaInBoh2aO3mhfXpg1h33vUKvvRmlU6jyeJ9\n"
    "uNy7dQKBgQChNaCDnDQK1x1oigvvprWsci3VrPH+7LNN90XPSqcTE9n8h7Ctdw2e\n"
    "+fAVvLRt3/xKi6HKJ7I+Li2iNgEqBhJFlFplTUotL/ptP1d7jp16crq9sNzGqELF\n"
    "BzTZRqMad/F2pE0phD9xJ+9SAVk6friUDbeA5/e6QIYQgDNDxXm6Ew==\n"
    "-----END RSA PRIVATE KEY-----\n";
/* a version 1 certificate (no [0] version field): openssl ecparam -name prime256v1
 * -genkey -noout, openssl req -new, openssl x509 -req -signkey (no extensions) */
static const char ec_v1_ca_pem[] =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBHDCBwwIUPKsv2mB2ayUL3jQrQm+Wzwk2MRIwCgYIKoZIzj0EAwIwEDEOMAwG\n"
    "A1UEAwwFdjEtY2EwIBcNMjYxMjAyMDAzMTAzWhgPMjEyNjExMDgwMDMxMDNaMBAx\n"
    "DjAMBgNVBAMMBXYxLWNhMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEXSU5fKKr\n"
    "f+qdTcM89XNjiZHpfVewslfnZGqvUYHkUBotWisKoKYoWJAiD7STl+8wmHxMcwIh\n"
    "KXcJ69mPjRU1gjAKBggqhkjOPQQDAgNIADBFAiEA3vKwA6BgfuQMKLPBX5RlfEn9\n"
    "x6wZEbK95fsy9BcUlp0CIH58ptfozzqu48YoTIf1MpBCSJR5Kg6XO6X/3X1Uecc1\n"
    "-----END CERTIFICATE-----\n";
/* its key, SEC1 as openssl ecparam writes it */
static const char ec_v1_ca_key_sec1[] =
    "-----BEGIN EC PRIVATE KEY-----\n"
    "MHcCAQEEIAvB4CQRDn5dDHokRLlrgSx2ieL1BiUdjRNI5GAyKx5HoAoGCCqGSM49\n"
    "AwEHoUQDQgAEXSU5fKKrf+qdTcM89XNjiZHpfVewslfnZGqvUYHkUBotWisKoKYo\n"
    "WJAiD7STl+8wmHxMcwIhKXcJ69mPjRU1gg==\n"
    "-----END EC PRIVATE KEY-----\n";

/* The pins of the two fixtures, by the command kubeadm's documentation
 * gives:  openssl x509 -pubkey -noout -in ca.crt |
 *         openssl pkey -pubin -outform der | sha256sum */
#define RSA_CA_PIN "sha256:5151d0b80f083481a73a9e183f6bc1401eac0d20b48ffdf0c012f80f27ac8e51"
#define EC_V1_PIN  "sha256:31299e71e13d4399f65f09bbb5c3eba28557de7172715be7eec5f1898eb68935"

static struct test_ca *g_ca, *g_ca2;

static const char *const hub_orgs[] = {"openyurt:yurthub", "system:nodes", NULL};
static const char *const serving_dns[] = {"kubernetes", "kubernetes.default",
					  "kubernetes.default.svc",
					  "kubernetes.default.svc.cluster.local", NULL};
static const char *const serving_ips[] = {"10.96.0.1", "169.254.2.1", "127.0.0.1", "fd00::2:1",
					  NULL};

static char *cat2(const char *a, const char *b)
{
	char *s = str_printf("%s%s", a, b);
	assert_non_null(s);
	return s;
}

/* A pair issued by ca for t, valid now for an hour. */
static char *pair_for(struct test_ca *ca, const struct x509_template *t)
{
	time_t now = time(NULL);
	char *p = test_ca_issue_pair(ca, t, now - 60, now + 3600);
	assert_non_null(p);
	return p;
}

/* The key block of a pair (what follows the certificate). */
static const char *key_of(const char *pair)
{
	const char *k = strstr(pair, "-----BEGIN EC PRIVATE KEY-----");
	assert_non_null(k);
	return k;
}

/* The certificate block(s) of a pair, as a new string. */
static char *cert_of(const char *pair)
{
	char *c = strndup(pair, (size_t)(key_of(pair) - pair));
	assert_non_null(c);
	return c;
}

static void parse_ok(const char *pem, struct x509_info *info)
{
	char *err = NULL;
	if (x509_parse_pem(pem, strlen(pem), info, &err) != 0)
		fail_msg("parse failed: %s", err);
	assert_null(err);
}

/* The request carries the template; the signer's certificate, read back
 * with its key, says exactly that. */
static void test_csr_carries_template(void **state)
{
	(void)state;
	struct x509_template t;
	test_template(&t, "system:node:edge-1", hub_orgs, serving_dns, serving_ips);
	time_t now = time(NULL);
	char *pair = test_ca_issue_pair(g_ca, &t, now - 10, now + 100);
	assert_non_null(pair);
	struct x509_info info;
	parse_ok(pair, &info);
	assert_string_equal(info.cn, "system:node:edge-1");
	assert_int_equal(info.orgs.n, 2);
	assert_string_equal(info.orgs.v[0], "openyurt:yurthub");
	assert_string_equal(info.orgs.v[1], "system:nodes");
	assert_int_equal(info.dns.n, 4);
	for (size_t i = 0; i < 4; i++)
		assert_string_equal(info.dns.v[i], serving_dns[i]);
	assert_int_equal(info.ips.n, 4);
	for (size_t i = 0; i < 4; i++)
		assert_string_equal(info.ips.v[i], serving_ips[i]);
	assert_int_equal(info.not_before, now - 10);
	assert_int_equal(info.not_after, now + 100);
	assert_int_equal(info.n_certs, 1);
	assert_true(info.has_key);
	assert_true(info.key_matches);
	assert_true(x509_satisfies(&info, &t, NULL));
	x509_info_free(&info);
	free(pair);
	x509_template_free(&t);
}

/* The PEM types the API server and client-go expect, a new key each time,
 * and a request GnuTLS verifies as signed by that key. */
static void test_csr_format(void **state)
{
	(void)state;
	struct x509_template t;
	test_template(&t, "system:node:edge-1", hub_orgs, NULL, NULL);
	struct buf csr1 = BUF_INIT, key1 = BUF_INIT, csr2 = BUF_INIT, key2 = BUF_INIT;
	char *err = NULL;
	assert_int_equal(x509_make_csr(&t, &csr1, &key1, &err), 0);
	assert_int_equal(x509_make_csr(&t, &csr2, &key2, &err), 0);
	assert_null(err);
	assert_non_null(strstr(csr1.data, "-----BEGIN CERTIFICATE REQUEST-----\n"));
	assert_null(strstr(csr1.data, "NEW CERTIFICATE REQUEST"));
	assert_int_equal(strncmp(key1.data, "-----BEGIN EC PRIVATE KEY-----\n", 31), 0);
	assert_string_not_equal(key1.data, key2.data);
	assert_string_not_equal(csr1.data, csr2.data);

	gnutls_x509_crq_t crq;
	gnutls_datum_t d = {(unsigned char *)csr1.data, (unsigned)csr1.len};
	assert_int_equal(gnutls_x509_crq_init(&crq), 0);
	assert_int_equal(gnutls_x509_crq_import(crq, &d, GNUTLS_X509_FMT_PEM), 0);
	assert_int_equal(gnutls_x509_crq_verify(crq, 0), 0);
	unsigned bits = 0;
	assert_int_equal(gnutls_x509_crq_get_pk_algorithm(crq, &bits), GNUTLS_PK_ECDSA);
	assert_int_equal(bits, 256);
	gnutls_x509_crq_deinit(crq);
	buf_free(&csr1);
	buf_free(&key1);
	buf_free(&csr2);
	buf_free(&key2);
	x509_template_free(&t);
}

static void test_csr_refuses_bad_template(void **state)
{
	(void)state;
	static const char *const bad_ip[] = {"10.0.0.1", "10.0.0.300", NULL};
	struct x509_template t;
	struct buf csr = BUF_INIT, key = BUF_INIT;
	char *err = NULL;
	test_template(&t, "system:node:x", NULL, NULL, bad_ip);
	assert_int_equal(x509_make_csr(&t, &csr, &key, &err), -1);
	assert_non_null(strstr(err, "10.0.0.300"));
	assert_int_equal(csr.len, 0);
	assert_int_equal(key.len, 0);
	free(err);
	err = NULL;
	x509_template_free(&t);
	test_template(&t, "", hub_orgs, NULL, NULL);
	assert_int_equal(x509_make_csr(&t, &csr, &key, &err), -1);
	assert_non_null(strstr(err, "no CN"));
	free(err);
	x509_template_free(&t);
}

/* Certificate alone; key first; a chain, leaf first; another pair's key. */
static void test_pem_shapes(void **state)
{
	(void)state;
	struct x509_template t, u;
	test_template(&t, "system:node:a", hub_orgs, NULL, NULL);
	test_template(&u, "system:node:b", hub_orgs, NULL, NULL);
	char *pa = pair_for(g_ca, &t), *pb = pair_for(g_ca, &u);
	char *ca_cert = cert_of(pa);
	struct x509_info info;

	parse_ok(ca_cert, &info);
	assert_false(info.has_key);
	assert_false(info.key_matches);
	assert_string_equal(info.cn, "system:node:a");
	x509_info_free(&info);

	char *key_first = cat2(key_of(pa), ca_cert);
	parse_ok(key_first, &info);
	assert_true(info.has_key && info.key_matches);
	x509_info_free(&info);

	char *chain = str_printf("%s%s%s", ca_cert, test_ca_pem(g_ca), key_of(pa));
	parse_ok(chain, &info);
	assert_int_equal(info.n_certs, 2);
	assert_string_equal(info.cn, "system:node:a");
	assert_true(info.key_matches);
	x509_info_free(&info);

	char *mixed = cat2(ca_cert, key_of(pb));
	parse_ok(mixed, &info);
	assert_true(info.has_key);
	assert_false(info.key_matches);
	x509_info_free(&info);

	/* text around blocks, CRLF line ends, a block of another kind */
	struct buf crlf = BUF_INIT;
	assert_int_equal(buf_append_str(&crlf, "Bag Attributes: none\r\n"), 0);
	for (const char *p = pa; *p; p++) {
		if (*p == '\n')
			assert_int_equal(buf_append_char(&crlf, '\r'), 0);
		assert_int_equal(buf_append_char(&crlf, *p), 0);
	}
	assert_int_equal(buf_append_str(&crlf,
					"-----BEGIN EC PARAMETERS-----\r\nBggqhkjOPQMBBw==\r\n"
					"-----END EC PARAMETERS-----\r\n"),
			 0);
	parse_ok(crlf.data, &info);
	assert_true(info.key_matches);
	x509_info_free(&info);

	buf_free(&crlf);
	free(mixed);
	free(chain);
	free(key_first);
	free(ca_cert);
	free(pa);
	free(pb);
	x509_template_free(&t);
	x509_template_free(&u);
}

/* Keys written by others: openssl's SEC1 and PKCS#1, GnuTLS's PKCS#8. */
static void test_foreign_keys(void **state)
{
	(void)state;
	struct x509_info info;
	char *p = cat2(ec_v1_ca_pem, ec_v1_ca_key_sec1);
	parse_ok(p, &info);
	assert_true(info.key_matches);
	assert_string_equal(info.cn, "v1-ca");
	x509_info_free(&info);
	free(p);
	p = cat2(rsa_ca_key_pkcs1, rsa_ca_pem);
	parse_ok(p, &info);
	assert_true(info.key_matches);
	assert_string_equal(info.cn, "kubernetes");
	x509_info_free(&info);
	free(p);
	/* the RSA certificate with the EC key: not its key */
	p = cat2(rsa_ca_pem, ec_v1_ca_key_sec1);
	parse_ok(p, &info);
	assert_true(info.has_key);
	assert_false(info.key_matches);
	x509_info_free(&info);
	free(p);

	/* PKCS#8, "PRIVATE KEY" */
	gnutls_x509_privkey_t k;
	gnutls_datum_t in = {(unsigned char *)ec_v1_ca_key_sec1, sizeof ec_v1_ca_key_sec1 - 1};
	gnutls_datum_t out = {NULL, 0};
	assert_int_equal(gnutls_x509_privkey_init(&k), 0);
	assert_int_equal(gnutls_x509_privkey_import(k, &in, GNUTLS_X509_FMT_PEM), 0);
	assert_int_equal(gnutls_x509_privkey_export2_pkcs8(k, GNUTLS_X509_FMT_PEM, NULL,
							   GNUTLS_PKCS_PLAIN, &out),
			 0);
	gnutls_x509_privkey_deinit(k);
	p = str_printf("%s%.*s", ec_v1_ca_pem, (int)out.size, out.data);
	gnutls_free(out.data);
	assert_non_null(strstr(p, "-----BEGIN PRIVATE KEY-----"));
	parse_ok(p, &info);
	assert_true(info.key_matches);
	x509_info_free(&info);
	free(p);
}

static void expect_error(const char *pem, const char *want)
{
	struct x509_info info;
	char *err = NULL;
	if (x509_parse_pem(pem, strlen(pem), &info, &err) != -1)
		fail_msg("accepted: %s", pem);
	assert_non_null(err);
	if (!strstr(err, want))
		fail_msg("error \"%s\" does not say \"%s\"", err, want);
	/* the output is empty and safe to free again */
	assert_null(info.cn);
	assert_int_equal(info.orgs.n, 0);
	x509_info_free(&info);
	free(err);
}

static void test_malformed(void **state)
{
	(void)state;
	char *only_cert = strndup(ec_v1_ca_pem, sizeof ec_v1_ca_pem - 1);
	assert_non_null(only_cert);
	expect_error("", "no certificate");
	expect_error("hello\n", "no certificate");
	expect_error(ec_v1_ca_key_sec1, "no certificate");
	expect_error("-----BEGIN CERTIFICATE-----\nMIIB\n",
		     "block 1 (CERTIFICATE): no matching END");
	expect_error("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERT-----\n", "no matching END");
	expect_error("-----BEGIN CERTIFICATE\nMIIB\n-----END CERTIFICATE-----\n",
		     "malformed BEGIN");
	expect_error("-----BEGIN CERTIFICATE-----\nM!IB\n-----END CERTIFICATE-----\n",
		     "not base64");
	expect_error("-----BEGIN CERTIFICATE-----\n\n-----END CERTIFICATE-----\n", "not base64");
	expect_error("-----BEGIN CERTIFICATE-----\nMIIBAAAA\n-----END CERTIFICATE-----\n",
		     "certificate 1:");
	char *two = str_printf("%s%s", ec_v1_ca_pem, rsa_ca_pem);
	char *bad_second = str_printf(
	    "%s%s", two, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
	expect_error(bad_second, "certificate 3:");
	char *two_keys = str_printf("%s%s%s", ec_v1_ca_pem, ec_v1_ca_key_sec1, ec_v1_ca_key_sec1);
	expect_error(two_keys, "more than one private key");
	char *enc = str_printf("%s-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED "
			       "PRIVATE KEY-----\n",
			       ec_v1_ca_pem);
	expect_error(enc, "encrypted");
	char *proc = str_printf("%s-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n"
				"DEK-Info: AES-128-CBC,00\n\nAAAA\n-----END RSA PRIVATE KEY-----\n",
				ec_v1_ca_pem);
	expect_error(proc, "headers");
	char *bad_key = str_printf(
	    "%s-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n", ec_v1_ca_pem);
	expect_error(bad_key, "private key (EC PRIVATE KEY)");
	/* a SEC1 key whose public point is not its private scalar's */
	struct buf tampered = BUF_INIT;
	assert_int_equal(buf_append_str(&tampered, ec_v1_ca_key_sec1), 0);
	char *q = strstr(tampered.data, "AwEHoUQDQgAE");
	assert_non_null(q);
	q[14] = q[14] == 'A' ? 'B' : 'A'; /* inside the public point */
	char *incons = cat2(ec_v1_ca_pem, tampered.data);
	expect_error(incons, "private key");
	buf_free(&tampered);
	free(incons);
	free(bad_key);
	free(proc);
	free(enc);
	free(two_keys);
	free(bad_second);
	free(two);
	free(only_cert);
}

static void expect_unsatisfied(const struct x509_info *info, const struct x509_template *t,
			       const char *want)
{
	char *why = NULL;
	assert_false(x509_satisfies(info, t, &why));
	assert_non_null(why);
	if (!strstr(why, want))
		fail_msg("\"%s\" does not say \"%s\"", why, want);
	free(why);
}

static void test_satisfies(void **state)
{
	(void)state;
	struct x509_template t, want;
	test_template(&t, "system:node:e", hub_orgs, serving_dns, serving_ips);
	char *pair = pair_for(g_ca, &t);
	struct x509_info info;
	parse_ok(pair, &info);

	/* fewer wanted than held: extras are fine; IPs as addresses */
	static const char *const some_ips[] = {"fd00:0:0:0:0:0:2:1", "::ffff:127.0.0.1", NULL};
	static const char *const one_org[] = {"system:nodes", NULL};
	test_template(&want, "system:node:e", one_org, NULL, some_ips);
	assert_true(x509_satisfies(&info, &want, NULL));
	x509_template_free(&want);

	test_template(&want, "system:node:f", hub_orgs, NULL, NULL);
	expect_unsatisfied(&info, &want, "CN is \"system:node:e\"");
	x509_template_free(&want);

	static const char *const more_orgs[] = {"system:nodes", "openyurt:tenant:x", NULL};
	test_template(&want, "system:node:e", more_orgs, NULL, NULL);
	expect_unsatisfied(&info, &want, "O \"openyurt:tenant:x\"");
	x509_template_free(&want);

	static const char *const more_dns[] = {"kubernetes", "hub.local", NULL};
	test_template(&want, "system:node:e", NULL, more_dns, NULL);
	expect_unsatisfied(&info, &want, "DNS SAN \"hub.local\"");
	x509_template_free(&want);

	static const char *const new_ip[] = {"169.254.2.1", "192.168.1.7", NULL};
	test_template(&want, "system:node:e", NULL, NULL, new_ip);
	expect_unsatisfied(&info, &want, "IP SAN 192.168.1.7");
	x509_template_free(&want);

	x509_info_free(&info);
	free(pair);
	x509_template_free(&t);
}

static void test_template_copy_equal(void **state)
{
	(void)state;
	struct x509_template a, b, c;
	static const char *const ips1[] = {"127.0.0.1", "fd00::2:1", NULL};
	static const char *const ips2[] = {"fd00:0::2:1", "127.0.0.1", "127.0.0.1", NULL};
	static const char *const orgs2[] = {"system:nodes", "openyurt:yurthub", NULL};
	test_template(&a, "system:node:e", hub_orgs, serving_dns, ips1);
	test_template(&b, "system:node:e", orgs2, serving_dns, ips2);
	assert_true(x509_template_equal(&a, &b));
	assert_int_equal(x509_template_copy(&c, &a), 0);
	assert_true(x509_template_equal(&c, &a));
	assert_ptr_not_equal(c.cn, a.cn);
	assert_int_equal(x509_names_add(&c.ips, "10.0.0.9"), 0);
	assert_false(x509_template_equal(&c, &a));
	x509_template_free(&c);
	free(b.cn);
	b.cn = strdup("system:node:x");
	assert_false(x509_template_equal(&a, &b));
	x509_template_free(&a);
	x509_template_free(&b);
}

/* The pins of openssl's certificates, one RSA (kubeadm's CA is RSA), one
 * of version 1 (no version field in DER). */
static void test_pin_vectors(void **state)
{
	(void)state;
	struct buf pin = BUF_INIT;
	char *err = NULL;
	assert_int_equal(x509_pin_of(rsa_ca_pem, strlen(rsa_ca_pem), &pin, &err), 0);
	assert_string_equal(pin.data, RSA_CA_PIN);
	buf_reset(&pin);
	assert_int_equal(x509_pin_of(ec_v1_ca_pem, strlen(ec_v1_ca_pem), &pin, &err), 0);
	assert_string_equal(pin.data, EC_V1_PIN);
	buf_reset(&pin);
	assert_int_equal(x509_pin_of("nothing", 7, &pin, &err), -1);
	assert_non_null(strstr(err, "no certificate"));
	free(err);
	buf_free(&pin);
}

/* A GnuTLS certificate: the pin is the hash of the SPKI as GnuTLS exports
 * it too (both encodings are DER, so they agree). */
static void test_pin_matches_gnutls_spki(void **state)
{
	(void)state;
	gnutls_x509_crt_t crt;
	gnutls_pubkey_t pub;
	gnutls_datum_t in = {(unsigned char *)test_ca_pem(g_ca),
			     (unsigned)strlen(test_ca_pem(g_ca))};
	gnutls_datum_t spki = {NULL, 0};
	unsigned char hash[32];
	assert_int_equal(gnutls_x509_crt_init(&crt), 0);
	assert_int_equal(gnutls_x509_crt_import(crt, &in, GNUTLS_X509_FMT_PEM), 0);
	assert_int_equal(gnutls_pubkey_init(&pub), 0);
	assert_int_equal(gnutls_pubkey_import_x509(pub, crt, 0), 0);
	assert_int_equal(gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_DER, &spki), 0);
	assert_int_equal(gnutls_hash_fast(GNUTLS_DIG_SHA256, spki.data, spki.size, hash), 0);
	struct buf want = BUF_INIT, pin = BUF_INIT;
	assert_int_equal(buf_append_str(&want, "sha256:"), 0);
	for (int i = 0; i < 32; i++)
		assert_int_equal(buf_printf(&want, "%02x", hash[i]), 0);
	assert_int_equal(x509_pin_of(in.data ? (char *)in.data : "", in.size, &pin, NULL), 0);
	assert_string_equal(pin.data, want.data);
	buf_free(&want);
	buf_free(&pin);
	gnutls_free(spki.data);
	gnutls_pubkey_deinit(pub);
	gnutls_x509_crt_deinit(crt);
}

static void test_pins_check(void **state)
{
	(void)state;
	char *bundle = cat2(rsa_ca_pem, ec_v1_ca_pem);
	size_t blen = strlen(bundle);
	char *err = NULL;

	const char *second[] = {EC_V1_PIN};
	assert_int_equal(x509_pins_check(bundle, blen, second, 1, &err), 1);
	const char *upper[] = {
	    "SHA256:5151D0B80F083481A73A9E183F6BC1401EAC0D20B48FFDF0C012F80F27AC8E51"};
	assert_int_equal(x509_pins_check(bundle, blen, upper, 1, &err), 1);
	assert_null(err);

	/* a pin of another CA: no, and the message names what the bundle has */
	struct buf other = BUF_INIT;
	assert_int_equal(x509_pin_of(test_ca_pem(g_ca2), strlen(test_ca_pem(g_ca2)), &other, NULL),
			 0);
	const char *wrong[] = {other.data};
	assert_int_equal(x509_pins_check(bundle, blen, wrong, 1, &err), 0);
	assert_non_null(strstr(err, RSA_CA_PIN));
	assert_non_null(strstr(err, EC_V1_PIN));
	free(err);
	err = NULL;
	/* any of several */
	const char *several[] = {other.data, RSA_CA_PIN};
	assert_int_equal(x509_pins_check(bundle, blen, several, 2, &err), 1);

	static const char *const malformed[] = {
	    "5151d0b80f083481a73a9e183f6bc1401eac0d20b48ffdf0c012f80f27ac8e51",
	    "sha1:5151d0b80f083481a73a9e183f6bc1401eac0d20b48ffdf0c012f80f27ac8e51",
	    "sha256:5151d0b80f083481a73a9e183f6bc1401eac0d20b48ffdf0c012f80f27ac8e5",
	    "sha256:5151d0b80f083481a73a9e183f6bc1401eac0d20b48ffdf0c012f80f27ac8e511",
	    "sha256:5151d0b80f083481a73a9e183f6bc1401eac0d20b48ffdf0c012f80f27ac8eZZ",
	    "sha256:",
	};
	for (size_t i = 0; i < N_ELEMS(malformed); i++) {
		const char *p[] = {RSA_CA_PIN, malformed[i]};
		assert_int_equal(x509_pins_check(bundle, blen, p, 2, &err), -1);
		assert_non_null(strstr(err, "not of the form"));
		free(err);
		err = NULL;
	}
	assert_int_equal(x509_pins_check(bundle, blen, second, 0, &err), -1);
	free(err);
	err = NULL;
	assert_int_equal(x509_pins_check("garbage", 7, second, 1, &err), -1);
	assert_non_null(strstr(err, "no certificate"));
	free(err);
	buf_free(&other);
	free(bundle);
}

static int setup(void **state)
{
	(void)state;
	g_ca = test_ca_new("test-ca");
	g_ca2 = test_ca_new("other-ca");
	return g_ca && g_ca2 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	test_ca_free(g_ca);
	test_ca_free(g_ca2);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_csr_carries_template),
	    cmocka_unit_test(test_csr_format),
	    cmocka_unit_test(test_csr_refuses_bad_template),
	    cmocka_unit_test(test_pem_shapes),
	    cmocka_unit_test(test_foreign_keys),
	    cmocka_unit_test(test_malformed),
	    cmocka_unit_test(test_satisfies),
	    cmocka_unit_test(test_template_copy_equal),
	    cmocka_unit_test(test_pin_vectors),
	    cmocka_unit_test(test_pin_matches_gnutls_spki),
	    cmocka_unit_test(test_pins_check),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
