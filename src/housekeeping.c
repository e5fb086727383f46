/*
 * housekeeping.c - a thread of the hub that wakes now and then: it counts
 * the cached objects for yurthub_cached_objects, gives freed heap back to
 * the system, scrubs the store (every object read and checked, so that a
 * damaged one is rewritten by the next list of it), and, on the etcd store,
 * removes old tombstones and stray holdings.  See housekeeping.h.
 */
#include "housekeeping.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "storage/etcd.h"
#include "util/log.h"

/* The object count behind yurthub_cached_objects: soon after start (so a
 * scrape sees it within seconds), then once a minute. */
#define COUNT_FIRST_S	 1
#define COUNT_INTERVAL_S 60
/* The etcd store's tombstones and stray holdings; also the age at which
 * tombstones go. */
#define ETCD_GC_INTERVAL_S 600
/* Lists that ended without their commit (the hub killed mid-list, etcd
 * gone): this node's are rolled back soon after start and within this
 * interval of etcd taking writes again; another node's once its record
 * was not refreshed for ETCD_ABANDONED_S (its hub refreshes it every 30 s
 * while the list streams in: ten minutes is a hub that is gone). */
#define ETCD_RECOVER_FIRST_S	1
#define ETCD_RECOVER_INTERVAL_S 15
#define ETCD_ABANDONED_S	600

/* The scrub (store_scrub): soon after start, then every half hour.  A
 * value goes bad rarely (an operator's etcdctl, a disk's lost block) and
 * stays harmless until read - offline, where a read skips it - so the
 * period only bounds how long a damaged copy waits for its rewrite by a
 * relist; half an hour keeps the scrub's reads (about one offline list of
 * everything cached, see docs/contracts.md) a small part of the store's
 * load.  One that fails (etcd away, at start or later) is tried again a
 * minute later, not a period later: it costs one failed call, and a hub
 * started before its etcd is scrubbed once the etcd answers. */
#define SCRUB_FIRST_S	 1
#define SCRUB_INTERVAL_S 1800
#define SCRUB_RETRY_S	 60

struct housekeeping {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* on CLOCK_MONOTONIC: a clock step neither fires nor starves it */
	bool stop;
	atomic_bool stopping; /* stop, for the scrub to look at between objects */
	struct store *store;
	struct metrics *metrics;
	bool etcd_gc;
	struct timespec scrub_next; /* the scrub's own deadline (housekeeping thread only) */
	/* housekeeping_every's chore, under mu */
	void (*extra)(void *ctx);
	void *extra_ctx;
};

static bool reached(const struct timespec *now, const struct timespec *t)
{
	return now->tv_sec > t->tv_sec || (now->tv_sec == t->tv_sec && now->tv_nsec >= t->tv_nsec);
}

static void count_objects(struct housekeeping *k)
{
	uint64_t n = 0;
	enum store_err e = store_count_objects(k->store, &n);
	if (e == STORE_OK) {
		atomic_store(&k->metrics->cached_objects, n > INT64_MAX ? INT64_MAX : (int64_t)n);
		return;
	}
	/* The gauge keeps its last value; a store that fails is already seen
	 * in yurthub_cache_failures_total, so this is an event, not a warning. */
	log_info("counting cached objects failed (%s); tried again in %d s", store_strerror(e),
		 COUNT_INTERVAL_S);
}

static void etcd_gc(struct housekeeping *k)
{
	long n = etcd_store_gc(k->store, ETCD_GC_INTERVAL_S);
	if (n < 0)
		log_warn("etcd store housekeeping failed; tried again in %d s", ETCD_GC_INTERVAL_S);
	else if (n > 0)
		log_info("etcd store housekeeping: %ld stale records removed", n);
}

static void etcd_recover(struct housekeeping *k)
{
	long n = etcd_store_recover(k->store, ETCD_ABANDONED_S);
	if (n > 0)
		log_info("etcd store: %ld unfinished list%s rolled back", n, n == 1 ? "" : "s");
	/* a failure is etcd away: already seen by every other store call */
}

static double seconds_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Runs every SCRUB_RETRY_S; scrubs when its own deadline is reached. */
static void scrub(struct housekeeping *k)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!reached(&t0, &k->scrub_next))
		return;
	struct store_scrub_stats st;
	enum store_err e = store_scrub(k->store, &k->stopping, &st);
	double took = seconds_since(&t0);
	k->scrub_next = t0;
	bool unsupported = e == STORE_IO && store_errno() == ENOTSUP; /* a backend without it */
	k->scrub_next.tv_sec += e == STORE_OK || unsupported ? SCRUB_INTERVAL_S : SCRUB_RETRY_S;
	if (unsupported || atomic_load(&k->stopping))
		return;
	if (e != STORE_OK)
		log_info("store scrub stopped after %llu objects (%s); tried again in %d s",
			 (unsigned long long)st.objects, store_strerror(e), SCRUB_RETRY_S);
	else if (st.damaged)
		log_info("store scrub: %llu of %llu objects damaged (each logged once); the next "
			 "list of each rewrites it",
			 (unsigned long long)st.damaged, (unsigned long long)st.objects);
	else
		log_v(2, "store scrub: %llu objects, %llu KiB read in %.3f s, none damaged",
		      (unsigned long long)st.objects, (unsigned long long)(st.bytes >> 10), took);
}

/* Memory the allocator keeps after a burst (a hundred watches' initial
 * events, a big list served offline) goes back to the system once there is
 * this much of it free: RSS falls back near idle. */
#define TRIM_INTERVAL_S 5
#define TRIM_FREE_BYTES (2u << 20)

static void trim_memory(struct housekeeping *k)
{
	(void)k;
	struct mallinfo2 mi = mallinfo2();
	if (mi.fordblks >= TRIM_FREE_BYTES) {
		malloc_trim(0);
		log_v(3, "housekeeping: %zu KiB of free heap given back", mi.fordblks >> 10);
	}
}

#define EXTRA_INTERVAL_S 10

static void run_extra(struct housekeeping *k)
{
	pthread_mutex_lock(&k->mu);
	void (*fn)(void *) = k->extra;
	void *ctx = k->extra_ctx;
	pthread_mutex_unlock(&k->mu);
	if (fn)
		fn(ctx);
}

/* The chores, each with its own period and absolute deadline, so that a
 * wakeup for one (or a spurious one) does not push another back. */
struct chore {
	void (*run)(struct housekeeping *k);
	int first_s, every_s;
	bool etcd_only;
	struct timespec next;
};

static void *housekeeping_main(void *arg)
{
	struct housekeeping *k = arg;
	struct chore chores[] = {
	    {count_objects, COUNT_FIRST_S, COUNT_INTERVAL_S, false, {0, 0}},
	    {etcd_gc, ETCD_GC_INTERVAL_S, ETCD_GC_INTERVAL_S, true, {0, 0}},
	    {etcd_recover, ETCD_RECOVER_FIRST_S, ETCD_RECOVER_INTERVAL_S, true, {0, 0}},
	    {trim_memory, TRIM_INTERVAL_S, TRIM_INTERVAL_S, false, {0, 0}},
	    {run_extra, COUNT_FIRST_S, EXTRA_INTERVAL_S, false, {0, 0}},
	    {scrub, SCRUB_FIRST_S, SCRUB_RETRY_S, false, {0, 0}},
	};
	size_t n = sizeof chores / sizeof chores[0];
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	for (size_t i = 0; i < n; i++) {
		chores[i].next = now;
		chores[i].next.tv_sec += chores[i].first_s;
	}
	pthread_mutex_lock(&k->mu);
	while (!k->stop) {
		const struct timespec *until = NULL;
		for (size_t i = 0; i < n; i++)
			if ((!chores[i].etcd_only || k->etcd_gc) &&
			    (!until || !reached(&chores[i].next, until)))
				until = &chores[i].next;
		int rc = pthread_cond_timedwait(&k->cv, &k->mu, until);
		if (k->stop)
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (rc != ETIMEDOUT && !reached(&now, until))
			continue;
		/* The chores run unlocked: stop() only waits for the one in
		 * progress (bounded by the store's own timeouts). */
		pthread_mutex_unlock(&k->mu);
		for (size_t i = 0; i < n; i++) {
			struct chore *c = &chores[i];
			if ((c->etcd_only && !k->etcd_gc) || !reached(&now, &c->next))
				continue;
			c->run(k);
			c->next = now;
			c->next.tv_sec += c->every_s;
		}
		pthread_mutex_lock(&k->mu);
	}
	pthread_mutex_unlock(&k->mu);
	return NULL;
}

struct housekeeping *housekeeping_start(struct store *s, struct metrics *m, bool etcd_gc)
{
	struct housekeeping *k = calloc(1, sizeof *k);
	if (!k)
		return NULL;
	k->store = s;
	k->metrics = m;
	k->etcd_gc = etcd_gc;
	clock_gettime(CLOCK_MONOTONIC, &k->scrub_next); /* due at its chore's first run */
	if (pthread_mutex_init(&k->mu, NULL) != 0) {
		free(k);
		return NULL;
	}
	pthread_condattr_t ca;
	bool ca_ok = pthread_condattr_init(&ca) == 0;
	if (!ca_ok || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
	    pthread_cond_init(&k->cv, &ca) != 0) {
		if (ca_ok)
			pthread_condattr_destroy(&ca);
		pthread_mutex_destroy(&k->mu);
		free(k);
		return NULL;
	}
	pthread_condattr_destroy(&ca);
	if (pthread_create(&k->thread, NULL, housekeeping_main, k) != 0) {
		pthread_cond_destroy(&k->cv);
		pthread_mutex_destroy(&k->mu);
		free(k);
		return NULL;
	}
	return k;
}

void housekeeping_every(struct housekeeping *k, void (*fn)(void *ctx), void *ctx)
{
	pthread_mutex_lock(&k->mu);
	k->extra = fn;
	k->extra_ctx = ctx;
	pthread_mutex_unlock(&k->mu);
}

void housekeeping_stop(struct housekeeping *k)
{
	if (!k)
		return;
	atomic_store(&k->stopping, true);
	pthread_mutex_lock(&k->mu);
	k->stop = true;
	pthread_cond_signal(&k->cv);
	pthread_mutex_unlock(&k->mu);
	pthread_join(k->thread, NULL);
	pthread_cond_destroy(&k->cv);
	pthread_mutex_destroy(&k->mu);
	free(k);
}
