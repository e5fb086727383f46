/*
 * hub.h - the running hub: hub_run() builds every part from the config,
 * wires them together and serves until SIGTERM/SIGINT.
 *
 * The parts, each with its own context and none knowing the hub:
 *
 *   server/   libmicrohttpd adapter: ports, connections, calls handlers
 *   http/     the request, the answers, the limits (below server/ and proxy/)
 *   proxy/    the proxy ports' handler: cloud answers and offline answers
 *   cloud/    the cloud's API servers: identity, balancing, health
 *   cache/    what is cached and how responses become store operations
 *   storage/  the store
 *   netif/    the dummy interface the proxy ports also listen on
 *   metrics/  counters for /metrics
 *
 * hub.c alone knows all of them; it also answers the serve port
 * (/v1/healthz, /v1/readyz, /metrics).
 */
#ifndef YURTHUB_HUB_H
#define YURTHUB_HUB_H

#include "config.h"

/* Start everything, serve until SIGTERM/SIGINT, stop everything.  Returns
 * the process exit status (0, or 1 when something could not start). */
int hub_run(const struct config *cfg);

#endif
