/*
 * crash_test.c - kill -9 the disk store at random instants and check that
 * recovery always leaves a state that was actually written.
 *
 * A child process loops over two kinds of work on one 2,000-object resource:
 *   - view replaces of namespace "snap": snapshot k holds the objects
 *     obj-i with (i + k) % 5 != 0, each with rv 1000 + k and content naming k,
 *     so each snapshot both adds and drops objects;
 *   - single writes to namespace "single": object s-j at increasing versions.
 * Before and after each operation it tells the parent over a pipe what it is
 * about to do / has done.  The parent kills it at a random instant, opens the
 * store (which runs recovery), and checks:
 *   - the "snap" view is exactly snapshot k or k+1, where k is the last
 *     replace reported done (and k+1 the one that was under way), files and
 *     view record agreeing on which;
 *   - every single object holds its last acknowledged version or the one
 *     under way, byte for byte;
 *   - every file parses, and no staging file, journal record or temp file is
 *     left over.
 * Output: "RESULT: <kills> passed, <failures> failed".
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kube/meta.h"
#include "storage/disk.h"
#include "testutil.h"
#include "util/buf.h"

#define OBJECTS 2000
#define SINGLES 20
#define RV_BASE 1000

static const char *DIR_PATH;

/* The second half of the kills runs "drifting" snapshots, like a relist of
 * a live cluster: snapshot k changes only the objects i with i % 100 ==
 * k % 100 (a new version, and sometimes gone or back), so that the disk
 * store commits each as a delta moved into the tree, not a new tree. */
static bool DRIFT;

/* The version of object i in snapshot k: k itself, or when drifting the
 * last snapshot that changed it. */
static long version_of(int i, long k)
{
	return DRIFT ? k - (((k - i) % 100) + 100) % 100 : k;
}

static long snap_rv(long k)
{
	return DRIFT ? RV_BASE + 200 + k : RV_BASE + k;
}

static char *snap_object(int i, long k)
{
	k = version_of(i, k);
	char *s = NULL;
	if (asprintf(
		&s,
		"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"obj-%d\","
		"\"namespace\":\"snap\",\"resourceVersion\":\"%ld\",\"labels\":{\"set\":\"snap\"}},"
		"\"data\":{\"snapshot\":\"%ld\",\"pad\":\"%0200d\"}}",
		i, snap_rv(k), k, i) < 0)
		abort();
	return s;
}

static bool in_snapshot(int i, long k)
{
	if (DRIFT)
		return ((version_of(i, k) + 1000) / 100 + i) % 4 != 0;
	return (i + k) % 5 != 0;
}

static char *single_object(int j, long v)
{
	char *s = NULL;
	if (asprintf(
		&s,
		"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"s-%d\","
		"\"namespace\":\"single\",\"resourceVersion\":\"%ld\"},\"data\":{\"v\":\"%ld\"}}",
		j, v, v) < 0)
		abort();
	return s;
}

static struct store_view snap_view(void)
{
	struct store_view v = {"crasher", {"", "v1", "configmaps"}, "snap", "set=snap", ""};
	return v;
}

/* ---- the child ---- */

static void say(int fd, const char *fmt, long a, long b)
{
	char line[64];
	int n = snprintf(line, sizeof line, fmt, a, b);
	if (write(fd, line, (size_t)n) != n)
		_exit(3);
}

static void do_replace(struct store *s, long k)
{
	static struct store_item items[OBJECTS];
	static char *data[OBJECTS];
	static char names[OBJECTS][16];
	size_t n = 0;
	for (int i = 0; i < OBJECTS; i++) {
		if (!in_snapshot(i, k))
			continue;
		snprintf(names[n], sizeof names[n], "obj-%d", i);
		data[n] = snap_object(i, k);
		items[n] =
		    (struct store_item){"snap", names[n], (uint64_t)snap_rv(version_of(i, k)),
					data[n], strlen(data[n])};
		n++;
	}
	struct store_view v = snap_view();
	if (store_replace_view(s, &v, (uint64_t)snap_rv(k), items, n) != STORE_OK)
		_exit(4);
	for (size_t i = 0; i < n; i++)
		free(data[i]);
}

static void do_single(struct store *s, int j, long v)
{
	char name[16];
	snprintf(name, sizeof name, "s-%d", j);
	struct store_key_info info = {"crasher", "", "v1", "configmaps", "single", name};
	struct store_key key;
	if (store_key_build(s, &info, &key) != STORE_OK)
		_exit(5);
	char *json = single_object(j, v);
	enum store_err e = store_update(s, &key, json, strlen(json), (uint64_t)v, NULL);
	if (e == STORE_NOT_FOUND)
		e = store_create(s, &key, json, strlen(json));
	if (e != STORE_OK)
		_exit(6);
	free(json);
	store_key_free(&key);
}

static void child(int fd, long next_snap, long next_version, unsigned seed)
{
	char *err = NULL;
	struct store *s = disk_store_open(DIR_PATH, 0, NULL, &err);
	if (!s)
		_exit(2);
	srand(seed);
	say(fd, "R %ld %ld\n", 0, 0); /* ready: the kill window opens */
	for (long k = next_snap, v = next_version;; v++) {
		if (rand() % 3 == 0) {
			say(fd, "B %ld %ld\n", k, 0);
			do_replace(s, k);
			say(fd, "D %ld %ld\n", k, 0);
			k++;
		} else {
			int j = rand() % SINGLES;
			say(fd, "b %ld %ld\n", j, v);
			do_single(s, j, v);
			say(fd, "d %ld %ld\n", j, v);
		}
	}
}

/* ---- what the parent knows ---- */

struct history {
	long snap_done, snap_begun; /* -1: none */
	long single_done[SINGLES], single_begun[SINGLES];
	long max_version;
};

static void read_reports(int fd, struct history *h)
{
	struct buf b = BUF_INIT;
	char chunk[4096];
	ssize_t n;
	while ((n = read(fd, chunk, sizeof chunk)) > 0)
		buf_append(&b, chunk, (size_t)n);
	char *line = b.data, *end;
	while (line && (end = strchr(line, '\n'))) {
		*end = '\0';
		char op;
		long a, c;
		if (sscanf(line, "%c %ld %ld", &op, &a, &c) == 3) {
			if (op == 'B')
				h->snap_begun = a;
			else if (op == 'D')
				h->snap_done = a, h->snap_begun = -1;
			else if (op == 'b')
				h->single_begun[a] = c;
			else if (op == 'd')
				h->single_done[a] = c, h->single_begun[a] = -1;
			if ((op == 'b' || op == 'd') && c > h->max_version)
				h->max_version = c;
		}
		line = end + 1;
	}
	buf_free(&b);
}

/* ---- checks ---- */

static int failures, kills_in_replace, rolled_forward;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "crash check failed: " __VA_ARGS__);                       \
			fputc('\n', stderr);                                                       \
			return -1;                                                                 \
		}                                                                                  \
	} while (0)

/* Does the snap namespace hold exactly snapshot k? */
static bool is_snapshot(long k, int *count_out)
{
	int count = 0;
	char rel[64];
	for (int i = 0; i < OBJECTS; i++) {
		snprintf(rel, sizeof rel, "crasher/configmaps.v1.core/snap/obj-%d", i);
		char *got = test_read_file(DIR_PATH, rel);
		bool want = in_snapshot(i, k);
		bool ok;
		if (!want) {
			ok = got == NULL;
		} else {
			char *expect = snap_object(i, k);
			ok = got && !strcmp(got, expect);
			free(expect);
		}
		free(got);
		if (!ok)
			return false;
		count += want;
	}
	*count_out = count;
	return true;
}

/* Objects of the snap namespace a label selector lists, as offline. */
static int count_selected(struct store *s)
{
	size_t n = 0;
	enum store_err e = test_iterate_selected(s, "crasher", "configmaps", "snap", "set=snap", "",
						 true, NULL, NULL, &n);

	return e == STORE_OK ? (int)n : e == STORE_NOT_FOUND ? 0 : -1;
}

static int check_snapshot(struct store *s, const struct history *h)
{
	struct store_view v = snap_view();
	struct store_view_state st;
	enum store_err e = store_get_view(s, &v, &st);
	long candidates[2] = {h->snap_done, h->snap_begun};
	long found = -2;
	int count = 0;
	for (int c = 0; c < 2 && found == -2; c++) {
		long k = candidates[c];
		if (k < 0) {
			/* nothing written yet: the view must not exist */
			if (e == STORE_NOT_FOUND && test_count_files(DIR_PATH) >= 0 &&
			    !test_exists(DIR_PATH, "crasher/configmaps.v1.core/snap/obj-1"))
				found = -1;
			continue;
		}
		if (e == STORE_OK && st.rv == (uint64_t)snap_rv(k) && is_snapshot(k, &count))
			found = k;
	}
	if (e == STORE_OK)
		store_view_state_free(&st);
	CHECK(found != -2, "snapshot view is neither %ld (done) nor %ld (begun)", h->snap_done,
	      h->snap_begun);
	/* the index built from what recovery left selects exactly the
	 * snapshot's objects, and says what the files say */
	int selected = count_selected(s);
	CHECK(found < 0 || selected == count,
	      "a list by label selects %d objects, the snapshot has %d", selected, count);
	char *why = NULL;
	CHECK(disk_store_index_check(s, &why) == 0, "index: %s", why);
	return 0;
}

static int check_singles(const struct history *h)
{
	char rel[64];
	for (int j = 0; j < SINGLES; j++) {
		snprintf(rel, sizeof rel, "crasher/configmaps.v1.core/single/s-%d", j);
		char *got = test_read_file(DIR_PATH, rel);
		bool ok = false;
		long cands[2] = {h->single_done[j], h->single_begun[j]};
		for (int c = 0; c < 2 && !ok; c++) {
			if (cands[c] < 0) {
				ok = !got && h->single_done[j] < 0;
				continue;
			}
			char *expect = single_object(j, cands[c]);
			ok = got && !strcmp(got, expect);
			free(expect);
		}
		free(got);
		CHECK(ok, "single object s-%d is neither version %ld nor %ld", j, cands[0],
		      cands[1]);
	}
	return 0;
}

static int count_entries(const char *rel)
{
	struct buf p = BUF_INIT;
	buf_printf(&p, "%s/%s", DIR_PATH, rel);
	DIR *d = opendir(p.data);
	buf_free(&p);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

static int check_no_leftovers(void)
{
	CHECK(count_entries("_internal/yurthub-c/staging") == 0, "staging not empty");
	CHECK(count_entries("_internal/yurthub-c/journal") == 0, "journal not empty");
	DIR *d;
	struct buf p = BUF_INIT;
	buf_printf(&p, "%s/crasher/configmaps.v1.core/snap", DIR_PATH);
	d = opendir(p.data);
	buf_free(&p);
	if (d) {
		struct dirent *de;
		int bad = 0;
		while ((de = readdir(d)))
			bad += de->d_name[0] == '.' && strcmp(de->d_name, ".") &&
			       strcmp(de->d_name, "..");
		closedir(d);
		CHECK(bad == 0, "temporary files in the snapshot directory");
	}
	return 0;
}

/* The kill window: the child is killed at a uniformly random instant of its
 * first `window_us` microseconds.  It grows while rounds end before any
 * replace completes, so that kills land before, inside and after replaces
 * whatever the speed of the machine. */
static long window_us = 200000;

static int one_round(int round, struct history *h)
{
	int fds[2];
	if (pipe(fds) < 0)
		return -1;
	long next_snap = h->snap_done + 1;
	long next_version = h->max_version + 1;
	pid_t pid = fork();
	if (pid == 0) {
		close(fds[0]);
		child(fds[1], next_snap, next_version, (unsigned)round * 7919u + 17u);
	}
	close(fds[1]);
	/* Wait for "ready", then kill at a random instant of the work. */
	char ready[6]; /* "R 0 0\n" */
	size_t have = 0;
	while (have < sizeof ready) {
		ssize_t got = read(fds[0], ready + have, sizeof ready - have);
		if (got <= 0)
			break;
		have += (size_t)got;
	}
	long us = (long)((unsigned long)rand() * 1000UL % (unsigned long)window_us);
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
	nanosleep(&ts, NULL);
	kill(pid, SIGKILL);
	int status;
	waitpid(pid, &status, 0);
	if (WIFEXITED(status)) {
		fprintf(stderr, "crash worker exited by itself with %d\n", WEXITSTATUS(status));
		return -1;
	}
	/* The ready line was consumed above: replay the rest. */
	long done_before = h->snap_done;
	read_reports(fds[0], h);
	close(fds[0]);
	if (h->snap_begun >= 0)
		kills_in_replace++;
	if (h->snap_done == done_before && window_us < 20000000)
		window_us = window_us * 3 / 2;
	else if (h->snap_done > done_before + 3 && window_us > 20000)
		window_us = window_us * 2 / 3;

	char *err = NULL;
	struct disk_recovery_report rep;
	struct store *s = disk_store_open(DIR_PATH, 0, &rep, &err);
	if (!s) {
		fprintf(stderr, "recovery failed: %s\n", err);
		free(err);
		return -1;
	}
	disk_store_drain(s);
	rolled_forward += (int)rep.journals_rolled_forward;
	int rc = check_snapshot(s, h);
	if (rc == 0)
		rc = check_singles(h);
	if (rc == 0)
		rc = check_no_leftovers();
	store_close(s);
	/* What was under way is settled now, one way or the other: learn which,
	 * so the next round's expectations start from the truth. */
	if (h->snap_begun >= 0) {
		int count;
		if (is_snapshot(h->snap_begun, &count))
			h->snap_done = h->snap_begun;
		h->snap_begun = -1;
	}
	for (int j = 0; j < SINGLES; j++) {
		if (h->single_begun[j] < 0)
			continue;
		char rel[64];
		snprintf(rel, sizeof rel, "crasher/configmaps.v1.core/single/s-%d", j);
		char *gotf = test_read_file(DIR_PATH, rel);
		char *expect = single_object(j, h->single_begun[j]);
		if (gotf && !strcmp(gotf, expect))
			h->single_done[j] = h->single_begun[j];
		h->single_begun[j] = -1;
		free(gotf);
		free(expect);
	}
	return rc;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 200;
	char dir[4096];
	/* A killed process leaves the page cache intact, so any file system
	 * shows the same crash states; tmpfs runs them fastest.  (Power loss,
	 * where the order of syncs matters, is the sync-order test's job.) */
	if (!getenv("TMPDIR") && access("/dev/shm", W_OK) == 0)
		setenv("TMPDIR", "/dev/shm", 1);
	srand((unsigned)time(NULL));
	int passed = 0, total_failures = 0;
	for (int mode = 0; mode < 2; mode++) {
		DRIFT = mode == 1;
		if (test_mkdtemp(dir, sizeof dir, DRIFT ? "crash-drift" : "crash") < 0)
			return 1;
		DIR_PATH = dir;
		struct history h = {.snap_done = -1, .snap_begun = -1, .max_version = 0};
		for (int j = 0; j < SINGLES; j++)
			h.single_done[j] = h.single_begun[j] = -1;
		int n = mode == 0 ? rounds - rounds / 2 : rounds / 2;
		failures = kills_in_replace = rolled_forward = 0;
		window_us = 200000;
		for (int r = 0; r < n; r++) {
			if (one_round(r, &h) == 0)
				passed++;
			else
				failures++;
		}
		printf("crash test (%s snapshots): %d kills (%d during a view replace, %d "
		       "finished by recovery), last snapshot %ld, %d failures\n",
		       DRIFT ? "drifting" : "whole", n, kills_in_replace, rolled_forward,
		       h.snap_done, failures);
		/* A run that never killed a replace, or never saw one finish, has
		 * not tested what it claims to. */
		if (kills_in_replace < n / 10 || h.snap_done < n / 10) {
			printf("crash test did not exercise both sides of the replaces: %d kills "
			       "inside one, %ld completed\n",
			       kills_in_replace, h.snap_done + 1);
			failures++;
		}
		total_failures += failures;
		test_rm_rf(dir);
	}
	printf("RESULT: %d passed, %d failed\n", passed, total_failures);
	return total_failures ? 1 : 0;
}
