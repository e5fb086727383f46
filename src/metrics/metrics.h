/*
 * metrics.h - the hub's counters, gauges and histograms, rendered in the
 * Prometheus text format on :10267/metrics.
 *
 * Plain data: fixed families, label sets kept in small tables that grow on
 * first use (requests by component/verb/code).  Every update is a few atomic
 * operations or one short mutex section; rendering takes a snapshot.
 */
#ifndef YURTHUB_METRICS_METRICS_H
#define YURTHUB_METRICS_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

/* Latency buckets (seconds) of the histograms. */
#define METRICS_BUCKETS 12

struct histogram {
	_Atomic uint64_t buckets[METRICS_BUCKETS + 1]; /* last: +Inf */
	_Atomic uint64_t count;
	_Atomic uint64_t sum_us;
};

enum cache_op {
	CACHE_OP_LIST,
	CACHE_OP_OBJECT,
	CACHE_OP_WATCH_EVENT,
	CACHE_OP_CLUSTER_INFO,
	CACHE_OP_N
};

/* Why an offline write was dropped instead of sent (src/proxy/outbox.c). */
enum offline_drop {
	OFFLINE_DROP_QUEUE_FULL, /* the queue was full: the oldest went */
	OFFLINE_DROP_INVALID,	 /* 400, 413, 415, 422: the cloud says the write is wrong */
	OFFLINE_DROP_NOT_FOUND,	 /* 404: its namespace (or the API) is gone */
	OFFLINE_DROP_REFUSED,	 /* another answer that a retry cannot change */
	OFFLINE_DROP_UNREADABLE, /* the stored record is damaged */
	OFFLINE_DROP_N
};

struct metrics {
	/* requests */
	atomic_long in_flight;	       /* every proxy request, watches included */
	atomic_long limited_in_flight; /* those counted against max_in_flight */
	long max_in_flight;	       /* --max-requests-in-flight, set at start */
	_Atomic uint64_t body_bytes;   /* request bodies held now, all together */
	_Atomic uint64_t rejected_in_flight, rejected_body_memory; /* answered 429 */
	atomic_long open_watches;
	_Atomic uint64_t proxied_bytes;
	_Atomic uint64_t filter_changed, filter_dropped; /* objects, by the response filters */
	struct histogram request_seconds;		 /* non-watch requests, end to end */

	/* cache */
	_Atomic uint64_t cache_writes[CACHE_OP_N];
	_Atomic uint64_t cache_failures[CACHE_OP_N];
	_Atomic uint64_t cache_dropped;	      /* streams whose caching was abandoned */
	_Atomic uint64_t cache_lists_refused; /* over cache/list_bounds.h: not cached */
	/* objects left out of a stored list or event: no store key can name
	 * them (a NUL in the name, "..", a '/'); the rest is stored */
	_Atomic uint64_t cache_objects_skipped;
	struct histogram store_seconds; /* one store call */
	/* a list's last byte received -> its view committed (offline-visible) */
	struct histogram commit_lag_seconds;
	atomic_long cache_queue_bytes;
	atomic_long store_views_behind; /* cache/behind.h: views a lost write left behind */

	/* offline */
	_Atomic uint64_t offline_events_queued, offline_events_sent;
	_Atomic uint64_t offline_events_dropped[OFFLINE_DROP_N]; /* by reason */

	/* objects the store holds for this node's components (an object two
	 * components hold counts twice), set by the hub's housekeeping; -1
	 * until the first count, and the sample is left out until then */
	_Atomic int64_t cached_objects;
	/* cache/autonomy.h's verdict, 1 or 0; -1 before the first (left out) */
	atomic_int autonomy_ready;
	/* the etcd store's NOSPACE alarm (etcd/client.h, struct etcd_nospace),
	 * set by the hub at each scrape: 1 or 0, and the writes refused; -1:
	 * no etcd store (left out) */
	atomic_int store_nospace;
	_Atomic int64_t store_nospace_refused;

	/* process_start_time_seconds: Unix time of metrics_init() */
	double start_time;

	/* the labelled families live behind this */
	struct metrics_private *priv;
};

int metrics_init(struct metrics *m);
void metrics_free(struct metrics *m);

/* Count one finished request. */
void metrics_request(struct metrics *m, const char *component, const char *verb, int code);
/* An upstream's health (1/0), labelled by its URL. */
void metrics_upstream_health(struct metrics *m, const char *server, int healthy);
void metrics_upstream_failure(struct metrics *m, const char *server);
void metrics_observe(struct histogram *h, double seconds);

/* Prometheus text exposition of everything. */
int metrics_render(struct metrics *m, struct buf *out);

#endif
