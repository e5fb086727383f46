/*
 * test_follow.c - a watch's filtered view kept in step with the filters'
 * inputs (filter/follow.h).
 *
 * The environment is changed between calls as the hub's informers change
 * it: the node's pool (nodeportisolation), a Service's topology annotation
 * (servicetopology).  What the follow emits must take a client from what
 * it was shown to what the filters now say: events as the proxied watches
 * send them, a refilter's only for what changed (an object shown as it is
 * sends nothing when it stays so), at the refilter's resourceVersion.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "filter/follow.h"

/* ---- the environment ---- */

static const char *topology; /* app's annotation; NULL: none */
static const char *const POOL_NODES[] = {"node1", "node2"};

static const char *keys_of(const struct filter_env *env, const char *ns, const char *name)
{
	(void)env;
	return strcmp(ns, "default") == 0 && strcmp(name, "app") == 0 ? topology : NULL;
}

static struct filter_env env = {
    .node_name = "node1",
    .pool_name = "pool-a",
    .pool_topology = true,
    .pool_nodes = POOL_NODES,
    .npool_nodes = 2,
    .topology_keys = keys_of,
};

static const struct filter_env *hold(void *ctx)
{
	(void)ctx;
	env.no_topology = topology == NULL;
	return &env;
}

static void release(void *ctx)
{
	(void)ctx;
}

static const struct filter_env_ref REF = {hold, release, NULL};
static const struct filter_target SERVICES = {"", "v1", "services"};
static const struct filter_target SLICES = {"discovery.k8s.io", "v1", "endpointslices"};
#define ISOLATION FILTER_BIT(FILTER_NODEPORTISOLATION)
#define TOPOLOGY  FILTER_BIT(FILTER_SERVICETOPOLOGY)

/* ---- what the client gets ---- */

struct got {
	enum watch_type type[16];
	json_t *obj[16];
	size_t n;
};

static int record_event(void *ctx, enum watch_type type, const char *data, size_t len)
{
	struct got *g = ctx;
	assert_true(g->n < 16);
	g->type[g->n] = type;
	g->obj[g->n] = json_loadb(data, len, 0, NULL);
	assert_non_null(g->obj[g->n]);
	g->n++;
	return 0;
}

static void got_reset(struct got *g)
{
	for (size_t i = 0; i < g->n; i++)
		json_decref(g->obj[i]);
	g->n = 0;
}

static const char *name_of(const struct got *g, size_t i)
{
	return json_string_value(json_object_get(json_object_get(g->obj[i], "metadata"), "name"));
}

static const char *rv_of(const struct got *g, size_t i)
{
	return json_string_value(
	    json_object_get(json_object_get(g->obj[i], "metadata"), "resourceVersion"));
}

/* ---- objects ---- */

struct object {
	char json[512];
	struct stream_object meta;
};

static void nodeport(struct object *o, const char *name, const char *listen, unsigned rv)
{
	snprintf(o->json, sizeof o->json,
		 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\",\"resourceVersion\":"
		 "\"%u\",\"annotations\":{\"nodeport.openyurt.io/listen\":\"%s\"}},"
		 "\"spec\":{\"type\":\"NodePort\"}}",
		 name, rv, listen);
	o->meta = (struct stream_object){.data = o->json,
					 .len = strlen(o->json),
					 .name = name,
					 .namespace = "default",
					 .resource_version = "",
					 .rv = rv,
					 .kind = ""};
}

static void app_slice(struct object *o, unsigned rv)
{
	snprintf(o->json, sizeof o->json,
		 "{\"metadata\":{\"name\":\"app-x\",\"namespace\":\"default\",\"resourceVersion\":"
		 "\"%u\",\"labels\":{\"kubernetes.io/service-name\":\"app\"}},"
		 "\"endpoints\":[{\"addresses\":[\"10.0.0.1\"],\"nodeName\":\"node1\"},"
		 "{\"addresses\":[\"10.0.0.2\"],\"nodeName\":\"node2\"},"
		 "{\"addresses\":[\"10.0.0.3\"],\"nodeName\":\"node3\"}]}",
		 rv);
	o->meta = (struct stream_object){.data = o->json,
					 .len = strlen(o->json),
					 .name = "app-x",
					 .namespace = "default",
					 .resource_version = "",
					 .rv = rv,
					 .kind = ""};
}

static size_t endpoints_of(const struct got *g, size_t i)
{
	return json_array_size(json_object_get(g->obj[i], "endpoints"));
}

/* ---- tests ---- */

static void test_events(void **state)
{
	(void)state;
	struct got g = {0};
	struct object a, b;
	env.pool_name = "pool-a";
	struct follow *f = follow_new(ISOLATION, &SERVICES, &REF, record_event, &g);
	assert_non_null(f);

	nodeport(&a, "np-a", "pool-a", 10);
	nodeport(&b, "np-b", "pool-b", 11);
	assert_int_equal(follow_event(f, WATCH_ADDED, &a.meta), 0);
	assert_int_equal(follow_event(f, WATCH_ADDED, &b.meta), 0);
	/* np-b is not this pool's: DELETED, as the proxied watches say it */
	assert_int_equal(g.n, 2);
	assert_int_equal(g.type[0], WATCH_ADDED);
	assert_string_equal(name_of(&g, 0), "np-a");
	assert_int_equal(g.type[1], WATCH_DELETED);
	assert_string_equal(name_of(&g, 1), "np-b");
	assert_int_equal(follow_held(f), 1);
	got_reset(&g);

	/* still dropped: DELETED again; np-a's change is a MODIFIED */
	nodeport(&b, "np-b", "pool-b", 12);
	nodeport(&a, "np-a", "pool-a", 13);
	assert_int_equal(follow_event(f, WATCH_MODIFIED, &b.meta), 0);
	assert_int_equal(follow_event(f, WATCH_MODIFIED, &a.meta), 0);
	assert_int_equal(g.n, 2);
	assert_int_equal(g.type[0], WATCH_DELETED);
	assert_int_equal(g.type[1], WATCH_MODIFIED);
	got_reset(&g);

	/* np-b now listens here: the client did not hold it, ADDED; np-a no
	 * longer does: DELETED, as it was */
	nodeport(&b, "np-b", "pool-a,pool-b", 14);
	nodeport(&a, "np-a", "pool-c", 15);
	assert_int_equal(follow_event(f, WATCH_MODIFIED, &b.meta), 0);
	assert_int_equal(follow_event(f, WATCH_MODIFIED, &a.meta), 0);
	assert_int_equal(g.n, 2);
	assert_int_equal(g.type[0], WATCH_ADDED);
	assert_string_equal(name_of(&g, 0), "np-b");
	assert_int_equal(g.type[1], WATCH_DELETED);
	assert_string_equal(name_of(&g, 1), "np-a");
	got_reset(&g);

	/* deletions come as such, and leave nothing held */
	assert_int_equal(follow_event(f, WATCH_DELETED, &a.meta), 0);
	assert_int_equal(follow_event(f, WATCH_DELETED, &b.meta), 0);
	assert_int_equal(g.n, 2);
	assert_int_equal(g.type[0], WATCH_DELETED);
	assert_int_equal(g.type[1], WATCH_DELETED);
	assert_int_equal(follow_held(f), 0);
	got_reset(&g);
	follow_free(f);
}

static void test_refilter_pool_move(void **state)
{
	(void)state;
	struct got g = {0};
	struct object o[3];
	env.pool_name = "pool-a";
	struct follow *f = follow_new(ISOLATION, &SERVICES, &REF, record_event, &g);
	assert_non_null(f);
	nodeport(&o[0], "np-a", "pool-a", 10);
	nodeport(&o[1], "np-b", "pool-b", 11);
	nodeport(&o[2], "np-all", "*", 12);
	struct stream_object objs[3] = {o[0].meta, o[1].meta, o[2].meta};
	for (int i = 0; i < 3; i++)
		assert_int_equal(follow_event(f, WATCH_ADDED, &objs[i]), 0);
	got_reset(&g);

	/* nothing changed: nothing to say */
	assert_int_equal(follow_refilter(f, objs, 3, 20, false), 0);
	assert_int_equal(g.n, 0);

	env.pool_name = "pool-b";
	assert_int_equal(follow_refilter(f, objs, 3, 20, false), 0);
	assert_int_equal(g.n, 2);
	assert_int_equal(g.type[0], WATCH_DELETED);
	assert_string_equal(name_of(&g, 0), "np-a");
	assert_string_equal(rv_of(&g, 0), "20");
	assert_int_equal(g.type[1], WATCH_ADDED);
	assert_string_equal(name_of(&g, 1), "np-b");
	assert_string_equal(rv_of(&g, 1), "20");
	got_reset(&g);

	/* a client whose holdings are unknown gets every object */
	assert_int_equal(follow_refilter(f, objs, 3, 21, true), 0);
	assert_int_equal(g.n, 3);
	assert_int_equal(g.type[0], WATCH_DELETED);
	assert_int_equal(g.type[1], WATCH_MODIFIED);
	assert_int_equal(g.type[2], WATCH_MODIFIED);
	assert_string_equal(rv_of(&g, 2), "21");
	got_reset(&g);

	/* what it held of an object no longer there is forgotten */
	assert_int_equal(follow_held(f), 1); /* np-a, dropped */
	assert_int_equal(follow_refilter(f, objs + 1, 2, 22, false), 0);
	assert_int_equal(g.n, 0);
	assert_int_equal(follow_held(f), 0);
	follow_free(f);
	env.pool_name = "pool-a";
}

static void test_refilter_topology(void **state)
{
	(void)state;
	struct got g = {0};
	struct object s;
	topology = NULL;
	struct follow *f = follow_new(TOPOLOGY, &SLICES, &REF, record_event, &g);
	assert_non_null(f);
	app_slice(&s, 30);
	assert_int_equal(follow_event(f, WATCH_ADDED, &s.meta), 0);
	assert_int_equal(endpoints_of(&g, 0), 3);
	got_reset(&g);

	topology = "kubernetes.io/hostname";
	assert_int_equal(follow_refilter(f, &s.meta, 1, 31, false), 0);
	assert_int_equal(g.n, 1);
	assert_int_equal(g.type[0], WATCH_MODIFIED);
	assert_int_equal(endpoints_of(&g, 0), 1);
	assert_string_equal(rv_of(&g, 0), "31");
	got_reset(&g);

	topology = "openyurt.io/nodepool";
	assert_int_equal(follow_refilter(f, &s.meta, 1, 31, false), 0);
	assert_int_equal(g.n, 1);
	assert_int_equal(endpoints_of(&g, 0), 2);
	got_reset(&g);
	assert_int_equal(follow_refilter(f, &s.meta, 1, 31, false), 0);
	assert_int_equal(g.n, 0); /* the same again: nothing */

	topology = NULL; /* back to the object as the cloud has it */
	assert_int_equal(follow_refilter(f, &s.meta, 1, 32, false), 0);
	assert_int_equal(g.n, 1);
	assert_int_equal(endpoints_of(&g, 0), 3);
	assert_int_equal(follow_held(f), 0);
	got_reset(&g);
	follow_free(f);
}

/* A proxied watch's content comes from the store an object at a time; a
 * client that listed before the watch holds what the follow never showed
 * (unknown): every object is sent as now filtered, then only changes, and
 * what the store no longer has is forgotten. */
static void test_refilter_steps(void **state)
{
	(void)state;
	struct got g = {0};
	struct object o[3];
	env.pool_name = "pool-a";
	struct follow *f = follow_new(ISOLATION, &SERVICES, &REF, record_event, &g);
	assert_non_null(f);
	nodeport(&o[0], "np-a", "pool-a", 10);
	nodeport(&o[1], "np-b", "pool-b", 11);
	nodeport(&o[2], "np-all", "*", 12);

	assert_int_equal(follow_refilter_begin(f), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(follow_refilter_object(f, &o[i].meta, 30, true), 0);
	assert_int_equal(follow_refilter_end(f), 0);
	assert_int_equal(g.n, 3);
	assert_int_equal(g.type[0], WATCH_MODIFIED);
	assert_int_equal(g.type[1], WATCH_DELETED);
	assert_string_equal(name_of(&g, 1), "np-b");
	assert_int_equal(g.type[2], WATCH_MODIFIED);
	for (size_t i = 0; i < 3; i++)
		assert_string_equal(rv_of(&g, i), "30");
	assert_int_equal(follow_held(f), 1); /* np-b, dropped */
	got_reset(&g);

	/* known now: nothing moved, nothing sent */
	assert_int_equal(follow_refilter_begin(f), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(follow_refilter_object(f, &o[i].meta, 31, false), 0);
	assert_int_equal(follow_refilter_end(f), 0);
	assert_int_equal(g.n, 0);

	/* np-b gone from the store without an event: forgotten */
	assert_int_equal(follow_refilter_begin(f), 0);
	assert_int_equal(follow_refilter_object(f, &o[0].meta, 32, false), 0);
	assert_int_equal(follow_refilter_end(f), 0);
	assert_int_equal(g.n, 0);
	assert_int_equal(follow_held(f), 0);

	/* the node moves to pool-b: np-b, dropped before and now not held,
	 * is kept: as the source has it, nothing to say; np-a goes */
	env.pool_name = "pool-b";
	assert_int_equal(follow_refilter_begin(f), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(follow_refilter_object(f, &o[i].meta, 33, false), 0);
	assert_int_equal(follow_refilter_end(f), 0);
	assert_int_equal(g.n, 1);
	assert_int_equal(g.type[0], WATCH_DELETED);
	assert_string_equal(name_of(&g, 0), "np-a");
	got_reset(&g);
	env.pool_name = "pool-a";
	follow_free(f);
}

/* A streamed watch's object events go through a follow (rewrite_on_event),
 * which writes them back through the rewriter; bookmarks pass as they are,
 * and the rewriter says the newest resourceVersion. */
struct hooked {
	struct rewrite *rw;
	struct follow *f;
	char out[4096];
	size_t len;
};

static int hooked_out(void *ctx, const char *data, size_t len)
{
	struct hooked *h = ctx;
	assert_true(h->len + len < sizeof h->out);
	memcpy(h->out + h->len, data, len);
	h->len += len;
	h->out[h->len] = 0;
	return 0;
}

static int hooked_emit(void *ctx, enum watch_type type, const char *data, size_t len)
{
	struct hooked *h = ctx;
	return rewrite_emit_event(h->rw, type, data, len);
}

static int hooked_event(void *ctx, enum watch_type type, const struct stream_object *o)
{
	struct hooked *h = ctx;
	return follow_event(h->f, type, o);
}

static void test_rewrite_hook(void **state)
{
	(void)state;
	struct hooked h = {0};
	env.pool_name = "pool-a";
	h.rw = rewrite_new(REWRITE_WATCH, false, ISOLATION, &SERVICES, &REF, hooked_out, &h);
	h.f = follow_new(ISOLATION, &SERVICES, &REF, hooked_emit, &h);
	assert_non_null(h.rw);
	assert_non_null(h.f);
	rewrite_on_event(h.rw, hooked_event, &h);
	struct object a, b;
	nodeport(&a, "np-a", "pool-a", 40);
	nodeport(&b, "np-b", "pool-b", 41);
	char in[2048];
	snprintf(in, sizeof in,
		 "{\"type\":\"ADDED\",\"object\":%s}\n{\"type\":\"ADDED\",\"object\":%s}\n"
		 "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"45\"}}}\n",
		 a.json, b.json);
	assert_int_equal(rewrite_feed(h.rw, in, strlen(in)), 0);
	assert_non_null(
	    strstr(h.out, "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"np-a\""));
	assert_non_null(
	    strstr(h.out, "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"np-b\""));
	assert_non_null(strstr(h.out, "\"BOOKMARK\""));
	assert_int_equal(follow_held(h.f), 1); /* the follow saw np-b dropped */
	assert_int_equal(rewrite_last_rv(h.rw), 45);
	assert_int_equal(rewrite_finish(h.rw), 0);
	follow_free(h.f);
	rewrite_free(h.rw);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_events),
	    cmocka_unit_test(test_refilter_pool_move),
	    cmocka_unit_test(test_refilter_topology),
	    cmocka_unit_test(test_refilter_steps),
	    cmocka_unit_test(test_rewrite_hook),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
