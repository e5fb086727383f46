/*
 * sakeys.h - the cluster's service-account signing keys, kept with the
 * cache, so that the hub can check a pod's bearer token while the cloud is
 * unreachable (docs/offline.md, "Bearer tokens offline").
 *
 * While the cloud answers, the hub reads kube-apiserver's service-account
 * issuer discovery with its own identity: /.well-known/openid-configuration
 * (the issuer) and /openid/v1/jwks (the public keys).  Both documents are
 * stored as the cloud sent them among the store's cluster-info documents,
 * on the disk or in etcd, so that they are there after a reboot offline.
 * They are read again every SAKEYS_REFRESH_S, a minute after a failure, and
 * - at most once a minute - when a client's token names a key the hub does
 * not know (the cluster rotated its keys).
 *
 * kube-apiserver's default RBAC lets only service accounts read those
 * documents (the ClusterRole system:service-account-issuer-discovery is
 * bound to the group system:serviceaccounts); the hub, a node, gets 403
 * until the operator binds it to system:nodes too.  The hub then logs one
 * warning saying so, and offline every bearer token gets 401.
 *
 * Thread-safe: the housekeeping thread refreshes, connection threads verify
 * and note tokens.
 */
#ifndef YURTHUB_IDENTITY_SAKEYS_H
#define YURTHUB_IDENTITY_SAKEYS_H

#include <stddef.h>

#include "cloud/upstream.h"
#include "identity/satoken.h"
#include "storage/store.h"

#define SAKEYS_REFRESH_S 600
#define SAKEYS_RETRY_S	 60
#define SAKEYS_OIDC_PATH "/.well-known/openid-configuration"
#define SAKEYS_JWKS_PATH "/openid/v1/jwks"
/* The binding the operator adds when the cloud refuses the hub. */
#define SAKEYS_RBAC_HINT                                                                           \
	"kubectl create clusterrolebinding yurthub-service-account-issuer-discovery "              \
	"--clusterrole=system:service-account-issuer-discovery --group=system:nodes"

struct sa_keys;

/* The keys of store (what it holds is loaded now), fetched through up.
 * NULL on ENOMEM. */
struct sa_keys *sa_keys_new(struct store *store, struct upstream *up);
void sa_keys_free(struct sa_keys *k);

/* A periodic chore: while the cloud answers, fetch the documents when they
 * are due (first call, the refresh period, a retry, a token's unknown kid),
 * store them and use them. */
void sa_keys_refresh(struct sa_keys *k);

/* A client's bearer token passes on to the cloud: when its kid is not a
 * known key's, the next refresh fetches the keys (at most once a minute). */
void sa_keys_note(struct sa_keys *k, const char *token, size_t len);

/* Offline: check a token (satoken_verify with the stored issuer and keys).
 * A token of an unknown kid makes the hub read the store again (at most
 * once a minute: another hub of the pool may have stored newer keys). */
enum satoken_result sa_keys_verify(struct sa_keys *k, const char *token, size_t len,
				   struct sa_token *out, char **why);

#endif
