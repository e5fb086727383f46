/*
 * behind.c - the views whose cached copy is behind the cloud, see behind.h.
 *
 * The file: two slots of SLOT_BYTES, each "yurthub-views-behind <gen>
 * <len> <crc32>\n" then len bytes of JSON, padded with spaces.  A change
 * writes the slot of the next generation in place and syncs it; a write
 * cut half way breaks only that slot, and the other still holds the state
 * before.  Both slots are written when the file is opened, so that its
 * blocks are allocated while there is room: rewriting them later needs no
 * new space (on file systems that overwrite in place, as ext4 and xfs do).
 */
#include "cache/behind.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "storage/view.h"
#include "util/buf.h"
#include "util/fsutil.h"
#include "util/log.h"

#define SLOT_BYTES	   (32u << 10)
#define SLOT_MAGIC	   "yurthub-views-behind"
#define RESYNC_MAX_SECONDS 16
#define RESYNC_TIMEOUT_S   300L /* one relist, whole */

/* A view behind: its identity (selectors canonical), where it is listed,
 * the newest lost event's rv (0: unknown) and since when (wall clock). */
struct mark {
	char *component, *group, *version, *resource, *namespace, *lsel, *fsel, *path;
	uint64_t rv;
	int64_t since;
};

struct views_behind {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct mark *v;
	size_t n, cap;
	atomic_size_t count; /* n, read without the lock */
	struct metrics *m;
	int fd; /* -1: in memory only */
	char *file;
	uint64_t gen;
	bool persist_warned;
	/* resync */
	pthread_t thread;
	bool started, woken;
	atomic_bool stop;
	char *proxy_url;
	bool (*cloud_ok)(void *);
	void *ctx;
};

static void mark_free(struct mark *k)
{
	free(k->component);
	free(k->group);
	free(k->version);
	free(k->resource);
	free(k->namespace);
	free(k->lsel);
	free(k->fsel);
	free(k->path);
	memset(k, 0, sizeof *k);
}

static char *dup0(const char *s)
{
	return strdup(s ? s : "");
}

/* A mark for v, selectors canonical (as the store keeps them: two
 * spellings of one selector are one view).  0 or -1 (ENOMEM). */
static int mark_init(struct mark *k, const struct store_view *v, const char *path)
{
	struct view_rec rec;
	char *err = NULL;
	memset(k, 0, sizeof *k);
	if (view_canonical(v, &rec, &err) < 0) {
		/* the store refused it too: keep the caller's words */
		free(err);
		rec.namespace = dup0(v->namespace);
		rec.label_selector = dup0(v->label_selector);
		rec.field_selector = dup0(v->field_selector);
	}
	k->namespace = rec.namespace;
	k->lsel = rec.label_selector;
	k->fsel = rec.field_selector;
	k->component = dup0(v->component);
	k->group = dup0(v->gvr.group);
	k->version = dup0(v->gvr.version);
	k->resource = dup0(v->gvr.resource);
	k->path = dup0(path);
	if (!k->namespace || !k->lsel || !k->fsel || !k->component || !k->group || !k->version ||
	    !k->resource || !k->path) {
		mark_free(k);
		return -1;
	}
	return 0;
}

static bool same_view(const struct mark *a, const struct mark *b)
{
	return !strcmp(a->component, b->component) && !strcmp(a->group, b->group) &&
	       !strcmp(a->version, b->version) && !strcmp(a->resource, b->resource) &&
	       !strcmp(a->namespace, b->namespace) && !strcmp(a->lsel, b->lsel) &&
	       !strcmp(a->fsel, b->fsel);
}

static struct mark *find_locked(struct views_behind *b, const struct mark *k)
{
	for (size_t i = 0; i < b->n; i++)
		if (same_view(&b->v[i], k))
			return &b->v[i];
	return NULL;
}

/* ---- the file ---- */

static int grow_locked(struct views_behind *b)
{
	size_t cap = b->cap ? b->cap * 2 : 8;
	struct mark *v = realloc(b->v, cap * sizeof *v);
	if (!v)
		return -1;
	b->v = v;
	b->cap = cap;
	return 0;
}

static json_t *marks_json(const struct views_behind *b)
{
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < b->n; i++) {
		const struct mark *k = &b->v[i];
		json_t *o =
		    json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:I}", "component", k->component,
			      "group", k->group, "version", k->version, "resource", k->resource,
			      "namespace", k->namespace, "labelSelector", k->lsel, "fieldSelector",
			      k->fsel, "path", k->path, "since", (json_int_t)k->since);
		if (!o || json_array_append_new(arr, o) < 0) {
			json_decref(arr);
			return NULL;
		}
	}
	json_t *doc = arr ? json_pack("{s:o}", "views", arr) : NULL;
	return doc;
}

/* Write the state into the next generation's slot; with the lock held. */
static void persist_locked(struct views_behind *b)
{
	if (b->fd < 0)
		return;
	json_t *doc = marks_json(b);
	char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	char *slot = malloc(SLOT_BYTES);
	int err = ENOMEM;
	if (text && slot) {
		size_t len = strlen(text);
		uint64_t gen = b->gen + 1;
		int h = snprintf(slot, SLOT_BYTES, "%s %" PRIu64 " %zu %08lx\n", SLOT_MAGIC, gen,
				 len, crc32(0, (const Bytef *)text, (uInt)len));
		if (h < 0 || (size_t)h + len > SLOT_BYTES) {
			err = EFBIG;
		} else {
			memcpy(slot + h, text, len);
			memset(slot + h + len, ' ', SLOT_BYTES - (size_t)h - len);
			off_t at = (off_t)(gen % 2) * SLOT_BYTES;
			ssize_t w = pwrite(b->fd, slot, SLOT_BYTES, at);
			if (w == (ssize_t)SLOT_BYTES && fdatasync(b->fd) == 0) {
				b->gen = gen;
				err = 0;
			} else {
				err = w < 0 || w == (ssize_t)SLOT_BYTES ? errno : EIO;
			}
		}
	}
	free(text);
	free(slot);
	if (err && !b->persist_warned)
		log_warn("cache: which views are behind the cloud cannot be recorded in %s: %s; "
			 "they are kept in memory (a restart forgets them)",
			 b->file, err == EFBIG ? "too many views" : strerror(err));
	b->persist_warned = err != 0;
}

static const char *jstr(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* One slot's marks into b when it is valid and newer than what b has. */
static void load_slot(struct views_behind *b, const char *slot, size_t size)
{
	char magic[32];
	uint64_t gen;
	size_t len;
	unsigned long crc;
	int h = 0;
	char head[128];
	const char *nl = memchr(slot, '\n', size < sizeof head ? size : sizeof head);
	if (!nl)
		return;
	/* the header line alone, terminated: sscanf never reads past it */
	memcpy(head, slot, (size_t)(nl - slot));
	head[nl - slot] = '\0';
	if (sscanf(head, "%31s %" SCNu64 " %zu %lx%n", magic, &gen, &len, &crc, &h) != 4 ||
	    strcmp(magic, SLOT_MAGIC) || h != nl - slot || len > size - (size_t)(nl + 1 - slot) ||
	    crc32(0, (const Bytef *)nl + 1, (uInt)len) != crc || (b->gen && gen <= b->gen))
		return;
	json_t *doc = json_loadb(nl + 1, len, 0, NULL);
	json_t *views = json_object_get(doc, "views");
	if (!json_is_array(views)) {
		json_decref(doc);
		return;
	}
	for (size_t i = 0; i < b->n; i++)
		mark_free(&b->v[i]);
	b->n = 0;
	b->gen = gen;
	size_t i;
	json_t *o;
	json_array_foreach(views, i, o)
	{
		struct store_view v = {jstr(o, "component"),
				       {jstr(o, "group"), jstr(o, "version"), jstr(o, "resource")},
				       jstr(o, "namespace"),
				       jstr(o, "labelSelector"),
				       jstr(o, "fieldSelector")};
		const char *path = jstr(o, "path");
		if (!v.component || !v.gvr.resource || !path || !*path)
			continue;
		struct mark k;
		if ((b->n == b->cap && grow_locked(b) < 0) || mark_init(&k, &v, path) < 0)
			break;
		json_t *since = json_object_get(o, "since");
		k.since = json_is_integer(since) ? (int64_t)json_integer_value(since) : 0;
		b->v[b->n++] = k;
	}
	json_decref(doc);
}

/* Both slots of a file's bytes into b; false when neither is valid. */
static bool load_slots(struct views_behind *b, const char *data, size_t len)
{
	for (size_t s = 0; s < 2 && len > s * SLOT_BYTES; s++) {
		size_t n = len - s * SLOT_BYTES;
		load_slot(b, data + s * SLOT_BYTES, n < SLOT_BYTES ? n : SLOT_BYTES);
	}
	return b->gen != 0;
}

long views_behind_decode(const char *data, size_t len,
			 void (*fn)(void *ctx, const struct view_behind_info *v), void *ctx)
{
	struct views_behind b = {.fd = -1};
	bool valid = load_slots(&b, data, len);
	for (size_t i = 0; i < b.n; i++) {
		const struct mark *k = &b.v[i];
		struct view_behind_info v = {k->component, k->group, k->version, k->resource,
					     k->namespace, k->lsel,  k->fsel,	 k->since};
		fn(ctx, &v);
	}
	long n = valid ? (long)b.n : -1;
	for (size_t i = 0; i < b.n; i++)
		mark_free(&b.v[i]);
	free(b.v);
	return n;
}

static void open_file(struct views_behind *b, const char *file)
{
	b->fd = -1;
	if (!file || !(b->file = strdup(file)))
		return;
	char *dir = strdup(file), *slash = dir ? strrchr(dir, '/') : NULL;
	if (slash && slash != dir) {
		*slash = '\0';
		if (fs_mkdir_p_at(AT_FDCWD, dir, 0700, NULL) < 0)
			log_warn("cache: %s: %s", dir, strerror(errno));
	}
	free(dir);
	int fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		log_warn("cache: which views are behind the cloud cannot be recorded in %s: %s; "
			 "they are kept in memory",
			 file, strerror(errno));
		return;
	}
	char *buf = malloc(2 * SLOT_BYTES);
	ssize_t got = buf ? pread(fd, buf, 2 * SLOT_BYTES, 0) : -1;
	if (got < 0 && buf)
		log_warn("cache: %s: %s", file, strerror(errno));
	if (got > 0 && !load_slots(b, buf, (size_t)got) && memchr(buf, '\n', (size_t)got))
		log_warn("cache: %s holds no valid record of the views behind the cloud; it is "
			 "written anew",
			 file);
	free(buf);
	b->fd = fd;
	/* both slots, now, while there is room for them */
	persist_locked(b);
	if (b->fd >= 0 && !b->persist_warned)
		persist_locked(b);
	if (b->n)
		log_warn("cache: cached views behind the cloud when the hub stopped: %zu; offline "
			 "answers of them say so until they are listed again",
			 b->n);
}

/* ---- marks ---- */

static void count_locked(struct views_behind *b)
{
	atomic_store(&b->count, b->n);
	if (b->m)
		atomic_store(&b->m->store_views_behind, (long)b->n);
}

struct views_behind *views_behind_open(const char *file, struct metrics *m)
{
	struct views_behind *b = calloc(1, sizeof *b);
	if (!b)
		return NULL;
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	int rc = pthread_cond_init(&b->cond, &attr);
	pthread_condattr_destroy(&attr);
	if (rc) {
		free(b);
		return NULL;
	}
	pthread_mutex_init(&b->lock, NULL);
	b->m = m;
	open_file(b, file);
	count_locked(b);
	return b;
}

void views_behind_free(struct views_behind *b)
{
	if (!b)
		return;
	views_behind_stop(b);
	for (size_t i = 0; i < b->n; i++)
		mark_free(&b->v[i]);
	free(b->v);
	if (b->fd >= 0 && close(b->fd) < 0)
		log_warn("cache: %s: %s", b->file, strerror(errno));
	free(b->file);
	free(b->proxy_url);
	pthread_cond_destroy(&b->cond);
	pthread_mutex_destroy(&b->lock);
	free(b);
}

void views_behind_mark(struct views_behind *b, const struct store_view *v, const char *path,
		       uint64_t rv)
{
	struct mark k;
	if (!b || mark_init(&k, v, path) < 0)
		return;
	pthread_mutex_lock(&b->lock);
	struct mark *have = find_locked(b, &k);
	if (have) {
		if (rv > have->rv)
			have->rv = rv;
		mark_free(&k);
	} else if (b->n == b->cap && grow_locked(b) < 0) {
		mark_free(&k); /* without memory: the hub is failing anyway */
	} else {
		k.rv = rv;
		k.since = (int64_t)time(NULL);
		b->v[b->n++] = k;
		log_warn("cache: the cached %s view %s%s%s%s%s of %s is behind the cloud (a write "
			 "the store could not take); offline answers say so until it is listed "
			 "again",
			 k.resource, *k.namespace ? k.namespace : "(all namespaces)",
			 *k.lsel ? " " : "", k.lsel, *k.fsel ? " " : "", k.fsel, k.component);
		count_locked(b);
		persist_locked(b);
	}
	pthread_mutex_unlock(&b->lock);
}

void views_behind_listed(struct views_behind *b, const struct store_view *v, uint64_t list_rv)
{
	struct mark k;
	if (!b || !atomic_load(&b->count) || mark_init(&k, v, "") < 0)
		return;
	pthread_mutex_lock(&b->lock);
	struct mark *have = find_locked(b, &k);
	if (have && have->rv <= list_rv) {
		log_msg('I', 0,
			"cache: the cached %s view of %s is whole again (listed at %" PRIu64 ")",
			have->resource, have->component, list_rv);
		mark_free(have);
		*have = b->v[--b->n];
		count_locked(b);
		persist_locked(b);
	}
	pthread_mutex_unlock(&b->lock);
	mark_free(&k);
}

bool views_behind_resource(struct views_behind *b, const struct store_gvr *gvr, int64_t *since)
{
	if (!b || !atomic_load(&b->count))
		return false;
	bool found = false;
	pthread_mutex_lock(&b->lock);
	for (size_t i = 0; i < b->n; i++) {
		const struct mark *k = &b->v[i];
		if (!strcmp(k->group, gvr->group ? gvr->group : "") &&
		    !strcmp(k->resource, gvr->resource ? gvr->resource : "") &&
		    (!found || k->since < *since)) {
			found = true;
			*since = k->since;
		}
	}
	pthread_mutex_unlock(&b->lock);
	return found;
}

size_t views_behind_count(struct views_behind *b)
{
	return b ? atomic_load(&b->count) : 0;
}

void views_behind_wake(struct views_behind *b)
{
	if (!b || !atomic_load(&b->count))
		return;
	pthread_mutex_lock(&b->lock);
	b->woken = true;
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

/* ---- the hub's own relist ---- */

struct relist {
	char *component, *url;
};

static size_t discard(char *data, size_t size, size_t n, void *ctx)
{
	(void)data;
	(void)ctx;
	return size * n;
}

static int stop_check(void *ctx, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	(void)dt;
	(void)dn;
	(void)ut;
	(void)un;
	struct views_behind *b = ctx;
	return atomic_load(&b->stop) ? 1 : 0;
}

static int append_param(struct buf *u, const char *name, const char *value, bool *first)
{
	if (!*value)
		return 0;
	char *e = curl_easy_escape(NULL, value, 0);
	int rc = e ? buf_printf(u, "%c%s=%s", *first ? '?' : '&', name, e) : -1;
	curl_free(e);
	*first = false;
	return rc;
}

/* The relists of every mark, with the lock held; 0 or -1 (ENOMEM). */
static int relists_locked(struct views_behind *b, struct relist **out, size_t *n)
{
	*out = calloc(b->n ? b->n : 1, sizeof **out);
	*n = 0;
	if (!*out)
		return -1;
	for (size_t i = 0; i < b->n; i++) {
		const struct mark *k = &b->v[i];
		struct buf u = BUF_INIT;
		bool first = true;
		int rc = buf_printf(&u, "%s%s", b->proxy_url, k->path);
		rc = rc ? rc : append_param(&u, "labelSelector", k->lsel, &first);
		rc = rc ? rc : append_param(&u, "fieldSelector", k->fsel, &first);
		struct relist *r = &(*out)[*n];
		if (rc < 0 || !(r->component = strdup(k->component))) {
			buf_free(&u);
			continue;
		}
		r->url = buf_steal(&u);
		(*n)++;
	}
	return 0;
}

/* One relist through the hub's own proxy port, as the view's component:
 * online, the proxy caches the cloud's answer as that view's list. */
static void relist(struct views_behind *b, const struct relist *r)
{
	CURL *h = curl_easy_init();
	if (!h)
		return;
	struct buf ua = BUF_INIT;
	struct curl_slist *hdrs = curl_slist_append(NULL, "Accept: application/json");
	long status = 0;
	CURLcode rc = CURLE_OUT_OF_MEMORY;
	if (hdrs && buf_printf(&ua, "%s/yurthub-resync", r->component) == 0 &&
	    curl_easy_setopt(h, CURLOPT_URL, r->url) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_USERAGENT, ua.data) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_TIMEOUT, RESYNC_TIMEOUT_S) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, stop_check) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_XFERINFODATA, b) == CURLE_OK)
		rc = curl_easy_perform(h);
	if (rc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	if (!atomic_load(&b->stop))
		log_msg('I', 0,
			"cache: %s listed again for %s, to bring its cached view level with "
			"the cloud: %s%ld",
			r->url, r->component, rc == CURLE_OK ? "HTTP " : curl_easy_strerror(rc),
			rc == CURLE_OK ? status : 0L);
	curl_slist_free_all(hdrs);
	buf_free(&ua);
	curl_easy_cleanup(h);
}

static void relists_free(struct relist *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].component);
		free(v[i].url);
	}
	free(v);
}

static void *resync_main(void *arg)
{
	struct views_behind *b = arg;
	int pause = 1;
	struct timespec next = {0, 0}; /* the next round, at the earliest */
	pthread_mutex_lock(&b->lock);
	while (!atomic_load(&b->stop)) {
		struct timespec now, until;
		clock_gettime(CLOCK_MONOTONIC, &now);
		until = now;
		until.tv_sec += 1; /* the cloud's state is looked at every second */
		if (!b->woken)
			pthread_cond_timedwait(&b->cond, &b->lock, &until);
		if (atomic_load(&b->stop))
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (b->woken) {
			b->woken = false;
			pause = 1;
			next = now;
		}
		if (!b->n) {
			pause = 1;
			continue;
		}
		if (now.tv_sec < next.tv_sec || !b->cloud_ok(b->ctx))
			continue;
		struct relist *v = NULL;
		size_t n = 0;
		if (relists_locked(b, &v, &n) < 0)
			continue;
		pthread_mutex_unlock(&b->lock);
		for (size_t i = 0; i < n && !atomic_load(&b->stop); i++)
			relist(b, &v[i]);
		relists_free(v, n);
		pthread_mutex_lock(&b->lock);
		/* the lists are committed by the cache's workers, a little later:
		 * a mark still there then is looked at again after the pause */
		clock_gettime(CLOCK_MONOTONIC, &next);
		next.tv_sec += pause;
		pause = pause * 2 > RESYNC_MAX_SECONDS ? RESYNC_MAX_SECONDS : pause * 2;
	}
	pthread_mutex_unlock(&b->lock);
	return NULL;
}

int views_behind_start(struct views_behind *b, const char *proxy_url, bool (*cloud_ok)(void *),
		       void *ctx)
{
	if (!b || !proxy_url || b->started)
		return b && proxy_url ? 0 : -1;
	if (!(b->proxy_url = strdup(proxy_url)))
		return -1;
	b->cloud_ok = cloud_ok;
	b->ctx = ctx;
	int rc = pthread_create(&b->thread, NULL, resync_main, b);
	if (rc) {
		log_warn("cache: the thread that relists views behind the cloud: %s", strerror(rc));
		return -1;
	}
	b->started = true;
	return 0;
}

void views_behind_stop(struct views_behind *b)
{
	if (!b || !b->started)
		return;
	pthread_mutex_lock(&b->lock);
	atomic_store(&b->stop, true);
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->lock);
	pthread_join(b->thread, NULL);
	b->started = false;
}
