/*
 * test_local_json.c - the JSON the offline answers write around names that
 * come from clients or the cloud (proxy/local_internal.h): a list's kind
 * (a CRD's kind is whatever its discovery document says), the offline
 * token's claims (the namespace and name are the URL's, decoded), and any
 * such string - quotes, backslashes, control bytes and bytes that are not
 * UTF-8 must all come out as valid JSON that reads back as the value.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "proxy/local_internal.h"

/* Parses as JSON (strictly: jansson refuses invalid UTF-8). */
static json_t *parse(const struct buf *b)
{
	json_error_t err;
	json_t *j = json_loadb(buf_cstr(b), b->len, 0, &err);
	if (!j)
		fail_msg("not JSON (%s): %s", err.text, buf_cstr(b));
	return j;
}

static void test_list_head_escapes_kind(void **state)
{
	(void)state;
	struct buf b = BUF_INIT;
	assert_int_equal(local_list_head(&b, "Wid\"get\\\n", "example.com/v1"), 0);
	assert_int_equal(buf_append_str(&b, "]}"), 0);
	json_t *j = parse(&b);
	assert_string_equal(json_string_value(json_object_get(j, "kind")), "Wid\"get\\\nList");
	assert_string_equal(json_string_value(json_object_get(j, "apiVersion")), "example.com/v1");
	assert_true(json_is_array(json_object_get(j, "items")));
	json_decref(j);
	buf_free(&b);
}

static void test_list_head_plain(void **state)
{
	(void)state;
	struct buf b = BUF_INIT;
	assert_int_equal(local_list_head(&b, "Pod", "v1"), 0);
	assert_string_equal(buf_cstr(&b),
			    "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"items\":[");
	buf_free(&b);
}

static void test_token_claims_escape_names(void **state)
{
	(void)state;
	struct buf b = BUF_INIT;
	assert_int_equal(local_token_claims(&b, "de\"fault", "x\",\"admin\":true,\"y", 1234), 0);
	json_t *j = parse(&b);
	assert_string_equal(json_string_value(json_object_get(j, "sub")),
			    "system:serviceaccount:de\"fault:x\",\"admin\":true,\"y");
	assert_null(json_object_get(j, "admin")); /* no claim smuggled in */
	assert_int_equal(json_integer_value(json_object_get(j, "exp")), 1234);
	assert_string_equal(json_string_value(json_object_get(j, "iss")), "yurthub");
	json_decref(j);
	buf_free(&b);
}

static void test_json_string_any_bytes(void **state)
{
	(void)state;
	const char raw[] = "a\x01\x1f\xff\xc3(\\\"z";
	struct buf b = BUF_INIT;
	assert_int_equal(buf_append_str(&b, "["), 0);
	assert_int_equal(local_json_string(&b, raw), 0);
	assert_int_equal(buf_append_str(&b, "]"), 0);
	json_t *j = parse(&b);
	/* control bytes kept (escaped), invalid UTF-8 replaced by U+FFFD */
	assert_string_equal(json_string_value(json_array_get(j, 0)),
			    "a\x01\x1f\xef\xbf\xbd\xef\xbf\xbd(\\\"z");
	json_decref(j);
	buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_list_head_escapes_kind),
	    cmocka_unit_test(test_list_head_plain),
	    cmocka_unit_test(test_token_claims_escape_names),
	    cmocka_unit_test(test_json_string_any_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
