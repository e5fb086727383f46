/*
 * health.h - is the cloud there?  Per-backend probing (docs/contracts.md §7),
 * in cloud/ beside the backends whose state it sets (struct backend's
 * healthy flag).
 *
 * Every --heartbeat-interval-seconds each backend gets GET /healthz with a
 * --heartbeat-timeout-seconds timeout.  Any HTTP answer below 500 counts as
 * reachable (an API server that refuses the hub's identity on /healthz is
 * still there); a connect error, a timeout or a 5xx is a failure.  After
 * --heartbeat-failed-retry failures in a row a backend is unhealthy; after
 * --heartbeat-healthy-threshold successes in a row it is healthy again.  The
 * first probe at start sets the state directly.
 *
 * A proxied request that fails to reach a backend counts as one failure and
 * starts the remaining attempts at once, in parallel, so that a dead link is
 * noticed within one probe timeout of the first failure.  A link that only
 * goes silent is suspected the same way: a probe, or a proxied request,
 * without an answer after health_suspect_ms() (a quarter of the timeout)
 * starts the other attempts, which time out together (health.c).
 */
#ifndef YURTHUB_CLOUD_HEALTH_H
#define YURTHUB_CLOUD_HEALTH_H

#include "config.h"
#include "metrics/metrics.h"
#include "cloud/upstream.h"

struct health;

struct health *health_new(struct upstream *u, const struct config *cfg, struct metrics *m);
/* Start probing in a thread: every backend once at once (bounded by the
 * probe timeout), then every interval.  0 or -1. */
int health_start(struct health *h);
/* Wait until the first probe of every backend has an answer. */
void health_wait_first(struct health *h);
/* Before health_start(): the hub bootstraps from nothing (a token, no client
 * certificate ever), so its first probe waits for the CA that discovery
 * finds and the certificate of the CSR (health_probe_now() wakes it) rather
 * than fail TLS with no CA; health_wait_first() waits at most 10 s for it,
 * then the requests are answered from the cache while it comes. */
void health_await_identity(struct health *h);
void health_stop(struct health *h);
void health_free(struct health *h);

/* A proxied request to b has had no answer (response headers) for
 * health_suspect_ms(): probe b now with every attempt a verdict needs, in
 * parallel.  Calls while that round is due cost nothing. */
void health_suspect(struct health *h, struct backend *b);
long health_suspect_ms(const struct health *h);

/* Probe every backend now rather than at the next interval, and take that
 * one probe's verdict as at start: the hub has just got the CA or the
 * certificate it needed to be heard, and what was said before is moot. */
void health_probe_now(struct health *h);

/* A proxied request could not reach b (connect error, timeout). */
void health_report_failure(struct health *h, struct backend *b);

/* Incremented on every change of any backend's state: connection threads
 * compare it to notice "the cloud came back" or "this backend went away". */
unsigned long health_generation(struct health *h);

#endif
