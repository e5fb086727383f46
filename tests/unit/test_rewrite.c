/*
 * test_rewrite.c - responses filtered as they stream (filter/rewrite.h).
 *
 * Each body is fed whole, byte by byte and in random chunks, plain and
 * gzip; what comes out must be the same every time, and be what the filters
 * say: the envelope and the untouched objects byte for byte, changed objects
 * re-encoded, dropped ones gone (a list), DELETED (a watch) or reported (an
 * object).  The environment must be held around every use and released.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "filter/rewrite.h"
#include "util/buf.h"

/* ---- the environment, counting holds ---- */

static int holds, max_holds;

static const struct filter_env ENV = {
    .node_name = "node1",
    .pool_name = "pool-a",
    .hub_host = "169.254.2.1",
    .hub_port = "10268",
    .no_topology = true,
};

static const struct filter_env *hold(void *ctx)
{
	(void)ctx;
	if (++holds > max_holds)
		max_holds = holds;
	return &ENV;
}

static void release(void *ctx)
{
	(void)ctx;
	holds--;
}

static const struct filter_env_ref REF = {hold, release, NULL};

static const struct filter_target SERVICES = {"", "v1", "services"};
static const struct filter_target PODS = {"", "v1", "pods"};

#define KUBE_PROXY_MASK                                                                            \
	(FILTER_BIT(FILTER_DISCARDCLOUDSERVICE) | FILTER_BIT(FILTER_NODEPORTISOLATION))
#define KUBELET_MASK (FILTER_BIT(FILTER_MASTERSERVICE))

/* ---- objects: ' stands for " ---- */

static char *js(const char *s)
{
	char *out = strdup(s);
	assert_non_null(out);
	for (char *p = out; *p; p++)
		if (*p == '\'')
			*p = '"';
	return out;
}

#define SVC_KUBERNETES                                                                             \
	"{'metadata':{'name':'kubernetes','namespace':'default','resourceVersion':'5'},"           \
	"'spec':{'type':'ClusterIP','clusterIP':'10.96.0.1','clusterIPs':['10.96.0.1'],"           \
	"'ports':[{'name':'https','port':443}]}}"
#define SVC_DISCARD                                                                                \
	"{'metadata':{'name':'lb','namespace':'default','annotations':"                            \
	"{'svc.openyurt.io/discard':'true'}},'spec':{'type':'LoadBalancer'}}"
/* spaced as no encoder of ours would: it must pass as it came */
#define SVC_SPACED "{ 'metadata' : { 'name' : 'web' , 'namespace' : 'default' } , 'spec' : { } }"

static char *list_of(const char *const *items, size_t n)
{
	struct buf b = BUF_INIT;
	buf_append_str(&b, "{'kind':'ServiceList','apiVersion':'v1','metadata':"
			   "{'resourceVersion':'77'},'items':[");
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_append_str(&b, i % 2 ? " , " : ",");
		buf_append_str(&b, items[i]);
	}
	buf_append_str(&b, "]}\n");
	char *out = js(b.data);
	buf_free(&b);
	return out;
}

/* ---- feeding ---- */

enum how { WHOLE, BYTES, RANDOM };

static int collect(void *ctx, const char *data, size_t len)
{
	return buf_append(ctx, data, len);
}

static char *gzip_of(const char *data, size_t len, size_t *out_len)
{
	z_stream z = {0};
	assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
			 Z_OK);
	size_t cap = deflateBound(&z, len);
	char *out = malloc(cap);
	assert_non_null(out);
	z.next_in = (Bytef *)data;
	z.avail_in = (uInt)len;
	z.next_out = (Bytef *)out;
	z.avail_out = (uInt)cap;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	*out_len = cap - z.avail_out;
	deflateEnd(&z);
	return out;
}

struct result {
	int rc;
	bool dropped;
	unsigned long changed, ndropped;
	struct buf out;
};

static struct result run(enum rewrite_shape shape, filter_mask mask, const struct filter_target *t,
			 const char *body, enum how how, bool gz)
{
	struct result r = {0, false, 0, 0, BUF_INIT};
	size_t len = strlen(body);
	char *zipped = NULL;
	if (gz)
		body = zipped = gzip_of(body, len, &len);
	struct rewrite *rw = rewrite_new(shape, gz, mask, t, &REF, collect, &r.out);
	assert_non_null(rw);
	unsigned seed = 7;
	for (size_t at = 0; at < len && r.rc == 0;) {
		size_t n = how == WHOLE	  ? len - at
			   : how == BYTES ? 1
					  : 1 + (seed = seed * 1103515245u + 12345u) % 97;
		if (n > len - at)
			n = len - at;
		r.rc = rewrite_feed(rw, body + at, n);
		at += n;
	}
	if (r.rc == 0)
		r.rc = rewrite_finish(rw);
	if (r.rc)
		assert_true(strlen(rewrite_error(rw)) > 0);
	r.dropped = rewrite_dropped(rw);
	rewrite_counts(rw, &r.changed, &r.ndropped);
	rewrite_free(rw);
	free(zipped);
	assert_int_equal(holds, 0);
	return r;
}

/* The same output whatever the chunks and whether gzip. */
static struct result run_all_ways(enum rewrite_shape shape, filter_mask mask,
				  const struct filter_target *t, const char *body)
{
	struct result first = run(shape, mask, t, body, WHOLE, false);
	for (int gz = 0; gz < 2; gz++)
		for (enum how how = WHOLE; how <= RANDOM; how++) {
			struct result r = run(shape, mask, t, body, how, gz);
			assert_int_equal(r.rc, first.rc);
			assert_int_equal(r.out.len, first.out.len);
			if (r.out.len)
				assert_memory_equal(r.out.data, first.out.data, r.out.len);
			buf_free(&r.out);
		}
	return first;
}

/* ---- lists ---- */

static void test_list_drops_and_keeps_bytes(void **state)
{
	(void)state;
	char *kube = js(SVC_KUBERNETES), *spaced = js(SVC_SPACED);
	const char *const items[] = {SVC_KUBERNETES, SVC_DISCARD, SVC_SPACED, SVC_DISCARD};
	char *body = list_of(items, 4);
	struct result r = run_all_ways(REWRITE_LIST, KUBE_PROXY_MASK, &SERVICES, body);
	assert_int_equal(r.rc, 0);
	char *want_list = js("{'kind':'ServiceList','apiVersion':'v1','metadata':"
			     "{'resourceVersion':'77'},'items':[");
	struct buf want = BUF_INIT;
	buf_append_str(&want, want_list);
	buf_printf(&want, "%s,%s]}\n", kube, spaced);
	assert_string_equal(buf_cstr(&r.out), want.data);
	assert_int_equal(r.ndropped, 2);
	assert_int_equal(r.changed, 0);
	assert_true(max_holds == 1);
	buf_free(&want);
	buf_free(&r.out);
	free(want_list);
	free(body);
	free(kube);
	free(spaced);
}

static void test_list_changes_one(void **state)
{
	(void)state;
	char *spaced = js(SVC_SPACED);
	const char *const items[] = {SVC_SPACED, SVC_KUBERNETES, SVC_DISCARD};
	char *body = list_of(items, 3);
	struct result r = run_all_ways(REWRITE_LIST, KUBELET_MASK, &SERVICES, body);
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.changed, 1);
	/* the untouched items are their own bytes */
	assert_non_null(strstr(buf_cstr(&r.out), spaced));
	json_error_t e;
	json_t *list = json_loads(buf_cstr(&r.out), 0, &e);
	assert_non_null(list);
	json_t *its = json_object_get(list, "items");
	assert_int_equal(json_array_size(its), 3);
	json_t *spec = json_object_get(json_array_get(its, 1), "spec");
	assert_string_equal(json_string_value(json_object_get(spec, "clusterIP")), "169.254.2.1");
	assert_int_equal(json_integer_value(json_object_get(
			     json_array_get(json_object_get(spec, "ports"), 0), "port")),
			 10268);
	assert_string_equal(json_string_value(json_object_get(json_object_get(list, "metadata"),
							      "resourceVersion")),
			    "77");
	json_decref(list);
	buf_free(&r.out);
	free(body);
	free(spaced);
}

static void test_list_all_dropped_and_empty(void **state)
{
	(void)state;
	const char *const items[] = {SVC_DISCARD, SVC_DISCARD};
	char *body = list_of(items, 2);
	struct result r = run_all_ways(REWRITE_LIST, KUBE_PROXY_MASK, &SERVICES, body);
	char *want = js("{'kind':'ServiceList','apiVersion':'v1','metadata':"
			"{'resourceVersion':'77'},'items':[]}\n");
	assert_string_equal(buf_cstr(&r.out), want);
	buf_free(&r.out);
	free(want);
	free(body);
	body = list_of(NULL, 0);
	r = run_all_ways(REWRITE_LIST, KUBE_PROXY_MASK, &SERVICES, body);
	assert_string_equal(buf_cstr(&r.out), body);
	buf_free(&r.out);
	free(body);
}

static void test_list_malformed(void **state)
{
	(void)state;
	static const char *const bad[] = {
	    "{\"items\":[{\"a\":1},", /* cut */
	    "{\"items\":[1]}",	      /* an item that is not an object */
	    "[1,2]",
	    "{\"items\":[{\"a\":}]}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct result r =
		    run(REWRITE_LIST, KUBE_PROXY_MASK, &SERVICES, bad[i], WHOLE, false);
		assert_int_equal(r.rc, -1);
		buf_free(&r.out);
	}
	/* a gzip stream cut short */
	size_t zlen;
	char *z = gzip_of("{\"items\":[]}", 12, &zlen);
	struct buf out = BUF_INIT;
	struct rewrite *rw =
	    rewrite_new(REWRITE_LIST, true, KUBE_PROXY_MASK, &SERVICES, &REF, collect, &out);
	assert_int_equal(rewrite_feed(rw, z, zlen - 4), 0);
	assert_int_equal(rewrite_finish(rw), -1);
	rewrite_free(rw);
	buf_free(&out);
	free(z);
}

static int stop_after_first(void *ctx, const char *data, size_t len)
{
	(void)data, (void)len;
	return ++*(int *)ctx > 1;
}

static void test_reader_stops(void **state)
{
	(void)state;
	const char *const items[] = {SVC_KUBERNETES, SVC_SPACED};
	char *body = list_of(items, 2);
	int calls = 0;
	struct rewrite *rw = rewrite_new(REWRITE_LIST, false, KUBE_PROXY_MASK, &SERVICES, &REF,
					 stop_after_first, &calls);
	assert_int_equal(rewrite_feed(rw, body, strlen(body)), -1);
	assert_int_equal(rewrite_feed(rw, "x", 1), -1);
	assert_int_equal(holds, 0);
	rewrite_free(rw);
	free(body);
}

/* ---- gzip at the reader's pace ---- */

/* A reader that takes what came out only when the test says so. */
struct paced {
	struct buf out;
	size_t taken, limit, peak; /* peak: most bytes ever out and not taken */
};

static int paced_out(void *ctx, const char *data, size_t len)
{
	struct paced *p = ctx;
	assert_int_equal(buf_append(&p->out, data, len), 0);
	if (p->out.len - p->taken > p->peak)
		p->peak = p->out.len - p->taken;
	return 0;
}

static size_t paced_room(void *ctx)
{
	struct paced *p = ctx;
	size_t held = p->out.len - p->taken;
	return held < p->limit ? p->limit - held : 0;
}

/* 8 MB of services that pass, in 40 KB of gzip, fed 64 KiB at a time as
 * curl would, to a reader with 64 KiB of room: what is out and not taken
 * never passes the room by more than an item; the gzip waits (backlog)
 * while the reader does not read, and the reader gets what a fast one gets.
 * Without a pace (rewrite_finish), all of it at once. */
static void test_gzip_at_readers_pace(void **state)
{
	(void)state;
	enum { ITEMS = 100000 };
	const char **items = malloc(ITEMS * sizeof *items);
	assert_non_null(items);
	char *spaced = js(SVC_SPACED);
	for (size_t i = 0; i < ITEMS; i++)
		items[i] = SVC_SPACED;
	char *body = list_of(items, ITEMS);
	size_t zlen, len = strlen(body);
	char *z = gzip_of(body, len, &zlen);
	assert_true(zlen < len / 100);
	struct result fast = run(REWRITE_LIST, KUBE_PROXY_MASK, &SERVICES, body, WHOLE, false);
	assert_int_equal(fast.rc, 0);
	assert_int_equal(fast.out.len, len - ITEMS / 2 * 2); /* " , " became "," */

	struct paced p = {BUF_INIT, 0, 64 << 10, 0};
	struct rewrite *rw =
	    rewrite_new(REWRITE_LIST, true, KUBE_PROXY_MASK, &SERVICES, &REF, paced_out, &p);
	assert_non_null(rw);
	rewrite_set_room(rw, paced_room);
	size_t backlogs = 0, at = 0;
	while (at < zlen || rewrite_backlog(rw)) {
		if (rewrite_backlog(rw)) {
			backlogs++;
			assert_int_equal(rewrite_resume(rw), 0);
			if (rewrite_backlog(rw)) {
				/* what waits, waits only for room */
				assert_int_equal(paced_room(&p), 0);
				p.taken = p.out.len; /* the reader reads */
			}
			continue;
		}
		size_t n = zlen - at < (64u << 10) ? zlen - at : 64u << 10;
		assert_int_equal(rewrite_feed(rw, z + at, n), 0);
		at += n;
		p.taken = p.out.len - (p.out.len - p.taken) / 2; /* reads half of it */
	}
	assert_int_equal(rewrite_finish(rw), 0);
	rewrite_free(rw);
	print_message("  %zu B of gzip, %zu B out: %zu waits for the reader, at most %zu B not "
		      "taken\n",
		      zlen, p.out.len, backlogs, p.peak);
	assert_true(backlogs > 10);
	assert_true(p.peak <= p.limit + strlen(spaced) + 1);
	assert_int_equal(p.out.len, fast.out.len);
	assert_memory_equal(p.out.data, fast.out.data, fast.out.len);

	/* a reader that never reads: the end inflates what waits, whole */
	struct paced never = {BUF_INIT, 0, 64 << 10, 0};
	rw = rewrite_new(REWRITE_LIST, true, KUBE_PROXY_MASK, &SERVICES, &REF, paced_out, &never);
	rewrite_set_room(rw, paced_room);
	assert_int_equal(rewrite_feed(rw, z, zlen), 0);
	assert_true(rewrite_backlog(rw));
	assert_true(never.out.len <= never.limit + strlen(spaced) + 1);
	assert_int_equal(rewrite_finish(rw), 0);
	assert_false(rewrite_backlog(rw));
	assert_int_equal(never.out.len, fast.out.len);
	assert_memory_equal(never.out.data, fast.out.data, fast.out.len);
	rewrite_free(rw);

	/* a corrupt stream fails where it is inflated, backlog or not */
	z[zlen / 2] ^= 0x55;
	struct paced bad = {BUF_INIT, 0, 64 << 10, 0};
	rw = rewrite_new(REWRITE_LIST, true, KUBE_PROXY_MASK, &SERVICES, &REF, paced_out, &bad);
	rewrite_set_room(rw, paced_room);
	int rc = rewrite_feed(rw, z, zlen);
	while (rc == 0 && rewrite_backlog(rw)) {
		bad.taken = bad.out.len;
		rc = rewrite_resume(rw);
	}
	assert_int_equal(rc == 0 ? rewrite_finish(rw) : rc, -1);
	assert_false(rewrite_backlog(rw));
	assert_true(strlen(rewrite_error(rw)) > 0);
	rewrite_free(rw);

	assert_int_equal(holds, 0);
	buf_free(&bad.out);
	buf_free(&never.out);
	buf_free(&p.out);
	buf_free(&fast.out);
	free(z);
	free(body);
	free(spaced);
	free(items);
}

/* ---- watches ---- */

static void test_watch_events(void **state)
{
	(void)state;
	struct buf body = BUF_INIT;
	buf_printf(&body,
		   "{'type':'ADDED','object':%s}\n{'type':'MODIFIED','object':%s}\n"
		   "{'type':'BOOKMARK','object':{'kind':'Service','metadata':"
		   "{'resourceVersion':'9'}}}\n{'type':'DELETED','object':%s}"
		   "{'type':'ERROR','object':{'kind':'Status','code':410}}\n",
		   SVC_SPACED, SVC_DISCARD, SVC_DISCARD);
	char *text = js(body.data);
	struct result r = run_all_ways(REWRITE_WATCH, KUBE_PROXY_MASK, &SERVICES, text);
	assert_int_equal(r.rc, 0);
	char *spaced = js(SVC_SPACED), *discard = js(SVC_DISCARD);
	struct buf want = BUF_INIT;
	buf_printf(&want,
		   "{'type':'ADDED','object':%s}\n{'type':'DELETED','object':%s}\n"
		   "{'type':'BOOKMARK','object':{'kind':'Service','metadata':"
		   "{'resourceVersion':'9'}}}\n{'type':'DELETED','object':%s}\n"
		   "{'type':'ERROR','object':{'kind':'Status','code':410}}\n",
		   spaced, discard, discard);
	char *want_text = js(want.data);
	assert_string_equal(buf_cstr(&r.out), want_text);
	assert_int_equal(r.ndropped, 2);
	free(want_text);
	free(spaced);
	free(discard);
	buf_free(&want);
	buf_free(&body);
	buf_free(&r.out);
	free(text);
}

static void test_watch_changed(void **state)
{
	(void)state;
	struct buf body = BUF_INIT;
	buf_printf(&body, "{'type':'MODIFIED','object':%s}\n", SVC_KUBERNETES);
	char *text = js(body.data);
	struct result r = run_all_ways(REWRITE_WATCH, KUBELET_MASK, &SERVICES, text);
	json_error_t e;
	json_t *ev = json_loads(buf_cstr(&r.out), 0, &e);
	assert_non_null(ev);
	assert_string_equal(json_string_value(json_object_get(ev, "type")), "MODIFIED");
	assert_string_equal(
	    json_string_value(json_object_get(
		json_object_get(json_object_get(ev, "object"), "spec"), "clusterIP")),
	    "169.254.2.1");
	assert_int_equal(r.out.data[r.out.len - 1], '\n');
	json_decref(ev);
	buf_free(&body);
	buf_free(&r.out);
	free(text);
}

/* ---- single objects ---- */

static void test_object(void **state)
{
	(void)state;
	char *pod = js("{'kind':'Pod','metadata':{'name':'p','namespace':'default'},'spec':"
		       "{'containers':[{'name':'c','env':[{'name':'KUBERNETES_SERVICE_HOST',"
		       "'value':'api.example.com'}]}]}}");
	struct result r =
	    run_all_ways(REWRITE_OBJECT, FILTER_BIT(FILTER_SERVICEENVUPDATER), &PODS, pod);
	assert_int_equal(r.rc, 0);
	assert_false(r.dropped);
	assert_non_null(strstr(buf_cstr(&r.out), "\"value\":\"169.254.2.1\""));
	buf_free(&r.out);
	/* untouched: its own bytes */
	r = run_all_ways(REWRITE_OBJECT, KUBELET_MASK, &PODS, pod);
	assert_string_equal(buf_cstr(&r.out), pod);
	buf_free(&r.out);
	free(pod);

	char *lb = js(SVC_DISCARD);
	r = run_all_ways(REWRITE_OBJECT, KUBE_PROXY_MASK, &SERVICES, lb);
	assert_int_equal(r.rc, 0);
	assert_true(r.dropped);
	assert_int_equal(r.out.len, 0);
	buf_free(&r.out);
	free(lb);

	r = run(REWRITE_OBJECT, KUBE_PROXY_MASK, &SERVICES, "[1]", WHOLE, false);
	assert_int_equal(r.rc, -1);
	buf_free(&r.out);
}

/* ---- objects no filter can read ---- */

/* Pods with KUBERNETES_SERVICE_HOST (serviceenvupdater wants each): one
 * ordinary, then four it cannot read.  \\u0000 is JSON's escape, not a C NUL. */
#define POD_OK                                                                                     \
	"{'metadata':{'name':'ok','namespace':'default'},'spec':{'containers':[{'name':'c',"       \
	"'env':[{'name':'KUBERNETES_SERVICE_HOST','value':'api.example.com'}]}]}}"
#define ODD_ENV "'spec':{'containers':[{'env':[{'name':'KUBERNETES_SERVICE_HOST','value':'a'}]}]}"
static const char *const ODD_PODS[] = {
    "{'metadata':{'name':'a\\u0000b','namespace':'default'}," ODD_ENV "}",
    "{'metadata':{'name':'sur','namespace':'default','annotations':{'x':'\\udcff'}}," ODD_ENV "}",
    "{'metadata':{'name':'big','namespace':'default'},'n':123456789012345678901234567890," ODD_ENV
    "}",
    "{'metadata':{'name':'type','namespace':'default'},'spec':{'containers':[{'env':"
    "[{'name':'KUBERNETES_SERVICE_HOST','value':6443}]}]}}",
};
#define NODD (sizeof ODD_PODS / sizeof ODD_PODS[0])

static void test_unreadable_items_pass(void **state)
{
	(void)state;
	const char *items[1 + NODD] = {POD_OK};
	for (size_t i = 0; i < NODD; i++)
		items[1 + i] = ODD_PODS[i];
	char *body = list_of(items, 1 + NODD);
	unsigned long long before = filter_unparsable_total(FILTER_SERVICEENVUPDATER);
	struct result r =
	    run_all_ways(REWRITE_LIST, FILTER_BIT(FILTER_SERVICEENVUPDATER), &PODS, body);
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.changed, 1);
	/* whole, and each odd pod its own bytes */
	json_error_t e;
	json_t *list = json_loads(buf_cstr(&r.out), JSON_ALLOW_NUL, &e);
	if (!list) /* jansson refuses the lone surrogate: look at the bytes */
		assert_non_null(strstr(buf_cstr(&r.out), "]}\n"));
	json_decref(list);
	assert_non_null(strstr(buf_cstr(&r.out), "\"value\":\"169.254.2.1\""));
	for (size_t i = 0; i < NODD; i++) {
		char *odd = js(ODD_PODS[i]);
		assert_non_null(strstr(buf_cstr(&r.out), odd));
		free(odd);
	}
	/* seven runs (one, then plain and gzip three ways of chunking), NODD each */
	assert_int_equal(filter_unparsable_total(FILTER_SERVICEENVUPDATER) - before, 7 * NODD);
	buf_free(&r.out);
	free(body);

	/* a watch event of each: as it came, and the stream goes on */
	struct buf w = BUF_INIT;
	for (size_t i = 0; i < NODD; i++)
		buf_printf(&w, "{'type':'ADDED','object':%s}\n", ODD_PODS[i]);
	buf_printf(&w, "{'type':'ADDED','object':%s}\n", POD_OK);
	char *text = js(w.data);
	r = run_all_ways(REWRITE_WATCH, FILTER_BIT(FILTER_SERVICEENVUPDATER), &PODS, text);
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.changed, 1);
	for (size_t i = 0; i < NODD; i++) {
		char *odd = js(ODD_PODS[i]);
		assert_non_null(strstr(buf_cstr(&r.out), odd));
		free(odd);
	}
	buf_free(&r.out);
	buf_free(&w);
	free(text);

	/* a single object: the same */
	for (size_t i = 0; i < NODD; i++) {
		char *odd = js(ODD_PODS[i]);
		r = run_all_ways(REWRITE_OBJECT, FILTER_BIT(FILTER_SERVICEENVUPDATER), &PODS, odd);
		assert_int_equal(r.rc, 0);
		assert_false(r.dropped);
		assert_string_equal(buf_cstr(&r.out), odd);
		buf_free(&r.out);
		free(odd);
	}
	/* what is not JSON at the list level is still cut */
	r = run(REWRITE_LIST, FILTER_BIT(FILTER_SERVICEENVUPDATER), &PODS, "{\"items\":[{},]}",
		WHOLE, false);
	assert_int_equal(r.rc, -1);
	buf_free(&r.out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_list_drops_and_keeps_bytes),
	    cmocka_unit_test(test_list_changes_one),
	    cmocka_unit_test(test_list_all_dropped_and_empty),
	    cmocka_unit_test(test_list_malformed),
	    cmocka_unit_test(test_reader_stops),
	    cmocka_unit_test(test_gzip_at_readers_pace),
	    cmocka_unit_test(test_watch_events),
	    cmocka_unit_test(test_watch_changed),
	    cmocka_unit_test(test_object),
	    cmocka_unit_test(test_unreadable_items_pass),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
