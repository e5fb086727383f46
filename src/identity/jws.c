/*
 * jws.c - bootstrap tokens and kubeadm's detached JWS, see jws.h.
 *
 * The MAC is GnuTLS's HMAC-SHA256; the comparison gnutls_memcmp, whose
 * time does not depend on where the bytes differ.  kubeadm pads a secret
 * shorter than 32 bytes with zeros to 32 (a go-jose requirement); HMAC pads
 * any short key with zeros to its 64-byte block anyway, so the MAC is the
 * same - the padding is kept so that an empty secret is a key too.
 *
 * Signed tokens: GnuTLS imports a JWK's raw RSA (n, e) or P-256 (x, y)
 * values and verifies RSASSA-PKCS1-v1_5 or ECDSA over SHA-256; ES256's
 * raw r || s becomes the DER GnuTLS wants with gnutls_encode_rs_value.
 */
#include "identity/jws.h"

#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/base64.h"

#define MAC_LEN	   32
#define KEY_MIN	   32
#define HEADER_MAX 4096 /* kubeadm's is 42 bytes */

static bool token_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

int jws_token_parse(const char *text, size_t len, struct bootstrap_token *out)
{
	memset(out, 0, sizeof *out);
	if (len != JWS_TOKEN_ID_LEN + 1 + JWS_TOKEN_SECRET_LEN || text[JWS_TOKEN_ID_LEN] != '.')
		return -1;
	for (size_t i = 0; i < len; i++)
		if (i != JWS_TOKEN_ID_LEN && !token_char(text[i]))
			return -1;
	memcpy(out->id, text, JWS_TOKEN_ID_LEN);
	memcpy(out->secret, text + JWS_TOKEN_ID_LEN + 1, JWS_TOKEN_SECRET_LEN);
	return 0;
}

void jws_token_wipe(struct bootstrap_token *t)
{
	explicit_bzero(t, sizeof *t);
}

/* HMAC-SHA256 over "<header text>.<base64url(payload)>" with the secret,
 * zero-padded to 32 bytes.  0 or -1 with *err. */
static int mac(const char *header, size_t hlen, const char *payload, size_t len, const char *secret,
	       unsigned char out[MAC_LEN], char **err)
{
	struct buf input = BUF_INIT, key = BUF_INIT;
	size_t slen = strlen(secret);
	int rc = -1;
	if (buf_append(&input, header, hlen) < 0 || buf_append_char(&input, '.') < 0 ||
	    base64url_encode(payload, len, &input) < 0 || buf_append(&key, secret, slen) < 0 ||
	    buf_reserve(&key, KEY_MIN) < 0) {
		err_printf(err, "out of memory");
		goto out;
	}
	while (key.len < KEY_MIN)
		key.data[key.len++] = '\0';
	int grc =
	    gnutls_hmac_fast(GNUTLS_MAC_SHA256, key.data, key.len, input.data, input.len, out);
	if (grc < 0) {
		err_printf(err, "HMAC-SHA256: %s", gnutls_strerror(grc));
		goto out;
	}
	rc = 0;
out:
	if (key.data)
		explicit_bzero(key.data, key.cap);
	buf_free(&key);
	buf_free(&input);
	return rc;
}

int jws_sign_detached(const char *payload, size_t len, const char *key_id, const char *secret,
		      struct buf *out, char **err)
{
	struct buf json = BUF_INIT, header = BUF_INIT;
	unsigned char sig[MAC_LEN];
	int rc = -1;
	/* member order as go-jose writes it: sorted */
	if (buf_append_str(&json, "{\"alg\":\"HS256\",\"kid\":") < 0 ||
	    buf_append_json_str(&json, key_id, strlen(key_id)) < 0 ||
	    buf_append_char(&json, '}') < 0 || base64url_encode(json.data, json.len, &header) < 0) {
		err_printf(err, "out of memory");
		goto out;
	}
	if (mac(header.data, header.len, payload, len, secret, sig, err) < 0)
		goto out;
	size_t keep = out->len;
	if (buf_append(out, header.data, header.len) < 0 || buf_append_str(out, "..") < 0 ||
	    base64url_encode(sig, sizeof sig, out) < 0) {
		out->len = keep;
		err_printf(err, "out of memory");
		goto out;
	}
	rc = 0;
out:
	explicit_bzero(sig, sizeof sig);
	buf_free(&json);
	buf_free(&header);
	return rc;
}

/* The protected header: a JSON object of alg HS256 and kid key_id, and no
 * member we do not know (a "crit" we cannot honour among them).  0 or -1
 * with *err. */
static int check_header(const char *text, size_t len, const char *key_id, char **err)
{
	struct buf raw = BUF_INIT;
	json_t *h = NULL;
	int rc = -1;
	if (len > HEADER_MAX || base64url_decode(text, len, &raw) < 0) {
		err_printf(err, "JWS header is not base64url");
		goto out;
	}
	json_error_t jerr;
	h = raw.len ? json_loadb(raw.data, raw.len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
	if (!json_is_object(h)) {
		err_printf(err, "JWS header is not a JSON object");
		goto out;
	}
	const char *k;
	json_t *v;
	json_object_foreach(h, k, v)
	{
		if (strcmp(k, "alg") && strcmp(k, "kid") && strcmp(k, "typ")) {
			err_printf(err, "JWS header has a member \"%s\" kubeadm does not write", k);
			goto out;
		}
		if (!json_is_string(v)) {
			err_printf(err, "JWS header member \"%s\" is not a string", k);
			goto out;
		}
	}
	json_t *alg = json_object_get(h, "alg"), *kid = json_object_get(h, "kid");
	const char *a = json_string_value(alg);
	if (!a || json_string_length(alg) != 5 || strcmp(a, "HS256")) {
		err_printf(err, "JWS algorithm is \"%s\", not HS256", a ? a : "(none)");
		goto out;
	}
	size_t idlen = strlen(key_id);
	if (!kid || json_string_length(kid) != idlen ||
	    memcmp(json_string_value(kid), key_id, idlen)) {
		err_printf(err, "JWS key id is \"%s\", not the token id \"%s\"",
			   kid ? json_string_value(kid) : "(none)", key_id);
		goto out;
	}
	rc = 0;
out:
	json_decref(h);
	buf_free(&raw);
	return rc;
}

/* The three parts of a compact JWS, without the dots. */
struct jws_parts {
	const char *header, *payload, *sig;
	size_t hlen, plen, slen;
};

static int split_compact(const char *jws, size_t jws_len, struct jws_parts *p, char **err)
{
	const char *end = jws + jws_len;
	const char *dot1 = memchr(jws, '.', jws_len);
	const char *dot2 = dot1 ? memchr(dot1 + 1, '.', (size_t)(end - dot1 - 1)) : NULL;
	if (!dot1 || !dot2 || memchr(dot2 + 1, '.', (size_t)(end - dot2 - 1))) {
		err_printf(err, "not a compact JWS (three parts separated by '.')");
		return -1;
	}
	*p = (struct jws_parts){jws,
				dot1 + 1,
				dot2 + 1,
				(size_t)(dot1 - jws),
				(size_t)(dot2 - dot1 - 1),
				(size_t)(end - dot2 - 1)};
	return 0;
}

int jws_verify_detached(const char *jws, size_t jws_len, const char *payload, size_t len,
			const char *key_id, const char *secret, char **err)
{
	struct jws_parts parts;
	if (split_compact(jws, jws_len, &parts, err) < 0)
		return -1;
	if (parts.plen) {
		err_printf(err, "not a detached JWS: the payload part is not empty");
		return -1;
	}
	if (check_header(jws, parts.hlen, key_id, err) < 0)
		return -1;
	struct buf sig = BUF_INIT;
	if (parts.slen > 64 || base64url_decode(parts.sig, parts.slen, &sig) < 0 ||
	    sig.len != MAC_LEN) {
		err_printf(err, "JWS signature is not base64url of 32 bytes");
		buf_free(&sig);
		return -1;
	}
	unsigned char want[MAC_LEN];
	int rc = mac(jws, parts.hlen, payload, len, secret, want, err);
	if (rc == 0 && gnutls_memcmp(want, sig.data, MAC_LEN) != 0) {
		err_printf(err, "JWS signature does not match: another token signed it, or the "
				"content was changed");
		rc = -1;
	}
	explicit_bzero(want, sizeof want);
	buf_free(&sig);
	return rc;
}

/* ---- compact JWS signed by a public key ---- */

#define KID_MAX	     256
#define RSA_MIN_BITS 2048
#define RSA_MAX_BITS 8192
#define P256_LEN     32

enum jwk_alg { ALG_RS256, ALG_ES256 };

struct jwk {
	char *kid;
	size_t kid_len;
	enum jwk_alg alg;
	gnutls_pubkey_t key;
};

struct jwk_set {
	struct jwk *v;
	size_t n;
};

void jwks_free(struct jwk_set *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].kid);
		gnutls_pubkey_deinit(s->v[i].key);
	}
	free(s->v);
	free(s);
}

size_t jwks_count(const struct jwk_set *s)
{
	return s ? s->n : 0;
}

static const struct jwk *find_kid(const struct jwk_set *s, const char *kid, size_t kid_len)
{
	for (size_t i = 0; s && i < s->n; i++)
		if (s->v[i].kid_len == kid_len && !memcmp(s->v[i].kid, kid, kid_len))
			return &s->v[i];
	return NULL;
}

bool jwks_has_kid(const struct jwk_set *s, const char *kid, size_t kid_len)
{
	return find_kid(s, kid, kid_len) != NULL;
}

/* A member of a JWK that is base64url of at most max bytes, decoded into
 * out; -1 when missing or not that. */
static int jwk_bytes(json_t *jwk, const char *name, size_t max, struct buf *out)
{
	json_t *v = json_object_get(jwk, name);
	size_t len = json_string_length(v);
	if (!json_is_string(v) || !len || len > (max * 4 + 2) / 3 ||
	    base64url_decode(json_string_value(v), len, out) < 0 || !out->len)
		return -1;
	return 0;
}

/* An optional string member: absent, or equal to want. */
static bool member_absent_or(json_t *o, const char *name, const char *want)
{
	json_t *v = json_object_get(o, name);
	return !v || (json_is_string(v) && !strcmp(json_string_value(v), want));
}

static gnutls_pubkey_t rsa_key(json_t *jwk)
{
	struct buf n = BUF_INIT, e = BUF_INIT;
	gnutls_pubkey_t k = NULL;
	unsigned int bits = 0;
	if (!member_absent_or(jwk, "alg", "RS256") ||
	    jwk_bytes(jwk, "n", RSA_MAX_BITS / 8 + 1, &n) < 0 || jwk_bytes(jwk, "e", 8, &e) < 0)
		goto out;
	gnutls_datum_t dn = {(unsigned char *)n.data, (unsigned int)n.len},
		       de = {(unsigned char *)e.data, (unsigned int)e.len};
	if (gnutls_pubkey_init(&k) < 0) {
		k = NULL;
		goto out;
	}
	if (gnutls_pubkey_import_rsa_raw(k, &dn, &de) < 0 ||
	    gnutls_pubkey_get_pk_algorithm(k, &bits) != GNUTLS_PK_RSA || bits < RSA_MIN_BITS ||
	    bits > RSA_MAX_BITS) {
		gnutls_pubkey_deinit(k);
		k = NULL;
	}
out:
	buf_free(&n);
	buf_free(&e);
	return k;
}

static gnutls_pubkey_t ec_key(json_t *jwk)
{
	struct buf x = BUF_INIT, y = BUF_INIT;
	gnutls_pubkey_t k = NULL;
	if (!member_absent_or(jwk, "alg", "ES256") || !member_absent_or(jwk, "crv", "P-256") ||
	    !json_object_get(jwk, "crv") || jwk_bytes(jwk, "x", P256_LEN, &x) < 0 ||
	    jwk_bytes(jwk, "y", P256_LEN, &y) < 0 || x.len != P256_LEN || y.len != P256_LEN)
		goto out;
	gnutls_datum_t dx = {(unsigned char *)x.data, P256_LEN},
		       dy = {(unsigned char *)y.data, P256_LEN};
	if (gnutls_pubkey_init(&k) < 0) {
		k = NULL;
		goto out;
	}
	/* the import takes any coordinates: the point must be on the curve */
	if (gnutls_pubkey_import_ecc_raw(k, GNUTLS_ECC_CURVE_SECP256R1, &dx, &dy) < 0 ||
	    gnutls_pubkey_verify_params(k) < 0) {
		gnutls_pubkey_deinit(k);
		k = NULL;
	}
out:
	buf_free(&x);
	buf_free(&y);
	return k;
}

/* One entry of "keys" into s when usable; -1 only on ENOMEM. */
static int add_jwk(struct jwk_set *s, json_t *jwk)
{
	json_t *kid = json_object_get(jwk, "kid"), *kty = json_object_get(jwk, "kty");
	size_t kid_len = json_string_length(kid);
	if (!json_is_object(jwk) || !json_is_string(kid) || !kid_len || kid_len > KID_MAX ||
	    !json_is_string(kty) || !member_absent_or(jwk, "use", "sig") ||
	    find_kid(s, json_string_value(kid), kid_len))
		return 0;
	struct jwk k = {.kid_len = kid_len};
	if (!strcmp(json_string_value(kty), "RSA")) {
		k.alg = ALG_RS256;
		k.key = rsa_key(jwk);
	} else if (!strcmp(json_string_value(kty), "EC")) {
		k.alg = ALG_ES256;
		k.key = ec_key(jwk);
	}
	if (!k.key)
		return 0;
	struct jwk *v = realloc(s->v, (s->n + 1) * sizeof *v);
	if (!v || !(k.kid = malloc(kid_len + 1))) {
		if (v)
			s->v = v;
		gnutls_pubkey_deinit(k.key);
		return -1;
	}
	memcpy(k.kid, json_string_value(kid), kid_len);
	k.kid[kid_len] = '\0';
	s->v = v;
	s->v[s->n++] = k;
	return 0;
}

int jwks_parse(const char *text, size_t len, struct jwk_set **out, char **err)
{
	*out = NULL;
	if (len > JWKS_DOC_MAX) {
		err_printf(err, "the JWK Set is over %d bytes", JWKS_DOC_MAX);
		return -1;
	}
	json_error_t jerr;
	json_t *doc = len ? json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
	json_t *keys = json_object_get(doc, "keys");
	if (!json_is_object(doc) || !json_is_array(keys)) {
		err_printf(err, "not a JWK Set (a JSON object with an array \"keys\")");
		json_decref(doc);
		return -1;
	}
	struct jwk_set *s = calloc(1, sizeof *s);
	int rc = s ? 0 : -1;
	for (size_t i = 0; rc == 0 && i < json_array_size(keys) && i < JWKS_KEYS_MAX; i++)
		rc = add_jwk(s, json_array_get(keys, i));
	json_decref(doc);
	if (rc < 0) {
		jwks_free(s);
		err_printf(err, "out of memory");
		return -1;
	}
	*out = s;
	return 0;
}

/* The header of a signed JWS: alg and kid (pointing into *h, which the
 * caller frees).  JWS_OK, or JWS_MALFORMED with *err. */
static enum jws_result signed_header(const struct jws_parts *p, json_t **h, const char **alg,
				     const char **kid, size_t *kid_len, char **err)
{
	struct buf raw = BUF_INIT;
	*h = NULL;
	if (p->hlen > HEADER_MAX || base64url_decode(p->header, p->hlen, &raw) < 0 || !raw.len) {
		buf_free(&raw);
		err_printf(err, "the JWS header is not base64url");
		return JWS_MALFORMED;
	}
	json_error_t jerr;
	*h = json_loadb(raw.data, raw.len, JSON_REJECT_DUPLICATES, &jerr);
	buf_free(&raw);
	json_t *a = json_object_get(*h, "alg"), *k = json_object_get(*h, "kid");
	if (!json_is_object(*h)) {
		err_printf(err, "the JWS header is not a JSON object");
		return JWS_MALFORMED;
	}
	if (json_object_get(*h, "crit")) { /* extensions we would have to honour */
		err_printf(err, "the JWS header has \"crit\"");
		return JWS_MALFORMED;
	}
	if (!json_is_string(a) ||
	    (strcmp(json_string_value(a), "RS256") && strcmp(json_string_value(a), "ES256"))) {
		err_printf(err, "the JWS algorithm is not RS256 or ES256");
		return JWS_MALFORMED;
	}
	if (!json_is_string(k) || !json_string_length(k) || json_string_length(k) > KID_MAX) {
		err_printf(err, "the JWS header names no key (kid)");
		return JWS_MALFORMED;
	}
	*alg = json_string_value(a);
	*kid = json_string_value(k);
	*kid_len = json_string_length(k);
	return JWS_OK;
}

/* ES256's signature is r || s, 32 bytes each; GnuTLS verifies the DER
 * SEQUENCE of the two INTEGERs.  0 or -1. */
static int es256_der(const struct buf *sig, gnutls_datum_t *der)
{
	if (sig->len != 2 * P256_LEN)
		return -1;
	gnutls_datum_t r = {(unsigned char *)sig->data, P256_LEN},
		       s = {(unsigned char *)sig->data + P256_LEN, P256_LEN};
	return gnutls_encode_rs_value(der, &r, &s) < 0 ? -1 : 0;
}

enum jws_result jws_verify_signed(const char *jws, size_t len, const struct jwk_set *keys,
				  struct buf *payload, char **err)
{
	struct jws_parts p;
	if (len > JWS_TOKEN_MAX) {
		err_printf(err, "the token is over %d bytes", JWS_TOKEN_MAX);
		return JWS_MALFORMED;
	}
	if (split_compact(jws, len, &p, err) < 0)
		return JWS_MALFORMED;
	json_t *h = NULL;
	const char *alg = NULL, *kid = NULL;
	size_t kid_len = 0;
	enum jws_result res = signed_header(&p, &h, &alg, &kid, &kid_len, err);
	const struct jwk *k = res == JWS_OK ? find_kid(keys, kid, kid_len) : NULL;
	if (res == JWS_OK && !k) {
		err_printf(err, "no signing key of the cluster has the token's kid");
		res = JWS_UNKNOWN_KEY;
	} else if (res == JWS_OK && (k->alg == ALG_RS256) != !strcmp(alg, "RS256")) {
		err_printf(err, "the token's algorithm does not fit the type of its key");
		res = JWS_BAD_SIGNATURE;
	}
	json_decref(h);
	if (res != JWS_OK)
		return res;
	struct buf sig = BUF_INIT, claims = BUF_INIT;
	gnutls_datum_t der = {NULL, 0};
	if (!p.plen || base64url_decode(p.payload, p.plen, &claims) < 0 ||
	    base64url_decode(p.sig, p.slen, &sig) < 0 || !sig.len) {
		err_printf(err, "the JWS payload or signature is not base64url");
		res = JWS_MALFORMED;
		goto out;
	}
	gnutls_datum_t data = {(unsigned char *)jws, (unsigned int)(p.hlen + 1 + p.plen)};
	gnutls_datum_t s = {(unsigned char *)sig.data, (unsigned int)sig.len};
	int grc;
	if (k->alg == ALG_ES256) {
		if (es256_der(&sig, &der) < 0) {
			err_printf(err, "the ES256 signature is not 64 bytes");
			res = JWS_BAD_SIGNATURE;
			goto out;
		}
		grc = gnutls_pubkey_verify_data2(k->key, GNUTLS_SIGN_ECDSA_SHA256, 0, &data, &der);
	} else {
		grc = gnutls_pubkey_verify_data2(k->key, GNUTLS_SIGN_RSA_SHA256, 0, &data, &s);
	}
	if (grc < 0) {
		err_printf(err, "the signature does not verify with the key of the token's kid");
		res = JWS_BAD_SIGNATURE;
		goto out;
	}
	if (buf_append(payload, claims.data, claims.len) < 0) {
		err_printf(err, "out of memory");
		res = JWS_MALFORMED;
	}
out:
	gnutls_free(der.data);
	buf_free(&sig);
	buf_free(&claims);
	return res;
}

int jws_peek_kid(const char *jws, size_t len, struct buf *out)
{
	struct jws_parts p;
	json_t *h = NULL;
	const char *alg, *kid;
	size_t kid_len;
	int rc = -1;
	if (len <= JWS_TOKEN_MAX && split_compact(jws, len, &p, NULL) == 0 &&
	    signed_header(&p, &h, &alg, &kid, &kid_len, NULL) == JWS_OK)
		rc = buf_append(out, kid, kid_len);
	json_decref(h);
	return rc;
}
