/*
 * etcd_check.h - checks of the etcd store's records straight from etcd,
 * for tests: that every object, S/m record and S/h record agree (no
 * orphan ownership, no holder without its object), and what a prefix holds.
 */
#ifndef YURTHUB_TESTS_ETCD_CHECK_H
#define YURTHUB_TESTS_ETCD_CHECK_H

#include <stddef.h>

#include "etcd/client.h"
#include "storage/etcd.h"
#include "util/buf.h"

/* A client for one endpoint; aborts the test process when it cannot. */
struct etcd_client *check_client(const char *endpoint);

/* The store's records and objects agree (etcd_store_verify).  Returns the
 * number of problems; each is described in *report (a line each). */
int check_records(struct store *s, struct buf *report);

/* The keys under a prefix, space-separated in key order, each with
 * strip_len leading bytes cut.  malloc'ed. */
char *check_keys(struct etcd_client *c, const char *prefix, size_t strip_len);

/* Number of keys under prefix. */
long check_count(struct etcd_client *c, const char *prefix);

#endif
