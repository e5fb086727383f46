/* request.c - one client request, see request.h. */
#include "http/request.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cacheable.h"
#include "http/response.h"
#include "util/buf.h"

struct request *request_new(struct MHD_Connection *conn, const char *raw_uri)
{
	struct request *req = calloc(1, sizeof *req);
	if (!req)
		return NULL;
	req->conn = conn;
	req->raw_uri = strdup(raw_uri ? raw_uri : "/");
	if (!req->raw_uri) {
		free(req);
		return NULL;
	}
	clock_gettime(CLOCK_MONOTONIC, &req->t0);
	return req;
}

/* RFC 9110's tchar: what a header name is made of */
static bool token_char(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

bool request_field_value_ok(const char *v)
{
	for (; *v; v++)
		if (((unsigned char)*v < 0x20 && *v != '\t') || *v == 0x7f)
			return false;
	return true;
}

static bool name_ok(const char *name)
{
	if (!*name)
		return false;
	for (; *name; name++)
		if (!token_char((unsigned char)*name))
			return false;
	return true;
}

/* Stops at the first bad header with its reason in *ctx (NULL when out of
 * memory: the walk then stops too, and request_begin fails). */
static int check_header(void *ctx, const char *name, const char *value)
{
	char **why = ctx;
	if (!name_ok(name))
		/* the name not quoted: it may hold anything */
		*why = strdup("invalid header field name: a name is a token (letters, digits and "
			      "!#$%&'*+-.^_`|~), without a control character (CR, LF, NUL...), "
			      "space or colon");
	else if (!request_field_value_ok(value))
		*why = str_printf("invalid header field value for %s: a value may hold no control "
				  "character (CR, LF, NUL...) but tab",
				  name);
	else
		return 0;
	return -1;
}

int request_begin(struct request *req, const char *method)
{
	req->started = true;
	req->ri_ok = request_info_parse(method, req->raw_uri, &req->ri, &req->ri_err) == 0;
	req->is_watch = req->ri_ok && req->ri.verb == VERB_WATCH;
	/* once here, before anything reads a header: every path to the cloud
	 * (proxied, upgraded, the multiplexer's) copies them as they came */
	if (request_each_header(req, check_header, &req->header_err) < 0 && !req->header_err)
		return -1;
	req->component = cache_component(request_header(req, MHD_HTTP_HEADER_USER_AGENT));
	if (!req->component)
		return -1;
	/* the hub's own informers, and its multiplexer's upstream (or, on a
	 * leader's multiplexer port, another hub's) */
	req->hub_own = !strcmp(req->component, "yurthub") ||
		       !strncmp(req->component, "multiplexer-proxy-", 18);
	return 0;
}

void request_free(struct request *req)
{
	if (!req)
		return;
	reply_upgrade_drop(req);
	request_info_free(&req->ri);
	free(req->ri_err);
	free(req->header_err);
	free(req->raw_uri);
	free(req->component);
	buf_free(&req->body);
	free(req);
}

const char *request_header(const struct request *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

struct each_header {
	int (*fn)(void *ctx, const char *name, const char *value);
	void *ctx;
	bool stopped;
};

static enum MHD_Result each_header_cb(void *cls, enum MHD_ValueKind kind, const char *key,
				      const char *value)
{
	(void)kind;
	struct each_header *e = cls;
	if (e->fn(e->ctx, key, value ? value : "") == 0)
		return MHD_YES;
	e->stopped = true;
	return MHD_NO;
}

int request_each_header(const struct request *req,
			int (*fn)(void *ctx, const char *name, const char *value), void *ctx)
{
	struct each_header e = {fn, ctx, false};
	MHD_get_connection_values(req->conn, MHD_HEADER_KIND, each_header_cb, &e);
	return e.stopped ? -1 : 0;
}

int request_client_fd(const struct request *req)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? ci->connect_fd : -1;
}

bool request_from_loopback(const struct request *req)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (!ci || !ci->client_addr)
		return false;
	const struct sockaddr *sa = ci->client_addr;
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_LOOPBACK(a))
			return true;
		return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
	}
	return false;
}

double request_seconds(const struct request *req)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - req->t0.tv_sec) + (double)(t1.tv_nsec - req->t0.tv_nsec) / 1e9;
}
