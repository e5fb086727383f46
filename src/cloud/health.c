/*
 * health.c - probing the cloud's API servers, see health.h.
 *
 * One thread probes all backends concurrently with one curl multi handle.
 * State lives in struct backend (healthy is atomic, read by every request;
 * the counters are touched only under h->lock).
 */
#include "cloud/health.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/buf.h"
#include "util/log.h"

struct health {
	struct upstream *u;
	struct metrics *m;
	int interval_s, timeout_s, failed_retry, healthy_threshold;

	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop, started, first_done;
	pthread_cond_t first;
	bool *fast; /* per backend: a request failed, probe now */
	pthread_t thread;
	atomic_ulong generation;
};

struct health *health_new(struct upstream *u, const struct config *cfg, struct metrics *m)
{
	struct health *h = calloc(1, sizeof *h);
	if (!h)
		return NULL;
	h->fast = calloc(u->n ? u->n : 1, sizeof *h->fast);
	if (!h->fast) {
		free(h);
		return NULL;
	}
	h->u = u;
	h->m = m;
	h->interval_s = cfg->heartbeat_interval_seconds;
	h->timeout_s = cfg->heartbeat_timeout_seconds;
	h->failed_retry = cfg->heartbeat_failed_retry;
	h->healthy_threshold = cfg->heartbeat_healthy_threshold;
	pthread_mutex_init(&h->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->wake, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&h->first, NULL);
	return h;
}

unsigned long health_generation(struct health *h)
{
	return atomic_load(&h->generation);
}

static size_t discard(char *p, size_t sz, size_t n, void *ctx)
{
	(void)p;
	(void)ctx;
	return sz * n;
}

/* One probe attempt of backend b, added to multi. */
static CURL *probe_handle(struct health *h, struct backend *b, struct curl_slist **hdrs)
{
	CURL *e = upstream_easy(h->u, b, true);
	if (!e)
		return NULL;
	struct buf url = BUF_INIT;
	if (buf_printf(&url, "%s/healthz", b->url) < 0) {
		curl_easy_cleanup(e);
		return NULL;
	}
	curl_easy_setopt(e, CURLOPT_URL, url.data);
	buf_free(&url);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)h->timeout_s * 1000L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)h->timeout_s * 1000L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "yurthub/health");
	/* A probe must not ride a connection that a dead link left half-open. */
	curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
	curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
	char *auth = upstream_auth_header(h->u);
	if (auth) {
		*hdrs = curl_slist_append(*hdrs, auth);
		free(auth);
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, *hdrs);
	}
	curl_easy_setopt(e, CURLOPT_PRIVATE, b);
	return e;
}

/* A change of state is logged at -v 0, and so is the first probe's verdict
 * (a backend starts unhealthy: one that cannot be reached at start would
 * otherwise never be mentioned). */
static void set_healthy(struct health *h, struct backend *b, int healthy, bool initial,
			const char *why)
{
	if (atomic_load(&b->healthy) != healthy) {
		atomic_store(&b->healthy, healthy);
		atomic_fetch_add(&h->generation, 1);
		metrics_upstream_health(h->m, b->url, healthy);
	} else if (!initial) {
		return;
	}
	if (healthy)
		log_msg('I', 0, "upstream %s is healthy (%s)", b->url, why);
	else
		log_warn("upstream %s is unhealthy (%s)", b->url, why);
}

/* Apply one probe result; called with h->lock held. */
static void record(struct health *h, struct backend *b, bool ok, bool initial, long code,
		   CURLcode cc)
{
	if (ok) {
		b->failures = 0;
		b->successes++;
		if (initial || b->successes >= h->healthy_threshold)
			set_healthy(h, b, 1, initial, initial ? "first probe" : "probes succeed");
		return;
	}
	b->successes = 0;
	b->failures++;
	metrics_upstream_failure(h->m, b->url);
	if (initial || b->failures >= h->failed_retry) {
		char why[160];
		const char *first = initial ? "first probe: " : "";
		if (cc != CURLE_OK)
			snprintf(why, sizeof why, "%s%s", first, curl_easy_strerror(cc));
		else
			snprintf(why, sizeof why, "%sHTTP %ld", first, code);
		set_healthy(h, b, 0, initial, why);
	}
}

/* Run `count[i]` parallel attempts against backend i; record results. */
static void probe_round(struct health *h, const int *count, bool initial)
{
	CURLM *multi = curl_multi_init();
	if (!multi)
		return;
	size_t total = 0;
	for (size_t i = 0; i < h->u->n; i++)
		total += (size_t)count[i];
	struct curl_slist **hdrs = calloc(total ? total : 1, sizeof *hdrs);
	CURL **handles = calloc(total ? total : 1, sizeof *handles);
	size_t k = 0;
	for (size_t i = 0; hdrs && handles && i < h->u->n; i++) {
		for (int j = 0; j < count[i]; j++) {
			CURL *e = probe_handle(h, &h->u->backends[i], &hdrs[k]);
			if (e && curl_multi_add_handle(multi, e) == CURLM_OK)
				handles[k++] = e;
			else if (e)
				curl_easy_cleanup(e);
		}
	}
	int running = 1;
	while (running) {
		if (curl_multi_perform(multi, &running) != CURLM_OK)
			break;
		if (running)
			curl_multi_poll(multi, NULL, 0, 200, NULL);
	}
	CURLMsg *msg;
	int left;
	pthread_mutex_lock(&h->lock);
	while ((msg = curl_multi_info_read(multi, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		struct backend *b = NULL;
		long code = 0;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&b);
		curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
		bool ok = msg->data.result == CURLE_OK && code > 0 && code < 500;
		if (b)
			record(h, b, ok, initial, code, msg->data.result);
	}
	pthread_mutex_unlock(&h->lock);
	for (size_t i = 0; i < k; i++) {
		curl_multi_remove_handle(multi, handles[i]);
		curl_easy_cleanup(handles[i]);
	}
	for (size_t i = 0; hdrs && i < total; i++)
		curl_slist_free_all(hdrs[i]);
	free(hdrs);
	free(handles);
	curl_multi_cleanup(multi);
}

static void deadline_in(struct timespec *ts, int seconds)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += seconds;
}

static void *health_main(void *arg)
{
	struct health *h = arg;
	int *count = calloc(h->u->n ? h->u->n : 1, sizeof *count);
	for (size_t i = 0; count && i < h->u->n; i++)
		count[i] = 1;
	if (count)
		probe_round(h, count, true);
	pthread_mutex_lock(&h->lock);
	h->first_done = true;
	pthread_cond_broadcast(&h->first);
	pthread_mutex_unlock(&h->lock);
	struct timespec next;
	deadline_in(&next, h->interval_s);
	pthread_mutex_lock(&h->lock);
	while (!h->stop && count) {
		bool any_fast = false;
		for (size_t i = 0; i < h->u->n; i++)
			any_fast |= h->fast[i];
		if (!any_fast) {
			int rc = pthread_cond_timedwait(&h->wake, &h->lock, &next);
			if (h->stop)
				break;
			if (rc != ETIMEDOUT)
				continue; /* woken for a fast round: loop to see which */
			for (size_t i = 0; i < h->u->n; i++)
				count[i] = 1;
			deadline_in(&next, h->interval_s);
		} else {
			/* The remaining attempts of each suspected backend, at once. */
			for (size_t i = 0; i < h->u->n; i++) {
				struct backend *b = &h->u->backends[i];
				int left = h->failed_retry - b->failures;
				count[i] = h->fast[i] && atomic_load(&b->healthy)
					       ? (left > 0 ? left : 1)
					       : 0;
				h->fast[i] = false;
			}
		}
		pthread_mutex_unlock(&h->lock);
		probe_round(h, count, false);
		pthread_mutex_lock(&h->lock);
	}
	pthread_mutex_unlock(&h->lock);
	free(count);
	return NULL;
}

int health_start(struct health *h)
{
	for (size_t i = 0; i < h->u->n; i++)
		metrics_upstream_health(h->m, h->u->backends[i].url, 0);
	if (pthread_create(&h->thread, NULL, health_main, h) != 0)
		return -1;
	h->started = true;
	return 0;
}

void health_wait_first(struct health *h)
{
	pthread_mutex_lock(&h->lock);
	while (!h->first_done && h->started)
		pthread_cond_wait(&h->first, &h->lock);
	pthread_mutex_unlock(&h->lock);
}

void health_report_failure(struct health *h, struct backend *b)
{
	pthread_mutex_lock(&h->lock);
	if (atomic_load(&b->healthy)) {
		record(h, b, false, false, 0, CURLE_COULDNT_CONNECT);
		h->fast[b->index] = true;
		pthread_cond_signal(&h->wake);
	}
	pthread_mutex_unlock(&h->lock);
}

void health_stop(struct health *h)
{
	if (!h || !h->started)
		return;
	pthread_mutex_lock(&h->lock);
	h->stop = true;
	pthread_cond_signal(&h->wake);
	pthread_mutex_unlock(&h->lock);
	pthread_join(h->thread, NULL);
	h->started = false;
}

void health_free(struct health *h)
{
	if (!h)
		return;
	health_stop(h);
	pthread_mutex_destroy(&h->lock);
	pthread_cond_destroy(&h->wake);
	pthread_cond_destroy(&h->first);
	free(h->fast);
	free(h);
}
