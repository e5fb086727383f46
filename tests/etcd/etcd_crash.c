/*
 * etcd_crash.c - SIGKILL a writer of the etcd store at random instants and
 * check that etcd converges.
 *
 * Each round forks a writer that relists two components' views of a set of
 * pods (random subsets, growing resourceVersions, some lists larger than one
 * Txn) and applies single updates and deletes, without end.  The parent
 * kills it after a random delay, then plays the restarted hub: it opens the
 * store, checks that `verify` finds no problem (a list the kill cut short is
 * a replace in progress, named apart), rolls back what the kill abandoned
 * (etcd_store_recover, as the hub's start does) and checks that nothing of
 * it is left, then relists each view with a known final set, and checks that etcd
 * holds exactly those objects and that every ownership record is consistent
 * (no orphans).  Before relisting, it checks that an iteration with a field
 * selector, which goes by the summaries in the S/m records, selects what
 * reading every object selects: a pod's node changes with its rv, so a
 * summary left behind by a copy it does not describe would show.  Prints
 * "RESULT: N passed, M failed" for the test runner.
 *
 * usage: etcd_crash [rounds] [seed]     (defaults: 60, time-based)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "etcd_check.h"
#include "etcd_proc.h"
#include "storage/etcd.h"
#include "testutil.h"

#define N_PODS 300
#define PREFIX "/crash/registry"

static struct etcd_proc proc;
static const char *const components[] = {"kubelet", "coredns"};

static struct store *open_store(void)
{
	const char *eps[] = {proc.endpoint};
	struct etcd_store_config cfg = {eps, 1, NULL, NULL, NULL, PREFIX, "node-a", 5000};
	char *err = NULL;
	struct store *s = etcd_store_open(&cfg, &err);
	if (!s)
		fprintf(stderr, "open: %s\n", err ? err : "?");
	free(err);
	return s;
}

/* Replace component's view of all pods with the pods whose bit is set. */
/* A pod's node, which moves with its copies. */
static const char *node_of(uint64_t rv)
{
	return rv % 3 ? "n1" : "n2";
}

/* The names of comp's pods on node n2, with the matching iteration
 * (summaries) or the plain one (every object); NULL on an error. */
static char *on_n2(struct store *s, const char *comp, bool matching)
{
	char *names = NULL;
	enum store_err e = test_iterate_selected(s, comp, "pods", "", "", "spec.nodeName=n2",
						 matching, &names, NULL, NULL);

	if (e != STORE_OK && e != STORE_NOT_FOUND) { /* never listed: none */
		free(names);
		return NULL;
	}
	return names;
}

/* Do the summaries select what the objects say, for both components? */
static bool summaries_agree(struct store *s)
{
	bool same = true;

	for (int c = 0; c < 2 && same; c++) {
		char *plain = on_n2(s, components[c], false);
		char *matching = on_n2(s, components[c], true);
		same = plain && matching && !strcmp(plain, matching);
		if (!same)
			printf("%s on n2: every object says \"%s\", the summaries \"%s\"\n",
			       components[c], plain ? plain : "(error)",
			       matching ? matching : "(error)");
		free(plain);
		free(matching);
	}
	return same;
}

static enum store_err relist(struct store *s, const char *comp, const unsigned char *set,
			     uint64_t rv)
{
	struct store_view v = {comp, {"", "v1", "pods"}, "", "", ""};
	struct store_replace *r;
	enum store_err e = store_replace_begin(s, &v, &r);
	for (int i = 0; i < N_PODS && e == STORE_OK; i++) {
		if (!set[i])
			continue;
		char name[16];
		snprintf(name, sizeof name, "p%03d", i);
		char *j = test_pod_json("ns", name, rv, node_of(rv), 1500);
		struct store_item it = {"ns", name, rv, j, strlen(j)};
		e = store_replace_add(r, &it);
		free(j);
	}
	if (e != STORE_OK) {
		store_replace_abort(r);
		return e;
	}
	return store_replace_commit(r, rv);
}

static void writer(unsigned seed, uint64_t rv_base)
{
	struct store *s = open_store();
	if (!s)
		_exit(2);
	uint64_t rv = rv_base;
	unsigned char set[N_PODS];
	for (;;) {
		const char *comp = components[rand_r(&seed) % 2];
		int density = 20 + rand_r(&seed) % 80;
		for (int i = 0; i < N_PODS; i++)
			set[i] = rand_r(&seed) % 100 < density;
		relist(s, comp, set, ++rv);
		for (int k = 0; k < 10; k++) {
			char name[16];
			snprintf(name, sizeof name, "p%03d", rand_r(&seed) % N_PODS);
			struct store_key_info info = {comp, "", "v1", "pods", "ns", name};
			struct store_key key;
			if (store_key_build(s, &info, &key) != STORE_OK)
				continue;
			if (rand_r(&seed) % 3 == 0) {
				store_delete(s, &key);
			} else {
				++rv;
				char *j = test_pod_json("ns", name, rv, node_of(rv), 1500);
				if (store_update(s, &key, j, strlen(j), rv, NULL) ==
				    STORE_NOT_FOUND)
					store_create(s, &key, j, strlen(j));
				free(j);
			}
			store_key_free(&key);
		}
	}
}

/* "ns/pNNN ..." of the union of the sets */
static char *expected(unsigned char sets[2][N_PODS])
{
	struct buf b = BUF_INIT;
	buf_append_str(&b, "");
	for (int i = 0; i < N_PODS; i++)
		if (sets[0][i] || sets[1][i])
			buf_printf(&b, "%sns/p%03d", b.len ? " " : "", i);
	return buf_steal(&b);
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 60;
	unsigned seed = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : (unsigned)time(NULL);
	printf("etcd crash test: %d rounds, seed %u\n", rounds, seed);
	fflush(stdout);
	if (etcd_proc_start(&proc) < 0)
		return 1;
	struct etcd_client *raw = check_client(proc.endpoint);
	int passed = 0, failed = 0;
	long killed_busy = 0, abandoned = 0;
	for (int round = 1; round <= rounds; round++) {
		uint64_t base = (uint64_t)round * 1000000;
		pid_t pid = fork();
		if (pid == 0)
			writer(seed + (unsigned)round, base);
		long delay = 20 + rand_r(&seed) % 400;
		struct timespec ts = {delay / 1000, (delay % 1000) * 1000000L};
		nanosleep(&ts, NULL);
		kill(pid, SIGKILL);
		int status;
		waitpid(pid, &status, 0);
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
			killed_busy++;

		/* the hub restarts, recovers and relists */
		long t0 = now_ms();
		struct store *s = open_store();
		struct buf before = BUF_INIT;
		int killed_problems = s ? check_records(s, &before) : 1;
		long recovered = s ? etcd_store_recover(s, 600) : -1;
		struct buf after = BUF_INIT;
		int recovered_problems = recovered >= 0 ? check_records(s, &after) : 1;
		bool settled = killed_problems == 0 && recovered_problems == 0 &&
			       !strstr(buf_cstr(&after), "replace in progress");
		if (!settled)
			printf("round %d: after the kill %d record problems, recovery %ld, then "
			       "%d:\n%s%s",
			       round, killed_problems, recovered, recovered_problems,
			       buf_cstr(&before), buf_cstr(&after));
		if (strstr(buf_cstr(&before), "replace in progress"))
			abandoned++;
		buf_free(&before);
		buf_free(&after);
		unsigned char sets[2][N_PODS];
		bool agree = s && summaries_agree(s);
		bool ok = s != NULL;
		for (int c = 0; c < 2 && ok; c++) {
			for (int i = 0; i < N_PODS; i++)
				sets[c][i] = rand_r(&seed) % 100 < 50;
			ok = relist(s, components[c], sets[c], base + 999999) == STORE_OK;
		}
		char *want = ok ? expected(sets) : NULL;
		char *got = check_keys(raw, PREFIX "/pods/", strlen(PREFIX "/pods/"));
		struct buf report = BUF_INIT;
		int problems = s ? check_records(s, &report) : 1;
		if (ok && agree && settled && !strcmp(want, got) && problems == 0) {
			passed++;
		} else {
			failed++;
			printf("round %d (killed after %ld ms): summaries %s, relist %s, %s, %d "
			       "record "
			       "problems\n%s",
			       round, delay, agree ? "agree" : "disagree", ok ? "ok" : "failed",
			       ok && !strcmp(want, got) ? "objects as listed" : "objects differ",
			       problems, buf_cstr(&report));
			if (getenv("CRASH_DEBUG") && ok)
				printf("want %s\ngot  %s\n", want, got);
		}
		if (round % 10 == 0)
			printf("round %d: converged in %ld ms\n", round, now_ms() - t0);
		buf_free(&report);
		free(want);
		free(got);
		store_close(s);
	}
	printf("%ld writers killed mid-work, %ld of them in a list of several Txns\n", killed_busy,
	       abandoned);
	printf("RESULT: %d passed, %d failed\n", passed, failed);
	etcd_client_free(raw);
	etcd_proc_stop(&proc);
	return failed ? 1 : 0;
}
