/* respond.c - the hub's own responses, see respond.h. */
#include "server/respond.h"

#include <stdlib.h>
#include <string.h>

struct MHD_Response *respond_bytes(char *data, size_t len, const char *content_type)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(data);
		return NULL;
	}
	if (content_type)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	return r;
}

const char *respond_reason(int code)
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

struct MHD_Response *respond_status(int code, const char *reason, const char *message,
				    const char *details_json)
{
	struct buf b = BUF_INIT;
	int rc = buf_append_str(&b, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
				    "\"status\":\"Failure\",\"message\":");
	rc = rc ? rc : buf_append_json_str(&b, message, strlen(message));
	rc = rc ? rc : buf_append_str(&b, ",\"reason\":");
	if (!reason)
		reason = respond_reason(code);
	rc = rc ? rc : buf_append_json_str(&b, reason, strlen(reason));
	if (rc == 0 && details_json)
		rc = buf_printf(&b, ",\"details\":%s", details_json);
	rc = rc ? rc : buf_printf(&b, ",\"code\":%d}\n", code);
	if (rc < 0) {
		buf_free(&b);
		return NULL;
	}
	size_t len = b.len;
	return respond_bytes(buf_steal(&b), len, "application/json");
}

enum MHD_Result respond_queue(struct MHD_Connection *c, unsigned int code, struct MHD_Response *r)
{
	if (!r)
		return MHD_NO; /* out of memory: MHD closes the connection */
	enum MHD_Result ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}
