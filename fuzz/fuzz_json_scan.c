/*
 * fuzz_json_scan.c - the JSON tokenizer (src/util/json_scan.c) against
 * yajl, the parser it replaced in the stream decoders.  On any bytes:
 * - fed in the pieces of a chunk plan, it accepts exactly what yajl accepts,
 *   and reports the same tokens with the same text (strings unescaped,
 *   halves of surrogate pairs as yajl decodes them);
 * - asked to skip every container below the top level, it gives the same
 *   verdict, and reports exactly the top-level tokens of the full run.
 *
 * In a stream of values, no value at all is sound, and after the top-level
 * value a token cut by the end of the input is not (yajl says otherwise to
 * both).
 *
 * Input: one byte of chunk plan (fuzz_common.h), one byte whose low bit
 * asks for a stream of values (as a watch is), then the JSON text.
 */
#include <stdint.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "fuzz_common.h"
#include "util/buf.h"
#include "util/json_scan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct log {
	struct buf b;
	size_t depth;
	bool skip;     /* answer JSON_SCAN_SKIP below the top level */
	bool top_only; /* record only tokens at depth 0 and 1 */
};

static void put(struct log *l, char tag, const char *s, size_t len)
{
	size_t depth = l->depth;

	if (tag == '}' || tag == ']')
		depth--;
	if (l->top_only && depth > 1)
		return;
	if (buf_printf(&l->b, "%c%zu:", tag, len) < 0 || buf_append(&l->b, s, len) < 0)
		__builtin_trap();
}

/* ---- the scanner ---- */

static int scan_token(void *ctx, enum json_token t, const char *s, size_t len)
{
	static const char tags[] = {
	    [JSON_NULL] = 'n',	    [JSON_TRUE] = 't',	  [JSON_FALSE] = 'f',
	    [JSON_NUMBER] = '#',    [JSON_STRING] = 's',  [JSON_KEY] = 'k',
	    [JSON_MAP_START] = '{', [JSON_MAP_END] = '}', [JSON_ARRAY_START] = '[',
	    [JSON_ARRAY_END] = ']',
	};
	struct log *l = ctx;

	FZ_CHECK((s == NULL) == (t != JSON_NUMBER && t != JSON_STRING && t != JSON_KEY));
	put(l, tags[t], s ? s : "", len);
	if (t == JSON_MAP_START || t == JSON_ARRAY_START) {
		if (l->skip && l->depth >= 1) {
			l->depth++;
			return JSON_SCAN_SKIP;
		}
		l->depth++;
	} else if (t == JSON_MAP_END || t == JSON_ARRAY_END) {
		l->depth--;
	}
	return JSON_SCAN_GO;
}

static int run_scan(const char *text, size_t len, uint8_t plan_spec, bool multiple, struct log *l,
		    const char **why)
{
	static const struct json_scan_limits limits = {
	    .depth_max = 1u << 20, .gap_max = 1ull << 40, .number_max = 1u << 20};
	struct json_scan *s = json_scan_new(&limits, multiple, scan_token, l);
	struct fz_chunks plan;
	int rc = 0;

	FZ_CHECK(s != NULL);
	fz_chunks_init(&plan, plan_spec);
	for (size_t off = 0; off < len && rc == 0;) {
		size_t n = fz_chunks_next(&plan, len - off);
		rc = json_scan_feed(s, text + off, n);
		off += n;
	}
	if (rc == 0)
		rc = json_scan_finish(s);
	if (rc < 0) {
		const char *detail;
		FZ_CHECK(json_scan_error(s, &detail) == JSON_SCAN_MALFORMED && detail);
		*why = detail;
		FZ_CHECK(json_scan_position(s) <= len);
	}
	json_scan_free(s);
	return rc;
}

/* ---- yajl ---- */

static int y_null(void *ctx)
{
	put(ctx, 'n', "", 0);
	return 1;
}

static int y_bool(void *ctx, int v)
{
	put(ctx, v ? 't' : 'f', "", 0);
	return 1;
}

static int y_number(void *ctx, const char *s, size_t len)
{
	put(ctx, '#', s, len);
	return 1;
}

static int y_string(void *ctx, const unsigned char *s, size_t len)
{
	put(ctx, 's', (const char *)s, len);
	return 1;
}

static int y_key(void *ctx, const unsigned char *s, size_t len)
{
	put(ctx, 'k', (const char *)s, len);
	return 1;
}

static int y_open(struct log *l, char tag)
{
	put(l, tag, "", 0);
	l->depth++;
	return 1;
}

static int y_close(struct log *l, char tag)
{
	put(l, tag, "", 0);
	l->depth--;
	return 1;
}

static int y_start_map(void *ctx)
{
	return y_open(ctx, '{');
}

static int y_end_map(void *ctx)
{
	return y_close(ctx, '}');
}

static int y_start_array(void *ctx)
{
	return y_open(ctx, '[');
}

static int y_end_array(void *ctx)
{
	return y_close(ctx, ']');
}

static const yajl_callbacks y_callbacks = {
    .yajl_null = y_null,
    .yajl_boolean = y_bool,
    .yajl_number = y_number,
    .yajl_string = y_string,
    .yajl_map_key = y_key,
    .yajl_start_map = y_start_map,
    .yajl_end_map = y_end_map,
    .yajl_start_array = y_start_array,
    .yajl_end_array = y_end_array,
};

static int run_yajl(const char *text, size_t len, bool multiple, struct log *l)
{
	yajl_handle h = yajl_alloc(&y_callbacks, NULL, l);
	int rc;

	FZ_CHECK(h != NULL);
	if (multiple)
		yajl_config(h, yajl_allow_multiple_values, 1);
	rc = yajl_parse(h, (const unsigned char *)text, len) == yajl_status_ok &&
		     yajl_complete_parse(h) == yajl_status_ok
		 ? 0
		 : -1;
	yajl_free(h);
	return rc;
}

/* After the top-level value, yajl_complete_parse passes over a token cut
 * by the end of the input ('{}"ab', '{}1"a'); the scanner calls it what
 * it is. */
#define CUT	 "the input ends inside a value"
#define TRAILING "trailing garbage after the JSON value"

/* A stream of no values is a watch that ended before its first event:
 * sound, though yajl_complete_parse calls it premature. */
static bool only_space(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (!strchr(" \t\n\v\f\r", s[i]) || !s[i])
			return false;
	}
	return true;
}

static bool same(const struct log *a, const struct log *b)
{
	return a->b.len == b->b.len && (!a->b.len || !memcmp(a->b.data, b->b.data, a->b.len));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct log scan = {BUF_INIT, 0, false, false}, yajl = {BUF_INIT, 0, false, false};
	struct log skip = {BUF_INIT, 0, true, true}, top = {BUF_INIT, 0, false, true};
	const char *text = (const char *)data + 2;
	size_t len;
	bool multiple;
	int rc_scan, rc_yajl, rc_skip;
	const char *why = "", *why_skip = "";

	if (size < 2)
		return 0;
	len = size - 2;
	multiple = data[1] & 1;
	rc_scan = run_scan(text, len, data[0], multiple, &scan, &why);
	rc_yajl = multiple && only_space(text, len) ? 0 : run_yajl(text, len, multiple, &yajl);
	FZ_CHECK(rc_scan == rc_yajl ||
		 (rc_yajl == 0 && (!strcmp(why, CUT) || !strcmp(why, TRAILING))));
	if (rc_scan == 0)
		FZ_CHECK(same(&scan, &yajl));

	rc_skip = run_scan(text, len, data[0] ^ 0x5a, multiple, &skip, &why_skip);
	FZ_CHECK(rc_skip == rc_scan);
	if (rc_skip == 0) {
		run_scan(text, len, data[0], multiple, &top, &why_skip);
		FZ_CHECK(same(&skip, &top));
	}
	buf_free(&scan.b);
	buf_free(&yajl.b);
	buf_free(&skip.b);
	buf_free(&top.b);
	return 0;
}
