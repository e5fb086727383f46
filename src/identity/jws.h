/*
 * jws.h - kubeadm bootstrap tokens and the detached JWS that vouches for
 * kube-public/cluster-info.
 *
 * A node that joins with a token ("abcdef.0123456789abcdef": a public id
 * and a secret) reads the ConfigMap kube-public/cluster-info over TLS it
 * cannot verify yet.  The cluster's bootstrap signer has put beside its
 * `kubeconfig` value a key `jws-kubeconfig-<token id>` holding a JWS
 * (RFC 7515) in compact form with the payload left out
 * ("<header>..<signature>"): HMAC-SHA256 keyed with the token secret over
 * the kubeconfig.  A valid signature proves that someone who knows the
 * secret - the cluster - published that kubeconfig, and so its CA.
 *
 * kubeadm checks by signing again and comparing the whole text; this
 * checks each part (so that the error says which), at least as strictly:
 * the header must be a JSON object with "alg":"HS256" and "kid" equal to
 * the token id (kubeadm always writes it), with no member but alg, kid and
 * typ; the signature base64url (canonical) of exactly 32 bytes, compared in
 * constant time.  The secret never appears in an error text.
 *
 * The same compact form, with a payload and signed by a public key, is a
 * service-account token: kube-apiserver signs those with RS256 (or ES256)
 * under a key it publishes, with its kid, as a JWK Set on /openid/v1/jwks.
 * jwks_parse() reads such a set into GnuTLS public keys and
 * jws_verify_signed() checks a token against it; what the claims must say
 * is identity/satoken.h's.
 */
#ifndef YURTHUB_IDENTITY_JWS_H
#define YURTHUB_IDENTITY_JWS_H

#include <stdbool.h>
#include <stddef.h>

#include "util/buf.h"

#define JWS_TOKEN_ID_LEN     6
#define JWS_TOKEN_SECRET_LEN 16
/* The data key of cluster-info holding the signature for a token id. */
#define JWS_CLUSTER_INFO_KEY_PREFIX "jws-kubeconfig-"

struct bootstrap_token {
	char id[JWS_TOKEN_ID_LEN + 1];
	char secret[JWS_TOKEN_SECRET_LEN + 1];
};

/* Split text[0..len) of the form [a-z0-9]{6}.[a-z0-9]{16} (exactly, no
 * blanks) into *out.  0, or -1 when it is not of that form. */
int jws_token_parse(const char *text, size_t len, struct bootstrap_token *out);
/* Forget the secret (explicit_bzero). */
void jws_token_wipe(struct bootstrap_token *t);

/* The detached JWS of payload, as the cluster's bootstrap signer makes it:
 * header {"alg":"HS256","kid":"<key_id>"}.  Appended to out; 0 or -1 with
 * *err.  For tests and tools; the hub only verifies. */
int jws_sign_detached(const char *payload, size_t len, const char *key_id, const char *secret,
		      struct buf *out, char **err);

/* Is jws[0..jws_len) a valid detached signature of payload[0..len) under
 * key_id and secret?  0 yes; -1 no, with *err saying why (err may be
 * NULL). */
int jws_verify_detached(const char *jws, size_t jws_len, const char *payload, size_t len,
			const char *key_id, const char *secret, char **err);

/* ---- compact JWS signed by a public key (service-account tokens) ---- */

/* Bounds on what is read from the cloud and from clients: a JWK Set
 * document, its keys, and a token (kube-apiserver's are about 1 KiB). */
#define JWKS_DOC_MAX  (256 * 1024)
#define JWKS_KEYS_MAX 64
#define JWS_TOKEN_MAX (16 * 1024)

/* The usable keys of a JWK Set: RSA keys of 2048 to 8192 bits (RS256) and
 * P-256 keys (ES256), each with a kid, "use" sig if said.  Opaque. */
struct jwk_set;

/* Parse a JWK Set document ({"keys":[...]}).  Keys this code cannot use
 * (another kty, curve or alg, a short RSA modulus, no kid, a kid seen
 * before) are left out, not an error.  0 with *out (free with jwks_free),
 * or -1 with *err for a document that is not a JWK Set. */
int jwks_parse(const char *text, size_t len, struct jwk_set **out, char **err);
void jwks_free(struct jwk_set *s);
/* How many usable keys; whether one has this kid. */
size_t jwks_count(const struct jwk_set *s);
bool jwks_has_kid(const struct jwk_set *s, const char *kid, size_t kid_len);

enum jws_result {
	JWS_OK,
	JWS_MALFORMED,	   /* not a compact JWS, a header we refuse, alg none/HS256... */
	JWS_UNKNOWN_KEY,   /* well formed, but no key of the set has its kid */
	JWS_BAD_SIGNATURE, /* the key of its kid did not sign it */
};

/* Check a compact JWS (header.payload.signature, base64url, at most
 * JWS_TOKEN_MAX bytes): its header a JSON object with alg RS256 or ES256 and
 * a kid, and no "crit"; the key of that kid in keys, of the alg's type; the
 * signature of "header.payload" by it.  On JWS_OK the decoded payload is
 * appended to payload.  Otherwise *err (may be NULL) says why, without
 * repeating the token. */
enum jws_result jws_verify_signed(const char *jws, size_t len, const struct jwk_set *keys,
				  struct buf *payload, char **err);

/* The kid of a compact JWS's header, not verified (to notice a key the hub
 * has not fetched yet): appended to out, 0; -1 when there is none. */
int jws_peek_kid(const char *jws, size_t len, struct buf *out);

#endif
