/*
 * local_internal.h - the continue token of offline lists (local_list.c),
 * reachable for the fuzz targets and the unit tests: a client sends it back
 * as it got it, or not.  Not part of the offline answers' API.
 */
#ifndef YURTHUB_PROXY_LOCAL_INTERNAL_H
#define YURTHUB_PROXY_LOCAL_INTERNAL_H

#include <stdint.h>

#include "util/buf.h"

/* Base64 of "<rv>\n<ns>/<name>" (the last item sent), appended to out. */
int local_continue_token(struct buf *out, uint64_t rv, const char *start);
/* A token back: 0 with *rv and *start (malloc'ed), or -1. */
int local_parse_continue(const char *token, uint64_t *rv, char **start);

#endif
