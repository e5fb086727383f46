/*
 * discovery.c - kubeadm's token discovery of the cluster CA, see
 * discovery.h.  libcurl for the two reads, jansson for the ConfigMap,
 * jws.c for the signature, x509.c for the pins, kubeconfig.c for the
 * kubeconfig the cluster signed.
 */
#include "identity/discovery.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "identity/jws.h"
#include "identity/x509.h"
#include "kube/kubeconfig.h"
#include "util/clock.h"
#include "util/log.h"

#define CLUSTER_INFO_PATH  "/api/v1/namespaces/kube-public/configmaps/cluster-info"
#define BODY_MAX	   (1u << 20)
#define REQUEST_TIMEOUT_MS 10000L

static bool stopped(const struct discovery_config *c)
{
	return c->stop && atomic_load(c->stop);
}

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
	struct buf *b = ud;
	size_t len = sz * n;
	if (b->len + len > BODY_MAX || buf_append(b, p, len) < 0)
		return 0; /* curl ends the transfer with an error */
	return len;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	(void)a, (void)b, (void)c, (void)d;
	return stopped(ud) ? 1 : 0;
}

/* GET cluster-info from server: verified against ca when ca is given.
 * 0 with the body in *body, or -1 with *err. */
static int fetch(const struct discovery_config *c, const char *server, const struct buf *ca,
		 struct buf *body, char **err)
{
	CURL *e = curl_easy_init();
	if (!e)
		return err_printf(err, "out of memory"), -1;
	struct buf url = BUF_INIT;
	int rc = buf_printf(&url, "%s%s", server, CLUSTER_INFO_PATH);
	buf_reset(body);
	curl_easy_setopt(e, CURLOPT_URL, buf_cstr(&url));
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, REQUEST_TIMEOUT_MS);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(e, CURLOPT_USERAGENT, c->user_agent ? c->user_agent : "yurthub");
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, body);
	curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(e, CURLOPT_XFERINFODATA, (void *)c);
	if (ca) {
		struct curl_blob blob = {ca->data, ca->len, CURL_BLOB_COPY};
		curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &blob);
	} else {
		/* nothing to trust yet: the signature is what vouches */
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	CURLcode cc = rc == 0 ? curl_easy_perform(e) : CURLE_OUT_OF_MEMORY;
	long status = 0;
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(e);
	rc = -1;
	if (cc != CURLE_OK)
		err_printf(err, "reading cluster-info from %s%s: %s", server,
			   ca ? " (verified with the pinned CA)" : "", curl_easy_strerror(cc));
	else if (status != 200)
		err_printf(err, "reading cluster-info from %s: HTTP %ld", server, status);
	else
		rc = 0;
	buf_free(&url);
	return rc;
}

/* data.kubeconfig and data["jws-kubeconfig-<id>"] of the ConfigMap; the
 * JSON stays owned by *doc.  0; 1 when the signature is not there yet;
 * -1 with *err when the body is not a cluster-info ConfigMap. */
static int read_cluster_info(const struct buf *body, const char *token_id, json_t **doc,
			     const char **kubeconfig, const char **jws, char **err)
{
	*doc = json_loadb(body->data, body->len, 0, NULL);
	json_t *data = json_object_get(*doc, "data");
	*kubeconfig = json_string_value(json_object_get(data, "kubeconfig"));
	if (!*kubeconfig)
		return err_printf(err, "cluster-info has no data.kubeconfig"), -1;
	char key[sizeof JWS_CLUSTER_INFO_KEY_PREFIX + JWS_TOKEN_ID_LEN];
	snprintf(key, sizeof key, "%s%s", JWS_CLUSTER_INFO_KEY_PREFIX, token_id);
	*jws = json_string_value(json_object_get(data, key));
	if (!*jws) {
		err_printf(err, "cluster-info has no signature for token id %s (yet)", token_id);
		return 1;
	}
	return 0;
}

/* What the cluster vouches for: the CA of the signed kubeconfig, checked
 * against the pins.  0, 1 (no signature yet: retry) or -1 with *err. */
static int check_cluster_info(const struct discovery_config *c, const struct bootstrap_token *t,
			      const struct buf *body, struct buf *ca, struct buf *signed_kc,
			      char **err)
{
	json_t *doc;
	const char *kcfg, *jws;
	int rc = read_cluster_info(body, t->id, &doc, &kcfg, &jws, err);
	if (rc == 0 &&
	    jws_verify_detached(jws, strlen(jws), kcfg, strlen(kcfg), t->id, t->secret, err) < 0)
		rc = -1;
	struct kubeconfig kc = {0};
	if (rc == 0 && kubeconfig_parse(kcfg, strlen(kcfg), NULL, &kc, err) < 0)
		rc = -1;
	if (rc == 0 && !kc.ca_data.len) {
		err_printf(err, "the kubeconfig of cluster-info has no certificate-authority-data");
		rc = -1;
	}
	if (rc == 0 && c->n_pins) {
		int pinned =
		    x509_pins_check(kc.ca_data.data, kc.ca_data.len, c->pins, c->n_pins, err);
		if (pinned != 1) {
			char *why = *err;
			*err = NULL;
			err_printf(
			    err, "the cluster CA does not match --discovery-token-ca-cert-hash: %s",
			    why ? why : "no pin matches");
			free(why);
			rc = -1;
		}
	}
	if (rc == 0) {
		buf_reset(ca);
		buf_reset(signed_kc);
		if (buf_append(ca, kc.ca_data.data, kc.ca_data.len) < 0 ||
		    buf_append_str(signed_kc, kcfg) < 0)
			rc = -1, err_printf(err, "out of memory");
	}
	kubeconfig_free(&kc);
	json_decref(doc);
	return rc;
}

/* Step 3: the same kubeconfig, read over TLS verified with the CA. */
static int confirm_with_ca(const struct discovery_config *c, const char *token_id,
			   const char *server, const struct buf *ca, const struct buf *signed_kc,
			   char **err)
{
	struct buf body = BUF_INIT;
	json_t *doc = NULL;
	const char *kcfg = NULL, *jws;
	int rc = fetch(c, server, ca, &body, err);
	if (rc == 0 && read_cluster_info(&body, token_id, &doc, &kcfg, &jws, err) < 0)
		rc = -1;
	if (rc == 0 && (!kcfg || strcmp(kcfg, buf_cstr(signed_kc)) != 0)) {
		err_printf(
		    err, "cluster-info read with the pinned CA from %s differs from the signed one",
		    server);
		rc = -1;
	}
	json_decref(doc);
	buf_free(&body);
	return rc;
}

static void pause_ms(const struct discovery_config *c, long long ms)
{
	long long end = clock_now_ms() + ms;
	while (!stopped(c) && clock_now_ms() < end) {
		struct timespec ts = {0, 100 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

/* One round over the servers: 0 done, 1 try again later, -1 give up. */
static int round_over_servers(const struct discovery_config *c, const struct bootstrap_token *t,
			      struct discovery_result *out, char **err)
{
	struct buf body = BUF_INIT, signed_kc = BUF_INIT;
	int rc = 1;
	for (size_t i = 0; rc == 1 && i < c->n_servers && !stopped(c); i++) {
		const char *server = c->servers[i];
		if (fetch(c, server, NULL, &body, err) < 0)
			continue; /* the next server, or the next round */
		rc = check_cluster_info(c, t, &body, &out->ca_pem, &signed_kc, err);
		if (rc == 0 && c->n_pins)
			rc = confirm_with_ca(c, t->id, server, &out->ca_pem, &signed_kc, err);
		if (rc == 0 && !(out->server = strdup(server)))
			rc = -1, err_printf(err, "out of memory");
	}
	buf_free(&body);
	buf_free(&signed_kc);
	return rc;
}

int discovery_run(const struct discovery_config *c, struct discovery_result *out, char **err)
{
	memset(out, 0, sizeof *out);
	*err = NULL;
	struct bootstrap_token t;
	if (!c->token || jws_token_parse(c->token, strlen(c->token), &t) < 0)
		return err_printf(err, "the join token is not a bootstrap token "
				       "([a-z0-9]{6}.[a-z0-9]{16})"),
		       -1;
	if (!c->n_pins && !c->unsafe_skip_ca_verification) {
		jws_token_wipe(&t);
		return err_printf(err,
				  "no --discovery-token-ca-cert-hash to check the cluster CA with "
				  "(or --discovery-token-unsafe-skip-ca-verification)"),
		       -1;
	}
	if (!c->n_servers) {
		jws_token_wipe(&t);
		return err_printf(err, "no server to discover"), -1;
	}
	long long deadline = clock_now_ms() + (c->timeout_ms ? c->timeout_ms : 120000u);
	int rc;
	for (;;) {
		rc = round_over_servers(c, &t, out, err);
		if (rc != 1)
			break;
		if (stopped(c) || clock_now_ms() >= deadline) {
			rc = -1;
			break;
		}
		log_v(1, "token discovery: %s; again in a while", *err ? *err : "no answer");
		pause_ms(c, c->retry_ms ? c->retry_ms : 5000u);
	}
	jws_token_wipe(&t);
	if (rc < 0) {
		if (stopped(c))
			err_printf(err, "token discovery stopped");
		discovery_result_free(out);
		return -1;
	}
	free(*err);
	*err = NULL;
	return 0;
}

void discovery_result_free(struct discovery_result *r)
{
	free(r->server);
	buf_free(&r->ca_pem);
	memset(r, 0, sizeof *r);
}
