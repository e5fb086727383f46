/*
 * test_stream.c - kube/stream: the list and watch decoders fed whole, byte by
 * byte and in random chunks (every item/event span must be the exact original
 * bytes), what is picked, malformed input, bounded memory, a 16 MB list, the
 * bounded gunzip, and the bounds a hostile upstream meets (object size, bytes
 * without a token, depth, NUL in names).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ZLIB_CONST
#include <yajl/yajl_parse.h>
#include <zlib.h>

#include "kube/stream.h"
#include "kube/stream_internal.h"
#include "util/buf.h"

/* ---- helpers: randomness, chunked feeding ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

enum how { WHOLE, BYTES, RANDOM, BIG };

static size_t chunk_size(enum how how, size_t left)
{
	size_t n;
	uint32_t r = rnd() % 4;

	if (how == WHOLE)
		n = left;
	else if (how == BYTES)
		n = 1;
	else if (how == BIG)
		n = 64 * 1024;
	else
		n = r == 0 ? 1 + rnd() % 16 : r == 1 ? 1 + rnd() % 65536 : 1 + rnd() % 2048;
	return n < left ? n : left;
}

typedef int (*feed_fn)(void *dec, const char *data, size_t len);
typedef void (*after_fn)(void *arg);

static int feed_list(void *dec, const char *data, size_t len)
{
	return list_decoder_feed(dec, data, len);
}

static int feed_watch(void *dec, const char *data, size_t len)
{
	return watch_decoder_feed(dec, data, len);
}

static int feed_gunzip(void *dec, const char *data, size_t len)
{
	return gunzip_feed(dec, data, len);
}

/* Feeds body in chunks, each in a malloc'ed block of its own so that ASan
 * catches any read outside the chunk or after its feed.  First -1, or 0. */
static int feed_all(feed_fn feed, void *dec, const char *body, size_t len, enum how how,
		    after_fn after, void *arg)
{
	size_t at = 0;

	while (at < len) {
		size_t n = chunk_size(how, len - at);
		char *copy = malloc(n);
		int rc;

		assert_non_null(copy);
		memcpy(copy, body + at, n);
		rc = feed(dec, copy, n);
		free(copy);
		if (after)
			after(arg);
		if (rc)
			return rc;
		at += n;
	}
	return 0;
}

/* s for one line of output: non-printable bytes as '.', at most 40 bytes. */
static const char *shown(const char *s, char *out, size_t n)
{
	size_t i;

	for (i = 0; s[i] && i < 40 && i + 1 < n; i++)
		out[i] = (unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e ? '.' : s[i];
	out[i] = '\0';
	return out;
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* ---- fixtures: a body and the objects it holds ---- */

struct want {
	char *name, *ns, *rv, *kind;
	enum watch_type type;
	bool iee;
	int code;
};

struct fix {
	struct buf body;
	size_t n, cap;
	size_t *off, *len; /* each object's span in body */
	struct want *want;
	size_t largest;
};

static void fix_free(struct fix *f)
{
	for (size_t i = 0; i < f->n; i++) {
		free(f->want[i].name);
		free(f->want[i].ns);
		free(f->want[i].rv);
		free(f->want[i].kind);
	}
	free(f->off);
	free(f->len);
	free(f->want);
	buf_free(&f->body);
	memset(f, 0, sizeof(*f));
}

static void fix_raw(struct fix *f, const char *s)
{
	assert_int_equal(buf_append_str(&f->body, s), 0);
}

static char *dup_or_empty(const char *s)
{
	char *d = strdup(s ? s : "");

	assert_non_null(d);
	return d;
}

/* Appends an object and records where it is and what must be picked. */
static struct want *fix_obj(struct fix *f, const char *json, size_t len, const char *name,
			    const char *ns, const char *rv, const char *kind)
{
	struct want *w;

	if (f->n == f->cap) {
		f->cap = f->cap ? 2 * f->cap : 16;
		f->off = realloc(f->off, f->cap * sizeof(*f->off));
		f->len = realloc(f->len, f->cap * sizeof(*f->len));
		f->want = realloc(f->want, f->cap * sizeof(*f->want));
		assert_true(f->off && f->len && f->want);
	}
	f->off[f->n] = f->body.len;
	f->len[f->n] = len;
	if (len > f->largest)
		f->largest = len;
	assert_int_equal(buf_append(&f->body, json, len), 0);
	w = &f->want[f->n++];
	memset(w, 0, sizeof(*w));
	w->name = dup_or_empty(name);
	w->ns = dup_or_empty(ns);
	w->rv = dup_or_empty(rv);
	w->kind = dup_or_empty(kind);
	return w;
}

/* Whitespace after '{' '[' ',' ':' and before '}' ']', outside strings. */
static void prettify(const char *s, size_t len, struct buf *out)
{
	bool in_str = false, esc = false;

	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (!in_str && (c == '}' || c == ']'))
			buf_append_str(out, "\n ");
		buf_append_char(out, c);
		if (in_str) {
			if (esc)
				esc = false;
			else if (c == '\\')
				esc = true;
			else if (c == '"')
				in_str = false;
		} else if (c == '"') {
			in_str = true;
		} else if (c == ',' || c == '{' || c == '[') {
			buf_append_str(out, "\n\t ");
		} else if (c == ':') {
			buf_append_str(out, " ");
		}
	}
}

/* Braces, brackets, quotes, escapes, \u escapes, a surrogate pair, raw UTF-8
 * and \u0000 inside strings; a JSON document inside a string. */
#define TRICKY_ANNOTATIONS                                                                         \
	"\"note\":\"a {brace} and [bracket] \\\"q\\\" \\\\ back \\t \\u00e9\\u65e5 "               \
	"\xc3\xa9\xe6\x97\xa5 \\ud83d\\ude00 }{ \\u0000 end}\","                                   \
	"\"json\":\"{\\\"items\\\":[{\\\"metadata\\\":{\\\"name\\\":\\\"fake\\\"}}]}\""

static void gen_pod_metadata(struct buf *b, int i, const char *jname, const char *ns,
			     const char *rv)
{
	const char *owner = "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":"
			    "\"ReplicaSet\",\"name\":\"rs-owner\",\"uid\":\"0a1b2c3d-1111\","
			    "\"controller\":true,\"blockOwnerDeletion\":true}]";

	if (i % 3 == 1) {
		buf_printf(b,
			   "{\"resourceVersion\":\"%s\",%s,\"namespace\":\"%s\",\"name\":\"%s\"}",
			   rv, owner, ns, jname);
		return;
	}
	buf_printf(b,
		   "{\"name\":\"%s\",\"namespace\":\"%s\",\"uid\":\"6f1c9d52-%08x-4b7e\","
		   "\"resourceVersion\":\"%s\",\"creationTimestamp\":\"2026-11-01T10:00:00Z\","
		   "\"labels\":{\"app\":\"web\",\"name\":\"label-name\"},"
		   "\"annotations\":{" TRICKY_ANNOTATIONS
		   ",\"k8s.io/initial-events-end\":\"true\"},"
		   "%s}",
		   jname, ns, (unsigned)i, rv, owner);
}

static void gen_pod_spec(struct buf *b, int i, size_t start, size_t size)
{
	buf_printf(
	    b,
	    "{\"nodeName\":\"node-%d\",\"volumes\":[{\"name\":\"cfg\",\"configMap\":{"
	    "\"name\":\"cm\",\"items\":[{\"key\":\"a\",\"path\":\"b\"}],\"defaultMode\":420}}],"
	    "\"template\":{\"metadata\":{\"name\":\"not-me\",\"namespace\":\"nope\","
	    "\"resourceVersion\":\"1\"}},\"containers\":[{\"name\":\"app\",\"image\":"
	    "\"registry.example.com/team/app:1.4.2\",\"ports\":[{\"protocol\":\"TCP\","
	    "\"containerPort\":8080}],\"env\":[",
	    i % 13);
	for (int e = 0; b->len - start + 200 < size; e++)
		buf_printf(b, "%s{\"name\":\"SETTING_%d\",\"value\":\"value-%d-abcdefghijklmnop\"}",
			   e ? "," : "", e, e);
	buf_append_str(b, "]}]}");
}

/* A realistic pod of about `size` bytes; variants by i: kind present or not,
 * metadata key order, metadata after spec, an escaped name, pretty-printed.
 * Ends with a number right before its last braces. */
static void gen_pod(struct fix *f, int i, size_t size)
{
	struct buf b = BUF_INIT, pretty = BUF_INIT;
	struct buf meta = BUF_INIT, spec = BUF_INIT;
	char jname[32], name[32], ns[16], rv[24];
	bool has_kind = i % 5 != 0;

	snprintf(ns, sizeof(ns), "ns-%d", i % 7);
	snprintf(rv, sizeof(rv), "%d", 1000 + 3 * i);
	snprintf(jname, sizeof(jname), i % 11 == 0 ? "pod-\\u00e9-%d" : "pod-%d", i);
	snprintf(name, sizeof(name), i % 11 == 0 ? "pod-\xc3\xa9-%d" : "pod-%d", i);
	gen_pod_metadata(&meta, i, jname, ns, rv);
	gen_pod_spec(&spec, i, 0, size > meta.len ? size - meta.len : 0);
	buf_append_str(&b, "{");
	if (i % 4 == 2)
		buf_printf(&b, "\"spec\":%s,\"metadata\":%s,", spec.data, meta.data);
	if (has_kind)
		buf_append_str(&b, "\"kind\":\"Pod\",\"apiVersion\":\"v1\",");
	if (i % 4 != 2)
		buf_printf(&b, "\"metadata\":%s,\"spec\":%s,", meta.data, spec.data);
	buf_printf(&b, "\"status\":{\"phase\":\"Running\",\"restartCount\":%d}}", i % 4);
	if (i % 7 == 3)
		prettify(b.data, b.len, &pretty);
	if (pretty.len)
		fix_obj(f, pretty.data, pretty.len, name, ns, rv, has_kind ? "Pod" : "");
	else
		fix_obj(f, b.data, b.len, name, ns, rv, has_kind ? "Pod" : "");
	buf_free(&b);
	buf_free(&pretty);
	buf_free(&meta);
	buf_free(&spec);
}

#define LIST_META                                                                                  \
	"\"metadata\":{\"resourceVersion\":\"987654\",\"continue\":"                               \
	"\"eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6OTg3NjU0fQ==\",\"remainingItemCount\":4321}"

enum meta_pos { META_BEFORE, META_AFTER, META_NONE };

/* sizes: 0 for about 3 KB each, else a spread from 300 B to 50 KB. */
static void gen_list(struct fix *f, int n, bool spread, enum meta_pos pos)
{
	fix_raw(f, "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",");
	if (pos == META_BEFORE)
		fix_raw(f, LIST_META ",");
	fix_raw(f, "\"items\":[");
	for (int i = 0; i < n; i++) {
		if (i)
			fix_raw(f, i % 6 == 5 ? " ,\n  " : ",");
		gen_pod(f, i, spread ? 300 + ((size_t)i * 7919) % 50000 : 3300);
	}
	fix_raw(f, "]");
	if (pos == META_AFTER)
		fix_raw(f, "," LIST_META);
	fix_raw(f, "}\n");
}

/* ---- list decoding ---- */

struct list_run {
	const struct fix *f;
	struct list_decoder *d;
	size_t seen;
	size_t stop_at;	       /* the item whose callback says stop; SIZE_MAX: none */
	const char *rv_during; /* list rv expected while items arrive; NULL: unchecked */
	size_t max_held;
};

/* A decimal uint64, else 0. */
static uint64_t want_rv(const char *s)
{
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return 0;
	errno = 0;
	v = strtoull(s, &end, 10);
	return *end || errno ? 0 : v;
}

static void check_object(const struct fix *f, size_t i, const struct stream_object *o)
{
	const struct want *w = &f->want[i];

	assert_int_equal(o->len, f->len[i]);
	assert_true(memcmp(o->data, f->body.data + f->off[i], o->len) == 0);
	assert_string_equal(o->name, w->name);
	assert_string_equal(o->namespace, w->ns);
	assert_string_equal(o->resource_version, w->rv);
	assert_string_equal(o->kind, w->kind);
	assert_true(o->rv == want_rv(w->rv));
}

static int on_item(void *ctx, const struct stream_object *o)
{
	struct list_run *r = ctx;
	size_t i = r->seen++;

	assert_true(i < r->f->n);
	check_object(r->f, i, o);
	if (r->rv_during)
		assert_string_equal(list_decoder_meta(r->d)->resource_version, r->rv_during);
	assert_int_equal(list_decoder_meta(r->d)->items, i + 1);
	return i == r->stop_at;
}

static void list_after_feed(void *arg)
{
	struct list_run *r = arg;
	size_t cap = list_decoder_held_cap(r->d);

	if (cap > r->max_held)
		r->max_held = cap;
}

/* Decodes f->body; the decoder is left in r->d for the caller to inspect. */
static int run_list(struct list_run *r, const struct fix *f, enum how how, struct list_meta *m)
{
	int rc;

	r->f = f;
	r->seen = 0;
	r->max_held = 0;
	r->d = list_decoder_new(on_item, r);
	assert_non_null(r->d);
	rc = feed_all(feed_list, r->d, f->body.data, f->body.len, how, list_after_feed, r);
	return rc ? rc : list_decoder_finish(r->d, m);
}

static void assert_list_meta(const struct list_meta *m, size_t items)
{
	assert_string_equal(m->kind, "PodList");
	assert_string_equal(m->resource_version, "987654");
	assert_int_equal(m->rv, 987654);
	assert_non_null(m->continue_token);
	assert_string_equal(m->continue_token, "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6OTg3NjU0fQ==");
	assert_int_equal(m->remaining_item_count, 4321);
	assert_int_equal(m->items, items);
}

static void list_roundtrip(enum meta_pos pos, enum how how, int n)
{
	struct fix f = {0};
	struct list_run r = {.stop_at = SIZE_MAX};
	struct list_meta m;

	gen_list(&f, n, false, pos);
	r.rv_during = pos == META_BEFORE ? "987654" : "";
	assert_int_equal(run_list(&r, &f, how, &m), 0);
	assert_int_equal(r.seen, n);
	assert_list_meta(&m, n);
	assert_ptr_equal(list_decoder_meta(r.d)->continue_token, m.continue_token);
	assert_string_equal(list_decoder_error(r.d), "");
	list_decoder_free(r.d);
	fix_free(&f);
}

static void test_list_whole(void **state)
{
	list_roundtrip(META_BEFORE, WHOLE, 40);
	list_roundtrip(META_AFTER, WHOLE, 40);
}

static void test_list_byte_by_byte(void **state)
{
	list_roundtrip(META_BEFORE, BYTES, 12);
	list_roundtrip(META_AFTER, BYTES, 12);
}

static void test_list_random_chunks(void **state)
{
	for (int round = 0; round < 20; round++) {
		list_roundtrip(META_BEFORE, RANDOM, 30);
		list_roundtrip(META_AFTER, RANDOM, 30);
	}
}

/* ---- the envelope: the list written out again, item by item ---- */

struct rebuild {
	struct buf out;
	size_t items;
};

static int rebuild_envelope(void *ctx, const char *data, size_t len)
{
	struct rebuild *rb = ctx;

	rb->items = 0; /* no item arrives between an envelope piece and the next '[' */
	assert_int_equal(buf_append(&rb->out, data, len), 0);
	return 0;
}

static int rebuild_item(void *ctx, const struct stream_object *o)
{
	struct rebuild *rb = ctx;

	if (rb->items++)
		assert_int_equal(buf_append(&rb->out, ",", 1), 0);
	assert_int_equal(buf_append(&rb->out, o->data, o->len), 0);
	return 0;
}

/* Decodes body in the given way; what the envelope and items make up again
 * is `want`. */
static void assert_rebuilds(const char *body, size_t len, const char *want, size_t want_len,
			    enum how how)
{
	struct rebuild rb = {BUF_INIT, 0};
	struct list_decoder *d = list_decoder_new(rebuild_item, &rb);

	assert_non_null(d);
	list_decoder_on_envelope(d, rebuild_envelope);
	assert_int_equal(feed_all(feed_list, d, body, len, how, NULL, NULL), 0);
	assert_int_equal(list_decoder_finish(d, NULL), 0);
	assert_int_equal(rb.out.len, want_len);
	assert_memory_equal(rb.out.data, want, want_len);
	list_decoder_free(d);
	buf_free(&rb.out);
}

/* The generated lists separate some items with " ,\n  ": rebuilt, they are
 * separated by "," alone, and every other byte is the body's. */
static void test_list_envelope_rebuilds(void **state)
{
	static const enum meta_pos pos[] = {META_BEFORE, META_AFTER, META_NONE};
	static const enum how hows[] = {WHOLE, BYTES, RANDOM, BIG};

	for (size_t p = 0; p < 3; p++) {
		struct fix f = {0};
		struct buf want = BUF_INIT;

		gen_list(&f, p == 0 ? 14 : 7, p == 1, pos[p]);
		for (size_t i = 0; i < f.body.len; i++) {
			if (i + 5 <= f.body.len && !memcmp(f.body.data + i, " ,\n  ", 5)) {
				buf_append(&want, ",", 1);
				i += 4;
			} else {
				buf_append(&want, f.body.data + i, 1);
			}
		}
		for (size_t h = 0; h < 4; h++)
			assert_rebuilds(f.body.data, f.body.len, want.data, want.len, hows[h]);
		buf_free(&want);
		fix_free(&f);
	}
}

static void test_list_envelope_edges(void **state)
{
	static const struct {
		const char *body, *want;
	} cases[] = {
	    {"{\"kind\":\"PodList\",\"items\":[ ]}", "{\"kind\":\"PodList\",\"items\":[]}"},
	    {"{\"kind\":\"PodList\",\"items\":null}", "{\"kind\":\"PodList\",\"items\":null}"},
	    {" {\"kind\":\"Status\",\"code\":7} \n", " {\"kind\":\"Status\",\"code\":7} \n"},
	    {"{\"items\" : [ {\"a\":[1,{\"b\":[]}]} , {} ] , \"metadata\":{\"x\":[2]}}",
	     "{\"items\" : [{\"a\":[1,{\"b\":[]}]},{}] , \"metadata\":{\"x\":[2]}}"},
	};
	static const enum how hows[] = {WHOLE, BYTES, RANDOM};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		for (size_t h = 0; h < 3; h++)
			assert_rebuilds(cases[i].body, strlen(cases[i].body), cases[i].want,
					strlen(cases[i].want), hows[h]);
}

static int stop_envelope(void *ctx, const char *data, size_t len)
{
	(void)ctx, (void)data, (void)len;
	return 1;
}

static void test_list_envelope_stop(void **state)
{
	struct list_decoder *d = list_decoder_new(NULL, NULL);

	assert_non_null(d);
	list_decoder_on_envelope(d, stop_envelope);
	assert_int_equal(list_decoder_feed(d, "{\"items\":[", 10), -1);
	assert_non_null(strstr(list_decoder_error(d), "envelope"));
	list_decoder_free(d);
}

/* A small document decoded in every way; returns the meta of the last. */
static void decode_small(const char *body, size_t want_items, struct list_meta *out, char *err,
			 size_t errlen)
{
	static const enum how hows[] = {WHOLE, BYTES, RANDOM};

	for (size_t h = 0; h < 3; h++) {
		struct list_decoder *d = list_decoder_new(NULL, NULL);
		int rc;

		assert_non_null(d);
		rc = feed_all(feed_list, d, body, strlen(body), hows[h], NULL, NULL);
		if (rc == 0)
			rc = list_decoder_finish(d, out);
		if (err) {
			assert_int_equal(rc, -1);
			assert_int_equal(list_decoder_feed(d, "{", 1), -1);
			assert_int_equal(list_decoder_finish(d, out), -1);
			assert_non_null(strstr(list_decoder_error(d), " at byte "));
			snprintf(err, errlen, "%s", list_decoder_error(d));
		} else {
			assert_int_equal(rc, 0);
			assert_int_equal(out->items, want_items);
			out->continue_token = NULL; /* freed with d */
		}
		list_decoder_free(d);
	}
}

static void test_list_empty_null_status(void **state)
{
	struct list_meta m;

	decode_small(
	    "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":"
	    "\"5\"},\"items\":[]}",
	    0, &m, NULL, 0);
	assert_string_equal(m.kind, "PodList");
	assert_string_equal(m.resource_version, "5");
	assert_int_equal(m.rv, 5);
	assert_int_equal(m.remaining_item_count, -1);
	decode_small(" \n{\"items\":null,\"kind\":\"ConfigMapList\",\"metadata\":null} \n", 0, &m,
		     NULL, 0);
	assert_string_equal(m.kind, "ConfigMapList");
	assert_string_equal(m.resource_version, "");
	assert_int_equal(m.rv, 0);
	decode_small("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
		     "\"Failure\",\"message\":\"too old resource version: 1 (5000)\",\"reason\":"
		     "\"Expired\",\"details\":{\"causes\":[{\"reason\":\"x\"}]},\"code\":410}",
		     0, &m, NULL, 0);
	assert_string_equal(m.kind, "Status");
	assert_string_equal(m.resource_version, "");
	decode_small("{}", 0, &m, NULL, 0);
	assert_string_equal(m.kind, "");
}

static void test_list_meta_fields(void **state)
{
	struct list_meta m;
	struct buf b = BUF_INIT;
	char kind[70];

	/* Nested metadata / items keys do not count; "remainingItemCount" ends an object. */
	decode_small("{\"metadata\":{\"x\":{\"resourceVersion\":\"1\",\"continue\":\"no\"},"
		     "\"remainingItemCount\":0},\"spec\":{\"metadata\":{\"resourceVersion\":\"2\"},"
		     "\"items\":[{\"a\":1}]},\"items\":[{},{\"items\":[{},{}]}],\"kind\":\"L\"}",
		     2, &m, NULL, 0);
	assert_string_equal(m.resource_version, "");
	assert_null(m.continue_token);
	assert_int_equal(m.remaining_item_count, 0);
	assert_string_equal(m.kind, "L");
	/* 31 bytes fit; a non-numeric or huge rv is kept as a string, rv 0. */
	decode_small("{\"metadata\":{\"resourceVersion\":\"1234567890123456789012345678901\"}}", 0,
		     &m, NULL, 0);
	assert_string_equal(m.resource_version, "1234567890123456789012345678901");
	assert_int_equal(m.rv, 0);
	/* A long kind is truncated to 63 bytes, without splitting a UTF-8 sequence. */
	memset(kind, 'K', 62);
	kind[62] = '\0';
	buf_printf(&b, "{\"kind\":\"%s\xc3\xa9xyz\"}", kind);
	decode_small(b.data, 0, &m, NULL, 0);
	assert_string_equal(m.kind, kind);
	buf_reset(&b);
	memset(kind, 'K', 69);
	kind[69] = '\0';
	buf_printf(&b, "{\"kind\":\"%s\"}", kind);
	decode_small(b.data, 0, &m, NULL, 0);
	assert_int_equal(strlen(m.kind), 63);
	buf_free(&b);
}

/* Items written by hand: whitespace, order, nesting, strings that look like JSON. */
static void test_list_tricky_items(void **state)
{
	static const char *const items[] = {
	    "{\"metadata\":{\"resourceVersion\":\"7\",\"name\":\"a\",\"namespace\":\"b\"},"
	    "\"kind\":\"Pod\",\"spec\":{\"metadata\":{\"name\":\"nested\"},\"items\":[{"
	    "\"metadata\":"
	    "{\"name\":\"deeper\"}}]}}",
	    "{ \"spec\" : { \"x\" : \"{\\\"items\\\":[{}]}\" } ,\n \"metadata\" : { \"name\" : "
	    "\"second\\u0021\" } }",
	    "{}",
	    "{\"metadata\":{\"name\":\"}\",\"namespace\":\"{\"},\"n\":-1.5e+3}",
	    "{\"kind\":5,\"metadata\":{\"name\":[\"x\"],\"namespace\":null,\"resourceVersion\":"
	    "\"18446744073709551615\"},\"x\":[true,false,null,0]}",
	};
	static const char *const names[] = {"a", "second!", "", "}", ""};
	static const char *const nss[] = {"b", "", "", "{", ""};
	static const char *const rvs[] = {"7", "", "", "", "18446744073709551615"};
	static const char *const kinds[] = {"Pod", "", "", "", ""};
	static const enum how hows[] = {WHOLE, BYTES, RANDOM};
	struct fix f = {0};
	struct list_meta m;

	fix_raw(&f, "{\"items\" : [ ");
	for (size_t i = 0; i < 5; i++) {
		fix_raw(&f, i ? " ,\n\t" : "");
		fix_obj(&f, items[i], strlen(items[i]), names[i], nss[i], rvs[i], kinds[i]);
	}
	fix_raw(&f, " ] , \"kind\" : \"PodList\" }");
	for (size_t h = 0; h < 3; h++) {
		struct list_run r = {.stop_at = SIZE_MAX};

		assert_int_equal(run_list(&r, &f, hows[h], &m), 0);
		assert_int_equal(r.seen, 5);
		assert_string_equal(m.kind, "PodList");
		list_decoder_free(r.d);
	}
	fix_free(&f);
}

static void test_list_malformed(void **state)
{
	static const char *const bad[] = {
	    "",
	    "   \n",
	    "[]",
	    "\"PodList\"",
	    "123",
	    "null",
	    "{\"kind\":\"PodList\",\"items\":[]} x",
	    "{\"kind\":\"PodList\",\"items\":[]}{\"kind\":\"PodList\",\"items\":[]}",
	    "{\"kind\":\"PodList\",\"items\":[]}\n{}",
	    "{\"kind\":\"PodList\",\"items\":[]} 1",
	    "{\"kind\":\"PodList\",\"items\":[]}]",
	    "{\"kind\":\"PodList\",\"items\":{}}",
	    "{\"kind\":\"PodList\",\"items\":\"x\"}",
	    "{\"kind\":\"PodList\",\"items\":[1]}",
	    "{\"kind\":\"PodList\",\"items\":[{},[]]}",
	    "{\"kind\":\"PodList\",\"items\":[null]}",
	    "{\"kind\":5,\"items\":[]}",
	    "{\"kind\":\"PodList\",\"metadata\":[],\"items\":[]}",
	    "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":5}}",
	    "{\"kind\":\"PodList\",\"metadata\":{\"remainingItemCount\":\"3\"}}",
	    "{\"kind\":\"PodList\",\"metadata\":{\"remainingItemCount\":1.5}}",
	    "{\"kind\":\"PodList\",\"metadata\":{\"remainingItemCount\":99999999999999999999999}}",
	    "{\"kind\":\"PodList\",\"metadata\":{\"continue\":1}}",
	    "{\"metadata\":{\"resourceVersion\":\"12345678901234567890123456789012\"}}",
	    "{\"kind\":\"PodList\",\"items\":[{\"a\":}]}",
	    "{\"kind\":\"PodList\",\"items\":[{\"a\":1,}]}",
	    "{\"kind\":\"PodList\",\"items\":[{\"a\" 1}]}",
	    "{\"kind\":\"PodList\",\"items\":[{\"a\":\"\\x\"}]}",
	    "{\"kind\":\"PodList\",\"items\":[{\"a\":\"\xff\"}]}",
	    "{\"kind\":\"PodList\",\"items\":[{\"a\":\"line\nbreak\"}]}",
	    "{\"kind\":\"PodList\",\"items\":[{\"a\":tru}]}",
	    "{\"kind\":\"PodList\",\"items\":[{\"a\":01}]}",
	    "{\"kind\":\"PodList\",\"items\":[{}",
	    "{\"kind\":\"PodList\",\"items\":[{}]",
	    "{\"kind\":\"PodList\",\"items\":[{\"name\":\"x",
	    "{'kind':'PodList'}",
	    "{\"kind\":\"PodList\"} // comment",
	};
	char err[256], line[64];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		decode_small(bad[i], 0, NULL, err, sizeof(err));
		print_message("  %-40s -> %s\n", shown(bad[i], line, sizeof(line)), err);
	}
}

/* Every proper prefix of a valid list is refused; the whole is accepted. */
static void test_list_every_prefix(void **state)
{
	struct fix f = {0};

	gen_list(&f, 3, false, META_AFTER);
	for (size_t cut = 0; cut <= f.body.len; cut++) {
		struct list_decoder *d = list_decoder_new(NULL, NULL);
		struct list_meta m;
		int rc;

		assert_non_null(d);
		rc = list_decoder_feed(d, f.body.data, cut);
		if (rc == 0)
			rc = list_decoder_finish(d, &m);
		/* the body ends with "}\n": cutting the newline leaves a whole list */
		assert_int_equal(rc, cut >= f.body.len - 1 ? 0 : -1);
		list_decoder_free(d);
	}
	fix_free(&f);
}

static void test_list_callback_stop(void **state)
{
	struct fix f = {0};
	struct list_run r = {.stop_at = 2};
	struct list_meta m;

	gen_list(&f, 10, false, META_BEFORE);
	assert_int_equal(run_list(&r, &f, RANDOM, &m), -1);
	assert_int_equal(r.seen, 3);
	assert_non_null(strstr(list_decoder_error(r.d), "stopped"));
	assert_int_equal(list_decoder_feed(r.d, "", 0), -1);
	assert_int_equal(list_decoder_finish(r.d, &m), -1);
	list_decoder_free(r.d);
	list_decoder_free(NULL);
	fix_free(&f);
}

/* The gathering buffer never holds more than one item. */
static void test_list_memory_bounded(void **state)
{
	struct fix f = {0};

	gen_list(&f, 60, true, META_AFTER);
	for (int round = 0; round < 3; round++) {
		struct list_run r = {.stop_at = SIZE_MAX};
		struct list_meta m;

		assert_int_equal(run_list(&r, &f, round ? RANDOM : BIG, &m), 0);
		assert_int_equal(r.seen, 60);
		print_message("  body %zu B, largest item %zu B, held buffer at most %zu B\n",
			      f.body.len, f.largest, r.max_held);
		assert_true(r.max_held <= 2 * f.largest + 64);
		list_decoder_free(r.d);
	}
	fix_free(&f);
}

struct count_ctx {
	size_t items, bytes;
	const struct fix *f;
};

static int count_item(void *ctx, const struct stream_object *o)
{
	struct count_ctx *c = ctx;

	const struct fix *f = c->f;
	size_t first = f->off[c->items], last = first + f->len[c->items] - 1;

	check_object(f, c->items, o);
	/* fed straight from the body in 64 KiB chunks: an item within one chunk
	 * is handed out in place, one across chunks from the decoder's copy */
	if (first / 65536 == last / 65536)
		assert_ptr_equal(o->data, f->body.data + first);
	else
		assert_true(o->data < f->body.data || o->data >= f->body.data + f->body.len);
	c->items++;
	c->bytes += o->len;
	return 0;
}

static void test_list_16mb(void **state)
{
	struct fix f = {0};
	struct count_ctx c = {0};
	struct list_decoder *d;
	struct list_meta m;
	struct timespec t0;
	yajl_handle h;
	double ms, yajl_ms;

	gen_list(&f, 5000, false, META_AFTER);
	c.f = &f;
	d = list_decoder_new(count_item, &c);
	assert_non_null(d);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (size_t at = 0; at < f.body.len; at += 65536) {
		size_t n = f.body.len - at < 65536 ? f.body.len - at : 65536;

		assert_int_equal(list_decoder_feed(d, f.body.data + at, n), 0);
	}
	assert_int_equal(list_decoder_finish(d, &m), 0);
	ms = ms_since(&t0);
	assert_int_equal(c.items, 5000);
	assert_list_meta(&m, 5000);
	list_decoder_free(d);

	h = yajl_alloc(NULL, NULL, NULL);
	assert_non_null(h);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (size_t at = 0; at < f.body.len; at += 65536) {
		size_t n = f.body.len - at < 65536 ? f.body.len - at : 65536;

		assert_int_equal(yajl_parse(h, (const unsigned char *)f.body.data + at, n),
				 yajl_status_ok);
	}
	assert_int_equal(yajl_complete_parse(h), yajl_status_ok);
	yajl_ms = ms_since(&t0);
	yajl_free(h);
	print_message("  %zu B list of 5000 pods, 64 KiB chunks: %.1f ms (yajl alone %.1f ms)\n",
		      f.body.len, ms, yajl_ms);
	fix_free(&f);
}

/* ---- watch decoding ---- */

static const char *const type_names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};

static void gen_bookmark(struct fix *f, int i)
{
	struct buf b = BUF_INIT;
	char rv[24];
	int variant = (i / 10) % 3;
	const char *iee = "\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}";

	snprintf(rv, sizeof(rv), "%d", 5000 + i);
	buf_printf(
	    &b,
	    "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"%s\","
	    "\"creationTimestamp\":null%s%s},\"spec\":{\"containers\":null%s%s%s},"
	    "\"status\":{}}",
	    rv, variant == 0 ? "," : "", variant == 0 ? iee : "",
	    variant == 2 ? ",\"metadata\":{" : "", variant == 2 ? iee : "",
	    variant == 2 ? "}" : "");
	fix_obj(f, b.data, b.len, "", "", rv, "Pod")->iee = variant == 0;
	buf_free(&b);
}

static void gen_error(struct fix *f)
{
	const char *s = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
			"\"Failure\",\"message\":\"too old resource version: 1 (5000)\",\"reason\":"
			"\"Expired\",\"code\":410}";

	fix_obj(f, s, strlen(s), "", "", "", "Status")->code = 410;
}

/* n events of all types; separators and key orders vary. */
static void gen_watch(struct fix *f, int n)
{
	static const char *const seps[] = {"\n", "", " \r\n\t", "\n\n"};

	for (int i = 0; i < n; i++) {
		enum watch_type t = i % 10 == 9	   ? WATCH_BOOKMARK
				    : i % 13 == 12 ? WATCH_ERROR
						   : (enum watch_type)(i % 3);
		bool object_first = i % 4 == 1;
		char type[40];

		snprintf(type, sizeof(type), "\"type\":\"%s\"", type_names[t]);
		fix_raw(f, i ? seps[i % 4] : "");
		fix_raw(f, "{");
		if (i % 9 == 4)
			fix_raw(f, "\"extra\":{\"type\":\"BOGUS\",\"object\":1},");
		if (!object_first) {
			fix_raw(f, type);
			fix_raw(f, ",");
		}
		fix_raw(f, "\"object\":");
		if (t == WATCH_BOOKMARK)
			gen_bookmark(f, i);
		else if (t == WATCH_ERROR)
			gen_error(f);
		else
			gen_pod(f, i, 600 + ((size_t)i * 37) % 3000);
		f->want[f->n - 1].type = t;
		if (object_first) {
			fix_raw(f, ",");
			fix_raw(f, type);
		}
		fix_raw(f, "}");
	}
	fix_raw(f, "\n");
}

struct watch_run {
	const struct fix *f;
	struct watch_decoder *d;
	size_t seen, stop_at, max_held;
};

static int on_event(void *ctx, const struct watch_event *ev)
{
	struct watch_run *r = ctx;
	size_t i = r->seen++;
	const struct want *w;

	assert_true(i < r->f->n);
	w = &r->f->want[i];
	assert_int_equal(ev->type, w->type);
	check_object(r->f, i, &ev->object);
	assert_int_equal(ev->initial_events_end, w->iee);
	assert_int_equal(ev->error_code, w->code);
	return i == r->stop_at;
}

static void watch_after_feed(void *arg)
{
	struct watch_run *r = arg;
	size_t cap = watch_decoder_held_cap(r->d);

	if (cap > r->max_held)
		r->max_held = cap;
}

static int run_watch(struct watch_run *r, const struct fix *f, enum how how)
{
	int rc;

	r->f = f;
	r->seen = 0;
	r->max_held = 0;
	r->d = watch_decoder_new(on_event, r);
	assert_non_null(r->d);
	rc = feed_all(feed_watch, r->d, f->body.data, f->body.len, how, watch_after_feed, r);
	return rc ? rc : watch_decoder_finish(r->d);
}

static void test_watch_stream(void **state)
{
	static const enum how hows[] = {WHOLE, BYTES, RANDOM, RANDOM, RANDOM, BIG};
	struct fix f = {0};

	gen_watch(&f, 60);
	for (size_t h = 0; h < sizeof(hows) / sizeof(hows[0]); h++) {
		struct watch_run r = {.stop_at = SIZE_MAX};

		assert_int_equal(run_watch(&r, &f, hows[h]), 0);
		assert_int_equal(r.seen, 60);
		assert_true(r.max_held <= 2 * f.largest + 64);
		assert_string_equal(watch_decoder_error(r.d), "");
		watch_decoder_free(r.d);
	}
	fix_free(&f);
}

/* Hand-written events: concatenated, object before type, bookmark, 410. */
static void test_watch_kinds_of_events(void **state)
{
	struct fix f = {0};
	struct watch_run r = {.stop_at = SIZE_MAX};
	const char *pod = "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\",\"resourceVersion\":"
			  "\"9\"},\"kind\":\"Pod\",\"n\":12}";
	const char *bm =
	    "{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":\"10\",\"annotations\":"
	    "{\"k8s.io/initial-events-end\":\"true\"}}}";

	fix_raw(&f, "{\"object\":");
	fix_obj(&f, pod, strlen(pod), "p", "d", "9", "Pod")->type = WATCH_MODIFIED;
	fix_raw(&f, ",\"type\":\"MODIFIED\"}{\"type\":\"BOOKMARK\",\"object\":");
	fix_obj(&f, bm, strlen(bm), "", "", "10", "Pod")->type = WATCH_BOOKMARK;
	f.want[1].iee = true;
	fix_raw(&f, "}{\"type\":\"ERROR\",\"object\":");
	gen_error(&f);
	f.want[2].type = WATCH_ERROR;
	fix_raw(&f, "}");
	assert_int_equal(run_watch(&r, &f, BYTES), 0);
	assert_int_equal(r.seen, 3);
	watch_decoder_free(r.d);
	fix_free(&f);
}

static void test_watch_empty(void **state)
{
	struct watch_decoder *d = watch_decoder_new(NULL, NULL);

	assert_non_null(d);
	assert_int_equal(watch_decoder_finish(d), 0);
	watch_decoder_free(d);
	d = watch_decoder_new(NULL, NULL);
	assert_int_equal(watch_decoder_feed(d, " \n\r\n", 4), 0);
	assert_int_equal(watch_decoder_finish(d), 0);
	watch_decoder_free(d);
	watch_decoder_free(NULL);
}

static void test_watch_malformed(void **state)
{
	static const char *const bad[] = {
	    "{\"type\":\"ADDED\"}",
	    "{\"object\":{}}",
	    "{\"type\":\"WHATEVER\",\"object\":{}}",
	    "{\"type\":\"added\",\"object\":{}}",
	    "{\"type\":\"ADDED\\n\",\"object\":{}}",
	    "{\"type\":\"ADDED\",\"object\":null}",
	    "{\"type\":\"ADDED\",\"object\":[]}",
	    "{\"type\":\"ADDED\",\"object\":\"{}\"}",
	    "{\"type\":1,\"object\":{}}",
	    "{\"type\":\"ADDED\",\"object\":{},\"object\":{}}",
	    "[{\"type\":\"ADDED\",\"object\":{}}]",
	    "{\"type\":\"ADDED\",\"object\":{}} 42",
	    "{\"type\":\"ADDED\",\"object\":{}}\n\"x\"",
	    "{\"type\":\"ADDED\",\"object\":{}}\n\"x",
	    "{\"type\":\"ADDED\",\"object\":{}}\nnull",
	    "{\"type\":\"ADDED\",\"object\":{}}\n]",
	    "{\"type\":\"ADDED\",\"object\":{}}\ntru",
	    "{\"type\":\"ADDED\",\"object\":{}}\n{\"type\":\"ADD",
	    "{\"type\":\"ADDED\",\"object\":{\"a\":1}",
	    "{\"type\":\"ADDED\",\"object\":{\"a\":}}",
	    "{\"type\":\"ADDED\",\"object\":{}},{\"type\":\"ADDED\",\"object\":{}}",
	};
	static const enum how hows[] = {WHOLE, BYTES, RANDOM};
	char line[64];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		for (size_t h = 0; h < 3; h++) {
			struct watch_decoder *d = watch_decoder_new(NULL, NULL);
			int rc;

			assert_non_null(d);
			rc = feed_all(feed_watch, d, bad[i], strlen(bad[i]), hows[h], NULL, NULL);
			if (rc == 0)
				rc = watch_decoder_finish(d);
			assert_int_equal(rc, -1);
			assert_int_equal(watch_decoder_feed(d, "\n", 1), -1);
			assert_non_null(strstr(watch_decoder_error(d), " at byte "));
			if (h == 0)
				print_message("  %-40s -> %s\n", shown(bad[i], line, sizeof(line)),
					      watch_decoder_error(d));
			watch_decoder_free(d);
		}
	}
}

/* Scans a prefix of a watch body: true when it ends between events; *closed
 * is the number of events it holds whole. */
static bool cut_between_events(const char *s, size_t cut, size_t *closed)
{
	size_t depth = 0;
	bool in_str = false, esc = false;

	*closed = 0;
	for (size_t i = 0; i < cut; i++) {
		char c = s[i];

		if (in_str) {
			if (esc)
				esc = false;
			else if (c == '\\')
				esc = true;
			else if (c == '"')
				in_str = false;
		} else if (c == '"') {
			in_str = true;
		} else if (c == '{' || c == '[') {
			depth++;
		} else if (c == '}' || c == ']') {
			*closed += --depth == 0;
		}
	}
	return depth == 0;
}

/* Cut anywhere: finish is 0 exactly when the cut falls between events, and
 * the events wholly before the cut were all delivered. */
static void test_watch_every_cut(void **state)
{
	struct fix f = {0};

	gen_watch(&f, 4);
	for (size_t cut = 0; cut <= f.body.len; cut++) {
		struct watch_run r = {.f = &f, .stop_at = SIZE_MAX};
		size_t closed;
		bool between = cut_between_events(f.body.data, cut, &closed);
		int rc;

		r.d = watch_decoder_new(on_event, &r);
		assert_non_null(r.d);
		rc = watch_decoder_feed(r.d, f.body.data, cut);
		if (rc == 0)
			rc = watch_decoder_finish(r.d);
		assert_int_equal(rc, between ? 0 : -1);
		assert_int_equal(r.seen, closed);
		watch_decoder_free(r.d);
	}
	fix_free(&f);
}

static void test_watch_callback_stop(void **state)
{
	struct fix f = {0};
	struct watch_run r = {.stop_at = 1};

	gen_watch(&f, 8);
	assert_int_equal(run_watch(&r, &f, RANDOM), -1);
	assert_int_equal(r.seen, 2);
	assert_non_null(strstr(watch_decoder_error(r.d), "stopped"));
	assert_int_equal(watch_decoder_finish(r.d), -1);
	watch_decoder_free(r.d);
	fix_free(&f);
}

/* ---- gunzip ---- */

static void gzip_append(struct buf *out, const char *data, size_t len)
{
	z_stream z = {0};
	char tmp[16384];
	int ret;

	assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
			 Z_OK);
	z.next_in = (const Bytef *)data;
	z.avail_in = (uInt)len;
	do {
		z.next_out = (Bytef *)tmp;
		z.avail_out = sizeof(tmp);
		ret = deflate(&z, Z_FINISH);
		assert_int_equal(buf_append(out, tmp, sizeof(tmp) - z.avail_out), 0);
	} while (ret == Z_OK);
	assert_int_equal(ret, Z_STREAM_END);
	deflateEnd(&z);
}

struct sink {
	struct buf got;
	size_t total, calls;
	size_t stop_at_call;	   /* the call that says stop; 0: none */
	bool discard;		   /* count only */
	struct list_decoder *list; /* pass the output on to a list decoder */
};

static int sink_out(void *ctx, const char *data, size_t len)
{
	struct sink *s = ctx;

	assert_true(len > 0 && len <= 64 * 1024);
	s->total += len;
	s->calls++;
	if (s->list)
		return list_decoder_feed(s->list, data, len);
	if (!s->discard)
		assert_int_equal(buf_append(&s->got, data, len), 0);
	return s->calls == s->stop_at_call;
}

/* gunzip of gz fed in the given way: -1 from a feed or from finish, or 0. */
static int gunzip_all(const struct buf *gz, size_t max_out, enum how how, struct sink *s)
{
	struct gunzip *g = gunzip_new(max_out, sink_out, s);
	int rc;

	assert_non_null(g);
	rc = feed_all(feed_gunzip, g, gz->data, gz->len, how, NULL, NULL);
	if (rc == 0)
		rc = gunzip_finish(g);
	else
		assert_int_equal(gunzip_feed(g, "x", 1), -1);
	gunzip_free(g);
	return rc;
}

static void test_gunzip_roundtrip(void **state)
{
	static const enum how hows[] = {WHOLE, RANDOM, BIG};
	struct fix f = {0};
	struct buf gz = BUF_INIT;

	gen_list(&f, 400, false, META_BEFORE);
	gzip_append(&gz, f.body.data, f.body.len);
	for (size_t h = 0; h < 3; h++) {
		struct sink s = {0};

		assert_int_equal(gunzip_all(&gz, f.body.len, hows[h], &s), 0);
		assert_int_equal(s.got.len, f.body.len);
		assert_true(memcmp(s.got.data, f.body.data, f.body.len) == 0);
		buf_free(&s.got);
	}
	{
		struct sink s = {0};

		/* one byte over the limit */
		assert_int_equal(gunzip_all(&gz, f.body.len - 1, RANDOM, &s), -1);
		assert_true(s.total <= f.body.len - 1);
		buf_free(&s.got);
	}
	buf_free(&gz);
	fix_free(&f);
}

/* gzip'ed list body -> gunzip -> list decoder. */
static void test_gunzip_into_list(void **state)
{
	struct fix f = {0};
	struct buf gz = BUF_INIT;
	struct list_run r = {.stop_at = SIZE_MAX, .f = &f};
	struct sink s = {0};
	struct list_meta m;

	gen_list(&f, 100, true, META_AFTER);
	gzip_append(&gz, f.body.data, f.body.len);
	r.d = list_decoder_new(on_item, &r);
	s.list = r.d;
	assert_int_equal(gunzip_all(&gz, SIZE_MAX, RANDOM, &s), 0);
	assert_int_equal(list_decoder_finish(r.d, &m), 0);
	assert_int_equal(r.seen, 100);
	assert_list_meta(&m, 100);
	list_decoder_free(r.d);
	buf_free(&gz);
	fix_free(&f);
}

static void test_gunzip_concatenated_members(void **state)
{
	static const enum how hows[] = {WHOLE, BYTES, RANDOM};
	struct buf gz = BUF_INIT;

	gzip_append(&gz, "hello, ", 7);
	gzip_append(&gz, "", 0);
	gzip_append(&gz, "world", 5);
	for (size_t h = 0; h < 3; h++) {
		struct sink s = {0};

		assert_int_equal(gunzip_all(&gz, 100, hows[h], &s), 0);
		assert_int_equal(s.got.len, 12);
		assert_memory_equal(s.got.data, "hello, world", 12);
		buf_free(&s.got);
	}
	buf_free(&gz);
}

static void test_gunzip_corrupt_and_cut(void **state)
{
	struct fix f = {0};
	struct buf gz = BUF_INIT, bad = BUF_INIT;
	struct sink s = {0};

	gen_list(&f, 20, false, META_BEFORE);
	gzip_append(&gz, f.body.data, f.body.len);
	/* a flipped byte inside the deflate data, in the header, in the CRC */
	for (size_t k = 0; k < 3; k++) {
		size_t at = k == 0 ? gz.len / 2 : k == 1 ? 0 : gz.len - 6;

		buf_reset(&bad);
		buf_append(&bad, gz.data, gz.len);
		bad.data[at] ^= 0x5a;
		assert_int_equal(gunzip_all(&bad, SIZE_MAX, RANDOM, &s), -1);
		buf_free(&s.got);
	}
	/* garbage after a member */
	buf_reset(&bad);
	buf_append(&bad, gz.data, gz.len);
	buf_append_str(&bad, "garbage!");
	assert_int_equal(gunzip_all(&bad, SIZE_MAX, WHOLE, &s), -1);
	buf_free(&s.got);
	/* cut anywhere before the end: finish says so */
	for (size_t cut = 0; cut < gz.len; cut += 1 + cut / 3) {
		struct gunzip *g = gunzip_new(SIZE_MAX, sink_out, &s);

		assert_int_equal(gunzip_feed(g, gz.data, cut), 0);
		assert_int_equal(gunzip_finish(g), -1);
		gunzip_free(g);
		buf_free(&s.got);
	}
	/* the out callback stops it */
	s.stop_at_call = 2;
	s.calls = 0;
	assert_int_equal(gunzip_all(&gz, SIZE_MAX, WHOLE, &s), -1);
	assert_int_equal(s.calls, 2);
	buf_free(&s.got);
	buf_free(&bad);
	buf_free(&gz);
	fix_free(&f);
	gunzip_free(NULL);
}

/* 1 GB of zeros, compressed as it is fed: the limit stops it early. */
static void test_gunzip_bomb(void **state)
{
	static const char zeros[1 << 20];
	const size_t max_out = 16u << 20;
	const unsigned long long bomb = 1ULL << 30;
	struct sink s = {.discard = true};
	struct gunzip *g = gunzip_new(max_out, sink_out, &s);
	z_stream z = {0};
	char out[65536];
	unsigned long long in = 0;
	size_t gz_bytes = 0;
	struct timespec t0;
	int rc = 0;

	assert_non_null(g);
	assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY),
			 Z_OK);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (; in < bomb && rc == 0; in += sizeof(zeros)) {
		z.next_in = (const Bytef *)zeros;
		z.avail_in = sizeof(zeros);
		do {
			z.next_out = (Bytef *)out;
			z.avail_out = sizeof(out);
			deflate(&z, in + sizeof(zeros) == bomb ? Z_FINISH : Z_NO_FLUSH);
			gz_bytes += sizeof(out) - z.avail_out;
			if (z.avail_out < sizeof(out))
				rc = gunzip_feed(g, out, sizeof(out) - z.avail_out);
		} while (z.avail_out == 0 && rc == 0);
	}
	deflateEnd(&z);
	print_message("  bomb stopped after %llu MB in, %zu B compressed, %zu B out: %.1f ms\n",
		      in >> 20, gz_bytes, s.total, ms_since(&t0));
	assert_int_equal(rc, -1);
	assert_true(s.total <= max_out);
	assert_true(in < bomb / 8);
	assert_int_equal(gunzip_finish(g), -1);
	gunzip_free(g);
}

/* A bomb inflated at its reader's pace (gunzip_feed_upto): never more
 * than the room a call is given, what is left kept for the next call -
 * input past *used, or output zlib holds after taking all of it - and all
 * of it in the end, exactly. */
static void test_gunzip_feed_upto(void **state)
{
	static const char rec[] = "{\"metadata\":{\"name\":\"dup\",\"namespace\":\"x\"}},";
	struct buf plain = BUF_INIT, gz = BUF_INIT;
	struct gunzip *g = NULL;
	struct sink s = {0};
	size_t off;

	(void)state;
	while (plain.len < (8u << 20))
		assert_int_equal(buf_append(&plain, rec, sizeof(rec) - 1), 0);
	gzip_append(&gz, plain.data, plain.len);
	assert_true(gz.len < plain.len / 100); /* a bomb */
	/* what reads give, each drained before the next: 4 KiB of it hold
	 * more than 4 KiB of room, a byte is taken whole and what it encodes
	 * (a match of up to 258 bytes) may be more than 100 of room: zlib holds
	 * the rest */
	for (size_t piece = 4096; piece; piece = piece == 1 ? 0 : 1) {
		size_t input_held = 0, output_held = 0, room = piece == 1 ? 100 : 4096;

		gunzip_free(g);
		buf_free(&s.got);
		s = (struct sink){0};
		g = gunzip_new(SIZE_MAX, sink_out, &s);
		assert_non_null(g);
		for (off = 0; off < gz.len;) {
			size_t n = gz.len - off < piece ? gz.len - off : piece;
			int rc;

			do {
				size_t before = s.total, used;

				rc = gunzip_feed_upto(g, gz.data + off, n, room, &used);
				assert_true(rc == 0 || rc == 1);
				assert_true(s.total - before <= room);
				assert_true(used <= n);
				if (rc == 1) {
					assert_int_equal(s.total - before, room);
					input_held += used < n;
					output_held += used == n;
				}
				off += used;
				n -= used;
			} while (rc == 1);
			assert_int_equal(n, 0);
		}
		assert_int_equal(gunzip_finish(g), 0);
		assert_int_equal(s.total, plain.len);
		assert_memory_equal(s.got.data, plain.data, plain.len);
		assert_true(s.calls >= plain.len / room);
		print_message(
		    "  %zu B of gzip in pieces of %zu B, room %zu B: %zu stops with input "
		    "left, %zu with output in zlib\n",
		    gz.len, piece, room, input_held, output_held);
		assert_true(piece == 1 ? output_held > 0 : input_held > 0);
	}
	/* nothing more: a call without input gives nothing, and is no error */
	size_t used = 1;
	assert_int_equal(gunzip_feed_upto(g, NULL, 0, 4096, &used), 0);
	assert_int_equal(used, 0);
	assert_int_equal(gunzip_finish(g), 0);
	gunzip_free(g);
	/* a corrupt stream is -1 under a bound too, and stays so */
	gz.data[gz.len / 2] ^= 0x55;
	g = gunzip_new(SIZE_MAX, NULL, NULL);
	int rc = 1;
	for (off = 0; rc == 1 || (rc == 0 && off < gz.len);) {
		rc = gunzip_feed_upto(g, gz.data + off, gz.len - off, 4096, &used);
		off += used;
	}
	assert_int_equal(rc, -1);
	assert_int_equal(gunzip_feed_upto(g, gz.data, gz.len, 4096, &used), -1);
	gunzip_free(g);
	buf_free(&s.got);
	buf_free(&plain);
	buf_free(&gz);
}

/* ---- bounds: what a hostile upstream may not make the decoders do ---- */

enum kind_of_decoder { LIST, WATCH };

struct bounded_run {
	int rc;
	size_t fed;	 /* bytes fed when it stopped */
	size_t max_held; /* the largest gathering buffer seen */
	size_t items;
	double ms;
	char err[160];
};

static int count_any_item(void *ctx, const struct stream_object *o)
{
	(void)o;
	((struct bounded_run *)ctx)->items++;
	return 0;
}

static int count_any_event(void *ctx, const struct watch_event *ev)
{
	(void)ev;
	((struct bounded_run *)ctx)->items++;
	return 0;
}

/* head, then fill repeated n times, then tail: fed in chunks of `chunk`
 * bytes as a server would send it, never built whole. */
static struct bounded_run feed_long(enum kind_of_decoder k, const char *head, char fill, size_t n,
				    const char *tail, size_t chunk)
{
	struct bounded_run r = {0};
	struct timespec t0;
	struct list_decoder *ld = k == LIST ? list_decoder_new(count_any_item, &r) : NULL;
	struct watch_decoder *wd = k == WATCH ? watch_decoder_new(count_any_event, &r) : NULL;
	char *block = malloc(chunk);
	size_t hl = strlen(head), total = hl + n + strlen(tail);

	assert_non_null(block);
	assert_true(ld || wd);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (r.rc == 0 && r.fed < total) {
		size_t len = total - r.fed < chunk ? total - r.fed : chunk;

		for (size_t i = 0; i < len; i++) {
			size_t at = r.fed + i;
			block[i] = at < hl ? head[at] : at < hl + n ? fill : tail[at - hl - n];
		}
		r.rc = ld ? list_decoder_feed(ld, block, len) : watch_decoder_feed(wd, block, len);
		r.fed += len;
		if (ld && list_decoder_held_cap(ld) > r.max_held)
			r.max_held = list_decoder_held_cap(ld);
		if (wd && watch_decoder_held_cap(wd) > r.max_held)
			r.max_held = watch_decoder_held_cap(wd);
	}
	if (r.rc == 0)
		r.rc = ld ? list_decoder_finish(ld, NULL) : watch_decoder_finish(wd);
	r.ms = ms_since(&t0);
	snprintf(r.err, sizeof(r.err), "%s", ld ? list_decoder_error(ld) : watch_decoder_error(wd));
	list_decoder_free(ld);
	watch_decoder_free(wd);
	free(block);
	return r;
}

#define LIST_HEAD "{\"kind\":\"ConfigMapList\",\"metadata\":{\"resourceVersion\":\"5\"},\"items\":["

/* A 64 MB item (one endless string) in 16 KiB chunks, as a list item and as
 * a watch event: refused once it passes 8 MiB, with the gathering buffer
 * bounded - and with work bounded too, since yajl re-reads a token cut by
 * chunks from its start each time (found by the hostile upstream e2e suite:
 * a 200 MB watch event took seven minutes to pass through the hub). */
static void test_object_too_large(void **state)
{
	const size_t n = 64u << 20, chunk = 16 << 10;
	struct bounded_run r;

	(void)state;
	r = feed_long(LIST, LIST_HEAD "{\"metadata\":{\"name\":\"big\"},\"data\":{\"k\":\"", 'x', n,
		      "\"}}]}", chunk);
	print_message("  list item: stopped after %zu B in %.0f ms, held %zu B: %s\n", r.fed, r.ms,
		      r.max_held, r.err);
	assert_int_equal(r.rc, -1);
	assert_true(r.fed <= STREAM_OBJECT_MAX + 2 * chunk);
	assert_true(r.max_held <= 2 * STREAM_OBJECT_MAX);
	assert_non_null(strstr(r.err, "8 MiB"));

	r = feed_long(WATCH, "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"", 'n', n,
		      "\"}}}\n", chunk);
	print_message("  watch event: stopped after %zu B in %.0f ms, held %zu B: %s\n", r.fed,
		      r.ms, r.max_held, r.err);
	assert_int_equal(r.rc, -1);
	assert_true(r.fed <= STREAM_OBJECT_MAX + 2 * chunk);
	assert_true(r.max_held <= 2 * STREAM_OBJECT_MAX);

	/* one big token, but within the bound, passes */
	r = feed_long(LIST, LIST_HEAD "{\"metadata\":{\"name\":\"big\"},\"data\":{\"k\":\"", 'x',
		      STREAM_OBJECT_MAX - 4096, "\"}}]}", 256 << 10);
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.items, 1);
}

/* Outside any item: an endless string or run of whitespace (what a gzip bomb
 * inflates to) is refused once 8 MiB pass without a token, a number once it
 * passes 4 KiB. */
static void test_no_token_for_too_long(void **state)
{
	static const struct {
		enum kind_of_decoder k;
		const char *head, *tail;
		char fill;
	} cases[] = {
	    {LIST, "{\"kind\":\"", "\"}", 'a'},
	    {LIST, "{\"metadata\":{\"continue\":\"", "\"}}", 'c'},
	    {LIST, LIST_HEAD, "]}", ' '},
	    {LIST, "{\"remainingItemCount\":1", "}", '0'},
	    {WATCH, "{\"type\":\"ADDED\",\"object\":", "{}}", '\n'},
	    {WATCH, "", "", ' '},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct bounded_run r = feed_long(cases[i].k, cases[i].head, cases[i].fill,
						 32u << 20, cases[i].tail, 64 << 10);

		print_message("  case %zu: stopped after %zu B in %.0f ms: %s\n", i, r.fed, r.ms,
			      r.err);
		assert_int_equal(r.rc, -1);
		assert_true(r.fed <= STREAM_OBJECT_MAX + (128 << 10));
		assert_true(strstr(r.err, "within 8 MiB") || strstr(r.err, "longer than 4 KiB"));
	}
}

/* Whole or in pieces, the same verdict: the bound is checked as tokens end,
 * not only at chunk ends. */
static void test_bounds_whole_or_chunked(void **state)
{
	struct buf body = BUF_INIT;
	struct list_decoder *d;

	(void)state;
	buf_append_str(&body, "{\"kind\":\"");
	for (size_t i = 0; i < STREAM_OBJECT_MAX + 10; i++)
		buf_append_char(&body, 'k');
	buf_append_str(&body, "\",\"items\":[]}");
	d = list_decoder_new(NULL, NULL);
	assert_int_equal(list_decoder_feed(d, body.data, body.len), -1);
	assert_non_null(strstr(list_decoder_error(d), "8 MiB"));
	list_decoder_free(d);
	buf_free(&body);
}

static void nest(struct buf *b, const char *head, size_t depth, const char *tail)
{
	buf_append_str(b, head);
	for (size_t i = 0; i < depth; i++)
		buf_append_str(b, i % 2 ? "{\"a\":" : "[");
	buf_append_str(b, "1");
	for (size_t i = depth; i-- > 0;)
		buf_append_str(b, i % 2 ? "}" : "]");
	buf_append_str(b, tail);
}

static void test_depth_bounded(void **state)
{
	struct buf ok = BUF_INIT, deep = BUF_INIT, wdeep = BUF_INIT;
	struct list_meta m;
	char err[160];
	struct watch_decoder *w;

	(void)state;
	nest(&ok, LIST_HEAD "{\"spec\":", 1000, "}]}");
	decode_small(ok.data, 1, &m, NULL, 0);
	nest(&deep, LIST_HEAD "{\"spec\":", STREAM_DEPTH_MAX, "}]}");
	decode_small(deep.data, 0, &m, err, sizeof(err));
	print_message("  %s\n", err);
	assert_non_null(strstr(err, "nested too deep"));
	nest(&wdeep, "{\"type\":\"ADDED\",\"object\":{\"x\":", STREAM_DEPTH_MAX, "}}");
	w = watch_decoder_new(NULL, NULL);
	assert_int_equal(watch_decoder_feed(w, wdeep.data, wdeep.len), -1);
	assert_non_null(strstr(watch_decoder_error(w), "nested too deep"));
	watch_decoder_free(w);
	buf_free(&ok);
	buf_free(&deep);
	buf_free(&wdeep);
}

/* A name or namespace with "\u0000" would be cut at the NUL by every C
 * string consumer and name another object: "good\u0000x" would replace or
 * delete "good" (found by the hostile upstream e2e suite: a list with such
 * an item replaced the cached view and dropped its other objects). */
static void test_nul_in_name_refused(void **state)
{
	static const char *const lists[] = {
	    LIST_HEAD "{\"metadata\":{\"name\":\"good\\u0000x\"}}]}",
	    LIST_HEAD "{\"metadata\":{\"name\":\"\\u0000\"}}]}",
	    LIST_HEAD "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\\u0000..\"}}]}",
	};
	static const char *const events[] = {
	    "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"good\\u0000x\"}}}\n",
	    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"namespace\":\"\\u0000\",\"name\":"
	    "\"a\"}}}\n",
	};
	struct list_meta m;
	char err[160];

	(void)state;
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		decode_small(lists[i], 0, &m, err, sizeof(err));
		print_message("  %s\n", err);
		assert_non_null(strstr(err, "NUL byte"));
	}
	for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++) {
		struct watch_decoder *w = watch_decoder_new(NULL, NULL);

		assert_int_equal(watch_decoder_feed(w, events[i], strlen(events[i])), -1);
		assert_non_null(strstr(watch_decoder_error(w), "NUL byte"));
		watch_decoder_free(w);
	}
	/* elsewhere in the object, a NUL is just data */
	decode_small(LIST_HEAD "{\"metadata\":{\"name\":\"a\",\"labels\":{\"name\":\"\\u0000\"}},"
			       "\"name\":\"\\u0000\"}]}",
		     1, &m, NULL, 0);
}

/* Told to tolerate odd objects (the response filters), a decoder hands
 * such an object out unnamed, with why, and the ones after it as usual. */
struct odd_seen {
	size_t n, odd;
};

static int count_odd_item(void *ctx, const struct stream_object *o)
{
	struct odd_seen *s = ctx;

	s->n++;
	if (o->odd) {
		s->odd++;
		assert_string_equal(o->name, "");
		assert_string_equal(o->namespace, "");
		assert_non_null(strstr(o->odd, "NUL"));
	} else {
		assert_string_equal(o->name, "after");
	}
	return 0;
}

static int count_odd_event(void *ctx, const struct watch_event *ev)
{
	return count_odd_item(ctx, &ev->object);
}

static void test_nul_in_name_tolerated(void **state)
{
	static const char list[] =
	    LIST_HEAD "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"good\\u0000x\"}},"
		      "{\"metadata\":{\"namespace\":\"ns\\u0000\",\"name\":\"a\"}},"
		      "{\"metadata\":{\"name\":\"after\"}}]}";
	static const char events[] =
	    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"g\\u0000\"}}}\n"
	    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"after\"}}}\n";
	struct odd_seen seen = {0};
	struct list_decoder *d = list_decoder_new(count_odd_item, &seen);
	struct watch_decoder *w = watch_decoder_new(count_odd_event, &seen);

	(void)state;
	assert_non_null(d);
	assert_non_null(w);
	list_decoder_tolerate_odd(d);
	assert_int_equal(list_decoder_feed(d, list, strlen(list)), 0);
	assert_int_equal(list_decoder_finish(d, NULL), 0);
	assert_int_equal(seen.n, 3);
	assert_int_equal(seen.odd, 2);
	watch_decoder_tolerate_odd(w);
	assert_int_equal(watch_decoder_feed(w, events, strlen(events)), 0);
	assert_int_equal(watch_decoder_finish(w), 0);
	assert_int_equal(seen.n, 5);
	assert_int_equal(seen.odd, 3);
	list_decoder_free(d);
	watch_decoder_free(w);
}

/* A string of n bytes of JSON text: escaped quotes and backslashes all
 * along, and an escaped backslash just before the closing quote. */
static void long_string(struct buf *b, size_t n)
{
	static const char piece[] = "ab\\\"c\\\\d\\u00e9 {}[],:";
	size_t start = b->len;

	buf_append_char(b, '"');
	while (b->len - start < n)
		buf_append_str(b, piece);
	buf_append_str(b, "\\\\\"");
}

struct long_run {
	size_t items;
	const struct buf *body;
	size_t off[3], len[3];
};

static int check_long_item(void *ctx, const struct stream_object *o)
{
	struct long_run *r = ctx;
	char want[16];

	assert_true(r->items < 3);
	snprintf(want, sizeof(want), "item-%zu", r->items);
	assert_string_equal(o->name, want);
	assert_string_equal(o->namespace, "ns");
	assert_int_equal(o->len, r->len[r->items]);
	assert_memory_equal(o->data, r->body->data + r->off[r->items], o->len);
	r->items++;
	return 0;
}

/* Long strings are gathered before yajl sees them: items still come out
 * byte for byte, with their metadata, however the body is cut. */
static void test_long_strings_exact(void **state)
{
	static const enum how hows[] = {BIG, RANDOM, BYTES};
	struct buf body = BUF_INIT;
	struct long_run r = {.body = &body};

	(void)state;
	buf_append_str(&body, LIST_HEAD);
	for (size_t i = 0; i < 3; i++) {
		r.off[i] = body.len;
		buf_append_str(&body, "{\"data\":{\"k\":");
		long_string(&body, 100000 * (i + 1));
		buf_printf(&body,
			   ",\"k2\":12345},\"metadata\":{\"namespace\":\"ns\",\"name\":"
			   "\"item-%zu\"}}",
			   i);
		r.len[i] = body.len - r.off[i];
		buf_append_str(&body, i < 2 ? "," : "]}");
	}
	for (size_t h = 0; h < 3; h++) {
		struct list_decoder *d = list_decoder_new(check_long_item, &r);
		struct list_meta m;

		r.items = 0;
		assert_int_equal(feed_all(feed_list, d, body.data, body.len, hows[h], NULL, NULL),
				 0);
		assert_int_equal(list_decoder_finish(d, &m), 0);
		assert_int_equal(r.items, 3);
		assert_int_equal(m.items, 3);
		list_decoder_free(d);
	}
	buf_free(&body);
}

static int count_events(void *ctx, const struct watch_event *ev)
{
	(void)ev;
	(*(size_t *)ctx)++;
	return 0;
}

/* Gathering never holds an event back: the chunk that ends a long string
 * and holds the next event gives both at once. */
static void test_long_string_event_not_delayed(void **state)
{
	struct buf body = BUF_INIT;
	struct watch_decoder *w;
	size_t seen = 0, tail;

	(void)state;
	buf_append_str(&body,
		       "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"},\"x\":");
	long_string(&body, 1 << 20);
	buf_append_str(&body, "}}\n");
	tail = body.len - 100;
	buf_append_str(&body,
		       "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"b\"}}}\n");
	w = watch_decoder_new(count_events, &seen);
	for (size_t at = 0; at < tail; at += 16384)
		assert_int_equal(
		    watch_decoder_feed(w, body.data + at, at + 16384 < tail ? 16384 : tail - at),
		    0);
	assert_int_equal(seen, 0);
	assert_int_equal(watch_decoder_feed(w, body.data + tail, body.len - tail), 0);
	assert_int_equal(seen, 2);
	assert_int_equal(watch_decoder_finish(w), 0);
	watch_decoder_free(w);
	buf_free(&body);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_list_whole),
	    cmocka_unit_test(test_list_byte_by_byte),
	    cmocka_unit_test(test_list_random_chunks),
	    cmocka_unit_test(test_list_envelope_rebuilds),
	    cmocka_unit_test(test_list_envelope_edges),
	    cmocka_unit_test(test_list_envelope_stop),
	    cmocka_unit_test(test_list_empty_null_status),
	    cmocka_unit_test(test_list_meta_fields),
	    cmocka_unit_test(test_list_tricky_items),
	    cmocka_unit_test(test_list_malformed),
	    cmocka_unit_test(test_list_every_prefix),
	    cmocka_unit_test(test_list_callback_stop),
	    cmocka_unit_test(test_list_memory_bounded),
	    cmocka_unit_test(test_list_16mb),
	    cmocka_unit_test(test_watch_stream),
	    cmocka_unit_test(test_watch_kinds_of_events),
	    cmocka_unit_test(test_watch_empty),
	    cmocka_unit_test(test_watch_malformed),
	    cmocka_unit_test(test_watch_every_cut),
	    cmocka_unit_test(test_watch_callback_stop),
	    cmocka_unit_test(test_gunzip_roundtrip),
	    cmocka_unit_test(test_gunzip_into_list),
	    cmocka_unit_test(test_gunzip_concatenated_members),
	    cmocka_unit_test(test_gunzip_corrupt_and_cut),
	    cmocka_unit_test(test_gunzip_bomb),
	    cmocka_unit_test(test_gunzip_feed_upto),
	    cmocka_unit_test(test_object_too_large),
	    cmocka_unit_test(test_no_token_for_too_long),
	    cmocka_unit_test(test_bounds_whole_or_chunked),
	    cmocka_unit_test(test_depth_bounded),
	    cmocka_unit_test(test_nul_in_name_refused),
	    cmocka_unit_test(test_nul_in_name_tolerated),
	    cmocka_unit_test(test_long_strings_exact),
	    cmocka_unit_test(test_long_string_event_not_delayed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
