/*
 * sakeys.c - the cluster's service-account signing keys, see sakeys.h.
 *
 * The parsed keys and the issuer are swapped whole under a rwlock, so that
 * a verification sees one pair; fetching and parsing happen outside it.
 * Fetched documents are checked before anything is used or stored, so a
 * bad answer never replaces good keys; they are used even when the store
 * refuses them (a warning says that a restart offline would lack them).
 */
#include "identity/sakeys.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"
#include "version.h"

#define FETCH_TIMEOUT_S 10
#define OIDC_DOC_MAX	(64 * 1024)

struct sa_keys {
	struct store *store;
	struct upstream *up;
	pthread_rwlock_t lock; /* keys and issuer */
	struct jwk_set *keys;
	char *issuer;
	pthread_mutex_t mu; /* the times below, warned */
	int64_t next_fetch_ms, last_fetch_ms, last_reload_ms;
	atomic_bool want; /* a token named an unknown kid */
	long warned;	  /* the HTTP status last warned about; 0 none */
};

/* The issuer of an OpenID configuration document, malloc'ed, or NULL. */
static char *issuer_of(const char *text, size_t len)
{
	json_error_t jerr;
	json_t *doc = len ? json_loadb(text, len, 0, &jerr) : NULL;
	json_t *iss = json_object_get(doc, "issuer");
	char *out = json_is_string(iss) && json_string_length(iss) &&
			    strlen(json_string_value(iss)) == json_string_length(iss)
			? strdup(json_string_value(iss))
			: NULL;
	json_decref(doc);
	return out;
}

/* Parse both documents and use them; 0, or -1 with *err. */
static int use_docs(struct sa_keys *k, const struct buf *oidc, const struct buf *jwks, char **err)
{
	char *issuer = issuer_of(oidc->data, oidc->len);
	struct jwk_set *keys = NULL;
	if (!issuer) {
		err_printf(err, "%s names no issuer", SAKEYS_OIDC_PATH);
		return -1;
	}
	if (jwks_parse(jwks->data, jwks->len, &keys, err) < 0) {
		free(issuer);
		return -1;
	}
	pthread_rwlock_wrlock(&k->lock);
	jwks_free(k->keys);
	free(k->issuer);
	k->keys = keys;
	k->issuer = issuer;
	pthread_rwlock_unlock(&k->lock);
	return 0;
}

/* What the store holds; 0 when it held both documents and they parsed. */
static int load_stored(struct sa_keys *k)
{
	struct buf oidc = BUF_INIT, jwks = BUF_INIT;
	char *err = NULL;
	int rc = -1;
	if (store_get_cluster_info(k->store, SAKEYS_OIDC_PATH, &oidc) == STORE_OK &&
	    store_get_cluster_info(k->store, SAKEYS_JWKS_PATH, &jwks) == STORE_OK) {
		rc = use_docs(k, &oidc, &jwks, &err);
		if (rc < 0)
			log_warn("the stored service-account keys are not usable: %s", err);
	}
	free(err);
	buf_free(&oidc);
	buf_free(&jwks);
	return rc;
}

struct sa_keys *sa_keys_new(struct store *store, struct upstream *up)
{
	struct sa_keys *k = calloc(1, sizeof *k);
	if (!k)
		return NULL;
	if (pthread_rwlock_init(&k->lock, NULL) != 0) {
		free(k);
		return NULL;
	}
	if (pthread_mutex_init(&k->mu, NULL) != 0) {
		pthread_rwlock_destroy(&k->lock);
		free(k);
		return NULL;
	}
	k->store = store;
	k->up = up;
	int64_t now = clock_now_ms();
	k->last_fetch_ms = k->last_reload_ms = now - SAKEYS_RETRY_S * 1000;
	if (load_stored(k) == 0)
		log_v(1, "service-account keys: %zu loaded from the store", jwks_count(k->keys));
	return k;
}

void sa_keys_free(struct sa_keys *k)
{
	if (!k)
		return;
	jwks_free(k->keys);
	free(k->issuer);
	pthread_rwlock_destroy(&k->lock);
	pthread_mutex_destroy(&k->mu);
	free(k);
}

/* GET path from the cloud with the hub's identity into out: the status, 0
 * for none. */
static long fetch(struct sa_keys *k, const char *path, struct buf *out, size_t max)
{
	struct upstream_send_req r = {.method = "GET",
				      .uri = path,
				      .user_agent = "yurthub/" YURTHUB_VERSION,
				      .timeout_s = FETCH_TIMEOUT_S,
				      .body_out = out,
				      .body_max = max};
	return upstream_send(k->up, &r);
}

/* A fetch failed with code (0: no answer): a warning when the state
 * changes to one the operator must act on, else a line at -v 1. */
static void fetch_failed(struct sa_keys *k, const char *path, long code, const char *why)
{
	pthread_mutex_lock(&k->mu);
	bool warn = code != k->warned && (code == 401 || code == 403 || code == 404 || why);
	if (warn)
		k->warned = code;
	pthread_mutex_unlock(&k->mu);
	if (!warn)
		log_v(1, "service-account keys: GET %s: %ld; again in %d s", path, code,
		      SAKEYS_RETRY_S);
	else if (code == 401 || code == 403)
		log_warn("the cloud refuses the hub its service-account keys (GET %s: %ld), so "
			 "while it is unreachable every bearer token gets 401: the ClusterRole "
			 "system:service-account-issuer-discovery must be bound to the nodes: %s",
			 path, code, SAKEYS_RBAC_HINT);
	else if (code == 404)
		log_warn("the cloud does not serve %s (service-account issuer discovery), so while "
			 "it is unreachable every bearer token gets 401",
			 path);
	else
		log_warn("the cloud's %s is not usable (%s), so while it is unreachable bearer "
			 "tokens are checked against the keys stored before, if any",
			 path, why);
}

void sa_keys_refresh(struct sa_keys *k)
{
	if (!upstream_any_healthy(k->up))
		return;
	int64_t now = clock_now_ms();
	pthread_mutex_lock(&k->mu);
	bool due = now >= k->next_fetch_ms ||
		   (atomic_load(&k->want) && now - k->last_fetch_ms >= SAKEYS_RETRY_S * 1000);
	if (due) {
		k->last_fetch_ms = now;
		k->next_fetch_ms = now + SAKEYS_RETRY_S * 1000; /* unless it works */
		atomic_store(&k->want, false);
	}
	pthread_mutex_unlock(&k->mu);
	if (!due)
		return;
	struct buf oidc = BUF_INIT, jwks = BUF_INIT;
	char *err = NULL;
	long code = fetch(k, SAKEYS_OIDC_PATH, &oidc, OIDC_DOC_MAX);
	const char *path = SAKEYS_OIDC_PATH;
	if (code == 200) {
		code = fetch(k, SAKEYS_JWKS_PATH, &jwks, JWKS_DOC_MAX);
		path = SAKEYS_JWKS_PATH;
	}
	if (code != 200) {
		fetch_failed(k, path, code, NULL);
		goto out;
	}
	/* checked before anything is stored: a bad answer never replaces good keys */
	if (use_docs(k, &oidc, &jwks, &err) < 0) {
		fetch_failed(k, path, code, err);
		goto out;
	}
	enum store_err e = store_save_cluster_info(k->store, SAKEYS_JWKS_PATH, jwks.data, jwks.len);
	if (e == STORE_OK)
		e = store_save_cluster_info(k->store, SAKEYS_OIDC_PATH, oidc.data, oidc.len);
	if (e != STORE_OK)
		log_warn("the service-account keys were fetched but not stored (%s): after a "
			 "restart offline, bearer tokens would get 401",
			 store_strerror(e));
	pthread_mutex_lock(&k->mu);
	k->next_fetch_ms = now + SAKEYS_REFRESH_S * 1000;
	bool was_warned = k->warned != 0;
	k->warned = 0;
	pthread_mutex_unlock(&k->mu);
	pthread_rwlock_rdlock(&k->lock);
	size_t n = jwks_count(k->keys);
	pthread_rwlock_unlock(&k->lock);
	if (was_warned)
		log_msg('I', 0, "service-account keys: fetched from the cloud now (%zu keys)", n);
	else
		log_v(1, "service-account keys: %zu fetched from the cloud and stored", n);
out:
	free(err);
	buf_free(&oidc);
	buf_free(&jwks);
}

void sa_keys_note(struct sa_keys *k, const char *token, size_t len)
{
	struct buf kid = BUF_INIT;
	if (jws_peek_kid(token, len, &kid) == 0) {
		pthread_rwlock_rdlock(&k->lock);
		bool known = jwks_has_kid(k->keys, kid.data, kid.len);
		pthread_rwlock_unlock(&k->lock);
		if (!known)
			atomic_store(&k->want, true);
	}
	buf_free(&kid);
}

static enum satoken_result verify_now(struct sa_keys *k, const char *token, size_t len,
				      struct sa_token *out, char **why)
{
	pthread_rwlock_rdlock(&k->lock);
	enum satoken_result r =
	    satoken_verify(k->keys, k->issuer, token, len, time(NULL), out, why);
	pthread_rwlock_unlock(&k->lock);
	return r;
}

enum satoken_result sa_keys_verify(struct sa_keys *k, const char *token, size_t len,
				   struct sa_token *out, char **why)
{
	enum satoken_result r = verify_now(k, token, len, out, why);
	pthread_rwlock_rdlock(&k->lock);
	bool none = !k->keys;
	pthread_rwlock_unlock(&k->lock);
	if (r != SATOKEN_UNKNOWN_KEY && !none)
		return r;
	int64_t now = clock_now_ms();
	pthread_mutex_lock(&k->mu);
	bool reload = now - k->last_reload_ms >= SAKEYS_RETRY_S * 1000;
	if (reload)
		k->last_reload_ms = now;
	pthread_mutex_unlock(&k->mu);
	if (!reload || load_stored(k) < 0)
		return r;
	return verify_now(k, token, len, out, why);
}
