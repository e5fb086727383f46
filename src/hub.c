/*
 * hub.c - starting and stopping the parts of the hub, see hub.h.
 *
 * Order of start: the store (recovery) first, so that /v1/readyz is true as
 * soon as the server listens - a node that boots offline is served at once;
 * then the cloud side (identity, health), the cache workers, the server.
 * Signals: SIGTERM and SIGINT are blocked in every thread and taken by the
 * main thread with sigwait(), so that no handler runs inside library code.
 */
#include "hub.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/outbox.h"
#include "server/server.h"
#include "storage/disk.h"
#include "storage/etcd.h"
#include "util/log.h"
#include "version.h"

#define CACHE_WORKERS 2

static const char *nonempty(const char *s)
{
	return s && *s ? s : NULL;
}

static struct store *open_store(const struct config *cfg)
{
	char *err = NULL;
	struct store *s;
	if (cfg->storage == STORAGE_ETCD) {
		struct etcd_store_config ec = {(const char *const *)cfg->etcd_servers.v,
					       cfg->etcd_servers.n,
					       nonempty(cfg->etcd_cafile),
					       nonempty(cfg->etcd_certfile),
					       nonempty(cfg->etcd_keyfile),
					       cfg->etcd_prefix,
					       cfg->node_name,
					       0};
		s = etcd_store_open(&ec, &err);
	} else {
		struct disk_recovery_report rep;
		s = disk_store_open(cfg->disk_cache_path, 0, &rep, &err);
	}
	if (!s) {
		log_error("%s", err ? err : "cannot open the cache");
		free(err);
	}
	return s;
}

static void join_list(struct buf *b, const struct strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		buf_printf(b, "%s%s", i ? "," : "", l->v[i]);
}

/* One line that says what this hub is and where it listens and stores
 * (never a credential: file names at most).  The ports as server_start()
 * opens them: 0 (or the secure port without its files) is "off". */
static void log_startup(const struct config *cfg)
{
	struct buf ups = BUF_INIT, storage = BUF_INIT, proxy = BUF_INIT, secure = BUF_INIT;
	join_list(&ups, &cfg->server_addr);
	if (cfg->storage == STORAGE_ETCD) {
		buf_printf(&storage, "etcd, etcd servers ");
		join_list(&storage, &cfg->etcd_servers);
		buf_printf(&storage, ", etcd prefix %s, local state in %s", cfg->etcd_prefix,
			   cfg->disk_cache_path);
	} else {
		buf_printf(&storage, "disk, cache path %s", cfg->disk_cache_path);
	}
	if (cfg->proxy_port)
		buf_printf(&proxy, "%s:%d", cfg->bind_proxy_address, cfg->proxy_port);
	else
		buf_append_str(&proxy, "off");
	if (cfg->proxy_secure_port && *cfg->tls_cert_file && *cfg->client_ca_file)
		buf_printf(&secure, "%s:%d", cfg->bind_proxy_address, cfg->proxy_secure_port);
	else
		buf_append_str(&secure, "off");
	log_msg('I', 0,
		"yurthub %s starting: node %s, storage %s, upstreams %s (lb %s), proxy %s, "
		"secure proxy %s, serve %s:%d, log -v %d %s",
		YURTHUB_VERSION, cfg->node_name, buf_cstr(&storage), buf_cstr(&ups),
		cfg->lb_mode_name, buf_cstr(&proxy), buf_cstr(&secure), cfg->bind_address,
		cfg->serve_port, cfg->verbosity, cfg->log_format);
	for (size_t i = 0; i < cfg->ignored.n; i++)
		log_info("flag --%s is accepted for compatibility with YurtHub and has no effect",
			 cfg->ignored.v[i]);
	buf_free(&ups);
	buf_free(&storage);
	buf_free(&proxy);
	buf_free(&secure);
}

/* ---- housekeeping: a thread that wakes now and then ---- */

/* The object count behind yurthub_cached_objects: soon after start (so a
 * scrape sees it within seconds), then once a minute. */
#define COUNT_FIRST_S	 1
#define COUNT_INTERVAL_S 60
/* The etcd store's tombstones and stray holdings; also the age at which
 * tombstones go. */
#define ETCD_GC_INTERVAL_S 600

struct housekeeping {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* on CLOCK_MONOTONIC: a clock step neither fires nor starves it */
	bool stop;
	struct store *store;
	struct metrics *metrics;
	bool etcd_gc;
};

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

static bool reached(const struct timespec *now, const struct timespec *t)
{
	return now->tv_sec > t->tv_sec || (now->tv_sec == t->tv_sec && now->tv_nsec >= t->tv_nsec);
}

static void *housekeeping_main(void *arg)
{
	struct housekeeping *k = arg;
	struct timespec now, next_count, next_gc;
	clock_gettime(CLOCK_MONOTONIC, &now);
	next_count = next_gc = now;
	next_count.tv_sec += COUNT_FIRST_S;
	next_gc.tv_sec += ETCD_GC_INTERVAL_S;
	pthread_mutex_lock(&k->mu);
	while (!k->stop) {
		/* Each task has its own absolute deadline, so a wakeup for one
		 * (or a spurious one) does not push the other back. */
		const struct timespec *until =
		    k->etcd_gc && !reached(&next_gc, &next_count) ? &next_gc : &next_count;
		int rc = pthread_cond_timedwait(&k->cv, &k->mu, until);
		if (k->stop)
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (rc != ETIMEDOUT && !reached(&now, until))
			continue;
		/* The store calls run unlocked: stop() only waits for the one in
		 * progress (bounded by the store's own timeouts). */
		pthread_mutex_unlock(&k->mu);
		if (reached(&now, &next_count)) {
			count_objects(k);
			next_count = now;
			next_count.tv_sec += COUNT_INTERVAL_S;
		}
		if (k->etcd_gc && reached(&now, &next_gc)) {
			etcd_gc(k);
			next_gc = now;
			next_gc.tv_sec += ETCD_GC_INTERVAL_S;
		}
		pthread_mutex_lock(&k->mu);
	}
	pthread_mutex_unlock(&k->mu);
	return NULL;
}

static struct housekeeping *housekeeping_start(struct store *s, struct metrics *m, bool etcd_gc)
{
	struct housekeeping *k = calloc(1, sizeof *k);
	if (!k)
		return NULL;
	k->store = s;
	k->metrics = m;
	k->etcd_gc = etcd_gc;
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

static void housekeeping_stop(struct housekeeping *k)
{
	if (!k)
		return;
	pthread_mutex_lock(&k->mu);
	k->stop = true;
	pthread_cond_signal(&k->cv);
	pthread_mutex_unlock(&k->mu);
	pthread_join(k->thread, NULL);
	pthread_cond_destroy(&k->cv);
	pthread_mutex_destroy(&k->mu);
	free(k);
}

static int start(struct hub *h)
{
	char *err = NULL;
	if (!(h->store = open_store(h->cfg)))
		return -1;
	if (!(h->housekeeping =
		  housekeeping_start(h->store, &h->metrics, h->cfg->storage == STORAGE_ETCD)))
		return -1;
	atomic_store(&h->ready, true);
	if (upstream_init(&h->upstream, h->cfg, &err) < 0) {
		log_error("%s", err ? err : "cannot set up the upstream");
		free(err);
		return -1;
	}
	if (cache_agents_init(&h->agents, h->cfg) < 0 ||
	    !(h->health = health_new(&h->upstream, h->cfg, &h->metrics)) ||
	    !(h->cache = cache_manager_new(h->store, &h->metrics, CACHE_WORKERS)))
		return -1;
	struct buf dir = BUF_INIT;
	if (buf_printf(&dir, "%s/_internal/yurthub-c/outbox", h->cfg->disk_cache_path) < 0)
		return -1;
	h->outbox = outbox_open(dir.data, &h->upstream, &h->metrics, OUTBOX_MAX_DEFAULT);
	buf_free(&dir);
	if (!h->outbox || outbox_start(h->outbox) < 0)
		return -1;
	if (health_start(h->health) < 0)
		return -1;
	return server_start(h, &h->server);
}

static void stop(struct hub *h)
{
	atomic_store(&h->stopping, true);
	server_stop(h->server); /* joins every connection thread */
	outbox_close(h->outbox);
	health_free(h->health);
	cache_manager_free(h->cache); /* finishes what was queued */
	housekeeping_stop(h->housekeeping);
	store_close(h->store);
	upstream_free(&h->upstream);
	cache_agents_free(&h->agents);
	metrics_free(&h->metrics);
}

int hub_run(const struct config *cfg)
{
	struct hub h;
	memset(&h, 0, sizeof h);
	h.cfg = cfg;
	/* One malloc arena per thread would keep each connection's freed
	 * memory apart: a few shared arenas keep the footprint small. */
	mallopt(M_ARENA_MAX, 2);
	log_set_verbosity(cfg->verbosity);
	log_set_format(strcmp(cfg->log_format, "json") ? LOG_TEXT : LOG_JSON);
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (curl_global_init(CURL_GLOBAL_ALL) != CURLE_OK || metrics_init(&h.metrics) < 0) {
		log_error("cannot initialise libcurl");
		return 1;
	}
	log_startup(cfg);
	int status = 0;
	if (start(&h) < 0) {
		status = 1;
	} else {
		log_msg('I', 0, "yurthub ready");
		int sig = 0;
		sigwait(&sigs, &sig);
		log_msg('I', 0, "yurthub stopping (signal %d)", sig);
	}
	stop(&h);
	curl_global_cleanup();
	return status;
}
