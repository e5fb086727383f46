/*
 * test_base64.c - util/base64: the RFC 4648 test vectors both ways,
 * whitespace, malformed input (which must leave the buffer as it was), and
 * round trips of random binary of every length up to a few blocks.  Then
 * base64url as JWS uses it: unpadded, and strict (one text per value).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/base64.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* RFC 4648 section 10. */
static const struct {
	const char *plain, *encoded;
} rfc_vectors[] = {
    {"", ""},
    {"f", "Zg=="},
    {"fo", "Zm8="},
    {"foo", "Zm9v"},
    {"foob", "Zm9vYg=="},
    {"fooba", "Zm9vYmE="},
    {"foobar", "Zm9vYmFy"},
};

static void test_rfc_encode(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_ELEMS(rfc_vectors); i++) {
		struct buf b = BUF_INIT;
		assert_int_equal(
		    base64_encode(rfc_vectors[i].plain, strlen(rfc_vectors[i].plain), &b), 0);
		assert_string_equal(buf_cstr(&b), rfc_vectors[i].encoded);
		assert_int_equal(b.len, strlen(rfc_vectors[i].encoded));
		buf_free(&b);
	}
}

static void test_rfc_decode(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_ELEMS(rfc_vectors); i++) {
		struct buf b = BUF_INIT;
		const char *e = rfc_vectors[i].encoded;
		assert_int_equal(base64_decode(e, strlen(e), &b), 0);
		assert_int_equal(b.len, strlen(rfc_vectors[i].plain));
		assert_string_equal(buf_cstr(&b), rfc_vectors[i].plain);
		buf_free(&b);
	}
}

/* Both directions append to what the buffer already holds. */
static void test_appends(void **state)
{
	struct buf b = BUF_INIT;
	(void)state;
	assert_int_equal(buf_append_str(&b, "x:"), 0);
	assert_int_equal(base64_encode("foo", 3, &b), 0);
	assert_string_equal(b.data, "x:Zm9v");
	assert_int_equal(base64_decode("YmFy", 4, &b), 0);
	assert_string_equal(b.data, "x:Zm9vbar");
	assert_int_equal(b.len, 9);
	buf_free(&b);
}

/* The whole alphabet, including + and /, and bytes with the top bit set. */
static void test_alphabet(void **state)
{
	static const unsigned char bin[] = {0xfb, 0xff, 0xbf, 0x00, 0x10, 0x83};
	struct buf b = BUF_INIT;
	(void)state;
	assert_int_equal(base64_encode(bin, sizeof bin, &b), 0);
	assert_string_equal(b.data, "+/+/ABCD");
	buf_reset(&b);
	assert_int_equal(base64_decode("+/+/ABCD", 8, &b), 0);
	assert_int_equal(b.len, sizeof bin);
	assert_memory_equal(b.data, bin, sizeof bin);
	buf_reset(&b);
	const char *all = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	assert_int_equal(base64_decode(all, strlen(all), &b), 0);
	assert_int_equal(b.len, 48);
	struct buf again = BUF_INIT;
	assert_int_equal(base64_encode(b.data, b.len, &again), 0);
	assert_string_equal(again.data, all);
	buf_free(&again);
	buf_free(&b);
}

static const struct {
	const char *text, *plain;
} spaced[] = {
    {"Zm9v\nYmFy\n", "foobar"},
    {"Zm9v\r\nYmFy\r\n", "foobar"},
    {"  Zm9vYg==  ", "foob"},
    {"Z m 9 v", "foo"},
    {"\tZm9v\tYmE=\n", "fooba"},
    {"Zg=\n=", "f"},
    {"\n\n", ""},
    {"Zg==\n\n  ", "f"},
};

static void test_whitespace(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_ELEMS(spaced); i++) {
		struct buf b = BUF_INIT;
		if (base64_decode(spaced[i].text, strlen(spaced[i].text), &b) != 0)
			fail_msg("\"%s\" did not decode", spaced[i].text);
		assert_string_equal(buf_cstr(&b), spaced[i].plain);
		buf_free(&b);
	}
}

static const char *const malformed[] = {
    "Zg",	    /* no padding */
    "Zg=",	    /* short padding */
    "Zm9",	    /* partial quantum */
    "Z",	    /* one sextet */
    "Z===",	    /* too much padding */
    "====",	    /* only padding */
    "=Zm9",	    /* padding first */
    "Zg==Zg==",	    /* data after padding */
    "Zm9=v",	    /* data after padding */
    "Zg==x",	    /* trailing garbage */
    "Zg===",	    /* extra '=' */
    "Zm9v!",	    /* bad character */
    "Zm9v-_",	    /* URL alphabet */
    "Zm\x01v",	    /* control character */
    "Zm9v\xc3\xa9", /* non-ASCII */
    "Zm9v\v",	    /* vertical tab is not skipped */
    "Zm9vYmFy=",    /* padding after a full quantum */
    "Zm=9",	    /* '=' inside a quantum */
};

static void test_malformed(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_ELEMS(malformed); i++) {
		struct buf b = BUF_INIT;
		assert_int_equal(buf_append_str(&b, "keep"), 0);
		if (base64_decode(malformed[i], strlen(malformed[i]), &b) != -1)
			fail_msg("malformed \"%s\" decoded to \"%s\"", malformed[i], b.data);
		assert_int_equal(b.len, 4);
		assert_string_equal(b.data, "keep");
		buf_free(&b);
	}
}

/* An embedded NUL is a bad character, not the end of the input. */
static void test_length_is_honoured(void **state)
{
	struct buf b = BUF_INIT;
	(void)state;
	assert_int_equal(base64_decode("Zm9v\0YmFy", 9, &b), -1);
	assert_int_equal(b.len, 0);
	assert_int_equal(base64_decode("Zm9vYmFy", 4, &b), 0);
	assert_string_equal(b.data, "foo");
	buf_free(&b);
	assert_int_equal(base64_encode("foobar", 0, &b), 0);
	assert_string_equal(buf_cstr(&b), "");
	buf_free(&b);
}

/* Random binary of every length 0..300, and one large block. */
static void round_trip(const unsigned char *data, size_t len)
{
	struct buf enc = BUF_INIT, dec = BUF_INIT;
	assert_int_equal(base64_encode(data, len, &enc), 0);
	assert_int_equal(enc.len, (len + 2) / 3 * 4);
	assert_int_equal(base64_decode(enc.data ? enc.data : "", enc.len, &dec), 0);
	assert_int_equal(dec.len, len);
	if (len)
		assert_memory_equal(dec.data, data, len);
	buf_free(&enc);
	buf_free(&dec);
}

static void test_round_trip(void **state)
{
	size_t big = 1 << 20;
	unsigned char *data = malloc(big);
	uint32_t x = 2463534242u;
	(void)state;
	assert_non_null(data);
	for (size_t i = 0; i < big; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5; /* xorshift32 */
		data[i] = (unsigned char)x;
	}
	for (size_t len = 0; len <= 300; len++)
		round_trip(data + len, len);
	round_trip(data, big);
	free(data);
}

/* Wrapped at 76 columns as PEM tools write it. */
static void test_wrapped_round_trip(void **state)
{
	unsigned char data[1000];
	struct buf enc = BUF_INIT, wrapped = BUF_INIT, dec = BUF_INIT;
	(void)state;
	for (size_t i = 0; i < sizeof data; i++)
		data[i] = (unsigned char)(i * 7 + 3);
	assert_int_equal(base64_encode(data, sizeof data, &enc), 0);
	for (size_t i = 0; i < enc.len; i += 76) {
		size_t n = enc.len - i < 76 ? enc.len - i : 76;
		assert_int_equal(buf_append(&wrapped, enc.data + i, n), 0);
		assert_int_equal(buf_append_str(&wrapped, "\r\n"), 0);
	}
	assert_int_equal(base64_decode(wrapped.data, wrapped.len, &dec), 0);
	assert_int_equal(dec.len, sizeof data);
	assert_memory_equal(dec.data, data, sizeof data);
	buf_free(&enc);
	buf_free(&wrapped);
	buf_free(&dec);
}

/* ---- base64url ---- */

/* RFC 4648 section 10 without the padding (RFC 7515 section 2). */
static const struct {
	const char *plain, *encoded;
} url_vectors[] = {
    {"", ""},		{"f", "Zg"},	      {"fo", "Zm8"},	      {"foo", "Zm9v"},
    {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"}, {"foobar", "Zm9vYmFy"},
};

static void test_url_vectors(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_ELEMS(url_vectors); i++) {
		struct buf b = BUF_INIT;
		const char *p = url_vectors[i].plain, *e = url_vectors[i].encoded;
		assert_int_equal(base64url_encode(p, strlen(p), &b), 0);
		assert_string_equal(buf_cstr(&b), e);
		buf_reset(&b);
		assert_int_equal(base64url_decode(e, strlen(e), &b), 0);
		assert_int_equal(b.len, strlen(p));
		assert_string_equal(buf_cstr(&b), p);
		buf_free(&b);
	}
}

/* '-' and '_' where the standard alphabet has '+' and '/'. */
static void test_url_alphabet(void **state)
{
	static const unsigned char bin[] = {0xfb, 0xff, 0xbf, 0x00, 0x10, 0x83};
	struct buf b = BUF_INIT;
	(void)state;
	assert_int_equal(base64url_encode(bin, sizeof bin, &b), 0);
	assert_string_equal(b.data, "-_-_ABCD");
	buf_reset(&b);
	assert_int_equal(base64url_decode("-_-_ABCD", 8, &b), 0);
	assert_int_equal(b.len, sizeof bin);
	assert_memory_equal(b.data, bin, sizeof bin);
	buf_free(&b);
}

static const char *const url_malformed[] = {
    "Zg==",	    /* padding */
    "Zm8=",	    /* padding */
    "Z",	    /* one sextet */
    "Zm9vY",	    /* 1 mod 4 */
    "Zm9v+",	    /* standard alphabet */
    "Zm9v/A",	    /* standard alphabet */
    " Zm9v",	    /* whitespace */
    "Zm9v\n",	    /* whitespace */
    "Zh",	    /* spare bits set: "Zg" is the one text of "f" */
    "Zm9",	    /* spare bits set: "Zm8" is the one text of "fo" */
    "Zm9vYmF",	    /* spare bits set: "Zm9vYmE" is "fooba" */
    "Zm\x01v",	    /* control character */
    "Zm9v\xc3\xa9", /* non-ASCII */
};

static void test_url_malformed(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_ELEMS(url_malformed); i++) {
		struct buf b = BUF_INIT;
		assert_int_equal(buf_append_str(&b, "keep"), 0);
		if (base64url_decode(url_malformed[i], strlen(url_malformed[i]), &b) != -1)
			fail_msg("malformed \"%s\" decoded to \"%s\"", url_malformed[i], b.data);
		assert_int_equal(b.len, 4);
		assert_string_equal(b.data, "keep");
		buf_free(&b);
	}
}

/* Every length: encode, decode back; the text has no padding and no
 * character outside the URL alphabet. */
static void test_url_round_trip(void **state)
{
	unsigned char data[300];
	uint32_t x = 88172645u;
	(void)state;
	for (size_t i = 0; i < sizeof data; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		data[i] = (unsigned char)x;
	}
	for (size_t len = 0; len <= sizeof data; len++) {
		struct buf enc = BUF_INIT, dec = BUF_INIT;
		assert_int_equal(base64url_encode(data, len, &enc), 0);
		assert_int_equal(enc.len, (len * 4 + 2) / 3);
		for (size_t i = 0; i < enc.len; i++)
			assert_null(strchr("+/=", enc.data[i]));
		assert_int_equal(base64url_decode(enc.data ? enc.data : "", enc.len, &dec), 0);
		assert_int_equal(dec.len, len);
		if (len)
			assert_memory_equal(dec.data, data, len);
		buf_free(&enc);
		buf_free(&dec);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rfc_encode),
	    cmocka_unit_test(test_rfc_decode),
	    cmocka_unit_test(test_appends),
	    cmocka_unit_test(test_alphabet),
	    cmocka_unit_test(test_whitespace),
	    cmocka_unit_test(test_malformed),
	    cmocka_unit_test(test_length_is_honoured),
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_wrapped_round_trip),
	    cmocka_unit_test(test_url_vectors),
	    cmocka_unit_test(test_url_alphabet),
	    cmocka_unit_test(test_url_malformed),
	    cmocka_unit_test(test_url_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
