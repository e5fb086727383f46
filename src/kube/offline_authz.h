/*
 * offline_authz.h - which writes the hub makes while the cloud is
 * unreachable, and what they make of the cached object.
 *
 * Online, the API server judges a write of this node with the Node
 * authorizer and the NodeRestriction admission plugin: a node may write
 * the status of the pods bound to it, its own Node (its status; labels only
 * within the set a kubelet may set, taints and configSource unchanged), its
 * own Lease in kube-node-lease, Events, and tokens for the service accounts
 * of its pods.  Offline the hub makes exactly those writes and no other
 * (docs/offline.md, "What may be written offline"): everything else is
 * refused 403 with the API server's words, before anything is stored or any
 * watcher told.  A request that brings its own Authorization header was
 * judged online by that credential, which nobody can judge offline: every
 * write of it is refused.
 *
 * A write to a status subresource changes status only, as the API server's
 * status strategies do: the update or patch is applied to the cached object,
 * and only the resulting status is taken onto it.
 *
 * Pure: request attributes and JSON in, a verdict and the new object out.
 * The offline answers (proxy/local.c) find the cached objects, store the
 * result and answer.  In three steps, as the objects are needed:
 *
 *   offline_authz_request   the request alone (its create body included)
 *   offline_authz_token     a TokenRequest, with the pod it is bound to
 *   offline_authz_update    an update or patch, with the cached object
 */
#ifndef YURTHUB_KUBE_OFFLINE_AUTHZ_H
#define YURTHUB_KUBE_OFFLINE_AUTHZ_H

#include <stdbool.h>
#include <stddef.h>

#include "kube/requestinfo.h"
#include "util/buf.h"

/* What an allowed offline write is. */
enum offline_write_kind {
	OFFLINE_WRITE_DENIED,
	OFFLINE_WRITE_POD_STATUS,   /* pods/status of a pod bound here: status only */
	OFFLINE_WRITE_NODE_STATUS,  /* nodes/status of this node: status only */
	OFFLINE_WRITE_NODE,	    /* this Node, as NodeRestriction lets a node */
	OFFLINE_WRITE_NODE_CREATE,  /* this Node registering: echoed, not stored */
	OFFLINE_WRITE_LEASE,	    /* this node's Lease: update, patch */
	OFFLINE_WRITE_LEASE_CREATE, /* this node's Lease: echoed, not stored */
	OFFLINE_WRITE_EVENT_CREATE, /* kept in the outbox, echoed */
	OFFLINE_WRITE_EVENT,	    /* update, patch of a cached Event */
	OFFLINE_WRITE_TOKEN,	    /* TokenRequest: the offline token */
};

/* One offline write (create, update or patch), as the client sent it. */
struct offline_write {
	const struct request_info *ri;
	const char *node;	  /* --node-name */
	bool own_credentials;	  /* an Authorization header of its own */
	const char *content_type; /* NULL when none */
	const char *body;	  /* NUL-terminated (may hold NULs before) */
	size_t body_len;
};

/* Why a write is refused: the answer's code, Status reason (NULL: the usual
 * one for the code), message and details.name (NULL: no details). */
struct offline_refusal {
	int code;
	const char *reason;
	char *message;
	char *name;
};
void offline_refusal_free(struct offline_refusal *r);

/* Step one: what the request is, from its verb, resource, name, whether it
 * has credentials of its own and, for a create, its body.  The kind, or
 * OFFLINE_WRITE_DENIED with *why filled in (free it in both cases). */
enum offline_write_kind offline_authz_request(const struct offline_write *w,
					      struct offline_refusal *why);

/* A TokenRequest: the name of the pod its spec.boundObjectRef names
 * (malloc'ed; NULL when none), to be looked up in the namespace of the
 * request; then whether the token may be made, given that pod as cached
 * (NULL: not cached).  0, or -1 with *why. */
char *offline_authz_token_pod(const struct offline_write *w);
int offline_authz_token(const struct offline_write *w, const char *pod, size_t pod_len,
			struct offline_refusal *why);

/* An update or patch of kind (from step one) to the cached object old: 0
 * with the new object appended to out (one compact JSON object), or -1
 * with *why: 403 when the result is not the node's to make, 400/409/415/
 * 422 when the write cannot be applied, 500 when old does not parse. */
int offline_authz_update(const struct offline_write *w, enum offline_write_kind kind,
			 const char *old, size_t old_len, struct buf *out,
			 struct offline_refusal *why);

/* The authorization filter's words for a request user may not make:
 * `<resource> "<name>" is forbidden: User "<user>" cannot <verb> resource
 * ... in the namespace "<ns>"` (or `at the cluster scope`), appended to
 * out.  0 or -1. */
int offline_authz_forbidden_message(struct buf *out, const struct request_info *ri,
				    const char *user);

/* Whether a kubelet may set, change or remove the Node label key, as
 * NodeRestriction decides. */
bool offline_authz_node_label_ok(const char *key);

#endif
