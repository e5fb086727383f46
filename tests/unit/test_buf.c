/*
 * test_buf.c - the growable byte buffer: growth across many reallocations,
 * printf, JSON string escaping, and the reset/steal/cstr contract.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"

/* ---- helpers ---- */

/* The buffer's invariants: NUL right after len, len < cap when allocated. */
static void assert_buf_sane(const struct buf *b)
{
	if (!b->data) {
		assert_int_equal(b->len, 0);
		assert_int_equal(b->cap, 0);
		return;
	}
	assert_true(b->len < b->cap);
	assert_int_equal(b->data[b->len], '\0');
}

/* buf_append_json_str of (s, len) must produce exactly want. */
static void assert_json_str(const char *s, size_t len, const char *want)
{
	struct buf b = BUF_INIT;
	assert_int_equal(buf_append_json_str(&b, s, len), 0);
	assert_buf_sane(&b);
	assert_int_equal(b.len, strlen(want));
	assert_string_equal(b.data, want);
	buf_free(&b);
}

/* ---- append and growth ---- */

static void test_init_is_empty(void **state)
{
	struct buf b = BUF_INIT;
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.cap, 0);
	assert_non_null(buf_cstr(&b));
	assert_string_equal(buf_cstr(&b), "");
	buf_free(&b);
	assert_null(b.data);
}

static void test_append_empty_allocates_terminated(void **state)
{
	struct buf b = BUF_INIT;
	assert_int_equal(buf_append(&b, "", 0), 0);
	assert_int_equal(b.len, 0);
	assert_non_null(b.data);
	assert_string_equal(b.data, "");
	assert_buf_sane(&b);
	buf_free(&b);
}

static void test_append_grows_across_reallocations(void **state)
{
	struct buf b = BUF_INIT;
	size_t caps_seen = 0, last_cap = 0;
	/* 100,000 bytes, one to seven at a time: many reallocations. */
	size_t total = 0;
	for (size_t i = 0; total < 100000; i++) {
		char chunk[8];
		size_t n = 1 + i % 7;
		for (size_t j = 0; j < n; j++)
			chunk[j] = (char)('a' + (total + j) % 26);
		assert_int_equal(buf_append(&b, chunk, n), 0);
		total += n;
		assert_int_equal(b.len, total);
		assert_buf_sane(&b);
		if (b.cap != last_cap) {
			assert_true(b.cap > last_cap);
			last_cap = b.cap;
			caps_seen++;
		}
	}
	assert_true(caps_seen >= 10);
	for (size_t i = 0; i < total; i++)
		assert_int_equal(b.data[i], (char)('a' + i % 26));
	assert_int_equal(strlen(b.data), total);
	buf_free(&b);
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.cap, 0);
}

static void test_append_binary_with_nul(void **state)
{
	struct buf b = BUF_INIT;
	const char bin[] = {'a', '\0', 'b', '\0', 'c'};
	assert_int_equal(buf_append(&b, bin, sizeof bin), 0);
	assert_int_equal(b.len, 5);
	assert_memory_equal(b.data, bin, sizeof bin);
	assert_int_equal(b.data[5], '\0');
	buf_free(&b);
}

static void test_append_str_and_char(void **state)
{
	struct buf b = BUF_INIT;
	assert_int_equal(buf_append_str(&b, "hello"), 0);
	assert_int_equal(buf_append_char(&b, ','), 0);
	assert_int_equal(buf_append_char(&b, ' '), 0);
	assert_int_equal(buf_append_str(&b, "world"), 0);
	assert_int_equal(buf_append_str(&b, ""), 0);
	assert_string_equal(b.data, "hello, world");
	assert_int_equal(b.len, 12);
	assert_buf_sane(&b);
	/* 5000 single chars, crossing several capacities. */
	for (int i = 0; i < 5000; i++)
		assert_int_equal(buf_append_char(&b, (char)('0' + i % 10)), 0);
	assert_int_equal(b.len, 5012);
	assert_int_equal(b.data[12], '0');
	assert_int_equal(b.data[5011], '9');
	assert_buf_sane(&b);
	buf_free(&b);
}

static void test_append_self_content_after_growth(void **state)
{
	/* A large append to a small buffer in one go. */
	struct buf b = BUF_INIT;
	size_t n = 1 << 20;
	char *big = malloc(n);
	assert_non_null(big);
	for (size_t i = 0; i < n; i++)
		big[i] = (char)(i * 31 + 7);
	assert_int_equal(buf_append_str(&b, "x"), 0);
	assert_int_equal(buf_append(&b, big, n), 0);
	assert_int_equal(b.len, n + 1);
	assert_int_equal(b.data[0], 'x');
	assert_memory_equal(b.data + 1, big, n);
	assert_buf_sane(&b);
	free(big);
	buf_free(&b);
}

static void test_reserve(void **state)
{
	struct buf b = BUF_INIT;
	assert_int_equal(buf_reserve(&b, 1000), 0);
	assert_true(b.cap >= 1001);
	assert_int_equal(b.len, 0);
	char *before = b.data;
	size_t cap = b.cap;
	/* Appending within the reservation never moves the data. */
	for (int i = 0; i < 1000; i++)
		assert_int_equal(buf_append_char(&b, 'z'), 0);
	assert_ptr_equal(b.data, before);
	assert_int_equal(b.cap, cap);
	assert_int_equal(b.len, 1000);
	assert_buf_sane(&b);
	/* A reservation that cannot be represented fails with ENOMEM. */
	errno = 0;
	assert_int_equal(buf_reserve(&b, SIZE_MAX), -1);
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(b.len, 1000);
	assert_ptr_equal(b.data, before);
	buf_free(&b);
}

/* ---- printf ---- */

static void test_printf_basic(void **state)
{
	struct buf b = BUF_INIT;
	assert_int_equal(buf_printf(&b, "%s-%d-%llu", "rv", -5, 18446744073709551615ULL), 0);
	assert_string_equal(b.data, "rv--5-18446744073709551615");
	assert_int_equal(b.len, strlen("rv--5-18446744073709551615"));
	assert_int_equal(buf_printf(&b, "%s", ""), 0);
	assert_string_equal(b.data, "rv--5-18446744073709551615");
	assert_buf_sane(&b);
	buf_free(&b);
}

static void test_printf_empty_on_fresh_buffer(void **state)
{
	struct buf b = BUF_INIT;
	assert_int_equal(buf_printf(&b, "%s", ""), 0);
	assert_int_equal(b.len, 0);
	assert_string_equal(buf_cstr(&b), "");
	assert_buf_sane(&b);
	buf_free(&b);
}

static void test_printf_growth(void **state)
{
	struct buf b = BUF_INIT;
	char want[32];
	size_t expect_len = 0;
	for (int i = 0; i < 20000; i++) {
		assert_int_equal(buf_printf(&b, "%d,", i), 0);
		expect_len += (size_t)snprintf(want, sizeof want, "%d,", i);
		assert_int_equal(b.len, expect_len);
	}
	assert_buf_sane(&b);
	/* Check the content back. */
	const char *p = b.data;
	for (int i = 0; i < 20000; i++) {
		char *end;
		long v = strtol(p, &end, 10);
		assert_int_equal(v, i);
		assert_int_equal(*end, ',');
		p = end + 1;
	}
	assert_int_equal(*p, '\0');
	buf_free(&b);
}

static void test_printf_single_large(void **state)
{
	struct buf b = BUF_INIT;
	assert_int_equal(buf_append_str(&b, "<"), 0);
	assert_int_equal(buf_printf(&b, "%0*d>", 100000, 7), 0);
	assert_int_equal(b.len, 1 + 100000 + 1);
	assert_int_equal(b.data[0], '<');
	assert_int_equal(b.data[1], '0');
	assert_int_equal(b.data[100000], '7');
	assert_int_equal(b.data[100001], '>');
	assert_buf_sane(&b);
	buf_free(&b);
}

static int vprintf_helper(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = buf_vprintf(b, fmt, ap);
	va_end(ap);
	return r;
}

static void test_vprintf(void **state)
{
	struct buf b = BUF_INIT;
	assert_int_equal(vprintf_helper(&b, "%s=%x", "key", 255), 0);
	assert_int_equal(vprintf_helper(&b, "|%5s|", "ab"), 0);
	assert_string_equal(b.data, "key=ff|   ab|");
	buf_free(&b);
}

/* ---- JSON strings ---- */

static void test_json_plain(void **state)
{
	assert_json_str("", 0, "\"\"");
	assert_json_str("abc", 3, "\"abc\"");
	assert_json_str("a b/c", 5, "\"a b/c\"");
}

static void test_json_quotes_and_backslash(void **state)
{
	assert_json_str("\"", 1, "\"\\\"\"");
	assert_json_str("\\", 1, "\"\\\\\"");
	assert_json_str("a\"b\\c", 5, "\"a\\\"b\\\\c\"");
	assert_json_str("\\\"\\\"", 4, "\"\\\\\\\"\\\\\\\"\"");
}

static void test_json_every_control_char(void **state)
{
	for (unsigned c = 0; c < 0x20; c++) {
		char in[3] = {'x', (char)c, 'y'};
		char want[16];
		switch (c) {
		case '\n':
			strcpy(want, "\"x\\ny\"");
			break;
		case '\r':
			strcpy(want, "\"x\\ry\"");
			break;
		case '\t':
			strcpy(want, "\"x\\ty\"");
			break;
		default:
			/* \b and \f may be written either way; this code uses \u. */
			snprintf(want, sizeof want, "\"x\\u%04xy\"", c);
		}
		struct buf b = BUF_INIT;
		assert_int_equal(buf_append_json_str(&b, in, 3), 0);
		/* Whatever the spelling, it must decode back to the byte. */
		json_error_t jerr;
		json_t *j = json_loadb(b.data, b.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
		assert_non_null(j);
		assert_true(json_is_string(j));
		assert_int_equal(json_string_length(j), 3);
		assert_memory_equal(json_string_value(j), in, 3);
		json_decref(j);
		if (c != '\b' && c != '\f') {
			assert_string_equal(b.data, want);
		} else {
			const char *short_form = c == '\b' ? "\"x\\by\"" : "\"x\\fy\"";
			assert_true(!strcmp(b.data, want) || !strcmp(b.data, short_form));
		}
		/* No raw control byte may be left in the output. */
		for (size_t i = 0; i < b.len; i++)
			assert_true((unsigned char)b.data[i] >= 0x20);
		buf_free(&b);
	}
}

static void test_json_all_controls_in_one_string(void **state)
{
	char in[0x20];
	for (int i = 0; i < 0x20; i++)
		in[i] = (char)i;
	struct buf b = BUF_INIT;
	assert_int_equal(buf_append_str(&b, "prefix:"), 0);
	assert_int_equal(buf_append_json_str(&b, in, sizeof in), 0);
	assert_int_equal(strncmp(b.data, "prefix:", 7), 0);
	json_t *j = json_loadb(b.data + 7, b.len - 7, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	assert_non_null(j);
	assert_int_equal(json_string_length(j), sizeof in);
	assert_memory_equal(json_string_value(j), in, sizeof in);
	json_decref(j);
	buf_free(&b);
}

static void test_json_embedded_nul_uses_len(void **state)
{
	assert_json_str("a\0b", 3, "\"a\\u0000b\"");
	/* len shorter than the string: only len bytes. */
	assert_json_str("abcdef", 3, "\"abc\"");
}

static void test_json_del_and_utf8_passthrough(void **state)
{
	/* DEL is legal in JSON strings; multibyte UTF-8 passes untouched. */
	assert_json_str("\x7f", 1, "\"\x7f\"");
	const char *utf8 = "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80 \xe4\xb8\xad";
	struct buf want = BUF_INIT;
	assert_int_equal(buf_printf(&want, "\"%s\"", utf8), 0);
	assert_json_str(utf8, strlen(utf8), want.data);
	buf_free(&want);
	/* Round trip through a JSON parser. */
	struct buf b = BUF_INIT;
	assert_int_equal(buf_append_json_str(&b, utf8, strlen(utf8)), 0);
	json_t *j = json_loadb(b.data, b.len, JSON_DECODE_ANY, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(j), utf8);
	json_decref(j);
	buf_free(&b);
}

static void test_json_long_string_growth(void **state)
{
	/* Mixed content long enough to force reallocations mid-escape. */
	struct buf in = BUF_INIT;
	for (int i = 0; i < 5000; i++)
		assert_int_equal(buf_append(&in, "ab\"\\\n\x01", 6), 0);
	struct buf b = BUF_INIT;
	assert_int_equal(buf_append_json_str(&b, in.data, in.len), 0);
	/* "ab" + \" + \\ + \n + \u0001 = 2+2+2+2+6 = 14 per group, plus quotes. */
	assert_int_equal(b.len, 5000 * 14 + 2);
	json_t *j = json_loadb(b.data, b.len, JSON_DECODE_ANY, NULL);
	assert_non_null(j);
	assert_int_equal(json_string_length(j), in.len);
	assert_memory_equal(json_string_value(j), in.data, in.len);
	json_decref(j);
	buf_free(&in);
	buf_free(&b);
}

/* ---- reset, steal, cstr ---- */

static void test_reset_keeps_memory(void **state)
{
	struct buf b = BUF_INIT;
	assert_int_equal(buf_append_str(&b, "some content here"), 0);
	char *data = b.data;
	size_t cap = b.cap;
	buf_reset(&b);
	assert_int_equal(b.len, 0);
	assert_ptr_equal(b.data, data);
	assert_int_equal(b.cap, cap);
	assert_string_equal(buf_cstr(&b), "");
	assert_int_equal(buf_append_str(&b, "new"), 0);
	assert_string_equal(b.data, "new");
	assert_int_equal(b.len, 3);
	buf_free(&b);
}

static void test_reset_of_empty(void **state)
{
	struct buf b = BUF_INIT;
	buf_reset(&b);
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	assert_string_equal(buf_cstr(&b), "");
}

static void test_steal_gives_ownership(void **state)
{
	struct buf b = BUF_INIT;
	assert_int_equal(buf_append_str(&b, "owned"), 0);
	char *s = buf_steal(&b);
	assert_non_null(s);
	assert_string_equal(s, "owned");
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.cap, 0);
	assert_string_equal(buf_cstr(&b), "");
	/* The buffer is usable again and independent of s. */
	assert_int_equal(buf_append_str(&b, "again"), 0);
	assert_string_equal(s, "owned");
	assert_string_equal(b.data, "again");
	free(s);
	buf_free(&b);
}

static void test_steal_of_empty_gives_empty_string(void **state)
{
	struct buf b = BUF_INIT;
	char *s = buf_steal(&b);
	assert_non_null(s);
	assert_string_equal(s, "");
	free(s);
	/* Also after a reset: data exists but is empty. */
	assert_int_equal(buf_append_str(&b, "x"), 0);
	buf_reset(&b);
	s = buf_steal(&b);
	assert_non_null(s);
	assert_string_equal(s, "");
	assert_null(b.data);
	free(s);
}

static void test_cstr_never_null(void **state)
{
	struct buf b = BUF_INIT;
	const char *c = buf_cstr(&b);
	assert_non_null(c);
	assert_string_equal(c, "");
	assert_int_equal(buf_append_str(&b, "abc"), 0);
	assert_ptr_equal(buf_cstr(&b), b.data);
	assert_string_equal(buf_cstr(&b), "abc");
	buf_free(&b);
	assert_non_null(buf_cstr(&b));
	assert_string_equal(buf_cstr(&b), "");
}

static void test_free_twice_is_safe(void **state)
{
	struct buf b = BUF_INIT;
	assert_int_equal(buf_append_str(&b, "abc"), 0);
	buf_free(&b);
	buf_free(&b);
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.cap, 0);
}

/* ---- UTF-8 ---- */

static void test_utf8_seq_len(void **state)
{
	(void)state;
	assert_int_equal(utf8_seq_len("a", 1), 1);
	assert_int_equal(utf8_seq_len("\xc3\xa9", 2), 2);	  /* é */
	assert_int_equal(utf8_seq_len("\xe2\x82\xac", 3), 3);	  /* € */
	assert_int_equal(utf8_seq_len("\xf0\x9f\x98\x80", 4), 4); /* an emoji */
	assert_int_equal(utf8_seq_len("\xc3", 1), 0);		  /* truncated */
	assert_int_equal(utf8_seq_len("\xc0\xaf", 2), 0);	  /* overlong */
	assert_int_equal(utf8_seq_len("\xe0\x80\xaf", 3), 0);	  /* overlong */
	assert_int_equal(utf8_seq_len("\xed\xa0\x80", 3), 0);	  /* surrogate */
	assert_int_equal(utf8_seq_len("\xf4\x90\x80\x80", 4), 0); /* > U+10FFFF */
	assert_int_equal(utf8_seq_len("\xff", 1), 0);
	assert_int_equal(utf8_seq_len("\x80", 1), 0);
	assert_int_equal(utf8_seq_len("", 0), 0);
}

static void test_utf8_append_replaces_bad_bytes(void **state)
{
	(void)state;
	struct buf b = BUF_INIT;
	const char in[] = "ok \xc3\xa9 \xff\xfe x\xe2\x82";
	assert_int_equal(buf_append_utf8(&b, in, sizeof in - 1), 0);
	assert_buf_sane(&b);
	assert_string_equal(b.data,
			    "ok \xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd x\xef\xbf\xbd\xef\xbf\xbd");
	buf_reset(&b);
	assert_int_equal(buf_append_utf8(&b, "plain", 5), 0);
	assert_string_equal(b.data, "plain");
	buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_init_is_empty),
	    cmocka_unit_test(test_append_empty_allocates_terminated),
	    cmocka_unit_test(test_append_grows_across_reallocations),
	    cmocka_unit_test(test_append_binary_with_nul),
	    cmocka_unit_test(test_append_str_and_char),
	    cmocka_unit_test(test_append_self_content_after_growth),
	    cmocka_unit_test(test_reserve),
	    cmocka_unit_test(test_printf_basic),
	    cmocka_unit_test(test_printf_empty_on_fresh_buffer),
	    cmocka_unit_test(test_printf_growth),
	    cmocka_unit_test(test_printf_single_large),
	    cmocka_unit_test(test_vprintf),
	    cmocka_unit_test(test_json_plain),
	    cmocka_unit_test(test_json_quotes_and_backslash),
	    cmocka_unit_test(test_json_every_control_char),
	    cmocka_unit_test(test_json_all_controls_in_one_string),
	    cmocka_unit_test(test_json_embedded_nul_uses_len),
	    cmocka_unit_test(test_json_del_and_utf8_passthrough),
	    cmocka_unit_test(test_json_long_string_growth),
	    cmocka_unit_test(test_reset_keeps_memory),
	    cmocka_unit_test(test_reset_of_empty),
	    cmocka_unit_test(test_steal_gives_ownership),
	    cmocka_unit_test(test_steal_of_empty_gives_empty_string),
	    cmocka_unit_test(test_cstr_never_null),
	    cmocka_unit_test(test_free_twice_is_safe),
	    cmocka_unit_test(test_utf8_seq_len),
	    cmocka_unit_test(test_utf8_append_replaces_bad_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
