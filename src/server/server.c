/*
 * server.c - the libmicrohttpd adapter, see server.h.
 *
 * A request's life: the URI-log callback makes its struct request (so the
 * raw URI, query and all, is kept byte for byte for the upstream), the
 * access handler reads it, collects the body and calls the port's handler;
 * the completion callback counts and frees it.
 */
#include "server/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "http/limits.h"
#include "http/response.h"
#include "server/client_ca.h"
#include "server/tls.h"
#include "util/fsutil.h"
#include "util/log.h"

#define STACK_SIZE     (256u << 10)
#define IDLE_TIMEOUT_S 600 /* a kept-alive connection with no request */

enum port_kind { PORT_PROXY, PORT_PROXY_TLS, PORT_HUB, PORT_PEER };

struct daemon_ctx {
	const struct server_routes *routes;
	enum port_kind kind;
	struct MHD_Daemon *d;
	int quiesced_fd; /* the listening socket once quiesced: ours to close */
};

/* the serve port, each proxy port on --bind-proxy-address and on the
 * dummy interface's address, and a leader's multiplexer port */
#define MAX_DAEMONS 6

struct server {
	struct server_routes routes;
	/* n and the array grow when the secure port starts late (its
	 * certificate came after the start); lock guards both and stopping */
	pthread_mutex_t lock;
	struct daemon_ctx daemons[MAX_DAEMONS];
	size_t n; /* started, or being started */
	bool stopping, secure_started, peer_started;
	atomic_bool secure_serving;  /* secure_started and listening */
	struct client_ca *client_ca; /* NULL: no secure port */
	char *peer_addr;	     /* the multiplexer port, once asked for */
	int peer_port;
	char *dummy_addr;
	const struct config *cfg;
};

/* ---- request lifecycle ---- */

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct daemon_ctx *dc = cls;
	struct request *req = request_new(c, uri);
	if (req && dc->kind != PORT_HUB) /* proxied requests only: not the scrape itself */
		atomic_fetch_add(&dc->routes->metrics->in_flight, 1);
	return req;
}

static void count_finished(struct metrics *m, struct request *req)
{
	const char *verb = req->ri_ok ? request_info_verb(&req->ri) : "unknown";
	metrics_request(m, req->component, verb, (int)req->status);
	double s = request_seconds(req);
	if (!req->is_watch)
		metrics_observe(&m->request_seconds, s);
	/* the URL only: headers (credentials) and bodies (Secrets) never */
	log_v(4, "request: %s %s %s: %u in %.3f s", req->component ? req->component : "-", verb,
	      req->raw_uri, req->status, s);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
			 enum MHD_RequestTerminationCode toe)
{
	(void)c;
	(void)toe;
	struct daemon_ctx *dc = cls;
	struct request *req = *req_cls;
	if (!req)
		return;
	if (dc->kind != PORT_HUB) {
		if (!(req->started && req->hub_own))
			atomic_fetch_sub(&dc->routes->metrics->in_flight, 1);
		if (req->started)
			count_finished(dc->routes->metrics, req);
	}
	gate_release(dc->routes->gate, req);
	request_free(req);
	*req_cls = NULL;
}

static enum MHD_Result result(int rc)
{
	return rc == 0 ? MHD_YES : MHD_NO;
}

/* ---- the secure port's client check ---- */

static gnutls_session_t tls_session(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	return ci ? (gnutls_session_t)ci->tls_session : NULL;
}

/* A client certificate of the client CA that may be used to authenticate
 * a TLS client: as kube-apiserver (Go's x509 with ExtKeyUsageClientAuth),
 * a certificate of the chain that names extended key usages must name
 * "TLS WWW client" or "any"; one that names none is not restricted.
 * GnuTLS's key purpose check is that rule (a leaf or CA with serverAuth
 * only fails it). */
static bool client_cert_ok(struct MHD_Connection *c)
{
	gnutls_session_t s = tls_session(c);
	unsigned int list_size = 0;
	if (!s || !gnutls_certificate_get_peers(s, &list_size) || list_size == 0)
		return false;
	gnutls_typed_vdata_st purpose = {.type = GNUTLS_DT_KEY_PURPOSE_OID,
					 .data = (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT};
	unsigned int status = 0;
	return gnutls_certificate_verify_peers(s, &purpose, 1, &status) == GNUTLS_E_SUCCESS &&
	       status == 0;
}

#define NODE_PREFIX   "system:node:"
#define NODE_NAME_MAX 253 /* a DNS subdomain, as a Node's name */

/* Whether the client's verified certificate is a node's: CN
 * system:node:<name> and O system:nodes, as kube-apiserver's Node
 * authorizer knows nodes; the name then goes to node.  A longer CN is no
 * node's. */
static bool client_is_node(struct MHD_Connection *c, char node[NODE_NAME_MAX + 1])
{
	if (!client_cert_ok(c))
		return false;
	unsigned int n = 0;
	const gnutls_datum_t *chain = gnutls_certificate_get_peers(tls_session(c), &n);
	gnutls_x509_crt_t crt;
	if (!chain || !n || gnutls_x509_crt_init(&crt) < 0)
		return false;
	bool is_node = false;
	char v[sizeof NODE_PREFIX + NODE_NAME_MAX];
	size_t len = sizeof v;
	if (gnutls_x509_crt_import(crt, &chain[0], GNUTLS_X509_FMT_DER) >= 0 &&
	    gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, v, &len) >= 0 &&
	    !strncmp(v, NODE_PREFIX, strlen(NODE_PREFIX)) && v[strlen(NODE_PREFIX)]) {
		memcpy(node, v + strlen(NODE_PREFIX), strlen(v + strlen(NODE_PREFIX)) + 1);
		for (unsigned int i = 0; !is_node; i++) {
			len = sizeof v;
			if (gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_ORGANIZATION_NAME, i,
							  0, v, &len) < 0)
				break;
			is_node = !strcmp(v, "system:nodes");
		}
	}
	gnutls_x509_crt_deinit(crt);
	return is_node;
}

/* A pod's service-account token: the request goes to the cloud without
 * the hub's certificate, so the API server judges the pod, not the hub. */
static bool bearer(const struct request *req)
{
	const char *a = request_header(req, "Authorization");
	return a && !strncasecmp(a, "Bearer ", 7) && a[7];
}

/* ---- the access handler ---- */

/* What is refused as soon as the headers are in, before any of the body is
 * read (libmicrohttpd then closes the connection instead of reading it):
 * 1 when nothing is, else the answer's result. */
static int refuse_early(struct daemon_ctx *dc, struct request *req)
{
	/* before the client is judged, as the API server parses before it
	 * authenticates; on every port, so that no path passes one on */
	if (req->header_err)
		return reply_status(req, 400, NULL, req->header_err, NULL);
	if (dc->kind == PORT_HUB)
		return 1;
	if (dc->kind == PORT_PEER) {
		char node[NODE_NAME_MAX + 1];
		if (!client_is_node(req->conn, node))
			return reply_status(req, 401, NULL,
					    "a node's client certificate (CN system:node:<name>, O "
					    "system:nodes, usable as a TLS client) signed by the "
					    "cluster CA is required",
					    NULL);
		req->auth = REQ_AUTH_NODE;
		int rc = dc->routes->peer_admit
			     ? dc->routes->peer_admit(dc->routes->proxy_ctx, req, node)
			     : 1;
		if (rc != 1)
			return rc;
	}
	if (dc->kind == PORT_PROXY_TLS) {
		if (client_cert_ok(req->conn))
			req->auth = REQ_AUTH_CERT;
		else if (bearer(req))
			req->auth = REQ_AUTH_BEARER;
		else
			return reply_status(
			    req, 401, NULL,
			    "a client certificate signed by the hub's client CA and usable "
			    "as a TLS client, or a bearer token, is required",
			    NULL);
	}
	return gate_admit(dc->routes->gate, req);
}

/* One piece of the body: kept when it fits the limits, dropped (and the
 * request refused once the body is in) when it does not.  0 or -1. */
static int take_body(struct daemon_ctx *dc, struct request *req, const char *data, size_t n)
{
	if (!gate_take_body(dc->routes->gate, req, n))
		return 0;
	/* all at once when announced: a doubling buffer would hold up to twice
	 * what the budget counts */
	long long announced = request_announced_length(req);
	if (!req->body.cap && announced > 0 && buf_reserve(&req->body, (size_t)announced) < 0)
		return -1;
	return buf_append(&req->body, data, n);
}

static int dispatch(struct daemon_ctx *dc, struct request *req)
{
	const struct server_routes *rt = dc->routes;
	if (req->body_too_large || req->body_no_room)
		return gate_refuse_body(rt->gate, req);
	if (dc->kind == PORT_HUB)
		return rt->hub(rt->hub_ctx, req);
	if (dc->kind == PORT_PEER)
		return rt->peer(rt->proxy_ctx, req);
	return rt->proxy(rt->proxy_ctx, req);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_size, void **req_cls)
{
	(void)c;
	(void)url;
	(void)version;
	struct daemon_ctx *dc = cls;
	struct request *req = *req_cls;
	if (!req)
		return MHD_NO;
	if (!req->started) { /* the body, if any, comes in the next calls */
		if (request_begin(req, method) < 0)
			return MHD_NO;
		if (req->hub_own && dc->kind != PORT_HUB) /* the gauges are the clients' */
			atomic_fetch_sub(&dc->routes->metrics->in_flight, 1);
		int rc = refuse_early(dc, req);
		return rc == 1 ? MHD_YES : result(rc);
	}
	if (*upload_size) {
		if (take_body(dc, req, upload_data, *upload_size) < 0)
			return MHD_NO;
		*upload_size = 0;
		return MHD_YES;
	}
	return result(dispatch(dc, req));
}

/* ---- daemons ---- */

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	struct buf b = BUF_INIT;
	if (buf_vprintf(&b, fmt, ap) == 0)
		log_v(2, "http: %s", buf_cstr(&b));
	buf_free(&b);
}

static int bind_addr(const char *host, int port, struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof *ss);
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		*len = sizeof *in4;
		return 0;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*len = sizeof *in6;
		return 0;
	}
	return -1;
}

/* Each TLS connection gets the client CA current when it starts, before
 * its handshake; it holds that CA until it closes (client_ca.h). */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct client_ca *ca = cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		gnutls_session_t s = tls_session(c);
		*socket_ctx = s ? client_ca_attach(ca, s) : NULL;
	} else {
		client_ca_release(*socket_ctx);
		*socket_ctx = NULL;
	}
}

static int start_daemon(struct server *s, enum port_kind kind, const char *host, int port)
{
	if (s->n == MAX_DAEMONS)
		return -1; /* cannot be: server_start() starts at most that many */
	struct daemon_ctx *dc = &s->daemons[s->n++];
	dc->routes = &s->routes;
	dc->kind = kind;
	dc->quiesced_fd = -1;
	struct sockaddr_storage ss;
	socklen_t sl;
	if (bind_addr(host, port, &ss, &sl) < 0) {
		log_error("invalid listen address %s (an IP address is needed)", host);
		return -1;
	}
	unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			     MHD_USE_POLL | MHD_USE_ERROR_LOG | MHD_USE_SUPPRESS_DATE_NO_CLOCK;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	if (kind == PORT_PROXY || kind == PORT_PROXY_TLS)
		flags |= MHD_ALLOW_UPGRADE; /* exec, attach, port-forward */
	struct MHD_OptionItem opts[16];
	int n = 0;
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, NULL};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, &ss};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_uri, dc};
	opts[n++] =
	    (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, dc};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, LIMIT_CONNECTIONS, NULL};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_STACK_SIZE, STACK_SIZE, NULL};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, IDLE_TIMEOUT_S, NULL};
	opts[n++] =
	    (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT, LIMIT_CONN_MEMORY, NULL};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, NULL};
	if (kind == PORT_PROXY_TLS || kind == PORT_PEER) {
		/* the certificate is asked for at each handshake: rotations
		 * apply to the next connection, with no restart */
		flags |= MHD_USE_TLS;
		/* a pointer option: libmicrohttpd reads it from ptr_value */
		opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK, 0,
						    (void *)(intptr_t)tls_serving_retrieve};
		opts[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION,
						    (intptr_t)on_connection, s->client_ca};
	}
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
	dc->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, dc, MHD_OPTION_ARRAY, opts,
				 MHD_OPTION_END);
	if (!dc->d) {
		log_error("cannot listen on %s:%d: %s", host, port, strerror(errno));
		return -1;
	}
	return 0;
}

static bool is_loopback(const char *host)
{
	return !strncmp(host, "127.", 4) || !strcmp(host, "::1");
}

/* Whether a socket bound to bind takes the connections to addr too: the
 * same address, or the wildcard of its family. */
static bool covers(const char *bind, const char *addr)
{
	bool v6 = strchr(addr, ':') != NULL;
	return !strcmp(bind, addr) || !strcmp(bind, v6 ? "::" : "0.0.0.0");
}

/* A proxy port on --bind-proxy-address, and on the dummy address if any. */
static int start_proxy_port(struct server *s, enum port_kind kind, const struct config *cfg,
			    int port, const char *dummy_addr)
{
	if (start_daemon(s, kind, cfg->bind_proxy_address, port) < 0)
		return -1;
	if (dummy_addr && !covers(cfg->bind_proxy_address, dummy_addr) &&
	    start_daemon(s, kind, dummy_addr, port) < 0)
		return -1;
	return 0;
}

/* Start the multiplexer port asked for, if it can now; under s->lock. */
static void try_peer_locked(struct server *s)
{
	if (s->stopping || s->peer_started || !s->peer_addr || !s->client_ca ||
	    !tls_serving_ready() || client_ca_check(s->client_ca) < 0)
		return;
	s->peer_started = true; /* once, even if it fails: logged */
	if (start_daemon(s, PORT_PEER, s->peer_addr, s->peer_port) == 0)
		log_msg('I', 0, "multiplexer port %s:%d serving the pool's hubs", s->peer_addr,
			s->peer_port);
}

int server_enable_peer(struct server *s, const char *addr, int port)
{
	if (!s || !port)
		return 0;
	pthread_mutex_lock(&s->lock);
	if (!s->peer_addr && !(s->peer_addr = strdup(addr))) {
		pthread_mutex_unlock(&s->lock);
		return -1;
	}
	s->peer_port = port;
	try_peer_locked(s);
	if (!s->peer_started)
		log_warn("multiplexer port %d: waiting for a serving certificate and the cluster "
			 "CA",
			 port);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int server_enable_secure(struct server *s)
{
	if (!s)
		return 0;
	pthread_mutex_lock(&s->lock);
	int rc = 0;
	if (!s->stopping && !s->secure_started && s->cfg->proxy_secure_port && s->client_ca &&
	    tls_serving_ready()) {
		rc = client_ca_check(s->client_ca);
		if (rc == -ENOENT) {
			rc = 0; /* bootstrap has not found the cluster CA yet */
		} else if (rc == 0) {
			s->secure_started = true;
			rc = start_proxy_port(s, PORT_PROXY_TLS, s->cfg, s->cfg->proxy_secure_port,
					      s->dummy_addr);
			atomic_store(&s->secure_serving, rc == 0);
			if (rc == 0)
				log_msg('I', 0, "secure port %d serving",
					s->cfg->proxy_secure_port);
		}
	} else if (s->client_ca && (s->secure_started || s->peer_started))
		(void)client_ca_check(s->client_ca); /* the cluster CA may have changed */
	try_peer_locked(s);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

bool server_secure_serving(struct server *s)
{
	return s && atomic_load(&s->secure_serving);
}

int server_start(const struct config *cfg, const struct server_routes *routes,
		 const char *dummy_addr, const char *client_ca_file, struct server **out)
{
	struct server *s = calloc(1, sizeof *s);
	*out = s;
	if (!s)
		return -1;
	pthread_mutex_init(&s->lock, NULL);
	s->cfg = cfg;
	s->routes = *routes;
	if ((dummy_addr && !(s->dummy_addr = strdup(dummy_addr))) ||
	    (client_ca_file && !(s->client_ca = client_ca_new(client_ca_file))))
		return -1;
	if (!is_loopback(cfg->bind_proxy_address))
		log_warn("the plain HTTP proxy listens on %s, not on loopback: any host that "
			 "reaches it can use the node's identity",
			 cfg->bind_proxy_address);
	if (cfg->proxy_port &&
	    start_proxy_port(s, PORT_PROXY, cfg, cfg->proxy_port, dummy_addr) < 0)
		return -1;
	/* the serve port last: once /v1/readyz answers, the proxy port must
	 * already accept, or a client told "ready" is refused */
	if (start_daemon(s, PORT_HUB, cfg->bind_address, cfg->serve_port) < 0)
		return -1;
	if (!cfg->proxy_secure_port)
		return 0;
	if (!client_ca_file) {
		log_warn("secure port %d off: it needs --tls-cert-file, "
			 "--tls-private-key-file and --client-ca-file, or a bootstrap mode "
			 "(--join-token, --bootstrap-file, "
			 "--bootstrap-mode=kubeletcertificate)",
			 cfg->proxy_secure_port);
		return 0;
	}
	if (server_enable_secure(s) < 0)
		return -1;
	if (!s->secure_started)
		log_msg('I', 0, "secure port %d: waiting for its certificate and the cluster CA",
			cfg->proxy_secure_port);
	return 0;
}

void server_quiesce(struct server *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->stopping = true; /* no secure port starts from here on */
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < s->n; i++) {
		struct daemon_ctx *dc = &s->daemons[i];
		if (dc->d && dc->quiesced_fd < 0)
			dc->quiesced_fd = MHD_quiesce_daemon(dc->d);
	}
}

void server_stop(struct server *s)
{
	if (!s)
		return;
	/* Stop accepting first, everywhere; then wait for the connections. */
	server_quiesce(s);
	for (size_t i = 0; i < s->n; i++) {
		struct daemon_ctx *dc = &s->daemons[i];
		if (dc->d)
			MHD_stop_daemon(dc->d);
		/* only now: a connection thread may use it until the stop */
		if (dc->quiesced_fd >= 0 && close(dc->quiesced_fd) < 0)
			log_v(1, "closing a listening socket: %s", strerror(errno));
	}
	client_ca_free(s->client_ca); /* no connection holds it: all closed */
	free(s->peer_addr);
	free(s->dummy_addr);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
