/*
 * csrclient.c - the CertificateSigningRequest API client, see csrclient.h.
 *
 * Requests run one at a time on a libcurl multi handle of the client's own,
 * so that csrclient_cancel can wake a transfer at once (curl_multi_wakeup)
 * and the caller's stop flag is looked at every 200 ms.  Answers are small
 * JSON objects, read whole (bounded); a watch goes through the incremental
 * decoder of kube/stream.h, and each event's object is read on its own.
 */
#include "identity/csrclient.h"

#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/stream.h"
#include "util/base64.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"

#define CSR_PATH	"/apis/certificates.k8s.io/v1/certificatesigningrequests"
#define BODY_MAX	(1u << 20) /* a CSR object, its certificate chain included */
#define ERROR_BODY_MAX	4096
#define REQUEST_MAX_MS	60000L /* a POST or GET that takes longer is dead */
#define WATCH_MAX_S	300L   /* one watch at most; then a GET and a new one */
#define POLL_SLICE_MS	200    /* how often the stop flag is looked at */
#define CONNECT_TIMEOUT 10000L

const char *const csr_usages_client[3] = {"digital signature", "key encipherment", "client auth"};
const char *const csr_usages_serving[3] = {"digital signature", "key encipherment", "server auth"};

struct csrclient {
	struct csrclient_config cfg; /* strings point at the copies below */
	char *server, *signer, *user_agent;
	char **usages;
	CURLM *multi;
	atomic_bool cancelled;
};

static bool stopped(const struct csrclient *c)
{
	return atomic_load(&c->cancelled) || (c->cfg.stop && atomic_load(c->cfg.stop));
}

/* ---- life cycle ---- */

void csrclient_free(struct csrclient *c)
{
	if (!c)
		return;
	if (c->multi)
		curl_multi_cleanup(c->multi);
	for (size_t i = 0; c->usages && i < c->cfg.n_usages; i++)
		free(c->usages[i]);
	free(c->usages);
	free(c->server);
	free(c->signer);
	free(c->user_agent);
	free(c);
}

struct csrclient *csrclient_new(const struct csrclient_config *cfg, char **err)
{
	*err = NULL;
	if (!cfg->server || !*cfg->server || !cfg->signer_name || !cfg->usages || !cfg->n_usages) {
		*err = strdup("CSR client: server, signer and usages are needed");
		return NULL;
	}
	struct csrclient *c = calloc(1, sizeof *c);
	if (!c) {
		*err = strdup("out of memory");
		return NULL;
	}
	c->cfg = *cfg;
	size_t n = strlen(cfg->server);
	while (n && cfg->server[n - 1] == '/')
		n--;
	c->server = strndup(cfg->server, n);
	c->signer = strdup(cfg->signer_name);
	c->user_agent = strdup(cfg->user_agent ? cfg->user_agent : "yurthub");
	c->usages = calloc(cfg->n_usages, sizeof *c->usages);
	bool ok = c->server && c->signer && c->user_agent && c->usages;
	for (size_t i = 0; ok && i < cfg->n_usages; i++)
		ok = (c->usages[i] = strdup(cfg->usages[i])) != NULL;
	if (ok)
		ok = (c->multi = curl_multi_init()) != NULL;
	if (!ok) {
		csrclient_free(c);
		*err = strdup("out of memory");
		return NULL;
	}
	c->cfg.server = c->server;
	c->cfg.signer_name = c->signer;
	c->cfg.user_agent = c->user_agent;
	c->cfg.usages = (const char *const *)c->usages;
	if (!c->cfg.timeout_ms)
		c->cfg.timeout_ms = CSRCLIENT_TIMEOUT_MS_DEFAULT;
	if (!c->cfg.poll_ms)
		c->cfg.poll_ms = CSRCLIENT_POLL_MS_DEFAULT;
	return c;
}

void csrclient_cancel(struct csrclient *c)
{
	atomic_store(&c->cancelled, true);
	curl_multi_wakeup(c->multi);
}

static int issuer_issue(void *ctx, const char *csr_pem, char **cert_pem, char **err)
{
	return csrclient_issue(ctx, csr_pem, cert_pem, err);
}

static void issuer_cancel(void *ctx)
{
	csrclient_cancel(ctx);
}

struct certmgr_issuer csrclient_issuer(struct csrclient *c)
{
	struct certmgr_issuer i = {issuer_issue, issuer_cancel, c};
	return i;
}

/* ---- one HTTP request ---- */

struct req {
	struct csrclient *c;
	CURL *e;
	long code;	 /* 0 until the body starts */
	struct buf body; /* a whole answer (not a watch's) */
	bool too_big;
	struct watch_decoder *wd; /* a watch: the body goes here */
};

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
	struct req *r = ud;
	size_t len = sz * n;
	if (!r->code && curl_easy_getinfo(r->e, CURLINFO_RESPONSE_CODE, &r->code) != CURLE_OK)
		r->code = -1;
	if (r->wd && r->code == 200)
		return watch_decoder_feed(r->wd, p, len) == 0 ? len : 0;
	size_t cap = r->code >= 200 && r->code < 300 ? BODY_MAX : ERROR_BODY_MAX;
	if (r->body.len + len > cap) {
		r->too_big = r->code >= 200 && r->code < 300;
		size_t room = cap > r->body.len ? cap - r->body.len : 0;
		if (room)
			buf_append(&r->body, p, room);
		return r->too_big ? 0 : len;
	}
	return buf_append(&r->body, p, len) == 0 ? len : 0;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c2, curl_off_t d)
{
	(void)a;
	(void)b;
	(void)c2;
	(void)d;
	return stopped(ud) ? 1 : 0;
}

/* Run r->e to its end on the client's multi handle.  Its result, or
 * CURLE_ABORTED_BY_CALLBACK when stopped. */
static CURLcode run(struct csrclient *c, CURL *e)
{
	if (curl_multi_add_handle(c->multi, e) != CURLM_OK)
		return CURLE_FAILED_INIT;
	CURLcode res = CURLE_FAILED_INIT;
	for (;;) {
		int running = 0;
		if (curl_multi_perform(c->multi, &running) != CURLM_OK)
			break;
		CURLMsg *m;
		int left;
		bool done = false;
		while ((m = curl_multi_info_read(c->multi, &left)))
			if (m->msg == CURLMSG_DONE && m->easy_handle == e) {
				res = m->data.result;
				done = true;
			}
		if (done)
			break;
		if (stopped(c)) {
			res = CURLE_ABORTED_BY_CALLBACK;
			break;
		}
		if (running == 0)
			break;
		if (curl_multi_poll(c->multi, NULL, 0, POLL_SLICE_MS, NULL) != CURLM_OK)
			break;
	}
	curl_multi_remove_handle(c->multi, e);
	return res;
}

/* One request: method and url (GET when body is NULL), at most
 * timeout_ms.  Fills r (caller frees with req_done).  0 when an answer
 * came (any status: r->code), -1 with *err when none did. */
static int request(struct csrclient *c, struct req *r, const char *url, const char *body,
		   long timeout_ms, char **err)
{
	struct curl_slist *h = NULL, *h2;
	char *serr = NULL;
	r->c = c;
	r->e = curl_easy_init();
	if (!r->e) {
		err_printf(err, "out of memory");
		return -1;
	}
	if (c->cfg.setup && c->cfg.setup(c->cfg.setup_ctx, r->e, &h, &serr) < 0) {
		err_printf(err, "cannot set up the request: %s", serr ? serr : "no reason given");
		free(serr);
		curl_slist_free_all(h);
		return -1;
	}
	bool ok = (h2 = curl_slist_append(h, "Accept: application/json")) != NULL;
	h = ok ? h2 : h;
	if (ok && body) {
		ok = (h2 = curl_slist_append(h, "Content-Type: application/json")) != NULL;
		h = ok ? h2 : h;
	}
	ok = ok && curl_easy_setopt(r->e, CURLOPT_URL, url) == CURLE_OK &&
	     curl_easy_setopt(r->e, CURLOPT_HTTPHEADER, h) == CURLE_OK &&
	     curl_easy_setopt(r->e, CURLOPT_USERAGENT, c->user_agent) == CURLE_OK &&
	     curl_easy_setopt(r->e, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
	     curl_easy_setopt(r->e, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK &&
	     curl_easy_setopt(r->e, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK &&
	     curl_easy_setopt(r->e, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT) == CURLE_OK &&
	     curl_easy_setopt(r->e, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 1L) ==
		 CURLE_OK &&
	     curl_easy_setopt(r->e, CURLOPT_WRITEFUNCTION, on_body) == CURLE_OK &&
	     curl_easy_setopt(r->e, CURLOPT_WRITEDATA, r) == CURLE_OK &&
	     curl_easy_setopt(r->e, CURLOPT_NOPROGRESS, 0L) == CURLE_OK &&
	     curl_easy_setopt(r->e, CURLOPT_XFERINFOFUNCTION, on_progress) == CURLE_OK &&
	     curl_easy_setopt(r->e, CURLOPT_XFERINFODATA, c) == CURLE_OK;
	if (ok && body)
		ok = curl_easy_setopt(r->e, CURLOPT_POSTFIELDS, body) == CURLE_OK;
	if (!ok) {
		err_printf(err, "cannot set up the request: out of memory");
		curl_slist_free_all(h);
		return -1;
	}
	CURLcode res = run(c, r->e);
	curl_slist_free_all(h);
	if (res == CURLE_OK && !r->code &&
	    curl_easy_getinfo(r->e, CURLINFO_RESPONSE_CODE, &r->code) != CURLE_OK)
		r->code = -1;
	if (stopped(c)) {
		err_printf(err, "stopped");
		return -1;
	}
	if (res == CURLE_WRITE_ERROR && r->too_big) {
		err_printf(err, "%s: the answer is over %u bytes", url, BODY_MAX);
		return -1;
	}
	if (res == CURLE_WRITE_ERROR && r->wd && r->code == 200)
		return 0; /* the caller reads the decoder's error */
	if (res != CURLE_OK && !(r->wd && res == CURLE_OPERATION_TIMEDOUT && r->code == 200)) {
		err_printf(err, "%s: %s", url, curl_easy_strerror(res));
		return -1;
	}
	return 0;
}

static void req_done(struct req *r)
{
	if (r->e)
		curl_easy_cleanup(r->e);
	buf_free(&r->body);
	memset(r, 0, sizeof *r);
}

/* "HTTP <code>: <Status message or the first bytes>" */
static void http_error(const struct req *r, const char *what, char **err)
{
	json_t *j = r->body.len ? json_loadb(r->body.data, r->body.len, 0, NULL) : NULL;
	const char *msg = json_string_value(json_object_get(j, "message"));
	struct buf text = BUF_INIT;
	if (msg)
		buf_append_str(&text, msg);
	else
		buf_append_utf8(&text, r->body.data ? r->body.data : "", r->body.len);
	err_printf(err, "%s: HTTP %ld: %s", what, r->code, buf_cstr(&text));
	buf_free(&text);
	json_decref(j);
}

/* ---- the object's state ---- */

enum state { PENDING, ISSUED, REFUSED };

/* Where a CSR object stands.  ISSUED with *cert; REFUSED with *err;
 * PENDING.  A Denied or Failed condition wins over a certificate, as in
 * client-go.  Unlike client-go, a certificate without an Approved
 * condition is taken: the API server only lets a signer set one on an
 * approved request, and the certificate manager checks what it gets. */
static enum state examine(json_t *obj, char **cert, char **err)
{
	json_t *status = json_object_get(obj, "status");
	json_t *conds = json_object_get(status, "conditions");
	size_t i;
	json_t *cnd;
	json_array_foreach(conds, i, cnd)
	{
		const char *type = json_string_value(json_object_get(cnd, "type"));
		if (!type || (strcmp(type, "Denied") && strcmp(type, "Failed")))
			continue;
		const char *reason = json_string_value(json_object_get(cnd, "reason"));
		const char *msg = json_string_value(json_object_get(cnd, "message"));
		err_printf(err, "the certificate signing request was %s (reason: %s, message: %s)",
			   !strcmp(type, "Denied") ? "denied" : "failed", reason ? reason : "none",
			   msg ? msg : "none");
		return REFUSED;
	}
	json_t *c = json_object_get(status, "certificate");
	const char *b64 = json_string_value(c);
	if (!b64 || !json_string_length(c))
		return PENDING;
	struct buf pem = BUF_INIT;
	if (base64_decode(b64, json_string_length(c), &pem) < 0 || pem.len == 0 ||
	    memchr(pem.data, '\0', pem.len) || !strstr(pem.data, "-----BEGIN CERTIFICATE-----")) {
		err_printf(err, "status.certificate is not a base64 PEM certificate");
		buf_free(&pem);
		return REFUSED;
	}
	*cert = buf_steal(&pem);
	if (!*cert) {
		err_printf(err, "out of memory");
		return REFUSED;
	}
	return ISSUED;
}

/* ---- the steps ---- */

static char *post_body(struct csrclient *c, const char *csr_pem)
{
	struct buf b = BUF_INIT, req64 = BUF_INIT;
	bool ok = base64_encode(csr_pem, strlen(csr_pem), &req64) == 0 &&
		  buf_append_str(&b, "{\"apiVersion\":\"certificates.k8s.io/v1\","
				     "\"kind\":\"CertificateSigningRequest\","
				     "\"metadata\":{\"generateName\":\"csr-\"},"
				     "\"spec\":{\"request\":") == 0 &&
		  buf_append_json_str(&b, req64.data, req64.len) == 0 &&
		  buf_append_str(&b, ",\"signerName\":") == 0 &&
		  buf_append_json_str(&b, c->signer, strlen(c->signer)) == 0 &&
		  buf_append_str(&b, ",\"usages\":[") == 0;
	for (size_t i = 0; ok && i < c->cfg.n_usages; i++)
		ok = (i == 0 || buf_append_char(&b, ',') == 0) &&
		     buf_append_json_str(&b, c->usages[i], strlen(c->usages[i])) == 0;
	ok = ok && buf_append_char(&b, ']') == 0;
	if (ok && c->cfg.expiration_seconds > 0)
		ok = buf_printf(&b, ",\"expirationSeconds\":%ld", c->cfg.expiration_seconds) == 0;
	ok = ok && buf_append_str(&b, "}}") == 0;
	buf_free(&req64);
	if (!ok) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b);
}

/* The waiting: everything one issue needs to know. */
struct wait {
	struct csrclient *c;
	char *name, *escaped, *rv;
	long long deadline;
	bool no_watch; /* the server refused a watch: poll */
	char *cert;
	char *err;
	bool done; /* cert or err is final */
};

static long remaining(const struct wait *w)
{
	long long r = w->deadline - clock_now_ms();
	return r > 0 ? (long)(r > LONG_MAX ? LONG_MAX : r) : 0;
}

/* Take in one state of the object: final or not. */
static void take(struct wait *w, json_t *obj)
{
	const char *rv =
	    json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
	if (rv && *rv) {
		char *copy = strdup(rv);
		if (copy) {
			free(w->rv);
			w->rv = copy;
		}
	}
	enum state s = examine(obj, &w->cert, &w->err);
	if (s != PENDING)
		w->done = true;
}

/* GET the object.  0, or -1 with w->err (final when w->done). */
static int get_once(struct wait *w)
{
	struct buf url = BUF_INIT;
	struct req r = {0};
	char *err = NULL;
	int rc = -1;
	long t = remaining(w);
	if (buf_printf(&url, "%s%s/%s", w->c->server, CSR_PATH, w->escaped) < 0) {
		err_printf(&w->err, "out of memory");
		w->done = true;
		goto out;
	}
	if (request(w->c, &r, url.data, NULL, t < REQUEST_MAX_MS ? t : REQUEST_MAX_MS, &err) < 0) {
		free(w->err);
		w->err = err;
		err = NULL;
		w->done = stopped(w->c);
		goto out;
	}
	if (r.code == 404) {
		err_printf(&w->err, "the certificate signing request %s was deleted", w->name);
		w->done = true;
		goto out;
	}
	if (r.code != 200) {
		http_error(&r, "reading the certificate signing request", &w->err);
		goto out;
	}
	json_t *obj = json_loadb(buf_cstr(&r.body), r.body.len, 0, NULL);
	if (!json_is_object(obj)) {
		err_printf(&w->err, "reading the certificate signing request: not a JSON object");
		json_decref(obj);
		goto out;
	}
	take(w, obj);
	json_decref(obj);
	rc = 0;
out:
	free(err);
	req_done(&r);
	buf_free(&url);
	return rc;
}

static int on_event(void *ud, const struct watch_event *ev)
{
	struct wait *w = ud;
	if (ev->type == WATCH_BOOKMARK)
		return 0;
	if (ev->type == WATCH_ERROR)
		return 1; /* a GET and a new watch will sort it out */
	json_t *obj = json_loadb(ev->object.data, ev->object.len, 0, NULL);
	const char *name =
	    json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
	if (obj && name && !strcmp(name, w->name)) {
		if (ev->type == WATCH_DELETED) {
			err_printf(&w->err, "the certificate signing request %s was deleted",
				   w->name);
			w->done = true;
		} else {
			take(w, obj);
		}
	}
	json_decref(obj);
	return w->done ? 1 : 0;
}

/* Watch the object from w->rv until it is final, the watch ends, or the
 * server refuses (then w->no_watch).  Errors are not final. */
static void watch_once(struct wait *w)
{
	struct buf url = BUF_INIT;
	struct req r = {0};
	char *err = NULL;
	long t = remaining(w);
	long secs = t / 1000 < WATCH_MAX_S ? t / 1000 : WATCH_MAX_S;
	if (secs < 1)
		secs = 1;
	if (!(r.wd = watch_decoder_new(on_event, w)) ||
	    buf_printf(&url,
		       "%s%s?fieldSelector=metadata.name%%3D%s&watch=true&"
		       "allowWatchBookmarks=true&timeoutSeconds=%ld%s%s",
		       w->c->server, CSR_PATH, w->escaped, secs, w->rv ? "&resourceVersion=" : "",
		       w->rv ? w->rv : "") < 0) {
		err_printf(&w->err, "out of memory");
		goto out;
	}
	/* the server ends the watch at timeoutSeconds; a little more here */
	long limit = secs * 1000 + 5000;
	if (request(w->c, &r, url.data, NULL, limit < t ? limit : t, &err) < 0) {
		free(w->err);
		w->err = err;
		err = NULL;
		goto out;
	}
	if (w->done)
		goto out;
	if (r.code != 200) {
		http_error(&r, "watching the certificate signing request", &w->err);
		log_info("certificate signing request %s: watching refused (%s); polling every "
			 "%u ms",
			 w->name, w->err, w->c->cfg.poll_ms);
		w->no_watch = true;
		goto out;
	}
	if (watch_decoder_finish(r.wd) < 0)
		err_printf(&w->err, "watching the certificate signing request: %s",
			   watch_decoder_error(r.wd));
out:
	free(err);
	watch_decoder_free(r.wd);
	r.wd = NULL;
	req_done(&r);
	buf_free(&url);
}

/* Pause ms (at most what is left), watching the stop flags. */
static void pause_ms(struct wait *w, long ms)
{
	long long end = clock_now_ms() + ms;
	if (end > w->deadline)
		end = w->deadline;
	while (!stopped(w->c)) {
		long long left = end - clock_now_ms();
		if (left <= 0)
			break;
		curl_multi_poll(w->c->multi, NULL, 0,
				left < POLL_SLICE_MS ? (int)left : POLL_SLICE_MS, NULL);
	}
}

/* POST the request; the object the server made.  0, or -1 with *err. */
static int submit(struct wait *w, const char *csr_pem)
{
	struct csrclient *c = w->c;
	char *body = post_body(c, csr_pem), *err = NULL;
	struct buf url = BUF_INIT;
	struct req r = {0};
	json_t *obj = NULL;
	int rc = -1;
	long t = remaining(w);
	if (!body || buf_printf(&url, "%s%s", c->server, CSR_PATH) < 0) {
		err_printf(&w->err, "out of memory");
		goto out;
	}
	if (request(c, &r, url.data, body, t < REQUEST_MAX_MS ? t : REQUEST_MAX_MS, &err) < 0) {
		err_printf(&w->err, "submitting the certificate signing request: %s", err);
		goto out;
	}
	if (r.code != 201 && r.code != 200 && r.code != 202) {
		http_error(&r, "submitting the certificate signing request", &w->err);
		goto out;
	}
	obj = json_loadb(buf_cstr(&r.body), r.body.len, 0, NULL);
	const char *name =
	    json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
	if (!name || !*name) {
		err_printf(&w->err, "submitting the certificate signing request: the answer has no "
				    "metadata.name");
		goto out;
	}
	if (!(w->name = strdup(name)) ||
	    !(w->escaped = curl_easy_escape(NULL, name, (int)strnlen(name, INT_MAX)))) {
		err_printf(&w->err, "out of memory");
		goto out;
	}
	log_info("certificate signing request %s submitted (signer %s)", w->name, c->signer);
	take(w, obj);
	rc = 0;
out:
	json_decref(obj);
	req_done(&r);
	buf_free(&url);
	free(body);
	free(err);
	return rc;
}

int csrclient_issue(struct csrclient *c, const char *csr_pem, char **cert_pem, char **err)
{
	*cert_pem = NULL;
	struct wait w = {.c = c, .deadline = clock_now_ms() + c->cfg.timeout_ms};
	if (stopped(c)) {
		err_printf(err, "stopped");
		return -1;
	}
	if (submit(&w, csr_pem) == 0) {
		/* The answer to the POST was the first state; then a watch from
		 * its resourceVersion, and a GET before each further watch (or
		 * every poll_ms when watching is refused). */
		bool first = true;
		while (!w.done && !stopped(c) && remaining(&w) > 0) {
			if (!first) {
				if (get_once(&w) < 0 && !w.done) {
					log_info("certificate signing request %s: %s", w.name,
						 w.err);
					pause_ms(&w, c->cfg.poll_ms);
					continue;
				}
				if (w.done)
					break;
			}
			first = false;
			if (w.no_watch) {
				pause_ms(&w, c->cfg.poll_ms);
				continue;
			}
			long long t0 = clock_now_ms();
			watch_once(&w);
			/* a watch that ends at once, again and again, must not
			 * become a tight loop */
			if (!w.done && clock_now_ms() - t0 < 1000)
				pause_ms(&w, c->cfg.poll_ms);
		}
		if (!w.done) {
			if (stopped(c))
				err_printf(&w.err, "stopped");
			else
				err_printf(
				    &w.err,
				    "no certificate for the signing request %s within %u ms%s%s",
				    w.name, c->cfg.timeout_ms, w.err ? "; last: " : "",
				    w.err ? w.err : "");
		}
	}
	int rc = -1;
	if (w.done && w.cert) {
		*cert_pem = w.cert;
		w.cert = NULL;
		log_info("certificate signing request %s: certificate issued", w.name);
		rc = 0;
	} else {
		free(*err);
		*err = w.err ? w.err : strdup("no certificate");
		w.err = NULL;
	}
	free(w.cert);
	free(w.err);
	free(w.name);
	curl_free(w.escaped);
	free(w.rv);
	return rc;
}
