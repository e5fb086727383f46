/*
 * hub.h - the running hub: every part, built from the config in hub_run()
 * and shared (read-only after start) by the connection threads.
 *
 *   server/   libmicrohttpd front end: proxy ports, hub port, routing
 *   proxy/    upstream (cloud) proxying and offline answers
 *   health/   is the cloud there
 *   cache/    what is cached and how responses become store operations
 *   storage/  the store
 *   metrics/  counters for /metrics
 */
#ifndef YURTHUB_HUB_H
#define YURTHUB_HUB_H

#include <stdatomic.h>
#include <stdbool.h>

#include "cache/cacheable.h"
#include "cache/manager.h"
#include "config.h"
#include "health/health.h"
#include "metrics/metrics.h"
#include "proxy/upstream.h"
#include "storage/store.h"

struct server;
struct outbox;

struct hub {
	const struct config *cfg;
	struct store *store;
	struct upstream upstream;
	struct health *health;
	struct cache_agents agents;
	struct cache_manager *cache;
	struct outbox *outbox; /* offline Events, sent when the cloud is back */
	struct metrics metrics;
	struct server *server;
	struct housekeeping *housekeeping; /* object count; etcd tombstones, strays */
	atomic_bool ready;		   /* the store has recovered */
	atomic_bool stopping;		   /* shutting down: long requests end */
};

/* Start everything, serve until SIGTERM/SIGINT, stop everything.  Returns
 * the process exit status (0, or 1 when something could not start). */
int hub_run(const struct config *cfg);

#endif
