/*
 * base64.h - RFC 4648 base64 (standard alphabet, padded): kubeconfig *-data
 * fields and every key and value of etcd's JSON gateway.
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

#endif
