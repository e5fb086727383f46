/*
 * identity.h - the hub's own identity towards the cluster, as YurtHub has
 * it (docs/install.md): a client certificate for system:node:<node>
 * (organizations openyurt:yurthub and system:nodes), and a serving
 * certificate for its secure port that the node's pods trust, both
 * obtained by CSR and rotated.  It puts together:
 *
 *   hubfiles.h    the files under --root-dir;
 *   discovery.h   kubeadm's token discovery, for --join-token and
 *                 POST /v1/token;
 *   certmgr.h     one manager per certificate, with csrclient.h as the
 *                 issuer: the bootstrap token speaks for the hub until it
 *                 has a client certificate, the certificate afterwards.
 *
 * It knows nothing of the proxy: what it learns goes out through hooks
 * (the hub hands the CA and the client pair to cloud/upstream.h, the
 * serving pair to the secure port), and what it needs comes in through
 * hooks (a libcurl handle set up like the proxy's, the cluster IP of the
 * kubernetes Service).
 *
 * Modes (config.h): BOOTSTRAP_TOKEN runs both managers; BOOTSTRAP_KUBELET
 * (kubelet's client certificate, followed by the upstream) and
 * BOOTSTRAP_NONE with a client certificate run the serving one only, when
 * asked for.
 */
#ifndef YURTHUB_IDENTITY_IDENTITY_H
#define YURTHUB_IDENTITY_IDENTITY_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"

struct identity_hooks {
	/* Set h up to reach the API server: its CA, and the hub's client
	 * certificate when with_client_cert. */
	void (*prepare)(void *ctx, CURL *h, bool with_client_cert);
	/* The cluster CA is known (from disk, a bootstrap file, discovery). */
	void (*ca_found)(void *ctx, const char *pem, size_t len);
	/* A valid client certificate and key (one PEM) to speak with. */
	void (*client_pair)(void *ctx, const char *pem, size_t len);
	/* A valid serving certificate and key for the secure port. */
	void (*serving_pair)(void *ctx, const char *pem, size_t len);
	/* The ClusterIP of default/kubernetes into *ip (malloc'ed): 0; -1
	 * while it is not known. */
	int (*cluster_ip)(void *ctx, char **ip);
	void *ctx;
};

struct identity;

/* Start what cfg asks for; with_serving: also keep the serving
 * certificate.  Certificates already on disk and valid are handed to the
 * hooks before this returns, so that a node that boots offline is served
 * at once.  NULL with *err (malloc'ed) when the root directory or the
 * bootstrap file cannot be used. */
struct identity *identity_start(const struct config *cfg, bool with_serving,
				const struct identity_hooks *hooks, char **err);
/* Whether the hub ever had a client certificate of its own (token mode),
 * or does not need one: false means it is bootstrapping for the first
 * time, and /v1/readyz says so. */
bool identity_has_had_client_cert(struct identity *id);
/* POST /v1/token: discover with this join token and rewrite the bootstrap
 * kubeconfig; the token speaks for the hub the next time it has no valid
 * certificate.  0; -1 with *err and *bad_input set when the token itself
 * is at fault (400), clear for a failure of the discovery (500). */
int identity_update_token(struct identity *id, const char *token, bool *bad_input, char **err);
/* The file of the cluster CA the secure port trusts for client
 * certificates when --client-ca-file is not given; NULL when none. */
const char *identity_client_ca_file(struct identity *id);
void identity_stop(struct identity *id);

#endif
