/*
 * jws.c - bootstrap tokens and kubeadm's detached JWS, see jws.h.
 *
 * The MAC is GnuTLS's HMAC-SHA256; the comparison gnutls_memcmp, whose
 * time does not depend on where the bytes differ.  kubeadm pads a secret
 * shorter than 32 bytes with zeros to 32 (a go-jose requirement); HMAC pads
 * any short key with zeros to its 64-byte block anyway, so the MAC is the
 * same - the padding is kept so that an empty secret is a key too.
 */
#include "identity/jws.h"

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

int jws_verify_detached(const char *jws, size_t jws_len, const char *payload, size_t len,
			const char *key_id, const char *secret, char **err)
{
	const char *end = jws + jws_len;
	const char *dot1 = memchr(jws, '.', jws_len);
	const char *dot2 = dot1 ? memchr(dot1 + 1, '.', (size_t)(end - dot1 - 1)) : NULL;
	if (!dot1 || !dot2 || memchr(dot2 + 1, '.', (size_t)(end - dot2 - 1))) {
		err_printf(err, "not a compact JWS (three parts separated by '.')");
		return -1;
	}
	if (dot2 != dot1 + 1) {
		err_printf(err, "not a detached JWS: the payload part is not empty");
		return -1;
	}
	if (check_header(jws, (size_t)(dot1 - jws), key_id, err) < 0)
		return -1;
	struct buf sig = BUF_INIT;
	const char *s = dot2 + 1;
	size_t slen = (size_t)(end - s);
	if (slen > 64 || base64url_decode(s, slen, &sig) < 0 || sig.len != MAC_LEN) {
		err_printf(err, "JWS signature is not base64url of 32 bytes");
		buf_free(&sig);
		return -1;
	}
	unsigned char want[MAC_LEN];
	int rc = mac(jws, (size_t)(dot1 - jws), payload, len, secret, want, err);
	if (rc == 0 && gnutls_memcmp(want, sig.data, MAC_LEN) != 0) {
		err_printf(err, "JWS signature does not match: another token signed it, or the "
				"content was changed");
		rc = -1;
	}
	explicit_bzero(want, sizeof want);
	buf_free(&sig);
	return rc;
}
