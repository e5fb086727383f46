/*
 * scrub_bench.c - what the store's background scrub (store_scrub, run by
 * housekeeping.c at start and every 30 minutes) costs for 10,000 pods of
 * 2-3 KB, on the disk store and on the etcd store: its wall time, the
 * objects and bytes it read, and the process's resident memory before and
 * after (the scrub holds one iterator's worth, never the store).  The
 * disk store is reopened first, as a hub's start would, with the files in
 * the page cache (a first scrub after boot reads them from the device);
 * etcd is started here on 127.0.0.1.  One run; a benchmark, not a test:
 * it fails only when something does not work.
 *
 * usage: scrub_bench [directory for the disk store]   ($TMPDIR or /var/tmp)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "etcd_proc.h"
#include "storage/disk.h"
#include "storage/etcd.h"
#include "testutil.h"

#define PODS	   10000
#define NAMESPACES 50

static struct store_item items[PODS];
static size_t total_bytes;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kb(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void make_pods(void)
{
	static char names[PODS][32], nss[NAMESPACES][32];
	for (int i = 0; i < NAMESPACES; i++)
		snprintf(nss[i], sizeof nss[i], "team-%02d", i);
	for (int i = 0; i < PODS; i++) {
		snprintf(names[i], sizeof names[i], "app-%05d", i);
		char *d = test_pod_json(nss[i % NAMESPACES], names[i], 100 + (uint64_t)i, "node-1",
					2048 + (size_t)(i * 7919 % 1024));
		if (!d)
			exit(1);
		items[i] = (struct store_item){nss[i % NAMESPACES], names[i], 100 + (uint64_t)i, d,
					       strlen(d)};
		total_bytes += items[i].len;
	}
}

static int fill(struct store *s)
{
	struct store_view v = {"kubelet", {"", "v1", "pods"}, "", "", ""};
	enum store_err e = store_replace_view(s, &v, 20000, items, PODS);
	if (e != STORE_OK)
		fprintf(stderr, "replace: %s\n", store_strerror(e));
	return e == STORE_OK ? 0 : -1;
}

static int scrub(const char *name, struct store *s)
{
	long before = rss_kb();
	double t = now_s();
	struct store_scrub_stats st;
	enum store_err e = store_scrub(s, NULL, &st);
	t = now_s() - t;
	if (e != STORE_OK) {
		fprintf(stderr, "%s scrub: %s\n", name, store_strerror(e));
		return -1;
	}
	printf("%s_scrub: %.3f s, %llu objects, %.1f MB read, %llu damaged, rss %ld -> %ld KiB\n",
	       name, t, (unsigned long long)st.objects, (double)st.bytes / 1e6,
	       (unsigned long long)st.damaged, before, rss_kb());
	return 0;
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR");
	char dir[4096];
	snprintf(dir, sizeof dir, "%s/yurthub-scrub-bench-%d",
		 argc > 1      ? argv[1]
		 : tmp && *tmp ? tmp
			       : "/var/tmp",
		 (int)getpid());
	make_pods();
	printf("objects: %d pods, %.1f MB\n", PODS, (double)total_bytes / 1e6);

	char *err = NULL;
	if (mkdir(dir, 0700) < 0) {
		perror(dir);
		return 1;
	}
	struct store *s = disk_store_open(dir, 0, NULL, &err);
	int rc = s ? fill(s) : -1;
	store_close(s);
	s = rc == 0 ? disk_store_open(dir, 0, NULL, &err) : NULL;
	rc = s ? scrub("disk", s) : -1;
	if (!s)
		fprintf(stderr, "disk store: %s\n", err ? err : "not filled");
	free(err);
	err = NULL;
	store_close(s);
	test_rm_rf(dir);

	struct etcd_proc proc = {0};
	if (rc == 0 && etcd_proc_start(&proc) == 0) {
		const char *eps[] = {proc.endpoint};
		struct etcd_store_config cfg = {eps,	  1,	NULL, NULL, NULL, "/scrub/registry",
						"edge-1", 30000};
		s = etcd_store_open(&cfg, &err);
		rc = s ? fill(s) : -1;
		rc = rc == 0 ? scrub("etcd", s) : rc;
		if (!s)
			fprintf(stderr, "etcd store: %s\n", err);
		free(err);
		store_close(s);
		etcd_proc_stop(&proc);
	} else {
		rc = -1;
	}
	for (int i = 0; i < PODS; i++)
		free((char *)items[i].data);
	return rc == 0 ? 0 : 1;
}
