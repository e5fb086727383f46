/* buf.c - growable byte buffer, see buf.h. */
#include "util/buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int buf_reserve(struct buf *b, size_t extra)
{
	if (extra > SIZE_MAX - b->len - 1) {
		errno = ENOMEM;
		return -1;
	}
	size_t need = b->len + extra + 1;
	if (need <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	char *p = realloc(b->data, cap);
	if (!p) {
		errno = ENOMEM;
		return -1;
	}
	b->data = p;
	b->cap = cap;
	return 0;
}

int buf_append(struct buf *b, const void *data, size_t len)
{
	if (buf_reserve(b, len) < 0)
		return -1;
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}

int buf_append_str(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

int buf_append_char(struct buf *b, char c)
{
	return buf_append(b, &c, 1);
}

int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0 || buf_reserve(b, (size_t)n) < 0)
		return -1;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = buf_vprintf(b, fmt, ap);
	va_end(ap);
	return r;
}

int buf_append_json_str(struct buf *b, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	if (buf_reserve(b, len + 2) < 0 || buf_append_char(b, '"') < 0)
		return -1;
	size_t run = 0; /* start of the current run of bytes that need no escape */
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		if (buf_append(b, s + run, i - run) < 0)
			return -1;
		run = i + 1;
		char esc[7] = {'\\', 0, 0, 0, 0, 0, 0};
		size_t n = 2;
		switch (c) {
		case '"':
			esc[1] = '"';
			break;
		case '\\':
			esc[1] = '\\';
			break;
		case '\n':
			esc[1] = 'n';
			break;
		case '\r':
			esc[1] = 'r';
			break;
		case '\t':
			esc[1] = 't';
			break;
		default:
			esc[1] = 'u';
			esc[2] = '0';
			esc[3] = '0';
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			n = 6;
		}
		if (buf_append(b, esc, n) < 0)
			return -1;
	}
	if (buf_append(b, s + run, len - run) < 0)
		return -1;
	return buf_append_char(b, '"');
}

size_t utf8_seq_len(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	if (n == 0)
		return 0;
	if (u[0] < 0x80)
		return 1;
	size_t len;
	unsigned char lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
	if (u[0] >= 0xc2 && u[0] <= 0xdf) {
		len = 2;
	} else if (u[0] >= 0xe0 && u[0] <= 0xef) {
		len = 3;
		if (u[0] == 0xe0)
			lo = 0xa0; /* overlong */
		else if (u[0] == 0xed)
			hi = 0x9f; /* surrogates */
	} else if (u[0] >= 0xf0 && u[0] <= 0xf4) {
		len = 4;
		if (u[0] == 0xf0)
			lo = 0x90; /* overlong */
		else if (u[0] == 0xf4)
			hi = 0x8f; /* above U+10FFFF */
	} else {
		return 0;
	}
	if (n < len || u[1] < lo || u[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (u[i] < 0x80 || u[i] > 0xbf)
			return 0;
	return len;
}

int buf_append_utf8(struct buf *b, const char *s, size_t len)
{
	size_t run = 0, i = 0;
	while (i < len) {
		size_t n = utf8_seq_len(s + i, len - i);
		if (n) {
			i += n;
			continue;
		}
		if (buf_append(b, s + run, i - run) < 0 || buf_append(b, "\xef\xbf\xbd", 3) < 0)
			return -1;
		run = ++i;
	}
	return buf_append(b, s + run, len - run);
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

void buf_free(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

char *buf_steal(struct buf *b)
{
	char *p = b->data;
	if (!p)
		p = calloc(1, 1);
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}

char *str_printf(const char *fmt, ...)
{
	struct buf b = BUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	int rc = buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (rc < 0) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b);
}

void err_printf(char **err, const char *fmt, ...)
{
	if (!err)
		return;
	struct buf b = BUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	int rc = buf_vprintf(&b, fmt, ap);
	va_end(ap);
	free(*err);
	*err = rc == 0 ? buf_steal(&b) : strdup("out of memory");
	buf_free(&b);
}

const char *buf_cstr(const struct buf *b)
{
	return b->data ? b->data : "";
}
