/*
 * local_token.h - bearer tokens while the cloud is unreachable
 * (docs/contracts.md section 6, docs/offline.md "Bearer tokens offline").
 *
 * Online the cloud judges a request that carries its own Authorization.
 * Offline the hub must, or anyone could read what kubelet cached: a request
 * with an Authorization header is answered only when it is a bearer token
 * of a pod of this node, verified against the cluster's service-account
 * keys (identity/sakeys.h), and even then never gets a Secret its pod does
 * not mount.
 */
#ifndef YURTHUB_PROXY_LOCAL_TOKEN_H
#define YURTHUB_PROXY_LOCAL_TOKEN_H

#include <stdbool.h>

#include "http/request.h"

struct proxy;

/* Offline, at the start of local_answer: true when req was refused (401 a
 * token that does not check out, 403 a Secret its pod does not mount) with
 * the answer's result in *rc; false when it goes on (no Authorization, or a
 * checked token asking for what its pod may read). */
bool local_token_refused(struct proxy *p, struct request *req, int *rc);

/* Online: a client's bearer token passes by on its way to the cloud; a key
 * the hub does not know yet is fetched soon (sa_keys_note). */
void local_token_note(struct proxy *p, const struct request *req);

#endif
