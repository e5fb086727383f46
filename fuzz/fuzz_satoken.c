/*
 * fuzz_satoken.c - service-account tokens and JWK Sets (src/identity/jws.c,
 * satoken.c): what stands between a client's Authorization header and
 * kubelet's cached Secrets while the cloud is unreachable.
 *
 * The keys are made when the target starts (RSA 2048 "rsa-1", P-256
 * "ec-1"), so the fuzzer cannot know them.  Properties:
 *
 *  - mode 0 (the fuzzer's token, and a JWK Set of its own): parsing never
 *    fails badly, and no token is ever accepted under the target's keys -
 *    that would be a forgery; one accepted under the fuzzer's own set has
 *    its four claims filled;
 *  - mode 1 (the fuzzer writes the header and the claims, the target signs
 *    them with its RSA or EC key): a token is accepted only when, read here
 *    with jansson and not through satoken.c, its header says RS256/ES256
 *    with the signer's kid, its issuer is the issuer, its audience holds it,
 *    exp has not passed, nbf and iat have come (a minute's leeway), sub is
 *    its service account and it binds a pod, and what comes out is what the
 *    claims say; flipping one byte of it makes it refused.
 *
 * Input: a mode byte (bit 0 the mode, bit 1 the key of mode 1), then
 * NUL-separated fields: mode 0 the token and the JWK Set; mode 1 the
 * header and the claims (JSON texts).
 */
#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fuzz_common.h"
#include "identity/jws.h"
#include "identity/satoken.h"
#include "util/base64.h"
#include "util/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ISSUER "https://kubernetes.default.svc.cluster.local"

static gnutls_privkey_t rsa_key, ec_key;
static struct jwk_set *keys;
static time_t now;

static void jwk_member(struct buf *out, const char *name, const gnutls_datum_t *d, size_t pad)
{
	size_t off = 0;
	while (off + 1 < d->size && d->data[off] == 0)
		off++;
	unsigned char v[600] = {0};
	size_t len = d->size - off, at = pad > len ? pad - len : 0;
	FZ_CHECK(at + len <= sizeof v);
	memcpy(v + at, d->data + off, len);
	FZ_CHECK(buf_printf(out, ",\"%s\":\"", name) == 0 &&
		 base64url_encode(v, at + len, out) == 0 && buf_append_char(out, '"') == 0);
}

static void init(void)
{
	if (keys)
		return;
	now = time(NULL);
	gnutls_datum_t m, e, x, y;
	gnutls_ecc_curve_t curve;
	FZ_CHECK(gnutls_privkey_init(&rsa_key) == 0 && gnutls_privkey_init(&ec_key) == 0);
	FZ_CHECK(gnutls_privkey_generate(rsa_key, GNUTLS_PK_RSA, 2048, 0) == 0);
	FZ_CHECK(gnutls_privkey_generate(ec_key, GNUTLS_PK_ECDSA,
					 GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0) == 0);
	FZ_CHECK(gnutls_privkey_export_rsa_raw2(rsa_key, &m, &e, NULL, NULL, NULL, NULL, NULL, NULL,
						0) == 0);
	FZ_CHECK(gnutls_privkey_export_ecc_raw2(ec_key, &curve, &x, &y, NULL, 0) == 0);
	struct buf doc = BUF_INIT;
	FZ_CHECK(buf_append_str(&doc, "{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"rsa-1\"") == 0);
	jwk_member(&doc, "n", &m, 0);
	jwk_member(&doc, "e", &e, 0);
	FZ_CHECK(buf_append_str(&doc, "},{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"ec-1\"") == 0);
	jwk_member(&doc, "x", &x, 32);
	jwk_member(&doc, "y", &y, 32);
	FZ_CHECK(buf_append_str(&doc, "}]}") == 0);
	FZ_CHECK(jwks_parse(doc.data, doc.len, &keys, NULL) == 0 && jwks_count(keys) == 2);
	gnutls_free(m.data);
	gnutls_free(e.data);
	gnutls_free(x.data);
	gnutls_free(y.data);
	buf_free(&doc);
}

/* header.claims signed with k (ES256's r || s from the DER GnuTLS makes). */
static void sign(struct buf *out, const uint8_t *h, size_t hlen, const uint8_t *c, size_t clen,
		 bool ec)
{
	FZ_CHECK(base64url_encode(h, hlen, out) == 0 && buf_append_char(out, '.') == 0 &&
		 base64url_encode(c, clen, out) == 0);
	gnutls_datum_t in = {(unsigned char *)out->data, (unsigned int)out->len}, sig;
	FZ_CHECK(gnutls_privkey_sign_data(ec ? ec_key : rsa_key, GNUTLS_DIG_SHA256, 0, &in, &sig) ==
		 0);
	FZ_CHECK(buf_append_char(out, '.') == 0);
	if (!ec) {
		FZ_CHECK(base64url_encode(sig.data, sig.size, out) == 0);
	} else {
		gnutls_datum_t r, s;
		FZ_CHECK(gnutls_decode_rs_value(&sig, &r, &s) == 0);
		unsigned char rs[64] = {0};
		const gnutls_datum_t *v[2] = {&r, &s};
		for (int i = 0; i < 2; i++) {
			size_t off = 0;
			while (v[i]->size - off > 32)
				off++;
			memcpy(rs + 32 * i + 32 - (v[i]->size - off), v[i]->data + off,
			       v[i]->size - off);
		}
		FZ_CHECK(base64url_encode(rs, sizeof rs, out) == 0);
		gnutls_free(r.data);
		gnutls_free(s.data);
	}
	gnutls_free(sig.data);
}

static const char *str(json_t *o, const char *name)
{
	return json_string_value(json_object_get(o, name));
}

static bool same(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

/* An accepted token of mode 1: what its texts say, read here. */
static void check_accepted(const uint8_t *h, size_t hlen, const uint8_t *c, size_t clen, bool ec,
			   const struct sa_token *t)
{
	json_t *hd = json_loadb((const char *)h, hlen, 0, NULL),
	       *cl = json_loadb((const char *)c, clen, 0, NULL);
	FZ_CHECK(json_is_object(hd) && json_is_object(cl));
	FZ_CHECK(same(str(hd, "alg"), ec ? "ES256" : "RS256"));
	FZ_CHECK(same(str(hd, "kid"), ec ? "ec-1" : "rsa-1"));
	FZ_CHECK(!json_object_get(hd, "crit"));
	FZ_CHECK(same(str(cl, "iss"), ISSUER));
	json_t *aud = json_object_get(cl, "aud"), *v;
	bool has = same(json_string_value(aud), ISSUER);
	size_t i;
	json_array_foreach(aud, i, v)
	{
		has = has || same(json_string_value(v), ISSUER);
	}
	FZ_CHECK(has);
	json_t *exp = json_object_get(cl, "exp"), *nbf = json_object_get(cl, "nbf"),
	       *iat = json_object_get(cl, "iat");
	FZ_CHECK(json_is_number(exp) && json_number_value(exp) >= (double)now - SATOKEN_LEEWAY_S);
	FZ_CHECK(!nbf || json_number_value(nbf) <= (double)now + SATOKEN_LEEWAY_S);
	FZ_CHECK(!iat || json_number_value(iat) <= (double)now + SATOKEN_LEEWAY_S);
	json_t *k8s = json_object_get(cl, "kubernetes.io"), *pod = json_object_get(k8s, "pod");
	FZ_CHECK(same(t->namespace, str(k8s, "namespace")));
	FZ_CHECK(same(t->pod_name, str(pod, "name")) && same(t->pod_uid, str(pod, "uid")));
	FZ_CHECK(same(t->service_account, str(json_object_get(k8s, "serviceaccount"), "name")));
	FZ_CHECK(*t->namespace && *t->pod_name && *t->pod_uid && *t->service_account);
	struct buf sub = BUF_INIT;
	FZ_CHECK(
	    buf_printf(&sub, "system:serviceaccount:%s:%s", t->namespace, t->service_account) == 0);
	FZ_CHECK(same(str(cl, "sub"), sub.data));
	buf_free(&sub);
	json_decref(hd);
	json_decref(cl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	init();
	if (size < 1)
		return 0;
	uint8_t mode = data[0];
	data++, size--;
	const uint8_t *f1 = NULL, *f2 = NULL;
	size_t l1 = 0, l2 = 0;
	if (!fz_field(&data, &size, &f1, &l1))
		return 0;
	if (!fz_field(&data, &size, &f2, &l2))
		f2 = (const uint8_t *)"", l2 = 0;
	struct sa_token t;
	char *why = NULL;
	struct buf kid = BUF_INIT;
	if (!(mode & 1)) {
		/* the fuzzer cannot sign with keys made at start */
		FZ_CHECK(satoken_verify(keys, ISSUER, (const char *)f1, l1, now, &t, &why) !=
			 SATOKEN_OK);
		FZ_CHECK(why != NULL && t.pod_uid == NULL);
		struct jwk_set *own = NULL;
		if (jwks_parse((const char *)f2, l2, &own, NULL) == 0) {
			FZ_CHECK(own && jwks_count(own) <= JWKS_KEYS_MAX);
			if (satoken_verify(own, ISSUER, (const char *)f1, l1, now, &t, NULL) ==
			    SATOKEN_OK) {
				FZ_CHECK(t.namespace && t.pod_name && t.pod_uid &&
					 t.service_account);
				satoken_free(&t);
			}
			jwks_free(own);
		} else {
			FZ_CHECK(own == NULL);
		}
		if (jws_peek_kid((const char *)f1, l1, &kid) == 0)
			FZ_CHECK(kid.len > 0 &&
				 jwks_has_kid(keys, kid.data, kid.len) ==
				     (!strcmp(kid.data, "rsa-1") || !strcmp(kid.data, "ec-1")));
	} else {
		bool ec = mode & 2;
		struct buf tok = BUF_INIT;
		sign(&tok, f1, l1, f2, l2, ec);
		enum satoken_result r =
		    satoken_verify(keys, ISSUER, tok.data, tok.len, now, &t, &why);
		if (r == SATOKEN_OK) {
			FZ_CHECK(why == NULL && tok.len <= JWS_TOKEN_MAX);
			check_accepted(f1, l1, f2, l2, ec, &t);
			satoken_free(&t);
			/* one byte changed: refused, whichever */
			size_t at = (size_t)mode * 7919 % tok.len;
			tok.data[at] ^= (char)(1 + (mode >> 2) % 127);
			FZ_CHECK(satoken_verify(keys, ISSUER, tok.data, tok.len, now, &t, NULL) !=
				 SATOKEN_OK);
		} else {
			FZ_CHECK(why != NULL && t.pod_uid == NULL);
		}
		buf_free(&tok);
	}
	free(why);
	buf_free(&kid);
	return 0;
}
