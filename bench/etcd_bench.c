/*
 * etcd_bench.c - the etcd store against raw etcd transactions, side by side
 * in one run on one etcd (started here, on 127.0.0.1, default limits).
 *
 *   replace   a view of N pods (2-3 KB each) replaced into an empty store
 *   raw       the same pods put straight to the gateway with the same client,
 *             in Txns of the same size (ER_BATCH objects, plain puts)
 *   relist    the same list replaced again, nothing changed
 *   update    single-object updates (one node, newer rv each time): p50/p99,
 *             beside a raw single put
 *   offline   a list of one node's pods (1 in 100 here) with a field
 *             selector: the iteration that reads the S/m summaries and
 *             only the objects that may match, beside reading every object
 *
 * Each figure is the median of `runs` runs (fresh prefix each).  Prints
 * figures and ratios; fails only when something does not work.
 *
 * usage: etcd_bench [objects] [runs] [updates]   (10000 3 1000)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etcd/client.h"
#include "etcd_proc.h"
#include "storage/etcd.h"
#include "testutil.h"

#define BATCH 40 /* the store's objects per write Txn (ER_BATCH) */

static struct etcd_proc proc;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return v[n / 2];
}

struct pods {
	char **json;
	char name[16];
	int n;
	size_t bytes;
};

static void pods_make(struct pods *p, int n)
{
	p->n = n;
	p->json = calloc((size_t)n, sizeof *p->json);
	for (int i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof name, "pod-%05d", i);
		p->json[i] =
		    test_pod_json("bench", name, 1000 + (uint64_t)i, i % 100 ? "edge-1" : "edge-2",
				  2048 + (size_t)(i * 37) % 1024);
		p->bytes += strlen(p->json[i]);
	}
}

static struct store *open_store(const char *prefix, const char *node)
{
	const char *eps[] = {proc.endpoint};
	struct etcd_store_config cfg = {eps, 1, NULL, NULL, NULL, prefix, node, 30000};
	char *err = NULL;
	struct store *s = etcd_store_open(&cfg, &err);
	if (!s) {
		fprintf(stderr, "open: %s\n", err ? err : "?");
		exit(1);
	}
	return s;
}

static double replace_all(struct store *s, const struct pods *p, uint64_t list_rv)
{
	struct store_view v = {"kubelet", {"", "v1", "pods"}, "", "", ""};
	double t0 = now_s();
	struct store_replace *r;
	if (store_replace_begin(s, &v, &r) != STORE_OK)
		exit(1);
	for (int i = 0; i < p->n; i++) {
		char name[32];
		snprintf(name, sizeof name, "pod-%05d", i);
		struct store_item it = {"bench", name, 1000 + (uint64_t)i, p->json[i],
					strlen(p->json[i])};
		if (store_replace_add(r, &it) != STORE_OK) {
			fprintf(stderr, "replace_add failed\n");
			exit(1);
		}
	}
	if (store_replace_commit(r, list_rv) != STORE_OK) {
		fprintf(stderr, "replace_commit failed\n");
		exit(1);
	}
	return now_s() - t0;
}

/* Iterate kubelet's pods, keeping those on node edge-2 as local_list does;
 * with matching, the store may leave out what surely does not match. */
static double list_node(struct store *s, bool matching, size_t *given, size_t *kept)
{
	double t0 = now_s();

	if (test_iterate_selected(s, "kubelet", "pods", "", "", "spec.nodeName=edge-2", matching,
				  NULL, given, kept) != STORE_OK)
		exit(1);
	return now_s() - t0;
}

struct raw_job {
	struct etcd_client *c;
	const char *prefix;
	const struct pods *p;
	int first, step; /* batches first, first+step, ... */
};

static void *raw_batches(void *arg)
{
	struct raw_job *j = arg;
	const struct pods *p = j->p;
	char keys[BATCH][128];
	struct etcd_op ops[BATCH];
	for (int off = j->first * BATCH; off < p->n; off += j->step * BATCH) {
		int cnt = p->n - off < BATCH ? p->n - off : BATCH;
		for (int i = 0; i < cnt; i++) {
			snprintf(keys[i], sizeof keys[i], "%s/pods/bench/pod-%05d", j->prefix,
				 off + i);
			ops[i] = (struct etcd_op){ETCD_OP_PUT,
						  keys[i],
						  strlen(keys[i]),
						  p->json[off + i],
						  strlen(p->json[off + i]),
						  NULL,
						  0};
		}
		struct etcd_txn t = {NULL, 0, ops, NULL, (size_t)cnt, 0};
		struct etcd_txn_result r;
		if (etcd_txn(j->c, &t, &r) != ETCD_OK) {
			fprintf(stderr, "raw txn: %s\n", etcd_last_error());
			exit(1);
		}
		etcd_txn_result_free(&r);
	}
	return NULL;
}

/* The pods as plain puts, BATCH per Txn, by `streams` threads at once. */
static double raw_txns(struct etcd_client *c, const char *prefix, const struct pods *p, int streams)
{
	double t0 = now_s();
	struct raw_job jobs[2];
	pthread_t th[2];
	for (int i = 0; i < streams; i++) {
		jobs[i] = (struct raw_job){c, prefix, p, i, streams};
		if (pthread_create(&th[i], NULL, raw_batches, &jobs[i]) != 0)
			exit(1);
	}
	for (int i = 0; i < streams; i++)
		pthread_join(th[i], NULL);
	return now_s() - t0;
}

/* Latencies (ms) of `n` updates of one object through the store, and of
 * `n` raw single puts of it. */
static void update_latency(struct store *s, struct etcd_client *c, const char *prefix, int n,
			   double *store_ms, double *raw_ms)
{
	struct store_key_info info = {"kubelet", "", "v1", "pods", "bench", "pod-00000"};
	struct store_key k;
	if (store_key_build(s, &info, &k) != STORE_OK)
		exit(1);
	for (int i = 0; i < n; i++) {
		uint64_t rv = 1000000 + (uint64_t)i;
		char *j = test_pod_json("bench", "pod-00000", rv, "edge-1", 2500);
		double t0 = now_s();
		if (store_update(s, &k, j, strlen(j), rv, NULL) != STORE_OK) {
			fprintf(stderr, "update failed\n");
			exit(1);
		}
		store_ms[i] = (now_s() - t0) * 1000;
		char key[128];
		snprintf(key, sizeof key, "%s/pods/raw/pod-00000", prefix);
		struct etcd_op op = {ETCD_OP_PUT, key, strlen(key), j, strlen(j), NULL, 0};
		struct etcd_txn t = {NULL, 0, &op, NULL, 1, 0};
		struct etcd_txn_result r;
		t0 = now_s();
		if (etcd_txn(c, &t, &r) != ETCD_OK)
			exit(1);
		raw_ms[i] = (now_s() - t0) * 1000;
		etcd_txn_result_free(&r);
		free(j);
	}
	store_key_free(&k);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10000;
	int runs = argc > 2 ? atoi(argv[2]) : 3;
	int updates = argc > 3 ? atoi(argv[3]) : 1000;
	if (n < 1 || runs < 1 || runs > 15 || updates < 2) {
		fprintf(stderr, "usage: etcd_bench [objects] [runs<=15] [updates]\n");
		return 2;
	}
	if (etcd_proc_start(&proc) < 0)
		return 1;
	struct pods p = {0};
	pods_make(&p, n);
	const char *eps[] = {proc.endpoint};
	struct etcd_config cc = {eps, 1, NULL, NULL, NULL, 30000, 0};
	char *err = NULL;
	struct etcd_client *c = etcd_client_new(&cc, &err);
	if (!c)
		return 1;
	printf("etcd benchmark: %d pods, %.1f MB, %d runs (median), etcd %s\n", n,
	       (double)p.bytes / 1e6, runs, proc.endpoint);
	double rep[15], raw[15], raw2[15], again[15];
	unsigned long txns = 0, reads = 0;
	for (int run = 0; run < runs; run++) {
		char prefix[64], rawprefix[64], raw2prefix[64];
		snprintf(prefix, sizeof prefix, "/b%d/registry", run);
		snprintf(rawprefix, sizeof rawprefix, "/r%d/registry", run);
		snprintf(raw2prefix, sizeof raw2prefix, "/p%d/registry", run);
		/* alternate the order, so that neither always runs on a warmer etcd */
		struct store *s = open_store(prefix, "edge-1");
		if (run % 2) {
			raw[run] = raw_txns(c, rawprefix, &p, 1);
			raw2[run] = raw_txns(c, raw2prefix, &p, 2);
			rep[run] = replace_all(s, &p, 50000);
		} else {
			rep[run] = replace_all(s, &p, 50000);
			raw2[run] = raw_txns(c, raw2prefix, &p, 2);
			raw[run] = raw_txns(c, rawprefix, &p, 1);
		}
		struct etcd_store_stats st;
		etcd_store_stats(s, &st);
		txns = st.txns;
		reads = st.read_txns;
		again[run] = replace_all(s, &p, 50001);
		store_close(s);
	}
	double mrep = median(rep, runs), mraw = median(raw, runs), mraw2 = median(raw2, runs);
	double magain = median(again, runs);
	printf("replace %d objects        %8.3f s   (%lu write txns, %lu read txns)\n", n, mrep,
	       txns, reads);
	printf("raw txns of %d puts        %8.3f s   (%d txns)\n", BATCH, mraw,
	       (n + BATCH - 1) / BATCH);
	printf("raw txns, 2 streams       %8.3f s\n", mraw2);
	printf("ratio replace/raw         %8.2fx  (target <= 1.5x)\n", mrep / mraw);
	printf("ratio replace/raw 2 streams %6.2fx  (the replace keeps 2 steps in flight)\n",
	       mrep / mraw2);
	printf("relist, nothing changed   %8.3f s   (%.2fx raw)\n", magain, magain / mraw);

	struct store *s = open_store("/u/registry", "edge-1");
	replace_all(s, &p, 50000);
	double *us = calloc((size_t)updates, sizeof *us), *ur = calloc((size_t)updates, sizeof *ur);
	double all[15], matching[15];
	size_t given_all = 0, given = 0, kept = 0, kept_all = 0;
	for (int run = 0; run < runs; run++) {
		all[run] = list_node(s, false, &given_all, &kept_all);
		matching[run] = list_node(s, true, &given, &kept);
		if (kept != kept_all)
			return 1;
	}
	double mall = median(all, runs), mmatch = median(matching, runs);
	printf("offline list of %zu of %d pods by spec.nodeName, reading every object  %8.3f s\n",
	       kept_all, n, mall);
	printf("the same from the S/m summaries (%zu objects read)  %8.3f s  (%.2fx)\n", given,
	       mmatch, mmatch / mall);
	update_latency(s, c, "/u/registry", updates, us, ur);
	qsort(us, (size_t)updates, sizeof *us, cmp_double);
	qsort(ur, (size_t)updates, sizeof *ur, cmp_double);
	int p99 = updates * 99 / 100;
	printf("single update, store      p50 %6.2f ms  p99 %6.2f ms  (%d updates)\n",
	       us[updates / 2], us[p99], updates);
	printf("single put, raw txn       p50 %6.2f ms  p99 %6.2f ms\n", ur[updates / 2], ur[p99]);
	free(us);
	free(ur);
	store_close(s);
	etcd_client_free(c);
	for (int i = 0; i < n; i++)
		free(p.json[i]);
	free(p.json);
	etcd_proc_stop(&proc);
	return 0;
}
