/* etcd_check.c - record checks of the etcd store for tests, see etcd_check.h. */
#include "etcd_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct etcd_client *check_client(const char *endpoint)
{
	const char *eps[] = {endpoint};
	struct etcd_config cfg = {eps, 1, NULL, NULL, NULL, 10000, 2000};
	char *err = NULL;
	struct etcd_client *c = etcd_client_new(&cfg, &err);
	if (!c) {
		fprintf(stderr, "etcd client: %s\n", err ? err : "out of memory");
		abort();
	}
	return c;
}

typedef void (*kv_fn)(void *ctx, const struct etcd_kv *kv);

/* Every key-value under prefix, a page at a time. */
static int range_all(struct etcd_client *c, const char *prefix, bool keys_only, kv_fn fn, void *ctx)
{
	struct buf from = BUF_INIT, end = BUF_INIT;
	buf_append_str(&from, prefix);
	etcd_prefix_end(prefix, strlen(prefix), &end);
	int rc = 0;
	for (;;) {
		struct etcd_range_opts o = {end.data, end.len, 1000, 0, keys_only, false};
		struct etcd_range_result r;
		if (etcd_range(c, from.data, from.len, &o, &r) != ETCD_OK) {
			rc = -1;
			break;
		}
		for (size_t i = 0; i < r.n; i++)
			fn(ctx, &r.kvs[i]);
		bool more = r.more && r.n;
		if (more) {
			buf_reset(&from);
			buf_append(&from, r.kvs[r.n - 1].key, r.kvs[r.n - 1].key_len);
			buf_append_char(&from, '\0');
		}
		etcd_range_result_free(&r);
		if (!more)
			break;
	}
	buf_free(&from);
	buf_free(&end);
	return rc;
}

static void report_problem(void *ctx, const char *what, const char *key)
{
	struct buf *report = ctx;
	if (report)
		buf_printf(report, "%s: %s\n", what, key);
}

int check_records(struct store *s, struct buf *report)
{
	long n = etcd_store_verify(s, report_problem, report);
	return n < 0 ? 1 : (int)n;
}

struct keylist {
	struct buf b;
	size_t strip;
};

static void add_key(void *ctx, const struct etcd_kv *kv)
{
	struct keylist *k = ctx;
	buf_printf(&k->b, "%s%s", k->b.len ? " " : "", kv->key + k->strip);
}

char *check_keys(struct etcd_client *c, const char *prefix, size_t strip_len)
{
	struct keylist k = {BUF_INIT, strip_len};
	buf_append_str(&k.b, "");
	if (range_all(c, prefix, true, add_key, &k) < 0) {
		buf_free(&k.b);
		return strdup("<error>");
	}
	return k.b.data ? buf_steal(&k.b) : strdup("");
}

long check_count(struct etcd_client *c, const char *prefix)
{
	struct buf end = BUF_INIT;
	etcd_prefix_end(prefix, strlen(prefix), &end);
	struct etcd_range_opts o = {end.data, end.len, 0, 0, false, true};
	struct etcd_range_result r;
	long n = -1;
	if (etcd_range(c, prefix, strlen(prefix), &o, &r) == ETCD_OK) {
		n = (long)r.count;
		etcd_range_result_free(&r);
	}
	buf_free(&end);
	return n;
}
