/*
 * metrics.c - counters and their Prometheus rendering, see metrics.h.
 *
 * Names follow Prometheus conventions: a yurthub_ prefix, _total for
 * counters (and only for them), _seconds for durations, _bytes for sizes,
 * base units; every family has HELP and TYPE, even with no sample yet; label
 * values are escaped and valid UTF-8.  The process_* families are the ones
 * every Prometheus client library exports under these names.
 */
#include "metrics/metrics.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "filter/filter.h"
#include "informer/informer.h"
#include "storage/store.h"
#include "version.h"

static const double bucket_bounds[METRICS_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
						      0.1,   0.25,   0.5,   1,	  2.5,	 10};

struct request_row {
	char *component, *verb;
	int code;
	uint64_t count;
};

struct upstream_row {
	char *server;
	int healthy;
	uint64_t failures;
};

struct metrics_private {
	pthread_mutex_t lock;
	struct request_row *req;
	size_t nreq, capreq;
	struct upstream_row *up;
	size_t nup, capup;
};

int metrics_init(struct metrics *m)
{
	memset(m, 0, sizeof *m);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	m->start_time = (double)now.tv_sec + (double)now.tv_nsec / 1e9;
	atomic_store(&m->cached_objects, -1);
	atomic_store(&m->autonomy_ready, -1);
	atomic_store(&m->store_nospace, -1);
	atomic_store(&m->store_nospace_refused, -1);
	m->priv = calloc(1, sizeof *m->priv);
	if (!m->priv)
		return -1;
	pthread_mutex_init(&m->priv->lock, NULL);
	return 0;
}

void metrics_free(struct metrics *m)
{
	struct metrics_private *p = m->priv;
	if (!p)
		return;
	for (size_t i = 0; i < p->nreq; i++) {
		free(p->req[i].component);
		free(p->req[i].verb);
	}
	for (size_t i = 0; i < p->nup; i++)
		free(p->up[i].server);
	free(p->req);
	free(p->up);
	pthread_mutex_destroy(&p->lock);
	free(p);
	m->priv = NULL;
}

/* Rows are few (components x verbs x codes): a linear search is fine, and
 * the table is bounded so that a client inventing User-Agents cannot grow
 * it without limit. */
#define REQUEST_ROWS_MAX 512
/* A component label is a User-Agent's first word: a long one is cut. */
#define COMPONENT_LABEL_MAX 64

static struct request_row *request_row_find(struct metrics_private *p, const char *component,
					    const char *verb, int code)
{
	for (size_t i = 0; i < p->nreq; i++) {
		struct request_row *r = &p->req[i];
		if (r->code == code && !strcmp(r->verb, verb) && !strcmp(r->component, component))
			return r;
	}
	return NULL;
}

void metrics_request(struct metrics *m, const char *component, const char *verb, int code)
{
	struct metrics_private *p = m->priv;
	char cut[COMPONENT_LABEL_MAX + 1];
	if (!component || !*component)
		component = "unknown";
	if (strlen(component) > COMPONENT_LABEL_MAX) {
		memcpy(cut, component, COMPONENT_LABEL_MAX);
		cut[COMPONENT_LABEL_MAX] = '\0';
		component = cut;
	}
	if (!verb || !*verb)
		verb = "unknown";
	pthread_mutex_lock(&p->lock);
	struct request_row *found = request_row_find(p, component, verb, code);
	/* Past the bound, new components are counted together as "other" -
	 * in one row per (verb, code), never in a duplicate series. */
	if (!found && p->nreq >= REQUEST_ROWS_MAX) {
		component = "other";
		found = request_row_find(p, component, verb, code);
	}
	if (found) {
		found->count++;
		pthread_mutex_unlock(&p->lock);
		return;
	}
	if (p->nreq == p->capreq && p->nreq < REQUEST_ROWS_MAX + 64) {
		size_t cap = p->capreq ? p->capreq * 2 : 32;
		struct request_row *v = realloc(p->req, cap * sizeof *v);
		if (v) {
			p->req = v;
			p->capreq = cap;
		}
	}
	if (p->nreq < p->capreq) {
		struct request_row *r = &p->req[p->nreq];
		r->component = strdup(component);
		r->verb = strdup(verb);
		r->code = code;
		r->count = 1;
		if (r->component && r->verb)
			p->nreq++;
		else {
			free(r->component);
			free(r->verb);
		}
	}
	pthread_mutex_unlock(&p->lock);
}

static struct upstream_row *upstream_row(struct metrics_private *p, const char *server)
{
	for (size_t i = 0; i < p->nup; i++)
		if (!strcmp(p->up[i].server, server))
			return &p->up[i];
	if (p->nup == p->capup) {
		size_t cap = p->capup ? p->capup * 2 : 4;
		struct upstream_row *v = realloc(p->up, cap * sizeof *v);
		if (!v)
			return NULL;
		p->up = v;
		p->capup = cap;
	}
	struct upstream_row *r = &p->up[p->nup];
	memset(r, 0, sizeof *r);
	if (!(r->server = strdup(server)))
		return NULL;
	p->nup++;
	return r;
}

void metrics_upstream_health(struct metrics *m, const char *server, int healthy)
{
	pthread_mutex_lock(&m->priv->lock);
	struct upstream_row *r = upstream_row(m->priv, server);
	if (r)
		r->healthy = healthy;
	pthread_mutex_unlock(&m->priv->lock);
}

void metrics_upstream_failure(struct metrics *m, const char *server)
{
	pthread_mutex_lock(&m->priv->lock);
	struct upstream_row *r = upstream_row(m->priv, server);
	if (r)
		r->failures++;
	pthread_mutex_unlock(&m->priv->lock);
}

void metrics_observe(struct histogram *h, double seconds)
{
	size_t i = 0;
	while (i < METRICS_BUCKETS && seconds > bucket_bounds[i])
		i++;
	atomic_fetch_add(&h->buckets[i], 1);
	atomic_fetch_add(&h->count, 1);
	atomic_fetch_add(&h->sum_us, (uint64_t)(seconds * 1e6));
}

static int render_histogram(struct buf *o, const char *name, const char *help, struct histogram *h)
{
	int rc = buf_printf(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	uint64_t cum = 0;
	for (size_t i = 0; rc == 0 && i < METRICS_BUCKETS; i++) {
		cum += atomic_load(&h->buckets[i]);
		rc = buf_printf(o, "%s_bucket{le=\"%g\"} %llu\n", name, bucket_bounds[i],
				(unsigned long long)cum);
	}
	cum += atomic_load(&h->buckets[METRICS_BUCKETS]);
	/* _count is the +Inf bucket, read once: the two agree even while
	 * observations land during the rendering. */
	if (rc == 0)
		rc =
		    buf_printf(o, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
			       (unsigned long long)cum, name, (double)atomic_load(&h->sum_us) / 1e6,
			       name, (unsigned long long)cum);
	return rc;
}

static int render_simple(struct buf *o, const char *name, const char *type, const char *help,
			 long long value)
{
	return buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n%s %lld\n", name, help, name, type, name,
			  value);
}

static int render_double(struct buf *o, const char *name, const char *type, const char *help,
			 double value)
{
	return buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n%s %.15g\n", name, help, name, type, name,
			  value);
}

/* Label values are ours, URLs or User-Agent products (anything a client
 * sends): escape \\, " and newline as the text format wants, and replace
 * what is not UTF-8. */
static int label_value(struct buf *o, const char *v)
{
	struct buf u = BUF_INIT;
	int rc = buf_append_utf8(&u, v, strlen(v));
	for (size_t i = 0; rc == 0 && i < u.len; i++) {
		char c = u.data[i];
		if (c == '\\' || c == '"')
			rc = buf_append_char(o, '\\');
		if (rc == 0)
			rc = c == '\n' ? buf_append_str(o, "\\n") : buf_append_char(o, c);
	}
	buf_free(&u);
	return rc;
}

/* --max-requests-in-flight and the request-body budget (http/limits.h). */
static int render_limits(struct buf *o, struct metrics *m)
{
	int rc = render_simple(o, "yurthub_requests_limited_in_flight", "gauge",
			       "Proxy requests counted against --max-requests-in-flight now "
			       "(watches and other long-running requests are not).",
			       atomic_load(&m->limited_in_flight));
	rc = rc ? rc
		: render_simple(o, "yurthub_requests_max_in_flight", "gauge",
				"The --max-requests-in-flight limit.", m->max_in_flight);
	rc = rc ? rc
		: buf_printf(o,
			     "# HELP yurthub_requests_rejected_total Requests answered 429 "
			     "TooManyRequests, by the limit they hit.\n"
			     "# TYPE yurthub_requests_rejected_total counter\n"
			     "yurthub_requests_rejected_total{reason=\"in_flight\"} %llu\n"
			     "yurthub_requests_rejected_total{reason=\"body_memory\"} %llu\n",
			     (unsigned long long)atomic_load(&m->rejected_in_flight),
			     (unsigned long long)atomic_load(&m->rejected_body_memory));
	return rc ? rc
		  : render_simple(o, "yurthub_request_body_bytes", "gauge",
				  "Bytes of request bodies held now, all connections together.",
				  (long long)atomic_load(&m->body_bytes));
}

static int render_requests(struct buf *o, struct metrics_private *p)
{
	int rc = buf_append_str(o, "# HELP yurthub_requests_total Requests served, by client "
				   "component, verb and status code.\n# TYPE "
				   "yurthub_requests_total counter\n");
	for (size_t i = 0; rc == 0 && i < p->nreq; i++) {
		struct request_row *r = &p->req[i];
		rc = buf_append_str(o, "yurthub_requests_total{component=\"");
		rc = rc ? rc : label_value(o, r->component);
		rc = rc ? rc : buf_append_str(o, "\",verb=\"");
		rc = rc ? rc : label_value(o, r->verb);
		rc = rc ? rc
			: buf_printf(o, "\",code=\"%d\"} %llu\n", r->code,
				     (unsigned long long)r->count);
	}
	return rc;
}

static int render_upstreams(struct buf *o, struct metrics_private *p)
{
	int rc = buf_append_str(o, "# HELP yurthub_upstream_healthy Whether the hub considers "
				   "a cloud API server healthy (1) or not (0).\n# TYPE "
				   "yurthub_upstream_healthy gauge\n");
	for (size_t i = 0; rc == 0 && i < p->nup; i++) {
		rc = buf_append_str(o, "yurthub_upstream_healthy{server=\"");
		rc = rc ? rc : label_value(o, p->up[i].server);
		rc = rc ? rc : buf_printf(o, "\"} %d\n", p->up[i].healthy);
	}
	rc = rc ? rc
		: buf_append_str(o, "# HELP yurthub_upstream_failures_total Failed health probes "
				    "of a cloud API server, and requests that could not "
				    "reach it while it was considered healthy.\n# TYPE "
				    "yurthub_upstream_failures_total counter\n");
	for (size_t i = 0; rc == 0 && i < p->nup; i++) {
		rc = buf_append_str(o, "yurthub_upstream_failures_total{server=\"");
		rc = rc ? rc : label_value(o, p->up[i].server);
		rc = rc ? rc : buf_printf(o, "\"} %llu\n", (unsigned long long)p->up[i].failures);
	}
	return rc;
}

static const char *cache_op_name[CACHE_OP_N] = {"list", "object", "watch_event", "cluster_info"};

static int render_cache(struct buf *o, struct metrics *m)
{
	int rc = buf_append_str(o, "# HELP yurthub_cache_writes_total Store operations done for "
				   "cached responses, by kind.\n# TYPE yurthub_cache_writes_total "
				   "counter\n");
	for (int i = 0; rc == 0 && i < CACHE_OP_N; i++)
		rc = buf_printf(o, "yurthub_cache_writes_total{op=\"%s\"} %llu\n", cache_op_name[i],
				(unsigned long long)atomic_load(&m->cache_writes[i]));
	rc = rc ? rc
		: buf_append_str(o,
				 "# HELP yurthub_cache_failures_total Store operations that "
				 "failed, by kind.\n# TYPE yurthub_cache_failures_total counter\n");
	for (int i = 0; rc == 0 && i < CACHE_OP_N; i++)
		rc = buf_printf(o, "yurthub_cache_failures_total{op=\"%s\"} %llu\n",
				cache_op_name[i],
				(unsigned long long)atomic_load(&m->cache_failures[i]));
	return rc;
}

static const char *offline_drop_name[OFFLINE_DROP_N] = {"queue_full", "invalid", "not_found",
							"refused", "unreadable"};

/* Every reason has a sample from the start, so that a rate() over any of
 * them works before the first drop. */
static int render_offline_dropped(struct buf *o, struct metrics *m)
{
	int rc = buf_append_str(o, "# HELP yurthub_offline_events_dropped_total Offline events "
				   "dropped instead of sent, by reason.\n# TYPE "
				   "yurthub_offline_events_dropped_total counter\n");
	for (int i = 0; rc == 0 && i < OFFLINE_DROP_N; i++)
		rc = buf_printf(o, "yurthub_offline_events_dropped_total{reason=\"%s\"} %llu\n",
				offline_drop_name[i],
				(unsigned long long)atomic_load(&m->offline_events_dropped[i]));
	return rc;
}

/* HELP and TYPE always (every family is listed), the sample only once the
 * store has been counted: a made-up 0 would read as "the cache is empty". */
static int render_cached_objects(struct buf *o, struct metrics *m)
{
	int64_t n = atomic_load(&m->cached_objects);
	int rc = buf_append_str(o, "# HELP yurthub_cached_objects Objects cached for this node's "
				   "components, counted every 60 s; an object two components "
				   "read counts twice.\n# TYPE yurthub_cached_objects gauge\n");
	if (rc == 0 && n >= 0)
		rc = buf_printf(o, "yurthub_cached_objects %lld\n", (long long)n);
	return rc;
}

/* Like the object count: the sample once the hub has judged (at each
 * scrape, and at each /v1/readyz). */
static int render_autonomy(struct buf *o, struct metrics *m)
{
	int v = atomic_load(&m->autonomy_ready);
	int rc = buf_append_str(
	    o, "# HELP yurthub_autonomy_ready 1 when this node can run without the cloud: "
	       "kubelet's pods and node, and kube-proxy's and coredns's lists, are cached and "
	       "the store takes writes; 0 otherwise (/v1/readyz?verbose says why).\n"
	       "# TYPE yurthub_autonomy_ready gauge\n");
	if (rc == 0 && v >= 0)
		rc = buf_printf(o, "yurthub_autonomy_ready %d\n", v);
	return rc;
}

/* Only for an etcd store (the disk store's full disk is an I/O failure of
 * yurthub_cache_failures_total, with its own warning). */
static int render_store_nospace(struct buf *o, struct metrics *m)
{
	int now = atomic_load(&m->store_nospace);
	int64_t refused = atomic_load(&m->store_nospace_refused);
	if (now < 0 || refused < 0)
		return 0;
	int rc =
	    render_simple(o, "yurthub_store_nospace", "gauge",
			  "1 while etcd refuses the etcd store's writes with its NOSPACE alarm "
			  "(--quota-backend-bytes reached; docs/etcd-store.md says what to do), "
			  "0 otherwise.",
			  now);
	return rc ? rc
		  : render_simple(o, "yurthub_store_nospace_refused_total", "counter",
				  "Writes of the etcd store that etcd refused with NOSPACE.",
				  refused);
}

/* The hub's version, and the standard process_* families (what the Go and
 * Python clients export): read at each scrape, a few syscalls. */
static int render_process(struct buf *o, struct metrics *m)
{
	int rc =
	    buf_append_str(o, "# HELP yurthub_build_info The hub's version; the value is 1.\n"
			      "# TYPE yurthub_build_info gauge\nyurthub_build_info{version=\"");
	rc = rc ? rc : label_value(o, YURTHUB_VERSION);
	rc = rc ? rc : buf_append_str(o, "\"} 1\n");
	rc = rc ? rc
		: render_double(o, "process_start_time_seconds", "gauge",
				"Start time of the process since unix epoch in seconds.",
				m->start_time);
	struct rusage ru;
	if (rc == 0 && getrusage(RUSAGE_SELF, &ru) == 0)
		rc = render_double(o, "process_cpu_seconds_total", "counter",
				   "Total user and system CPU time spent in seconds.",
				   (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
				       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
	unsigned long long vm_pages = 0, rss_pages = 0;
	FILE *f = fopen("/proc/self/statm", "re");
	int got = f ? fscanf(f, "%llu %llu", &vm_pages, &rss_pages) : 0;
	if (f)
		fclose(f);
	long page = sysconf(_SC_PAGESIZE);
	if (rc == 0 && got == 2 && page > 0) {
		rc = render_double(o, "process_virtual_memory_bytes", "gauge",
				   "Virtual memory size in bytes.",
				   (double)(vm_pages * (unsigned long long)page));
		rc = rc ? rc
			: render_double(o, "process_resident_memory_bytes", "gauge",
					"Resident memory size in bytes.",
					(double)(rss_pages * (unsigned long long)page));
	}
	DIR *d = opendir("/proc/self/fd");
	if (d) {
		long n = 0;
		struct dirent *e;
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				n++;
		closedir(d);
		if (rc == 0)
			rc = render_simple(o, "process_open_fds", "gauge",
					   "Number of open file descriptors.", n - 1 /* d's own */);
	}
	struct rlimit rl;
	if (rc == 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0)
		rc = render_double(
		    o, "process_max_fds", "gauge", "Maximum number of open file descriptors.",
		    rl.rlim_cur == RLIM_INFINITY ? 1.8446744073709552e19 : (double)rl.rlim_cur);
	return rc;
}

/* Objects a filter could not read and passed on as they came
 * (filter_unparsable_note): process-wide counts kept by the filter layer,
 * every filter listed so that a rate() has its series from the start. */
static int render_filter_unparsable(struct buf *o)
{
	int rc = buf_append_str(o, "# HELP yurthub_filter_unparsable_total Objects a response "
				   "filter could not read, passed to the client as the cloud "
				   "sent them.\n# TYPE yurthub_filter_unparsable_total counter\n");
	for (int id = 0; rc == 0 && id < FILTER_COUNT; id++)
		rc = buf_printf(o, "yurthub_filter_unparsable_total{filter=\"%s\"} %llu\n",
				filter_name((enum filter_id)id),
				filter_unparsable_total((enum filter_id)id)) < 0
			 ? -1
			 : 0;
	return rc;
}

int metrics_render(struct metrics *m, struct buf *o)
{
	struct metrics_private *p = m->priv;
	pthread_mutex_lock(&p->lock);
	int rc = render_requests(o, p);
	rc = rc ? rc : render_upstreams(o, p);
	pthread_mutex_unlock(&p->lock);
	rc = rc ? rc : render_cache(o, m);
	rc = rc ? rc
		: render_simple(
		      o, "yurthub_cache_streams_dropped_total", "counter",
		      "Responses whose caching was abandoned (queue full or store failing).",
		      (long long)atomic_load(&m->cache_dropped));
	rc = rc ? rc
		: render_simple(o, "yurthub_cache_lists_refused_total", "counter",
				"Lists not cached because they hold more than a cached list may "
				"(items, bytes, copies of one object).",
				(long long)atomic_load(&m->cache_lists_refused));
	rc =
	    rc ? rc
	       : render_simple(o, "yurthub_store_views_behind", "gauge",
			       "Cached list views behind the cloud: a write the store could not "
			       "take was lost; listed again once the store and the cloud are back.",
			       atomic_load(&m->store_views_behind));
	rc = rc ? rc
		: render_simple(o, "yurthub_cache_objects_skipped_total", "counter",
				"Objects left out of a stored list or watch event because no store "
				"key can name them (a NUL or a '/' in the name, \"..\"); the rest "
				"is stored, and clients get them as the cloud sent them.",
				(long long)atomic_load(&m->cache_objects_skipped));
	rc = rc ? rc
		: render_simple(o, "yurthub_informer_objects_skipped_total", "counter",
				"Objects the hub's own informers (the filters' view of the "
				"cluster, the multiplexer's shared lists) left out because no "
				"name can be read from them (a NUL in it); the rest is used.",
				(long long)informer_objects_skipped_total());
	rc = rc ? rc
		: render_simple(o, "yurthub_cache_queue_bytes", "gauge",
				"Bytes of responses waiting to be written to the store.",
				atomic_load(&m->cache_queue_bytes));
	rc = rc ? rc : render_cached_objects(o, m);
	rc = rc ? rc
		: render_simple(
		      o, "yurthub_store_damaged_reads_total", "counter",
		      "Cached objects read damaged (not JSON, or not the object their key "
		      "names) and not served, the scrub's reads included; the next list of "
		      "their view rewrites them.",
		      (long long)store_damaged_reads());
	rc = rc ? rc
		: render_simple(o, "yurthub_store_scrubs_total", "counter",
				"Scrubs that read and checked every cached object (soon after "
				"start, then every 30 minutes); what they find damaged counts in "
				"yurthub_store_damaged_reads_total.",
				(long long)store_scrubs_done());
	rc = rc ? rc : render_autonomy(o, m);
	rc = rc ? rc : render_store_nospace(o, m);
	rc = rc ? rc
		: render_simple(o, "yurthub_requests_in_flight", "gauge",
				"Proxy requests being served now (watches included; the hub's own "
				"informers not).",
				atomic_load(&m->in_flight));
	rc = rc ? rc : render_limits(o, m);
	rc = rc ? rc
		: render_simple(
		      o, "yurthub_watches_open", "gauge",
		      "Watch requests open now (proxied and local; the hub's own informers not).",
		      atomic_load(&m->open_watches));
	rc = rc ? rc
		: render_simple(o, "yurthub_proxied_bytes_total", "counter",
				"Response bytes passed from the cloud to clients.",
				(long long)atomic_load(&m->proxied_bytes));
	rc = rc ? rc
		: render_simple(o, "yurthub_filter_objects_changed_total", "counter",
				"Objects the response filters rewrote for a node component.",
				(long long)atomic_load(&m->filter_changed));
	rc = rc ? rc
		: render_simple(o, "yurthub_filter_objects_dropped_total", "counter",
				"Objects the response filters left out (or turned into DELETED).",
				(long long)atomic_load(&m->filter_dropped));
	rc = rc ? rc : render_filter_unparsable(o);
	rc = rc ? rc
		: render_simple(o, "yurthub_offline_events_queued_total", "counter",
				"Events created while offline, kept to be sent to the cloud.",
				(long long)atomic_load(&m->offline_events_queued));
	rc = rc ? rc : render_offline_dropped(o, m);
	rc = rc ? rc
		: render_simple(o, "yurthub_offline_events_sent_total", "counter",
				"Offline events sent to the cloud after it came back.",
				(long long)atomic_load(&m->offline_events_sent));
	rc = rc ? rc
		: render_histogram(o, "yurthub_request_duration_seconds",
				   "Time to serve a request (watches excluded).",
				   &m->request_seconds);
	rc = rc ? rc
		: render_histogram(o, "yurthub_store_operation_duration_seconds",
				   "Time of one store operation.", &m->store_seconds);
	rc = rc ? rc
		: render_histogram(o, "yurthub_store_commit_lag_seconds",
				   "Time from a list's last byte received to its view committed in "
				   "the store, where offline answers see it.",
				   &m->commit_lag_seconds);
	rc = rc ? rc : render_process(o, m);
	return rc;
}
