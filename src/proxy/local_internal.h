/*
 * local_internal.h - pieces of the offline answers reachable for the fuzz
 * targets and the unit tests: the continue token of offline lists
 * (local_list.c), which a client sends back as it got it, or not; and the
 * JSON the hub writes around names that come from clients or the cloud.
 * Not part of the offline answers' API.
 */
#ifndef YURTHUB_PROXY_LOCAL_INTERNAL_H
#define YURTHUB_PROXY_LOCAL_INTERNAL_H

#include <stdint.h>

#include "util/buf.h"

/* Base64 of "<rv>\n<ns>/<name>" (the last item sent), appended to out. */
int local_continue_token(struct buf *out, uint64_t rv, const char *start);
/* A token back: 0 with *rv and *start (malloc'ed), or -1. */
int local_parse_continue(const char *token, uint64_t *rv, char **start);

/* s as a JSON string, quotes included: escaped, and bytes that are not
 * UTF-8 replaced (names from a URL can be any bytes).  0 or -1. */
int local_json_string(struct buf *out, const char *s);
/* The start of an offline list: {"kind":"<kind>List","apiVersion":"<v>",
 * "items":[ .  kind may be "" (unknown). */
int local_list_head(struct buf *out, const char *kind, const char *api_version);
/* The claims of the offline TokenRequest's token. */
int local_token_claims(struct buf *out, const char *ns, const char *name, long long exp);

#endif
