/*
 * requestinfo.h - what a request to the API server asks for, read from its
 * method and raw URI exactly as kube-apiserver's RequestInfoFactory reads it.
 *
 *   /api/v1/namespaces/default/pods/web-0/status   core group, namespaced, subresource
 *   /apis/apps/v1/deployments?watch=true           group, all namespaces, watch
 *   /api/v1/watch/namespaces/default/pods          the legacy watch form
 *   /version, /healthz, /openapi/v3, /apis          non-resource requests
 *
 * Query parameters are percent-decoded; selectors are kept as the client
 * wrote them (canonicalising them is the selector module's job).
 */
#ifndef YURTHUB_KUBE_REQUESTINFO_H
#define YURTHUB_KUBE_REQUESTINFO_H

#include <stdbool.h>

enum req_verb {
	VERB_GET,
	VERB_LIST,
	VERB_WATCH,
	VERB_CREATE,
	VERB_UPDATE,
	VERB_PATCH,
	VERB_DELETE,
	VERB_DELETECOLLECTION,
	VERB_PROXY, /* the legacy /api/v1/proxy/... form only (as kube-apiserver); a
		     * .../pods/x/proxy/... request keeps its method's verb */
	VERB_OTHER, /* non-resource requests use the lower-cased method instead */
};

struct request_info {
	bool is_resource;
	enum req_verb verb;
	char *method;	  /* "GET", ... as received */
	char *path;	  /* percent-decoded path, no query */
	char *api_prefix; /* "api" or "apis" (resource requests) */
	char *api_group;  /* "" for the core group */
	char *api_version;
	char *namespace; /* "" when none */
	char *resource;
	char *subresource; /* "" when none */
	char *name;	   /* "" when none; from fieldSelector metadata.name=X for list/watch */

	/* list and watch options ("" / -1 / false when absent) */
	char *label_selector;
	char *field_selector;
	char *resource_version;
	char *resource_version_match;
	char *continue_token;
	long limit;	      /* 0 when absent; at most REQUEST_LIMIT_MAX */
	long timeout_seconds; /* -1 when absent or 0; at most REQUEST_TIMEOUT_MAX */
	bool allow_watch_bookmarks;
	bool send_initial_events_set, send_initial_events;
	char *as_table_hint; /* reserved: "" */
};

/* Integers from the URL are clamped when they are read, so that no later
 * arithmetic (a deadline of now + timeoutSeconds) can overflow, whatever a
 * client sends.  kube-apiserver takes any int64 and then multiplies it into
 * a Duration, which wraps; here a watch asking for more than a day gets a
 * day (clients re-watch when a watch ends, as they must after any server
 * restart), and a limit beyond what any list holds is no limit.  The raw
 * URI, passed to the cloud unchanged, keeps what the client sent.
 * timeoutSeconds=0 is "not set", as kube-apiserver reads it. */
#define REQUEST_TIMEOUT_MAX 86400L
#define REQUEST_LIMIT_MAX   2147483647L

/* Parse one request.  raw_uri is the request target as sent ("/api/v1/pods?
 * watch=1").  Returns 0, or -1 with *err (malloc'ed, one line) for a URI that
 * no API server would accept: bad percent-encoding, an unparsable boolean or
 * integer parameter, a NUL byte. */
int request_info_parse(const char *method, const char *raw_uri, struct request_info *out,
		       char **err);
void request_info_free(struct request_info *ri);

/* "get", "list", "watch", ... (for metrics and logs); for non-resource
 * requests the lower-cased method. */
const char *request_info_verb(const struct request_info *ri);

/* Go's strconv.ParseBool, which kube-apiserver uses for watch=, etc. */
int request_parse_bool(const char *s, bool *out);

#endif
