/*
 * outbox.c - offline writes kept for the cloud, see outbox.h.
 *
 * Files are named by a 20-digit sequence number, so that the directory's
 * sorted order is the order of arrival, also across restarts.  Each holds one
 * JSON record {"uri":...,"contentType":...,"body":...}.
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
#include <time.h>
#include <unistd.h>

#include "util/fsutil.h"
#include "util/log.h"

#define RECORD_MAX   (4u << 20)
#define SEND_TIMEOUT 10L
#define IDLE_SECONDS 1

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
	pthread_t thread;
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
	unlinkat(o->dir_fd, o->names[0], 0);
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
	pthread_mutex_init(&o->lock, NULL);
	pthread_cond_init(&o->wake, NULL);
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
			drop_first(o);
			atomic_fetch_add(&o->m->offline_events_dropped, 1);
		}
		atomic_fetch_add(&o->m->offline_events_queued, 1);
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

static size_t discard(char *p, size_t sz, size_t n, void *ctx)
{
	(void)p;
	(void)ctx;
	return sz * n;
}

void outbox_record_free(struct outbox_record *r)
{
	free(r->uri);
	free(r->content_type);
	free(r->body);
	memset(r, 0, sizeof *r);
}

/* Sent as it is, s must stay one line of the request: a record is written
 * by outbox_add from what a client sent, so a control byte here is damage
 * from outside, and a CR or LF would add header lines of its own. */
static bool one_line(const char *s, bool tab_ok)
{
	for (; *s; s++)
		if (((unsigned char)*s < 0x20 && !(tab_ok && *s == '\t')) || *s == 0x7f)
			return false;
	return true;
}

int outbox_record_decode(const char *text, size_t len, struct outbox_record *out)
{
	memset(out, 0, sizeof *out);
	json_t *rec = json_loadb(text, len, 0, NULL);
	const char *uri = json_string_value(json_object_get(rec, "uri"));
	const char *ct = json_string_value(json_object_get(rec, "contentType"));
	json_t *body = json_object_get(rec, "body");
	int rc = -1;
	if (uri && ct && json_is_string(body) && uri[0] == '/' && !strchr(uri, ' ') &&
	    one_line(uri, false) && one_line(ct, true)) {
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

/* POST one record; the HTTP status, or 0 when the cloud was not reached. */
static long send_record(struct outbox *o, const char *text, size_t len)
{
	struct outbox_record r;
	if (outbox_record_decode(text, len, &r) < 0)
		return -1; /* a record that does not parse is dropped */
	struct backend *b = upstream_pick(o->u, 0);
	long code = b ? -1 : 0;
	CURL *e = b ? upstream_easy(o->u, b, true) : NULL;
	struct buf url = BUF_INIT, ctype = BUF_INIT;
	struct curl_slist *h = NULL;
	char *auth = e ? upstream_auth_header(o->u) : NULL;
	if (e && buf_printf(&url, "%s%s", b->url, r.uri) == 0 &&
	    buf_printf(&ctype, "Content-Type: %s", r.content_type) == 0) {
		code = 0;
		h = curl_slist_append(h, ctype.data);
		h = curl_slist_append(h, "Expect:");
		if (auth)
			h = curl_slist_append(h, auth);
		curl_easy_setopt(e, CURLOPT_URL, url.data);
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, r.body);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r.body_len);
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
		curl_easy_setopt(e, CURLOPT_TIMEOUT, SEND_TIMEOUT);
		curl_easy_setopt(e, CURLOPT_USERAGENT, "yurthub/outbox");
		if (curl_easy_perform(e) == CURLE_OK)
			curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
	}
	free(auth);
	curl_slist_free_all(h);
	buf_free(&url);
	buf_free(&ctype);
	if (e)
		curl_easy_cleanup(e);
	outbox_record_free(&r);
	return code;
}

/* Send what can be sent, oldest first; stop at the first that cannot. */
static void flush_once(struct outbox *o)
{
	for (;;) {
		pthread_mutex_lock(&o->lock);
		if (!o->n || o->stop || !upstream_any_healthy(o->u)) {
			pthread_mutex_unlock(&o->lock);
			return;
		}
		char *name = strdup(o->names[0]);
		pthread_mutex_unlock(&o->lock);
		if (!name)
			return;
		struct buf b = BUF_INIT;
		long code = fs_read_file_at(o->dir_fd, name, &b, RECORD_MAX) == 0
				? send_record(o, b.data, b.len)
				: -1;
		buf_free(&b);
		if (code == 0 || code >= 500) {
			free(name);
			return; /* the cloud is not there (yet): next round */
		}
		if (code >= 200 && code < 300)
			atomic_fetch_add(&o->m->offline_events_sent, 1);
		else if (code == 409)
			atomic_fetch_add(&o->m->offline_events_sent, 1); /* it got there before */
		else
			log_warn("offline write %s refused by the cloud (HTTP %ld), dropped", name,
				 code);
		pthread_mutex_lock(&o->lock);
		if (o->n && !strcmp(o->names[0], name))
			drop_first(o);
		pthread_mutex_unlock(&o->lock);
		free(name);
	}
}

static void *sender_main(void *arg)
{
	struct outbox *o = arg;
	pthread_mutex_lock(&o->lock);
	while (!o->stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += IDLE_SECONDS;
		pthread_cond_timedwait(&o->wake, &o->lock, &ts);
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
