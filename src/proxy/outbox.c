/*
 * outbox.c - offline writes kept for the cloud, see outbox.h.
 *
 * Files are named by a 20-digit sequence number, so that the directory's
 * sorted order is the order of arrival, also across restarts.  Each holds one
 * JSON record {"uri":...,"contentType":...,"body":...}.
 *
 * What the cloud's answer to a record means (outbox_classify).  The rule: a
 * record is forgotten only when the cloud has it or when sending it again,
 * later, cannot change the answer; anything an operator or time can fix is
 * kept.  Records go oldest first, and the oldest blocks the rest while it
 * waits, so that the cloud gets them in the order they came.
 *
 *   2xx                    delivered.
 *   409                    delivered: a POST's 409 is AlreadyExists, the cloud
 *                          got it before (a crash between sending and
 *                          forgetting).
 *   no answer              kept; tried again each second while a server is
 *                          healthy (connect error, timeout, broken link).
 *   408, 429, 5xx          kept; the cloud is busy, restarting or behind a
 *                          proxy that lost it.
 *   401, 403               kept; the hub's credentials are being rotated or
 *                          its RBAC is being fixed - a refusal for now, not
 *                          a verdict on the Event.  (Forbidden for good only
 *                          shows as an Event queue that does not drain, and
 *                          the bounded queue keeps that from growing.)
 *   400, 413, 415, 422     dropped, reason "invalid": the write itself is
 *                          wrong, too large, or of a type the cloud does not
 *                          take; it will be the same tomorrow.
 *   404                    dropped, reason "not_found": the Event's namespace
 *                          was deleted while the node was offline (or the
 *                          cloud does not serve that API); an Event about
 *                          objects of a deleted namespace has no reader.
 *   anything else          dropped, reason "refused" (405, 410, a redirect,
 *                          ...): no retry changes it.
 *   a damaged record       dropped, reason "unreadable".
 *
 * A record kept after an answer is tried again after a pause: 1 s, then
 * doubling up to 60 s, or the server's Retry-After when that is longer (up
 * to 5 minutes); any answer that settles a record resets the pause.  Every
 * drop is logged with the status and counted in
 * yurthub_offline_events_dropped_total{reason} (queue_full is the bound of
 * the queue, counted in outbox_add).
 */
#include "proxy/outbox.h"
#include "proxy/outbox_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "http/request.h"
#include "util/fsutil.h"
#include "util/log.h"

#define RECORD_MAX   (4u << 20)
#define SEND_TIMEOUT 10L
#define IDLE_MS	     1000u
/* pauses after an answer that may pass later */
#define BACKOFF_FIRST_MS   1000u
#define BACKOFF_MAX_MS	   60000u
#define RETRY_AFTER_MAX_MS 300000u
/* send_record: the stored bytes are not a record */
#define SEND_UNREADABLE (-1L)

struct outbox {
	int dir_fd;
	struct upstream *u;
	struct metrics *m;
	size_t max;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	unsigned long long next_seq;
	char **names; /* queued, oldest first */
	size_t n, cap;
	bool stop, started;
	bool full_logged; /* the queue overflowed; logged once until it drains */
	bool kicked;	  /* a write was added: the sender should look now */
	pthread_t thread;
	/* the sender's pause (sender thread only, but for the test knob) */
	unsigned backoff_first_ms, backoff_max_ms;
	unsigned backoff_ms;	    /* the last pause after an answer; 0: none */
	struct timespec not_before; /* CLOCK_MONOTONIC; no attempt before */
};

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int push_name(struct outbox *o, const char *name)
{
	if (o->n == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 64;
		char **v = realloc(o->names, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		o->names = v;
		o->cap = cap;
	}
	if (!(o->names[o->n] = strdup(name)))
		return -ENOMEM;
	o->n++;
	return 0;
}

static void drop_first(struct outbox *o)
{
	if (unlinkat(o->dir_fd, o->names[0], 0) < 0 && errno != ENOENT)
		log_warn("cannot remove offline write %s: %s (it may be sent again after a "
			 "restart)",
			 o->names[0], strerror(errno));
	free(o->names[0]);
	memmove(o->names, o->names + 1, (o->n - 1) * sizeof *o->names);
	o->n--;
}

static int load_existing(struct outbox *o)
{
	int fd = openat(o->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	struct dirent *de;
	int rc = 0;
	while (rc == 0 && (de = readdir(d))) {
		if (!strncmp(de->d_name, ".tmp.", 5)) {
			unlinkat(o->dir_fd, de->d_name, 0); /* an interrupted write */
			continue;
		}
		if (strspn(de->d_name, "0123456789") != 20 || de->d_name[20])
			continue;
		rc = push_name(o, de->d_name);
		unsigned long long seq = strtoull(de->d_name, NULL, 10);
		if (seq >= o->next_seq)
			o->next_seq = seq + 1;
	}
	closedir(d);
	if (o->n)
		qsort(o->names, o->n, sizeof *o->names, cmp_names);
	return rc;
}

struct outbox *outbox_open(const char *dir, struct upstream *u, struct metrics *m, size_t max_items)
{
	struct outbox *o = calloc(1, sizeof *o);
	if (!o)
		return NULL;
	o->u = u;
	o->m = m;
	o->max = max_items ? max_items : OUTBOX_MAX_DEFAULT;
	o->next_seq = 1;
	o->backoff_first_ms = BACKOFF_FIRST_MS;
	o->backoff_max_ms = BACKOFF_MAX_MS;
	o->dir_fd = -1;
	pthread_condattr_t ca;
	if (pthread_mutex_init(&o->lock, NULL) != 0 || pthread_condattr_init(&ca) != 0) {
		free(o);
		return NULL;
	}
	int crc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	crc = crc ? crc : pthread_cond_init(&o->wake, &ca);
	pthread_condattr_destroy(&ca);
	if (crc != 0) {
		pthread_mutex_destroy(&o->lock);
		free(o);
		return NULL;
	}
	int rc = fs_mkdir_p_at(AT_FDCWD, dir, FS_DIR_MODE, NULL);
	o->dir_fd = rc == 0 ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	if (o->dir_fd < 0 || load_existing(o) < 0) {
		log_error("cannot open the offline write queue %s: %s", dir, strerror(errno));
		outbox_close(o);
		return NULL;
	}
	if (o->n)
		log_info("%zu offline writes wait for the cloud", o->n);
	return o;
}

int outbox_add(struct outbox *o, const char *uri, const char *content_type, const char *body,
	       size_t len)
{
	json_t *rec = json_pack("{s:s, s:s, s:s%}", "uri", uri, "contentType",
				content_type && *content_type ? content_type : "application/json",
				"body", body ? body : "", len);
	char *text = rec ? json_dumps(rec, JSON_COMPACT) : NULL;
	json_decref(rec);
	if (!text)
		return -EINVAL; /* not UTF-8: no API server would take it either */
	pthread_mutex_lock(&o->lock);
	char name[32];
	snprintf(name, sizeof name, "%020llu", o->next_seq++);
	int rc = fs_write_file_atomic(o->dir_fd, name, text, strlen(text), FS_FILE_MODE);
	if (rc == 0) {
		rc = push_name(o, name);
		while (o->n > o->max) {
			if (!o->full_logged)
				log_warn("offline write queue full (%zu): the oldest writes are "
					 "dropped",
					 o->max);
			o->full_logged = true;
			drop_first(o);
			atomic_fetch_add(&o->m->offline_events_dropped[OFFLINE_DROP_QUEUE_FULL], 1);
		}
		atomic_fetch_add(&o->m->offline_events_queued, 1);
		o->kicked = true;
		pthread_cond_signal(&o->wake);
	}
	pthread_mutex_unlock(&o->lock);
	free(text);
	return rc;
}

size_t outbox_pending(struct outbox *o)
{
	pthread_mutex_lock(&o->lock);
	size_t n = o->n;
	pthread_mutex_unlock(&o->lock);
	return n;
}

void outbox_record_free(struct outbox_record *r)
{
	free(r->uri);
	free(r->content_type);
	free(r->body);
	memset(r, 0, sizeof *r);
}

/* The uri and the content type are sent as they are, so each must stay one
 * line of the request (and the uri one word of it): a record is written by
 * outbox_add from what a client sent, so a control byte here is damage from
 * outside, and a CR or LF would add header lines of its own. */
int outbox_record_decode(const char *text, size_t len, struct outbox_record *out)
{
	memset(out, 0, sizeof *out);
	json_t *rec = json_loadb(text, len, 0, NULL);
	const char *uri = json_string_value(json_object_get(rec, "uri"));
	const char *ct = json_string_value(json_object_get(rec, "contentType"));
	json_t *body = json_object_get(rec, "body");
	int rc = -1;
	if (uri && ct && json_is_string(body) && uri[0] == '/' && !strpbrk(uri, " \t") &&
	    request_field_value_ok(uri) && request_field_value_ok(ct)) {
		out->uri = strdup(uri);
		out->content_type = strdup(ct);
		out->body_len = json_string_length(body);
		out->body = malloc(out->body_len + 1);
		if (out->uri && out->content_type && out->body) {
			memcpy(out->body, json_string_value(body), out->body_len + 1);
			rc = 0;
		}
	}
	json_decref(rec);
	if (rc < 0)
		outbox_record_free(out);
	return rc;
}

/* Retry-After in seconds (the HTTP-date form is not used by API servers). */
static size_t header_line(char *p, size_t sz, size_t n, void *ctx)
{
	long *retry_after = ctx;
	size_t len = sz * n;
	static const char name[] = "retry-after:";
	if (len > sizeof name - 1 && !strncasecmp(p, name, sizeof name - 1)) {
		char v[24];
		size_t vl = len - (sizeof name - 1);
		if (vl >= sizeof v)
			vl = sizeof v - 1;
		memcpy(v, p + sizeof name - 1, vl);
		v[vl] = '\0';
		char *end;
		errno = 0;
		long secs = strtol(v, &end, 10);
		while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
			end++;
		if (!errno && end != v && !*end && secs >= 0)
			*retry_after = secs;
	}
	return len;
}

/* POST one record: the HTTP status, 0 when the cloud was not reached (or
 * the hub could not even try), SEND_UNREADABLE for bytes that are no record.
 * *retry_after: the answer's Retry-After in seconds, or -1. */
static long send_record(struct outbox *o, const char *text, size_t len, long *retry_after)
{
	*retry_after = -1;
	struct outbox_record r;
	if (outbox_record_decode(text, len, &r) < 0)
		return SEND_UNREADABLE;
	struct upstream_send_req req = {.uri = r.uri,
					.content_type = r.content_type,
					.body = r.body,
					.body_len = r.body_len,
					.user_agent = "yurthub/outbox",
					.timeout_s = SEND_TIMEOUT,
					.on_header = header_line,
					.header_ctx = retry_after};
	long code = upstream_send(o->u, &req);
	outbox_record_free(&r);
	return code;
}

enum outbox_verdict outbox_classify(long code, enum offline_drop *reason)
{
	*reason = OFFLINE_DROP_REFUSED;
	if ((code >= 200 && code < 300) || code == 409)
		return OUTBOX_DELIVERED;
	if (code == 0 || code >= 500 || code == 408 || code == 429 || code == 401 || code == 403)
		return OUTBOX_RETRY;
	if (code == 400 || code == 413 || code == 415 || code == 422)
		*reason = OFFLINE_DROP_INVALID;
	else if (code == 404)
		*reason = OFFLINE_DROP_NOT_FOUND;
	return OUTBOX_DROP;
}

void outbox_set_backoff(struct outbox *o, unsigned first_ms, unsigned max_ms)
{
	pthread_mutex_lock(&o->lock);
	o->backoff_first_ms = first_ms ? first_ms : 1;
	o->backoff_max_ms = max_ms < o->backoff_first_ms ? o->backoff_first_ms : max_ms;
	pthread_mutex_unlock(&o->lock);
}

static struct timespec mono_now(void)
{
	struct timespec t;
	if (clock_gettime(CLOCK_MONOTONIC, &t) < 0)
		memset(&t, 0, sizeof t); /* cannot fail with a valid clock id */
	return t;
}

static struct timespec plus_ms(struct timespec t, unsigned ms)
{
	t.tv_sec += (time_t)(ms / 1000);
	t.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

static bool before(struct timespec a, struct timespec b)
{
	return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
}

/* The head stays; no attempt before the pause is over.  Called locked. */
static void pause_after(struct outbox *o, const char *name, long code, long retry_after)
{
	unsigned ms = IDLE_MS;
	if (code != 0) { /* an answer: back off; no answer: the health checker paces */
		bool first = o->backoff_ms == 0;
		o->backoff_ms = first ? o->backoff_first_ms
				      : (o->backoff_ms > o->backoff_max_ms / 2 ? o->backoff_max_ms
									       : o->backoff_ms * 2);
		ms = o->backoff_ms;
		if (retry_after >= 0) {
			unsigned ra = retry_after > (long)(RETRY_AFTER_MAX_MS / 1000)
					  ? RETRY_AFTER_MAX_MS
					  : (unsigned)retry_after * 1000u;
			if (ra > ms)
				ms = ra;
		}
		if (first)
			log_warn("offline write %s: the cloud answers HTTP %ld; kept, tried again "
				 "in %u ms and then less often",
				 name, code, ms);
		else
			log_info("offline write %s: HTTP %ld again; next try in %u ms", name, code,
				 ms);
	}
	o->not_before = plus_ms(mono_now(), ms);
}

/* Send what can be sent, oldest first; stop at the first that must wait. */
static void flush_once(struct outbox *o)
{
	for (;;) {
		pthread_mutex_lock(&o->lock);
		if (!o->n || o->stop || !upstream_any_healthy(o->u) ||
		    before(mono_now(), o->not_before)) {
			pthread_mutex_unlock(&o->lock);
			return;
		}
		char *name = strdup(o->names[0]);
		pthread_mutex_unlock(&o->lock);
		if (!name)
			return;
		struct buf b = BUF_INIT;
		long retry_after = -1, code = SEND_UNREADABLE;
		int rc = fs_read_file_at(o->dir_fd, name, &b, RECORD_MAX);
		if (rc == 0)
			code = send_record(o, b.data, b.len, &retry_after);
		else if (rc == -ENOMEM || rc == -EMFILE || rc == -ENFILE)
			code = 0; /* the hub's trouble, not the record's: next round */
		buf_free(&b);
		enum offline_drop reason = OFFLINE_DROP_UNREADABLE;
		enum outbox_verdict v =
		    code == SEND_UNREADABLE ? OUTBOX_DROP : outbox_classify(code, &reason);
		pthread_mutex_lock(&o->lock);
		if (v == OUTBOX_RETRY) {
			pause_after(o, name, code, retry_after);
			pthread_mutex_unlock(&o->lock);
			free(name);
			return;
		}
		o->backoff_ms = 0;
		if (v == OUTBOX_DELIVERED) {
			atomic_fetch_add(&o->m->offline_events_sent, 1);
		} else {
			atomic_fetch_add(&o->m->offline_events_dropped[reason], 1);
			if (code == SEND_UNREADABLE)
				log_warn("offline write %s cannot be read (%s), dropped", name,
					 rc < 0 ? strerror(-rc) : "not a record");
			else
				log_warn(
				    "offline write %s refused by the cloud (HTTP %ld), dropped: "
				    "sending it again cannot succeed",
				    name, code);
		}
		if (o->n && !strcmp(o->names[0], name))
			drop_first(o);
		if (o->n < o->max)
			o->full_logged = false;
		pthread_mutex_unlock(&o->lock);
		free(name);
	}
}

static void *sender_main(void *arg)
{
	struct outbox *o = arg;
	pthread_mutex_lock(&o->lock);
	while (!o->stop) {
		struct timespec now = mono_now(), ts = plus_ms(now, IDLE_MS);
		if (before(now, o->not_before) && before(o->not_before, ts))
			ts = o->not_before; /* the end of a short pause */
		/* a write added while the sender was busy is not missed */
		while (!o->kicked && !o->stop &&
		       pthread_cond_timedwait(&o->wake, &o->lock, &ts) == 0)
			;
		o->kicked = false;
		if (o->stop)
			break;
		pthread_mutex_unlock(&o->lock);
		flush_once(o);
		pthread_mutex_lock(&o->lock);
	}
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

int outbox_start(struct outbox *o)
{
	if (pthread_create(&o->thread, NULL, sender_main, o) != 0)
		return -1;
	o->started = true;
	return 0;
}

void outbox_close(struct outbox *o)
{
	if (!o)
		return;
	if (o->started) {
		pthread_mutex_lock(&o->lock);
		o->stop = true;
		pthread_cond_signal(&o->wake);
		pthread_mutex_unlock(&o->lock);
		pthread_join(o->thread, NULL);
	}
	for (size_t i = 0; i < o->n; i++)
		free(o->names[i]);
	free(o->names);
	if (o->dir_fd >= 0)
		close(o->dir_fd);
	pthread_mutex_destroy(&o->lock);
	pthread_cond_destroy(&o->wake);
	free(o);
}
