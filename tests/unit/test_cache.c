/*
 * test_cache.c - the caching rules and the cache manager: responses fed to a
 * tee in arbitrary chunks (plain and gzip) become the right store state.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cache/cacheable.h"
#include "cache/manager.h"
#include "cache/manager_internal.h"
#include "kube/meta.h"
#include "storage/disk.h"
#include "testutil.h"

struct fx {
	char dir[4096];
	struct store *s;
	struct metrics m;
	struct cache_manager *cm;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	if (test_mkdtemp(f->dir, sizeof f->dir, "cache") < 0)
		return -1;
	char *err = NULL;
	f->s = disk_store_open(f->dir, 0, NULL, &err);
	if (!f->s || metrics_init(&f->m) < 0)
		return -1;
	f->cm = cache_manager_new(f->s, &f->m, 2);
	*state = f;
	return f->cm ? 0 : -1;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	cache_manager_free(f->cm);
	store_close(f->s);
	metrics_free(&f->m);
	test_rm_rf(f->dir);
	free(f);
	return 0;
}

static struct request_info ri_for(enum req_verb verb, const char *ns, const char *name,
				  const char *lsel, const char *fsel)
{
	struct request_info ri;
	memset(&ri, 0, sizeof ri);
	ri.is_resource = true;
	ri.verb = verb;
	ri.method = verb == VERB_CREATE ? "POST" : "GET";
	ri.path = "/api/v1/pods";
	ri.api_prefix = "api";
	ri.api_group = "";
	ri.api_version = "v1";
	ri.namespace = (char *)ns;
	ri.resource = "pods";
	ri.subresource = "";
	ri.name = (char *)name;
	ri.label_selector = (char *)lsel;
	ri.field_selector = (char *)fsel;
	ri.resource_version = "";
	ri.resource_version_match = "";
	ri.continue_token = "";
	ri.timeout_seconds = -1;
	return ri;
}

static char *pod(const char *ns, const char *name, unsigned rv, const char *node)
{
	return test_pod_json(ns, name, rv, node, 600);
}

/* Feed in chunks of 1..37 bytes: decoding must not care. */
static void feed_chunked(struct cache_tee *t, const char *data, size_t len)
{
	size_t step = 1;
	for (size_t off = 0; off < len; off += step, step = step % 37 + 1)
		cache_tee_feed(t, data + off, off + step > len ? len - off : step);
}

static char *list_body(const char *rv, const char *cont, char **items, size_t n)
{
	struct buf b = BUF_INIT;
	buf_printf(&b,
		   "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{"
		   "\"resourceVersion\":\"%s\"%s%s%s},\"items\":[",
		   rv, cont ? ",\"continue\":\"" : "", cont ? cont : "", cont ? "\"" : "");
	for (size_t i = 0; i < n; i++)
		buf_printf(&b, "%s%s", i ? "," : "", items[i]);
	buf_append_str(&b, "]}");
	return buf_steal(&b);
}

static uint64_t stored_rv(struct store *s, const char *comp, const char *ns, const char *name)
{
	struct store_key_info info = {comp, "", "v1", "pods", ns, name};
	struct store_key k;
	if (store_key_build(s, &info, &k) != STORE_OK)
		return 0;
	struct buf b = BUF_INIT;
	uint64_t rv = 0;
	if (store_get(s, &k, &b) == STORE_OK)
		kube_meta_rv(b.data, b.len, &rv);
	buf_free(&b);
	store_key_free(&k);
	return rv;
}

static void test_component_and_rules(void **state)
{
	(void)state;
	char *c = cache_component("Kubelet/v1.30.2 (linux/amd64) kubernetes/abc");
	assert_string_equal(c, "kubelet");
	free(c);
	c = cache_component(NULL);
	assert_string_equal(c, "");
	free(c);
	struct config cfg;
	config_init(&cfg);
	strlist_split(&cfg.cache_agents, "my-agent");
	struct cache_agents a;
	assert_int_equal(cache_agents_init(&a, &cfg), 0);
	struct request_info list = ri_for(VERB_LIST, "", "", "", "");
	assert_int_equal(cache_mode_for(&a, "kubelet", &list), CACHE_LIST);
	assert_int_equal(cache_mode_for(&a, "my-agent", &list), CACHE_LIST);
	assert_int_equal(cache_mode_for(&a, "kubectl", &list), CACHE_NONE);
	assert_int_equal(cache_mode_for(&a, "", &list), CACHE_NONE);
	struct request_info del = ri_for(VERB_DELETE, "a", "x", "", "");
	assert_int_equal(cache_mode_for(&a, "kubelet", &del), CACHE_NONE);
	struct request_info log = ri_for(VERB_GET, "a", "x", "", "");
	log.subresource = "log";
	assert_int_equal(cache_mode_for(&a, "kubelet", &log), CACHE_NONE);
	log.subresource = "status";
	assert_int_equal(cache_mode_for(&a, "kubelet", &log), CACHE_OBJECT);
	struct request_info csr = ri_for(VERB_GET, "", "x", "", "");
	csr.resource = "certificatesigningrequests";
	assert_int_equal(cache_mode_for(&a, "kubelet", &csr), CACHE_NONE);
	struct request_info ver = ri_for(VERB_OTHER, "", "", "", "");
	ver.is_resource = false;
	ver.path = "/version";
	assert_int_equal(cache_mode_for(&a, "kubectl", &ver), CACHE_DISCOVERY);
	ver.path = "/apis/discovery.k8s.io/v1";
	assert_int_equal(cache_mode_for(&a, "curl", &ver), CACHE_DISCOVERY);
	ver.path = "/healthz";
	assert_int_equal(cache_mode_for(&a, "curl", &ver), CACHE_NONE);
	cache_agents_free(&a);
	strlist_split(&cfg.cache_agents, "*");
	assert_int_equal(cache_agents_init(&a, &cfg), 0);
	assert_int_equal(cache_mode_for(&a, "anything", &list), CACHE_LIST);
	cache_agents_free(&a);
	config_free(&cfg);

	assert_string_equal(
	    cache_accept_for("application/vnd.kubernetes.protobuf,application/json"),
	    "application/json");
	assert_string_equal(cache_accept_for(NULL), "application/json");
	assert_string_equal(cache_accept_for("*/*"), "application/json");
	assert_null(cache_accept_for("application/vnd.kubernetes.protobuf"));
	/* kubectl's: a Table preferred, plain JSON accepted */
	assert_string_equal(cache_accept_for("application/json;as=Table;v=v1;g=meta.k8s.io,"
					     "application/json"),
			    "application/json");
	assert_null(cache_accept_for("application/json;as=Table;v=v1;g=meta.k8s.io"));
	assert_null(cache_accept_for("application/json;as=PartialObjectMetadataList;v=v1;"
				     "g=meta.k8s.io,application/json"));
}

static void test_list_becomes_view(void **state)
{
	struct fx *f = *state;
	char *items[3] = {pod("a", "p1", 11, "n1"), pod("a", "p2", 12, "n1"),
			  pod("b", "p3", 13, "n1")};
	char *body = list_body("20", NULL, items, 3);
	struct request_info ri = ri_for(VERB_LIST, "", "", "", "spec.nodeName=n1");
	struct cache_tee *t =
	    cache_tee_new(f->cm, CACHE_LIST, "kubelet", &ri, 200, "application/json", NULL);
	assert_non_null(t);
	feed_chunked(t, body, strlen(body));
	cache_tee_end(t, true);
	cache_manager_flush(f->cm);
	assert_int_equal(stored_rv(f->s, "kubelet", "a", "p1"), 11);
	assert_int_equal(stored_rv(f->s, "kubelet", "b", "p3"), 13);
	struct store_view v = {"kubelet", {"", "v1", "pods"}, "", "", "spec.nodeName=n1"};
	struct store_view_state st;
	assert_int_equal(store_get_view(f->s, &v, &st), STORE_OK);
	assert_int_equal(st.rv, 20);
	store_view_state_free(&st);
	for (int i = 0; i < 3; i++)
		free(items[i]);
	free(body);
}

static void test_cut_list_changes_nothing(void **state)
{
	struct fx *f = *state;
	char *items[2] = {pod("a", "p1", 11, "n1"), pod("a", "p2", 12, "n1")};
	char *body = list_body("20", NULL, items, 2);
	struct request_info ri = ri_for(VERB_LIST, "", "", "", "");
	struct cache_tee *t =
	    cache_tee_new(f->cm, CACHE_LIST, "kubelet", &ri, 200, "application/json", NULL);
	cache_tee_feed(t, body, strlen(body) / 2);
	cache_tee_end(t, false); /* the upstream broke mid-list */
	cache_manager_flush(f->cm);
	struct store_view v = {"kubelet", {"", "v1", "pods"}, "", "", ""};
	struct store_view_state st;
	assert_int_equal(store_get_view(f->s, &v, &st), STORE_NOT_FOUND);
	assert_int_equal(stored_rv(f->s, "kubelet", "a", "p1"), 0);
	for (int i = 0; i < 2; i++)
		free(items[i]);
	free(body);
}

static char *gzip_bytes(const char *data, size_t len, size_t *out_len)
{
	z_stream z;
	memset(&z, 0, sizeof z);
	deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
	size_t cap = deflateBound(&z, len) + 64;
	char *out = malloc(cap);
	z.next_in = (Bytef *)data;
	z.avail_in = (uInt)len;
	z.next_out = (Bytef *)out;
	z.avail_out = (uInt)cap;
	deflate(&z, Z_FINISH);
	*out_len = cap - z.avail_out;
	deflateEnd(&z);
	return out;
}

static void test_gzip_list_and_pages(void **state)
{
	struct fx *f = *state;
	/* page 1 of 2, gzip-encoded */
	char *p1[2] = {pod("a", "g1", 31, ""), pod("a", "g2", 32, "")};
	char *body1 = list_body("40", "tok-1", p1, 2);
	size_t zlen;
	char *z = gzip_bytes(body1, strlen(body1), &zlen);
	struct request_info ri = ri_for(VERB_LIST, "a", "", "", "");
	ri.limit = 2;
	struct cache_tee *t =
	    cache_tee_new(f->cm, CACHE_LIST, "coredns", &ri, 200, "application/json", "gzip");
	assert_non_null(t);
	feed_chunked(t, z, zlen);
	cache_tee_end(t, true);
	cache_manager_flush(f->cm);
	struct store_view v = {"coredns", {"", "v1", "pods"}, "a", "", ""};
	struct store_view_state st;
	assert_int_equal(store_get_view(f->s, &v, &st), STORE_NOT_FOUND); /* not yet: a page */
	/* page 2 continues the same view */
	char *p2[1] = {pod("a", "g3", 33, "")};
	char *body2 = list_body("40", NULL, p2, 1);
	ri.continue_token = "tok-1";
	t = cache_tee_new(f->cm, CACHE_LIST, "coredns", &ri, 200, "application/json", NULL);
	feed_chunked(t, body2, strlen(body2));
	cache_tee_end(t, true);
	cache_manager_flush(f->cm);
	assert_int_equal(store_get_view(f->s, &v, &st), STORE_OK);
	assert_int_equal(st.rv, 40);
	store_view_state_free(&st);
	assert_int_equal(stored_rv(f->s, "coredns", "a", "g1"), 31);
	assert_int_equal(stored_rv(f->s, "coredns", "a", "g3"), 33);
	free(p1[0]);
	free(p1[1]);
	free(p2[0]);
	free(body1);
	free(body2);
	free(z);
}

/* One list of items through a fresh tee, all of it, ended cleanly. */
static void list_through(struct fx *f, struct request_info *ri, const char *rv, const char *cont,
			 char **items, size_t n)
{
	char *body = list_body(rv, cont, items, n);
	struct cache_tee *t =
	    cache_tee_new(f->cm, CACHE_LIST, "kubelet", ri, 200, "application/json", NULL);
	assert_non_null(t);
	feed_chunked(t, body, strlen(body));
	cache_tee_end(t, true);
	cache_manager_flush(f->cm);
	free(body);
}

static bool view_stored(struct fx *f, const char *lsel)
{
	struct store_view v = {"kubelet", {"", "v1", "pods"}, "", lsel, ""};
	struct store_view_state st;
	if (store_get_view(f->s, &v, &st) != STORE_OK)
		return false;
	store_view_state_free(&st);
	return true;
}

/* A list over its bounds is not cached, and counted: too many copies of
 * one object, too many items, and too many over the pages of one list;
 * within them, it is, copies and all (the last copy kept). */
static void test_list_bounds_refuse(void **state)
{
	struct fx *f = *state;
	struct list_limits lim = {5, 1 << 20, 2};
	cache_manager_set_list_limits(f->cm, &lim);
	char *p[7];
	for (int i = 0; i < 7; i++) {
		char name[8];
		snprintf(name, sizeof name, "p%d", i);
		p[i] = pod("a", name, 11 + (unsigned)i, "n1");
	}
	char *dup[3] = {p[0], p[0], p[0]};
	struct request_info ri = ri_for(VERB_LIST, "", "", "app=dup", "");
	list_through(f, &ri, "20", NULL, dup, 3);
	assert_false(view_stored(f, "app=dup"));
	assert_int_equal(stored_rv(f->s, "kubelet", "a", "p0"), 0);
	assert_int_equal(atomic_load(&f->m.cache_lists_refused), 1);

	ri = ri_for(VERB_LIST, "", "", "app=many", "");
	list_through(f, &ri, "20", NULL, p, 6);
	assert_false(view_stored(f, "app=many"));
	assert_int_equal(stored_rv(f->s, "kubelet", "a", "p5"), 0);
	assert_int_equal(atomic_load(&f->m.cache_lists_refused), 2);

	/* two pages of 3: each within the bounds, together not */
	ri = ri_for(VERB_LIST, "", "", "app=paged", "");
	ri.limit = 3;
	list_through(f, &ri, "20", "tok-1", p, 3);
	ri.continue_token = "tok-1";
	list_through(f, &ri, "20", NULL, p + 3, 3);
	assert_false(view_stored(f, "app=paged"));
	assert_int_equal(atomic_load(&f->m.cache_lists_refused), 3);

	/* within: 5 items, one object twice */
	char *ok[5] = {p[1], p[2], p[1], p[3], p[4]};
	ri = ri_for(VERB_LIST, "", "", "app=ok", "");
	list_through(f, &ri, "20", NULL, ok, 5);
	assert_true(view_stored(f, "app=ok"));
	assert_int_equal(stored_rv(f->s, "kubelet", "a", "p1"), 12);
	assert_int_equal(stored_rv(f->s, "kubelet", "a", "p4"), 15);
	assert_int_equal(atomic_load(&f->m.cache_lists_refused), 3);
	for (int i = 0; i < 7; i++)
		free(p[i]);
}

/* The hub stops while a list is on its way (its session begun): the list
 * is dropped, nothing of it stored, and a list that comes after is not
 * even begun; an object that comes after is still stored. */
static void test_stop_drops_lists(void **state)
{
	struct fx *f = *state;
	char *items[4] = {pod("a", "s1", 11, "n1"), pod("a", "s2", 12, "n1"),
			  pod("a", "s3", 13, "n1"), pod("a", "s4", 14, "n1")};
	char *body = list_body("20", NULL, items, 4);
	struct request_info ri = ri_for(VERB_LIST, "", "", "", "");
	struct cache_tee *t =
	    cache_tee_new(f->cm, CACHE_LIST, "kubelet", &ri, 200, "application/json", NULL);
	assert_non_null(t);
	size_t half = strlen(body) / 2;
	cache_tee_feed(t, body, half);
	cache_manager_flush(f->cm); /* the session is begun */
	cache_manager_stop(f->cm);
	cache_tee_feed(t, body + half, strlen(body) - half);
	cache_tee_end(t, true);
	struct request_info ri2 = ri_for(VERB_LIST, "", "", "app=later", "");
	list_through(f, &ri2, "21", NULL, items, 4);
	struct request_info gri = ri_for(VERB_GET, "a", "s9", "", "");
	char *obj = pod("a", "s9", 19, "n1");
	t = cache_tee_new(f->cm, CACHE_OBJECT, "kubelet", &gri, 200, "application/json", NULL);
	assert_non_null(t);
	cache_tee_feed(t, obj, strlen(obj));
	cache_tee_end(t, true);
	cache_manager_flush(f->cm);
	assert_false(view_stored(f, ""));
	assert_false(view_stored(f, "app=later"));
	assert_int_equal(stored_rv(f->s, "kubelet", "a", "s1"), 0);
	assert_int_equal(stored_rv(f->s, "kubelet", "a", "s9"), 19);
	for (int i = 0; i < 4; i++)
		free(items[i]);
	free(obj);
	free(body);
}

static char *event(const char *type, const char *obj)
{
	char *s;
	assert_true(asprintf(&s, "{\"type\":\"%s\",\"object\":%s}\n", type, obj) > 0);
	return s;
}

static void test_watch_events(void **state)
{
	struct fx *f = *state;
	/* two views: node n1 pods, and pods labelled app=p2 (any node) */
	char *base[2] = {pod("a", "p1", 11, "n1"), pod("a", "p2", 12, "n1")};
	char *body = list_body("20", NULL, base, 2);
	struct request_info ri = ri_for(VERB_LIST, "", "", "", "spec.nodeName=n1");
	struct cache_tee *t =
	    cache_tee_new(f->cm, CACHE_LIST, "kubelet", &ri, 200, "application/json", NULL);
	cache_tee_feed(t, body, strlen(body));
	cache_tee_end(t, true);
	free(body);
	struct request_info ri2 = ri_for(VERB_LIST, "", "", "app=p2", "");
	body = list_body("20", NULL, &base[1], 1);
	t = cache_tee_new(f->cm, CACHE_LIST, "kubelet", &ri2, 200, "application/json", NULL);
	cache_tee_feed(t, body, strlen(body));
	cache_tee_end(t, true);
	free(body);

	char *p1v2 = pod("a", "p1", 21, "n1");
	char *p3 = pod("a", "p3", 22, "n1");
	char *p2del = pod("a", "p2", 23, "n1");
	char *p1del = pod("a", "p1", 24, "n1");
	char *bm = strdup("{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{"
			  "\"resourceVersion\":\"30\"}}");
	char *evs[] = {event("MODIFIED", p1v2), event("ADDED", p3), event("DELETED", p2del),
		       event("DELETED", p1del), event("BOOKMARK", bm)};
	struct request_info wri = ri_for(VERB_WATCH, "", "", "", "spec.nodeName=n1");
	t = cache_tee_new(f->cm, CACHE_WATCH, "kubelet", &wri, 200, "application/json", NULL);
	for (size_t i = 0; i < 5; i++) {
		feed_chunked(t, evs[i], strlen(evs[i]));
		free(evs[i]);
	}
	cache_tee_end(t, true);
	cache_manager_flush(f->cm);
	assert_int_equal(stored_rv(f->s, "kubelet", "a", "p3"), 22);
	/* p1: deleted */
	assert_int_equal(stored_rv(f->s, "kubelet", "a", "p1"), 0);
	/* p2: DELETED at 23 from the node view is gone for every view, the
	 * app=p2 view too: no copy at 23 or newer is held */
	assert_int_equal(stored_rv(f->s, "kubelet", "a", "p2"), 0);
	struct store_view v = {"kubelet", {"", "v1", "pods"}, "", "", "spec.nodeName=n1"};
	struct store_view_state st;
	assert_int_equal(store_get_view(f->s, &v, &st), STORE_OK);
	assert_int_equal(st.rv, 30); /* the bookmark */
	store_view_state_free(&st);
	free(base[0]);
	free(base[1]);
	free(p1v2);
	free(p3);
	free(p2del);
	free(p1del);
	free(bm);
}

/* Objects no store key can name - a NUL in the name ("\u0000": cut there
 * it would name another object), a '/', the prefix "tmp_" - are left out
 * of a list and of a watch, counted, and only they: the list is stored
 * with every other object, and the watch goes on. */
static void test_odd_names_skipped(void **state)
{
	struct fx *f = *state;
	char *items[5] = {pod("a", "p1", 11, "n1"), pod("a", "odd\\u0000nul", 12, "n1"),
			  pod("a", "tmp_x", 13, "n1"), pod("a", "a/b", 14, "n1"),
			  pod("a", "p2", 15, "n1")};
	struct request_info ri = ri_for(VERB_LIST, "", "", "", "spec.nodeName=n1");
	for (int round = 1; round <= 2; round++) {
		list_through(f, &ri, "20", NULL, items, 5);
		assert_int_equal(stored_rv(f->s, "kubelet", "a", "p1"), 11);
		assert_int_equal(stored_rv(f->s, "kubelet", "a", "p2"), 15);
		assert_int_equal(stored_rv(f->s, "kubelet", "a", "odd"), 0);
		assert_int_equal(atomic_load(&f->m.cache_objects_skipped), 3 * round);
	}
	struct store_view v = {"kubelet", {"", "v1", "pods"}, "", "", "spec.nodeName=n1"};
	struct store_view_state st;
	assert_int_equal(store_get_view(f->s, &v, &st), STORE_OK);
	assert_int_equal(st.rv, 20);
	store_view_state_free(&st);
	assert_int_equal(atomic_load(&f->m.cache_failures[CACHE_OP_LIST]), 0);

	/* a watch: the odd events pass, the next one is stored */
	char *odd = pod("a", "odd2\\u0000", 21, "n1");
	char *bad = pod("a", "tmp_y", 22, "n1");
	char *p1v2 = pod("a", "p1", 23, "n1");
	char *evs[] = {event("ADDED", odd), event("ADDED", bad), event("DELETED", bad),
		       event("MODIFIED", p1v2)};
	struct request_info wri = ri_for(VERB_WATCH, "", "", "", "spec.nodeName=n1");
	struct cache_tee *t =
	    cache_tee_new(f->cm, CACHE_WATCH, "kubelet", &wri, 200, "application/json", NULL);
	assert_non_null(t);
	for (size_t i = 0; i < 4; i++) {
		feed_chunked(t, evs[i], strlen(evs[i]));
		free(evs[i]);
	}
	cache_tee_end(t, true);
	cache_manager_flush(f->cm);
	assert_int_equal(stored_rv(f->s, "kubelet", "a", "p1"), 23);
	assert_int_equal(stored_rv(f->s, "kubelet", "a", "odd2"), 0);
	assert_int_equal(atomic_load(&f->m.cache_objects_skipped), 9);
	assert_int_equal(atomic_load(&f->m.cache_failures[CACHE_OP_WATCH_EVENT]), 0);

	/* a get of one: skipped too, not a failure */
	struct request_info gri = ri_for(VERB_GET, "a", "odd", "", "");
	t = cache_tee_new(f->cm, CACHE_OBJECT, "kubelet", &gri, 200, "application/json", NULL);
	assert_non_null(t);
	cache_tee_feed(t, odd, strlen(odd));
	cache_tee_end(t, true);
	cache_manager_flush(f->cm);
	assert_int_equal(stored_rv(f->s, "kubelet", "a", "odd2"), 0);
	assert_int_equal(atomic_load(&f->m.cache_objects_skipped), 10);
	assert_int_equal(atomic_load(&f->m.cache_failures[CACHE_OP_OBJECT]), 0);
	free(odd);
	free(bad);
	free(p1v2);
	for (int i = 0; i < 5; i++)
		free(items[i]);
}

static void test_objects_and_discovery(void **state)
{
	struct fx *f = *state;
	char *p = pod("a", "got", 55, "n1");
	struct request_info ri = ri_for(VERB_GET, "a", "got", "", "");
	struct cache_tee *t =
	    cache_tee_new(f->cm, CACHE_OBJECT, "kubelet", &ri, 200, "application/json", NULL);
	feed_chunked(t, p, strlen(p));
	cache_tee_end(t, true);
	/* a create's name comes from the response */
	char *made = pod("a", "made-x7k", 56, "n1");
	struct request_info cri = ri_for(VERB_CREATE, "a", "", "", "");
	t = cache_tee_new(f->cm, CACHE_OBJECT, "kubelet", &cri, 201, "application/json", NULL);
	cache_tee_feed(t, made, strlen(made));
	cache_tee_end(t, true);
	/* not cached: a 404, a protobuf body, a Table-like content type */
	assert_null(
	    cache_tee_new(f->cm, CACHE_OBJECT, "kubelet", &ri, 404, "application/json", NULL));
	assert_null(cache_tee_new(f->cm, CACHE_OBJECT, "kubelet", &ri, 200,
				  "application/vnd.kubernetes.protobuf", NULL));
	assert_null(
	    cache_tee_new(f->cm, CACHE_OBJECT, "kubelet", &ri, 200, "application/json", "br"));
	struct request_info vri = ri_for(VERB_OTHER, "", "", "", "");
	vri.is_resource = false;
	vri.path = "/version";
	const char *ver = "{\"major\":\"1\",\"minor\":\"32\"}";
	t = cache_tee_new(f->cm, CACHE_DISCOVERY, "kubectl", &vri, 200, "application/json", NULL);
	cache_tee_feed(t, ver, strlen(ver));
	cache_tee_end(t, true);
	/* aggregated discovery is kept beside the plain document */
	vri.path = "/apis";
	const char *agg = "{\"kind\":\"APIGroupDiscoveryList\",\"apiVersion\":"
			  "\"apidiscovery.k8s.io/v2\",\"items\":[]}";
	t = cache_tee_new(f->cm, CACHE_DISCOVERY, "kubectl", &vri, 200,
			  "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
			  NULL);
	assert_non_null(t);
	cache_tee_feed(t, agg, strlen(agg));
	cache_tee_end(t, true);
	/* ...but aggregated formats are not taken for other paths */
	vri.path = "/apis/apps/v1";
	assert_null(cache_tee_new(
	    f->cm, CACHE_DISCOVERY, "kubectl", &vri, 200,
	    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", NULL));
	cache_manager_flush(f->cm);
	assert_int_equal(stored_rv(f->s, "kubelet", "a", "got"), 55);
	assert_int_equal(stored_rv(f->s, "kubelet", "a", "made-x7k"), 56);
	struct buf b = BUF_INIT;
	assert_int_equal(store_get_cluster_info(f->s, "/version", &b), STORE_OK);
	assert_string_equal(b.data, ver);
	buf_reset(&b);
	assert_int_equal(store_get_cluster_info(f->s, "/aggregated-discovery/apis", &b), STORE_OK);
	assert_string_equal(b.data, agg);
	buf_reset(&b);
	assert_int_equal(store_get_cluster_info(f->s, "/apis", &b), STORE_NOT_FOUND);
	buf_free(&b);
	free(p);
	free(made);
}

/* ---- worker threads that do not start ---- */

/* Linked with -Wl,--wrap=pthread_create (tests/meson.build): the Nth call
 * from now fails with EAGAIN, as when the process is out of threads. */
int __real_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);
static atomic_int creates_until_failure; /* 0: never fail */

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
	int n = atomic_load(&creates_until_failure);
	if (n > 0 && atomic_fetch_sub(&creates_until_failure, 1) == 1)
		return EAGAIN;
	return __real_pthread_create(t, a, fn, arg);
}

/* A worker that never started took jobs nobody did, and a flush waited for
 * them forever: the manager works with the workers that started. */
static void test_worker_that_does_not_start(void **state)
{
	struct fx *f = *state;
	atomic_store(&creates_until_failure, 2); /* the second of three */
	struct cache_manager *cm = cache_manager_new(f->s, &f->m, 3);
	atomic_store(&creates_until_failure, 0);
	assert_non_null(cm);
	for (int v = 0; v < 8; v++) { /* views that hash to every worker */
		char sel[32], name[32];
		snprintf(sel, sizeof sel, "app=a%d", v);
		snprintf(name, sizeof name, "p%d", v);
		char *items[1] = {pod("a", name, 10 + (unsigned)v, "n1")};
		char *body = list_body("20", NULL, items, 1);
		struct request_info ri = ri_for(VERB_LIST, "", "", sel, "");
		struct cache_tee *t =
		    cache_tee_new(cm, CACHE_LIST, "kubelet", &ri, 200, "application/json", NULL);
		cache_tee_feed(t, body, strlen(body));
		cache_tee_end(t, true);
		free(body);
		free(items[0]);
	}
	cache_manager_flush(cm); /* returns */
	for (int v = 0; v < 8; v++) {
		char name[32];
		snprintf(name, sizeof name, "p%d", v);
		assert_int_equal(stored_rv(f->s, "kubelet", "a", name), 10 + (unsigned)v);
	}
	cache_manager_free(cm);
	atomic_store(&creates_until_failure, 1); /* none starts: no manager */
	assert_null(cache_manager_new(f->s, &f->m, 2));
	atomic_store(&creates_until_failure, 0);
}

/* ---- paginated lists whose next page never comes ---- */

/* A store that is the disk store but for one thing: it notes whether the
 * cache manager's park lock is free while a replace is aborted. */
struct watched_store {
	struct store base;
	struct store *inner;
};
struct watched_replace {
	struct store_replace base;
	struct store_replace *inner;
};
static struct cache_manager *watched_cm;
static atomic_int aborts, aborts_under_lock;

static struct store *inner_of(struct store *s)
{
	return ((struct watched_store *)s)->inner;
}

static enum store_err w_key_build(struct store *s, const struct store_key_info *i,
				  struct store_key *o)
{
	return store_key_build(inner_of(s), i, o);
}

static enum store_err w_replace_begin(struct store *s, const struct store_view *v,
				      struct store_replace **out)
{
	struct watched_replace *r = calloc(1, sizeof *r);
	assert_non_null(r);
	r->base.store = s;
	enum store_err e = store_replace_begin(inner_of(s), v, &r->inner);
	if (e != STORE_OK) {
		free(r);
		return e;
	}
	*out = &r->base;
	return STORE_OK;
}

/* The first add may wait at a gate (see test_stop_cancels_a_decode). */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static bool gate_armed, gate_reached;
static atomic_int adds;

static enum store_err w_replace_add(struct store_replace *r, const struct store_item *it)
{
	pthread_mutex_lock(&gate_lock);
	if (gate_armed) {
		gate_reached = true;
		pthread_cond_broadcast(&gate_cond);
		while (gate_armed)
			pthread_cond_wait(&gate_cond, &gate_lock);
	}
	pthread_mutex_unlock(&gate_lock);
	atomic_fetch_add(&adds, 1);
	return store_replace_add(((struct watched_replace *)r)->inner, it);
}

static enum store_err w_replace_commit(struct store_replace *r, uint64_t rv)
{
	enum store_err e = store_replace_commit(((struct watched_replace *)r)->inner, rv);
	free(r);
	return e;
}

static void w_replace_abort(struct store_replace *r)
{
	pthread_mutex_t *lock = cache_manager_park_lock(watched_cm);
	if (pthread_mutex_trylock(lock) == 0)
		pthread_mutex_unlock(lock);
	else
		atomic_fetch_add(&aborts_under_lock, 1);
	atomic_fetch_add(&aborts, 1);
	store_replace_abort(((struct watched_replace *)r)->inner);
	free(r);
}

static const struct store_ops watched_ops = {
    .name = "watched",
    .key_build = w_key_build,
    .replace_begin = w_replace_begin,
    .replace_add = w_replace_add,
    .replace_commit = w_replace_commit,
    .replace_abort = w_replace_abort,
};

static void page_one(struct cache_manager *cm, const char *sel, const char *token)
{
	char *items[1] = {pod("a", "p1", 11, "n1")};
	char *body = list_body("40", token, items, 1);
	struct request_info ri = ri_for(VERB_LIST, "", "", sel, "");
	struct cache_tee *t =
	    cache_tee_new(cm, CACHE_LIST, "kubelet", &ri, 200, "application/json", NULL);
	cache_tee_feed(t, body, strlen(body));
	cache_tee_end(t, true);
	free(body);
	free(items[0]);
}

/* A session whose next page did not come in time is aborted when the
 * table is next looked at - after the lock is let go: an abort may take
 * long (etcd's writer threads), and every park and resume waits for it. */
static void test_expired_session_aborted_outside_park_lock(void **state)
{
	struct fx *f = *state;
	struct watched_store ws = {{&watched_ops}, f->s};
	struct cache_manager *cm = cache_manager_new(&ws.base, &f->m, 1);
	assert_non_null(cm);
	watched_cm = cm;
	cache_manager_set_park_seconds(cm, 0); /* parked sessions expire at once */
	atomic_store(&aborts, 0);
	atomic_store(&aborts_under_lock, 0);
	page_one(cm, "app=x", "tok-x"); /* parked */
	page_one(cm, "app=y", "tok-y"); /* parks too, and finds x's session expired */
	cache_manager_flush(cm);
	assert_true(atomic_load(&aborts) >= 1);
	assert_int_equal(atomic_load(&aborts_under_lock), 0);
	cache_manager_free(cm);
	watched_cm = NULL;
}

/* A list the worker is decoding when the hub stops: a gzip list of
 * 100,000 pods, far within the bounds, stops at its next item - cache_manager_free() neither
 * decodes nor stores the rest.  The worker is held at its first item while the hub stops. */
static void test_stop_cancels_a_decode(void **state)
{
	struct fx *f = *state;
	enum { N = 100000 };
	struct watched_store ws = {{&watched_ops}, f->s};
	struct cache_manager *cm = cache_manager_new(&ws.base, &f->m, 1);
	assert_non_null(cm);
	watched_cm = cm;
	struct buf body = BUF_INIT;
	buf_append_str(&body, "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":"
			      "{\"resourceVersion\":\"9\"},\"items\":[");
	for (int i = 0; i < N; i++)
		buf_printf(&body,
			   "%s{\"metadata\":{\"name\":\"c%d\",\"namespace\":\"a\","
			   "\"resourceVersion\":\"5\"}}",
			   i ? "," : "", i);
	buf_append_str(&body, "]}");
	size_t zlen;
	char *z = gzip_bytes(body.data, body.len, &zlen);
	atomic_store(&adds, 0);
	gate_armed = true;
	gate_reached = false;
	struct request_info ri = ri_for(VERB_LIST, "", "", "", "");
	struct cache_tee *t =
	    cache_tee_new(cm, CACHE_LIST, "kubelet", &ri, 200, "application/json", "gzip");
	assert_non_null(t);
	cache_tee_feed(t, z, zlen);
	cache_tee_end(t, true);
	pthread_mutex_lock(&gate_lock);
	while (!gate_reached)
		pthread_cond_wait(&gate_cond, &gate_lock);
	cache_manager_stop(cm); /* the worker is at the first item */
	gate_armed = false;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
	cache_manager_free(cm);
	watched_cm = NULL;
	assert_int_equal(atomic_load(&adds), 1);
	assert_false(view_stored(f, ""));
	buf_free(&body);
	free(z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_component_and_rules),
	    cmocka_unit_test_setup_teardown(test_list_becomes_view, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cut_list_changes_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_gzip_list_and_pages, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_watch_events, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_odd_names_skipped, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_objects_and_discovery, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_worker_that_does_not_start, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_expired_session_aborted_outside_park_lock, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_list_bounds_refuse, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stop_drops_lists, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stop_cancels_a_decode, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
