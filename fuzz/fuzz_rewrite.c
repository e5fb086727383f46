/*
 * fuzz_rewrite.c - a response filtered as it streams (src/filter/rewrite.c)
 * on any body, through any set of filters: fed once whole and once in the
 * pieces of a chunk plan, it must give the same bytes and the same verdict;
 * what comes out of a body that was accepted must be JSON of its shape (one
 * object for a list or an object, one event object per line for a watch),
 * and the environment must be let go as often as it was held.
 *
 * Input: one byte of chunk plan (fuzz_common.h), one byte of shape (list,
 * watch, object: its value mod 3), one byte of filter mask (its low 7
 * bits), then the body.
 */
#include <jansson.h>
#include <stdint.h>
#include <string.h>

#include "filter/rewrite.h"
#include "fuzz_common.h"
#include "util/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int holds;

static const char *const POOL[] = {"node-a", "node-b", "node1"};

static const char *keys_of(const struct filter_env *env, const char *ns, const char *name)
{
	(void)env, (void)ns;
	if (!strncmp(name, "h", 1))
		return "kubernetes.io/hostname";
	if (!strncmp(name, "p", 1))
		return "openyurt.io/nodepool";
	return NULL;
}

static const struct filter_env ENV = {
    .node_name = "node1",
    .pool_name = "pool-a",
    .hub_host = "169.254.2.1",
    .hub_port = "10268",
    .pool_topology = true,
    .pool_nodes = POOL,
    .npool_nodes = 3,
    .topology_keys = keys_of,
};

static const struct filter_env *hold(void *ctx)
{
	(void)ctx;
	holds++;
	return &ENV;
}

static void release(void *ctx)
{
	(void)ctx;
	holds--;
}

static int collect(void *ctx, const char *data, size_t len)
{
	if (buf_append(ctx, data, len) < 0)
		__builtin_trap();
	return 0;
}

struct run {
	struct buf out;
	int rc;
	bool dropped;
};

static void rewrite(struct run *r, enum rewrite_shape shape, filter_mask mask,
		    const struct filter_target *t, const char *s, size_t len,
		    struct fz_chunks *plan)
{
	static const struct filter_env_ref ref = {hold, release, NULL};
	struct rewrite *rw = rewrite_new(shape, false, mask, t, &ref, collect, &r->out);
	FZ_CHECK(rw != NULL);
	r->rc = 0;
	for (size_t off = 0; off < len && r->rc == 0;) {
		size_t n = plan ? fz_chunks_next(plan, len - off) : len;
		r->rc = rewrite_feed(rw, s + off, n);
		off += n;
	}
	if (r->rc == 0)
		r->rc = rewrite_finish(rw);
	FZ_CHECK(r->rc == 0 || *rewrite_error(rw));
	r->dropped = rewrite_dropped(rw);
	rewrite_free(rw);
	FZ_CHECK(holds == 0);
}

static void check_json(const char *s, size_t len, bool watch)
{
	if (!watch) {
		json_t *v = json_loadb(s, len, 0, NULL);
		/* jansson refuses what yajl takes (a number past 64 bits): then
		 * the body passed as it came, which is no finding */
		FZ_CHECK(v == NULL || json_is_object(v));
		json_decref(v);
		return;
	}
	/* A stream of events, each ended by a newline.  An event passed as it
	 * came may hold newlines of its own (JSON white space), so the stream
	 * is read value by value, not line by line. */
	FZ_CHECK(len == 0 || s[len - 1] == '\n');
	while (len) {
		json_error_t e;
		json_t *v = json_loadb(s, len, JSON_DISABLE_EOF_CHECK, &e);
		if (!v)
			break; /* jansson refuses what yajl took: no finding */
		FZ_CHECK(json_is_object(v) && json_object_get(v, "type") &&
			 json_object_get(v, "object"));
		json_decref(v);
		size_t used = (size_t)e.position;
		FZ_CHECK(used > 0 && used <= len);
		s += used;
		len -= used;
		while (len && (*s == '\n' || *s == ' ' || *s == '\t' || *s == '\r'))
			s++, len--;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3)
		return 0;
	struct fz_chunks plan;
	fz_chunks_init(&plan, data[0]);
	enum rewrite_shape shape = (enum rewrite_shape)(data[1] % 3);
	filter_mask mask = data[2] & FILTER_ALL;
	static const struct filter_target targets[] = {
	    {"", "v1", "services"},   {"discovery.k8s.io", "v1", "endpointslices"},
	    {"", "v1", "endpoints"},  {"", "v1", "pods"},
	    {"", "v1", "configmaps"},
	};
	const struct filter_target *t = &targets[(data[1] / 3) % 5];
	const char *body = (const char *)data + 3;
	size_t len = size - 3;

	struct run whole = {BUF_INIT, 0, false}, pieces = {BUF_INIT, 0, false};
	rewrite(&whole, shape, mask, t, body, len, NULL);
	rewrite(&pieces, shape, mask, t, body, len, &plan);
	FZ_CHECK(whole.rc == pieces.rc && whole.dropped == pieces.dropped);
	if (whole.rc == 0) {
		FZ_CHECK(whole.out.len == pieces.out.len &&
			 !memcmp(buf_cstr(&whole.out), buf_cstr(&pieces.out), whole.out.len));
		FZ_CHECK(!whole.dropped || whole.out.len == 0);
		if (!whole.dropped)
			check_json(buf_cstr(&whole.out), whole.out.len, shape == REWRITE_WATCH);
	}
	buf_free(&whole.out);
	buf_free(&pieces.out);
	return 0;
}
