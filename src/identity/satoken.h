/*
 * satoken.h - a Kubernetes service-account token, checked as kube-apiserver
 * checks one, for the hub to judge it while the cloud is unreachable.
 *
 * A pod's token (the projected kube-api-access volume, or a TokenRequest)
 * is a JWS (identity/jws.h) signed by a key of the cluster's service-account
 * issuer, with claims: iss (the issuer), aud (kube-apiserver's default
 * --api-audiences is the issuer itself), exp, nbf and iat, sub
 * "system:serviceaccount:<ns>:<name>", and "kubernetes.io" naming the
 * namespace, the service account and the pod the token is bound to.
 *
 * satoken_verify() holds a token to all of that, with a minute of clock
 * skew either way (go-jose's default leeway, which kube-apiserver uses).
 * A token without a bound pod (a legacy Secret-based one) is refused: only
 * a pod the hub can find in its cache can be judged offline.  Whether that
 * pod is still there, on this node, is the caller's (proxy/local_token.c).
 *
 * Pure: no I/O, no state; thread-safe.  Messages never repeat the token.
 */
#ifndef YURTHUB_IDENTITY_SATOKEN_H
#define YURTHUB_IDENTITY_SATOKEN_H

#include <stddef.h>
#include <time.h>

#include "identity/jws.h"

#define SATOKEN_LEEWAY_S 60

/* What a verified token says; owned strings, free with satoken_free. */
struct sa_token {
	char *namespace;
	char *service_account;
	char *pod_name, *pod_uid;
};

enum satoken_result {
	SATOKEN_OK,
	SATOKEN_UNKNOWN_KEY, /* signed by a key the hub does not know (yet) */
	SATOKEN_REFUSED,     /* anything else: malformed, forged, expired, unbound... */
};

/* Check token[0..len) against the issuer's keys at time now.  SATOKEN_OK
 * with *out filled, or another result with *why (may be NULL). */
enum satoken_result satoken_verify(const struct jwk_set *keys, const char *issuer,
				   const char *token, size_t len, time_t now, struct sa_token *out,
				   char **why);
void satoken_free(struct sa_token *t);

#endif
