/*
 * server.c - libmicrohttpd daemons and request routing, see server.h.
 *
 * A request's life: the URI-log callback makes its struct request (so the
 * raw URI, query and all, is kept byte for byte for the upstream), the
 * access handler collects the body, then routes: the hub's endpoints on the
 * serve port; on the proxy ports the cloud when a backend is healthy, the
 * local answers otherwise.  The completion callback counts and frees it.
 */
#include "server/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hub.h"
#include "proxy/local.h"
#include "proxy/remote.h"
#include "server/respond.h"
#include "util/fsutil.h"
#include "util/log.h"

#define BODY_MAX	  (16u << 20) /* larger request bodies get 413 */
#define CONNECTIONS_MAX	  4096
#define STACK_SIZE	  (256u << 10)
#define IDLE_TIMEOUT_S	  600	      /* a kept-alive connection with no request */
#define CONN_MEMORY_LIMIT (64u << 10) /* headers of one request */

enum port_kind { PORT_PROXY, PORT_PROXY_TLS, PORT_HUB };

struct daemon_ctx {
	struct hub *hub;
	enum port_kind kind;
	struct MHD_Daemon *d;
};

struct server {
	struct daemon_ctx proxy, proxy_tls, hubd;
	struct buf tls_cert, tls_key, client_ca;
};

int server_client_fd(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? ci->connect_fd : -1;
}

const char *server_header(struct MHD_Connection *c, const char *name)
{
	return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* ---- request lifecycle ---- */

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	(void)c;
	struct daemon_ctx *dc = cls;
	struct request *req = calloc(1, sizeof *req);
	if (!req)
		return NULL;
	req->hub = dc->hub;
	req->raw_uri = strdup(uri ? uri : "/");
	clock_gettime(CLOCK_MONOTONIC, &req->t0);
	if (dc->kind != PORT_HUB) /* proxied requests only: not the scrape itself */
		atomic_fetch_add(&dc->hub->metrics.in_flight, 1);
	return req;
}

static void request_free(struct request *req)
{
	request_info_free(&req->ri);
	free(req->ri_err);
	free(req->raw_uri);
	free(req->component);
	buf_free(&req->body);
	free(req);
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
	struct hub *h = dc->hub;
	if (dc->kind != PORT_HUB)
		atomic_fetch_sub(&h->metrics.in_flight, 1);
	if (req->started && dc->kind != PORT_HUB) {
		const char *verb = req->ri_ok ? request_info_verb(&req->ri) : "unknown";
		metrics_request(&h->metrics, req->component, verb, (int)req->status);
		struct timespec t1;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double s = (double)(t1.tv_sec - req->t0.tv_sec) +
			   (double)(t1.tv_nsec - req->t0.tv_nsec) / 1e9;
		if (!req->is_watch)
			metrics_observe(&h->metrics.request_seconds, s);
		/* the URL only: headers (credentials) and bodies (Secrets) never */
		log_v(4, "request: %s %s %s: %u in %.3f s", req->component ? req->component : "-",
		      verb, req->raw_uri ? req->raw_uri : "-", req->status, s);
	}
	request_free(req);
	*req_cls = NULL;
}

static enum MHD_Result answer(struct request *req, struct MHD_Connection *c, unsigned int code,
			      struct MHD_Response *r)
{
	req->status = code;
	return respond_queue(c, code, r);
}

static enum MHD_Result answer_status(struct request *req, struct MHD_Connection *c, int code,
				     const char *message)
{
	return answer(req, c, (unsigned int)code, respond_status(code, NULL, message, NULL));
}

/* ---- the hub's own endpoints ---- */

static enum MHD_Result hub_endpoint(struct hub *h, struct request *req, struct MHD_Connection *c)
{
	const char *path = req->raw_uri;
	size_t n = strcspn(path, "?");
	if (n == 11 && !strncmp(path, "/v1/healthz", n)) {
		char *ok = strdup("OK");
		return answer(req, c, 200, ok ? respond_bytes(ok, 2, "text/plain") : NULL);
	}
	if (n == 10 && !strncmp(path, "/v1/readyz", n)) {
		bool ready = atomic_load(&h->ready);
		char *body = strdup(ready ? "OK" : "the store is not ready");
		return answer(req, c, ready ? 200 : 503,
			      body ? respond_bytes(body, strlen(body), "text/plain") : NULL);
	}
	if (n == 8 && !strncmp(path, "/metrics", n)) {
		struct buf b = BUF_INIT;
		if (metrics_render(&h->metrics, &b) < 0) {
			buf_free(&b);
			return MHD_NO;
		}
		size_t len = b.len;
		return answer(
		    req, c, 200,
		    respond_bytes(buf_steal(&b), len, "text/plain; version=0.0.4; charset=utf-8"));
	}
	return answer(req, c, 404, respond_bytes(strdup("404 page not found\n"), 19, "text/plain"));
}

/* ---- the secure port's client check ---- */

static bool client_cert_ok(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	if (!ci || !ci->tls_session)
		return false;
	gnutls_session_t s = (gnutls_session_t)ci->tls_session;
	unsigned int list_size = 0;
	if (!gnutls_certificate_get_peers(s, &list_size) || list_size == 0)
		return false;
	unsigned int status = 0;
	return gnutls_certificate_verify_peers2(s, &status) == GNUTLS_E_SUCCESS && status == 0;
}

/* ---- proxying ---- */

static enum MHD_Result route_proxy(struct hub *h, struct request *req, struct MHD_Connection *c)
{
	if (!req->ri_ok)
		return answer_status(req, c, 400, req->ri_err ? req->ri_err : "bad request");
	if (server_header(c, "Upgrade"))
		return answer_status(req, c, 501,
				     "protocol upgrades (exec, attach, port-forward) are not "
				     "proxied by this hub");
	req->is_watch = req->ri.verb == VERB_WATCH;
	health_wait_first(h->health);
	struct MHD_Response *resp = NULL;
	unsigned int status = 0;
	enum remote_outcome out = remote_proxy(h, c, req, &resp, &status);
	if (out == REMOTE_OK)
		return answer(req, c, status, resp);
	if (out == REMOTE_ERROR)
		return answer_status(req, c, 500, "the hub could not forward the request");
	if (out == REMOTE_BAD_ANSWER)
		return answer_status(req, c, 502,
				     "the API server's answer could not be passed on (malformed, "
				     "or headers over 32 KiB)");
	/* The cloud cannot be reached: answer from the store. */
	return local_answer(h, c, req);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_size, void **req_cls)
{
	(void)url;
	(void)version;
	struct daemon_ctx *dc = cls;
	struct hub *h = dc->hub;
	struct request *req = *req_cls;
	if (!req)
		return MHD_NO;
	if (!req->started) {
		req->started = true;
		req->ri_ok = request_info_parse(method, req->raw_uri, &req->ri, &req->ri_err) == 0;
		req->component = cache_component(server_header(c, MHD_HTTP_HEADER_USER_AGENT));
		if (req->ri_ok && req->component)
			req->cache_mode = cache_mode_for(&h->agents, req->component, &req->ri);
		return MHD_YES; /* the body, if any, comes in the next calls */
	}
	if (*upload_size) {
		if (req->body.len + *upload_size > BODY_MAX)
			req->body_too_large = true;
		else if (buf_append(&req->body, upload_data, *upload_size) < 0)
			return MHD_NO;
		*upload_size = 0;
		return MHD_YES;
	}
	if (dc->kind == PORT_HUB)
		return hub_endpoint(h, req, c);
	if (dc->kind == PORT_PROXY_TLS && !client_cert_ok(c))
		return answer_status(
		    req, c, 401, "a client certificate signed by the hub's client CA is required");
	if (req->body_too_large)
		return answer_status(req, c, 413, "request body too large");
	return route_proxy(h, req, c);
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

static int start_daemon(struct daemon_ctx *dc, struct hub *h, enum port_kind kind, const char *host,
			int port, struct server *s)
{
	dc->hub = h;
	dc->kind = kind;
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
	struct MHD_OptionItem opts[16];
	int n = 0;
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, NULL};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, &ss};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_uri, dc};
	opts[n++] =
	    (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, dc};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, CONNECTIONS_MAX, NULL};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_STACK_SIZE, STACK_SIZE, NULL};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, IDLE_TIMEOUT_S, NULL};
	opts[n++] =
	    (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT, CONN_MEMORY_LIMIT, NULL};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, NULL};
	if (kind == PORT_PROXY_TLS) {
		flags |= MHD_USE_TLS;
		opts[n++] =
		    (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)s->tls_cert.data};
		opts[n++] =
		    (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)s->tls_key.data};
		opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0,
						    (void *)s->client_ca.data};
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

static int load_tls(struct server *s, const struct config *cfg)
{
	int rc = fs_read_operator_file(cfg->tls_cert_file, &s->tls_cert, 1 << 20);
	if (rc == 0)
		rc = fs_read_operator_file(cfg->tls_private_key_file, &s->tls_key, 1 << 20);
	if (rc == 0)
		rc = fs_read_operator_file(cfg->client_ca_file, &s->client_ca, 1 << 20);
	if (rc < 0)
		log_error("cannot read the secure port's certificates: %s", strerror(-rc));
	return rc;
}

static bool is_loopback(const char *host)
{
	return !strncmp(host, "127.", 4) || !strcmp(host, "::1");
}

int server_start(struct hub *h, struct server **out)
{
	const struct config *cfg = h->cfg;
	struct server *s = calloc(1, sizeof *s);
	if (!s)
		return -1;
	*out = s;
	if (start_daemon(&s->hubd, h, PORT_HUB, cfg->bind_address, cfg->serve_port, s) < 0)
		return -1;
	if (!is_loopback(cfg->bind_proxy_address))
		log_warn("the plain HTTP proxy listens on %s, not on loopback: any host that "
			 "reaches it can use the node's identity",
			 cfg->bind_proxy_address);
	if (cfg->proxy_port &&
	    start_daemon(&s->proxy, h, PORT_PROXY, cfg->bind_proxy_address, cfg->proxy_port, s) < 0)
		return -1;
	if (cfg->proxy_secure_port) {
		if (!*cfg->tls_cert_file || !*cfg->client_ca_file) {
			log_warn("secure port %d off: it needs --tls-cert-file, "
				 "--tls-private-key-file and --client-ca-file",
				 cfg->proxy_secure_port);
		} else if (load_tls(s, cfg) < 0 ||
			   start_daemon(&s->proxy_tls, h, PORT_PROXY_TLS, cfg->bind_proxy_address,
					cfg->proxy_secure_port, s) < 0) {
			return -1;
		}
	}
	return 0;
}

void server_stop(struct server *s)
{
	if (!s)
		return;
	struct daemon_ctx *all[] = {&s->proxy, &s->proxy_tls, &s->hubd};
	/* Stop accepting first, everywhere; then wait for the connections. */
	for (int i = 0; i < 3; i++)
		if (all[i]->d)
			MHD_quiesce_daemon(all[i]->d);
	for (int i = 0; i < 3; i++)
		if (all[i]->d)
			MHD_stop_daemon(all[i]->d);
	buf_free(&s->tls_cert);
	buf_free(&s->tls_key);
	buf_free(&s->client_ca);
	free(s);
}
