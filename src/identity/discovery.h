/*
 * discovery.h - kubeadm's token discovery: from a bootstrap token
 * ("abcdef.0123456789abcdef") and the API server's address to the
 * cluster's CA, without trusting anything else.
 *
 *   1. GET /api/v1/namespaces/kube-public/configmaps/cluster-info over TLS
 *      that is not verified yet (nothing is trusted so far), from the
 *      first server that answers, again every retry_ms until the ConfigMap
 *      holds a signature for this token (the cluster's bootstrap signer
 *      may not have signed a new token yet) or timeout_ms is up;
 *   2. its `jws-kubeconfig-<token id>` must be a detached JWS of its
 *      `kubeconfig` made with the token secret (jws.h): only the cluster
 *      knows the secret, so the kubeconfig, and the CA in it, is the
 *      cluster's;
 *   3. with pins (--discovery-token-ca-cert-hash "sha256:<hex>"), the CA
 *      must carry one of them, and the ConfigMap is read again over TLS
 *      verified with that CA and must hold the same kubeconfig; without
 *      pins only when the operator said so (unsafe_skip_ca_verification).
 * A signature or pin that does not check ends the discovery at once: a
 * retry would only get the same answer.  The token secret is never logged
 * nor part of an error.
 */
#ifndef YURTHUB_IDENTITY_DISCOVERY_H
#define YURTHUB_IDENTITY_DISCOVERY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/buf.h"

struct discovery_config {
	const char *const *servers; /* "https://host:port", tried in order */
	size_t n_servers;
	const char *token; /* "<id>.<secret>" */
	const char *const *pins;
	size_t n_pins;
	bool unsafe_skip_ca_verification;
	unsigned retry_ms;	 /* 0: 5 s */
	unsigned timeout_ms;	 /* 0: 2 min */
	const atomic_bool *stop; /* may be NULL; seen within a second */
	const char *user_agent;	 /* NULL: "yurthub" */
};

struct discovery_result {
	char *server;	   /* the server that answered, as given */
	struct buf ca_pem; /* the cluster's CA bundle */
};

/* 0 with *out filled, or -1 with *err (malloc'ed: what failed and where). */
int discovery_run(const struct discovery_config *c, struct discovery_result *out, char **err);
void discovery_result_free(struct discovery_result *r);

#endif
