/*
 * proxy.h - the proxy ports' handler: each request goes to the cloud when a
 * backend is healthy (remote.c, streamed back), and is answered from the
 * store otherwise (local.c, local_list.c).
 *
 * struct proxy is everything the proxy uses, given to it by the hub: the
 * cloud (cloud/), the cache (cache/) and store, the offline-Event outbox,
 * the metrics.  Nothing here reaches for the hub as a whole.
 */
#ifndef YURTHUB_PROXY_PROXY_H
#define YURTHUB_PROXY_PROXY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "cache/cacheable.h"
#include "cache/manager.h"
#include "cloud/health.h"
#include "cloud/upstream.h"
#include "http/request.h"
#include "metrics/metrics.h"
#include "storage/store.h"

struct outbox;
struct local_changes;
struct cluster;
struct multiplexer;
struct leaders;
struct sa_keys;

struct proxy {
	struct upstream *up;
	struct health *health;
	struct cache_manager *cache;
	struct store *store;
	/* the hub's offline edits and their rvs (cache/local_changes.h) */
	struct local_changes *changes;
	const char *node_name; /* --node-name: whose pods endpoints follow */
	struct cache_agents *agents;
	struct outbox *outbox; /* offline Events, sent when the cloud is back */
	/* the cluster's service-account keys, to check bearer tokens offline
	 * (identity/sakeys.h); NULL: every bearer token offline gets 401 */
	struct sa_keys *sa_keys;
	struct cluster *cluster; /* the response filters' view; NULL: no filtering */
	/* pool-scope lists and watches from memory (multiplexer.h); NULL: off */
	struct multiplexer *mux;
	/* the pool's leader hubs while this hub is a follower (cloud/leaders.h);
	 * NULL: none */
	struct leaders *leaders;
	bool cloud_mode; /* --working-mode=cloud: no cache, no offline answers */
	struct metrics *metrics;
	int min_request_timeout; /* seconds: --min-request-timeout */
	atomic_bool stopping;	 /* shutting down: long requests end */

	/* the relays of upgraded connections (upgrade.c), each a thread */
	pthread_mutex_t relay_lock;
	pthread_cond_t relay_cv;
	int relays;
	bool relays_closed; /* no new relay starts */
	bool relay_sync_ready;
};

/* After the fields above are set: 0, or -1. */
int proxy_init(struct proxy *p);
/* The handler of the proxy ports (a server_handler; ctx is the proxy). */
int proxy_handle(void *ctx, struct request *req);
/* The handler of a leader's multiplexer port: the pool's other hubs' lists and
 * watches of pool-scope resources (multiplexer_answer_peer). */
int proxy_handle_peer(void *ctx, struct request *req);
/* Whether a node may use the multiplexer port (multiplexer_admit_peer). */
int proxy_admit_peer(void *ctx, struct request *req, const char *node);

/* The hub is stopping: watches and other long requests end. */
void proxy_stop(struct proxy *p);
/* Wait until every upgraded connection is closed; none starts after.
 * libmicrohttpd must not stop while one is open. */
void proxy_end_upgrades(struct proxy *p);
/* Release what proxy_init() made. */
void proxy_free(struct proxy *p);

#endif
