/*
 * base64.c - RFC 4648 base64, standard alphabet with '=' padding: decoding
 * kubeconfig *-data fields and etcd JSON-gateway keys and values, encoding
 * the latter.  Decoding skips whitespace and rejects anything else that is
 * not exactly the padded form.  The URL-safe variant (the parts of a JWS) is
 * strict the other way: no whitespace, no padding, one text per value.
 */
#include "util/base64.h"

#include <stdbool.h>
#include <stdint.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Both alphabets: the standard one pads the last quantum with '=', the
 * URL-safe one (as JWS uses it) leaves it short. */
static int encode(const void *data, size_t len, struct buf *out, const char *abc, bool pad)
{
	const unsigned char *p = data;
	if (len / 3 >= SIZE_MAX / 4 - 1 || buf_reserve(out, (len + 2) / 3 * 4) < 0)
		return -1;
	char *o = out->data + out->len;
	size_t i = 0;
	for (; i + 3 <= len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		*o++ = abc[v >> 18];
		*o++ = abc[v >> 12 & 63];
		*o++ = abc[v >> 6 & 63];
		*o++ = abc[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < len)
			v |= (uint32_t)p[i + 1] << 8;
		*o++ = abc[v >> 18];
		*o++ = abc[v >> 12 & 63];
		if (i + 1 < len)
			*o++ = abc[v >> 6 & 63];
		else if (pad)
			*o++ = '=';
		if (pad)
			*o++ = '=';
	}
	out->len = (size_t)(o - out->data);
	out->data[out->len] = '\0';
	return 0;
}

int base64_encode(const void *data, size_t len, struct buf *out)
{
	return encode(data, len, out, alphabet, true);
}

/* The value of one character; c62 and c63 are the alphabet's last two. */
static int sextet_of(char c, char c62, char c63)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == c62)
		return 62;
	if (c == c63)
		return 63;
	return -1;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Decoder state: up to four sextets of the current quantum, and how many
 * '=' have been seen (after which only whitespace and '=' may follow). */
struct b64_state {
	uint32_t acc;
	int nsext, npad;
};

/* Emit the bytes of one complete quantum (4 characters, 0-2 of them '='). */
static int flush_quantum(struct b64_state *st, struct buf *out)
{
	unsigned char bytes[3] = {(unsigned char)(st->acc >> 16), (unsigned char)(st->acc >> 8),
				  (unsigned char)st->acc};
	st->acc = 0;
	return buf_append(out, bytes, (size_t)(3 - st->npad));
}

static int feed(struct b64_state *st, char c, struct buf *out)
{
	if (c == '=') {
		/* "x===" and "====" are no valid quanta */
		if (st->nsext + st->npad < 2 || st->nsext + st->npad >= 4)
			return -1;
		st->npad++;
		st->acc <<= 6;
	} else {
		int v = sextet_of(c, '+', '/');
		if (v < 0 || st->npad > 0 || st->nsext + st->npad >= 4)
			return -1;
		st->acc = st->acc << 6 | (uint32_t)v;
		st->nsext++;
	}
	if (st->nsext + st->npad == 4) {
		if (flush_quantum(st, out) < 0)
			return -1;
		if (st->npad == 0)
			st->nsext = 0;
	}
	return 0;
}

int base64_decode(const char *text, size_t len, struct buf *out)
{
	size_t keep = out->len;
	struct b64_state st = {0, 0, 0};
	for (size_t i = 0; i < len; i++) {
		if (is_space(text[i]))
			continue;
		if (feed(&st, text[i], out) < 0)
			goto bad;
	}
	/* a partial quantum is a wrong length */
	if (st.npad == 0 && st.nsext != 0)
		goto bad;
	if (st.npad > 0 && st.nsext + st.npad != 4)
		goto bad;
	return 0;
bad:
	out->len = keep;
	if (out->data)
		out->data[keep] = '\0';
	return -1;
}

/* ---- base64url (RFC 4648 section 5), unpadded ---- */

static const char url_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int base64url_encode(const void *data, size_t len, struct buf *out)
{
	return encode(data, len, out, url_alphabet, false);
}

int base64url_decode(const char *text, size_t len, struct buf *out)
{
	if (len % 4 == 1) /* 6 bits: not even one byte */
		return -1;
	if (buf_reserve(out, len / 4 * 3 + 2) < 0)
		return -1;
	size_t keep = out->len;
	unsigned char *o = (unsigned char *)out->data + out->len;
	uint32_t acc = 0;
	int n = 0;
	for (size_t i = 0; i < len; i++) {
		int v = sextet_of(text[i], '-', '_');
		if (v < 0)
			goto bad;
		acc = acc << 6 | (uint32_t)v;
		if (++n == 4) {
			*o++ = (unsigned char)(acc >> 16);
			*o++ = (unsigned char)(acc >> 8);
			*o++ = (unsigned char)acc;
			acc = 0;
			n = 0;
		}
	}
	if (n == 2) { /* 12 bits: one byte and 4 spare */
		if (acc & 0xf)
			goto bad;
		*o++ = (unsigned char)(acc >> 4);
	} else if (n == 3) { /* 18 bits: two bytes and 2 spare */
		if (acc & 0x3)
			goto bad;
		*o++ = (unsigned char)(acc >> 10);
		*o++ = (unsigned char)(acc >> 2);
	}
	out->len = (size_t)((char *)o - out->data);
	out->data[out->len] = '\0';
	return 0;
bad:
	out->len = keep;
	out->data[keep] = '\0';
	return -1;
}
