/*
 * fuzz_jws.c - bootstrap tokens and the detached JWS of cluster-info
 * (src/identity/jws.c), the one check that stands between a joining node
 * and a cluster CA it cannot otherwise verify.
 *
 * Properties: nothing is accepted whose MAC does not recompute - here,
 * with GnuTLS's HMAC and not through jws.c - over the header text and the
 * payload with the token's secret; and a correctly MAC'ed JWS (mode 1: the
 * fuzzer writes the header, the MAC is made for it) is only accepted when
 * its header is a JSON object saying alg HS256 and kid = the token id.
 * What jws_sign_detached makes verifies, and stops verifying when one
 * payload byte changes.  A token that parses is [a-z0-9]{6}.[a-z0-9]{16}.
 * An error message never holds the secret (unless the JWS, whose header
 * members are named in messages, held it).
 *
 * Input: a mode byte, then NUL-separated fields: token, payload, and the
 * JWS (mode 0) or the header's JSON text (mode 1).
 */
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "identity/jws.h"
#include "util/base64.h"
#include "util/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The MAC of header "." b64url(payload), key zero-padded to 32 bytes. */
static void mac_of(const char *header, size_t hlen, const uint8_t *payload, size_t plen,
		   const char *secret, unsigned char out[32])
{
	struct buf in = BUF_INIT;
	unsigned char key[64] = {0};
	size_t klen = strlen(secret);
	FZ_CHECK(klen <= sizeof key);
	memcpy(key, secret, klen);
	FZ_CHECK(buf_append(&in, header, hlen) == 0 && buf_append_char(&in, '.') == 0 &&
		 base64url_encode(payload, plen, &in) == 0);
	FZ_CHECK(gnutls_hmac_fast(GNUTLS_MAC_SHA256, key, klen < 32 ? 32 : klen, in.data, in.len,
				  out) == 0);
	buf_free(&in);
}

/* Does the JWS's header (decoded) hold s?  Messages name its members. */
static bool header_has(const struct buf *jws, const char *s)
{
	const char *dot = jws->len ? memchr(jws->data, '.', jws->len) : NULL;
	size_t hlen = dot ? (size_t)(dot - jws->data) : jws->len;
	struct buf raw = BUF_INIT;
	bool has = base64url_decode(jws->data ? jws->data : "", hlen, &raw) == 0 && raw.len &&
		   memmem(raw.data, raw.len, s, strlen(s));
	buf_free(&raw);
	return has;
}

/* An accepted JWS: its header says what kubeadm's says, and its signature
 * is the MAC. */
static void check_accepted(const char *jws, size_t len, const uint8_t *payload, size_t plen,
			   const struct bootstrap_token *t)
{
	const char *dots = memchr(jws, '.', len);
	FZ_CHECK(dots && dots + 1 < jws + len && dots[1] == '.');
	size_t hlen = (size_t)(dots - jws);
	const char *sig = dots + 2;
	FZ_CHECK(!memchr(sig, '.', len - hlen - 2));
	struct buf raw = BUF_INIT, s = BUF_INIT;
	FZ_CHECK(base64url_decode(jws, hlen, &raw) == 0);
	json_t *h = json_loadb(raw.data, raw.len, 0, NULL);
	FZ_CHECK(json_is_object(h));
	FZ_CHECK(!strcmp(json_string_value(json_object_get(h, "alg")), "HS256"));
	FZ_CHECK(!strcmp(json_string_value(json_object_get(h, "kid")), t->id));
	json_decref(h);
	FZ_CHECK(base64url_decode(sig, len - hlen - 2, &s) == 0 && s.len == 32);
	unsigned char mac[32];
	mac_of(jws, hlen, payload, plen, t->secret, mac);
	FZ_CHECK(!memcmp(mac, s.data, 32));
	buf_free(&raw);
	buf_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int mode = data[0] & 1;
	data++, size--;
	const uint8_t *tok = NULL, *payload = NULL, *third = NULL;
	size_t toklen = 0, plen = 0, tlen = 0;
	if (!fz_field(&data, &size, &tok, &toklen) || !fz_field(&data, &size, &payload, &plen))
		return 0;
	if (!fz_field(&data, &size, &third, &tlen)) {
		third = (const uint8_t *)"";
		tlen = 0;
	}
	struct bootstrap_token t;
	if (jws_token_parse((const char *)tok, toklen, &t) == 0) {
		FZ_CHECK(toklen == 23 && strlen(t.id) == 6 && strlen(t.secret) == 16);
		for (int i = 0; i < 23; i++)
			FZ_CHECK(i == 6 ? tok[i] == '.'
					: (tok[i] >= 'a' && tok[i] <= 'z') ||
					      (tok[i] >= '0' && tok[i] <= '9'));
	} else {
		FZ_CHECK(t.id[0] == '\0' && t.secret[0] == '\0');
		memcpy(t.id, "abcdef", 7);
		memcpy(t.secret, "0123456789abcdef", 17);
	}

	struct buf jws = BUF_INIT;
	if (mode == 0) {
		FZ_CHECK(buf_append(&jws, third, tlen) == 0);
	} else {
		/* the fuzzer's header, correctly signed */
		unsigned char mac[32];
		FZ_CHECK(base64url_encode(third, tlen, &jws) == 0);
		mac_of(jws.data ? jws.data : "", jws.len, payload, plen, t.secret, mac);
		FZ_CHECK(buf_append_str(&jws, "..") == 0 &&
			 base64url_encode(mac, sizeof mac, &jws) == 0);
	}
	char *err = NULL;
	if (jws_verify_detached(jws.data ? jws.data : "", jws.len, (const char *)payload, plen,
				t.id, t.secret, &err) == 0)
		check_accepted(jws.data, jws.len, payload, plen, &t);
	else /* the secret is never in a message, unless the header had it */
		FZ_CHECK(err != NULL && (!strstr(err, t.secret) || header_has(&jws, t.secret)));
	free(err);
	err = NULL;

	/* sign, verify, spoil */
	struct buf mine = BUF_INIT;
	FZ_CHECK(jws_sign_detached((const char *)payload, plen, t.id, t.secret, &mine, &err) == 0);
	FZ_CHECK(jws_verify_detached(mine.data, mine.len, (const char *)payload, plen, t.id,
				     t.secret, &err) == 0);
	if (plen) {
		uint8_t *copy = malloc(plen);
		FZ_CHECK(copy != NULL);
		memcpy(copy, payload, plen);
		copy[plen / 2] ^= 0x01;
		FZ_CHECK(jws_verify_detached(mine.data, mine.len, (const char *)copy, plen, t.id,
					     t.secret, &err) == -1);
		free(copy);
	}
	free(err);
	buf_free(&mine);
	buf_free(&jws);
	jws_token_wipe(&t);
	return 0;
}
