/*
 * test_etcd_abandoned.c - a list the etcd store did not finish: the hub
 * killed (-9) in the middle of a view's first list, another node's hub gone
 * for good, a list aborted, etcd gone mid-list.  `verify` names the replace
 * in progress instead of reporting its holdings as damage, and the
 * recovery (this node's hub at its next start or when etcd is back, any
 * hub of the pool for a dead node's after the stated time) rolls it back:
 * 0 problems, no stray holding, and nothing committed before is lost.
 * One real etcd serves the file; each test has its own --etcd-prefix.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etcd_check.h"
#include "etcd_proc.h"
#include "storage/etcd.h"
#include "testutil.h"

static struct etcd_proc proc;
static struct etcd_client *raw;
static int seq;

struct fx {
	char prefix[64];
	char side[80];	 /* "/yurthub" + prefix */
	struct store *a; /* node-a */
};

static struct store *open_node(const char *prefix, const char *node)
{
	const char *eps[] = {proc.endpoint};
	struct etcd_store_config cfg = {eps, 1, NULL, NULL, NULL, prefix, node, 3000};
	char *err = NULL;
	struct store *s = etcd_store_open(&cfg, &err);
	if (!s)
		fprintf(stderr, "open: %s\n", err ? err : "?");
	free(err);
	return s;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	snprintf(f->prefix, sizeof f->prefix, "/ab%d/registry", ++seq);
	snprintf(f->side, sizeof f->side, "/yurthub%s", f->prefix);
	f->a = open_node(f->prefix, "node-a");
	*state = f;
	return f->a ? 0 : -1;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	store_close(f->a);
	free(f);
	return 0;
}

/* verify's problems, and its whole report in *report (caller frees). */
static int verify(struct store *s, char **report)
{
	struct buf b = BUF_INIT;
	buf_append_str(&b, "");
	int n = check_records(s, &b);
	*report = buf_steal(&b);
	return n;
}

static long count_under(const struct fx *f, const char *what)
{
	char p[160];
	snprintf(p, sizeof p, "%s%s", f->side, what);
	return check_count(raw, p);
}

/* Add pods "<ns>/<name_fmt % i>" at rv for i in [from, to). */
static enum store_err add_pods(struct store_replace *r, const char *ns, const char *name_fmt,
			       int from, int to, uint64_t rv)
{
	enum store_err e = STORE_OK;
	for (int i = from; i < to && e == STORE_OK; i++) {
		char name[32];
		snprintf(name, sizeof name, name_fmt, i);
		char *j = test_pod_json(ns, name, rv, "n1", 400);
		struct store_item it = {ns, name, rv, j, strlen(j)};
		e = store_replace_add(r, &it);
		free(j);
	}
	return e;
}

/* A whole list of comp's view of pods (all namespaces): ns/<fmt % i>. */
static void list_pods(struct store *s, const char *comp, const char *ns, const char *fmt, int n,
		      uint64_t rv)
{
	struct store_view v = {comp, {"", "v1", "pods"}, "", "", ""};
	struct store_replace *r;
	assert_int_equal(store_replace_begin(s, &v, &r), STORE_OK);
	assert_int_equal(add_pods(r, ns, fmt, 0, n, rv), STORE_OK);
	assert_int_equal(store_replace_commit(r, rv), STORE_OK);
}

static int add_name(void *ctx, const struct store_key *k, const char *data, size_t len)
{
	(void)data;
	(void)len;
	struct buf *b = ctx;
	buf_printf(b, "%s%s/%s", b->len ? " " : "", k->namespace, k->name);
	return 0;
}

static long listed_count(struct store *s, const char *comp)
{
	struct store_key_info info = {comp, "", "v1", "pods", "", ""};
	struct store_key root;
	assert_int_equal(store_key_build(s, &info, &root), STORE_OK);
	struct buf b = BUF_INIT;
	buf_append_str(&b, "");
	enum store_err e = store_list(s, &root, add_name, &b);
	store_key_free(&root);
	long n = 0;
	for (const char *p = b.data; e == STORE_OK && *p; p++)
		n += *p == '/';
	buf_free(&b);
	return e == STORE_OK ? n : -1;
}

/* A hub of node that starts comp's list of every pod (n of them, ns/q%03d,
 * some shared with what others hold: ns/p%03d for i < shared) and is
 * killed (-9) once it has handed all of them to its writers. */
static void hub_killed_mid_list(const char *prefix, const char *node, const char *comp, int n,
				int shared)
{
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		struct store *s = open_node(prefix, node);
		struct store_view v = {comp, {"", "v1", "pods"}, "", "", ""};
		struct store_replace *r;
		if (!s || store_replace_begin(s, &v, &r) != STORE_OK ||
		    add_pods(r, "a", "p%03d", 0, shared, 7) != STORE_OK ||
		    add_pods(r, "a", "q%03d", 0, n, 7) != STORE_OK)
			_exit(2);
		if (write(fds[1], "x", 1) != 1)
			_exit(3);
		for (;;)
			pause(); /* the rest of the list never comes */
	}
	close(fds[1]);
	char c;
	ssize_t got = read(fds[0], &c, 1);
	close(fds[0]);
	assert_int_equal(kill(pid, SIGKILL), 0);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(got, 1); /* the child reached the middle of its list */
}

/* The hub is killed during a component's first list: verify names the
 * replace in progress (no problem), the hub's next start rolls it back, and
 * what another component had committed stays. */
static void test_hub_killed_in_first_list(void **state)
{
	struct fx *f = *state;
	list_pods(f->a, "kubelet", "a", "p%03d", 30, 5);
	hub_killed_mid_list(f->prefix, "node-a", "coredns", 300, 30);
	long stray = count_under(f, "/h/node-a/coredns/");
	printf("holdings the killed list left: %ld\n", stray);
	assert_true(stray >= 40); /* at least one step was written */

	/* the hub starts again: a new instance of the same node */
	struct store *b = open_node(f->prefix, "node-a");
	assert_non_null(b);
	char *report;
	int problems = verify(b, &report);
	printf("%s", report);
	assert_int_equal(problems, 0);
	assert_non_null(strstr(report, "replace in progress by node node-a since "));
	assert_non_null(strstr(report, "component coredns"));
	free(report);

	assert_int_equal(etcd_store_recover(b, 600), 1);
	problems = verify(b, &report);
	assert_int_equal(problems, 0);
	assert_null(strstr(report, "replace in progress"));
	free(report);
	assert_int_equal(count_under(f, "/h/node-a/coredns/"), 0);
	assert_int_equal(count_under(f, "/r/"), 0);
	/* nothing committed was lost: kubelet's 30 pods, theirs alone */
	assert_int_equal(listed_count(b, "kubelet"), 30);
	char p[128];
	snprintf(p, sizeof p, "%s/pods/a/", f->prefix);
	assert_int_equal(check_count(raw, p), 30);
	/* no tombstone is left either: the same list, at the same
	 * resourceVersion, is whole when it comes again */
	list_pods(b, "coredns", "a", "q%03d", 300, 7);
	assert_int_equal(listed_count(b, "coredns"), 300);
	problems = verify(b, &report);
	assert_int_equal(problems, 0);
	free(report);
	store_close(b);
}

/* A relist of a view that exists, killed: its holdings are the view's
 * membership, nothing is rolled back, nothing listed before is lost. */
static void test_hub_killed_in_relist(void **state)
{
	struct fx *f = *state;
	list_pods(f->a, "coredns", "a", "p%03d", 100, 5);
	hub_killed_mid_list(f->prefix, "node-a", "coredns", 300, 100);
	struct store *b = open_node(f->prefix, "node-a");
	assert_non_null(b);
	char *report;
	assert_int_equal(verify(b, &report), 0);
	free(report);
	assert_int_equal(etcd_store_recover(b, 600), 1);
	assert_int_equal(verify(b, &report), 0);
	assert_null(strstr(report, "replace in progress"));
	free(report);
	assert_true(listed_count(b, "coredns") >= 100);
	assert_int_equal(count_under(f, "/r/"), 0);
	store_close(b);
}

/* Another node's hub dies in a list and never comes back: any hub of the
 * pool rolls its list back once the record is older than the stated time,
 * and the objects it shared with others stay theirs. */
static void test_dead_nodes_list_rolled_back_by_another_hub(void **state)
{
	struct fx *f = *state;
	list_pods(f->a, "kubelet", "a", "p%03d", 30, 5);
	hub_killed_mid_list(f->prefix, "node-b", "coredns", 300, 30);
	char *report;
	assert_int_equal(verify(f->a, &report), 0);
	assert_non_null(strstr(report, "replace in progress by node node-b since "));
	free(report);
	/* refreshed moments ago: not yet abandoned for another node */
	assert_int_equal(etcd_store_recover(f->a, 600), 0);
	assert_int_equal(count_under(f, "/r/"), 1);
	/* the stated time has passed */
	assert_int_equal(etcd_store_recover(f->a, 0), 1);
	assert_int_equal(verify(f->a, &report), 0);
	assert_null(strstr(report, "replace in progress"));
	free(report);
	assert_int_equal(count_under(f, "/h/node-b/"), 0);
	assert_int_equal(count_under(f, "/r/"), 0);
	assert_int_equal(listed_count(f->a, "kubelet"), 30);
	char p[128];
	snprintf(p, sizeof p, "%s/pods/a/", f->prefix);
	assert_int_equal(check_count(raw, p), 30);
}

/* A list the hub aborts (the cloud's stream broke) rolls itself back. */
static void test_aborted_list_rolls_itself_back(void **state)
{
	struct fx *f = *state;
	struct store_view v = {"coredns", {"", "v1", "pods"}, "", "", ""};
	struct store_replace *r;
	assert_int_equal(store_replace_begin(f->a, &v, &r), STORE_OK);
	assert_int_equal(add_pods(r, "a", "q%03d", 0, 200, 7), STORE_OK);
	store_replace_abort(r);
	char *report;
	assert_int_equal(verify(f->a, &report), 0);
	assert_null(strstr(report, "replace in progress"));
	free(report);
	assert_int_equal(count_under(f, "/h/node-a/coredns/"), 0);
	assert_int_equal(count_under(f, "/r/"), 0);
}

/* etcd goes away in the middle of a first list: the record stays, verify
 * names it, and the next recovery after etcd is back rolls it back. */
static void test_etcd_gone_mid_list(void **state)
{
	struct fx *f = *state;
	struct store_view v = {"coredns", {"", "v1", "pods"}, "", "", ""};
	struct store_replace *r;
	assert_int_equal(store_replace_begin(f->a, &v, &r), STORE_OK);
	assert_int_equal(add_pods(r, "a", "q%03d", 0, 200, 7), STORE_OK);
	etcd_proc_halt(&proc);
	enum store_err e = add_pods(r, "a", "r%03d", 0, 200, 7);
	assert_int_not_equal(e, STORE_OK);
	store_replace_abort(r); /* its rollback fails: etcd is away */
	assert_int_equal(etcd_proc_restart(&proc), 0);
	char *report;
	assert_int_equal(verify(f->a, &report), 0);
	assert_non_null(strstr(report, "replace in progress by node node-a since "));
	free(report);
	assert_int_equal(etcd_store_recover(f->a, 600), 1);
	assert_int_equal(verify(f->a, &report), 0);
	assert_null(strstr(report, "replace in progress"));
	free(report);
	assert_int_equal(count_under(f, "/h/node-a/coredns/"), 0);
}

/* A replace in flight in this process is never rolled back under it. */
static void test_live_replace_is_not_abandoned(void **state)
{
	struct fx *f = *state;
	struct store_view v = {"coredns", {"", "v1", "pods"}, "", "", ""};
	struct store_replace *r;
	assert_int_equal(store_replace_begin(f->a, &v, &r), STORE_OK);
	assert_int_equal(add_pods(r, "a", "q%03d", 0, 200, 7), STORE_OK);
	assert_int_equal(etcd_store_recover(f->a, 0), 0);
	assert_int_equal(store_replace_commit(r, 7), STORE_OK);
	assert_int_equal(listed_count(f->a, "coredns"), 200);
	assert_int_equal(count_under(f, "/r/"), 0);
	char *report;
	assert_int_equal(verify(f->a, &report), 0);
	free(report);
}

static int group_setup(void **state)
{
	(void)state;
	if (etcd_proc_start(&proc) < 0)
		return -1;
	raw = check_client(proc.endpoint);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	etcd_client_free(raw);
	etcd_proc_stop(&proc);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_hub_killed_in_first_list, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hub_killed_in_relist, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dead_nodes_list_rolled_back_by_another_hub, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_aborted_list_rolls_itself_back, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_etcd_gone_mid_list, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_live_replace_is_not_abandoned, setup, teardown),
	};
	return cmocka_run_group_tests_name("etcd store: abandoned replaces", tests, group_setup,
					   group_teardown);
}
