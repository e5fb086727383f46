/*
 * test_json_scan.c - util/json_scan: which texts it accepts, the tokens it
 * reports, the same at every cut into two chunks, what a skipped container
 * still checks, how strings are unescaped, and its bounds.
 * (fuzz/fuzz_json_scan.c compares it with yajl on any bytes.)
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "util/buf.h"
#include "util/json_scan.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

struct rec {
	struct buf b;
	int depth;
	int skip_at; /* answer SKIP to containers opened at this depth; -1: never */
};

static int record(void *ctx, enum json_token t, const char *s, size_t len)
{
	static const char tags[] = "ntf#sk{}[]";
	struct rec *r = ctx;

	buf_printf(&r->b, "%c", tags[t]);
	if (s)
		buf_printf(&r->b, "(%.*s)", (int)len, s);
	if (t == JSON_MAP_START || t == JSON_ARRAY_START)
		return r->depth++ == r->skip_at ? JSON_SCAN_SKIP : JSON_SCAN_GO;
	if (t == JSON_MAP_END || t == JSON_ARRAY_END)
		r->depth--;
	return JSON_SCAN_GO;
}

static const struct json_scan_limits WIDE = {64, 1u << 20, 64};

/* Scans text in two chunks cut at `cut` (its length: one chunk). */
static int scan(const char *text, size_t cut, bool multiple, int skip_at, struct buf *out)
{
	struct rec r = {BUF_INIT, 0, skip_at};
	struct json_scan *s = json_scan_new(&WIDE, multiple, record, &r);
	size_t len = strlen(text);
	int rc;

	assert_non_null(s);
	rc = json_scan_feed(s, text, cut);
	if (rc == 0)
		rc = json_scan_feed(s, text + cut, len - cut);
	if (rc == 0)
		rc = json_scan_finish(s);
	json_scan_free(s);
	if (out)
		*out = r.b;
	else
		buf_free(&r.b);
	return rc;
}

/* The same verdict and tokens at every cut. */
static int scan_every_cut(const char *text, bool multiple, int skip_at, const char *want)
{
	struct buf whole;
	int rc = scan(text, strlen(text), multiple, skip_at, &whole);

	if (want && rc == 0)
		assert_string_equal(buf_cstr(&whole), want);
	for (size_t cut = 0; cut <= strlen(text); cut++) {
		struct buf b;
		int r = scan(text, cut, multiple, skip_at, &b);

		if (r != rc)
			fail_msg("%s: cut at %zu gives %d, whole gives %d", text, cut, r, rc);
		if (rc == 0)
			assert_string_equal(buf_cstr(&b), buf_cstr(&whole));
		buf_free(&b);
	}
	buf_free(&whole);
	return rc;
}

static void test_accepts(void **state)
{
	static const struct {
		const char *text, *tokens;
	} cases[] = {
	    {"{}", "{}"},
	    {" \t\r\n\v\f{ } \n", "{}"}, /* \v and \f as yajl takes them */
	    {"{\"a\":1,\"b\":[true,false,null],\"c\":{}}", "{k(a)#(1)k(b)[tfn]k(c){}}"},
	    {"[-0,0.5,1e3,-1.25E-2,10e+7]", "[#(-0)#(0.5)#(1e3)#(-1.25E-2)#(10e+7)]"},
	    {"\"x\"", "s(x)"},
	    {"[\"\",\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]", "[s()s(\"\\/\b\f\n\r\t)]"},
	    {"\"\\u00e9\\u20AC\"", "s(\xc3\xa9\xe2\x82\xac)"},
	    {"\"\\ud83d\\ude00\"", "s(\xf0\x9f\x98\x80)"}, /* a surrogate pair */
	    /* halves of a pair alone, as yajl reads them: every reader agrees */
	    {"\"a\\ud800b\"", "s(a?b)"},
	    {"\"\\udc00\"", "s(\xed\xb0\x80)"},
	    {"\"\\ud800\\u0041\"", "s(\xf0\x90\x81\x81)"},
	    {"\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"", "s(\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80)"},
	    {"7", "#(7)"},
	};

	(void)state;
	for (size_t i = 0; i < N_ELEMS(cases); i++)
		assert_int_equal(scan_every_cut(cases[i].text, false, -1, cases[i].tokens), 0);
}

static void test_refuses(void **state)
{
	static const char *const bad[] = {
	    "",
	    " ",
	    "{",
	    "{}}",
	    "{}{}",
	    "[1,]",
	    "{\"a\":1,}",
	    "{\"a\"}",
	    "{1:2}",
	    "[01]",
	    "[1.]",
	    "[.5]",
	    "[1e]",
	    "[-]",
	    "[+1]",
	    "[tru]",
	    "[nul]",
	    "[True]",
	    "\"a",
	    "\"\\x\"",
	    "\"\\u12g4\"",
	    "\"\x01\"",
	    "\"\x80\"",
	    "\"\xc3\"",
	    "\"\xc3(\"",
	    "\"\xf8\x88\x80\x80\x80\"",
	    "[1 2]",
	    "{\"a\" 1}",
	    "{\"a\"::1}",
	    "[,]",
	    "/*c*/{}",
	    "{} x",
	    "{}\"a",
	    "[]]",
	    "{]",
	    "[}",
	};

	(void)state;
	for (size_t i = 0; i < N_ELEMS(bad); i++) {
		if (scan_every_cut(bad[i], false, -1, NULL) == 0)
			fail_msg("accepted: %s", bad[i]);
	}
}

/* A watch: values one after another, none at all is fine, one cut is not. */
static void test_stream_of_values(void **state)
{
	(void)state;
	assert_int_equal(scan_every_cut("{\"a\":1}\n{}{}\n", true, -1, "{k(a)#(1)}{}{}"), 0);
	assert_int_equal(scan_every_cut("", true, -1, ""), 0);
	assert_int_equal(scan_every_cut(" \n ", true, -1, ""), 0);
	assert_int_equal(scan_every_cut("{}\n{\"a\"", true, -1, NULL), -1);
	assert_int_equal(scan_every_cut("{}\n\"a", true, -1, NULL), -1);
	assert_int_equal(scan_every_cut("{},{}", true, -1, NULL), -1);
	/* a number ends where the input does */
	assert_int_equal(scan_every_cut("{} 12", true, -1, "{}#(12)"), 0);
}

/* A skipped container reports only its start and end, but is checked as
 * strictly as the rest. */
static void test_skip(void **state)
{
	(void)state;
	assert_int_equal(scan_every_cut("{\"spec\":{\"a\":[1,{\"b\":\"\\u00e9\"}],\"c\":null},"
					"\"n\":\"x\"}",
					false, 1, "{k(spec){}k(n)s(x)}"),
			 0);
	assert_int_equal(scan_every_cut("{\"s\":[[1],[2]],\"t\":[3]}", false, 1, "{k(s)[]k(t)[]}"),
			 0);
	static const char *const bad[] = {
	    "{\"s\":{\"a\":01}}", "{\"s\":[1,]}",  "{\"s\":{\"a\"}}", "{\"s\":[\"\\q\"]}",
	    "{\"s\":[\"\x80\"]}", "{\"s\":[tru]}", "{\"s\":{]}",      "{\"s\":[1 2]}",
	};
	for (size_t i = 0; i < N_ELEMS(bad); i++) {
		if (scan_every_cut(bad[i], false, 1, NULL) == 0)
			fail_msg("accepted when skipped: %s", bad[i]);
	}
}

static void test_stop(void **state)
{
	struct rec r = {BUF_INIT, 0, -1};
	struct json_scan *s;
	const char *detail;

	(void)state;
	s = json_scan_new(&WIDE, false, record, &r);
	assert_int_equal(json_scan_feed(s, "[1,", 3), 0);
	assert_int_equal(json_scan_feed(s, "x", 1), -1);
	assert_int_equal(json_scan_error(s, &detail), JSON_SCAN_MALFORMED);
	assert_non_null(detail);
	assert_int_equal(json_scan_position(s), 3);
	assert_int_equal(json_scan_feed(s, "]", 1), -1); /* once failed, always */
	json_scan_free(s);
	buf_free(&r.b);
}

static void test_bounds(void **state)
{
	static const struct json_scan_limits small = {4, 16, 5};
	struct rec r = {BUF_INIT, 0, 1};
	struct json_scan *s;
	const char *detail;
	char text[64];

	(void)state;
	/* depth: counted in skipped containers too */
	s = json_scan_new(&small, false, record, &r);
	assert_int_equal(json_scan_feed(s, "[[[[1]]]]", 9), 0);
	assert_int_equal(json_scan_finish(s), 0);
	json_scan_free(s);
	s = json_scan_new(&small, false, record, &r);
	assert_int_equal(json_scan_feed(s, "[[[[[1]]]]]", 11), -1);
	assert_int_equal(json_scan_error(s, &detail), JSON_SCAN_TOO_DEEP);
	json_scan_free(s);
	/* a gap: 16 bytes of a token or whitespace pass, 17 do not */
	snprintf(text, sizeof text, "[\"%s\",1]", "0123456789abcd"); /* the string: 16 */
	s = json_scan_new(&small, false, record, &r);
	assert_int_equal(json_scan_feed(s, text, strlen(text)), 0);
	json_scan_free(s);
	snprintf(text, sizeof text, "[\"%s\",1]", "0123456789abcde");
	s = json_scan_new(&small, false, record, &r);
	assert_int_equal(json_scan_feed(s, text, 10), 0);
	assert_int_equal(json_scan_feed(s, text + 10, strlen(text) - 10), -1);
	assert_int_equal(json_scan_error(s, &detail), JSON_SCAN_NO_TOKEN_END);
	json_scan_free(s);
	s = json_scan_new(&small, true, record, &r);
	assert_int_equal(json_scan_feed(s, "                 ", 17), -1);
	assert_int_equal(json_scan_error(s, &detail), JSON_SCAN_NO_TOKEN_END);
	json_scan_free(s);
	/* a number: 5 bytes pass, 6 do not, whole or cut */
	s = json_scan_new(&small, false, record, &r);
	assert_int_equal(json_scan_feed(s, "[12345]", 7), 0);
	json_scan_free(s);
	s = json_scan_new(&small, false, record, &r);
	assert_int_equal(json_scan_feed(s, "[123", 4), 0);
	assert_int_equal(json_scan_feed(s, "456]", 4), -1);
	assert_int_equal(json_scan_error(s, &detail), JSON_SCAN_NUMBER_TOO_LONG);
	json_scan_free(s);
	buf_free(&r.b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_accepts),
	    cmocka_unit_test(test_refuses),
	    cmocka_unit_test(test_stream_of_values),
	    cmocka_unit_test(test_skip),
	    cmocka_unit_test(test_stop),
	    cmocka_unit_test(test_bounds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
