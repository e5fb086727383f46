/*
 * test_outbox.c - the queue of offline writes: durable across a restart,
 * in order, bounded with the oldest dropped first (and counted); and what
 * the sender does with each class of answer, against a small HTTP server in
 * the test that answers a scripted status per request: delivered, kept and
 * tried again after a pause (Retry-After honoured), or dropped and counted
 * by reason.  Sending through a real hub is covered end to end
 * (tests/e2e/test_offline.py, tests/e2e/test_metrics.py).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "cloud/upstream.h"

#include "metrics/metrics.h"
#include "proxy/outbox.h"
#include "proxy/outbox_internal.h"
#include "testutil.h"

static void test_bounded_and_durable(void **state)
{
	(void)state;
	char dir[4096];
	assert_int_equal(test_mkdtemp(dir, sizeof dir, "outbox"), 0);
	struct metrics m;
	assert_int_equal(metrics_init(&m), 0);
	struct upstream u;
	memset(&u, 0, sizeof u); /* no backend: nothing is ever sent */
	struct outbox *o = outbox_open(dir, &u, &m, 3);
	assert_non_null(o);
	for (int i = 0; i < 5; i++) {
		char body[64];
		snprintf(body, sizeof body, "{\"n\":%d}", i);
		assert_int_equal(
		    outbox_add(o, "/api/v1/namespaces/default/events", NULL, body, strlen(body)),
		    0);
	}
	assert_int_equal(outbox_pending(o), 3);
	assert_int_equal(atomic_load(&m.offline_events_queued), 5);
	assert_int_equal(atomic_load(&m.offline_events_dropped[OFFLINE_DROP_QUEUE_FULL]), 2);
	outbox_close(o);
	/* what survives a restart: the 3 newest, oldest first */
	o = outbox_open(dir, &u, &m, 3);
	assert_non_null(o);
	assert_int_equal(outbox_pending(o), 3);
	outbox_close(o);
	char *first = test_read_file(dir, "00000000000000000003");
	assert_non_null(first);
	assert_non_null(strstr(first, "{\\\"n\\\":2}"));
	assert_null(test_read_file(dir, "00000000000000000001"));
	free(first);
	metrics_free(&m);
	test_rm_rf(dir);
}

/* Found by fuzz/fuzz_outbox: a damaged record whose contentType held CR LF
 * was sent with header lines of its own; one whose uri held a space or a
 * control byte could never be sent and held up the queue behind it.  Such
 * records are dropped now, as every record that does not decode. */
static void test_record_must_stay_one_line(void **state)
{
	(void)state;
	static const char *const bad[] = {
	    "{\"uri\":\"/api/v1/namespaces/default/events\",\"contentType\":"
	    "\"application/json\\r\\nX-Evil: 1\",\"body\":\"{}\"}",
	    "{\"uri\":\"/api/v1/namespaces/default/events\\n\",\"contentType\":"
	    "\"application/json\",\"body\":\"{}\"}",
	    "{\"uri\":\"/api/v1/name spaces\",\"contentType\":\"application/json\",\"body\":\"\"}",
	    "{\"uri\":\"api/v1/events\",\"contentType\":\"application/json\",\"body\":\"\"}",
	    "{\"uri\":\"/api/v1/events\",\"contentType\":\"application/json\",\"body\":1}",
	};
	struct outbox_record r;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_equal(outbox_record_decode(bad[i], strlen(bad[i]), &r), -1);
		assert_null(r.uri);
	}
	const char ok[] = "{\"uri\":\"/api/v1/namespaces/default/events\",\"contentType\":"
			  "\"application/json;\\tcharset=utf-8\",\"body\":\"{\\\"a\\\":1}\"}";
	assert_int_equal(outbox_record_decode(ok, strlen(ok), &r), 0);
	assert_string_equal(r.uri, "/api/v1/namespaces/default/events");
	assert_string_equal(r.content_type, "application/json;\tcharset=utf-8");
	assert_int_equal(r.body_len, 7);
	assert_string_equal(r.body, "{\"a\":1}");
	outbox_record_free(&r);
}

/* ---- a scripted API server ---- */

#define SCRIPT_MAX 32
#define SEEN_MAX   64

/* One scripted answer: an HTTP status, or 0 to close the connection without
 * answering (the cloud not reached); retry_after >= 0 adds that header. */
struct answer {
	int status;
	int retry_after;
};

struct server {
	int fd, port;
	pthread_t thread;
	pthread_mutex_t lock;
	struct answer script[SCRIPT_MAX];
	size_t nscript, next; /* past the script: 201 */
	char *bodies[SEEN_MAX];
	double at[SEEN_MAX]; /* CLOCK_MONOTONIC seconds of each request */
	size_t nseen;
};

static double mono(void)
{
	struct timespec t;
	assert_int_equal(clock_gettime(CLOCK_MONOTONIC, &t), 0);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Read one request (headers, then Content-Length bytes); the body, malloc'ed,
 * or NULL when the peer went away. */
static char *read_request(int fd)
{
	char buf[16384];
	size_t len = 0;
	char *end = NULL;
	while (!end) {
		if (len + 1 >= sizeof buf)
			return NULL;
		ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);
		if (n <= 0)
			return NULL;
		len += (size_t)n;
		buf[len] = '\0';
		end = strstr(buf, "\r\n\r\n");
	}
	size_t want = 0;
	for (char *h = buf; h < end; h = strstr(h, "\r\n") + 2)
		if (!strncasecmp(h, "Content-Length:", 15))
			want = strtoul(h + 15, NULL, 10);
	size_t have = len - (size_t)(end + 4 - buf);
	char *body = malloc(want + 1);
	if (!body || want >= sizeof buf)
		return free(body), NULL;
	memcpy(body, end + 4, have < want ? have : want);
	while (have < want) {
		ssize_t n = read(fd, body + have, want - have);
		if (n <= 0)
			return free(body), NULL;
		have += (size_t)n;
	}
	body[want] = '\0';
	return body;
}

static void *server_main(void *arg)
{
	struct server *sv = arg;
	for (;;) {
		int c = accept(sv->fd, NULL, NULL);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return NULL; /* shut down */
		}
		char *body = read_request(c);
		struct answer a = {201, -1};
		pthread_mutex_lock(&sv->lock);
		if (body && sv->nseen < SEEN_MAX) {
			sv->at[sv->nseen] = mono();
			sv->bodies[sv->nseen++] = body;
			body = NULL;
		}
		if (sv->next < sv->nscript)
			a = sv->script[sv->next];
		sv->next++;
		pthread_mutex_unlock(&sv->lock);
		free(body);
		if (a.status) {
			char resp[256];
			char ra[48] = "";
			if (a.retry_after >= 0)
				snprintf(ra, sizeof ra, "Retry-After: %d\r\n", a.retry_after);
			int n =
			    snprintf(resp, sizeof resp,
				     "HTTP/1.1 %d Scripted\r\nContent-Type: application/json\r\n"
				     "Content-Length: 2\r\nConnection: close\r\n%s\r\n{}",
				     a.status, ra);
			if (write(c, resp, (size_t)n) != n) {
				/* the client went away: nothing to do */
			}
		}
		close(c);
	}
}

static void server_start(struct server *sv, const struct answer *script, size_t n)
{
	memset(sv, 0, sizeof *sv);
	assert_true(n <= SCRIPT_MAX);
	if (n)
		memcpy(sv->script, script, n * sizeof *script);
	sv->nscript = n;
	assert_int_equal(pthread_mutex_init(&sv->lock, NULL), 0);
	sv->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(sv->fd >= 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	assert_int_equal(bind(sv->fd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(listen(sv->fd, 16), 0);
	assert_int_equal(getsockname(sv->fd, (struct sockaddr *)&a, &al), 0);
	sv->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&sv->thread, NULL, server_main, sv), 0);
}

static void server_stop(struct server *sv)
{
	assert_int_equal(shutdown(sv->fd, SHUT_RDWR), 0); /* wakes accept() */
	assert_int_equal(pthread_join(sv->thread, NULL), 0);
	assert_int_equal(close(sv->fd), 0);
	for (size_t i = 0; i < sv->nseen; i++)
		free(sv->bodies[i]);
	pthread_mutex_destroy(&sv->lock);
}

static size_t server_seen(struct server *sv)
{
	pthread_mutex_lock(&sv->lock);
	size_t n = sv->nseen;
	pthread_mutex_unlock(&sv->lock);
	return n;
}

/* A hub's parts around the outbox: the metrics, an upstream whose only
 * server is sv (marked healthy: no health checker runs here), a queue in a
 * fresh directory, its sender started with short pauses. */
struct rig {
	char dir[4096];
	struct metrics m;
	struct upstream u;
	struct outbox *o;
	struct server sv;
};

static void rig_start(struct rig *r, const struct answer *script, size_t n, unsigned first_ms,
		      unsigned max_ms)
{
	server_start(&r->sv, script, n);
	assert_int_equal(test_mkdtemp(r->dir, sizeof r->dir, "outbox"), 0);
	assert_int_equal(metrics_init(&r->m), 0);
	struct config c;
	config_init(&c);
	char url[64];
	snprintf(url, sizeof url, "http://127.0.0.1:%d", r->sv.port);
	assert_int_equal(strlist_split(&c.server_addr, url), 0);
	char *err = NULL;
	int rc = upstream_init(&r->u, &c, &err);
	config_free(&c);
	if (rc != 0)
		fail_msg("upstream_init: %s", err ? err : "?");
	atomic_store(&r->u.backends[0].healthy, 1);
	r->o = outbox_open(r->dir, &r->u, &r->m, 100);
	assert_non_null(r->o);
	outbox_set_backoff(r->o, first_ms, max_ms);
}

static void rig_stop(struct rig *r)
{
	outbox_close(r->o);
	upstream_free(&r->u);
	server_stop(&r->sv);
	metrics_free(&r->m);
	test_rm_rf(r->dir);
}

static void add_event(struct rig *r, const char *name)
{
	char body[128];
	snprintf(body, sizeof body, "{\"metadata\":{\"name\":\"%s\"}}", name);
	assert_int_equal(
	    outbox_add(r->o, "/api/v1/namespaces/default/events", NULL, body, strlen(body)), 0);
}

/* Poll until the queue is empty; false after 20 s. */
static bool drained(struct rig *r)
{
	double deadline = mono() + 20;
	while (mono() < deadline) {
		if (outbox_pending(r->o) == 0)
			return true;
		struct timespec ts = {0, 10 * 1000000L};
		nanosleep(&ts, NULL);
	}
	return false;
}

static uint64_t dropped(struct rig *r, enum offline_drop why)
{
	return atomic_load(&r->m.offline_events_dropped[why]);
}

static uint64_t dropped_total(struct rig *r)
{
	uint64_t n = 0;
	for (int i = 0; i < OFFLINE_DROP_N; i++)
		n += dropped(r, i);
	return n;
}

static void test_classify(void **state)
{
	(void)state;
	static const struct {
		long code;
		enum outbox_verdict v;
		enum offline_drop why;
	} cases[] = {
	    {200, OUTBOX_DELIVERED, 0},
	    {201, OUTBOX_DELIVERED, 0},
	    {202, OUTBOX_DELIVERED, 0},
	    {409, OUTBOX_DELIVERED, 0},
	    {0, OUTBOX_RETRY, 0},
	    {401, OUTBOX_RETRY, 0},
	    {403, OUTBOX_RETRY, 0},
	    {408, OUTBOX_RETRY, 0},
	    {429, OUTBOX_RETRY, 0},
	    {500, OUTBOX_RETRY, 0},
	    {502, OUTBOX_RETRY, 0},
	    {503, OUTBOX_RETRY, 0},
	    {504, OUTBOX_RETRY, 0},
	    {400, OUTBOX_DROP, OFFLINE_DROP_INVALID},
	    {413, OUTBOX_DROP, OFFLINE_DROP_INVALID},
	    {415, OUTBOX_DROP, OFFLINE_DROP_INVALID},
	    {422, OUTBOX_DROP, OFFLINE_DROP_INVALID},
	    {404, OUTBOX_DROP, OFFLINE_DROP_NOT_FOUND},
	    {405, OUTBOX_DROP, OFFLINE_DROP_REFUSED},
	    {410, OUTBOX_DROP, OFFLINE_DROP_REFUSED},
	    {301, OUTBOX_DROP, OFFLINE_DROP_REFUSED},
	    {100, OUTBOX_DROP, OFFLINE_DROP_REFUSED},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		enum offline_drop why = OFFLINE_DROP_N;
		enum outbox_verdict v = outbox_classify(cases[i].code, &why);
		if (v != cases[i].v || (v == OUTBOX_DROP && why != cases[i].why))
			fail_msg("HTTP %ld: verdict %d reason %d, want %d reason %d", cases[i].code,
				 v, why, cases[i].v, cases[i].why);
	}
}

/* Issue 11: a 429, or a 401/403 while credentials rotate, lost the Event for
 * good.  Each status that can pass later is now kept and sent again, in
 * order, with nothing dropped; a 409 counts as delivered. */
static void test_retry_until_delivered(void **state)
{
	(void)state;
	static const int retried[] = {429, 401, 403, 408, 500, 503, 0};
	for (size_t i = 0; i < sizeof retried / sizeof retried[0]; i++) {
		/* A is refused twice, then taken; B comes after it */
		const struct answer script[] = {{retried[i], -1}, {retried[i], -1}, {201, -1}};
		struct rig r;
		rig_start(&r, script, 3, 20, 200);
		assert_int_equal(outbox_start(r.o), 0);
		add_event(&r, "a");
		add_event(&r, "b");
		if (!drained(&r))
			fail_msg("HTTP %d: the queue did not drain", retried[i]);
		assert_int_equal(server_seen(&r.sv), 4);
		for (size_t k = 0; k < 3; k++)
			assert_non_null(strstr(r.sv.bodies[k], "\"a\""));
		assert_non_null(strstr(r.sv.bodies[3], "\"b\""));
		assert_int_equal(atomic_load(&r.m.offline_events_sent), 2);
		assert_int_equal(dropped_total(&r), 0);
		rig_stop(&r);
	}
	const struct answer conflict[] = {{409, -1}};
	struct rig r;
	rig_start(&r, conflict, 1, 20, 200);
	assert_int_equal(outbox_start(r.o), 0);
	add_event(&r, "a");
	assert_true(drained(&r));
	assert_int_equal(server_seen(&r.sv), 1);
	assert_int_equal(atomic_load(&r.m.offline_events_sent), 1);
	assert_int_equal(dropped_total(&r), 0);
	rig_stop(&r);
}

/* The statuses that never pass: the record goes at once, counted by reason,
 * and the next one is sent. */
static void test_drop_what_never_passes(void **state)
{
	(void)state;
	static const struct {
		int status;
		enum offline_drop why;
	} cases[] = {
	    {400, OFFLINE_DROP_INVALID}, {413, OFFLINE_DROP_INVALID},	{415, OFFLINE_DROP_INVALID},
	    {422, OFFLINE_DROP_INVALID}, {404, OFFLINE_DROP_NOT_FOUND}, {405, OFFLINE_DROP_REFUSED},
	    {410, OFFLINE_DROP_REFUSED},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct answer script[] = {{cases[i].status, -1}, {201, -1}};
		struct rig r;
		rig_start(&r, script, 2, 20, 200);
		assert_int_equal(outbox_start(r.o), 0);
		add_event(&r, "a");
		add_event(&r, "b");
		if (!drained(&r))
			fail_msg("HTTP %d: the queue did not drain", cases[i].status);
		assert_int_equal(server_seen(&r.sv), 2); /* a once, then b */
		assert_non_null(strstr(r.sv.bodies[0], "\"a\""));
		assert_non_null(strstr(r.sv.bodies[1], "\"b\""));
		assert_int_equal(dropped(&r, cases[i].why), 1);
		assert_int_equal(dropped_total(&r), 1);
		assert_int_equal(atomic_load(&r.m.offline_events_sent), 1);
		rig_stop(&r);
	}
}

/* A record whose file is damaged is dropped as unreadable, not sent. */
static void test_drop_unreadable(void **state)
{
	(void)state;
	struct rig r;
	rig_start(&r, NULL, 0, 20, 200);
	assert_int_equal(test_write_file(r.dir, "00000000000000000007", "{\"uri\":1}"), 0);
	outbox_close(r.o);
	r.o = outbox_open(r.dir, &r.u, &r.m, 100);
	assert_non_null(r.o);
	add_event(&r, "b");
	assert_int_equal(outbox_start(r.o), 0);
	assert_true(drained(&r));
	assert_int_equal(server_seen(&r.sv), 1);
	assert_non_null(strstr(r.sv.bodies[0], "\"b\""));
	assert_int_equal(dropped(&r, OFFLINE_DROP_UNREADABLE), 1);
	assert_int_equal(dropped_total(&r), 1);
	rig_stop(&r);
}

/* The pauses: they grow (first 150 ms, then 300 ms), a Retry-After longer
 * than the pause wins, and an Event added meanwhile does not jump the
 * queue or cut the pause short.  Only lower bounds are checked, so a slow
 * machine cannot fail it. */
static void test_backoff_and_retry_after(void **state)
{
	(void)state;
	const struct answer script[] = {{503, -1}, {503, -1}, {429, 1}, {201, -1}};
	struct rig r;
	rig_start(&r, script, 4, 150, 10000);
	add_event(&r, "a");
	assert_int_equal(outbox_start(r.o), 0);
	double deadline = mono() + 10;
	while (server_seen(&r.sv) < 1 && mono() < deadline) {
		struct timespec ts = {0, 5 * 1000000L};
		nanosleep(&ts, NULL);
	}
	add_event(&r, "b"); /* wakes the sender, which must still wait */
	assert_true(drained(&r));
	assert_int_equal(server_seen(&r.sv), 5);
	double *at = r.sv.at;
	if (at[1] - at[0] < 0.15 || at[2] - at[1] < 0.30 || at[3] - at[2] < 1.0)
		fail_msg("pauses %.3f %.3f %.3f s, want at least 0.15 0.30 1.0", at[1] - at[0],
			 at[2] - at[1], at[3] - at[2]);
	for (size_t k = 0; k < 4; k++)
		assert_non_null(strstr(r.sv.bodies[k], "\"a\""));
	assert_non_null(strstr(r.sv.bodies[4], "\"b\""));
	assert_int_equal(dropped_total(&r), 0);
	rig_stop(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bounded_and_durable),
	    cmocka_unit_test(test_record_must_stay_one_line),
	    cmocka_unit_test(test_classify),
	    cmocka_unit_test(test_retry_until_delivered),
	    cmocka_unit_test(test_drop_what_never_passes),
	    cmocka_unit_test(test_drop_unreadable),
	    cmocka_unit_test(test_backoff_and_retry_after),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
