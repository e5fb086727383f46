/*
 * testca.c - a GnuTLS certificate authority for the identity tests, see
 * testca.h.  It plays the cluster's signer: what a request asks for is
 * what the certificate says.
 */
#include "testca.h"

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"

struct test_ca {
	gnutls_x509_privkey_t key;
	gnutls_x509_crt_t crt;
	char *pem;
};

static atomic_uint serial_seq = 1;

static int set_serial(gnutls_x509_crt_t crt)
{
	unsigned s = atomic_fetch_add(&serial_seq, 1);
	unsigned char b[4] = {(unsigned char)(s >> 24 & 0x7f), (unsigned char)(s >> 16),
			      (unsigned char)(s >> 8), (unsigned char)s};
	return gnutls_x509_crt_set_serial(crt, b, sizeof b);
}

static char *export_pem(gnutls_x509_crt_t crt)
{
	gnutls_datum_t d = {NULL, 0};
	if (gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &d) < 0)
		return NULL;
	char *s = strndup((char *)d.data, d.size);
	gnutls_free(d.data);
	return s;
}

struct test_ca *test_ca_new(const char *cn)
{
	struct test_ca *ca = calloc(1, sizeof *ca);
	if (!ca)
		return NULL;
	time_t now = time(NULL);
	int rc = gnutls_x509_privkey_init(&ca->key);
	if (rc >= 0)
		rc = gnutls_x509_privkey_generate2(ca->key, GNUTLS_PK_ECDSA,
						   GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1),
						   0, NULL, 0);
	if (rc >= 0)
		rc = gnutls_x509_crt_init(&ca->crt);
	if (rc >= 0)
		rc = gnutls_x509_crt_set_version(ca->crt, 3);
	if (rc >= 0)
		rc = set_serial(ca->crt);
	if (rc >= 0)
		rc = gnutls_x509_crt_set_dn_by_oid(ca->crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn,
						   (unsigned)strlen(cn));
	if (rc >= 0)
		rc = gnutls_x509_crt_set_key(ca->crt, ca->key);
	if (rc >= 0)
		rc = gnutls_x509_crt_set_activation_time(ca->crt, now - 3600);
	if (rc >= 0)
		rc = gnutls_x509_crt_set_expiration_time(ca->crt, now + 86400);
	if (rc >= 0)
		rc = gnutls_x509_crt_set_basic_constraints(ca->crt, 1, -1);
	if (rc >= 0)
		rc = gnutls_x509_crt_set_key_usage(ca->crt, GNUTLS_KEY_KEY_CERT_SIGN |
								GNUTLS_KEY_CRL_SIGN |
								GNUTLS_KEY_DIGITAL_SIGNATURE);
	if (rc >= 0)
		rc = gnutls_x509_crt_sign2(ca->crt, ca->crt, ca->key, GNUTLS_DIG_SHA256, 0);
	if (rc < 0 || !(ca->pem = export_pem(ca->crt))) {
		fprintf(stderr, "test_ca_new: %s\n", gnutls_strerror(rc));
		test_ca_free(ca);
		return NULL;
	}
	return ca;
}

void test_ca_free(struct test_ca *ca)
{
	if (!ca)
		return;
	if (ca->crt)
		gnutls_x509_crt_deinit(ca->crt);
	if (ca->key)
		gnutls_x509_privkey_deinit(ca->key);
	free(ca->pem);
	free(ca);
}

const char *test_ca_pem(const struct test_ca *ca)
{
	return ca->pem;
}

static char *sign(struct test_ca *ca, const char *csr_pem, time_t not_before, time_t not_after,
		  bool extensions)
{
	gnutls_x509_crq_t crq = NULL;
	gnutls_x509_crt_t crt = NULL;
	gnutls_datum_t d = {(unsigned char *)csr_pem, (unsigned)strlen(csr_pem)};
	char *out = NULL;
	int rc = gnutls_x509_crq_init(&crq);
	if (rc >= 0)
		rc = gnutls_x509_crq_import(crq, &d, GNUTLS_X509_FMT_PEM);
	if (rc >= 0)
		rc = gnutls_x509_crq_verify(crq, 0);
	if (rc >= 0)
		rc = gnutls_x509_crt_init(&crt);
	if (rc >= 0)
		rc = gnutls_x509_crt_set_crq(crt, crq);
	if (rc >= 0 && extensions)
		rc = gnutls_x509_crt_set_crq_extensions(crt, crq);
	if (rc >= 0)
		rc = gnutls_x509_crt_set_version(crt, 3);
	if (rc >= 0)
		rc = set_serial(crt);
	if (rc >= 0)
		rc = gnutls_x509_crt_set_activation_time(crt, not_before);
	if (rc >= 0)
		rc = gnutls_x509_crt_set_expiration_time(crt, not_after);
	if (rc >= 0)
		rc = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE |
							    GNUTLS_KEY_KEY_ENCIPHERMENT);
	if (rc >= 0)
		rc = gnutls_x509_crt_sign2(crt, ca->crt, ca->key, GNUTLS_DIG_SHA256, 0);
	if (rc >= 0)
		out = export_pem(crt);
	else
		fprintf(stderr, "test_ca_sign: %s\n", gnutls_strerror(rc));
	if (crt)
		gnutls_x509_crt_deinit(crt);
	if (crq)
		gnutls_x509_crq_deinit(crq);
	return out;
}

char *test_ca_sign(struct test_ca *ca, const char *csr_pem, time_t not_before, time_t not_after)
{
	return sign(ca, csr_pem, not_before, not_after, true);
}

char *test_ca_sign_no_sans(struct test_ca *ca, const char *csr_pem, time_t not_before,
			   time_t not_after)
{
	return sign(ca, csr_pem, not_before, not_after, false);
}

char *test_ca_issue_pair(struct test_ca *ca, const struct x509_template *t, time_t not_before,
			 time_t not_after)
{
	struct buf csr = BUF_INIT, key = BUF_INIT;
	char *err = NULL, *out = NULL;
	if (x509_make_csr(t, &csr, &key, &err) < 0) {
		fprintf(stderr, "test_ca_issue_pair: %s\n", err);
		free(err);
	} else {
		char *cert = test_ca_sign(ca, csr.data, not_before, not_after);
		if (cert)
			out = str_printf("%s%s", cert, key.data);
		free(cert);
	}
	buf_free(&csr);
	buf_free(&key);
	return out;
}

static void add_all(struct x509_names *l, const char *const *v)
{
	for (; v && *v; v++)
		if (x509_names_add(l, *v) < 0)
			abort();
}

void test_template(struct x509_template *t, const char *cn, const char *const *orgs,
		   const char *const *dns, const char *const *ips)
{
	memset(t, 0, sizeof *t);
	if (!(t->cn = strdup(cn)))
		abort();
	add_all(&t->orgs, orgs);
	add_all(&t->dns, dns);
	add_all(&t->ips, ips);
}
