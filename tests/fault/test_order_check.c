/*
 * test_order_check.c - the write-order checker catches what it must.
 *
 * Hand-written traces in the injector's format: the right order of a single
 * write, a tree swap and a removal passes; each way of getting it wrong -
 * a rename before the sync, a write after it, no directory sync, the
 * directory synced before the rename instead of after, a syncfs of another
 * file system, an unsynced directory inside a published tree, a journal
 * not yet durable at the swap, a directory made for the file and never
 * synced - is reported.  A checker that never fails proves nothing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "order_check.h"

/* Paths: /c is the cache, /c/s staging, /c/j the journal, /c/a a collection.
 * Inodes on device 1: 1 /c, 2 /c/s, 3 /c/a, 5 /c/j. */
#define CREAT "flags=193" /* O_WRONLY|O_CREAT|O_EXCL */

static void feed(struct order_check *oc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void feed(struct order_check *oc, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	/* the injector separates fields with tabs; the tests write '|' */
	for (char *p = line; *p; p++)
		if (*p == '|')
			*p = '\t';
	assert_int_equal(order_check_line(oc, line), 0);
}

static struct order_check *checker(void)
{
	struct order_check *oc = order_check_new();
	assert_non_null(oc);
	assert_int_equal(order_check_scratch(oc, "/c/s"), 0);
	assert_int_equal(order_check_guard(oc, "/c/j"), 0);
	return oc;
}

/* Expect exactly `want` problems (0: none), the first mentioning `what`. */
static void expect(struct order_check *oc, size_t want, const char *what)
{
	const char *report = order_check_report(oc);
	if (order_check_problems(oc) != want)
		fprintf(stderr, "checker report:\n%s", report);
	assert_int_equal(order_check_problems(oc), want);
	if (what)
		assert_non_null(strstr(report, what));
	order_check_free(oc);
}

/* A staged file: created in staging and written. */
static void stage(struct order_check *oc, const char *name, int ino)
{
	feed(oc, "kind=open|rc=7|" CREAT "|ino=1:%d:f|pino=1:2:d|path=/c/s/%s", ino, name);
	feed(oc, "kind=write|rc=10|len=10|ino=1:%d:f|path=/c/s/%s", ino, name);
}

static void move_in(struct order_check *oc, const char *name, int ino)
{
	feed(oc,
	     "kind=rename|rc=0|flags=0|ino=1:%d:f|pino=1:2:d|pino2=1:3:d|path=/c/s/%s|"
	     "path2=/c/a/%s",
	     ino, name, name);
}

static void test_single_write_in_order(void **state)
{
	struct order_check *oc = checker();
	feed(oc, "kind=mark|text=begin update");
	stage(oc, "w1", 10);
	feed(oc, "kind=fdatasync|rc=0|ino=1:10:f|path=/c/s/w1");
	move_in(oc, "w1", 10);
	feed(oc, "kind=fsync|rc=0|ino=1:3:d|path=/c/a");
	feed(oc, "kind=mark|text=end update rc=0");
	struct order_stats st;
	order_check_stats(oc, &st);
	assert_int_equal(st.renames, 1);
	assert_int_equal(st.ends_checked, 1);
	assert_int_equal(st.renames_in_calls, 1);
	expect(oc, 0, NULL);
}

static void test_rename_before_sync(void **state)
{
	struct order_check *oc = checker();
	feed(oc, "kind=mark|text=begin update");
	stage(oc, "w1", 10);
	move_in(oc, "w1", 10);
	feed(oc, "kind=fdatasync|rc=0|ino=1:10:f|path=/c/a/w1");
	feed(oc, "kind=fsync|rc=0|ino=1:3:d|path=/c/a");
	feed(oc, "kind=mark|text=end update rc=0");
	expect(oc, 1, "publish: /c/s/w1 renamed to /c/a/w1");
}

static void test_write_after_sync(void **state)
{
	struct order_check *oc = checker();
	stage(oc, "w1", 10);
	feed(oc, "kind=fdatasync|rc=0|ino=1:10:f|path=/c/s/w1");
	feed(oc, "kind=write|rc=3|len=3|ino=1:10:f|path=/c/s/w1");
	move_in(oc, "w1", 10);
	expect(oc, 1, "publish:");
}

static void test_no_directory_sync(void **state)
{
	struct order_check *oc = checker();
	feed(oc, "kind=mark|text=begin update");
	stage(oc, "w1", 10);
	feed(oc, "kind=fdatasync|rc=0|ino=1:10:f|path=/c/s/w1");
	move_in(oc, "w1", 10);
	feed(oc, "kind=mark|text=end update rc=0");
	expect(oc, 1, "durable: the call returned success, but the directory of /c/a/w1");
}

static void test_failed_call_needs_no_directory_sync(void **state)
{
	struct order_check *oc = checker();
	feed(oc, "kind=mark|text=begin update");
	stage(oc, "w1", 10);
	feed(oc, "kind=fdatasync|rc=0|ino=1:10:f|path=/c/s/w1");
	move_in(oc, "w1", 10);
	feed(oc, "kind=fsync|rc=-1|err=5|fault=1|ino=1:3:d|path=/c/a");
	feed(oc, "kind=mark|text=end update rc=8");
	expect(oc, 0, NULL);
}

static void test_directory_synced_too_early(void **state)
{
	struct order_check *oc = checker();
	feed(oc, "kind=mark|text=begin update");
	stage(oc, "w1", 10);
	feed(oc, "kind=fdatasync|rc=0|ino=1:10:f|path=/c/s/w1");
	feed(oc, "kind=fsync|rc=0|ino=1:3:d|path=/c/a");
	move_in(oc, "w1", 10);
	feed(oc, "kind=mark|text=end update rc=0");
	expect(oc, 1, "durable:");
}

static void test_syncfs_of_another_file_system(void **state)
{
	struct order_check *oc = checker();
	stage(oc, "w1", 10);
	feed(oc, "kind=syncfs|rc=0|ino=2:1:d|path=/elsewhere");
	move_in(oc, "w1", 10);
	expect(oc, 1, "publish:");

	oc = checker();
	stage(oc, "w1", 10);
	feed(oc, "kind=syncfs|rc=0|ino=1:1:d|path=/c");
	move_in(oc, "w1", 10);
	expect(oc, 0, NULL);
}

/* A new tree r1 with one file in a namespace directory, swapped with /c/a. */
static void build_tree(struct order_check *oc)
{
	feed(oc, "kind=mkdir|rc=0|ino=1:20:d|pino=1:2:d|path=/c/s/r1");
	feed(oc, "kind=mkdir|rc=0|ino=1:21:d|pino=1:20:d|path=/c/s/r1/ns");
	feed(oc, "kind=open|rc=7|" CREAT "|ino=1:22:f|pino=1:21:d|path=/c/s/r1/ns/x");
	feed(oc, "kind=write|rc=10|len=10|ino=1:22:f|path=/c/s/r1/ns/x");
}

static void exchange(struct order_check *oc)
{
	feed(oc, "kind=rename|rc=0|flags=2|ino=1:20:d|ino2=1:3:d|pino=1:2:d|pino2=1:1:d|"
		 "path=/c/s/r1|path2=/c/a");
}

static void test_tree_swap_in_order(void **state)
{
	struct order_check *oc = checker();
	feed(oc, "kind=mark|text=begin replace");
	build_tree(oc);
	feed(oc, "kind=open|rc=8|" CREAT "|ino=1:40:f|pino=1:5:d|path=/c/j/j1");
	feed(oc, "kind=write|rc=10|len=10|ino=1:40:f|path=/c/j/j1");
	feed(oc, "kind=syncfs|rc=0|ino=1:1:d|path=/c");
	exchange(oc);
	feed(oc, "kind=fsync|rc=0|ino=1:1:d|path=/c");
	feed(oc, "kind=fsync|rc=0|ino=1:2:d|path=/c/s");
	feed(oc, "kind=mark|text=end replace rc=0");
	struct order_stats st;
	order_check_stats(oc, &st);
	assert_int_equal(st.exchanges, 1);
	assert_int_equal(st.dir_renames, 1);
	expect(oc, 0, NULL);
}

static void test_tree_with_unsynced_directory(void **state)
{
	struct order_check *oc = checker();
	build_tree(oc);
	/* every file synced, the directories not */
	feed(oc, "kind=fsync|rc=0|ino=1:22:f|path=/c/s/r1/ns/x");
	exchange(oc);
	expect(oc, 2, "publish: /c/s/r1 renamed to /c/a, but it changed");
}

static void test_file_in_tree_written_after_syncfs(void **state)
{
	struct order_check *oc = checker();
	build_tree(oc);
	feed(oc, "kind=syncfs|rc=0|ino=1:1:d|path=/c");
	feed(oc, "kind=write|rc=1|len=1|ino=1:22:f|path=/c/s/r1/ns/x");
	exchange(oc);
	expect(oc, 1, "but /c/s/r1/ns/x under it changed");
}

static void test_journal_not_durable_at_swap(void **state)
{
	struct order_check *oc = checker();
	build_tree(oc);
	feed(oc, "kind=syncfs|rc=0|ino=1:1:d|path=/c");
	feed(oc, "kind=open|rc=8|" CREAT "|ino=1:40:f|pino=1:5:d|path=/c/j/j1");
	feed(oc, "kind=write|rc=10|len=10|ino=1:40:f|path=/c/j/j1");
	exchange(oc);
	/* the record, and the journal directory that holds its new entry */
	expect(oc, 2, "guard: /c/s/r1 renamed to /c/a while /c/j/j1");
}

static void test_removal_syncs_the_directory_left(void **state)
{
	struct order_check *oc = checker();
	feed(oc, "kind=mark|text=begin delete");
	feed(oc, "kind=rename|rc=0|flags=0|ino=1:3:d|pino=1:1:d|pino2=1:2:d|path=/c/a|"
		 "path2=/c/s/d1");
	feed(oc, "kind=fsync|rc=0|ino=1:1:d|path=/c");
	feed(oc, "kind=mark|text=end delete rc=0");
	expect(oc, 0, NULL);

	oc = checker();
	feed(oc, "kind=mark|text=begin delete");
	feed(oc, "kind=rename|rc=0|flags=0|ino=1:3:d|pino=1:1:d|pino2=1:2:d|path=/c/a|"
		 "path2=/c/s/d1");
	feed(oc, "kind=fsync|rc=0|ino=1:2:d|path=/c/s");
	feed(oc, "kind=mark|text=end delete rc=0");
	expect(oc, 1, "durable: the call returned success, but the directory of /c/a");
}

static void test_directory_made_for_the_file(void **state)
{
	struct order_check *oc = checker();
	feed(oc, "kind=mark|text=begin create");
	feed(oc, "kind=mkdir|rc=0|ino=1:30:d|pino=1:3:d|path=/c/a/ns");
	stage(oc, "w2", 11);
	feed(oc, "kind=fdatasync|rc=0|ino=1:11:f|path=/c/s/w2");
	feed(oc, "kind=rename|rc=0|flags=0|ino=1:11:f|pino=1:2:d|pino2=1:30:d|path=/c/s/w2|"
		 "path2=/c/a/ns/x");
	feed(oc, "kind=fsync|rc=0|ino=1:30:d|path=/c/a/ns");
	feed(oc, "kind=mark|text=end create rc=0");
	expect(oc, 1, "durable: the call returned success, but /c/a above /c/a/ns/x changed");

	oc = checker();
	feed(oc, "kind=mark|text=begin create");
	feed(oc, "kind=mkdir|rc=0|ino=1:30:d|pino=1:3:d|path=/c/a/ns");
	stage(oc, "w2", 11);
	feed(oc, "kind=fdatasync|rc=0|ino=1:11:f|path=/c/s/w2");
	feed(oc, "kind=rename|rc=0|flags=0|ino=1:11:f|pino=1:2:d|pino2=1:30:d|path=/c/s/w2|"
		 "path2=/c/a/ns/x");
	feed(oc, "kind=syncfs|rc=0|ino=1:1:d|path=/c");
	feed(oc, "kind=mark|text=end create rc=0");
	expect(oc, 0, NULL);
}

/* Names follow renames: a file written under its new path after the swap
 * is found under the tree when the tree moves again. */
static void test_names_follow_renames(void **state)
{
	struct order_check *oc = checker();
	build_tree(oc);
	feed(oc, "kind=syncfs|rc=0|ino=1:1:d|path=/c");
	exchange(oc);
	feed(oc, "kind=write|rc=1|len=1|ino=1:22:f|path=/c/a/ns/x");
	feed(oc, "kind=rename|rc=0|flags=0|ino=1:20:d|pino=1:1:d|pino2=1:1:d|path=/c/a|"
		 "path2=/c/b");
	expect(oc, 1, "but /c/a/ns/x under it changed");
}

static void test_inode_number_reused(void **state)
{
	struct order_check *oc = checker();
	stage(oc, "w1", 10);
	feed(oc, "kind=fdatasync|rc=0|ino=1:10:f|path=/c/s/w1");
	feed(oc, "kind=unlink|rc=0|flags=0|ino=1:10:f|pino=1:2:d|path=/c/s/w1");
	/* the number comes back for a new file, never synced */
	stage(oc, "w2", 10);
	move_in(oc, "w2", 10);
	expect(oc, 1, "publish: /c/s/w2");
}

static void test_garbage_line(void **state)
{
	struct order_check *oc = checker();
	feed(oc, "this is not a trace line");
	expect(oc, 1, "cannot parse");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_single_write_in_order),
	    cmocka_unit_test(test_rename_before_sync),
	    cmocka_unit_test(test_write_after_sync),
	    cmocka_unit_test(test_no_directory_sync),
	    cmocka_unit_test(test_failed_call_needs_no_directory_sync),
	    cmocka_unit_test(test_directory_synced_too_early),
	    cmocka_unit_test(test_syncfs_of_another_file_system),
	    cmocka_unit_test(test_tree_swap_in_order),
	    cmocka_unit_test(test_tree_with_unsynced_directory),
	    cmocka_unit_test(test_file_in_tree_written_after_syncfs),
	    cmocka_unit_test(test_journal_not_durable_at_swap),
	    cmocka_unit_test(test_removal_syncs_the_directory_left),
	    cmocka_unit_test(test_directory_made_for_the_file),
	    cmocka_unit_test(test_names_follow_renames),
	    cmocka_unit_test(test_inode_number_reused),
	    cmocka_unit_test(test_garbage_line),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
