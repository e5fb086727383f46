/*
 * base64.h - RFC 4648 base64 (standard alphabet, padded): kubeconfig *-data
 * fields and every key and value of etcd's JSON gateway; and base64url
 * (section 5, without padding), the encoding of every part of a JWS.
 */
#ifndef YURTHUB_UTIL_BASE64_H
#define YURTHUB_UTIL_BASE64_H

#include <stddef.h>

#include "util/buf.h"

int base64_encode(const void *data, size_t len, struct buf *out);
/* Appends the decoded bytes to out; -1 on malformed input (bad character,
 * bad padding, wrong length).  Whitespace (\n, \r, space, tab) is skipped, as
 * PEM-ish inputs wrap lines. */
int base64_decode(const char *text, size_t len, struct buf *out);

/* base64url as JWS (RFC 7515, section 2) uses it: '-' and '_' for '+' and
 * '/', no '=' padding.  Appends to out; -1 only on ENOMEM. */
int base64url_encode(const void *data, size_t len, struct buf *out);
/* Strict: only the URL alphabet, no padding, no whitespace, a length that is
 * not 1 mod 4, and zero bits where the last character has bits to spare - so
 * that each byte string has exactly one text that decodes to it (a signature
 * is compared as bytes; two texts for one signature would let a copy pass for
 * a different token).  Appends to out; -1 on malformed input, out as it was. */
int base64url_decode(const char *text, size_t len, struct buf *out);

#endif
