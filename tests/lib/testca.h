/*
 * testca.h - a certificate authority for tests, made by GnuTLS in the test
 * process: it signs certificate requests the way the cluster's signer
 * would (subject and SANs from the request, lifetimes the test chooses),
 * and issues ready cert+key pairs for stores the test lays out by hand.
 */
#ifndef YURTHUB_TESTS_TESTCA_H
#define YURTHUB_TESTS_TESTCA_H

#include <time.h>

#include "identity/x509.h"

struct test_ca;

/* A self-signed ECDSA P-256 CA valid for a day; NULL on failure. */
struct test_ca *test_ca_new(const char *cn);
void test_ca_free(struct test_ca *ca);
/* The CA certificate, PEM. */
const char *test_ca_pem(const struct test_ca *ca);

/* Sign a PEM request: subject, key and SANs from it, valid from not_before
 * to not_after.  The certificate PEM (malloc'ed), or NULL when the request
 * does not parse or its signature is wrong. */
char *test_ca_sign(struct test_ca *ca, const char *csr_pem, time_t not_before, time_t not_after);
/* The same, but the request's extensions (its SANs) left out: a signer
 * that does not give what was asked. */
char *test_ca_sign_no_sans(struct test_ca *ca, const char *csr_pem, time_t not_before,
			   time_t not_after);

/* A new key and a certificate for the template, signed by the CA: the PEM
 * of the certificate then the key (malloc'ed), or NULL. */
char *test_ca_issue_pair(struct test_ca *ca, const struct x509_template *t, time_t not_before,
			 time_t not_after);

/* A template from literals: cn, then orgs, dns and ips as NULL-terminated
 * arrays (each may be NULL).  Aborts on ENOMEM. */
void test_template(struct x509_template *t, const char *cn, const char *const *orgs,
		   const char *const *dns, const char *const *ips);

#endif
