/*
 * hub_identity.h - the hub's identity wired to the rest of the hub: what
 * identity/ learns (the cluster CA, the client pair, the serving pair)
 * goes to the upstream and the secure port; what it needs (a libcurl
 * handle like the proxy's, the kubernetes Service's cluster IP, read
 * through the hub's own proxy port) comes from them.  Also the serve
 * port's POST /v1/token and the identity's part of /v1/readyz.
 *
 * Which certificates are managed follows config.h's bootstrap_mode:
 *   token     both, by CSR;
 *   kubelet   kubelet's client certificate (the upstream follows its
 *             file), the serving one by CSR;
 *   none      what the flags give: --tls-cert-file for the secure port.
 * --tls-cert-file/--tls-private-key-file always win for the secure port.
 */
#ifndef YURTHUB_HUB_IDENTITY_H
#define YURTHUB_HUB_IDENTITY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "cloud/health.h"
#include "cloud/upstream.h"
#include "config.h"
#include "http/request.h"
#include "identity/identity.h"
#include "server/server.h"

struct hub_identity {
	const struct config *cfg;
	struct upstream *up;
	_Atomic(struct health *) health; /* told to probe when the identity changes */
	const char *proxy_url;		 /* the hub's plain proxy port, for the cluster IP */
	struct identity *id;		 /* NULL when nothing is managed */
	char *client_ca;		 /* the secure port's client CA file; NULL: port off */
	/* once it listens, until it stops: server_lock keeps it from being
	 * freed under a certificate hook that starts the secure port */
	pthread_mutex_t server_lock;
	struct server *server;
	atomic_bool stopping;
	pthread_mutex_t ip_lock;
	char *cluster_ip; /* last known, NULL none */
	long long ip_checked_ms;
};

/* Before the server starts.  0, or -1 with the reason logged. */
int hub_identity_start(struct hub_identity *hi, const struct config *cfg, struct upstream *up,
		       const char *proxy_url);
/* The health checker, before it starts: it probes again when the identity
 * changes, and a hub bootstrapping from nothing holds its first probe for
 * the CA and the certificate. */
void hub_identity_health(struct hub_identity *hi, struct health *h);
/* The server listens: the secure port may start as soon as it can. */
void hub_identity_listening(struct hub_identity *hi, struct server *s);
/* Before the server stops: the identity's threads, still running, no
 * longer touch it. */
void hub_identity_unlisten(struct hub_identity *hi);
/* 503 text for /v1/readyz while the hub bootstraps, NULL when ready. */
const char *hub_identity_not_ready(struct hub_identity *hi);
/* POST or PUT /v1/token on the serve port. */
int hub_identity_token_endpoint(struct hub_identity *hi, struct request *req);
/* After the server stopped. */
void hub_identity_stop(struct hub_identity *hi);

#endif
