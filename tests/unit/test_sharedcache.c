/*
 * test_sharedcache.c - mux/: the shared in-memory cache of one pool-scope
 * resource (the multiplexer's groundwork, docs/sharing.md).
 *
 * Covered: objects (parse, key, refcount, a copy at another
 * resourceVersion); not ready before the first list; lists (a sorted
 * snapshot that shares the cache's objects and outlives later changes;
 * namespace, label and field selectors incl. spec.clusterIP and spec.type);
 * watches (every event after the rv in order; from rv 0 the current objects
 * first; 410 for an rv older than the window, by count and by age, and for a
 * watcher that fell behind; too new; replays ignored); selectors on both
 * states of an event (an object that stops matching arrives DELETED at the
 * event's rv, one that starts matching ADDED); relists turned into events
 * (added, modified, deleted at the list's rv, unchanged objects kept as the
 * same object) and an older list, or one with an object older than the
 * cache's copy (the hub's offline edit), resetting the history; bookmarks;
 * stop and close waking a blocked reader; the memory held per 1,000 objects
 * and that it does not grow with watchers (figures printed); a writer and
 * several readers in threads, each reader seeing a gap-free ordered stream
 * whose result equals the cache's final content.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__SANITIZE_ADDRESS__)
/* ASan's allocator, which mallinfo2 does not see */
size_t __sanitizer_get_current_allocated_bytes(void);
#else
#include <malloc.h>
#endif

#include "kube/meta.h"
#include "kube/selector.h"
#include "mux/obj.h"
#include "mux/sharedcache.h"
#include "util/buf.h"
#include "util/strmap.h"

#define QUICK_MS 20L	/* a wait that should time out */
#define WAIT_MS	 10000L /* what should happen at once, on a loaded machine */

static size_t heap_now(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return __sanitizer_get_current_allocated_bytes();
#else
	struct mallinfo2 m = mallinfo2();
	return m.uordblks + m.hblkhd;
#endif
}

/* ---- objects ---- */

/* A Service; pad bytes of annotation make it the size of a real one. */
static struct mux_obj *svc_pad(const char *ns, const char *name, uint64_t rv, const char *app,
			       const char *type, size_t pad)
{
	struct buf b = BUF_INIT;
	struct mux_obj *o;

	buf_printf(&b,
		   "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"%s\","
		   "\"namespace\":\"%s\",\"resourceVersion\":\"%" PRIu64 "\","
		   "\"labels\":{\"app\":\"%s\"},\"annotations\":{\"note\":\"",
		   name, ns, rv, app);
	for (size_t i = 0; i < pad; i++)
		buf_append_char(&b, (char)('a' + i % 26));
	buf_printf(&b, "\"}},\"spec\":{\"type\":\"%s\",\"clusterIP\":\"10.0.0.%" PRIu64 "\"}}",
		   type, rv % 250);
	o = mux_obj_new(b.data, b.len);
	assert_non_null(o);
	buf_free(&b);
	return o;
}

static struct mux_obj *svc(const char *ns, const char *name, uint64_t rv, const char *app)
{
	return svc_pad(ns, name, rv, app, "ClusterIP", 0);
}

static uint64_t rv_of_bytes(const struct mux_obj *o)
{
	uint64_t rv = 0;

	assert_int_equal(kube_meta_rv(o->data, o->len, &rv), 0);
	return rv;
}

static struct mux_cache *cache_with(const struct mux_cache_config *cfg, uint64_t rv, size_t n, ...)
{
	struct mux_cache *c = mux_cache_new(cfg);
	struct mux_obj **objs = calloc(n ? n : 1, sizeof(*objs));
	va_list ap;

	assert_non_null(c);
	va_start(ap, n);
	for (size_t i = 0; i < n; i++)
		objs[i] = va_arg(ap, struct mux_obj *);
	va_end(ap);
	assert_int_equal(mux_cache_replace(c, objs, n, rv), MUX_OK);
	free(objs);
	return c;
}

static void apply_ok(struct mux_cache *c, enum mux_event_type type, struct mux_obj *o)
{
	assert_int_equal(mux_cache_apply(c, type, o), MUX_OK);
}

static struct mux_watcher *watch_from(struct mux_cache *c, uint64_t rv, const struct mux_filter *f)
{
	struct mux_watch_options opts = {.from_rv = rv, .filter = f};
	struct mux_watcher *w = NULL;

	assert_int_equal(mux_watch(c, &opts, &w), MUX_OK);
	return w;
}

/* The next delivery must be type for ns/name at rv. */
static void expect(struct mux_watcher *w, enum mux_event_type type, const char *name, uint64_t rv)
{
	struct mux_delivery d;
	enum mux_status st = mux_watcher_next(w, WAIT_MS, &d);

	assert_int_equal(st, MUX_OK);
	assert_int_equal(d.type, type);
	assert_int_equal(d.rv, rv);
	if (type != MUX_BOOKMARK) {
		assert_string_equal(d.obj->name, name);
		assert_int_equal(rv_of_bytes(d.obj), rv); /* what the client reads */
	}
	mux_obj_unref(d.obj);
}

static void expect_quiet(struct mux_watcher *w)
{
	struct mux_delivery d;

	assert_int_equal(mux_watcher_next(w, QUICK_MS, &d), MUX_TIMEOUT);
	assert_null(d.obj);
}

static struct selector *parse(enum selector_kind kind, const char *text)
{
	struct selector *s = NULL;
	char *err = NULL;

	assert_int_equal(selector_parse(kind, text, &s, &err), 0);
	return s;
}

static void test_obj(void **state)
{
	const char *json = "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\","
			   "\"resourceVersion\":\"42\"},\"x\":1}";
	struct mux_obj *o = mux_obj_new(json, strlen(json)), *copy;
	char *key;

	(void)state;
	assert_non_null(o);
	assert_string_equal(o->name, "a");
	assert_string_equal(o->namespace, "ns");
	assert_int_equal(o->rv, 42);
	assert_memory_equal(o->data, json, strlen(json));
	key = mux_obj_key(o);
	assert_string_equal(key, "ns/a");
	free(key);

	copy = mux_obj_with_rv(o, 77);
	assert_non_null(copy);
	assert_int_equal(copy->rv, 77);
	assert_non_null(strstr(copy->data, "\"x\":1"));
	assert_string_equal(o->data, json); /* the original is untouched */
	mux_obj_unref(copy);

	assert_ptr_equal(mux_obj_ref(o), o);
	mux_obj_unref(o);
	mux_obj_unref(o);
	mux_obj_unref(NULL);

	/* cluster-scoped */
	json = "{\"metadata\":{\"name\":\"n\",\"resourceVersion\":\"1\"}}";
	o = mux_obj_new(json, strlen(json));
	assert_non_null(o);
	key = mux_obj_key(o);
	assert_string_equal(key, "n");
	free(key);
	mux_obj_unref(o);

	static const char *const bad[] = {
	    "{\"metadata\":{\"resourceVersion\":\"1\"}}",		 /* no name */
	    "{\"metadata\":{\"name\":\"a\"}}",				 /* no rv */
	    "{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"x\"}}", /* rv not a number */
	    "{\"metadata\":{\"name\":\"a\\u0000b\",\"resourceVersion\":\"1\"}}",
	    "[1]",
	    "{\"metadata\":",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		assert_null(mux_obj_new(bad[i], strlen(bad[i])));
		assert_int_equal(errno, EINVAL);
	}
}

static void test_not_ready(void **state)
{
	struct mux_cache *c = mux_cache_new(NULL);
	struct mux_watch_options opts = {0};
	struct mux_watcher *w;
	struct mux_list l;

	(void)state;
	assert_int_equal(mux_cache_apply(c, MUX_ADDED, svc("d", "a", 5, "web")), MUX_NOT_READY);
	assert_int_equal(mux_cache_bookmark(c, 5), MUX_NOT_READY);
	assert_int_equal(mux_cache_list(c, NULL, &l), MUX_NOT_READY);
	assert_int_equal(mux_watch(c, &opts, &w), MUX_NOT_READY);
	assert_null(w);
	assert_int_equal(mux_cache_wait_rv(c, 0, QUICK_MS), MUX_TIMEOUT);
	assert_int_equal(mux_cache_replace(c, NULL, 0, 7), MUX_OK);
	assert_int_equal(mux_cache_wait_rv(c, 0, QUICK_MS), MUX_OK);
	assert_int_equal(mux_cache_rv(c), 7);
	mux_cache_close(c);
	assert_int_equal(mux_cache_list(c, NULL, &l), MUX_CLOSED);
	assert_int_equal(mux_cache_wait_rv(c, 0, QUICK_MS), MUX_CLOSED);
	mux_cache_free(c);
}

/* ---- lists ---- */

static void test_list_snapshot(void **state)
{
	struct mux_obj *b = svc("d", "b", 11, "web");
	struct mux_cache *c =
	    cache_with(NULL, 20, 3, svc("e", "a", 10, "web"), b, svc("d", "c", 12, "db"));
	struct mux_list l, again;

	(void)state;
	assert_int_equal(mux_cache_list(c, NULL, &l), MUX_OK);
	assert_int_equal(l.rv, 20);
	assert_int_equal(l.n, 3);
	/* etcd's order: namespace, then name */
	assert_string_equal(l.objs[0]->name, "b");
	assert_string_equal(l.objs[1]->name, "c");
	assert_string_equal(l.objs[2]->name, "a");
	assert_ptr_equal(l.objs[0], b); /* shared, not copied */

	/* the snapshot keeps what it saw; the cache moves on */
	apply_ok(c, MUX_MODIFIED, svc("d", "b", 21, "web"));
	apply_ok(c, MUX_DELETED, svc("d", "c", 22, "db"));
	assert_int_equal(l.objs[0]->rv, 11);
	assert_string_equal(l.objs[1]->name, "c");
	assert_int_equal(mux_cache_list(c, NULL, &again), MUX_OK);
	assert_int_equal(again.rv, 22);
	assert_int_equal(again.n, 2);
	assert_int_equal(again.objs[0]->rv, 21);
	assert_ptr_equal(again.objs[1], l.objs[2]); /* unchanged: the same object */
	mux_list_free(&l);
	mux_list_free(&again);
	mux_cache_free(c);
}

static size_t list_count(struct mux_cache *c, const char *ns, const char *labels,
			 const char *fields)
{
	struct selector *ls = labels ? parse(SELECTOR_LABEL, labels) : NULL;
	struct selector *fs = fields ? parse(SELECTOR_FIELD, fields) : NULL;
	struct mux_filter f = {.namespace = ns, .labels = ls, .fields = fs};
	struct mux_list l;
	size_t n;

	assert_int_equal(mux_cache_list(c, &f, &l), MUX_OK);
	n = l.n;
	mux_list_free(&l);
	selector_free(ls);
	selector_free(fs);
	return n;
}

static void test_list_filters(void **state)
{
	struct mux_cache *c = cache_with(NULL, 20, 4, svc_pad("d", "a", 10, "web", "NodePort", 0),
					 svc("d", "b", 11, "db"), svc("e", "c", 12, "web"),
					 svc_pad("e", "d", 13, "x", "LoadBalancer", 0));

	(void)state;
	assert_int_equal(list_count(c, NULL, NULL, NULL), 4);
	assert_int_equal(list_count(c, "", NULL, NULL), 4);
	assert_int_equal(list_count(c, "d", NULL, NULL), 2);
	assert_int_equal(list_count(c, "nope", NULL, NULL), 0);
	assert_int_equal(list_count(c, NULL, "app=web", NULL), 2);
	assert_int_equal(list_count(c, NULL, "app!=web", NULL), 2);
	assert_int_equal(list_count(c, NULL, "app in (db,x)", NULL), 2);
	assert_int_equal(list_count(c, "e", "app=web", NULL), 1);
	assert_int_equal(list_count(c, NULL, "!app", NULL), 0);
	assert_int_equal(list_count(c, NULL, NULL, "metadata.name=b"), 1);
	assert_int_equal(list_count(c, NULL, NULL, "metadata.namespace=e"), 2);
	assert_int_equal(list_count(c, NULL, NULL, "spec.type=NodePort"), 1);
	assert_int_equal(list_count(c, NULL, NULL, "spec.type!=ClusterIP"), 2);
	assert_int_equal(list_count(c, NULL, NULL, "spec.clusterIP=10.0.0.12"), 1);
	assert_int_equal(list_count(c, NULL, "app=web", "spec.type=ClusterIP"), 1);
	mux_cache_free(c);
}

/* ---- watches ---- */

static void test_watch_order(void **state)
{
	struct mux_cache *c = cache_with(NULL, 10, 1, svc("d", "a", 10, "web"));
	struct mux_watcher *w10 = watch_from(c, 10, NULL), *w12, *w0, *wnow;

	(void)state;
	apply_ok(c, MUX_ADDED, svc("d", "b", 11, "web"));
	apply_ok(c, MUX_MODIFIED, svc("d", "a", 12, "web"));
	apply_ok(c, MUX_DELETED, svc("d", "b", 13, "web"));
	apply_ok(c, MUX_ADDED, svc("d", "a", 14, "web")); /* ADDED of a known object: a change */

	expect(w10, MUX_ADDED, "b", 11);
	expect(w10, MUX_MODIFIED, "a", 12);
	expect(w10, MUX_DELETED, "b", 13);
	expect(w10, MUX_MODIFIED, "a", 14);
	expect_quiet(w10);
	assert_int_equal(mux_watcher_progress(w10), 14);

	w12 = watch_from(c, 12, NULL);
	expect(w12, MUX_DELETED, "b", 13);
	expect(w12, MUX_MODIFIED, "a", 14);
	expect_quiet(w12);

	/* rv 0: the current state, then what follows */
	w0 = watch_from(c, 0, NULL);
	wnow = watch_from(c, 14, NULL);
	expect(w0, MUX_ADDED, "a", 14);
	apply_ok(c, MUX_ADDED, svc("d", "c", 15, "web"));
	expect(w0, MUX_ADDED, "c", 15);
	expect(wnow, MUX_ADDED, "c", 15);
	expect(w10, MUX_ADDED, "c", 15);
	expect_quiet(w0);

	mux_watcher_free(w10);
	mux_watcher_free(w12);
	mux_watcher_free(w0);
	mux_watcher_free(wnow);
	mux_cache_free(c);
}

/* A watcher's snapshot only once it has delivered every event: what its
 * client then holds, at the cache's rv, which becomes its progress. */
static void test_watcher_snapshot(void **state)
{
	struct mux_cache *c =
	    cache_with(NULL, 10, 2, svc("d", "a", 10, "web"), svc("e", "b", 10, "web"));
	struct mux_filter ns_d = {.namespace = "d"};
	struct mux_watcher *w0 = watch_from(c, 0, &ns_d), *w10 = watch_from(c, 10, &ns_d);
	struct mux_list l;

	(void)state;
	/* w0's initial objects wait: not yet */
	assert_int_equal(mux_watcher_snapshot(w0, &l), MUX_TIMEOUT);
	expect(w0, MUX_ADDED, "a", 10);
	apply_ok(c, MUX_MODIFIED, svc("d", "a", 11, "web"));
	assert_int_equal(mux_watcher_snapshot(w0, &l), MUX_TIMEOUT);
	assert_int_equal(mux_watcher_snapshot(w10, &l), MUX_TIMEOUT);
	expect(w0, MUX_MODIFIED, "a", 11);
	expect(w10, MUX_MODIFIED, "a", 11);
	mux_cache_bookmark(c, 15);
	assert_int_equal(mux_watcher_snapshot(w0, &l), MUX_OK);
	assert_int_equal(l.n, 1); /* its namespace only */
	assert_string_equal(l.objs[0]->name, "a");
	assert_int_equal(l.objs[0]->rv, 11);
	assert_int_equal(l.rv, 15);
	assert_int_equal(mux_watcher_progress(w0), 15);
	mux_list_free(&l);
	expect_quiet(w0);
	mux_watcher_free(w0);
	mux_watcher_free(w10);
	mux_cache_free(c);
}

/* The rv at which an outside version was first noted: none for the
 * first, the cache's then for each new one, unchanged by the same again. */
static void test_outside_version(void **state)
{
	struct mux_cache *c = cache_with(NULL, 10, 1, svc("d", "a", 10, "web"));

	(void)state;
	assert_int_equal(mux_cache_outside_version(c, 1), 0);
	apply_ok(c, MUX_MODIFIED, svc("d", "a", 12, "web"));
	assert_int_equal(mux_cache_outside_version(c, 1), 0);
	assert_int_equal(mux_cache_outside_version(c, 2), 12);
	apply_ok(c, MUX_MODIFIED, svc("d", "a", 13, "web"));
	assert_int_equal(mux_cache_outside_version(c, 2), 12);
	assert_int_equal(mux_cache_outside_version(c, 3), 13);
	mux_cache_free(c);
}

static void test_stale_and_unknown(void **state)
{
	struct mux_cache *c = cache_with(NULL, 10, 1, svc("d", "a", 10, "web"));
	struct mux_watcher *w = watch_from(c, 10, NULL);
	struct mux_cache_stats st;

	(void)state;
	assert_int_equal(mux_cache_apply(c, MUX_MODIFIED, svc("d", "a", 10, "db")), MUX_STALE);
	assert_int_equal(mux_cache_apply(c, MUX_MODIFIED, svc("d", "a", 9, "db")), MUX_STALE);
	assert_int_equal(mux_cache_apply(c, MUX_BOOKMARK, svc("d", "a", 19, "db")), MUX_INVALID);
	assert_int_equal(mux_cache_apply(c, MUX_ADDED, NULL), MUX_INVALID);
	/* a deletion of what the cache never had: time passes, nobody is told */
	apply_ok(c, MUX_DELETED, svc("d", "zz", 11, "web"));
	mux_cache_stats(c, &st);
	assert_int_equal(st.rv, 11);
	assert_int_equal(st.events, 0);
	assert_int_equal(st.objects, 1);
	assert_int_equal(st.watchers, 1);
	expect_quiet(w);
	assert_int_equal(mux_watcher_progress(w), 11);
	mux_watcher_free(w);
	mux_cache_free(c);
}

static void test_watch_errors(void **state)
{
	struct mux_cache_config cfg = {.max_events = 4};
	struct mux_cache *c = cache_with(&cfg, 10, 1, svc("d", "a", 10, "web"));
	struct mux_watch_options opts = {.from_rv = 11};
	struct mux_watcher *w = NULL, *slow = watch_from(c, 10, NULL);
	struct mux_delivery d;

	(void)state;
	assert_int_equal(mux_watch(c, &opts, &w), MUX_TOO_NEW);
	assert_null(w);
	opts.from_rv = 9; /* before the first list: not in the history */
	assert_int_equal(mux_watch(c, &opts, &w), MUX_EXPIRED);
	for (uint64_t rv = 11; rv <= 16; rv++)
		apply_ok(c, MUX_MODIFIED, svc("d", "a", rv, "web"));
	/* the window holds 13..16: everything after 12 */
	opts.from_rv = 11;
	assert_int_equal(mux_watch(c, &opts, &w), MUX_EXPIRED);
	w = watch_from(c, 12, NULL);
	expect(w, MUX_MODIFIED, "a", 13);
	mux_watcher_free(w);
	/* a watcher that did not keep up lost its place */
	assert_int_equal(mux_watcher_next(slow, WAIT_MS, &d), MUX_EXPIRED);
	mux_watcher_free(slow);
	mux_cache_free(c);
}

static int64_t fake_clock(void *ctx)
{
	return *(int64_t *)ctx;
}

static void test_window_age(void **state)
{
	int64_t now = 1000000;
	struct mux_cache_config cfg = {
	    .max_age_ms = 60000, .clock_ms = fake_clock, .clock_ctx = &now};
	struct mux_cache *c = cache_with(&cfg, 10, 1, svc("d", "a", 10, "web"));
	struct mux_cache_stats st;
	struct mux_watch_options opts = {.from_rv = 10};
	struct mux_watcher *w;

	(void)state;
	apply_ok(c, MUX_MODIFIED, svc("d", "a", 11, "web"));
	now += 30000;
	apply_ok(c, MUX_MODIFIED, svc("d", "a", 12, "web"));
	now += 40000; /* 11 is 70 s old, 12 is 40 s */
	apply_ok(c, MUX_MODIFIED, svc("d", "a", 13, "web"));
	mux_cache_stats(c, &st);
	assert_int_equal(st.events, 2);
	assert_int_equal(st.window_start_rv, 11);
	assert_int_equal(mux_watch(c, &opts, &w), MUX_EXPIRED);
	w = watch_from(c, 11, NULL);
	expect(w, MUX_MODIFIED, "a", 12);
	expect(w, MUX_MODIFIED, "a", 13);
	mux_watcher_free(w);
	mux_cache_free(c);
}

/* An object leaving a watcher's selection arrives as DELETED, in the last
 * state the watcher could see, at the event's resourceVersion; entering it,
 * as ADDED. */
static void test_selector_transitions(void **state)
{
	struct mux_cache *c = cache_with(NULL, 10, 1, svc("d", "a", 10, "web"));
	struct selector *web = parse(SELECTOR_LABEL, "app=web");
	struct selector *np = parse(SELECTOR_FIELD, "spec.type=NodePort");
	struct mux_filter fw = {.labels = web}, fn = {.fields = np}, other_ns = {.namespace = "e"};
	struct mux_watcher *w = watch_from(c, 10, &fw), *n = watch_from(c, 10, &fn);
	struct mux_watcher *e = watch_from(c, 10, &other_ns);
	struct mux_delivery d;

	(void)state;
	apply_ok(c, MUX_MODIFIED, svc("d", "a", 11, "web"));
	apply_ok(c, MUX_MODIFIED, svc("d", "a", 12, "db")); /* leaves */
	apply_ok(c, MUX_MODIFIED, svc("d", "a", 13, "db"));
	apply_ok(c, MUX_MODIFIED, svc("d", "a", 14, "web")); /* back */
	apply_ok(c, MUX_MODIFIED, svc_pad("d", "a", 15, "web", "NodePort", 0));
	apply_ok(c, MUX_DELETED, svc_pad("d", "a", 16, "web", "NodePort", 0));
	apply_ok(c, MUX_ADDED, svc("d", "b", 17, "db"));

	expect(w, MUX_MODIFIED, "a", 11);
	assert_int_equal(mux_watcher_next(w, WAIT_MS, &d), MUX_OK);
	assert_int_equal(d.type, MUX_DELETED);
	assert_int_equal(d.rv, 12);
	assert_int_equal(rv_of_bytes(d.obj), 12);
	assert_non_null(strstr(d.obj->data, "\"app\":\"web\"")); /* the state it saw */
	mux_obj_unref(d.obj);
	expect(w, MUX_ADDED, "a", 14);
	expect(w, MUX_MODIFIED, "a", 15);
	expect(w, MUX_DELETED, "a", 16);
	expect_quiet(w); /* b is not app=web */
	assert_int_equal(mux_watcher_progress(w), 17);

	expect(n, MUX_ADDED, "a", 15);
	expect(n, MUX_DELETED, "a", 16);
	expect_quiet(n);
	expect_quiet(e);

	mux_watcher_free(w);
	mux_watcher_free(n);
	mux_watcher_free(e);
	selector_free(web);
	selector_free(np);
	mux_cache_free(c);
}

/* ---- relists ---- */

static void test_relist_diff(void **state)
{
	struct mux_obj *a = svc("d", "a", 10, "web");
	struct mux_cache *c =
	    cache_with(NULL, 12, 3, a, svc("d", "b", 11, "web"), svc("d", "c", 12, "web"));
	struct mux_watcher *w = watch_from(c, 12, NULL);
	struct mux_obj *next[] = {svc("d", "a", 10, "web"), svc("d", "d", 18, "web"),
				  svc("d", "b", 20, "db")};
	struct mux_list l;
	struct mux_delivery d;

	(void)state;
	assert_int_equal(mux_cache_replace(c, next, 3, 25), MUX_OK);
	assert_int_equal(mux_cache_rv(c), 25);
	expect(w, MUX_ADDED, "d", 18);
	expect(w, MUX_MODIFIED, "b", 20);
	assert_int_equal(mux_watcher_next(w, WAIT_MS, &d), MUX_OK);
	assert_int_equal(d.type, MUX_DELETED);
	assert_string_equal(d.obj->name, "c");
	assert_int_equal(rv_of_bytes(d.obj), 25);
	mux_obj_unref(d.obj);
	expect_quiet(w);

	assert_int_equal(mux_cache_list(c, NULL, &l), MUX_OK);
	assert_int_equal(l.n, 3);
	assert_ptr_equal(l.objs[0], a); /* unchanged: the cache kept its copy */
	mux_list_free(&l);

	/* the same list again changes nothing */
	struct mux_obj *same[] = {svc("d", "a", 10, "web"), svc("d", "d", 18, "web"),
				  svc("d", "b", 20, "db")};
	assert_int_equal(mux_cache_replace(c, same, 3, 26), MUX_OK);
	expect_quiet(w);
	assert_int_equal(mux_watcher_progress(w), 26);

	/* a key listed twice: the later counts */
	struct mux_obj *dup[] = {svc("d", "a", 10, "web"), svc("d", "d", 18, "web"),
				 svc("d", "b", 20, "db"), svc("d", "a", 27, "db")};
	assert_int_equal(mux_cache_replace(c, dup, 4, 28), MUX_OK);
	expect(w, MUX_MODIFIED, "a", 27);
	expect_quiet(w);
	mux_watcher_free(w);
	mux_cache_free(c);
}

static void test_relist_older_resets(void **state)
{
	struct mux_cache *c = cache_with(NULL, 20, 1, svc("d", "a", 20, "web"));
	struct mux_watcher *w = watch_from(c, 20, NULL), *after;
	struct mux_obj *older[] = {svc("d", "z", 5, "web")};
	struct mux_watch_options opts = {.from_rv = 20};
	struct mux_delivery d;

	(void)state;
	assert_int_equal(mux_cache_replace(c, older, 1, 6), MUX_OK);
	assert_int_equal(mux_watcher_next(w, WAIT_MS, &d), MUX_EXPIRED);
	assert_int_equal(mux_watch(c, &opts, &after), MUX_TOO_NEW);
	after = watch_from(c, 0, NULL);
	expect(after, MUX_ADDED, "z", 5);
	apply_ok(c, MUX_ADDED, svc("d", "y", 7, "web"));
	expect(after, MUX_ADDED, "y", 7);
	mux_watcher_free(w);
	mux_watcher_free(after);
	mux_cache_free(c);
}

/* A relist with an object older than the cache's copy (the hub's own
 * offline edit, at a local rv above the cloud's): no event can take the
 * object's rv back, so the history starts again and watchers relist. */
static void test_relist_object_going_back_resets(void **state)
{
	struct mux_cache *c =
	    cache_with(NULL, 20, 2, svc("d", "a", 10, "web"), svc("d", "b", 20, "web"));
	struct mux_watcher *w = watch_from(c, 20, NULL), *later;
	struct mux_obj *relist[] = {svc("d", "a", 25, "web"), svc("d", "b", 20, "web")};
	struct mux_watch_options opts = {.from_rv = 30};
	struct mux_list l;
	struct mux_delivery d;

	(void)state;
	apply_ok(c, MUX_MODIFIED, svc("d", "a", 30, "local"));
	expect(w, MUX_MODIFIED, "a", 30);
	assert_int_equal(mux_cache_rv(c), 30);

	/* list rv 40 is newer than the cache; a at 25 is older than its copy */
	assert_int_equal(mux_cache_replace(c, relist, 2, 40), MUX_OK);
	assert_int_equal(mux_watcher_next(w, WAIT_MS, &d), MUX_EXPIRED);
	assert_null(d.obj);
	assert_int_equal(mux_cache_rv(c), 40);

	/* the list's copy is what the cache holds now */
	assert_int_equal(mux_cache_list(c, NULL, &l), MUX_OK);
	assert_int_equal(l.n, 2);
	assert_int_equal(l.rv, 40);
	assert_string_equal(l.objs[0]->name, "a");
	assert_int_equal(l.objs[0]->rv, 25);
	assert_int_equal(rv_of_bytes(l.objs[0]), 25);
	assert_non_null(strstr(l.objs[0]->data, "\"app\":\"web\""));
	mux_list_free(&l);

	/* the history before the relist is gone: a watch from it must relist */
	assert_int_equal(mux_watch(c, &opts, &later), MUX_EXPIRED);
	later = watch_from(c, 0, NULL);
	expect(later, MUX_ADDED, "a", 25);
	expect(later, MUX_ADDED, "b", 20);
	expect_quiet(later);
	mux_watcher_free(later);
	/* and from the list's rv on, the cache goes on as usual */
	later = watch_from(c, 40, NULL);
	apply_ok(c, MUX_MODIFIED, svc("d", "b", 41, "web"));
	expect(later, MUX_MODIFIED, "b", 41);
	mux_watcher_free(later);
	mux_watcher_free(w);
	mux_cache_free(c);
}

/* The same relist with every object at or above the cache's copy is
 * turned into events: the watcher carries on. */
static void test_relist_not_going_back_keeps_watchers(void **state)
{
	struct mux_cache *c =
	    cache_with(NULL, 20, 2, svc("d", "a", 10, "web"), svc("d", "b", 20, "web"));
	struct mux_watcher *w = watch_from(c, 20, NULL);
	struct mux_obj *relist[] = {svc("d", "a", 30, "local"), svc("d", "b", 35, "db"),
				    svc("d", "c", 38, "web")};
	struct mux_list l;

	(void)state;
	apply_ok(c, MUX_MODIFIED, svc("d", "a", 30, "local"));
	expect(w, MUX_MODIFIED, "a", 30);

	assert_int_equal(mux_cache_replace(c, relist, 3, 40), MUX_OK);
	expect(w, MUX_MODIFIED, "b", 35);
	expect(w, MUX_ADDED, "c", 38);
	expect_quiet(w); /* a at 30: the same object, no event */
	assert_int_equal(mux_watcher_progress(w), 40);
	assert_int_equal(mux_cache_rv(c), 40);

	assert_int_equal(mux_cache_list(c, NULL, &l), MUX_OK);
	assert_int_equal(l.n, 3);
	assert_int_equal(l.objs[0]->rv, 30);
	assert_int_equal(l.objs[1]->rv, 35);
	assert_int_equal(l.objs[2]->rv, 38);
	mux_list_free(&l);
	mux_watcher_free(w);
	mux_cache_free(c);
}

/* ---- bookmarks, stop, close ---- */

static void test_bookmarks(void **state)
{
	struct mux_cache *c = cache_with(NULL, 10, 1, svc("d", "a", 10, "web"));
	struct selector *none = parse(SELECTOR_LABEL, "app=nothing");
	struct mux_filter f = {.labels = none};
	struct mux_watch_options opts = {.from_rv = 10, .filter = &f, .bookmark_interval_ms = 30};
	struct mux_watcher *w;
	struct mux_delivery d;

	(void)state;
	assert_int_equal(mux_watch(c, &opts, &w), MUX_OK);
	/* nothing has moved: no bookmark */
	assert_int_equal(mux_watcher_next(w, 80, &d), MUX_TIMEOUT);
	apply_ok(c, MUX_MODIFIED, svc("d", "a", 11, "web"));
	apply_ok(c, MUX_MODIFIED, svc("d", "a", 12, "web"));
	expect(w, MUX_BOOKMARK, NULL, 12);		     /* filtered out, but the rv moved */
	assert_int_equal(mux_cache_bookmark(c, 30), MUX_OK); /* upstream bookmark */
	assert_int_equal(mux_cache_bookmark(c, 20), MUX_OK); /* older: ignored */
	assert_int_equal(mux_cache_rv(c), 30);
	expect(w, MUX_BOOKMARK, NULL, 30);
	assert_int_equal(mux_watcher_next(w, 80, &d), MUX_TIMEOUT);
	mux_watcher_free(w);
	selector_free(none);
	mux_cache_free(c);
}

struct blocked {
	struct mux_watcher *w;
	enum mux_status st;
};

static void *next_blocking(void *arg)
{
	struct blocked *b = arg;
	struct mux_delivery d;

	b->st = mux_watcher_next(b->w, 60000, &d);
	mux_obj_unref(d.obj);
	return NULL;
}

static void test_stop_and_close_wake(void **state)
{
	struct mux_cache *c = cache_with(NULL, 10, 0);
	struct blocked b1 = {.w = watch_from(c, 10, NULL), .st = MUX_OK};
	struct blocked b2 = {.w = watch_from(c, 10, NULL), .st = MUX_OK};
	pthread_t t1, t2;
	struct mux_watch_options opts = {0};
	struct mux_watcher *w;

	(void)state;
	assert_int_equal(pthread_create(&t1, NULL, next_blocking, &b1), 0);
	assert_int_equal(pthread_create(&t2, NULL, next_blocking, &b2), 0);
	struct timespec pause = {0, 50 * 1000000L};
	nanosleep(&pause, NULL);
	mux_watcher_stop(b1.w);
	pthread_join(t1, NULL);
	assert_int_equal(b1.st, MUX_CLOSED);
	mux_cache_close(c);
	pthread_join(t2, NULL);
	assert_int_equal(b2.st, MUX_CLOSED);
	assert_int_equal(mux_watch(c, &opts, &w), MUX_CLOSED);
	mux_watcher_free(b1.w);
	mux_watcher_free(b2.w);
	mux_cache_free(c);
}

static void *apply_later(void *arg)
{
	struct timespec pause = {0, 30 * 1000000L};

	nanosleep(&pause, NULL);
	mux_cache_apply(arg, MUX_ADDED, svc("d", "late", 11, "web"));
	return NULL;
}

static void test_wait_rv(void **state)
{
	struct mux_cache *c = cache_with(NULL, 10, 0);
	pthread_t t;

	(void)state;
	assert_int_equal(mux_cache_wait_rv(c, 11, QUICK_MS), MUX_TIMEOUT);
	assert_int_equal(pthread_create(&t, NULL, apply_later, c), 0);
	assert_int_equal(mux_cache_wait_rv(c, 11, WAIT_MS), MUX_OK);
	pthread_join(t, NULL);
	mux_cache_free(c);
}

/* ---- memory ---- */

#define MEM_OBJECTS 1000
#define MEM_PAD	    1200 /* a 1.5 KB Service */

static void fill_window(struct mux_cache *c, uint64_t from_rv)
{
	char name[32];

	for (uint64_t i = 0; i < MEM_OBJECTS; i++) {
		snprintf(name, sizeof(name), "svc-%05" PRIu64, i);
		apply_ok(c, MUX_MODIFIED,
			 svc_pad("ns", name, from_rv + 1 + i, "web", "ClusterIP", MEM_PAD));
	}
}

static void test_memory_per_watcher(void **state)
{
	struct mux_obj *objs[MEM_OBJECTS];
	struct mux_watcher *w[9];
	struct mux_cache_stats st;
	struct mux_cache *c;
	size_t h0, h1, h2, h3, h4, h5;
	char name[32];

	(void)state;
	h0 = heap_now();
	c = mux_cache_new(NULL);
	for (size_t i = 0; i < MEM_OBJECTS; i++) {
		snprintf(name, sizeof(name), "svc-%05zu", i);
		objs[i] = svc_pad("ns", name, 1000 + i, "web", "ClusterIP", MEM_PAD);
	}
	assert_int_equal(mux_cache_replace(c, objs, MEM_OBJECTS, 2000), MUX_OK);
	h1 = heap_now();
	mux_cache_stats(c, &st);
	/* a window of 1,000 events, each pinning the object's previous state */
	fill_window(c, 2000);
	h2 = heap_now();
	w[0] = watch_from(c, 2000, NULL);
	h3 = heap_now();
	for (size_t i = 1; i < 8; i++)
		w[i] = watch_from(c, 2000, NULL); /* each behind by the whole window */
	h4 = heap_now();
	w[8] = watch_from(c, 0, NULL); /* rv 0: holds the initial state's pointers */
	h5 = heap_now();

	print_message("mux memory: %d objects of %zu B JSON each: cache %zu B (%zu B/object, "
		      "%zu B above the JSON)\n",
		      MEM_OBJECTS, st.object_bytes / MEM_OBJECTS, h1 - h0, (h1 - h0) / MEM_OBJECTS,
		      (h1 - h0 - st.object_bytes) / MEM_OBJECTS);
	print_message("mux memory: + a full window of %d events: %zu B\n", MEM_OBJECTS, h2 - h1);
	print_message("mux memory: watchers behind the whole window: 1 costs %zu B, "
		      "8 cost %zu B (%zu B per watcher)\n",
		      h3 - h2, h4 - h2, (h4 - h2) / 8);
	print_message("mux memory: a watch from rv 0 before it is drained: %zu B\n", h5 - h4);
	/* objects are held once: a watcher is a place in the window, never a
	 * copy of it */
	assert_true(h4 - h2 < 8 * 1024);
	assert_true(h5 - h4 < MEM_OBJECTS * sizeof(void *) + 1024);
	assert_true(h1 - h0 < st.object_bytes + MEM_OBJECTS * 256);

	for (size_t i = 0; i < 9; i++)
		mux_watcher_free(w[i]);
	mux_cache_free(c);
	assert_true(heap_now() <= h0 + 1024); /* all given back */
}

/* ---- a writer and readers in threads ---- */

#define CC_OBJECTS 40
#define CC_EVENTS  4000
#define CC_START   100

struct shared {
	struct mux_cache *c;
	atomic_bool writer_done;
	_Atomic uint64_t final_rv;
};

struct reader {
	struct shared *sh;
	const char *labels; /* NULL: unfiltered, must see every rv */
	bool from_zero;
	struct strmap seen; /* key -> rv (num) */
	size_t events;
	bool ok;
	char why[160];
};

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *writer_main(void *arg)
{
	struct shared *sh = arg;
	bool present[CC_OBJECTS] = {0};
	uint64_t seed = 88172645463325252ULL;
	char name[32];

	for (uint64_t rv = CC_START + 1; rv <= CC_START + CC_EVENTS; rv++) {
		size_t i = (size_t)(xorshift(&seed) % CC_OBJECTS);
		uint64_t roll = xorshift(&seed) % 10;
		const char *app = roll % 2 ? "web" : "db";
		enum mux_event_type type =
		    !present[i] ? MUX_ADDED : (roll < 7 ? MUX_MODIFIED : MUX_DELETED);

		snprintf(name, sizeof(name), "o%zu", i);
		/* svc() asserts only when the test's own JSON is wrong */
		if (mux_cache_apply(sh->c, type, svc("ns", name, rv, app)) != MUX_OK)
			abort();
		present[i] = type != MUX_DELETED;
		if (rv % 500 == 0)
			mux_cache_bookmark(sh->c, rv); /* no-op: already there */
	}
	atomic_store(&sh->final_rv, (uint64_t)(CC_START + CC_EVENTS));
	atomic_store(&sh->writer_done, true);
	return NULL;
}

/* cmocka's assertions must not run off the main thread: readers note
 * what went wrong and the main thread fails on it. */
static bool reader_fail(struct reader *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
	r->ok = false;
	return false;
}

/* Check one delivery's place and keep its effect. */
static bool take_delivery(struct reader *r, const struct mux_delivery *d)
{
	char *key = mux_obj_key(d->obj);
	uint64_t rv = 0;

	if (!key)
		return reader_fail(r, "out of memory");
	if (kube_meta_rv(d->obj->data, d->obj->len, &rv) < 0 || rv != d->rv) {
		free(key);
		return reader_fail(r, "bytes at rv %" PRIu64 ", event at %" PRIu64, rv, d->rv);
	}
	if (d->type == MUX_DELETED)
		strmap_del(&r->seen, key);
	else
		strmap_put(&r->seen, key, NULL)->num = d->rv;
	free(key);
	r->events++;
	return true;
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	struct selector *ls = NULL;
	struct mux_filter f = {0};
	struct mux_watch_options opts = {.from_rv = r->from_zero ? 0 : CC_START, .filter = &f};
	struct mux_watcher *w = NULL;
	uint64_t last = CC_START, start;
	char *err = NULL;

	r->ok = true;
	if (r->labels && selector_parse(SELECTOR_LABEL, r->labels, &ls, &err) < 0) {
		free(err);
		reader_fail(r, "selector");
		return NULL;
	}
	f.labels = ls;
	if (mux_watch(r->sh->c, &opts, &w) != MUX_OK) {
		reader_fail(r, "watch refused");
		goto out;
	}
	start = mux_watcher_progress(w); /* from rv 0: the initial state's rv */
	last = start;
	for (;;) {
		struct mux_delivery d;
		enum mux_status st = mux_watcher_next(w, 50, &d);

		if (st == MUX_TIMEOUT) {
			if (atomic_load(&r->sh->writer_done) &&
			    mux_watcher_progress(w) >= atomic_load(&r->sh->final_rv))
				break;
			continue;
		}
		if (st != MUX_OK) {
			reader_fail(r, "next: %s", mux_status_name(st));
			break;
		}
		if (d.rv <= start) {
			/* the initial state of a watch from 0: ADDED, in any order */
			if (!r->from_zero || d.type != MUX_ADDED)
				reader_fail(r, "rv %" PRIu64 " at or before the start", d.rv);
		} else {
			if (d.rv <= last)
				reader_fail(r, "rv %" PRIu64 " after %" PRIu64, d.rv, last);
			else if (!r->labels && d.rv != last + 1)
				reader_fail(r, "gap: rv %" PRIu64 " after %" PRIu64, d.rv, last);
			last = d.rv;
		}
		if (r->ok)
			take_delivery(r, &d);
		mux_obj_unref(d.obj);
		if (!r->ok)
			break;
	}
out:
	mux_watcher_free(w);
	selector_free(ls);
	return NULL;
}

struct lister {
	struct shared *sh;
	size_t lists;
	bool ok;
};

static void *lister_main(void *arg)
{
	struct lister *l = arg;
	uint64_t last_rv = 0;

	l->ok = true;
	while (!atomic_load(&l->sh->writer_done)) {
		struct mux_list list;

		if (mux_cache_list(l->sh->c, NULL, &list) != MUX_OK) {
			l->ok = false;
			break;
		}
		if (list.rv < last_rv)
			l->ok = false;
		for (size_t i = 1; i < list.n; i++)
			if (strcmp(list.objs[i - 1]->name, list.objs[i]->name) >= 0)
				l->ok = false;
		for (size_t i = 0; i < list.n; i++)
			if (list.objs[i]->rv > list.rv)
				l->ok = false;
		last_rv = list.rv;
		mux_list_free(&list);
		l->lists++;
	}
	return NULL;
}

/* What a reader ended with must be the cache's final content, filtered. */
static void check_final(struct reader *r, struct mux_cache *c)
{
	struct selector *ls = r->labels ? parse(SELECTOR_LABEL, r->labels) : NULL;
	struct mux_filter f = {.labels = ls};
	struct mux_list l;

	assert_int_equal(mux_cache_list(c, &f, &l), MUX_OK);
	assert_int_equal(l.n, r->seen.len);
	for (size_t i = 0; i < l.n; i++) {
		char *key = mux_obj_key(l.objs[i]);
		struct strmap_entry *e = strmap_get(&r->seen, key);

		assert_non_null(e);
		assert_int_equal(e->num, l.objs[i]->rv);
		free(key);
	}
	mux_list_free(&l);
	selector_free(ls);
	strmap_free(&r->seen);
}

static void test_concurrent_readers(void **state)
{
	/* a window that holds the whole run: no reader may expire */
	struct mux_cache_config cfg = {.max_events = CC_EVENTS + 10, .max_age_ms = -1};
	struct shared sh = {.c = cache_with(&cfg, CC_START, 0)};
	struct reader readers[] = {
	    {.sh = &sh},
	    {.sh = &sh},
	    {.sh = &sh, .labels = "app=web"},
	    {.sh = &sh, .labels = "app!=web"},
	    {.sh = &sh, .from_zero = true},
	};
	enum { NREADERS = sizeof(readers) / sizeof(readers[0]) };
	pthread_t rt[NREADERS], wt, lt;
	struct lister lister = {.sh = &sh};

	(void)state;
	for (size_t i = 0; i < NREADERS; i++) {
		if (i == NREADERS - 1) /* the rv-0 reader joins half way */
			assert_int_equal(pthread_create(&wt, NULL, writer_main, &sh), 0);
		assert_int_equal(pthread_create(&rt[i], NULL, reader_main, &readers[i]), 0);
	}
	assert_int_equal(pthread_create(&lt, NULL, lister_main, &lister), 0);
	pthread_join(wt, NULL);
	for (size_t i = 0; i < NREADERS; i++) {
		pthread_join(rt[i], NULL);
		if (!readers[i].ok)
			fail_msg("reader %zu: %s", i, readers[i].why);
		print_message("mux concurrency: reader %zu (%s%s) got %zu events\n", i,
			      readers[i].labels ? readers[i].labels : "all",
			      readers[i].from_zero ? ", from rv 0" : "", readers[i].events);
		check_final(&readers[i], sh.c);
	}
	pthread_join(lt, NULL);
	assert_true(lister.ok);
	assert_int_equal(readers[0].events, CC_EVENTS);
	assert_int_equal(readers[1].events, CC_EVENTS);
	print_message("mux concurrency: %zu lists alongside\n", lister.lists);
	mux_cache_free(sh.c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_obj),
	    cmocka_unit_test(test_not_ready),
	    cmocka_unit_test(test_list_snapshot),
	    cmocka_unit_test(test_list_filters),
	    cmocka_unit_test(test_watch_order),
	    cmocka_unit_test(test_watcher_snapshot),
	    cmocka_unit_test(test_outside_version),
	    cmocka_unit_test(test_stale_and_unknown),
	    cmocka_unit_test(test_watch_errors),
	    cmocka_unit_test(test_window_age),
	    cmocka_unit_test(test_selector_transitions),
	    cmocka_unit_test(test_relist_diff),
	    cmocka_unit_test(test_relist_older_resets),
	    cmocka_unit_test(test_relist_object_going_back_resets),
	    cmocka_unit_test(test_relist_not_going_back_keeps_watchers),
	    cmocka_unit_test(test_bookmarks),
	    cmocka_unit_test(test_stop_and_close_wake),
	    cmocka_unit_test(test_wait_rv),
	    cmocka_unit_test(test_memory_per_watcher),
	    cmocka_unit_test(test_concurrent_readers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
