/*
 * test_views_behind.c - the marks of views a lost write left behind
 * (cache/behind.h): one mark per view whatever the selector's spelling, a
 * list clears it only when it is not older than the lost event, the marks
 * come back after a reopen (a restart), a slot cut half way leaves the
 * state before, the file never grows after it is opened, and verify's
 * decoder reads what the hub wrote.
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
#include <sys/stat.h>
#include <unistd.h>

#include "cache/behind.h"
#include "metrics/metrics.h"
#include "testutil.h"

static const struct store_view PODS = {"kubelet", {"", "v1", "pods"}, "", "", "spec.nodeName=n1"};
static const struct store_gvr PODS_GVR = {"", "v1", "pods"};
static const struct store_gvr NODES_GVR = {"", "v1", "nodes"};

struct fx {
	char dir[256];
	char file[512];
	struct metrics m;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	assert_non_null(f);
	assert_int_equal(test_mkdtemp(f->dir, sizeof f->dir, "behind"), 0);
	snprintf(f->file, sizeof f->file, "%s/_internal/yurthub-c/views-behind", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	test_rm_rf(f->dir);
	free(f);
	return 0;
}

static off_t file_size(const char *path)
{
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	return st.st_size;
}

static void test_mark_and_list(void **state)
{
	struct fx *f = *state;
	struct views_behind *b = views_behind_open(f->file, &f->m);
	assert_non_null(b);
	int64_t since = 0;
	assert_false(views_behind_resource(b, &PODS_GVR, &since));
	views_behind_mark(b, &PODS, "/api/v1/pods", 50);
	/* the same view, its selector written another way: one mark */
	struct store_view spaced = PODS;
	spaced.field_selector = "spec.nodeName==n1";
	views_behind_mark(b, &spaced, "/api/v1/pods", 70);
	assert_int_equal(views_behind_count(b), 1);
	assert_int_equal(atomic_load(&f->m.store_views_behind), 1);
	assert_true(views_behind_resource(b, &PODS_GVR, &since));
	assert_true(since > 0);
	assert_false(views_behind_resource(b, &NODES_GVR, &since));
	/* a list older than the newest lost event does not repair it */
	views_behind_listed(b, &PODS, 60);
	assert_int_equal(views_behind_count(b), 1);
	/* another view's list does not either */
	struct store_view other = PODS;
	other.field_selector = "";
	views_behind_listed(b, &other, 100);
	assert_int_equal(views_behind_count(b), 1);
	views_behind_listed(b, &PODS, 70);
	assert_int_equal(views_behind_count(b), 0);
	assert_int_equal(atomic_load(&f->m.store_views_behind), 0);
	assert_false(views_behind_resource(b, &PODS_GVR, &since));
	views_behind_free(b);
}

static void test_survives_restart_in_place(void **state)
{
	struct fx *f = *state;
	struct views_behind *b = views_behind_open(f->file, &f->m);
	assert_non_null(b);
	off_t size = file_size(f->file);
	assert_true(size > 0); /* allocated at open, while there is room */
	views_behind_mark(b, &PODS, "/api/v1/pods", 5);
	assert_int_equal(file_size(f->file), size); /* rewritten in place */
	views_behind_free(b);

	struct metrics m2 = {0};
	b = views_behind_open(f->file, &m2);
	assert_int_equal(views_behind_count(b), 1);
	assert_int_equal(atomic_load(&m2.store_views_behind), 1);
	int64_t since = 0;
	assert_true(views_behind_resource(b, &PODS_GVR, &since));
	/* after a restart any list of the view repairs it: the lost rv is not kept */
	views_behind_listed(b, &PODS, 1);
	assert_int_equal(views_behind_count(b), 0);
	views_behind_free(b);
	b = views_behind_open(f->file, NULL);
	assert_int_equal(views_behind_count(b), 0);
	views_behind_free(b);
	assert_int_equal(file_size(f->file), size);
}

/* Which slot holds the newest generation: the one whose header line has
 * the larger number. */
static long newest_slot(const char *file, long slot_bytes)
{
	FILE *fp = fopen(file, "rb");
	assert_non_null(fp);
	unsigned long long g[2] = {0, 0};
	for (int s = 0; s < 2; s++) {
		assert_int_equal(fseek(fp, s * slot_bytes, SEEK_SET), 0);
		assert_int_equal(fscanf(fp, "yurthub-views-behind %llu", &g[s]), 1);
	}
	fclose(fp);
	return g[1] > g[0] ? 1 : 0;
}

static void test_torn_slot_keeps_the_state_before(void **state)
{
	struct fx *f = *state;
	struct views_behind *b = views_behind_open(f->file, NULL);
	views_behind_mark(b, &PODS, "/api/v1/pods", 5); /* state A: one mark */
	struct store_view nodes = {"kubelet", {"", "v1", "nodes"}, "", "", "metadata.name=n1"};
	views_behind_mark(b, &nodes, "/api/v1/nodes", 6); /* state B: two */
	views_behind_free(b);
	long slot_bytes = (long)file_size(f->file) / 2;
	/* a power cut in the middle of writing B: its slot is garbage */
	long s = newest_slot(f->file, slot_bytes);
	int fd = open(f->file, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "xxxxxxxx", 8, s * slot_bytes + 30), 8);
	assert_int_equal(close(fd), 0);
	b = views_behind_open(f->file, NULL);
	assert_int_equal(views_behind_count(b), 1); /* A */
	int64_t since;
	assert_true(views_behind_resource(b, &PODS_GVR, &since));
	views_behind_free(b);
}

static void count_info(void *ctx, const struct view_behind_info *v)
{
	int *n = ctx;
	assert_string_equal(v->component, "kubelet");
	assert_string_equal(v->resource, "pods");
	assert_string_equal(v->field_selector, "spec.nodeName=n1");
	(*n)++;
}

static void test_decode_for_verify(void **state)
{
	struct fx *f = *state;
	struct views_behind *b = views_behind_open(f->file, NULL);
	views_behind_mark(b, &PODS, "/api/v1/pods", 5);
	views_behind_free(b);
	char *text = NULL;
	size_t len = 0;
	FILE *fp = fopen(f->file, "rb");
	assert_non_null(fp);
	text = malloc(1 << 17);
	len = fread(text, 1, 1 << 17, fp);
	fclose(fp);
	int n = 0;
	assert_int_equal(views_behind_decode(text, len, count_info, &n), 1);
	assert_int_equal(n, 1);
	memset(text, ' ', len);
	assert_int_equal(views_behind_decode(text, len, count_info, &n), -1);
	assert_int_equal(views_behind_decode("", 0, count_info, &n), -1);
	/* a header cut short, then only blanks to the end of the bytes:
	 * never read past them */
	static const char cut[] = "yurthub-views-behind\n";
	char *blank = malloc(4096);
	assert_non_null(blank);
	memset(blank, ' ', 4096);
	memcpy(blank, cut, sizeof cut - 1);
	assert_int_equal(views_behind_decode(blank, 4096, count_info, &n), -1);
	free(blank);
	assert_int_equal(n, 1);
	free(text);
}

static void test_memory_only(void **state)
{
	(void)state;
	struct views_behind *b = views_behind_open(NULL, NULL);
	views_behind_mark(b, &PODS, "/api/v1/pods", 5);
	assert_int_equal(views_behind_count(b), 1);
	views_behind_wake(b);
	views_behind_free(b);
	/* NULL is no mark store at all */
	views_behind_mark(NULL, &PODS, "/api/v1/pods", 5);
	views_behind_listed(NULL, &PODS, 5);
	assert_int_equal(views_behind_count(NULL), 0);
	views_behind_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_mark_and_list, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_survives_restart_in_place, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_torn_slot_keeps_the_state_before, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_decode_for_verify, setup, teardown),
	    cmocka_unit_test(test_memory_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
