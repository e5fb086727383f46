/*
 * disk_bench.c - what a durable list replace costs, side by side.
 *
 * Writes the same 10,000 realistic pods (2-3 KB each, spread over 50
 * namespaces) three ways, in the same run, in fresh directories on the same
 * file system (the one of $TMPDIR, or the directory given as argv[1]):
 *
 *   ours      store_replace_view() of the disk store (durable when it returns)
 *   yurthub   one file per object opened O_SYNC, YurtHub's method
 *   floor     the same bytes as one file plus one fsync: the physical limit
 *   inodes    the same number of files, empty, plus one syncfs: the limit of
 *             any layout with one file per object (YurtHub's, and ours)
 *
 * Each is run ROUNDS times in rotating order and the median is reported,
 * plus three relists on the filled store (nothing changed / everything
 * changed / 100 changed), and what an offline list costs the store after a
 * restart: the first with a selector (which builds the index), the same
 * again, and the whole collection.  Then the commit lag of a list (issue 25
 * item 6): the replace of 10,000 pods in a fresh folder, and in a churned
 * one (each relist changed every pod, so each writes a new tree and
 * retires the old one), with the spare pool and without it (the store as
 * it was before it, DISK_NO_SPARES), side by side.  Prints "name: value
 * unit" lines.  A benchmark, not a test: it
 * never fails on a figure.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "storage/disk.h"
#include "testutil.h"
#include "util/buf.h"
#include "util/fsutil.h"

#define PODS	   10000
#define NAMESPACES 50
#define ROUNDS	   3

static struct store_item items[PODS];
static char *data[PODS];
static char names[PODS][32], nss[NAMESPACES][32];
static size_t total_bytes;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static char *pod(int i, unsigned rv)
{
	struct buf b = BUF_INIT;
	buf_printf(
	    &b,
	    "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"%s\",\"namespace\":"
	    "\"%s\",\"uid\":\"6f1c9d52-%08x-4b7e-9a4c-1e2f3a4b5c6d\",\"resourceVersion\":\"%u\","
	    "\"creationTimestamp\":\"2026-11-01T10:00:00Z\",\"labels\":{\"app\":\"svc-%d\","
	    "\"pod-template-hash\":\"7d9c8b6f5d\"},\"ownerReferences\":[{\"apiVersion\":"
	    "\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"svc-%d-7d9c8b6f5d\",\"uid\":"
	    "\"0a1b2c3d-1111-2222-3333-444455556666\",\"controller\":true}]},\"spec\":{"
	    "\"nodeName\":\"node-%d\",\"containers\":[{\"name\":\"app\",\"image\":"
	    "\"registry.example.com/team/app:1.4.2\",\"resources\":{\"requests\":{\"cpu\":"
	    "\"100m\",\"memory\":\"128Mi\"}},\"env\":[",
	    names[i], nss[i % NAMESPACES], (unsigned)i, rv, i % 300, i % 300, i % 40);
	size_t target = 2048 + (size_t)(i * 7919 % 1024); /* 2-3 KB */
	for (int e = 0; b.len + 110 < target; e++)
		buf_printf(
		    &b, "%s{\"name\":\"SETTING_%d\",\"value\":\"value-%d-abcdefghijklmnopqrstu\"}",
		    e ? "," : "", e, e);
	buf_printf(&b, "]}]},\"status\":{\"phase\":\"Running\",\"podIP\":\"10.%d.%d.%d\"}}",
		   i / 65536 % 256, i / 256 % 256, i % 256);
	return buf_steal(&b);
}

static void make_pods(unsigned rv)
{
	total_bytes = 0;
	for (int i = 0; i < PODS; i++) {
		free(data[i]);
		data[i] = pod(i, rv);
		items[i] = (struct store_item){nss[i % NAMESPACES], names[i], rv, data[i],
					       strlen(data[i])};
		total_bytes += items[i].len;
	}
}

/* Nothing is deleted until the end: on some file systems (ext4 without a
 * journal) creating inodes right after deleting many is much slower, which
 * would skew whichever method runs next. */
static void fresh_dir(const char *base, const char *tag, int round, char *out, size_t n)
{
	snprintf(out, n, "%s/%s-%d", base, tag, round);
	if (mkdir(out, 0700) < 0) {
		perror(out);
		exit(1);
	}
}

/* Read every pod of kube-proxy's collection that may match the field
 * selector, as an offline list does; returns how many match. */
static size_t iterate(struct store *s, const char *field_selector)
{
	size_t n = 0;

	test_iterate_selected(s, "kube-proxy", "pods", "", "", field_selector, true, NULL, NULL,
			      &n);
	return n;
}

static double run_ours(const char *dir, struct store **keep)
{
	char *err = NULL;
	struct store *s = disk_store_open(dir, 0, NULL, &err);
	if (!s) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	struct store_view v = {"kube-proxy", {"", "v1", "pods"}, "", "", ""};
	double t = now();
	if (store_replace_view(s, &v, 100, items, PODS) != STORE_OK) {
		fprintf(stderr, "replace failed: %s\n", strerror(store_errno()));
		exit(1);
	}
	t = now() - t;
	if (keep)
		*keep = s;
	else {
		disk_store_drain(s);
		store_close(s);
	}
	return t;
}

static double run_yurthub(const char *dir)
{
	double t = now();
	struct buf p = BUF_INIT;
	for (int i = 0; i < PODS; i++) {
		buf_reset(&p);
		buf_printf(&p, "%s/kube-proxy/pods.v1.core/%s", dir, items[i].namespace);
		fs_mkdir_p_at(AT_FDCWD, p.data, 0755, NULL);
		buf_printf(&p, "/%s", items[i].name);
		int fd = open(p.data, O_WRONLY | O_CREAT | O_TRUNC | O_SYNC | O_CLOEXEC, 0600);
		if (fd < 0 || fs_write_all(fd, items[i].data, items[i].len) < 0) {
			perror(p.data);
			exit(1);
		}
		close(fd);
	}
	buf_free(&p);
	return now() - t;
}

static double run_floor(const char *dir)
{
	char path[4400];
	snprintf(path, sizeof path, "%s/all", dir);
	double t = now();
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	for (int i = 0; fd >= 0 && i < PODS; i++)
		if (fs_write_all(fd, items[i].data, items[i].len) < 0)
			exit(1);
	if (fd < 0 || fsync(fd) < 0)
		exit(1);
	close(fd);
	return now() - t;
}

/* The same number of files, empty, plus one syncfs: what the per-object
 * layout costs in inodes alone, before any byte of data. */
static double run_inode_floor(const char *dir)
{
	struct buf p = BUF_INIT;
	double t = now();
	for (int i = 0; i < PODS; i++) {
		buf_reset(&p);
		buf_printf(&p, "%s/%s", dir, items[i].namespace);
		fs_mkdir_p_at(AT_FDCWD, p.data, 0700, NULL);
		buf_printf(&p, "/%s", items[i].name);
		int fd = open(p.data, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0) {
			perror(p.data);
			exit(1);
		}
		close(fd);
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	if (fd < 0 || syncfs(fd) < 0)
		exit(1);
	close(fd);
	buf_free(&p);
	return now() - t;
}

#define CHURN_RELISTS 4

static double median(double *v);

/* A fresh folder, one list of every pod, then CHURN_RELISTS relists where
 * every pod changed, each one's old tree handled (kept or removed) before
 * the next as the reaper does between relists.  *fresh: the first replace;
 * the churned figure is the median of the last three. */
static double churn(const char *dir, int flags, double *fresh)
{
	char *err = NULL;
	struct store *s = disk_store_open(dir, flags, NULL, &err);
	if (!s) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	struct store_view v = {"kube-proxy", {"", "v1", "pods"}, "", "", ""};
	double t[CHURN_RELISTS + 1];
	for (int r = 0; r <= CHURN_RELISTS; r++) {
		make_pods(1000 + (unsigned)r);
		double t0 = now();
		if (store_replace_view(s, &v, 1000 + (unsigned)r, items, PODS) != STORE_OK) {
			fprintf(stderr, "replace failed: %s\n", strerror(store_errno()));
			exit(1);
		}
		t[r] = now() - t0;
		disk_store_drain(s);
	}
	store_close(s);
	*fresh = t[0];
	double last[ROUNDS];
	for (int i = 0; i < ROUNDS; i++)
		last[i] = t[CHURN_RELISTS - i];
	return median(last);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v)
{
	qsort(v, ROUNDS, sizeof *v, cmp_double);
	return v[ROUNDS / 2];
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR");
	char base[4096];
	snprintf(base, sizeof base, "%s/yurthub-disk-bench-%d",
		 argc > 1      ? argv[1]
		 : tmp && *tmp ? tmp
			       : "/var/tmp",
		 (int)getpid());
	if (mkdir(base, 0700) < 0) {
		perror(base);
		return 1;
	}
	for (int i = 0; i < PODS; i++)
		snprintf(names[i], sizeof names[i], "svc-%d-7d9c8b6f5d-%05d", i % 300, i);
	for (int i = 0; i < NAMESPACES; i++)
		snprintf(nss[i], sizeof nss[i], "team-%02d", i);
	make_pods(100);

	double ours[ROUNDS], yh[ROUNDS], fl[ROUNDS], inodes[ROUNDS];
	char dir[4200];
	for (int r = 0; r < ROUNDS; r++) {
		/* rotate the order so that no method always runs on a warm or a
		 * tired file system */
		for (int k = 0; k < 4; k++) {
			switch ((r + k) % 4) {
			case 0:
				fresh_dir(base, "ours", r, dir, sizeof dir);
				ours[r] = run_ours(dir, NULL);
				break;
			case 1:
				fresh_dir(base, "yurthub", r, dir, sizeof dir);
				yh[r] = run_yurthub(dir);
				break;
			case 2:
				fresh_dir(base, "floor", r, dir, sizeof dir);
				fl[r] = run_floor(dir);
				break;
			default:
				fresh_dir(base, "inodes", r, dir, sizeof dir);
				inodes[r] = run_inode_floor(dir);
				break;
			}
		}
	}
	/* Relists on a filled store: nothing changed, then every object newer. */
	struct store *s = NULL;
	fresh_dir(base, "relist", 0, dir, sizeof dir);
	run_ours(dir, &s);
	struct store_view v = {"kube-proxy", {"", "v1", "pods"}, "", "", ""};
	double t = now();
	store_replace_view(s, &v, 100, items, PODS);
	double unchanged = now() - t;
	make_pods(200);
	t = now();
	store_replace_view(s, &v, 200, items, PODS);
	double changed = now() - t;
	/* 100 of the 10,000 changed */
	for (int i = 0; i < 100; i++) {
		free(data[i * 97]);
		data[i * 97] = pod(i * 97, 300);
		items[i * 97].data = data[i * 97];
		items[i * 97].len = strlen(data[i * 97]);
		items[i * 97].rv = 300;
	}
	t = now();
	store_replace_view(s, &v, 300, items, PODS);
	double changed100 = now() - t;
	disk_store_drain(s);
	store_close(s);
	/* offline: a fresh start, its first list with a selector builds the
	 * index from the files; then the same list again, and the whole
	 * collection, read with the index */
	char *err = NULL;
	s = disk_store_open(dir, 0, NULL, &err);
	if (!s) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	double first = 0, filtered = 0, unfiltered = 0;
	size_t nfiltered = 0, nall = 0;
	for (int round = 0; round < 2; round++) {
		t = now();
		nfiltered = iterate(s, "spec.nodeName=node-7");
		*(round ? &filtered : &first) = now() - t;
	}
	t = now();
	nall = iterate(s, "");
	unfiltered = now() - t;
	size_t index_bytes, index_objs;
	disk_store_index_size(s, &index_objs, &index_bytes);
	store_close(s);
	/* The commit lag: with the spare pool first, as nothing has been
	 * removed yet here; then without it, whose removals would slow
	 * whatever creates files after them. */
	double lag_fresh, lag_churned, old_fresh, old_churned;
	fresh_dir(base, "lag-spares", 0, dir, sizeof dir);
	lag_churned = churn(dir, 0, &lag_fresh);
	fresh_dir(base, "lag-nospares", 0, dir, sizeof dir);
	old_churned = churn(dir, DISK_NO_SPARES, &old_fresh);

	double o = median(ours), y = median(yh), f = median(fl), in = median(inodes);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("objects: %d pods, %.1f MB, %d namespaces, median of %d rounds\n", PODS,
	       (double)total_bytes / 1e6, NAMESPACES, ROUNDS);
	printf("disk_replace_durable: %.3f s\n", o);
	printf("yurthub_osync_per_object: %.3f s\n", y);
	printf("floor_one_file_one_fsync: %.3f s\n", f);
	printf("speedup_vs_yurthub: %.1f x\n", y / o);
	printf("ratio_to_floor: %.2f x\n", o / f);
	printf("empty_files_plus_syncfs: %.3f s\n", in);
	printf("ratio_to_empty_files: %.2f x\n", o / in);
	printf("relist_unchanged: %.3f s\n", unchanged);
	printf("relist_all_changed: %.3f s\n", changed);
	printf("relist_100_changed: %.3f s\n", changed100);
	printf(
	    "offline_first_filtered_list_after_start: %.3f s (%zu of %zu pods; builds the index)\n",
	    first, nfiltered, nall);
	printf("offline_filtered_list_store_time: %.4f s (%zu pods by spec.nodeName)\n", filtered,
	       nfiltered);
	printf("offline_unfiltered_list_store_time: %.4f s (%zu pods)\n", unfiltered, nall);
	printf("index_bytes_per_object: %.0f (%zu objects)\n",
	       index_objs ? (double)index_bytes / (double)index_objs : 0.0, index_objs);
	printf("commit_lag_fresh_folder: %.3f s (without the spare pool: %.3f s)\n", lag_fresh,
	       old_fresh);
	printf("commit_lag_churned_folder: %.3f s (without the spare pool: %.3f s; median of the "
	       "last %d of %d relists that changed every pod)\n",
	       lag_churned, old_churned, ROUNDS, CHURN_RELISTS);
	printf("peak_rss: %.1f MB\n", (double)ru.ru_maxrss / 1024.0);
	fs_rm_rf_at(AT_FDCWD, base);
	for (int i = 0; i < PODS; i++)
		free(data[i]);
	return 0;
}
