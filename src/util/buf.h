/*
 * buf.h - a growable byte buffer.
 *
 * The one container the project uses for bytes whose size is not known in
 * advance: file contents, JSON being built, responses.  The buffer owns its
 * memory; data is always NUL-terminated (not counted in len) so that it can
 * be handed to parsers that want C strings.
 */
#ifndef YURTHUB_UTIL_BUF_H
#define YURTHUB_UTIL_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct buf {
	char *data; /* NULL until something is added */
	size_t len;
	size_t cap;
};

#define BUF_INIT                                                                                   \
	{                                                                                          \
		NULL, 0, 0                                                                         \
	}

/* Make room for `extra` more bytes; returns 0, or -1 with errno=ENOMEM. */
int buf_reserve(struct buf *b, size_t extra);
int buf_append(struct buf *b, const void *data, size_t len);
int buf_append_str(struct buf *b, const char *s);
int buf_append_char(struct buf *b, char c);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap);
/* Append s as a JSON string literal, quotes included. */
int buf_append_json_str(struct buf *b, const char *s, size_t len);
/* Length (1-4) of the well-formed UTF-8 sequence at s[0..n), 0 if there is
 * none (a stray, overlong, surrogate or truncated sequence). */
size_t utf8_seq_len(const char *s, size_t n);
/* Append s[0..len) with every byte that is not part of well-formed UTF-8
 * replaced by U+FFFD, so that what is appended is valid UTF-8. */
int buf_append_utf8(struct buf *b, const char *s, size_t len);
void buf_reset(struct buf *b);	/* len = 0, keeps memory */
void buf_free(struct buf *b);	/* releases memory, back to BUF_INIT */
char *buf_steal(struct buf *b); /* caller owns the returned string */
/* A new malloc'ed string, printf-formatted; NULL when out of memory. */
char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Replace *err (freed) with a formatted message, or "out of memory"; err
 * may be NULL (the caller does not want the message). */
void err_printf(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A pointer that is never NULL: "" for an empty buffer. */
const char *buf_cstr(const struct buf *b);

#endif
