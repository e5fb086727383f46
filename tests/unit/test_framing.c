/*
 * test_framing.c - kube/framing: whether a watch stream passed on so far
 * ends between two events, for the framings kube-apiserver uses (JSON lines,
 * length-prefixed protobuf), whatever pieces the bytes come in.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kube/framing.h"

static const char json_events[] = "{\"type\":\"ADDED\",\"object\":{}}\n"
				  "{\"type\":\"MODIFIED\",\"object\":{}}\n";

/* Fed in pieces of `step` bytes: between events exactly after each '\n'. */
static void test_json_lines_any_split(void **state)
{
	(void)state;
	size_t n = sizeof json_events - 1;
	for (size_t step = 1; step <= n; step++) {
		struct framing f;
		framing_init(&f, "application/json");
		assert_true(framing_between_events(&f)); /* nothing passed yet */
		for (size_t off = 0; off < n; off += step) {
			size_t len = off + step <= n ? step : n - off;
			framing_feed(&f, json_events + off, len);
			assert_int_equal(framing_between_events(&f),
					 json_events[off + len - 1] == '\n');
		}
		assert_true(framing_between_events(&f));
	}
}

/* Two protobuf events behind their 4-byte lengths (one of 0 bytes, one of
 * 300: a length above 255 needs every byte of the prefix). */
static size_t protobuf_stream(unsigned char *out, size_t *ends, size_t *nends)
{
	size_t len = 0;
	*nends = 0;
	const uint32_t sizes[] = {5, 0, 300};
	for (size_t i = 0; i < 3; i++) {
		uint32_t s = sizes[i];
		out[len++] = (unsigned char)(s >> 24);
		out[len++] = (unsigned char)(s >> 16);
		out[len++] = (unsigned char)(s >> 8);
		out[len++] = (unsigned char)s;
		memset(out + len, '\n', s); /* a newline means nothing here */
		len += s;
		ends[(*nends)++] = len;
	}
	return len;
}

static void test_protobuf_lengths_any_split(void **state)
{
	(void)state;
	unsigned char stream[400];
	size_t ends[3], nends;
	size_t n = protobuf_stream(stream, ends, &nends);
	for (size_t step = 1; step <= n; step += step < 8 ? 1 : 37) {
		struct framing f;
		framing_init(&f, "application/vnd.kubernetes.protobuf;stream=watch");
		for (size_t off = 0; off < n; off += step) {
			size_t len = off + step <= n ? step : n - off;
			framing_feed(&f, (const char *)stream + off, len);
			bool at_end = false;
			for (size_t e = 0; e < nends; e++)
				at_end |= ends[e] == off + len;
			assert_int_equal(framing_between_events(&f), at_end);
		}
	}
}

static void test_content_types(void **state)
{
	(void)state;
	struct framing f;
	framing_init(&f, " application/json ; charset=utf-8");
	assert_int_equal(f.kind, FRAMING_LINES);
	framing_init(&f, "APPLICATION/VND.KUBERNETES.PROTOBUF");
	assert_int_equal(f.kind, FRAMING_LENGTH);
	framing_init(&f, "application/jsonx");
	assert_int_equal(f.kind, FRAMING_UNKNOWN);
	framing_init(&f, NULL);
	assert_int_equal(f.kind, FRAMING_UNKNOWN);
	/* an unknown framing is between events only while nothing has passed */
	framing_init(&f, "application/cbor-seq");
	assert_true(framing_between_events(&f));
	framing_feed(&f, "\n", 1);
	assert_false(framing_between_events(&f));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_json_lines_any_split),
	    cmocka_unit_test(test_protobuf_lengths_any_split),
	    cmocka_unit_test(test_content_types),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
