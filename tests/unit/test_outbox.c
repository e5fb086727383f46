/*
 * test_outbox.c - the queue of offline writes: durable across a restart,
 * in order, bounded with the oldest dropped first (and counted).  Sending
 * is covered end to end (tests/e2e/test_offline.py).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	assert_int_equal(atomic_load(&m.offline_events_dropped), 2);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bounded_and_durable),
	    cmocka_unit_test(test_record_must_stay_one_line),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
