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

static void log_startup(const struct config *cfg)
{
	struct buf ups = BUF_INIT;
	for (size_t i = 0; i < cfg->server_addr.n; i++)
		buf_printf(&ups, "%s%s", i ? "," : "", cfg->server_addr.v[i]);
	log_msg('I', 0,
		"yurthub %s starting: node %s, storage %s (%s), upstreams %s (lb %s), proxy "
		"%s:%d, secure proxy %s:%d, hub endpoints %s:%d",
		YURTHUB_VERSION, cfg->node_name, cfg->storage_name,
		cfg->storage == STORAGE_DISK ? cfg->disk_cache_path : cfg->etcd_prefix,
		buf_cstr(&ups), cfg->lb_mode_name, cfg->bind_proxy_address, cfg->proxy_port,
		cfg->bind_proxy_address, cfg->proxy_secure_port, cfg->bind_address,
		cfg->serve_port);
	for (size_t i = 0; i < cfg->ignored.n; i++)
		log_info("flag --%s is accepted for compatibility with YurtHub and has no effect",
			 cfg->ignored.v[i]);
	buf_free(&ups);
}

/* ---- housekeeping of the etcd store: a thread that wakes now and then ---- */

#define HOUSEKEEPING_INTERVAL_S 600 /* also the age at which tombstones go */

struct housekeeping {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	struct store *store;
};

static void *housekeeping_main(void *arg)
{
	struct housekeeping *k = arg;
	pthread_mutex_lock(&k->mu);
	while (!k->stop) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += HOUSEKEEPING_INTERVAL_S;
		if (pthread_cond_timedwait(&k->cv, &k->mu, &until) != ETIMEDOUT || k->stop)
			continue;
		pthread_mutex_unlock(&k->mu);
		long n = etcd_store_gc(k->store, HOUSEKEEPING_INTERVAL_S);
		if (n < 0)
			log_warn("etcd store housekeeping failed; tried again in %d s",
				 HOUSEKEEPING_INTERVAL_S);
		else if (n > 0)
			log_info("etcd store housekeeping: %ld stale records removed", n);
		pthread_mutex_lock(&k->mu);
	}
	pthread_mutex_unlock(&k->mu);
	return NULL;
}

static struct housekeeping *housekeeping_start(struct store *s)
{
	struct housekeeping *k = calloc(1, sizeof *k);
	if (!k)
		return NULL;
	k->store = s;
	if (pthread_mutex_init(&k->mu, NULL) != 0) {
		free(k);
		return NULL;
	}
	if (pthread_cond_init(&k->cv, NULL) != 0 ||
	    pthread_create(&k->thread, NULL, housekeeping_main, k) != 0) {
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
	if (h->cfg->storage == STORAGE_ETCD && !(h->housekeeping = housekeeping_start(h->store)))
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
