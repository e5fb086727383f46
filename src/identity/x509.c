/*
 * x509.c - the hub's certificates and keys through GnuTLS, see x509.h.
 *
 * PEM is split here rather than by GnuTLS: a file of client-go's store holds
 * certificates and a key together, and each block is then handed to the one
 * GnuTLS call meant for it, so that the errors name the block that is wrong.
 * The pins need the SubjectPublicKeyInfo exactly as the certificate encodes
 * it (GnuTLS only re-encodes it), so a few lines of DER walking find it.
 */
#include "identity/x509.h"

#include <arpa/inet.h>
#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/base64.h"

/* No certificate or key comes near this; a bound keeps GnuTLS's unsigned
 * int sizes honest. */
#define PEM_BLOCK_MAX (1u << 20)

/* Key material must not linger in freed memory. */
static void wipe_free(struct buf *b)
{
	if (b->data)
		explicit_bzero(b->data, b->cap);
	buf_free(b);
}

/* ---- string lists and templates ---- */

int x509_names_add(struct x509_names *l, const char *s)
{
	char *c = strdup(s);
	char **v = c ? realloc(l->v, (l->n + 1) * sizeof *v) : NULL;
	if (!v) {
		free(c);
		return -1;
	}
	v[l->n++] = c;
	l->v = v;
	return 0;
}

bool x509_names_has(const struct x509_names *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], s))
			return true;
	return false;
}

void x509_names_free(struct x509_names *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

void x509_template_free(struct x509_template *t)
{
	free(t->cn);
	x509_names_free(&t->orgs);
	x509_names_free(&t->dns);
	x509_names_free(&t->ips);
	memset(t, 0, sizeof *t);
}

static int names_copy(struct x509_names *dst, const struct x509_names *src)
{
	for (size_t i = 0; i < src->n; i++)
		if (x509_names_add(dst, src->v[i]) < 0)
			return -1;
	return 0;
}

int x509_template_copy(struct x509_template *dst, const struct x509_template *src)
{
	memset(dst, 0, sizeof *dst);
	if ((src->cn && !(dst->cn = strdup(src->cn))) || names_copy(&dst->orgs, &src->orgs) < 0 ||
	    names_copy(&dst->dns, &src->dns) < 0 || names_copy(&dst->ips, &src->ips) < 0) {
		x509_template_free(dst);
		return -1;
	}
	return 0;
}

/* An IP in text as bytes: 4 for IPv4 (also when written as IPv4-mapped
 * IPv6, which Go's net.IP treats as the same address), 16 for IPv6; 0 when
 * it is no address. */
static size_t ip_parse(const char *text, unsigned char out[16])
{
	if (inet_pton(AF_INET, text, out) == 1)
		return 4;
	if (inet_pton(AF_INET6, text, out) != 1)
		return 0;
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	if (!memcmp(out, mapped, sizeof mapped)) {
		memmove(out, out + 12, 4);
		return 4;
	}
	return 16;
}

static bool ip_equal(const char *a, const char *b)
{
	unsigned char x[16], y[16];
	size_t n = ip_parse(a, x), m = ip_parse(b, y);
	if (!n || !m)
		return !strcmp(a, b);
	return n == m && !memcmp(x, y, n);
}

static bool has_ip(const struct x509_names *l, const char *ip)
{
	for (size_t i = 0; i < l->n; i++)
		if (ip_equal(l->v[i], ip))
			return true;
	return false;
}

/* Every name of a is in b. */
static bool subset(const struct x509_names *a, const struct x509_names *b, bool ips)
{
	for (size_t i = 0; i < a->n; i++)
		if (ips ? !has_ip(b, a->v[i]) : !x509_names_has(b, a->v[i]))
			return false;
	return true;
}

static bool same_set(const struct x509_names *a, const struct x509_names *b, bool ips)
{
	return subset(a, b, ips) && subset(b, a, ips);
}

bool x509_template_equal(const struct x509_template *a, const struct x509_template *b)
{
	return !strcmp(a->cn ? a->cn : "", b->cn ? b->cn : "") &&
	       same_set(&a->orgs, &b->orgs, false) && same_set(&a->dns, &b->dns, false) &&
	       same_set(&a->ips, &b->ips, true);
}

bool x509_satisfies(const struct x509_info *cert, const struct x509_template *t, char **why)
{
	const char *tcn = t->cn ? t->cn : "";
	if (strcmp(cert->cn ? cert->cn : "", tcn)) {
		err_printf(why, "subject CN is \"%s\", not \"%s\"", cert->cn ? cert->cn : "", tcn);
		return false;
	}
	for (size_t i = 0; i < t->orgs.n; i++)
		if (!x509_names_has(&cert->orgs, t->orgs.v[i])) {
			err_printf(why, "subject lacks O \"%s\"", t->orgs.v[i]);
			return false;
		}
	for (size_t i = 0; i < t->dns.n; i++)
		if (!x509_names_has(&cert->dns, t->dns.v[i])) {
			err_printf(why, "lacks DNS SAN \"%s\"", t->dns.v[i]);
			return false;
		}
	for (size_t i = 0; i < t->ips.n; i++)
		if (!has_ip(&cert->ips, t->ips.v[i])) {
			err_printf(why, "lacks IP SAN %s", t->ips.v[i]);
			return false;
		}
	return true;
}

/* ---- PEM ---- */

struct pem_reader {
	const char *p, *end;
	size_t index; /* of the block last returned, from 1 */
};

/* The start of the next line that begins with prefix, or NULL. */
static const char *find_line(const char *p, const char *end, const char *prefix)
{
	size_t plen = strlen(prefix);
	const char *start = p;
	while (p < end) {
		const char *hit = memmem(p, (size_t)(end - p), prefix, plen);
		if (!hit)
			return NULL;
		if (hit == start || hit[-1] == '\n')
			return hit;
		p = hit + 1;
	}
	return NULL;
}

/* The rest of the line after "-----BEGIN " / "-----END ": "<label>-----"
 * then optional blanks.  The label's span, or false when the line is not
 * of that shape. */
static bool line_label(const char *p, const char *end, const char **label, size_t *llen,
		       const char **next)
{
	const char *eol = memchr(p, '\n', (size_t)(end - p));
	const char *stop = eol ? eol : end;
	const char *q = stop;
	while (q > p && (q[-1] == '\r' || q[-1] == ' ' || q[-1] == '\t'))
		q--;
	if (q - p < 5 || memcmp(q - 5, "-----", 5))
		return false;
	*label = p;
	*llen = (size_t)(q - 5 - p);
	*next = eol ? eol + 1 : end;
	for (size_t i = 0; i < *llen; i++)
		if (p[i] == '-' || (unsigned char)p[i] < 0x20)
			return false;
	return true;
}

/* The next block: its label in *label (NUL-terminated copy) and its bytes
 * in *der.  1, 0 at the end, -1 with *err. */
static int pem_next(struct pem_reader *r, struct buf *label, struct buf *der, char **err)
{
	buf_reset(label);
	buf_reset(der);
	const char *begin = find_line(r->p, r->end, "-----BEGIN ");
	if (!begin) {
		r->p = r->end;
		return 0;
	}
	r->index++;
	const char *l, *body;
	size_t llen;
	if (!line_label(begin + 11, r->end, &l, &llen, &body)) {
		err_printf(err, "PEM block %zu: malformed BEGIN line", r->index);
		return -1;
	}
	if (buf_append(label, l, llen) < 0) {
		err_printf(err, "out of memory");
		return -1;
	}
	const char *endl = find_line(body, r->end, "-----END ");
	const char *el, *after;
	size_t ellen;
	if (!endl || !line_label(endl + 9, r->end, &el, &ellen, &after) || ellen != llen ||
	    memcmp(el, l, llen)) {
		err_printf(err, "PEM block %zu (%s): no matching END line", r->index, label->data);
		return -1;
	}
	r->p = after;
	size_t blen = (size_t)(endl - body);
	if (memchr(body, ':', blen)) {
		err_printf(err,
			   "PEM block %zu (%s): has headers (an encrypted key?), which are not "
			   "supported",
			   r->index, label->data);
		return -1;
	}
	if (blen / 4 * 3 > PEM_BLOCK_MAX) {
		err_printf(err, "PEM block %zu (%s): too large", r->index, label->data);
		return -1;
	}
	if (base64_decode(body, blen, der) < 0 || der->len == 0) {
		err_printf(err, "PEM block %zu (%s): not base64", r->index, label->data);
		return -1;
	}
	return 1;
}

static bool is_key_label(const char *label)
{
	return !strcmp(label, "PRIVATE KEY") || !strcmp(label, "EC PRIVATE KEY") ||
	       !strcmp(label, "RSA PRIVATE KEY");
}

/* ---- DER: the raw SubjectPublicKeyInfo of a certificate ---- */

struct der {
	const unsigned char *p, *end;
};

/* One TLV at d->p: its tag, content span and the whole element's span;
 * d->p moves past it.  Definite lengths of at most 4 bytes only (DER). */
static bool der_next(struct der *d, unsigned char *tag, struct der *content, struct der *whole)
{
	const unsigned char *p = d->p;
	if (d->end - p < 2)
		return false;
	*tag = *p++;
	if ((*tag & 0x1f) == 0x1f)
		return false; /* high tag numbers: nothing of a certificate's frame */
	size_t len = *p++;
	if (len & 0x80) {
		size_t nb = len & 0x7f;
		if (nb == 0 || nb > 4 || (size_t)(d->end - p) < nb)
			return false;
		len = 0;
		for (size_t i = 0; i < nb; i++)
			len = len << 8 | *p++;
	}
	if (len > (size_t)(d->end - p))
		return false;
	whole->p = d->p;
	whole->end = p + len;
	content->p = p;
	content->end = p + len;
	d->p = p + len;
	return true;
}

/* Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version OPTIONAL,
 * serialNumber, signature, issuer, validity, subject,
 * subjectPublicKeyInfo, ... }, ... } */
static bool der_spki(const unsigned char *cert, size_t len, struct der *spki)
{
	struct der d = {cert, cert + len}, c, w, tbs;
	unsigned char tag;
	if (!der_next(&d, &tag, &c, &w) || tag != 0x30)
		return false;
	if (!der_next(&c, &tag, &tbs, &w) || tag != 0x30)
		return false;
	if (!der_next(&tbs, &tag, &c, &w))
		return false;
	if (tag == 0xa0 && !der_next(&tbs, &tag, &c, &w)) /* version, then serial */
		return false;
	if (tag != 0x02)
		return false;
	for (int i = 0; i < 4; i++) /* signature, issuer, validity, subject */
		if (!der_next(&tbs, &tag, &c, &w) || tag != 0x30)
			return false;
	if (!der_next(&tbs, &tag, &c, spki) || tag != 0x30)
		return false;
	return true;
}

/* ---- reading certificates ---- */

static gnutls_datum_t datum(const struct buf *b)
{
	gnutls_datum_t d = {(unsigned char *)b->data, (unsigned int)b->len};
	return d;
}

/* A string GnuTLS writes into a buffer of a size it is asked for first:
 * the subject attribute of oid number idx.  1 and *out (malloc'ed), 0 when
 * there is none, -1 on error (a NUL inside the value is one: cut there it
 * would be another name). */
static int dn_value(gnutls_x509_crt_t crt, const char *oid, unsigned idx, char **out)
{
	size_t size = 0;
	int rc = gnutls_x509_crt_get_dn_by_oid(crt, oid, idx, 0, NULL, &size);
	if (rc == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
		return 0;
	if (rc != GNUTLS_E_SHORT_MEMORY_BUFFER || size > PEM_BLOCK_MAX)
		return -1;
	char *v = calloc(1, size + 1);
	if (!v)
		return -1;
	rc = gnutls_x509_crt_get_dn_by_oid(crt, oid, idx, 0, v, &size);
	if (rc < 0 || strlen(v) != size) {
		free(v);
		return -1;
	}
	*out = v;
	return 1;
}

static int read_subject(gnutls_x509_crt_t crt, struct x509_info *info, char **err)
{
	/* The last CN, as Go's crypto/x509 keeps it. */
	char *v = NULL;
	for (unsigned i = 0;; i++) {
		char *next = NULL;
		int rc = dn_value(crt, GNUTLS_OID_X520_COMMON_NAME, i, &next);
		if (rc < 0) {
			free(v);
			err_printf(err, "certificate subject: a CN that cannot be read");
			return -1;
		}
		if (rc == 0)
			break;
		free(v);
		v = next;
	}
	info->cn = v ? v : strdup("");
	if (!info->cn) {
		err_printf(err, "out of memory");
		return -1;
	}
	for (unsigned i = 0;; i++) {
		char *o = NULL;
		int rc = dn_value(crt, GNUTLS_OID_X520_ORGANIZATION_NAME, i, &o);
		if (rc < 0) {
			err_printf(err, "certificate subject: an O that cannot be read");
			return -1;
		}
		if (rc == 0)
			break;
		rc = x509_names_add(&info->orgs, o);
		free(o);
		if (rc < 0) {
			err_printf(err, "out of memory");
			return -1;
		}
	}
	return 0;
}

static int read_sans(gnutls_x509_crt_t crt, struct x509_info *info, char **err)
{
	for (unsigned seq = 0;; seq++) {
		unsigned char small[64];
		size_t size = sizeof small - 1;
		unsigned type = 0, critical = 0;
		unsigned char *v = small;
		int rc =
		    gnutls_x509_crt_get_subject_alt_name2(crt, seq, v, &size, &type, &critical);
		if (rc == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
			return 0;
		if (rc == GNUTLS_E_SHORT_MEMORY_BUFFER && size <= PEM_BLOCK_MAX) {
			if (!(v = calloc(1, size + 1))) {
				err_printf(err, "out of memory");
				return -1;
			}
			rc = gnutls_x509_crt_get_subject_alt_name2(crt, seq, v, &size, &type,
								   &critical);
		}
		int added = 0;
		if (rc < 0) {
			err_printf(err, "certificate SAN %u: %s", seq, gnutls_strerror(rc));
			added = -1;
		} else if (type == GNUTLS_SAN_DNSNAME) {
			v[size] = '\0';
			if (strlen((char *)v) != size) {
				err_printf(err, "certificate SAN %u: a DNS name with a NUL byte",
					   seq);
				added = -1;
			} else {
				added = x509_names_add(&info->dns, (char *)v);
			}
		} else if (type == GNUTLS_SAN_IPADDRESS) {
			char text[INET6_ADDRSTRLEN];
			static const unsigned char mapped[12] = {0, 0, 0, 0, 0,	   0,
								 0, 0, 0, 0, 0xff, 0xff};
			const char *t = NULL;
			if (size == 4)
				t = inet_ntop(AF_INET, v, text, sizeof text);
			else if (size == 16 && !memcmp(v, mapped, sizeof mapped))
				t = inet_ntop(AF_INET, v + 12, text, sizeof text);
			else if (size == 16)
				t = inet_ntop(AF_INET6, v, text, sizeof text);
			if (!t) {
				err_printf(err, "certificate SAN %u: an IP address of %zu bytes",
					   seq, size);
				added = -1;
			} else {
				added = x509_names_add(&info->ips, t);
			}
		}
		if (v != small)
			free(v);
		if (added < 0) {
			if (err && !*err)
				err_printf(err, "out of memory");
			return -1;
		}
	}
}

/* The DER SubjectPublicKeyInfo GnuTLS makes of a public key: the same
 * encoder for both sides, so a certificate and a key are compared fairly. */
static int spki_of_crt(gnutls_x509_crt_t crt, gnutls_datum_t *out)
{
	gnutls_pubkey_t pub;
	int rc = gnutls_pubkey_init(&pub);
	if (rc < 0)
		return rc;
	rc = gnutls_pubkey_import_x509(pub, crt, 0);
	if (rc >= 0)
		rc = gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_DER, out);
	gnutls_pubkey_deinit(pub);
	return rc;
}

static int spki_of_key(gnutls_x509_privkey_t key, gnutls_datum_t *out)
{
	gnutls_privkey_t pk;
	gnutls_pubkey_t pub;
	int rc = gnutls_privkey_init(&pk);
	if (rc < 0)
		return rc;
	if ((rc = gnutls_pubkey_init(&pub)) < 0) {
		gnutls_privkey_deinit(pk);
		return rc;
	}
	rc = gnutls_privkey_import_x509(pk, key, 0);
	if (rc >= 0)
		rc = gnutls_pubkey_import_privkey(pub, pk, 0, 0);
	if (rc >= 0)
		rc = gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_DER, out);
	gnutls_pubkey_deinit(pub);
	gnutls_privkey_deinit(pk);
	return rc;
}

static int import_key(gnutls_x509_privkey_t key, const char *label, const struct buf *der)
{
	gnutls_datum_t d = datum(der);
	if (!strcmp(label, "PRIVATE KEY"))
		return gnutls_x509_privkey_import_pkcs8(key, &d, GNUTLS_X509_FMT_DER, NULL,
							GNUTLS_PKCS_PLAIN);
	return gnutls_x509_privkey_import(key, &d, GNUTLS_X509_FMT_DER);
}

/* Does the key (the PEM's one key block) belong to the leaf?  *matches;
 * 0, or -1 with *err when the key does not parse. */
static int check_key(gnutls_x509_crt_t leaf, const char *label, const struct buf *der,
		     bool *matches, char **err)
{
	gnutls_x509_privkey_t key;
	gnutls_datum_t a = {NULL, 0}, b = {NULL, 0};
	int rc = gnutls_x509_privkey_init(&key);
	if (rc < 0) {
		err_printf(err, "private key: %s", gnutls_strerror(rc));
		return -1;
	}
	rc = import_key(key, label, der);
	if (rc < 0) {
		err_printf(err, "private key (%s): %s", label, gnutls_strerror(rc));
	} else if ((rc = gnutls_x509_privkey_verify_params(key)) < 0) {
		err_printf(err, "private key (%s): inconsistent: %s", label, gnutls_strerror(rc));
	} else if ((rc = spki_of_key(key, &a)) < 0) {
		err_printf(err, "private key (%s): %s", label, gnutls_strerror(rc));
	} else if ((rc = spki_of_crt(leaf, &b)) < 0) {
		err_printf(err, "certificate public key: %s", gnutls_strerror(rc));
	} else {
		*matches = a.size == b.size && !memcmp(a.data, b.data, a.size);
	}
	gnutls_free(a.data);
	gnutls_free(b.data);
	gnutls_x509_privkey_deinit(key);
	return rc < 0 ? -1 : 0;
}

static int read_leaf(gnutls_x509_crt_t crt, struct x509_info *info, char **err)
{
	info->not_before = gnutls_x509_crt_get_activation_time(crt);
	info->not_after = gnutls_x509_crt_get_expiration_time(crt);
	if (info->not_before == (time_t)-1 || info->not_after == (time_t)-1) {
		err_printf(err, "certificate: validity times cannot be read");
		return -1;
	}
	if (read_subject(crt, info, err) < 0 || read_sans(crt, info, err) < 0)
		return -1;
	return 0;
}

/* Import one certificate's DER; 0 or -1 with *err. */
static int import_crt(gnutls_x509_crt_t *crt, const struct buf *der, size_t index, char **err)
{
	int rc = gnutls_x509_crt_init(crt);
	if (rc < 0) {
		err_printf(err, "certificate %zu: %s", index, gnutls_strerror(rc));
		return -1;
	}
	gnutls_datum_t d = datum(der);
	rc = gnutls_x509_crt_import(*crt, &d, GNUTLS_X509_FMT_DER);
	if (rc < 0) {
		gnutls_x509_crt_deinit(*crt);
		*crt = NULL;
		err_printf(err, "certificate %zu: %s", index, gnutls_strerror(rc));
		return -1;
	}
	return 0;
}

int x509_parse_pem(const char *pem, size_t len, struct x509_info *out, char **err)
{
	memset(out, 0, sizeof *out);
	struct pem_reader r = {pem, pem + len, 0};
	struct buf label = BUF_INIT, der = BUF_INIT, key_label = BUF_INIT, key_der = BUF_INIT;
	gnutls_x509_crt_t leaf = NULL;
	int rc = 0;
	for (;;) {
		int got = pem_next(&r, &label, &der, err);
		if (got < 0)
			rc = -1;
		if (got <= 0)
			break;
		if (!strcmp(label.data, "CERTIFICATE")) {
			gnutls_x509_crt_t crt;
			if (import_crt(&crt, &der, out->n_certs + 1, err) < 0) {
				rc = -1;
				break;
			}
			if (!leaf)
				leaf = crt;
			else
				gnutls_x509_crt_deinit(crt);
			out->n_certs++;
		} else if (is_key_label(label.data)) {
			if (out->has_key) {
				err_printf(err, "more than one private key in the PEM");
				rc = -1;
				break;
			}
			out->has_key = true;
			if (buf_append(&key_label, label.data, label.len) < 0 ||
			    buf_append(&key_der, der.data, der.len) < 0) {
				err_printf(err, "out of memory");
				rc = -1;
				break;
			}
		} else if (!strcmp(label.data, "ENCRYPTED PRIVATE KEY")) {
			err_printf(err, "encrypted private keys are not supported");
			rc = -1;
			break;
		}
		/* other blocks (parameters, a CSR) are none of ours */
	}
	if (rc == 0 && !leaf) {
		err_printf(err, "no certificate in the PEM");
		rc = -1;
	}
	if (rc == 0)
		rc = read_leaf(leaf, out, err);
	if (rc == 0 && out->has_key)
		rc = check_key(leaf, key_label.data, &key_der, &out->key_matches, err);
	if (leaf)
		gnutls_x509_crt_deinit(leaf);
	buf_free(&label);
	wipe_free(&der);
	buf_free(&key_label);
	wipe_free(&key_der);
	if (rc < 0)
		x509_info_free(out);
	return rc;
}

void x509_info_free(struct x509_info *info)
{
	free(info->cn);
	x509_names_free(&info->orgs);
	x509_names_free(&info->dns);
	x509_names_free(&info->ips);
	memset(info, 0, sizeof *info);
}

/* ---- making a request ---- */

static int crq_fill(gnutls_x509_crq_t crq, const struct x509_template *t, char **err)
{
	int rc = gnutls_x509_crq_set_version(crq, 1);
	/* O before CN, as Go's pkix.Name writes a subject */
	for (size_t i = 0; rc >= 0 && i < t->orgs.n; i++)
		rc = gnutls_x509_crq_set_dn_by_oid(crq, GNUTLS_OID_X520_ORGANIZATION_NAME, 0,
						   t->orgs.v[i], (unsigned)strlen(t->orgs.v[i]));
	if (rc >= 0)
		rc = gnutls_x509_crq_set_dn_by_oid(crq, GNUTLS_OID_X520_COMMON_NAME, 0, t->cn,
						   (unsigned)strlen(t->cn));
	for (size_t i = 0; rc >= 0 && i < t->dns.n; i++)
		rc = gnutls_x509_crq_set_subject_alt_name(crq, GNUTLS_SAN_DNSNAME, t->dns.v[i],
							  (unsigned)strlen(t->dns.v[i]),
							  GNUTLS_FSAN_APPEND);
	for (size_t i = 0; rc >= 0 && i < t->ips.n; i++) {
		unsigned char ip[16];
		size_t n = ip_parse(t->ips.v[i], ip);
		if (!n) {
			err_printf(err, "template IP SAN \"%s\" is no IP address", t->ips.v[i]);
			return -1;
		}
		rc = gnutls_x509_crq_set_subject_alt_name(crq, GNUTLS_SAN_IPADDRESS, ip,
							  (unsigned)n, GNUTLS_FSAN_APPEND);
	}
	if (rc < 0) {
		err_printf(err, "certificate request: %s", gnutls_strerror(rc));
		return -1;
	}
	return 0;
}

int x509_make_csr(const struct x509_template *t, struct buf *csr_pem, struct buf *key_pem,
		  char **err)
{
	if (!t->cn || !*t->cn) {
		err_printf(err, "certificate request: the template has no CN");
		return -1;
	}
	gnutls_x509_privkey_t key = NULL;
	gnutls_x509_crq_t crq = NULL;
	gnutls_datum_t der = {NULL, 0}, pem = {NULL, 0}, kpem = {NULL, 0};
	int rc = gnutls_x509_privkey_init(&key);
	if (rc >= 0)
		rc = gnutls_x509_privkey_generate2(key, GNUTLS_PK_ECDSA,
						   GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1),
						   0, NULL, 0);
	if (rc < 0) {
		err_printf(err, "key generation: %s", gnutls_strerror(rc));
		goto out;
	}
	if ((rc = gnutls_x509_crq_init(&crq)) < 0) {
		err_printf(err, "certificate request: %s", gnutls_strerror(rc));
		goto out;
	}
	if (crq_fill(crq, t, err) < 0) {
		rc = -1;
		goto out;
	}
	if ((rc = gnutls_x509_crq_set_key(crq, key)) < 0 ||
	    (rc = gnutls_x509_crq_sign2(crq, key, GNUTLS_DIG_SHA256, 0)) < 0 ||
	    (rc = gnutls_x509_crq_export2(crq, GNUTLS_X509_FMT_DER, &der)) < 0 ||
	    /* GnuTLS's own PEM says "NEW CERTIFICATE REQUEST", which the API
	     * server refuses */
	    (rc = gnutls_pem_base64_encode2("CERTIFICATE REQUEST", &der, &pem)) < 0 ||
	    (rc = gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &kpem)) < 0) {
		err_printf(err, "certificate request: %s", gnutls_strerror(rc));
		goto out;
	}
	size_t csr_keep = csr_pem->len;
	if (buf_append(csr_pem, pem.data, pem.size) < 0 ||
	    buf_append(key_pem, kpem.data, kpem.size) < 0) {
		csr_pem->len = csr_keep;
		err_printf(err, "out of memory");
		rc = -1;
	}
out:
	if (kpem.data) {
		explicit_bzero(kpem.data, kpem.size);
		gnutls_free(kpem.data);
	}
	gnutls_free(pem.data);
	gnutls_free(der.data);
	if (crq)
		gnutls_x509_crq_deinit(crq);
	if (key)
		gnutls_x509_privkey_deinit(key);
	return rc < 0 ? -1 : 0;
}

/* ---- pins ---- */

/* SHA-256 of the certificate's own SubjectPublicKeyInfo bytes; the DER
 * must already have been accepted by GnuTLS.  0 or -1 with *err. */
static int spki_hash(const struct buf *der, unsigned char hash[32], size_t index, char **err)
{
	struct der spki;
	if (!der_spki((const unsigned char *)der->data, der->len, &spki)) {
		err_printf(err, "certificate %zu: no SubjectPublicKeyInfo where DER has it", index);
		return -1;
	}
	int rc = gnutls_hash_fast(GNUTLS_DIG_SHA256, spki.p, (size_t)(spki.end - spki.p), hash);
	if (rc < 0) {
		err_printf(err, "SHA-256: %s", gnutls_strerror(rc));
		return -1;
	}
	return 0;
}

static int append_pin(struct buf *out, const unsigned char hash[32])
{
	if (buf_append_str(out, "sha256:") < 0)
		return -1;
	for (int i = 0; i < 32; i++)
		if (buf_printf(out, "%02x", hash[i]) < 0)
			return -1;
	return 0;
}

/* Each certificate of the PEM, checked by GnuTLS, then handed to fn with
 * its SPKI hash; fn returns non-zero to stop.  The count of certificates
 * seen, or -1 with *err. */
static int each_cert_hash(const char *pem, size_t len,
			  int (*fn)(void *ctx, const unsigned char hash[32]), void *ctx, char **err)
{
	struct pem_reader r = {pem, pem + len, 0};
	struct buf label = BUF_INIT, der = BUF_INIT;
	int n = 0, got;
	while ((got = pem_next(&r, &label, &der, err)) > 0) {
		if (strcmp(label.data, "CERTIFICATE"))
			continue;
		gnutls_x509_crt_t crt;
		unsigned char hash[32];
		if (n == INT_MAX || import_crt(&crt, &der, (size_t)n + 1, err) < 0) {
			got = -1;
			break;
		}
		gnutls_x509_crt_deinit(crt);
		if (spki_hash(&der, hash, (size_t)n + 1, err) < 0) {
			got = -1;
			break;
		}
		n++;
		if (fn(ctx, hash))
			break;
	}
	buf_free(&label);
	buf_free(&der);
	if (got < 0)
		return -1;
	if (n == 0) {
		err_printf(err, "no certificate in the PEM");
		return -1;
	}
	return n;
}

static int take_first(void *ctx, const unsigned char hash[32])
{
	memcpy(ctx, hash, 32);
	return 1;
}

int x509_pin_of(const char *pem, size_t len, struct buf *pin, char **err)
{
	unsigned char hash[32];
	if (each_cert_hash(pem, len, take_first, hash, err) < 0)
		return -1;
	if (append_pin(pin, hash) < 0) {
		err_printf(err, "out of memory");
		return -1;
	}
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* "sha256:<64 hex>" to 32 bytes; the format's name in either case, as
 * kubeadm takes it.  0 or -1. */
static int parse_pin(const char *pin, unsigned char out[32])
{
	if (strncasecmp(pin, "sha256:", 7) || strlen(pin + 7) != 64)
		return -1;
	for (int i = 0; i < 32; i++) {
		int hi = hexval(pin[7 + 2 * i]), lo = hexval(pin[8 + 2 * i]);
		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

struct pin_match {
	const unsigned char (*pins)[32];
	size_t n;
	bool found;
	struct buf seen; /* the bundle's pins, for the error */
	bool oom;
};

static int match_one(void *ctx, const unsigned char hash[32])
{
	struct pin_match *m = ctx;
	for (size_t i = 0; i < m->n; i++)
		if (!memcmp(m->pins[i], hash, 32)) {
			m->found = true;
			return 1;
		}
	if ((m->seen.len && buf_append_str(&m->seen, ", ") < 0) || append_pin(&m->seen, hash) < 0)
		m->oom = true;
	return 0;
}

int x509_pins_check(const char *bundle, size_t len, const char *const *pins, size_t n_pins,
		    char **err)
{
	if (n_pins == 0 || n_pins > SIZE_MAX / 32) {
		err_printf(err, "no CA pin to check against");
		return -1;
	}
	unsigned char(*raw)[32] = malloc(n_pins * sizeof *raw);
	if (!raw) {
		err_printf(err, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n_pins; i++)
		if (parse_pin(pins[i], raw[i]) < 0) {
			err_printf(err, "CA pin \"%s\" is not of the form sha256:<64 hex digits>",
				   pins[i]);
			free(raw);
			return -1;
		}
	struct pin_match m = {(const unsigned char(*)[32])raw, n_pins, false, BUF_INIT, false};
	int rc = each_cert_hash(bundle, len, match_one, &m, err);
	if (rc >= 0) {
		rc = m.found ? 1 : 0;
		if (!m.found)
			err_printf(err, "none of the CA's public keys (%s) is pinned",
				   m.oom ? "?" : buf_cstr(&m.seen));
	}
	buf_free(&m.seen);
	free(raw);
	return rc;
}
