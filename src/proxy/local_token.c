/*
 * local_token.c - bearer tokens offline, see local_token.h.
 *
 * kube-apiserver checks a pod's token by its signature, claims and bound
 * pod, then authorizes by RBAC, which the hub does not have.  What the hub
 * can stand for offline is narrower: the pod is one of this node's, known
 * to the cache, and what the node could read for it online (the Node
 * authorizer lets a node read the Secrets its pods mount) is what the
 * pod's token reads here.  Other reads are served as to any local client.
 *
 * Tokens are never logged; why one was refused is, at -v 2.
 */
#include "proxy/local_token.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cache/manager.h"
#include "http/response.h"
#include "identity/sakeys.h"
#include "kube/meta.h"
#include "kube/offline_authz.h"
#include "proxy/local.h"
#include "proxy/proxy.h"
#include "util/log.h"

/* The token of "Authorization: Bearer <token>" (scheme in any case), and
 * its length; NULL when the header is another scheme or empty. */
static const char *bearer_token(const char *auth, size_t *len)
{
	if (strncasecmp(auth, "Bearer ", 7))
		return NULL;
	const char *t = auth + 7;
	while (*t == ' ')
		t++;
	size_t n = strlen(t);
	while (n && t[n - 1] == ' ')
		n--;
	*len = n;
	return n ? t : NULL;
}

static bool unauthorized(struct request *req, const char *why, int *rc)
{
	log_v(2, "offline: %s %s: bearer token refused: %s", req->ri.method, req->raw_uri,
	      why ? why : "out of memory");
	*rc = reply_status(req, 401, "Unauthorized", "Unauthorized", NULL);
	return true;
}

/* The cached pod ns/name (any component's copy; the newest), parsed, or
 * NULL. */
static json_t *cached_pod(struct proxy *p, const char *ns, const char *name)
{
	struct component_list comps;
	if (local_components(p, NULL, &comps) < 0)
		return NULL;
	struct request_info pods = {.api_group = "", .api_version = "v1", .resource = "pods"};
	struct buf obj = BUF_INIT, best = BUF_INIT;
	uint64_t best_rv = 0;
	bool found = false;
	for (size_t i = 0; i < comps.n; i++) {
		struct store_key k;
		if (cache_object_key(p->store, comps.v[i], &pods, ns, name, &k) != STORE_OK)
			continue;
		buf_reset(&obj);
		uint64_t rv = 0;
		if (store_get(p->store, &k, &obj) == STORE_OK &&
		    kube_meta_rv(obj.data, obj.len, &rv) == 0 && (!found || rv > best_rv)) {
			struct buf t = best;
			best = obj;
			obj = t;
			best_rv = rv;
			found = true;
		}
		store_key_free(&k);
	}
	local_components_free(&comps);
	json_t *pod = found ? json_loadb(best.data, best.len, 0, NULL) : NULL;
	buf_free(&obj);
	buf_free(&best);
	return pod;
}

static const char *str_at(json_t *o, const char *a, const char *b)
{
	return json_string_value(json_object_get(json_object_get(o, a), b));
}

/* Is the pod the one the token is bound to, on this node, not going away?
 * NULL when it is, else why not. */
static const char *pod_refusal(struct proxy *p, json_t *pod, const struct sa_token *t)
{
	if (!json_is_object(pod))
		return "the token's pod is not cached";
	const char *uid = str_at(pod, "metadata", "uid"), *node = str_at(pod, "spec", "nodeName"),
		   *sa = str_at(pod, "spec", "serviceAccountName");
	if (!uid || strcmp(uid, t->pod_uid))
		return "the token's pod was replaced (another uid)";
	if (!node || strcmp(node, p->node_name))
		return "the token's pod is not on this node";
	if (json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp"))
		return "the token's pod is being deleted";
	if (strcmp(sa ? sa : "default", t->service_account))
		return "the token's pod runs as another service account";
	return NULL;
}

static bool is(const char *n, const char *name)
{
	return n && !strcmp(n, name);
}

/* Does one container's env or envFrom name the Secret? */
static bool container_uses(json_t *c, const char *name)
{
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(c, "env"), i, v)
	{
		if (is(str_at(json_object_get(v, "valueFrom"), "secretKeyRef", "name"), name))
			return true;
	}
	json_array_foreach(json_object_get(c, "envFrom"), i, v)
	{
		if (is(str_at(v, "secretRef", "name"), name))
			return true;
	}
	return false;
}

/* The Secrets a pod mounts: its volumes' (secret, projected secret
 * sources) and its containers' env and envFrom (init and ephemeral ones
 * too), as the Node authorizer's graph has them. */
static bool pod_mounts(json_t *pod, const char *name)
{
	json_t *spec = json_object_get(pod, "spec");
	size_t i, j;
	json_t *v, *src;
	json_array_foreach(json_object_get(spec, "volumes"), i, v)
	{
		if (is(str_at(v, "secret", "secretName"), name))
			return true;
		json_t *sources = json_object_get(json_object_get(v, "projected"), "sources");
		json_array_foreach(sources, j, src)
		{
			if (is(str_at(src, "secret", "name"), name))
				return true;
		}
	}
	static const char *const lists[] = {"containers", "initContainers", "ephemeralContainers"};
	for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++) {
		json_array_foreach(json_object_get(spec, lists[l]), i, v)
		{
			if (container_uses(v, name))
				return true;
		}
	}
	return false;
}

/* 403 as the API server words it, and why the hub says so. */
static bool forbidden(struct request *req, const struct sa_token *t, int *rc)
{
	const struct request_info *ri = &req->ri;
	struct buf msg = BUF_INIT, user = BUF_INIT, details = BUF_INIT;
	int e = buf_printf(&user, "system:serviceaccount:%s:%s", t->namespace, t->service_account);
	e = e ? e : offline_authz_forbidden_message(&msg, ri, buf_cstr(&user));
	e = e ? e
	      : buf_append_str(&msg, ": while the cloud is unreachable, a pod's token reads only "
				     "the Secrets its pod mounts, by name");
	log_v(2, "offline: %s %s: a pod's token may not read that Secret", ri->method,
	      req->raw_uri);
	*rc = e ? -1
		: reply_status(
		      req, 403, "Forbidden", msg.data,
		      local_status_details(&details, *ri->name ? ri->name : NULL, NULL, "secrets"));
	buf_free(&msg);
	buf_free(&user);
	buf_free(&details);
	return true;
}

static bool is_secrets(const struct request_info *ri)
{
	return ri->is_resource && !*ri->api_group && !strcmp(ri->resource, "secrets");
}

bool local_token_refused(struct proxy *p, struct request *req, int *rc)
{
	const char *auth = request_header(req, "Authorization");
	if (!auth)
		return false;
	size_t len = 0;
	const char *token = bearer_token(auth, &len);
	if (!token)
		return unauthorized(req, "not a bearer token", rc);
	if (!p->sa_keys)
		return unauthorized(req, "the hub keeps no service-account keys", rc);
	struct sa_token t;
	char *why = NULL;
	if (sa_keys_verify(p->sa_keys, token, len, &t, &why) != SATOKEN_OK) {
		bool r = unauthorized(req, why, rc);
		free(why);
		return r;
	}
	json_t *pod = cached_pod(p, t.namespace, t.pod_name);
	const char *refusal = pod_refusal(p, pod, &t);
	bool refused = true;
	if (refusal)
		unauthorized(req, refusal, rc);
	else if (is_secrets(&req->ri) && (strcmp(req->ri.namespace, t.namespace) ||
					  !*req->ri.name || !pod_mounts(pod, req->ri.name)))
		forbidden(req, &t, rc);
	else
		refused = false;
	json_decref(pod);
	satoken_free(&t);
	return refused;
}

void local_token_note(struct proxy *p, const struct request *req)
{
	const char *auth = request_header(req, "Authorization");
	size_t len = 0;
	const char *token = auth && p->sa_keys ? bearer_token(auth, &len) : NULL;
	if (token)
		sa_keys_note(p->sa_keys, token, len);
}
