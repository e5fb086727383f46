/*
 * podendpoints.h - making cached endpoints follow a pod of this node while
 * the cloud is away.
 *
 * When a pod of this node changes its IPs or its Ready condition offline,
 * nobody runs the endpoint controllers, so the hub rewrites the cached
 * EndpointSlices (discovery.k8s.io/v1) and Endpoints (core v1) that target
 * the pod, and kube-proxy and coredns see the new addresses.  This module is
 * the pure JSON part of that: it reads what endpoints show of a pod and
 * rewrites one endpoints object; finding the objects and storing them is the
 * caller's.
 *
 * An endpoint targets the pod when its targetRef.kind is "Pod" and either
 * targetRef.uid equals the pod's uid (both non-empty), or targetRef.name
 * equals the pod's name and targetRef.namespace (when it has none or "", the
 * object's own metadata.namespace) equals the pod's namespace.
 *
 * Inputs are untrusted: members of the wrong type are skipped.  Documents
 * are parsed with jansson (integers must fit in int64) and written compact,
 * with key order kept.
 */
#ifndef YURTHUB_KUBE_PODENDPOINTS_H
#define YURTHUB_KUBE_PODENDPOINTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

/* What endpoints show of one pod, read from the pod's JSON. */
struct pod_endpoint_state {
	/* "" when absent, never NULL after a successful parse */
	char *namespace, *name, *uid, *node_name;
	/* status.podIPs[].ip in order; status.podIP when podIPs gives none */
	char **ips;
	size_t n_ips;
	/* status.conditions[type=Ready].status == "True" and no deletionTimestamp */
	bool ready;
	/* metadata.deletionTimestamp set (not null) */
	bool terminating;
};

/* 0, or -1 (not a JSON object / no name; also out of memory).  *out is
 * overwritten (not freed first); after -1 it is empty and need not be freed. */
int pod_endpoint_state_parse(const char *pod, size_t len, struct pod_endpoint_state *out);
/* Frees the members and empties *s; safe on an empty (zeroed) state. */
void pod_endpoint_state_free(struct pod_endpoint_state *s);

/* Whether two states differ in what endpoints show (ips, ready, terminating). */
bool pod_endpoint_state_differs(const struct pod_endpoint_state *a,
				const struct pod_endpoint_state *b);

/* Rewrite an EndpointSlice so its endpoints that target the pod follow it:
 * addresses become [the pod's first IP of the slice's addressType] (kept
 * when it has none), conditions.ready = ready && !terminating, .serving =
 * ready, .terminating = terminating.  A slice whose addressType is not IPv4
 * or IPv6 (FQDN) is left alone.
 * 1: changed, the new JSON (compact) appended to out, with
 * metadata.resourceVersion set to the decimal string of rv; 0: nothing
 * targets the pod or nothing changes (out untouched); -1: error (does not
 * parse, not an object, metadata not an object, out of memory; out
 * untouched). */
int endpointslice_follow_pod(const char *slice, size_t len, const struct pod_endpoint_state *pod,
			     uint64_t rv, struct buf *out);

/* The same for a v1 Endpoints object: in each subset, an entry of addresses
 * or notReadyAddresses that targets the pod gets as ip the pod's first IP of
 * the family of its current ip (kept when it has none), and is moved to the
 * end of addresses when ready && !terminating, else of notReadyAddresses; an
 * array left empty by a move is dropped.  A subset whose addresses or
 * notReadyAddresses is not an array (nor absent or null) is left alone. */
int endpoints_follow_pod(const char *eps, size_t len, const struct pod_endpoint_state *pod,
			 uint64_t rv, struct buf *out);

#endif
