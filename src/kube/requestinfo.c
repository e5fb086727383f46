/*
 * requestinfo.c - what an API request asks for, read from its method and raw
 * URI the way kube-apiserver's RequestInfoFactory.NewRequestInfo
 * (k8s.io/apiserver/pkg/endpoints/request/requestinfo.go) reads it, plus the
 * list/watch options the hub needs to answer from its cache.
 *
 * Kubernetes rules followed exactly:
 *  - the decoded path is trimmed of '/' at both ends and split on '/'; empty
 *    segments inside the path are kept (strings.Split), so "//api//v1" is not
 *    "/api/v1";
 *  - fewer than 3 segments, or a first segment other than "api"/"apis", or
 *    fewer than 4 segments under "apis" is a non-resource request;
 *  - "proxy" and "watch" right after the version are special verbs (an error
 *    when nothing follows); "proxy" takes no subresource.  VERB_PROXY is only
 *    ever this legacy form: ".../pods/x/proxy" is verb get/create/... with
 *    subresource "proxy", as in Kubernetes;
 *  - namespaces/<ns>/<rest> is namespaced unless <rest> starts with "status"
 *    or "finalize" (then it is the namespace's own subresource);
 *  - get without a name becomes list or watch; only then does a fieldSelector
 *    requiring metadata.name=X give the name (so not for the legacy watch
 *    form); delete without a name becomes deletecollection.
 *
 * Deliberate differences (stricter than the API server, as our header asks):
 * boolean parameters use strconv.ParseBool and fail on other values (the API
 * server takes anything but "0"/"false" as true); limit and timeoutSeconds
 * must be non-negative integers, and are clamped (see requestinfo.h); every percent-escape must be
 * valid and no value may decode to a NUL; the query is split on '&' and ';'.  A resource request
 * with a method that is not GET/HEAD/POST/PUT/PATCH/DELETE gets VERB_OTHER and the lower-cased
 * method (Kubernetes leaves the verb empty).
 */
#include "kube/requestinfo.h"

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/selector.h"

/* ---- errors ---- */

static int fail(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(char **err, const char *fmt, ...)
{
	if (!err)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(err, fmt, ap) < 0)
		*err = NULL;
	va_end(ap);
	return -1;
}

static int oom(char **err)
{
	return fail(err, "out of memory");
}

/* ---- percent-decoding (Go's url.PathUnescape / url.QueryUnescape) ---- */

enum decode_rc { DEC_OK, DEC_BAD_ESCAPE, DEC_NUL, DEC_NOMEM };

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decode s[0..n) into a new string; plus_space turns '+' into ' ' (query
 * components).  On DEC_BAD_ESCAPE *bad is the offset of the bad '%'. */
static enum decode_rc pct_decode(const char *s, size_t n, bool plus_space, char **out, size_t *bad)
{
	char *d = malloc(n + 1);
	if (!d)
		return DEC_NOMEM;
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '%') {
			int h = i + 1 < n ? hex_value(s[i + 1]) : -1;
			int l = i + 2 < n ? hex_value(s[i + 2]) : -1;
			if (h < 0 || l < 0) {
				free(d);
				*bad = i;
				return DEC_BAD_ESCAPE;
			}
			c = (char)(h << 4 | l);
			i += 2;
			if (c == '\0') {
				free(d);
				return DEC_NUL;
			}
		} else if (c == '+' && plus_space) {
			c = ' ';
		}
		d[j++] = c;
	}
	d[j] = '\0';
	*out = d;
	return DEC_OK;
}

/* pct_decode with the error turned into a message about `what`, followed
 * by `name` in quotes when name is not NULL. */
static int decode(const char *s, size_t n, bool plus_space, const char *what, const char *name,
		  char **out, char **err)
{
	size_t bad = 0;
	const char *q = name ? " \"" : "", *nm = name ? name : "", *eq = name ? "\"" : "";
	switch (pct_decode(s, n, plus_space, out, &bad)) {
	case DEC_OK:
		return 0;
	case DEC_BAD_ESCAPE: {
		int show = n - bad < 3 ? (int)(n - bad) : 3;
		return fail(err, "invalid URL escape \"%.*s\" in %s%s%s%s", show, s + bad, what, q,
			    nm, eq);
	}
	case DEC_NUL:
		return fail(err, "encoded NUL byte (%%00) in %s%s%s%s", what, q, nm, eq);
	default:
		return oom(err);
	}
}

/* ---- query parameters ---- */

enum qparam {
	Q_LABEL,
	Q_FIELD,
	Q_RV,
	Q_RV_MATCH,
	Q_CONTINUE,
	Q_LIMIT,
	Q_TIMEOUT,
	Q_BOOKMARKS,
	Q_SEND_INITIAL,
	Q_WATCH,
	Q_COUNT,
};

static const char *const qparam_names[Q_COUNT] = {
    [Q_LABEL] = "labelSelector",
    [Q_FIELD] = "fieldSelector",
    [Q_RV] = "resourceVersion",
    [Q_RV_MATCH] = "resourceVersionMatch",
    [Q_CONTINUE] = "continue",
    [Q_LIMIT] = "limit",
    [Q_TIMEOUT] = "timeoutSeconds",
    [Q_BOOKMARKS] = "allowWatchBookmarks",
    [Q_SEND_INITIAL] = "sendInitialEvents",
    [Q_WATCH] = "watch",
};

/* The first value of each parameter we read (Go's url.Values.Get); NULL when
 * the parameter is absent. */
struct query {
	char *v[Q_COUNT];
};

static void query_free(struct query *q)
{
	for (int i = 0; i < Q_COUNT; i++)
		free(q->v[i]);
}

static int qparam_lookup(const char *key)
{
	for (int i = 0; i < Q_COUNT; i++)
		if (!strcmp(key, qparam_names[i]))
			return i;
	return -1;
}

/* One "key=value" (or "key") pair. */
static int query_add_pair(struct query *q, const char *s, size_t n, char **err)
{
	const char *eq = memchr(s, '=', n);
	size_t klen = eq ? (size_t)(eq - s) : n;
	char *key = NULL, *value = NULL;
	if (decode(s, klen, true, "a query parameter name", NULL, &key, err) < 0)
		return -1;
	int idx = qparam_lookup(key);
	free(key);
	const char *v = eq ? eq + 1 : s + n;
	if (decode(v, (size_t)(s + n - v), true, idx >= 0 ? "query parameter" : "a query value",
		   idx >= 0 ? qparam_names[idx] : NULL, &value, err) < 0)
		return -1;
	if (idx >= 0 && !q->v[idx])
		q->v[idx] = value;
	else
		free(value);
	return 0;
}

/* url.ParseQuery: pairs separated by '&' (and ';', as Go did before 1.17). */
static int query_parse(const char *s, struct query *q, char **err)
{
	while (*s) {
		size_t n = strcspn(s, "&;");
		if (n > 0 && query_add_pair(q, s, n, err) < 0)
			return -1;
		s += n;
		if (*s)
			s++;
	}
	return 0;
}

int request_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
	static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};
	if (!s)
		return -1;
	for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
		if (!strcmp(s, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcmp(s, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -1;
}

/* strconv.ParseInt(s, 10, 64), then >= 0. */
static int parse_nonneg(const char *s, long *out)
{
	bool neg = false;
	if (*s == '+' || *s == '-')
		neg = *s++ == '-';
	if (!*s)
		return -1;
	unsigned long long v = 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		unsigned d = (unsigned)(*s - '0');
		if (v > ((unsigned long long)INT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	if (neg && v != 0)
		return -1;
	if (v > LONG_MAX)
		return -1;
	*out = (long)v;
	return 0;
}

/* "query parameter "p": "<value>" is not <what>", the value cut short and
 * its control characters shown as '?' so that the message stays one line. */
static int bad_value(const struct query *q, enum qparam p, const char *what, char **err)
{
	char *shown = strndup(q->v[p], 64);
	if (!shown)
		return oom(err);
	for (char *c = shown; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	fail(err, "query parameter \"%s\": \"%s\" is not %s", qparam_names[p], shown, what);
	free(shown);
	return -1;
}

static int get_bool(const struct query *q, enum qparam p, bool *out, char **err)
{
	if (q->v[p] && request_parse_bool(q->v[p], out) < 0)
		return bad_value(q, p, "a boolean", err);
	return 0;
}

/* A non-negative integer, clamped to max (see REQUEST_TIMEOUT_MAX). */
static int get_nonneg(const struct query *q, enum qparam p, long max, long *out, char **err)
{
	if (q->v[p] && parse_nonneg(q->v[p], out) < 0)
		return bad_value(q, p, "a non-negative integer", err);
	if (*out > max)
		*out = max;
	return 0;
}

/* Move the string parameters into ri and convert the others. */
static int apply_query(struct request_info *ri, struct query *q, bool *watch, char **err)
{
	if (get_nonneg(q, Q_LIMIT, REQUEST_LIMIT_MAX, &ri->limit, err) < 0 ||
	    get_nonneg(q, Q_TIMEOUT, REQUEST_TIMEOUT_MAX, &ri->timeout_seconds, err) < 0 ||
	    get_bool(q, Q_BOOKMARKS, &ri->allow_watch_bookmarks, err) < 0 ||
	    get_bool(q, Q_SEND_INITIAL, &ri->send_initial_events, err) < 0 ||
	    get_bool(q, Q_WATCH, watch, err) < 0)
		return -1;
	if (ri->timeout_seconds == 0)
		ri->timeout_seconds = -1; /* kube-apiserver: 0 is "not set" */
	ri->send_initial_events_set = q->v[Q_SEND_INITIAL] != NULL;
	char **dst[] = {
	    [Q_LABEL] = &ri->label_selector,	[Q_FIELD] = &ri->field_selector,
	    [Q_RV] = &ri->resource_version,	[Q_RV_MATCH] = &ri->resource_version_match,
	    [Q_CONTINUE] = &ri->continue_token,
	};
	for (int i = 0; i < (int)(sizeof dst / sizeof dst[0]); i++) {
		*dst[i] = q->v[i];
		q->v[i] = NULL;
	}
	return 0;
}

/* ---- fieldSelector metadata.name (fields.ParseSelector + RequiresExactMatch) ---- */

/* fields.UnescapeValue: only \\ \, \= are escapes; a bare ',' or '=' is not
 * allowed.  Writes the value to out (room for n + 1) when out is not NULL. */
static bool field_unescape(const char *s, size_t n, char *out)
{
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == ',' || c == '=')
			return false;
		if (c == '\\') {
			if (++i == n || (s[i] != '\\' && s[i] != ',' && s[i] != '='))
				return false;
			c = s[i];
		}
		if (out)
			out[j++] = c;
	}
	if (out)
		out[j] = '\0';
	return true;
}

/* fields.splitTerm: the first position where "!=", "==" or "=" starts. */
static bool field_split_term(const char *t, size_t n, size_t *op_at, size_t *op_len)
{
	for (size_t i = 0; i < n; i++) {
		if (t[i] == '!' && i + 1 < n && t[i + 1] == '=') {
			*op_at = i, *op_len = 2;
			return true;
		}
		if (t[i] == '=') {
			*op_at = i;
			*op_len = i + 1 < n && t[i + 1] == '=' ? 2 : 1;
			return true;
		}
	}
	return false;
}

/* Go orders the terms (sort.Strings) before RequiresExactMatch looks at
 * them, so among several metadata.name terms the smallest text wins. */
static bool term_less(const char *a, size_t an, const char *b, size_t bn)
{
	int c = memcmp(a, b, an < bn ? an : bn);
	return c < 0 || (c == 0 && an < bn);
}

struct name_term {
	const char *term, *value;
	size_t term_len, value_len;
};

/* One term of the selector: false when the whole selector is invalid. */
static bool field_check_term(const char *t, size_t n, struct name_term *best)
{
	static const char key[] = "metadata.name";
	size_t op_at, op_len;
	if (n == 0)
		return true;
	if (!field_split_term(t, n, &op_at, &op_len))
		return false;
	const char *v = t + op_at + op_len;
	size_t vn = n - op_at - op_len;
	if (!field_unescape(v, vn, NULL))
		return false;
	bool equality = !(op_len == 2 && t[op_at] == '!');
	if (equality && op_at == sizeof key - 1 && !memcmp(t, key, op_at) &&
	    (!best->term || term_less(t, n, best->term, best->term_len)))
		*best = (struct name_term){t, v, n, vn};
	return true;
}

/* path.IsValidPathSegmentName. */
static bool valid_path_segment(const char *s)
{
	return strcmp(s, ".") && strcmp(s, "..") && !strpbrk(s, "/%");
}

/* The name a field selector pins down: 1 and *name (malloc'ed), 0 for none
 * (including an invalid selector, as the API server then ignores it), -1 on
 * ENOMEM. */
static int field_selector_name(const char *sel, char **name)
{
	struct name_term best = {0};
	size_t start = 0, i = 0;
	bool slash = false;
	for (;; i++) {
		if (sel[i] && (slash || (sel[i] != '\\' && sel[i] != ','))) {
			slash = false;
			continue;
		}
		if (sel[i] == '\\') {
			slash = true;
			continue;
		}
		if (!field_check_term(sel + start, i - start, &best))
			return 0;
		if (!sel[i])
			break;
		start = i + 1;
	}
	if (!best.term)
		return 0;
	char *v = malloc(best.value_len + 1);
	if (!v)
		return -1;
	field_unescape(best.value, best.value_len, v);
	if (!*v || !valid_path_segment(v)) {
		free(v);
		return 0;
	}
	*name = v;
	return 1;
}

/* The API server takes the name from the field selector only when all the
 * list options decode, which includes both selectors parsing. */
static int name_from_selectors(struct request_info *ri, char **err)
{
	if (!ri->field_selector || !*ri->field_selector)
		return 0;
	if (ri->label_selector && *ri->label_selector) {
		struct selector *ls = NULL;
		char *lerr = NULL;
		int rc = selector_parse(SELECTOR_LABEL, ri->label_selector, &ls, &lerr);
		selector_free(ls);
		free(lerr);
		if (rc < 0)
			return 0;
	}
	char *name = NULL;
	int rc = field_selector_name(ri->field_selector, &name);
	if (rc < 0)
		return oom(err);
	if (rc > 0) {
		free(ri->name);
		ri->name = name;
	}
	return 0;
}

/* ---- the path ---- */

/* Segments of the decoded path: strings.Split(strings.Trim(path, "/"), "/"). */
struct parts {
	char *copy;
	char **v;
	size_t n;
};

static int split_path(const char *path, struct parts *p)
{
	while (*path == '/')
		path++;
	size_t len = strlen(path);
	while (len > 0 && path[len - 1] == '/')
		len--;
	if (len == 0)
		return 0;
	p->copy = strndup(path, len);
	size_t n = 1;
	for (size_t i = 0; i < len; i++)
		n += path[i] == '/';
	p->v = calloc(n, sizeof *p->v);
	if (!p->copy || !p->v)
		return -1;
	char *s = p->copy;
	for (size_t i = 0; i < n; i++) {
		p->v[i] = s;
		s = strchr(s, '/');
		if (s)
			*s++ = '\0';
	}
	p->n = n;
	return 0;
}

static void parts_free(struct parts *p)
{
	free(p->copy);
	free(p->v);
}

/* The fields NewRequestInfo fills from the path, pointing into the parts. */
struct path_info {
	bool is_resource;
	enum req_verb verb;
	const char *prefix, *group, *version, *ns, *resource, *name, *sub;
};

static enum req_verb verb_of_method(const char *method)
{
	static const struct {
		const char *method;
		enum req_verb verb;
	} map[] = {
	    {"POST", VERB_CREATE}, {"GET", VERB_GET},	  {"HEAD", VERB_GET},
	    {"PUT", VERB_UPDATE},  {"PATCH", VERB_PATCH}, {"DELETE", VERB_DELETE},
	};
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		if (!strcmp(method, map[i].method))
			return map[i].verb;
	return VERB_OTHER;
}

/* The parts after namespaces/<ns>, or resource/name/subresource. */
static void resolve_parts(struct path_info *pi, char **v, size_t n)
{
	if (!strcmp(v[0], "namespaces") && n > 1) {
		pi->ns = v[1];
		if (n > 2 && strcmp(v[2], "status") && strcmp(v[2], "finalize"))
			v += 2, n -= 2;
	}
	if (n >= 3 && pi->verb != VERB_PROXY)
		pi->sub = v[2];
	if (n >= 2)
		pi->name = v[1];
	pi->resource = v[0];
}

static int resolve_path(const struct parts *p, const char *method, struct path_info *pi, char **err)
{
	char **v = p->v;
	size_t n = p->n;
	pi->verb = VERB_OTHER;
	if (n < 3 || (strcmp(v[0], "api") && strcmp(v[0], "apis")))
		return 0;
	pi->prefix = v[0];
	v++, n--;
	if (!strcmp(pi->prefix, "apis")) {
		if (n < 3)
			return 0;
		pi->group = v[0];
		v++, n--;
	}
	pi->is_resource = true;
	pi->version = v[0];
	v++, n--;
	if (!strcmp(v[0], "proxy") || !strcmp(v[0], "watch")) {
		if (n < 2)
			return fail(err, "unable to determine kind and namespace from URL path");
		pi->verb = !strcmp(v[0], "proxy") ? VERB_PROXY : VERB_WATCH;
		v++, n--;
	} else {
		pi->verb = verb_of_method(method);
	}
	resolve_parts(pi, v, n);
	return 0;
}

/* ---- putting it together ---- */

static int dup_field(char **dst, const char *s)
{
	if (*dst)
		return 0;
	*dst = strdup(s ? s : "");
	return *dst ? 0 : -1;
}

static int copy_path_info(struct request_info *ri, const struct path_info *pi)
{
	ri->is_resource = pi->is_resource;
	ri->verb = pi->verb;
	return dup_field(&ri->api_prefix, pi->prefix) | dup_field(&ri->api_group, pi->group) |
	       dup_field(&ri->api_version, pi->version) | dup_field(&ri->namespace, pi->ns) |
	       dup_field(&ri->resource, pi->resource) | dup_field(&ri->name, pi->name) |
	       dup_field(&ri->subresource, pi->sub);
}

/* Every string field "" when nothing set it. */
static int fill_empty(struct request_info *ri)
{
	return dup_field(&ri->label_selector, NULL) | dup_field(&ri->field_selector, NULL) |
	       dup_field(&ri->resource_version, NULL) |
	       dup_field(&ri->resource_version_match, NULL) | dup_field(&ri->continue_token, NULL) |
	       dup_field(&ri->as_table_hint, NULL);
}

/* "GET\0get": the method as received, then its lower-case form, which
 * request_info_verb returns for VERB_OTHER. */
static char *method_with_lower(const char *method)
{
	size_t n = strlen(method);
	char *m = malloc(2 * n + 2);
	if (!m)
		return NULL;
	memcpy(m, method, n + 1);
	for (size_t i = 0; i <= n; i++) {
		char c = method[i];
		m[n + 1 + i] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
	}
	return m;
}

static int check_uri(const char *method, const char *uri, char **err)
{
	if (!method || !*method)
		return fail(err, "empty request method");
	if (!uri || uri[0] != '/')
		return fail(err, "request URI must be a path starting with '/'");
	for (const unsigned char *c = (const unsigned char *)uri; *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			return fail(err, "invalid control character 0x%02x in request URI", *c);
	return 0;
}

/* list/watch for a get without a name; deletecollection for such a delete. */
static int refine_verb(struct request_info *ri, bool watch, char **err)
{
	if (!*ri->name && ri->verb == VERB_GET) {
		ri->verb = watch ? VERB_WATCH : VERB_LIST;
		if (name_from_selectors(ri, err) < 0)
			return -1;
	}
	if (!*ri->name && ri->verb == VERB_DELETE)
		ri->verb = VERB_DELETECOLLECTION;
	return 0;
}

static int parse_into(const char *method, const char *raw_uri, struct request_info *ri, char **err)
{
	if (check_uri(method, raw_uri, err) < 0)
		return -1;
	ri->method = method_with_lower(method);
	if (!ri->method)
		return oom(err);
	const char *q = strchr(raw_uri, '?');
	size_t plen = q ? (size_t)(q - raw_uri) : strlen(raw_uri);
	if (decode(raw_uri, plen, false, "the path", NULL, &ri->path, err) < 0)
		return -1;
	struct query query = {0};
	bool watch = false;
	int rc = q ? query_parse(q + 1, &query, err) : 0;
	if (rc == 0)
		rc = apply_query(ri, &query, &watch, err);
	query_free(&query);
	if (rc < 0)
		return -1;
	struct parts parts = {0};
	struct path_info pi = {0};
	if (split_path(ri->path, &parts) < 0) {
		parts_free(&parts);
		return oom(err);
	}
	rc = resolve_path(&parts, method, &pi, err);
	if (rc == 0 && copy_path_info(ri, &pi) < 0)
		rc = oom(err);
	parts_free(&parts);
	if (rc < 0)
		return -1;
	if (ri->is_resource && refine_verb(ri, watch, err) < 0)
		return -1;
	return fill_empty(ri) < 0 ? oom(err) : 0;
}

int request_info_parse(const char *method, const char *raw_uri, struct request_info *out,
		       char **err)
{
	memset(out, 0, sizeof *out);
	out->timeout_seconds = -1;
	if (err)
		*err = NULL;
	if (parse_into(method, raw_uri, out, err) < 0) {
		request_info_free(out);
		return -1;
	}
	return 0;
}

void request_info_free(struct request_info *ri)
{
	char **fields[] = {
	    &ri->method,
	    &ri->path,
	    &ri->api_prefix,
	    &ri->api_group,
	    &ri->api_version,
	    &ri->namespace,
	    &ri->resource,
	    &ri->subresource,
	    &ri->name,
	    &ri->label_selector,
	    &ri->field_selector,
	    &ri->resource_version,
	    &ri->resource_version_match,
	    &ri->continue_token,
	    &ri->as_table_hint,
	};
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
		free(*fields[i]);
	memset(ri, 0, sizeof *ri);
}

/* For VERB_OTHER this reads the lower-case copy that request_info_parse
 * stores after the method, so ri must come from request_info_parse. */
const char *request_info_verb(const struct request_info *ri)
{
	static const char *const names[] = {
	    [VERB_GET] = "get",	      [VERB_LIST] = "list",
	    [VERB_WATCH] = "watch",   [VERB_CREATE] = "create",
	    [VERB_UPDATE] = "update", [VERB_PATCH] = "patch",
	    [VERB_DELETE] = "delete", [VERB_DELETECOLLECTION] = "deletecollection",
	    [VERB_PROXY] = "proxy",
	};
	if (ri->verb >= VERB_GET && ri->verb < VERB_OTHER)
		return names[ri->verb];
	if (!ri->method)
		return "";
	return ri->method + strlen(ri->method) + 1;
}
