/*
 * fuzz_etcd_client.c - the answers of etcd's JSON gateway as the etcd
 * client decodes them (src/etcd/client.c, through client_internal.h): the
 * range, txn, deleterange and status bodies, error bodies, and the watch
 * stream, which must give the same events and verdict however it is split.
 * The keys of a range answer also go through er_key_rest, as every place
 * of the etcd store that cuts a prefix off an answered key does: an answer
 * may hold keys outside the range asked for, shorter than the prefix.
 *
 * Input: one byte choosing the decoder (and, for txn, error and watch, its
 * parameters: see below), then the body.
 */
#include <stdint.h>
#include <string.h>

#include "etcd/client_internal.h"
#include "fuzz_common.h"
#include "storage/etcd_internal.h"
#include "util/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_kv(const struct etcd_kv *kv)
{
	FZ_CHECK(kv->key && kv->value);
	FZ_CHECK(kv->key[kv->key_len] == '\0' && kv->value[kv->value_len] == '\0');
}

static void check_range(const struct etcd_range_result *r)
{
	FZ_CHECK(r->n == 0 || r->kvs);
	for (size_t i = 0; i < r->n; i++)
		check_kv(&r->kvs[i]);
}

/* What is left of a key after a prefix is inside the key, after that
 * prefix, and not empty; or there is none. */
static void check_key_rest(const struct etcd_kv *kv)
{
	static const char *const prefixes[] = {"/yurthub/registry/h/edge-1/kubelet", "/", ""};
	for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
		size_t plen = strlen(prefixes[i]), n = 7;
		const char *rest = er_key_rest(kv, prefixes[i], plen, &n);
		if (!rest) {
			FZ_CHECK(n == 0);
			continue;
		}
		FZ_CHECK(rest == kv->key + plen && n == kv->key_len - plen && n > 0);
		FZ_CHECK(!memcmp(kv->key, prefixes[i], plen) && rest[n] == '\0');
	}
}

static void fuzz_range(const char *p, size_t len)
{
	struct etcd_range_result r;
	if (etcd_parse_range_json(p, len, &r) == ETCD_OK) {
		check_range(&r);
		for (size_t i = 0; i < r.n; i++)
			check_key_rest(&r.kvs[i]);
	} else
		FZ_CHECK(r.n == 0 && r.kvs == NULL);
	etcd_range_result_free(&r);
}

/* spec bits 0-1: RANGE ops on success, bits 2-3: on failure. */
static void fuzz_txn(uint8_t spec, const char *p, size_t len)
{
	struct etcd_op ops[6];
	size_t ns = spec & 3, nf = (spec >> 2) & 3;
	for (size_t i = 0; i < ns + nf; i++)
		ops[i] = (struct etcd_op){.kind = ETCD_OP_RANGE, .key = "k", .key_len = 1};
	struct etcd_txn t = {.success = ops, .nsuccess = ns, .failure = ops + ns, .nfailure = nf};
	struct etcd_txn_result r;
	if (etcd_parse_txn_json(p, len, &t, &r) == ETCD_OK) {
		FZ_CHECK(r.nranges == (r.succeeded ? ns : nf));
		for (size_t i = 0; i < r.nranges; i++)
			check_range(&r.ranges[i]);
	} else {
		FZ_CHECK(r.nranges == 0 && r.ranges == NULL);
	}
	etcd_txn_result_free(&r);
}

static void fuzz_status(const char *p, size_t len)
{
	struct etcd_status st;
	int64_t deleted;
	if (etcd_parse_status_json(p, len, &st) == ETCD_OK)
		FZ_CHECK(memchr(st.version, '\0', sizeof st.version) != NULL);
	etcd_parse_deleterange_json(p, len, &deleted);
}

/* spec bits 0-2: the HTTP status, bit 3: idempotent. */
static void fuzz_error(uint8_t spec, const char *p, size_t len)
{
	static const long status[8] = {400, 404, 408, 413, 429, 500, 502, 503};
	bool retry = true;
	enum etcd_err e = etcd_parse_error_json(status[spec & 7], spec & 8, p, len, &retry);
	FZ_CHECK(e != ETCD_OK);
	FZ_CHECK(!retry || (spec & 8)); /* only what is idempotent is sent again */
}

static int on_events(void *ctx, const struct etcd_event *ev, size_t n, int64_t rev)
{
	struct buf *log = ctx;
	if (buf_printf(log, "%lld:%zu;", (long long)rev, n) < 0)
		__builtin_trap();
	for (size_t i = 0; i < n; i++) {
		check_kv(&ev[i].kv);
		if (buf_printf(log, "%d %zu %zu %lld %lld %lld;", ev[i].is_delete, ev[i].kv.key_len,
			       ev[i].kv.value_len, (long long)ev[i].kv.create_revision,
			       (long long)ev[i].kv.mod_revision, (long long)ev[i].kv.version) < 0 ||
		    buf_append(log, ev[i].kv.key, ev[i].kv.key_len) < 0 ||
		    buf_append(log, ev[i].kv.value, ev[i].kv.value_len) < 0)
			__builtin_trap();
	}
	return 0;
}

/* The stream in pieces of the plan (NULL: in one piece). */
static enum etcd_err watch(struct buf *log, const char *p, size_t len, struct fz_chunks *plan)
{
	enum { MAX_PIECES = 4096 };
	static const char *pieces[MAX_PIECES];
	static size_t lens[MAX_PIECES];
	size_t n = 0;
	for (size_t off = 0; off < len;) {
		size_t k = plan && n + 1 < MAX_PIECES ? fz_chunks_next(plan, len - off) : len - off;
		pieces[n] = p + off;
		lens[n++] = k;
		off += k;
	}
	return etcd_parse_watch_stream(pieces, lens, n, on_events, log);
}

static void fuzz_watch(uint8_t spec, const char *p, size_t len)
{
	struct fz_chunks plan;
	fz_chunks_init(&plan, spec);
	struct buf a = BUF_INIT, b = BUF_INIT;
	enum etcd_err ea = watch(&a, p, len, NULL);
	enum etcd_err eb = watch(&b, p, len, &plan);
	FZ_CHECK(ea == eb);
	FZ_CHECK(a.len == b.len && (!a.len || !memcmp(a.data, b.data, a.len)));
	buf_free(&a);
	buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t sel = data[0];
	const char *p = (const char *)data + 1;
	size_t len = size - 1;
	switch (sel % 6) {
	case 0:
		fuzz_range(p, len);
		break;
	case 1:
		fuzz_txn(sel / 6, p, len);
		break;
	case 2:
		fuzz_status(p, len);
		break;
	case 3:
		fuzz_error(sel / 6, p, len);
		break;
	default:
		fuzz_watch(sel / 6, p, len);
		break;
	}
	return 0;
}
