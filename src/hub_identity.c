/*
 * hub_identity.c - identity/ wired to the upstream and the secure port,
 * see hub_identity.h.
 */
#include "hub_identity.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/response.h"
#include "identity/jws.h"
#include "server/tls.h"
#include "util/clock.h"
#include "util/fsutil.h"
#include "util/log.h"
#include "version.h"

#define IP_REFRESH_MS  60000 /* the cluster IP, once known, is looked at again */
#define IP_RETRY_MS    3000  /* ... and while it is not */
#define TOKEN_BODY_MAX 4096

/* ---- hooks for identity/ ---- */

static void prepare(void *ctx, CURL *h, bool with_client_cert)
{
	struct hub_identity *hi = ctx;
	upstream_prepare_easy(hi->up, h, with_client_cert);
}

static void enable_secure(struct hub_identity *hi)
{
	pthread_mutex_lock(&hi->server_lock);
	if (hi->server)
		server_enable_secure(hi->server);
	pthread_mutex_unlock(&hi->server_lock);
}

static void ca_found(void *ctx, const char *pem, size_t len)
{
	struct hub_identity *hi = ctx;
	if (upstream_set_ca(hi->up, pem, len) < 0)
		log_error("out of memory: the cluster CA is not applied");
	health_probe_now(atomic_load(&hi->health));
	enable_secure(hi);
}

static void client_pair(void *ctx, const char *pem, size_t len)
{
	struct hub_identity *hi = ctx;
	bool was_pending = upstream_identity_pending(hi->up);
	if (upstream_set_client_pair(hi->up, pem, len) < 0)
		log_error("out of memory: the new client certificate is not applied");
	if (!was_pending)
		return; /* a rotation: the cloud hears the hub as before */
	pthread_mutex_lock(&hi->ip_lock);
	hi->ip_checked_ms = 0; /* the cluster IP may be readable now: look at once */
	pthread_mutex_unlock(&hi->ip_lock);
	health_probe_now(atomic_load(&hi->health));
}

static void serving_pair(void *ctx, const char *pem, size_t len)
{
	struct hub_identity *hi = ctx;
	char *err = NULL;
	if (tls_serving_set(pem, len, pem, len, &err) < 0)
		log_error("secure port: the new serving certificate is not used: %s",
			  err ? err : "out of memory");
	free(err);
	enable_secure(hi);
}

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
	struct buf *b = ud;
	size_t len = sz * n;
	return b->len + len > (1u << 20) || buf_append(b, p, len) < 0 ? 0 : len;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	(void)a, (void)b, (void)c, (void)d;
	struct hub_identity *hi = ud;
	return atomic_load(&hi->stopping) ? 1 : 0;
}

/* spec.clusterIP of a Service read from url; NULL when it cannot be had.
 * direct: straight from a server, as the hub (its CA and certificate). */
static char *get_cluster_ip(struct hub_identity *hi, const char *url, bool direct)
{
	CURL *e = curl_easy_init();
	if (!e)
		return NULL;
	struct buf body = BUF_INIT;
	char *ip = NULL;
	if (direct)
		upstream_prepare_easy(hi->up, e, true);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L); /* so that a stop cuts it short */
	curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(e, CURLOPT_XFERINFODATA, hi);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "yurthub/" YURTHUB_VERSION);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &body);
	long status = 0;
	if (curl_easy_perform(e) == CURLE_OK &&
	    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK && status == 200) {
		json_t *svc = json_loadb(body.data, body.len, 0, NULL);
		const char *v =
		    json_string_value(json_object_get(json_object_get(svc, "spec"), "clusterIP"));
		if (v && *v && strcmp(v, "None"))
			ip = strdup(v);
		json_decref(svc);
	}
	curl_easy_cleanup(e);
	buf_free(&body);
	return ip;
}

#define KUBERNETES_SVC "/api/v1/namespaces/default/services/kubernetes"

/* The kubernetes Service's cluster IP: from the cloud directly as soon as
 * the hub has a certificate (as YurtHub does: no wait for the health
 * checker to call the cloud reachable), else through the hub's own proxy
 * port, which answers from its cache while the cloud is unreachable. */
static char *fetch_cluster_ip(struct hub_identity *hi)
{
	char *ip = NULL;
	struct buf url = BUF_INIT;
	for (size_t i = 0; !ip && !upstream_identity_pending(hi->up) && i < hi->cfg->server_addr.n;
	     i++) {
		buf_reset(&url);
		const char *server = hi->cfg->server_addr.v[i];
		int n = (int)strlen(server);
		while (n > 0 && server[n - 1] == '/')
			n--;
		if (buf_printf(&url, "%.*s" KUBERNETES_SVC, n, server) == 0)
			ip = get_cluster_ip(hi, url.data, true);
	}
	if (!ip && hi->proxy_url) {
		buf_reset(&url);
		if (buf_printf(&url, "%s" KUBERNETES_SVC, hi->proxy_url) == 0)
			ip = get_cluster_ip(hi, url.data, false);
	}
	buf_free(&url);
	return ip;
}

static int cluster_ip(void *ctx, char **out)
{
	struct hub_identity *hi = ctx;
	pthread_mutex_lock(&hi->ip_lock);
	long long now = clock_now_ms();
	long long every = hi->cluster_ip ? IP_REFRESH_MS : IP_RETRY_MS;
	bool look = !hi->ip_checked_ms || now - hi->ip_checked_ms >= every;
	pthread_mutex_unlock(&hi->ip_lock);
	/* outside the lock: the request goes through the hub itself */
	char *fresh = look ? fetch_cluster_ip(hi) : NULL;
	pthread_mutex_lock(&hi->ip_lock);
	if (look)
		hi->ip_checked_ms = now;
	if (fresh) {
		if (!hi->cluster_ip || strcmp(fresh, hi->cluster_ip))
			log_info("the kubernetes Service's cluster IP is %s", fresh);
		free(hi->cluster_ip);
		hi->cluster_ip = fresh; /* a failed look keeps the last one */
	}
	*out = hi->cluster_ip ? strdup(hi->cluster_ip) : NULL;
	pthread_mutex_unlock(&hi->ip_lock);
	return *out ? 0 : -1;
}

/* ---- start ---- */

/* --tls-cert-file and --tls-private-key-file, read once. */
static int load_tls_files(const struct config *cfg)
{
	struct buf cert = BUF_INIT, key = BUF_INIT;
	char *err = NULL;
	int rc = fs_read_operator_file(cfg->tls_cert_file, &cert, 1 << 20);
	if (rc == 0)
		rc = fs_read_operator_file(cfg->tls_private_key_file, &key, 1 << 20);
	if (rc < 0)
		log_error("cannot read the secure port's certificate: %s", strerror(-rc));
	else if ((rc = tls_serving_set(cert.data, cert.len, key.data, key.len, &err)) < 0)
		log_error("--tls-cert-file, --tls-private-key-file: %s",
			  err ? err : "out of memory");
	free(err);
	buf_free(&cert);
	if (key.data)
		explicit_bzero(key.data, key.cap);
	buf_free(&key);
	return rc < 0 ? -1 : 0;
}

int hub_identity_start(struct hub_identity *hi, const struct config *cfg, struct upstream *up,
		       const char *proxy_url)
{
	memset(hi, 0, sizeof *hi);
	hi->cfg = cfg;
	hi->up = up;
	hi->proxy_url = proxy_url;
	pthread_mutex_init(&hi->ip_lock, NULL);
	pthread_mutex_init(&hi->server_lock, NULL);
	tls_serving_init();
	bool tls_files = *cfg->tls_cert_file != '\0';
	bool managed = cfg->bootstrap_mode != BOOTSTRAP_NONE;
	if (tls_files && load_tls_files(cfg) < 0)
		return -1;
	if (cfg->bootstrap_mode == BOOTSTRAP_TOKEN)
		upstream_require_client_cert(up, true);
	struct bootstrap_token t;
	if (*cfg->join_token) {
		/* the token is a secret: not repeated in the message */
		if (jws_token_parse(cfg->join_token, strlen(cfg->join_token), &t) < 0) {
			log_error("invalid value for flag --join-token: want a bootstrap token, "
				  "[a-z0-9]{6}.[a-z0-9]{16}");
			return -1;
		}
		jws_token_wipe(&t);
	}
	/* a serving certificate for the secure port, and for the multiplexer
	 * port should this hub become its pool's leader */
	bool with_serving =
	    managed && !tls_files && (cfg->proxy_secure_port || cfg->multiplexer_port);
	if (managed) {
		struct identity_hooks hooks = {prepare,	     ca_found,	 client_pair,
					       serving_pair, cluster_ip, hi};
		char *err = NULL;
		hi->id = identity_start(cfg, with_serving, &hooks, &err);
		if (!hi->id) {
			log_error("the hub's identity: %s", err ? err : "out of memory");
			free(err);
			return -1;
		}
	}
	const char *ca =
	    *cfg->client_ca_file ? cfg->client_ca_file : identity_client_ca_file(hi->id);
	if ((tls_files || with_serving) && ca && !(hi->client_ca = strdup(ca)))
		return -1;
	return 0;
}

void hub_identity_health(struct hub_identity *hi, struct health *h)
{
	atomic_store(&hi->health, h); /* its first probes see what is on disk already */
	/* with nothing on disk (an expired certificate is something: the hub
	 * starts offline at once), what a first probe could say is moot */
	if (!identity_has_had_client_cert(hi->id))
		health_await_identity(h);
}

void hub_identity_listening(struct hub_identity *hi, struct server *s)
{
	pthread_mutex_lock(&hi->server_lock);
	hi->server = s;
	pthread_mutex_unlock(&hi->server_lock);
	enable_secure(hi);
}

void hub_identity_unlisten(struct hub_identity *hi)
{
	pthread_mutex_lock(&hi->server_lock);
	hi->server = NULL;
	pthread_mutex_unlock(&hi->server_lock);
}

const char *hub_identity_not_ready(struct hub_identity *hi)
{
	if (hi->id && !identity_has_had_client_cert(hi->id))
		return "the hub is bootstrapping: it has no client certificate yet";
	return NULL;
}

/* ---- POST /v1/token ---- */

int hub_identity_token_endpoint(struct hub_identity *hi, struct request *req)
{
	const char *m = req->ri.method ? req->ri.method : "";
	if (strcmp(m, "POST") && strcmp(m, "PUT"))
		return reply_text(req, 405, "method not allowed: POST or PUT\n");
	/* YurtHub lets any process that reaches the serve port replace the
	 * token; here only the node itself may, whatever --bind-address is */
	if (!request_from_loopback(req))
		return reply_text(req, 403,
				  "only a client on this node (loopback) may set the "
				  "join token\n");
	json_error_t je;
	json_t *doc = req->body.len <= TOKEN_BODY_MAX
			  ? json_loadb(req->body.data, req->body.len, 0, &je)
			  : NULL;
	const char *token = json_string_value(json_object_get(doc, "jointoken"));
	int rc;
	if (!json_is_object(doc)) {
		rc = reply_text(req, 400,
				"could not decode the body: want {\"jointoken\": "
				"\"<token>\"}\n");
	} else if (!token || !*token) {
		rc = reply_text(req, 400, "no join token is set\n");
	} else if (!hi->id) {
		rc = reply_text(req, 400,
				"the hub was started without a bootstrap mode (its "
				"identity comes from its flags): a join token has no use\n");
	} else {
		bool bad = false;
		char *err = NULL;
		if (identity_update_token(hi->id, token, &bad, &err) == 0) {
			log_msg('I', 0, "the join token was updated through /v1/token");
			rc = reply_text(req, 200, "update bootstrap token successfully");
		} else {
			struct buf b = BUF_INIT;
			buf_printf(&b, "%s\n", err ? err : "out of memory");
			log_warn("/v1/token: %s", err ? err : "out of memory");
			rc = reply_text(req, bad ? 400 : 500, buf_cstr(&b));
			buf_free(&b);
		}
		free(err);
	}
	json_decref(doc);
	return rc;
}

void hub_identity_stop(struct hub_identity *hi)
{
	atomic_store(&hi->stopping, true); /* a read of the cluster IP ends now */
	identity_stop(hi->id);
	hi->id = NULL;
	free(hi->client_ca);
	free(hi->cluster_ip);
	pthread_mutex_destroy(&hi->ip_lock);
	pthread_mutex_destroy(&hi->server_lock);
	tls_serving_free();
}
