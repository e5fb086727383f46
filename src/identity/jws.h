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
 */
#ifndef YURTHUB_IDENTITY_JWS_H
#define YURTHUB_IDENTITY_JWS_H

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

#endif
