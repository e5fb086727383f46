/*
 * test_etcd_client.c - etcd/client against a real etcd (tests/lib/etcd_proc)
 * and against a fake gateway that answers what a test tells it to: ranges,
 * txns and their compares, the limits, binary keys, watch, compaction,
 * failover, an etcd that stops and comes back, descriptor leaks, threads,
 * and malformed or hostile answers.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <dirent.h>
#include <limits.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "etcd/client.h"
#include "etcd/client_internal.h"
#include "etcd_proc.h"
#include "util/buf.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static struct etcd_proc g_etcd;
static struct etcd_client *g_c;

/* ---- helpers ---- */

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static struct etcd_client *client_for(const char *const *eps, size_t n, long timeout_ms)
{
	struct etcd_config cfg = {.endpoints = eps, .nendpoints = n, .timeout_ms = timeout_ms};
	char *err = NULL;
	struct etcd_client *c = etcd_client_new(&cfg, &err);
	if (!c)
		fprintf(stderr, "etcd_client_new: %s\n", err ? err : "?");
	free(err);
	assert_non_null(c);
	return c;
}

/* A port nothing listens on (it was free a moment ago). */
static int closed_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof a;
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static void put_bin(struct etcd_client *c, const char *k, size_t kl, const char *v, size_t vl)
{
	struct etcd_op op = {
	    .kind = ETCD_OP_PUT, .key = k, .key_len = kl, .value = v, .value_len = vl};
	struct etcd_txn t = {.success = &op, .nsuccess = 1};
	struct etcd_txn_result r;
	enum etcd_err e = etcd_txn(c, &t, &r);
	if (e)
		fprintf(stderr, "put: %s\n", etcd_last_error());
	assert_int_equal(e, ETCD_OK);
	assert_true(r.succeeded);
	assert_true(r.revision > 0);
	etcd_txn_result_free(&r);
}

static void put(const char *k, const char *v)
{
	put_bin(g_c, k, strlen(k), v, strlen(v));
}

/* The one kv at key (asserted present). */
static struct etcd_range_result get(const char *k)
{
	struct etcd_range_result r;
	assert_int_equal(etcd_range(g_c, k, strlen(k), NULL, &r), ETCD_OK);
	assert_int_equal(r.n, 1);
	return r;
}

static bool absent(struct etcd_client *c, const char *k)
{
	struct etcd_range_result r;
	assert_int_equal(etcd_range(c, k, strlen(k), NULL, &r), ETCD_OK);
	bool none = r.n == 0 && r.count == 0;
	etcd_range_result_free(&r);
	return none;
}

static struct etcd_range_result prefix_range(const char *prefix, struct etcd_range_opts *o)
{
	struct buf end = BUF_INIT;
	assert_int_equal(etcd_prefix_end(prefix, strlen(prefix), &end), 0);
	o->range_end = end.data;
	o->range_end_len = end.len;
	struct etcd_range_result r;
	assert_int_equal(etcd_range(g_c, prefix, strlen(prefix), o, &r), ETCD_OK);
	buf_free(&end);
	return r;
}

static int64_t current_revision(void)
{
	struct etcd_status st;
	assert_int_equal(etcd_status(g_c, &st), ETCD_OK);
	return st.revision;
}

/* Sets *flag after ms, unless cancelled first. */
struct watchdog {
	volatile bool *flag;
	long ms;
	atomic_bool cancel;
	pthread_t th;
};

static void *watchdog_main(void *arg)
{
	struct watchdog *w = arg;
	long end = now_ms() + w->ms;
	while (!atomic_load(&w->cancel) && now_ms() < end)
		sleep_ms(5);
	if (!atomic_load(&w->cancel))
		*w->flag = true;
	return NULL;
}

static void watchdog_start(struct watchdog *w, volatile bool *flag, long ms)
{
	w->flag = flag;
	w->ms = ms;
	atomic_init(&w->cancel, false);
	assert_int_equal(pthread_create(&w->th, NULL, watchdog_main, w), 0);
}

static void watchdog_end(struct watchdog *w)
{
	atomic_store(&w->cancel, true);
	pthread_join(w->th, NULL);
}

/* What a watch saw. */
struct seen {
	bool del;
	char key[64], value[64];
	size_t key_len, value_len;
	int64_t mod_revision, revision;
};

struct wctx {
	struct seen ev[16];
	size_t n, want;
	int calls;
};

static int on_events(void *ctx, const struct etcd_event *events, size_t n, int64_t revision)
{
	struct wctx *w = ctx;
	w->calls++;
	for (size_t i = 0; i < n && w->n < N_ELEMS(w->ev); i++) {
		struct seen *s = &w->ev[w->n++];
		s->del = events[i].is_delete;
		s->key_len = events[i].kv.key_len;
		s->value_len = events[i].kv.value_len;
		memcpy(s->key, events[i].kv.key, s->key_len < 63 ? s->key_len + 1 : 63);
		memcpy(s->value, events[i].kv.value, s->value_len < 63 ? s->value_len + 1 : 63);
		s->mod_revision = events[i].kv.mod_revision;
		s->revision = revision;
	}
	return w->n >= w->want;
}

/* ---- a fake gateway ---- */

/* Serves one connection at a time: reads a request, answers resp (in
 * pieces of `piece` bytes, delay_ms apart), closes. */
struct fake {
	int lfd, port;
	pthread_t th;
	const char *resp;
	size_t piece;
	int delay_ms;
	bool hang;	/* read the request, answer nothing */
	bool keep_open; /* after the answer, wait for the client to close */
	atomic_int requests;
	atomic_bool quit;
	char endpoint[64];
};

static bool has_request(const struct buf *b)
{
	const char *end = b->data ? strstr(b->data, "\r\n\r\n") : NULL;
	if (!end)
		return false;
	const char *cl = strcasestr(b->data, "content-length:");
	size_t body = cl && cl < end ? strtoul(cl + 15, NULL, 10) : 0;
	return b->len >= (size_t)(end + 4 - b->data) + body;
}

/* Read until pred or EOF; false at EOF/error/quit. */
static bool fake_read(struct fake *f, int fd, struct buf *b, bool until_eof)
{
	char tmp[16384];
	while (!atomic_load(&f->quit)) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 50) <= 0)
			continue;
		ssize_t n = read(fd, tmp, sizeof tmp);
		if (n <= 0)
			return false;
		if (!until_eof && (buf_append(b, tmp, (size_t)n) < 0 || has_request(b)))
			return true;
	}
	return false;
}

static void fake_answer(struct fake *f, int fd)
{
	size_t len = strlen(f->resp), step = f->piece ? f->piece : len;
	for (size_t off = 0; off < len; off += step) {
		size_t n = len - off < step ? len - off : step;
		if (send(fd, f->resp + off, n, MSG_NOSIGNAL) != (ssize_t)n)
			return;
		if (f->delay_ms)
			sleep_ms(f->delay_ms);
	}
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	while (!atomic_load(&f->quit)) {
		int fd = accept(f->lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			break;
		}
		struct buf req = BUF_INIT;
		if (fake_read(f, fd, &req, false)) {
			atomic_fetch_add(&f->requests, 1);
			if (!f->hang)
				fake_answer(f, fd);
			if (f->hang || f->keep_open)
				fake_read(f, fd, &req, true);
		}
		buf_free(&req);
		close(fd);
	}
	return NULL;
}

static void fake_start(struct fake *f, const char *resp)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof a;
	f->resp = resp;
	atomic_init(&f->requests, 0);
	atomic_init(&f->quit, false);
	f->lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(f->lfd >= 0);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&a, &len), 0);
	assert_int_equal(listen(f->lfd, 16), 0);
	f->port = ntohs(a.sin_port);
	snprintf(f->endpoint, sizeof f->endpoint, "http://127.0.0.1:%d", f->port);
	assert_int_equal(pthread_create(&f->th, NULL, fake_main, f), 0);
}

static void fake_stop(struct fake *f)
{
	atomic_store(&f->quit, true);
	shutdown(f->lfd, SHUT_RDWR);
	pthread_join(f->th, NULL);
	close(f->lfd);
}

/* A complete answer with a length; malloc'ed. */
static char *http_answer(int status, const char *body)
{
	struct buf b = BUF_INIT;
	assert_int_equal(buf_printf(&b,
				    "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
				    "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
				    status, strlen(body), body),
			 0);
	return buf_steal(&b);
}

/* A stream answer: 200, no length, ends when the connection closes. */
static char *http_stream(const char *body)
{
	struct buf b = BUF_INIT;
	assert_int_equal(buf_printf(&b,
				    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				    "Connection: close\r\n\r\n%s",
				    body),
			 0);
	return buf_steal(&b);
}

/* ---- no etcd needed ---- */

static void check_prefix_end(const char *prefix, size_t len, const char *want, size_t want_len)
{
	struct buf b = BUF_INIT;
	assert_int_equal(buf_append_str(&b, "x"), 0); /* appends */
	assert_int_equal(etcd_prefix_end(prefix, len, &b), 0);
	assert_int_equal(b.len, 1 + want_len);
	assert_memory_equal(b.data + 1, want, want_len);
	buf_free(&b);
}

static void test_prefix_end(void **state)
{
	check_prefix_end("/registry/pods/", 15, "/registry/pods0", 15);
	check_prefix_end("a\xff", 2, "b", 1);
	check_prefix_end("a\xfe\xff\xff", 4, "a\xff", 2);
	check_prefix_end("\xff\xff", 2, "\0", 1);
	check_prefix_end("", 0, "\0", 1);
}

static void test_wire_size(void **state)
{
	static char big[100000];
	struct etcd_op op = {
	    .kind = ETCD_OP_PUT, .key = "/k", .key_len = 2, .value = big, .value_len = sizeof big};
	struct etcd_txn t = {.success = &op, .nsuccess = 1};
	size_t one = etcd_txn_wire_size(&t);
	assert_true(one >= sizeof big + 2 + 6); /* at least the protobuf */
	assert_true(one <= sizeof big + 200);
	struct etcd_op ops[100];
	for (size_t i = 0; i < N_ELEMS(ops); i++)
		ops[i] =
		    (struct etcd_op){.kind = ETCD_OP_DELETE, .key = "/registry/x", .key_len = 11};
	struct etcd_compare cmp = {.target = ETCD_CMP_MOD, .key = "/registry/x", .key_len = 11};
	struct etcd_txn t2 = {.compare = &cmp, .ncompare = 1, .failure = ops, .nfailure = 100};
	size_t many = etcd_txn_wire_size(&t2);
	assert_true(many >= 100 * 15);
	assert_true(many <= 100 * (11 + 48) + 200);
}

static void test_config_errors(void **state)
{
	char *err = NULL;
	const char *bad[] = {"127.0.0.1:2379"};
	struct etcd_config cfg = {.endpoints = bad, .nendpoints = 1};
	assert_null(etcd_client_new(&cfg, &err));
	assert_non_null(err);
	assert_non_null(strstr(err, "127.0.0.1:2379"));
	free(err);
	cfg.nendpoints = 0;
	assert_null(etcd_client_new(&cfg, &err));
	assert_non_null(err);
	free(err);
	const char *good[] = {"https://127.0.0.1:2379/"};
	cfg =
	    (struct etcd_config){.endpoints = good, .nendpoints = 1, .ca_file = "/nonexistent/ca"};
	assert_null(etcd_client_new(&cfg, &err));
	assert_non_null(strstr(err, "/nonexistent/ca"));
	free(err);
	cfg.ca_file = NULL;
	struct etcd_client *c = etcd_client_new(&cfg, &err);
	assert_non_null(c);
	etcd_client_free(c);
}

/* ---- against etcd ---- */

static void test_put_range(void **state)
{
	put("/t/single/a", "{\"v\":1}");
	struct etcd_range_result r = get("/t/single/a");
	assert_int_equal(r.kvs[0].key_len, 11);
	assert_string_equal(r.kvs[0].key, "/t/single/a");
	assert_string_equal(r.kvs[0].value, "{\"v\":1}");
	assert_int_equal(r.kvs[0].value_len, 7);
	assert_int_equal(r.kvs[0].version, 1);
	assert_int_equal(r.kvs[0].create_revision, r.kvs[0].mod_revision);
	assert_int_equal(r.count, 1);
	assert_false(r.more);
	assert_true(r.revision >= r.kvs[0].mod_revision);
	int64_t first = r.kvs[0].mod_revision;
	etcd_range_result_free(&r);

	put("/t/single/a", "{\"v\":2}");
	r = get("/t/single/a");
	assert_string_equal(r.kvs[0].value, "{\"v\":2}");
	assert_int_equal(r.kvs[0].version, 2);
	etcd_range_result_free(&r);

	/* at the old revision */
	struct etcd_range_opts o = {.revision = first};
	assert_int_equal(etcd_range(g_c, "/t/single/a", 11, &o, &r), ETCD_OK);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.kvs[0].value, "{\"v\":1}");
	etcd_range_result_free(&r);

	assert_true(absent(g_c, "/t/single/missing"));
}

static void test_prefix_range(void **state)
{
	put("/t/registry/pods/default/a", "a");
	put("/t/registry/pods/kube-system/b", "b");
	put("/t/registry/podtemplates/x", "x");
	put("/t/registry/pods", "no slash");
	struct etcd_range_opts o = {0};
	struct etcd_range_result r = prefix_range("/t/registry/pods/", &o);
	assert_int_equal(r.n, 2);
	assert_int_equal(r.count, 2);
	assert_string_equal(r.kvs[0].key, "/t/registry/pods/default/a");
	assert_string_equal(r.kvs[1].key, "/t/registry/pods/kube-system/b");
	etcd_range_result_free(&r);
}

/* range_end "" (length 0): every key >= key. */
static void test_range_from(void **state)
{
	put("\xfe\xfe/a", "1");
	put("\xfe\xfe/b", "2");
	put("\xfe\xfe/c", "3");
	struct etcd_range_opts o = {.range_end = "", .range_end_len = 0};
	struct etcd_range_result r;
	assert_int_equal(etcd_range(g_c, "\xfe\xfe/b", 4, &o, &r), ETCD_OK);
	assert_int_equal(r.n, 2);
	assert_string_equal(r.kvs[0].key, "\xfe\xfe/b");
	assert_string_equal(r.kvs[1].key, "\xfe\xfe/c");
	etcd_range_result_free(&r);
}

static void test_keys_only(void **state)
{
	put("/t/keys/a", "value-a");
	put("/t/keys/b", "value-b");
	struct etcd_range_opts o = {.keys_only = true};
	struct etcd_range_result r = prefix_range("/t/keys/", &o);
	assert_int_equal(r.n, 2);
	assert_string_equal(r.kvs[1].key, "/t/keys/b");
	assert_int_equal(r.kvs[1].value_len, 0);
	assert_string_equal(r.kvs[1].value, "");
	assert_true(r.kvs[1].mod_revision > 0);
	etcd_range_result_free(&r);
}

static void test_count_only(void **state)
{
	for (int i = 0; i < 3; i++) {
		char k[32];
		snprintf(k, sizeof k, "/t/count/%d", i);
		put(k, "v");
	}
	struct etcd_range_opts o = {.count_only = true};
	struct etcd_range_result r = prefix_range("/t/count/", &o);
	assert_int_equal(r.n, 0);
	assert_null(r.kvs);
	assert_int_equal(r.count, 3);
	etcd_range_result_free(&r);
	o = (struct etcd_range_opts){.count_only = true};
	r = prefix_range("/t/count-none/", &o); /* count 0 is omitted by etcd */
	assert_int_equal(r.count, 0);
	etcd_range_result_free(&r);
}

static void test_limit_more(void **state)
{
	for (int i = 0; i < 5; i++) {
		char k[32];
		snprintf(k, sizeof k, "/t/limit/%d", i);
		put(k, "v");
	}
	struct etcd_range_opts o = {.limit = 2};
	struct etcd_range_result r = prefix_range("/t/limit/", &o);
	assert_int_equal(r.n, 2);
	assert_true(r.more);
	assert_int_equal(r.count, 5);
	assert_string_equal(r.kvs[1].key, "/t/limit/1");
	etcd_range_result_free(&r);
	o = (struct etcd_range_opts){.limit = 5};
	r = prefix_range("/t/limit/", &o);
	assert_int_equal(r.n, 5);
	assert_false(r.more);
	etcd_range_result_free(&r);
}

static void test_txn_cas(void **state)
{
	const char *k = "/t/cas/a";
	put(k, "v1");
	struct etcd_range_result cur = get(k);
	int64_t rev = cur.kvs[0].mod_revision;
	etcd_range_result_free(&cur);

	struct etcd_compare cmp = {.target = ETCD_CMP_MOD,
				   .result = ETCD_CMP_EQUAL,
				   .key = k,
				   .key_len = strlen(k),
				   .number = rev};
	struct etcd_op ok = {
	    .kind = ETCD_OP_PUT, .key = k, .key_len = strlen(k), .value = "v2", .value_len = 2};
	struct etcd_op get_op = {.kind = ETCD_OP_RANGE, .key = k, .key_len = strlen(k)};
	struct etcd_txn t = {.compare = &cmp,
			     .ncompare = 1,
			     .success = &ok,
			     .nsuccess = 1,
			     .failure = &get_op,
			     .nfailure = 1};
	struct etcd_txn_result r;
	assert_int_equal(etcd_txn(g_c, &t, &r), ETCD_OK);
	assert_true(r.succeeded);
	assert_int_equal(r.nranges, 0);
	int64_t applied = r.revision;
	etcd_txn_result_free(&r);

	ok.value = "v3";
	assert_int_equal(etcd_txn(g_c, &t, &r), ETCD_OK);
	assert_false(r.succeeded);
	assert_int_equal(r.nranges, 1);
	assert_int_equal(r.ranges[0].n, 1);
	assert_string_equal(r.ranges[0].kvs[0].value, "v2");
	assert_int_equal(r.ranges[0].kvs[0].mod_revision, applied);
	assert_int_equal(r.ranges[0].count, 1);
	etcd_txn_result_free(&r);
}

static void test_txn_create_if_absent(void **state)
{
	const char *k = "/t/create/a";
	struct etcd_compare cmp = {.target = ETCD_CMP_CREATE,
				   .result = ETCD_CMP_EQUAL,
				   .key = k,
				   .key_len = strlen(k),
				   .number = 0};
	struct etcd_op ops[] = {
	    {.kind = ETCD_OP_PUT, .key = k, .key_len = strlen(k), .value = "first", .value_len = 5},
	    {.kind = ETCD_OP_RANGE, .key = k, .key_len = strlen(k)},
	};
	struct etcd_txn t = {.compare = &cmp,
			     .ncompare = 1,
			     .success = &ops[0],
			     .nsuccess = 1,
			     .failure = &ops[1],
			     .nfailure = 1};
	struct etcd_txn_result r;
	assert_int_equal(etcd_txn(g_c, &t, &r), ETCD_OK);
	assert_true(r.succeeded);
	etcd_txn_result_free(&r);
	ops[0].value = "second";
	ops[0].value_len = 6;
	assert_int_equal(etcd_txn(g_c, &t, &r), ETCD_OK);
	assert_false(r.succeeded);
	assert_int_equal(r.nranges, 1);
	assert_string_equal(r.ranges[0].kvs[0].value, "first");
	etcd_txn_result_free(&r);
}

static void test_txn_value_missing(void **state)
{
	const char *k = "/t/value/missing";
	struct etcd_compare cmp = {.target = ETCD_CMP_VALUE,
				   .result = ETCD_CMP_EQUAL,
				   .key = k,
				   .key_len = strlen(k),
				   .value = "",
				   .value_len = 0};
	struct etcd_op op = {
	    .kind = ETCD_OP_PUT, .key = k, .key_len = strlen(k), .value = "x", .value_len = 1};
	struct etcd_txn t = {.compare = &cmp, .ncompare = 1, .success = &op, .nsuccess = 1};
	struct etcd_txn_result r;
	assert_int_equal(etcd_txn(g_c, &t, &r), ETCD_OK);
	assert_false(r.succeeded);
	assert_int_equal(r.nranges, 0);
	etcd_txn_result_free(&r);
	assert_true(absent(g_c, k));

	/* and a VALUE compare that holds */
	put("/t/value/here", "abc");
	cmp = (struct etcd_compare){.target = ETCD_CMP_VALUE,
				    .result = ETCD_CMP_EQUAL,
				    .key = "/t/value/here",
				    .key_len = 13,
				    .value = "abc",
				    .value_len = 3};
	op.key = "/t/value/done";
	op.key_len = 13;
	assert_int_equal(etcd_txn(g_c, &t, &r), ETCD_OK);
	assert_true(r.succeeded);
	etcd_txn_result_free(&r);
	assert_false(absent(g_c, "/t/value/done"));
}

static bool txn_over_range(const char *prefix)
{
	struct buf end = BUF_INIT;
	assert_int_equal(etcd_prefix_end(prefix, strlen(prefix), &end), 0);
	struct etcd_compare cmp = {.target = ETCD_CMP_VERSION,
				   .result = ETCD_CMP_EQUAL,
				   .key = prefix,
				   .key_len = strlen(prefix),
				   .range_end = end.data,
				   .range_end_len = end.len,
				   .number = 0};
	struct etcd_txn t = {.compare = &cmp, .ncompare = 1};
	struct etcd_txn_result r;
	assert_int_equal(etcd_txn(g_c, &t, &r), ETCD_OK);
	bool ok = r.succeeded;
	etcd_txn_result_free(&r);
	buf_free(&end);
	return ok;
}

static void test_txn_compare_range(void **state)
{
	assert_true(txn_over_range("/t/cmprange/empty/"));
	put("/t/cmprange/full/a", "1");
	assert_false(txn_over_range("/t/cmprange/full/"));
}

static void test_delete_range(void **state)
{
	put("/t/del/a", "1");
	put("/t/del/b", "2");
	put("/t/del/c", "3");
	int64_t n = -1;
	assert_int_equal(etcd_delete_range(g_c, "/t/del/a", 8, NULL, 0, &n), ETCD_OK);
	assert_int_equal(n, 1);
	assert_int_equal(etcd_delete_range(g_c, "/t/del/a", 8, NULL, 0, &n), ETCD_OK);
	assert_int_equal(n, 0);
	struct buf end = BUF_INIT;
	assert_int_equal(etcd_prefix_end("/t/del/", 7, &end), 0);
	assert_int_equal(etcd_delete_range(g_c, "/t/del/", 7, end.data, end.len, &n), ETCD_OK);
	assert_int_equal(n, 2);
	buf_free(&end);
	assert_true(absent(g_c, "/t/del/c"));
}

static void test_too_many_ops(void **state)
{
	struct etcd_op ops[129];
	char keys[129][32];
	for (size_t i = 0; i < N_ELEMS(ops); i++) {
		snprintf(keys[i], sizeof keys[i], "/t/many/%zu", i);
		ops[i] = (struct etcd_op){.kind = ETCD_OP_PUT,
					  .key = keys[i],
					  .key_len = strlen(keys[i]),
					  .value = "v",
					  .value_len = 1};
	}
	struct etcd_txn t = {.success = ops, .nsuccess = 129};
	struct etcd_txn_result r;
	assert_int_equal(etcd_txn(g_c, &t, &r), ETCD_TOO_MANY_OPS);
	assert_non_null(strstr(etcd_last_error(), "too many operations"));
	assert_int_equal(r.nranges, 0);
	t.nsuccess = 128;
	assert_int_equal(etcd_txn(g_c, &t, &r), ETCD_OK);
	etcd_txn_result_free(&r);
}

static enum etcd_err put_size(size_t size, size_t *wire)
{
	char *v = malloc(size);
	assert_non_null(v);
	memset(v, 'x', size);
	struct etcd_op op = {
	    .kind = ETCD_OP_PUT, .key = "/t/large", .key_len = 8, .value = v, .value_len = size};
	struct etcd_txn t = {.success = &op, .nsuccess = 1};
	struct etcd_txn_result r;
	*wire = etcd_txn_wire_size(&t);
	enum etcd_err e = etcd_txn(g_c, &t, &r);
	etcd_txn_result_free(&r);
	free(v);
	return e;
}

static void test_too_large(void **state)
{
	size_t wire;
	assert_int_equal(put_size(1600000, &wire), ETCD_TOO_LARGE);
	assert_non_null(strstr(etcd_last_error(), "too large"));
	assert_true(wire > 1572864);
	assert_int_equal(put_size(3000000, &wire), ETCD_TOO_LARGE); /* HTTP 429 */
	assert_int_equal(put_size(1500000, &wire), ETCD_OK);
	assert_true(wire <= 1572864);
}

static void test_binary(void **state)
{
	const char key[] = "/t/bin/\0\xff\x01";
	const char val[] = "\0\xff\0abc\xff";
	size_t kl = sizeof key - 1, vl = sizeof val - 1;
	put_bin(g_c, key, kl, val, vl);
	struct etcd_range_result r;
	assert_int_equal(etcd_range(g_c, key, kl, NULL, &r), ETCD_OK);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.kvs[0].key_len, kl);
	assert_memory_equal(r.kvs[0].key, key, kl);
	assert_int_equal(r.kvs[0].key[kl], '\0');
	assert_int_equal(r.kvs[0].value_len, vl);
	assert_memory_equal(r.kvs[0].value, val, vl);
	assert_int_equal(r.kvs[0].value[vl], '\0');
	etcd_range_result_free(&r);
	/* a prefix ending in 0xff */
	struct buf end = BUF_INIT;
	assert_int_equal(etcd_prefix_end("/t/bin/\0\xff", 9, &end), 0);
	struct etcd_range_opts o = {.range_end = end.data, .range_end_len = end.len};
	assert_int_equal(etcd_range(g_c, "/t/bin/\0\xff", 9, &o, &r), ETCD_OK);
	assert_int_equal(r.n, 1);
	etcd_range_result_free(&r);
	buf_free(&end);
}

static void test_status(void **state)
{
	put("/t/status", "x");
	struct etcd_status st;
	assert_int_equal(etcd_status(g_c, &st), ETCD_OK);
	assert_string_equal(st.version, "3.4.23");
	assert_true(st.db_size > 0);
	assert_true(st.revision > 1);
	assert_true(st.leader != 0);
}

struct writer {
	long delay_ms;
};

/* Without cmocka asserts: this runs on another thread. */
static enum etcd_err try_put(const char *k, const char *v)
{
	struct etcd_op op = {.kind = ETCD_OP_PUT,
			     .key = k,
			     .key_len = strlen(k),
			     .value = v,
			     .value_len = strlen(v)};
	struct etcd_txn t = {.success = &op, .nsuccess = 1};
	struct etcd_txn_result r;
	enum etcd_err e = etcd_txn(g_c, &t, &r);
	etcd_txn_result_free(&r);
	return e;
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	int64_t n;
	sleep_ms(w->delay_ms);
	if (try_put("/t/watchx", "outside") || try_put("/t/watch/a", "1") ||
	    etcd_delete_range(g_c, "/t/watch/a", 10, NULL, 0, &n))
		fprintf(stderr, "writer: %s\n", etcd_last_error());
	return NULL;
}

static void test_watch_events(void **state)
{
	int64_t from = current_revision() + 1;
	struct buf end = BUF_INIT;
	assert_int_equal(etcd_prefix_end("/t/watch/", 9, &end), 0);
	volatile bool stop = false;
	struct watchdog dog;
	struct writer wr = {200};
	pthread_t th;
	struct wctx ctx = {.want = 2};
	watchdog_start(&dog, &stop, 10000);
	assert_int_equal(pthread_create(&th, NULL, writer_main, &wr), 0);
	enum etcd_err e =
	    etcd_watch(g_c, "/t/watch/", 9, end.data, end.len, from, on_events, &ctx, &stop);
	pthread_join(th, NULL);
	watchdog_end(&dog);
	buf_free(&end);
	assert_int_equal(e, ETCD_OK);
	assert_int_equal(ctx.n, 2);
	assert_false(ctx.ev[0].del);
	assert_string_equal(ctx.ev[0].key, "/t/watch/a");
	assert_string_equal(ctx.ev[0].value, "1");
	assert_true(ctx.ev[0].mod_revision >= from);
	assert_true(ctx.ev[1].del);
	assert_string_equal(ctx.ev[1].key, "/t/watch/a");
	assert_int_equal(ctx.ev[1].mod_revision, ctx.ev[1].revision);
	assert_true(ctx.ev[1].revision > ctx.ev[0].revision);
}

struct bg_watch {
	struct etcd_client *c;
	volatile bool stop;
	struct wctx ctx;
	enum etcd_err e;
	atomic_bool finished;
};

static void *bg_watch_main(void *arg)
{
	struct bg_watch *b = arg;
	b->e = etcd_watch(b->c, "/t/quiet/", 9, "/t/quiet0", 9, 0, on_events, &b->ctx, &b->stop);
	atomic_store(&b->finished, true);
	return NULL;
}

/* The watch runs on a thread, so that a watch that ignores stop fails the
 * test instead of hanging it. */
static void test_watch_stop(void **state)
{
	const char *eps[] = {g_etcd.endpoint};
	struct bg_watch *b = calloc(1, sizeof *b);
	assert_non_null(b);
	b->c = client_for(eps, 1, 0);
	b->ctx.want = 1;
	atomic_init(&b->finished, false);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, bg_watch_main, b), 0);
	sleep_ms(300);
	long t0 = now_ms();
	b->stop = true;
	while (!atomic_load(&b->finished) && now_ms() - t0 < 5000)
		sleep_ms(5);
	if (!atomic_load(&b->finished))
		fail_msg("the watch did not stop"); /* b and its thread are left behind */
	long took = now_ms() - t0;
	pthread_join(th, NULL);
	assert_int_equal(b->e, ETCD_OK);
	assert_int_equal(b->ctx.calls, 0);
	assert_true(took < 2000);
	/* already stopped: returns at once */
	assert_int_equal(etcd_watch(b->c, "/t/quiet/", 9, NULL, 0, 0, on_events, &b->ctx, &b->stop),
			 ETCD_OK);
	etcd_client_free(b->c);
	free(b);
}

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
	return size * n;
}

static void compact(int64_t rev)
{
	char url[128], body[64];
	snprintf(url, sizeof url, "%s/v3/kv/compaction", g_etcd.endpoint);
	snprintf(body, sizeof body, "{\"revision\":\"%lld\",\"physical\":true}", (long long)rev);
	CURL *h = curl_easy_init();
	assert_non_null(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
	assert_int_equal(curl_easy_perform(h), CURLE_OK);
	long status = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(h);
	assert_int_equal(status, 200);
}

static void test_watch_compacted(void **state)
{
	put("/t/compact/a", "1");
	int64_t old = current_revision();
	put("/t/compact/a", "2");
	put("/t/compact/a", "3");
	compact(current_revision());
	volatile bool stop = false;
	struct watchdog dog;
	struct wctx ctx = {.want = 100};
	watchdog_start(&dog, &stop, 10000);
	long t0 = now_ms();
	enum etcd_err e =
	    etcd_watch(g_c, "/t/compact/", 11, "/t/compact0", 11, old, on_events, &ctx, &stop);
	long took = now_ms() - t0;
	watchdog_end(&dog);
	assert_int_equal(e, ETCD_COMPACTED);
	assert_true(took < 5000); /* the client closed the stream that etcd kept open */
	assert_int_equal(ctx.calls, 0);
	struct etcd_range_opts o = {.revision = old};
	struct etcd_range_result r;
	assert_int_equal(etcd_range(g_c, "/t/compact/a", 12, &o, &r), ETCD_COMPACTED);
}

static void test_failover(void **state)
{
	char dead[64];
	snprintf(dead, sizeof dead, "http://127.0.0.1:%d", closed_port());
	const char *eps[] = {dead, g_etcd.endpoint};
	struct etcd_client *c = client_for(eps, 2, 0);
	put_bin(c, "/t/failover", 11, "1", 1); /* a refused connect: safe to send again */
	struct etcd_range_result r;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(etcd_range(c, "/t/failover", 11, NULL, &r), ETCD_OK);
		assert_int_equal(r.n, 1);
		etcd_range_result_free(&r);
	}
	struct etcd_status st;
	assert_int_equal(etcd_status(c, &st), ETCD_OK);
	etcd_client_free(c);
	/* a watch fails over too (and then runs until stopped) */
	c = client_for(eps, 2, 0);
	volatile bool stop = false;
	struct watchdog dog;
	struct wctx ctx = {.want = 1};
	watchdog_start(&dog, &stop, 300);
	enum etcd_err e = etcd_watch(c, "/t/quiet/", 9, NULL, 0, 0, on_events, &ctx, &stop);
	watchdog_end(&dog);
	assert_int_equal(e, ETCD_OK);
	etcd_client_free(c);
	/* every endpoint down */
	const char *both[] = {dead, dead};
	c = client_for(both, 2, 0);
	assert_int_equal(etcd_range(c, "/t/failover", 11, NULL, &r), ETCD_UNAVAILABLE);
	assert_non_null(strstr(etcd_last_error(), dead));
	etcd_client_free(c);
}

static void test_stopped_fast(void **state)
{
	put("/t/stopped", "before");
	etcd_proc_halt(&g_etcd);
	struct etcd_range_result r;
	long t0 = now_ms();
	enum etcd_err e1 = etcd_range(g_c, "/t/stopped", 10, NULL, &r);
	int64_t n;
	enum etcd_err e2 = etcd_delete_range(g_c, "/t/stopped", 10, NULL, 0, &n);
	long took = now_ms() - t0;
	int rc = etcd_proc_restart(&g_etcd);
	assert_int_equal(rc, 0);
	assert_int_equal(e1, ETCD_UNAVAILABLE);
	assert_int_equal(e2, ETCD_UNAVAILABLE);
	assert_true(took < 500); /* refused, far below the 5 s timeout */
	r = get("/t/stopped");
	assert_string_equal(r.kvs[0].value, "before");
	etcd_range_result_free(&r);
}

static void test_restart(void **state)
{
	put("/t/restart", "1");
	assert_int_equal(etcd_proc_restart(&g_etcd), 0);
	struct etcd_range_result r = get("/t/restart");
	assert_string_equal(r.kvs[0].value, "1");
	etcd_range_result_free(&r);
	put("/t/restart", "2");
	r = get("/t/restart");
	assert_string_equal(r.kvs[0].value, "2");
	etcd_range_result_free(&r);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	int n = 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void test_no_fd_leak(void **state)
{
	char dead[64];
	snprintf(dead, sizeof dead, "http://127.0.0.1:%d", closed_port());
	const char *eps[] = {dead};
	struct etcd_client *c = client_for(eps, 1, 0);
	struct etcd_range_result r;
	struct etcd_txn_result tr;
	struct etcd_op op = {
	    .kind = ETCD_OP_PUT, .key = "/t/x", .key_len = 4, .value = "v", .value_len = 1};
	struct etcd_txn t = {.success = &op, .nsuccess = 1};
	assert_int_equal(etcd_range(c, "/t/x", 4, NULL, &r), ETCD_UNAVAILABLE);
	int before = count_fds();
	for (int i = 0; i < 2000; i++) {
		if (i % 2)
			assert_int_equal(etcd_range(c, "/t/x", 4, NULL, &r), ETCD_UNAVAILABLE);
		else
			assert_int_equal(etcd_txn(c, &t, &tr), ETCD_UNAVAILABLE);
	}
	assert_int_equal(count_fds(), before);
	etcd_client_free(c);
}

struct worker {
	int id, failures;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	for (int i = 0; i < 100; i++) {
		char k[64], v[32];
		snprintf(k, sizeof k, "/t/conc/%d/%d", w->id, i);
		snprintf(v, sizeof v, "%d-%d", w->id, i);
		struct etcd_op op = {.kind = ETCD_OP_PUT,
				     .key = k,
				     .key_len = strlen(k),
				     .value = v,
				     .value_len = strlen(v)};
		struct etcd_txn t = {.success = &op, .nsuccess = 1};
		struct etcd_txn_result tr;
		struct etcd_range_result r;
		if (etcd_txn(g_c, &t, &tr) != ETCD_OK || !tr.succeeded)
			w->failures++;
		etcd_txn_result_free(&tr);
		if (etcd_range(g_c, k, strlen(k), NULL, &r) != ETCD_OK || r.n != 1 ||
		    strcmp(r.kvs[0].value, v) != 0)
			w->failures++;
		etcd_range_result_free(&r);
	}
	return NULL;
}

static void test_concurrent(void **state)
{
	pthread_t th[8];
	struct worker w[8];
	for (int i = 0; i < 8; i++) {
		w[i] = (struct worker){i, 0};
		assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
	}
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 8; i++)
		assert_int_equal(w[i].failures, 0);
	struct etcd_range_opts o = {.count_only = true};
	struct etcd_range_result r = prefix_range("/t/conc/", &o);
	assert_int_equal(r.count, 800);
	etcd_range_result_free(&r);
}

/* ---- against the fake gateway ---- */

static struct etcd_client *fake_client(struct fake *f, long timeout_ms)
{
	const char *eps[] = {f->endpoint};
	return client_for(eps, 1, timeout_ms);
}

static void test_malformed_range(void **state)
{
	static const char *bodies[] = {
	    "",
	    "hello",
	    "[1,2]",
	    "{\"kvs\":[{\"key\":\"YQ==\",\"value\":\"MQ==\"}",
	    "{\"kvs\":\"x\"}",
	    "{\"kvs\":[5]}",
	    "{\"kvs\":[{\"value\":\"MQ==\"}]}",
	    "{\"kvs\":[{\"key\":5}]}",
	    "{\"kvs\":[{\"key\":\"!!!!\"}]}",
	    "{\"kvs\":[{\"key\":\"YQ=\"}]}",
	    "{\"kvs\":[{\"key\":\"YQ==\",\"value\":7}]}",
	    "{\"kvs\":[{\"key\":\"YQ==\",\"mod_revision\":\"99999999999999999999999\"}]}",
	    "{\"kvs\":[{\"key\":\"YQ==\",\"mod_revision\":99999999999999999999999}]}",
	    "{\"kvs\":[{\"key\":\"YQ==\",\"version\":\"9223372036854775808\"}]}",
	    "{\"count\":\"12abc\"}",
	    "{\"count\":\" 12\"}",
	    "{\"count\":\"\"}",
	    "{\"count\":\"1\\u00002\"}",
	    "{\"count\":1.5}",
	    "{\"count\":true}",
	    "{\"more\":\"yes\"}",
	    "{\"header\":\"x\"}",
	    "{\"header\":{\"revision\":{}}}",
	};
	for (size_t i = 0; i < N_ELEMS(bodies); i++) {
		struct fake f = {0};
		char *resp = http_answer(200, bodies[i]);
		fake_start(&f, resp);
		struct etcd_client *c = fake_client(&f, 0);
		struct etcd_range_result r;
		enum etcd_err e = etcd_range(c, "a", 1, NULL, &r);
		if (e != ETCD_PROTOCOL)
			fprintf(stderr, "body %zu: %s\n", i, bodies[i]);
		assert_int_equal(e, ETCD_PROTOCOL);
		assert_int_equal(r.n, 0);
		assert_null(r.kvs);
		assert_true(strlen(etcd_last_error()) > 0);
		etcd_client_free(c);
		fake_stop(&f);
		free(resp);
	}
}

/* Deep nesting, many kvs, a key-only kv: no crash, and what is valid is read. */
static void test_odd_but_valid(void **state)
{
	struct buf deep = BUF_INIT;
	for (int i = 0; i < 100000; i++)
		assert_int_equal(buf_append_char(&deep, '['), 0);
	struct {
		const char *body;
		enum etcd_err want;
		size_t n;
	} cases[] = {
	    {deep.data, ETCD_PROTOCOL, 0},
	    {"{\"kvs\":[{\"key\":\"YQ==\"}],\"unknown\":[1,2,{}]}", ETCD_OK, 1},
	    {"{\"kvs\":[{\"key\":\"YQ==\",\"mod_revision\":7}],\"count\":\"-1\"}", ETCD_OK, 1},
	    {"{}", ETCD_OK, 0},
	};
	for (size_t i = 0; i < N_ELEMS(cases); i++) {
		struct fake f = {0};
		char *resp = http_answer(200, cases[i].body);
		fake_start(&f, resp);
		struct etcd_client *c = fake_client(&f, 0);
		struct etcd_range_result r;
		assert_int_equal(etcd_range(c, "a", 1, NULL, &r), cases[i].want);
		assert_int_equal(r.n, cases[i].n);
		if (cases[i].want == ETCD_OK)
			assert_int_equal(r.count, i == 2 ? -1 : (int64_t)r.n); /* absent: n */
		if (r.n) {
			assert_string_equal(r.kvs[0].key, "a");
			assert_string_equal(r.kvs[0].value, "");
		}
		etcd_range_result_free(&r);
		etcd_client_free(c);
		fake_stop(&f);
		free(resp);
	}
	buf_free(&deep);
}

static void test_malformed_txn_status(void **state)
{
	static const char *txn_bodies[] = {
	    "{\"succeeded\":\"true\"}",
	    "{\"succeeded\":true,\"responses\":{}}",
	    "{\"succeeded\":true,\"responses\":[5]}",
	    "{\"succeeded\":true,\"responses\":[]}",
	    "{\"succeeded\":true,\"responses\":[{\"response_range\":[]}]}",
	    "{\"succeeded\":true,\"responses\":[{\"response_range\":{}},{\"response_range\":{}}]}",
	    "{\"succeeded\":true,\"responses\":[{\"response_range\":{\"kvs\":[{\"key\":\"#\"}]}}]}",
	};
	struct etcd_op op = {.kind = ETCD_OP_RANGE, .key = "a", .key_len = 1};
	struct etcd_txn t = {.success = &op, .nsuccess = 1};
	for (size_t i = 0; i < N_ELEMS(txn_bodies); i++) {
		struct fake f = {0};
		char *resp = http_answer(200, txn_bodies[i]);
		fake_start(&f, resp);
		struct etcd_client *c = fake_client(&f, 0);
		struct etcd_txn_result r;
		assert_int_equal(etcd_txn(c, &t, &r), ETCD_PROTOCOL);
		assert_int_equal(r.nranges, 0);
		assert_null(r.ranges);
		etcd_client_free(c);
		fake_stop(&f);
		free(resp);
	}
	static const char *status_bodies[] = {"{\"version\":5}", "{\"leader\":\"-1\"}",
					      "{\"dbSize\":\"x\"}"};
	for (size_t i = 0; i < N_ELEMS(status_bodies); i++) {
		struct fake f = {0};
		char *resp = http_answer(200, status_bodies[i]);
		fake_start(&f, resp);
		struct etcd_client *c = fake_client(&f, 0);
		struct etcd_status st;
		assert_int_equal(etcd_status(c, &st), ETCD_PROTOCOL);
		etcd_client_free(c);
		fake_stop(&f);
		free(resp);
	}
}

static void test_http_errors(void **state)
{
	static const struct {
		int status;
		const char *body;
		enum etcd_err want;
		const char *msg;
	} cases[] = {
	    {400,
	     "{\"error\":\"etcdserver: mvcc: required revision has been compacted\",\"message\":"
	     "\"etcdserver: mvcc: required revision has been compacted\",\"code\":11}",
	     ETCD_COMPACTED, "compacted"},
	    {400,
	     "{\"error\":\"etcdserver: mvcc: required revision is a future revision\",\"code\":11}",
	     ETCD_ERROR, "future revision"},
	    {400, "{\"error\":\"etcdserver: too many operations in txn request\",\"code\":3}",
	     ETCD_TOO_MANY_OPS, "too many"},
	    {400, "{\"error\":\"etcdserver: request is too large\",\"code\":3}", ETCD_TOO_LARGE,
	     "too large"},
	    {429,
	     "{\"error\":\"grpc: received message larger than max (3000013 vs. 2097152)\","
	     "\"code\":8}",
	     ETCD_TOO_LARGE, "larger than max"},
	    /* the NOSPACE alarm: gRPC 8 too, and 429 from the gateway, but not "too large" */
	    {429,
	     "{\"error\":\"etcdserver: mvcc: database space exceeded\",\"message\":"
	     "\"etcdserver: mvcc: database space exceeded\",\"code\":8}",
	     ETCD_NOSPACE, "database space exceeded"},
	    {400, "{\"error\":\"etcdserver: duplicate key given in txn request\",\"code\":3}",
	     ETCD_ERROR, "duplicate key"},
	    {500, "{\"error\":\"internal\",\"code\":13}", ETCD_ERROR, "internal"},
	    {503, "{\"error\":\"etcdserver: no leader\",\"code\":14}", ETCD_UNAVAILABLE,
	     "no leader"},
	    {502, "<html>bad gateway</html>", ETCD_UNAVAILABLE, "502"},
	    {404, "404 page not found", ETCD_PROTOCOL, "404"},
	    {400, "{\"code\":\"3\",\"message\":\"x\"}", ETCD_PROTOCOL, "400"},
	    {301, "", ETCD_PROTOCOL, "301"},
	    {400, "{\"error\":\"a\\nb\",\"code\":3}", ETCD_ERROR, "a?b"},
	};
	for (size_t i = 0; i < N_ELEMS(cases); i++) {
		struct fake f = {0};
		char *resp = http_answer(cases[i].status, cases[i].body);
		fake_start(&f, resp);
		struct etcd_client *c = fake_client(&f, 0);
		struct etcd_range_result r;
		assert_int_equal(etcd_range(c, "a", 1, NULL, &r), cases[i].want);
		if (!strstr(etcd_last_error(), cases[i].msg))
			fail_msg("case %zu: %s", i, etcd_last_error());
		assert_int_equal(atomic_load(&f.requests), 1);
		struct etcd_nospace ns;
		etcd_client_nospace(c, &ns);
		assert_int_equal(ns.now, cases[i].want == ETCD_NOSPACE);
		assert_int_equal(ns.refused, cases[i].want == ETCD_NOSPACE);
		etcd_client_free(c);
		fake_stop(&f);
		free(resp);
	}
	assert_string_equal(etcd_strerror(ETCD_NOSPACE), "etcd is out of space (NOSPACE alarm)");
}

/* The fake first, then the live etcd: a read goes on to etcd, a write that
 * was sent is not sent again. */
static void check_read_fails_over_write_does_not(struct fake *f, long timeout_ms, const char *key)
{
	const char *eps[] = {f->endpoint, g_etcd.endpoint};
	struct etcd_client *c = client_for(eps, 2, timeout_ms);
	struct etcd_range_result r;
	assert_int_equal(etcd_range(c, "/t/single/a", 11, NULL, &r), ETCD_OK);
	assert_int_equal(r.n, 1);
	etcd_range_result_free(&r);
	assert_int_equal(atomic_load(&f->requests), 1);
	etcd_client_free(c);

	c = client_for(eps, 2, timeout_ms);
	struct etcd_op op = {
	    .kind = ETCD_OP_PUT, .key = key, .key_len = strlen(key), .value = "v", .value_len = 1};
	struct etcd_txn t = {.success = &op, .nsuccess = 1};
	struct etcd_txn_result tr;
	assert_int_equal(etcd_txn(c, &t, &tr), ETCD_UNAVAILABLE);
	assert_non_null(strstr(etcd_last_error(), "may have been applied"));
	assert_int_equal(atomic_load(&f->requests), 2);
	assert_true(absent(c, key)); /* and the next call goes to etcd */
	assert_int_equal(atomic_load(&f->requests), 2);
	etcd_client_free(c);
}

static void test_failover_rules(void **state)
{
	const char *bodies[] = {"<html>bad gateway</html>",
				"{\"error\":\"etcdserver: request timed out\",\"code\":14}"};
	const int status[] = {502, 503};
	for (size_t i = 0; i < N_ELEMS(bodies); i++) {
		struct fake f = {0};
		char *resp = http_answer(status[i], bodies[i]);
		fake_start(&f, resp);
		check_read_fails_over_write_does_not(&f, 0, i ? "/t/noretry/1" : "/t/noretry/0");
		fake_stop(&f);
		free(resp);
	}
	/* no answer at all: the call times out after the request was sent */
	struct fake f = {.hang = true};
	fake_start(&f, "");
	long t0 = now_ms();
	check_read_fails_over_write_does_not(&f, 300, "/t/noretry/2");
	long took = now_ms() - t0;
	assert_true(took >= 600);
	assert_true(took < 3000);
	fake_stop(&f);
}

/* A watch of the fake's stream, stopped by a watchdog after limit_ms (then
 * it ends ETCD_OK, which the caller's want catches). */
static void fake_watch_within(struct fake *f, const char *stream, struct wctx *ctx,
			      enum etcd_err want, long limit_ms)
{
	char *resp = http_stream(stream);
	fake_start(f, resp);
	struct etcd_client *c = fake_client(f, 0);
	volatile bool stop = false;
	struct watchdog dog;
	watchdog_start(&dog, &stop, limit_ms);
	long t0 = now_ms();
	enum etcd_err e = etcd_watch(c, "a", 1, NULL, 0, 0, on_events, ctx, &stop);
	long took = now_ms() - t0;
	watchdog_end(&dog);
	if (e != want)
		fprintf(stderr, "watch: %s\n", etcd_last_error());
	assert_int_equal(e, want);
	assert_true(took < limit_ms - 1000);
	etcd_client_free(c);
	fake_stop(f);
	free(resp);
}

static void fake_watch(struct fake *f, const char *stream, struct wctx *ctx, enum etcd_err want)
{
	fake_watch_within(f, stream, ctx, want, 5000);
}

#define CREATED "{\"result\":{\"header\":{\"revision\":\"5\"},\"created\":true}}\n"
#define PUT_A                                                                                      \
	"{\"result\":{\"header\":{\"revision\":\"6\"},\"events\":[{\"kv\":{\"key\":\"YQ==\","      \
	"\"value\":\"MQ==\",\"mod_revision\":\"6\"}}]}}\n"
#define DEL_A                                                                                      \
	"{\"result\":{\"header\":{\"revision\":\"7\"},\"events\":[{\"type\":\"DELETE\",\"kv\":"    \
	"{\"key\":\"YQ==\",\"mod_revision\":\"7\"}}]}}\n"

static void test_watch_split_lines(void **state)
{
	size_t pieces[] = {1, 7, 64, 0};
	for (size_t i = 0; i < N_ELEMS(pieces); i++) {
		struct fake f = {.piece = pieces[i], .delay_ms = pieces[i] == 1 ? 0 : 2};
		struct wctx ctx = {.want = 2};
		fake_watch(&f, CREATED "\n" PUT_A DEL_A, &ctx, ETCD_OK);
		assert_int_equal(ctx.n, 2);
		assert_false(ctx.ev[0].del);
		assert_string_equal(ctx.ev[0].key, "a");
		assert_string_equal(ctx.ev[0].value, "1");
		assert_int_equal(ctx.ev[0].revision, 6);
		assert_true(ctx.ev[1].del);
		assert_int_equal(ctx.ev[1].mod_revision, 7);
	}
}

/* The decoders behind client_internal.h (what fuzz/fuzz_etcd_client runs)
 * give what the calls give over a connection. */
static void test_parse_without_connection(void **state)
{
	const char stream[] = CREATED "\n" PUT_A DEL_A;
	size_t len = strlen(stream);
	size_t pieces[] = {1, 7, 64, len};
	assert_true(len <= 1024); /* one piece per byte fits below */
	for (size_t i = 0; i < N_ELEMS(pieces); i++) {
		const char *chunks[1024];
		size_t lens[1024], n = 0;
		for (size_t off = 0; off < len; off += lens[n++]) {
			chunks[n] = stream + off;
			lens[n] = len - off < pieces[i] ? len - off : pieces[i];
		}
		struct wctx ctx = {.want = 3};
		assert_int_equal(etcd_parse_watch_stream(chunks, lens, n, on_events, &ctx),
				 ETCD_UNAVAILABLE); /* the stream ended */
		assert_int_equal(ctx.n, 2);
		assert_string_equal(ctx.ev[0].key, "a");
		assert_true(ctx.ev[1].del);
		assert_int_equal(ctx.ev[1].mod_revision, 7);
	}
	const char range[] = "{\"header\":{\"revision\":\"9\"},\"kvs\":[{\"key\":\"YQ==\","
			     "\"value\":\"MQ==\",\"mod_revision\":\"6\"}],\"more\":true}";
	struct etcd_range_result r;
	assert_int_equal(etcd_parse_range_json(range, strlen(range), &r), ETCD_OK);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.count, 1);
	assert_int_equal(r.revision, 9);
	assert_true(r.more);
	assert_string_equal(r.kvs[0].value, "1");
	etcd_range_result_free(&r);
	assert_int_equal(etcd_parse_range_json("[]", 2, &r), ETCD_PROTOCOL);
	const char compacted[] = "{\"error\":\"etcdserver: mvcc: required revision has been "
				 "compacted\",\"message\":\"etcdserver: mvcc: required revision "
				 "has been compacted\",\"code\":11}";
	bool retry = true;
	assert_int_equal(etcd_parse_error_json(400, true, compacted, strlen(compacted), &retry),
			 ETCD_COMPACTED);
	assert_false(retry);
	assert_int_equal(etcd_parse_error_json(502, false, "<html>", 6, &retry), ETCD_UNAVAILABLE);
	assert_false(retry);
}

static void test_watch_fake_endings(void **state)
{
	static const struct {
		const char *stream;
		bool keep_open;
		enum etcd_err want;
		size_t events;
	} cases[] = {
	    {CREATED, false, ETCD_UNAVAILABLE, 0},
	    {CREATED PUT_A, false, ETCD_UNAVAILABLE, 1},
	    {CREATED "{\"result\":{\"canceled\":true,\"compact_revision\":\"3\"}}\n", true,
	     ETCD_COMPACTED, 0},
	    {CREATED "{\"result\":{\"canceled\":true,\"compact_revision\":\"3\"}}", false,
	     ETCD_COMPACTED, 0},
	    {CREATED "{\"result\":{\"canceled\":true,\"cancel_reason\":\"no\"}}\n", true,
	     ETCD_ERROR, 0},
	    {CREATED "{\"error\":{\"grpc_code\":14,\"message\":\"unavailable\"}}\n", true,
	     ETCD_UNAVAILABLE, 0},
	    {CREATED "not json\n", true, ETCD_PROTOCOL, 0},
	    {CREATED "[]\n", true, ETCD_PROTOCOL, 0},
	    {CREATED "{\"result\":{\"events\":[{\"type\":\"BOGUS\",\"kv\":{\"key\":\"YQ==\"}}]}}\n",
	     true, ETCD_PROTOCOL, 0},
	    {CREATED "{\"result\":{\"events\":[{\"kv\":{\"key\":\"Y\"}}]}}\n", true, ETCD_PROTOCOL,
	     0},
	    {CREATED "{\"result\":{\"events\":[{\"kv\":5}]}}\n", true, ETCD_PROTOCOL, 0},
	    {CREATED "{\"result\":{\"events\":{}}}\n", true, ETCD_PROTOCOL, 0},
	    {CREATED "{\"result\":{\"header\":{\"revision\":\"x\"}}}\n", true, ETCD_PROTOCOL, 0},
	};
	for (size_t i = 0; i < N_ELEMS(cases); i++) {
		struct fake f = {.keep_open = cases[i].keep_open};
		struct wctx ctx = {.want = 100};
		fake_watch(&f, cases[i].stream, &ctx, cases[i].want);
		assert_int_equal(ctx.n, cases[i].events);
	}
	/* an error answer instead of a stream */
	struct fake f = {0};
	char *resp = http_answer(400, "{\"error\":\"bad watch\",\"code\":3}");
	fake_start(&f, resp);
	struct etcd_client *c = fake_client(&f, 0);
	struct wctx ctx = {.want = 1};
	assert_int_equal(etcd_watch(c, "a", 1, NULL, 0, 0, on_events, &ctx, NULL), ETCD_ERROR);
	assert_non_null(strstr(etcd_last_error(), "bad watch"));
	etcd_client_free(c);
	fake_stop(&f);
	free(resp);
}

/* Sockets in TIME_WAIT from or to port: one per connection closed. */
static int time_wait_count(int port)
{
	FILE *f = fopen("/proc/net/tcp", "r");
	assert_non_null(f);
	char line[512];
	int n = 0;
	while (fgets(line, sizeof line, f)) {
		unsigned lp, rp, st;
		if (sscanf(line, " %*d: %*x:%x %*x:%x %x", &lp, &rp, &st) == 3 && st == 6 &&
		    (lp == (unsigned)port || rp == (unsigned)port))
			n++;
	}
	fclose(f);
	return n;
}

static void test_keepalive(void **state)
{
	const char *eps[] = {g_etcd.endpoint};
	struct etcd_client *c = client_for(eps, 1, 0);
	struct etcd_range_result r;
	assert_int_equal(etcd_range(c, "/t/ka", 5, NULL, &r), ETCD_OK);
	int before = time_wait_count(g_etcd.client_port);
	for (int i = 0; i < 50; i++) {
		put_bin(c, "/t/ka", 5, "v", 1);
		assert_int_equal(etcd_range(c, "/t/ka", 5, NULL, &r), ETCD_OK);
		etcd_range_result_free(&r);
	}
	int after = time_wait_count(g_etcd.client_port);
	etcd_client_free(c);
	assert_true(after - before <= 2); /* not one connection per call */
}

static void test_watch_line_limit(void **state)
{
	size_t big = ((size_t)64 << 20) + 4096;
	struct buf s = BUF_INIT;
	assert_int_equal(buf_append_str(&s, CREATED "{\"result\":\""), 0);
	assert_int_equal(buf_reserve(&s, big), 0);
	memset(s.data + s.len, 'x', big);
	s.len += big;
	s.data[s.len] = '\0';
	struct fake f = {.keep_open = true};
	struct wctx ctx = {.want = 1};
	/* 64 MiB through a socket under the sanitizers, on a loaded 2-core CI
	 * machine, took more than the usual 5 s once */
	fake_watch_within(&f, s.data, &ctx, ETCD_PROTOCOL, 60000);
	assert_non_null(strstr(etcd_last_error(), "larger than"));
	buf_free(&s);
}

static void run_quiet(const char *dir, const char *cmd)
{
	struct buf b = BUF_INIT;
	assert_int_equal(buf_printf(&b, "cd '%s' && %s >/dev/null 2>&1", dir, cmd), 0);
	int rc = system(b.data);
	if (rc != 0)
		fprintf(stderr, "failed: %s\n", b.data);
	assert_int_equal(rc, 0);
	buf_free(&b);
}

/* A CA, and one certificate for 127.0.0.1 good for server and client. */
static void make_certs(const char *dir)
{
	run_quiet(dir, "printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth,"
		       "clientAuth\\n' > ext.cnf");
	run_quiet(dir, "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
		       "-keyout ca.key -out ca.crt -days 2 -subj /CN=test-ca");
	run_quiet(dir, "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
		       "-keyout node.key -out node.csr -subj /CN=127.0.0.1");
	run_quiet(dir, "openssl x509 -req -in node.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
		       "-out node.crt -days 2 -extfile ext.cnf");
}

static enum etcd_err tls_range(const char *ep, const char *ca, const char *crt, const char *key)
{
	const char *eps[] = {ep};
	struct etcd_config cfg = {
	    .endpoints = eps, .nendpoints = 1, .ca_file = ca, .cert_file = crt, .key_file = key};
	char *err = NULL;
	struct etcd_client *c = etcd_client_new(&cfg, &err);
	assert_non_null(c);
	struct etcd_range_result r;
	enum etcd_err e = etcd_range(c, "/t/tls", 6, NULL, &r);
	if (e == ETCD_OK) {
		assert_int_equal(r.n, 1);
		assert_string_equal(r.kvs[0].value, "secure");
	}
	etcd_range_result_free(&r);
	etcd_client_free(c);
	return e;
}

static void test_tls(void **state)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char dir[PATH_MAX], ca[PATH_MAX + 16], crt[PATH_MAX + 16], key[PATH_MAX + 16];
	snprintf(dir, sizeof dir, "%s/etcd-tls-XXXXXX", tmp);
	assert_non_null(mkdtemp(dir));
	make_certs(dir);
	snprintf(ca, sizeof ca, "%s/ca.crt", dir);
	snprintf(crt, sizeof crt, "%s/node.crt", dir);
	snprintf(key, sizeof key, "%s/node.key", dir);
	struct etcd_proc tp;
	assert_int_equal(etcd_proc_start_tls(&tp, ca, crt, key), 0);
	assert_int_equal(strncmp(tp.endpoint, "https://", 8), 0);
	const char *eps[] = {tp.endpoint};
	struct etcd_config cfg = {
	    .endpoints = eps, .nendpoints = 1, .ca_file = ca, .cert_file = crt, .key_file = key};
	char *err = NULL;
	struct etcd_client *c = etcd_client_new(&cfg, &err);
	assert_non_null(c);
	put_bin(c, "/t/tls", 6, "secure", 6);
	etcd_client_free(c);
	assert_int_equal(tls_range(tp.endpoint, ca, crt, key), ETCD_OK);
	assert_int_equal(tls_range(tp.endpoint, ca, NULL, NULL), ETCD_UNAVAILABLE); /* no cert */
	assert_int_equal(tls_range(tp.endpoint, NULL, crt, key), ETCD_UNAVAILABLE); /* unknown CA */
	etcd_proc_stop(&tp);
	run_quiet(dir, "rm -f ca.key ca.crt ca.srl node.key node.csr node.crt ext.cnf");
	assert_int_equal(rmdir(dir), 0);
}

static int group_setup(void **state)
{
	if (curl_global_init(CURL_GLOBAL_ALL) != CURLE_OK || etcd_proc_start(&g_etcd) < 0)
		return -1;
	const char *eps[] = {g_etcd.endpoint};
	struct etcd_config cfg = {.endpoints = eps, .nendpoints = 1};
	char *err = NULL;
	g_c = etcd_client_new(&cfg, &err);
	free(err);
	return g_c ? 0 : -1;
}

static int group_teardown(void **state)
{
	etcd_client_free(g_c);
	etcd_proc_stop(&g_etcd);
	curl_global_cleanup();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_prefix_end),
	    cmocka_unit_test(test_wire_size),
	    cmocka_unit_test(test_config_errors),
	    cmocka_unit_test(test_put_range),
	    cmocka_unit_test(test_prefix_range),
	    cmocka_unit_test(test_range_from),
	    cmocka_unit_test(test_keys_only),
	    cmocka_unit_test(test_count_only),
	    cmocka_unit_test(test_limit_more),
	    cmocka_unit_test(test_txn_cas),
	    cmocka_unit_test(test_txn_create_if_absent),
	    cmocka_unit_test(test_txn_value_missing),
	    cmocka_unit_test(test_txn_compare_range),
	    cmocka_unit_test(test_delete_range),
	    cmocka_unit_test(test_too_many_ops),
	    cmocka_unit_test(test_too_large),
	    cmocka_unit_test(test_binary),
	    cmocka_unit_test(test_status),
	    cmocka_unit_test(test_watch_events),
	    cmocka_unit_test(test_watch_stop),
	    cmocka_unit_test(test_watch_compacted),
	    cmocka_unit_test(test_failover),
	    cmocka_unit_test(test_concurrent),
	    cmocka_unit_test(test_no_fd_leak),
	    cmocka_unit_test(test_malformed_range),
	    cmocka_unit_test(test_odd_but_valid),
	    cmocka_unit_test(test_malformed_txn_status),
	    cmocka_unit_test(test_http_errors),
	    cmocka_unit_test(test_failover_rules),
	    cmocka_unit_test(test_watch_split_lines),
	    cmocka_unit_test(test_watch_fake_endings),
	    cmocka_unit_test(test_parse_without_connection),
	    cmocka_unit_test(test_keepalive),
	    cmocka_unit_test(test_watch_line_limit),
	    cmocka_unit_test(test_tls),
	    cmocka_unit_test(test_stopped_fast),
	    cmocka_unit_test(test_restart),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
