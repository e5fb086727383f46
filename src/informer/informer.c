/*
 * informer.c - list and watch one resource for a consumer, see informer.h.
 *
 * One thread per informer runs one request at a time on a libcurl multi
 * handle of its own (connections are kept between requests), so that
 * informer_stop can wake it at once with curl_multi_wakeup instead of
 * waiting up to a second for libcurl's progress callback.  The progress
 * callback checks the stop flag too, so a transfer also ends on its own
 * when the flag is seen.  Pauses wait on a condition variable that
 * informer_stop signals.
 *
 * Bodies go straight from libcurl's write callback into the incremental
 * decoders of kube/stream.h, and each object is handed on as it is decoded:
 * a 10 000-object list costs one object of memory here.
 *
 * What ends a list or a watch, and what comes next (a "failure" pauses 1 s,
 * doubling up to 30 s, plus up to a quarter more at random):
 *
 *   list 200, complete         -> on_list_end, watch from its resourceVersion
 *   list 404                   -> empty list, synced; list again in 60 s
 *   list error, cut, bad JSON  -> on_list_abort if it had begun; failure, list
 *   watch ends (final chunk)   -> watch again from the last resourceVersion
 *                                 (a failure if it brought nothing within 1 s:
 *                                 a server that ends every watch at once must
 *                                 not be asked again in a tight loop)
 *   watch connect error, cut   -> failure, watch again from the last rv: it
 *                                 is still good unless the server's history
 *                                 moved past it, and then the 410 says so
 *   watch ERROR 410 (or 410)   -> list now (after a pause if the previous
 *                                 watch ended the same way)
 *   watch other ERROR, HTTP
 *   error, bad JSON            -> failure, list
 *
 * A watch that worked (an object event or a bookmark, or open for 10 s)
 * resets the pause to 1 s.  Every end is logged at -v 1 with its reason.
 */
#include "informer/informer.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/once.h"

#define PAUSE_FIRST_MS	   1000u
#define PAUSE_MAX_MS	   30000u
#define NOT_SERVED_MS	   60000u /* a resource the cloud does not serve: list again */
#define RELIST_MIN_MS	   10000u /* between lists informer_relist() asks for */
#define EPOCH_POLL_MS	   250u	  /* how often a pause looks at spec.epoch */
#define WATCH_MIN_S	   300	  /* timeoutSeconds in [300, 600), as client-go */
#define WATCH_SPAN_S	   300
#define WATCH_GRACE_S	   60	 /* the server ends the watch; this is past it */
#define WATCH_WORKED_MS	   10000 /* open that long: the watch worked */
#define WATCH_TOO_SHORT_MS 1000	 /* ended sooner with nothing: a failure */
#define CONNECT_TIMEOUT_MS 10000L
#define LIST_STALL_S	   120L /* a list that sends nothing for so long is dead */
#define ERROR_BODY_MAX	   1024 /* of an error answer, kept for the log */
#define POLL_MS		   1000
#define FAILURES_MAX	   64 /* the pause stopped growing long before */

struct informer {
	char *base, *path, *query, *user_agent;
	struct informer_spec spec; /* path and query point at the copies */
	CURLM *multi;
	pthread_t thread;
	pthread_mutex_t lock; /* guards nothing but the pauses' waits */
	pthread_cond_t wake;  /* CLOCK_MONOTONIC */
	atomic_bool stop, synced;
	atomic_bool relist_wanted; /* informer_relist: list again, at most every RELIST_MIN_MS */
	bool watching; /* the informer's thread only: a relist ends a watch, not a list */

	/* the informer's thread only */
	unsigned int seed;
	struct buf rv;		  /* the last resourceVersion seen; "" before a list */
	unsigned failures;	  /* consecutive; sets the pause */
	bool last_expired;	  /* the previous watch ended with 410 */
	char *what;		  /* path?query, for the log */
	unsigned long epoch_seen; /* spec.epoch when the last request went out */
};

/* ---- small helpers ---- */

char *informer_query_escape(const char *s)
{
	size_t len = strlen(s);
	if (len > INT_MAX / 3)
		return NULL;
	/* The handle argument is ignored since libcurl 7.82. */
	char *e = curl_easy_escape(NULL, s, (int)len);
	char *copy = e ? strdup(e) : NULL; /* the caller frees with free() */
	curl_free(e);
	return copy;
}

/* The pause after the n-th failure in a row (n >= 1). */
static unsigned pause_ms(struct informer *inf, unsigned n)
{
	unsigned ms = PAUSE_FIRST_MS;
	while (--n > 0 && ms < PAUSE_MAX_MS)
		ms *= 2;
	if (ms > PAUSE_MAX_MS)
		ms = PAUSE_MAX_MS;
	return ms + (unsigned)rand_r(&inf->seed) % (ms / 4 + 1);
}

static bool pause_plain(struct informer *inf, unsigned ms);

static void note_epoch(struct informer *inf)
{
	if (inf->spec.epoch)
		inf->epoch_seen = inf->spec.epoch(inf->spec.epoch_ctx);
}

static bool epoch_moved(struct informer *inf)
{
	return inf->spec.epoch && inf->spec.epoch(inf->spec.epoch_ctx) != inf->epoch_seen;
}

/* Wait ms, or until stopped, or until spec.epoch moves on from what it was
 * when the last request went out; false when stopped. */
static bool pause_for(struct informer *inf, unsigned ms)
{
	/* the epoch is looked at every EPOCH_POLL_MS */
	while (inf->spec.epoch && ms > EPOCH_POLL_MS) {
		if (epoch_moved(inf))
			return !atomic_load(&inf->stop);
		if (!pause_plain(inf, EPOCH_POLL_MS))
			return false;
		ms -= EPOCH_POLL_MS;
	}
	return pause_plain(inf, ms);
}

/* Wait ms or until stopped; false when stopped. */
static bool pause_plain(struct informer *inf, unsigned ms)
{
	struct timespec until;
	if (clock_gettime(CLOCK_MONOTONIC, &until) < 0)
		return !atomic_load(&inf->stop);
	until.tv_sec += (time_t)(ms / 1000);
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&inf->lock);
	int rc = 0;
	while (!atomic_load(&inf->stop) && rc != ETIMEDOUT) {
		rc = pthread_cond_timedwait(&inf->wake, &inf->lock, &until);
		if (rc != 0 && rc != ETIMEDOUT && rc != EINTR)
			break; /* EINVAL: cannot happen with a valid deadline */
	}
	pthread_mutex_unlock(&inf->lock);
	return !atomic_load(&inf->stop);
}

/* The message of a Status answer, or its first bytes; for the log. */
static void status_text(const struct buf *body, struct buf *out)
{
	json_t *j = body->len ? json_loadb(body->data, body->len, 0, NULL) : NULL;
	const char *msg = json_string_value(json_object_get(j, "message"));
	if (msg)
		buf_append_str(out, msg);
	else if (body->len)
		buf_append(out, body->data, body->len);
	json_decref(j);
}

static int xferinfo(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		    curl_off_t ulnow)
{
	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	struct informer *inf = ud;
	return atomic_load(&inf->stop) || (inf->watching && atomic_load(&inf->relist_wanted)) ? 1
											      : 0;
}

/* An easy handle for url with what every request of ours sets; NULL on
 * failure. */
static CURL *new_handle(struct informer *inf, const char *url, curl_write_callback write,
			void *wctx)
{
	CURL *e = curl_easy_init();
	if (!e)
		return NULL;
	bool ok = curl_easy_setopt(e, CURLOPT_URL, url) == CURLE_OK &&
		  curl_easy_setopt(e, CURLOPT_USERAGENT, inf->user_agent) == CURLE_OK &&
		  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
		  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS) == CURLE_OK &&
		  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write) == CURLE_OK &&
		  curl_easy_setopt(e, CURLOPT_WRITEDATA, wctx) == CURLE_OK &&
		  curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L) == CURLE_OK &&
		  curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, xferinfo) == CURLE_OK &&
		  curl_easy_setopt(e, CURLOPT_XFERINFODATA, inf) == CURLE_OK;
	if (!ok) {
		curl_easy_cleanup(e);
		return NULL;
	}
	return e;
}

/* Run e to its end on the informer's multi handle.  Its result, or
 * CURLE_ABORTED_BY_CALLBACK when stopped. */
static CURLcode run(struct informer *inf, CURL *e, struct curl_slist *headers)
{
	if (curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers) != CURLE_OK ||
	    curl_multi_add_handle(inf->multi, e) != CURLM_OK)
		return CURLE_FAILED_INIT;
	CURLcode res = CURLE_FAILED_INIT;
	for (;;) {
		int running = 0;
		if (curl_multi_perform(inf->multi, &running) != CURLM_OK)
			break;
		CURLMsg *m;
		int left;
		bool done = false;
		while ((m = curl_multi_info_read(inf->multi, &left)))
			if (m->msg == CURLMSG_DONE && m->easy_handle == e) {
				res = m->data.result;
				done = true;
			}
		if (done)
			break;
		if (atomic_load(&inf->stop) ||
		    (inf->watching && atomic_load(&inf->relist_wanted))) {
			res = CURLE_ABORTED_BY_CALLBACK;
			break;
		}
		if (running == 0)
			break; /* no message and nothing running: cannot happen */
		if (curl_multi_poll(inf->multi, NULL, 0, POLL_MS, NULL) != CURLM_OK)
			break;
	}
	if (curl_multi_remove_handle(inf->multi, e) != CURLM_OK)
		log_warn("informer %s: cannot detach a finished request", inf->what);
	return res;
}

static int set_rv(struct informer *inf, const char *rv)
{
	if (!*rv)
		return 0; /* keep the last one */
	buf_reset(&inf->rv);
	return buf_append_str(&inf->rv, rv);
}

/* ---- list ---- */

enum outcome {
	LIST_OK,
	LIST_NOT_SERVED,
	LIST_FAILED,
	WATCH_ENDED,   /* normally: watch again */
	WATCH_BROKEN,  /* a failure: watch again after a pause */
	WATCH_EXPIRED, /* 410: list */
	WATCH_FAILED,  /* a failure: list after a pause */
	STOPPED,
};

struct list_req {
	struct informer *inf;
	CURL *e;
	long code; /* 0 until the first byte of the body */
	bool began;
	struct list_decoder *d;
	struct buf err; /* the first bytes of an error answer */
};

/* Objects no consumer can key (a NUL in the name), left out of their list
 * or watch so that one of them does not keep a filter's view or the
 * multiplexer from ever listing: process-wide, for /metrics. */
static _Atomic unsigned long long objects_skipped;
static struct once_table skipped_logged = ONCE_TABLE_INIT;

unsigned long long informer_objects_skipped_total(void)
{
	return atomic_load(&objects_skipped);
}

/* True when o is such an object: counted, and logged once per object. */
static bool skip_odd(const struct informer *inf, const struct stream_object *o)
{
	if (!o->odd)
		return false;
	atomic_fetch_add(&objects_skipped, 1);
	if (once_first(&skipped_logged, o->data, o->len))
		log_warn("informer %s: an object (%zu bytes) is left out, only it: %s "
			 "(yurthub_informer_objects_skipped_total; logged once per object)",
			 inf->what, o->len, o->odd);
	return true;
}

static int list_item(void *ud, const struct stream_object *item)
{
	struct list_req *r = ud;
	struct informer *inf = r->inf;
	if (inf->spec.on_object && !skip_odd(inf, item))
		inf->spec.on_object(inf->spec.ctx, INFORMER_UPSERT, item);
	return atomic_load(&inf->stop) ? 1 : 0;
}

/* The status of the answer, once its body starts. */
static long body_code(CURL *e)
{
	long code = 0;
	if (curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK)
		return -1;
	return code;
}

static void keep_error_bytes(struct buf *err, const char *p, size_t len)
{
	if (err->len < ERROR_BODY_MAX) {
		size_t take = ERROR_BODY_MAX - err->len;
		buf_append(err, p, len < take ? len : take);
	}
}

static size_t list_write(char *p, size_t sz, size_t n, void *ud)
{
	struct list_req *r = ud;
	size_t len = sz * n;
	if (!r->code) {
		r->code = body_code(r->e);
		if (r->code == 200) {
			r->began = true;
			if (r->inf->spec.on_list_begin)
				r->inf->spec.on_list_begin(r->inf->spec.ctx);
		}
	}
	if (r->code != 200) {
		keep_error_bytes(&r->err, p, len);
		return len;
	}
	return list_decoder_feed(r->d, p, len) == 0 ? len : 0;
}

static enum outcome list_end(struct informer *inf, struct list_req *r, enum outcome o,
			     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Log why the list ended (anything but success), tell the consumer. */
static enum outcome list_end(struct informer *inf, struct list_req *r, enum outcome o,
			     const char *fmt, ...)
{
	if (r->began && inf->spec.on_list_abort)
		inf->spec.on_list_abort(inf->spec.ctx);
	struct buf why = BUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	int rc = buf_vprintf(&why, fmt, ap);
	va_end(ap);
	log_info("informer %s: list failed%s: %s", inf->what, r->began ? " half way" : "",
		 rc == 0 ? buf_cstr(&why) : "out of memory");
	buf_free(&why);
	return o;
}

static enum outcome do_list(struct informer *inf)
{
	note_epoch(inf);
	struct list_req r = {.inf = inf, .err = BUF_INIT};
	struct buf url = BUF_INIT;
	enum outcome o = LIST_FAILED;
	struct curl_slist *h = curl_slist_append(NULL, "Accept: application/json");
	r.d = list_decoder_new(list_item, &r);
	if (r.d)
		list_decoder_tolerate_odd(r.d);
	if (!h || !r.d ||
	    buf_printf(&url, "%s%s%s%s", inf->base, inf->path, inf->query ? "?" : "",
		       inf->query ? inf->query : "") < 0 ||
	    !(r.e = new_handle(inf, url.data, list_write, &r)) ||
	    curl_easy_setopt(r.e, CURLOPT_LOW_SPEED_LIMIT, 1L) != CURLE_OK ||
	    curl_easy_setopt(r.e, CURLOPT_LOW_SPEED_TIME, LIST_STALL_S) != CURLE_OK) {
		o = list_end(inf, &r, LIST_FAILED, "out of memory");
		goto out;
	}
	CURLcode res = run(inf, r.e, h);
	if (atomic_load(&inf->stop)) {
		if (r.began && inf->spec.on_list_abort)
			inf->spec.on_list_abort(inf->spec.ctx);
		o = STOPPED;
		goto out;
	}
	if (!r.code && res == CURLE_OK)
		r.code = body_code(r.e); /* an answer without a body */
	if (res != CURLE_OK) {
		bool decoder = res == CURLE_WRITE_ERROR && r.code == 200;
		o = list_end(inf, &r, LIST_FAILED, "%s",
			     decoder ? list_decoder_error(r.d) : curl_easy_strerror(res));
	} else if (r.code == 404) {
		struct buf msg = BUF_INIT;
		status_text(&r.err, &msg);
		log_info("informer %s: not served (HTTP 404: %s): an empty list; asked again in "
			 "%u s",
			 inf->what, buf_cstr(&msg), NOT_SERVED_MS / 1000);
		buf_free(&msg);
		if (inf->spec.on_list_begin)
			inf->spec.on_list_begin(inf->spec.ctx);
		if (inf->spec.on_list_end)
			inf->spec.on_list_end(inf->spec.ctx);
		if (inf->spec.on_list_rv)
			inf->spec.on_list_rv(inf->spec.ctx, "");
		buf_reset(&inf->rv);
		o = LIST_NOT_SERVED;
	} else if (r.code != 200) {
		struct buf msg = BUF_INIT;
		status_text(&r.err, &msg);
		o = list_end(inf, &r, LIST_FAILED, "HTTP %ld: %s", r.code, buf_cstr(&msg));
		buf_free(&msg);
	} else {
		struct list_meta meta;
		if (list_decoder_finish(r.d, &meta) < 0) {
			o = list_end(inf, &r, LIST_FAILED, "%s", list_decoder_error(r.d));
		} else if (set_rv(inf, meta.resource_version) < 0) {
			o = list_end(inf, &r, LIST_FAILED, "out of memory");
		} else {
			if (inf->spec.on_list_end)
				inf->spec.on_list_end(inf->spec.ctx);
			if (inf->spec.on_list_rv)
				inf->spec.on_list_rv(inf->spec.ctx, buf_cstr(&inf->rv));
			log_v(2, "informer %s: listed %zu objects at resourceVersion %s", inf->what,
			      meta.items, buf_cstr(&inf->rv));
			o = LIST_OK;
		}
	}
out:
	if (r.e)
		curl_easy_cleanup(r.e);
	curl_slist_free_all(h);
	list_decoder_free(r.d);
	buf_free(&r.err);
	buf_free(&url);
	return o;
}

/* ---- watch ---- */

struct watch_req {
	struct informer *inf;
	CURL *e;
	long code;
	struct watch_decoder *d;
	size_t events;	/* object events and bookmarks */
	int error_code; /* an ERROR event's code; 0: none */
	bool oom;	/* the resourceVersion could not be kept */
	struct buf err; /* an error answer's first bytes, or the ERROR's Status */
};

static int watch_event(void *ud, const struct watch_event *ev)
{
	struct watch_req *r = ud;
	struct informer *inf = r->inf;
	switch (ev->type) {
	case WATCH_ADDED:
	case WATCH_MODIFIED:
	case WATCH_DELETED:
		if (inf->spec.on_object && !skip_odd(inf, &ev->object))
			inf->spec.on_object(inf->spec.ctx,
					    ev->type == WATCH_DELETED ? INFORMER_DELETE
								      : INFORMER_UPSERT,
					    &ev->object);
		break;
	case WATCH_BOOKMARK:
		if (inf->spec.on_bookmark)
			inf->spec.on_bookmark(inf->spec.ctx, &ev->object);
		break;
	case WATCH_ERROR:
		r->error_code = ev->error_code ? ev->error_code : -1;
		buf_reset(&r->err);
		keep_error_bytes(&r->err, ev->object.data, ev->object.len);
		return 1; /* the watch is over; what follows is not trusted */
	}
	r->events++;
	/* an event without a usable resourceVersion ("0" in a bookmark of a
	 * server that knows none) must not send the next watch back to 0,
	 * which asks for everything again as ADDED, out of order */
	if (ev->object.rv && set_rv(inf, ev->object.resource_version) < 0) {
		r->oom = true;
		return 1;
	}
	return atomic_load(&inf->stop) ? 1 : 0;
}

static size_t watch_write(char *p, size_t sz, size_t n, void *ud)
{
	struct watch_req *r = ud;
	size_t len = sz * n;
	if (!r->code)
		r->code = body_code(r->e);
	if (r->code != 200) {
		keep_error_bytes(&r->err, p, len);
		return len;
	}
	return watch_decoder_feed(r->d, p, len) == 0 ? len : 0;
}

static enum outcome watch_end(struct informer *inf, enum outcome o, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum outcome watch_end(struct informer *inf, enum outcome o, const char *fmt, ...)
{
	struct buf why = BUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	int rc = buf_vprintf(&why, fmt, ap);
	va_end(ap);
	static const char *const next[] = {
	    [WATCH_ENDED] = "watching again",
	    [WATCH_BROKEN] = "watching again after a pause",
	    [WATCH_EXPIRED] = "listing again",
	    [WATCH_FAILED] = "listing again after a pause",
	};
	log_info("informer %s: watch ended (%s); %s", inf->what,
		 rc == 0 ? buf_cstr(&why) : "out of memory", next[o]);
	buf_free(&why);
	return o;
}

static int watch_url(struct informer *inf, struct buf *url)
{
	long secs = WATCH_MIN_S + (long)(rand_r(&inf->seed) % WATCH_SPAN_S);
	int rc = buf_printf(url, "%s%s?%s%s", inf->base, inf->path, inf->query ? inf->query : "",
			    inf->query ? "&" : "");
	rc = rc ? rc
		: buf_printf(url, "watch=true&allowWatchBookmarks=true&timeoutSeconds=%ld", secs);
	if (rc == 0 && inf->rv.len) {
		/* the server's bytes, so escaped: it must stay one query value */
		char *rv = informer_query_escape(inf->rv.data);
		rc = rv ? buf_printf(url, "&resourceVersion=%s", rv) : -1;
		free(rv);
	}
	return rc;
}

static enum outcome do_watch(struct informer *inf, long *open_ms, size_t *events)
{
	note_epoch(inf);
	struct watch_req r = {.inf = inf, .err = BUF_INIT};
	struct buf url = BUF_INIT;
	enum outcome o;
	struct curl_slist *h = curl_slist_append(NULL, "Accept: application/json");
	r.d = watch_decoder_new(watch_event, &r);
	if (r.d)
		watch_decoder_tolerate_odd(r.d);
	long t0 = clock_now_ms();
	*open_ms = 0;
	*events = 0;
	if (!h || !r.d || watch_url(inf, &url) < 0 ||
	    !(r.e = new_handle(inf, url.data, watch_write, &r)) ||
	    curl_easy_setopt(r.e, CURLOPT_TIMEOUT,
			     (long)(WATCH_MIN_S + WATCH_SPAN_S + WATCH_GRACE_S)) != CURLE_OK) {
		o = watch_end(inf, WATCH_BROKEN, "out of memory");
		goto out;
	}
	inf->watching = true;
	CURLcode res = run(inf, r.e, h);
	inf->watching = false;
	*open_ms = clock_now_ms() - t0;
	*events = r.events;
	if (!r.code && res == CURLE_OK)
		r.code = body_code(r.e);
	if (atomic_load(&inf->stop)) {
		o = STOPPED;
	} else if (atomic_load(&inf->relist_wanted)) {
		o = watch_end(inf, WATCH_EXPIRED, "a list is wanted (informer_relist)");
	} else if (r.oom) {
		o = watch_end(inf, WATCH_FAILED, "out of memory");
	} else if (r.error_code) {
		struct buf msg = BUF_INIT;
		status_text(&r.err, &msg);
		o = watch_end(inf, r.error_code == 410 ? WATCH_EXPIRED : WATCH_FAILED,
			      "ERROR %d: %s", r.error_code, buf_cstr(&msg));
		buf_free(&msg);
	} else if (r.code == 410) {
		o = watch_end(inf, WATCH_EXPIRED, "HTTP 410");
	} else if (r.code != 200 && r.code > 0) {
		struct buf msg = BUF_INIT;
		status_text(&r.err, &msg);
		o = watch_end(inf, WATCH_FAILED, "HTTP %ld: %s", r.code, buf_cstr(&msg));
		buf_free(&msg);
	} else if (res == CURLE_WRITE_ERROR) {
		o = watch_end(inf, WATCH_FAILED, "%s", watch_decoder_error(r.d));
	} else if (res != CURLE_OK) {
		o = watch_end(inf, WATCH_BROKEN, "%s", curl_easy_strerror(res));
	} else if (watch_decoder_finish(r.d) < 0) {
		o = watch_end(inf, WATCH_BROKEN, "cut inside an event");
	} else if (!r.events && *open_ms < WATCH_TOO_SHORT_MS) {
		o = watch_end(inf, WATCH_BROKEN, "ended after %ld ms without an event", *open_ms);
	} else {
		o = watch_end(inf, WATCH_ENDED, "after %ld s", *open_ms / 1000);
	}
out:
	if (r.e)
		curl_easy_cleanup(r.e);
	curl_slist_free_all(h);
	watch_decoder_free(r.d);
	buf_free(&r.err);
	buf_free(&url);
	return o;
}

/* ---- the thread ---- */

/* Count one more failure in a row; the count. */
static unsigned failed(struct informer *inf)
{
	if (inf->failures < FAILURES_MAX)
		inf->failures++;
	return inf->failures;
}

static void *informer_main(void *arg)
{
	struct informer *inf = arg;
	bool need_list = true;
	long last_list_ms = 0;
	while (!atomic_load(&inf->stop)) {
		unsigned wait = 0;
		if (atomic_load(&inf->relist_wanted)) {
			long since = clock_now_ms() - last_list_ms;
			if (last_list_ms && since < (long)RELIST_MIN_MS &&
			    !pause_plain(inf, (unsigned)(RELIST_MIN_MS - since)))
				break;
			atomic_store(&inf->relist_wanted, false);
			need_list = true;
		}
		if (need_list) {
			last_list_ms = clock_now_ms();
			enum outcome o = do_list(inf);
			if (o == STOPPED)
				break;
			if (o == LIST_OK || o == LIST_NOT_SERVED)
				atomic_store(&inf->synced, true);
			if (o == LIST_OK) {
				need_list = false;
				continue;
			}
			if (o == LIST_NOT_SERVED) {
				inf->failures = 0;
				wait = NOT_SERVED_MS;
			} else {
				wait = pause_ms(inf, failed(inf));
			}
		} else {
			long open_ms;
			size_t events;
			enum outcome o = do_watch(inf, &open_ms, &events);
			if (o == STOPPED)
				break;
			if (events > 0 || open_ms >= WATCH_WORKED_MS)
				inf->failures = 0;
			bool again = inf->last_expired;
			inf->last_expired = o == WATCH_EXPIRED;
			if (o == WATCH_EXPIRED || o == WATCH_FAILED)
				need_list = true;
			/* A first 410 is the normal way back after an outage:
			 * list at once.  Two in a row: the list's rv is no
			 * good either, something is wrong; pause. */
			if (o == WATCH_BROKEN || o == WATCH_FAILED || (o == WATCH_EXPIRED && again))
				wait = pause_ms(inf, failed(inf));
		}
		if (wait && !pause_for(inf, wait))
			break;
	}
	return NULL;
}

static void informer_free(struct informer *inf)
{
	if (inf->multi)
		curl_multi_cleanup(inf->multi);
	free(inf->base);
	free(inf->path);
	free(inf->query);
	free(inf->user_agent);
	free(inf->what);
	buf_free(&inf->rv);
	free(inf);
}

struct informer *informer_start(const char *base_url, const char *user_agent,
				const struct informer_spec *spec)
{
	if (!base_url || !user_agent || !spec || !spec->path)
		return NULL;
	struct informer *inf = calloc(1, sizeof *inf);
	if (!inf)
		return NULL;
	inf->spec = *spec;
	inf->base = strdup(base_url);
	inf->path = strdup(spec->path);
	inf->query = spec->query && *spec->query ? strdup(spec->query) : NULL;
	inf->user_agent = strdup(user_agent);
	inf->what =
	    str_printf("%s%s%s", spec->path, inf->query ? "?" : "", inf->query ? inf->query : "");
	inf->multi = curl_multi_init();
	inf->seed = (unsigned int)time(NULL) ^ (unsigned int)(uintptr_t)inf;
	atomic_init(&inf->stop, false);
	atomic_init(&inf->synced, false);
	bool ok = inf->base && inf->path && inf->user_agent && inf->what && inf->multi &&
		  (!spec->query || !*spec->query || inf->query);
	inf->spec.path = inf->path;
	inf->spec.query = inf->query;
	if (!ok) {
		informer_free(inf);
		return NULL;
	}
	pthread_condattr_t ca;
	if (pthread_mutex_init(&inf->lock, NULL) != 0) {
		informer_free(inf);
		return NULL;
	}
	int rc = pthread_condattr_init(&ca);
	if (rc == 0) {
		rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		rc = rc ? rc : pthread_cond_init(&inf->wake, &ca);
		pthread_condattr_destroy(&ca);
	}
	if (rc != 0) {
		pthread_mutex_destroy(&inf->lock);
		informer_free(inf);
		return NULL;
	}
	if (pthread_create(&inf->thread, NULL, informer_main, inf) != 0) {
		log_error("informer %s: cannot start its thread", inf->what);
		pthread_cond_destroy(&inf->wake);
		pthread_mutex_destroy(&inf->lock);
		informer_free(inf);
		return NULL;
	}
	return inf;
}

bool informer_synced(const struct informer *inf)
{
	return atomic_load(&((struct informer *)inf)->synced);
}

void informer_relist(struct informer *inf)
{
	if (!inf || atomic_exchange(&inf->relist_wanted, true))
		return;
	if (curl_multi_wakeup(inf->multi) != CURLM_OK)
		log_v(1, "informer %s: cannot wake its transfer; it lists within a second",
		      inf->what);
}

void informer_stop(struct informer *inf)
{
	if (!inf)
		return;
	atomic_store(&inf->stop, true);
	pthread_mutex_lock(&inf->lock);
	pthread_cond_signal(&inf->wake);
	pthread_mutex_unlock(&inf->lock);
	/* Thread-safe by libcurl's word: the poll in run() returns now. */
	if (curl_multi_wakeup(inf->multi) != CURLM_OK)
		log_warn("informer %s: cannot wake its transfer; it stops within a second",
			 inf->what);
	pthread_join(inf->thread, NULL);
	pthread_cond_destroy(&inf->wake);
	pthread_mutex_destroy(&inf->lock);
	informer_free(inf);
}
