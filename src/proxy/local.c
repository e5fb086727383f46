/*
 * local.c - answers from the store while the cloud is unreachable, see
 * local.h: routing by verb, single objects, writes, discovery.  Lists and
 * watches are in local_list.c.
 */
#include "proxy/local.h"

#include <gnutls/crypto.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cache/behind.h"
#include "cache/local_changes.h"
#include "cache/manager.h"
#include "cluster/cluster.h"
#include "http/response.h"
#include "kube/kinds.h"
#include "kube/meta.h"
#include "kube/offline_authz.h"
#include "proxy/local_internal.h"
#include "proxy/local_token.h"
#include "proxy/outbox.h"
#include "proxy/proxy.h"
#include "util/base64.h"
#include "util/log.h"

/* ---- shared helpers ---- */

/* Seconds a client waits before asking again a store that could not be
 * read: the etcd store's call timeout, about what a stall lasts. */
#define LOCAL_STORE_RETRY_AFTER "5"

int local_status(struct request *req, int code, const char *message)
{
	return reply_status(req, code, NULL, message, NULL);
}

static int answer_json(struct request *req, int code, struct buf *body)
{
	return reply_json(req, (unsigned int)code, body);
}

static int add_component(void *ctx, const char *name)
{
	struct component_list *l = ctx;
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], name))
			return 0;
	char **v = realloc(l->v, (l->n + 1) * sizeof *v);
	if (!v)
		return 1;
	l->v = v;
	if ((l->v[l->n] = strdup(name)))
		l->n++;
	return 0;
}

enum store_err local_components_read(struct proxy *p, const char *own, struct component_list *out)
{
	memset(out, 0, sizeof *out);
	if (own && *own)
		add_component(out, own);
	enum store_err e = store_list_components(p->store, add_component, out);
	if (e != STORE_OK)
		local_components_free(out);
	return e;
}

int local_components(struct proxy *p, const char *own, struct component_list *out)
{
	return local_components_read(p, own, out) == STORE_OK ? 0 : -1;
}

bool local_store_down(enum store_err e)
{
	return e == STORE_UNAVAILABLE || e == STORE_IO || e == STORE_NOMEM;
}

void local_stale_warning(struct proxy *p, const struct request *req, struct reply *r)
{
	struct store_gvr gvr = {req->ri.api_group, req->ri.api_version, req->ri.resource};
	int64_t since = 0;
	if (!r || !views_behind_resource(cache_manager_views_behind(p->cache), &gvr, &since))
		return;
	char when[32] = "";
	time_t t = (time_t)since;
	struct tm tm;
	if (gmtime_r(&t, &tm))
		strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
	struct buf w = BUF_INIT;
	if (buf_printf(&w,
		       "299 - \"yurthub: the cached %s may be stale: since %s the store could not "
		       "take every change the cloud sent; they are listed again once the store "
		       "and the cloud are back\"",
		       req->ri.resource, when) == 0)
		reply_header(r, "Warning", w.data);
	buf_free(&w);
}

int local_store_unavailable(struct request *req, enum store_err e)
{
	struct buf msg = BUF_INIT;
	buf_printf(&msg,
		   "the cloud is unreachable and the hub's store cannot be read (%s%s%s): "
		   "nothing is known about %s; try again",
		   store_strerror(e), e == STORE_IO ? ": " : "",
		   e == STORE_IO ? strerror(store_errno()) : "",
		   *req->ri.resource ? req->ri.resource : req->ri.path);
	struct reply *r = reply_status_new(503, "ServiceUnavailable", buf_cstr(&msg), NULL);
	buf_free(&msg);
	if (r)
		reply_header(r, "Retry-After", LOCAL_STORE_RETRY_AFTER);
	return reply_send(req, 503, r);
}

void local_components_free(struct component_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof *l);
}

void local_kind_of(struct proxy *p, const struct request *req, struct local_kind *out)
{
	const struct request_info *ri = &req->ri;
	memset(out, 0, sizeof *out);
	struct buf av = BUF_INIT;
	if (*ri->api_group)
		buf_printf(&av, "%s/%s", ri->api_group, ri->api_version);
	else
		buf_append_str(&av, ri->api_version);
	out->api_version = buf_steal(&av);
	const char *builtin = kinds_builtin(ri->api_group, ri->resource);
	if (builtin) {
		out->kind = strdup(builtin);
		return;
	}
	/* a CRD: its discovery document, if the hub cached it */
	struct buf path = BUF_INIT, doc = BUF_INIT;
	if (buf_printf(&path, "/%s/%s", *ri->api_group ? "apis" : "api", out->api_version) == 0 &&
	    store_get_cluster_info(p->store, path.data, &doc) == STORE_OK)
		out->kind = kinds_from_discovery(doc.data, doc.len, ri->resource);
	buf_free(&path);
	buf_free(&doc);
}

void local_kind_free(struct local_kind *k)
{
	free(k->kind);
	free(k->api_version);
	memset(k, 0, sizeof *k);
}

int local_append_object(struct buf *out, const char *obj, size_t len, const struct local_kind *k)
{
	struct kube_meta m;
	bool has_kind = kube_meta_parse(obj, len, &m) == 0 && m.kind && m.api_version;
	kube_meta_free(&m);
	const char *brace = memchr(obj, '{', len);
	if (has_kind || !k->kind || !brace)
		return buf_append(out, obj, len);
	/* insert right after the opening brace; "{}" needs no comma */
	const char *rest = brace + 1;
	size_t rest_len = len - (size_t)(rest - obj);
	const char *p = rest;
	while (p < obj + len && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r'))
		p++;
	bool empty = p < obj + len && *p == '}';
	int rc = buf_append(out, obj, (size_t)(rest - obj));
	rc = rc ? rc : buf_append_str(out, "\"kind\":");
	rc = rc ? rc : local_json_string(out, k->kind);
	rc = rc ? rc : buf_append_str(out, ",\"apiVersion\":");
	rc = rc ? rc : local_json_string(out, k->api_version);
	rc = rc ? rc : buf_append_str(out, empty ? "" : ",");
	return rc ? rc : buf_append(out, rest, rest_len);
}

/* ---- the response filters, on the way out ---- */

int local_rewrite_new(struct proxy *p, const struct request *req, enum rewrite_shape shape,
		      rewrite_out_fn out, void *ctx, struct rewrite **rw)
{
	*rw = NULL;
	filter_mask mask = p->cluster
			       ? cluster_filters_for(p->cluster, req->component,
						     request_info_verb(&req->ri), req->ri.resource)
			       : 0;
	if (!mask)
		return 0;
	struct filter_target t = {req->ri.api_group, req->ri.api_version, req->ri.resource};
	*rw = rewrite_new(shape, false, mask, &t, cluster_env_ref(p->cluster), out, ctx);
	return *rw ? 0 : -1;
}

void local_rewrite_free(struct proxy *p, struct rewrite *rw)
{
	if (!rw)
		return;
	unsigned long changed, dropped;
	rewrite_counts(rw, &changed, &dropped);
	atomic_fetch_add(&p->metrics->filter_changed, changed);
	atomic_fetch_add(&p->metrics->filter_dropped, dropped);
	rewrite_free(rw);
}

static int append_to(void *ctx, const char *data, size_t len)
{
	return buf_append(ctx, data, len);
}

/* One object about to be answered (obj, kind filled in), through req's
 * filters: 0 with obj what the component gets, 1 when a filter drops it
 * (the answer is 404, as online), -1. */
static int filter_object(struct proxy *p, struct request *req, struct buf *obj)
{
	struct buf filtered = BUF_INIT;
	struct rewrite *rw;
	if (local_rewrite_new(p, req, REWRITE_OBJECT, append_to, &filtered, &rw) < 0)
		return -1;
	if (!rw)
		return 0;
	int rc = rewrite_feed(rw, obj->data ? obj->data : "", obj->len);
	rc = rc ? rc : rewrite_finish(rw);
	if (rc < 0)
		log_warn("offline: %s %s: the answer cannot be filtered: %s", req->component,
			 req->raw_uri, rewrite_error(rw));
	else if (rewrite_dropped(rw))
		rc = 1;
	local_rewrite_free(p, rw);
	if (rc == 0) {
		buf_free(obj);
		*obj = filtered;
	} else {
		buf_free(&filtered);
	}
	return rc;
}

/* What find_cached() answers when it has no object. */
#define FOUND_NONE    (-1) /* no component has it */
#define FOUND_DOWN    (-2) /* the store could not be read (*down says why) */
#define FOUND_DAMAGED (-3) /* the only copies are damaged (storage/store.h) */

/* Find the cached object ns/name of ri's resource in component own's
 * cache, or another's: 0 with the bytes in out and the component in *where
 * (malloc'ed), or a FOUND_* above. */

static int find_cached(struct proxy *p, const char *own, const struct request_info *ri,
		       const char *ns, const char *name, struct buf *out, char **where,
		       enum store_err *down)
{
	struct component_list comps;
	*where = NULL;
	*down = local_components_read(p, own, &comps);
	if (*down != STORE_OK)
		return local_store_down(*down) ? FOUND_DOWN : FOUND_NONE;
	int rc = FOUND_NONE;
	/* a file that fails may leave another component's copy to answer; an
	 * unreachable etcd would only make each one wait its timeout */
	for (size_t i = 0; i < comps.n && rc < 0 && *down != STORE_UNAVAILABLE; i++) {
		struct store_key k;
		if (cache_object_key(p->store, comps.v[i], ri, ns, name, &k) != STORE_OK)
			continue;
		buf_reset(out);
		enum store_err e = store_get(p->store, &k, out);
		if (e == STORE_OK && (*where = strdup(comps.v[i])))
			rc = 0;
		else if (e == STORE_DAMAGED)
			rc = FOUND_DAMAGED;
		else if (local_store_down(e))
			*down = e;
		store_key_free(&k);
	}
	local_components_free(&comps);
	return rc == 0 ? 0 : local_store_down(*down) ? FOUND_DOWN : rc;
}

/* The cached object req names: as find_cached(). */
static int find_object(struct proxy *p, struct request *req, struct buf *out, char **where,
		       enum store_err *down)
{
	return find_cached(p, req->component, &req->ri, req->ri.namespace, req->ri.name, out, where,
			   down);
}

const char *local_status_details(struct buf *out, const char *name, const char *group,
				 const char *kind)
{
	int rc = buf_append_str(out, "{");
	if (name) {
		rc = rc ? rc : buf_append_str(out, "\"name\":");
		rc = rc ? rc : local_json_string(out, name);
		rc = rc ? rc : buf_append_str(out, ",");
	}
	if (group) {
		rc = rc ? rc : buf_append_str(out, "\"group\":");
		rc = rc ? rc : local_json_string(out, group);
		rc = rc ? rc : buf_append_str(out, ",");
	}
	rc = rc ? rc : buf_append_str(out, "\"kind\":");
	rc = rc ? rc : local_json_string(out, kind);
	rc = rc ? rc : buf_append_str(out, "}");
	return rc ? NULL : out->data;
}

static int not_cached(struct request *req)
{
	struct buf msg = BUF_INIT, details = BUF_INIT;
	buf_printf(&msg, "%s \"%s\" not found (the cloud is unreachable and the hub has no copy)",
		   req->ri.resource, req->ri.name);
	int r = reply_status(
	    req, 404, "NotFound", buf_cstr(&msg),
	    local_status_details(&details, req->ri.name, req->ri.api_group, req->ri.resource));
	buf_free(&msg);
	buf_free(&details);
	return r;
}

/* A 404 would tell the client the object is gone; it is not known to be. */
static int damaged_copy(struct request *req)
{
	struct buf msg = BUF_INIT;
	buf_printf(&msg,
		   "%s \"%s\": the cloud is unreachable and the hub's copy is damaged; the next "
		   "list from the cloud replaces it",
		   req->ri.resource, req->ri.name);
	int r = reply_status(req, 500, "InternalError", buf_cstr(&msg), NULL);
	buf_free(&msg);
	return r;
}

/* No object to answer with (found is a FOUND_*): a store that cannot be
 * read, or a copy that cannot be served, says so rather than 404. */
static int no_object(struct request *req, int found, enum store_err down)
{
	if (found == FOUND_DOWN)
		return local_store_unavailable(req, down);
	return found == FOUND_DAMAGED ? damaged_copy(req) : not_cached(req);
}

/* ---- get ---- */

static int local_get(struct proxy *p, struct request *req)
{
	struct buf obj = BUF_INIT, out = BUF_INIT;
	char *where = NULL;
	enum store_err down;
	int found = find_object(p, req, &obj, &where, &down);
	if (found < 0) {
		buf_free(&obj);
		return no_object(req, found, down);
	}
	struct local_kind k;
	local_kind_of(p, req, &k);
	int rc = local_append_object(&out, obj.data, obj.len, &k);
	local_kind_free(&k);
	buf_free(&obj);
	free(where);
	rc = rc ? rc : filter_object(p, req, &out);
	if (rc != 0) {
		buf_free(&out);
		return rc < 0 ? -1 : not_cached(req);
	}
	size_t len = out.len;
	struct reply *r = reply_buffer(buf_steal(&out), len, "application/json");
	local_stale_warning(p, req, r);
	return reply_send(req, 200, r);
}

/* ---- writes ---- */

int local_json_string(struct buf *out, const char *s)
{
	struct buf utf8 = BUF_INIT;
	int rc = buf_append_utf8(&utf8, s, strlen(s));
	rc = rc ? rc : buf_append_json_str(out, buf_cstr(&utf8), utf8.len);
	buf_free(&utf8);
	return rc;
}

int local_token_claims(struct buf *out, const char *ns, const char *name, long long exp)
{
	struct buf sub = BUF_INIT;
	int rc = buf_printf(&sub, "system:serviceaccount:%s:%s", ns, name);
	rc = rc ? rc : buf_append_str(out, "{\"iss\":\"yurthub\",\"sub\":");
	rc = rc ? rc : local_json_string(out, buf_cstr(&sub));
	rc = rc ? rc : buf_printf(out, ",\"exp\":%lld}", exp);
	buf_free(&sub);
	return rc;
}

/* header.claims.signature, the claims as local_token_claims() writes them;
 * 0 or -1. */
static int offline_token(struct buf *token, const char *ns, const char *name, long long exp)
{
	struct buf claims = BUF_INIT;
	int rc = local_token_claims(&claims, ns, name, exp);
	rc = rc ? rc : buf_append_str(token, "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.");
	rc = rc ? rc : base64url_encode(claims.data, claims.len, token);
	unsigned char mac[32];
	const char key[] = "yurthub-offline";
	if (rc == 0 && gnutls_hmac_fast(GNUTLS_MAC_SHA256, key, sizeof key - 1, token->data,
					token->len, mac) < 0)
		rc = -1;
	rc = rc ? rc : buf_append_char(token, '.');
	rc = rc ? rc : base64url_encode(mac, sizeof mac, token);
	buf_free(&claims);
	return rc;
}

/* A refused offline write: its Status, and a line in the log (a client
 * trying what the node may not do is worth knowing of). */
static int refuse(struct request *req, const struct offline_refusal *why)
{
	const struct request_info *ri = &req->ri;
	const char *msg = why->message ? why->message : "the write is refused";
	if (why->code == 403)
		log_info("offline %s of %s by \"%s\" refused: %s", request_info_verb(ri),
			 req->raw_uri, req->component, msg);
	struct buf details = BUF_INIT;
	int r = reply_status(req, why->code, why->reason, msg,
			     why->name ? local_status_details(&details, why->name,
							      *ri->api_group ? ri->api_group : NULL,
							      ri->resource)
				       : NULL);
	buf_free(&details);
	return r;
}

/* TokenRequest offline, for a service account of a pod bound to this node
 * (offline_authz_token): a token that says so, valid for a minute, like the
 * Go YurtHub's; nobody can verify it, and the cloud is not there to ask. */
static int fake_token(struct proxy *p, struct request *req, const struct offline_write *w)
{
	static const struct request_info pods = {
	    .api_group = "", .api_version = "v1", .resource = "pods"};
	struct buf pod = BUF_INIT;
	char *pod_name = offline_authz_token_pod(w), *where = NULL;
	enum store_err down = STORE_OK;
	int found = pod_name ? find_cached(p, req->component, &pods, req->ri.namespace, pod_name,
					   &pod, &where, &down)
			     : -1;
	bool cached = found == 0;
	if (found == FOUND_DOWN) { /* the pod may well be there: no refusal on that */
		free(pod_name);
		buf_free(&pod);
		return local_store_unavailable(req, down);
	}
	struct offline_refusal why;
	int ok = offline_authz_token(w, cached ? pod.data : NULL, pod.len, &why);
	free(pod_name);
	free(where);
	buf_free(&pod);
	if (ok < 0) {
		int r = refuse(req, &why);
		offline_refusal_free(&why);
		return r;
	}
	offline_refusal_free(&why);
	json_t *tr = json_loadb(buf_cstr(&req->body), req->body.len, 0, NULL);
	time_t exp = time(NULL) + 60;
	char stamp[32];
	struct tm tm;
	gmtime_r(&exp, &tm);
	strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
	struct buf token = BUF_INIT;
	char *text = NULL;
	if (tr && offline_token(&token, req->ri.namespace, req->ri.name, (long long)exp) == 0) {
		json_t *status = json_pack("{s:s, s:s}", "token", buf_cstr(&token),
					   "expirationTimestamp", stamp);
		if (status && json_object_set_new(tr, "status", status) == 0)
			text = json_dumps(tr, JSON_COMPACT);
	}
	json_decref(tr);
	buf_free(&token);
	if (!text)
		return -1;
	return reply_bytes(req, 201, text, strlen(text), "application/json");
}

/* The creates offline_authz_request() allowed: the token, Events kept to
 * be sent later, this node's Node and Lease echoed. */
static int local_create(struct proxy *p, struct request *req, const struct offline_write *w,
			enum offline_write_kind kind)
{
	if (kind == OFFLINE_WRITE_TOKEN)
		return fake_token(p, req, w);
	const char *ct = request_header(req, "Content-Type");
	if (kind == OFFLINE_WRITE_EVENT_CREATE && p->outbox) {
		int rc =
		    outbox_add(p->outbox, req->raw_uri, ct, buf_cstr(&req->body), req->body.len);
		if (rc < 0)
			log_warn("offline event for %s not kept: %s", req->raw_uri, strerror(-rc));
	}
	/* The answer echoes what the client sent, as the Go YurtHub does. */
	struct buf echo = BUF_INIT;
	if (buf_append(&echo, buf_cstr(&req->body), req->body.len) < 0)
		return -1;
	size_t len = echo.len;
	return reply_bytes(req, 201, buf_steal(&echo), len, ct ? ct : "application/json");
}

/* obj's metadata.resourceVersion set to rv; 0 or -1. */
static int set_rv(struct buf *obj, uint64_t rv)
{
	json_t *o = json_loadb(buf_cstr(obj), obj->len, 0, NULL);
	json_t *meta = json_object_get(o, "metadata");
	char text[24];
	snprintf(text, sizeof text, "%llu", (unsigned long long)rv);
	char *out = json_is_object(meta) &&
			    json_object_set_new(meta, "resourceVersion", json_string(text)) == 0
			? json_dumps(o, JSON_COMPACT)
			: NULL;
	json_decref(o);
	int rc = -1;
	if (out) {
		buf_reset(obj);
		rc = buf_append_str(obj, out);
	}
	free(out);
	return rc;
}

void local_write_failed(struct proxy *p, const struct store_key *k)
{
	struct buf stored = BUF_INIT;
	uint64_t rv = 0;
	if (store_get(p->store, k, &stored) != STORE_OK ||
	    kube_meta_rv(stored.data, stored.len, &rv) < 0)
		rv = 0;
	buf_free(&stored);
	local_changes_write_failed(p->changes, k, rv);
}

/* Store the result of an offline update of the object (cached at old_rv
 * in component where) at a local resourceVersion (cache/local_changes.h),
 * so that watchers get it as an event; upd gets that rv.  Without a journal
 * that can be saved, the old rv stays, as the cloud gave it. */
static void store_local_write(struct proxy *p, struct request *req, const char *where,
			      struct buf *upd, uint64_t old_rv)
{
	const char *comp = cache_agents_has(p->agents, req->component) ? req->component : where;
	struct store_key k;
	enum store_err e =
	    cache_object_key(p->store, comp, &req->ri, req->ri.namespace, req->ri.name, &k);
	if (e != STORE_OK) {
		log_warn("offline %s of %s not stored: %s", request_info_verb(&req->ri),
			 req->raw_uri, store_strerror(e));
		return;
	}
	uint64_t rv = local_changes_claim(p->changes, &k, 1);
	if (rv && set_rv(upd, rv) < 0)
		rv = 0;
	if (!rv)
		rv = old_rv;
	e = store_update(p->store, &k, upd->data, upd->len, rv, NULL);
	if (e == STORE_NOT_FOUND)
		e = store_create(p->store, &k, upd->data, upd->len);
	if (e != STORE_OK && rv != old_rv)
		local_write_failed(p, &k);
	store_key_free(&k);
	if (e != STORE_OK)
		log_warn("offline %s of %s not stored: %s", request_info_verb(&req->ri),
			 req->raw_uri, store_strerror(e));
}

/* An update or patch offline_authz_request() allowed: the new object is
 * decided from the cached one (offline_authz_update), then stored at a
 * local resourceVersion; when it is refused nothing is stored, and no
 * watcher told. */
static int local_write(struct proxy *p, struct request *req, const struct offline_write *w,
		       enum offline_write_kind kind)
{
	struct buf old = BUF_INIT, upd = BUF_INIT;
	char *where = NULL;
	enum store_err down;
	int found = find_object(p, req, &old, &where, &down);
	if (found < 0) {
		buf_free(&old);
		return no_object(req, found, down);
	}
	struct offline_refusal why;
	int r;
	if (offline_authz_update(w, kind, old.data, old.len, &upd, &why) < 0) {
		r = refuse(req, &why);
	} else {
		uint64_t old_rv = 0;
		if (kube_meta_rv(old.data, old.len, &old_rv) < 0)
			old_rv = 0;
		store_local_write(p, req, where, &upd, old_rv);
		if (kind == OFFLINE_WRITE_POD_STATUS)
			local_follow_pod(p, old.data, old.len, upd.data, upd.len);
		struct buf out = BUF_INIT;
		struct local_kind k;
		local_kind_of(p, req, &k);
		int rc = local_append_object(&out, upd.data, upd.len, &k);
		local_kind_free(&k);
		/* stored as written; answered as the component sees it */
		rc = rc ? rc : filter_object(p, req, &out);
		if (rc == 0) {
			r = answer_json(req, 200, &out);
		} else {
			buf_free(&out);
			r = rc < 0 ? -1 : not_cached(req);
		}
	}
	offline_refusal_free(&why);
	free(where);
	buf_free(&old);
	buf_free(&upd);
	return r;
}

/* Creates, updates and patches: only what this node could write online
 * (kube/offline_authz.h), judged before anything is looked up or stored. */
static int local_write_request(struct proxy *p, struct request *req)
{
	const struct request_info *ri = &req->ri;
	struct offline_write w = {
	    .ri = ri,
	    .node = p->node_name ? p->node_name : "",
	    .own_credentials =
		request_header(req, "Authorization") != NULL || req->auth == REQ_AUTH_BEARER,
	    .content_type = request_header(req, "Content-Type"),
	    .body = buf_cstr(&req->body),
	    .body_len = req->body.len,
	};
	struct offline_refusal why;
	enum offline_write_kind kind = offline_authz_request(&w, &why);
	int r;
	if (kind == OFFLINE_WRITE_DENIED)
		r = refuse(req, &why);
	else if (ri->verb == VERB_CREATE)
		r = local_create(p, req, &w, kind);
	else
		r = local_write(p, req, &w, kind);
	offline_refusal_free(&why);
	return r;
}

/* ---- non-resource requests ---- */

static const char *aggregated_type(const char *doc, size_t len)
{
	/* the document says which version of aggregated discovery it is */
	if (memmem(doc, len, "\"apidiscovery.k8s.io/v2beta1\"", 29))
		return "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
	return "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
}

static int local_nonresource(struct proxy *p, struct request *req)
{
	const char *path = req->ri.path;
	if (!strcmp(path, "/healthz") || !strncmp(path, "/healthz/", 9) ||
	    !strcmp(path, "/livez") || !strncmp(path, "/livez/", 7) || !strcmp(path, "/readyz") ||
	    !strncmp(path, "/readyz/", 8)) {
		return reply_text(req, 200, "ok");
	}
	if (strcmp(req->ri.method, "GET"))
		return local_status(req, 503, "this request needs the cloud, which is unreachable");
	struct buf doc = BUF_INIT;
	const char *accept = request_header(req, "Accept");
	bool agg_ok = accept && strstr(accept, "as=APIGroupDiscoveryList") &&
		      (!strcmp(path, "/api") || !strcmp(path, "/apis"));
	if (agg_ok) {
		struct buf apath = BUF_INIT;
		buf_printf(&apath, "/aggregated-discovery%s", path);
		enum store_err e = store_get_cluster_info(p->store, apath.data, &doc);
		buf_free(&apath);
		if (e == STORE_OK) {
			size_t len = doc.len;
			const char *type = aggregated_type(doc.data, doc.len);
			return reply_bytes(req, 200, buf_steal(&doc), len, type);
		}
	}
	enum store_err e = store_get_cluster_info(p->store, path, &doc);
	if (e == STORE_OK)
		return answer_json(req, 200, &doc);
	buf_free(&doc);
	if (local_store_down(e))
		return local_store_unavailable(req, e);
	return local_status(req, 404, "not cached, and the cloud is unreachable");
}

/* ---- dispatch ---- */

int local_answer(struct proxy *p, struct request *req)
{
	int refused;
	if (local_token_refused(p, req, &refused))
		return refused;
	const struct request_info *ri = &req->ri;
	if (!ri->is_resource)
		return local_nonresource(p, req);
	const char *accept = request_header(req, "Accept");
	if (accept && !cache_accept_for(accept) && !strstr(accept, "as=Table"))
		return local_status(req, 406,
				    "only JSON can be served while the cloud is unreachable");
	switch (ri->verb) {
	case VERB_GET:
		if (*ri->subresource && strcmp(ri->subresource, "status"))
			return local_status(req, 503,
					    "this request needs the cloud, which is unreachable");
		return local_get(p, req);
	case VERB_LIST:
		return local_list(p, req);
	case VERB_WATCH:
		return local_watch(p, req);
	case VERB_CREATE:
	case VERB_UPDATE:
	case VERB_PATCH:
		return local_write_request(p, req);
	case VERB_DELETE:
	case VERB_DELETECOLLECTION: {
		struct buf details = BUF_INIT;
		int r =
		    reply_status(req, 403, "Forbidden",
				 "delete request is not supported while the cloud is unreachable",
				 local_status_details(&details, ri->name, NULL, ri->resource));
		buf_free(&details);
		return r;
	}
	default:
		return local_status(req, 503, "this request needs the cloud, which is unreachable");
	}
}
