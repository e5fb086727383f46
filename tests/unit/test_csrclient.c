/*
 * test_csrclient.c - identity/csrclient against a small fake of the
 * CertificateSigningRequest API, served by libmicrohttpd in this process:
 * POST makes the object (and signs its request with a test CA), GET reads
 * it, a watch streams the change when the test's outcome is due.  The
 * end-to-end test against the project's test double is the integrator's.
 *
 * Covered: the POST body (every field), the identity applied through the
 * setup callback, issuance seen through a watch from the POST's
 * resourceVersion, issuance already in the POST's answer, polling when
 * watches are refused, Denied, Failed, a deleted request, a certificate
 * that is not base64, a refused POST, a server that is not there, the
 * timeout, cancel and the stop flag during the wait, certmgr driving it,
 * and TLS with the hub's one-file cert+key read by libcurl's OpenSSL.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <microhttpd.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "identity/certmgr.h"
#include "identity/csrclient.h"
#include "testca.h"
#include "testutil.h"
#include "util/base64.h"
#include "util/buf.h"
#include "util/log.h"

#define CSR_PATH "/apis/certificates.k8s.io/v1/certificatesigningrequests"
#define CSR_NAME "csr-x7k2p"

static struct test_ca *g_ca;

static long long mono_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* ---- the fake API server ---- */

enum outcome { O_ISSUE, O_DENY, O_FAIL, O_NEVER, O_DELETE, O_BAD_CERT };

struct api {
	struct MHD_Daemon *d;
	int port;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC */
	bool shutdown;
	/* behaviour */
	int post_status;
	bool issue_in_post;
	bool watch_refused;
	enum outcome outcome;
	long long decide_after_ms;
	/* what was seen */
	unsigned posts, gets, watches;
	char *post_body, *authorization, *user_agent, *content_type;
	char *watch_field_selector, *watch_rv;
	char *peer_cn; /* TLS: the client certificate's CN, verified */
	long long posted_at;
	char *cert_pem; /* signed when the request came */
};

static struct api A;

static bool decided_locked(void)
{
	return A.posts && (A.issue_in_post || mono_ms() >= A.posted_at + A.decide_after_ms);
}

/* The CSR object as the server shows it now (malloc'ed JSON). */
static char *object_json_locked(bool decided)
{
	struct buf b = BUF_INIT;
	buf_printf(
	    &b,
	    "{\"apiVersion\":\"certificates.k8s.io/v1\",\"kind\":\"CertificateSigningRequest\","
	    "\"metadata\":{\"name\":\"" CSR_NAME "\",\"resourceVersion\":\"%s\"},"
	    "\"spec\":{\"signerName\":\"x\"},\"status\":",
	    decided ? "101" : "100");
	if (!decided || A.outcome == O_NEVER || A.outcome == O_DELETE) {
		buf_append_str(&b, "{}}");
	} else if (A.outcome == O_DENY) {
		buf_append_str(&b, "{\"conditions\":[{\"type\":\"Denied\",\"status\":\"True\","
				   "\"reason\":\"NotMyNode\",\"message\":\"node edge-9 is not "
				   "in any pool\"}]}}");
	} else if (A.outcome == O_FAIL) {
		buf_append_str(&b, "{\"conditions\":[{\"type\":\"Approved\",\"status\":\"True\"},"
				   "{\"type\":\"Failed\",\"status\":\"True\",\"reason\":"
				   "\"SignerValidationFailure\",\"message\":\"bad usages\"}]}}");
	} else if (A.outcome == O_BAD_CERT) {
		buf_append_str(&b, "{\"conditions\":[{\"type\":\"Approved\",\"status\":\"True\"}],"
				   "\"certificate\":\"!!notbase64!!\"}}");
	} else {
		struct buf c64 = BUF_INIT;
		base64_encode(A.cert_pem, strlen(A.cert_pem), &c64);
		buf_printf(&b,
			   "{\"conditions\":[{\"type\":\"Approved\",\"status\":\"True\"}],"
			   "\"certificate\":\"%s\"}}",
			   c64.data);
		buf_free(&c64);
	}
	return buf_steal(&b);
}

static enum MHD_Result answer(struct MHD_Connection *conn, unsigned code, const char *body)
{
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
	MHD_add_response_header(r, "Content-Type", "application/json");
	enum MHD_Result rc = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result status(struct MHD_Connection *conn, unsigned code, const char *msg)
{
	char *b = str_printf("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
			     "\"message\":\"%s\",\"code\":%u}",
			     msg, code);
	enum MHD_Result rc = answer(conn, code, b);
	free(b);
	return rc;
}

static char *dup_header(struct MHD_Connection *conn, enum MHD_ValueKind kind, const char *name)
{
	const char *v = MHD_lookup_connection_value(conn, kind, name);
	return v ? strdup(v) : NULL;
}

/* The CN of a verified client certificate, or NULL. */
static char *peer_cn(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	if (!ci || !ci->tls_session)
		return NULL;
	gnutls_session_t s = (gnutls_session_t)ci->tls_session;
	unsigned n = 0, st = 0;
	const gnutls_datum_t *peers = gnutls_certificate_get_peers(s, &n);
	if (!peers || !n || gnutls_certificate_verify_peers2(s, &st) < 0 || st != 0)
		return NULL;
	gnutls_x509_crt_t crt;
	char cn[256];
	size_t size = sizeof cn;
	char *out = NULL;
	if (gnutls_x509_crt_init(&crt) == 0) {
		if (gnutls_x509_crt_import(crt, &peers[0], GNUTLS_X509_FMT_DER) == 0 &&
		    gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, cn,
						  &size) == 0)
			out = strdup(cn);
		gnutls_x509_crt_deinit(crt);
	}
	return out;
}

/* The request's CSR signed by the test CA, for an hour. */
static char *sign_posted(const char *body)
{
	json_t *j = json_loads(body, 0, NULL);
	const char *req = json_string_value(json_object_get(json_object_get(j, "spec"), "request"));
	struct buf pem = BUF_INIT;
	char *cert = NULL;
	if (req && base64_decode(req, strlen(req), &pem) == 0) {
		time_t now = time(NULL);
		cert = test_ca_sign(g_ca, pem.data, now - 5, now + 3600);
	}
	buf_free(&pem);
	json_decref(j);
	return cert;
}

/* A watch: the change, once it is due, as one event; then the stream
 * stays open until the client goes or the server shuts down. */
struct stream {
	bool sent;
};

static ssize_t watch_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct stream *s = cls;
	pthread_mutex_lock(&A.lock);
	for (;;) {
		if (A.shutdown) {
			pthread_mutex_unlock(&A.lock);
			return MHD_CONTENT_READER_END_OF_STREAM;
		}
		if (!s->sent && decided_locked() && A.outcome != O_NEVER)
			break;
		long long until = mono_ms() + 50;
		struct timespec ts = {(time_t)(until / 1000), (long)(until % 1000) * 1000000L};
		pthread_cond_timedwait(&A.cond, &A.lock, &ts);
		if (s->sent) {
			/* a keep-alive of sorts: nothing to say; hold on */
			continue;
		}
	}
	char *obj = object_json_locked(true);
	pthread_mutex_unlock(&A.lock);
	char *ev = str_printf("{\"type\":\"%s\",\"object\":%s}\n",
			      A.outcome == O_DELETE ? "DELETED" : "MODIFIED", obj);
	free(obj);
	size_t n = strlen(ev);
	if (n > max) {
		free(ev);
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	memcpy(buf, ev, n);
	free(ev);
	s->sent = true;
	return (ssize_t)n;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url,
			       const char *method, const char *version, const char *upload,
			       size_t *upload_size, void **con_cls)
{
	(void)cls;
	(void)version;
	if (!*con_cls) {
		struct buf *b = calloc(1, sizeof *b);
		*con_cls = b;
		return MHD_YES;
	}
	struct buf *body = *con_cls;
	if (*upload_size) {
		buf_append(body, upload, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	pthread_mutex_lock(&A.lock);
	free(A.authorization);
	A.authorization = dup_header(conn, MHD_HEADER_KIND, "Authorization");
	free(A.user_agent);
	A.user_agent = dup_header(conn, MHD_HEADER_KIND, "User-Agent");
	char *cn = peer_cn(conn);
	if (cn) {
		free(A.peer_cn);
		A.peer_cn = cn;
	}
	enum MHD_Result rc;
	if (!strcmp(method, "POST") && !strcmp(url, CSR_PATH)) {
		A.posts++;
		A.posted_at = mono_ms();
		free(A.post_body);
		A.post_body = strdup(buf_cstr(body));
		free(A.content_type);
		A.content_type = dup_header(conn, MHD_HEADER_KIND, "Content-Type");
		free(A.cert_pem);
		A.cert_pem = sign_posted(buf_cstr(body));
		if (A.post_status != 201) {
			rc = status(conn, (unsigned)A.post_status,
				    "certificatesigningrequests is forbidden: User "
				    "\\\"system:anonymous\\\" cannot create");
		} else {
			char *obj = object_json_locked(decided_locked());
			rc = answer(conn, 201, obj);
			free(obj);
		}
	} else if (!strcmp(method, "GET") && !strcmp(url, CSR_PATH) &&
		   MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "watch")) {
		A.watches++;
		free(A.watch_field_selector);
		A.watch_field_selector = dup_header(conn, MHD_GET_ARGUMENT_KIND, "fieldSelector");
		free(A.watch_rv);
		A.watch_rv = dup_header(conn, MHD_GET_ARGUMENT_KIND, "resourceVersion");
		if (A.watch_refused) {
			rc = status(conn, 405, "watch is not supported here");
		} else {
			struct stream *s = calloc(1, sizeof *s);
			struct MHD_Response *r = MHD_create_response_from_callback(
			    MHD_SIZE_UNKNOWN, 4096, watch_reader, s, free);
			MHD_add_response_header(r, "Content-Type", "application/json");
			rc = MHD_queue_response(conn, 200, r);
			MHD_destroy_response(r);
		}
	} else if (!strcmp(method, "GET") && !strcmp(url, CSR_PATH "/" CSR_NAME)) {
		A.gets++;
		if (A.outcome == O_DELETE && decided_locked()) {
			rc = status(conn, 404, "not found");
		} else {
			char *obj = object_json_locked(decided_locked());
			rc = answer(conn, 200, obj);
			free(obj);
		}
	} else {
		rc = status(conn, 404, "no such path");
	}
	pthread_cond_broadcast(&A.cond);
	pthread_mutex_unlock(&A.lock);
	return rc;
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
		      enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)conn;
	(void)toe;
	struct buf *b = *con_cls;
	if (b) {
		buf_free(b);
		free(b);
	}
	*con_cls = NULL;
}

/* Start the fake; with tls, serving server_pair (cert+key in one PEM) and
 * asking for client certificates of the test CA. */
static void api_start(const char *server_pair)
{
	memset(&A, 0, sizeof A);
	pthread_mutex_init(&A.lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&A.cond, &ca);
	pthread_condattr_destroy(&ca);
	A.post_status = 201;
	A.decide_after_ms = 300;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION;
	if (server_pair) {
		A.d = MHD_start_daemon(
		    flags | MHD_USE_TLS, 0, NULL, NULL, handler, NULL, MHD_OPTION_NOTIFY_COMPLETED,
		    completed, NULL, MHD_OPTION_HTTPS_MEM_CERT, server_pair,
		    MHD_OPTION_HTTPS_MEM_KEY, server_pair, MHD_OPTION_HTTPS_MEM_TRUST,
		    test_ca_pem(g_ca), MHD_OPTION_END);
	} else {
		A.d =
		    MHD_start_daemon(flags, 0, NULL, NULL, handler, NULL,
				     MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_END);
	}
	assert_non_null(A.d);
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(A.d, MHD_DAEMON_INFO_BIND_PORT);
	assert_non_null(di);
	A.port = di->port;
}

static void api_stop(void)
{
	if (!A.d)
		return;
	pthread_mutex_lock(&A.lock);
	A.shutdown = true;
	pthread_cond_broadcast(&A.cond);
	pthread_mutex_unlock(&A.lock);
	MHD_stop_daemon(A.d);
	A.d = NULL;
	free(A.post_body);
	free(A.authorization);
	free(A.user_agent);
	free(A.content_type);
	free(A.watch_field_selector);
	free(A.watch_rv);
	free(A.peer_cn);
	free(A.cert_pem);
	pthread_cond_destroy(&A.cond);
	pthread_mutex_destroy(&A.lock);
}

static unsigned locked(const unsigned *field)
{
	pthread_mutex_lock(&A.lock);
	unsigned v = *field;
	pthread_mutex_unlock(&A.lock);
	return v;
}

/* ---- the client side ---- */

static int bearer_setup(void *ctx, CURL *h, struct curl_slist **headers, char **err)
{
	(void)h;
	(void)err;
	struct curl_slist *n = curl_slist_append(*headers, (const char *)ctx);
	if (!n)
		return -1;
	*headers = n;
	return 0;
}

static char g_url[64];

static struct csrclient *client(unsigned timeout_ms, long expiration, const atomic_bool *stop)
{
	snprintf(g_url, sizeof g_url, "http://127.0.0.1:%d/", A.port);
	struct csrclient_config cfg = {
	    .server = g_url,
	    .setup = bearer_setup,
	    .setup_ctx = "Authorization: Bearer abcdef.0123456789abcdef",
	    .signer_name = CSR_SIGNER_CLIENT,
	    .usages = csr_usages_client,
	    .n_usages = 3,
	    .expiration_seconds = expiration,
	    .timeout_ms = timeout_ms,
	    .poll_ms = 100,
	    .stop = stop,
	    .user_agent = "yurthub/test",
	};
	char *err = NULL;
	struct csrclient *c = csrclient_new(&cfg, &err);
	if (!c)
		fail_msg("csrclient_new: %s", err);
	return c;
}

static char *new_csr(const char *cn)
{
	static const char *const orgs[] = {"openyurt:yurthub", "system:nodes", NULL};
	struct x509_template t;
	test_template(&t, cn, orgs, NULL, NULL);
	struct buf csr = BUF_INIT, key = BUF_INIT;
	assert_int_equal(x509_make_csr(&t, &csr, &key, NULL), 0);
	buf_free(&key);
	x509_template_free(&t);
	return buf_steal(&csr);
}

static int issue(struct csrclient *c, char **cert, char **err)
{
	char *csr = new_csr("system:node:edge-1");
	*cert = NULL;
	*err = NULL;
	int rc = csrclient_issue(c, csr, cert, err);
	free(csr);
	return rc;
}

static void expect_failure(struct csrclient *c, const char *want)
{
	char *cert, *err;
	assert_int_equal(issue(c, &cert, &err), -1);
	assert_null(cert);
	assert_non_null(err);
	if (!strstr(err, want))
		fail_msg("error \"%s\" does not say \"%s\"", err, want);
	free(err);
}

static void expect_cert_for(const char *cert, const char *cn)
{
	struct x509_info info;
	char *err = NULL;
	if (x509_parse_pem(cert, strlen(cert), &info, &err) < 0)
		fail_msg("%s", err);
	assert_string_equal(info.cn, cn);
	x509_info_free(&info);
}

/* ---- tests ---- */

static void test_issued_through_watch(void **state)
{
	(void)state;
	api_start(NULL);
	struct csrclient *c = client(10000, 0, NULL);
	char *csr = new_csr("system:node:edge-1"), *cert = NULL, *err = NULL;
	long long t0 = mono_ms();
	assert_int_equal(csrclient_issue(c, csr, &cert, &err), 0);
	assert_null(err);
	assert_true(mono_ms() - t0 >= 300);
	assert_string_equal(cert, A.cert_pem);
	expect_cert_for(cert, "system:node:edge-1");

	/* the request, field by field */
	json_t *j = json_loads(A.post_body, JSON_REJECT_DUPLICATES, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "apiVersion")),
			    "certificates.k8s.io/v1");
	assert_string_equal(json_string_value(json_object_get(j, "kind")),
			    "CertificateSigningRequest");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(j, "metadata"), "generateName")),
	    "csr-");
	json_t *spec = json_object_get(j, "spec");
	assert_string_equal(json_string_value(json_object_get(spec, "signerName")),
			    "kubernetes.io/kube-apiserver-client");
	json_t *u = json_object_get(spec, "usages");
	assert_int_equal(json_array_size(u), 3);
	assert_string_equal(json_string_value(json_array_get(u, 0)), "digital signature");
	assert_string_equal(json_string_value(json_array_get(u, 1)), "key encipherment");
	assert_string_equal(json_string_value(json_array_get(u, 2)), "client auth");
	assert_null(json_object_get(spec, "expirationSeconds"));
	const char *req = json_string_value(json_object_get(spec, "request"));
	struct buf pem = BUF_INIT;
	assert_int_equal(base64_decode(req, strlen(req), &pem), 0);
	assert_string_equal(pem.data, csr);
	buf_free(&pem);
	json_decref(j);
	assert_string_equal(A.content_type, "application/json");
	assert_string_equal(A.authorization, "Bearer abcdef.0123456789abcdef");
	assert_string_equal(A.user_agent, "yurthub/test");
	/* one watch, for that object, from the POST's resourceVersion */
	assert_int_equal(A.watches, 1);
	assert_string_equal(A.watch_field_selector, "metadata.name=" CSR_NAME);
	assert_string_equal(A.watch_rv, "100");
	assert_int_equal(A.gets, 0);
	free(cert);
	free(csr);
	csrclient_free(c);
	api_stop();
}

static void test_expiration_seconds(void **state)
{
	(void)state;
	api_start(NULL);
	A.issue_in_post = true;
	struct csrclient *c = client(10000, 3600, NULL);
	char *cert, *err;
	assert_int_equal(issue(c, &cert, &err), 0);
	json_t *j = json_loads(A.post_body, 0, NULL);
	assert_int_equal(
	    json_integer_value(json_object_get(json_object_get(j, "spec"), "expirationSeconds")),
	    3600);
	json_decref(j);
	/* issued in the answer to the POST: nothing more asked */
	assert_int_equal(A.watches + A.gets, 0);
	free(cert);
	csrclient_free(c);
	api_stop();
}

static void test_polling_when_watch_refused(void **state)
{
	(void)state;
	api_start(NULL);
	A.watch_refused = true;
	A.decide_after_ms = 500;
	struct csrclient *c = client(10000, 0, NULL);
	char *cert, *err;
	assert_int_equal(issue(c, &cert, &err), 0);
	expect_cert_for(cert, "system:node:edge-1");
	/* one refused watch, then GETs 100 ms apart */
	assert_int_equal(A.watches, 1);
	assert_true(A.gets >= 3);
	assert_true(A.gets <= 8);
	free(cert);
	csrclient_free(c);
	api_stop();
}

static void test_denied_and_failed(void **state)
{
	(void)state;
	api_start(NULL);
	struct csrclient *c = client(10000, 0, NULL);
	A.outcome = O_DENY;
	expect_failure(c, "denied (reason: NotMyNode, message: node edge-9 is not in any pool)");
	A.outcome = O_FAIL;
	expect_failure(c, "failed (reason: SignerValidationFailure, message: bad usages)");
	A.outcome = O_BAD_CERT;
	expect_failure(c, "not a base64 PEM certificate");
	/* the same through polling */
	A.watch_refused = true;
	A.outcome = O_DENY;
	expect_failure(c, "denied (reason: NotMyNode");
	csrclient_free(c);
	api_stop();
}

static void test_deleted(void **state)
{
	(void)state;
	api_start(NULL);
	A.outcome = O_DELETE;
	struct csrclient *c = client(10000, 0, NULL);
	expect_failure(c, "csr-x7k2p was deleted"); /* a DELETED event */
	A.watch_refused = true;
	expect_failure(c, "csr-x7k2p was deleted"); /* a 404 */
	csrclient_free(c);
	api_stop();
}

static void test_post_refused(void **state)
{
	(void)state;
	api_start(NULL);
	A.post_status = 403;
	struct csrclient *c = client(10000, 0, NULL);
	expect_failure(c, "submitting the certificate signing request: HTTP 403: "
			  "certificatesigningrequests is forbidden");
	assert_int_equal(A.watches + A.gets, 0);
	csrclient_free(c);
	api_stop();
}

static void test_no_server(void **state)
{
	(void)state;
	api_start(NULL);
	int port = A.port;
	api_stop();
	A.port = port; /* nobody listens there now */
	struct csrclient *c = client(5000, 0, NULL);
	long long t0 = mono_ms();
	expect_failure(c, "submitting the certificate signing request: http://127.0.0.1:");
	assert_true(mono_ms() - t0 < 2000);
	csrclient_free(c);
}

static void test_timeout(void **state)
{
	(void)state;
	api_start(NULL);
	A.outcome = O_NEVER;
	struct csrclient *c = client(700, 0, NULL);
	long long t0 = mono_ms();
	expect_failure(c, "no certificate for the signing request csr-x7k2p within 700 ms");
	long long took = mono_ms() - t0;
	assert_true(took >= 700);
	assert_true(took < 1500);
	csrclient_free(c);
	api_stop();
}

struct bg {
	struct csrclient *c;
	int rc;
	char *cert, *err;
	long long ended;
};

static void *bg_issue(void *arg)
{
	struct bg *b = arg;
	b->rc = issue(b->c, &b->cert, &b->err);
	b->ended = mono_ms();
	return NULL;
}

static bool wait_watching(unsigned ms)
{
	long long end = mono_ms() + ms;
	pthread_mutex_lock(&A.lock);
	while (A.watches == 0 && mono_ms() < end) {
		long long until = mono_ms() + 50;
		struct timespec ts = {(time_t)(until / 1000), (long)(until % 1000) * 1000000L};
		pthread_cond_timedwait(&A.cond, &A.lock, &ts);
	}
	bool ok = A.watches > 0;
	pthread_mutex_unlock(&A.lock);
	return ok;
}

/* Cancel (or the stop flag) ends a wait at once, and later issues too. */
static void stop_while_waiting(bool use_flag)
{
	api_start(NULL);
	A.outcome = O_NEVER;
	static atomic_bool flag;
	atomic_store(&flag, false);
	struct bg b = {client(60000, 0, &flag), 0, NULL, NULL, 0};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, bg_issue, &b), 0);
	assert_true(wait_watching(5000));
	long long t0 = mono_ms();
	if (use_flag)
		atomic_store(&flag, true);
	else
		csrclient_cancel(b.c);
	pthread_join(t, NULL);
	if (b.ended - t0 > 400)
		fail_msg("took %lld ms to see the %s", b.ended - t0, use_flag ? "flag" : "cancel");
	assert_int_equal(b.rc, -1);
	assert_non_null(strstr(b.err, "stopped"));
	free(b.err);
	/* sticky: the next returns at once, without a request */
	unsigned posts = locked(&A.posts);
	expect_failure(b.c, "stopped");
	assert_int_equal(locked(&A.posts), posts);
	csrclient_free(b.c);
	api_stop();
}

static void test_cancel_while_waiting(void **state)
{
	(void)state;
	stop_while_waiting(false);
}

static void test_stop_flag_while_waiting(void **state)
{
	(void)state;
	stop_while_waiting(true);
}

/* certmgr with this client as its issuer. */
static int tmpl_cb(void *ctx, struct x509_template *out, char **err)
{
	(void)ctx;
	(void)err;
	static const char *const orgs[] = {"openyurt:yurthub", "system:nodes", NULL};
	test_template(out, "system:node:edge-1", orgs, NULL, NULL);
	return 0;
}

static void test_with_certmgr(void **state)
{
	(void)state;
	char dir[256];
	assert_int_equal(test_mkdtemp(dir, sizeof dir, "csrclient"), 0);
	api_start(NULL);
	A.decide_after_ms = 100;
	struct csrclient *c = client(10000, 0, NULL);
	struct certmgr_config cfg = {
	    .name = "client",
	    .dir = dir,
	    .prefix = "yurthub",
	    .get_template = tmpl_cb,
	    .issuer = csrclient_issuer(c),
	    .template_poll_ms = 100,
	    .backoff_first_ms = 100,
	    .backoff_max_ms = 400,
	};
	char *err = NULL;
	struct certmgr *m = certmgr_start(&cfg, &err);
	assert_non_null(m);
	long long end = mono_ms() + 10000;
	while (!certmgr_ready(m) && mono_ms() < end) {
		pthread_mutex_lock(&A.lock);
		long long until = mono_ms() + 50;
		struct timespec ts = {(time_t)(until / 1000), (long)(until % 1000) * 1000000L};
		pthread_cond_timedwait(&A.cond, &A.lock, &ts);
		pthread_mutex_unlock(&A.lock);
	}
	assert_true(certmgr_ready(m));
	assert_int_equal(locked(&A.posts), 1);
	certmgr_stop(m);
	csrclient_free(c);
	api_stop();
	test_rm_rf(dir);
}

static int tls_setup(void *ctx, CURL *h, struct curl_slist **headers, char **err)
{
	(void)headers;
	(void)err;
	const char *pair = ctx; /* the hub's yurthub-current.pem: cert then key */
	struct curl_blob ca = {(void *)test_ca_pem(g_ca), strlen(test_ca_pem(g_ca)),
			       CURL_BLOB_COPY};
	struct curl_blob cp = {(void *)pair, strlen(pair), CURL_BLOB_COPY};
	if (curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &ca) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM") != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cp) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM") != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &cp) != CURLE_OK)
		return -1;
	return 0;
}

/* TLS both ways: the server (GnuTLS, in libmicrohttpd) takes its cert and
 * key from one combined PEM made here; the client (libcurl over OpenSSL)
 * presents a combined PEM made here, SEC1 key and all, as the hub will
 * present its yurthub-current.pem; the server verifies it against the CA. */
static void test_tls_with_our_keys(void **state)
{
	(void)state;
	static const char *const orgs[] = {"system:nodes", NULL};
	static const char *const ips[] = {"127.0.0.1", NULL};
	struct x509_template st, ct;
	test_template(&st, "apiserver", NULL, NULL, ips);
	test_template(&ct, "system:node:edge-1", orgs, NULL, NULL);
	time_t now = time(NULL);
	char *server_pair = test_ca_issue_pair(g_ca, &st, now - 60, now + 3600);
	char *client_pair = test_ca_issue_pair(g_ca, &ct, now - 60, now + 3600);
	assert_non_null(server_pair);
	assert_non_null(client_pair);
	assert_non_null(strstr(client_pair, "-----BEGIN EC PRIVATE KEY-----"));
	api_start(server_pair);
	A.issue_in_post = true;
	snprintf(g_url, sizeof g_url, "https://127.0.0.1:%d", A.port);
	struct csrclient_config cfg = {
	    .server = g_url,
	    .setup = tls_setup,
	    .setup_ctx = client_pair,
	    .signer_name = CSR_SIGNER_SERVING,
	    .usages = csr_usages_serving,
	    .n_usages = 3,
	};
	char *err = NULL, *cert = NULL;
	struct csrclient *c = csrclient_new(&cfg, &err);
	assert_non_null(c);
	if (issue(c, &cert, &err) != 0)
		fail_msg("over TLS: %s", err);
	assert_non_null(A.peer_cn); /* a client certificate came and verified */
	assert_string_equal(A.peer_cn, "system:node:edge-1");
	json_t *j = json_loads(A.post_body, 0, NULL);
	json_t *spec = json_object_get(j, "spec");
	assert_string_equal(json_string_value(json_object_get(spec, "signerName")),
			    "kubernetes.io/kubelet-serving");
	assert_string_equal(json_string_value(json_array_get(json_object_get(spec, "usages"), 2)),
			    "server auth");
	json_decref(j);
	free(cert);
	csrclient_free(c);
	api_stop();
	free(server_pair);
	free(client_pair);
	x509_template_free(&st);
	x509_template_free(&ct);
}

static void test_new_needs_config(void **state)
{
	(void)state;
	struct csrclient_config cfg = {.server = "http://x", .signer_name = CSR_SIGNER_CLIENT};
	char *err = NULL;
	assert_null(csrclient_new(&cfg, &err));
	assert_non_null(err);
	free(err);
}

/* A failed assertion leaves the fake running; the next test must not
 * start over it. */
static int api_teardown(void **state)
{
	(void)state;
	api_stop();
	return 0;
}

static int setup(void **state)
{
	(void)state;
	if (getenv("YURTHUB_TEST_VERBOSE"))
		log_set_verbosity(4);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	g_ca = test_ca_new("test-ca");
	return g_ca ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	test_ca_free(g_ca);
	curl_global_cleanup();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_issued_through_watch, api_teardown),
	    cmocka_unit_test_teardown(test_expiration_seconds, api_teardown),
	    cmocka_unit_test_teardown(test_polling_when_watch_refused, api_teardown),
	    cmocka_unit_test_teardown(test_denied_and_failed, api_teardown),
	    cmocka_unit_test_teardown(test_deleted, api_teardown),
	    cmocka_unit_test_teardown(test_post_refused, api_teardown),
	    cmocka_unit_test_teardown(test_no_server, api_teardown),
	    cmocka_unit_test_teardown(test_timeout, api_teardown),
	    cmocka_unit_test_teardown(test_cancel_while_waiting, api_teardown),
	    cmocka_unit_test_teardown(test_stop_flag_while_waiting, api_teardown),
	    cmocka_unit_test_teardown(test_with_certmgr, api_teardown),
	    cmocka_unit_test_teardown(test_tls_with_our_keys, api_teardown),
	    cmocka_unit_test_teardown(test_new_needs_config, api_teardown),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
