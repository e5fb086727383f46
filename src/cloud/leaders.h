/*
 * leaders.h - the pool's leader hubs as a follower reaches them
 * (docs/sharing.md, "The pool's leader").
 *
 * A follower's multiplexer lists and watches the pool-scope resources from
 * a leader hub rather than from the cloud: https://<address>:<port> of each
 * leader named in the pool's leader-hub configmap, with the hub's client
 * certificate, the leader's serving certificate checked against the
 * cluster CA (the handles of upstream.h, with the same identity).  A leader
 * is used only while its last TCP probe succeeded: every 20 s, at once when
 * the set changes, and at once after a request could not reach it.
 *
 * Backends made here are struct backend too (leader set): the proxy's
 * request path drives them as it drives the cloud's.  They are never freed
 * before leaders_free, since a connection thread may hold one.
 */
#ifndef YURTHUB_CLOUD_LEADERS_H
#define YURTHUB_CLOUD_LEADERS_H

#include <stddef.h>

#include "cloud/upstream.h"

#define LEADERS_PROBE_INTERVAL_S 20
#define LEADERS_PROBE_TIMEOUT_MS 2000

struct leaders;

/* For leaders serving on port (--multiplexer-port).  NULL on ENOMEM. */
struct leaders *leaders_new(int port);
/* Start the prober thread.  0 or -1. */
int leaders_start(struct leaders *l);
/* Stop it and free; NULL is fine. */
void leaders_free(struct leaders *l);

/* The leaders to use, by address ("10.0.0.5", "fd00::5"); n 0: none (this
 * hub is not a follower).  They are probed at once.  0 or -1 (ENOMEM: the
 * previous set stays). */
int leaders_set(struct leaders *l, const char *const *addresses, size_t n);
/* Wait, at most ms, until the set last given has been probed once. */
void leaders_wait_probed(struct leaders *l, long ms);
/* A leader whose last probe succeeded, round robin; NULL when none. */
struct backend *leaders_pick(struct leaders *l);
/* A request could not reach b: it is unusable until a probe says otherwise,
 * and the probe runs now. */
void leaders_report_failure(struct leaders *l, struct backend *b);
/* Incremented each time a leader becomes usable: the multiplexer's watches
 * that went to the cloud meanwhile end, and resume from the leader. */
unsigned long leaders_generation(struct leaders *l);

#endif
