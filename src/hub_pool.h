/*
 * hub_pool.h - the pool's leader-hub configmap wired to the rest of the
 * hub (docs/sharing.md): it names the pool-scope resources (the
 * multiplexer's set), the leaders a follower's multiplexer reads from
 * (cloud/leaders.h), and whether this hub leads, serving the other hubs on
 * --multiplexer-port (server.h).
 */
#ifndef YURTHUB_HUB_POOL_H
#define YURTHUB_HUB_POOL_H

#include "cloud/leaders.h"
#include "config.h"
#include "server/server.h"

struct multiplexer;
struct leader_hub;

struct hub_pool {
	const struct config *cfg;
	struct multiplexer *mux;
	struct leaders *leaders;
	struct server *server;
};

/* For the multiplexer mux (NULL: no sharing, nothing to do).  0 or -1. */
int hub_pool_start(struct hub_pool *hp, const struct config *cfg, struct multiplexer *mux);
/* The configmap changed (lh NULL: it is absent, or unknown when !known);
 * cluster's callback, set once the server listens. */
void hub_pool_apply(struct hub_pool *hp, const struct leader_hub *lh, bool known);
/* After the server stopped. */
void hub_pool_stop(struct hub_pool *hp);

#endif
