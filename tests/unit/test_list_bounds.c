/*
 * test_list_bounds.c - what one cached list may hold (cache/list_bounds.h):
 * items, bytes, copies of one object; the reason, once over, for good; and
 * many distinct names (the table grows) never counted as copies.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "cache/list_bounds.h"

static struct list_bounds *bounds(size_t items, uint64_t bytes, unsigned copies)
{
	struct list_limits lim = {items, bytes, copies};
	struct list_bounds *b = list_bounds_new(&lim);
	assert_non_null(b);
	return b;
}

static void test_defaults(void **state)
{
	(void)state;
	assert_int_equal(LIST_LIMITS_DEFAULT.items, 300000);
	assert_true(LIST_LIMITS_DEFAULT.bytes == 512ull << 20);
	assert_int_equal(LIST_LIMITS_DEFAULT.copies, 4);
	/* the largest list of a supported cluster passes: 150,000 pods, 3 KiB each */
	struct list_bounds *b = list_bounds_new(&LIST_LIMITS_DEFAULT);
	char name[32];
	for (int i = 0; i < 150000; i++) {
		snprintf(name, sizeof name, "pod-%d", i);
		assert_null(list_bounds_add(b, i % 2 ? "ns-a" : "ns-b", name, 3 << 10));
	}
	list_bounds_free(b);
	list_bounds_free(NULL);
}

static void test_items(void **state)
{
	(void)state;
	struct list_bounds *b = bounds(3, 1 << 20, 4);
	assert_null(list_bounds_add(b, "a", "p1", 10));
	assert_null(list_bounds_add(b, "a", "p2", 10));
	assert_null(list_bounds_add(b, "a", "p3", 10));
	assert_string_equal(list_bounds_add(b, "a", "p4", 10), "more than 3 items");
	/* over for good, whatever comes */
	assert_string_equal(list_bounds_add(b, "a", "p5", 0), "more than 3 items");
	list_bounds_free(b);
}

static void test_bytes(void **state)
{
	(void)state;
	struct list_bounds *b = bounds(100, 1000, 4);
	assert_null(list_bounds_add(b, "a", "p1", 600));
	assert_null(list_bounds_add(b, "a", "p2", 400));
	assert_string_equal(list_bounds_add(b, "a", "p3", 1), "more than 1000 bytes of items");
	list_bounds_free(b);
	b = bounds(100, 2u << 20, 4);
	assert_string_equal(list_bounds_add(b, "", "big", (2u << 20) + 1),
			    "more than 2 MiB of items");
	list_bounds_free(b);
}

static void test_copies_of_one_object(void **state)
{
	(void)state;
	/* four copies pass (the store keeps the last), the fifth does not */
	struct list_bounds *b = bounds(100, 1 << 20, 4);
	for (int i = 0; i < 4; i++)
		assert_null(list_bounds_add(b, "default", "dup", 100));
	assert_string_equal(list_bounds_add(b, "default", "dup", 100),
			    "default/dup listed more than 4 times");
	list_bounds_free(b);
	/* copies counted per object, interleaved with others; the namespace
	 * is part of the name: a/x and b/x are two objects, as are "a","bx"
	 * and "ab","x" */
	b = bounds(100, 1 << 20, 2);
	for (int i = 0; i < 2; i++) {
		assert_null(list_bounds_add(b, "a", "x", 1));
		assert_null(list_bounds_add(b, "b", "x", 1));
		assert_null(list_bounds_add(b, "a", "bx", 1));
		assert_null(list_bounds_add(b, "ab", "x", 1));
		assert_null(list_bounds_add(b, "", "x", 1));
	}
	assert_string_equal(list_bounds_add(b, "", "x", 1), "x listed more than 2 times");
	list_bounds_free(b);
}

/* 100,000 distinct names, then each again: the table grows and loses
 * none; only a third copy is over. */
static void test_many_names(void **state)
{
	(void)state;
	struct list_bounds *b = bounds(1000000, 1ull << 30, 2);
	char name[32];
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 100000; i++) {
			snprintf(name, sizeof name, "n%d", i);
			assert_null(list_bounds_add(b, "ns", name, 100));
		}
	assert_string_equal(list_bounds_add(b, "ns", "n77", 100),
			    "ns/n77 listed more than 2 times");
	list_bounds_free(b);
}

/* A hostile name is cut in the reason, which stays one bounded line. */
static void test_long_names_in_reason(void **state)
{
	(void)state;
	char ns[300], name[300];
	memset(ns, 's', sizeof ns - 1);
	ns[sizeof ns - 1] = '\0';
	memset(name, 'n', sizeof name - 1);
	name[sizeof name - 1] = '\0';
	struct list_bounds *b = bounds(100, 1 << 20, 1);
	assert_null(list_bounds_add(b, ns, name, 1));
	const char *why = list_bounds_add(b, ns, name, 1);
	assert_non_null(why);
	assert_true(strlen(why) < 200);
	assert_non_null(strstr(why, "listed more than 1 times"));
	list_bounds_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),   cmocka_unit_test(test_items),
	    cmocka_unit_test(test_bytes),      cmocka_unit_test(test_copies_of_one_object),
	    cmocka_unit_test(test_many_names), cmocka_unit_test(test_long_names_in_reason),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
