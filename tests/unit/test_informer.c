/*
 * test_informer.c - informer/: list and watch against the kube-apiserver
 * test double (tests/double/apiserver.py, started on free ports by
 * tests/lib/double_proc.c and changed through its control port).
 *
 * A consumer in the test keeps what the callbacks say (objects by
 * namespace/name, with their resourceVersion and bytes) and a trace of the
 * callbacks, one letter each (B begin, U upsert, D delete, E end, A abort),
 * and the test waits on its condition variable with a deadline for what it
 * expects.  Covered: the first list and the watch's ADDED, MODIFIED and
 * DELETED; selectors (labels, fields; NodePools and NodeBuckets); a watch
 * cut and resumed without a list; a relist after the history was compacted
 * under a cut watch, which reports an object deleted meanwhile as gone by the
 * list's end; a list cut half way (abort, nothing dropped, then a full
 * list); a resource the server does not serve (404: synced, empty); stopping
 * while a watch is open, while a list hangs and while backing off, each
 * well under a second; a 2000-pod list in bounded memory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__SANITIZE_ADDRESS__)
/* ASan's allocator, which mallinfo2 does not see (its header,
 * sanitizer/allocator_interface.h, is not always installed) */
size_t __sanitizer_get_current_allocated_bytes(void);
#else
#include <malloc.h>
#endif

#include "informer/informer.h"
#include "util/buf.h"
#include "util/log.h"
#include "double_proc.h"

#define UA	   "yurthub/test"
#define WAIT_MS	   30000L /* what should happen at once, on a loaded machine */
#define PROMPT_MS  500L	  /* informer_stop must be well under a second */
#define BIG_PODS   2000
#define HEAP_BOUND (1L << 20)

static struct double_proc g_double; /* --node n1 --node n2 --pool hz */

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static size_t heap_now(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return __sanitizer_get_current_allocated_bytes();
#else
	struct mallinfo2 m = mallinfo2();
	return m.uordblks + m.hblkhd;
#endif
}

/* ---- the consumer ---- */

struct entry {
	char *key, *rv, *data;
	bool seen; /* in the list under way */
};

struct consumer {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC; broadcast on every callback */
	bool count_only;     /* keep nothing but counts (the big list) */
	struct entry *e;
	size_t n, cap;
	bool in_list;
	unsigned begins, ends, aborts, upserts, deletes, errors;
	size_t listed; /* objects of the last list */
	size_t bytes;  /* of all objects */
	size_t heap_at_begin, heap_peak;
	struct buf trace; /* B U D E A, one per callback */
	struct buf gone;  /* ",key," for each key dropped by a list's end */
};

static void consumer_init(struct consumer *c, bool count_only)
{
	memset(c, 0, sizeof *c);
	c->count_only = count_only;
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &ca);
	pthread_condattr_destroy(&ca);
}

static void entry_free(struct entry *e)
{
	free(e->key);
	free(e->rv);
	free(e->data);
}

static void consumer_free(struct consumer *c)
{
	for (size_t i = 0; i < c->n; i++)
		entry_free(&c->e[i]);
	free(c->e);
	buf_free(&c->trace);
	buf_free(&c->gone);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
}

static struct entry *find(struct consumer *c, const char *key)
{
	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->e[i].key, key))
			return &c->e[i];
	return NULL;
}

static void drop(struct consumer *c, struct entry *e)
{
	entry_free(e);
	*e = c->e[--c->n];
}

static void on_begin(void *ctx)
{
	struct consumer *c = ctx;
	pthread_mutex_lock(&c->lock);
	if (c->in_list)
		c->errors++;
	c->in_list = true;
	c->begins++;
	c->listed = 0;
	for (size_t i = 0; i < c->n; i++)
		c->e[i].seen = false;
	buf_append_char(&c->trace, 'B');
	c->heap_at_begin = c->heap_peak = heap_now();
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void on_object(void *ctx, enum informer_event ev, const struct stream_object *o)
{
	struct consumer *c = ctx;
	pthread_mutex_lock(&c->lock);
	c->bytes += o->len;
	if (c->in_list)
		c->listed++;
	if (c->count_only) {
		size_t h = heap_now();
		if (h > c->heap_peak)
			c->heap_peak = h;
		c->upserts++;
		pthread_mutex_unlock(&c->lock);
		return;
	}
	if (c->in_list && ev != INFORMER_UPSERT)
		c->errors++;
	/* no cmocka asserts here: they cannot jump out of the informer's thread */
	char *key = *o->namespace ? str_printf("%s/%s", o->namespace, o->name) : strdup(o->name);
	if (!key) {
		c->errors++;
		pthread_mutex_unlock(&c->lock);
		return;
	}
	struct entry *e = find(c, key);
	if (ev == INFORMER_DELETE) {
		c->deletes++;
		buf_append_char(&c->trace, 'D');
		if (e)
			drop(c, e);
		else
			c->errors++; /* a delete of what was never there */
		free(key);
	} else {
		c->upserts++;
		buf_append_char(&c->trace, 'U');
		if (!e) {
			if (c->n == c->cap) {
				size_t cap = c->cap ? c->cap * 2 : 16;
				struct entry *grown = realloc(c->e, cap * sizeof *c->e);
				if (!grown) {
					c->errors++;
					free(key);
					pthread_mutex_unlock(&c->lock);
					return;
				}
				c->e = grown;
				c->cap = cap;
			}
			e = &c->e[c->n++];
			memset(e, 0, sizeof *e);
			e->key = key;
		} else {
			free(key);
			free(e->rv);
			free(e->data);
		}
		e->rv = strdup(o->resource_version);
		e->data = strndup(o->data, o->len);
		e->seen = true;
		if (!e->rv || !e->data)
			c->errors++;
	}
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void on_end(void *ctx)
{
	struct consumer *c = ctx;
	pthread_mutex_lock(&c->lock);
	if (!c->in_list)
		c->errors++;
	for (size_t i = 0; i < c->n;) {
		if (c->e[i].seen) {
			i++;
			continue;
		}
		buf_printf(&c->gone, ",%s,", c->e[i].key);
		drop(c, &c->e[i]);
	}
	c->in_list = false;
	c->ends++;
	buf_append_char(&c->trace, 'E');
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void on_abort(void *ctx)
{
	struct consumer *c = ctx;
	pthread_mutex_lock(&c->lock);
	if (!c->in_list)
		c->errors++;
	c->in_list = false; /* everything is kept */
	c->aborts++;
	buf_append_char(&c->trace, 'A');
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

typedef bool (*cond_fn)(struct consumer *c, const void *arg);

/* Wait until f holds (checked under the lock); false after ms. */
static bool wait_for(struct consumer *c, cond_fn f, const void *arg, long ms)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&c->lock);
	bool ok;
	while (!(ok = f(c, arg)))
		if (pthread_cond_timedwait(&c->cond, &c->lock, &until) == ETIMEDOUT) {
			ok = f(c, arg);
			break;
		}
	pthread_mutex_unlock(&c->lock);
	if (!ok)
		fprintf(stderr, "timed out; trace %s\n", buf_cstr(&c->trace));
	return ok;
}

static bool ended(struct consumer *c, const void *arg)
{
	return c->ends >= *(const unsigned *)arg;
}

static bool has(struct consumer *c, const void *key)
{
	return find(c, key) != NULL;
}

static bool lacks(struct consumer *c, const void *key)
{
	return find(c, key) == NULL;
}

struct key_rv {
	const char *key;
	long rv;
};

static bool has_rv(struct consumer *c, const void *arg)
{
	const struct key_rv *k = arg;
	struct entry *e = find(c, k->key);
	return e && strtol(e->rv, NULL, 10) == k->rv;
}

static void wait_ends(struct consumer *c, unsigned n)
{
	assert_true(wait_for(c, ended, &n, WAIT_MS));
}

/* informer_synced turns true just after on_list_end returns, and nothing
 * signals it: poll it, with a deadline. */
static void wait_synced(const struct informer *inf)
{
	long deadline = now_ms() + WAIT_MS;
	while (!informer_synced(inf) && now_ms() < deadline)
		sleep_ms(5);
	assert_true(informer_synced(inf));
}

static unsigned locked_count(struct consumer *c, const unsigned *field)
{
	pthread_mutex_lock(&c->lock);
	unsigned v = *field;
	pthread_mutex_unlock(&c->lock);
	return v;
}

static struct informer *start(struct consumer *c, const char *base, const char *path,
			      const char *query)
{
	struct informer_spec spec = {
	    .path = path,
	    .query = query,
	    .on_list_begin = on_begin,
	    .on_object = on_object,
	    .on_list_end = on_end,
	    .on_list_abort = on_abort,
	    .ctx = c,
	};
	struct informer *inf = informer_start(base, UA, &spec);
	assert_non_null(inf);
	return inf;
}

/* Stop and check that it took well under a second. */
static void stop_promptly(struct informer *inf, const char *when)
{
	long t0 = now_ms();
	informer_stop(inf);
	long took = now_ms() - t0;
	if (took >= PROMPT_MS)
		fprintf(stderr, "informer_stop %s took %ld ms\n", when, took);
	assert_true(took < PROMPT_MS);
}

/* ---- the double ---- */

static long ctl(const char *method, const char *path, const char *body)
{
	long code = double_ctl(&g_double, method, path, body, NULL);
	if (code != 200)
		fprintf(stderr, "control %s %s: %ld\n", method, path, code);
	return code;
}

/* Create or replace a ConfigMap; its new resourceVersion. */
static long put_cm(const char *ns, const char *name, const char *labels, const char *data)
{
	char *body = str_printf("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{"
				"\"name\":\"%s\",\"namespace\":\"%s\",\"labels\":%s},\"data\":%s}",
				name, ns, labels ? labels : "{}", data ? data : "{}");
	struct buf out = BUF_INIT;
	assert_int_equal(double_ctl(&g_double, "POST", "/objects", body, &out), 200);
	json_t *j = json_loadb(out.data, out.len, 0, NULL);
	long rv = (long)json_integer_value(json_object_get(j, "rv"));
	json_decref(j);
	buf_free(&out);
	free(body);
	assert_true(rv > 0);
	return rv;
}

static void delete_cm(const char *ns, const char *name)
{
	char *path =
	    str_printf("/objects?apiVersion=v1&kind=ConfigMap&namespace=%s&name=%s", ns, name);
	assert_int_equal(ctl("DELETE", path, NULL), 200);
	free(path);
}

/* A counter of GET /state: state[field][key], 0 when absent. */
static long state_count(struct double_proc *d, const char *field, const char *key)
{
	struct buf out = BUF_INIT;
	assert_int_equal(double_ctl(d, "GET", "/state", NULL, &out), 200);
	json_t *j = json_loadb(out.data, out.len, 0, NULL);
	assert_non_null(j);
	long v = (long)json_integer_value(json_object_get(json_object_get(j, field), key));
	json_decref(j);
	buf_free(&out);
	return v;
}

/* Poll the double (another process: there is nothing to wait on) until the
 * counter reaches at least n; false after ms. */
static bool wait_count(struct double_proc *d, const char *field, const char *key, long n, long ms)
{
	long deadline = now_ms() + ms;
	for (;;) {
		if (state_count(d, field, key) >= n)
			return true;
		if (now_ms() >= deadline)
			return false;
		sleep_ms(20);
	}
}

/* The number of objects of a kind the double holds. */
static size_t double_objects(const char *api_version, const char *kind)
{
	char *path = str_printf("/objects?apiVersion=%s&kind=%s", api_version, kind);
	struct buf out = BUF_INIT;
	assert_int_equal(double_ctl(&g_double, "GET", path, NULL, &out), 200);
	json_t *j = json_loadb(out.data, out.len, 0, NULL);
	size_t n = json_array_size(json_object_get(j, "items"));
	json_decref(j);
	buf_free(&out);
	free(path);
	return n;
}

/* ---- the tests ---- */

static void test_query_escape(void **state)
{
	(void)state;
	char *s = informer_query_escape("openyurt.io/pool-name=hz,a in (b c)");
	assert_string_equal(s, "openyurt.io%2Fpool-name%3Dhz%2Ca%20in%20%28b%20c%29");
	free(s);
	s = informer_query_escape("");
	assert_string_equal(s, "");
	free(s);
}

static void test_list_then_events(void **state)
{
	(void)state;
	struct consumer c;
	consumer_init(&c, false);
	assert_int_equal(ctl("POST", "/reset-counters", NULL), 200);
	struct informer *inf = start(&c, g_double.base, "/api/v1/configmaps", NULL);
	wait_ends(&c, 1);
	wait_synced(inf);
	pthread_mutex_lock(&c.lock);
	assert_int_equal(c.n, double_objects("v1", "ConfigMap"));
	assert_non_null(find(&c, "kube-system/coredns"));
	assert_non_null(find(&c, "kube-public/kube-root-ca.crt"));
	pthread_mutex_unlock(&c.lock);

	struct key_rv k = {"default/ev-1", put_cm("default", "ev-1", NULL, "{\"a\":\"1\"}")};
	assert_true(wait_for(&c, has_rv, &k, WAIT_MS));
	k.rv = put_cm("default", "ev-1", NULL, "{\"a\":\"2\"}");
	assert_true(wait_for(&c, has_rv, &k, WAIT_MS));
	pthread_mutex_lock(&c.lock);
	assert_non_null(strstr(find(&c, "default/ev-1")->data, "\"data\":{\"a\":\"2\"}"));
	pthread_mutex_unlock(&c.lock);
	delete_cm("default", "ev-1");
	assert_true(wait_for(&c, lacks, "default/ev-1", WAIT_MS));

	pthread_mutex_lock(&c.lock);
	assert_string_equal(c.trace.data + c.trace.len - 4, "EUUD");
	assert_int_equal(c.begins, 1);
	assert_int_equal(c.ends, 1);
	assert_int_equal(c.aborts, 0);
	assert_int_equal(c.deletes, 1);
	assert_int_equal(c.errors, 0);
	pthread_mutex_unlock(&c.lock);
	/* one list and one watch, as yurthub: the hub caches them under its name */
	assert_int_equal(state_count(&g_double, "requests_by_verb_path", "list /api/v1/configmaps"),
			 1);
	assert_int_equal(
	    state_count(&g_double, "requests_by_verb_path", "watch /api/v1/configmaps"), 1);
	assert_int_equal(state_count(&g_double, "requests_by_user_agent", "yurthub"), 2);
	informer_stop(inf);
	consumer_free(&c);
}

/* An object with a NUL in its name (no consumer can key it) is left out of
 * the watch and of the list, counted, and only it: the events after it and
 * the rest of the list still reach the consumer, without a relist. */
static void test_odd_name_skipped(void **state)
{
	(void)state;
	struct consumer c;
	consumer_init(&c, false);
	struct informer *inf = start(&c, g_double.base, "/api/v1/configmaps", NULL);
	wait_ends(&c, 1);
	pthread_mutex_lock(&c.lock);
	size_t listed = c.n;
	pthread_mutex_unlock(&c.lock);
	unsigned long long skipped = informer_objects_skipped_total();
	/* not put_cm: jansson refuses the NUL in the answer's name */
	assert_int_equal(ctl("POST", "/objects",
			     "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{"
			     "\"name\":\"odd\\u0000nul\",\"namespace\":\"default\"}}"),
			 200);
	struct key_rv k = {"default/after-odd", put_cm("default", "after-odd", NULL, NULL)};
	assert_true(wait_for(&c, has_rv, &k, WAIT_MS));
	assert_int_equal(informer_objects_skipped_total(), skipped + 1);
	pthread_mutex_lock(&c.lock);
	assert_int_equal(c.begins, 1);
	assert_int_equal(c.errors, 0);
	pthread_mutex_unlock(&c.lock);
	informer_stop(inf);
	consumer_free(&c);

	/* a fresh list holding it */
	consumer_init(&c, false);
	inf = start(&c, g_double.base, "/api/v1/configmaps", NULL);
	wait_ends(&c, 1);
	pthread_mutex_lock(&c.lock);
	assert_non_null(find(&c, "default/after-odd"));
	assert_int_equal(c.n, listed + 1); /* after-odd, and not odd */
	assert_int_equal(c.aborts, 0);
	pthread_mutex_unlock(&c.lock);
	assert_int_equal(informer_objects_skipped_total(), skipped + 2);
	informer_stop(inf);
	consumer_free(&c);
	delete_cm("default", "odd%00nul");
	delete_cm("default", "after-odd");
}

static void test_selectors(void **state)
{
	(void)state;
	/* labels, on a watch too: leaving the selector is a DELETED */
	struct consumer c;
	consumer_init(&c, false);
	char *sel = informer_query_escape("team=a");
	char *q = str_printf("labelSelector=%s", sel);
	struct informer *inf = start(&c, g_double.base, "/api/v1/configmaps", q);
	wait_ends(&c, 1);
	pthread_mutex_lock(&c.lock);
	assert_int_equal(c.n, 0);
	pthread_mutex_unlock(&c.lock);
	put_cm("default", "sel-a", "{\"team\":\"a\"}", NULL);
	put_cm("default", "sel-b", "{\"team\":\"b\"}", NULL);
	put_cm("default", "sel-c", "{\"team\":\"a\"}", NULL);
	/* events come in order: sel-b would have come before sel-c */
	assert_true(wait_for(&c, has, "default/sel-c", WAIT_MS));
	pthread_mutex_lock(&c.lock);
	assert_non_null(find(&c, "default/sel-a"));
	assert_null(find(&c, "default/sel-b"));
	pthread_mutex_unlock(&c.lock);
	put_cm("default", "sel-a", "{\"team\":\"b\"}", NULL);
	assert_true(wait_for(&c, lacks, "default/sel-a", WAIT_MS));
	assert_int_equal(locked_count(&c, &c.deletes), 1);
	informer_stop(inf);
	consumer_free(&c);
	free(q);
	free(sel);
	delete_cm("default", "sel-a");
	delete_cm("default", "sel-b");
	delete_cm("default", "sel-c");

	/* fields: one node of two */
	consumer_init(&c, false);
	inf = start(&c, g_double.base, "/api/v1/nodes", "fieldSelector=metadata.name%3Dn1");
	wait_ends(&c, 1);
	pthread_mutex_lock(&c.lock);
	assert_int_equal(c.n, 1);
	assert_non_null(strstr(find(&c, "n1")->data, "\"apps.openyurt.io/nodepool\":\"hz\""));
	pthread_mutex_unlock(&c.lock);
	informer_stop(inf);
	consumer_free(&c);

	/* the NodePool by name, and its NodeBuckets by label (cluster-scoped) */
	consumer_init(&c, false);
	inf = start(&c, g_double.base, "/apis/apps.openyurt.io/v1beta2/nodepools",
		    "fieldSelector=metadata.name%3Dhz");
	wait_ends(&c, 1);
	pthread_mutex_lock(&c.lock);
	assert_int_equal(c.n, 1);
	assert_non_null(strstr(find(&c, "hz")->data, "\"nodes\":[\"n1\",\"n2\"]"));
	pthread_mutex_unlock(&c.lock);
	informer_stop(inf);
	consumer_free(&c);

	consumer_init(&c, false);
	sel = informer_query_escape("openyurt.io/pool-name=hz");
	q = str_printf("labelSelector=%s", sel);
	inf = start(&c, g_double.base, "/apis/apps.openyurt.io/v1alpha1/nodebuckets", q);
	wait_ends(&c, 1);
	pthread_mutex_lock(&c.lock);
	assert_int_equal(c.n, 1);
	assert_non_null(
	    strstr(find(&c, "hz-1")->data, "\"nodes\":[{\"name\":\"n1\"},{\"name\":\"n2\"}]"));
	pthread_mutex_unlock(&c.lock);
	informer_stop(inf);
	consumer_free(&c);
	free(q);
	free(sel);
}

/* A watch whose connection breaks is resumed from its resourceVersion: what
 * happened meanwhile comes as events, without a list. */
static void test_rewatch_after_cut(void **state)
{
	(void)state;
	struct consumer c;
	consumer_init(&c, false);
	assert_int_equal(ctl("POST", "/reset-counters", NULL), 200);
	struct informer *inf =
	    start(&c, g_double.base, "/api/v1/namespaces/default/configmaps", NULL);
	wait_ends(&c, 1);
	assert_true(wait_count(&g_double, "requests_by_verb_path",
			       "watch /api/v1/namespaces/default/configmaps", 1, WAIT_MS));
	assert_int_equal(ctl("POST", "/cut?mode=refuse", NULL), 200);
	put_cm("default", "during-cut", NULL, NULL);
	assert_int_equal(ctl("POST", "/restore", NULL), 200);
	assert_true(wait_for(&c, has, "default/during-cut", WAIT_MS));
	pthread_mutex_lock(&c.lock);
	assert_int_equal(c.begins, 1);
	assert_int_equal(c.errors, 0);
	pthread_mutex_unlock(&c.lock);
	assert_int_equal(state_count(&g_double, "requests_by_verb_path",
				     "list /api/v1/namespaces/default/configmaps"),
			 1);
	informer_stop(inf);
	consumer_free(&c);
	delete_cm("default", "during-cut");
}

/* The watch is cut, the history compacted past its resourceVersion, and an
 * object deleted meanwhile: the resumed watch gets 410, the informer lists
 * again, and the deleted object is gone by that list's end (no DELETED was
 * ever sent for it). */
static void test_relist_after_compaction(void **state)
{
	(void)state;
	struct consumer c;
	consumer_init(&c, false);
	struct informer *inf = start(&c, g_double.base, "/api/v1/configmaps", NULL);
	wait_ends(&c, 1);
	put_cm("default", "doomed", NULL, NULL);
	assert_true(wait_for(&c, has, "default/doomed", WAIT_MS));
	assert_int_equal(ctl("POST", "/cut?mode=refuse", NULL), 200);
	/* a write the informer cannot see, then the history is dropped: its
	 * resourceVersion is now older than anything the double can replay */
	put_cm("default", "bump", NULL, NULL);
	assert_int_equal(ctl("POST", "/compact", NULL), 200);
	delete_cm("default", "doomed");
	assert_int_equal(ctl("POST", "/restore", NULL), 200);
	wait_ends(&c, 2);
	pthread_mutex_lock(&c.lock);
	assert_null(find(&c, "default/doomed"));
	assert_non_null(find(&c, "default/bump"));
	assert_non_null(strstr(buf_cstr(&c.gone), ",default/doomed,"));
	assert_int_equal(c.begins, 2);
	assert_int_equal(c.aborts, 0);
	assert_int_equal(c.deletes, 0);
	assert_int_equal(c.errors, 0);
	pthread_mutex_unlock(&c.lock);
	informer_stop(inf);
	consumer_free(&c);
	delete_cm("default", "bump");
}

/* A list cut half way: the consumer is told to keep what it has (abort, not
 * end), and the next full list settles it. */
static void test_list_cut_half_way(void **state)
{
	(void)state;
	const char *path = "/api/v1/namespaces/kube-node-lease/configmaps";
	char *arm = str_printf("/hostile?mode=cut&count=1&path=%s", path);
	assert_int_equal(ctl("POST", arm, NULL), 200);
	free(arm);
	struct consumer c;
	consumer_init(&c, false);
	struct informer *inf = start(&c, g_double.base, path, NULL);
	wait_ends(&c, 1);
	pthread_mutex_lock(&c.lock);
	/* B U.. A, then B U.. E: the half list's objects were kept until the
	 * full list ended */
	const char *t = buf_cstr(&c.trace);
	size_t u1 = strspn(t + 1, "U");
	assert_int_equal(t[0], 'B');
	assert_true(u1 >= 1);
	assert_int_equal(t[1 + u1], 'A');
	assert_int_equal(t[2 + u1], 'B');
	assert_int_equal(t[3 + u1 + strspn(t + 3 + u1, "U")], 'E');
	assert_non_null(strstr(buf_cstr(&c.gone), ",kube-node-lease/cut-0,"));
	assert_non_null(find(&c, "kube-node-lease/kube-root-ca.crt"));
	assert_int_equal(c.n, 1);
	assert_int_equal(c.errors, 0);
	pthread_mutex_unlock(&c.lock);
	informer_stop(inf);
	consumer_free(&c);
}

/* The cloud does not serve the resource (a CRD that is not installed): an
 * empty list, synced, asked again only after a minute; stopping cuts that
 * minute short. */
static void test_not_served(void **state)
{
	(void)state;
	const char *path = "/apis/apps.openyurt.io/v1beta1/nodepools";
	struct consumer c;
	consumer_init(&c, false);
	assert_int_equal(ctl("POST", "/reset-counters", NULL), 200);
	struct informer *inf = start(&c, g_double.base, path, NULL);
	wait_ends(&c, 1);
	wait_synced(inf);
	pthread_mutex_lock(&c.lock);
	assert_string_equal(buf_cstr(&c.trace), "BE");
	assert_int_equal(c.n, 0);
	pthread_mutex_unlock(&c.lock);
	assert_int_equal(state_count(&g_double, "requests_by_path", path), 1);
	stop_promptly(inf, "in the not-served pause");
	consumer_free(&c);
}

static void test_stop_is_prompt(void **state)
{
	(void)state;
	struct consumer c;

	/* while a watch is open (and quiet between bookmarks) */
	consumer_init(&c, false);
	assert_int_equal(ctl("POST", "/reset-counters", NULL), 200);
	struct informer *inf =
	    start(&c, g_double.base, "/api/v1/namespaces/kube-system/configmaps", NULL);
	wait_ends(&c, 1);
	assert_true(wait_count(&g_double, "requests_by_verb_path",
			       "watch /api/v1/namespaces/kube-system/configmaps", 1, WAIT_MS));
	stop_promptly(inf, "with a watch open");
	consumer_free(&c);

	/* while a list hangs after its headers */
	const char *hang = "/api/v1/namespaces/kube-public/configmaps";
	char *arm = str_printf("/hostile?mode=hang&count=1&path=%s", hang);
	assert_int_equal(ctl("POST", arm, NULL), 200);
	free(arm);
	consumer_init(&c, false);
	inf = start(&c, g_double.base, hang, NULL);
	assert_true(wait_count(&g_double, "requests_by_path", hang, 1, WAIT_MS));
	stop_promptly(inf, "with a list hanging");
	assert_int_equal(c.ends, 0);
	consumer_free(&c);

	/* while backing off: every list fails, the second comes a second or
	 * more after the first */
	const char *failing = "/api/v1/namespaces/kube-public/secrets";
	char *fail = str_printf("/fail?code=503&count=1000&path=%s", failing);
	assert_int_equal(ctl("POST", fail, NULL), 200);
	free(fail);
	consumer_init(&c, false);
	long t0 = now_ms();
	inf = start(&c, g_double.base, failing, NULL);
	assert_true(wait_count(&g_double, "requests_by_path", failing, 2, WAIT_MS));
	assert_true(now_ms() - t0 >= 1000);
	assert_false(informer_synced(inf));
	stop_promptly(inf, "while backing off");
	assert_int_equal(c.begins, 0);
	consumer_free(&c);
}

/* 2000 pods (about 6 MB) through the decoders: each reaches the consumer
 * as it is decoded, and the heap never holds more than a little of it. */
static void test_big_list(void **state)
{
	(void)state;
	struct double_proc big;
	const char *args[] = {"--seed", "none", "--pods", "2000", NULL};
	assert_int_equal(double_proc_start(&big, args), 0);
	struct consumer c;
	consumer_init(&c, true);
	struct informer *inf = start(&c, big.base, "/api/v1/pods", NULL);
	wait_ends(&c, 1);
	pthread_mutex_lock(&c.lock);
	assert_int_equal(c.listed, BIG_PODS);
	assert_true(c.bytes > (size_t)4 << 20);
	long grew = (long)c.heap_peak - (long)c.heap_at_begin;
	fprintf(stderr, "%zu bytes of pods listed; the heap grew by %ld bytes at most\n", c.bytes,
		grew);
	assert_true(grew < HEAP_BOUND);
	pthread_mutex_unlock(&c.lock);
	informer_stop(inf);
	consumer_free(&c);
	double_proc_stop(&big);
}

static int setup(void **state)
{
	(void)state;
	const char *args[] = {"--node", "n1", "--node", "n2", "--pool", "hz", "--bookmark-interval",
			      "0.5",	NULL};
	return double_proc_start(&g_double, args);
}

static int teardown(void **state)
{
	(void)state;
	double_proc_stop(&g_double);
	return 0;
}

int main(void)
{
	if (curl_global_init(CURL_GLOBAL_ALL) != CURLE_OK)
		return 1;
	log_set_verbosity(2); /* why each list and watch ended, in the test's log */
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_query_escape),
	    cmocka_unit_test(test_list_then_events),
	    cmocka_unit_test(test_odd_name_skipped),
	    cmocka_unit_test(test_selectors),
	    cmocka_unit_test(test_rewatch_after_cut),
	    cmocka_unit_test(test_relist_after_compaction),
	    cmocka_unit_test(test_list_cut_half_way),
	    cmocka_unit_test(test_not_served),
	    cmocka_unit_test(test_stop_is_prompt),
	    cmocka_unit_test(test_big_list),
	};
	int rc = cmocka_run_group_tests(tests, setup, teardown);
	curl_global_cleanup();
	return rc;
}
