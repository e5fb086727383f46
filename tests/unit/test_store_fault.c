/*
 * test_store_fault.c - store_object_fault(), the check every object read
 * from a store passes before it is served (storage/store.h): what it takes
 * for the object a key names, and the garbage it refuses.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "storage/store.h"

static const char *fault(const char *ns, const char *name, const char *json)
{
	return store_object_fault(ns, name, json, strlen(json));
}

static void test_the_object_of_the_key(void **state)
{
	(void)state;
	assert_null(fault("a", "p", "{\"metadata\":{\"name\":\"p\",\"namespace\":\"a\"}}"));
	/* other fields, nested containers, whitespace, escapes */
	assert_null(fault("a", "p",
			  " {\"kind\":\"Pod\",\"spec\":{\"metadata\":{\"name\":\"x\"}},"
			  "\"metadata\":{\"labels\":{\"name\":\"x\"},\"name\":\"\\u0070\","
			  "\"ownerReferences\":[{\"name\":\"y\"}],\"namespace\":\"a\"},"
			  "\"status\":[1,2.5e3,true,null]}\n"));
	/* namespace absent, or empty, or not asked about */
	assert_null(fault("a", "p", "{\"metadata\":{\"name\":\"p\"}}"));
	assert_null(fault("a", "p", "{\"metadata\":{\"name\":\"p\",\"namespace\":\"\"}}"));
	assert_null(fault("", "n1", "{\"metadata\":{\"name\":\"n1\",\"namespace\":\"x\"}}"));
	assert_null(fault(NULL, "n1", "{\"metadata\":{\"name\":\"n1\"}}"));
	/* the last of duplicate keys counts, as for JSON decoders */
	assert_null(fault("a", "p", "{\"metadata\":{\"name\":\"q\",\"name\":\"p\"}}"));
}

static void test_garbage(void **state)
{
	(void)state;
	assert_string_equal(fault("a", "p", "not json {"), "not a single JSON object");
	assert_string_equal(store_object_fault("a", "p", "\0\0\0\0", 4),
			    "not a single JSON object");
	assert_string_equal(store_object_fault("a", "p", "", 0), "empty");
	assert_string_equal(store_object_fault("a", "p", "k8s\0\n\x02v1", 8),
			    "protobuf written by a kube-apiserver, not JSON");
	assert_string_equal(fault("a", "p", "[{\"metadata\":{\"name\":\"p\"}}]"),
			    "not a single JSON object");
	assert_string_equal(fault("a", "p", "\"p\""), "not a single JSON object");
	assert_string_equal(fault("a", "p", "{\"metadata\":{\"name\":\"p\"}} {}"),
			    "not a single JSON object");
	assert_string_equal(fault("a", "p", "{\"metadata\":{\"name\":\"p\"}"),
			    "not a single JSON object");
	assert_string_equal(fault("a", "p", "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"x\":[1,}}"),
			    "not a single JSON object");
	assert_string_equal(fault("a", "p", "{\"metadata\":{\"name\":\"p\"},\"x\":\"\xff\"}"),
			    "not a single JSON object");
	size_t big = 1400 * 1024;
	char *x = malloc(big);
	assert_non_null(x);
	memset(x, 'x', big);
	assert_string_equal(store_object_fault("a", "p", x, big), "not a single JSON object");
	free(x);
}

static void test_another_object(void **state)
{
	(void)state;
	assert_string_equal(fault("a", "p", "{}"), "no metadata.name");
	assert_string_equal(fault("a", "p", "{\"metadata\":{\"name\":\"\"}}"), "no metadata.name");
	assert_string_equal(fault("a", "p", "{\"metadata\":{\"name\":7}}"), "no metadata.name");
	assert_string_equal(fault("a", "p", "{\"metadata\":\"p\"}"), "no metadata.name");
	/* a name at another depth is not the object's */
	assert_string_equal(
	    fault("a", "p", "{\"name\":\"p\",\"spec\":{\"metadata\":{\"name\":\"p\"}}}"),
	    "no metadata.name");
	assert_string_equal(fault("a", "p", "{\"metadata\":{\"name\":\"q\"}}"),
			    "metadata.name differs from the key's name");
	assert_string_equal(fault("a", "p", "{\"metadata\":{\"name\":\"pp\"}}"),
			    "metadata.name differs from the key's name");
	/* "p\u0000x" cut at its NUL would read as "p" */
	assert_string_equal(fault("a", "p", "{\"metadata\":{\"name\":\"p\\u0000x\"}}"),
			    "metadata.name differs from the key's name");
	assert_string_equal(fault("a", "p", "{\"metadata\":{\"name\":\"p\",\"namespace\":\"b\"}}"),
			    "metadata.namespace differs from the key's namespace");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_the_object_of_the_key),
	    cmocka_unit_test(test_garbage),
	    cmocka_unit_test(test_another_object),
	};
	return cmocka_run_group_tests_name("store_object_fault", tests, NULL, NULL);
}
