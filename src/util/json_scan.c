/*
 * json_scan.c - the tokenizer of json_scan.h.
 *
 * One loop reads a chunk: whitespace is passed over, a structural byte
 * checks the grammar at once, and a string, number or literal is lexed by
 * its own function.  Each returns where it stopped - after the token, or at
 * the chunk end with the token's state kept in the scanner for the next
 * chunk - or NULL once the scan failed.  Whether a token is reported is
 * settled when it starts (skip_from == 0), so a skipped string is never
 * copied, whatever the chunks.
 */
#include "util/json_scan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"

/* What may come next. */
enum expect {
	EXPECT_VALUE,	     /* top level, after ':' or after an array's ',' */
	EXPECT_VALUE_OR_END, /* after '[' */
	EXPECT_KEY_OR_END,   /* after '{' */
	EXPECT_KEY,	     /* after a map's ',' */
	EXPECT_COLON,
	EXPECT_COMMA_OR_END, /* after a value inside a container */
	EXPECT_NOTHING,	     /* after the one top-level value */
};

enum tok { TOK_NONE, TOK_STRING, TOK_NUMBER, TOK_LITERAL };

/* Inside a string: what the next byte must be.  STR_HEXn: n hex digits of
 * a \u escape are due, so that counting down ends in STR_PLAIN. */
enum str_state { STR_PLAIN, STR_HEX1, STR_HEX2, STR_HEX3, STR_HEX4, STR_ESCAPE, STR_UTF8 };

/* Inside a number: what was read last (RFC 8259, section 6). */
enum num_state { NUM_MINUS, NUM_ZERO, NUM_INT, NUM_DOT, NUM_FRAC, NUM_E, NUM_E_SIGN, NUM_EXP };

struct json_scan {
	json_token_fn fn;
	void *ctx;
	struct json_scan_limits lim;
	bool multiple;
	enum expect expect;
	char *stack; /* '{' or '[' of each open container */
	size_t depth, stack_cap;
	size_t skip_from; /* depth of the container being skipped; 0: none */
	/* the token a chunk end cut */
	enum tok tok;
	int sub;       /* enum str_state, enum num_state, or a literal's bytes matched */
	int utf8_need; /* continuation bytes due */
	const char *literal;
	bool is_key, escapes, report;
	size_t tok_len;	 /* a number's bytes so far */
	struct buf held; /* a reported token's bytes from earlier chunks */
	/* where we are */
	const unsigned char *chunk; /* being fed; NULL between feeds */
	size_t at;		    /* in chunk: just past the token reported */
	unsigned long long fed;	    /* bytes of earlier chunks */
	unsigned long long token_end;
	/* how it failed */
	bool failed;
	enum json_scan_fault fault;
	const char *detail;
	unsigned long long fault_at;
};

/* Bytes a string passes over without a second look: printable ASCII other
 * than '"' and '\\'. */
static const bool plain[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

static const bool space[256] = {
    [' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\v'] = 1, ['\f'] = 1, ['\r'] = 1,
};

/* ---- failing ---- */

static const unsigned char *fault(struct json_scan *s, const unsigned char *p,
				  enum json_scan_fault f, const char *detail)
{
	s->failed = true;
	s->fault = f;
	s->detail = detail;
	s->fault_at = s->fed + (s->chunk && p ? (size_t)(p - s->chunk) : 0);
	return NULL;
}

static const unsigned char *malformed(struct json_scan *s, const unsigned char *p,
				      const char *detail)
{
	return fault(s, p, JSON_SCAN_MALFORMED, detail);
}

/* The reader's verdict on a token; NULL when it stopped the scan. */
static const unsigned char *report(struct json_scan *s, const unsigned char *after,
				   enum json_token t, const char *v, size_t len, int *rc)
{
	int r;

	s->at = (size_t)(after - s->chunk);
	r = s->fn(s->ctx, t, v, len);
	if (rc)
		*rc = r;
	if (r == JSON_SCAN_STOP) {
		s->failed = true; /* the reader keeps its own reason */
		return NULL;
	}
	return after;
}

/* ---- the grammar ---- */

/* A token ended just before p: it and the whitespace before it stay within
 * the bound. */
static bool token_ended(struct json_scan *s, const unsigned char *p)
{
	unsigned long long at = s->fed + (size_t)(p - s->chunk);

	if (at - s->token_end > s->lim.gap_max) {
		fault(s, p, JSON_SCAN_NO_TOKEN_END, NULL);
		return false;
	}
	s->token_end = at;
	return true;
}

static bool value_may_start(const struct json_scan *s)
{
	return s->expect == EXPECT_VALUE || s->expect == EXPECT_VALUE_OR_END;
}

static void value_done(struct json_scan *s)
{
	if (s->depth)
		s->expect = EXPECT_COMMA_OR_END;
	else
		s->expect = s->multiple ? EXPECT_VALUE : EXPECT_NOTHING;
}

/* A number or a literal ended just before p. */
static bool value_ended(struct json_scan *s, const unsigned char *p)
{
	s->tok = TOK_NONE;
	if (!token_ended(s, p))
		return false;
	value_done(s);
	return true;
}

static const char *unexpected(const struct json_scan *s)
{
	return s->expect == EXPECT_NOTHING ? "trailing garbage after the JSON value"
					   : "a token where it may not come";
}

static const unsigned char *open_container(struct json_scan *s, const unsigned char *p)
{
	bool map = *p == '{';
	int rc = JSON_SCAN_GO;

	if (!value_may_start(s))
		return malformed(s, p, unexpected(s));
	if (s->depth >= s->lim.depth_max)
		return fault(s, p, JSON_SCAN_TOO_DEEP, NULL);
	if (s->depth == s->stack_cap) {
		size_t cap = s->stack_cap ? 2 * s->stack_cap : 64;
		char *grown = realloc(s->stack, cap);

		if (!grown)
			return fault(s, p, JSON_SCAN_NO_MEMORY, NULL);
		s->stack = grown;
		s->stack_cap = cap;
	}
	s->stack[s->depth++] = (char)*p++;
	if (!token_ended(s, p))
		return NULL;
	s->expect = map ? EXPECT_KEY_OR_END : EXPECT_VALUE_OR_END;
	if (s->skip_from)
		return p;
	p = report(s, p, map ? JSON_MAP_START : JSON_ARRAY_START, NULL, 0, &rc);
	if (p && rc == JSON_SCAN_SKIP)
		s->skip_from = s->depth;
	return p;
}

static const unsigned char *close_container(struct json_scan *s, const unsigned char *p)
{
	bool map = *p == '}';
	bool skipped;

	if (!s->depth || s->stack[s->depth - 1] != (map ? '{' : '['))
		return malformed(
		    s, p, map ? "a '}' that closes no object" : "a ']' that closes no array");
	if (s->expect != EXPECT_COMMA_OR_END &&
	    s->expect != (map ? EXPECT_KEY_OR_END : EXPECT_VALUE_OR_END))
		return malformed(
		    s, p, map ? "an object ends after ',' or ':'" : "an array ends after ','");
	skipped = s->skip_from && s->depth > s->skip_from;
	if (s->skip_from == s->depth)
		s->skip_from = 0;
	s->depth--;
	p++;
	if (!token_ended(s, p))
		return NULL;
	value_done(s);
	if (skipped)
		return p;
	return report(s, p, map ? JSON_MAP_END : JSON_ARRAY_END, NULL, 0, NULL);
}

static const unsigned char *comma(struct json_scan *s, const unsigned char *p)
{
	if (s->expect != EXPECT_COMMA_OR_END)
		return malformed(s, p, "a ',' where it may not come");
	s->expect = s->stack[s->depth - 1] == '{' ? EXPECT_KEY : EXPECT_VALUE;
	p++;
	return token_ended(s, p) ? p : NULL;
}

static const unsigned char *colon(struct json_scan *s, const unsigned char *p)
{
	if (s->expect != EXPECT_COLON)
		return malformed(s, p, "a ':' where it may not come");
	s->expect = EXPECT_VALUE;
	p++;
	return token_ended(s, p) ? p : NULL;
}

/* ---- strings ---- */

static unsigned hex4(const char *h)
{
	unsigned v = 0;

	for (int i = 0; i < 4; i++) {
		char c = h[i];
		v = v << 4 | (unsigned)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
	}
	return v;
}

static size_t utf8_put(char *out, unsigned cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | cp >> 12);
		out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | cp >> 18);
	out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
	out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* One escape at s (its '\\'), already checked; writes its bytes at out
 * (never past s: an escape is longer than what it stands for) and returns
 * the escape's length.  A \u escape of half a surrogate pair is decoded as
 * yajl decodes it, so that every part of the hub reads the same name from
 * the same bytes: a high half followed by any \u escape makes one code
 * point with it, a high half alone is '?', a low half alone is encoded as
 * it is. */
static size_t unescape_one(const char *s, size_t left, char *out, size_t *wrote)
{
	static const char simple[128] = {
	    ['"'] = '"',  ['\\'] = '\\', ['/'] = '/',  ['b'] = '\b',
	    ['f'] = '\f', ['n'] = '\n',	 ['r'] = '\r', ['t'] = '\t',
	};
	unsigned cp;

	if (s[1] != 'u') {
		*out = simple[(unsigned char)s[1] & 0x7F];
		*wrote = 1;
		return 2;
	}
	cp = hex4(s + 2);
	if ((cp & 0xFC00) != 0xD800) {
		*wrote = utf8_put(out, cp);
		return 6;
	}
	if (left >= 12 && s[6] == '\\' && s[7] == 'u') {
		cp = 0x10000 + ((cp & 0x3FF) << 10) + (hex4(s + 8) & 0x3FF);
		*wrote = utf8_put(out, cp);
		return 12;
	}
	*out = '?';
	*wrote = 1;
	return 6;
}

/* Unescapes the checked string s[0..len) in place; returns its new length. */
static size_t unescape(char *s, size_t len)
{
	size_t r = 0, w = 0;

	while (r < len) {
		const char *bs = memchr(s + r, '\\', len - r);
		size_t run = bs ? (size_t)(bs - (s + r)) : len - r, wrote;

		memmove(s + w, s + r, run);
		r += run;
		w += run;
		if (r == len)
			break;
		r += unescape_one(s + r, len - r, s + w, &wrote);
		w += wrote;
	}
	return w;
}

static bool keep(struct json_scan *s, const unsigned char *from, const unsigned char *to)
{
	if (buf_append(&s->held, from, (size_t)(to - from)) == 0)
		return true;
	fault(s, to, JSON_SCAN_NO_MEMORY, NULL);
	return false;
}

/* The string's closing quote is at q; its bytes in this chunk start at
 * start. */
/* Reports a string, key or number whose bytes in this chunk are [start,
 * end), after those that earlier chunks held; unescaped when it has
 * escapes.  The token ends at after. */
static const unsigned char *report_text(struct json_scan *s, enum json_token t,
					const unsigned char *start, const unsigned char *end,
					const unsigned char *after, bool escapes)
{
	const char *v = (const char *)start;
	size_t len = (size_t)(end - start);

	if (s->held.len || escapes) {
		if (!keep(s, start, end))
			return NULL;
		s->held.len = escapes ? unescape(s->held.data, s->held.len) : s->held.len;
		v = s->held.data;
		len = s->held.len;
	}
	after = report(s, after, t, v, len, NULL);
	buf_reset(&s->held);
	return after;
}

static const unsigned char *string_ended(struct json_scan *s, const unsigned char *start,
					 const unsigned char *q)
{
	const unsigned char *after = q + 1;
	bool key = s->is_key;

	s->tok = TOK_NONE;
	if (!token_ended(s, after))
		return NULL;
	if (key)
		s->expect = EXPECT_COLON;
	else
		value_done(s);
	if (!s->report)
		return after;
	return report_text(s, key ? JSON_KEY : JSON_STRING, start, q, after, s->escapes);
}

static int utf8_lead(unsigned char c)
{
	if (c >> 5 == 0x6)
		return 1;
	if (c >> 4 == 0xE)
		return 2;
	if (c >> 3 == 0x1E)
		return 3;
	return 0;
}

static bool is_hex(unsigned char c)
{
	return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}

/* A byte after a '\\', within a \u escape, or within a UTF-8 sequence;
 * NULL when it may not come there. */
static const unsigned char *string_byte(struct json_scan *s, const unsigned char *p)
{
	unsigned char c = *p;

	switch (s->sub) {
	case STR_ESCAPE:
		if (c == 'u')
			s->sub = STR_HEX4;
		else if (c && strchr("\"\\/bfnrt", c))
			s->sub = STR_PLAIN;
		else
			return malformed(s, p, "a '\\' before a character that may not be escaped");
		return p + 1;
	case STR_UTF8:
		if ((c & 0xC0) != 0x80)
			return malformed(s, p, "invalid UTF-8 in a string");
		if (--s->utf8_need == 0)
			s->sub = STR_PLAIN;
		return p + 1;
	default: /* STR_HEXn */
		if (!is_hex(c))
			return malformed(s, p, "a non-hex character in a \\u escape");
		s->sub--;
		return p + 1;
	}
}

#define ONES  0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

/* The bytes of v that are not plain, as their high bits: '"', '\\',
 * control characters and bytes of UTF-8 sequences.  Exact for the lowest
 * such byte, which is all skip_plain needs (a borrow can only mark bytes
 * above it). */
static uint64_t not_plain8(uint64_t v)
{
	uint64_t quote = v ^ (ONES * '"'), backslash = v ^ (ONES * '\\');

	return ((quote - ONES) & ~quote) | ((backslash - ONES) & ~backslash) |
	       ((v - ONES * 0x20) & ~v) | (v & HIGHS);
}

/* Past the plain bytes from p: eight at a time while they last. */
static const unsigned char *skip_plain(const unsigned char *p, const unsigned char *end)
{
	while (end - p >= 8) {
		uint64_t v, mask;

		memcpy(&v, p, 8);
		mask = not_plain8(v) & HIGHS;
		if (mask) {
			/* byte order: the first byte is the lowest on little-endian */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			return p + (__builtin_ctzll(mask) >> 3);
#else
			break;
#endif
		}
		p += 8;
	}
	while (p < end && plain[*p])
		p++;
	return p;
}

static const unsigned char *lex_string(struct json_scan *s, const unsigned char *start,
				       const unsigned char *p, const unsigned char *end)
{
	while (p < end) {
		unsigned char c;

		if (s->sub != STR_PLAIN) {
			if (!(p = string_byte(s, p)))
				return NULL;
			continue;
		}
		p = skip_plain(p, end);
		if (p == end)
			break;
		c = *p;
		if (c == '"')
			return string_ended(s, start, p);
		if (c == '\\') {
			s->escapes = true;
			s->sub = STR_ESCAPE;
		} else if (c < 0x20) {
			return malformed(s, p, "a control character in a string");
		} else if ((s->utf8_need = utf8_lead(c)) != 0) {
			s->sub = STR_UTF8;
		} else {
			return malformed(s, p, "invalid UTF-8 in a string");
		}
		p++;
	}
	if (s->report && !keep(s, start, end))
		return NULL;
	return end;
}

static const unsigned char *string_start(struct json_scan *s, const unsigned char *p,
					 const unsigned char *end)
{
	if (s->expect == EXPECT_KEY || s->expect == EXPECT_KEY_OR_END)
		s->is_key = true;
	else if (value_may_start(s))
		s->is_key = false;
	else
		return malformed(s, p, unexpected(s));
	s->tok = TOK_STRING;
	s->sub = STR_PLAIN;
	s->escapes = false;
	s->report = !s->skip_from;
	return lex_string(s, p + 1, p + 1, end);
}

/* ---- numbers and literals ---- */

static bool number_complete(int st)
{
	return st == NUM_ZERO || st == NUM_INT || st == NUM_FRAC || st == NUM_EXP;
}

/* The number's next byte c: its new state, or -1 when c ends it. */
static int number_next(int st, unsigned char c)
{
	bool digit = c >= '0' && c <= '9';
	bool e = c == 'e' || c == 'E';

	switch (st) {
	case NUM_MINUS:
		return c == '0' ? NUM_ZERO : digit ? NUM_INT : -1;
	case NUM_ZERO:
		return c == '.' ? NUM_DOT : e ? NUM_E : -1;
	case NUM_INT:
		return digit ? NUM_INT : c == '.' ? NUM_DOT : e ? NUM_E : -1;
	case NUM_DOT:
		return digit ? NUM_FRAC : -1;
	case NUM_FRAC:
		return digit ? NUM_FRAC : e ? NUM_E : -1;
	case NUM_E:
		return c == '+' || c == '-' ? NUM_E_SIGN : digit ? NUM_EXP : -1;
	case NUM_E_SIGN:
	case NUM_EXP:
		return digit ? NUM_EXP : -1;
	default:
		return -1;
	}
}

static const unsigned char *number_ended(struct json_scan *s, const unsigned char *start,
					 const unsigned char *p)
{
	if (!number_complete(s->sub))
		return malformed(s, p, "a number without its digits");
	if (!value_ended(s, p))
		return NULL;
	if (!s->report)
		return p;
	return report_text(s, JSON_NUMBER, start, p, p, false);
}

static const unsigned char *lex_number(struct json_scan *s, const unsigned char *start,
				       const unsigned char *p, const unsigned char *end)
{
	int next;

	for (; p < end; p++) {
		if ((next = number_next(s->sub, *p)) < 0)
			break;
		s->sub = next;
	}
	s->tok_len += (size_t)(p - start);
	if (s->tok_len > s->lim.number_max)
		return fault(s, p, JSON_SCAN_NUMBER_TOO_LONG, NULL);
	if (p < end)
		return number_ended(s, start, p);
	if (s->report && !keep(s, start, end))
		return NULL;
	return end;
}

static const unsigned char *number_start(struct json_scan *s, const unsigned char *p,
					 const unsigned char *end)
{
	if (!value_may_start(s))
		return malformed(s, p, unexpected(s));
	s->tok = TOK_NUMBER;
	s->sub = *p == '-' ? NUM_MINUS : *p == '0' ? NUM_ZERO : NUM_INT;
	s->tok_len = 0;
	s->report = !s->skip_from;
	return lex_number(s, p, p + 1, end);
}

static const unsigned char *lex_literal(struct json_scan *s, const unsigned char *p,
					const unsigned char *end)
{
	enum json_token t;

	for (; p < end && s->literal[s->sub]; p++, s->sub++) {
		if (*p != (unsigned char)s->literal[s->sub])
			return malformed(s, p, "a word that is not true, false or null");
	}
	if (s->literal[s->sub])
		return end;
	if (!value_ended(s, p))
		return NULL;
	if (!s->report)
		return p;
	t = s->literal[0] == 't' ? JSON_TRUE : s->literal[0] == 'f' ? JSON_FALSE : JSON_NULL;
	return report(s, p, t, NULL, 0, NULL);
}

static const unsigned char *literal_start(struct json_scan *s, const unsigned char *p,
					  const unsigned char *end)
{
	if (!value_may_start(s))
		return malformed(s, p, unexpected(s));
	s->tok = TOK_LITERAL;
	s->literal = *p == 't' ? "true" : *p == 'f' ? "false" : "null";
	s->sub = 1;
	s->report = !s->skip_from;
	return lex_literal(s, p + 1, end);
}

/* ---- the loop ---- */

static const unsigned char *token(struct json_scan *s, const unsigned char *p,
				  const unsigned char *end)
{
	while (p < end && space[*p])
		p++;
	if (p == end)
		return p;
	switch (*p) {
	case '"':
		return string_start(s, p, end);
	case '{':
	case '[':
		return open_container(s, p);
	case '}':
	case ']':
		return close_container(s, p);
	case ',':
		return comma(s, p);
	case ':':
		return colon(s, p);
	case 't':
	case 'f':
	case 'n':
		return literal_start(s, p, end);
	default:
		if (*p == '-' || (*p >= '0' && *p <= '9'))
			return number_start(s, p, end);
		return malformed(s, p,
				 s->expect == EXPECT_NOTHING ? unexpected(s)
							     : "a byte that starts no JSON token");
	}
}

static const unsigned char *resume(struct json_scan *s, const unsigned char *p,
				   const unsigned char *end)
{
	switch (s->tok) {
	case TOK_STRING:
		return lex_string(s, p, p, end);
	case TOK_NUMBER:
		return lex_number(s, p, p, end);
	case TOK_LITERAL:
		return lex_literal(s, p, end);
	default:
		return p;
	}
}

int json_scan_feed(struct json_scan *s, const char *data, size_t len)
{
	const unsigned char *p = (const unsigned char *)data, *end = p + len;

	if (s->failed)
		return -1;
	if (!len)
		return 0;
	s->chunk = p;
	p = resume(s, p, end);
	while (p && p < end)
		p = token(s, p, end);
	if (p && s->fed + len - s->token_end > s->lim.gap_max)
		p = fault(s, end, JSON_SCAN_NO_TOKEN_END, NULL);
	s->chunk = NULL;
	s->at = 0;
	if (!p)
		return -1;
	s->fed += len;
	return 0;
}

int json_scan_finish(struct json_scan *s)
{
	static const unsigned char nothing[1];

	if (s->failed)
		return -1;
	if (s->tok == TOK_NUMBER) {
		/* a number ends where the input does */
		const unsigned char *p;

		s->chunk = nothing;
		p = number_ended(s, nothing, nothing);
		s->chunk = NULL;
		s->at = 0;
		if (!p)
			return -1;
	}
	if (s->tok != TOK_NONE || s->depth) {
		malformed(s, NULL, "the input ends inside a value");
		return -1;
	}
	if (!s->multiple && s->expect != EXPECT_NOTHING) {
		malformed(s, NULL, "the input holds no JSON value");
		return -1;
	}
	return 0;
}

/* ---- life ---- */

struct json_scan *json_scan_new(const struct json_scan_limits *limits, bool multiple,
				json_token_fn fn, void *ctx)
{
	struct json_scan *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->lim = *limits;
	s->multiple = multiple;
	s->fn = fn;
	s->ctx = ctx;
	s->expect = EXPECT_VALUE;
	return s;
}

void json_scan_free(struct json_scan *s)
{
	if (!s)
		return;
	free(s->stack);
	buf_free(&s->held);
	free(s);
}

size_t json_scan_consumed(const struct json_scan *s)
{
	return s->at;
}

unsigned long long json_scan_position(const struct json_scan *s)
{
	if (s->fault != JSON_SCAN_OK)
		return s->fault_at;
	return s->fed + s->at;
}

enum json_scan_fault json_scan_error(const struct json_scan *s, const char **detail)
{
	*detail = s->fault == JSON_SCAN_MALFORMED ? s->detail : NULL;
	return s->fault;
}
