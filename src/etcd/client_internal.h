/*
 * client_internal.h - the decoders of etcd's gateway answers (client.c),
 * reachable without a connection: for the fuzz targets and the unit tests.
 * Each runs exactly the code a call runs on the body of an answer, and
 * returns what that call would return (ETCD_PROTOCOL for a malformed one).
 * Not part of the client's API.
 */
#ifndef YURTHUB_ETCD_CLIENT_INTERNAL_H
#define YURTHUB_ETCD_CLIENT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd/client.h"

/* The body of a 200 answer to /v3/kv/range, /v3/kv/txn (t: the request,
 * which says how many range answers to expect), /v3/kv/deleterange and
 * /v3/maintenance/status. */
enum etcd_err etcd_parse_range_json(const char *p, size_t len, struct etcd_range_result *out);
enum etcd_err etcd_parse_txn_json(const char *p, size_t len, const struct etcd_txn *t,
				  struct etcd_txn_result *out);
enum etcd_err etcd_parse_deleterange_json(const char *p, size_t len, int64_t *deleted);
enum etcd_err etcd_parse_status_json(const char *p, size_t len, struct etcd_status *out);

/* The body of an answer with another HTTP status; *retry: whether the
 * call would try the next endpoint. */
enum etcd_err etcd_parse_error_json(long status, bool idempotent, const char *p, size_t len,
				    bool *retry);

/* The body of a 200 answer to /v3/watch, received in n chunks, then the
 * end of the stream: fn is called as etcd_watch calls it. */
enum etcd_err etcd_parse_watch_stream(const char *const *chunks, const size_t *lens, size_t n,
				      etcd_watch_fn fn, void *ctx);

#endif
