/*
 * test_satoken.c - identity/jws (signed compact JWS, JWK Sets) and
 * identity/satoken (service-account token claims): tokens made here with
 * GnuTLS keys generated for the run, as kube-apiserver makes them (RS256,
 * and ES256), then every way of spoiling one - another key, a changed
 * payload, expired, not yet valid, another issuer or audience, an unknown
 * kid, alg none and HS256, no bound pod, garbage, an over-long input - and
 * what a JWK Set may hold.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "identity/jws.h"
#include "identity/satoken.h"
#include "util/base64.h"
#include "util/buf.h"

#define ISSUER	"https://kubernetes.default.svc.cluster.local"
#define POD_UID "11111111-1111-4111-8111-111111111111"

static gnutls_privkey_t rsa_key, rsa_other, ec_key, rsa_weak;
static struct jwk_set *keys;
static time_t now;

/* A JWK member: base64url of the unsigned big-endian value, leading zeros
 * dropped (GnuTLS exports them signed), or left-padded to pad bytes. */
static void b64_member(struct buf *out, const char *name, const gnutls_datum_t *d, size_t pad)
{
	size_t off = 0;
	while (off + 1 < d->size && d->data[off] == 0)
		off++;
	unsigned char v[1100] = {0};
	size_t len = d->size - off;
	size_t at = pad > len ? pad - len : 0;
	assert_true(at + len <= sizeof v);
	memcpy(v + at, d->data + off, len);
	assert_int_equal(buf_printf(out, ",\"%s\":\"", name), 0);
	assert_int_equal(base64url_encode(v, at + len, out), 0);
	assert_int_equal(buf_append_char(out, '"'), 0);
}

static void rsa_jwk(struct buf *out, gnutls_privkey_t k, const char *kid)
{
	gnutls_datum_t m, e;
	assert_int_equal(
	    gnutls_privkey_export_rsa_raw2(k, &m, &e, NULL, NULL, NULL, NULL, NULL, NULL, 0), 0);
	assert_int_equal(
	    buf_printf(out, "{\"use\":\"sig\",\"kty\":\"RSA\",\"kid\":\"%s\",\"alg\":\"RS256\"",
		       kid),
	    0);
	b64_member(out, "n", &m, 0);
	b64_member(out, "e", &e, 0);
	assert_int_equal(buf_append_char(out, '}'), 0);
	gnutls_free(m.data);
	gnutls_free(e.data);
}

static void ec_jwk(struct buf *out, gnutls_privkey_t k, const char *kid)
{
	gnutls_ecc_curve_t curve;
	gnutls_datum_t x, y;
	assert_int_equal(gnutls_privkey_export_ecc_raw2(k, &curve, &x, &y, NULL, 0), 0);
	assert_int_equal(curve, GNUTLS_ECC_CURVE_SECP256R1);
	assert_int_equal(buf_printf(out, "{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"%s\"", kid),
			 0);
	b64_member(out, "x", &x, 32);
	b64_member(out, "y", &y, 32);
	assert_int_equal(buf_append_char(out, '}'), 0);
	gnutls_free(x.data);
	gnutls_free(y.data);
}

static int setup(void **state)
{
	(void)state;
	now = time(NULL);
	if (gnutls_privkey_init(&rsa_key) < 0 || gnutls_privkey_init(&rsa_other) < 0 ||
	    gnutls_privkey_init(&ec_key) < 0 || gnutls_privkey_init(&rsa_weak) < 0 ||
	    gnutls_privkey_generate(rsa_key, GNUTLS_PK_RSA, 2048, 0) < 0 ||
	    gnutls_privkey_generate(rsa_other, GNUTLS_PK_RSA, 2048, 0) < 0 ||
	    gnutls_privkey_generate(ec_key, GNUTLS_PK_ECDSA,
				    GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0) < 0 ||
	    gnutls_privkey_generate(rsa_weak, GNUTLS_PK_RSA, 1024, 0) < 0)
		return -1;
	struct buf doc = BUF_INIT;
	buf_append_str(&doc, "{\"keys\":[");
	rsa_jwk(&doc, rsa_key, "rsa-1");
	buf_append_char(&doc, ',');
	ec_jwk(&doc, ec_key, "ec-1");
	buf_append_str(&doc, "]}");
	char *err = NULL;
	int rc = jwks_parse(doc.data, doc.len, &keys, &err);
	if (rc < 0)
		fprintf(stderr, "jwks_parse: %s\n", err);
	free(err);
	buf_free(&doc);
	return rc;
}

static int teardown(void **state)
{
	(void)state;
	jwks_free(keys);
	gnutls_privkey_deinit(rsa_key);
	gnutls_privkey_deinit(rsa_other);
	gnutls_privkey_deinit(ec_key);
	gnutls_privkey_deinit(rsa_weak);
	return 0;
}

/* header.payload.signature with the header and claims given as JSON text;
 * signed with k (RS256 or ES256 by its type), or with sig_text as the
 * signature part when k is NULL. */
static void make_token(struct buf *out, const char *header, const char *claims, gnutls_privkey_t k,
		       const char *sig_text)
{
	buf_reset(out);
	assert_int_equal(base64url_encode(header, strlen(header), out), 0);
	assert_int_equal(buf_append_char(out, '.'), 0);
	assert_int_equal(base64url_encode(claims, strlen(claims), out), 0);
	gnutls_datum_t data = {(unsigned char *)out->data, (unsigned int)out->len}, sig;
	assert_int_equal(buf_append_char(out, '.'), 0);
	if (!k) {
		assert_int_equal(buf_append_str(out, sig_text), 0);
		return;
	}
	assert_int_equal(gnutls_privkey_sign_data(k, GNUTLS_DIG_SHA256, 0, &data, &sig), 0);
	if (gnutls_privkey_get_pk_algorithm(k, NULL) == GNUTLS_PK_ECDSA) {
		gnutls_datum_t r, s;
		assert_int_equal(gnutls_decode_rs_value(&sig, &r, &s), 0);
		unsigned char rs[64] = {0};
		const gnutls_datum_t *parts[2] = {&r, &s};
		for (int i = 0; i < 2; i++) {
			size_t off = 0;
			while (parts[i]->size - off > 32)
				off++; /* a sign byte */
			memcpy(rs + 32 * i + 32 - (parts[i]->size - off), parts[i]->data + off,
			       parts[i]->size - off);
		}
		assert_int_equal(base64url_encode(rs, sizeof rs, out), 0);
		gnutls_free(r.data);
		gnutls_free(s.data);
	} else {
		assert_int_equal(base64url_encode(sig.data, sig.size, out), 0);
	}
	gnutls_free(sig.data);
}

/* Claims as kube-apiserver writes them for a pod's token; the fields the
 * cases change are arguments. */
static void claims_of(struct buf *out, const char *iss, const char *aud, long long exp,
		      long long nbf, const char *k8s)
{
	buf_reset(out);
	assert_int_equal(
	    buf_printf(out,
		       "{\"aud\":%s,\"exp\":%lld,\"iat\":%lld,\"iss\":\"%s\",\"jti\":\"j-1\","
		       "\"kubernetes.io\":%s,\"nbf\":%lld,"
		       "\"sub\":\"system:serviceaccount:default:app\"}",
		       aud, exp, nbf, iss, k8s, nbf),
	    0);
}

#define BOUND                                                                                      \
	"{\"namespace\":\"default\",\"node\":{\"name\":\"node1\",\"uid\":\"n-1\"},"                \
	"\"pod\":{\"name\":\"app-1\",\"uid\":\"" POD_UID "\"},"                                    \
	"\"serviceaccount\":{\"name\":\"app\",\"uid\":\"s-1\"}}"
#define AUD	  "[\"" ISSUER "\"]"
#define RS_HEADER "{\"alg\":\"RS256\",\"kid\":\"rsa-1\"}"
#define ES_HEADER "{\"alg\":\"ES256\",\"kid\":\"ec-1\"}"

static enum satoken_result verify(const struct buf *tok, struct sa_token *t, char **why)
{
	return satoken_verify(keys, ISSUER, tok->data, tok->len, now, t, why);
}

/* Refused, with a reason that does not repeat the token's signature. */
static void assert_refused(const struct buf *tok, enum satoken_result want)
{
	struct sa_token t;
	char *why = NULL;
	enum satoken_result r = verify(tok, &t, &why);
	if (r != want)
		fail_msg("result %d, wanted %d (%s)", r, want, why ? why : "");
	assert_non_null(why);
	const char *sig = tok->data ? strrchr(tok->data, '.') : NULL;
	if (sig && strlen(sig) > 8)
		assert_null(strstr(why, sig + 1));
	assert_null(t.pod_uid);
	free(why);
}

static void test_good_rs256(void **state)
{
	(void)state;
	struct buf c = BUF_INIT, tok = BUF_INIT;
	claims_of(&c, ISSUER, AUD, now + 3600, now, BOUND);
	make_token(&tok, RS_HEADER, c.data, rsa_key, NULL);
	struct sa_token t;
	char *why = NULL;
	assert_int_equal(verify(&tok, &t, &why), SATOKEN_OK);
	assert_null(why);
	assert_string_equal(t.namespace, "default");
	assert_string_equal(t.service_account, "app");
	assert_string_equal(t.pod_name, "app-1");
	assert_string_equal(t.pod_uid, POD_UID);
	satoken_free(&t);
	/* aud as one string; a minute of skew either way */
	claims_of(&c, ISSUER, "\"" ISSUER "\"", now - 30, now + 30, BOUND);
	make_token(&tok, RS_HEADER, c.data, rsa_key, NULL);
	assert_int_equal(verify(&tok, &t, NULL), SATOKEN_OK);
	satoken_free(&t);
	struct buf kid = BUF_INIT;
	assert_int_equal(jws_peek_kid(tok.data, tok.len, &kid), 0);
	assert_string_equal(kid.data, "rsa-1");
	buf_free(&kid);
	buf_free(&c);
	buf_free(&tok);
}

static void test_good_es256(void **state)
{
	(void)state;
	struct buf c = BUF_INIT, tok = BUF_INIT;
	claims_of(&c, ISSUER, AUD, now + 3600, now, BOUND);
	struct sa_token t;
	for (int i = 0; i < 8; i++) { /* r and s of every length */
		make_token(&tok, ES_HEADER, c.data, ec_key, NULL);
		assert_int_equal(verify(&tok, &t, NULL), SATOKEN_OK);
		assert_string_equal(t.pod_name, "app-1");
		satoken_free(&t);
	}
	/* an RSA signature under the EC key's kid, and the other way round */
	make_token(&tok, "{\"alg\":\"RS256\",\"kid\":\"ec-1\"}", c.data, rsa_key, NULL);
	assert_refused(&tok, SATOKEN_REFUSED);
	make_token(&tok, "{\"alg\":\"ES256\",\"kid\":\"rsa-1\"}", c.data, ec_key, NULL);
	assert_refused(&tok, SATOKEN_REFUSED);
	buf_free(&c);
	buf_free(&tok);
}

static void test_wrong_key_and_tampering(void **state)
{
	(void)state;
	struct buf c = BUF_INIT, tok = BUF_INIT, other = BUF_INIT;
	claims_of(&c, ISSUER, AUD, now + 3600, now, BOUND);
	make_token(&tok, RS_HEADER, c.data, rsa_other, NULL);
	assert_refused(&tok, SATOKEN_REFUSED);
	/* a good token's payload replaced by another pod's */
	make_token(&tok, RS_HEADER, c.data, rsa_key, NULL);
	claims_of(&other, ISSUER, AUD, now + 3600, now,
		  "{\"namespace\":\"kube-system\",\"pod\":{\"name\":\"x\",\"uid\":\"u\"},"
		  "\"serviceaccount\":{\"name\":\"app\"}}");
	const char *d1 = strchr(tok.data, '.'), *d2 = strrchr(tok.data, '.');
	struct buf forged = BUF_INIT;
	buf_append(&forged, tok.data, (size_t)(d1 - tok.data) + 1);
	base64url_encode(other.data, other.len, &forged);
	buf_append_str(&forged, d2);
	assert_refused(&forged, SATOKEN_REFUSED);
	/* one bit of the signature, of the header */
	buf_reset(&forged);
	buf_append(&forged, tok.data, tok.len);
	forged.data[forged.len - 3] ^= 0x01;
	assert_refused(&forged, SATOKEN_REFUSED);
	buf_reset(&forged);
	make_token(&forged, "{\"alg\":\"RS256\",\"kid\":\"rsa-1\",\"typ\":\"JWT\"}", c.data, NULL,
		   d2 + 1);
	assert_refused(&forged, SATOKEN_REFUSED);
	buf_free(&forged);
	buf_free(&other);
	buf_free(&c);
	buf_free(&tok);
}

static void test_times(void **state)
{
	(void)state;
	struct buf c = BUF_INIT, tok = BUF_INIT;
	claims_of(&c, ISSUER, AUD, now - 120, now - 3600, BOUND); /* expired */
	make_token(&tok, RS_HEADER, c.data, rsa_key, NULL);
	assert_refused(&tok, SATOKEN_REFUSED);
	claims_of(&c, ISSUER, AUD, now + 3600, now + 300, BOUND); /* not yet valid */
	make_token(&tok, RS_HEADER, c.data, rsa_key, NULL);
	assert_refused(&tok, SATOKEN_REFUSED);
	buf_reset(&c); /* no exp */
	buf_printf(&c, "{\"aud\":" AUD ",\"iss\":\"" ISSUER "\",\"kubernetes.io\":" BOUND
		       ",\"sub\":\"system:serviceaccount:default:app\"}");
	make_token(&tok, RS_HEADER, c.data, rsa_key, NULL);
	assert_refused(&tok, SATOKEN_REFUSED);
	buf_free(&c);
	buf_free(&tok);
}

static void test_issuer_audience_binding(void **state)
{
	(void)state;
	struct buf c = BUF_INIT, tok = BUF_INIT;
	claims_of(&c, "https://evil.example", AUD, now + 3600, now, BOUND);
	make_token(&tok, RS_HEADER, c.data, rsa_key, NULL);
	assert_refused(&tok, SATOKEN_REFUSED);
	claims_of(&c, ISSUER, "[\"vault\"]", now + 3600, now, BOUND);
	make_token(&tok, RS_HEADER, c.data, rsa_key, NULL);
	assert_refused(&tok, SATOKEN_REFUSED);
	claims_of(&c, ISSUER, "[]", now + 3600, now, BOUND);
	make_token(&tok, RS_HEADER, c.data, rsa_key, NULL);
	assert_refused(&tok, SATOKEN_REFUSED);
	/* a legacy token: a service account, no pod */
	claims_of(&c, ISSUER, AUD, now + 3600, now,
		  "{\"namespace\":\"default\",\"serviceaccount\":{\"name\":\"app\"}}");
	make_token(&tok, RS_HEADER, c.data, rsa_key, NULL);
	assert_refused(&tok, SATOKEN_REFUSED);
	/* sub naming another service account */
	claims_of(&c, ISSUER, AUD, now + 3600, now,
		  "{\"namespace\":\"default\",\"pod\":{\"name\":\"app-1\",\"uid\":\"u\"},"
		  "\"serviceaccount\":{\"name\":\"other\"}}");
	make_token(&tok, RS_HEADER, c.data, rsa_key, NULL);
	assert_refused(&tok, SATOKEN_REFUSED);
	/* no keys yet: refused, whatever the token */
	claims_of(&c, ISSUER, AUD, now + 3600, now, BOUND);
	make_token(&tok, RS_HEADER, c.data, rsa_key, NULL);
	struct sa_token t;
	char *why = NULL;
	assert_int_equal(satoken_verify(NULL, NULL, tok.data, tok.len, now, &t, &why),
			 SATOKEN_REFUSED);
	assert_int_equal(satoken_verify(keys, "https://other", tok.data, tok.len, now, &t, &why),
			 SATOKEN_REFUSED);
	free(why);
	buf_free(&c);
	buf_free(&tok);
}

static void test_unknown_kid_and_algs(void **state)
{
	(void)state;
	struct buf c = BUF_INIT, tok = BUF_INIT;
	claims_of(&c, ISSUER, AUD, now + 3600, now, BOUND);
	make_token(&tok, "{\"alg\":\"RS256\",\"kid\":\"rotated\"}", c.data, rsa_key, NULL);
	assert_refused(&tok, SATOKEN_UNKNOWN_KEY);
	make_token(&tok, "{\"alg\":\"RS256\"}", c.data, rsa_key, NULL); /* no kid */
	assert_refused(&tok, SATOKEN_REFUSED);
	make_token(&tok, "{\"alg\":\"none\",\"kid\":\"rsa-1\"}", c.data, NULL, "");
	assert_refused(&tok, SATOKEN_REFUSED);
	make_token(&tok, "{\"alg\":\"RS256\",\"kid\":\"rsa-1\"}", c.data, NULL, "");
	assert_refused(&tok, SATOKEN_REFUSED);
	/* HS256 keyed with the public modulus: the classic confusion */
	make_token(&tok, "{\"alg\":\"HS256\",\"kid\":\"rsa-1\"}", c.data, NULL,
		   "c2lnbmF0dXJlLW9mLTMyLWJ5dGVzLWZvci1obWFjLXNoYTI1Ng");
	assert_refused(&tok, SATOKEN_REFUSED);
	make_token(&tok, "{\"alg\":\"RS256\",\"kid\":\"rsa-1\",\"crit\":[\"exp\"]}", c.data,
		   rsa_key, NULL);
	assert_refused(&tok, SATOKEN_REFUSED);
	make_token(&tok, "{\"alg\":\"RS256\",\"kid\":\"rsa-1\",\"alg\":\"RS256\"}", c.data, rsa_key,
		   NULL); /* a duplicate member */
	assert_refused(&tok, SATOKEN_REFUSED);
	buf_free(&c);
	buf_free(&tok);
}

static void test_garbage_and_length(void **state)
{
	(void)state;
	static const char *const garbage[] = {
	    "",
	    "x",
	    ".",
	    "..",
	    "...",
	    "a.b",
	    "a.b.c",
	    "a.b.c.d",
	    "e30.e30.",
	    "e30..",
	    "eyJhbGciOiJSUzI1NiIsImtpZCI6InJzYS0xIn0.e30.AAAA",
	    "eyJhbGciOiJSUzI1NiIsImtpZCI6InJzYS0xIn0.!!.AAAA",
	    "%%%.%%%.%%%",
	    "eyJhbGciOiJSUzI1NiIsImtpZCI6InJzYS0xIn0=.e30.AAAA",
	};
	struct buf tok = BUF_INIT;
	for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
		buf_reset(&tok);
		buf_append_str(&tok, garbage[i]);
		struct sa_token t;
		char *why = NULL;
		enum satoken_result r =
		    satoken_verify(keys, ISSUER, garbage[i], strlen(garbage[i]), now, &t, &why);
		if (r == SATOKEN_OK)
			fail_msg("garbage \"%s\" accepted", garbage[i]);
		free(why);
		struct buf kid = BUF_INIT;
		jws_peek_kid(garbage[i], strlen(garbage[i]), &kid);
		buf_free(&kid);
	}
	/* a valid token made longer than the bound is refused before any decoding */
	struct buf c = BUF_INIT, pad = BUF_INIT;
	while (pad.len < JWS_TOKEN_MAX)
		buf_append_str(&pad, "xxxxxxxxxxxxxxxx");
	buf_printf(&c,
		   "{\"aud\":" AUD ",\"exp\":%lld,\"iss\":\"" ISSUER "\",\"kubernetes.io\":" BOUND
		   ",\"pad\":\"%s\",\"sub\":\"system:serviceaccount:default:app\"}",
		   (long long)now + 3600, pad.data);
	buf_free(&pad);
	make_token(&tok, RS_HEADER, c.data, rsa_key, NULL);
	assert_true(tok.len > JWS_TOKEN_MAX);
	assert_refused(&tok, SATOKEN_REFUSED);
	struct buf kid = BUF_INIT;
	assert_int_equal(jws_peek_kid(tok.data, tok.len, &kid), -1);
	buf_free(&kid);
	buf_free(&c);
	buf_free(&tok);
}

static void test_jwks(void **state)
{
	(void)state;
	assert_int_equal(jwks_count(keys), 2);
	assert_true(jwks_has_kid(keys, "rsa-1", 5));
	assert_true(jwks_has_kid(keys, "ec-1", 4));
	assert_false(jwks_has_kid(keys, "rsa", 3));
	/* unusable keys are left out: a short modulus, another kty, use enc,
	 * another alg, no kid, a kid seen before */
	struct buf doc = BUF_INIT;
	buf_append_str(&doc, "{\"keys\":[");
	rsa_jwk(&doc, rsa_weak, "weak");
	buf_append_str(&doc, ",{\"kty\":\"oct\",\"kid\":\"sym\",\"k\":\"c2VjcmV0\"},");
	buf_append_str(&doc,
		       "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"kid\":\"ed\",\"x\":\"AAAA\"},");
	rsa_jwk(&doc, rsa_key, "first");
	buf_append_char(&doc, ',');
	rsa_jwk(&doc, rsa_other, "first");
	buf_append_str(&doc, ",{\"kty\":\"RSA\",\"n\":\"AQAB\",\"e\":\"AQAB\"}");
	buf_append_str(&doc, ",{\"kty\":\"EC\",\"crv\":\"P-384\",\"kid\":\"p384\",\"x\":\"AA\","
			     "\"y\":\"AA\"}");
	buf_append_str(&doc, ",{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"offcurve\",\"x\":"
			     "\"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\",\"y\":"
			     "\"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"}");
	buf_append_str(&doc, ",\"not an object\",42]}");
	struct jwk_set *s = NULL;
	char *err = NULL;
	assert_int_equal(jwks_parse(doc.data, doc.len, &s, &err), 0);
	assert_int_equal(jwks_count(s), 1);
	assert_true(jwks_has_kid(s, "first", 5));
	/* the first "first" is the one kept: rsa_key's signature verifies */
	struct buf c = BUF_INIT, tok = BUF_INIT, payload = BUF_INIT;
	claims_of(&c, ISSUER, AUD, now + 3600, now, BOUND);
	make_token(&tok, "{\"alg\":\"RS256\",\"kid\":\"first\"}", c.data, rsa_key, NULL);
	assert_int_equal(jws_verify_signed(tok.data, tok.len, s, &payload, NULL), JWS_OK);
	assert_int_equal(payload.len, c.len);
	assert_memory_equal(payload.data, c.data, c.len);
	jwks_free(s);
	static const char *const bad[] = {
	    "", "[]", "{}", "{\"keys\":{}}", "{\"keys\":[]", "{\"keys\":[],\"keys\":[]}"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		s = NULL;
		if (jwks_parse(bad[i], strlen(bad[i]), &s, &err) == 0)
			fail_msg("\"%s\" taken for a JWK Set", bad[i]);
		assert_null(s);
	}
	assert_int_equal(jwks_parse("{\"keys\":[]}", 11, &s, &err), 0);
	assert_int_equal(jwks_count(s), 0);
	jwks_free(s);
	free(err);
	buf_free(&payload);
	buf_free(&c);
	buf_free(&tok);
	buf_free(&doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_good_rs256),
	    cmocka_unit_test(test_good_es256),
	    cmocka_unit_test(test_wrong_key_and_tampering),
	    cmocka_unit_test(test_times),
	    cmocka_unit_test(test_issuer_audience_binding),
	    cmocka_unit_test(test_unknown_kid_and_algs),
	    cmocka_unit_test(test_garbage_and_length),
	    cmocka_unit_test(test_jwks),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
