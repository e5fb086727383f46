/*
 * response.c - answering a request, see response.h: each answer is a
 * libmicrohttpd response queued on the request's connection.
 */
#include "http/response.h"

#include <microhttpd.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(REPLY_END == MHD_CONTENT_READER_END_OF_STREAM, "reader codes");
_Static_assert(REPLY_ABORT == MHD_CONTENT_READER_END_WITH_ERROR, "reader codes");
_Static_assert(REPLY_SIZE_UNKNOWN == MHD_SIZE_UNKNOWN, "unknown size");

struct reply {
	struct MHD_Response *r;
};

static struct reply *wrap(struct MHD_Response *r)
{
	if (!r)
		return NULL;
	struct reply *w = malloc(sizeof *w);
	if (!w) {
		MHD_destroy_response(r);
		return NULL;
	}
	w->r = r;
	return w;
}

int reply_header(struct reply *r, const char *name, const char *value)
{
	return MHD_add_response_header(r->r, name, value) == MHD_YES ? 0 : -1;
}

int reply_send(struct request *req, unsigned int code, struct reply *r)
{
	req->status = code;
	if (!r)
		return -1; /* out of memory: the adapter closes the connection */
	enum MHD_Result ok = MHD_queue_response(req->conn, code, r->r);
	MHD_destroy_response(r->r);
	free(r);
	return ok == MHD_YES ? 0 : -1;
}

struct reply *reply_buffer(char *data, size_t len, const char *content_type)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(data);
		return NULL;
	}
	struct reply *w = wrap(r);
	if (w && content_type)
		reply_header(w, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	return w;
}

int reply_bytes(struct request *req, unsigned int code, char *data, size_t len,
		const char *content_type)
{
	if (!data && len) {
		req->status = code;
		return -1;
	}
	return reply_send(req, code, reply_buffer(data, len, content_type));
}

int reply_json(struct request *req, unsigned int code, struct buf *body)
{
	size_t len = body->len;
	char *data = buf_steal(body);
	if (!data)
		data = strdup("");
	return reply_bytes(req, code, data, data ? len : 0, "application/json");
}

int reply_text(struct request *req, unsigned int code, const char *text)
{
	char *copy = strdup(text);
	return reply_bytes(req, code, copy, copy ? strlen(copy) : 0, "text/plain");
}

const char *reply_reason(int code)
{
	switch (code) {
	case 400:
		return "BadRequest";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "NotFound";
	case 405:
		return "MethodNotAllowed";
	case 406:
		return "NotAcceptable";
	case 409:
		return "Conflict";
	case 410:
		return "Expired";
	case 413:
		return "RequestEntityTooLarge";
	case 415:
		return "UnsupportedMediaType";
	case 422:
		return "Invalid";
	case 429:
		return "TooManyRequests";
	case 501:
		return "NotImplemented";
	case 503:
		return "ServiceUnavailable";
	case 504:
		return "Timeout";
	default:
		return code >= 500 ? "InternalError" : "BadRequest";
	}
}

/* s as a JSON string: escaped, and what is not UTF-8 replaced (a message
 * may quote a URL, which can hold any bytes). */
static int json_text(struct buf *b, const char *s)
{
	struct buf utf8 = BUF_INIT;
	int rc = buf_append_utf8(&utf8, s, strlen(s));
	rc = rc ? rc : buf_append_json_str(b, buf_cstr(&utf8), utf8.len);
	buf_free(&utf8);
	return rc;
}

struct reply *reply_status_new(int code, const char *reason, const char *message,
			       const char *details_json)
{
	struct buf b = BUF_INIT;
	int rc = buf_append_str(&b, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
				    "\"status\":\"Failure\",\"message\":");
	rc = rc ? rc : json_text(&b, message);
	rc = rc ? rc : buf_append_str(&b, ",\"reason\":");
	if (!reason)
		reason = reply_reason(code);
	rc = rc ? rc : json_text(&b, reason);
	if (rc == 0 && details_json)
		rc = buf_printf(&b, ",\"details\":%s", details_json);
	rc = rc ? rc : buf_printf(&b, ",\"code\":%d}\n", code);
	if (rc < 0) {
		buf_free(&b);
		return NULL;
	}
	size_t len = b.len;
	return reply_buffer(buf_steal(&b), len, "application/json");
}

int reply_status(struct request *req, int code, const char *reason, const char *message,
		 const char *details_json)
{
	return reply_send(req, (unsigned int)code,
			  reply_status_new(code, reason, message, details_json));
}

/* ---- streams ---- */

struct stream {
	reply_reader rd;
	void *cls;
	void (*free_cls)(void *);
};

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
	(void)pos;
	struct stream *s = cls;
	return s->rd(s->cls, out, max);
}

static void stream_free(void *cls)
{
	struct stream *s = cls;
	if (s->free_cls)
		s->free_cls(s->cls);
	free(s);
}

struct reply *reply_stream(uint64_t size, size_t block, reply_reader rd, void *cls,
			   void (*free_cls)(void *))
{
	struct stream *s = malloc(sizeof *s);
	if (!s) {
		if (free_cls)
			free_cls(cls);
		return NULL;
	}
	*s = (struct stream){rd, cls, free_cls};
	struct MHD_Response *r =
	    MHD_create_response_from_callback(size, block, stream_read, s, stream_free);
	if (!r) {
		stream_free(s);
		return NULL;
	}
	return wrap(r); /* on failure, destroying r ran stream_free */
}

/* ---- upgrades ---- */

/* Owned by the request until the 101 is out; then by fn. */
struct pending_upgrade {
	reply_upgraded_fn fn;
	void *cls;
	void (*free_cls)(void *);
	bool taken;
};

static void on_upgraded(void *cls, struct MHD_Connection *c, void *req_cls, const char *extra_in,
			size_t extra_in_size, MHD_socket sock,
			struct MHD_UpgradeResponseHandle *urh)
{
	(void)c;
	(void)req_cls;
	struct pending_upgrade *p = cls;
	struct upgraded *u = calloc(1, sizeof *u);
	if (u && extra_in_size && !(u->extra = malloc(extra_in_size))) {
		free(u);
		u = NULL;
	}
	if (!u) {
		/* the request's end frees p->cls: nobody took it */
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		return;
	}
	u->fd = sock;
	u->urh = urh;
	if (extra_in_size)
		memcpy(u->extra, extra_in, extra_in_size);
	u->extra_len = extra_in_size;
	p->taken = true;
	p->fn(p->cls, u);
}

struct reply *reply_upgrade(struct request *req, reply_upgraded_fn fn, void *cls,
			    void (*free_cls)(void *))
{
	struct pending_upgrade *p = calloc(1, sizeof *p);
	struct MHD_Response *r = p ? MHD_create_response_for_upgrade(on_upgraded, p) : NULL;
	if (!r) {
		free(p);
		if (free_cls)
			free_cls(cls);
		return NULL;
	}
	*p = (struct pending_upgrade){fn, cls, free_cls, false};
	reply_upgrade_drop(req); /* at most one per request */
	req->upgrade = p;
	return wrap(r);
}

void upgraded_close(struct upgraded *u)
{
	if (!u)
		return;
	MHD_upgrade_action(u->urh, MHD_UPGRADE_ACTION_CLOSE);
	free(u->extra);
	free(u);
}

void reply_upgrade_drop(struct request *req)
{
	struct pending_upgrade *p = req->upgrade;
	if (!p)
		return;
	if (!p->taken && p->free_cls)
		p->free_cls(p->cls);
	free(p);
	req->upgrade = NULL;
}
