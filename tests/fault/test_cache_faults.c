/*
 * test_cache_faults.c - the cache manager over a disk store that fails.
 *
 * With the injector failing every write of the cache directory (EIO), a
 * list and a burst of watch events pass through the cache manager: each
 * failure is counted in the metrics (yurthub_cache_failures_total), nothing
 * is stored, and the log says so at the default verbosity - once per kind
 * of write, not once per event.  Once the fault is lifted, the next list is
 * stored and the log says the store writes again.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/manager.h"
#include "fault_util.h"
#include "storage/disk.h"
#include "testutil.h"
#include "util/log.h"

#define EVENTS 40

struct fx {
	char dir[4096], cache[4200], log[4200];
	struct store *s;
	struct metrics m;
	struct cache_manager *cm;
	int saved_stderr;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	*state = f;
	if (test_mkdtemp(f->dir, sizeof f->dir, "cachefault") < 0)
		return -1;
	snprintf(f->cache, sizeof f->cache, "%s/cache", f->dir);
	snprintf(f->log, sizeof f->log, "%s/log", f->dir);
	char *err = NULL;
	f->s = disk_store_open(f->cache, 0, NULL, &err);
	free(err);
	if (!f->s || metrics_init(&f->m) < 0)
		return -1;
	f->cm = cache_manager_new(f->s, &f->m, 2);
	/* the log (stderr) goes to a file the test reads */
	fflush(stderr);
	f->saved_stderr = dup(2);
	int fd = open(f->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || dup2(fd, 2) < 0)
		return -1;
	close(fd);
	log_set_verbosity(0);
	return f->cm ? 0 : -1;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	fault_clear();
	dup2(f->saved_stderr, 2);
	close(f->saved_stderr);
	cache_manager_free(f->cm);
	store_close(f->s);
	metrics_free(&f->m);
	test_rm_rf(f->dir);
	free(f);
	return 0;
}

static struct request_info ri_for(enum req_verb verb)
{
	struct request_info ri;
	memset(&ri, 0, sizeof ri);
	ri.is_resource = true;
	ri.verb = verb;
	ri.method = "GET";
	ri.path = "/api/v1/pods";
	ri.api_prefix = "api";
	ri.api_group = "";
	ri.api_version = "v1";
	ri.namespace = "";
	ri.resource = "pods";
	ri.subresource = "";
	ri.name = "";
	ri.label_selector = "";
	ri.field_selector = "";
	ri.resource_version = "";
	ri.resource_version_match = "";
	ri.continue_token = "";
	ri.timeout_seconds = -1;
	return ri;
}

static void list_through(struct fx *f, unsigned rv)
{
	struct buf b = BUF_INIT;
	buf_printf(&b,
		   "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{"
		   "\"resourceVersion\":\"%u\"},\"items\":[",
		   rv);
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof name, "p%d", i);
		char *p = test_pod_json("a", name, rv - 3 + (unsigned)i, "n1", 600);
		buf_printf(&b, "%s%s", i ? "," : "", p);
		free(p);
	}
	buf_append_str(&b, "]}");
	struct request_info ri = ri_for(VERB_LIST);
	struct cache_tee *t =
	    cache_tee_new(f->cm, CACHE_LIST, "kubelet", &ri, 200, "application/json", NULL);
	assert_non_null(t);
	cache_tee_feed(t, b.data, b.len);
	cache_tee_end(t, true);
	buf_free(&b);
	cache_manager_flush(f->cm);
}

static void events_through(struct fx *f, unsigned rv)
{
	struct request_info ri = ri_for(VERB_WATCH);
	struct cache_tee *t =
	    cache_tee_new(f->cm, CACHE_WATCH, "kubelet", &ri, 200, "application/json", NULL);
	assert_non_null(t);
	for (int i = 0; i < EVENTS; i++) {
		char name[16];
		snprintf(name, sizeof name, "w%d", i);
		char *p = test_pod_json("a", name, rv + (unsigned)i, "n1", 600);
		struct buf ev = BUF_INIT;
		buf_printf(&ev, "{\"type\":\"ADDED\",\"object\":%s}\n", p);
		cache_tee_feed(t, ev.data, ev.len);
		buf_free(&ev);
		free(p);
	}
	cache_tee_end(t, true);
	cache_manager_flush(f->cm);
}

static int count_lines(const char *text, const char *what)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, what)); p++)
		n++;
	return n;
}

static uint64_t failures(struct fx *f, enum cache_op op)
{
	return atomic_load(&f->m.cache_failures[op]);
}

static void test_failures_counted_and_logged_once(void **state)
{
	struct fx *f = *state;
	if (!fault_loaded()) {
		printf("SKIPPED: the fault injector could not be preloaded\n");
		skip();
	}
	assert_int_equal(
	    fault_set("open:*:EIO,write:*:EIO,mkdir:*:EIO,sync:*:EIO,rename:*:EIO", f->cache), 0);
	list_through(f, 10);
	events_through(f, 20);
	assert_true(fault_hits() > EVENTS);
	fault_clear();
	assert_int_equal(failures(f, CACHE_OP_LIST), 1);
	assert_int_equal(failures(f, CACHE_OP_WATCH_EVENT), EVENTS);
	assert_int_equal(atomic_load(&f->m.cache_writes[CACHE_OP_LIST]), 0);
	struct store_view v = {"kubelet", {"", "v1", "pods"}, "", "", ""};
	struct store_view_state st;
	assert_int_equal(store_get_view(f->s, &v, &st), STORE_NOT_FOUND);

	/* the fault is lifted: the next list is stored */
	list_through(f, 100);
	assert_int_equal(atomic_load(&f->m.cache_writes[CACHE_OP_LIST]), 1);
	assert_int_equal(store_get_view(f->s, &v, &st), STORE_OK);
	assert_int_equal(st.rv, 100);
	store_view_state_free(&st);

	fflush(stderr);
	char *log = test_read_file(f->dir, "log");
	assert_non_null(log);
	printf("the log at -v 0:\n%s", log);
	/* one warning for the list, one for the 40 events */
	int warned = count_lines(log, "cache: the store failed");
	if (warned != 2 || !strstr(log, "list /api/v1/pods of kubelet") ||
	    !strstr(log, "watch event /api/v1/pods of kubelet") ||
	    !strstr(log, "Input/output error") || !strstr(log, "the store writes again"))
		fail_msg("log at -v 0:\n%s", log);
	free(log);
}

int main(int argc, char **argv)
{
	(void)argc;
	if (!fault_preload(argv))
		printf("the fault injector is not loaded: its tests are skipped\n");
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_failures_counted_and_logged_once, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
