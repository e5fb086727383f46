/*
 * manager.c - response bytes -> store operations, see manager.h.
 *
 * Three parts: the tee (runs in the connection's thread, decodes, queues
 * jobs), the job queues (one per worker, bounded in bytes overall), and the
 * workers (call the store).  A `stream` is what a tee and its jobs share:
 * the view, and - on the worker side only - the replace session.
 */
#include "cache/manager.h"
#include "cache/manager_internal.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cache/behind.h"
#include "cache/list_bounds.h"
#include "cache/local_changes.h"
#include "kube/meta.h"
#include "kube/selector.h"
#include "kube/stream.h"
#include "util/log.h"
#include "util/once.h"

#define QUEUE_BYTES_MAX	   (64u << 20) /* all workers together */
#define OBJECT_BYTES_MAX   (32u << 20) /* a single GET response kept for the cache */
#define INFLATE_MAX	   (512u << 20)
#define PARK_SECONDS	   120 /* a paginated list's session waits this long for its next page */
#define PARKED_MAX	   64
#define TRIM_AFTER_BYTES   (8u << 20)  /* give memory back after this much went through */
#define TRIM_IDLE_MS	   1000	       /* ... and the worker was idle this long */
#define PIECE_BYTES	   (64u << 10) /* a list's body goes to its worker in pieces this big */
#define PIECES_KEPT	   64	       /* pieces kept for the next list: 4 MiB */
#define STORE_WARN_SECONDS 10	       /* at most one warning per kind of write in this time */

enum job_kind {
	JOB_LIST_BEGIN,
	JOB_LIST_RESUME,
	JOB_LIST_BYTES, /* a piece of a list's body, decoded by the worker */
	JOB_LIST_END,	/* the body is over: commit, park or abort */
	JOB_OBJECT,
	JOB_EVENT,
	JOB_BOOKMARK,
	JOB_CLUSTER_INFO,
	JOB_FLUSH,
};

/* What a tee and its jobs share. */
struct stream {
	atomic_int refs;
	enum cache_mode mode;
	char *component, *group, *version, *resource, *namespace, *lsel, *fsel, *path;
	char *resume_token; /* LIST: continue= of the request */
	/* worker side only */
	struct store_replace *session;
	struct list_bounds *bounds; /* LIST: what the session holds, all pages so far */
	bool failed;
	/* LIST: not cached (over the bounds): the tee need not copy the rest */
	atomic_bool refused;
	/* LIST: the body is decoded by the worker, off the client's path */
	struct cache_manager *cm;
	struct gunzip *gz;
	struct list_decoder *ld; /* the session goes when its body cannot be decoded */
	/* WATCH: events queued and not yet applied, and whether one was not
	 * stored (cache_tee_settled) */
	atomic_long events_pending;
	atomic_bool failed_event;
};

/* Pieces of list bodies on their way to a worker, kept for the next ones:
 * memory that malloc has just handed back to the system costs the
 * connection copying a piece a page fault per 4 KiB. */
struct piece_pool {
	pthread_mutex_t lock;
	char *kept[PIECES_KEPT];
	int n;
};

struct job {
	enum job_kind kind;
	struct stream *st;
	char *data;
	size_t len;
	struct piece_pool *pool; /* data is a piece of it; NULL: malloc'ed */
	char *ns, *name, *token;
	uint64_t rv;
	enum watch_type type;
	bool complete;	       /* JOB_LIST_END: the body ended cleanly, every piece queued */
	struct timespec ended; /* JOB_LIST_END: when the tee saw the body's last byte */
	struct job *next;
	/* JOB_FLUSH */
	pthread_mutex_t *flush_lock;
	pthread_cond_t *flush_cond;
	int *flush_left;
};

struct worker {
	struct cache_manager *cm;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct job *head, **tail;
	bool stop, started;
};

struct parked {
	char *key; /* component + view + continue token */
	struct store_replace *session;
	struct list_bounds *bounds; /* the session's count, for its next pages */
	time_t expires;
};

/* A store that cannot write (see note_failure). */
struct store_trouble {
	pthread_mutex_t lock;
	atomic_bool failing;		    /* an I/O failure since the last write that worked */
	unsigned long failures;		    /* since the last write that worked */
	time_t last_warn[CACHE_OP_N];	    /* monotonic seconds, 0: never */
	unsigned long unlogged[CACHE_OP_N]; /* failures not logged since that warning */
};

struct cache_manager {
	struct store *store;
	struct metrics *m;
	struct worker *workers;
	int nworkers;
	pthread_mutex_t park_lock;
	struct parked parked[PARKED_MAX];
	int park_seconds; /* PARK_SECONDS; tests set it */
	struct store_trouble trouble;
	/* told of every write the store refused (cache_manager_on_failure) */
	void (*on_failure)(void *ctx, const char *component, const char *path);
	void *on_failure_ctx;
	struct local_changes *changes; /* the hub's offline edits; NULL: none */
	struct views_behind *behind;   /* views a lost write left behind; NULL: none */
	struct piece_pool pieces;
	struct list_limits list_limits; /* LIST_LIMITS_DEFAULT; tests set others */
	/* the hub stops: lists are dropped, not decoded (cache_manager_stop) */
	atomic_bool stopping;
	struct once_table skipped_logged; /* skip_object's */
};

/* ---- streams ---- */

static void stream_unref(struct stream *st)
{
	if (!st || atomic_fetch_sub(&st->refs, 1) != 1)
		return;
	store_replace_abort(st->session);
	list_bounds_free(st->bounds);
	gunzip_free(st->gz);
	list_decoder_free(st->ld);
	free(st->component);
	free(st->group);
	free(st->version);
	free(st->resource);
	free(st->namespace);
	free(st->lsel);
	free(st->fsel);
	free(st->path);
	free(st->resume_token);
	free(st);
}

static struct stream *stream_new(enum cache_mode mode, const char *component,
				 const struct request_info *ri)
{
	struct stream *st = calloc(1, sizeof *st);
	if (!st)
		return NULL;
	atomic_init(&st->refs, 1);
	st->mode = mode;
	st->component = strdup(component);
	st->group = strdup(ri->api_group ? ri->api_group : "");
	st->version = strdup(ri->api_version ? ri->api_version : "");
	st->resource = strdup(ri->resource ? ri->resource : "");
	st->namespace = strdup(ri->namespace ? ri->namespace : "");
	st->lsel = strdup(ri->label_selector ? ri->label_selector : "");
	st->fsel = strdup(ri->field_selector ? ri->field_selector : "");
	st->path = strdup(ri->path ? ri->path : "");
	st->resume_token =
	    ri->continue_token && *ri->continue_token ? strdup(ri->continue_token) : NULL;
	if (!st->component || !st->group || !st->version || !st->resource || !st->namespace ||
	    !st->lsel || !st->fsel || !st->path) {
		stream_unref(st);
		return NULL;
	}
	return st;
}

static struct store_view stream_view(const struct stream *st)
{
	struct store_view v = {st->component,
			       {st->group, st->version, st->resource},
			       st->namespace,
			       st->lsel,
			       st->fsel};
	return v;
}

/* The worker of a view: all of its streams land on one worker, in order. */
static int stream_worker(const struct cache_manager *cm, const struct stream *st)
{
	uint64_t h = 1469598103934665603ULL;
	const char *parts[] = {st->component, st->group, st->resource, st->namespace};
	for (size_t i = 0; i < 4; i++)
		for (const char *c = parts[i]; *c; c++)
			h = (h ^ (unsigned char)*c) * 1099511628211ULL;
	return (int)(h % (uint64_t)cm->nworkers);
}

/* ---- queues ---- */

/* ---- pieces ---- */

static char *piece_get(struct piece_pool *pool)
{
	char *p = NULL;

	pthread_mutex_lock(&pool->lock);
	if (pool->n)
		p = pool->kept[--pool->n];
	pthread_mutex_unlock(&pool->lock);
	return p ? p : malloc(PIECE_BYTES);
}

static void piece_put(struct piece_pool *pool, char *p)
{
	pthread_mutex_lock(&pool->lock);
	if (pool->n < PIECES_KEPT) {
		pool->kept[pool->n++] = p;
		p = NULL;
	}
	pthread_mutex_unlock(&pool->lock);
	free(p);
}

static void pieces_free(struct piece_pool *pool)
{
	pthread_mutex_lock(&pool->lock);
	while (pool->n)
		free(pool->kept[--pool->n]);
	pthread_mutex_unlock(&pool->lock);
}

static void job_free(struct job *j)
{
	if (j->kind == JOB_EVENT && j->st)
		atomic_fetch_sub(&j->st->events_pending, 1);
	if (j->pool)
		piece_put(j->pool, j->data);
	else
		free(j->data);
	free(j->ns);
	free(j->name);
	free(j->token);
	stream_unref(j->st);
	free(j);
}

/* Queue a job; false (and the job freed) when the queues are over budget. */
static bool enqueue(struct cache_manager *cm, struct job *j, bool may_drop)
{
	struct metrics *m = cm->m;
	long bytes = (long)j->len;
	if (may_drop && atomic_load(&m->cache_queue_bytes) + bytes > (long)QUEUE_BYTES_MAX) {
		job_free(j);
		return false;
	}
	atomic_fetch_add(&m->cache_queue_bytes, bytes);
	struct worker *w = &cm->workers[j->st ? stream_worker(cm, j->st) : 0];
	pthread_mutex_lock(&w->lock);
	*w->tail = j;
	w->tail = &j->next;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return true;
}

static struct job *job_new(enum job_kind kind, struct stream *st)
{
	struct job *j = calloc(1, sizeof *j);
	if (!j)
		return NULL;
	j->kind = kind;
	if (st) {
		atomic_fetch_add(&st->refs, 1);
		j->st = st;
		if (kind == JOB_EVENT) /* until job_free */
			atomic_fetch_add(&st->events_pending, 1);
	}
	return j;
}

static int job_set_data(struct job *j, const char *data, size_t len)
{
	j->data = malloc(len + 1);
	if (!j->data)
		return -1;
	memcpy(j->data, data, len);
	j->data[len] = '\0';
	j->len = len;
	return 0;
}

/* ---- the store side ---- */

enum store_err cache_object_key(struct store *s, const char *component,
				const struct request_info *ri, const char *ns, const char *name,
				struct store_key *out)
{
	struct store_key_info info = {component, ri->api_group, ri->api_version, ri->resource,
				      ns,	 name};
	return store_key_build(s, &info, out);
}

static double elapsed(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* The store itself failing (a full disk, a failing device, etcd gone), as
 * opposed to a write it refuses (bad content, an older rv). */
static bool store_broken(enum store_err e)
{
	return e == STORE_IO || e == STORE_NOMEM || e == STORE_UNAVAILABLE;
}

static time_t mono_seconds(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + 1; /* never 0: 0 is "never warned" */
}

static const char *op_name[CACHE_OP_N] = {"list", "object", "watch event", "cluster info"};

/* A store that cannot write is the operator's problem whatever -v says: a
 * warning - at most one per kind of write every STORE_WARN_SECONDS, saying
 * how many went unlogged, since a watch on a full disk fails on every event
 * - and one line when writes work again.  Refused content stays at -v 2. */
static void note_failure(struct cache_manager *cm, enum cache_op op, enum store_err e,
			 const struct stream *st)
{
	if (!store_broken(e))
		return;
	if (cm->on_failure)
		cm->on_failure(cm->on_failure_ctx, st->component, st->path);
	int err = e == STORE_IO ? store_errno() : 0;
	struct store_trouble *tr = &cm->trouble;
	time_t now = mono_seconds();
	pthread_mutex_lock(&tr->lock);
	tr->failures++;
	atomic_store(&tr->failing, true);
	bool say = !tr->last_warn[op] || now - tr->last_warn[op] >= STORE_WARN_SECONDS;
	unsigned long unlogged = tr->unlogged[op];
	if (say) {
		tr->last_warn[op] = now;
		tr->unlogged[op] = 0;
	} else {
		tr->unlogged[op]++;
	}
	pthread_mutex_unlock(&tr->lock);
	if (!say)
		return;
	char more[64] = "";
	if (unlogged)
		snprintf(more, sizeof more, " (%lu more since the last warning)", unlogged);
	log_warn("cache: the store failed, %s %s of %s not cached: %s%s%s%s%s; clients still get "
		 "their answers",
		 op_name[op], st->path, st->component, store_strerror(e), err ? " (" : "",
		 err ? strerror(err) : "", err ? ")" : "", more);
}

static void note_success(struct cache_manager *cm)
{
	struct store_trouble *tr = &cm->trouble;
	if (!atomic_load(&tr->failing))
		return;
	pthread_mutex_lock(&tr->lock);
	bool was = atomic_exchange(&tr->failing, false);
	unsigned long n = tr->failures;
	tr->failures = 0;
	memset(tr->last_warn, 0, sizeof tr->last_warn);
	memset(tr->unlogged, 0, sizeof tr->unlogged);
	pthread_mutex_unlock(&tr->lock);
	if (was) {
		log_msg('I', 0, "cache: the store writes again (%lu writes failed before)", n);
		views_behind_wake(cm->behind);
	}
}

/* A write of the stream's view that the store could not take (or that the
 * cache gave up on) leaves the view behind the cloud: said, and listed
 * again by the hub (cache/behind.h).  rv: the lost event's, 0 for a list. */
static void mark_behind(struct cache_manager *cm, const struct stream *st, uint64_t rv)
{
	struct store_view v = stream_view(st);
	views_behind_mark(cm->behind, &v, st->path, rv);
}

static void count(struct cache_manager *cm, enum cache_op op, enum store_err e,
		  const struct timespec *t0, const struct stream *st)
{
	metrics_observe(&cm->m->store_seconds, elapsed(t0));
	if (e == STORE_OK) {
		atomic_fetch_add(&cm->m->cache_writes[op], 1);
		note_success(cm);
	} else {
		atomic_fetch_add(&cm->m->cache_failures[op], 1);
		note_failure(cm, op, e, st);
	}
}

static enum store_err put_object(struct store *s, const struct store_key *k, const char *data,
				 size_t len, uint64_t rv)
{
	enum store_err e = store_update(s, k, data, len, rv, NULL);
	if (e == STORE_NOT_FOUND) {
		e = store_create(s, k, data, len);
		if (e == STORE_EXISTS)
			e = store_update(s, k, data, len, rv, NULL);
	}
	/* An older copy than the one stored is not news: that is fine. */
	return e == STORE_CONFLICT ? STORE_OK : e;
}

/* Why the store refused one object of a list or watch, when it refused
 * that object only (store_item_check: no key can name it, or it is not
 * under the view's namespace) and may go on with the others; NULL for any
 * other answer. */
static const char *refused_why(enum store_err e)
{
	switch (e) {
	case STORE_BAD_KEY:
		return "its name or namespace cannot be a store key (empty, \".\" or \"..\", "
		       "a '/' or a control byte, the prefix \"tmp_\", over 253 bytes)";
	case STORE_INVALID_CONTENT:
		return "its namespace is not the one its list or watch is of";
	case STORE_EMPTY_CONTENT:
		return "it has no bytes";
	default:
		return NULL;
	}
}

/* One object the cache cannot keep (why): left out, and only it - the
 * rest of its list or watch is stored, so that one odd object in the cloud
 * does not cost the node every other object offline.  The client got it
 * as the cloud sent it.  Counted, and logged once per object (by its
 * bytes), not every time kubelet lists it again. */
static void skip_object(struct cache_manager *cm, const struct stream *st, const char *ns,
			const char *name, const char *data, size_t len, const char *why)
{
	atomic_fetch_add(&cm->m->cache_objects_skipped, 1);
	if (!once_first(&cm->skipped_logged, data, len))
		return;
	/* the log escapes what is not printable */
	log_warn("cache: %s %s: object %s%s%s (%zu bytes) is not cached, only it: %s; clients "
		 "get it as the cloud sent it (yurthub_cache_objects_skipped_total; logged once "
		 "per object)",
		 st->component, st->path, ns && *ns ? ns : "", ns && *ns ? "/" : "",
		 name && *name ? name : "<unreadable name>", len, why);
}

/* The keys of an object for a stream: from the request, completed by the
 * object's own metadata (a create's name comes from the response). */
static enum store_err stream_key(struct cache_manager *cm, const struct stream *st, const char *ns,
				 const char *name, struct store_key *out)
{
	struct store_key_info info = {
	    st->component, st->group, st->version, st->resource, ns && *ns ? ns : st->namespace,
	    name};
	return store_key_build(cm->store, &info, out);
}

/* The cloud's copy (or deletion) of an object the hub changed while
 * offline: it replaces the local edit whatever their rvs say (a local rv
 * can be above the cloud's).  False when k is no local edit; else true,
 * with the store's answer in *e.  st: the view whose event or list brought
 * it, NULL for a single object (then held as a read's copy). */
static bool cloud_over_local(struct cache_manager *cm, const struct stream *st,
			     const struct store_key *k, enum store_event type, const char *data,
			     size_t len, uint64_t rv, enum store_err *e)
{
	if (!local_changes_is_local(cm->changes, k))
		return false;
	if (type == STORE_EVENT_DELETED) {
		*e = store_delete(cm->store, k);
		if (*e == STORE_NOT_FOUND)
			*e = STORE_OK;
	} else {
		struct store_view v = st ? stream_view(st) : (struct store_view){0};
		*e = store_view_event(cm->store, st ? &v : NULL, k, STORE_EVENT_RESTORE, data, len,
				      rv);
	}
	if (*e == STORE_OK)
		local_changes_settled(cm->changes, k);
	return true;
}

/* After a list's commit: the component's local edits in the view's
 * collection that the list lacked are gone in the cloud, when they match
 * the view's selectors (the others are another view's to settle). */
static void drop_unlisted_local_edits(struct cache_manager *cm, const struct stream *st)
{
	struct store_gvr gvr = {st->group, st->version, st->resource};
	struct local_change *v = NULL;
	long n = local_changes_of(cm->changes, st->component, &gvr, st->namespace, &v);
	struct selector *ls = NULL, *fs = NULL;
	char *why = NULL;
	if (n > 0 && (selector_parse(SELECTOR_LABEL, st->lsel, &ls, &why) < 0 ||
		      selector_parse(SELECTOR_FIELD, st->fsel, &fs, &why) < 0))
		n = 0;
	struct buf obj = BUF_INIT;
	for (long i = 0; i < n; i++) {
		struct store_key k;
		if (stream_key(cm, st, v[i].namespace, v[i].name, &k) != STORE_OK)
			continue;
		buf_reset(&obj);
		enum store_err e = store_get(cm->store, &k, &obj);
		if (e == STORE_OK && selector_match_json(ls, fs, obj.data, obj.len) == 1)
			e = store_delete(cm->store, &k);
		if (e == STORE_OK || e == STORE_NOT_FOUND)
			local_changes_settled(cm->changes, &k);
		store_key_free(&k);
	}
	buf_free(&obj);
	free(why);
	selector_free(ls);
	selector_free(fs);
	local_changes_list_free(v, n > 0 ? n : 0);
}

static void do_object(struct cache_manager *cm, struct job *j)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct kube_meta meta;
	enum store_err e = STORE_INVALID_CONTENT;
	const char *skip = NULL;
	if (kube_meta_parse(j->data, j->len, &meta) == 0 && meta.nul_in_name) {
		/* cut at the NUL, the name would be another object's key */
		skip = "a NUL byte in its name or namespace";
	} else if (meta.name && *meta.name) {
		struct store_key k;
		e = stream_key(cm, j->st, meta.namespace, meta.name, &k);
		skip = refused_why(e);
		local_changes_saw_cloud_rv(cm->changes, meta.rv, false);
		if (e == STORE_OK) {
			if (!cloud_over_local(cm, NULL, &k, STORE_EVENT_PUT, j->data, j->len,
					      meta.rv, &e))
				e = put_object(cm->store, &k, j->data, j->len, meta.rv);
			store_key_free(&k);
		}
	}
	if (skip)
		skip_object(cm, j->st, meta.namespace, meta.nul_in_name ? "" : meta.name, j->data,
			    j->len, skip);
	kube_meta_free(&meta);
	if (skip)
		return;
	count(cm, CACHE_OP_OBJECT, e, &t0, j->st);
	if (e != STORE_OK)
		log_v(2, "cache: %s %s: not stored: %s", j->st->component, j->st->path,
		      store_strerror(e));
}

static void do_event(struct cache_manager *cm, struct job *j)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct store_key k;
	enum store_err e = stream_key(cm, j->st, j->ns, j->name, &k);
	if (e == STORE_OK) {
		/* The store applies the rules of store.h: a DELETED is gone for
		 * every view of the component unless a newer copy is held. */
		struct store_view v = stream_view(j->st);
		enum store_event type =
		    j->type == WATCH_DELETED ? STORE_EVENT_DELETED : STORE_EVENT_PUT;
		local_changes_saw_cloud_rv(cm->changes, j->rv, false);
		if (!cloud_over_local(cm, j->st, &k, type, j->data, j->len, j->rv, &e))
			e = store_view_event(cm->store, &v, &k, type, j->data, j->len, j->rv);
		store_key_free(&k);
	} else if (refused_why(e)) {
		skip_object(cm, j->st, j->ns, j->name, j->data, j->len, refused_why(e));
		return;
	}
	count(cm, CACHE_OP_WATCH_EVENT, e, &t0, j->st);
	if (store_broken(e))
		mark_behind(cm, j->st, j->rv);
	if (e != STORE_OK)
		log_v(2, "cache: %s watch %s: event for %s/%s not stored: %s", j->st->component,
		      j->st->path, j->ns, j->name, store_strerror(e));
	/* the store lacks what the watch carried (not: a deletion of what it
	 * did not hold, a copy newer than this event) */
	if (e != STORE_OK && e != STORE_NOT_FOUND && e != STORE_CONFLICT)
		atomic_store(&j->st->failed_event, true);
}

/* ---- paginated lists ---- */

static char *park_key(const struct stream *st, const char *token)
{
	struct buf b = BUF_INIT;
	if (buf_printf(&b, "%s\n%s\n%s\n%s\n%s\n%s\n%s\n%s", st->component, st->group, st->version,
		       st->resource, st->namespace, st->lsel, st->fsel, token) < 0)
		return NULL;
	return buf_steal(&b);
}

/* Take the sessions whose time is up out of the table, into gone[]; the
 * caller aborts them once park_lock is released: an abort can be slow (the
 * etcd store joins its writer threads, which may be retrying), and every
 * worker that parks or resumes a list waits for this lock. */
static size_t park_take_expired_locked(struct cache_manager *cm, time_t now,
				       struct store_replace *gone[PARKED_MAX])
{
	size_t n = 0;
	for (int i = 0; i < PARKED_MAX; i++) {
		struct parked *p = &cm->parked[i];
		if (p->key && p->expires <= now) {
			gone[n++] = p->session;
			list_bounds_free(p->bounds);
			free(p->key);
			memset(p, 0, sizeof *p);
		}
	}
	return n;
}

static void abort_all(struct store_replace **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		store_replace_abort(v[i]);
}

static void park(struct cache_manager *cm, struct stream *st, const char *token)
{
	char *key = park_key(st, token);
	time_t now = mono_seconds();
	struct store_replace *gone[PARKED_MAX];
	pthread_mutex_lock(&cm->park_lock);
	size_t ngone = park_take_expired_locked(cm, now, gone);
	struct parked *slot = NULL;
	for (int i = 0; key && i < PARKED_MAX && !slot; i++)
		if (!cm->parked[i].key)
			slot = &cm->parked[i];
	if (slot) {
		slot->key = key;
		slot->session = st->session;
		slot->bounds = st->bounds;
		slot->expires = now + cm->park_seconds;
		st->session = NULL;
		st->bounds = NULL;
		key = NULL;
	}
	pthread_mutex_unlock(&cm->park_lock);
	abort_all(gone, ngone);
	free(key); /* no room: the session is aborted with the stream */
}

static struct store_replace *unpark(struct cache_manager *cm, struct stream *st, const char *token)
{
	char *key = park_key(st, token);
	struct store_replace *r = NULL, *gone[PARKED_MAX];
	pthread_mutex_lock(&cm->park_lock);
	size_t ngone = park_take_expired_locked(cm, mono_seconds(), gone);
	for (int i = 0; key && i < PARKED_MAX; i++) {
		struct parked *p = &cm->parked[i];
		if (p->key && !strcmp(p->key, key)) {
			r = p->session;
			list_bounds_free(st->bounds);
			st->bounds = p->bounds;
			free(p->key);
			memset(p, 0, sizeof *p);
			break;
		}
	}
	pthread_mutex_unlock(&cm->park_lock);
	abort_all(gone, ngone);
	free(key);
	return r;
}

void cache_manager_set_park_seconds(struct cache_manager *cm, int seconds)
{
	cm->park_seconds = seconds;
}

pthread_mutex_t *cache_manager_park_lock(struct cache_manager *cm)
{
	return &cm->park_lock;
}

/* ---- list jobs ---- */

static void list_fail(struct cache_manager *cm, struct stream *st, enum store_err e)
{
	if (!st->failed)
		log_v(1, "cache: %s list %s not stored: %s", st->component, st->path,
		      store_strerror(e));
	note_failure(cm, CACHE_OP_LIST, e, st); /* first: it reads store_errno() */
	if (store_broken(e))
		mark_behind(cm, st, 0);
	st->failed = true;
	store_replace_abort(st->session);
	st->session = NULL;
	atomic_fetch_add(&cm->m->cache_failures[CACHE_OP_LIST], 1);
}

/* A list over its bounds (list_bounds.h): not cached, said once, counted;
 * the client's answer goes on. */
static void list_refuse(struct cache_manager *cm, struct stream *st, const char *why)
{
	log_warn("cache: %s list %s not cached: %s (see docs/contracts.md); the client still gets "
		 "the cloud's answer",
		 st->component, st->path, why);
	atomic_fetch_add(&cm->m->cache_lists_refused, 1);
	store_replace_abort(st->session);
	st->session = NULL;
	atomic_store(&st->refused, true);
}

/* The hub stops: a list being decoded is dropped, not finished - one can
 * take a long while (millions of items), and a list that is not whole is
 * not stored anyway. */
static bool list_cancelled(struct cache_manager *cm, struct stream *st)
{
	if (!atomic_load(&cm->stopping))
		return false;
	if (st->session)
		log_v(1, "cache: %s list %s not cached: the hub is stopping", st->component,
		      st->path);
	store_replace_abort(st->session);
	st->session = NULL;
	return true;
}

/* One listed object into the stream's replace session. */
static void list_add_item(struct cache_manager *cm, struct stream *st,
			  const struct stream_object *o)
{
	if (!st->session || list_cancelled(cm, st))
		return;
	if (o->odd) {
		skip_object(cm, st, o->namespace, o->name, o->data, o->len, o->odd);
		return;
	}
	const char *over = st->bounds ? list_bounds_add(st->bounds, o->namespace, o->name, o->len)
				      : "out of memory";
	if (over) {
		list_refuse(cm, st, over);
		return;
	}
	struct store_item it = {o->namespace, o->name, o->rv, o->data, o->len};
	struct store_key k;
	if (cm->changes && stream_key(cm, st, o->namespace, o->name, &k) == STORE_OK) {
		/* a local edit gets the cloud's copy now; the session then finds
		 * it current */
		enum store_err le;
		if (cloud_over_local(cm, st, &k, STORE_EVENT_PUT, o->data, o->len, o->rv, &le) &&
		    le != STORE_OK)
			log_warn("cache: the cloud's %s/%s does not replace the local edit: %s",
				 o->namespace, o->name, store_strerror(le));
		store_key_free(&k);
	}
	enum store_err e = store_replace_add(st->session, &it);
	if (refused_why(e))
		skip_object(cm, st, o->namespace, o->name, o->data, o->len, refused_why(e));
	else if (e != STORE_OK)
		list_fail(cm, st, e);
}

static int on_list_item(void *ctx, const struct stream_object *item)
{
	struct stream *st = ctx;
	list_add_item(st->cm, st, item);
	return st->session ? 0 : 1; /* nothing to store it in: stop decoding */
}

static int decode_list(void *ctx, const char *data, size_t len)
{
	struct stream *st = ctx;
	return list_decoder_feed(st->ld, data, len);
}

static void list_bytes(struct cache_manager *cm, struct stream *st, const char *data, size_t len)
{
	if (!st->session || list_cancelled(cm, st))
		return; /* nothing to store it in (or undecodable): not even decoded */
	int rc = st->gz ? gunzip_feed(st->gz, data, len) : list_decoder_feed(st->ld, data, len);
	if (rc < 0 && st->session) { /* (without a session, whoever ended it said why) */
		const char *why = list_decoder_error(st->ld);
		if ((!why || !*why) && st->gz)
			why = "corrupt gzip, or more than 512 MiB inflated";
		log_v(1, "cache: %s %s: not cached: %s", st->component, st->path,
		      why && *why ? why : "decoding stopped");
		store_replace_abort(st->session);
		st->session = NULL;
	}
}

/* Is the list complete and a real list (not a Status)? */
static bool list_ok(struct stream *st, struct list_meta *meta)
{
	if ((st->gz && gunzip_finish(st->gz) < 0) || list_decoder_finish(st->ld, meta) < 0)
		return false;
	size_t n = strlen(meta->kind);
	return n >= 4 && !strcmp(meta->kind + n - 4, "List");
}

/* ended: when the list's last byte reached the hub.  From then until the
 * commit, an offline list of this view still answers from what was stored
 * before (404 for a view never listed): that lag is measured. */
static void list_commit(struct cache_manager *cm, struct stream *st, uint64_t rv,
			const struct timespec *ended)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	enum store_err e = store_replace_commit(st->session, rv);
	st->session = NULL;
	if (e == STORE_OK) {
		metrics_observe(&cm->m->commit_lag_seconds, elapsed(ended));
		local_changes_saw_cloud_rv(cm->changes, rv, true);
		drop_unlisted_local_edits(cm, st);
		struct store_view v = stream_view(st);
		views_behind_listed(cm->behind, &v, rv);
	}
	count(cm, CACHE_OP_LIST, e, &t0, st);
	if (store_broken(e))
		mark_behind(cm, st, 0);
	if (e != STORE_OK && !store_broken(e)) /* broken: count() said it */
		log_warn("cache: %s list %s not stored: %s", st->component, st->path,
			 store_strerror(e));
}

/* The body is over: a page of a paginated list parks its session for the
 * next page, the last (or only) one commits, anything else aborts. */
static void list_end(struct cache_manager *cm, struct stream *st, bool complete,
		     const struct timespec *ended)
{
	if (!st->session)
		return;
	struct list_meta meta;
	if (!complete || !list_ok(st, &meta)) {
		store_replace_abort(st->session);
		st->session = NULL;
	} else if (meta.continue_token && *meta.continue_token) {
		park(cm, st, meta.continue_token);
	} else {
		list_commit(cm, st, meta.rv, ended);
	}
}

static void do_list(struct cache_manager *cm, struct job *j)
{
	struct stream *st = j->st;
	switch (j->kind) {
	case JOB_LIST_BEGIN: {
		if (atomic_load(&cm->stopping))
			return;
		struct store_view v = stream_view(st);
		enum store_err e = store_replace_begin(cm->store, &v, &st->session);
		if (e == STORE_OK && !(st->bounds = list_bounds_new(&cm->list_limits)))
			e = STORE_NOMEM;
		if (e != STORE_OK)
			list_fail(cm, st, e);
		return;
	}
	case JOB_LIST_RESUME:
		st->session = unpark(cm, st, j->token);
		if (!st->session)
			st->failed = true; /* the first pages were not seen: nothing to do */
		return;
	case JOB_LIST_BYTES:
		list_bytes(cm, st, j->data, j->len);
		return;
	default: /* JOB_LIST_END */
		list_end(cm, st, j->complete, &j->ended);
		return;
	}
}

static void do_job(struct cache_manager *cm, struct job *j)
{
	switch (j->kind) {
	case JOB_OBJECT:
		do_object(cm, j);
		break;
	case JOB_EVENT:
		do_event(cm, j);
		break;
	case JOB_BOOKMARK: {
		struct store_view v = stream_view(j->st);
		local_changes_saw_cloud_rv(cm->changes, j->rv, false);
		enum store_err e = store_set_view_rv(cm->store, &v, j->rv);
		if (e != STORE_OK && e != STORE_NOT_FOUND)
			log_v(2, "cache: bookmark of %s not recorded: %s", j->st->path,
			      store_strerror(e));
		break;
	}
	case JOB_CLUSTER_INFO: {
		struct timespec t0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		enum store_err e = store_save_cluster_info(cm->store, j->st->path, j->data, j->len);
		count(cm, CACHE_OP_CLUSTER_INFO, e, &t0, j->st);
		break;
	}
	case JOB_FLUSH:
		pthread_mutex_lock(j->flush_lock);
		if (--*j->flush_left == 0)
			pthread_cond_signal(j->flush_cond);
		pthread_mutex_unlock(j->flush_lock);
		break;
	default:
		do_list(cm, j);
	}
}

/* The workers' waits are timed on the monotonic clock. */
static int worker_cond_init(pthread_cond_t *cond)
{
	pthread_condattr_t attr;
	int rc = pthread_condattr_init(&attr);

	if (rc)
		return rc;
	rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	if (!rc)
		rc = pthread_cond_init(cond, &attr);
	pthread_condattr_destroy(&attr);
	return rc;
}

/* With the worker's lock held and its queue empty: waits for a job, or
 * for TRIM_IDLE_MS when a big list went through since the last trim, and
 * then hands that list's memory back to the system instead of keeping the
 * peak for good.  Not as soon as the queue runs dry: a worker that decodes
 * faster than a list arrives catches up many times per list, and memory
 * given back must be faulted in again by the connection copying the next
 * piece. */
static void worker_wait(struct worker *w, size_t *since_trim)
{
	struct timespec until;

	if (*since_trim < TRIM_AFTER_BYTES) {
		pthread_cond_wait(&w->cond, &w->lock);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += (TRIM_IDLE_MS % 1000) * 1000000L;
	until.tv_sec += TRIM_IDLE_MS / 1000 + until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	if (pthread_cond_timedwait(&w->cond, &w->lock, &until) != ETIMEDOUT || w->head)
		return;
	pthread_mutex_unlock(&w->lock);
	pieces_free(&w->cm->pieces);
	malloc_trim(0);
	*since_trim = 0;
	pthread_mutex_lock(&w->lock);
}

static void *worker_main(void *p)
{
	struct worker *w = p;
	struct cache_manager *cm = w->cm;
	size_t since_trim = 0;
	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->head && !w->stop)
			worker_wait(w, &since_trim);
		if (!w->head && w->stop)
			break;
		struct job *j = w->head;
		w->head = j->next;
		if (!w->head)
			w->tail = &w->head;
		pthread_mutex_unlock(&w->lock);
		do_job(cm, j);
		since_trim += j->len;
		atomic_fetch_sub(&cm->m->cache_queue_bytes, (long)j->len);
		job_free(j);
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

void cache_manager_set_local_changes(struct cache_manager *cm, struct local_changes *lc)
{
	cm->changes = lc;
}

bool cache_manager_store_failing(struct cache_manager *cm)
{
	return atomic_load(&cm->trouble.failing);
}

void cache_manager_set_views_behind(struct cache_manager *cm, struct views_behind *b)
{
	cm->behind = b;
}

struct views_behind *cache_manager_views_behind(struct cache_manager *cm)
{
	return cm ? cm->behind : NULL;
}

void cache_manager_on_failure(struct cache_manager *cm,
			      void (*fn)(void *ctx, const char *component, const char *path),
			      void *ctx)
{
	cm->on_failure = fn;
	cm->on_failure_ctx = ctx;
}

struct cache_manager *cache_manager_new(struct store *s, struct metrics *m, int workers)
{
	struct cache_manager *cm = calloc(1, sizeof *cm);
	if (!cm)
		return NULL;
	cm->store = s;
	cm->m = m;
	cm->nworkers = workers > 0 ? workers : 1;
	cm->workers = calloc((size_t)cm->nworkers, sizeof *cm->workers);
	if (!cm->workers) {
		free(cm);
		return NULL;
	}
	pthread_mutex_init(&cm->park_lock, NULL);
	pthread_mutex_init(&cm->trouble.lock, NULL);
	pthread_mutex_init(&cm->pieces.lock, NULL);
	pthread_mutex_init(&cm->skipped_logged.lock, NULL);
	cm->park_seconds = PARK_SECONDS;
	cm->list_limits = LIST_LIMITS_DEFAULT;
	int wanted = cm->nworkers, started = 0;
	for (; started < wanted; started++) {
		struct worker *w = &cm->workers[started];
		w->cm = cm;
		w->tail = &w->head;
		pthread_mutex_init(&w->lock, NULL);
		int rc = worker_cond_init(&w->cond);
		if (rc == 0 && (rc = pthread_create(&w->thread, NULL, worker_main, w)) != 0)
			pthread_cond_destroy(&w->cond);
		if (rc != 0) {
			/* A worker that never runs would take jobs no one does, and
			 * a flush would wait for it forever: work with those that
			 * started, or fail. */
			pthread_mutex_destroy(&w->lock);
			log_warn("cache: %d of %d worker threads started: %s", started, wanted,
				 strerror(rc));
			break;
		}
		w->started = true;
	}
	cm->nworkers = started;
	if (!started) {
		cache_manager_free(cm);
		return NULL;
	}
	return cm;
}

void cache_manager_flush(struct cache_manager *cm)
{
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
	int left = cm->nworkers;
	for (int i = 0; i < cm->nworkers; i++) {
		struct job *j = job_new(JOB_FLUSH, NULL);
		if (!j) {
			left--;
			continue;
		}
		j->flush_lock = &lock;
		j->flush_cond = &cond;
		j->flush_left = &left;
		struct worker *w = &cm->workers[i];
		pthread_mutex_lock(&w->lock);
		*w->tail = j;
		w->tail = &j->next;
		pthread_cond_signal(&w->cond);
		pthread_mutex_unlock(&w->lock);
	}
	pthread_mutex_lock(&lock);
	while (left > 0)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
}

void cache_manager_stop(struct cache_manager *cm)
{
	if (cm)
		atomic_store(&cm->stopping, true);
}

void cache_manager_set_list_limits(struct cache_manager *cm, const struct list_limits *lim)
{
	cm->list_limits = *lim;
}

void cache_manager_free(struct cache_manager *cm)
{
	if (!cm)
		return;
	for (int i = 0; i < cm->nworkers; i++) {
		struct worker *w = &cm->workers[i];
		pthread_mutex_lock(&w->lock);
		w->stop = true;
		pthread_cond_signal(&w->cond);
		pthread_mutex_unlock(&w->lock);
		if (w->started)
			pthread_join(w->thread, NULL);
		for (struct job *j = w->head, *next; j; j = next) {
			next = j->next;
			job_free(j);
		}
		pthread_mutex_destroy(&w->lock);
		pthread_cond_destroy(&w->cond);
	}
	for (int i = 0; i < PARKED_MAX; i++) {
		store_replace_abort(cm->parked[i].session);
		list_bounds_free(cm->parked[i].bounds);
		free(cm->parked[i].key);
	}
	pthread_mutex_destroy(&cm->park_lock);
	pthread_mutex_destroy(&cm->trouble.lock);
	pieces_free(&cm->pieces);
	pthread_mutex_destroy(&cm->pieces.lock);
	pthread_mutex_destroy(&cm->skipped_logged.lock);
	free(cm->workers);
	free(cm);
}

/* ---- the tee ---- */

struct cache_tee {
	struct cache_manager *cm;
	struct stream *st;
	struct gunzip *gz; /* WATCH, OBJECT, DISCOVERY (a LIST's is its stream's) */
	struct watch_decoder *wd;
	struct buf body; /* OBJECT and DISCOVERY */
	char *piece;	 /* LIST: the bytes not queued yet, piece_len of them */
	size_t piece_len;
	bool dead;    /* decoding failed, or the queue budget ran out */
	bool dropped; /* dead because of the budget (counted once) */
};

static void tee_drop(struct cache_tee *t)
{
	if (!t->dropped) {
		t->dropped = true;
		atomic_fetch_add(&t->cm->m->cache_dropped, 1);
		log_warn("cache: %s %s: the store is behind, this response is not cached",
			 t->st->component, t->st->path);
		if (t->st->mode == CACHE_LIST || t->st->mode == CACHE_WATCH)
			mark_behind(t->cm, t->st, 0);
	}
	t->dead = true;
}

static int queue_item(struct cache_tee *t, enum job_kind kind, const struct stream_object *o,
		      enum watch_type type)
{
	struct job *j = job_new(kind, t->st);
	if (!j || job_set_data(j, o->data, o->len) < 0 || !(j->ns = strdup(o->namespace)) ||
	    !(j->name = strdup(o->name))) {
		if (j)
			job_free(j);
		t->dead = true;
		return -1;
	}
	j->rv = o->rv;
	j->type = type;
	if (!enqueue(t->cm, j, true)) {
		tee_drop(t);
		return -1;
	}
	return 0;
}

static int on_watch_event(void *ctx, const struct watch_event *ev)
{
	struct cache_tee *t = ctx;
	if (ev->type == WATCH_ERROR)
		return 1; /* the cache side ends here; the client still gets everything */
	if (ev->object.odd) {
		skip_object(t->cm, t->st, ev->object.namespace, ev->object.name, ev->object.data,
			    ev->object.len, ev->object.odd);
		return 0;
	}
	if (ev->type == WATCH_BOOKMARK) {
		struct job *j = job_new(JOB_BOOKMARK, t->st);
		if (!j)
			return 1;
		j->rv = ev->object.rv;
		return enqueue(t->cm, j, true) ? 0 : (tee_drop(t), 1);
	}
	return queue_item(t, JOB_EVENT, &ev->object, ev->type);
}

static int decode(void *ctx, const char *data, size_t len)
{
	struct cache_tee *t = ctx;
	switch (t->st->mode) {
	case CACHE_WATCH:
		return watch_decoder_feed(t->wd, data, len);
	default:
		if (t->body.len + len > OBJECT_BYTES_MAX)
			return -1;
		return buf_append(&t->body, data, len);
	}
}

static bool media_is_json(const char *ct)
{
	if (!ct)
		return false;
	size_t n = strcspn(ct, "; ");
	return n == 16 && !strncasecmp(ct, "application/json", 16);
}

static bool plain_json(const char *ct)
{
	/* "application/json" with at most a charset */
	return media_is_json(ct) && !strstr(ct, "as=") && !strstr(ct, "g=");
}

/* Aggregated discovery (what kubectl asks for first on /api and /apis) is
 * kept beside the plain documents, under "/aggregated-discovery<path>". */
static bool aggregated_discovery(const char *ct, const char *path)
{
	return media_is_json(ct) && strstr(ct, "as=APIGroupDiscoveryList") &&
	       (!strcmp(path, "/api") || !strcmp(path, "/apis"));
}

static bool status_cacheable(enum cache_mode mode, const struct request_info *ri, int status)
{
	if (mode == CACHE_OBJECT && ri->verb == VERB_CREATE)
		return status == 200 || status == 201;
	return status == 200;
}

struct cache_tee *cache_tee_new(struct cache_manager *cm, enum cache_mode mode,
				const char *component, const struct request_info *ri, int status,
				const char *content_type, const char *content_encoding)
{
	if (!cm || mode == CACHE_NONE || !status_cacheable(mode, ri, status))
		return NULL;
	bool aggregated = mode == CACHE_DISCOVERY && aggregated_discovery(content_type, ri->path);
	if (mode == CACHE_DISCOVERY ? !plain_json(content_type) && !aggregated
				    : !media_is_json(content_type))
		return NULL;
	bool gzip = content_encoding && !strcasecmp(content_encoding, "gzip");
	if (content_encoding && *content_encoding && !gzip &&
	    strcasecmp(content_encoding, "identity"))
		return NULL;
	struct cache_tee *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	t->cm = cm;
	t->st = stream_new(mode, component, ri);
	if (!t->st)
		goto fail;
	if (aggregated) {
		struct buf p = BUF_INIT;
		if (buf_printf(&p, "/aggregated-discovery%s", t->st->path) < 0)
			goto fail;
		free(t->st->path);
		t->st->path = buf_steal(&p);
	}
	if (mode == CACHE_LIST) {
		/* decoded by the worker: the client's bytes only get copied */
		t->st->cm = cm;
		/* an object no key can name is skipped, not the list */
		if ((t->st->ld = list_decoder_new(on_list_item, t->st)))
			list_decoder_tolerate_odd(t->st->ld);
		if (!t->st->ld ||
		    (gzip && !(t->st->gz = gunzip_new(INFLATE_MAX, decode_list, t->st))))
			goto fail;
		struct job *j =
		    job_new(t->st->resume_token ? JOB_LIST_RESUME : JOB_LIST_BEGIN, t->st);
		if (!j || (t->st->resume_token && !(j->token = strdup(t->st->resume_token)))) {
			if (j)
				job_free(j);
			goto fail;
		}
		enqueue(cm, j, false);
	} else if (gzip && !(t->gz = gunzip_new(INFLATE_MAX, decode, t))) {
		goto fail;
	} else if (mode == CACHE_WATCH) {
		if (!(t->wd = watch_decoder_new(on_watch_event, t)))
			goto fail;
		watch_decoder_tolerate_odd(t->wd);
	}
	return t;
fail:
	gunzip_free(t->gz);
	stream_unref(t->st);
	free(t);
	return NULL;
}

/* A dead tee keeps nothing: the rest of a 200 MB body (or of a watch that
 * runs for hours) passes without the decoder's buffers. */
static void tee_release(struct cache_tee *t)
{
	if (t->piece)
		piece_put(&t->cm->pieces, t->piece);
	t->piece = NULL;
	gunzip_free(t->gz);
	watch_decoder_free(t->wd);
	buf_free(&t->body);
	t->gz = NULL;
	t->wd = NULL;
}

/* Queues the tee's piece; false when the queues are over budget (the list
 * is then not cached). */
static bool queue_piece(struct cache_tee *t)
{
	struct job *j = job_new(JOB_LIST_BYTES, t->st);

	if (!j) {
		t->dead = true;
		return false;
	}
	j->data = t->piece;
	j->len = t->piece_len;
	j->pool = &t->cm->pieces;
	t->piece = NULL;
	t->piece_len = 0;
	if (!enqueue(t->cm, j, true)) {
		tee_drop(t);
		return false;
	}
	return true;
}

/* A list's body is copied for the worker into pieces, queued as they
 * fill. */
static bool queue_list_bytes(struct cache_tee *t, const char *data, size_t len)
{
	while (len) {
		size_t n;

		if (!t->piece && !(t->piece = piece_get(&t->cm->pieces))) {
			t->dead = true;
			return false;
		}
		n = PIECE_BYTES - t->piece_len < len ? PIECE_BYTES - t->piece_len : len;
		memcpy(t->piece + t->piece_len, data, n);
		t->piece_len += n;
		data += n;
		len -= n;
		if (t->piece_len == PIECE_BYTES && !queue_piece(t))
			return false;
	}
	return true;
}

void cache_tee_feed(struct cache_tee *t, const char *data, size_t len)
{
	if (!t || t->dead || !len)
		return;
	if (t->st->mode == CACHE_LIST) {
		/* a list the worker will not store (over its bounds, or the hub
		 * stops) is not copied on: its rest may be hundreds of MB */
		if (atomic_load(&t->st->refused) || atomic_load(&t->cm->stopping) ||
		    !queue_list_bytes(t, data, len)) {
			t->dead = true;
			tee_release(t);
		}
		return;
	}
	int rc = t->gz ? gunzip_feed(t->gz, data, len) : decode(t, data, len);
	if (rc < 0 && !t->dead) {
		t->dead = true;
		const char *why =
		    t->wd ? watch_decoder_error(t->wd) : "object too large or undecodable";
		if ((!why || !*why) && t->gz)
			why = "corrupt gzip, or more than 512 MiB inflated";
		log_v(1, "cache: %s %s: not cached: %s", t->st->component, t->st->path,
		      why && *why ? why : "decoding stopped");
	}
	if (t->dead)
		tee_release(t); /* not earlier: a decoder's callback may have killed it */
}

static void end_list(struct cache_tee *t, bool ok)
{
	if (ok && t->piece_len && !queue_piece(t))
		ok = false;
	struct job *j = job_new(JOB_LIST_END, t->st);
	if (!j)
		return; /* the stream's last reference aborts the session */
	j->complete = ok;
	clock_gettime(CLOCK_MONOTONIC, &j->ended);
	enqueue(t->cm, j, false);
}

static void end_body(struct cache_tee *t, bool ok)
{
	if (!ok || !t->body.len)
		return;
	struct job *j =
	    job_new(t->st->mode == CACHE_DISCOVERY ? JOB_CLUSTER_INFO : JOB_OBJECT, t->st);
	if (!j)
		return;
	j->len = t->body.len;
	j->data = buf_steal(&t->body);
	if (!enqueue(t->cm, j, true))
		tee_drop(t);
}

enum cache_tee_state cache_tee_settled(const struct cache_tee *t)
{
	if (!t || t->dead || atomic_load(&t->st->failed_event))
		return CACHE_TEE_LOST;
	return atomic_load(&t->st->events_pending) ? CACHE_TEE_BEHIND : CACHE_TEE_SETTLED;
}

void cache_tee_end(struct cache_tee *t, bool complete)
{
	if (!t)
		return;
	bool ok = complete && !t->dead;
	if (ok && t->gz && t->st->mode != CACHE_LIST && gunzip_finish(t->gz) < 0)
		ok = false;
	switch (t->st->mode) {
	case CACHE_LIST:
		end_list(t, ok);
		break;
	case CACHE_WATCH:
		if (ok)
			watch_decoder_finish(t->wd);
		break;
	default:
		end_body(t, ok);
	}
	tee_release(t);
	stream_unref(t->st);
	free(t);
}
