/*
 * health.c - probing the cloud's API servers, see health.h.
 *
 * One thread probes all backends concurrently with one curl multi handle.
 * State lives in struct backend (healthy is atomic, read by every request;
 * the counters are touched only under h->lock).
 *
 * A dead link is called within one probe timeout of the first sign of it,
 * not after --heartbeat-failed-retry rounds: a probe still unanswered after
 * a quarter of its timeout is joined at once by the remaining attempts, in
 * parallel, and a proxied request without an answer for as long (or one
 * that fails) starts the same attempts (health_suspect).  On a link that
 * drops packets, they all time out together: with the defaults (2 s,
 * three attempts) the backend is unhealthy 2.5 s after the first
 * unanswered probe or request, and its waiting requests are answered from
 * the cache.  A slow but live server answers one of them and stays healthy.
 */
#include "cloud/health.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"

/* How long a hub bootstrapping from nothing holds its first verdict (and
 * with it the first requests, health_wait_first) for the CA and the
 * certificate it is getting: with neither, no probe could be verified and
 * the cache, empty, could only answer 404. */
#define FIRST_IDENTITY_WAIT_S 10

struct health {
	struct upstream *u;
	struct metrics *m;
	int interval_s, timeout_s, failed_retry, healthy_threshold;
	long suspect_ms; /* a quarter of the probe timeout, at least 100 ms */

	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool probe_now;	     /* a regular round at once: the hub's identity changed */
	bool await_identity; /* the first probe waits for it (health_await_identity) */
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
	h->suspect_ms = (long)h->timeout_s * 250L;
	if (h->suspect_ms < 100)
		h->suspect_ms = 100;
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

long health_suspect_ms(const struct health *h)
{
	return h->suspect_ms;
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

/* The probes of one round: the handles in flight, per backend how many are
 * unanswered, and whether the round has been joined by the rest of the
 * attempts yet. */
struct round {
	CURLM *multi;
	CURL **handles;
	struct curl_slist **hdrs;
	size_t n, cap;
	int *unanswered;
	bool hedged;
	unsigned ca_generation; /* the trust the handles were set up with */
};

static void round_add(struct health *h, struct round *r, size_t i, int count)
{
	for (int j = 0; j < count && r->n < r->cap; j++) {
		r->hdrs[r->n] = NULL;
		CURL *e = probe_handle(h, &h->u->backends[i], &r->hdrs[r->n]);
		if (e && curl_multi_add_handle(r->multi, e) == CURLM_OK) {
			r->handles[r->n++] = e;
			r->unanswered[i]++;
		} else if (e) {
			curl_easy_cleanup(e);
			curl_slist_free_all(r->hdrs[r->n]);
		}
	}
}

/* Whether the CA changed since the round's handles were set up: what they
 * say (a TLS failure against the CA found since) is no verdict. */
static bool round_stale(struct health *h, const struct round *r)
{
	return upstream_ca_generation(h->u) != r->ca_generation;
}

/* Record what finished so far; called with h->lock held. */
static void round_collect(struct health *h, struct round *r, bool initial)
{
	CURLMsg *msg;
	int left;
	bool stale = round_stale(h, r);
	while ((msg = curl_multi_info_read(r->multi, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		struct backend *b = NULL;
		long code = 0;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&b);
		curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
		bool ok = msg->data.result == CURLE_OK && code > 0 && code < 500;
		if (b) {
			r->unanswered[b->index]--;
			if (!stale)
				record(h, b, ok, initial, code, msg->data.result);
		}
	}
}

/* A lone probe still unanswered after suspect_ms is joined by the other
 * attempts a verdict needs, so that they all time out together. */
static void round_hedge(struct health *h, struct round *r, const int *count)
{
	r->hedged = true;
	for (size_t i = 0; i < h->u->n; i++) {
		struct backend *b = &h->u->backends[i];
		pthread_mutex_lock(&h->lock);
		int more = h->failed_retry - b->failures - 1;
		bool lone = count[i] == 1 && r->unanswered[i] == 1 && atomic_load(&b->healthy);
		pthread_mutex_unlock(&h->lock);
		if (lone && more > 0) {
			log_v(2, "health: %s has not answered in %ld ms: %d more probes", b->url,
			      h->suspect_ms, more);
			round_add(h, r, i, more);
		}
	}
}

/* Run `count[i]` parallel attempts against backend i; record results as
 * they come.  False when the CA changed meanwhile: the results that came
 * after the change were dropped (see round_stale). */
static bool probe_round(struct health *h, const int *count, bool initial)
{
	struct round r = {0};
	r.ca_generation = upstream_ca_generation(h->u); /* before any handle is set up */
	for (size_t i = 0; i < h->u->n; i++)
		r.cap += (size_t)(count[i] > h->failed_retry ? count[i] : h->failed_retry);
	r.multi = curl_multi_init();
	r.hdrs = calloc(r.cap ? r.cap : 1, sizeof *r.hdrs);
	r.handles = calloc(r.cap ? r.cap : 1, sizeof *r.handles);
	r.unanswered = calloc(h->u->n ? h->u->n : 1, sizeof *r.unanswered);
	r.hedged = initial; /* the first verdict is one probe's */
	for (size_t i = 0; r.multi && r.hdrs && r.handles && r.unanswered && i < h->u->n; i++)
		round_add(h, &r, i, count[i]);
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int running = r.n > 0;
	while (running) {
		if (curl_multi_perform(r.multi, &running) != CURLM_OK)
			break;
		pthread_mutex_lock(&h->lock);
		round_collect(h, &r, initial);
		pthread_mutex_unlock(&h->lock);
		if (!r.hedged && clock_ms_since(&t0) >= h->suspect_ms) {
			round_hedge(h, &r, count);
			running = 1; /* the new ones too */
			continue;
		}
		if (running)
			curl_multi_poll(r.multi, NULL, 0, r.hedged ? 200 : 50, NULL);
	}
	for (size_t i = 0; i < r.n; i++) {
		curl_multi_remove_handle(r.multi, r.handles[i]);
		curl_easy_cleanup(r.handles[i]);
		curl_slist_free_all(r.hdrs[i]);
	}
	free(r.hdrs);
	free(r.handles);
	free(r.unanswered);
	if (r.multi)
		curl_multi_cleanup(r.multi);
	return !round_stale(h, &r);
}

static void deadline_in(struct timespec *ts, int seconds)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += seconds;
}

static bool stopping(struct health *h)
{
	pthread_mutex_lock(&h->lock);
	bool stop = h->stop;
	pthread_mutex_unlock(&h->lock);
	return stop;
}

static void first_done(struct health *h)
{
	pthread_mutex_lock(&h->lock);
	h->first_done = true;
	pthread_cond_broadcast(&h->first);
	pthread_mutex_unlock(&h->lock);
}

/* A token bootstrap from nothing: the first probe waits for the CA that
 * discovery finds and the certificate of the CSR (each wakes the thread,
 * health_probe_now), rather than fail TLS with no CA to check the server
 * against.  The requests waiting for the first verdict are let go after
 * FIRST_IDENTITY_WAIT_S, answered from the cache; the probe still waits
 * (an identity that does not come in time leaves the cloud unreachable
 * anyway: upstream_identity_pending). */
static void wait_first_identity(struct health *h)
{
	pthread_mutex_lock(&h->lock);
	if (!h->await_identity) {
		pthread_mutex_unlock(&h->lock);
		return;
	}
	log_v(1, "health: the first probe waits for the hub's CA and client certificate");
	struct timespec until;
	deadline_in(&until, FIRST_IDENTITY_WAIT_S);
	while (!h->stop && upstream_identity_pending(h->u)) {
		if (h->first_done) {
			pthread_cond_wait(&h->wake, &h->lock);
		} else if (pthread_cond_timedwait(&h->wake, &h->lock, &until) == ETIMEDOUT &&
			   upstream_identity_pending(h->u)) {
			h->first_done = true;
			pthread_cond_broadcast(&h->first);
			log_msg('I', 0,
				"upstream: no client certificate after %d s: requests are answered "
				"from the cache until the hub has one",
				FIRST_IDENTITY_WAIT_S);
		}
	}
	h->probe_now = false; /* the first round is the fresh one it asks for */
	pthread_mutex_unlock(&h->lock);
}

static void *health_main(void *arg)
{
	struct health *h = arg;
	wait_first_identity(h);
	int *count = calloc(h->u->n ? h->u->n : 1, sizeof *count);
	for (size_t i = 0; count && i < h->u->n; i++)
		count[i] = 1;
	/* again when the CA changed during the round: the first verdict is
	 * one made with the CA the hub has */
	while (count && !stopping(h) && !probe_round(h, count, true))
		;
	first_done(h);
	struct timespec next;
	deadline_in(&next, h->interval_s);
	pthread_mutex_lock(&h->lock);
	while (!h->stop && count) {
		bool any_fast = false, fresh = false;
		for (size_t i = 0; i < h->u->n; i++)
			any_fast |= h->fast[i];
		if (!any_fast) {
			int rc = 0;
			if (!h->probe_now)
				rc = pthread_cond_timedwait(&h->wake, &h->lock, &next);
			if (h->stop)
				break;
			if (rc != ETIMEDOUT && !h->probe_now)
				continue; /* woken for a fast round: loop to see which */
			/* the hub's identity changed: what the probes said with
			 * the old one is no verdict; the next probe's is, as at start */
			fresh = h->probe_now;
			h->probe_now = false;
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
		probe_round(h, count, fresh);
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

void health_await_identity(struct health *h)
{
	pthread_mutex_lock(&h->lock);
	h->await_identity = true;
	pthread_mutex_unlock(&h->lock);
}

void health_wait_first(struct health *h)
{
	pthread_mutex_lock(&h->lock);
	while (!h->first_done && h->started)
		pthread_cond_wait(&h->first, &h->lock);
	pthread_mutex_unlock(&h->lock);
}

void health_suspect(struct health *h, struct backend *b)
{
	pthread_mutex_lock(&h->lock);
	if (atomic_load(&b->healthy) && !h->fast[b->index]) {
		h->fast[b->index] = true;
		pthread_cond_signal(&h->wake);
	}
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

void health_probe_now(struct health *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->lock);
	h->probe_now = true;
	pthread_cond_signal(&h->wake);
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
