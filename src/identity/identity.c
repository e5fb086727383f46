/*
 * identity.c - the hub's client and serving certificates, see identity.h.
 *
 * Each certificate has a certmgr whose issuer is struct issuer below: for
 * each request it makes a CSR client for a server of --server-addr (the
 * next one after a failure) and speaks as the hub - with its client
 * certificate when it has a valid one, else with the bootstrap token.  The
 * bootstrap token comes from --bootstrap-file, or from
 * <root>/bootstrap-hub.conf written by token discovery for --join-token
 * (or POST /v1/token); discovery runs only when a token is needed and
 * there is no kubeconfig for it yet, so that a node that reboots offline
 * never needs the network to start.
 */
#include "identity/identity.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "identity/certmgr.h"
#include "identity/certstore.h"
#include "identity/csrclient.h"
#include "identity/discovery.h"
#include "identity/hubfiles.h"
#include "identity/jws.h"
#include "kube/kubeconfig.h"
#include "util/fsutil.h"
#include "util/log.h"
#include "version.h"

struct issuer {
	struct identity *id;
	bool serving;
	atomic_bool stop;
	unsigned next_server;
	/* of the issue in progress (the manager's thread only) */
	bool with_cert;
	char *bearer;
};

struct identity {
	const struct config *cfg;
	struct identity_hooks hooks;
	char *root, *pki, *bootstrap_conf, *hub_conf, *ca_file, *client_pem;

	pthread_mutex_t lock; /* guards what follows, up to the managers */
	char *join_token;     /* --join-token, or the last POST /v1/token */
	char *boot_token;     /* of the bootstrap kubeconfig, once read */
	struct buf ca;	      /* the cluster CA, as handed to hooks.ca_found */
	struct certmgr *serving_mgr;

	atomic_llong client_not_after; /* of the current client pair; 0 none */
	atomic_bool had_client;
	atomic_bool stop;
	struct issuer client_issuer, serving_issuer;
	struct certmgr *client_mgr;
};

static void free_secret(char *s)
{
	if (s)
		explicit_bzero(s, strlen(s));
	free(s);
}

static bool client_valid(struct identity *id)
{
	long long t = atomic_load(&id->client_not_after);
	return t > (long long)time(NULL);
}

/* ---- the cluster CA and the bootstrap token ---- */

/* A CA was found: keep it, write pki/ca.crt, tell the hub. */
static int take_ca(struct identity *id, const struct buf *pem, char **err)
{
	pthread_mutex_lock(&id->lock);
	bool same = id->ca.len == pem->len && !memcmp(id->ca.data, pem->data, pem->len);
	int rc = 0;
	if (!same) {
		buf_reset(&id->ca);
		rc = buf_append(&id->ca, pem->data, pem->len);
	}
	pthread_mutex_unlock(&id->lock);
	if (rc < 0)
		return err_printf(err, "out of memory"), -1;
	if (same)
		return 0;
	if (id->cfg->bootstrap_mode == BOOTSTRAP_TOKEN && hubfiles_write_ca(id->root, pem, err) < 0)
		return -1;
	id->hooks.ca_found(id->hooks.ctx, pem->data, pem->len);
	return 0;
}

/* Read a bootstrap kubeconfig: its token (malloc'ed into *token) and CA. */
static int read_bootstrap(struct identity *id, const char *path, char **token, char **err)
{
	struct kubeconfig kc = {0};
	int rc = kubeconfig_load(path, &kc, err);
	if (rc == 0 && !kc.token) {
		err_printf(err, "%s has no token", path);
		rc = -1;
	}
	if (rc == 0 && kc.ca_data.len)
		rc = take_ca(id, &kc.ca_data, err);
	if (rc == 0 && !(*token = strdup(kc.token)))
		rc = -1, err_printf(err, "out of memory");
	if (kc.token)
		explicit_bzero(kc.token, strlen(kc.token));
	kubeconfig_free(&kc);
	return rc;
}

/* Token discovery with token; on success the bootstrap kubeconfig at
 * id->bootstrap_conf is (re)written and the token becomes the bootstrap
 * token. */
static int discover(struct identity *id, const char *token, const atomic_bool *stop,
		    unsigned timeout_ms, char **err)
{
	const struct config *cfg = id->cfg;
	struct discovery_config dc = {
	    .servers = (const char *const *)cfg->server_addr.v,
	    .n_servers = cfg->server_addr.n,
	    .token = token,
	    .pins = (const char *const *)cfg->discovery_ca_hashes.v,
	    .n_pins = cfg->discovery_ca_hashes.n,
	    .unsafe_skip_ca_verification = cfg->discovery_unsafe_skip,
	    .timeout_ms = timeout_ms,
	    .stop = stop,
	    .user_agent = "yurthub/" YURTHUB_VERSION,
	};
	struct discovery_result r;
	if (discovery_run(&dc, &r, err) < 0)
		return -1;
	int rc =
	    hubfiles_write_kubeconfig(id->bootstrap_conf, r.server, &r.ca_pem, token, NULL, err);
	if (rc == 0)
		rc = take_ca(id, &r.ca_pem, err);
	char *copy = rc == 0 ? strdup(token) : NULL;
	if (rc == 0 && !copy)
		rc = -1, err_printf(err, "out of memory");
	if (rc == 0) {
		pthread_mutex_lock(&id->lock);
		free_secret(id->boot_token);
		id->boot_token = copy;
		pthread_mutex_unlock(&id->lock);
		log_msg('I', 0,
			"token discovery: the cluster CA of %s is trusted; bootstrap "
			"kubeconfig written to %s",
			r.server, id->bootstrap_conf);
	}
	discovery_result_free(&r);
	return rc;
}

/* The bootstrap token into *out (malloc'ed): the one known, the bootstrap
 * kubeconfig's, or one found by discovery with the join token. */
static int bootstrap_token(struct identity *id, atomic_bool *stop, char **out, char **err)
{
	pthread_mutex_lock(&id->lock);
	*out = id->boot_token ? strdup(id->boot_token) : NULL;
	char *join = id->join_token ? strdup(id->join_token) : NULL;
	bool known = id->boot_token != NULL;
	pthread_mutex_unlock(&id->lock);
	int rc = 0;
	if (known) {
		rc = *out ? 0 : (err_printf(err, "out of memory"), -1);
	} else if (access(id->bootstrap_conf, F_OK) == 0 &&
		   read_bootstrap(id, id->bootstrap_conf, out, err) == 0 &&
		   (!join || !strcmp(join, *out))) {
		/* --bootstrap-file, or what an earlier discovery wrote for this token */
		pthread_mutex_lock(&id->lock);
		if (!id->boot_token)
			id->boot_token = strdup(*out);
		pthread_mutex_unlock(&id->lock);
	} else if (join) {
		free_secret(*out);
		*out = NULL;
		free(*err);
		*err = NULL;
		rc = discover(id, join, stop, 0, err);
		if (rc == 0 && !(*out = strdup(join)))
			rc = -1, err_printf(err, "out of memory");
	} else {
		rc = -1; /* read_bootstrap said why */
		if (!*err)
			err_printf(err, "no bootstrap token: %s is missing", id->bootstrap_conf);
	}
	free_secret(join);
	return rc;
}

/* ---- the issuer: a CSR client per request ---- */

static int setup_handle(void *ctx, CURL *h, struct curl_slist **headers, char **err)
{
	struct issuer *is = ctx;
	struct identity *id = is->id;
	id->hooks.prepare(id->hooks.ctx, h, is->with_cert);
	if (!is->bearer)
		return 0;
	struct buf line = BUF_INIT;
	struct curl_slist *l = NULL;
	if (buf_printf(&line, "Authorization: Bearer %s", is->bearer) == 0)
		l = curl_slist_append(*headers, line.data);
	if (line.data)
		explicit_bzero(line.data, line.cap);
	buf_free(&line);
	if (!l)
		return err_printf(err, "out of memory"), -1;
	*headers = l;
	return 0;
}

static int issue(void *ctx, const char *csr_pem, char **cert_pem, char **err)
{
	struct issuer *is = ctx;
	struct identity *id = is->id;
	const struct config *cfg = id->cfg;
	*err = NULL;
	/* the serving certificate is always asked for as the node; the client
	 * one with the current certificate while it is valid */
	is->with_cert = is->serving || cfg->bootstrap_mode != BOOTSTRAP_TOKEN || client_valid(id);
	if (is->serving && cfg->bootstrap_mode == BOOTSTRAP_TOKEN && !client_valid(id))
		return err_printf(err, "the hub has no client certificate yet"), -1;
	if (!is->with_cert && bootstrap_token(id, &is->stop, &is->bearer, err) < 0)
		return -1;
	const char *server = cfg->server_addr.v[is->next_server % cfg->server_addr.n];
	struct csrclient_config cc = {
	    .server = server,
	    .setup = setup_handle,
	    .setup_ctx = is,
	    .signer_name = is->serving ? CSR_SIGNER_SERVING : CSR_SIGNER_CLIENT,
	    .usages = is->serving ? csr_usages_serving : csr_usages_client,
	    .n_usages = 3,
	    .stop = &is->stop,
	    .user_agent = "yurthub/" YURTHUB_VERSION,
	};
	struct csrclient *c = csrclient_new(&cc, err);
	int rc = c ? csrclient_issue(c, csr_pem, cert_pem, err) : -1;
	csrclient_free(c);
	free_secret(is->bearer);
	is->bearer = NULL;
	if (rc < 0)
		is->next_server++; /* the next server, next time */
	return rc;
}

static void cancel(void *ctx)
{
	struct issuer *is = ctx;
	atomic_store(&is->stop, true);
}

/* ---- templates ---- */

static int client_template(void *ctx, struct x509_template *t, char **err)
{
	struct identity *id = ctx;
	const struct config *cfg = id->cfg;
	static const char *const base[] = {"openyurt:yurthub", "system:nodes"};
	int rc = (t->cn = str_printf("system:node:%s", cfg->node_name)) ? 0 : -1;
	for (size_t i = 0; rc == 0 && i < 2; i++)
		rc = x509_names_add(&t->orgs, base[i]);
	for (size_t i = 0; rc == 0 && i < cfg->hub_cert_organizations.n; i++)
		if (!x509_names_has(&t->orgs, cfg->hub_cert_organizations.v[i]))
			rc = x509_names_add(&t->orgs, cfg->hub_cert_organizations.v[i]);
	if (rc < 0)
		err_printf(err, "out of memory");
	return rc;
}

static bool wildcard(const char *ip)
{
	return !*ip || !strcmp(ip, "0.0.0.0") || !strcmp(ip, "::");
}

static int serving_template(void *ctx, struct x509_template *t, char **err)
{
	struct identity *id = ctx;
	const struct config *cfg = id->cfg;
	char *cluster_ip = NULL;
	if (id->hooks.cluster_ip(id->hooks.ctx, &cluster_ip) < 0) {
		err_printf(err, "the cluster IP of default/kubernetes is not known yet");
		return -1;
	}
	static const char *const dns[] = {"kubernetes", "kubernetes.default",
					  "kubernetes.default.svc",
					  "kubernetes.default.svc.cluster.local"};
	const char *ips[] = {cluster_ip, cfg->enable_dummy_if ? cfg->dummy_if_ip : "",
			     cfg->bind_address, cfg->bind_proxy_address, cfg->node_ip};
	int rc = (t->cn = str_printf("system:node:%s", cfg->node_name)) ? 0 : -1;
	if (rc == 0)
		rc = x509_names_add(&t->orgs, "system:nodes");
	for (size_t i = 0; rc == 0 && i < 4; i++)
		rc = x509_names_add(&t->dns, dns[i]);
	for (size_t i = 0; rc == 0 && i < sizeof ips / sizeof ips[0]; i++)
		if (!wildcard(ips[i]) && !x509_names_has(&t->ips, ips[i]))
			rc = x509_names_add(&t->ips, ips[i]);
	free(cluster_ip);
	if (rc < 0)
		err_printf(err, "out of memory");
	return rc;
}

/* ---- new certificates ---- */

static void client_rotated(void *ctx, const char *pem, size_t len, const struct x509_info *info)
{
	struct identity *id = ctx;
	id->hooks.client_pair(id->hooks.ctx, pem, len);
	atomic_store(&id->client_not_after, (long long)info->not_after);
	atomic_store(&id->had_client, true);
	pthread_mutex_lock(&id->lock);
	struct buf ca = BUF_INIT;
	int rc = buf_append(&ca, id->ca.data, id->ca.len);
	struct certmgr *serving = id->serving_mgr;
	pthread_mutex_unlock(&id->lock);
	char *err = NULL;
	if (rc < 0 || hubfiles_write_kubeconfig(id->hub_conf, id->cfg->server_addr.v[0], &ca, NULL,
						id->client_pem, &err) < 0)
		log_warn("cannot write %s: %s", id->hub_conf, err ? err : "out of memory");
	free(err);
	buf_free(&ca);
	if (serving)
		certmgr_recheck(serving); /* it waits for this certificate */
}

static void serving_rotated(void *ctx, const char *pem, size_t len, const struct x509_info *info)
{
	(void)info;
	struct identity *id = ctx;
	id->hooks.serving_pair(id->hooks.ctx, pem, len);
}

/* The pair on disk at start (certmgr_start found it): handed out now when
 * valid, so that an offline start serves at once; an expired one is said
 * loudly, and the manager renews it. */
static void pair_loaded(struct identity *id, const char *pem, size_t len,
			const struct x509_info *info, bool client)
{
	if (client)
		atomic_store(&id->had_client, true);
	if ((long long)info->not_after > (long long)time(NULL)) {
		if (client) {
			id->hooks.client_pair(id->hooks.ctx, pem, len);
			atomic_store(&id->client_not_after, (long long)info->not_after);
		} else {
			id->hooks.serving_pair(id->hooks.ctx, pem, len);
		}
		return;
	}
	char when[32];
	struct tm tm;
	time_t na = info->not_after;
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&na, &tm));
	log_warn("the hub's %s certificate in %s expired at %s: the hub answers from its cache "
		 "and asks for a new one until the cluster signs it",
		 client ? "client" : "serving", id->pki, when);
}

static void client_loaded(void *ctx, const char *pem, size_t len, const struct x509_info *info)
{
	pair_loaded(ctx, pem, len, info, true);
}

static void serving_loaded(void *ctx, const char *pem, size_t len, const struct x509_info *info)
{
	pair_loaded(ctx, pem, len, info, false);
}

static struct certmgr *start_manager(struct identity *id, bool serving, char **err)
{
	struct issuer *is = serving ? &id->serving_issuer : &id->client_issuer;
	is->id = id;
	is->serving = serving;
	struct certmgr_config mc = {
	    .name = serving ? "serving" : "client",
	    .dir = id->pki,
	    .prefix = serving ? HUBFILES_SERVER_PREFIX : HUBFILES_CLIENT_PREFIX,
	    .get_template = serving ? serving_template : client_template,
	    .template_ctx = id,
	    .issuer = {issue, cancel, is},
	    .on_rotated = serving ? serving_rotated : client_rotated,
	    .on_loaded = serving ? serving_loaded : client_loaded,
	    .rotated_ctx = id,
	};
	return certmgr_start(&mc, err);
}

/* ---- start and stop ---- */

static int paths(struct identity *id)
{
	const struct config *cfg = id->cfg;
	id->root = strdup(cfg->root_dir);
	id->pki = hubfiles_path(cfg->root_dir, HUBFILES_PKI);
	id->bootstrap_conf = *cfg->bootstrap_file
				 ? strdup(cfg->bootstrap_file)
				 : hubfiles_path(cfg->root_dir, HUBFILES_BOOTSTRAP_CONF);
	id->hub_conf = hubfiles_path(cfg->root_dir, HUBFILES_HUB_CONF);
	id->ca_file = cfg->bootstrap_mode == BOOTSTRAP_TOKEN
			  ? hubfiles_path(cfg->root_dir, HUBFILES_CA)
			  : strdup(cfg->ca_file);
	id->client_pem = certstore_current_path(id->pki, HUBFILES_CLIENT_PREFIX);
	id->join_token = *cfg->join_token ? strdup(cfg->join_token) : NULL;
	return id->root && id->pki && id->bootstrap_conf && id->hub_conf && id->ca_file &&
		       id->client_pem && (id->join_token || !*cfg->join_token)
		   ? 0
		   : -1;
}

/* Token mode, before the client manager: the files and the CA. */
static int prepare_token_mode(struct identity *id, char **err)
{
	const struct config *cfg = id->cfg;
	if (hubfiles_set_aside_if_moved(id->root, (const char *const *)cfg->server_addr.v,
					cfg->server_addr.n, err) < 0 ||
	    hubfiles_prepare(id->root, err) < 0)
		return -1;
	struct buf ca = BUF_INIT;
	if (fs_read_operator_file(id->ca_file, &ca, 1 << 20) == 0 && take_ca(id, &ca, err) < 0) {
		buf_free(&ca);
		return -1;
	}
	buf_free(&ca);
	return 0;
}

/* --bootstrap-file, once the client manager has said whether the store
 * holds a certificate: without one, a bootstrap file that cannot be read
 * leaves nothing to start with, and the hub refuses, as YurtHub does. */
static int take_bootstrap_file(struct identity *id, char **err)
{
	char *token = NULL;
	if (read_bootstrap(id, id->cfg->bootstrap_file, &token, err) == 0) {
		pthread_mutex_lock(&id->lock);
		if (!id->boot_token)
			id->boot_token = token;
		else
			free_secret(token); /* the manager's first request read it already */
		pthread_mutex_unlock(&id->lock);
		return 0;
	}
	if (!atomic_load(&id->had_client))
		return -1;
	log_warn("--bootstrap-file: %s; the hub goes on with its certificate", *err);
	free(*err);
	*err = NULL;
	return 0;
}

struct identity *identity_start(const struct config *cfg, bool with_serving,
				const struct identity_hooks *hooks, char **err)
{
	*err = NULL;
	struct identity *id = calloc(1, sizeof *id);
	if (!id)
		return err_printf(err, "out of memory"), NULL;
	id->cfg = cfg;
	id->hooks = *hooks;
	pthread_mutex_init(&id->lock, NULL);
	bool token_mode = cfg->bootstrap_mode == BOOTSTRAP_TOKEN;
	int rc = paths(id);
	if (rc < 0)
		err_printf(err, "out of memory");
	if (rc == 0 && token_mode)
		rc = prepare_token_mode(id, err);
	if (rc == 0 && !token_mode && with_serving)
		rc = hubfiles_prepare(cfg->root_dir, err);
	if (rc == 0 && token_mode && !(id->client_mgr = start_manager(id, false, err)))
		rc = -1;
	if (rc == 0 && token_mode && *cfg->bootstrap_file)
		rc = take_bootstrap_file(id, err);
	if (rc == 0 && with_serving) {
		struct certmgr *m = start_manager(id, true, err);
		pthread_mutex_lock(&id->lock);
		id->serving_mgr = m;
		pthread_mutex_unlock(&id->lock);
		rc = m ? 0 : -1;
	}
	if (rc < 0) {
		identity_stop(id);
		return NULL;
	}
	return id;
}

bool identity_has_had_client_cert(struct identity *id)
{
	return !id || id->cfg->bootstrap_mode != BOOTSTRAP_TOKEN || atomic_load(&id->had_client);
}

int identity_update_token(struct identity *id, const char *token, bool *bad_input, char **err)
{
	*err = NULL;
	*bad_input = false;
	struct bootstrap_token t;
	if (!token || jws_token_parse(token, strlen(token), &t) < 0) {
		*bad_input = true;
		return err_printf(err, "the join token is not a bootstrap token "
				       "([a-z0-9]{6}.[a-z0-9]{16})"),
		       -1;
	}
	jws_token_wipe(&t);
	if (!id || id->cfg->bootstrap_mode != BOOTSTRAP_TOKEN)
		return 0; /* nothing bootstraps with a token here (kubelet's certificate) */
	if (discover(id, token, &id->stop, 30000, err) < 0)
		return -1;
	char *copy = strdup(token);
	pthread_mutex_lock(&id->lock);
	if (copy) {
		free_secret(id->join_token);
		id->join_token = copy;
	}
	pthread_mutex_unlock(&id->lock);
	return copy ? 0 : (err_printf(err, "out of memory"), -1);
}

const char *identity_client_ca_file(struct identity *id)
{
	return id && id->ca_file && *id->ca_file ? id->ca_file : NULL;
}

void identity_stop(struct identity *id)
{
	if (!id)
		return;
	atomic_store(&id->stop, true);
	pthread_mutex_lock(&id->lock);
	struct certmgr *serving = id->serving_mgr;
	id->serving_mgr = NULL;
	pthread_mutex_unlock(&id->lock);
	/* the client manager first: its callback pokes the serving one */
	certmgr_stop(id->client_mgr);
	certmgr_stop(serving);
	free(id->root);
	free(id->pki);
	free(id->bootstrap_conf);
	free(id->hub_conf);
	free(id->ca_file);
	free(id->client_pem);
	free_secret(id->join_token);
	free_secret(id->boot_token);
	buf_free(&id->ca);
	pthread_mutex_destroy(&id->lock);
	free(id);
}
