/*
 * x509.h - the certificates of the hub's own identity: reading a PEM that
 * holds a certificate (chain) and its key together, as client-go's file
 * store writes them; making a fresh key and a certificate signing request
 * for a template; kubeadm's CA public-key pins; and the test that decides
 * whether a certificate still fits what the hub wants (the trigger for a new
 * request, besides age).
 *
 * identity/ sits beside kube/: it knows certificates and tokens, nothing of
 * HTTP serving, the proxy or the cache.  Crypto is GnuTLS's; the keys it
 * writes are read by GnuTLS (the secure port) and by OpenSSL (libcurl's TLS
 * towards the cloud) alike.
 *
 * Every function here is thread-safe and keeps no state.  Errors come back
 * as one malloc'ed line in *err (err may be NULL), never logged here.
 */
#ifndef YURTHUB_IDENTITY_X509_H
#define YURTHUB_IDENTITY_X509_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "util/buf.h"

/* A list of owned strings. */
struct x509_names {
	char **v;
	size_t n;
};

/* Append a copy of s; 0 or -1 (ENOMEM). */
int x509_names_add(struct x509_names *l, const char *s);
bool x509_names_has(const struct x509_names *l, const char *s);
void x509_names_free(struct x509_names *l);

/* What the hub asks for: subject CN and O list, DNS and IP SANs (IPv4 or
 * IPv6 text).  Owned strings; free with x509_template_free. */
struct x509_template {
	char *cn;
	struct x509_names orgs, dns, ips;
};

void x509_template_free(struct x509_template *t);
/* A deep copy into *dst (which is overwritten); 0 or -1 (ENOMEM). */
int x509_template_copy(struct x509_template *dst, const struct x509_template *src);
/* Same CN and the same sets of O, DNS and IP (IPs compared as addresses,
 * order and duplicates ignored). */
bool x509_template_equal(const struct x509_template *a, const struct x509_template *b);

/* What x509_parse_pem finds: the first certificate of the PEM (the leaf) and
 * whether a private key came with it and is that certificate's. */
struct x509_info {
	time_t not_before, not_after;
	char *cn;		/* "" when the subject has none */
	struct x509_names orgs; /* subject O, in order */
	struct x509_names dns;	/* DNS SANs */
	struct x509_names ips;	/* IP SANs as text; an IPv4-mapped IPv6 as IPv4 */
	size_t n_certs;		/* certificates in the PEM, leaf first */
	bool has_key;		/* one private key block was there */
	bool key_matches;	/* ... and it is the leaf's key */
};

/* Parse PEM text: one or more CERTIFICATE blocks (leaf first, as TLS sends
 * a chain) and at most one private key ("PRIVATE KEY" PKCS#8, "EC PRIVATE
 * KEY" SEC1 or "RSA PRIVATE KEY"), in any order; other blocks and text
 * between blocks are ignored.  Encrypted keys are refused.  A key that does
 * not belong to the leaf is no error: info->key_matches says so.  0, or -1
 * with *err; *out is always safe to free. */
int x509_parse_pem(const char *pem, size_t len, struct x509_info *out, char **err);
void x509_info_free(struct x509_info *info);

/* Does the certificate do for the template: the same CN, and every O, DNS
 * SAN and IP SAN of the template present (extras tolerated)?  When not, and
 * why is not NULL, *why says what is missing (malloc'ed, may be NULL on
 * ENOMEM). */
bool x509_satisfies(const struct x509_info *cert, const struct x509_template *t, char **why);

/* A fresh ECDSA P-256 key and a PKCS#10 request for the template, signed
 * with it (SHA-256).  The request is PEM "CERTIFICATE REQUEST" (the type the
 * API server insists on), the key PEM "EC PRIVATE KEY" (SEC1, as client-go
 * writes it).  Appended to csr_pem and key_pem; 0, or -1 with *err (a CN
 * that is empty, an IP that does not parse). */
int x509_make_csr(const struct x509_template *t, struct buf *csr_pem, struct buf *key_pem,
		  char **err);

/* kubeadm's pin of a CA: "sha256:" and the lowercase hex of SHA-256 over
 * the DER SubjectPublicKeyInfo, exactly as the certificate holds it.  Of
 * the first certificate of the PEM; appended to pin; 0 or -1 with *err. */
int x509_pin_of(const char *pem, size_t len, struct buf *pin, char **err);
/* Is the bundle pinned: does any certificate of it have any of the pins
 * ("sha256:<64 hex>", either case)?  1 yes; 0 no, with *err naming the
 * bundle's own pins; -1 a pin that is malformed or a bundle that does not
 * parse, with *err. */
int x509_pins_check(const char *bundle, size_t len, const char *const *pins, size_t n_pins,
		    char **err);

#endif
